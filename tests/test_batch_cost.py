"""The cost a batch run reports (its tokens at the batch price, in the summary and in the card), and the budgets
that bound a batch run before it submits."""

from __future__ import annotations

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from helpers import qa_dataset, score_as

from hf_judge.results.card import render_section
from hf_judge.results.summary import RunSummary

# USD per 1M tokens; the batch price is half the online one
PRICES = "judge: {input: 2.0, output: 8.0, batch_input: 1.0, batch_output: 4.0}\n"


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES, encoding="utf-8")
    return str(path)


def _run(server, tmp_path, prices, **kw):
    return _run_on(server, tmp_path, prices, qa_dataset(4), **kw)


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
    assert f"- **Cost:** ${expected:,.4f} at the model's price (the batch price), from the file " in card
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


# -- budgets in batch mode: the projection of what a batch would submit, checked before anything is uploaded --------


def _projection(server, tmp_path, prices, ds, **kw):
    from hf_judge import estimate_cost

    return estimate_cost(
        ds,
        ["QA_Clarity"],
        model="judge",
        base_url=server.base_url,
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question", "output": "answer"},
        prices=prices,
        batch=True,
        **kw,
    )


def _nothing_sent(server):
    st = server.stats()
    return (st["uploads"], st["creates"], st["paid"], st["online"]) == (0, 0, {}, 0)


def score_dataset_batch(server, tmp_path, prices, ds, **kw):
    return _run_on(server, tmp_path, prices, ds, batch=True, **kw)


def _run_on(server, tmp_path, prices, ds, **kw):
    return score_as("openai", ds, server.base_url, tmp_path / "cache", prices=prices, **kw)


def test_max_cost_refuses_a_batch_projected_over_it_before_uploading_anything(batch, tmp_path, prices):
    from hf_judge import CostExceededError

    ds = qa_dataset(4)
    cost = _projection(batch, tmp_path, prices, ds).cost_batch
    assert cost > 0
    with pytest.raises(CostExceededError) as e:
        score_dataset_batch(batch, tmp_path, prices, ds, max_cost=cost * 0.9)
    message = str(e.value)
    price = f"judge's batch price ($1 in / $4 out per 1M tokens, from the file {prices})"
    assert f"would cost ${cost:.4f} at {price}" in message
    assert f"max_cost=${cost * 0.9:g}" in message and "4 requests" in message
    assert "--max-cost" in message and "--limit" in message and "--dry-run --batch" in message
    assert _nothing_sent(batch)
    assert not list((tmp_path / "cache" / "batches").glob("*"))  # no batch file written either
    # within the budget: submitted and collected
    scored = score_dataset_batch(batch, tmp_path, prices, ds, max_cost=cost * 1.01)
    assert scored.summary.batch["submitted"] == 4 and scored.summary.batch["collected"] == 4
    assert batch.stats()["creates"] == 1 and not scored["errors"].num_rows


def test_the_projection_counts_only_the_requests_a_batch_would_submit(batch, tmp_path, prices):
    """Replies in the cache, and requests in batches submitted earlier (--no-wait), are not paid again: a budget
    that only the rest fits in lets the run go on."""
    from hf_judge import BatchesPending

    ds = qa_dataset(6)
    whole = _projection(batch, tmp_path, prices, ds).cost_batch
    _run_on(batch, tmp_path, prices, ds.select(range(2)))  # 2 rows cached (online)
    batch.configure(delay=600)
    with pytest.raises(BatchesPending):  # 2 more in a batch in flight
        score_dataset_batch(batch, tmp_path, prices, ds.select(range(4)), no_wait=True)
    rest = _projection(batch, tmp_path, prices, ds)
    assert (rest.requests, rest.cached, rest.metrics[0].in_batches) == (2, 2, 2)
    assert rest.cost_batch < whole / 2
    batch.configure(delay=0)
    scored = score_dataset_batch(batch, tmp_path, prices, ds, max_cost=rest.cost_batch * 1.01)
    assert scored.summary.batch["submitted"] == 2 and scored.summary.batch["collected"] == 4
    assert not scored["errors"].num_rows


def test_max_total_tokens_refuses_a_batch_projected_over_it(batch, tmp_path, prices):
    from hf_judge import BudgetExceededError

    ds = qa_dataset(4)
    est = _projection(batch, tmp_path, prices, ds)
    tokens = est.input_tokens + est.output_tokens
    with pytest.raises(BudgetExceededError, match=f"would use {tokens:,} tokens, over the budget max_total_tokens"):
        score_dataset_batch(batch, tmp_path, prices, ds, max_total_tokens=tokens - 1)
    assert _nothing_sent(batch)
    scored = score_dataset_batch(batch, tmp_path, prices, ds, max_total_tokens=tokens)
    assert scored.summary.batch["collected"] == 4


def test_cli_batch_with_max_cost(batch, tmp_path, prices, capfd):
    from helpers import run_cli, score_args

    data = tmp_path / "data.jsonl"
    qa_dataset(3).to_json(data)
    cost = _projection(batch, tmp_path, prices, qa_dataset(3)).cost_batch
    common = ["--batch", "--prices", prices, "--cache-dir", tmp_path / "cache"]
    code, _, err = run_cli(capfd, *score_args(data, batch, *common, "--max-cost", f"{cost * 0.5:.10f}"))
    assert code == 1 and "would cost $" in err and "--max-cost" in err, err
    assert _nothing_sent(batch)
    out = tmp_path / "out"
    code, _, err = run_cli(capfd, *score_args(data, batch, *common, "--max-cost", f"{cost * 2:.10f}", "-o", out))
    assert code == 0, err
    assert batch.stats()["creates"] == 1


def test_the_retries_of_failed_lines_are_checked_against_the_budget_too(batch, tmp_path, prices):
    """Before the pass that resubmits failed lines, the budget is checked again with what the run has paid."""
    ds = qa_dataset(4)
    cost = _projection(batch, tmp_path, prices, ds).cost_batch
    batch.configure(fail_lines=2)
    scored = score_dataset_batch(batch, tmp_path, prices, ds, max_cost=cost * 1.01)
    assert (scored.summary.batch["resubmitted"], scored.summary.batch["collected"]) == (2, 4)
    assert scored.summary.cost() <= cost * 1.01


def test_k_samples_are_k_requests_in_the_projection(batch, tmp_path, prices):
    """Batch mode sends each sample as a line of its own: the dry run and the budget count K per (row, metric)."""
    from hf_judge import CostExceededError

    ds = qa_dataset(4)
    one = _projection(batch, tmp_path, prices, ds, temperature=0.7)
    three = _projection(batch, tmp_path, prices, ds, temperature=0.7, samples=3)
    assert (one.requests, three.requests) == (4, 12)
    assert three.cost_batch == pytest.approx(3 * one.cost_batch)
    with pytest.raises(CostExceededError, match="12 requests"):
        score_dataset_batch(batch, tmp_path, prices, ds, temperature=0.7, samples=3, max_cost=2 * one.cost_batch)
    assert _nothing_sent(batch)
