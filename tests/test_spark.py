"""Scoring a Spark DataFrame (``hf_judge.spark``) in ``local[2]``, against the loopback judge.

One SparkSession for the module (a JVM takes seconds to start): two cores, up to three attempts per task
(``local[2,3]``: in local mode a task is retried only when the master says so), the Arrow
batches cut to a few rows (so a task scores several batches, and a failure can fall between two of them). The
executors get the judge's key through ``spark.executorEnv``, as a cluster's secrets give it; the driver does not
have it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from hf_judge import ConfigError  # noqa: E402
from hf_judge.spark import score_spark_dataframe, spark_output_schema  # noqa: E402

KEY_VAR = "HF_JUDGE_SPARK_TEST_KEY"
KEY = "sk-spark-secret-4f1c9e"
COLUMNS = {"instruction": "question", "output": "answer"}
METRICS = ["QA_Clarity", "Binary"]


@pytest.fixture(scope="module")
def spark():
    """``local[2]`` with task retries; the executors' Python is this interpreter."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.delenv(KEY_VAR, raising=False)
        active = SparkSession.getActiveSession()
        if active is not None:  # another test file's: getOrCreate would return it as it is
            active.stop()
        session = (
            SparkSession.builder.master("local[2,3]")
            .appName("hf-judge-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
            .config(f"spark.executorEnv.{KEY_VAR}", KEY)
            .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


def _rows(n: int, tag: str = "s") -> list[dict]:
    answers: list[str | None] = [f"{tag}-{i}: it is {2 * i}" for i in range(n)]
    answers[2] = None  # a null answer: every metric's error, in the row's judge_errors
    return [
        {"id": i, "question": f"{tag}-{i}: is {i} + {i} even?", "answer": answers[i], "prediction": str(i % 2 == 0)}
        for i in range(n)
    ]


def _df(spark, rows: list[dict], partitions: int = 2):
    return spark.createDataFrame(rows, "id long, question string, answer string, prediction string").repartition(
        partitions, "id"
    )


def _kw(judge, cache: Path, **extra) -> dict:
    return {
        "model": "judge",
        "base_url": judge.base_url,
        "api_key": f"env:{KEY_VAR}",
        "columns": COLUMNS,
        "cache_dir": cache,
        "retries": 0,
        "batch_size": 2,
        **extra,
    }


def _by_id(df) -> dict[int, dict]:
    return {r["id"]: r.asDict(recursive=True) for r in df.collect()}


def _prompts(n_scored: int) -> int:
    return n_scored * len(METRICS)


def test_a_dataframe_gets_the_score_columns_and_its_errors_column_with_the_schema_the_helper_gives(
    spark, judge, tmp_path
):
    judge.configure(require_key=KEY)  # the executors read env:NAME themselves: the driver has no such variable
    df = _df(spark, _rows(6))
    kw = _kw(judge, tmp_path / "cache")
    scored = score_spark_dataframe(df, METRICS, **kw)
    assert scored.schema == spark_output_schema(df, METRICS, **kw)
    assert scored.columns == [
        *df.columns,
        "QA_Clarity_reason",
        "QA_Clarity",
        "Binary",
        "Binary_verdict",
        "judge_errors",
    ]
    rows = _by_id(scored)
    assert sorted(rows) == list(range(6))
    for i, r in rows.items():
        if i == 2:
            assert (r["QA_Clarity"], r["Binary"]) == (None, None)
            assert [(e["metric"], e["kind"]) for e in r["judge_errors"]] == [
                ("QA_Clarity", "null_input"),
                ("Binary", "null_input"),
            ]
        else:
            assert 1 <= r["QA_Clarity"] <= 10 and isinstance(r["Binary"], bool) and r["judge_errors"] == []
    assert judge.stats()["requests"] == _prompts(5)
    # evaluated again (a second action): every reply from the store
    assert _by_id(scored) == rows
    assert judge.stats()["requests"] == _prompts(5)


def test_the_plan_spark_ships_to_the_executors_holds_the_key_s_name_never_the_key(spark, judge, tmp_path):
    judge.configure(require_key=KEY)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_VAR, KEY)  # the driver has it too: it still stays out of the plan
        scored = score_spark_dataframe(_df(spark, _rows(4)), METRICS, **_kw(judge, tmp_path / "cache"))
        # the function of the plan's MapInArrow node, as the JVM holds it and sends it to every Python worker
        node = scored._jdf.queryExecution().analyzed()
        command = _python_command(node)
    assert b"SparkScorer" in command and KEY_VAR.encode() in command
    assert KEY.encode() not in command
    assert len(scored.collect()) == 4


def _python_command(node) -> bytes:
    """The pickled Python function of the first MapInArrow node under ``node`` (a JVM logical plan)."""
    while node.nodeName() != "MapInArrow":
        node = node.children().apply(0)
    signed = node.functionExpr().func().command().mkString(",")  # a Scala Seq[Byte], through py4j
    return bytes(int(b) % 256 for b in signed.split(","))


@pytest.mark.parametrize("key", [KEY, KEY.encode(), "env:", "env:  "], ids=["text", "bytes", "env-none", "env-blank"])
def test_a_key_given_as_a_value_or_an_empty_env_name_is_refused_before_anything_runs(spark, judge, tmp_path, key):
    """The message points to the ways that keep the key out of Spark's settings too (it said spark.executorEnv,
    which puts the key on the JVM's command line and in the event log); bytes were a raw TypeError and `env:` an
    executor's error after the job started."""
    with pytest.raises(ConfigError) as e:
        score_spark_dataframe(_df(spark, _rows(3)), METRICS, **_kw(judge, tmp_path / "c", api_key=key))
    message = str(e.value)
    if isinstance(key, str) and key.startswith("env:"):
        assert message.startswith("api_key='env:' names no environment variable") and "env:JUDGE_KEY" in message
    else:
        assert "api_key='env:NAME'" in message and "not through Spark's settings" in message
        assert message.endswith("see docs/how-to/spark.md, 'The API key'")
    assert KEY not in message and judge.stats()["requests"] == 0


SECRET = "4e9d-secret-part"  # in every value below: no message may quote it


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"endpoint_url": f"https://minio:{SECRET}@minio:9000"}, "['endpoint_url'] holds a URL with a password"),
        (
            {"account_url": f"https://acct.blob.core.windows.net/?sv=2022-11-02&sp=rl&sig={SECRET}"},
            "['account_url'] holds a signature or key in its text",
        ),
        (
            {"client_kwargs": {"headers": {"Authorization": f"Bearer {SECRET}"}}},
            "['client_kwargs']['headers']['Authorization'] holds a credential as text",
        ),
        ({"secret": SECRET.encode()}, "['secret'] holds bytes"),
        ({"token": [SECRET, "second"]}, "['token'] holds a list"),
        ({"key": "env:", "secret": f"env:{KEY_VAR}"}, "['key'] is env: with no variable's name"),
    ],
    ids=["url-password", "sas-sig", "authorization-header", "bytes", "list", "env-no-name"],
)
def test_a_secret_among_storage_options_is_refused_by_its_value_too(spark, judge, tmp_path, options, where):
    """Only the option's name was judged, and only text: these were accepted and rode in the plan to every
    executor. Refused before anything runs, naming where the secret is (never the secret) and the fix."""
    kw = _kw(judge, "s3://bucket/cache", storage_options=options, local_cache_dir=str(tmp_path / "local"))
    with pytest.raises(ConfigError) as e:
        score_spark_dataframe(_df(spark, _rows(3)), METRICS, **kw)
    message = str(e.value)
    assert message.startswith(f"storage_options{where}") and message.count("storage_options[") == 1, message
    assert "'env:AWS_SECRET_ACCESS_KEY'" in message and "docs/how-to/spark.md" in message
    assert SECRET not in message and judge.stats()["requests"] == 0


