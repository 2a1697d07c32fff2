"""Durability: a healthy cache is never discarded, a paid reply never lost, a request never paid twice."""

from __future__ import annotations

import gc
import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from datasets import concatenate_datasets, load_from_disk
from helpers import qa_dataset, run_cli, score, score_args

import hf_judge.store.replies
from hf_judge import CacheLockedError, DiskFullError
from hf_judge.store.replies import ReplyStore

KEYS = [i.to_bytes(16, "big") for i in range(200)]


def _store_with_pending(path: Path) -> None:
    """A store whose last run's replies still wait in ``pending`` (the next open must write to merge them)."""
    s = ReplyStore(path)
    for i, k in enumerate(KEYS):
        s.put(k, f'{{"score": {i % 10 + 1}}}')
    s.close()


def test_a_locked_store_is_waited_for_then_reported_never_quarantined(tmp_path, caplog):
    path = tmp_path / "replies.sqlite3"
    _store_with_pending(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's run, stuck holding the write lock
    with caplog.at_level("WARNING", logger="hf_judge"), pytest.raises(CacheLockedError) as info:
        ReplyStore(path, lock_wait=0.3)
    assert str(path) in str(info.value) and "another process" in str(info.value)
    assert "waiting up to" in caplog.text and "damaged" not in caplog.text
    assert [p.name for p in tmp_path.iterdir() if "corrupt" in p.name] == []
    holder.execute("ROLLBACK")
    holder.close()
    store = ReplyStore(path, lock_wait=0.3)  # the lock released: every reply is still there
    assert len(store.get_many(KEYS)) == 200
    store.close()


class _OnLog(logging.Handler):
    """Calls ``action`` once, when a record of the ``hf_judge`` logger holds ``text``: an event, not a sleep."""

    def __init__(self, text: str, action) -> None:
        super().__init__()
        self.text, self.action, self.fired = text, action, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired and self.text in record.getMessage():
            self.fired = True
            self.action()


@pytest.fixture
def on_log():
    """``on_log(text, action)``: run ``action`` when hf_judge first logs ``text``."""
    logger, handlers = logging.getLogger("hf_judge"), []
    level = logger.level
    logger.setLevel(min(level or logging.INFO, logging.INFO))

    def add(text: str, action) -> _OnLog:
        handlers.append(_OnLog(text, action))
        logger.addHandler(handlers[-1])
        return handlers[-1]

    yield add
    for h in handlers:
        logger.removeHandler(h)
    logger.setLevel(level)


def test_a_lock_released_within_the_wait_is_waited_for(tmp_path, on_log):
    path = tmp_path / "replies.sqlite3"
    _store_with_pending(path)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    # released 0.1 s into the long wait, once the first, short one (0.5 s of the 1 s lock_wait) is over and said so
    said = on_log("waiting up to", lambda: threading.Timer(0.1, lambda: holder.execute("ROLLBACK")).start())
    store = ReplyStore(path, lock_wait=1.0)
    assert said.fired
    assert len(store.get_many(KEYS)) == 200
    store.close()
    holder.close()


def test_corruption_is_still_moved_aside(tmp_path, caplog):
    path = tmp_path / "replies.sqlite3"
    path.write_bytes(b"not a database at all " * 200)
    with caplog.at_level("WARNING", logger="hf_judge"):
        store = ReplyStore(path)
    assert "damaged" in caplog.text
    assert len([p for p in tmp_path.iterdir() if ".corrupt-" in p.name]) == 1
    store.close()


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 1 MB tmpfs: a real full disk (needs root, skipped elsewhere)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        # CI runs as root and must run these tests: there, no mount is a failure, never a silent skip
        if os.environ.get("CI"):
            pytest.fail("CI could not mount a 1 MB tmpfs (needs root): the full-disk tests did not run")
        pytest.skip("cannot mount a tmpfs here (needs root; CI runs these)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _resize(disk: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(disk)], check=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler


def test_a_full_disk_at_open_is_reported_and_the_store_untouched(small_disk):
    path = small_disk / "replies.sqlite3"
    _store_with_pending(path)
    before = path.read_bytes()
    filler = _fill(small_disk)
    with pytest.raises(DiskFullError) as info:
        ReplyStore(path)
    assert str(path) in str(info.value) and "Free at least" in str(info.value)
    assert [p.name for p in small_disk.iterdir() if "corrupt" in p.name] == []
    assert path.read_bytes()[:100] == before[:100]
    filler.unlink()
    store = ReplyStore(path)
    assert len(store.get_many(KEYS)) == 200
    store.close()


def test_identical_requests_of_one_run_are_sent_once(judge, tmp_path):
    judge.configure(latency=0.02, faults=[{"fault": "status", "status": 400, "match": "row-7:"}])
    ds = concatenate_datasets([qa_dataset(164)] * 50)  # 164 distinct prompts, each 50 times
    out = score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path, concurrency=64)
    assert judge.stats()["requests"] == 2 * 164  # once per distinct (prompt, metric)
    assert out.summary.requests == 328 and out.summary.shared == 2 * 8200 - 328 and out.summary.cache_hits == 0
    rows = out["train"].to_list()
    for i, row in enumerate(rows):
        assert row == rows[i % 164]
    errors = out["errors"].to_list()  # the failed request fails each row that waited on it, once per metric
    assert sorted((e["row"], e["metric"]) for e in errors) == sorted(
        (r, m) for r in range(7, 8200, 164) for m in ("QA_Clarity", "Q_All")
    )
    assert len({e["kind"] for e in errors}) == 1


def test_a_damaged_results_file_is_moved_aside_and_rebuilt_from_the_store(judge, tmp_path, caplog):
    ds = qa_dataset(60)
    good = score(ds, ["QA_Clarity"], judge, tmp_path)["train"].to_list()  # before its file is overwritten
    (result,) = (tmp_path / "cache" / "results").glob("*.arrow")
    for damage in (b"\x00garbage" * 50, result.read_bytes()[:300]):  # overwritten; cut short
        result.write_bytes(damage)
        judge.reset()
        with caplog.at_level("WARNING", logger="hf_judge"):
            again = score(ds, ["QA_Clarity"], judge, tmp_path)
        assert "damaged" in caplog.text and str(result) in caplog.text
        assert judge.stats()["requests"] == 0  # every reply came from the store
        assert again["train"].to_list() == good
        assert again.summary.cache_hits == 60
        del again
    assert len(list(result.parent.glob("*.corrupt-*"))) >= 1
    assert score(ds, ["QA_Clarity"], judge, tmp_path).summary.cached_splits == ["train"]  # rebuilt


def test_no_partial_results_file_is_left_behind(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 400, "match": "row-3:"}])
    ds = qa_dataset(40)
    results = tmp_path / "cache" / "results"
    first = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert len(first["errors"]) == 1 and len(list(results.glob("*.partial-*"))) == 1  # while `first` reads it
    second = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert len(second["errors"]) == 1
    assert len(list(results.glob("*.partial-*"))) == 1  # the first run's is gone, the second's in use
    first.save_to_disk(tmp_path / "first")  # still readable
    assert load_from_disk(tmp_path / "first")["train"].to_list() == second["train"].to_list()
    del first, second
    gc.collect()
    assert list(results.glob("*.partial-*")) == [] and list(results.glob("tmp*")) == []


