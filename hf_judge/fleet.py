"""A judge client over a fleet of replicas of one model (several base URLs).

Each attempt goes to the endpoint with the fewest of this client's requests
in flight, so a slow or busy replica gets less of the load and a retry may go
to another one. A replica that refuses connections (down, restarting) is
passed over for ``DOWN_S`` seconds: the request goes at once to another
replica (it never reached the first, so nothing is paid twice) and counts
as no failure, so one dead replica of several neither errors rows nor stops
the run; only when every replica refuses does the attempt fail. Everything
else (limits, retries, validation, statistics) is the one
:class:`~hf_judge.client.JudgeClient`'s. Replicas serve the same
model, so a reply is cached under the first endpoint's key whichever replica
gave it: a run over a different set of replicas (same first URL) reuses it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import aiohttp

from .client import JudgeClient, _endpoint, _read_limited, _ReplyTooLarge
from .errors import ConfigError
from .settings import Settings, check_base_url

# Seconds a replica that refused a connection gets no request; then one request tries it again.
DOWN_S = 5.0


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
        super().__init__(settings.model_copy(update={"base_url": urls[0]}), api_key=api_key)
        self.urls = [_endpoint(u, api_key)[0] for u in urls]
        self.loads = [0] * len(urls)
        self.sent: Counter[int] = Counter()  # attempts per endpoint (index into urls)
        self.down_until = [0.0] * len(urls)  # client clock time before which a replica gets no request

    async def _post(self, body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        tried: set[int] = set()
        while True:
            i = self._pick(tried)
            try:
                return await self._post_to(i, body)
            except aiohttp.ClientConnectorError:  # no connection: the request never reached replica i
                self.down_until[i] = self._now() + DOWN_S
                tried.add(i)
                if len(tried) == len(self.urls):
                    raise

    def _pick(self, tried: set[int]) -> int:
        """The least busy replica not tried for this request, one that is not down if there is one."""
        now = self._now()
        left = [j for j in range(len(self.urls)) if j not in tried]
        up = [j for j in left if self.down_until[j] <= now]
        if up:
            return min(up, key=self.loads.__getitem__)
        return min(left, key=self.down_until.__getitem__)  # all down: the one that has rested longest

    async def _post_to(self, i: int, body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        session = self._session
        assert session is not None, "FleetClient.open() was not called"
        loads = self.loads
        loads[i] += 1
        self.sent[i] += 1
        try:
            async with session.post(self.urls[i], data=body) as resp:
                try:
                    return resp.status, resp.headers, await _read_limited(resp, self.max_reply_bytes)
                except _ReplyTooLarge as e:
                    resp.close()
                    e.status, e.headers = resp.status, resp.headers
                    raise
        finally:
            loads[i] -= 1