def test_storage_options_travel_as_variable_names_and_a_secret_given_as_text_is_refused(
    spark, judge, tmp_path, s3_server
):
    """The store's credentials, like the key, never ride in the plan: given as text they are refused, naming them
    and the env:NAME form; given as env:NAME, each executor reads them and publishes to the bucket."""
    from hf_judge.store.segments import Remote, segment_names

    url = s3_server.bucket() + "/cache"
    endpoint = {"endpoint_url": s3_server.endpoint}
    literal = {"key": "AKIAEXAMPLE0001", "secret": "a-secret-as-text", "client_kwargs": endpoint}
    with pytest.raises(ConfigError, match=r"storage_options\['key'\] holds a credential as text; storage_options"
                       r"\['secret'\] holds a credential as text: a secret given as a value would travel inside "
                       r"Spark's plan.*env:AWS_"):  # fmt: skip
        score_spark_dataframe(_df(spark, _rows(4)), METRICS, **_kw(judge, url, storage_options=literal))
    assert judge.stats()["requests"] == 0
    named = {"key": f"env:{KEY_VAR}", "secret": f"env:{KEY_VAR}", "client_kwargs": endpoint}
    kw = _kw(judge, url, storage_options=named, local_cache_dir=str(tmp_path / "local"))
    scored = score_spark_dataframe(_df(spark, _rows(4)), METRICS, **kw)
    command = _python_command(scored._jdf.queryExecution().analyzed())
    assert f"env:{KEY_VAR}".encode() in command and KEY.encode() not in command
    assert len(scored.collect()) == 4 and judge.stats()["requests"] == _prompts(3)
    fs, path = Remote.of(url, {"key": "k", "secret": "s", "client_kwargs": endpoint}).filesystem()
    assert segment_names(fs, path)  # the executors, with the secret their environment holds, published


