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
    # a request counts as sent when the client writes it: one written just before the kill may never reach the
    # server's handler (at most the 8 in flight)
    assert 50 <= killed[0]["requests"] <= paid + 8
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


# -- what a run saves is what it paid: the final entry, not the last checkpoint's -------------------------------
# the last row of 12: its reply comes 1 s late. A checkpoint (history_every_s, 10 s outside tests) lands at 0.7 s,
# after the other 11 replies and before it, and the next one would be at 1.4 s, after the run ended
SLOW_ROW = 11
EVERY_S = 0.7


def _slow_last_row(judge) -> None:
    judge.configure(faults=[{"fault": "delay", "seconds": 1.0, "match": f"row-{SLOW_ROW}:"}])


def _paid_equals_saved(out, judge, tmp_path, sent: int | None = SLOW_ROW + 1) -> None:
    """The run's own entries of the history hold the figures the terminal prints (the summary's), which are what
    the server was sent; so do summary.json, the totals the card and the report page show."""
    s = out.summary
    out.save_to_disk(tmp_path / "saved")  # a stream is scored here, as it is read
    figures = ("requests", "prompt_tokens", "completion_tokens")
    printed = {k: getattr(s, k) for k in figures}
    if sent is not None:
        assert s.requests == judge.stats()["requests"] == sent
    mine = [r for r in s.runs if r["id"] == s.runs[-1]["id"]]
    assert {k: sum(r[k] for r in mine) for k in figures} == printed
    assert {k: s.totals()[k] for k in figures} == printed
    saved = json.loads((tmp_path / "saved" / "summary.json").read_text())
    assert {k: saved["runs"][-1][k] for k in figures} == printed


def _run_with_checkpoints(judge, tmp_path, stream: bool = False, **settings):
    _slow_last_row(judge)
    ds = qa_dataset(SLOW_ROW + 1)
    return score_dataset(
        ds.to_iterable_dataset(num_shards=2) if stream else ds,
        ["QA_Clarity"],
        settings=Settings(model="judge", base_url=judge.base_url, history_every_s=EVERY_S, **settings),
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
    )


def test_a_run_past_a_checkpoint_saves_its_final_counters(judge, tmp_path):
    """Before, the summary kept the run's last checkpoint (11 of 12 requests), read back from the history file."""
    _paid_equals_saved(_run_with_checkpoints(judge, tmp_path), judge, tmp_path)
    assert len(_runs(tmp_path / "cache")) == 1 and _runs(tmp_path / "cache")[0]["requests"] == SLOW_ROW + 1


def test_workers_past_a_checkpoint_save_their_final_counters(judge, tmp_path):
    _paid_equals_saved(_run_with_checkpoints(judge, tmp_path, num_workers=2), judge, tmp_path)


def test_a_stream_past_a_checkpoint_saves_its_final_counters(judge, tmp_path):
    _paid_equals_saved(_run_with_checkpoints(judge, tmp_path, stream=True), judge, tmp_path)


def test_a_stream_read_again_after_a_reading_left_early_keeps_all_its_run_paid(judge, tmp_path):
    """A reading of a stream left early (a Ctrl-C, a break) and the stream read again in the same process: one run,
    two readings. Before, the second reading's entry of the run history took the first's place (the entry is the
    run's, per split), so the history that the next run reads said this run paid only what its second reading
    paid (here nothing: every reply was stored by then); a run of one process records all it paid."""
    out = _run_with_checkpoints(judge, tmp_path, stream=True)
    rows = iter(out["train"])
    next(rows)
    rows.close()  # the reading left after its first row
    _paid_equals_saved(out, judge, tmp_path, sent=None)  # the second reading: save_to_disk
    paid = judge.stats()["requests"]
    assert out.summary.requests == paid and out.summary.cache_hits + paid >= SLOW_ROW + 1
    history = _runs(tmp_path / "cache")
    assert len(history) == 1
    assert (history[0]["requests"], history[0]["cache_hits"]) == (paid, out.summary.cache_hits)
    # the next run reads the history: what this one paid is in its summary
    again = _run_with_checkpoints(judge, tmp_path, stream=True)
    list(again["train"])
    assert [r["requests"] for r in again.summary.runs] == [paid, 0]
