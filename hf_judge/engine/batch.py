"""Batch mode: the requests of a run sent through a provider's batch API (OpenAI's ``/v1/files`` and
``/v1/batches``, which other providers and vLLM's ``run-batch`` speak too) instead of one by one.

Only the transport differs from an online run. The split's requests are rendered as the pipeline renders
them (same bodies, same reply-store keys: a line's ``custom_id`` is the key in hex); those the reply store
holds are not sent; the rest are packed into JSONL files within the provider's limits, uploaded and
submitted. Collected replies are validated as online ones and written into the reply store, and the
ordinary pipeline then builds the result from the store (its rows, columns and ``errors`` split).

Resumable: the store's SQLite file also holds the batch book, tables that say which batch each
request is in (``batch_requests``), which requests each batch file was sent (``batch_members``: a batch's
output is accepted for those only) and what became of each batch file (``batch_jobs``). Each step is
recorded before the next one starts: a file is written and its requests assigned to it in one
transaction, then uploaded (its id recorded), then submitted (the batch id recorded). A run that stops
anywhere (Ctrl-C, kill -9, ``no_wait``) is picked up by the next one: a written file is uploaded (or the
upload that a kill hid is found by its file name), an uploaded one is submitted (or the batch a kill hid is
found by its input file), and batches in flight are collected, never submitted again.

A panel of judges: one runner per judge (its server, model and key; :func:`run_all` drives them together),
each judge's batches holding its own requests only. The book is shared: a runner follows the batches of its
server and model (``batch_jobs.model``), and a request's key says which judge it is.

Partial outcomes: a line that failed, one a batch left undone (expired, cancelled, failed as a whole) and
a reply that fails validation are resubmitted in a new batch (or, with ``batch_fallback="online"``, left
to the online pipeline) until each has had ``retries + 1`` tries; then they are error rows of their kind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import (
    AuthenticationError,
    BatchesPending,
    ConfigError,
    ErrorKind,
    ModelNotFoundError,
    RunStopped,
    ServerUnreachableError,
    http_kind,
)
from ..judging.metrics import Metric
from ..redact import scrub, scrub_registered
from ..store.replies import LOCK_WAIT_S, encode_meta
from ..transport.client import JudgeClient, Outcome

logger = logging.getLogger("hf_judge")

ENDPOINT = "/v1/chat/completions"
# The provider's states of a batch that will not change any more.
DONE = frozenset({"completed", "failed", "expired", "cancelled"})
# What a line that a finished batch did not run becomes, by the batch's state.
_UNDONE_KIND = {
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
_CHUNK = 500  # keys per SQL statement (under every SQLite's 999-parameter limit)


def submitted(path: Path, keys: list[bytes]) -> set[bytes]:
    """Of ``keys``, those in a batch submitted to the provider and not yet collected (read-only: a dry run
    writes nothing). A cache without batch tables has none."""
    if not keys or not path.exists():
        return set()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    try:
        out: set[bytes] = set()
        for i in range(0, len(keys), _CHUNK):
            part = keys[i : i + _CHUNK]
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

    def __init__(self, path: Path, server: str, model: str | None = None):
        self.path = Path(path)
        self.server = server
        # A panel's judges may share a server: each judge's runner follows the batches of its own model only
        # (a batch recorded before the book knew models, model NULL, is any runner's on that server).
        self.model = model
        self.importing = ""  # the runner's output file an import reads: a request it lacks is not resubmitted
        self.conn = sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_S * 1000)}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(_SCHEMA)
        if not any(row[1] == "model" for row in self.conn.execute("PRAGMA table_info(batch_jobs)")):
            try:
                self.conn.execute("ALTER TABLE batch_jobs ADD COLUMN model TEXT")
            except sqlite3.OperationalError:  # another process added it first
                pass

    def close(self) -> None:
        self.conn.close()

    def transaction(self) -> _Transaction:
        return _Transaction(self.conn)

    # -- jobs -----------------------------------------------------------------
    def jobs(self, states: Iterable[str] | None = None, every_server: bool = False) -> list[Job]:
        q = "SELECT name, state, requests, file_id, batch_id, base_url, message, prompt_tokens, completion_tokens, "
        q += "done, failed, created FROM batch_jobs"
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
                "INSERT INTO batch_jobs (name, server, model, base_url, state, requests, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, self.server, self.model, base_url, state, len(keys), time.time()),
            )
            self._assign(keys, name)

    # -- requests -------------------------------------------------------------
    def states(self, keys: list[bytes]) -> dict[bytes, tuple[str | None, int]]:
        """key -> (job, attempts) for the keys the book knows."""
        out: dict[bytes, tuple[str | None, int]] = {}
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            q = f"SELECT key, job, attempts FROM batch_requests WHERE key IN ({','.join('?' * len(chunk))})"
            for k, job, attempts in self.conn.execute(q, chunk):
                out[k] = (job, attempts)
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
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
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
        return self.conn.execute(
            "SELECT count(*) FROM batch_requests WHERE job IS NULL AND attempts < ?", (tries,)
        ).fetchone()[0]


class _Transaction:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def line(key: bytes, body: bytes) -> bytes:
    """One request line of a batch file, in OpenAI's format: the body as the online run would send it.

    Example:
        >>> line(bytes([1, 2]), b'{"model":"m"}')
        b'{"custom_id":"0102","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}\\n'
    """
    return b'{"custom_id":"%s","method":"POST","url":"%s","body":%s}\n' % (key.hex().encode(), ENDPOINT.encode(), body)


class Packer:
    """Writes request lines into files of at most ``max_requests`` lines and ``max_bytes`` bytes."""

    def __init__(self, folder: Path, max_requests: int, max_bytes: int, on_file: Callable[[Path, list], None]):
        self.folder = folder
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.on_file = on_file
        self.keys: list[tuple[bytes, str]] = []
        self.seen: set[bytes] = set()  # the keys of the file being written (a custom_id is unique per file)
        self.files = 0
        self.size = 0
        self._f: Any = None
        self._path: Path | None = None

    def add(self, key: bytes, metric: str, body: bytes) -> None:
        data = line(key, body)
        if len(data) > self.max_bytes:
            raise ConfigError(
                f"one request of metric {metric} takes {len(data):,} bytes, over batch_max_bytes={self.max_bytes:,}; "
                "raise --batch-max-bytes, or score without --batch"
            )
        if self._f is not None and (len(self.keys) >= self.max_requests or self.size + len(data) > self.max_bytes):
            self.flush()
        if self._f is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path = self.folder / f"hf_judge-{uuid.uuid4().hex[:16]}.jsonl"
            self._f = open(self._path, "wb")  # noqa: SIM115 - closed in flush
        self._f.write(data)
        self.size += len(data)
        self.keys.append((key, metric))
        self.seen.add(key)

    def flush(self) -> None:
        if self._f is None:
            return
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        path, keys = self._path, self.keys
        self._f, self._path, self.keys, self.size, self.seen = None, None, [], 0, set()
        assert path is not None
        self.on_file(path, keys)
        self.files += 1


def _tokens(usage: Any) -> tuple[int, int]:
    if not isinstance(usage, dict):
        return 0, 0
    try:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (TypeError, ValueError):
        return 0, 0


class Reader:
    """Turns the lines of a batch output or error file into accepted replies and failed tries."""

    def __init__(self, book: BatchBook, client: JudgeClient, metrics: dict[str, Metric], report: BatchReport):
        self.book = book
        self.client = client
        self.metrics = metrics
        self.report = report
        self.unknown = 0  # lines of the last read whose custom_id is no request the batch (or an export) was sent
        self.malformed = 0  # lines of the last read that are no output line at all

    def read(self, lines: Iterable[bytes | _Oversized], job: str | None, source: str) -> tuple[int, int, int, int]:
        """(accepted, failed, prompt tokens, completion tokens) of the lines of one batch's output, ``job``'s
        (None: an import's, whose lines answer the requests of this cache's exports); ``source`` names it.

        A request is settled by its lines in their order in the file: its first valid reply is kept (the lines
        after it are duplicates, skipped), and its failed lines count one failed try (a valid line after them is
        still kept). Skipped too, and counted: a line for a request the batch was not sent (``unknown``: another
        batch's answer would overwrite the one paid for), and one that is no output line (``malformed``: not a
        JSON object with a custom_id in hex), with one warning. A line over ``max_reply_bytes`` is a failed try
        of its request.
        """
        self.unknown = self.malformed = 0
        first_bad = 0
        legacy = self.book.legacy(job)
        totals = [0, 0, 0, 0]
        chunk: list[tuple[bytes, dict | _Oversized]] = []
        for n, raw in enumerate(lines, 1):
            if isinstance(raw, bytes) and not raw.strip():
                continue
            parsed = _parse_line(raw)
            if parsed is None:
                self.malformed += 1
                first_bad = first_bad or n
            else:
                chunk.append(parsed)
            if len(chunk) >= _CHUNK:
                totals = [a + b for a, b in zip(totals, self._read_chunk(chunk, job, legacy), strict=True)]
                chunk = []
        totals = [a + b for a, b in zip(totals, self._read_chunk(chunk, job, legacy), strict=True)]
        if self.malformed:
            logger.warning(
                "skipped %d line(s) of %s that are no batch output line (a JSON object with the request's custom_id "
                "in hex), the first at line %d",
                self.malformed,
                source,
                first_bad,
            )
        return totals[0], totals[1], totals[2], totals[3]

    def _read_chunk(
        self, lines: list[tuple[bytes, dict | _Oversized]], job: str | None, legacy: bool
    ) -> tuple[int, int, int, int]:
        sent = self.book.members([k for k, _ in lines], job, legacy)
        good: dict[bytes, tuple[bytes, str, str | None]] = {}
        bad: dict[bytes, tuple[bytes, str, str, str | None]] = {}
        p_tok = c_tok = 0
        for key, doc in lines:
            if key not in sent:  # not a request this batch was sent (another batch's, another cache's)
                self.unknown += 1
                continue
            name = sent[key]
            if name is None or key in good:  # settled by an earlier line (or run): the first valid reply stays
                continue
            kept, failure, p, c = self._line(key, name, doc)
            if kept is not None:
                good[key] = kept
                bad.pop(key, None)
            elif key in bad:
                continue  # the same request failed again in this output: one try
            else:
                bad[key] = failure
            p_tok, c_tok = p_tok + p, c_tok + c
        self.book.accept(list(good.values()))
        failed = self.book.reject(list(bad.values()), job)
        return len(good), failed, p_tok, c_tok

    def _line(self, key: bytes, name: str, doc: dict | _Oversized) -> tuple[Any, Any, int, int]:
        """(accepted row or None, failure row or None, prompt tokens, completion tokens) of one line."""
        if isinstance(doc, _Oversized):
            cap = self.client.settings.max_reply_bytes
            message = (
                f"the batch line takes over {doc.size:,} bytes, more than max_reply_bytes={cap:,}; raise "
                "max_reply_bytes (--max-reply-bytes) if the replies are that big"
            )
            return None, (key, ErrorKind.BAD_RESPONSE, message, None), 0, 0
        response = doc.get("response") if isinstance(doc.get("response"), dict) else None
        error = doc.get("error")
        status = response.get("status_code") if response else None
        body = response.get("body") if response else None
        if error or status != 200 or not isinstance(body, dict):
            return None, (key, *_line_failure(status, body, error), None), 0, 0
        p, c = _tokens(body.get("usage"))
        metric = self.metrics.get(name)
        if metric is None:  # a request of another run's metric: keep the paid reply, that run validates it
            content = _stop_content(body)
            if content is None:
                return None, (key, ErrorKind.BATCH_FAILED, "the batch line holds no finished reply", None), p, c
            return (key, content, f"{p} {c}"), None, p, c
        stats, tokens = self.client.stats, self.client.batch_tokens
        before = (stats.prompt_tokens, stats.completion_tokens)
        outcome = self.client._handle_ok(metric, orjson.dumps(body))
        # the usage it counted, as the client counts it, was paid at the batch price (the budget's spent())
        tokens[0] += stats.prompt_tokens - before[0]
        tokens[1] += stats.completion_tokens - before[1]
        if outcome.value is None:
            return None, (key, str(outcome.kind), outcome.message or "", outcome.raw), p, c
        assert outcome.raw is not None
        # the store's own format of the usage column (with the score's probabilities, logprobs=True)
        return (key, outcome.raw, encode_meta(outcome.usage, outcome.logprobs)), None, p, c


class _Oversized:
    """A line longer than the cap, never held whole: its first bytes (where its custom_id is) and its size."""

    __slots__ = ("prefix", "size")

    def __init__(self, prefix: bytes, size: int):
        self.prefix = prefix
        self.size = size


_CUSTOM_ID = re.compile(r"(?:[0-9a-fA-F]{2})+")
# the custom_id of a line too long to parse: a key of the line's top object, before any nested one
_PREFIX_ID = re.compile(rb'\s*\{[^{}\[\]]*?"custom_id"\s*:\s*"((?:[0-9a-fA-F]{2})+)"')
_PREFIX = 4096


def _bounded_lines(f: Any, cap: int) -> Iterator[bytes | _Oversized]:
    """The lines of a binary file, each read in pieces of at most ``cap`` bytes: a longer line comes as an
    ``_Oversized`` (its first bytes and its size), so that a 400 MB line never takes 400 MB of memory.

    Example:
        >>> import io
        >>> [x if isinstance(x, bytes) else x.size for x in _bounded_lines(io.BytesIO(b"ab\\n" + b"c" * 9 + b"\\n"), 4)]
        [b'ab\\n', 10]
    """
    while raw := f.readline(cap + 1):
        if len(raw) <= cap or raw.endswith(b"\n"):
            yield raw
            continue
        prefix, size = raw[:_PREFIX], len(raw)
        while not raw.endswith(b"\n") and (raw := f.readline(cap + 1)):
            size += len(raw)
        yield _Oversized(prefix, size)


def _parse_line(raw: bytes | _Oversized) -> tuple[bytes, dict | _Oversized] | None:
    """(request key, the line's object) of an output line; None for one that is none (not JSON, not an object,
    no custom_id that is a key in hex). A line too long to parse is kept (a failed try) if its custom_id shows."""
    if isinstance(raw, _Oversized):
        m = _PREFIX_ID.match(raw.prefix)
        return (bytes.fromhex(m[1].decode()), raw) if m else None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    cid = doc.get("custom_id") if isinstance(doc, dict) else None
    if not isinstance(cid, str) or not _CUSTOM_ID.fullmatch(cid):
        return None
    return bytes.fromhex(cid), doc


def _refuse_requests_file(f: Any, path: Path, cap: int) -> None:
    """A ConfigError where the file's first line is a request (the export's file given in place of the output):
    read as output, each of its lines would count as a failed try of its request."""
    first = next((raw for raw in _bounded_lines(f, cap) if not isinstance(raw, bytes) or raw.strip()), b"")
    f.seek(0)
    if not isinstance(first, bytes):
        return
    try:
        doc = orjson.loads(first)
    except orjson.JSONDecodeError:
        return
    if isinstance(doc, dict) and "body" in doc and "method" in doc and "response" not in doc:
        raise ConfigError(
            f"{path.name} holds requests (custom_id, method, url, body), not a runner's output: give the JSONL the "
            "runner wrote (-o of vllm run-batch), whose lines carry a `response`"
        )


def _api_error(e: Any, base_url: str) -> RunStopped:
    """An error of the batch endpoints as the run's stop, with the next step."""
    status = e.status_code
    said = scrub(getattr(e, "message", "") or str(e))
    if status in (401, 403):
        return AuthenticationError(f"the batch API at {base_url} refused the key (HTTP {status}: {said})")
    if status in (404, 405):
        return ModelNotFoundError(
            f"{base_url} has no batch API (HTTP {status} from /files or /batches: {said}); use a server that offers "
            "one (OpenAI and several gateways do), export the requests for an offline runner "
            "(hf-judge batch export), or score without --batch"
        )
    return RunStopped(
        f"the batch API at {base_url} answered HTTP {status}: {said}. What was submitted is recorded in the reply "
        "cache: run the same command again to carry on."
    )