def test_run_folders_of_killed_runs_are_removed_and_live_ones_kept(judge, tmp_path):
    """A kill -9 leaves its run folder (the map's output being written); the next run of the same result removes
    it, but never the folder of a run going on beside it."""
    from hf_judge.engine.driver import RUN_DIR_OWNER

    ds = qa_dataset(5)
    score(ds, ["QA_Clarity"], judge, tmp_path)
    results = tmp_path / "cache" / "results"
    (fp_file,) = results.glob("*.arrow")
    fp_file.unlink()  # the next run scores again (from the reply cache) and so looks for leftovers
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = RUN_DIR_OWNER.rsplit("_", 1)[0]
    killed = results / f"{fp_file.stem}.run-{host}_{dead.stdout.strip()}-0badc0de"
    live = results / f"{fp_file.stem}.run-{host}_{os.getppid()}-0000c0de"
    for folder in (killed, live):
        folder.mkdir()
        (folder / "tmp1234.arrow").write_bytes(b"partial")
    score(ds, ["QA_Clarity"], judge, tmp_path)
    assert not killed.exists() and live.exists()


def test_a_disk_full_mid_run_stops_sending_and_keeps_what_it_has(judge, small_disk):
    n, concurrency = 20_000, 32  # the 1 MB disk is full after 2,700-4,700 replies (measured): well under half
    judge.configure(latency=0.002)
    ds = qa_dataset(n)
    with pytest.raises(DiskFullError) as info:
        score(ds, ["QA_Clarity"], judge, small_disk, concurrency=concurrency)
    message = str(info.value)
    db = small_disk / "cache" / "replies.sqlite3"
    # the reply cache or the results folder, whichever found the disk full first
    assert "the disk that holds the " in message and str(small_disk / "cache") in message
    assert "more" in message and "run the same command again" in message
    sent = judge.stats()["requests"]
    assert sent < n // 2  # it stopped sending
    results = small_disk / "cache" / "results"
    left = [p.name for p in results.iterdir() if not p.name.endswith(".runs.json")]  # the run history may stay
    assert left == []  # no temporary file, no run folder, no partial result
    assert [p.name for p in db.parent.iterdir() if "corrupt" in p.name] == []

    _resize(small_disk, "64m")  # space again
    store = ReplyStore(db)
    kept = len(store)
    store.close()
    assert sent - kept <= 3 * concurrency  # lost: at most those in flight and one failed commit
    judge.reset()
    out = score(ds, ["QA_Clarity"], judge, small_disk, concurrency=concurrency)
    assert judge.stats()["requests"] == n - kept  # pays only for what was not stored
    assert len(out["errors"]) == 0 and None not in out["train"]["QA_Clarity"]


