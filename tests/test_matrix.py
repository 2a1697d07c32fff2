"""Every engine x every way of judging a row: equal to the in-process result, or a documented ConfigError.

One parametrized test over engine (a Dataset in one process, a stream, ``num_workers=2``, batch mode, Ray, the
map transform ``Dataset.map(hf_judge.Judge(...))``)
and feature (one reply, samples, a panel, logprobs and their combinations, token columns, a comparative judge
in both orders). The reference of a feature is the
in-process result, computed once per module; each cell scores the same rows with a fresh reply store, so it
sends its own requests, and compares every column of the split and the ``errors`` split with it.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from datasets import Dataset

from hf_judge import ConfigError, Settings, score_dataset
from hf_judge.engine import capabilities

COLUMNS = {"instruction": "question", "output": "answer"}
METRICS = ["QA_Clarity", "Binary"]
ROWS = 6
FEATURES = {
    "plain": {},
    "samples": {"samples": 3, "temperature": 0.7},
    "panel": {"models": "a,b"},
    "logprobs": {"logprobs": True},
    "logprobs+samples": {"logprobs": True, "samples": 3, "temperature": 0.7},
    "logprobs+panel": {"logprobs": True, "models": "a,b"},
    # not settings: what else a run is asked for
    "token_columns": {"token_columns": True},
    "comparative": {"metrics": ["Comparative"], "columns": {"response1": "answer", "response2": "prediction"}},
    # <column>_lc: a line fitted on the whole run (refused where rows pass a batch at a time)
    "length_control": {"length_control": True},
    # a cascade of judges: the rows the judge is unsure of (and an audited share) scored again by a "stronger" model
    "cascade": {
        "logprobs": True,
        "escalate_model": "strong",
        "escalate_when": "confidence<0.65",
        "escalate_audit": 0.3,
    },
    # the strong tier as a panel of two, two samples each, with token columns counting both tiers
    "cascade_ensemble": {
        "logprobs": True,
        "escalate_models": "strong-a,strong-b",
        "escalate_samples": 2,
        "escalate_temperature": 0.7,
        "escalate_when": "confidence<0.65",
        "token_columns": True,
    },
    # a panel whose judge b replies out of range to QA_Clarity on every row: its error rows name it (`judge`)
    "panel_judge_fails": {"models": "a,b"},
    # an image variable (data URLs: sent as image parts, never fetched), and a user's own prompt file
    "images": {
        "metrics": ["VQA"],
        "columns": {**COLUMNS, "picture": "picture"},
        "prompts_dir": str(Path(__file__).parent / "prompts_matrix"),
    },
}
# a feature's judge server (and batch server): what it is configured with before the run
SERVER = {"panel_judge_fails": {"model_overrides": {"b": {"score": 11}}}}
# a feature's error rows as (row, metric, judge, kind), where more than the null answer fails
FAILED = {
    "panel_judge_fails": {(2, "QA_Clarity", None, "null_input"), (2, "Binary", None, "null_input")}
    | {(r, "QA_Clarity", "b", "out_of_range") for r in (0, 1, 3, 4, 5)},
}
# The engines and what each refuses come from the declared capabilities (hf_judge.engine.capabilities), as the
# docs' tables do (docs/reference/engines.md): a cell is either equal to the in-process result or the table's
# ConfigError, word for word.
ENGINES = [e for e, engine in capabilities.ENGINES.items() if engine.matrix]
# a feature of this module -> the capability a run of it asks for (the ways of judging a row are their own)
ASKS = {"cascade": "cascade", "cascade_ensemble": "cascade", "length_control": "length_control"}
ASKS["panel_judge_fails"] = "panel"


def _refusal(engine: str, feature: str) -> str | None:
    return capabilities.refusal(engine, ASKS.get(feature, feature))


# a 1x1 PNG as a data URL; each row's differs in its (ignored) trailing bytes, so each is a request of its own
_PNG_URL = (
    "data:image/png;base64,"
    + base64.b64encode(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc0000003"
            "010100c9fe92ef0000000049454e44ae426082"
        )  # fmt: skip
    ).decode()
    + "AAAA"
)


def _data() -> Dataset:
    """Rows whose prompts differ, one of them with a null answer: an error row that every engine must report."""
    answers: list[str | None] = [f"m-{i}: it is {2 * i}" for i in range(ROWS)]
    answers[2] = None
    return Dataset.from_dict(
        {
            "question": [f"m-{i}: is {i} + {i} even?" for i in range(ROWS)],
            "answer": answers,
            "prediction": [f"{i % 2 == 0}" for i in range(ROWS)],
            "picture": [_PNG_URL.replace("AAAA", f"AAA{i}") for i in range(ROWS)],  # one image each
        }
    )


def _job(feature: str) -> dict:
    """The keyword arguments of a feature's run: metrics, columns and the rest."""
    kw = {"metrics": METRICS, "columns": COLUMNS, **FEATURES[feature]}
    kw["metrics"], kw["columns"] = list(kw["metrics"]), dict(kw["columns"])
    return kw


