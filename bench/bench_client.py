"""The client's own CPU per ``JudgeClient.call``, with a stub aiohttp session: no sockets, no server.

It measures what hf_judge adds per request (retry loop, limiter, deadlines, reply
validation) to a fraction of a microsecond, which bench_throughput.py (real HTTP,
~140 us of CPU a request, +-10 % between runs) cannot. Compare two checkouts by
running it against each, alternating:

    PYTHONPATH=. python bench/bench_client.py
"""

from __future__ import annotations

import asyncio
import time

import orjson

from hf_judge.judging.catalogue import load_metric
from hf_judge.transport.client import JudgeClient

DATA = orjson.dumps(
    {
        "choices": [{"message": {"content": '{"reason": "clear", "score": 7}'}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
)


class _Content:
    total_raw_bytes = len(DATA)

    def __init__(self):
        self.done = False

    async def readany(self) -> bytes:
        if self.done:
            return b""
        self.done = True
        return DATA


class _Response:
    status = 200
    headers: dict = {}
    content_length = len(DATA)

    def __init__(self):
        self.content = _Content()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    def close(self) -> None:
        pass


class _Session:
    def post(self, url, data):  # noqa: ARG002 - aiohttp.ClientSession.post's signature
        return _Response()

    async def close(self) -> None:
        pass


async def main(n: int, workers: int = 8) -> float:
    metric = load_metric("QA_Clarity")
    messages = [{"role": "user", "content": "Rate it."}]
    try:
        from hf_judge.settings import Settings

        client = JudgeClient(Settings(model="m", base_url="http://x.test/v1", concurrency=64), api_key=None)
    except TypeError:  # a version from before Settings, to compare with
        client = JudgeClient(base_url="http://x.test/v1", api_key=None, model="m", concurrency=64)
    await client.open()
    await client._session.close()
    client._session = _Session()  # the aiohttp path runs as it is, on a stub session
    body = client.body(metric, messages, 0.1, "json_schema")

    async def worker(k: int) -> None:
        for _ in range(k):
            await client.call(metric, messages, 0.1, body=body)

    await worker(2000)  # warm up
    t = time.process_time()
    await asyncio.gather(*[worker(n // workers) for _ in range(workers)])
    dt = time.process_time() - t
    await client.close()
    return dt / n * 1e6


if __name__ == "__main__":
    print(f"{asyncio.run(main(200_000)):.2f} us CPU per call")