def test_a_task_that_fails_after_scoring_is_retried_from_the_store(spark, judge, tmp_path):
    """Each task's first attempt scores its rows, then dies in a later step of the same stage; Spark runs the
    task again, and the new attempt takes every reply from the store: the server sees each prompt once."""
    marks = tmp_path / "attempts"
    marks.mkdir()
    scored = score_spark_dataframe(_df(spark, _rows(8, "r")), METRICS, **_kw(judge, tmp_path / "cache"))
    out = scored.mapInArrow(_fail_first_attempt(marks, after=None), scored.schema)
    rows = _by_id(out)
    assert sorted(rows) == list(range(8))
    assert sorted(p.name for p in marks.iterdir()) == ["0-0", "0-1", "1-0", "1-1"]  # (partition, attempt)
    assert judge.stats()["requests"] == judge.stats()["prompts"] == _prompts(7)


def test_a_task_that_fails_between_its_batches_pays_only_for_the_rows_it_had_not_scored(spark, judge, tmp_path):
    """The fault is in the rows' own iterator: the first attempt scores one Arrow batch (2 rows), then its input
    fails; the retry scores the rest, and takes the first batch from the store."""
    marks = tmp_path / "attempts"
    marks.mkdir()
    df = _df(spark, _rows(8, "b"))
    failing = df.mapInArrow(_fail_first_attempt(marks, after=1), df.schema)
    rows = _by_id(score_spark_dataframe(failing, METRICS, **_kw(judge, tmp_path / "cache")))
    assert sorted(rows) == list(range(8))
    assert {p.name for p in marks.iterdir()} >= {"0-0", "1-0", "0-1", "1-1"}
    assert judge.stats()["requests"] == judge.stats()["prompts"] == _prompts(7)
    assert judge.stats()["duplicates"] == 0


