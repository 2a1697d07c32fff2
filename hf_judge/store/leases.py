"""Claims shared by the machines of one reply store on object storage: two nodes never pay one request at once.

Segments (:mod:`hf_judge.store.segments`) tell a node what others have paid for, but only once published: two
nodes that start on the same rows would both pay every row before either hears of the other. So before it sends
a request, a node claims its key in the store, and a key another live node claimed first is waited for (its reply
comes with the segments), not sent.

**Claims.** A node writes the keys it is about to send, batched (what came in during the last ``BATCH_S``, one
object per batch, not per key: a few requests a second, whatever the rate of judge requests), to
``<url>/claims/c-<time>-<owner>-<seq>``: ``time`` in milliseconds when it named the object, ``owner`` its host,
pid and a random tag, the body the keys (16 bytes each). Objects are never rewritten, so each is read once.

**Who pays: the earliest claim.** For a key in several live claims, the one first by (time, owner, seq) pays, on
every node alike: no two nodes can both find their own claim first. But a node that reads the claims before an
earlier one has landed would wrongly find its own first, so a claim counts only once it is sure that every
earlier one is visible: its writer withdraws it (deletes it, and claims the keys again under a new time) if its
put took more than ``put_s`` (``CLAIM_PUT_S``), and decides only from a listing begun at least ``put_s +
clock_skew_s`` after the time in its name (``clock_skew_s``: how far apart the nodes' clocks may be,
``HF_JUDGE_CLOCK_SKEW_S``). An earlier claim was then put by the time that listing began, and object stores list
what was put before a listing began (S3, GCS and Azure Blob Storage are strongly consistent). This needs no
conditional write, which not every store or emulator offers (gcp-storage-emulator ignores GCS's preconditions),
only puts, deletes and listings. The price is latency, not throughput: a key is sent about a second after it is
claimed, while claims for the keys behind it are written meanwhile (a run claims as far ahead as its window).

**Leases.** A claim holds while its owner's lease runs: ``lease_s`` after the time in its name, renewed by a
lease object ``l-<owner>-<until>`` every ``lease_s / 3`` while the owner holds claims, so a long request keeps
its claim, and a node killed with ``kill -9`` frees its claims ``lease_s`` after its last renewal. Then the keys
go to the earliest claim still live (the waiting node's own, made when it first met them): it sends them once it
has read the segments published since its listing (what the dead node paid and published is not paid again).
Expired claims and leases are deleted by whoever lists them a lease later (and by ``hf-judge cache compact``).

**Release.** A claim ends once every key in it is settled: its reply (or its kept failure) published in a
segment, its request failed (released: the waiting node may send it), or its reply found in the store. Then the
object is deleted. A waiting node sees a key's claim gone, or its reply imported, and reads the segments
before it sends: the reply is published before the claim is deleted, so what was paid is found.

**When the store cannot be written.** A claim that cannot be put or listed (a read-only bucket, a network down)
does not hold up the run: its keys are sent unclaimed, as before claims existed, with one warning.

Example:
    >>> claims = RemoteClaims(fs, "bucket/cache/claims", lease_s=30.0, put_s=0.5, clock_skew_s=0.5)  # doctest: +SKIP
    >>> claims.take([key])  # queued for the next claim: none is this node's to send yet  # doctest: +SKIP
    []
    >>> claims.step(); claims.take([key])  # claimed, and no earlier live claim holds it  # doctest: +SKIP
    [key]
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

logger = logging.getLogger("hf_judge")

CLAIMS = "claims"
# How long a claim holds without renewal (HF_JUDGE_LEASE_S): a killed node's claims are free this long after it died.
LEASE_S = 30.0
# A claim whose put took longer is withdrawn (an earlier-named claim must be visible when a later one decides).
CLAIM_PUT_S = 0.5
# How far apart the clocks of the nodes may be (HF_JUDGE_CLOCK_SKEW_S); NTP keeps them within milliseconds.
CLOCK_SKEW_S = 0.5
# Keys gather this long before a claim is written: one object per batch, a few a second.
BATCH_S = 0.25
# While keys wait for another node's claims, they are listed this often (a lapsed lease, a released key).
REFRESH_S = 1.0
# Keys in one claim object at most (16 bytes each).
MAX_KEYS = 65_536
# A store that fails every claim or listing this long: its keys are sent unclaimed (a refusal: at once).
GIVE_UP_S = 10.0
# Turns whose keys the pipeline can ask for by name (``won_since``); further back, it asks for all it waits on.
_LOG_N = 256
_MAGIC = b"HFJC1\n"
_CLAIM = re.compile(r"^c-(\d{13})-(.+)-(\d{6})$")
_LEASE = re.compile(r"^l-(.+)-(\d{13})$")
ASKING, WON, LOST = 1, 2, 3


class Clock(Protocol):
    """Where claims read the time: the ``time`` module, or a test's clock."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


