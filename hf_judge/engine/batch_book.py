"""The batch book: what batch mode records in the reply store (tables beside the replies) before each next
step: the files and batches of a run, the requests each was sent, the tries of each request."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import (
    ErrorKind,
)
from ..store.replies import LOCK_WAIT_S
from ..transport.client import JudgeClient, Outcome
from ..transport.policy import Decision, classify

logger = logging.getLogger("hf_judge")


ENDPOINT = "/v1/chat/completions"


# The provider's states of a batch that will not change any more.
DONE = frozenset({"completed", "failed", "expired", "cancelled"})


# What a line that a finished batch did not run becomes, by the batch's state.
UNDONE_KIND = {
    "expired": ErrorKind.BATCH_EXPIRED,
    "cancelled": ErrorKind.BATCH_CANCELLED,
    "failed": ErrorKind.BATCH_FAILED,
    "completed": ErrorKind.BATCH_FAILED,
}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_jobs (
    name TEXT PRIMARY KEY, server TEXT NOT NULL, base_url TEXT, state TEXT NOT NULL, requests INTEGER NOT NULL,
    file_id TEXT, batch_id TEXT, created REAL, message TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS batch_requests (
    key BLOB PRIMARY KEY, metric TEXT NOT NULL, job TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    kind TEXT, message TEXT, raw TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_requests_job ON batch_requests (job);
CREATE TABLE IF NOT EXISTS batch_members (key BLOB NOT NULL, job TEXT NOT NULL, PRIMARY KEY (key, job)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_members_job ON batch_members (job);
"""


CHUNK = 500  # keys per SQL statement (under every SQLite's 999-parameter limit)


def final(kind: str | None) -> bool:
    """Whether a line that failed with ``kind`` has failed for good: online mode gives up on it at once (a
    content filter's refusal, an HTTP 400 or 422), so batch mode sends it no second time, in a batch or online.

    Example:
        >>> [final(k) for k in ("content_filter", "http_400", "http_500", "invalid_json", "batch_expired", None)]
        [True, True, False, False, False, False]
    """
    if kind is None:
        return False
    status = kind.removeprefix("http_")
    failure: int | str = int(status) if kind.startswith("http_") and status.isdigit() else kind
    return classify(failure) is Decision.GIVE_UP


def submitted(path: Path, keys: list[bytes]) -> set[bytes]:
    """Of ``keys``, those in a batch submitted to the provider and not yet collected (read-only: a dry run
    writes nothing). A cache without batch tables has none."""
    if not keys or not path.exists():
        return set()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    try:
        out: set[bytes] = set()
        for i in range(0, len(keys), CHUNK):
            part = keys[i : i + CHUNK]
            rows = conn.execute(
                "SELECT r.key FROM batch_requests r JOIN batch_jobs j ON r.job = j.name "
                f"WHERE j.batch_id IS NOT NULL AND r.key IN ({','.join('?' * len(part))})",
                part,
            )
            out.update(k for (k,) in rows)
        return out
    except sqlite3.Error:  # no batch tables yet, or a store the run itself will find damaged and set aside
        return set()
    finally:
        conn.close()


def in_flight(path: Path, server: str) -> tuple[int, int]:
    """(batches, requests) submitted to ``server`` (:func:`server_tag`) and not collected yet, read-only."""
    if not path.exists():
        return 0, 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    try:
        row = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(requests), 0) FROM batch_jobs "
            "WHERE server = ? AND batch_id IS NOT NULL AND state != 'collected'",
            (server,),
        ).fetchone()
        return int(row[0]), int(row[1])
    except sqlite3.Error:  # no batch tables yet, or a store the run itself will find damaged and set aside
        return 0, 0
    finally:
        conn.close()


def server_tag(client: JudgeClient) -> str:
    """Which server a batch belongs to, without what the URL may carry (user:password@, a key in the query)."""
    return hashlib.blake2b(client.server_id.encode(), digest_size=8).hexdigest()


@dataclass
class Job:
    """One batch file as the book records it."""

    name: str
    state: str
    requests: int
    file_id: str | None = None
    batch_id: str | None = None
    base_url: str | None = None
    message: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    done: int = 0
    failed: int = 0
    created: float = 0.0
    provider: str | None = None  # whose batch API (None: OpenAI's)


@dataclass
class BatchReport:
    """What batch mode did in this run, for the summary and the card."""

    batches: int = 0  # batches collected or submitted by this run
    submitted: int = 0  # requests this run submitted
    collected: int = 0  # replies this run collected and accepted
    resubmitted: int = 0
    failed: int = 0  # lines that came back failed, invalid or not run
    prompt_tokens: int = 0  # as the provider reported them for the collected lines
    completion_tokens: int = 0
    batch_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "batch_ids"}

    @classmethod
    def total(cls, reports: Iterable[BatchReport]) -> BatchReport:
        """The reports of a panel's judges as one: their batches, requests and tokens counted together."""
        out = cls()
        for r in reports:
            for k in out.__dataclass_fields__:
                setattr(out, k, getattr(out, k) + getattr(r, k))
        return out


