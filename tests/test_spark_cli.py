"""``hf-judge score --spark``: a file and a Hub dataset (read by pyspark-huggingface from the loopback Hub) scored
on a local[2] Spark session, written as Parquet with errors/, summary.json and the report page, and pushed back.
One Spark session for the module (a session costs seconds of JVM start)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset

pyspark = pytest.importorskip("pyspark", reason='the spark extra: pip install "hf-judge[spark]"')
pytestmark = pytest.mark.spark

COLUMNS = ("instruction=question", "output=answer")


@pytest.fixture(scope="module")
def spark():
    """The active session the CLI finds (SparkSession.getActiveSession): local[2], no UI, few partitions."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # another test file's: getOrCreate would return it as it is
        active.stop()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("hf-judge-test-spark-cli")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
        .getOrCreate()
    )
    yield session
    session.stop()


def _rows(n: int) -> list[dict]:
    return [{"question": f"q{i}", "answer": None if i == 7 else f"a{i}"} for i in range(n)]


def test_score_spark_writes_parquet_errors_summary_and_page(spark, judge, tmp_path, capfd):
    """A JSONL file scored on Spark: each split's Parquet by Spark's writer, errors/ numbered by row, summary.json
    with the requests the judge saw, the report page; read back (load_result) it equals the one-process run,
    which then pays nothing (the same reply store)."""
    from helpers import run_cli, score_args

    from hf_judge import load_result

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(40)))
    cache, out = tmp_path / "cache", tmp_path / "spark-out"
    before = judge.stats()["requests"]
    code, printed, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", cache, "--spark", "-o", out))
    assert code == 0, err
    assert judge.stats()["requests"] - before == 39  # row 7 has no answer: no request
    assert sorted(p.name for p in (out / "train").glob("*.parquet")) and (out / "errors").is_dir()
    assert "rows           train: 40" in printed and "requests       39 (0 retries)" in printed
    assert (out / "report.html").is_file() and "Parquet by split, errors/, summary.json" in printed
    saved = json.loads((out / "summary.json").read_text())
    assert saved["runs"][0]["requests"] == 39 and saved["source_dataset"] == "data.jsonl"
    assert any("scored on Spark (local[2])" in n for n in saved["notes"])
    on_spark = load_result(out)
    assert on_spark["train"]["question"] == [r["question"] for r in _rows(40)]  # the input's order
    assert [(e["row"], e["kind"]) for e in on_spark["errors"]] == [(7, "null_input")]
    # the command the overview gives for the errors reads Spark's Parquet folder (load_from_disk cannot)
    command = next(line.strip() for line in printed.splitlines() if "print(*" in line)
    assert "hf_judge.load_result" in command, command
    listed = subprocess.run(command, shell=True, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "'row': 7" in listed.stdout and "null_input" in listed.stdout
    code, printed, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", cache, "-o", tmp_path / "single"))
    assert code == 0, err
    assert judge.stats()["requests"] - before == 39 and "from cache     39 replies" in printed
    single = load_result(tmp_path / "single")
    assert on_spark["train"]["QA_Clarity"] == single["train"]["QA_Clarity"]
    assert on_spark["errors"]["message"] == single["errors"]["message"]


def test_a_task_s_hf_judge_error_stops_the_run_with_its_own_line_and_exit_code(spark, tmp_path, capfd):
    """A wrong URL on Spark: the executors' ServerUnreachableError comes back wrapped in Spark's exception with the
    worker's whole traceback; the run stops with its one line, as in one process (exit 1, "stopped:")."""
    from helpers import run_cli, score_args

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(3)))
    code, _, err = run_cli(capfd, *score_args(data, "http://127.0.0.1:9/v1", "--spark", "-o", tmp_path / "o"))
    assert code == 1, err
    assert err.strip().splitlines()[-1] == (
        "hf-judge: stopped: cannot reach the server: connection refused at http://127.0.0.1:9/v1/chat/completions. "
        "Check the base URL and that the server is running."
    )
    assert "PythonException" not in err and "Traceback" not in err


