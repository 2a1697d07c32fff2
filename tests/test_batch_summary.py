"""What the summary and the card say of a run that collected batches an earlier run submitted."""

from __future__ import annotations

import json

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from helpers import qa_dataset, score_as

from hf_judge import BatchesPending
from hf_judge.results.card import render_section


def _run(server, cache, **kw):
    return score_as("openai", qa_dataset(4), server.base_url, cache, **{"batch": True, **kw})


def test_a_run_that_collects_an_earlier_runs_batch_counts_it(batch, tmp_path):
    batch.configure(delay=0.3)
    with pytest.raises(BatchesPending):
        _run(batch, tmp_path / "c", no_wait=True)
    scored = _run(batch, tmp_path / "c")
    s = scored.summary
    assert (s.batch["batches"], s.batch["submitted"], s.batch["collected"]) == (1, 0, 4)
    text = str(s)
    assert "batch mode     1 batch: 0 requests submitted, 4 replies collected" in text
    assert "from cache     4 replies from the reply store (4 collected from batches by this run)" in text
    assert "- **Batch mode:** sent through the provider's batch API: 1 batch, 4 replies collected" in render_section(
        scored, s
    )


def test_an_online_run_beside_batches_in_flight_warns_that_it_pays_again(batch, tmp_path, caplog):
    batch.configure(delay=600)
    with pytest.raises(BatchesPending):
        _run(batch, tmp_path / "c", no_wait=True)
    with caplog.at_level("WARNING", logger="hf_judge"):
        _run(batch, tmp_path / "c", batch=False)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "1 batch of 4 requests is in flight" in said and "add --batch" in said and "batch cancel" in said
    assert batch.stats()["online"] == 4  # a warning, not a refusal: the user may want them now


def test_lines_an_expired_batch_did_not_run_are_not_called_failed():
    from hf_judge.results.summary import RunSummary

    text = str(RunSummary(batch={"batches": 1, "submitted": 30, "collected": 15, "failed": 15}))
    assert "15 replies collected, 15 lines failed or not run;" in text


def test_a_batch_runs_saved_history_holds_what_the_terminal_prints(batch, tmp_path):
    """Batch mode, half the replies collected by the online fallback (the lines that failed): the run's entry of the
    history (summary.json, the card's and the page's totals) holds the tokens and requests of both."""
    batch.configure(fail_lines=2)  # rows 1 and 3 fail in the batch and go online
    scored = _run(batch, tmp_path / "c", batch_fallback="online")
    s = scored.summary
    scored.save_to_disk(tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    figures = ("requests", "prompt_tokens", "completion_tokens")
    printed = {k: getattr(s, k) for k in figures}
    # the batch's lines are requests too (4), beside the 2 sent online
    assert s.requests == s.batch["submitted"] + batch.stats()["online"] == 4 + 2
    assert s.prompt_tokens > s.batch["prompt_tokens"] > 0
    assert {k: saved["runs"][-1][k] for k in figures} == {k: s.totals()[k] for k in figures} == printed
