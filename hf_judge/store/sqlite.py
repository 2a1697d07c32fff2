"""The reply store's SQLite file: its tables, connections, merges, the ``usage`` column's encoding, claims and their
owners, the replies a run could not write (sidecars), and what a SQLite or OS error means (a full disk, a lock, a
damaged file).

:class:`~hf_judge.store.replies.ReplyStore` is built on these; the engines use the disk helpers
(``is_disk_full``, ``free_space``, ``human_bytes``) for their own files too.
"""

from __future__ import annotations

import errno
import functools
import glob
import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger("hf_judge")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replies (key BLOB PRIMARY KEY, content TEXT NOT NULL, usage TEXT) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS pending (key BLOB NOT NULL, content TEXT NOT NULL, usage TEXT);"
    # the stores open on this file (owner as in claims); shared: 1 once that store claims before it sends
    "CREATE TABLE IF NOT EXISTS openers (owner TEXT PRIMARY KEY, shared INTEGER NOT NULL) WITHOUT ROWID"
)
# Only shared stores create it: an older hf_judge opening the file ignores a table it does not know.
CLAIMS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims (key BLOB PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
)
# SQLite primary result codes (an extended code keeps its primary one in the low byte).
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 5, 6, 10, 11, 13, 26
# The WAL grows up to ~1,000 pages before each checkpoint: headroom a write needs beyond the replies.
WAL_HEADROOM = 4 << 20


class Damaged(sqlite3.DatabaseError):
    """quick_check found the database inconsistent."""


