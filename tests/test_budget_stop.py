"""A budget stop keeps what was paid: the run goes on to the end without sending, the rows it paid for (or found in
the reply store) scored, every (row, metric) not sent an ``errors`` row of kind ``budget``, and the result says it is
incomplete (summary.json's ``stopped``, the end-of-run lines, the page, the card). The library raises the stop with
the result as its ``result``; the CLI saves it to the output folder (never pushes or filters it) and exits 1. The
same command with a higher budget (or none) completes it, paying only for what was not paid: one process, workers
(each with its share of the budget), a stream and batch mode.

As in tests/test_budget.py, every reply is the same text at a price of output tokens only and ``max_tokens`` is the
reply's tokens, so that each request costs exactly ONE and the counts below are exact.
"""

from __future__ import annotations

import json

import orjson
import pytest
from batch_fixture import *  # noqa: F401,F403 - the loopback OpenAI batch server (batch)
from datasets import load_from_disk
from helpers import qa_dataset, run_cli, score, score_args, score_as

from hf_judge import CostExceededError

REPLY = {"reason": "r" * 30, "score": 7}
TOKENS = len(orjson.dumps(REPLY)) // 4
ONE = 0.01


@pytest.fixture
def fixed(judge, tmp_path):
    judge.configure(overrides=REPLY)
    path = tmp_path / "prices.yaml"
    path.write_text(f"judge: {{input: 0, output: {ONE * 1e6 / TOKENS!r}}}\n", encoding="utf-8")
    return str(path)


def _run(ds, judge, tmp_path, prices, budget, **kw):
    return score(ds, ["QA_Clarity"], judge, tmp_path, prices=prices, max_cost=budget, max_tokens=TOKENS, **kw)


def test_a_budget_stop_returns_what_was_paid_and_the_next_run_completes_it(judge, tmp_path, fixed):
    """On main the stop was an exception and nothing else: the 10 rows paid for were in the cache only."""
    from hf_judge.results.card import render_section

    ds = qa_dataset(40)
    with pytest.raises(CostExceededError) as e:
        _run(ds, judge, tmp_path, fixed, 10.5 * ONE, concurrency=8)
    assert judge.stats()["requests"] == 10
    partial = e.value.result
    scores = partial["train"]["QA_Clarity"]
    assert sum(s is not None for s in scores) == 10 and len(scores) == 40
    errors = partial["errors"].to_list()
    assert len(errors) == 30 and {e["kind"] for e in errors} == {"budget"}
    assert {e["row"] for e in errors} == {i for i, s in enumerate(scores) if s is None}
    assert "max_cost=$0.105" in errors[0]["message"] and errors[0]["attempts"] == 0
    stopped = partial.summary.stopped
    assert stopped.startswith("INCOMPLETE: the run stopped at its budget (max_cost=$0.105): 30 (row, metric)")
    assert "as a result" in str(e.value) and "30 (row, metric) not sent" in str(e.value)
    assert "This result is incomplete." in render_section(partial, partial.summary)  # the card of any push of it
    done = _run(ds, judge, tmp_path, fixed, None)
    assert judge.stats()["requests"] == 40  # the 30 not paid, nothing twice
    assert done["errors"].num_rows == 0 and done.summary.stopped == "" and None not in done["train"]["QA_Clarity"]


