"""provider="anthropic" online: Anthropic's Messages API against the loopback server (tests/anthropic_server.py)."""

from __future__ import annotations

import base64

import orjson
import pytest
from anthropic_fixture import *  # noqa: F401,F403 - the Anthropic server fixtures
from datasets import Dataset, Image
from helpers import qa_dataset, rows
from test_images import png

from hf_judge import AuthenticationError, ConfigError, ModelNotFoundError, Settings, load_metric, score_dataset
from hf_judge.settings import resolved_provider
from hf_judge.transport.client import JudgeClient

COLUMNS = {"instruction": "question", "output": "answer"}
FAST = {"backoff_base": 0.001, "backoff_max": 0.01}
MODEL = "claude-haiku-4-5"


def run(ds, server, tmp_path, metrics=("QA_Clarity",), model=MODEL, provider="anthropic", key="sk-ant-test", **kw):
    knobs = {**FAST, **{k: kw.pop(k) for k in list(kw) if k in ("backoff_max",)}}
    return score_dataset(
        ds,
        list(metrics),
        settings=Settings(model=model, provider=provider, **knobs),
        base_url=server.url if provider == "anthropic" else server.base_url,
        api_key=key,
        cache_dir=kw.pop("cache_dir", tmp_path / f"cache-{provider}"),
        columns=kw.pop("columns", COLUMNS),
        progress=False,
        **kw,
    )


def test_provider_is_inferred_from_a_claude_model_without_base_url():
    assert resolved_provider(Settings(model="claude-sonnet-4-5")) == "anthropic"
    assert resolved_provider(Settings(model="claude-sonnet-4-5", base_url="http://127.0.0.1:1/v1")) == "openai"
    assert resolved_provider(Settings(model="gpt-4.1", provider="anthropic")) == "anthropic"
    client = JudgeClient(Settings(model="claude-sonnet-4-5"), api_key="sk-ant-x")
    assert client.url == "https://api.anthropic.com/v1/messages"
    # a base URL ending in /v1 (as OpenAI's are written) is not doubled
    client = JudgeClient(Settings(model="m", provider="anthropic", base_url="http://127.0.0.1:9/v1"), api_key=None)
    assert client.url == "http://127.0.0.1:9/v1/messages"


def test_the_same_scores_as_the_openai_path_in_messages_shape(claude, judge, tmp_path):
    """The loopback servers answer by the same function of the prompt: equal scores prove the Messages body
    carries the prompt the chat completion does; the recorded request shows the Messages API's shape."""
    ds = qa_dataset(12)
    claude.configure(record=True, require_key="sk-ant-test")
    got = run(
        ds,
        claude,
        tmp_path,
        metrics=("QA_Clarity", "QA_All", "Binary"),
        columns={**COLUMNS, "ground_truth": "answer", "prediction": "answer"},
    )
    want = run(
        ds,
        judge,
        tmp_path,
        metrics=("QA_Clarity", "QA_All", "Binary"),
        model="judge",
        provider="openai",
        columns={**COLUMNS, "ground_truth": "answer", "prediction": "answer"},
    )
    assert rows(got) == rows(want)
    st = claude.stats()
    assert st["by_status"] == {"200": 36}
    headers, body = st["headers"][0], st["bodies"][0]
    assert headers["x-api-key"] == "sk-ant-test" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert body["model"] == MODEL and body["max_tokens"] == 4096
    assert "temperature" not in body and "top_p" not in body  # the Messages API takes neither
    assert body["output_config"]["format"]["type"] == "json_schema" and "response_format" not in body
    assert all(m["role"] == "user" for m in body["messages"])
    # the metric's instructions, the same for every row, go first in a block of their own, cached
    head, rest = body["messages"][0]["content"]
    assert head["cache_control"] == {"type": "ephemeral"} and "cache_control" not in rest
    assert head["text"].startswith("You are ") and "row-" in rest["text"]
    assert got.summary.cached_tokens == st["cache_read"] > 0
    assert got.summary.prompt_tokens > 0 and got.summary.structured_output == "json_schema"


