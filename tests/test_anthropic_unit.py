"""The Anthropic wire in the client, exactly: Anthropic's errors through the retry policy (virtual time, a
scripted server: tests/test_client_unit.py's seams), and a Message's parts."""

from __future__ import annotations

import orjson
import pytest
from test_client_unit import FakeClock, JumpLoop, Server, status

from hf_judge.errors import ErrorKind, QuotaExceededError
from hf_judge.judging.catalogue import load_metric
from hf_judge.settings import Settings
from hf_judge.transport import anthropic
from hf_judge.transport.client import JudgeClient

METRIC = load_metric("QA_Clarity")
MESSAGES = METRIC.messages({"instruction": "q", "output": "a"})
VALID = {"reason": "clear", "score": 7}


def message(content=None, stop="end_turn", usage=None) -> tuple[int, dict, bytes]:
    blocks = content if content is not None else [{"type": "text", "text": orjson.dumps(VALID).decode()}]
    doc = {"type": "message", "role": "assistant", "content": blocks, "stop_reason": stop}
    doc["usage"] = usage or {"input_tokens": 10, "output_tokens": 5}
    return 200, {}, orjson.dumps(doc)


def error(code: int, type_: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    return status(code, headers, {"type": "error", "error": {"type": type_, "message": f"{type_} says so"}})


def run(replies: list, jitter: str = "min"):
    loop = JumpLoop()
    clock = FakeClock(loop, jitter)
    server = Server(clock, replies)
    settings = Settings(model="claude-x", provider="anthropic", base_url="http://claude.test", backoff_base=0.5)
    client = JudgeClient(settings, api_key="sk-ant-unit", clock=clock, transport=server)

    async def main():
        await client.open()
        clock.ignore.add(client._deadlines._sweeper)
        try:
            return await client.call(METRIC, MESSAGES, 0.1)
        finally:
            await client.close()

    try:
        result = loop.run_until_complete(main())
    except Exception as e:  # noqa: BLE001 - the tests assert on it
        result = e
    finally:
        loop.close()
    return result, server, client, clock


def test_rate_limit_error_waits_its_retry_after_overloaded_backs_off():
    out, server, client, clock = run(
        [error(429, "rate_limit_error", {"retry-after": "7"}), error(529, "overloaded_error"), message()]
    )
    assert out.value == VALID and out.attempts == 3
    assert clock.sleeps == [7.0, 0.0]  # retry-after as given; then backoff, jitter drawn at its floor
    assert dict(client.stats.failures) == {"http_429": 1, "http_529": 1}
    assert client._headers["x-api-key"] == "sk-ant-unit" and "Authorization" not in client._headers


def test_billing_error_stops_the_run_as_a_used_up_quota():
    out, *_ = run([error(402, "billing_error")])
    assert isinstance(out, QuotaExceededError) and "billing_error" in str(out)


def test_refused_output_config_switches_to_a_forced_tool_once_not_an_attempt():
    tool_reply = message([{"type": "tool_use", "id": "t1", "name": "QA_Clarity", "input": VALID}], stop="tool_use")
    refused = error(400, "invalid_request_error")
    refused = (400, {}, refused[2].replace(b"invalid_request_error says so", b"output_config.format: not supported"))
    out, server, client, _ = run([refused, tool_reply])
    assert out.value == VALID and out.attempts == 1
    first, second = (body for _, body in server.sent)
    assert "output_config" in first and "tools" not in first
    assert second["tool_choice"] == {"type": "tool", "name": "QA_Clarity"} and "output_config" not in second
    assert client.stats.structured_output == "tool"


@pytest.mark.parametrize("stop, kind", [("max_tokens", ErrorKind.TRUNCATED), ("refusal", ErrorKind.CONTENT_FILTER)])
def test_stop_reasons_are_validated_like_finish_reasons(stop, kind):
    out, server, *_ = run([message(stop=stop)])
    assert out.kind == kind and len(server.sent) == (4 if kind == ErrorKind.TRUNCATED else 1)


def test_a_200_that_is_no_message_is_a_bad_response_retried():
    out, server, *_ = run([(200, {}, b'{"choices": []}'), message()])
    assert out.value == VALID and out.attempts == 2


def test_usage_counts_cache_reads_and_writes_in_the_prompt():
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 7}
    out, _, client, _ = run([message(usage=usage)])
    assert out.usage == (317, 5)
    s = client.stats
    assert (s.prompt_tokens, s.completion_tokens, s.cached_tokens) == (317, 5, 300)


def test_reply_reads_text_blocks_and_the_tool_input():
    text = [{"type": "text", "text": '{"a": '}, {"type": "text", "text": "1}"}]
    assert anthropic.reply({"content": text, "stop_reason": "end_turn"})[:2] == ('{"a": 1}', "stop")
    tool = [{"type": "text", "text": "thinking aloud"}, {"type": "tool_use", "input": {"a": 1}}]
    assert anthropic.reply({"content": tool, "stop_reason": "tool_use"})[:2] == ('{"a":1}', "stop")
    assert isinstance(anthropic.reply(b'{"content": "no blocks"}'), str)
    assert isinstance(anthropic.reply(b"not json"), str)
