"""Reliability: faults, rate limits, circuit breaker, budget, secrets, sandbox."""

from __future__ import annotations

import email.utils
import time

import pytest
from helpers import qa_dataset, score

from hf_judge import AuthenticationError, BudgetExceededError, CircuitOpenError, ModelNotFoundError, TemplateError


def _invariant(out, n_rows, metrics=1):
    scored = sum(v is not None for v in out["train"]["QA_Clarity"])
    errored = len(out["errors"])
    assert scored + errored == n_rows * metrics
    assert len({(e["row"], e["metric"]) for e in out["errors"]}) == errored


@pytest.mark.parametrize(
    "rule, attempts, outcome",
    [
        ({"fault": "status", "status": 429, "retry_after": 0.05, "attempts": 2}, 3, "scored"),
        ({"fault": "status", "status": 429, "attempts": 2}, 3, "scored"),
        ({"fault": "status", "status": 500, "attempts": 2}, 3, "scored"),
        ({"fault": "status", "status": 502, "attempts": 1}, 2, "scored"),
        ({"fault": "status", "status": 503, "attempts": 3}, 4, "scored"),
        ({"fault": "reset", "attempts": 1}, 2, "scored"),
        ({"fault": "delay", "seconds": 1.5, "attempts": 1}, 2, "scored"),
        ({"fault": "malformed_json", "attempts": 2}, 3, "scored"),
        ({"fault": "status", "status": 500}, 4, "http_500"),
        ({"fault": "reset"}, 4, "connection"),
        ({"fault": "delay", "seconds": 1.5}, 4, "timeout"),
        ({"fault": "malformed_json"}, 4, "invalid_json"),
        ({"fault": "wrong_keys"}, 4, "schema"),
        ({"fault": "out_of_range"}, 4, "out_of_range"),
        ({"fault": "finish_length"}, 4, "truncated"),
        ({"fault": "content_filter"}, 1, "content_filter"),
        ({"fault": "status", "status": 400}, 1, "http_400"),
        ({"fault": "status", "status": 422}, 1, "http_422"),
        # servers that misbehave (tests/test_hostile_servers.py): waits capped, bodies bounded, any content shape
        ({"fault": "status", "status": 429, "retry_after": 3600, "attempts": 1}, 2, "scored"),
        ({"fault": "status", "status": 429, "retry_after": "inf", "attempts": 1}, 2, "scored"),
        (
            {
                "fault": "status",
                "status": 429,
                "retry_after": email.utils.formatdate(time.time() + 7200, usegmt=True),
                "attempts": 1,
            },
            2,
            "scored",
        ),
        ({"fault": "huge_body", "size": 5_000_000}, 4, "bad_response"),
        ({"fault": "huge_body", "size": 5_000_000, "chunked": True}, 4, "bad_response"),
        ({"fault": "endless_chunks"}, 4, "bad_response"),
        ({"fault": "gzip_bomb", "size": 50_000_000}, 4, "bad_response"),
        ({"fault": "gzip_bomb", "size": 100_000}, 1, "scored"),
        ({"fault": "list_content"}, 1, "scored"),
        ({"fault": "raw_content", "content": {"reason": "r", "score": 5}}, 4, "bad_response"),
        ({"fault": "raw_content", "content": 7}, 4, "bad_response"),
    ],
)
def test_fault_matrix(judge, tmp_path, rule, attempts, outcome):
    judge.configure(faults=[{**rule, "match": "row-1:"}])
    # a short timeout only where the fault is a delay: elsewhere a loaded machine's slow healthy reply is no timeout
    timeout = 0.5 if rule["fault"] == "delay" else 30
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, retries=3, timeout=timeout)
    _invariant(out, 3)
    st = judge.stats()
    assert st["requests"] == 2 + attempts
    if outcome == "scored":
        assert out["train"]["QA_Clarity"][1] is not None and len(out["errors"]) == 0
    else:
        assert out["errors"]["kind"] == [outcome] and out["errors"]["attempts"] == [attempts]
        assert out["train"]["QA_Clarity"][1] is None


@pytest.mark.parametrize(
    "status, error", [(401, AuthenticationError), (403, AuthenticationError), (404, ModelNotFoundError)]
)
def test_fatal_statuses_stop_the_run_keeping_finished_work(judge, tmp_path, status, error):
    ds = qa_dataset(30)
    score(ds.select(range(10)), ["QA_Clarity"], judge, tmp_path)
    judge.configure(faults=[{"fault": "status", "status": status}])
    with pytest.raises(error) as e:
        score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=4)
    assert "sk-test" not in str(e.value)
    judge.reset()
    score(ds, ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] == 20  # the 10 finished rows were kept