def test_system_prompt_and_tool_carry_cache_control_and_cached_tokens_are_counted(claude, tmp_path):
    pdir = tmp_path / "prompts"
    pdir.mkdir()
    rubric = "Grade with care. " * 40
    (pdir / "Q_Sys.jinja").write_text(
        f"---\nsystem: {rubric}\noutputs:\n  score: {{type: integer, minimum: 1, maximum: 5}}\n---\n"
        "Rate: {{ instruction }}\n"
    )
    claude.configure(record=True, reject_output_config=True)  # a model without output_config: a forced tool call
    scored = run(qa_dataset(6), claude, tmp_path, metrics=("Q_Sys",), prompts_dir=pdir)
    body = claude.stats()["bodies"][-1]
    assert body["system"] == [{"type": "text", "text": rubric.strip(), "cache_control": {"type": "ephemeral"}}]
    assert body["tool_choice"] == {"type": "tool", "name": "Q_Sys"}
    assert body["tools"][0]["input_schema"]["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    s = scored.summary
    assert s.structured_output == "tool" and any("forced tool call" in n for n in s.notes)
    assert all(1 <= v <= 5 for v in scored["train"]["Q_Sys"])
    st = claude.stats()
    # the prefix is written once (per concurrent first wave at most), then read: cached tokens in the summary
    assert s.cached_tokens == st["cache_read"] > 0
    assert s.prompt_tokens >= s.cached_tokens + st["cache_creation"]


def test_images_go_as_base64_and_url_blocks(claude, tmp_path):
    pdir = tmp_path / "prompts"
    pdir.mkdir()
    (pdir / "VQA.jinja").write_text(
        "---\nimages: [picture]\noutputs:\n  score: {type: integer, minimum: 1, maximum: 10}\n---\n"
        "Look.\n{{ picture }}\nQ: {{ question }}"
    )
    claude.configure(record=True)
    ds = Dataset.from_dict({"picture": [{"bytes": png((255, 0, 0)), "path": None}], "question": ["red?"]})
    scored = run(ds.cast_column("picture", Image()), claude, tmp_path, metrics=("VQA",), prompts_dir=pdir, columns={})
    assert scored["train"]["VQA"][0] is not None
    ds = Dataset.from_dict({"picture": ["https://example.org/a.png"], "question": ["url?"]})
    run(ds, claude, tmp_path, metrics=("VQA",), prompts_dir=pdir, columns={})
    first, second = (b["messages"][0]["content"] for b in claude.stats()["bodies"])
    assert first[0] == {"type": "text", "text": "Look.\n", "cache_control": {"type": "ephemeral"}}
    assert first[1]["source"]["type"] == "base64" and first[1]["source"]["media_type"] == "image/png"
    assert base64.b64decode(first[1]["source"]["data"]) == png((255, 0, 0))
    assert second[1] == {"type": "image", "source": {"type": "url", "url": "https://example.org/a.png"}}


def test_overloaded_and_rate_limited_are_retried_invalid_replies_hotter(claude, tmp_path):
    claude.configure(overloaded=1, rate_limited=1, retry_after="0", invalid_first=True)
    scored = run(qa_dataset(4), claude, tmp_path)
    s = scored.summary
    assert len(scored["errors"]) == 0 and all(v is not None for v in scored["train"]["QA_Clarity"])
    # try 1: 529 overloaded_error; 2: 429 rate_limit_error; 3: a reply that is no JSON; 4: a good one
    assert s.failed_attempts == {"http_529": 4, "http_429": 4, "invalid_json": 4}
    assert s.requests == 4 * 4


def test_key_and_model_errors_stop_the_run_with_anthropics_words(claude, tmp_path):
    claude.configure(require_key="sk-ant-right")
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        run(qa_dataset(2), claude, tmp_path, key="sk-ant-wrong")
    claude.configure(require_key=None, models=["claude-sonnet-4-5"])
    with pytest.raises(ModelNotFoundError, match="claude-haiku-4-5"):
        run(qa_dataset(2), claude, tmp_path)


def test_settings_the_messages_api_cannot_honour_are_refused(claude, tmp_path):
    with pytest.raises(ConfigError, match="no token log-probabilities"):
        run(qa_dataset(2), claude, tmp_path, logprobs=True)
    with pytest.raises(ConfigError, match="takes no temperature"):
        run(qa_dataset(2), claude, tmp_path, temperature=0.3)
    assert claude.stats()["requests"] == 0


def test_anthropic_key_is_read_from_its_own_variable(claude, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-env")
    claude.configure(require_key="sk-ant-env")
    scored = run(qa_dataset(2), claude, tmp_path, key=None)
    assert len(scored["errors"]) == 0


def test_another_provider_is_another_request(tmp_path):
    """The same metric and row: a Messages body is not a chat completion, so their cache keys differ."""
    metric = load_metric("QA_Clarity")
    messages = metric.messages({"instruction": "q", "output": "a"})
    keys = {}
    for provider in ("openai", "anthropic"):
        c = JudgeClient(Settings(model="m", provider=provider, base_url="http://127.0.0.1:9/v1"), api_key=None)
        body = c.body(metric, messages, 0.1, "json_schema")
        keys[provider] = c.reply_key(metric, messages, 0.1, body)
    assert keys["openai"] != keys["anthropic"]


def test_anthropic_sdk_reads_the_servers_replies(claude):
    """The loopback server's shapes are the SDK's own types: it parses a Message and a MessageBatch."""
    import anthropic

    metric = load_metric("QA_Clarity")
    c = JudgeClient(Settings(model=MODEL, provider="anthropic"), api_key="sk-ant-test")
    params = orjson.loads(c.body(metric, metric.messages({"instruction": "q", "output": "a"}), 0.1))
    sdk = anthropic.Anthropic(base_url=claude.url, api_key="sk-ant-test", max_retries=0)
    extra = {"output_config": params.pop("output_config")}  # as extra_body: SDKs before output_config send it too
    message = sdk.messages.create(**params, extra_body=extra)
    assert message.stop_reason == "end_turn" and message.usage.input_tokens > 0
    batch = sdk.messages.batches.create(requests=[{"custom_id": "ab" * 16, "params": {**params, **extra}}])
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 1
    ended = sdk.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.succeeded == 1
    results = list(sdk.messages.batches.results(batch.id))
    assert results[0].custom_id == "ab" * 16 and results[0].result.type == "succeeded"
    assert results[0].result.message.content[0].type == "text"


def test_switching_provider_on_the_same_server_and_model_is_not_served_from_the_cache(claude, tmp_path):
    ds = qa_dataset(3)
    cache = tmp_path / "shared"
    run(ds, claude, tmp_path, cache_dir=cache)
    again = run(ds, claude, tmp_path, cache_dir=cache)
    assert again.summary.cached_splits == ["train"]  # the same run: its result is cached
    # the same base URL and model, asked through OpenAI's API: not this result, nor these replies (the loopback
    # server has no /chat/completions route, so it is asked, and answers 404)
    with pytest.raises(ModelNotFoundError):
        score_dataset(
            ds,
            ["QA_Clarity"],
            settings=Settings(model=MODEL, provider="openai", **FAST),
            base_url=claude.url,
            api_key="k",
            cache_dir=cache,
            columns=COLUMNS,
            progress=False,
        )


def test_every_engine_speaks_anthropic_with_the_one_process_result(claude, tmp_path):
    """A stream, two workers and the map transform send the same Messages requests, with the same result."""
    from hf_judge import Judge

    ds = qa_dataset(10)
    want = rows(run(ds, claude, tmp_path, cache_dir=tmp_path / "one"))["train"]
    streamed = run(ds.to_iterable_dataset(), claude, tmp_path, cache_dir=tmp_path / "stream")
    assert list(streamed["train"]) == want
    workers = run(ds, claude, tmp_path, cache_dir=tmp_path / "workers", num_workers=2)
    assert rows(workers)["train"] == want
    judge = Judge(
        ["QA_Clarity"], columns=COLUMNS, settings=Settings(model=MODEL, provider="anthropic", **FAST),
        base_url=claude.url, api_key="sk-ant-test", cache_dir=tmp_path / "map",
    )  # fmt: skip
    mapped = ds.map(judge, batched=True, batch_size=4).remove_columns("judge_errors")
    assert mapped.to_list() == want
    assert claude.stats()["by_status"] == {"200": 40}


def test_the_anthropic_key_reaches_no_error_cache_or_summary(claude, tmp_path):
    key = "sk-ant-api03-secretsecretsecret"
    claude.configure(require_key="sk-ant-other")
    with pytest.raises(AuthenticationError) as e:
        run(qa_dataset(2), claude, tmp_path, key=key, cache_dir=tmp_path / "c1")
    assert key not in str(e.value)
    claude.configure(require_key=key)
    scored = run(qa_dataset(2), claude, tmp_path, key=key, cache_dir=tmp_path / "c2", batch=True)
    assert key not in str(scored.summary.to_dict())
    for f in (tmp_path / "c2").rglob("*"):
        if f.is_file():
            assert key.encode() not in f.read_bytes(), f


def test_a_fleet_of_anthropic_endpoints_keeps_the_provider_and_its_route(claude, tmp_path):
    from hf_judge.transport.fleet import FleetClient

    fleet = FleetClient(Settings(model=MODEL), ["http://a.test", "http://b.test/v1"], api_key="k")
    assert fleet.provider == "anthropic"  # inferred from the model before the fleet's URLs were set
    assert [str(u) for u in fleet.urls] == ["http://a.test/v1/messages", "http://b.test/v1/messages"]
    # the map transform over a fleet of one: Anthropic's requests at the loopback server
    from hf_judge import Judge

    judge = Judge(
        ["QA_Clarity"], columns=COLUMNS, settings=Settings(model=MODEL, **FAST), base_urls=[claude.url],
        api_key="sk-ant-test", cache_dir=tmp_path / "fleet",
    )  # fmt: skip
    out = qa_dataset(3).map(judge, batched=True)
    assert all(v is not None for v in out["QA_Clarity"]) and claude.stats()["by_status"] == {"200": 3}
