"""num_workers: several processes over one split, sharing the reply store (claims, takeover, exactly once)."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from datasets import Dataset
from helpers import qa_dataset, score
from judge_fixture import JudgeServer

from hf_judge import WorkerDiedError
from hf_judge.engine.workers import shard_bounds
from hf_judge.judging.catalogue import resolve_metrics
from hf_judge.store.replies import ReplyStore

COLUMNS = {"instruction": "question", "output": "answer"}


def dup_dataset(n: int, distinct: int) -> Dataset:
    """``n`` rows that repeat ``distinct`` prompts, spread so that every shard holds every prompt."""
    return Dataset.from_dict(
        {"question": [f"q{i % distinct}?" for i in range(n)], "answer": [f"a{i % distinct}" for i in range(n)]}
    )


def test_shared_store_claims_each_key_once_and_shows_replies_at_once(tmp_path):
    a = ReplyStore(tmp_path / "r.sqlite3", shared=True)
    b = ReplyStore(tmp_path / "r.sqlite3", shared=True)
    try:
        found, mine = a.claim([b"k1", b"k2"])
        assert (found, sorted(mine)) == ({}, [b"k1", b"k2"])
        assert b.claim([b"k1", b"k2", b"k3"]) == ({}, [b"k3"])  # a holds k1, k2
        a.put(b"k1", '{"score": 1}', (3, 4))
        a.release(b"k2")  # failed: free for another worker
        a.flush()
        found, mine = b.claim([b"k1", b"k2"])
        assert found == {b"k1": ('{"score": 1}', (3, 4))} and mine == [b"k2"]
    finally:
        a.close()
        b.close()
    # a single-process run (today's code path) reads what shared workers stored
    plain = ReplyStore(tmp_path / "r.sqlite3")
    try:
        assert plain.get_many([b"k1"]) == {b"k1": ('{"score": 1}', (3, 4))}
    finally:
        plain.close()
    with sqlite3.connect(tmp_path / "r.sqlite3") as conn:  # every claim ended with its reply, release or close
        assert conn.execute("SELECT count(*) FROM claims").fetchone()[0] == 0


def test_workers_reuse_the_replies_of_a_single_process_run(tmp_path):
    plain = ReplyStore(tmp_path / "r.sqlite3")  # today's path: replies appended to `pending`
    plain.put(b"old", '{"score": 2}', None)
    plain.close()
    shared = ReplyStore(tmp_path / "r.sqlite3", shared=True)
    try:
        assert shared.claim([b"old", b"new"]) == ({b"old": ('{"score": 2}', None)}, [b"new"])
    finally:
        shared.close()


def test_claim_of_a_dead_owner_or_an_expired_lease_is_taken_over(tmp_path):
    store = ReplyStore(tmp_path / "r.sqlite3", shared=True)
    try:
        host = store.owner.split(":")[0]
        dead = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
        dead.start()
        dead.join()
        far = time.time() + 3600
        with sqlite3.connect(tmp_path / "r.sqlite3") as conn:
            conn.executemany(
                "INSERT INTO claims VALUES (?, ?, ?)",
                [
                    (b"dead", f"{host}:{dead.pid}:x", far),  # this host, no such process
                    (b"expired", "other-host:1:x", time.time() - 1),  # another host: only its lease tells
                    (b"live", "other-host:1:y", far),
                    (b"mine-alive", f"{host}:{os.getpid()}:z", far),  # a live process of this host
                ],
            )
        found, mine = store.claim([b"dead", b"expired", b"live", b"mine-alive"])
        assert sorted(mine) == [b"dead", b"expired"]
    finally:
        store.close()


def test_metrics_pickle_for_worker_processes():
    for m in resolve_metrics(["QA_Clarity", "QA_All", "Binary", "Comparative"]):
        again = pickle.loads(pickle.dumps(m))
        values = {v: "x" for v in (*m.variables, *m.optional)}
        assert (again.prompt_hash, again.columns, again.messages(values)) == (
            m.prompt_hash,
            m.columns,
            m.messages(values),
        )


def test_shard_bounds_are_contiguous_and_cover_every_row():
    assert shard_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert shard_bounds(2, 4) == [(0, 1), (1, 2)]


def test_four_workers_send_each_distinct_request_exactly_once(judge, tmp_path):
    ds = dup_dataset(2000, 250)
    judge.configure(latency=0.002)
    scored = score(ds, ["QA_Clarity", "QA_All"], judge, tmp_path, num_workers=4, progress=False)
    st = judge.stats()
    assert (st["requests"], st["prompts"], st["duplicates"]) == (500, 500, 0)
    assert scored.summary.requests == 500
    assert scored.summary.cache_hits + scored.summary.shared == 2 * 2000 - 500
    judge.reset()
    single = score(ds, ["QA_Clarity", "QA_All"], judge, tmp_path / "single", progress=False)
    assert scored["train"].to_list() == single["train"].to_list()
    assert len(scored["errors"]) == 0
    # the cache is shared with a single-process run: the same call again sends nothing
    judge.reset()
    again = score(ds, ["QA_Clarity", "QA_All"], judge, tmp_path, progress=False)
    assert judge.stats()["requests"] == 0 and again["train"].to_list() == single["train"].to_list()


def test_errors_of_workers_merge_in_row_order(judge, tmp_path):
    ds = Dataset.from_dict(
        {"question": [f"q{i}" for i in range(40)], "answer": [None if i % 7 == 3 else "a" for i in range(40)]}
    )
    scored = score(ds, ["QA_Clarity"], judge, tmp_path, num_workers=3, progress=False)
    assert scored["errors"]["row"] == [3, 10, 17, 24, 31, 38]
    assert set(scored["errors"]["kind"]) == {"null_input"}
    assert [v is None for v in scored["train"]["QA_Clarity"]] == [i % 7 == 3 for i in range(40)]


def test_kill_9_of_a_worker_is_reported_and_a_rerun_pays_at_most_what_was_in_flight(tmp_path):
    # a server of its own: the session's could still get a late request of an earlier test's processes, and
    # this test counts the distinct prompts a server received
    with JudgeServer() as judge:
        _kill_9_of_a_worker(judge, tmp_path)


def _kill_9_of_a_worker(judge: JudgeServer, tmp_path: Path) -> None:
    per_worker = 8
    ds = dup_dataset(1200, 600)  # every prompt twice, in two different shards of 300 rows
    judge.configure(latency=0.02)
    outcome: dict = {}

    def run() -> None:
        try:
            score(ds, ["QA_Clarity"], judge, tmp_path, num_workers=4, concurrency=per_worker, progress=False)
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while judge.stats()["ok"] < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    victim = next(p for p in multiprocessing.active_children() if p.name == "hf_judge-worker-1")
    os.kill(victim.pid, signal.SIGKILL)
    t.join(120)
    assert isinstance(outcome.get("error"), WorkerDiedError)
    assert "worker 2 of 4" in str(outcome["error"]) and "signal 9" in str(outcome["error"])

    judge.configure(latency=0)  # the rerun's pace does not matter: what it sends does
    scored = score(ds, ["QA_Clarity"], judge, tmp_path, num_workers=4, concurrency=per_worker, progress=False)
    st = judge.stats()
    assert st["prompts"] == 600 and len(scored["errors"]) == 0
    # Paid twice: what the killed worker had sent and not yet stored: its requests in flight (its claims, taken
    # over by the worker that shares its prompts, or by the rerun) and the replies it had received but not yet
    # committed, as for any kill -9 (see hf_judge/store.py): one group commit, 5 ms, but on a loaded machine
    # the writer thread lags; at most as many again as the limiter lets out at once.
    assert st["duplicates"] <= 2 * per_worker
    assert scored["train"]["QA_Clarity"][:600] == scored["train"]["QA_Clarity"][600:]


def test_workers_flag_sets_num_workers():
    from hf_judge.cli.parser import build_parser

    args = build_parser().parse_args(["score", "data.jsonl", "--workers", "4", "--metrics", "QA_All", "-m", "j"])
    assert args.num_workers == 4


JOB = """
import sys
import datasets
datasets.disable_progress_bars()
sys.path.insert(0, {tests!r})
from helpers import qa_dataset
from hf_judge import InterruptedRun, score_dataset
print("started", flush=True)
try:
    score_dataset(
        qa_dataset({n}), ["QA_Clarity"], model="judge", base_url={url!r}, api_key="sk-test", cache_dir={cache!r},
        columns={{"instruction": "question", "output": "answer"}}, concurrency={conc}, num_workers=2, progress=False,
    )