def test_the_session_hf_judge_starts_runs_its_workers_on_hf_judge_s_own_python(judge, tmp_path):
    """As a user runs it: a process of its own, outside the checkout, no Spark session, no PYTHONPATH or
    PYSPARK_PYTHON, and the virtual environment not on the PATH (an installed `hf-judge` run by its path).
    PySpark takes its workers' Python from $PYSPARK_PYTHON only, so they ran the PATH's first `python3`, which
    cannot import hf_judge; the session hf-judge starts now runs them on its own interpreter."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(4)))
    own_bin = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != own_bin)
    env["OPENAI_API_KEY"] = "sk-test"
    args = ["score", data, "--metrics", "QA_Clarity", *[a for c in COLUMNS for a in ("--column", c)]]
    args += ["--model", "judge", "--base-url", judge.base_url, "--cache-dir", tmp_path / "cache"]
    args += ["--spark", "--spark-master", "local[1]", "-o", tmp_path / "out"]
    before = judge.stats()["requests"]
    done = subprocess.run(
        [sys.executable, "-m", "hf_judge.cli", *map(str, args)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert judge.stats()["requests"] - before == 4
    assert "rows           train: 4" in done.stdout


def _page_command() -> str:
    """The command docs/how-to/spark.md gives for the key in local mode (its bash block that exports JUDGE_KEY)."""
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "spark.md").read_text()
    blocks = [b for b in re.findall(r"^```bash\n(.*?)^```", page, re.S | re.M) if "export JUDGE_KEY" in b]
    assert len(blocks) == 1, "the page shows no command that takes the key from the environment"
    return blocks[0]


def _key_seen(judge, tmp_path: Path, key: str, submit_args: str = "") -> tuple[int, int]:
    """Run the page's command in a folder of its own, the JVM writing Spark's event log (and ``submit_args``
    given to it, as `spark-submit --conf` takes them): the processes whose command line held ``key`` while it ran
    (as `ps` shows them), and the times the event log holds it."""
    import threading
    import time

    work, events = tmp_path / "work", tmp_path / "events"
    work.mkdir(parents=True)
    events.mkdir()
    (work / "judge.key").write_text(key)
    (work / "reviews.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(4)))
    bin_dir = tmp_path / "bin"  # `hf-judge` runs this checkout
    bin_dir.mkdir()
    (bin_dir / "hf-judge").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hf_judge.cli "$@"\n')
    (bin_dir / "hf-judge").chmod(0o755)
    log = f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{events}"
    log += " --conf spark.eventLog.rolling.enabled=false --conf spark.eventLog.compress=false"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "JUDGE_KEY")}
    env.update(OPENAI_BASE_URL=judge.base_url, HF_JUDGE_CACHE=str(tmp_path / "cache"))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYSPARK_SUBMIT_ARGS"] = f"{log} {submit_args} pyspark-shell"
    p = subprocess.Popen(["bash", "-euo", "pipefail", "-c", _page_command()], cwd=work, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    seen: set[str] = set()

    def watch() -> None:
        while p.poll() is None:
            listing = subprocess.run(["ps", "-eo", "pid,args", "ww"], capture_output=True, text=True).stdout
            seen.update(line.split()[0] for line in listing.splitlines() if key in line)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    out, _ = p.communicate(timeout=600)
    watcher.join()
    assert p.returncode == 0, out
    assert "saved to reviews-spark" in out
    return len(seen), sum(f.read_text(errors="replace").count(key) for f in events.rglob("*") if f.is_file())


@pytest.mark.timeout(900)  # two runs that each start a JVM: 200 s on a loaded 2-core machine
def test_the_page_s_way_keeps_the_key_off_the_command_line_and_out_of_the_event_log(judge, tmp_path):
    """Real processes (the JVM's command line): the page's command, the key in the environment the session starts
    in. The page set it with spark.executorEnv.JUDGE_KEY, which puts it on the command lines of the launcher and
    the JVM (`ps`: 3 processes) and in Spark's event log (16 times): measured here as the control. The page's way:
    in neither, and the judge, which requires the key, scores every row (the executors had it)."""
    key = "sk-spark-key-in-env-7d1e53"
    judge.configure(require_key=key)
    on_command_line, in_event_log = _key_seen(
        judge, tmp_path / "conf", key, f"--conf spark.executorEnv.JUDGE_KEY={key}"
    )
    print(f"spark.executorEnv: on {on_command_line} command lines, {in_event_log} times in the event log")
    assert on_command_line >= 1 and in_event_log >= 1
    before = judge.stats()["ok"]
    assert _key_seen(judge, tmp_path / "env", key) == (0, 0)
    assert judge.stats()["ok"] - before == 4  # every row scored with the key: the executors had it


def test_ctrl_c_of_a_spark_run_is_its_one_interrupted_line_and_stops_the_sending(judge, tmp_path):
    """A real process (Ctrl-C, to its process group as a terminal sends it): `hf-judge score --spark`, SIGINT while
    a task scores. It printed four tracebacks (py4j's reentrant call and KeyboardInterrupt, the JVM's shutdown:
    57-69 lines) before a message of its own; now the jobs are cancelled and the session stopped, and the one line
    after the Ctrl-C is the run's interrupted message."""
    import signal
    import threading

    from helpers import until

    from hf_judge.store.replies import ReplyStore

    n, in_flight = 400, 4
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"row-{i}: q", "answer": f"a{i}"}) + "\n" for i in range(n)))
    # 40 replies a second: the signal lands mid-task; the last row is held, so the run cannot end before it
    judge.configure(latency=0.1, faults=[{"fault": "delay", "seconds": 60, "match": f"row-{n - 1}:"}])
    args = ["score", data, "--metrics", "QA_Clarity", *[a for c in COLUMNS for a in ("--column", c)]]
    args += ["--model", "judge", "--base-url", judge.base_url, "--cache-dir", tmp_path / "cache"]
    args += ["--concurrency", in_flight, "--spark", "--spark-master", "local[1]", "-o", tmp_path / "out"]
    p = subprocess.Popen(
        [sys.executable, "-m", "hf_judge.cli", *map(str, args)], env={**os.environ, "OPENAI_API_KEY": "sk-test"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)  # the JVM's lines too
    reader.start()
    try:
        until(lambda: p.poll() is not None or judge.stats()["ok"] >= 40, timeout=240)
        assert p.poll() is None, "".join(lines)
        before = len(lines)  # what the run printed before the Ctrl-C (the JVM's start-up lines)
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(60) == 130, "".join(lines)
        reader.join(60)  # the JVM holds stderr until it exits
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    assert [line.rstrip("\n") for line in lines[before:]] == [
        "hf-judge: interrupted. The replies the workers received are saved in the cache; run the same command again "
        "to resume where it stopped (a stream: read it again); stored replies are not sent again."
    ], "".join(lines)
    assert not [line for line in lines if "Traceback" in line or "Exception" in line]
    # stderr's end: the JVM and its Python workers have exited. The sending stopped at the Ctrl-C, not at the
    # held last row (pyspark's handler let the job go on), and what the judge answered is stored but for what the
    # worker had in flight and its last group commit (5 ms) when the stop killed it
    answered = judge.stats()["ok"]
    assert judge.stats()["requests"] < n - 1
    store = ReplyStore(tmp_path / "cache" / "replies.sqlite3")
    try:
        assert answered - 2 * in_flight <= len(store) <= answered
    finally:
        store.close()


def test_a_panel_on_spark_has_the_agreement_and_length_bias_of_the_one_process_run(spark, judge, tmp_path, capfd):
    """The Spark CLI built its result by hand and skipped the run shell's figures: a panel on Spark saved no
    judge-vs-judge agreement and no length bias. It now ends in the shell as every engine does: the same figures
    as the one-process run on the same replies (which pays nothing again)."""
    from helpers import run_cli, score_args

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(24)))
    panel = ["--models", "judge,judge-b", "--cache-dir", tmp_path / "cache"]
    code, _, err = run_cli(capfd, *score_args(data, judge, *panel, "--spark", "-o", tmp_path / "spark"))
    assert code == 0, err
    paid = judge.stats()["requests"]
    code, _, err = run_cli(capfd, *score_args(data, judge, *panel, "-o", tmp_path / "single"))
    assert code == 0, err
    assert judge.stats()["requests"] == paid
    on_spark, single = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("spark", "single"))
    assert single["agreement"] and on_spark["agreement"] == single["agreement"]
    assert single["length_bias"] and on_spark["length_bias"] == single["length_bias"]


