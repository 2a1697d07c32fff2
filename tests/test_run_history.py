"""The run history beside the results cache: a run killed with kill -9 leaves what it paid for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import qa_dataset

from hf_judge import Settings, score_dataset

HERE = Path(__file__).parent
ROWS = 400
COLUMNS = {"instruction": "question", "output": "answer"}

# the job: every 0.1 s a checkpoint of its run history; the last row is held, so it cannot finish
JOB = """
import sys
import datasets
datasets.disable_progress_bars()
from helpers import qa_dataset
from hf_judge import Settings, score_dataset
base_url, cache = sys.argv[1], sys.argv[2]  # and the rows, sys.argv[3]
settings = Settings(model="judge", base_url=base_url, concurrency=8, history_every_s=0.1)
score_dataset(qa_dataset(int(sys.argv[3])), ["QA_Clarity"], settings=settings, cache_dir=cache, api_key="sk-test",
              columns={"instruction": "question", "output": "answer"})
"""


def _runs(cache: Path) -> list[dict]:
    files = list((cache / "results").glob("*.runs.json"))
    return json.loads(files[0].read_text()) if files else []


def test_a_run_killed_with_kill_9_leaves_its_counters_in_the_run_history(judge, tmp_path):
    """Before, the history was written when a split ended (or stopped with an exception): a kill -9 left none,
    and the rerun's summary and card showed only the rerun's requests, though the killed run had paid for more."""
    cache = tmp_path / "cache"
    judge.configure(latency=0.01, faults=[{"fault": "delay", "seconds": 60, "match": f"row-{ROWS - 1}:"}])
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-c", JOB, judge.base_url, str(cache), str(ROWS)]
    job = subprocess.Popen(args, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not any(r["requests"] >= 50 for r in _runs(cache)):
            assert job.poll() is None, job.stderr.read() if job.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint of the run history with 50 requests"
            time.sleep(0.02)
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait(30)
    killed = _runs(cache)
    assert len(killed) == 1 and killed[0]["split"] == "train"
    paid = judge.stats()["requests"]  # what the killed run sent; its checkpoint counted its replies up to then
    assert 50 <= killed[0]["requests"] <= paid
    judge.configure(latency=0.0, faults=[])  # the rerun: healthy
    out = score_dataset(
        qa_dataset(ROWS),
        ["QA_Clarity"],
        settings=Settings(model="judge", base_url=judge.base_url),
        api_key="sk-test",
        cache_dir=cache,
        columns=COLUMNS,
    )
    runs = out.summary.runs
    assert [r["id"] for r in runs][:1] == [killed[0]["id"]] and len(runs) == 2
    assert runs[0] == killed[0]  # the killed run's entry, as its last checkpoint wrote it
    assert runs[1]["requests"] == out.summary.requests == judge.stats()["requests"] - paid
    assert runs[1]["requests"] + out.summary.cache_hits == ROWS
