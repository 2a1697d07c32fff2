"""A reply that fails validation after every attempt is paid for: it is kept in the reply store and replayed by the
next run as the same error row, with no request; ``retry_errors`` (``--retry-errors``) sends it again. A transient
failure (an HTTP 500, a timeout) is still sent again by the next run. One process, workers, a stream and batch mode
keep and replay alike (store/failures.py)."""

from __future__ import annotations

import pytest
from batch_fixture import *  # noqa: F401,F403 - the loopback OpenAI batch server (batch)
from helpers import QA_COLUMNS, qa_dataset, run_cli, score, score_args, score_as

from hf_judge import estimate_cost

RETRIES = 3  # attempts per request: 1 + RETRIES, each at a higher temperature (seed 004's escalation)
INVALID = [f"row-{i}:" for i in (2, 5, 8, 11, 14, 17)]  # 6 rows whose replies are out of range, every time


def _invalid(judge, *extra: dict) -> None:
    judge.configure(faults=[*({"match": m, "fault": "out_of_range"} for m in INVALID), *extra])


def _run(judge, tmp_path, ds, **kw):
    return score(ds, ["QA_Clarity"], judge, tmp_path, temperature=0, retries=RETRIES, progress=False, **kw)


def test_a_reply_that_fails_validation_is_not_bought_twice(judge, tmp_path):
    """On main, 6 rows whose replies fail validation were sent again by every run (their 4 attempts each: 24
    requests a rerun). They are kept: the rerun sends no request and gives the same errors split; a row whose
    server answered 500 is sent again; retry_errors sends the 6 again."""
    _invalid(judge, {"match": "row-19:", "fault": "status", "status": 500})
    ds = qa_dataset(20)
    first = _run(judge, tmp_path, ds)
    sent = judge.stats()["requests"]
    assert sent == 13 + 7 * (1 + RETRIES)  # 13 good rows, 6 invalid and 1 failing row: 4 attempts each
    assert sorted(first["errors"]["kind"]) == ["http_500"] + ["out_of_range"] * 6
    est = estimate_cost(ds, ["QA_Clarity"], model="judge", base_url=judge.base_url, api_key="sk-test",
                        cache_dir=tmp_path / "cache", columns=QA_COLUMNS, temperature=0)  # fmt: skip
    assert (est.requests, est.cached) == (1, 19)  # the dry run counts what the run sends: the 500's row
    again = _run(judge, tmp_path, ds)
    assert judge.stats()["requests"] - sent == 1 + RETRIES  # the 500's row only
    invalid = [e for e in again["errors"].to_list() if e["kind"] == "out_of_range"]
    assert invalid == [e for e in first["errors"].to_list() if e["kind"] == "out_of_range"]
    assert {e["attempts"] for e in invalid} == {1 + RETRIES} and all(e["raw"] for e in invalid)
    assert again.summary.cache_hits == 13 + 6
    assert any("6 replies that failed validation in an earlier run were replayed" in n for n in again.summary.notes)
    sent = judge.stats()["requests"]
    retried = _run(judge, tmp_path, ds, retry_errors=True)
    assert judge.stats()["requests"] - sent == 7 * (1 + RETRIES)
    assert retried["errors"].to_list() == again["errors"].to_list()
    # the server answers well now: a retried row is scored, and its reply then serves the next run
    judge.configure(faults=[])
    sent = judge.stats()["requests"]
    fixed = _run(judge, tmp_path, ds, retry_errors=True)
    assert judge.stats()["requests"] - sent == 7 and fixed["errors"].num_rows == 0
    assert _run(judge, tmp_path, ds)["errors"].num_rows == 0 and judge.stats()["requests"] - sent == 7


