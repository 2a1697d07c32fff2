"""Concurrency and rate control: an adaptive (AIMD) limit on requests in flight.

The limit starts at ``concurrency``. A burst of 429s (at least 20 % of the
recent replies to requests sent since the last cut) halves it, at most
once per round trip, as TCP does; the odd 429 of a provider's random throttling does
not. Each success grows the limit by ``max(1/limit, 0.02)``: one more slot per
round trip while the limit is small, 2 % per round trip when it is large, never
above ``concurrency``. Sleeping retries hold no slot.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable


class AdaptiveLimiter:
    """An AIMD limit on requests in flight (see the module docstring).

    ``now``: the clock that ``sent_at`` times are read from (the client's).

    Example:
        >>> lim = AdaptiveLimiter(4)
        >>> lim.try_acquire(), lim.in_flight
        (True, 1)
        >>> lim.release(); lim.in_flight
        0
    """

    def __init__(self, maximum: int, *, now: Callable[[], float] = time.monotonic):
        if maximum < 1:
            raise ValueError("concurrency must be at least 1")
        self.maximum = maximum
        self.limit = float(maximum)
        self.in_flight = 0
        self.peak = 0
        self.cuts = 0
        self._last_cut = 0.0
        self._recent: deque[bool] = deque(maxlen=50)
        self._recent_throttled = 0
        self._waiters: deque[asyncio.Future] = deque()
        self._now = now

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

    def release(self, *, throttled: bool = False, sent_at: float | None = None) -> None:
        self.in_flight -= 1
        if sent_at is not None and sent_at >= self._last_cut:
            recent = self._recent
            if len(recent) == recent.maxlen and recent[0]:
                self._recent_throttled -= 1
            recent.append(throttled)
            if throttled:
                self._recent_throttled += 1
                if len(recent) >= 10 and self._recent_throttled >= 0.2 * len(recent):
                    self.limit = max(1.0, self.limit * 0.5)
                    self._last_cut = self._now()
                    self.cuts += 1
                    recent.clear()
                    self._recent_throttled = 0
        if not throttled and self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + max(1.0 / self.limit, 0.02))
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