def digest(key: bytes) -> bytes:
    """A key as claims hold it: 16 bytes (the store's keys are 16-byte hashes already)."""
    return key if len(key) == 16 else hashlib.blake2b(key, digest_size=16).digest()


@dataclass(frozen=True, order=True)
class ClaimId:
    """A claim object's name, in the order that decides who pays: (time in ms, owner, seq)."""

    t_ms: int
    owner: str
    seq: int

    @property
    def name(self) -> str:
        return f"c-{self.t_ms:013d}-{self.owner}-{self.seq:06d}"

    @classmethod
    def parse(cls, name: str) -> ClaimId | None:
        m = _CLAIM.match(name)
        return cls(int(m[1]), m[2], int(m[3])) if m else None


@dataclass
class _Mine:
    """One of this node's claim objects: its keys still unsettled, and when a listing may decide it (monotonic)."""

    id: ClaimId
    pending: set[bytes]
    decide_at: float
    keys: tuple[bytes, ...] = ()  # in the order they were met: given in that order (rows in order)


def _lease_name(owner: str, until: float) -> str:
    return f"l-{owner}-{int(until * 1000):013d}"


def encode_keys(digests: Iterable[bytes]) -> bytes:
    return _MAGIC + b"".join(digests)


def decode_keys(data: bytes) -> frozenset[bytes]:
    """The keys of a claim object; an object that is not one holds none."""
    if not data.startswith(_MAGIC):
        return frozenset()
    body = data[len(_MAGIC) :]
    return frozenset(body[i : i + 16] for i in range(0, len(body) - len(body) % 16, 16))