def test_a_full_disk_while_writing_the_scores_leaves_no_temporary_file(judge, small_disk):
    _resize(small_disk, "64m")
    ds = qa_dataset(5000)
    results = small_disk / "cache" / "results"
    for _ in range(2):  # every reply stored, and merged by the second run's open
        score(ds, ["QA_Clarity"], judge, small_disk)
        for p in results.iterdir():
            p.unlink()
    filler = _fill(small_disk)
    # room for the store's open (it needs 8-32 KB), not for the scores (5,000 rows need over 150 KB)
    filler.write_bytes(filler.read_bytes()[: -(64 << 10)])
    judge.reset()
    with pytest.raises(DiskFullError) as info:
        score(ds, ["QA_Clarity"], judge, small_disk)
    assert str(results) in str(info.value) and "run the same command again" in str(info.value)
    assert judge.stats()["requests"] == 0
    assert [p.name for p in results.iterdir() if not p.name.endswith(".runs.json")] == []  # no tmp*.arrow left


def test_a_run_on_a_locked_cache_stops_without_paying_again(judge, tmp_path, monkeypatch):
    """The measured case: a store quarantined because another process held its lock, every reply paid again."""
    ds = qa_dataset(300)
    score(ds, ["QA_Clarity"], judge, tmp_path)  # its replies wait in `pending`: the next open merges them
    cache = tmp_path / "cache"
    for p in (cache / "results").iterdir():
        p.unlink()
    monkeypatch.setattr(hf_judge.store.replies, "LOCK_WAIT_S", 0.5)
    holder = sqlite3.connect(cache / "replies.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    judge.reset()
    with pytest.raises(CacheLockedError):
        score(ds, ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] == 0
    holder.execute("ROLLBACK")
    holder.close()
    again = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] == 0 and again.summary.cache_hits == 300
    assert [p.name for p in cache.iterdir() if "corrupt" in p.name] == []


def test_cli_on_a_full_disk_exits_1_naming_the_path(judge, small_disk, tmp_path, capfd, monkeypatch):
    data = tmp_path / "data.jsonl"
    rows = (json.dumps({"question": f"cli-{i}: {i}*2?", "answer": str(2 * i)}) + "\n" for i in range(20_000))
    data.write_text("".join(rows))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(small_disk / "cache"))
    code, out, err = run_cli(capfd, *score_args(data, judge, "--output-dir", tmp_path / "out"))
    assert code == 1, err
    # the reply cache or the results folder, whichever found the disk full first
    assert "hf-judge: stopped: the disk that holds the " in err and str(small_disk / "cache") in err
    assert "Traceback" not in err, err[-3000:]
    assert judge.stats()["requests"] < 20_000 // 2


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's connection holding the write lock of a WAL store (a run can still open and read it)."""
    ReplyStore(path, lock_wait=5).close()  # the store exists, nothing to merge: its open needs no write
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def _sidecars(cache: Path) -> list[Path]:
    return sorted(cache.glob("replies.sqlite3.unsaved-*.jsonl"))


