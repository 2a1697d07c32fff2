"""The Anthropic wire against OpenAI's: the client's CPU per request (body built, sent on a stub session, reply
parsed and validated), and requests/s over real HTTP against the loopback servers.

    PYTHONPATH=. python bench/bench_anthropic.py

The stub figures compare what each provider's path costs in hf-judge itself (bench_client.py's method, plus
building the body, as the row core does for every request). The loopback figures include the servers, which
differ (tests/judge_server.py is aiohttp's low-level server, tests/anthropic_server.py a web.Application that
checks more), so their ratio is an upper bound on the client's share.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from hf_judge.judging.catalogue import load_metric  # noqa: E402
from hf_judge.settings import Settings  # noqa: E402
from hf_judge.transport.client import JudgeClient  # noqa: E402

REPLY = '{"reason": "clear", "score": 7}'
DATA = {
    "openai": orjson.dumps(
        {
            "choices": [{"message": {"content": REPLY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
    ),
    "anthropic": orjson.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": REPLY}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0},
        }
    ),
}


def _client(provider: str, base_url: str) -> JudgeClient:
    return JudgeClient(Settings(model="m", provider=provider, base_url=base_url, concurrency=256), api_key="k")


async def stub_us_per_call(provider: str, n: int, workers: int = 8) -> float:
    metric = load_metric("QA_Clarity")
    data = DATA[provider]

    async def transport(body: bytes):  # noqa: ARG001 - the Transport seam's signature
        return 200, {}, data

    client = JudgeClient(
        Settings(model="m", provider=provider, base_url="http://x.test/v1", concurrency=64),
        api_key="k",
        transport=transport,
    )
    await client.open()
    rows = [metric.messages({"instruction": f"q{i}", "output": f"a{i}"}) for i in range(1000)]

    async def worker(k: int) -> None:
        for i in range(k):
            messages = rows[i % 1000]
            body = client.body(metric, messages, 0.1, "json_schema")
            await client.call(metric, messages, 0.1, body=body)

    await worker(2000)  # warm up
    t = time.process_time()
    await asyncio.gather(*[worker(n // workers) for _ in range(workers)])
    dt = time.process_time() - t
    await client.close()
    return dt / n * 1e6


async def loopback_rps(provider: str, url: str, n: int) -> float:
    metric = load_metric("QA_Clarity")
    client = _client(provider, url)
    await client.open()
    rows = [metric.messages({"instruction": f"q{i}", "output": f"a{i}"}) for i in range(n)]

    async def one(messages: list) -> None:
        await client.call(metric, messages, 0.1, body=client.body(metric, messages, 0.1, "json_schema"))

    await asyncio.gather(*[one(m) for m in rows[:500]])  # warm up: connections open
    t = time.perf_counter()
    await asyncio.gather(*[one(m) for m in rows])
    dt = time.perf_counter() - t
    await client.close()
    return n / dt


def main() -> None:
    from anthropic_fixture import AnthropicServer
    from judge_fixture import JudgeServer

    for provider in ("openai", "anthropic"):
        print(f"stub  {provider:9}: {asyncio.run(stub_us_per_call(provider, 100_000)):.1f} us CPU per request")
    with JudgeServer() as judge, AnthropicServer() as claude:
        for provider, url in (("openai", judge.base_url), ("anthropic", claude.url)):
            print(f"loopback {provider:9}: {asyncio.run(loopback_rps(provider, url, 20_000)):,.0f} requests/s")


if __name__ == "__main__":
    main()