class RemoteClaims:
    """One process's claims in ``<url>/claims/`` (see the module docstring): :meth:`take` answers the pipeline at
    once from memory; :meth:`step` (a thread's, or a test's) writes, lists, decides, renews and deletes.

    ``pull`` imports the published segments (``SegmentSync.pull``): called after a listing, before keys are
    given to send, so that a reply published before its claim was deleted is found rather than paid again.
    """

    def __init__(
        self,
        fs: Any,
        path: str,
        *,
        owner: str,
        lease_s: float = LEASE_S,
        put_s: float = CLAIM_PUT_S,
        clock_skew_s: float = CLOCK_SKEW_S,
        pull: Callable[[], object] | None = None,
        clock: Clock = time,
    ):
        self.fs, self.path, self.owner = fs, path.rstrip("/"), owner
        self.lease_s, self.put_s, self.wait_s = lease_s, put_s, put_s + clock_skew_s
        self.pull, self.clock = pull, clock
        self._lock = threading.Lock()
        self.state: dict[bytes, int] = {}  # key -> ASKING, WON or LOST
        self.queue: dict[bytes, None] = {}  # keys to claim in the next object, in order
        self.lost: dict[bytes, None] = {}  # keys another live claim holds first, in the order they were met
        self.mine: dict[str, _Mine] = {}  # this node's claim objects by name
        self.undecided: set[str] = set()  # those no listing has decided yet
        self.holders: dict[bytes, list[str]] = {}  # key -> the names of this node's claims that hold it
        self.theirs: dict[str, tuple[ClaimId, frozenset[bytes]]] = {}  # other owners' claims read, by name
        self.by_key: dict[bytes, set[ClaimId]] = {}  # key -> other owners' claims that hold it
        self.leases: dict[str, float] = {}  # owner -> the end of its lease (wall clock, s), from the last listing
        self.settling: dict[bytes, int] = {}  # key -> the segment rows it waits for (its reply or its release)
        self.published = 0  # the store's segments hold this process's first ``published`` rows
        self.withdrawn: set[str] = set()  # objects to delete (late puts, ended claims) that a delete missed
        self.originals: dict[bytes, bytes] = {}  # a key that is not 16 bytes, by its digest
        self.version = 0  # counts the turns that gave keys to this node
        self.log: deque[tuple[int, list[bytes]]] = deque(maxlen=_LOG_N)  # (version, the keys it gave)
        self.seq = 0
        self.lease_object: str | None = None
        self.lease_until = -math.inf  # the end of the lease its lease object says (wall clock)
        self.written = -math.inf  # when the last claim was put (monotonic)
        self.listed = -math.inf  # when the last listing began (monotonic)
        self.rechecked = -math.inf  # when the waiting keys were last looked at again (monotonic)
        self.waited: set[str] = set()  # the owners this node waited for (said once each)
        self.failing = False  # the store refused claims for good: keys go unclaimed
        self.failed_since: float | None = None
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sleep = BATCH_S

    # -- the pipeline's side (any thread; memory only) ------------------------------------------------------
    def take(self, keys: Sequence[bytes]) -> list[bytes]:
        """Of ``keys`` (none of them in the store), those this node is to send now; the others are claimed in the
        next object (met for the first time) or wait for their claim's decision or for another node's reply."""
        mine, wake = [], False
        with self._lock:
            if self.failing:
                return list(keys)
            state, queue = self.state, self.queue
            for k in keys:
                d = digest(k)
                s = state.get(d)
                if s is None:
                    state[d] = ASKING
                    wake = wake or not queue
                    queue[d] = None
                    if d is not k:
                        self.originals[d] = k
                    if self.settling.pop(d, None) is not None:
                        self._settled(d)  # asked again before its earlier claim ended: the new claim holds it
                elif s == WON:
                    mine.append(k)
        if wake:
            self.wake.set()
        return mine

    def known(self, keys: Sequence[bytes]) -> list[bytes]:
        """Those of ``keys`` met before (claimed, given or waited for); the others are new."""
        state = self.state
        with self._lock:
            return [k for k in keys if digest(k) in state]

    def found(self, keys: Iterable[bytes]) -> None:
        """``keys``' replies are in the store (another node's, imported): nothing left to claim or send."""
        with self._lock:
            for k in keys:
                d = digest(k)
                if self.state.pop(d, None) is not None:
                    self._forget(d)
                    self._settled(d)

    def settle(self, key: bytes, ticket: int) -> None:
        """``key`` was answered or released: its claim may end once the segments hold this process's first
        ``ticket`` rows (its reply, or its kept failure, was queued before this)."""
        d = digest(key)
        with self._lock:
            if self.state.pop(d, None) is None and d not in self.holders:
                return
            self._forget(d)
            if ticket <= self.published:
                self._settled(d)
            else:
                self.settling[d] = ticket

    def abandon(self, ticket: int) -> None:
        """Every key met and not settled yet (a run that stopped) is settled now: its claims end once this process's
        first ``ticket`` rows are published (failures it kept are found before the keys are sent again)."""
        with self._lock:
            for d in list(self.state):
                del self.state[d]
                self._forget(d)
                if ticket <= self.published:
                    self._settled(d)
                else:
                    self.settling[d] = ticket
        self.wake.set()

    def published_through(self, rows: int) -> None:
        """The segments now hold this process's first ``rows`` rows (``SegmentSync``'s callback)."""
        with self._lock:
            self.published = rows
            done = [d for d, ticket in self.settling.items() if ticket <= rows]
            for d in done:
                del self.settling[d]
                self._settled(d)
        if done:
            self.wake.set()

    def won_since(self, version: int) -> list[bytes] | None:
        """The keys given to this node after turn ``version`` ([] when none); None when that is too long ago to
        tell (then any key may have been)."""
        with self._lock:
            if version == self.version:
                return []
            if not self.log or self.log[0][0] > version + 1:
                return None
            return [k for v, keys in self.log if v > version for k in keys]

    def _forget(self, d: bytes) -> None:
        self.queue.pop(d, None)
        self.lost.pop(d, None)
        self.originals.pop(d, None)

    def _settled(self, d: bytes) -> None:
        for name in self.holders.pop(d, ()):
            claim = self.mine.get(name)
            if claim is not None:
                claim.pending.discard(d)

    # -- the thread's side ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="hf_judge-claims", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.wake.wait(self._sleep)
            self.wake.clear()
            if self._stop.is_set():
                return
            try:
                self._sleep = self.step()
            except Exception as e:  # noqa: BLE001 - a bug here must not hang the run's keys: send them unclaimed
                self._give_up(e)

    def step(self) -> float:
        """One turn: put the queued keys' claim, list and decide where due, renew the lease, delete the claims
        that ended. The seconds until the next turn is due."""
        now = self.clock.monotonic()
        with self._lock:
            todo = list(self.queue)[:MAX_KEYS] if self.queue and now - self.written >= BATCH_S else []
            for d in todo:
                del self.queue[d]
        if todo:
            self._write(todo)
        now = self.clock.monotonic()
        with self._lock:
            due = any(self.mine[n].decide_at <= now for n in self.undecided)
            due = due or (bool(self.lost) and now - self.listed >= REFRESH_S)
        if due:
            self.refresh()
        if self.mine and self._until() - self.clock.time() <= self.lease_s * 2 / 3:
            self._renew()
        self._delete_ended()
        now = self.clock.monotonic()
        with self._lock:
            waits = [REFRESH_S]
            if self.queue:
                waits.append(self.written + BATCH_S - now)
            if self.undecided:
                waits.append(min(self.mine[n].decide_at for n in self.undecided) - now)
        return max(0.005, min(waits))

    def _until(self) -> float:
        """The end of this node's lease as the others see it: its claims' and its lease object's."""
        return max([c.id.t_ms / 1000 + self.lease_s for c in self.mine.values()] + [self.lease_until])

    def _write(self, todo: list[bytes]) -> None:
        """Put one claim object for ``todo``; withdrawn (and the keys queued again) if the put took too long."""
        t0 = self.written = self.clock.monotonic()
        cid = ClaimId(int(self.clock.time() * 1000), self.owner, self.seq)
        self.seq += 1
        try:
            self.fs.pipe_file(f"{self.path}/{cid.name}", encode_keys(todo))
        except Exception as e:  # noqa: BLE001 - any filesystem's error: tried again, or sent unclaimed
            self._failed(e, todo)
            return
        self.failed_since = None
        took = self.clock.monotonic() - t0
        with self._lock:
            keys = [d for d in todo if self.state.get(d) == ASKING]  # not those found or settled meanwhile
            if took > self.put_s:
                logger.debug("the claim %s took %.2f s to put (over %.2f s): withdrawn", cid.name, took, self.put_s)
                self.withdrawn.add(cid.name)
                self.queue.update(dict.fromkeys(keys))
                return
            self.mine[cid.name] = _Mine(cid, set(keys), t0 + self.wait_s, tuple(keys))
            self.undecided.add(cid.name)
            for d in keys:
                self.holders.setdefault(d, []).append(cid.name)

    def refresh(self) -> None:
        """List the claims, read the others' new ones, delete expired ones, then decide the keys it may."""
        began = self.clock.monotonic()
        try:
            names = self._list()
            self._read_theirs(names)
        except Exception as e:  # noqa: BLE001 - tried again next turn, or sent unclaimed
            self._failed(e)
            return
        self.failed_since = None
        self.listed = began
        now = self.clock.time()
        self._sweep(names, now)
        recheck = began - self.rechecked >= REFRESH_S
        if recheck:
            self.rechecked = began
        with self._lock:
            won = self._decide(began, now, recheck)
        if not won:
            return
        if self.pull is not None:
            try:
                self.pull()  # what was published before a claim ended is found, not paid again
            except Exception as e:  # noqa: BLE001 - the segments' thread says so; the keys go on
                logger.debug("could not read the segments before sending claimed keys: %s", e)
        with self._lock:
            self._give([d for d in won if self.state.get(d) in (ASKING, LOST)])

    def _give(self, keys: list[bytes]) -> None:
        """``keys`` are this node's to send. Caller holds the lock."""
        for d in keys:
            self.state[d] = WON
            self.lost.pop(d, None)
        if keys:
            self.version += 1
            self.log.append((self.version, [self.originals.get(d, d) for d in keys]))

    def _list(self) -> list[str]:
        try:
            self.fs.invalidate_cache(self.path)  # s3fs caches listings: a new claim must show
            listed = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in listed]

    def _read_theirs(self, names: list[str]) -> None:
        """Note each owner's lease; read the other owners' claims not read yet; forget those gone."""
        leases: dict[str, float] = {}
        present: dict[str, ClaimId] = {}
        for n in names:
            cid = ClaimId.parse(n)
            if cid is not None:
                leases[cid.owner] = max(leases.get(cid.owner, 0.0), cid.t_ms / 1000 + self.lease_s)
                if cid.owner != self.owner:
                    present[n] = cid
            elif (m := _LEASE.match(n)) is not None:
                leases[m[1]] = max(leases.get(m[1], 0.0), int(m[2]) / 1000)
        new = [n for n in present if n not in self.theirs]
        got = _cat_some(self.fs, [f"{self.path}/{n}" for n in new]) if new else {}
        with self._lock:
            self.leases = leases
            for n in [n for n in self.theirs if n not in present]:
                cid, keys = self.theirs.pop(n)
                for d in keys:
                    held = self.by_key.get(d)
                    if held is not None:
                        held.discard(cid)
                        if not held:
                            del self.by_key[d]
            for n in new:
                data = got.get(f"{self.path}/{n}")
                if data is None:
                    continue  # ended between the listing and the read
                keys = decode_keys(data)
                self.theirs[n] = (present[n], keys)
                for d in keys:
                    self.by_key.setdefault(d, set()).add(present[n])

    def _decide(self, began: float, now: float, recheck: bool) -> list[bytes]:
        """The keys this node may now pay for: those whose earliest claim of its own that the listing begun at
        ``began`` may decide comes before every other live claim. The others wait (LOST); with ``recheck``,
        the waiting keys are looked at again (a claim ended or expired). Caller holds the lock."""
        if now >= self._until():
            return []  # its own lease ran out (renewals failed): others may take its keys, it takes none
        candidates: dict[bytes, None] = dict.fromkeys(self.lost) if recheck else {}
        for c in sorted((self.mine[n] for n in self.undecided if self.mine[n].decide_at <= began), key=lambda c: c.id):
            self.undecided.discard(c.id.name)
            candidates.update(dict.fromkeys(d for d in c.keys if d in c.pending and self.state.get(d) == ASKING))
        won = []
        for d in candidates:
            held = [self.mine[n] for n in self.holders.get(d, ()) if n in self.mine]
            firsts = [c.id for c in held if c.decide_at <= began]
            if not firsts:
                continue
            first = min(firsts)
            earlier = [o for o in self.by_key.get(d, ()) if o < first and self.leases.get(o.owner, 0.0) > now]
            if earlier:
                self.state[d] = LOST
                self.lost[d] = None
                self._waiting_for(min(earlier).owner)
            else:
                won.append(d)
        return won

    def _waiting_for(self, owner: str) -> None:
        if owner not in self.waited:
            self.waited.add(owner)
            # a warning: the rows it holds wait for the other run's replies, and a run that shows no progress for
            # minutes must say why (said once for each run it waits for)
            logger.warning(
                "another run (%s) is sending requests this one needs (claimed in %s): this run waits for its replies "
                "instead of paying for them again; if that run has stopped, its claims free themselves within %.0f s",
                owner,
                self.path,
                self.lease_s,
            )

    def _sweep(self, names: list[str], now: float) -> None:
        """Delete the claims and leases of owners whose lease ended a lease ago (a dead node's), and this owner's
        own lease objects but the newest."""
        old = []
        for n in names:
            cid = ClaimId.parse(n)
            m = _LEASE.match(n) if cid is None else None
            owner = cid.owner if cid is not None else m[1] if m is not None else None
            if owner == self.owner:
                if m is not None and n != self.lease_object:
                    old.append(n)
            elif owner is not None and self.leases.get(owner, 0.0) + self.lease_s < now:
                old.append(n)
        if old:
            self._remove(old)

    def _renew(self) -> None:
        """Write a new lease object (``lease_s`` from now), then delete the previous one."""
        until = self.clock.time() + self.lease_s
        name = _lease_name(self.owner, until)
        try:
            self.fs.pipe_file(f"{self.path}/{name}", b"")
        except Exception as e:  # noqa: BLE001 - the next turn tries again; its claims hold until their lease ends
            logger.debug("could not renew the claims in %s: %s", self.path, e)
            return
        previous, self.lease_object, self.lease_until = self.lease_object, name, until
        if previous is not None:
            self._remove([previous])

    def _delete_ended(self) -> None:
        with self._lock:
            ended = [n for n, c in self.mine.items() if not c.pending]
            for n in ended:
                del self.mine[n]
                self.undecided.discard(n)
            gone = ended + sorted(self.withdrawn)
            self.withdrawn.clear()
        if gone:
            self._remove(gone)

    def _remove(self, names: list[str]) -> None:
        try:
            _remove_all(self.fs, [f"{self.path}/{n}" for n in names])
        except Exception as e:  # noqa: BLE001 - the next turn tries again (others sweep them once expired)
            logger.debug("could not delete the claims %s: %s", names[:3], e)
            with self._lock:
                self.withdrawn.update(n for n in names if n.startswith("c-"))

    def _failed(self, e: BaseException, keys: Sequence[bytes] = ()) -> None:
        """A put or a listing failed: tried again next turn (``keys`` queued again), for ``GIVE_UP_S`` at most;
        a refusal (no permission to write there) is final at once."""
        now = self.clock.monotonic()
        if self.failed_since is None:
            self.failed_since = now
        if isinstance(e, PermissionError) or now - self.failed_since >= GIVE_UP_S:
            self._give_up(e)
            return
        logger.debug("could not claim in %s: %s (will try again)", self.path, e)
        with self._lock:
            self.queue.update(dict.fromkeys(d for d in keys if self.state.get(d) == ASKING))

    def _give_up(self, e: BaseException) -> None:
        """The store refuses claims: the keys being claimed or waited for, and those met from now on, are sent
        unclaimed (as with no claims at all) rather than held up."""
        if not self.failing:
            logger.warning(
                "could not claim requests in the shared reply cache %s (%s: %s); this run sends them unclaimed, "
                "so another node on the same rows may pay them too",
                self.path.rsplit("/", 1)[0],
                type(e).__name__,
                e,
            )
        with self._lock:
            self.failing = True
            self._give([d for d, s in self.state.items() if s in (ASKING, LOST)])
            self.queue.clear()

    def close(self) -> None:
        """Stop the thread; delete this node's claims (not those holding a reply still to publish: they expire)
        and, if none is left, its lease."""
        atexit.unregister(self.close)
        self._stop.set()
        self.wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(30)
        with self._lock:
            waiting = set(self.settling)
            names = [n for n, c in self.mine.items() if not (c.pending & waiting)]
            kept = len(self.mine) - len(names)
            names += sorted(self.withdrawn)
            self.mine.clear()
            self.withdrawn.clear()
        if self.lease_object is not None and not kept:
            names.append(self.lease_object)
        if names:
            self._remove(names)


