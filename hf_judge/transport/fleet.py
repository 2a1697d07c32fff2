"""A judge client over a fleet of replicas of one model (several base URLs).

Each attempt goes to the endpoint with the fewest of this client's requests
in flight, so a slow or busy replica gets less of the load and a retry may go
to another one. A replica that refuses connections (down, restarting) is
passed over for ``DOWN_S`` seconds: the request goes at once to another
replica (it never reached the first, so nothing is paid twice) and counts
as no failure, so one dead replica of several neither errors rows nor stops
the run; only when every replica refuses does the attempt fail. A replica
that answers, but with garbage (a 200 that is no completion or no valid reply,
a 5xx), is fast at it and so would draw most of the load: once at least half of
its last ``HEALTH_WINDOW`` answers failed, and at least twice the share of the
best other replica's (a model that fails everywhere is no replica's fault), it
is passed over as a dead one is, for ``DOWN_S`` seconds, then tried with one
request; each trial that fails too doubles its rest (up to ``MAX_REST_S``).
Everything else (limits, retries, validation, statistics) is the one
:class:`~hf_judge.transport.client.JudgeClient`'s. Replicas serve the same
model, so a reply is cached under the first endpoint's key whichever replica
gave it: a run over a different set of replicas (same first URL) reuses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Mapping, Sequence

import aiohttp

from ..errors import ConfigError, ErrorKind
from ..judging.metrics import Metric
from ..settings import Settings, check_base_url, resolved_provider
from .client import JudgeClient, Outcome, ReplyTooLarge, read_limited
from .endpoint import parse_endpoint

logger = logging.getLogger("hf_judge")

# Seconds a replica that refused a connection gets no request; then one request tries it again.
DOWN_S = 5.0
# A replica's last answers that judge its health, and how many it needs before it can be taken out.
HEALTH_WINDOW = 20
MIN_ANSWERS = 6
# The share of failed answers that takes a replica out (if the others fail at most half as often).
BAD_SHARE = 0.5
# The longest rest of a replica whose trial requests keep failing.
MAX_REST_S = 300.0


class FleetClient(JudgeClient):
    """A :class:`JudgeClient` that spreads its requests over ``base_urls`` by their in-flight load.

    Example:
        >>> c = FleetClient(Settings(model="m"), ["http://a:8000/v1", "http://b:8000/v1"], api_key="sk-x")
        >>> c.base_url, len(c.urls)
        ('http://a:8000/v1', 2)
    """

    def __init__(self, settings: Settings, base_urls: Sequence[str], *, api_key: str | None):
        if isinstance(base_urls, str) or not base_urls:
            raise ConfigError("base_urls takes a list of one or more base URLs, e.g. ['http://gpu1:8000/v1', ...]")
        urls = [check_base_url(u) for u in base_urls]
        # the provider as the settings say or imply it: the replicas' URLs (base URLs) must not make it OpenAI's
        update = {"base_url": urls[0], "provider": resolved_provider(settings)}
        super().__init__(settings.model_copy(update=update), api_key=api_key)
        route = "/chat/completions" if self.wire is None else self.wire.route
        self.urls = [parse_endpoint(u, api_key, route)[0] for u in urls]
        self.loads = [0] * len(urls)
        self.sent: Counter[int] = Counter()  # attempts per endpoint (index into urls)
        self.down_until = [0.0] * len(urls)  # client clock time before which a replica gets no request
        self.names = [parse_endpoint(u, api_key)[1] for u in urls]  # without credentials: for messages
        self.health = [deque[bool](maxlen=HEALTH_WINDOW) for _ in urls]  # True: a failed answer
        self.rested_at: list[float | None] = [None] * len(urls)  # when it was taken out for its answers
        self.rest_s = [DOWN_S] * len(urls)
        self.on_trial = [False] * len(urls)  # a rested replica's one trial request is in flight
        self._served: dict[asyncio.Task, tuple[int, float]] = {}  # the replica of an attempt, and when it was sent

    async def _post(self, body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        tried: set[int] = set()
        while True:
            i = self._pick(tried)
            try:
                return await self._post_to(i, body)
            except aiohttp.ClientConnectorError:  # no connection: the request never reached replica i
                self.down_until[i] = self._now() + DOWN_S
                self.on_trial[i] = False  # down: DOWN_S decides when it is tried again
                tried.add(i)
                if len(tried) == len(self.urls):
                    raise

    def _pick(self, tried: set[int]) -> int:
        """The least busy replica not tried for this request, one that is not down if there is one."""
        now = self._now()
        left = [j for j in range(len(self.urls)) if j not in tried]
        up = [j for j in left if self.down_until[j] <= now and not self.on_trial[j]]
        if up:
            i = min(up, key=self.loads.__getitem__)
            if self.rested_at[i] is not None:
                self.on_trial[i] = True  # one request, until its answer says whether the replica is well again
            return i
        return min(left, key=self.down_until.__getitem__)  # all down: the one that has rested longest

    async def _post_to(self, i: int, body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        session = self._session
        assert session is not None, "FleetClient.open() was not called"
        loads = self.loads
        loads[i] += 1
        self.sent[i] += 1
        task = asyncio.current_task()
        if task is not None:
            self._served[task] = (i, self._now())
        try:
            async with session.post(self.urls[i], data=body) as resp:
                try:
                    return resp.status, resp.headers, await read_limited(resp, self.max_reply_bytes)
                except ReplyTooLarge as e:
                    resp.close()
                    e.status, e.headers = resp.status, resp.headers
                    raise
        finally:
            loads[i] -= 1

    async def _attempt(
        self, metric: Metric, body: bytes, task: asyncio.Task, n: int = 1
    ) -> tuple[Outcome, int, float | None]:
        try:
            outcome, status, retry_after = await super()._attempt(metric, body, task, n)
        except BaseException:
            served = self._served.pop(task, None)
            if served is not None:
                self.on_trial[served[0]] = False  # no answer: the next request is the trial
            raise
        served = self._served.pop(task, None)
        if served is not None:
            garbage = status == 200 or status >= 500 or outcome.kind == ErrorKind.BAD_RESPONSE
            self._judge(*served, outcome.value is None and garbage, outcome.kind)
        return outcome, status, retry_after

    def _share(self, i: int) -> float:
        h = self.health[i]
        return sum(h) / len(h) if h else 0.0

    def _judge(self, i: int, sent_at: float, failed: bool, kind: str | None) -> None:
        """Count one answer of replica ``i``; take it out of rotation if its answers are mostly garbage."""
        rested_at = self.rested_at[i]
        if rested_at is not None:
            if sent_at < rested_at:
                return  # sent before it was taken out: its answer changes nothing
            self.on_trial[i] = False
            if not failed:  # well again
                self.rested_at[i], self.rest_s[i] = None, DOWN_S
                self.health[i].clear()
            else:
                self.rest_s[i] = min(MAX_REST_S, self.rest_s[i] * 2)
                self._rest(i, kind)
            return
        h = self.health[i]
        h.append(failed)
        if not failed or len(h) < MIN_ANSWERS or self._share(i) < BAD_SHARE:
            return
        now = self._now()
        others = [self._share(j) for j in range(len(self.urls)) if j != i and self.down_until[j] <= now]
        if others and self._share(i) >= 2 * min(others):
            self._rest(i, kind)

    def _rest(self, i: int, kind: str | None) -> None:
        h = self.health[i]
        logger.warning(
            "replica %s answers with failures (%s; %d of its last %d answers): no request for %.0f s, then one",
            self.names[i],
            kind,
            sum(h),
            len(h),
            self.rest_s[i],
        )
        now = self._now()
        self.rested_at[i] = now
        self.down_until[i] = now + self.rest_s[i]
