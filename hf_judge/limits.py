"""Concurrency and rate control: an adaptive (AIMD) limit on requests in flight.

The limit starts at ``concurrency``. A 429 halves it, at most once per
round trip (only a request sent after the last cut can cut again, as TCP does);
each success grows it by ``1/limit``, about one more slot per round trip, never
above ``concurrency``. Sleeping retries hold no slot.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque


class AdaptiveLimiter:
    def __init__(self, maximum: int):
        if maximum < 1:
            raise ValueError("concurrency must be at least 1")
        self.maximum = maximum
        self.limit = float(maximum)
        self.in_flight = 0
        self.peak = 0
        self.cuts = 0
        self._last_cut = 0.0
        self._waiters: deque[asyncio.Future] = deque()

    def try_acquire(self) -> bool:
        if self.in_flight < max(1, int(self.limit)) and not self._waiters:
            self.in_flight += 1
            if self.in_flight > self.peak:
                self.peak = self.in_flight
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()
            raise

    def release(self, *, throttled: bool = False, sent_at: float = 0.0) -> None:
        self.in_flight -= 1
        if throttled:
            if sent_at >= self._last_cut:
                self.limit = max(1.0, self.limit / 2)
                self._last_cut = time.monotonic()
                self.cuts += 1
        elif self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
        self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters and self.in_flight < max(1, int(self.limit)):
            fut = waiters.popleft()
            if fut.done():
                continue
            self.in_flight += 1
            if self.in_flight > self.peak:
                self.peak = self.in_flight
            fut.set_result(None)