def test_wrong_key_is_reported_without_the_key(judge, tmp_path):
    judge.configure(require_key="sk-right")
    with pytest.raises(AuthenticationError, match="API key") as e:
        score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path)
    assert "sk-test" not in str(e.value)


def test_unknown_model_stops_with_the_fix(judge, tmp_path):
    judge.configure(models=["real-model"])
    with pytest.raises(ModelNotFoundError, match="model name"):
        score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path)


def test_circuit_breaker(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 500, "rate": 0.9}])
    t = time.monotonic()
    with pytest.raises(CircuitOpenError, match="run the same command again"):
        score(qa_dataset(2000), ["QA_Clarity"], judge, tmp_path, retries=5, concurrency=32)
    assert time.monotonic() - t < 60  # stops, instead of working through 2,000 rows x 6 attempts
    # it opens once its 200-request window is full and >= 50 % failures (here 90 %): the 200 counted, plus those
    # already in flight (32) and the few a success let start before the stop reached every task (201-229 seen)
    assert 200 <= judge.stats()["requests"] <= 200 + 2 * 32


def test_circuit_breaker_on_dropped_connections_names_the_cause(judge, tmp_path):
    """A server reached at first that then drops most connections: the stop says what failed and where."""
    judge.configure(faults=[{"fault": "reset", "rate": 0.95}])
    with pytest.raises(CircuitOpenError) as e:
        score(qa_dataset(2000), ["QA_Clarity"], judge, tmp_path, retries=5, concurrency=32)
    message = str(e.value)
    assert "connection:" in message and "The last connection failure:" in message
    assert f"{judge.base_url}/chat/completions" in message


def test_token_budget_stops_cleanly(judge, tmp_path):
    with pytest.raises(BudgetExceededError, match="max_total_tokens"):
        score(qa_dataset(500), ["QA_Clarity"], judge, tmp_path, max_total_tokens=2000, concurrency=4)
    sent = judge.stats()["requests"]
    assert sent < 500
    judge.reset()
    out = score(qa_dataset(500), ["QA_Clarity"], judge, tmp_path)
    assert judge.stats()["requests"] <= 500 - sent + 4 and len(out["errors"]) == 0


def test_retry_after_is_honoured_and_sleepers_hold_no_slot(judge, tmp_path):
    judge.configure(
        record=True,
        latency=0.01,
        faults=[{"fault": "status", "status": 429, "retry_after": 0.3, "attempts": 1, "match": "row-0:"}],
    )
    t0 = time.monotonic()
    # 60 rows one at a time at 10 ms each: the other 59 take >= 0.59 s, longer than the 0.3-0.33 s row 0 sleeps
    out = score(qa_dataset(60), ["QA_Clarity"], judge, tmp_path, concurrency=1, backoff_max=5)
    assert len(out["errors"]) == 0
    events = judge.stats()["events"]
    # row 0's 429 came first; the other 59 rows were all served while it slept (one slot!)
    assert events[0][1] == 429
    assert [e[1] for e in events[1:60]] == [200] * 59
    retry = events[-1]
    assert len(events) == 61 and retry[1] == 200 and retry[0] - events[0][0] >= 0.3
    assert time.monotonic() - t0 >= 0.3


def test_retry_after_ms(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 429, "retry_after_ms": 300, "attempts": 1}])
    t0 = time.monotonic()
    score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, backoff_max=5)
    assert time.monotonic() - t0 >= 0.3