def test_a_cache_locked_mid_run_stops_the_run_and_loses_no_paid_reply(judge, tmp_path, monkeypatch, caplog):
    """The stranger's trial: replies were dropped after a silent wait, the run exited 0 and paid again next time."""
    n, concurrency = 400, 8
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(hf_judge.store.replies, "LOCK_WAIT_S", 1.0)
    holder = _hold_write_lock(cache / "replies.sqlite3")
    judge.configure(latency=0.05)  # ~2.5 s of requests: the lock outlasts the wait mid-run
    ds = qa_dataset(n)
    with caplog.at_level("WARNING", logger="hf_judge"), pytest.raises(CacheLockedError) as info:
        score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=concurrency)
    sent = judge.stats()["requests"]
    (sidecar,) = _sidecars(cache)
    assert str(cache / "replies.sqlite3") in str(info.value) and str(sidecar) in str(info.value)
    assert "run the same command again" in str(info.value)
    messages = [r.getMessage() for r in caplog.records]
    waiting = [i for i, m in enumerate(messages) if "is locked by another process; waiting up to 1 s" in m]
    kept = [i for i, m in enumerate(messages) if f"kept them in {sidecar}" in m]
    assert len(waiting) == 1 and len(kept) == 1 and waiting[0] < kept[0]  # said while waiting, not after
    text = sidecar.read_text()
    answered = len(text.splitlines())
    assert sent - concurrency <= answered <= sent < n  # it stopped sending; at most those in flight are cut off
    assert "sk-test" not in text
    holder.execute("ROLLBACK")
    holder.close()
    judge.reset()
    out = score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=concurrency)
    assert judge.stats()["requests"] == n - answered  # every reply the first run got is imported, none paid twice
    assert out.summary.cache_hits == answered and len(out["errors"]) == 0
    assert _sidecars(cache) == []


def test_a_cache_lock_released_within_the_wait_is_waited_for_mid_run(judge, tmp_path, monkeypatch, caplog, on_log):
    n, concurrency = 300, 8
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(hf_judge.store.replies, "LOCK_WAIT_S", 30.0)
    monkeypatch.setattr(
        hf_judge.store.replies, "LOCK_TRY_S", 0.1
    )  # a commit's try: the wait is said after 0.1 s, not 1 s
    holder = _hold_write_lock(cache / "replies.sqlite3")
    sent_at_release = []

    def release() -> None:  # mid-run, once the run said it waits: 0.1 s later, more replies kept in memory
        sent_at_release.append(judge.stats()["requests"])
        threading.Timer(0.1, lambda: holder.execute("ROLLBACK")).start()

    on_log("waiting up to 30 s (replies are kept in memory)", release)
    judge.configure(latency=0.02)  # ~0.75 s of requests
    ds = qa_dataset(n)
    with caplog.at_level("INFO", logger="hf_judge"):
        out = score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=concurrency)
    assert "is locked by another process; waiting up to 30 s (replies are kept in memory)" in caplog.text
    assert "is free again; saved the replies kept in memory" in caplog.text
    assert 0 < sent_at_release[0] < n  # the lock was taken and released mid-run
    assert judge.stats()["requests"] == n and len(out["errors"]) == 0
    assert _sidecars(cache) == []  # committed once the lock was free
    holder.close()
    for p in (cache / "results").iterdir():
        p.unlink()
    judge.reset()
    again = score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=concurrency)
    assert judge.stats()["requests"] == 0 and again.summary.cache_hits == n


def test_cli_on_a_cache_locked_mid_run_exits_1_naming_the_file(judge, tmp_path, monkeypatch, capsys):
    from hf_judge.cli import main

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(cache))
    monkeypatch.setattr(hf_judge.store.replies, "LOCK_WAIT_S", 1.0)
    data = tmp_path / "data.jsonl"
    rows = (json.dumps({"question": f"cli-{i}: {i}*2?", "answer": str(2 * i)}) + "\n" for i in range(400))
    data.write_text("".join(rows))
    holder = _hold_write_lock(cache / "replies.sqlite3")
    judge.configure(latency=0.05)
    code = main(score_args(data, judge, "--concurrency", "8", "--output-dir", tmp_path / "out"))
    err = capsys.readouterr().err
    holder.close()
    assert code == 1, err[-3000:]
    (sidecar,) = _sidecars(cache)
    assert "hf-judge: stopped: another process has held the write lock on the reply cache " in err
    assert str(cache / "replies.sqlite3") in err and str(sidecar) in err
    assert "is locked by another process; waiting up to 1 s" in err and "Traceback" not in err
    assert len(sidecar.read_text().splitlines()) > 0


