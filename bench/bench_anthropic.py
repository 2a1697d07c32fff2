"""The Anthropic wire against OpenAI's: the client's CPU per request (body built, sent on a stub session, reply
parsed and validated), and requests/s over real HTTP against the loopback servers, for hf-judge's own
transport and for the ``anthropic`` SDK's ``AsyncAnthropic`` (same requests, same concurrency, the same body
fields, ``base_url`` at the loopback server; the reply's text parsed and validated by hf-judge as a run
would), with the client process's CPU per request in each.

    PYTHONPATH=. python bench/bench_anthropic.py [N]   # N requests per loopback path (default 10,000)

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


CONCURRENCY = 256


async def loopback_rps(provider: str, url: str, n: int) -> tuple[float, float]:
    """(requests/s, client CPU ms per request) of hf-judge's transport against a loopback server."""
    metric = load_metric("QA_Clarity")
    client = _client(provider, url)
    await client.open()
    rows = [metric.messages({"instruction": f"q{i}", "output": f"a{i}"}) for i in range(n)]

    async def one(messages: list) -> None:
        out = await client.call(metric, messages, 0.1, body=client.body(metric, messages, 0.1, "json_schema"))
        assert out.value is not None, out

    await asyncio.gather(*[one(m) for m in rows[:500]])  # warm up: connections open
    t, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*[one(m) for m in rows])
    dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
    await client.close()
    return n / dt, dcpu / n * 1e3


async def sdk_rps(url: str, n: int) -> tuple[float, float]:
    """(requests/s, client CPU ms per request) of the ``anthropic`` SDK's AsyncAnthropic sending the bodies
    hf-judge builds (their fields as the SDK's arguments), each reply's text validated as hf-judge does."""
    import anthropic

    try:  # the SDK's HTTP client: httpx, or its httpx2 fork in the SDK's 2.x releases (for connection limits)
        import httpx2 as httpx  # type: ignore[import-not-found]
    except ImportError:
        import httpx  # type: ignore[import-not-found,no-redef]
    from hf_judge.judging.validate import parse_reply

    metric = load_metric("QA_Clarity")
    wire = _client("anthropic", url)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    sdk = anthropic.AsyncAnthropic(
        api_key="k",
        base_url=url,
        max_retries=0,
        # the SDK's 5 s to connect fails the 256 connections opened at once on a busy machine
        timeout=60.0,
        http_client=anthropic.DefaultAsyncHttpxClient(limits=limits),
    )
    rows = [metric.messages({"instruction": f"q{i}", "output": f"a{i}"}) for i in range(n)]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(messages: list) -> None:
        # the same body hf-judge sends, through the SDK's own arguments (output_config included)
        params = orjson.loads(wire.body(metric, messages, 0.1, "json_schema"))
        async with gate:
            message = await sdk.messages.create(**params)
        text = "".join(b.text for b in message.content if b.type == "text")
        parse_reply(metric, text, "stop" if message.stop_reason == "end_turn" else message.stop_reason)  # raises

    await asyncio.gather(*[one(m) for m in rows[:500]])
    t, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*[one(m) for m in rows])
    dt, dcpu = time.perf_counter() - t, time.process_time() - cpu
    await sdk.close()
    return n / dt, dcpu / n * 1e3


def main() -> None:
    from anthropic_fixture import AnthropicServer
    from judge_fixture import JudgeServer

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    for provider in ("openai", "anthropic"):
        print(f"stub  {provider:9}: {asyncio.run(stub_us_per_call(provider, 100_000)):.1f} us CPU per request")
    with JudgeServer() as judge, AnthropicServer() as claude:
        got = {
            "hf-judge openai -> judge_server": asyncio.run(loopback_rps("openai", judge.base_url, n)),
            "hf-judge anthropic -> anthropic_server": asyncio.run(loopback_rps("anthropic", claude.url, n)),
            "anthropic SDK -> anthropic_server": asyncio.run(sdk_rps(claude.url, n)),
        }
    for name, (rps, cpu) in got.items():
        print(f"loopback {name:40}: {rps:8,.0f} requests/s  {cpu:.3f} ms client CPU per request")
    ours, sdk = got["hf-judge anthropic -> anthropic_server"], got["anthropic SDK -> anthropic_server"]
    base = got["hf-judge openai -> judge_server"]
    print(f"hf-judge anthropic / openai : {ours[0] / base[0]:.2f}x requests/s, {ours[1] / base[1]:.2f}x CPU")
    print(f"hf-judge anthropic / SDK    : {ours[0] / sdk[0]:.2f}x requests/s, {ours[1] / sdk[1]:.2f}x CPU")


if __name__ == "__main__":
    main()