def _cat_some(fs: Any, paths: list[str]) -> dict[str, bytes]:
    try:
        return fs.cat(paths, on_error="omit")
    except FileNotFoundError:
        return {}


def _remove_all(fs: Any, paths: list[str]) -> None:
    try:
        fs.rm(paths)
        return
    except FileNotFoundError:
        pass
    for p in paths:
        try:
            fs.rm(p)
        except FileNotFoundError:
            pass


def sweep(fs: Any, path: str, now: float | None = None, lease_s: float = LEASE_S) -> int:
    """Delete the claims and leases whose owner's lease ended a lease ago (``hf-judge cache compact``); how many.

    Example:
        >>> sweep(*Remote.of("s3://bucket/cache").filesystem(CLAIMS))  # doctest: +SKIP
        3
    """
    now = time.time() if now is None else now
    try:
        fs.invalidate_cache(path)
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]
    except FileNotFoundError:
        return 0
    until: dict[str, float] = {}
    owners = {}
    for n in names:
        cid = ClaimId.parse(n)
        m = _LEASE.match(n) if cid is None else None
        if cid is not None:
            owners[n], end = cid.owner, cid.t_ms / 1000 + lease_s
        elif m is not None:
            owners[n], end = m[1], int(m[2]) / 1000
        else:
            continue
        until[owners[n]] = max(until.get(owners[n], 0.0), end)
    old = [f"{path}/{n}" for n, o in owners.items() if until[o] + lease_s < now]
    if old:
        _remove_all(fs, old)
    return len(old)