except InterruptedRun as e:
    print("interrupted:", e, flush=True)
    sys.exit(1)
print("done", flush=True)
"""


def test_ctrl_c_stops_every_worker_and_a_rerun_pays_at_most_what_was_in_flight(judge, tmp_path):
    per_worker, n = 8, 1000  # the Ctrl-C at 200 replies: ~1 s of work left at 2 x 8 in flight, 20 ms a reply
    judge.configure(latency=0.02)
    script = tmp_path / "job.py"
    tests = str(Path(__file__).parent)
    script.write_text(JOB.format(tests=tests, n=n, url=judge.base_url, cache=str(tmp_path / "cache"), conc=per_worker))
    # its own session, as a terminal's foreground group: Ctrl-C reaches the parent and its workers
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while judge.stats()["ok"] < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 1 and "interrupted:" in out and "run the same command again" in out
    # the true count: the workers' stores wrote them, and their reports brought the count to the parent (before,
    # "The replies the workers received are saved": the parent writes none)
    said = re.search(r"interrupted\. ([\d,]+) replies of this run are saved in the cache", out)
    assert said is not None, out
    saved = int(said.group(1).replace(",", ""))
    # the workers and the forkserver end with the parent
    assert _session_gone(p.pid), f"a process of the interrupted run is still alive {SESSION_WAIT_S:.0f} s later"
    first = judge.stats()["ok"]
    assert first < n
    paid = judge.stats()["requests"]

    judge.configure(latency=0)
    scored = score(
        qa_dataset(n), ["QA_Clarity"], judge, tmp_path, num_workers=2, concurrency=per_worker, progress=False
    )
    st = judge.stats()
    assert st["prompts"] == n and len(scored["errors"]) == 0
    assert st["duplicates"] <= 2 * per_worker  # at most what both workers had in flight at the Ctrl-C
    # the run history counts what the interrupted run paid for: the workers' counters reach it after a Ctrl-C
    interrupted, rerun = scored.summary.runs
    assert abs(interrupted["requests"] - paid) <= 2 * per_worker  # those in flight may not have reached the server
    assert rerun["requests"] == st["requests"] - paid
    assert rerun["requests"] == n - saved  # the rerun paid for every row the Ctrl-C's count did not say was saved


def test_progress_of_the_workers_is_summed(judge, tmp_path):
    seen = []
    score(dup_dataset(300, 300), ["QA_Clarity"], judge, tmp_path, num_workers=3, progress=seen.append)
    assert seen and seen[-1].rows_done == seen[-1].rows_total == 300 and seen[-1].requests == 300


def test_workers_with_samples_and_a_panel_send_each_request_once_across_workers(judge, tmp_path):
    """Samples and a panel's judges are parts of the row core that every worker runs (they were refused): each
    (prompt, judge, sample) is claimed in the shared store and sent by one worker, though both shards hold
    every prompt; the result is the single process's (tests/test_matrix.py compares every feature)."""
    kw = dict(samples=3, temperature=0.7, models="a,b", progress=False)
    out = score(dup_dataset(10, 5), ["QA_Clarity"], judge, tmp_path, num_workers=2, **kw)
    assert judge.stats()["requests"] == 5 * 2 * 3  # distinct prompts x judges x samples
    assert out.summary.requests == 30
    one = score(dup_dataset(10, 5), ["QA_Clarity"], judge, tmp_path / "one", **kw)
    assert out["train"].to_dict() == one["train"].to_dict()


