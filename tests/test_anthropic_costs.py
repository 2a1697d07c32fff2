"""An Anthropic judge in the summary and the card: its provider named, its prompt cache's writes and reads
priced apart, against the loopback server (tests/anthropic_server.py), which reports both."""

from __future__ import annotations

import pytest
from anthropic_fixture import *  # noqa: F401,F403 - the Anthropic server fixtures
from helpers import qa_dataset
from test_anthropic import COLUMNS, FAST, MODEL

from hf_judge import Panelist, Price, RunSummary, Settings, score_dataset
from hf_judge.results.card import render_section
from hf_judge.transport.prices import genai_price

PRICES = (
    "claude-haiku-4-5: {input: 1, output: 5, cached_input: 0.1, cache_write_input: 1.25}\n"
    "judge: {input: 1, output: 5}\n"
)


def test_genai_prices_cache_write_price_is_read():
    p = genai_price("claude-haiku-4-5", "anthropic")
    assert p is not None, "genai-prices (a dependency on Python 3.11+) knows claude-haiku-4-5"
    # Anthropic's 5-minute cache write: 1.25x the input price; reads 0.1x; both apart from the input price
    assert p.cache_write_input == pytest.approx(1.25 * p.input) and p.cached_input == pytest.approx(0.1 * p.input)
    assert "cache write" in p.describe()
    # a price without a cache-write price (OpenAI's) prices a write as any prompt token
    assert Price(input=2, output=8).cost(10**6, 0, 0, 10**6) == 2.0


def test_cache_writes_and_reads_are_counted_and_priced_apart(claude, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    scored = score_dataset(
        qa_dataset(24),
        ["QA_Clarity"],
        settings=Settings(model=MODEL, provider="anthropic", prices=str(prices), concurrency=4, **FAST),
        base_url=claude.url,
        api_key="sk-ant-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
        progress=False,
    )
    s, st = scored.summary, claude.stats()
    assert s.provider == "anthropic"
    assert s.cache_write_tokens == st["cache_creation"] > 0 and s.cached_tokens == st["cache_read"] > 0
    plain = s.prompt_tokens - s.cached_tokens - s.cache_write_tokens
    want = (plain * 1 + s.cached_tokens * 0.1 + s.cache_write_tokens * 1.25 + s.completion_tokens * 5) / 1e6
    assert s.cost() == pytest.approx(want)
    # before: writes were priced as plain input, which this run's cost exceeds
    assert s.cost() > (plain + s.cache_write_tokens) / 1e6 + (s.cached_tokens * 0.1 + s.completion_tokens * 5) / 1e6
    # the saved summary keeps the counter, and its cost
    again = RunSummary.from_dict(s.to_dict())
    assert again.cache_write_tokens == s.cache_write_tokens and again.cost() == pytest.approx(want)
    text = str(s)
    assert text.startswith(f"provider       anthropic ({MODEL} at 127.0.0.1:")
    assert f"({s.cache_write_tokens:,} in written to its prompt cache)" in text
    card = render_section(scored, s)
    assert f"- **Model:** `{MODEL}` at `127.0.0.1:" in card and "(`provider: anthropic`)" in card
    assert "; prompt-cache reads at $0.1, writes at $1.25 per 1M tokens" in card
    assert f"({s.cache_write_tokens:,} written to its prompt cache)" in card


def test_a_panel_names_each_judges_provider_where_not_openai(claude, judge, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_TEST_KEY", "sk-ant-test")
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    scored = score_dataset(
        qa_dataset(4),
        ["QA_Clarity"],
        models=[
            Panelist(model="judge", name="local", base_url=judge.base_url, provider="openai"),
            Panelist(
                model=MODEL, name="claude", base_url=claude.url, provider="anthropic", api_key="env:CLAUDE_TEST_KEY"
            ),
        ],
        settings=Settings(model="unused", prices=str(prices), **FAST),
        api_key="k",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
        progress=False,
    )
    s = scored.summary
    local, claude_judge = s.sampling["judges"]
    assert "provider" not in local  # an OpenAI-compatible judge's entry is as it was
    assert claude_judge["provider"] == "anthropic" and s.provider == ""  # the first judge speaks OpenAI's API
    assert "claude (claude-haiku-4-5 at 127.0.0.1:" in str(s) and ", anthropic)" in str(s)
    card = render_section(scored, s)
    assert "`claude`: `claude-haiku-4-5` at `127.0.0.1:" in card and "(`provider: anthropic`)" in card
    assert "`local`: `judge` at" in card


def test_dry_run_counts_tokens_with_anthropics_count_tokens(claude, tmp_path):
    """The estimate's input tokens are the server's counts, which are what the run then reports as its prompt."""
    from hf_judge import estimate_cost

    ds = qa_dataset(10)
    kw = dict(
        settings=Settings(model=MODEL, provider="anthropic", **FAST),
        base_url=claude.url,
        api_key="sk-ant-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
    )
    claude.configure(require_key="sk-ant-test")
    est = estimate_cost(ds, ["QA_Clarity"], tokenizer="server", **kw)
    st = claude.stats()
    assert st["count_tokens"] == 10 and st["requests"] == 0  # counted, nothing judged
    assert est.input_tokens == st["counted"] > 10 * 50 and "count_tokens" in str(est)
    scored = score_dataset(ds, ["QA_Clarity"], progress=False, **kw)
    assert scored.summary.prompt_tokens == est.input_tokens
    # "auto" asks it too; "chars" does not
    assert estimate_cost(ds, ["QA_Clarity"], tokenizer="auto", **{**kw, "cache_dir": tmp_path / "c2"}).input_tokens == (
        est.input_tokens
    )
    before = claude.stats()["count_tokens"]
    chars = estimate_cost(ds, ["QA_Clarity"], tokenizer="chars", **{**kw, "cache_dir": tmp_path / "c3"})
    assert claude.stats()["count_tokens"] == before and "characters / 4" in str(chars)
    # a wrong key: the count is refused, and the estimate says how it counted instead
    claude.configure(require_key="other")
    fallback = estimate_cost(ds, ["QA_Clarity"], tokenizer="auto", **{**kw, "cache_dir": tmp_path / "c4"})
    assert "count_tokens" not in str(fallback)


def test_a_message_batchs_cache_writes_are_priced_at_the_batch_discount(claude, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    knobs = {**FAST, "batch_poll_s": 0.01}
    scored = score_dataset(
        qa_dataset(12),
        ["QA_Clarity"],
        settings=Settings(model=MODEL, provider="anthropic", prices=str(prices), **knobs),
        base_url=claude.url,
        api_key="sk-ant-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
        progress=False,
        batch=True,
    )
    s, st = scored.summary, claude.stats()
    assert st["requests"] == 0 and s.batch["collected"] == 12  # every reply came through the batch
    assert s.cache_write_tokens == st["cache_creation"] > 0 and s.cached_tokens == st["cache_read"] > 0
    plain = s.prompt_tokens - s.cached_tokens - s.cache_write_tokens
    # the batch discount (half) on input, cache writes (1.25 -> 0.625) and output; cache reads at the file's
    # default batch_cached_input, the lower of batch_input (0.5) and cached_input (0.1)
    want = (plain * 0.5 + s.cached_tokens * 0.1 + s.cache_write_tokens * 0.625 + s.completion_tokens * 2.5) / 1e6
    assert s.cost() == pytest.approx(want)