def test_429_storm_settles_near_server_capacity(judge, tmp_path):
    judge.configure(latency=0.05, max_concurrent=20, over_limit_retry_after=0.2)
    # 900 rows: at least 2.25 s at the server's 400 requests/s, most of it after the 1 s the limit may take to
    # settle (it settles in ~0.4 s: ~6 round trips of halving from 512; then a 429 probe or so per 0.6 s)
    out = score(qa_dataset(900), ["QA_Clarity"], judge, tmp_path, concurrency=512, retries=50, backoff_max=1)
    assert len(out["errors"]) == 0
    events = judge.stats()["events"]
    start = events[0][0]
    late = [e for e in events if e[0] - start > 1.0]
    late_429 = sum(1 for e in late if e[1] == 429)
    inflight = sorted(e[2] for e in late if e[1] == 200)
    print(
        f"storm: {len(events)} requests, {sum(e[1] == 429 for e in events)} 429s; "
        f"after 1 s: {late_429}/{len(late)} 429s, "
        f"median in flight at arrival {inflight[len(inflight) // 2]}"
    )
    assert late and late_429 < 0.10 * len(late)
    assert 8 <= inflight[len(inflight) // 2] <= 21


def test_soak(judge, tmp_path):
    judge.configure(
        latency_range=[0.0, 0.3],
        faults=[
            {"fault": "status", "status": 429, "rate": 0.04, "random": True, "retry_after": 0.05},
            {"fault": "status", "status": 503, "rate": 0.04, "random": True},
            {"fault": "reset", "rate": 0.03, "random": True},
            {"fault": "malformed_json", "rate": 0.04, "random": True},
        ],
    )
    n = 5000  # ~750 injected faults, each kind well over a hundred times
    out = score(qa_dataset(n), ["QA_Clarity"], judge, tmp_path, concurrency=1024, retries=8)
    st = judge.stats()
    _invariant(out, n)
    print(
        f"soak: {n} rows, {st['requests']} requests, {out.summary.retries} retries, "
        f"errors {len(out['errors'])}, {out.summary.elapsed_s:.1f} s"
    )
    assert len(out["errors"]) == 0
    assert None not in out["train"]["QA_Clarity"]
    assert st["duplicates"] == 0


def test_sandbox_blocks_python_internals(judge, tmp_path):
    pdir = tmp_path / "p"
    pdir.mkdir()
    for i, body in enumerate(
        [
            "{{ ''.__class__.__mro__[1].__subclasses__() }}",
            "{{ instruction.__class__.__init__.__globals__ }}",
            "{% include '/etc/passwd' %}",
            "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        ]
    ):
        (pdir / f"Q_Evil{i}.jinja").write_text(
            f"---\noutputs:\n  score: {{type: integer, minimum: 1, maximum: 10}}\n---\n{{{{ instruction }}}} {body}\n"
        )
        with pytest.raises(TemplateError):
            score(qa_dataset(1), [f"Q_Evil{i}"], judge, tmp_path, prompts_dir=pdir, columns={"instruction": "question"})
    assert judge.stats()["requests"] == 0


def test_requests_per_minute_limit(judge, tmp_path):
    """End to end, the limit paces the requests the server sees (the exact pacing: test_client_unit.py)."""
    t0 = time.monotonic()
    # 1,200/min: a bucket of 20 requests leaking 20/s, so 40 rows take >= (40 - 20) / 20 = 1 s
    score(qa_dataset(40), ["QA_Clarity"], judge, tmp_path, max_requests_per_minute=1200)
    assert time.monotonic() - t0 >= 1.0
    arrivals = sorted(t for t, _, _ in judge.stats()["events"])
    assert len(arrivals) == 40
    # any half second holds at most the bucket + half a second's leak, 20 + 10 (+ 2: transit jitter up to 0.1 s)
    assert max(sum(a <= t < a + 0.5 for t in arrivals) for a in arrivals) <= 32


def test_tokens_per_minute_limit(judge, tmp_path):
    """End to end, requests wait for their estimated tokens (the exact pacing: test_client_unit.py)."""
    import orjson

    from hf_judge.judging.images import prompt_tokens_estimate

    judge.configure(record=True)
    t0 = time.monotonic()
    out = score(qa_dataset(10), ["QA_Clarity"], judge, tmp_path, max_tokens_per_minute=60 * 2000, max_tokens=200)
    took = time.monotonic() - t0
    assert len(out["errors"]) == 0
    # what the client counted per request: the body it sent (orjson round-trips it byte for byte) + max_tokens
    tokens = sum(prompt_tokens_estimate(orjson.dumps(b)) + 200 for b in judge.stats()["bodies"])
    # a bucket of 2,000 tokens leaking 2,000/s: the last request waits for all but a bucket's worth to leak out
    assert tokens > 2 * 2000  # ~10 x 520: the run is paced for over a second
    assert took >= (tokens - 2000) / 2000


def test_placeholder_keys_are_not_masked_but_real_ones_are():
    from hf_judge.redact import register, scrub

    register("none")  # what llama.cpp users pass: masking it would turn "errors none" into "errors ***"
    register("hfj-real-secret-0123456789")
    assert scrub("errors         none") == "errors         none"
    assert scrub("key hfj-real-secret-0123456789 refused") == "key *** refused"


def test_timeout_fires_close_to_its_value(judge, tmp_path):
    """One task sweeps the deadlines: a hung request ends within a quarter of the timeout past it."""
    judge.configure(faults=[{"fault": "delay", "seconds": 30, "match": "row-1:"}])
    t = time.perf_counter()
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, retries=1, timeout=0.5)
    took = time.perf_counter() - t
    assert out["errors"]["kind"] == ["timeout"] and out["errors"]["attempts"] == [2]
    assert "no reply within 0.5 s" in out["errors"]["message"][0]
    # two attempts of 0.5 s, each cut off, against a server that would hold them 30 s; the sweep's precision
    # (a quarter of the timeout) is a unit test on a fake clock, not a wall-clock bound a loaded machine breaks
    assert 1.0 <= took < 30  # typically 1.1 s: the upper bound is 10x that and more
