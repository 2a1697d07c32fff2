"""The durable reply store: every accepted reply, persisted as it arrives.

One SQLite database (WAL mode) under the cache folder maps the hash of a
rendered request to the reply's content and token usage. A writer thread
commits whatever has accumulated since its last commit, at most once every
5 ms (group commit), so a ``kill -9`` loses at most the replies of one commit
window: a few dozen at several thousand replies a second. Only accepted
replies are stored: failures are retried on the next run. Several processes
may write the same store at once (SQLite locking).

Replies are appended to a ``pending`` table and merged into the keyed
``replies`` table, in key order and in one transaction, when the store is next
opened (after a crash too). Keys are hashes, so inserting each reply into the
keyed table as it came dirtied one random page per reply: about 4 KB written
per reply and ten times the CPU of an append. The merge costs ~2 us a reply.
The price: lookups see the replies of earlier runs, not those of the run in
progress (nor those of a run going on beside it in another process), so two
identical rows of one run are both sent.

A damaged database is moved aside with a warning and a fresh one started:
the affected rows are scored again, never read wrong.
"""

from __future__ import annotations

import functools
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger("hf_judge")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replies (key BLOB PRIMARY KEY, content TEXT NOT NULL, usage TEXT) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS pending (key BLOB NOT NULL, content TEXT NOT NULL, usage TEXT)"
)
_STOP = object()
# Group commit: at most one commit per window, so a kill -9 loses at most the
# replies of one window plus one commit (a handful at usual rates).
COMMIT_WINDOW_S = 0.005


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=60000")
    conn.executescript(_SCHEMA)
    return conn


def _merge(conn: sqlite3.Connection) -> None:
    """Move the appended replies into the keyed table, in key order, atomically."""
    if conn.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is None:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO replies SELECT key, content, usage FROM pending ORDER BY key")
        conn.execute("DELETE FROM pending")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _decode_usage(text: str | None) -> tuple[int, int] | None:
    try:
        p, c = text.split()
        return int(p), int(c)
    except (AttributeError, ValueError):
        return None


# Rows per INSERT statement: 768 parameters, under every SQLite's limit (999
# before 3.32). sqlite3 releases the GIL around each step, once per statement;
# executemany steps once per row, and with the event loop and Dataset.map busy
# in other threads each of those releases waits up to a GIL switch interval to
# get it back: the writer then fell ever further behind on large runs.
_ROWS_PER_INSERT = 256


@functools.lru_cache(maxsize=8)
def _insert_sql(n: int) -> str:
    return "INSERT INTO pending VALUES " + ",".join(["(?,?,?)"] * n)


def _insert(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    n = _ROWS_PER_INSERT
    for i in range(0, len(rows), n):
        chunk = rows[i : i + n]
        conn.execute(_insert_sql(len(chunk)), [v for row in chunk for v in row])


class ReplyStore:
    """Request-hash -> reply content, durable across crashes and processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._read = _connect(self.path)
            self._read.execute("SELECT count(*) FROM (SELECT 1 FROM replies LIMIT 1)").fetchone()
            # A full check reads every page: affordable for small stores only.
            # Damage found later costs a warning and a re-score, never a crash.
            if self.path.stat().st_size < 64 << 20 and self._read.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            _merge(self._read)  # what earlier runs left behind
        except sqlite3.DatabaseError as e:
            self._quarantine(e)
            self._read = _connect(self.path)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_loop, name="hf_judge-store", daemon=True)
        self._write_conn = _connect(self.path)
        self._error: BaseException | None = None
        self.written = 0
        self._writer.start()

    def _quarantine(self, error: Exception) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        logger.warning(
            "the reply cache %s is damaged (%s); moved it to %s and starting a fresh one. "
            "Rows whose replies it held will be scored again.",
            self.path, error, aside,
        )
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.rename(Path(str(aside) + suffix))

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, tuple[str, tuple[int, int] | None]]:
        """The stored replies among ``keys``: key -> (content, (prompt, completion) tokens or None)."""
        found: dict[bytes, tuple[str, tuple[int, int] | None]] = {}
        if not keys:
            return found
        with self._lock:
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    q = f"SELECT key, content, usage FROM replies WHERE key IN ({','.join('?' * len(chunk))})"
                    for k, content, usage in self._read.execute(q, chunk):
                        found[k] = (content, _decode_usage(usage))
            except sqlite3.DatabaseError as e:
                logger.warning("could not read the reply cache (%s); those rows will be scored again", e)
        return found

    def put(self, key: bytes, content: str, usage: tuple[int, int] | None = None) -> None:
        """Queue one accepted reply (and its token usage, if known) for the next commit."""
        self._queue.put((key, content, None if usage is None else f"{usage[0]} {usage[1]}"))

    def _write_loop(self) -> None:
        q = self._queue
        conn = self._write_conn
        while True:
            item = q.get()
            batch = []
            stop = False
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    batch.append(item)
                else:
                    batch.append(item)
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
            rows = [b for b in batch if not isinstance(b, threading.Event)]
            if rows:
                try:
                    conn.execute("BEGIN")
                    _insert(conn, rows)
                    conn.execute("COMMIT")
                    self.written += len(rows)
                except sqlite3.Error as e:  # keep running: a lost write only costs a re-score
                    self._error = e
                    logger.warning("could not write to the reply cache %s: %s", self.path, e)
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
            for b in batch:
                if isinstance(b, threading.Event):
                    b.set()
            if stop:
                return
            if rows:
                # Let replies gather for the next commit: each commit costs
                # about the same whatever it holds (WAL frames, page writes),
                # and committing as fast as possible made several hundred
                # small ones a second on a fast server, which cost ~10 % of
                # the run's throughput. The window bounds what a kill -9 loses.
                time.sleep(COMMIT_WINDOW_S)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is committed."""
        ev = threading.Event()
        self._queue.put(ev)
        ev.wait(timeout)

    def close(self) -> None:
        """Commit what is queued and close (the next open merges this run's replies)."""
        if self._writer.is_alive():
            self._queue.put(_STOP)
            self._writer.join()
        for c in (self._read, self._write_conn):
            try:
                c.close()
            except sqlite3.Error:
                pass

    def __len__(self) -> int:
        with self._lock:
            return self._read.execute("SELECT count(*) FROM (SELECT key FROM replies UNION SELECT key FROM pending)").fetchone()[0]