def test_the_cli_replays_kept_failures_and_retry_errors_sends_them(judge, tmp_path, capfd):
    _invalid(judge)
    data = tmp_path / "data.jsonl"
    qa_dataset(20).to_json(data)
    args = score_args(data, judge, "--temperature", "0", "--retries", RETRIES, "--cache-dir", tmp_path / "c")
    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "one")
    assert code == 0, err
    sent = judge.stats()["requests"]
    assert sent == 14 + 6 * (1 + RETRIES)
    code, out, err = run_cli(capfd, *args, "-o", tmp_path / "two")
    assert code == 0 and judge.stats()["requests"] == sent, err
    assert "requests       0 (0 retries)" in out and "--retry-errors (retry_errors=True) sends them again" in out
    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "three", "--retry-errors")
    assert judge.stats()["requests"] - sent == 6 * (1 + RETRIES)
    assert code == 3 and "every request of this run failed (24 of 24; out_of_range: 24)" in err  # all it sent


def test_workers_and_a_stream_replay_what_one_process_kept(judge, tmp_path):
    """The row core is every engine's: 2 workers on one shared store, then a stream, send none of the 6."""
    _invalid(judge)
    ds = qa_dataset(40)
    first = _run(judge, tmp_path, ds, num_workers=2)
    sent = judge.stats()["requests"]
    assert sent == 34 + 6 * (1 + RETRIES)
    again = _run(judge, tmp_path, ds, num_workers=2)
    assert judge.stats()["requests"] == sent and again["errors"].to_list() == first["errors"].to_list()
    streamed = _run(judge, tmp_path, ds.to_iterable_dataset(num_shards=2))
    rows = list(streamed["train"])
    assert judge.stats()["requests"] == sent and sum(r["QA_Clarity"] is None for r in rows) == 6
    assert list(streamed["errors"]) == first["errors"].to_list()


def test_a_reply_cut_at_max_tokens_is_sent_again_once_max_tokens_is_raised(judge, tmp_path):
    """A truncated reply is kept for the max_tokens it was cut at: the same run replays it, a higher limit (the
    fix) sends it."""
    judge.configure(faults=[{"match": "row-1:", "fault": "finish_length"}])
    ds = qa_dataset(3)
    _run(judge, tmp_path, ds, max_tokens=50)
    sent = judge.stats()["requests"]
    assert _run(judge, tmp_path, ds, max_tokens=50)["errors"]["kind"] == ["truncated"]
    assert judge.stats()["requests"] == sent
    _run(judge, tmp_path, ds, max_tokens=200)
    assert judge.stats()["requests"] - sent == 1 + RETRIES


def test_batch_mode_keeps_invalid_replies_for_online_runs_and_retry_errors_resubmits(batch, tmp_path):
    """Batch mode collects the same kept failures: after a batch run whose replies fail validation on every try,
    an online run sends none of them (on main it paid for each again, with its retries), and a batch run with
    retry_errors submits them again."""
    batch.configure(overrides={"score": 11})  # out of range: every reply of QA_Clarity, every try
    ds = qa_dataset(4)
    first = score_as("openai", ds, batch.base_url, tmp_path / "c", batch=True, retries=1)
    assert set(first["errors"]["kind"]) == {"out_of_range"} and first["errors"].num_rows == 4
    assert sum(batch.stats()["paid"].values()) == 8  # two tries each
    online = score_as("openai", ds, batch.base_url, tmp_path / "c", retries=1)
    assert batch.stats()["online"] == 0
    assert online["errors"].to_list() == first["errors"].to_list()
    again = score_as("openai", ds, batch.base_url, tmp_path / "c", batch=True, retries=1)
    assert sum(batch.stats()["paid"].values()) == 8 and again["errors"].num_rows == 4
    retried = score_as("openai", ds, batch.base_url, tmp_path / "c", batch=True, retries=1, retry_errors=True)
    assert sum(batch.stats()["paid"].values()) == 16 and retried["errors"].num_rows == 4


@pytest.mark.parametrize("kept", ["retry_errors"])
def test_retry_errors_is_a_setting_a_flag_and_a_recipe_key(kept, tmp_path):
    from hf_judge import Settings
    from hf_judge.cli.parser import build_parser

    assert Settings(model="m").retry_errors is False and Settings(model="m", retry_errors=True).retry_errors
    args = build_parser().parse_args(["score", "d.jsonl", "--metrics", "Q_Clarity", "--model", "m", "--retry-errors"])
    assert getattr(args, kept) is True