def _stop_content(body: dict) -> str | None:
    try:
        choice = body["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    ok = isinstance(content, str) and choice.get("finish_reason") == "stop"
    return scrub_registered(content) if ok else None


def _line_failure(status: Any, body: Any, error: Any) -> tuple[str, str]:
    """(kind, message) of a line that failed inside a batch."""
    if isinstance(error, dict):
        return ErrorKind.BATCH_FAILED, scrub(f"the batch line failed: {error.get('code')}: {error.get('message')}")
    msg = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        msg = str(body["error"].get("message", ""))
    if isinstance(status, int) and status != 200:
        return http_kind(status), scrub(f"the batch line got HTTP {status}: {msg}".rstrip(": "))
    return ErrorKind.BATCH_FAILED, "the batch line holds no chat completion"


class BatchRunner:
    """Submits, follows and collects the batches of one run against one server (see the module docstring)."""

    def __init__(
        self,
        client: JudgeClient,
        api_key: str | None,
        store_path: Path,
        metrics: dict[str, Metric],
        *,
        sleep: Callable[[float], None] = time.sleep,
        api: Any = None,
        on_status: Callable[[str], None] | None = None,
        judge: str = "",
    ):
        self.client = client
        self.settings = client.settings
        self.tries = self.settings.retries + 1
        self.judge = judge  # a panel's judge (its column name), named in the errors of its batch API
        self.book = BatchBook(store_path, server_tag(client), client.model)
        self.folder = store_path.parent / "batches"
        self.report = BatchReport()
        self.reader = Reader(self.book, client, metrics, self.report)
        self.sleep = sleep
        self._api = api
        self._api_key = api_key
        self.on_status = on_status  # progress: a line on each change of the batches' states
        # A budget (max_cost, max_total_tokens): called before each pass submits, it raises to stop the run
        # while what that pass would submit is still unsent (score._batch_budget).
        self.budget: Callable[[], None] | None = None
        self._said = ""

    @property
    def api(self) -> Any:
        if self._api is None:
            from openai import OpenAI

            # The SDK retries its calls (connection errors, 429, 5xx): harmless for reads, and a repeated upload
            # costs nothing; a batch create is never retried blindly (see _create).
            self._api = OpenAI(base_url=self.client.base_url, api_key=self._api_key or "none", max_retries=5)
        return self._api

    def close(self) -> None:
        self.book.close()
        if self._api is not None:
            self._api.close()

    # -- the whole run ----------------------------------------------------------
    def run(self, splits: Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]], no_wait: bool) -> None:
        """Make the reply store hold every request's reply, or a failure the book records, for these splits.

        ``splits``: per split, a function that renders its requests afresh (pipeline.SplitRun.requests).
        """
        run_all([self], [splits], no_wait, self.budget)

    @contextmanager
    def errors(self) -> Iterator[None]:
        """The batch API's errors as the run's stops, naming the server (and a panel's judge)."""
        import openai

        where = f"judge {self.judge!r}: " if self.judge else ""
        try:
            yield
        except openai.APIStatusError as e:
            stop = _api_error(e, self.client.base_url)
            stop.args = (where + str(stop.args[0]), *stop.args[1:])
            raise stop from None
        except openai.APIConnectionError as e:
            raise ServerUnreachableError(
                f"{where}cannot reach the batch API at {self.client.base_url} ({e}). Batches already submitted are "
                "recorded in the reply cache: run the same command again once the server is back."
            ) from None

    # -- files for offline runners (vllm run-batch) ---------------------------------------
    def export(self, splits: Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]], path: Path) -> int:
        """Write every request the store lacks into one batch JSONL file; returns how many.

        The requests are recorded as those of the job ``export:<file name>``, so that :meth:`read_output`
        can validate their replies and name the lines an output file lacks.
        """
        name = f"export:{path.name}"
        tmp = path.with_name(path.name + ".tmp")
        n = 0
        with open(tmp, "wb") as f:
            with self.book.transaction():
                # an earlier export to the same file name is replaced: its requests are written again
                self.book.conn.execute("UPDATE batch_requests SET job = NULL WHERE job = ?", (name,))
                self.book.conn.execute("DELETE FROM batch_members WHERE job = ?", (name,))
                self.book.conn.execute("DELETE FROM batch_jobs WHERE name = ?", (name,))
                self.book.conn.execute(
                    "INSERT INTO batch_jobs (name, server, base_url, state, requests, created) "
                    "VALUES (?, ?, ?, 'exported', 0, ?)",
                    (name, self.book.server, self.client.base_url, time.time()),
                )
            for requests in splits:
                for chunk in _grouped(requests(), 2048):
                    keys = [k for k, _, _ in chunk]
                    have = self._stored(keys)
                    # an identical request earlier in the file is assigned to this export already
                    have.update(k for k, (job, _) in self.book.states(keys).items() if job == name)
                    todo = list({k: (k, m, b) for k, m, b in chunk if k not in have}.values())
                    f.write(b"".join(line(k, b) for k, _, b in todo))
                    self.book.assign([(k, m.name) for k, m, _ in todo], name)
                    n += len(todo)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.book.update(name, requests=n)
        return n

    def read_output(self, path: Path) -> tuple[int, int]:
        """Read a runner's output JSONL into the store: (replies accepted, lines failed or invalid)."""
        self.book.importing = path.name
        cap = self.settings.max_reply_bytes
        with open(path, "rb") as f:
            _refuse_requests_file(f, path, cap)
            accepted, failed, p_tok, c_tok = self.reader.read(_bounded_lines(f, cap), None, path.name)
        unknown = self.reader.unknown
        if unknown and not accepted + failed:
            # keys are made of the dataset, metrics, model and server: an import with other settings matches nothing
            raise ConfigError(
                f"none of the {unknown:,} lines of {path.name} answers a request exported to the cache "
                f"{self.book.path.parent}: import with the --cache-dir (and the dataset, --metrics, --model and "
                "--base-url) of the `hf-judge batch export` that wrote the requests"
            )
        if unknown:
            logger.warning("skipped %d lines of %s that answer no request exported to this cache", unknown, path.name)
        r = self.report
        r.collected, r.failed, r.prompt_tokens, r.completion_tokens = accepted, failed, p_tok, c_tok
        return accepted, failed

    # -- submission ---------------------------------------------------------------
    def _submit(self, requests: Iterator[list[tuple[bytes, Metric, bytes]]], retry: bool) -> int:
        """Pack the requests that need a (new) try into files and submit each as it is full. Returns how many."""
        packer = Packer(self.folder, self.settings.batch_max_requests, self.settings.batch_max_bytes, self._new_file)
        n = 0
        for chunk in _grouped(requests, 2048):
            keys = [k for k, _, _ in chunk]
            have = self._stored(keys)
            # a request assigned to a file written earlier in this pass is in the book already (committed with it)
            known = self.book.states([k for k in keys if k not in have])
            files = packer.files
            for key, metric, body in chunk:
                if packer.files != files:  # a file was just recorded: its keys are in the book now
                    known, files = self.book.states([k for k in keys if k not in have]), packer.files
                if key in have or key in packer.seen:  # identical requests go once, as the online pipeline shares them
                    continue
                state = known.get(key)
                if state is not None:
                    job, attempts = state
                    if job is not None and job.startswith("export:"):
                        job = None  # written for an offline runner: batch mode sends it itself
                    if job is not None or attempts >= self.tries or not retry:
                        continue  # in a batch already, or out of tries: its error row says why
                    self.report.resubmitted += 1
                packer.add(key, metric.name, body)
                n += 1
        packer.flush()
        self.report.submitted += n
        return n

    def _stored(self, keys: list[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        conn = self.book.conn
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            q = f"SELECT key FROM replies WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(k for (k,) in conn.execute(q, chunk))
            q = f"SELECT key FROM pending WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(k for (k,) in conn.execute(q, chunk))
        return found

    def _new_file(self, path: Path, keys: list[tuple[bytes, str]]) -> None:
        name = path.stem
        self.book.add_job(name, self.client.base_url, keys)
        logger.info("batch: wrote %s (%d requests)", path.name, len(keys))
        self._advance(Job(name, "written", len(keys)))

    def _resume(self) -> None:
        """Carry every file an earlier run left half-way (written, uploaded) to a submitted batch."""
        for job in self.book.jobs(["written", "uploaded"]):
            if job.state == "written" and not (self.folder / f"{job.name}.jsonl").exists():
                # never uploaded, and its file is gone (a cleaned cache): its requests go in the next pass
                self.book.release(job)
                continue
            self._advance(job)

    def _advance(self, job: Job) -> None:
        if job.state == "written":
            file_id = self._find_upload(job) or self._upload(job)
            self.book.update(job.name, file_id=file_id, state="uploaded")
            job.file_id, job.state = file_id, "uploaded"
        if job.state == "uploaded":
            batch = self._find_batch(job) or self._create(job)
            self.book.update(job.name, batch_id=batch.id, state=batch.status)
            self.report.batches += 1
            self.report.batch_ids.append(batch.id)
            logger.info("batch: submitted %s as %s (%d requests)", job.name, batch.id, job.requests)
            path = self.folder / f"{job.name}.jsonl"
            try:
                path.unlink()
            except OSError:
                pass

    def _create(self, job: Job) -> Any:
        """Create the batch of an uploaded file. Not retried blindly: a create whose reply was lost may have made
        a batch, so before each new try the provider's list is searched for it (a second one would be paid twice)."""
        import openai

        api = self.api.with_options(max_retries=0)
        for attempt in range(6):
            try:
                return api.batches.create(
                    input_file_id=job.file_id,
                    endpoint=ENDPOINT,
                    completion_window="24h",
                    metadata={"hf_judge": job.name},
                )
            except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError):
                if attempt == 5:
                    raise
            self.sleep(min(30.0, self.settings.backoff_base * 2**attempt))
            found = self._find_batch(job)
            if found is not None:
                return found
        raise AssertionError("unreachable")

    def _upload(self, job: Job) -> str:
        path = self.folder / f"{job.name}.jsonl"
        with open(path, "rb") as f:
            return self.api.files.create(file=(path.name, f), purpose="batch").id

    def _find_upload(self, job: Job) -> str | None:
        """The upload a kill hid: a file of the provider's named after the job (recorded only after it returned)."""
        for f in self.api.files.list(purpose="batch"):
            if f.filename == f"{job.name}.jsonl":
                return f.id
        return None

    def _find_batch(self, job: Job) -> Any:
        """The batch a kill hid: one the provider made from this file (recorded only after create returned)."""
        for b in self.api.batches.list(limit=100):
            if b.input_file_id == job.file_id:
                return b
        return None

    # -- collection ---------------------------------------------------------------
    def _poll(self) -> list[Job]:
        """One look at the batches in flight, collecting each that has ended; returns those still running."""
        for job in [j for j in self.book.jobs() if j.batch_id and j.state != "collected"]:
            batch = self.api.batches.retrieve(job.batch_id)
            counts = batch.request_counts
            if batch.status != job.state or (counts and counts.completed != job.done):
                self.book.update(
                    job.name,
                    state=batch.status,
                    done=counts.completed if counts else 0,
                    failed=counts.failed if counts else 0,
                )
            if batch.status in DONE:
                self._collect(job, batch)
        return [j for j in self.book.jobs() if j.batch_id and j.state != "collected"]

    def _status(self, live: list[Job]) -> None:
        by_state: dict[str, int] = {}
        for j in live:
            by_state[j.state] = by_state.get(j.state, 0) + 1
        states = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items()))
        done, total = sum(j.done for j in live), sum(j.requests for j in live)
        line = f"batches in flight: {states}; {done:,} of {total:,} requests done"
        logger.info("batch: %s", line)
        if line != self._said and self.on_status is not None:
            self._said = line
            self.on_status(line)

    def _collect(self, job: Job, batch: Any) -> None:
        files = [file_id for file_id in (batch.output_file_id, batch.error_file_id) if file_id]
        # one read of both files: a request is settled once, whichever file its lines are in
        lines = (raw for file_id in files for raw in self._lines(file_id))
        accepted, failed, p_tok, c_tok = self.reader.read(lines, job.name, f"batch {batch.id}")
        if self.reader.unknown:
            logger.warning(
                "skipped %d line(s) of batch %s that answer requests it was not sent (their own batches answer them)",
                self.reader.unknown,
                batch.id,
            )
        message = _batch_message(batch)
        undone = self.book.close_job(job, _UNDONE_KIND.get(batch.status, ErrorKind.BATCH_FAILED), message)
        self.book.update(job.name, prompt_tokens=p_tok, completion_tokens=c_tok, message=message, done=accepted)
        self._delete(batch.input_file_id, batch.output_file_id, batch.error_file_id)
        r = self.report
        if batch.id not in r.batch_ids:  # submitted by an earlier run (--no-wait, Ctrl-C): this run collected it
            r.batches += 1
            r.batch_ids.append(batch.id)
        r.collected += accepted
        r.failed += failed + undone
        r.prompt_tokens += p_tok
        r.completion_tokens += c_tok
        if batch.status != "completed" or failed or undone:
            logger.warning(
                "batch %s ended %s: %d replies accepted, %d failed or invalid, %d not run (%s)",
                batch.id,
                batch.status,
                accepted,
                failed,
                undone,
                message,
            )

    def _delete(self, *file_ids: str | None) -> None:
        """Delete a collected batch's files at the provider (its storage is limited); best effort, they expire too."""
        import openai

        for file_id in file_ids:
            if file_id:
                try:
                    self.api.files.delete(file_id)
                except openai.OpenAIError as e:
                    logger.debug("could not delete the batch file %s: %s", file_id, e)

    def _lines(self, file_id: str) -> Iterator[bytes | _Oversized]:
        """The file's lines, streamed through a local copy: a 200 MB output is never held in memory, nor is a
        line over ``max_reply_bytes``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"download-{file_id}-{uuid.uuid4().hex[:8]}.jsonl"
        try:
            with self.api.files.with_streaming_response.content(file_id) as r:
                r.stream_to_file(path)
            with open(path, "rb") as f:
                yield from _bounded_lines(f, self.settings.max_reply_bytes)
        finally:
            try:
                path.unlink()
            except OSError:
                pass


Splits = Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]]


def run_all(
    runners: Sequence[BatchRunner], splits: Sequence[Splits], no_wait: bool, budget: Callable[[], None] | None
) -> None:
    """Drive the batches of one run: one runner per judge (one for a run without a panel), ``splits[i]`` the
    requests of ``runners[i]``'s judge. The first pass collects the batches that have ended and submits what
    is in none, for every judge, before anything is waited for: a judge whose batches an earlier run left in
    flight does not hold up another's (a panel takes as long as its slowest judge's batches). Later passes wait
    for every batch, then resubmit the failed lines.

    ``budget`` (max_cost, max_total_tokens): called before each pass submits, it raises to stop the run while
    what that pass would submit is still unsent (score._batch_budget), for every judge at once.
    """
    resubmit = runners[0].settings.batch_fallback == "batch"
    tries = runners[0].tries
    first = True
    while True:
        if first and budget is not None:
            budget()  # before anything is uploaded: the files an earlier run left half-way are counted
        for r in runners:
            with r.errors():
                r._resume()
        if first:
            live = _poll_all(runners)
        else:
            _wait_all(runners, no_wait)
            if not (resubmit and runners[0].book.retryable(tries)):
                return
            if budget is not None:
                budget()  # the failed lines' next tries, now that the run has paid for the last pass
        n = 0
        for r, todo in zip(runners, splits, strict=True):
            with r.errors():
                n += sum(r._submit(requests(), retry=resubmit or first) for requests in todo)
        if not first and n == 0:
            return
        if no_wait and (n or (first and live)):
            _pending(runners)
        first = False


def _poll_all(runners: Sequence[BatchRunner]) -> list[Job]:
    """One look at every judge's batches in flight (those that ended are collected); returns those running."""
    left: dict[str, Job] = {}
    for r in runners:
        with r.errors():
            left.update((j.name, j) for j in r._poll())  # a batch of an older cache is every judge's on its server
    return list(left.values())