def test_hub_dataset_read_by_pyspark_huggingface_scored_and_pushed(spark, hub, judge, tmp_path, capfd):
    """A Hub dataset read on the executors by Hugging Face's Spark data source (its own User-Agent reaches the
    Hub), scored, written, and pushed back with its errors split and card."""
    from helpers import run_cli, score_args

    from hf_judge import load_result

    Dataset.from_list(_rows(12)).push_to_hub("me/spark-src", token=os.environ["HF_TOKEN"])
    out = tmp_path / "out"
    extra = ("--cache-dir", tmp_path / "cache", "--spark", "-o", out, "--push-to-hub", "me/spark-judged")
    code, printed, err = run_cli(capfd, *score_args("me/spark-src", judge, *extra))
    assert code == 0, err
    assert any(a.startswith("pyspark_huggingface/") for a in hub.agents()), hub.agents()
    assert "pushed to " in printed and "me/spark-judged" in printed
    from datasets import load_dataset

    pushed = load_dataset("me/spark-judged")
    written = load_result(out)
    assert pushed["train"]["QA_Clarity"] == written["train"]["QA_Clarity"]
    assert len([v for v in written["train"]["QA_Clarity"] if v is not None]) == 11
    assert [e["row"] for e in load_dataset("me/spark-judged", "errors", split="errors")] == [7]
    from huggingface_hub import HfApi

    card = HfApi().hf_hub_download("me/spark-judged", "README.md", repo_type="dataset")
    with open(card, encoding="utf-8") as f:
        assert "QA_Clarity" in f.read()