def _score(ds, server, cache, feature: str, **kw):
    fast = Settings(model="judge", backoff_base=0.001, backoff_max=0.01, batch_poll_s=0.01)
    job = _job(feature)
    return score_dataset(
        ds,
        job.pop("metrics"),
        settings=fast,
        base_url=server.base_url,
        api_key="sk-test",
        cache_dir=cache,
        progress=False,
        retries=0,
        **job,
        **kw,
    )


def _columns(split) -> dict[str, list]:
    return {c: list(split[c]) for c in split.column_names}


# what a run's summary must say alike whichever engine ran it: requests (each judge's too: a panel's lost judge
# shows), tokens, columns, judges, a panel's agreement, error kinds, rows, biases
SUMMARY = ("requests", "judge_requests", "prompt_tokens", "completion_tokens", "columns", "sampling", "agreement")
SUMMARY += ("errors", "rows", "length_bias", "longer_wins")
# batch mode too: its lines are requests, counted as the in-process run counts its own (each judge's too)


def _summary(summary, engine: str = "dataset") -> dict:
    out = {k: getattr(summary, k) for k in SUMMARY}
    if "judge_requests" in out:  # a judge's latency is a timing, not a count: no two runs say it alike
        out["judge_requests"] = {
            j: {k: v for k, v in f.items() if not k.startswith("latency_")} for j, f in out["judge_requests"].items()
        }
    return {**out, "sampling": _other_host(out["sampling"])} if engine == "batch" else out


def _other_host(sampling: dict) -> dict:
    """A panel's sampling without its judges' server (batch mode's cells send to the batch server)."""
    if "judges" not in sampling:
        return sampling
    return {**sampling, "judges": [{k: v for k, v in j.items() if k != "base_url_host"} for j in sampling["judges"]]}


def _errors(errors) -> list[dict]:
    return sorted(errors.to_list(), key=lambda e: (e["split"], e["row"], e["metric"], e["message"]))


@pytest.fixture(scope="module")
def references(judge_server_proc, tmp_path_factory):
    """feature -> (train columns, error rows, summary) of the in-process run, computed on first use."""
    done: dict[str, tuple[dict, list, dict]] = {}

    def get(feature: str) -> tuple[dict, list, dict]:
        if feature not in done:
            out = _score(_data(), judge_server_proc, tmp_path_factory.mktemp(f"ref-{feature}"), feature)
            done[feature] = (_columns(out["train"]), _errors(out["errors"]), _summary(out.summary))
        return done[feature]

    return get


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node local Ray cluster, started only when a Ray cell runs (as tests/test_ray.py's, smaller)."""
    ray = pytest.importorskip("ray")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        if not ray.is_initialized():  # another test of this process may have left one running
            ray.init(
                address="local",
                num_cpus=1,
                include_dashboard=False,
                object_store_memory=80 * 1024 * 1024,
                log_to_driver=False,
            )  # address="local": a new cluster, never one another process left on the machine
        try:
            yield ray
        finally:
            ray.shutdown()


def _run(engine: str, feature: str, judge, batch_server, tmp_path, request):
    cache = tmp_path / "cache"
    if engine == "dataset":
        return _score(_data(), judge, cache, feature)
    if engine == "stream":
        out = _score(_data().to_iterable_dataset(num_shards=2), judge, cache, feature)
        train = Dataset.from_list(list(out["train"]))
        read = _Read(train=train, errors=Dataset.from_list(list(out["errors"]), features=out["errors"].features))
        read.summary = out.summary  # filled as the splits were read
        return read
    if engine == "workers":
        return _score(_data(), judge, cache, feature, num_workers=2)
    if engine == "batch":
        return _score(_data(), batch_server, cache, feature, batch=True)
    if engine == "map":
        return _map(judge, cache, feature)
    if engine == "spark":
        return _spark(request.getfixturevalue("spark_session"), judge, cache, feature)
    request.getfixturevalue("ray_cluster")
    from hf_judge.ray import score_dataset_on_ray

    job = _job(feature)
    return score_dataset_on_ray(
        _data(),
        job.pop("metrics"),
        settings=Settings(model="judge", backoff_base=0.001, backoff_max=0.01),
        base_urls=None if "panel" in feature else [judge.base_url],  # a fleet is one judge's replicas
        base_url=judge.base_url,
        api_key="sk-test",
        cache_dir=cache,
        actors=1,
        retries=0,
        **job,
    )


@pytest.fixture(scope="module")
def spark_session():
    """A ``local[2]`` SparkSession, started only when a Spark cell runs; its Python workers run this interpreter."""
    pytest.importorskip("pyspark")
    import os
    import sys

    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        active = SparkSession.getActiveSession()
        if active is not None:  # another test file's: getOrCreate would return it as it is
            active.stop()
        session = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "4")  # two Arrow batches per task
            .config("spark.executorEnv.HF_JUDGE_MATRIX_KEY", "sk-test")
            .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


