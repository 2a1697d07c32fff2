"""Servers that misbehave: endless Retry-After, permanent 429s, huge or compressed replies, odd content shapes.

Each test runs the real client against the loopback judge server (tests/judge_server.py) with a fault that
a server in the wild has sent; none of them may stall, swamp or crash a run.
"""

from __future__ import annotations

import email.utils
import os
import threading
import time

import pytest
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge import QuotaExceededError, RateLimitedError, RunStopped


# -- Retry-After has a cap ---------------------------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["3600", "inf", "1e308", "date"])
def test_retry_after_is_capped_at_backoff_max_and_counted(judge, tmp_path, value, caplog):
    if value == "date":
        value = email.utils.formatdate(time.time() + 3 * 3600, usegmt=True)
    judge.configure(faults=[{"fault": "status", "status": 429, "retry_after": value, "attempts": 1, "match": "row-1:"}])
    t = time.monotonic()
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, backoff_max=0.2)
    took = time.monotonic() - t
    assert len(out["errors"]) == 0 and None not in out["train"]["QA_Clarity"]
    assert judge.stats()["requests"] == 4
    assert out.summary.capped_waits == 1 and out.summary.to_dict()["capped_waits"] == 1
    assert "capped waits   1 " in str(out.summary)
    assert 0.2 <= took < 30
    # said while it happens, once: a bar that does not move for backoff_max seconds is explained
    said = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert len(said) == 1 and "waiting backoff_max=0.2 s instead" in said[0]


@pytest.mark.timeout(60)
def test_retry_after_nan_falls_back_to_backoff(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 429, "retry_after": "nan", "attempts": 1, "match": "row-1:"}])
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, backoff_max=0.5)
    assert len(out["errors"]) == 0 and out.summary.capped_waits == 0
    assert "capped waits" not in str(out.summary)


def test_retry_after_under_the_cap_is_honoured(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 429, "retry_after": 0.3, "attempts": 1}])
    t = time.monotonic()
    out = score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, backoff_max=5)
    assert time.monotonic() - t >= 0.3 and out.summary.capped_waits == 0


# -- a permanent 429 stops the run ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "error",
    [
        {
            "code": "insufficient_quota",
            "type": "insufficient_quota",
            "message": "You exceeded your current quota, please check your plan and billing details.",
        },
        {"code": "billing_hard_limit_reached", "message": "Billing hard limit has been reached"},
        {"type": "billing_not_active", "message": "Your account is not active, please check your billing details."},
    ],
)
def test_quota_429_stops_the_run_keeping_finished_work(judge, tmp_path, error):
    ds = qa_dataset(30)
    # row-2 (and row-20..29) are refused; with one request in flight, rows 0 and 1 are finished first
    judge.configure(faults=[{"fault": "status", "status": 429, "match": "row-2", **error}])
    with pytest.raises(QuotaExceededError, match="billing settings") as e:
        score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=1, retries=50)
    assert isinstance(e.value, RunStopped) and "sk-test" not in str(e.value)
    assert judge.stats()["requests"] == 3  # not retried: rows 0, 1 and the refused row 2
    judge.reset()
    out = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] == 28 and len(out["errors"]) == 0  # rows 0 and 1 were kept


@pytest.mark.timeout(120)
def test_429_storm_that_lets_nothing_through_stops_the_run(judge, tmp_path):
    ds = qa_dataset(30)
    judge.configure(faults=[{"fault": "status", "status": 429, "retry_after": 0.05, "match": "row-2"}])
    t = time.monotonic()
    with pytest.raises(RateLimitedError, match=r"max_throttle_s=0\.5\)") as e:
        score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=1, retries=100, backoff_max=0.05, max_throttle_s=0.5)
    assert 0.5 <= time.monotonic() - t < 60
    assert "--concurrency" in str(e.value)
    # sleeping retries hold no slot: every row without "row-2" was scored before the storm was all that was left
    assert judge.stats()["by_status"]["200"] == 19
    judge.reset()
    score(ds, ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] == 11  # everything finished before the stop was kept


def test_429s_between_successes_do_not_stop_the_run(judge, tmp_path):
    """Throttling that lets requests through is the normal case: the run slows down, it does not stop."""
    judge.configure(latency=0.05, max_concurrent=2, over_limit_retry_after=0.05)
    out = score(
        qa_dataset(60),
        ["QA_Clarity"],
        judge,
        tmp_path,
        concurrency=16,
        retries=100,
        backoff_max=0.05,
        max_throttle_s=0.5,
    )
    assert len(out["errors"]) == 0 and judge.stats()["by_status"]["429"] > 0
    assert out.summary.elapsed_s > 1.0  # twice max_throttle_s of 429s, with successes between them