def test_workers_against_a_server_that_is_down_stop_with_one_line_and_no_noise(tmp_path):
    """A stranger's first try of --workers with a wrong base URL: one line naming the problem, exit 1, and
    nothing else from the workers' exits (a Ctrl-C the parent sends every worker when one reports an error
    used to break the exit of the worker that reported it: a traceback and a leaked-semaphore warning)."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "HF_JUDGE_CACHE": str(tmp_path / "cache")}
    env["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"  # the bars' lines are not what this test reads
    args = ["--example", "--model", "judge", "--base-url", "http://127.0.0.1:9/v1", "--workers", "2"]
    p = subprocess.run(
        [sys.executable, "-m", "hf_judge.cli", "score", *args, "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 1, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hf-judge: stopped: cannot reach the server"), p.stderr


# How long the processes of a stopped run may take to end. A bound against a hang, not a measure: under load, a
# worker's exit (its event loop stopped, its store closed, the interpreter's teardown) took over 3 s. How soon the
# workers stop *sending* is asserted with the judge server's request count.
SESSION_WAIT_S = 120.0


def _session_gone(sid: int, within: float = SESSION_WAIT_S) -> bool:
    """Wait for the exits of every process of session ``sid`` (the run, its forkserver, its workers): True as soon
    as they have all ended, False after ``within`` s. They are not this process's children (no waitpid): the
    group's existence is the event looked at."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(sid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_kill_9_of_the_run_stops_its_workers_within_a_second(tmp_path):
    # a server of its own: this test counts every request a server receives after the kill
    with JudgeServer() as judge:
        judge.configure(latency=0.05)  # 2 x 8 in flight: 320 requests/s, 2,000 rows: ~6 s left at the kill
        script = tmp_path / "job.py"
        tests = str(Path(__file__).parent)
        script.write_text(JOB.format(tests=tests, n=2000, url=judge.base_url, cache=str(tmp_path / "cache"), conc=8))
        p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while judge.stats()["ok"] < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        at_kill = judge.stats()["requests"]
        # every worker (and the forkserver) ends with the run: nobody sends on for the rest of the split
        killed = time.monotonic()
        assert _session_gone(p.pid), f"a worker of the killed run is still alive {SESSION_WAIT_S:.0f} s later"
        after = judge.stats()["requests"]  # no process of the run is left to send more
        print(f"the workers ended {time.monotonic() - killed:.1f} s after the kill, {after - at_kill} requests later")
        assert after < 2000
        assert after - at_kill <= 2 * 8 * 10  # a second at most of both workers' pace, where it went on for ~6 s


def test_a_workers_stop_in_a_callback_prints_no_traceback(monkeypatch):
    """The parent stops its workers with SIGINT; a KeyboardInterrupt raised inside a weakref or GC callback can only
    be printed by Python ("Exception ignored in ..."), which made a run against a dead server print 8 lines of noise
    under load. A worker's unraisable hook keeps quiet about that stop, and only about it."""
    import types

    from hf_judge.engine.workers import _quiet_about_the_stop

    shown: list[BaseException] = []
    monkeypatch.setattr(sys, "__unraisablehook__", lambda u: shown.append(u.exc_value))
    _quiet_about_the_stop(types.SimpleNamespace(exc_value=KeyboardInterrupt()))
    assert shown == []
    real = ValueError("a real one")
    _quiet_about_the_stop(types.SimpleNamespace(exc_value=real))
    assert shown == [real]