class _TakingTurns:
    """Other workers on the store: a connection that holds the write lock all but microseconds of every 50 ms and
    commits each time, as claims and commits of workers starved of CPU do (no one transaction is long)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("CREATE TABLE IF NOT EXISTS turns (n INTEGER)")
        self.stop, self.commits = threading.Event(), 0
        self.commit_times: list[float] = []
        self.thread = threading.Thread(target=self._run)

    @property
    def span(self) -> float:
        """Seconds from the first commit to the last: how long the others took turns with the lock."""
        return self.commit_times[-1] - self.commit_times[0] if len(self.commit_times) > 1 else 0.0

    def _run(self) -> None:
        while not self.stop.is_set():
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT INTO turns VALUES (1)")
            self.stop.wait(0.05)
            self.conn.execute("COMMIT")
            self.commits += 1
            self.commit_times.append(time.monotonic())

    def __enter__(self) -> _TakingTurns:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.conn.close()


def test_a_lock_others_take_turns_with_is_waited_for_as_long_as_they_commit(tmp_path, caplog):
    """Two workers on one store under load: one was kept from the lock for over lock_wait while the others took
    turns with it, and stopped its run with CacheLockedError (issue 40, item 14; base: the writer's failure after
    lock_wait, a raw "database is locked" from the claim). The wait is bounded by progress, not wall time: nobody
    else committing for lock_wait stops the run (the tests above), others committing never does.
    Over a second: the turns must outlast lock_wait."""
    path = tmp_path / "replies.sqlite3"
    ReplyStore(path).close()
    store = ReplyStore(path, shared=True, lock_wait=1.0)
    try:
        with caplog.at_level("WARNING", logger="hf_judge"), _TakingTurns(path) as others:
            claimed: list = []
            threading.Timer(3.0, others.stop.set).start()  # 3 x lock_wait of turns, then the lock is free
            store.put(b"mine", '{"score": 3}', (5, 1))
            claimed.append(store.claim([b"k1", b"k2"]))  # tries each millisecond while the others commit
        store.flush()  # the others are done: the lock is free
        # the others did take turns with the lock all that time: for over twice lock_wait (a count of commits is
        # not a measure of that: a starved thread commits less often, CI once counted 16 in 3 s)
        assert others.commits >= 3 and others.span > 2 * 1.0
        assert store.failure is None
        assert claimed == [({}, [b"k1", b"k2"])]
        assert store.get_many([b"mine"]) == {b"mine": ('{"score": 3}', (5, 1))}
        assert "is locked by another process" not in caplog.text  # workers taking turns are no news
    finally:
        store.close()


def test_a_store_closed_while_others_take_turns_with_the_lock_writes_its_replies_there(tmp_path):
    """A worker that finishes its shard first closes its store while the others still commit. Base: close made one
    try for the lock, then put its replies in a sidecar, which only the next run reads: the other workers found no
    reply for the keys it had claimed and sent them again. Over a second: the turns must outlast lock_wait."""
    path = tmp_path / "replies.sqlite3"
    ReplyStore(path).close()
    store = ReplyStore(path, shared=True, lock_wait=1.0)
    with _TakingTurns(path) as others:
        threading.Timer(2.0, others.stop.set).start()
        store.put(b"mine", '{"score": 3}', (5, 1))
        store.close()  # waits for its turn while the others commit
    assert others.commits >= 3 and others.span > 1.0 and _sidecars(tmp_path) == []  # turns outlasted lock_wait
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT content FROM replies WHERE key = ?", (b"mine",)).fetchall() == [('{"score": 3}',)]


def test_a_claim_on_a_lock_nobody_commits_under_stops_with_cache_locked_error(tmp_path):
    """Base: a raw sqlite3.OperationalError ("database is locked") from the claim, after blocking the event loop
    for lock_wait."""
    path = tmp_path / "replies.sqlite3"
    store = ReplyStore(path, shared=True, lock_wait=0.5)
    holder = _hold_write_lock(path)
    try:
        assert store.claim([b"k"], wait=False) is None  # busy: the pipeline tries again a millisecond later
        with pytest.raises(CacheLockedError) as info:
            store.claim([b"k"])
        assert str(path) in str(info.value) and "run the same command again" in str(info.value)
        holder.execute("ROLLBACK")
        assert store.claim([b"k"], wait=False) == ({}, [b"k"])  # free again: the next claim takes it
    finally:
        holder.close()
        store.close()


def test_a_sidecar_is_imported_once_even_into_a_fresh_store(tmp_path, caplog):
    path = tmp_path / "replies.sqlite3"
    path.write_bytes(b"not a database at all " * 200)  # moved aside: the sidecar's replies go to the fresh store
    sidecar = tmp_path / "replies.sqlite3.unsaved-1-2.jsonl"
    lines = [
        json.dumps({"key": k.hex(), "content": f'{{"score": {i}}}', "usage": "10 2"}) for i, k in enumerate(KEYS[:3])
    ]
    sidecar.write_text("\n".join(lines) + '\n{"key": "00ff", "cont')  # cut short by a crash
    with caplog.at_level("WARNING", logger="hf_judge"):
        store = ReplyStore(path)
    assert store.get_many(KEYS) == {k: (f'{{"score": {i}}}', (10, 2)) for i, k in enumerate(KEYS[:3])}
    assert "skipped 1 damaged lines" in caplog.text and not sidecar.exists()
    store.close()