def test_the_cli_saves_the_stopped_run_as_an_incomplete_result_and_exits_1(judge, tmp_path, fixed, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(40).to_json(data)
    out = tmp_path / "out"
    args = score_args(data, judge, "--prices", fixed, "--max-tokens", TOKENS, "--cache-dir", tmp_path / "c", "-o", out)
    code, stdout, err = run_cli(capfd, *args, "--max-cost", 10.5 * ONE, "--push-to-hub", "me/not-pushed")
    assert code == 1 and "max_cost=$0.105 is used up" in err and "kept as a result" in err, err
    assert judge.stats()["requests"] == 10
    assert "stopped        INCOMPLETE: the run stopped at its budget" in stdout
    assert f"incomplete     {out} holds the rows paid for" in stdout and "not pushed     me/not-pushed" in stdout
    saved = load_from_disk(out)
    assert sum(s is not None for s in saved["train"]["QA_Clarity"]) == 10
    assert saved["errors"].num_rows == 30 and set(saved["errors"]["kind"]) == {"budget"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"].startswith("INCOMPLETE") and summary["errors"] == {"budget": 30}
    page = (out / "report.html").read_text()
    assert '"stopped":"INCOMPLETE: the run stopped at its budget' in page
    code, stdout, err = run_cli(capfd, *args)  # no budget: the same folder, completed
    assert code == 0, err
    assert judge.stats()["requests"] == 40
    saved = load_from_disk(out)
    assert None not in saved["train"]["QA_Clarity"] and saved["errors"].num_rows == 0
    assert json.loads((out / "summary.json").read_text())["stopped"] == ""


def test_a_budget_under_the_first_request_keeps_no_folder(judge, tmp_path, fixed, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(5).to_json(data)
    out = tmp_path / "out"
    args = score_args(data, judge, "--prices", fixed, "--max-tokens", TOKENS, "--cache-dir", tmp_path / "c", "-o", out)
    code, _, err = run_cli(capfd, *args, "--max-cost", 0.5 * ONE)
    assert code == 1 and "max_cost=$0.005 is used up" in err and "as a result" not in err
    assert judge.stats()["requests"] == 0 and not out.exists()


def test_workers_share_the_budget_and_keep_what_they_paid(judge, tmp_path, fixed):
    """On main each of 4 workers held the whole budget: 20 requests were paid under a budget of 10.5. Each holds a
    quarter now (2 requests of 2.625), and the result holds what they paid."""
    ds = qa_dataset(40)
    with pytest.raises(CostExceededError, match="--workers 4: each worker held 1/4") as e:
        _run(ds, judge, tmp_path, fixed, 10.5 * ONE, num_workers=4, concurrency=4)
    assert judge.stats()["requests"] == 8
    partial = e.value.result
    assert sum(s is not None for s in partial["train"]["QA_Clarity"]) == 8
    assert partial["errors"].num_rows == 32 and partial["errors"]["row"] == sorted(partial["errors"]["row"])
    done = _run(ds, judge, tmp_path, fixed, None, num_workers=4)
    assert judge.stats()["requests"] == 40 and done["errors"].num_rows == 0


def test_a_stream_stopped_at_its_budget_is_saved_incomplete(judge, tmp_path, fixed, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(40).to_json(data)
    out = tmp_path / "out"
    args = score_args(data, judge, "--prices", fixed, "--max-tokens", TOKENS, "--cache-dir", tmp_path / "c", "-o", out)
    code, stdout, err = run_cli(capfd, *args, "--streaming", "--max-cost", 10.5 * ONE, "--concurrency", 8)
    assert code == 1 and "max_cost=$0.105 is used up" in err, err
    assert judge.stats()["requests"] == 10 and "stopped        INCOMPLETE" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == {"budget": 30} and summary["stopped"].startswith("INCOMPLETE")
    assert "This result is incomplete." in (out / "README.md").read_text()
    code, _, err = run_cli(capfd, *args, "--streaming")
    assert code == 0 and judge.stats()["requests"] == 40, err
    assert json.loads((out / "summary.json").read_text())["errors"] == {}


def test_batch_mode_stopped_before_a_pass_keeps_what_the_store_held(batch, tmp_path):
    """3 rows scored online earlier, the batch of the other 5 over the budget: nothing is submitted, the result
    holds the 3 and 5 `budget` rows (on main: the stop alone), and a run with the budget raised submits the 5."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("judge: {input: 1, output: 4, batch_input: 0.5, batch_output: 2}\n", encoding="utf-8")
    ds = qa_dataset(8)
    score_as("openai", ds.select(range(3)), batch.base_url, tmp_path / "c", prices=str(prices))
    with pytest.raises(CostExceededError, match="would cost") as e:
        score_as("openai", ds, batch.base_url, tmp_path / "c", prices=str(prices), batch=True, max_cost=0.0003)
    assert batch.stats()["creates"] == 0
    partial = e.value.result
    assert [s is not None for s in partial["train"]["QA_Clarity"]] == [True] * 3 + [False] * 5
    assert partial["errors"]["kind"] == ["budget"] * 5 and partial["errors"]["row"] == [3, 4, 5, 6, 7]
    done = score_as("openai", ds, batch.base_url, tmp_path / "c", prices=str(prices), batch=True, max_cost=0.01)
    assert done.summary.batch["submitted"] == 5 and done["errors"].num_rows == 0


def test_a_metric_added_to_an_incomplete_result_keeps_it_incomplete(judge, tmp_path, fixed, capfd):
    """Its `budget` nulls are still there: the new result says so too (the earlier run's `stopped`)."""
    data = tmp_path / "data.jsonl"
    qa_dataset(20).to_json(data)
    out = tmp_path / "out"
    args = score_args(data, judge, "--prices", fixed, "--max-tokens", TOKENS, "--cache-dir", tmp_path / "c", "-o", out)
    code, _, err = run_cli(capfd, *args, "--max-cost", 5.5 * ONE)
    assert code == 1 and (out / "summary.json").is_file(), err
    more = score_args(out, judge, metrics="Q_Clarity", columns=("instruction=question",))
    code, _, err = run_cli(capfd, *more, "--cache-dir", tmp_path / "c", "-o", tmp_path / "more")
    assert code == 0, err
    summary = json.loads((tmp_path / "more" / "summary.json").read_text())
    assert summary["errors"] == {"budget": 15} and summary["stopped"].startswith("INCOMPLETE: the run stopped")
