"""Prices from genai-prices (its bundled data, never fetched), --prices files over it, and where each came from."""

from __future__ import annotations

import datetime as dt

import pytest
from genai_prices import Usage, calc_price, data_snapshot
from genai_prices.data_snapshot import DataSnapshot
from helpers import qa_dataset, run_cli

from hf_judge import ConfigError, Settings, estimate_cost, load_prices
from hf_judge.settings import resolved_provider
from hf_judge.transport.prices import genai_prices_version, price_of

COLUMNS = {"instruction": "question", "output": "answer"}


def _genai(usage: Usage, model: str, provider: str, batch: bool = False) -> float:
    context = {"processing": "batch"} if batch else None
    return float(calc_price(usage, model, provider_id=provider, price_context=context).total_price)


@pytest.mark.parametrize(
    ("model", "provider"), [("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-flash", "google"), ("gpt-5", "openai")]
)
def test_a_price_is_genai_prices_own_online_batch_and_cache_read(model, provider):
    price = load_prices()[model]
    usage = Usage(input_tokens=100_000, output_tokens=20_000, cache_read_tokens=30_000)
    assert price.cost(100_000, 20_000, 30_000) == pytest.approx(_genai(usage, model, provider))
    assert price.cost(100_000, 20_000, 30_000, batch=True) == pytest.approx(_genai(usage, model, provider, True))
    assert price.batch_input < price.input and price.batch_source is None  # genai-prices has its batch price
    assert price.origin().startswith(genai_prices_version() + " (bundled data, prices of 20")


def test_where_genai_prices_has_no_batch_price_the_documented_discount_applies_and_is_said():
    price = load_prices()["claude-3-5-sonnet"]
    usage = Usage(input_tokens=1000, output_tokens=100)
    assert price.cost(1000, 100) == pytest.approx(_genai(usage, "claude-3-5-sonnet", "anthropic"))
    assert price.cost(1000, 100, batch=True) == pytest.approx(price.cost(1000, 100) / 2)
    assert "50% off the online price: anthropic's documented batch discount" in (price.batch_source or "")


def test_prices_are_read_from_the_bundled_data_not_an_updated_or_fetched_copy():
    """genai-prices' UpdatePrices swaps the process's snapshot for one it fetched: hf-judge does not read it."""
    before = price_of("gpt-4.1-nano")
    data_snapshot.set_custom_snapshot(DataSnapshot(providers=[], from_auto_update=True))
    try:
        with pytest.raises(LookupError):
            calc_price(Usage(input_tokens=1), "gpt-4.1-nano")  # genai-prices' own lookup reads the swapped one
        assert load_prices(provider="openai")["gpt-4.1-nano"] == before
    finally:
        data_snapshot.set_custom_snapshot(None)


def test_a_prices_file_wins_over_genai_prices_and_is_named(tmp_path, monkeypatch):
    mine = tmp_path / "mine.yaml"
    mine.write_text("gpt-4.1-nano: {input: 1, output: 1, batch_input: 0.9}\nmy-judge: {input: 0, output: 0}\n")
    monkeypatch.setenv("HF_JUDGE_PRICES", str(mine))
    table = load_prices()
    assert table["gpt-4.1-nano"].batch_input == 0.9 and table["gpt-4.1-nano"].batch_output == 0.5
    assert table["gpt-4.1-nano"].origin() == f"the file {mine}" and "my-judge" in table and "gpt-4.1" in table
    bad = tmp_path / "bad.yaml"
    bad.write_text("m: {input: .inf, output: 1}\n")
    with pytest.raises(ConfigError, match="bad.yaml.*finite number"):
        load_prices(str(bad))
    bad.write_text("m: {input: 1, output: 1, source: mine}\n")
    with pytest.raises(ConfigError, match="'source', which hf-judge sets"):
        load_prices(str(bad))


def test_the_provider_is_inferred_from_the_model_without_a_base_url():
    assert resolved_provider(Settings(model="gemini-2.5-flash")) == "gemini"
    assert resolved_provider(Settings(model="claude-sonnet-4-5")) == "anthropic"
    assert resolved_provider(Settings(model="gemini-2.5-flash", base_url="http://127.0.0.1:1/v1")) == "openai"
    assert resolved_provider(Settings(model="m", provider="gemini")) == "gemini"
    with pytest.raises(ValueError, match="'openai', 'anthropic' or 'gemini'"):
        Settings(model="m", provider="bedrock")


@pytest.mark.parametrize(("model", "provider"), [("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-flash", "google")])
def test_dry_run_of_a_batch_shows_genai_prices_batch_price(judge, tmp_path, model, provider):
    ds = qa_dataset(4)
    est = estimate_cost(
        ds, ["QA_Clarity"], columns=COLUMNS, model=model, base_url=judge.base_url, api_key="sk-test",
        cache_dir=tmp_path / "cache", batch=True,
    )  # fmt: skip
    assert est.requests == 4 and "the server's tokenizer" in est.token_counter  # exact input tokens
    # one request's tokens at a time: genai-prices prices a request, and tiers (past 200k prompt tokens) do not apply
    usage = Usage(input_tokens=est.input_tokens, output_tokens=est.output_tokens)
    assert est.cost_batch == pytest.approx(_genai(usage, model, provider, batch=True))
    assert est.cost_online == pytest.approx(_genai(usage, model, provider))
    text = str(est)
    assert f"cost batch     ${est.cost_batch:,.4f} (${est.price.batch_input:g} in" in text
    assert f"prices from    {genai_prices_version()} (bundled data, prices of " in text
    assert judge.stats()["requests"] == 0


def test_cli_dry_run_names_the_prices_file(judge, tmp_path, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(2).to_json(data)
    prices = tmp_path / "p.yaml"
    prices.write_text("gpt-4.1-nano: {input: 3, output: 4}\n")
    code, out, err = run_cli(
        capfd,
        "score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column", "output=answer",
        "--model", "gpt-4.1-nano", "--base-url", judge.base_url, "--cache-dir", tmp_path / "cache",
        "--prices", prices, "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    assert f"prices from    the file {prices}" in out and "$3 in / $4 out per 1M tokens" in out


def test_the_data_date_is_a_date_in_effect():
    from hf_judge.transport.prices import genai_data_date

    assert dt.date.fromisoformat(genai_data_date()) <= dt.date.today()