def _wait_all(runners: Sequence[BatchRunner], no_wait: bool) -> None:
    """Follow every judge's batches in flight, collecting each as it ends; with ``no_wait``, look once."""
    while True:
        left = _poll_all(runners)
        if not left:
            return
        if no_wait:
            _pending(runners)
        runners[0]._status(left)
        runners[0].sleep(runners[0].settings.batch_poll_s)


def _pending(runners: Sequence[BatchRunner]) -> None:
    jobs = [j for r in runners for j in r.book.jobs() if j.state not in ("collected", "exported")]
    jobs = list({j.name: j for j in jobs}.values())  # a batch of an older cache is every judge's on its server
    ids = ", ".join(j.batch_id or j.name for j in jobs[:5]) + (", ..." if len(jobs) > 5 else "")
    raise BatchesPending(
        f"{len(jobs)} batch(es) of {sum(j.requests for j in jobs):,} requests are running at the provider "
        f"({ids}); their ids are kept in the reply cache. Run the same command again (without --no-wait to "
        "wait for them) to collect them: nothing is submitted twice. `hf-judge batch status` shows them."
    )


def _batch_message(batch: Any) -> str:
    """The provider's own words for a batch that did not complete (its errors), else its state."""
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    words = "; ".join(
        f"{e.code}: {e.message}" + (f" (line {e.line})" if getattr(e, "line", None) else "") for e in errors[:5]
    )
    if batch.status == "completed":
        return "the batch completed without this request's line"
    base = {
        "expired": "the batch expired (its completion window ended) before this request ran",
        "cancelled": "the batch was cancelled before this request ran",
        "failed": "the whole batch failed",
    }.get(batch.status, f"the batch ended {batch.status}")
    return scrub(f"{base}: {words}" if words else base)


def _grouped(requests: Iterator[list[tuple[bytes, Metric, bytes]]], size: int) -> Iterator[list]:
    out: list = []
    for part in requests:
        out += part
        if len(out) >= size:
            yield out
            out = []
    if out:
        yield out
