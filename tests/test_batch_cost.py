"""The cost a batch run reports: its tokens at the batch price, in the summary and in the card."""

from __future__ import annotations

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from helpers import qa_dataset

from hf_judge import Settings, score_dataset
from hf_judge.card import render_section
from hf_judge.summary import RunSummary

# USD per 1M tokens; the batch price is half the online one
PRICES = "judge: {input: 2.0, output: 8.0, batch_input: 1.0, batch_output: 4.0}\n"


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES, encoding="utf-8")
    return str(path)


def _run(server, tmp_path, prices, **kw):
    return score_dataset(
        qa_dataset(4),
        ["QA_Clarity"],
        settings=Settings(model="judge", backoff_base=0.001, backoff_max=0.01, batch_poll_s=0.01),
        base_url=server.base_url,
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question", "output": "answer"},
        progress=False,
        prices=prices,
        **kw,
    )


def test_a_batch_run_costs_its_tokens_at_the_batch_price(batch, tmp_path, prices):
    scored = _run(batch, tmp_path, prices, batch=True)
    s = scored.summary
    p, c = s.batch["prompt_tokens"], s.batch["completion_tokens"]
    assert p > 0 and c > 0 and (s.prompt_tokens, s.completion_tokens) == (p, c)
    expected = (p * 1.0 + c * 4.0) / 1e6
    assert s.cost() == pytest.approx(expected)
    assert f"${expected:,.4f} at judge's batch price ($1 in / $4 out per 1M tokens)" in str(s)
    # the card counts the batch's tokens and prices them as the summary does
    card = render_section(scored, s)
    assert f"- **Tokens:** {p:,} prompt / {c:,} completion" in card
    assert f"- **Cost:** ${expected:,.4f} at the model's price in hf-judge's table (the batch price)" in card
    # and so does the summary of a later run that finds the result in the cache
    again = _run(batch, tmp_path, prices, batch=True).summary
    assert again.cost(again.totals()) == pytest.approx(expected)


def test_an_online_run_keeps_the_online_price(batch, tmp_path, prices):
    s = _run(batch, tmp_path, prices).summary
    assert s.cost() == pytest.approx((s.prompt_tokens * 2.0 + s.completion_tokens * 8.0) / 1e6)
    assert "at judge's price ($2 in / $8 out per 1M tokens)" in str(s)


def test_mixed_tokens_split_between_the_prices():
    s = RunSummary(
        prompt_tokens=3_000_000,
        completion_tokens=1_000_000,
        price={"input": 2.0, "output": 8.0},
        batch={"prompt_tokens": 2_000_000, "completion_tokens": 1_000_000},
    )
    # 1M prompt tokens online at $2; 2M prompt at $1 and 1M completion at $4 in batch mode
    assert s.cost() == pytest.approx(2.0 + 2.0 + 4.0)


def test_dry_run_after_no_wait_counts_the_submitted_requests_as_paid(batch, tmp_path, prices):
    from hf_judge import BatchesPending, estimate_cost

    batch.configure(delay=600)
    with pytest.raises(BatchesPending):
        _run(batch, tmp_path, prices, batch=True, no_wait=True)

    def estimate(**kw):
        return estimate_cost(
            qa_dataset(4),
            ["QA_Clarity"],
            model="judge",
            base_url=batch.base_url,
            api_key="sk-test",
            cache_dir=tmp_path / "cache",
            columns={"instruction": "question", "output": "answer"},
            prices=prices,
            **kw,
        )

    # the next --batch run collects them: nothing more to pay
    est = estimate(batch=True)
    assert (est.requests, est.metrics[0].in_batches, est.cost_batch) == (0, 4, 0)
    assert "in batches     4 requests submitted in batches that the next --batch run collects" in str(est)
    # an online run does not look at the batches: it would send (and pay for) them again
    assert (estimate().requests, estimate().metrics[0].in_batches) == (4, 0)