def test_spark_refuses_a_recipe_filter_and_workers_before_any_request(spark, judge, tmp_path, capfd):
    """What Spark does not do is said before the first request, with the fix."""
    from helpers import run_cli, score_args

    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    before = judge.stats()["requests"]
    code, _, err = run_cli(capfd, *score_args(data, judge, "--spark", "--workers", "2", "-o", tmp_path / "o"))
    assert code == 2 and "num_workers" in err and "repartition" in err
    code, _, err = run_cli(capfd, *score_args(data, judge, "--spark-master", "local[3]", "-o", tmp_path / "o"))
    assert code == 2 and "local[2]" in err and "drop --spark-master" in err
    assert judge.stats()["requests"] == before
    cache = ["--cache-dir", "s3://bucket/cache", "--storage-option", "secret=shown-in-the-plan-7d1e"]
    code, _, err = run_cli(capfd, *score_args(data, judge, "--spark", *cache, "-o", tmp_path / "o"))
    assert code == 2 and "storage_options['secret'] holds a credential as text" in err, err
    assert "travel inside Spark's plan" in err and "shown-in-the-plan-7d1e" not in err
    assert "--storage-option secret=env:AWS_SECRET_ACCESS_KEY" in err and "shown-in-the-plan-7d1e" not in err
    assert judge.stats()["requests"] == before


def test_a_spark_result_loads_with_the_parquet_builder_as_any_parquet_folder(spark, judge, tmp_path, capfd):
    """Spark's writer leaves an empty `_SUCCESS` marker beside the Parquet it writes unless told not to; hf-judge's
    output has none, so `load_dataset("parquet", data_dir=...)` reads the folder as it reads any Parquet folder
    (issue 40: `_SUCCESS` broke it)."""
    from datasets import load_dataset
    from helpers import run_cli, score_args

    from hf_judge import load_result

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(12)))
    out = tmp_path / "spark-out"
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", tmp_path / "cache", "--spark", "-o", out))
    assert code == 0, err
    assert sorted(p.name for p in (out / "train").iterdir() if not p.name.startswith(".")) == [
        p.name for p in sorted((out / "train").glob("part-*.parquet"))
    ]  # the Parquet alone (Hadoop's hidden .crc files are skipped by datasets as every hidden file is)
    train = load_dataset("parquet", data_dir=str(out / "train"), split="train")
    assert train.to_list() == load_result(out)["train"].to_list()
    whole = load_dataset("parquet", data_dir=str(out))
    assert whole["train"].to_list() == train.to_list()


def test_a_spark_driver_killed_mid_run_leaves_its_history_and_the_rerun_pays_again_what_was_in_flight(judge, tmp_path):
    """kill -9 of a Spark run's driver (its process group: the Python driver, its JVM and the Python workers) mid-run
    (issue 41): the run history's checkpoints, from the executors' counters merged as their tasks ended, are
    beside the results cache as one process leaves them; the rerun's summary lists the killed run, and the rerun
    pays again only what the workers had in flight."""
    import signal

    from distributed_job import IN_FLIGHT, job_env, rerun_after_kill, stall_and_settle
    from helpers import history_of, until

    n, workers = 400, 2  # local[2]
    cache, out = tmp_path / "cache", tmp_path / "out"
    job = [sys.executable, str(Path(__file__).with_name("distributed_job.py")), "spark", judge.base_url]
    job += [str(cache), str(out), str(n)]
    # the last row's reply held: the run cannot end before the kill
    judge.configure(latency=0.05, faults=[{"fault": "delay", "seconds": 60, "match": f"row-{n - 1}:"}])
    p = subprocess.Popen(job, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=job_env(),
                         start_new_session=True)  # fmt: skip
    try:
        until(lambda: judge.stats()["ok"] >= n // 3 or p.poll() is not None, timeout=240)
        assert p.poll() is None, "the job ended before the kill"
        # a checkpoint that counts the tasks ended: what a killed driver leaves (main's Spark run wrote none)
        until(lambda: any(r.get("requests", 0) > 0 for r in history_of(cache)), timeout=30)
        # every worker's every slot waits on a held request, and every reply answered is committed
        answered = stall_and_settle(judge, cache, workers * IN_FLIGHT)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)
    (killed,) = history_of(cache)
    assert 0 < answered < n
    assert judge.stats()["ok"] == answered  # the held requests were answered to no one
    paid_twice = rerun_after_kill(job, judge, n, answered, killed)
    print(f"spark driver killed at {answered} replies (up to {workers} x {IN_FLIGHT} in flight), its history "
          f"{killed['requests']} requests; rerun paid twice {paid_twice}")  # fmt: skip
    # what was answered is never sent again: the rerun pays the rows never answered, the ones in flight among them
    assert paid_twice == 0
