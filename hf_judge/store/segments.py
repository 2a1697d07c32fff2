"""The reply store on object storage: immutable segment files that every process publishes and reads.

SQLite cannot live on a network filesystem or in a bucket, so a ``cache_dir`` that is an fsspec URL
(``s3://bucket/prefix``, ``gs://``, ``az://``, ``file:///shared/path``) is the store's durable, shared
home, and each process keeps its fast SQLite store on local disk as before (``local_cache_dir``, by
default a folder under the user cache keyed by the URL). What a process adds to its local store it also
publishes to ``<url>/segments/`` as one Parquet file per batch (key, content, usage: what the store's
table holds, nothing more): every ``PUBLISH_S`` seconds, or every ``PUBLISH_N`` replies, whichever comes
first, and at close (Ctrl-C included, and at interpreter exit). A ``kill -9`` loses at most the replies
of one publish interval from the shared store (the local one has them all). A segment the store refuses (a
bucket that refuses writes, a network down) is kept beside the local store, in ``unpublished/``, as the file it
would have put, and put by the next publish of any run on this machine (at the next run's start at the latest):
no reply paid here stays out of the shared store for good. At open, and every
``PULL_S`` seconds, a process lists the segments and imports, into its local store, those it has not
read yet (their names are kept in the local store's ``segments`` table, so a restart reads only new
ones); ``generation`` counts the imports that added replies, so that a run looks a row up again just
before sending it when, and only when, replies came in since its first lookup. A segment that cannot be read
(damaged, or another tool's whose columns cannot be cast to the store's types) is skipped with a warning, by
runs and by :func:`compact` alike. A segment is written whole or not at all (one object put; on a local
filesystem a temporary name, then a rename), never rewritten, so no lock is needed across machines.
:func:`compact` merges many segments into one while runs go on: the merged segment is written first, then
its inputs deleted, and a reader that finds a segment gone skips it (its replies are in the merged one,
listed next time).

Segments say what was paid once it is published; what is being paid is said by claims. Within one machine,
processes that share a local store claim requests in it before sending them (see :mod:`hf_judge.store.replies`);
across machines, each node claims the requests it is about to send in ``<url>/claims/`` (one small object per
batch of keys, with a lease), and the earliest live claim of a key pays while the others wait for its reply to
come with the segments (:mod:`hf_judge.store.leases`, which also says why no conditional write is needed). So two
nodes started together on the same rows pay each request once, and a node killed mid-run frees its claims when
its lease ends. ``HF_JUDGE_CLAIMS=0`` turns the claims across machines off (a node alone saves their second of
latency at the start; two nodes may then pay what they meet within one publish interval).

Example:
    >>> remote = Remote.of("s3://bucket/judge-cache", {"anon": False})
    >>> remote.url, remote.segment_dir
    ('s3://bucket/judge-cache', 's3://bucket/judge-cache/segments')
"""

from __future__ import annotations

import atexit
import hashlib
import io
import logging
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CacheError, ConfigError
from ..redact import resolve_storage_options
from .leases import CLAIMS, CLOCK_SKEW_S, LEASE_S, sweep
from .sqlite import connect, insert_flat

logger = logging.getLogger("hf_judge")

# A reply stored is published at most this many seconds later (a kill -9 loses at most this much of
# the shared store); a segment holds at most PUBLISH_N replies (one is written as soon as that many wait).
PUBLISH_S = 5.0
PUBLISH_N = 5000
# How often a process looks for the segments other processes published.
PULL_S = 5.0
SEGMENTS = "segments"
# Beside the local store: the segments a process could not put (the bucket refused them), as the files it would
# have put, published by the next publish of any run on this machine (the next run's start at the latest).
UNPUBLISHED = "unpublished"
SUFFIX = ".parquet"
# Segments read per request to the store (fsspec fetches them concurrently); bounds the memory of an import.
_READ_BATCH = 64
# Rows imported in one transaction at most (memory: ~150 bytes of Python objects a row).
_IMPORT_ROWS = 200_000
# The local store's record of the segments imported into it (an older hf-judge ignores the table).
_SEEN_SCHEMA = "CREATE TABLE IF NOT EXISTS segments (name TEXT PRIMARY KEY) WITHOUT ROWID"
# The package that gives fsspec each protocol, and hf-judge's extra that installs it, for the error that names them.
_PACKAGES = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
}