def error_code(e: BaseException) -> int:
    """The SQLite primary result code of ``e`` (0 for an error that has none), e.g. ``SQLITE_BUSY``."""
    return (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF


def is_disk_full(e: BaseException, path: Path | None = None) -> bool:
    """Whether ``e`` (an OSError, an Arrow IO error or a SQLite error) means that no space was left.

    SQLite reports ENOSPC as SQLITE_FULL when it grows a file, but as a bare
    I/O error when it sizes the WAL index (``-shm``): that one counts as a full
    disk when the disk that holds ``path`` has less than a WAL's headroom free.
    """
    if isinstance(e, sqlite3.Error):
        code = error_code(e)
        if code == SQLITE_FULL:
            return True
        if code == SQLITE_IOERR and path is not None:
            free = free_space(path)
            return free is not None and free < WAL_HEADROOM
        return False
    return isinstance(e, OSError) and (e.errno == errno.ENOSPC or "No space left on device" in str(e))


def free_space(path: Path) -> int | None:
    """Bytes free on the disk that holds ``path`` (or its nearest existing parent)."""
    for p in (path, *path.parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return None


def human_bytes(n: float | None) -> str:
    """``n`` bytes for a message, e.g. ``human_bytes(7_300_000) == "7 MB"``."""
    if n is None:
        return "unknown"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:,.0f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def connect(path: Path, lock_wait: float) -> sqlite3.Connection:
    """A connection to the store's file in WAL mode, its tables made, waiting up to ``lock_wait`` s for a lock."""
    conn = sqlite3.connect(path, timeout=lock_wait, check_same_thread=False, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(lock_wait * 1000)}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def data_version(conn: sqlite3.Connection) -> int | None:
    """``PRAGMA data_version``: a number that changes once another connection commits to the file (None when it
    cannot be read). It takes no lock, so a connection waiting for the write lock can tell a lock that moves
    (other writers take turns with it) from one held by a process that writes nothing."""
    try:
        return conn.execute("PRAGMA data_version").fetchone()[0]
    except sqlite3.Error:
        return None


class LockWait:
    """A wait for the write lock that runs out once nobody has committed to the file for ``limit`` s.

    Bounded by progress, not wall time: the workers (or runs) on one store take turns with the lock, and on a
    starved CPU one of them may wait a long time for its turn while the others commit, which is no failure. A
    process that holds the lock and writes nothing (a stuck run, a sqlite3 shell's open transaction) is one.

    Example:
        >>> wait = LockWait(conn, 60.0)  # doctest: +SKIP
        >>> while not try_to_begin():  # doctest: +SKIP
        ...     if wait.busy(): raise TimeoutError  # nobody committed for 60 s
        >>> wait.took()  # doctest: +SKIP
    """

    def __init__(self, conn: sqlite3.Connection, limit: float):
        self.conn, self.limit = conn, limit
        self.since: float | None = None  # while a wait lasts: when the lock was last seen to move
        self.stalled = False  # a try failed with nobody committing since the one before: the lock is held
        self._version: int | None = None

    def busy(self) -> bool:
        """A try found the lock taken: whether the wait has run out."""
        now = time.monotonic()
        version = data_version(self.conn)
        if self.since is None or (version is not None and version != self._version):
            self.since, self._version, self.stalled = now, version, False
            return False
        self.stalled = True
        return now - self.since >= self.limit

    def took(self) -> bool:
        """A try took the lock: the wait is over. Whether there was one."""
        waited = self.since is not None
        self.since, self.stalled = None, False
        return waited


def merge(conn: sqlite3.Connection, extra: list[tuple] | None = None) -> None:
    """Move the appended replies, and ``extra`` rows, into the keyed table, in key order, atomically."""
    if not extra and conn.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is None:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if extra:
            insert(conn, extra)
        conn.execute("INSERT OR REPLACE INTO replies SELECT key, content, usage FROM pending ORDER BY key")
        conn.execute("DELETE FROM pending")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
            conn.execute("ROLLBACK")
        raise


def encode_meta(usage: tuple[int, int] | None, logprobs: dict | None) -> str | None:
    """The ``usage`` column: ``"12 5"``, or with log-probabilities ``"12 5 {...}"`` (``"- - {...}"`` without usage)."""
    if logprobs is None:
        return None if usage is None else f"{usage[0]} {usage[1]}"
    head = "- -" if usage is None else f"{usage[0]} {usage[1]}"
    return f"{head} {json.dumps(logprobs, separators=(',', ':'))}"


def decode_meta(text: str | None) -> tuple[tuple[int, int] | None, dict | None]:
    """(usage, log-probability table) of a ``usage`` column; what cannot be read is None."""
    if not isinstance(text, str):
        return None, None
    parts = text.split(" ", 2)
    usage = None
    try:
        usage = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        pass
    table = None
    if len(parts) == 3:
        try:
            table = json.loads(parts[2])
        except ValueError:
            pass
    return usage, table if isinstance(table, dict) else None


# Rows per INSERT statement: 768 parameters, under every SQLite's limit (999
# before 3.32). sqlite3 releases the GIL around each step, once per statement;
# executemany steps once per row, and with the event loop and Dataset.map busy
# in other threads each of those releases waits up to a GIL switch interval to
# get it back: the writer then fell ever further behind on large runs.
_ROWS_PER_INSERT = 256


@functools.lru_cache(maxsize=16)
def _insert_sql(n: int, into: str = "INSERT INTO pending") -> str:
    return f"{into} VALUES " + ",".join(["(?,?,?)"] * n)


def insert(conn: sqlite3.Connection, rows: list[tuple], into: str = "INSERT INTO pending") -> None:
    n = _ROWS_PER_INSERT
    for i in range(0, len(rows), n):
        chunk = rows[i : i + n]
        conn.execute(_insert_sql(len(chunk), into), [v for row in chunk for v in row])


def insert_flat(conn: sqlite3.Connection, values: list, into: str = "INSERT INTO pending") -> None:
    """:func:`insert` of rows given flat (key, content, usage, key, ...): a large import builds that list from
    columns with slice assignments, not a tuple a row."""
    step = 3 * _ROWS_PER_INSERT
    for i in range(0, len(values), step):
        chunk = values[i : i + step]
        conn.execute(_insert_sql(len(chunk) // 3, into), chunk)


def delete_claims(conn: sqlite3.Connection, keys: Sequence[bytes]) -> None:
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        conn.execute(f"DELETE FROM claims WHERE key IN ({','.join('?' * len(chunk))})", chunk)


def read_sidecars(path: Path) -> tuple[list[Path], list[tuple]]:
    """The replies that earlier runs could not write to the store ``path`` (``<path>.unsaved-*.jsonl``, beside it), and
    the files that hold them."""
    files = sorted(path.parent.glob(glob.escape(path.name) + ".unsaved-*.jsonl"))
    read, rows = [], []
    for p in files:
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:  # another process imported it first
            continue
        except (OSError, UnicodeDecodeError) as e:
            logger.warning("could not read %s (%s); left it for a later run", p, e)
            continue
        bad = 0
        for line in lines:
            try:
                d = json.loads(line)
                row = (bytes.fromhex(d["key"]), d["content"], d["usage"])
            except (ValueError, KeyError, TypeError):
                row = None
            if row is None or not isinstance(row[1], str) or not isinstance(row[2], (str, type(None))):
                bad += 1
                continue
            rows.append(row)
        if bad:
            logger.warning("%s: skipped %s damaged lines; those rows will be scored again", p, bad)
        read.append(p)
    return read, rows


def take_claims(
    conn: sqlite3.Connection, keys: Sequence[bytes], owner: str, lease_s: float
) -> tuple[dict[bytes, tuple[str, tuple[int, int] | None]], list[bytes]]:
    """In the caller's transaction: (the replies stored among ``keys``, the keys claimed now for ``owner``). A key
    another live owner claimed, with a lease still running, is left out; a dead owner's claim is taken over."""
    found: dict[bytes, tuple[str, tuple[int, int] | None]] = {}
    mine: list[bytes] = []
    host = owner.partition(":")[0]
    now = time.time()
    dead: dict[str, bool] = {}
    for i in range(0, len(keys), 500):
        chunk = list(dict.fromkeys(keys[i : i + 500]))
        marks = ",".join("?" * len(chunk))
        for k, content, usage in conn.execute(f"SELECT key, content, usage FROM replies WHERE key IN ({marks})", chunk):
            found[k] = (content, decode_meta(usage)[0])
        missing = [k for k in chunk if k not in found]
        if not missing:
            continue
        held = {
            k: (who, expires)
            for k, who, expires in conn.execute(
                f"SELECT key, owner, expires FROM claims WHERE key IN ({','.join('?' * len(missing))})", missing
            )
        }
        take = []
        for k in missing:
            h = held.get(k)
            if h is not None and h[0] != owner and h[1] > now:
                if h[0] not in dead:
                    dead[h[0]] = owner_dead(h[0], host)
                if not dead[h[0]]:
                    continue
            take.append(k)
        if take:
            expires = now + lease_s
            conn.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", [(k, owner, expires) for k in take])
            mine += take
    return found, mine


def owner_dead(owner: str, host: str) -> bool:
    """Whether the process that holds a claim is gone: only knowable on this host (another's lease runs out)."""
    owner_host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if owner_host != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's live process
        return False
    return False