class BatchBook:
    """The batch tables in the reply store's SQLite file (created beside ``replies``; older caches open as they were).

    Collected replies go straight into the store's keyed ``replies`` table, so that the pipeline that runs
    next in the same process finds them (its appended ``pending`` rows show only after a reopen).
    """

    def __init__(self, path: Path, server: str, model: str | None = None, provider: str | None = None):
        self.path = Path(path)
        self.server = server
        # A panel's judges may share a server: each judge's runner follows the batches of its own model only
        # (a batch recorded before the book knew models, model NULL, is any runner's on that server).
        self.model = model
        self.provider = provider  # recorded with each job (None: OpenAI's batch API)
        self.importing = ""  # the runner's output file an import reads: a request it lacks is not resubmitted
        self.conn = sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_S * 1000)}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(_SCHEMA)
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(batch_jobs)")}
        # model: a panel's judges on one server; provider: whose batch API a batch is at (NULL: OpenAI's)
        for column in ("model", "provider"):
            if column not in columns:
                try:
                    self.conn.execute(f"ALTER TABLE batch_jobs ADD COLUMN {column} TEXT")
                except sqlite3.OperationalError:  # another process added it first
                    pass

    def close(self) -> None:
        self.conn.close()

    def transaction(self) -> Transaction:
        return Transaction(self.conn)

    # -- jobs -----------------------------------------------------------------
    def jobs(self, states: Iterable[str] | None = None, every_server: bool = False) -> list[Job]:
        q = "SELECT name, state, requests, file_id, batch_id, base_url, message, prompt_tokens, completion_tokens, "
        q += "done, failed, created, provider FROM batch_jobs"
        where, args = [], []
        if not every_server:
            where.append("server = ?")
            args.append(self.server)
            if self.model is not None:
                where.append("(model IS NULL OR model = ?)")
                args.append(self.model)
        if states is not None:
            states = list(states)
            where.append(f"state IN ({','.join('?' * len(states))})")
            args += states
        if where:
            q += " WHERE " + " AND ".join(where)
        return [Job(*row) for row in self.conn.execute(q + " ORDER BY created, name", args)]

    def update(self, name: str, **values: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in values)
        with self.transaction():
            self.conn.execute(f"UPDATE batch_jobs SET {cols} WHERE name = ?", [*values.values(), name])

    def add_job(self, name: str, base_url: str, keys: list[tuple[bytes, str]], state: str = "written") -> None:
        """Record a written file and assign its requests (key, metric name) to it, in one transaction."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO batch_jobs (name, server, model, provider, base_url, state, requests, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, self.server, self.model, self.provider, base_url, state, len(keys), time.time()),
            )
            self._assign(keys, name)

    # -- requests -------------------------------------------------------------
    def states(self, keys: list[bytes]) -> dict[bytes, tuple[str | None, int, bool]]:
        """key -> (job, attempts, whether its last try failed for good: :func:`final`) for the keys the book knows."""
        out: dict[bytes, tuple[str | None, int, bool]] = {}
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            q = f"SELECT key, job, attempts, kind FROM batch_requests WHERE key IN ({','.join('?' * len(chunk))})"
            for k, job, attempts, kind in self.conn.execute(q, chunk):
                out[k] = (job, attempts, job is None and final(kind))
        return out

    def failure(self, key: bytes) -> Outcome:
        """How a request that batch mode could not score ends (its error row)."""
        row = self.conn.execute(
            "SELECT job, attempts, kind, message, raw FROM batch_requests WHERE key = ?", (key,)
        ).fetchone()
        if row is None or row[2] is None:
            job = row[0] if row is not None else None
            message = (
                f"no reply for this request in the imported output of {job.removeprefix('export:')}"
                if job is not None and job.startswith("export:")
                else (
                    f"this request is not among the requests exported to this cache, so {self.importing} cannot "
                    "answer it: import with the dataset, --metrics, --model, --base-url and --cache-dir of the "
                    "export, or export it (hf-judge batch export)"
                )
                if self.importing
                else "no batch brought this request's reply back; run the same command again to submit it"
            )
            return Outcome(None, None, ErrorKind.BATCH_MISSING, message, attempts=row[1] if row else 0)
        _, attempts, kind, message, raw = row
        return Outcome(None, raw, kind, message, attempts=attempts)

    def forget_failures(self, kinds: Iterable[str]) -> int:
        """``retry_errors``: the requests whose last try failed with one of ``kinds`` (a reply that failed
        validation) and are in no batch start again, with all their tries; returns how many."""
        kinds = [str(k) for k in kinds]
        with self.transaction():
            return self.conn.execute(
                "UPDATE batch_requests SET attempts = 0, kind = NULL, message = NULL, raw = NULL "
                f"WHERE job IS NULL AND kind IN ({','.join('?' * len(kinds))})",
                kinds,
            ).rowcount

    def final_failure(self, key: bytes) -> Outcome | None:
        """How a request ends whose batch line failed for good (:func:`final`); None for any other, which
        ``batch_fallback="online"`` sends online."""
        row = self.conn.execute("SELECT job, kind FROM batch_requests WHERE key = ?", (key,)).fetchone()
        return self.failure(key) if row is not None and row[0] is None and final(row[1]) else None

    def accept(self, rows: list[tuple[bytes, str, str | None]]) -> None:
        """Store accepted replies (key, content, usage as the store writes it) and close their requests."""
        if not rows:
            return
        rows.sort()
        with self.transaction():
            self.conn.executemany("INSERT OR REPLACE INTO replies (key, content, usage) VALUES (?, ?, ?)", rows)
            self.conn.executemany("DELETE FROM batch_requests WHERE key = ?", [(r[0],) for r in rows])

    def reject(self, rows: list[tuple[bytes, str, str, str | None]], job: str | None = None) -> int:
        """Record failed tries (key, kind, message, raw) of requests still in ``job`` (None: in an export, for an
        import): each is free for its next try. Returns how many were recorded: a request's repeated failures in
        one output count once (its first frees it)."""
        if not rows:
            return 0
        with self.transaction():
            return self.conn.executemany(
                "UPDATE batch_requests SET job = NULL, attempts = attempts + 1, kind = ?, message = ?, raw = ? "
                "WHERE key = ? AND " + ("job = ?" if job is not None else "job LIKE 'export:%'"),
                [(kind, message, raw, key, *([job] if job is not None else [])) for key, kind, message, raw in rows],
            ).rowcount

    def close_job(self, job: Job, kind: str, message: str) -> int:
        """Every request still assigned to ``job`` failed with ``kind``; returns how many."""
        with self.transaction():
            n = self.conn.execute(
                "UPDATE batch_requests SET job = NULL, attempts = attempts + 1, kind = ?, message = ?, raw = NULL "
                "WHERE job = ?",
                (kind, message, job.name),
            ).rowcount
            self.conn.execute("UPDATE batch_jobs SET state = 'collected' WHERE name = ?", (job.name,))
            self.conn.execute("DELETE FROM batch_members WHERE job = ?", (job.name,))  # no line of it comes any more
        return n

    def assign(self, keys: list[tuple[bytes, str]], job: str) -> None:
        """Assign requests (key, metric name) to ``job``, keeping the tries they have had."""
        with self.transaction():
            self._assign(keys, job)

    def _assign(self, keys: list[tuple[bytes, str]], job: str) -> None:
        self.conn.executemany(
            "INSERT INTO batch_requests (key, metric, job) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET job = excluded.job",
            [(k, m, job) for k, m in keys],
        )
        # which requests this file was sent, for good: `job` above is only a request's latest batch
        self.conn.executemany(
            "INSERT OR IGNORE INTO batch_members (key, job) VALUES (?, ?)", [(k, job) for k, _ in keys]
        )

    def legacy(self, job: str | None) -> bool:
        """Whether ``job`` (None: any export) was written before the book recorded its members (an older cache):
        its lines are then matched by the requests' latest batch, as that version did."""
        if job is not None:
            q = "SELECT NOT EXISTS (SELECT 1 FROM batch_members WHERE job = ?)"
            return bool(self.conn.execute(q, (job,)).fetchone()[0])
        q = (
            "SELECT EXISTS (SELECT 1 FROM batch_jobs j WHERE j.name LIKE 'export:%' AND j.requests > 0 "
            "AND NOT EXISTS (SELECT 1 FROM batch_members m WHERE m.job = j.name))"
        )
        return bool(self.conn.execute(q).fetchone()[0])

    def members(self, keys: list[bytes], job: str | None, legacy: bool) -> dict[bytes, str | None]:
        """Of ``keys``, those ``job`` was sent (None: those of any export, for an import), each with its metric,
        or None where the request is settled already (its reply stored by an earlier line or run)."""
        where, args = ("m.job = ?", [job]) if job is not None else ("m.job LIKE 'export:%'", [])
        old = "r.job = ?" if job is not None else "(r.job IS NULL OR r.job LIKE 'export:%')"
        out: dict[bytes, str | None] = {}
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            marks = ",".join("?" * len(chunk))
            q = "SELECT m.key, r.metric FROM batch_members m LEFT JOIN batch_requests r ON r.key = m.key "
            out.update(self.conn.execute(f"{q} WHERE {where} AND m.key IN ({marks})", [*args, *chunk]))
            if legacy:
                q = f"SELECT r.key, r.metric FROM batch_requests r WHERE {old} AND r.key IN ({marks})"
                out.update(self.conn.execute(q, [*args, *chunk]))
        return out

    def release(self, job: Job) -> None:
        """Forget a job that never reached the provider: its requests are free again, their tries unspent."""
        with self.transaction():
            self.conn.execute("UPDATE batch_requests SET job = NULL WHERE job = ?", (job.name,))
            self.conn.execute("DELETE FROM batch_members WHERE job = ?", (job.name,))
            self.conn.execute("DELETE FROM batch_jobs WHERE name = ?", (job.name,))

    def retryable(self, tries: int) -> int:
        """How many requests another batch would send: free, with tries left, and not failed for good."""
        q = "SELECT kind, count(*) FROM batch_requests WHERE job IS NULL AND attempts < ? GROUP BY kind"
        return sum(n for kind, n in self.conn.execute(q, (tries,)) if not final(kind))


class Transaction:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