def is_url(path: Any) -> bool:
    """Whether a ``cache_dir`` is an fsspec URL (``s3://...``, ``file://...``) rather than a local path.

    Example:
        >>> is_url("s3://bucket/cache"), is_url("/tmp/cache"), is_url("C:\\\\cache")
        (True, False, False)
    """
    return isinstance(path, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", path) is not None


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--storage-option``) as fsspec ``storage_options``; a dotted key nests
    (``client_kwargs.endpoint_url=http://...``), ``true``/``false``/numbers are typed.

    Example:
        >>> parse_storage_options(["anon=true", "client_kwargs.region_name=eu-west-1"])
        {'anon': True, 'client_kwargs': {'region_name': 'eu-west-1'}}
    """
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--storage-option takes KEY=VALUE, got {pair!r} (e.g. --storage-option anon=true)")
        typed: Any = {"true": True, "false": False}.get(value.lower(), value)
        if typed is value and re.fullmatch(r"-?\d+", value):
            typed = int(value)
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = typed
    return out


def has_credentials(url: str) -> bool:
    """Whether a URL carries credentials before its host or bucket (``s3://KEY:SECRET@bucket``). An ``@`` alone
    is no secret (``abfs://container@account.dfs.core.windows.net``), nor a ``:`` further down the path. A secret
    may hold ``/`` (AWS's do), so the colon is looked for in the text before the first ``@``.

    Example:
        >>> has_credentials("s3://AKIA:ab/cd@bucket/c"), has_credentials("abfs://c@acct.dfs.core.windows.net/p")
        (True, False)
    """
    rest = url.partition("://")[2]
    user, at, _ = rest.partition("@")
    return bool(at) and ":" in user and "/" not in user.partition(":")[0]


def credentials_message(what: str, scheme: str) -> str:
    """The error for credentials in a URL: it never repeats them, and says how to pass them instead."""
    return (
        f"{what} ({scheme}://...) holds credentials (KEY:SECRET@ before the bucket). A URL is shown in messages "
        "and logs and names the local cache folder, so hf-judge does not take secrets there. Remove them from the "
        "URL and give them in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
        "GOOGLE_APPLICATION_CREDENTIALS; AZURE_STORAGE_CONNECTION_STRING), or as storage options: "
        "storage_options={'key': ..., 'secret': ...} in Python, --storage-option key=... --storage-option "
        "secret=... on the command line (visible to other users of the machine in its process list)"
    )


def default_local_dir(url: str, root: Path) -> Path:
    """The local folder of the store whose shared home is ``url``: under ``root`` (the user cache), keyed
    by the URL, so that two URLs never mix and one URL finds its local store again."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", url.split("://", 1)[1])[:48].strip("_")
    return root / "remote" / f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Remote:
    """Where the shared store lives: an fsspec URL and its ``storage_options`` (never shown: they may
    hold credentials), and how often this process publishes."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    publish_s: float = PUBLISH_S
    publish_n: int = PUBLISH_N
    pull_s: float = PULL_S
    # Claims across machines (:mod:`hf_judge.store.leases`): their lease, the nodes' clock skew, on or off.
    lease_s: float = LEASE_S
    clock_skew_s: float = CLOCK_SKEW_S
    claims: bool = True

    @classmethod
    def of(cls, url: str, storage_options: dict[str, Any] | None = None, **timing: Any) -> Remote:
        """The remote of ``url`` (a trailing slash dropped), checked: a URL without a path is refused."""
        scheme, _, rest = url.partition("://")
        if has_credentials(url):
            raise ConfigError(credentials_message("cache_dir", scheme))
        url = f"{scheme}://{rest.rstrip('/')}"
        if not rest.strip("/"):
            raise ConfigError(f"cache_dir={url!r} names no bucket or folder; give one, e.g. s3://my-bucket/hf_judge")
        # HF_JUDGE_PUBLISH_S: a shorter interval bounds what a kill -9 loses more tightly (more, smaller segments)
        timing.setdefault("publish_s", float(os.environ.get("HF_JUDGE_PUBLISH_S") or PUBLISH_S))
        # HF_JUDGE_PULL_S: nodes that score the same rows side by side see each other's replies sooner (more listings)
        timing.setdefault("pull_s", float(os.environ.get("HF_JUDGE_PULL_S") or PULL_S))
        # HF_JUDGE_LEASE_S: how soon a killed node's claims free themselves (a shorter lease: more renewals)
        timing.setdefault("lease_s", float(os.environ.get("HF_JUDGE_LEASE_S") or LEASE_S))
        # HF_JUDGE_CLOCK_SKEW_S: how far apart the nodes' clocks may be; HF_JUDGE_CLAIMS=0: a node alone claims nothing
        timing.setdefault("clock_skew_s", float(os.environ.get("HF_JUDGE_CLOCK_SKEW_S") or CLOCK_SKEW_S))
        timing.setdefault("claims", os.environ.get("HF_JUDGE_CLAIMS", "1").strip().lower() not in ("0", "false", "no"))
        return cls(url, dict(storage_options or {}), **timing)

    @property
    def segment_dir(self) -> str:
        return f"{self.url}/{SEGMENTS}"

    def filesystem(self, folder: str = SEGMENTS) -> tuple[Any, str]:
        """(the fsspec filesystem, the path on it of ``folder``: the segments, or the claims); a missing package
        is a ConfigError."""
        import fsspec

        protocol = self.url.split("://", 1)[0].lower()
        try:
            fs, path = fsspec.core.url_to_fs(f"{self.url}/{folder}", **resolve_storage_options(self.storage_options))
        except ImportError as e:
            raise ConfigError(f"cache_dir={self.url!r} needs {missing_package(protocol)} ({e})") from None
        except ValueError as e:
            raise ConfigError(f"cache_dir={self.url!r}: {e}") from None
        return fs, path.rstrip("/")


def missing_package(protocol: str) -> str:
    """What to install for an fsspec ``protocol``: the package, and hf-judge's extra that carries it.

    Example:
        >>> missing_package("gs")
        'gcsfs: pip install gcsfs (or pip install "hf-judge[gcs]")'
    """
    if protocol not in _PACKAGES:
        return f"the fsspec package for {protocol}:// (see fsspec's list of known implementations)"
    pkg, extra = _PACKAGES[protocol]
    return f'{pkg}: pip install {pkg} (or pip install "hf-judge[{extra}]")'


def _protocols(fs: Any) -> set[str]:
    return set(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else {fs.protocol}


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is this machine's disk (``file://``): folders must be made there before files go in."""
    return bool({"file", "local"} & _protocols(fs))


def segment_names(fs: Any, path: str) -> list[str]:
    """The published segments' file names, oldest first (names start with their time); none yet: []."""
    try:
        fs.invalidate_cache(path)  # s3fs caches listings: a new segment must show
        listed = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    names = (p.rstrip("/").rsplit("/", 1)[-1] for p in listed)
    return sorted(n for n in names if n.endswith(SUFFIX) and not n.startswith("."))


def encode(rows: list[tuple]) -> bytes:
    """A segment's bytes: (key, content, usage) rows as one zstd Parquet table."""
    import pyarrow as pa

    table = pa.table(
        {
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "content": pa.array([r[1] for r in rows], pa.string()),
            "usage": pa.array([r[2] for r in rows], pa.string()),
        }
    )
    return write_table(table)


def write_table(table: Any) -> bytes:
    """A segment's bytes from an Arrow table of (key, content, usage)."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def read_table(data: bytes) -> Any:
    """A segment's bytes as an Arrow table of (key: binary, content: string, usage: string).

    Other Arrow tools write ``large_binary`` or ``string`` keys, ``large_string`` texts, an all-null ``usage``
    typed ``null``: such columns are cast, so that every segment's table has one schema (tables of two schemas
    cannot be concatenated). Rows without a key or a content, which the store cannot hold, are left out. A
    segment that cannot be read or cast raises (the caller skips it with a warning)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = pa.schema([("key", pa.binary()), ("content", pa.string()), ("usage", pa.string())])
    t = pq.read_table(io.BytesIO(data), columns=["key", "content", "usage"]).select(["key", "content", "usage"])
    if not t.schema.equals(schema):
        t = t.cast(schema)
    if t.column("key").null_count or t.column("content").null_count:
        t = t.filter(pc.and_(pc.is_valid(t.column("key")), pc.is_valid(t.column("content"))))
    return t


def decode(data: bytes) -> list[tuple]:
    """The (key, content, usage) rows of a segment's bytes."""
    t = read_table(data)
    keys, contents, usages = (t.column(c).to_pylist() for c in ("key", "content", "usage"))
    return list(zip(keys, contents, usages, strict=True))


def flat_rows(table: Any) -> list:
    """The rows of a (key, content, usage) table in key order, flat: key, content, usage, key, ..."""
    table = table.sort_by("key")
    values: list = [None] * (3 * table.num_rows)
    for i, c in enumerate(("key", "content", "usage")):
        values[i::3] = table.column(c).to_pylist()
    return values


def cat_some(fs: Any, paths: list[str]) -> dict[str, bytes]:
    """The bytes of those of ``paths`` that still exist (fetched concurrently where the filesystem can)."""
    try:
        return fs.cat(paths, on_error="omit")
    except FileNotFoundError:  # every one of them gone (fsspec raises when none is left to read)
        return {}


def put_segment(fs: Any, path: str, name: str, data: bytes) -> None:
    """Write one segment whole or not at all: an object store's put is atomic; a local or mounted
    filesystem gets a hidden temporary name first, then a rename."""
    target = f"{path}/{name}"
    if not is_local(fs):
        fs.pipe_file(target, data)
        return
    fs.makedirs(path, exist_ok=True)
    tmp = f"{path}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
    with fs.open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fs.mv(tmp, target)


def new_name(tag: str, seq: int) -> str:
    """A segment name no other process can take: time (ms, so names sort oldest first), ``tag``, sequence."""
    return f"{int(time.time() * 1000):013d}-{tag}-{seq:06d}{SUFFIX}"


def _process_tag() -> str:
    host = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:32]
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class SegmentSync:
    """One process's link between its local store (``local``, a SQLite file) and the shared segments.

    :meth:`add` queues a reply to publish; a thread publishes and pulls; :meth:`close` publishes the rest.

    Example:
        >>> sync = SegmentSync(Remote.of("s3://bucket/cache"), Path("/tmp/replies.sqlite3"))  # doctest: +SKIP
        >>> sync.pull(); sync.add((key, "reply", "12 5")); sync.close()  # doctest: +SKIP
    """

    def __init__(self, remote: Remote, local: Path, lock_wait: float = 60.0):
        self.remote = remote
        self.fs, self.path = remote.filesystem()
        self.conn = connect(local, lock_wait)
        self.conn.execute(_SEEN_SCHEMA)
        self.tag = _process_tag()
        self.seq = 0
        self.published = 0  # replies this process published
        self.imported = 0  # replies other processes published that this one imported
        self.backlog_published = 0  # replies of earlier refused publishes that this process published
        # Imports that added replies: a lookup made before it last changed may find more now (the pipeline
        # looks its rows up again before sending them, only then).
        self.generation = 0
        self.outbox = Path(local).parent / UNPUBLISHED
        self._backlog = False  # files wait in the outbox
        self._buffer: list[tuple] = []
        self._first_at = 0.0  # when the oldest reply in the buffer came
        self._lock = threading.Lock()  # the buffer
        self._io = threading.Lock()  # one publish or pull at a time (the thread, close)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failing = False
        self._thread: threading.Thread | None = None
        self._closed = False
        self.flushed = 0  # rows taken from the queue (published, or kept in the outbox)
        # Called with ``flushed`` once every row taken from the queue is in the store (the claims of their keys end).
        self.on_published: Callable[[int], object] | None = None

    def start(self) -> None:
        """Import what others published (now, so that the run's first lookups see it), then keep in sync."""
        try:
            if not self.pull():
                self._check_home()
        except CacheError:
            raise
        except Exception as e:  # noqa: BLE001 - any filesystem's error: the run cannot keep its promise
            raise CacheError(
                f"could not read the shared reply cache {self.remote.url}: {type(e).__name__}: {e}. Check the URL "
                "and its credentials (storage_options= / --storage-option, or the usual environment variables "
                "such as AWS_PROFILE, AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST, "
                "AZURE_STORAGE_CONNECTION_STRING), then run again."
            ) from None
        self._backlog = bool(self._outbox_files())
        if self._backlog:  # what an earlier run here could not publish: before anything else of this run
            self.publish()
        self._thread = threading.Thread(target=self._loop, name="hf_judge-segments", daemon=True)
        self._thread.start()
        atexit.register(self.close)  # an interrupted run whose store was never closed still publishes

    @property
    def pending(self) -> int:
        """Replies queued and not yet published."""
        with self._lock:
            return len(self._buffer)

    @property
    def queued(self) -> int:
        """Replies this process has queued so far (a ticket, as :meth:`add` returns)."""
        with self._lock:
            return self.flushed + len(self._buffer)

    def _check_home(self) -> None:
        """Nothing published yet: make sure there is somewhere to publish (a missing bucket is said now)."""
        if is_local(self.fs):
            self.fs.makedirs(self.path, exist_ok=True)
            return
        bucket = self.path.split("/", 1)[0]
        if not self.fs.exists(bucket):
            kind = "container" if {"az", "abfs"} & _protocols(self.fs) else "bucket"  # Azure's word for a bucket
            raise CacheError(
                f"the shared reply cache {self.remote.url}: the {kind} {bucket!r} does not exist (or these "
                "credentials cannot see it). Create it, or check the URL and credentials, then run again."
            )

    def add(self, row: tuple) -> int:
        """Queue one stored reply, (key, content, usage), for the next segment; how many rows this process has
        queued so far, this one included (its ticket: see ``on_published``)."""
        with self._lock:
            if not self._buffer:
                self._first_at = time.monotonic()
            self._buffer.append(row)
            if len(self._buffer) >= self.remote.publish_n:
                self._wake.set()
            return self.flushed + len(self._buffer)

    def _loop(self) -> None:
        pulled = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(min(0.25, self.remote.publish_s))
            self._wake.clear()
            with self._lock:
                full = len(self._buffer) >= self.remote.publish_n
                late = bool(self._buffer) and time.monotonic() - self._first_at >= self.remote.publish_s
            if late or full:
                self.publish(full_only=not late)
            if time.monotonic() - pulled >= self.remote.pull_s:
                pulled = time.monotonic()
                self._quietly(self.pull)
                if self._backlog and not (late or full):  # a refused publish: try again, even with nothing new
                    self._quietly(self.publish)

    def _quietly(self, step: Any) -> None:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - a store that cannot be reached now may be later
            if not self._failing:
                logger.warning("could not read the shared reply cache %s: %s (will try again)", self.remote.url, e)
            self._failing = True

    def publish(self, full_only: bool = False) -> bool:
        """Publish the queued replies as segments of at most ``publish_n``; False if the store refused them.

        Only those queued when it starts (``full_only``: only whole segments of them): what comes in meanwhile
        waits for the next segment, not a tiny one of its own. The outbox (what earlier publishes could not put)
        goes first; once the store refuses a segment, that one and the rest go to the outbox, not back to memory
        (a run whose bucket refuses writes for hours would hold them all), and wait for the next publish."""
        with self._io:
            refused = self._backlog and not self._publish_backlog()
            with self._lock:
                left = len(self._buffer)
            if full_only:
                left -= left % self.remote.publish_n
            while left > 0:
                with self._lock:
                    rows = self._buffer[: min(left, self.remote.publish_n)]
                left -= len(rows)
                name = new_name(self.tag, self.seq)
                self.seq += 1
                data = encode(rows)
                if not refused:
                    try:
                        put_segment(self.fs, self.path, name, data)
                    except Exception as e:  # noqa: BLE001 - network, permissions: keep them, try again later
                        refused = True
                        self._refused(e)
                if refused and not self._keep(name, data):
                    return False  # nor could the disk take them: they stay queued in memory
                with self._lock:
                    del self._buffer[: len(rows)]
                    self.flushed += len(rows)
                    self._first_at = time.monotonic()
                if not refused:
                    self._failing = False
                    self.published += len(rows)
                    self._mark_read(name)
            if not refused and self.on_published is not None:
                self.on_published(self.flushed)
            return not refused

    def _refused(self, e: Exception) -> None:
        if not self._failing:
            logger.warning(
                "could not publish to the shared reply cache %s: %s (the replies are kept in %s and published at "
                "the next chance: this run's next publish, or the next run's start on this machine)",
                self.remote.url,
                e,
                self.outbox,
            )
        self._failing = True

    def _mark_read(self, name: str) -> None:
        """This process's own segment: its replies are in the local store, so it is never imported."""
        try:
            self.conn.execute("INSERT OR IGNORE INTO segments VALUES (?)", (name,))
        except sqlite3.Error:
            pass  # read again at the next start: its replies are here already (OR IGNORE)

    def _outbox_files(self) -> list[Path]:
        try:
            return sorted(self.outbox.glob(f"*{SUFFIX}"))
        except OSError:
            return []

    def _keep(self, name: str, data: bytes) -> bool:
        """Write a segment the store refused to the outbox, whole or not at all; False if the disk refused too."""
        tmp = self.outbox / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            self.outbox.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.outbox / name)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            logger.warning("could not keep the unpublished replies in %s either: %s (kept in memory)", self.outbox, e)
            return False
        self._backlog = True
        return True

    def _publish_backlog(self) -> bool:
        """Put the outbox's segments under their own names, oldest first; False at the first the store refuses.
        Two processes of this machine may put one file both: the same bytes under the same name, no harm."""
        done = 0
        for f in self._outbox_files():
            try:
                data = f.read_bytes()
            except FileNotFoundError:
                continue  # another process of this machine published it
            try:
                put_segment(self.fs, self.path, f.name, data)
            except Exception as e:  # noqa: BLE001 - still refused: it stays in the outbox
                self._refused(e)
                return False
            self._mark_read(f.name)
            f.unlink(missing_ok=True)
            done += _rows_in(data)
        self._backlog = False
        if done:
            self.backlog_published += done
            logger.info("published %s replies an earlier publish could not put (kept in %s)", done, self.outbox)
        return True

    def pull(self) -> int:
        """Import the segments not read yet into the local store; the number of replies imported."""
        with self._io:
            names = segment_names(self.fs, self.path)
            if not names:
                return 0
            seen = {n for (n,) in self.conn.execute("SELECT name FROM segments")}
            new = [n for n in names if n not in seen]
            count = 0
            tables: list = []
            read: list[str] = []
            for i in range(0, len(new), _READ_BATCH):
                paths = [f"{self.path}/{n}" for n in new[i : i + _READ_BATCH]]
                # a segment compacted away since the listing is skipped: the merged one holds its replies
                got = cat_some(self.fs, paths)
                for p in paths:
                    if p in got:
                        read.append(p.rsplit("/", 1)[-1])
                        tables += self._decode(read[-1], got[p])
                if sum(t.num_rows for t in tables) >= _IMPORT_ROWS:
                    count += self._import(read, tables)
                    tables, read = [], []
            if read:
                count += self._import(read, tables)
            self.imported += count
            return count

    def _decode(self, name: str, data: bytes) -> list:
        try:
            return [read_table(data)]
        except Exception as e:  # noqa: BLE001 - a damaged segment costs its replies, never the run
            logger.warning("skipped the damaged segment %s/%s (%s); its rows will be scored again", self.path, name, e)
            return []  # and marked read: a segment never changes

    def _import(self, names: list[str], tables: list) -> int:
        """Insert the rows of the segments ``names`` and mark them read, in one transaction: the rows of many
        segments in one key order dirty each page once (a transaction a segment took five times as long)."""
        import pyarrow as pa

        values = flat_rows(pa.concat_tables(tables)) if tables else []
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            insert_flat(conn, values, "INSERT OR IGNORE INTO replies")
            conn.executemany("INSERT OR IGNORE INTO segments VALUES (?)", [(n,) for n in names])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if values:
            self.generation += 1  # after the commit: a lookup that sees the new number sees the rows
        return len(values) // 3

    def close(self) -> None:
        """Stop the thread and publish what is queued (a few tries: a reply kept only locally is still kept)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
        for attempt in range(3):
            if self.publish():
                break
            if attempt < 2:
                time.sleep(0.5 * (attempt + 1))
        with self._lock:
            left = len(self._buffer)
        kept = sum(_rows_in(f) for f in self._outbox_files())
        if kept:
            logger.warning(
                "%s replies are not in %s yet (it could not be written): kept in %s, which the next run on this "
                "machine publishes first (or its next publish, if the store still refuses them at its start)",
                kept,
                self.remote.url,
                self.outbox,
            )
        if left:
            logger.warning(
                "%s replies of this run are only in the local reply cache, not in %s (it could not be written)",
                left,
                self.remote.url,
            )
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


def publish_backlog(remote: Remote, local: Path) -> int:
    """Publish what earlier runs of this machine could not (kept in ``unpublished/`` beside the local store
    ``local``), for a run that opens no store (its result was cached whole): the replies published, 0 when
    none waited or the store still refuses them (it says so; they wait for the next run).

    Example:
        >>> publish_backlog(Remote.of("s3://bucket/cache"), Path("/tmp/cache/replies.sqlite3"))  # doctest: +SKIP
        252
    """
    if not any((Path(local).parent / UNPUBLISHED).glob(f"*{SUFFIX}")):
        return 0  # the usual case: no listing, no request
    sync = SegmentSync(remote, Path(local))
    try:
        sync._backlog = True
        sync.publish()
        return sync.backlog_published
    finally:
        sync.conn.close()


def _rows_in(segment: bytes | Path) -> int:
    """The replies in a segment (its bytes or its file), from its footer (0 if it is unreadable or gone)."""
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(io.BytesIO(segment) if isinstance(segment, bytes) else segment).num_rows)
    except Exception:  # noqa: BLE001 - only for a message
        return 0


def compact(remote: Remote, *, min_segments: int = 2) -> tuple[int, int]:
    """Merge the published segments into one, safe while runs go on: (segments merged, replies kept).

    The merged segment is written before its inputs are deleted, so a reader sees every reply in one of
    them at any moment; a segment published during the compaction is left for the next one. The claims of
    runs whose lease ended a lease ago (killed nodes') are deleted too.

    Example:
        >>> compact(Remote.of("s3://bucket/judge-cache"))  # doctest: +SKIP
        (412, 1003520)
    """
    sweep(*remote.filesystem(CLAIMS), lease_s=remote.lease_s)
    fs, path = remote.filesystem()
    names = segment_names(fs, path)
    if len(names) < min_segments:
        return 0, 0
    tables = []
    merged = []
    for i in range(0, len(names), _READ_BATCH):
        paths = [f"{path}/{n}" for n in names[i : i + _READ_BATCH]]
        got = cat_some(fs, paths)
        for p in paths:
            if p not in got:
                continue  # another compaction took it: its replies are in that one's segment
            try:
                tables.append(read_table(got[p]))
            except Exception as e:  # noqa: BLE001 - one damaged segment must not block every compaction
                logger.warning(
                    "left the unreadable segment %s out of the compaction, where it is (%s: %s); runs skip it too. "
                    "Look at it, then delete it: no run can use its replies",
                    p,
                    type(e).__name__,
                    e,
                )
                continue
            merged.append(p)
    if len(merged) < min_segments:
        return 0, 0
    out = unique_keys(tables)
    put_segment(fs, path, new_name(f"compact-{_process_tag()}", 0), write_table(out))
    remove_all(fs, merged)
    _drop_stale_temporaries(fs, path)
    return len(merged), out.num_rows


def remove_all(fs: Any, paths: list[str]) -> None:
    """Delete ``paths``, ignoring those already gone (another compaction took them): in one batch where the
    filesystem can (S3's DeleteObjects: one request per 1,000), else one by one. ``rm``, not ``rm_file``: adlfs
    before 2024.12 has no ``rm_file`` (NotImplementedError)."""
    try:
        fs.rm(paths)
        return
    except FileNotFoundError:  # some were gone: the others may or may not be deleted yet
        pass
    for p in paths:
        try:
            fs.rm(p)
        except FileNotFoundError:
            pass


def unique_keys(tables: list) -> Any:
    """The rows of ``tables`` (Arrow, key/content/usage), each key once (its first row), in key order: in Arrow,
    so that compacting millions of replies takes about their size in memory, not Python objects."""
    import pyarrow as pa

    t = pa.concat_tables(tables)
    t = t.append_column("i", pa.array(range(t.num_rows), pa.int64()))
    first = t.group_by("key", use_threads=False).aggregate([("i", "min")]).column("i_min")
    return t.take(first).drop_columns(["i"]).sort_by("key")


def _drop_stale_temporaries(fs: Any, path: str, age_s: float = 3600.0) -> None:
    """Remove the temporary files of writers killed mid-write (an hour old: no live writer takes that long)."""
    if not is_local(fs):
        return
    for p in fs.ls(path, detail=False):
        name = p.rsplit("/", 1)[-1]
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                if time.time() - os.path.getmtime(p) > age_s:
                    fs.rm_file(p)
            except OSError:
                pass