# -- reply size is bounded --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "rule",
    [
        {"fault": "huge_body", "size": 300_000},
        {"fault": "huge_body", "size": 300_000, "chunked": True},
        {"fault": "endless_chunks"},
        {"fault": "gzip_bomb", "size": 20_000_000},
    ],
    ids=["content-length", "chunked", "endless", "gzip-bomb"],
)
def test_reply_over_max_reply_bytes_is_a_bad_response(judge, tmp_path, rule):
    judge.configure(faults=[{**rule, "match": "row-1:"}])
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, retries=1, max_reply_bytes=100_000)
    assert out["errors"]["kind"] == ["bad_response"] and out["errors"]["attempts"] == [2]
    msg = out["errors"]["message"][0]
    assert "max_reply_bytes=100,000" in msg and "--max-reply-bytes" in msg
    assert out["train"]["QA_Clarity"][0] is not None and out["train"]["QA_Clarity"][2] is not None


@pytest.mark.parametrize("rule", [{"fault": "huge_body", "size": 90_000}, {"fault": "gzip_bomb", "size": 90_000}])
def test_reply_under_max_reply_bytes_is_read(judge, tmp_path, rule):
    judge.configure(faults=[rule])
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, max_reply_bytes=100_000)
    assert len(out["errors"]) == 0 and judge.stats()["requests"] == 3


def test_max_reply_bytes_is_validated(judge, tmp_path):
    from hf_judge import ConfigError

    with pytest.raises(ConfigError, match="max_reply_bytes"):
        score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, max_reply_bytes=10)


def _rss_anon_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/self/status")
def test_peak_memory_stays_bounded_whatever_the_size_of_the_replies(judge, tmp_path):
    """32 replies of 40 MB in flight at once: unbounded, that is 1.3 GB held; capped at 1 MiB, ~32 MB."""
    judge.configure(faults=[{"fault": "huge_body", "size": 40_000_000}])
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_anon_kb())
            time.sleep(0.005)

    ds = qa_dataset(32)
    base = _rss_anon_kb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out = score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=32, retries=0, max_reply_bytes=1024 * 1024)
    finally:
        done.set()
        sampler.join()
    assert out["errors"]["kind"] == ["bad_response"] * 32
    grew_mb = (peak[0] - base) / 1024
    print(f"peak anonymous RSS grew {grew_mb:.0f} MB for 32 x 40 MB replies")
    assert grew_mb < 300


# -- any content shape ends as a reply or an error row --------------------------------------------------------------
@pytest.mark.parametrize(
    "rule, kind",
    [
        ({"fault": "list_content"}, None),
        ({"fault": "raw_content", "content": [{"text": '{"reason": "r", "score": 5}'}]}, None),
        ({"fault": "raw_content", "content": {"reason": "r", "score": 5}}, "bad_response"),
        ({"fault": "raw_content", "content": 7}, "bad_response"),
        ({"fault": "raw_content", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, "bad_response"),
        ({"fault": "raw_content", "content": ["a", 1]}, "bad_response"),
        ({"fault": "raw_content", "content": [{"type": "text", "text": 5}]}, "bad_response"),
        ({"fault": "raw_message", "message": "hello"}, "bad_response"),
        ({"fault": "raw_message", "message": [1, 2]}, "bad_response"),
    ],
)
def test_any_content_shape_is_a_reply_or_an_error_row(judge, tmp_path, rule, kind):
    judge.configure(faults=[rule])
    out = score(qa_dataset(4), ["QA_Clarity"], judge, tmp_path, retries=1)
    if kind is None:
        assert len(out["errors"]) == 0 and None not in out["train"]["QA_Clarity"]
    else:
        assert out["errors"]["kind"] == [kind] * 4 and out["errors"]["attempts"] == [2] * 4
        assert out["train"]["QA_Clarity"] == [None] * 4


def test_cli_max_reply_bytes_and_quota_exit_code(judge, tmp_path, capfd, monkeypatch):
    """``--max-reply-bytes`` reaches the client; a used-up quota is a stopped run (exit 1) that says what to do."""
    import json

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"cli-{i}?", "answer": str(i)}) + "\n" for i in range(3)))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    args = score_args(data, judge, "--retries", "0", "--output-dir", tmp_path / "out")
    judge.configure(faults=[{"fault": "huge_body", "size": 300_000, "match": "cli-1?"}])
    code, out, err = run_cli(capfd, *args, "--max-reply-bytes", "100000")
    assert code == 0, err
    assert "bad_response: 1" in out
    judge.configure(faults=[{"fault": "status", "status": 429, "code": "insufficient_quota", "message": "quota"}])
    code, out, err = run_cli(capfd, *args, "--no-cache")
    assert code == 1 and "billing settings" in err and "sk-test" not in err
