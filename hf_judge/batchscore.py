"""Scoring rows in a worker that shares its reply store with other workers.

:class:`SharedRun` is :class:`~hf_judge.pipeline.SplitRun` over a store opened
``shared=True``: before a request is sent its key is claimed in the store (see
:meth:`ReplyStore.claim`), so that of several workers scoring one dataset only
one sends each distinct request, and the others take its reply from the store
once it is there. A key another worker holds waits, polled every ``POLL_S``;
if that worker dies its claim is taken over and the request sent here.

:func:`score_batch` scores one batch of rows (a dict of columns, as Ray Data's
``map_batches`` hands it) and returns the score columns and the error rows: the
core that a ``--workers`` process and a Ray actor share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from .client import JudgeClient
from .pipeline import Plan, SplitRun, _Job
from .store import ReplyStore

# How often keys that another worker is sending are looked up again.
POLL_S = 0.02
# Tries of a claim that does not wait for the lock before one that does (up to the store's lock_wait).
CLAIM_TRIES = 1000


class SharedRun(SplitRun):
    """A :class:`SplitRun` that claims its keys in a shared store before sending them (one judge, one sample)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # key -> the (job, part, messages, body)s waiting for another worker's reply
        self.waiting: dict[bytes, list[tuple[_Job, int, list, bytes]]] = {}
        self.claimed = 0  # keys this worker claimed and sent
        self.polling = False  # the poller holds items taken out of `waiting`

    async def _feed(self) -> None:
        store = self.store
        if store is None or not store.shared:
            return await super()._feed()
        row = 0
        loop = asyncio.get_running_loop()
        store.on_failure = lambda _e: loop.call_soon_threadsafe(self._store_failed)
        if store.failure is not None:
            return self._store_failed()
        poller = loop.create_task(self._poll())
        try:
            async for size, batch in self._read():
                while row - self.consumed >= self.window and self.failure is None:
                    await asyncio.sleep(0.005)
                if self.failure is not None:
                    return
                sends = self.prepare_rows(batch, row, size)
                row += size
                await self._dispatch(sends)
                if self.failure is not None:
                    return
                await asyncio.sleep(0)
            while (self.tasks or self.waiting or self.polling) and self.failure is None:
                if self.tasks:
                    await asyncio.wait(list(self.tasks), timeout=POLL_S)
                else:
                    await asyncio.sleep(POLL_S)
            while self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
        finally:
            poller.cancel()

    async def _dispatch(self, sends: list[tuple[_Job, int, list, bytes]]) -> None:
        """Serve from the store, this run's own replies or another worker's; send what this worker claims."""
        store = self.store
        assert store is not None
        inflight, stats = self.inflight, self.client.stats
        ask: list[bytes] = []
        local = []
        for item in sends:
            job, part = item[0], item[1]
            key = job.keys[part]
            if self._shared(job, part, key, stats):
                continue
            others = self.waiting.get(key)
            if others is not None:
                others.append(item)
                continue
            local.append(item)
            ask.append(key)
        if not local:
            return
        got = store.claim(ask, wait=False)
        tries = 0
        while got is None:  # another worker's commit holds the lock for a millisecond or so
            tries += 1
            await asyncio.sleep(0.001)
            got = store.claim(ask, wait=tries >= CLAIM_TRIES)
        found, mine = got
        claimed = set(mine)
        for item in local:
            job, part = item[0], item[1]
            key = job.keys[part]
            hit = found.get(key)
            if hit is not None:
                outcome = self._from_cache(job.plan.metric, hit)
                if outcome is not None:
                    self.client.stats.cache_hits += 1
                    self._finish_part(job, part, outcome)
                    continue
                claimed.add(key)  # a damaged entry: score it again
            if key in inflight:  # claimed above for an earlier item of this batch
                inflight[key].append((job, part))
                stats.shared += 1
            elif key in claimed:
                await self._launch(*item)
                if self.failure is not None:
                    return
            else:
                self.waiting.setdefault(key, []).append(item)

    async def _launch(self, job: _Job, part: int, messages: list, body: bytes) -> None:
        limiter = self.client.limiter
        self.inflight[job.keys[part]] = []
        if not limiter.try_acquire():
            await limiter.acquire()
        if self.failure is not None:
            limiter.release()
            return
        self.claimed += 1
        t = asyncio.get_running_loop().create_task(self._send(job, part, messages, body))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def _poll(self) -> None:
        """Look up the keys other workers are sending until their replies are stored (or their claims free)."""
        while self.failure is None:
            await asyncio.sleep(POLL_S)
            if not self.waiting:
                continue
            self.polling = True
            try:
                items = [item for key in list(self.waiting) for item in self.waiting.pop(key)]
                await self._dispatch(items)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001 - a store error: it must stop the run, not hang its rows
                self._fail(e)
            finally:
                self.polling = False


async def score_batch(
    batch: dict[str, Sequence[Any]],
    plans: Sequence[Plan],
    client: JudgeClient,
    store: ReplyStore | None,
    *,
    split: str = "train",
    first_row: int = 0,
    max_input_chars: int | None = None,
    token_columns: bool = False,
    read_batch: int = 128,
) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """Score a batch of rows in the client's event loop: (score columns in row order, error rows).

    ``batch`` maps column names to equal-length lists; error rows count rows
    from ``first_row``. With a ``shared`` store, keys are claimed first (see
    :class:`SharedRun`).

    Example:
        >>> batch = {"question": ["2+2?"], "answer": ["4"]}
        >>> cols, errors = loop.run(score_batch(batch, plans, client, store))  # doctest: +SKIP
    """
    needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
    ds = Dataset.from_dict({c: list(batch[c]) for c in needed})
    n = len(ds)
    run = SharedRun(
        split,
        ds,
        plans,
        client,
        store,
        window=max(n, 1),
        read_batch=read_batch,
        max_input_chars=max_input_chars,
        token_columns=token_columns,
    )
    await run.feed()
    if run.failure is not None:
        raise run.failure
    cols = {c: [run.values[r].get(c) for r in range(n)] for c in run.columns}
    errors = sorted(run.errors, key=lambda e: e["row"])
    for e in errors:
        e["row"] += first_row
    return cols, errors