def _spark(spark, judge, cache, feature: str) -> dict:
    """``hf_judge.spark.score_spark_dataframe`` over the rows as a DataFrame of two partitions: the score columns,
    and its per-row errors column read back as the rows of an ``errors`` split (as the map's)."""
    from hf_judge.spark import ERRORS_COLUMN, score_spark_dataframe

    job = _job(feature)
    data = _data()
    df = spark.createDataFrame(data.data.table).repartition(2)  # the rows shuffled: put back in order below
    out = score_spark_dataframe(
        df,
        job.pop("metrics"),
        settings=Settings(model="judge", backoff_base=0.001, backoff_max=0.01),
        base_url=judge.base_url,
        api_key="env:HF_JUDGE_MATRIX_KEY",
        cache_dir=cache,
        retries=0,
        **job,
    )
    scored = Dataset(out.toArrow())
    position = {q: i for i, q in enumerate(scored["question"])}
    scored = scored.select([position[q] for q in data["question"]])
    errors = [{"split": "train", "row": row, **e} for row, found in enumerate(scored[ERRORS_COLUMN]) for e in found]
    return {"train": scored.remove_columns(ERRORS_COLUMN), "errors": Dataset.from_list(errors)}


class _Read(dict):
    """A stream's splits, read, with the summary of their reading."""

    summary = None


def _map(judge, cache, feature: str) -> dict:
    """``Dataset.map(hf_judge.Judge(...), batched=True)``: the score columns, and its per-row errors column read
    back as the rows of an ``errors`` split."""
    from hf_judge import Judge

    job = _job(feature)
    fast = Settings(model="judge", backoff_base=0.001, backoff_max=0.01)
    ds = _data()
    with Judge(job.pop("metrics"), settings=fast, base_url=judge.base_url, api_key="sk-test", cache_dir=cache,
               retries=0, **job) as judging:  # fmt: skip
        out = ds.map(judging, batched=True, features=judging.features(ds.features))
    errors = [
        {"split": "train", "row": row, **e} for row, found in enumerate(out[judging.errors_column]) for e in found
    ]
    return {"train": out.remove_columns(judging.errors_column), "errors": Dataset.from_list(errors)}


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_x_feature_equals_the_in_process_result(engine, feature, judge, references, tmp_path, request):
    refused = _refusal(engine, feature)
    batch_server = request.getfixturevalue("batch") if engine == "batch" else None
    if refused is not None:
        with pytest.raises(ConfigError) as raised:
            _run(engine, feature, judge, batch_server, tmp_path, request)
        assert str(raised.value) == refused
        return
    for server in (judge, batch_server):
        if server is not None and feature in SERVER:
            server.configure(**SERVER[feature])
    expected, expected_errors, expected_summary = references(feature)
    out = _run(engine, feature, judge, batch_server, tmp_path, request)
    got = _columns(out["train"])
    assert list(got) == list(expected), "the columns, in order"
    for c in expected:
        assert got[c] == expected[c], f"column {c!r}"
    assert _errors(out["errors"]) == expected_errors  # every field, `judge` (whose request failed) included
    failed = {(e["row"], e["metric"], e["judge"], e["kind"]) for e in expected_errors}
    # the null answer, in every metric: the row's own error, no judge's
    assert failed == FAILED.get(feature, {(2, m, None, "null_input") for m in _job(feature)["metrics"]})
    assert len(expected_errors) == len(failed)
    if engine not in (
        "map",
        "spark",
    ):  # a map transform (and a Spark step) makes no summary: its rows carry their errors, a batch at a time
        want = dict(expected_summary)
        if engine == "batch":  # the batch API is a server of its own: the judges' models are the same
            want["sampling"] = _other_host(want["sampling"])
        assert _summary(out.summary, engine) == want
    if "models" in _job(feature):  # a panel: each judge's length bias beside the aggregate's
        judged = {c: f["judge"] for c, f in expected_summary["length_bias"].items() if f.get("judge")}
        assert judged == {"QA_Clarity__a": "a", "QA_Clarity__b": "b"}  # Binary's verdict is no integer score
