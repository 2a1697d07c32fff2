"""The row pipeline between a split and ``Dataset.map``.

A feeder coroutine reads the split ahead of the map, renders every (row, metric) request, serves what the reply
store already holds, and sends the rest through the client, keeping at most ``window`` rows between the map's
position and its own. The map function (main thread) waits only for the rows of its own batch. Requests therefore
flow continuously over the whole split: a slow request holds back nothing but its own row's write, and memory is
bounded by the window, not by the dataset.

Identical requests (same key) are sent once per run: a request whose key is in flight waits for that reply, and
one whose key was among the last ``RECENT_REPLIES`` replies reuses it; both count as cache hits. A request that
failed (after its retries) fails every row that shares it, each with its own error row. A reply that failed
validation is kept in the store (:mod:`hf_judge.store.failures`) and replayed by the next run as the same error
row, with no request (``retry_errors`` sends it again); any other failure (a timeout, a connection, an HTTP error)
is sent again by the next run. Where the store claims (``store.claiming``: shared by the processes of a machine, or
on object storage, shared by machines), a key is claimed before it is sent, and one another process holds waits
(``parked``) for its reply.

A budget stop (``max_cost``, ``max_total_tokens``) of an engine that keeps a partial result (``partial=True``: one
process, workers, a stream, batch mode) stops the sending only: the rows go on, served from the store where it
can, and each request not sent ends as an error row of kind ``budget`` (``stopped`` is the stop). Other engines
(Ray, Spark, the map transform) stop the run.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from datasets import Dataset

from ..errors import (
    AuthenticationError,
    BudgetExceededError,
    CacheError,
    CircuitOpenError,
    ErrorKind,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitedError,
    ServerUnreachableError,
)
from ..judging.ensemble import Layout
from ..judging.metrics import Metric, MetricKind
from ..judging.validate import ReplyError, parse_reply
from ..pages import file_paths, release
from ..progress import INTERVAL, Progress, ProgressCallback
from ..redact import scrub, scrub_registered
from ..store.failures import KEPT_KINDS, failure_key, failure_record, kept_failures
from ..store.replies import ReplyStore
from ..transport.budget import limit_text, unsent_message
from ..transport.client import JudgeClient, Outcome
from .core import Plan, RowCore, RowJob

logger = logging.getLogger("hf_judge")
# A judge's own stops (its key, its model name or base URL, its quota): in a panel, the message names the judge.
_JUDGE_STOPS = (AuthenticationError, ModelNotFoundError, QuotaExceededError, RateLimitedError)
# Rows between two releases of the input's mapped pages (see pages.py).
RELEASE_EVERY = 65_536
# Recent replies kept to serve identical requests of the same run: ~0.6 KB each
# for a short reply, ~1.5 KB for a reasoned one; 65,536 (a 1,024-slot window)
# took ~40-100 MB. Repeats further apart are sent again (the store has them next run).
RECENT_REPLIES = 4096
# A shared store (see store.py): how often keys another process is sending are looked up again.
_POLL_S = 0.02


class SplitRun(RowCore):
    """Scores one split: carries the requests of the row core (:class:`~.core.RowCore`) through a window of
    rows, the reply store and the clients; ``consume`` is the ``Dataset.map`` function."""

    def __init__(
        self,
        split: str,
        ds: Dataset | None,
        plans: Sequence[Plan],
        client: JudgeClient,
        store: ReplyStore | None,
        *,
        window: int,
        # Rows rendered, looked up and sent per step of the feeder. Small, so
        # that rendering a batch holds up the replies waiting on the event loop
        # for a fraction of a millisecond: at 256 rows (~5 ms) the queued
        # replies cost ~2 % of the throughput at 1,024 in flight (bench/, c).
        read_batch: int = 32,
        max_input_chars: int | None = None,
        token_columns: bool = False,
        on_progress: ProgressCallback | None = None,
        judges: Sequence[JudgeClient] = (),
        layout: Layout | None = None,
        unsent: Callable[[bytes], Outcome | None] | None = None,
        partial: bool = False,
    ):
        super().__init__(
            split,
            plans,
            client,
            max_input_chars=max_input_chars,
            token_columns=token_columns,
            judges=judges,
            layout=layout,
        )
        self.ds = ds
        self.judge_down: dict[int, Outcome] = {}  # judge -> the outcome of each of its requests from now on
        self.store = store
        self.window = max(window, read_batch)
        self.read_batch = read_batch
        self.frontier = 0  # every row below it is finished
        self.consumed = 0  # rows handed to Dataset.map
        self.want = 0
        self.ready = threading.Event()
        # The feeder waits here while the window is full; consume() sets it from the main thread.
        self._room: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._room_wanted = False
        self.failure: BaseException | None = None
        self.tasks: set[asyncio.Task] = set()
        self.scored_rows = 0
        self.rows_done = 0  # rows whose every metric has finished, in any order
        self.on_progress = on_progress
        self.total = len(ds) if ds is not None else 0  # rows to score; a stream's grows as it is read
        # Batch mode (batch.py) has already sent what could be sent: a request the store lacks ends as this says.
        self.unsent = unsent
        # A budget stop: with `partial`, the requests not sent end as `budget` error rows and the rows go on
        # (`stopped` is the stop); else the run stops (see the module docstring).
        self.partial = partial
        self.stopped: BudgetExceededError | None = None
        self.retry_errors = client.settings.retry_errors
        # Identical requests of this run: key -> the (job, part)s waiting for the
        # one in flight, and key -> a recent final outcome (bounded, oldest out).
        self.inflight: dict[bytes, list[tuple[RowJob, int]]] = {}
        # A shared store (another run on the file, see store.py): key -> the sends waiting for the reply
        # that another process is sending, and whether the poller holds some taken out of it.
        self.parked: dict[bytes, list[tuple[RowJob, int, list, bytes]]] = {}
        self.polling = False
        self.recent: OrderedDict[bytes, Outcome] = OrderedDict()
        self.recent_max = RECENT_REPLIES
        self.input_files = file_paths(ds.cache_files) if ds is not None else frozenset()
        self._released_at = 0
        release(self.input_files)  # loading a dataset maps most of its file; the run reads it again anyway

    # -- feeder (event loop thread) ------------------------------------------
    async def feed(self) -> None:
        self._loop, self._room = asyncio.get_running_loop(), asyncio.Event()
        self._started = time.perf_counter()
        self._requests0 = self._requests()
        ticker = asyncio.get_running_loop().create_task(self._tick()) if self.on_progress else None
        try:
            await self._feed()
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._fail(e)
        finally:
            if ticker is not None:
                ticker.cancel()
                self._report()

    async def _tick(self) -> None:
        # a timer, not a hook in the reply path: reporting costs the same at 10 or 10,000 replies/s
        while self.on_progress is not None:
            self._report()
            await asyncio.sleep(INTERVAL)

    def _requests(self) -> int:
        return sum(c.stats.requests for c in self.clients)

    def error_count(self) -> int:
        """Error rows made so far (the progress line's count)."""
        return len(self.errors)

    def _report(self) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(
                Progress(
                    self.split,
                    self.rows_done,
                    self.total,
                    sum(c.limiter.in_flight for c in self.clients),
                    self.error_count(),
                    self._requests() - self._requests0,
                    time.perf_counter() - self._started,
                )
            )
        except Exception:  # noqa: BLE001 - a broken display must not stop the run
            self.on_progress = None

    def _fail(self, e: BaseException) -> None:
        if self.failure is None:
            self.failure = e
        # A budget stops what is not sent yet. The requests in flight are paid for: they are awaited (cancel())
        # and their replies kept; each checks the budget again before any further attempt.
        if not isinstance(self.failure, BudgetExceededError):
            for t in list(self.tasks):
                t.cancel()
        self.ready.set()
        self._wake()

    def _wake(self) -> None:
        """Let a feeder waiting for room in the window look again (from any thread)."""
        loop, room = self._loop, self._room
        if loop is None or room is None or loop.is_closed():
            return
        try:
            here = asyncio.get_running_loop() is loop
        except RuntimeError:  # no loop in this thread: the consumer's
            here = False
        if here:
            room.set()
        else:
            loop.call_soon_threadsafe(room.set)

    def _full(self, row: int) -> bool:
        """Whether the window has no room for ``row``. A row the consumer waits for always has room: a map batch
        larger than the window (``Dataset.map``'s 1,000 rows, a user's ``batch_size``) would otherwise wait for
        rows the window keeps out, for ever. The rows held are then at most max(window, the map's batch)."""
        return row - self.consumed >= self.window and row >= self.want

    async def _wait_for_room(self, row: int) -> None:
        """Until the consumer has taken rows, so that at most ``window`` rows are ahead of it (or the run failed)."""
        room = self._room
        assert room is not None  # made by feed()
        while self._full(row) and self.failure is None:
            self._room_wanted = True  # before the test below: a consume() after it sees the flag and wakes us
            room.clear()
            if not self._full(row) or self.failure is not None:
                break
            await room.wait()
        self._room_wanted = False

    async def _read(self) -> AsyncIterator[tuple[int, dict[str, list]]]:
        """The rows to score, in steps of ``read_batch``: (rows, the columns the plans read).
        A subclass reads another source (``stream.StreamRun``: batches handed over by another thread)."""
        assert self.ds is not None  # a run without a dataset overrides _read
        needed = sorted({c for p in self.plans for c in p.columns.values() if c is not None})
        source = self.ds.select_columns(needed) if needed else self.ds
        n = len(self.ds)
        row = 0
        for batch in read_batches(source, self.read_batch, any(p.images for p in self.plans)):
            size = len(batch[needed[0]]) if needed else min(self.read_batch, n - row)
            row += size
            yield size, batch

    async def _feed(self) -> None:
        row = 0
        store = self.store
        poller = None
        if store is not None:
            # A store that cannot write stops the run: every further reply would be paid and lost.
            loop = asyncio.get_running_loop()
            store.on_failure = lambda _e: loop.call_soon_threadsafe(self._store_failed)
            if store.failure is not None:
                return self._store_failed()
            store.on_company = lambda: loop.call_soon_threadsafe(self._join_company)
        try:
            async for size, batch in self._read():
                if self._full(row):
                    await self._wait_for_room(row)
                if self.failure is not None:
                    return
                sends = self.prepare_rows(batch, row, size)
                row += size
                # read before the lookup: replies imported while it runs are looked at again before sending
                looked = store.pulled if store is not None else 0
                if store is not None and sends:
                    sends = self._from_store(store, sends)
                if self.unsent is not None:
                    sends = self._settle_unsent(sends)
                claimed = store is not None and store.claiming
                if claimed and sends:
                    poller = poller or asyncio.get_running_loop().create_task(self._poll_parked())
                    sends = await self._claim(sends)
                if not await self._send_all(sends, claimed, looked):
                    return
                # yield once per batch so replies are handled between batches
                await asyncio.sleep(0)
            while (self.parked or self.polling) and self.failure is None:
                if self.tasks:
                    await asyncio.wait(list(self.tasks), timeout=_POLL_S)
                else:
                    await asyncio.sleep(_POLL_S)
            while self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
        finally:
            if poller is not None:
                poller.cancel()
            if store is not None:
                store.on_company = None
                if self.failure is not None and store.claiming:
                    store.abandon()  # what it claimed and will not send: free for the other nodes now

    def _from_store(self, store: ReplyStore, sends: list) -> list:
        """Finish the sends whose replies (or kept failures) the store holds; the others."""
        found = self.cached_replies(store, sends)
        remaining = []
        for item in sends:
            job, part = item[0], item[1]
            hit = found.get(job.keys[part]) if found else None
            outcome = self._from_cache(job.plan.metric, hit) if hit else None
            if outcome is None:
                remaining.append(item)
            else:
                self._hit(job, part, item[3], outcome)
        return self._replay_failures(store, remaining)

    def kept_failures(self, store: ReplyStore, sends: list) -> list[dict[str, Any] | None]:
        """For each of ``sends``, the failure an earlier run kept of its request (store/failures.py) where this run
        replays it (not with ``retry_errors``), else None."""
        if self.retry_errors:
            return [None] * len(sends)
        caps = [self.clients[item[1] // item[0].per_judge].max_tokens for item in sends]
        return kept_failures(store, [item[0].keys[item[1]] for item in sends], caps)

    def _replay_failures(self, store: ReplyStore, sends: list) -> list:
        """Finish the sends whose request failed validation in an earlier run (a kept failure: the same error row,
        no request); the others."""
        remaining = []
        for item, record in zip(sends, self.kept_failures(store, sends), strict=True):
            if record is None:
                remaining.append(item)
                continue
            job, part = item[0], item[1]
            outcome = Outcome(None, record["raw"], record["kind"], record["message"], record["attempts"], cached=True)
            self.clients[part // job.per_judge].stats.replayed += 1
            self._hit(job, part, item[3], outcome)
        return remaining

    def _settle_unsent(self, sends: list) -> list:
        """Batch mode: end the sends ``unsent`` has an outcome for (the batch book's error); the others, which
        ``batch_fallback="online"`` sends."""
        assert self.unsent is not None
        remaining = []
        for item in sends:
            job, part = item[0], item[1]
            outcome = self.unsent(job.keys[part])
            if outcome is None:
                remaining.append(item)
            else:
                self._finish_part(job, part, outcome)
        return remaining

    def _hit(self, job: RowJob, part: int, body: bytes, outcome: Outcome) -> None:
        """A reply of the store serves (job, part). Under max_cost it is the job's too, and what an earlier run
        paid for it counts (a batch run's replies are its own, already counted: see budget.py)."""
        client = self.clients[part // job.per_judge]
        client.stats.cache_hits += 1
        if client.budget is not None and self.unsent is None:
            client.reused(outcome.usage, body, outcome.raw or "")
        self._finish_part(job, part, outcome)

    async def _send_all(self, sends: list, claimed: bool = True, looked: int | None = None) -> bool:
        """Send each of ``sends`` (or share an identical request's reply); False once the run has failed.
        ``claimed``: their keys are claimed, or the store does not claim. ``looked``: the store's ``pulled`` when
        ``sends`` were looked up (default: now). Sends wait here for a slot; when replies other processes published
        came in meanwhile, the rest are looked up again before the next is sent (another node may have paid for
        them), and only then: an integer compared per request otherwise."""
        inflight, clients, down, store = self.inflight, self.clients, self.judge_down, self.store
        extra: set[tuple[int, int]] = set()  # samples asked for as extra choices of another request (n)
        several = self.layout.samples > 1
        if looked is None:
            looked = store.pulled if store is not None else 0
        i = 0
        while i < len(sends):
            if not claimed and store is not None and store.shared:
                # the store turned shared while these waited for a slot: the other run may have claimed them
                looked = store.pulled
                sends, i, claimed = await self._claim(sends[i:]), 0, True
                continue
            item = sends[i]
            job, part, messages, body = item
            i += 1
            key = job.keys[part]
            if extra and (id(job), part) in extra:
                continue
            judge = part // job.per_judge
            if down and judge in down:
                self._finish_part(job, part, down[judge])
                continue
            client = clients[judge]
            limiter = client.limiter
            if self._shared(job, part, key, client.stats):
                continue
            if self.stopped is not None:  # the budget is used up: nothing more is sent
                self._deliver(job, part, self._at_budget(self.stopped))
                continue
            waited = not limiter.try_acquire()
            if waited:
                await limiter.acquire()
            if self.failure is not None:
                limiter.release()
                return False
            if self.stopped is not None:
                limiter.release()
                i -= 1  # ended as the budget says, above
                continue
            if waited and not claimed and store is not None and store.shared:
                limiter.release()  # the store turned shared while it waited: claim it first, with the rest
                i -= 1
                continue
            if store is not None and store.pulled != looked:
                looked = store.pulled
                sends, i = self._look_again(store, sends[i - 1 :], extra, claimed), 1
                if not sends or sends[0] is not item:  # its reply came from another process: the slot is free
                    limiter.release()
                    i = 0
                    continue
            if waited and self._shared(job, part, key, client.stats):  # an identical request started meanwhile
                limiter.release()
                continue
            inflight[key] = []
            followers = self._followers(job, part, client, extra) if several else ()
            self._spawn(self._send(job, part, messages, body, followers))
        return True

    def _look_again(self, store: ReplyStore, sends: list, extra: set, claimed: bool) -> list:
        """Of ``sends``, looked up before the store imported more replies, those it still lacks; it finishes the
        others. ``extra``'s are asked for already (extra choices of a request in flight): left out."""
        todo = [s for s in sends if (id(s[0]), s[1]) not in extra] if extra else sends
        rest = self._from_store(store, todo)
        if claimed and store.claiming and len(rest) < len(todo):
            kept = {id(s) for s in rest}
            for s in todo:
                if id(s) not in kept:
                    store.release(s[0].keys[s[1]])  # claimed to send it, but not sent: free it for the others
        return rest

    def _join_company(self) -> None:
        """Another run opened the reply store: claim what this one is sending, then claim before each send."""
        store = self.store
        if store is not None and not store.shared:
            try:
                store.share(list(self.inflight))
            except (sqlite3.Error, CacheError) as e:
                self._fail(e)

    async def _claim(self, sends: list) -> list:
        """Of ``sends`` (none in the store), those this process is to send: it claims their keys in the store. Keys
        another process holds, or whose claim is not decided yet, wait in ``parked`` (see :meth:`_poll_parked`)."""
        store = self.store
        assert store is not None
        inflight, recent, parked = self.inflight, self.recent, self.parked
        out, ask, asked = [], [], []
        for item in sends:
            key = item[0].keys[item[1]]
            if key in inflight or key in recent:
                out.append(item)  # this run's own request: _send_all shares its reply
            elif key in parked:
                parked[key].append(item)
            else:
                asked.append(item)
                ask.append(key)
        if not ask:
            return out
        got = store.claim(ask, wait=False)
        # Another process's commit holds the lock for a millisecond or so. Never a blocking wait here: it would stop
        # the loop; claim() raises CacheLockedError once nobody has committed for the store's lock_wait.
        while got is None:
            await asyncio.sleep(0.001)
            got = store.claim(ask, wait=False)
        found, mine = got
        claimed = set(mine)
        if found:  # again with the log-probability tables that claim() leaves out
            found = self.cached_replies(store, [i for i in asked if i[0].keys[i[1]] in found], False) or found
        mine_items = []
        for item in asked:
            job, part = item[0], item[1]
            key = job.keys[part]
            hit = found.get(key)
            outcome = self._from_cache(job.plan.metric, hit) if hit is not None else None
            if outcome is not None:
                self._hit(job, part, item[3], outcome)
            elif key in claimed or hit is not None:  # a damaged entry is scored again
                mine_items.append(item)
            else:
                parked.setdefault(key, []).append(item)
        # another process's request may have failed validation meanwhile (it kept the failure, then freed its claim)
        to_send = self._replay_failures(store, mine_items)
        if len(to_send) < len(mine_items):
            sending = {id(i) for i in to_send}
            for item in mine_items:
                if id(item) not in sending:
                    store.release(item[0].keys[item[1]])
        return out + to_send

    async def _poll_parked(self) -> None:
        """Look the parked keys up again until another process stored their replies (or freed its claims): those
        whose claims the store says changed (all of them where it cannot tell)."""
        assert self.store is not None
        token = None
        while self.failure is None:
            await asyncio.sleep(_POLL_S)
            if not self.parked:
                continue
            self.polling = True
            try:
                token, keys = self.store.claims_changed(token)
                items = [i for k in (list(self.parked) if keys is None else keys) for i in self.parked.pop(k, ())]
                looked = self.store.pulled
                await self._send_all(await self._claim(items), looked=looked)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001 - a store error: it must stop the run, not hang its rows
                self._fail(e)
            finally:
                self.polling = False

    def _shared(self, job: RowJob, part: int, key: bytes, stats: Any) -> bool:
        """Serve (job, part) from this run's identical request: one in flight (wait for its reply) or one
        answered recently. False when there is none, and the request must be sent."""
        waiting = self.inflight.get(key)
        if waiting is not None:
            waiting.append((job, part))
            stats.shared += 1
            return True
        shared = self.recent.get(key)
        if shared is not None:
            stats.shared += 1
            self._finish_part(job, part, shared)
            return True
        return False

    def requests(self) -> Iterator[list[tuple[bytes, Metric, bytes]]]:
        """Every request of the split as the feeder renders it, one read batch at a time: (key, metric, body).

        For batch mode (batch.py), which packs them into files: nothing is sent, no row is finished,
        and rows that send nothing (a null input, a template error) are left out, as the run reports them.
        """
        assert self.ds is not None  # batch mode reads a dataset, not a stream
        needed = sorted({c for p in self.plans for c in p.columns.values() if c is not None})
        source = self.ds.select_columns(needed) if needed else self.ds
        row, n = 0, len(self.ds)
        for batch in read_batches(source, self.read_batch, any(p.images for p in self.plans)):
            size = len(batch[needed[0]]) if needed else min(self.read_batch, n - row)
            sends = self.prepare_rows(batch, row, size)
            row += size
            if self.store is not None and self.client.strict_fallback and sends:
                # replies stored under a whole body's key (earlier versions, reuse="strict") are not sent again
                found = self.cached_replies(self.store, sends)
                sends = [s for s in sends if s[0].keys[s[1]] not in found]
            self.values.clear()
            self.row_pending.clear()
            self.errors.clear()
            yield [(job.keys[part], job.plan.metric, body) for job, part, _, body in sends]

    def cached_replies(self, store: ReplyStore, sends: list, copy_forward: bool = True) -> dict[bytes, tuple]:
        """The store's replies to ``sends`` (from :meth:`_prepare`), by reply key.

        Where a reply key leaves settings out (compatible reuse), a reply not found under it is looked
        up under the key of the whole body too: that is where earlier versions, and ``reuse="strict"``,
        stored it. ``copy_forward`` stores such a reply under its reply key as well, so that a later
        change of max_tokens still finds it.
        """
        found = store.get_many([job.keys[part] for job, part, _, _ in sends], with_logprobs=self.logprobs)
        if self.client.strict_fallback and len(found) < len(sends):
            whole = {
                self._whole_body_key(job, part, body): job.keys[part]
                for job, part, _, body in sends
                if job.keys[part] not in found
            }
            for key, hit in store.get_many(list(whole), with_logprobs=self.logprobs).items():
                found[whole[key]] = hit
                if copy_forward:
                    content, usage = hit[0], hit[1]
                    store.put(whole[key], content, usage, hit[2] if len(hit) > 2 else None)
        return found

    def _from_cache(self, metric: Metric, hit: tuple) -> Outcome | None:
        content, usage = hit[0], hit[1]
        table = hit[2] if len(hit) > 2 else None  # the log-probability table, read when logprobs are on
        if not self.client.reply_fits(usage):
            return None  # longer than this run's max_tokens allows: it would have been cut off
        content = scrub_registered(content)  # an entry written before its secret was registered
        try:
            return Outcome(parse_reply(metric, content, "stop"), content, cached=True, usage=usage, logprobs=table)
        except ReplyError:
            return None  # a damaged or outdated entry: score it again

    def _spawn(self, coro) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def _followers(self, job: RowJob, part: int, client: JudgeClient, claimed: set) -> tuple[int, ...]:
        """For the first sample of a (judge, order): the other samples not yet answered, to ask for in the same
        request as its extra choices (``n``), where the server is not known to ignore ``n``. A sample parked
        for another process (a shared store: it claimed the key and pays for it) is waited for, not asked
        for again as an extra choice."""
        if client.n_choices is False or (part // job.orders) % self.layout.samples:
            return ()
        inflight, recent, parked, out = self.inflight, self.recent, self.parked, []
        for sample in range(1, self.layout.samples):
            other = part + sample * job.orders
            key = job.keys[other]
            if job.outcomes[other] is None and key not in inflight and key not in recent and key not in parked:
                inflight[key] = []
                claimed.add((id(job), other))
                out.append(other)
        return tuple(out)

    async def _send(
        self,
        job: RowJob,
        part: int,
        messages: list,
        body: bytes,
        followers: Sequence[int] = (),
        have_slot: bool = True,
    ) -> None:
        judge = part // job.per_judge
        client = self.clients[judge]
        try:
            outcome = await client.call(
                job.plan.metric,
                messages,
                job.plan.temperature,
                have_slot=have_slot,
                body=body,
                n=1 + len(followers),
            )
        except asyncio.CancelledError:
            raise
        except (ServerUnreachableError, CircuitOpenError) as e:
            if not self._judge_failed(judge, e):
                self._fail(e)
                return
            outcome = self.judge_down[judge]
        except BudgetExceededError as e:
            if not self.partial:
                self._fail(e)
                return
            outcome = self._at_budget(e)  # its samples asked as extra choices end alike (below)
        except BaseException as e:  # noqa: BLE001 - a RunStopped, or a bug: either must not hang the map
            where = f"judge {self.layout.judges[judge]!r}: " if self.layout.panel else ""
            if where and isinstance(e, _JUDGE_STOPS) and e.args and not str(e.args[0]).startswith(where):
                e.args = (where + str(e.args[0]), *e.args[1:])  # which judge's key, model or quota
            self._fail(e)
            return
        if followers:
            extra = outcome.extra or []
            if outcome.choices:  # a completion came, with 1 + len(extra) choices
                client.n_choices = len(extra) >= len(followers)
                if not client.n_choices:
                    self._n_ignored(client, outcome)
                for other in followers[len(extra) :]:
                    self._spawn(self._send(job, other, messages, body, have_slot=False))
                for other, o in zip(followers, extra[: len(followers)], strict=False):
                    self._deliver(job, other, o)
            elif client.n_choices is not True and _refuses_n(outcome):
                client.n_choices = False
                self._n_ignored(client, outcome)
                for other in (part, *followers):  # each sample on its own; their waiters are still registered
                    self._spawn(self._send(job, other, messages, body, have_slot=False))
                return
            else:  # no reply came (a connection failure, a timeout, a 5xx): every sample of it failed alike
                for other in followers:
                    self._deliver(job, other, outcome)
        self._deliver(job, part, outcome)

    def _n_ignored(self, client: JudgeClient, outcome: Outcome) -> None:
        if any("ignores n" in note for note in client.stats.notes):
            return
        how = f"refused it ({outcome.kind})" if not outcome.choices else "answered with one choice"
        note = (
            f"the server at {client.base_url} ignores n (asked for {self.layout.samples} choices, it {how}): "
            "each sample is a request of its own"
        )
        client.stats.notes.append(note)
        logger.info(note)

    def _at_budget(self, stop: BudgetExceededError) -> Outcome:
        """The outcome of a request the budget left unsent; the first stop is the run's (``stopped``)."""
        if self.stopped is None:
            self.stopped = stop
        c = self.client
        return Outcome(None, None, ErrorKind.BUDGET, unsent_message(limit_text(stop, c.max_cost, c.max_total_tokens)))

    def _deliver(self, job: RowJob, part: int, outcome: Outcome) -> None:
        """A request's outcome to its part, to the reply store (a reply, or a reply that failed validation: see
        store/failures.py), and to the identical requests waiting for it."""
        key = job.keys[part]
        store = self.store
        if outcome.value is not None and store is not None:
            assert outcome.raw is not None  # a validated reply always keeps its text
            store.put(key, outcome.raw, outcome.usage, outcome.logprobs)
        elif store is not None:
            if outcome.kind in KEPT_KINDS and not outcome.cached:
                raw = None if outcome.raw is None else scrub(outcome.raw)  # as its error row is: no secret kept
                cap = self.clients[part // job.per_judge].max_tokens
                record = failure_record(str(outcome.kind), scrub(outcome.message or ""), raw, outcome.attempts, cap)
                store.put(failure_key(key), record)  # before the release: the same commit, or an earlier one
            if store.claiming:
                store.release(key)  # failed: another process waiting on it may try it itself (or replay it)
        recent = self.recent  # a failure too: the same request already had its retries
        recent[key] = outcome
        if len(recent) > self.recent_max:
            recent.popitem(last=False)
        self._finish_part(job, part, outcome)
        for waiter, waiter_part in self.inflight.pop(key, ()):
            self._finish_part(waiter, waiter_part, outcome)

    def _judge_failed(self, judge: int, e: BaseException) -> bool:
        """A panel's judge whose server is down or failing: its requests end as errors, the others go on.
        False when no judge is left (or there is no panel): then the run stops, as with one judge."""
        if len(self.clients) == 1:
            return False
        if judge not in self.judge_down:
            kind = ErrorKind.CONNECTION if isinstance(e, ServerUnreachableError) else ErrorKind.BAD_RESPONSE
            self.judge_down[judge] = Outcome(None, None, kind, f"the judge stopped: {e}")
        return len(self.judge_down) < len(self.clients)

    def _store_failed(self) -> None:
        store = self.store
        assert store is not None and store.failure is not None  # only called when the store has failed
        parts = sum(2 if p.metric.kind == MetricKind.PAIRWISE and p.metric.swap else 1 for p in self.plans)
        parts *= self.layout.samples * len(self.clients)
        error = store.stop_error((self.total - self.frontier) * parts)
        assert error is not None
        self._fail(error)

    def _row_done(self, r: int) -> None:
        left = self.row_pending[r] - 1
        self.row_pending[r] = left
        if left:
            return
        del self.row_pending[r]
        self.rows_done += 1
        if r == self.frontier:
            f = r + 1
            pending = self.row_pending
            while f in self.values and f not in pending:
                f += 1
            self.frontier = f
            if f >= self.want:
                self.ready.set()

    # -- consumer (main thread, inside Dataset.map) ---------------------------
    def consume(self, indices: list[int]) -> dict[str, list]:
        if not indices:
            return {c: [] for c in self.columns}
        start, stop = indices[0], indices[-1] + 1
        self.want = stop
        if self._room_wanted:  # the rows wanted may lie past the window: the feeder must read on (_full)
            self._wake()
        while self.frontier < stop:
            if self.failure is not None:
                raise self.failure
            self.ready.clear()
            if self.frontier >= stop:
                break
            self.ready.wait(0.1)
        if self.failure is not None:
            raise self.failure
        values = self.values
        rows = [values.pop(r) for r in range(start, stop)]
        self.consumed = stop
        if self._room_wanted:
            self._wake()
        self.scored_rows += len(rows)
        if stop - self._released_at >= RELEASE_EVERY:
            # the feeder has read these rows and more; their pages need not stay resident
            self._released_at = stop
            release(self.input_files)
        return {c: [row.get(c) for row in rows] for c in self.columns}

    def in_order(self, errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Error rows by row, then metric as the plans list them: the order they finish in varies from run to run."""
        order = {p.metric.name: i for i, p in enumerate(self.plans)}
        return sorted(errors, key=lambda e: (e["row"], order.get(e["metric"], 0)))

    async def cancel(self) -> None:
        self._fail(self.failure or asyncio.CancelledError())
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


def _refuses_n(outcome: Outcome) -> bool:
    """A 400/422 whose message is about the ``n`` parameter (``'n' must be 1``), not about the request's content."""
    return outcome.kind in ("http_400", "http_422") and bool(_N_PARAM.search(outcome.message or ""))


_N_PARAM = re.compile(r"(?<![A-Za-z_])n(?![A-Za-z_])")


def read_batches(ds: Dataset, batch_size: int, raw_images: bool) -> Iterator[dict[str, list]]:
    """Batches of ``ds`` as dicts of lists; with ``raw_images``, image columns
    come undecoded, as ``{"bytes", "path"}`` dicts (the Arrow rows as they are),
    so sending an image neither needs Pillow nor re-encodes it."""
    if not raw_images:
        yield from ds.iter(batch_size=batch_size)
        return
    for table in ds.with_format("arrow").iter(batch_size=batch_size):
        yield table.to_pydict()