def _fail_first_attempt(marks: Path, after: int | None):
    """A mapInArrow function that raises in each task's first attempt: after ``after`` batches (None: after all
    of them), marking ``<partition>-<attempt>`` in ``marks``."""

    def run(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        (marks / f"{ctx.partitionId()}-{ctx.attemptNumber()}").touch()
        held = []
        for i, b in enumerate(batches):
            if ctx.attemptNumber() == 0 and after is not None and i == after:
                raise RuntimeError("injected: the task's input failed")
            if after is None:
                held.append(b)
            else:
                yield b
        if ctx.attemptNumber() == 0 and after is None:
            raise RuntimeError("injected: a step after scoring failed")
        yield from held

    return run


def test_two_copies_of_a_task_at_once_pay_each_prompt_once(spark, judge, tmp_path):
    """What a speculative copy does: a second attempt scores the same rows while the first is still waiting on the
    judge. Spark never starts a speculative copy on the host that runs the original (TaskSetManager skips a host
    with an attempt), and local mode has one host; so the two copies here are two jobs over the same partition,
    started at once from two threads, each a task on its own core. The shared store's claims make one wait for
    the other's replies: the server sees each prompt once."""
    from concurrent.futures import ThreadPoolExecutor

    marks = tmp_path / "attempts"
    marks.mkdir()
    judge.configure(latency=0.3)
    df = spark.createDataFrame(_rows(6, "c"), "id long, question string, answer string, prediction string").coalesce(1)
    scored = score_spark_dataframe(df, METRICS, **_kw(judge, tmp_path / "cache"))
    timed = scored.mapInArrow(_timed(marks), scored.schema)
    with ThreadPoolExecutor(2) as pool:
        copies = list(pool.map(lambda _: _by_id(timed), range(2)))
    (start_a, end_a), (start_b, end_b) = sorted(tuple(map(float, p.read_text().split())) for p in marks.iterdir())
    assert start_b < end_a, "the two copies ran at the same time"
    stats = judge.stats()
    assert stats["requests"] == stats["prompts"] == _prompts(5)
    assert stats["duplicates"] == 0
    assert copies[0] == copies[1] and len(copies[0]) == 6, "both copies hold the same replies"


def _timed(marks: Path):
    """A mapInArrow function that writes when its task started and ended scoring, in ``marks``."""

    def run(batches):
        import time

        from pyspark import TaskContext

        started = time.time()
        held = list(batches)  # every row of the task scored
        ctx = TaskContext.get()
        (marks / str(ctx.taskAttemptId())).write_text(f"{started} {time.time()}")
        yield from held

    return run


@pytest.mark.parametrize(
    ("feature", "extra"),
    [
        ("workers", {"num_workers": 2}),
        ("batch", {"batch": True}),
        ("no_wait", {"no_wait": True}),
        ("if_exists", {}),
        ("fleet_panel", {"model": None, "models": "a,b", "base_urls": ["http://127.0.0.1:9/v1"]}),
    ],
)
def test_what_a_spark_step_cannot_do_is_the_capability_table_s_config_error(spark, judge, tmp_path, feature, extra):
    from hf_judge.engine.capabilities import refusal

    df = _df(spark, _rows(3))
    if feature == "if_exists":
        df = df.withColumn("QA_Clarity", df["id"])
    with pytest.raises(ConfigError) as raised:
        score_spark_dataframe(df, METRICS, **_kw(judge, tmp_path / "c", **extra))
    assert str(raised.value) == refusal("spark", feature, columns=["QA_Clarity"])
    assert judge.stats()["requests"] == 0


def test_a_worker_lost_mid_batch_is_retried_and_pays_again_only_what_it_had_in_flight(spark, judge, tmp_path):
    """The Python worker that scores is killed (SIGKILL, as a lost executor's are) while its last batch's requests
    wait at the judge: Spark runs the task again, its earlier batches come from the store, and only the 4 requests
    that were in flight (2 rows x 2 metrics) are sent twice."""
    import signal
    import sqlite3
    import time
    from concurrent.futures import ThreadPoolExecutor

    marks = tmp_path / "attempts"
    marks.mkdir()
    judge.configure(faults=[{"match": "slow-", "fault": "delay", "seconds": 3.0}])
    rows = _rows(8, "k")
    for r in rows[6:]:  # the task's last batch
        r["question"] = "slow-" + r["question"]
    df = spark.createDataFrame(rows, "id long, question string, answer string, prediction string").coalesce(1)
    marked = df.mapInArrow(_mark_attempt(marks), df.schema)
    scored = score_spark_dataframe(marked, METRICS, **_kw(judge, tmp_path / "cache"))
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(_by_id, scored)
        deadline = time.monotonic() + 60
        while judge.stats()["inflight"] < 4:
            assert time.monotonic() < deadline and not running.done(), "the slow batch never reached the judge"
            time.sleep(0.05)
        with sqlite3.connect(tmp_path / "cache" / "replies.sqlite3") as db:
            (owner,) = {o for (o,) in db.execute("SELECT owner FROM claims")}
        os.kill(int(owner.split(":")[1]), signal.SIGKILL)  # the worker that holds the batch's claims
        got = running.result(timeout=120)
    assert sorted(got) == list(range(8)) and got[7]["judge_errors"] == []
    assert sorted(p.name for p in marks.iterdir()) == ["0-0", "0-1"]
    stats = judge.stats()
    assert stats["prompts"] == _prompts(7)
    assert stats["requests"] - stats["prompts"] == stats["duplicates"] == 4


def _mark_attempt(marks: Path):
    def run(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        (marks / f"{ctx.partitionId()}-{ctx.attemptNumber()}").touch()
        yield from batches

    return run
