"""The durable reply store: every accepted reply, persisted as it arrives.

One SQLite database (WAL mode) under the cache folder maps the hash of a
rendered request to the reply's content and token usage, and, for a request
that asked for log-probabilities, the probabilities of its score values
(:mod:`hf_judge.judging.logprobs`). A writer thread
commits whatever has accumulated since its last commit, at most once every
5 ms (group commit), so a ``kill -9`` loses at most the replies of one commit
window: a few dozen at several thousand replies a second. Accepted replies
are stored, and replies that failed validation under keys of their own
(:mod:`hf_judge.store.failures`); other failures are sent again by the next run.
Several processes may write the same store at once (SQLite locking).

Replies are appended to a ``pending`` table and merged into the keyed
``replies`` table, in key order and in one transaction, when the store is next
opened (after a crash too). Keys are hashes, so inserting each reply into the
keyed table as it came dirtied one random page per reply: about 4 KB written
per reply and ten times the CPU of an append. The merge costs ~2 us a reply.
The price: lookups see the replies of earlier runs, not those of the run in
progress; the pipeline shares the replies of identical requests within a run
itself.

Every store registers in an ``openers`` table while it is open. A store that
finds another live process's there (two runs on one cache at once) is shared
from the start (below), and waits up to ``COMPANY_WAIT_S`` for the others to
say they are too; a store that was alone looks for company every
``COMPANY_POLL_S`` (its writer thread, between commits) and, when some comes,
turns shared: ``on_company`` lets the run claim the requests it has in flight
first (:meth:`ReplyStore.share`), then its appended replies are merged into the
keyed table and it says so. So two runs beside each other pay each distinct
request once: one sends, the other takes the reply from the store, as workers do.
A run alone keeps the fast path.

Workers that score one dataset together (``--workers``, Ray) open the store
``shared=True``. Then replies go straight into the keyed table, so that every
worker sees what the others stored, and a ``claims`` table (key, owner, lease
expiry) says who is sending what: :meth:`ReplyStore.claim` looks keys up and
claims the missing ones in one transaction, so no request is sent by two
workers at once. A claim ends with its reply's commit (same transaction), with
:meth:`release` (a failed request) or at ``close``; the claim of a dead owner
(same host, no such pid) or of an expired lease (owners renew theirs every
``lease_s / 3``) is taken over. Both tables are plain SQLite tables, so a store
written in shared mode is read by a single-process run as before, and the
reverse.

Only real damage (SQLite reports the file corrupt or not a database, or
``quick_check`` fails) moves the database aside, with a warning, for a fresh
one: the affected rows are scored again, never read wrong. A store that cannot
be opened or written for any other reason is left as it is and reported:
another process holding the write lock is waited for (``lock_wait`` seconds,
with a warning) and then named in a :class:`CacheLockedError`; a full disk
raises :class:`DiskFullError` naming the path.

During a run the writer never waits silently. WAL lets a run open and read a
store whose write lock another process holds, so the lock shows only when a
commit cannot take it: each try waits ``LOCK_TRY_S`` at most, the replies
stay in memory and go with the next try, and the first try during which nobody
committed says so. The wait is bounded by progress, not wall time
(:class:`~hf_judge.store.sqlite.LockWait`): workers take turns with the lock,
and on a starved CPU one may wait long for its turn while the others commit.
A lock that nobody committed under for ``lock_wait`` s, or any other failed
write, is recorded in ``failure`` (and handed to ``on_failure``) so that the
run stops sending. Claims take the lock the same way, trying each millisecond.
Whatever is still unwritten at ``close`` goes to a sidecar file beside the
store (``replies.sqlite3.unsaved-<pid>-<time>.jsonl``: key, content and usage,
nothing the store would not hold), which the next open imports and deletes:
only a full disk that cannot take the sidecar either loses a paid reply.

The ``usage`` column holds ``"<prompt> <completion>"`` (``-`` where the server
reported none) and, for a reply with log-probabilities, a third field: their
table as compact JSON. Kept in that column rather than a new one, so that the
schema is that of every earlier version, which reads and writes the same file
(such replies sit under keys that only a logprobs request has: no earlier
version ever looks one up).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import CacheError, CacheLockedError, DiskFullError
from .leases import CLAIMS, RemoteClaims
from .segments import Remote, SegmentSync, is_local
from .sqlite import (
    CLAIMS_SCHEMA,
    SQLITE_BUSY,
    SQLITE_CORRUPT,
    SQLITE_LOCKED,
    SQLITE_NOTADB,
    WAL_HEADROOM,
    Damaged,
    LockWait,
    connect,
    decode_meta,
    delete_claims,
    encode_meta,
    error_code,
    free_space,
    human_bytes,
    insert,
    is_disk_full,
    merge,
    owner_dead,
    read_sidecars,
    take_claims,
)

logger = logging.getLogger("hf_judge")

_STOP = object()
_SHARE = object()  # in the writer's queue: what came before is committed shared; merge `pending`, say so
# How often a store that is alone looks for another process's store on its file.
COMPANY_POLL_S = 0.05
# How long a store that finds company waits for the others to turn shared (a run whose loop is busy answers late).
COMPANY_WAIT_S = 2.0
# How long a claim holds without renewal: its owner renews it every third of this while it lives.
LEASE_S = 30.0
# Group commit: at most one commit per window, so a kill -9 loses at most the
# replies of one window plus one commit (a handful at usual rates).
COMMIT_WINDOW_S = 0.005
# How long opening or writing the store waits for another process's write lock.
LOCK_WAIT_S = 60.0
# The longest one try of the writer waits for the lock (less for a short lock_wait), so that a lock
# held longer is reported while it lasts; another process's group commits hold it for milliseconds.
LOCK_TRY_S = 1.0
# How soon the writer tries again to commit the replies a locked store kept out.
_RETRY_S = 0.05


class ReplyStore:
    """Request-hash -> reply content, durable across crashes and processes."""

    def __init__(
        self,
        path: Path,
        *,
        lock_wait: float | None = None,
        shared: bool = False,
        lease_s: float = LEASE_S,
        remote: Remote | None = None,
    ):
        """``shared``: several processes score together (see the module docstring); ``lease_s``: a claim's lease;
        ``remote``: the store's shared home on object storage (:mod:`hf_judge.store.segments`), read now and
        published to as replies are stored."""
        self.path = Path(path)
        self.shared = shared
        self.lease_s = lease_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renewed = time.monotonic()
        self.lock_wait = lock_wait = LOCK_WAIT_S if lock_wait is None else lock_wait
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise (self._disk_full(e) if is_disk_full(e) else e) from None
        self._sidecar: Path | None = None
        self._read = self._open()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_loop, name="hf_judge-store", daemon=True)
        try:
            others = self._others(self._read)
            self.shared = shared = shared or bool(others)  # another run on this file: claim, as workers do
            self._write_conn = connect(self.path, lock_wait)
            self._write_conn.execute(f"PRAGMA busy_timeout={int(min(LOCK_TRY_S, lock_wait / 4) * 1000)}")
            if shared:
                self._write_conn.execute(CLAIMS_SCHEMA)
        except sqlite3.Error as e:
            self._read.close()
            raise self._not_usable(e) from None
        # Called from the writer thread when another process opens the file: the run then calls share().
        self.on_company: Callable[[], object] | None = None
        self._alone = not shared
        self._looked = time.monotonic()
        self._registered = self._register()
        self.failure: CacheError | None = None
        # Called from the writer thread with ``failure`` when a commit fails.
        self.on_failure: Callable[[CacheError], object] | None = None  # its result is ignored
        self._unsaved: list[tuple] = []
        self._write_wait = LockWait(self._write_conn, lock_wait)  # the writer's, while a commit finds the lock taken
        self._claim_wait = LockWait(self._read, lock_wait)  # claim()'s
        self._said_locked = False  # the writer said it waits for a lock held by another process
        self._last_error = ""
        self.written = 0
        self._bytes = 0
        self._segments: SegmentSync | None = None
        self._claims: RemoteClaims | None = None
        if remote is not None:
            try:
                self._segments = SegmentSync(remote, self.path, lock_wait)
                self._segments.start()
            except BaseException:
                self.close()
                raise
        self._writer.start()
        if others:
            self._wait_for_company()

    def _others(self, conn: sqlite3.Connection) -> dict[str, int]:
        """The live stores of other processes of this host open on the file: owner -> shared (0 or 1).

        Another host's cannot share this file (WAL needs shared memory); this process's other stores
        share its event loop, so waiting for them could only block it."""
        host, _, rest = self.owner.partition(":")
        me = f"{host}:{rest.partition(':')[0]}:"
        found = {}
        for owner, shared in conn.execute("SELECT owner, shared FROM openers"):
            if owner.startswith(f"{host}:") and not owner.startswith(me) and not owner_dead(owner, host):
                found[owner] = shared
        return found

    def _register(self) -> bool:
        """Add this store to ``openers``, at once or not at all: another process's write lock must not hold
        up the open (the writer tries again)."""
        conn = self._write_conn
        try:
            conn.execute("PRAGMA busy_timeout=20")
            conn.execute("INSERT OR REPLACE INTO openers VALUES (?, ?)", (self.owner, int(self.shared)))
            # the rows of runs killed before their close: a pid used again later would pass for company
            host = self.owner.partition(":")[0]
            dead = [(o,) for (o,) in conn.execute("SELECT owner FROM openers") if owner_dead(o, host)]
            if dead:
                conn.executemany("DELETE FROM openers WHERE owner = ?", dead)
            return True
        except sqlite3.Error:
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(min(LOCK_TRY_S, self.lock_wait / 4) * 1000)}")

    def _wait_for_company(self) -> None:
        """Wait until the other stores on the file claim before they send, so that none sends what this one
        claims (a store of an earlier version never does: after ``COMPANY_WAIT_S`` this one goes on)."""
        deadline = time.monotonic() + COMPANY_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                late = [o for o, shared in self._others(self._read).items() if not shared]
            if not late:
                return
            time.sleep(0.01)
        logger.debug("the reply cache %s: %s did not turn shared within %.0f s", self.path, late, COMPANY_WAIT_S)

    def share(self, in_flight: Sequence[bytes] = ()) -> None:
        """Turn shared (another process opened the file): claim ``in_flight``, the keys this run is sending
        now, then commit shared from here on, merge the appended replies and tell the other process."""
        self.shared = True
        if in_flight:
            self._claim_here(in_flight, True)
        self._queue.put(_SHARE)

    def _look_for_company(self) -> None:
        """Writer thread, while alone: when another process's store is open on the file, turn shared."""
        self._looked = time.monotonic()
        try:
            if not self._others(self._write_conn):
                return
            self._write_conn.execute(CLAIMS_SCHEMA)
        except sqlite3.Error as e:
            logger.debug("could not look for other runs on the reply cache %s: %s", self.path, e)
            return
        self._alone = False
        callback = self.on_company
        if callback is not None:
            try:
                callback()  # the run claims what it has in flight, then calls share()
                return
            except RuntimeError:  # its event loop is closed: nothing in flight
                pass
        self.shared = True
        self._shared_now()

    def _shared_now(self) -> None:
        """Writer thread: move this store's appended replies into the keyed table and say it is shared."""
        try:
            merge(self._write_conn)
            self._write_conn.execute("UPDATE openers SET shared = 1 WHERE owner = ?", (self.owner,))
        except sqlite3.Error as e:
            logger.debug("could not turn the reply cache %s shared: %s", self.path, e)

    def _open(self) -> sqlite3.Connection:
        """Open, check and merge: wait for a lock, report a full disk, move only a damaged file aside."""
        sidecars, extra = read_sidecars(self.path)
        deadline = time.monotonic() + self.lock_wait
        first = True
        while True:
            # A short first wait, so that a long one is announced before it starts.
            wait = min(1.0, self.lock_wait / 2) if first else max(0.0, deadline - time.monotonic())
            conn = None
            try:
                conn = connect(self.path, wait)
                conn.execute("SELECT count(*) FROM (SELECT 1 FROM replies LIMIT 1)").fetchone()
                # A full check reads every page: affordable for small stores only.
                # Damage found later costs a warning and a re-score, never a crash.
                if self.path.stat().st_size < 64 << 20 and conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    raise Damaged("quick_check failed")
                merge(conn, extra)  # what earlier runs left behind
                conn.execute(f"PRAGMA busy_timeout={int(self.lock_wait * 1000)}")
                self._imported(sidecars, extra)
                return conn
            except sqlite3.Error as e:
                if conn is not None:
                    conn.close()
                code = error_code(e)
                if code in (SQLITE_BUSY, SQLITE_LOCKED) and first and deadline > time.monotonic():
                    # a shared store's processes (workers, Ray actors of one host) open it at the same moment by
                    # design: their wait is no news; another run's lock is
                    logger.log(
                        logging.DEBUG if self.shared else logging.WARNING,
                        "another process holds the write lock on the reply cache %s; waiting up to %.0f s for it",
                        self.path,
                        max(0.0, deadline - time.monotonic()),
                    )
                    first = False
                    continue
                if isinstance(e, Damaged) or code in (SQLITE_CORRUPT, SQLITE_NOTADB):
                    self._quarantine(e)
                    conn = None
                    try:
                        conn = connect(self.path, self.lock_wait)
                        merge(conn, extra)
                    except sqlite3.Error as e2:
                        if conn is not None:
                            conn.close()
                        raise self._not_usable(e2) from None
                    self._imported(sidecars, extra)
                    return conn
                raise self._not_usable(e) from None

    def _imported(self, files: list[Path], rows: list[tuple]) -> None:
        for p in files:
            p.unlink(missing_ok=True)
        if files:
            logger.info("imported %s replies that an earlier run kept in %s", len(rows), ", ".join(map(str, files)))

    def _sidecar_path(self) -> Path:
        """The file beside the store that takes this run's unwritten replies at ``close``."""
        if self._sidecar is None:
            stem = f"{self.path.name}.unsaved-{os.getpid()}-{int(time.time())}"
            p, i = self.path.with_name(stem + ".jsonl"), 1
            while p.exists():
                p, i = self.path.with_name(f"{stem}-{i}.jsonl"), i + 1
            self._sidecar = p
        return self._sidecar

    def _not_usable(self, e: sqlite3.Error) -> CacheError:
        """The error to stop with when the store cannot be used for a reason other than damage."""
        code = error_code(e)
        logger.debug("reply cache error %s (%s)", getattr(e, "sqlite_errorname", None), e)
        if is_disk_full(e, self.path):
            return self._disk_full(e)
        if code in (SQLITE_BUSY, SQLITE_LOCKED):
            return CacheLockedError(
                f"another process has held the write lock on the reply cache {self.path} for over "
                f"{self.lock_wait:.0f} s ({e}); the cache is untouched. Let that run finish (or stop it), "
                "or give this run its own cache_dir= (--cache-dir), then run the same command again."
            )
        return CacheError(
            f"could not use the reply cache {self.path}: {e}; it is left as it is. "
            "Check the folder's permissions and disk, or give this run another cache_dir= (--cache-dir)."
        )

    def _disk_full(self, e: BaseException) -> DiskFullError:
        return DiskFullError(
            f"the disk that holds the reply cache {self.path} is full "
            f"({human_bytes(free_space(self.path))} free): {e}. "
            f"The cache is untouched. Free at least {human_bytes(WAL_HEADROOM)} there (or point cache_dir= / "
            "--cache-dir at a larger disk) and run the same command again."
        )

    def stop_error(self, requests_left: int) -> CacheError | None:
        """``failure`` as the error a run stops with, a full disk with the space the ``requests_left`` need."""
        if not isinstance(self.failure, DiskFullError):
            return self.failure
        per_reply = self._bytes / self.written if self.written else 1024
        need = int(requests_left * per_reply * 2) + WAL_HEADROOM  # pages are rarely full; the WAL doubles writes
        return DiskFullError(
            f"the disk that holds the reply cache {self.path} is full ({human_bytes(free_space(self.path))} free), "
            f"so the run stopped sending; {self.written:,} replies of this run are saved. The {requests_left:,} "
            f"requests left need about {human_bytes(need)} more: free that much there (or point cache_dir= / "
            "--cache-dir at a larger disk) and run the same command again to resume."
        )

    def _quarantine(self, error: Exception) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        logger.warning(
            "the reply cache %s is damaged (%s); moved it to %s and starting a fresh one. "
            "Rows whose replies it held will be scored again.",
            self.path,
            error,
            aside,
        )
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.rename(Path(str(aside) + suffix))

    def get_many(self, keys: Sequence[bytes], *, with_logprobs: bool = False) -> dict[bytes, tuple]:
        """The stored replies among ``keys``: key -> (content, (prompt, completion) tokens or None), and with
        ``with_logprobs`` a third item, the reply's log-probability table or None (:mod:`hf_judge.judging.logprobs`)."""
        found: dict[bytes, tuple] = {}
        if not keys:
            return found
        with self._lock:
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    q = f"SELECT key, content, usage FROM replies WHERE key IN ({','.join('?' * len(chunk))})"
                    for k, content, usage in self._read.execute(q, chunk):
                        meta = decode_meta(usage)
                        found[k] = (content, *meta) if with_logprobs else (content, meta[0])
            except sqlite3.DatabaseError as e:
                logger.warning("could not read the reply cache (%s); those rows will be scored again", e)
        return found

    def claim(
        self, keys: Sequence[bytes], *, wait: bool = True
    ) -> tuple[dict[bytes, tuple[str, tuple[int, int] | None]], list[bytes]] | None:
        """Stores that claim (:attr:`claiming`): (the stored replies among ``keys``, the keys now this store's to send).

        The rest of ``keys`` are being sent by another live worker of this machine, claimed first by another node
        (a store on object storage: :mod:`hf_judge.store.leases`), or wait for this node's claim to be decided:
        look them up again later (:meth:`claims_changed` says which; a claim whose owner died, or whose lease ran
        out, is taken over then). One transaction on this machine, so two workers never claim one key.
        ``wait=False``: None at once if another process holds the write lock (an event loop retries after a
        millisecond, where SQLite's own busy wait sleeps up to 100 ms).

        Example:
            >>> found, mine = store.claim(keys)  # doctest: +SKIP
        """
        assert self.claiming, "claim() needs a store opened with shared=True or on object storage"
        if not keys:
            return {}, []
        claims = self._remote_claims()
        if self.shared:
            got = self._claim_here(keys, wait)
            if got is None:
                return None
            found, mine = got
        else:  # on object storage, alone on this machine: the replies imported are all there is to find
            # keys met for the first time were just looked up by the caller: looked up again once given to send
            known = claims.known(keys) if claims is not None else keys
            found = self.get_many(known) if known else {}
            mine = [k for k in dict.fromkeys(keys) if k not in found]
        if claims is not None:
            claims.found(found)
            mine = claims.take(mine)
        return found, mine

    def _claim_here(
        self, keys: Sequence[bytes], wait: bool
    ) -> tuple[dict[bytes, tuple[str, tuple[int, int] | None]], list[bytes]] | None:
        """The claims among the processes of this machine, in the SQLite file (one transaction)."""
        with self._lock:
            conn = self._read
            if not self._begin_claims(wait):
                return None
            try:
                got = take_claims(conn, keys, self.owner, self.lease_s)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return got

    def _remote_claims(self) -> RemoteClaims | None:
        """The claims across machines (a store on object storage), started with the first claim."""
        sync = self._segments
        if self._claims is None and sync is not None and sync.remote.claims:
            fs, path = sync.remote.filesystem(CLAIMS)
            if is_local(fs):  # a folder (file://) must exist to put a file in it; object stores have no folders
                fs.makedirs(path, exist_ok=True)
            r = sync.remote
            self._claims = RemoteClaims(
                fs, path, owner=sync.tag, lease_s=r.lease_s, clock_skew_s=r.clock_skew_s, pull=sync.pull
            )
            sync.on_published = self._claims.published_through
            self._claims.start()
        return self._claims

    @property
    def claiming(self) -> bool:
        """Whether a run claims keys before sending them (:meth:`claim`): shared among the processes of this
        machine, or on object storage (claims across machines, unless ``HF_JUDGE_CLAIMS=0``)."""
        return self.shared or (self._segments is not None and self._segments.remote.claims)

    def claims_changed(self, token: tuple | None) -> tuple[tuple | None, list[bytes] | None]:
        """(a new token, the keys whose claims may have changed since ``token``): ``[]`` none, ``None`` any (a shared
        store's other processes, or new replies imported). A run waiting for keys asks :meth:`claim` for those.

        Example:
            >>> token, keys = store.claims_changed(None)  # doctest: +SKIP
            >>> token, keys = store.claims_changed(token)  # later: [] if nothing changed  # doctest: +SKIP
        """
        claims = self._claims
        if self.shared or claims is None:
            return None, None
        now = (self.pulled, claims.version)
        if token is None or token[0] != now[0]:
            return now, None
        return now, claims.won_since(token[1])

    def _begin_claims(self, wait: bool) -> bool:
        """BEGIN IMMEDIATE on the claims' connection, trying each millisecond (with ``wait``) or once: SQLite's own
        busy wait sleeps up to 100 ms between tries and so lost every race to the other workers' claims. Raises
        :class:`CacheLockedError` once nobody has committed to the file for ``lock_wait`` s."""
        conn = self._read
        conn.execute("PRAGMA busy_timeout=0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    self._claim_wait.took()
                    return True
                except sqlite3.OperationalError as e:
                    if error_code(e) not in (SQLITE_BUSY, SQLITE_LOCKED):
                        raise
                if self._claim_wait.busy():
                    raise CacheLockedError(
                        f"another process has held the write lock on the reply cache {self.path} for over "
                        f"{self.lock_wait:.0f} s, so the run stopped sending; the replies it received are kept for "
                        "the next run. Let that process finish (or stop it), then run the same command again to resume."
                    )
                if not wait:
                    return False
                time.sleep(0.001)
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(self.lock_wait * 1000)}")

    def release(self, key: bytes) -> None:
        """Stores that claim: give up the claim on ``key`` (its request failed, or it was not sent), with the next
        commit here, and across machines once what was queued before it is published."""
        if self.shared:
            self._queue.put((key,))
        if self._claims is not None and self._segments is not None:
            self._claims.settle(key, self._segments.queued)

    def abandon(self) -> None:
        """A run that stopped: the keys it claimed across machines and will not send are free for the other nodes
        (once what it queued is published), not held while this process lives on (a Ray actor's next batch)."""
        if self._claims is not None and self._segments is not None:
            self._claims.abandon(self._segments.queued)

    def put(self, key: bytes, content: str, usage: tuple[int, int] | None = None, logprobs: dict | None = None) -> None:
        """Queue one accepted reply (and its token usage and log-probability table, if known) for the next commit."""
        row = (key, content, encode_meta(usage, logprobs))
        self._queue.put(row)
        if self._segments is not None:
            ticket = self._segments.add(row)
            if self._claims is not None:
                self._claims.settle(key, ticket)  # its claim across machines ends once the reply is published

    def _write_loop(self) -> None:
        q = self._queue
        while True:
            try:
                # While a lock keeps replies out, try again without waiting for new ones.
                if self._unsaved and self.failure is None:
                    timeout: float | None = _RETRY_S
                else:
                    timeout = self.lease_s / 3 if self.shared else COMPANY_POLL_S if self._alone else None
                item = q.get(timeout=timeout)
            except queue.Empty:
                self._commit([])
                if not self._registered:
                    self._registered = self._register()
                if self._alone:
                    self._look_for_company()
                continue
            batch = []
            stop = share = False
            while True:
                if item is _STOP:
                    stop = True
                elif item is _SHARE:
                    share = True
                else:  # a reply, or a flush's Event (set once what came before it is committed)
                    batch.append(item)
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
            rows = [b for b in batch if not isinstance(b, threading.Event)]
            if rows or self.shared:
                self._commit(rows)
            if share:
                self._shared_now()
            for b in batch:
                if isinstance(b, threading.Event):
                    b.set()
            if not self._registered:
                self._registered = self._register()
            if self._alone and time.monotonic() - self._looked >= COMPANY_POLL_S:
                self._look_for_company()
            if stop:
                return
            if rows:
                # Let replies gather for the next commit: each commit costs
                # about the same whatever it holds (WAL frames, page writes),
                # and committing as fast as possible made several hundred
                # small ones a second on a fast server, which cost ~10 % of
                # the run's throughput. The window bounds what a kill -9 loses.
                time.sleep(COMMIT_WINDOW_S)

    def _commit(self, rows: list[tuple]) -> None:
        """Commit ``rows`` with the replies an earlier failed commit kept; keep them all if this one fails too."""
        if self._unsaved:
            rows = self._unsaved + rows
        released: list[bytes] = []
        if self.shared:
            released = [r[0] for r in rows if len(r) == 1]
            rows = sorted((r for r in rows if len(r) == 3), key=lambda r: r[0])  # key order: fewer pages dirtied
            if not rows and not released and time.monotonic() - self._renewed < self.lease_s / 3:
                return
        elif not rows:
            return
        conn = self._write_conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self.shared:
                # straight into the keyed table, so that the other workers' lookups see it now
                insert(conn, rows, "INSERT OR REPLACE INTO replies")
                delete_claims(conn, [r[0] for r in rows] + released)
                if time.monotonic() - self._renewed >= self.lease_s / 3:
                    conn.execute(
                        "UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + self.lease_s, self.owner)
                    )
                    self._renewed = time.monotonic()
            else:
                insert(conn, rows)
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            self._unsaved = rows
            self._last_error = str(e)
            if error_code(e) in (SQLITE_BUSY, SQLITE_LOCKED):
                self._still_locked()
            elif self.failure is None:
                logger.warning("could not write to the reply cache %s: %s", self.path, e)
                self._fail(self._not_usable(e))
            return
        if self._write_wait.took() and self._said_locked:
            logger.info("the reply cache %s is free again; saved the replies kept in memory", self.path)
        self._said_locked = False
        self._unsaved = []
        self.written += len(rows)
        self._bytes += sum(len(k) + len(c) + len(u or "") + 16 for k, c, u in rows)

    def _still_locked(self) -> None:
        """A commit found the write lock taken. Workers on one store take turns with it: only a try during which
        nobody committed is said (once), and only ``lock_wait`` s with no commit by anyone stop the run."""
        wait = self._write_wait
        out = wait.busy()
        if wait.stalled and not self._said_locked:
            self._said_locked = True
            logger.warning(
                "the reply cache %s is locked by another process; waiting up to %.0f s (replies are kept in memory)",
                self.path,
                self.lock_wait,
            )
        if out and self.failure is None:
            self._fail(
                CacheLockedError(
                    f"another process has held the write lock on the reply cache {self.path} for over "
                    f"{self.lock_wait:.0f} s, so the run stopped sending. The replies it could not write there are "
                    f"kept in {self._sidecar_path()}, which the next run imports: none is lost. Let that process "
                    "finish (or stop it), then run the same command again to resume."
                )
            )

    def _fail(self, failure: CacheError) -> None:
        self.failure = failure
        if self.on_failure is not None:
            try:
                self.on_failure(failure)
            except RuntimeError:  # the run's event loop is already closed
                pass

    @property
    def pulled(self) -> int:
        """A store on object storage: how many imports of other processes' replies added rows since it opened
        (0 otherwise). A lookup made before this number last changed may find more now.

        Example:
            >>> seen = store.pulled; found = store.get_many(keys)  # doctest: +SKIP
            >>> if store.pulled != seen: found = store.get_many(keys)  # replies came in: look again  # doctest: +SKIP
        """
        return self._segments.generation if self._segments is not None else 0

    def publish(self, at_least: int = 1) -> None:
        """A store on object storage: publish the replies not yet published now, if there are ``at_least``."""
        if self._segments is not None and self._segments.pending >= at_least:
            self._segments.publish()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is committed (or kept for a retry)."""
        ev = threading.Event()
        self._queue.put(ev)
        ev.wait(timeout)

    def close(self) -> None:
        """Commit what is queued and close (the next open merges this run's replies).

        Replies that still cannot be written (a lock, an I/O error) go to a
        sidecar file beside the store, which the next open imports.
        """
        if self._writer.is_alive():
            self._queue.put(_STOP)
            self._writer.join()
        try:
            if self._unsaved:
                self._commit([])  # a last try: the lock may be gone, the disk may have room again
            # Workers that take turns with the lock are waited for (their shards' lookups see these replies now, a
            # sidecar only the next run); a lock nobody commits under for a whole try is not.
            while self._unsaved and self.failure is None and not self._write_wait.stalled:
                time.sleep(_RETRY_S)
                self._commit([])
        finally:
            if self._unsaved:
                self._set_aside()
        if self._segments is not None:
            self._segments.close()
        if self._claims is not None:
            self._claims.close()  # after the last publish: a claim ends once its replies can be found
        if self.shared:
            try:  # the claims a cancelled run still held: free for the other workers at once
                self._write_conn.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
            except sqlite3.Error:
                pass  # they expire with their lease
        try:
            self._write_conn.execute("DELETE FROM openers WHERE owner = ?", (self.owner,))
        except sqlite3.Error:
            pass  # a dead owner's row is passed over
        for c in (self._read, self._write_conn):
            try:
                c.close()
            except sqlite3.Error:
                pass

    def _set_aside(self) -> None:
        """Write the unwritten replies to the sidecar file, whole or not at all (a temporary file, then a rename)."""
        path = self._sidecar_path()
        tmp = path.with_name(path.name + ".tmp")
        n = len(self._unsaved)
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                for k, c, u in self._unsaved:
                    f.write(json.dumps({"key": k.hex(), "content": c, "usage": u}) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            logger.warning(
                "%s replies of this run could not be saved in %s (%s) nor in %s (%s); they will be asked again",
                n,
                self.path,
                self._last_error,
                path,
                e,
            )
            return
        self._unsaved = []
        logger.warning(
            "%s replies of this run could not be written to the reply cache %s (%s); kept them in %s, "
            "which the next run imports",
            n,
            self.path,
            self._last_error,
            path,
        )

    def __len__(self) -> int:
        with self._lock:
            return self._read.execute(
                "SELECT count(*) FROM (SELECT key FROM replies UNION SELECT key FROM pending)"
            ).fetchone()[0]
