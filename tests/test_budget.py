"""max_cost as a budget of the job: requests admitted against it before they are sent (their worst case
reserved), what earlier runs paid counted, and replies without usable token counts counted all the same.

Every reply of the loopback judge here is the same text (``overrides``), so each request costs exactly one
known amount at a price of output tokens only, and ``max_tokens`` set to the reply's tokens makes its worst
case that same amount: the bounds below are exact counts of the server's requests.
"""

from __future__ import annotations

import orjson
import pytest
from anthropic_fixture import *  # noqa: F401,F403 - the loopback Anthropic server (claude)
from batch_fixture import *  # noqa: F401,F403 - the loopback OpenAI batch server (batch)
from gemini_fixture import *  # noqa: F401,F403 - the loopback Gemini server (gemini)
from helpers import JUDGES, qa_dataset, run_cli, score, score_args, score_as

from hf_judge import CostExceededError

REPLY = {"reason": "r" * 30, "score": 7}  # QA_Clarity's reply, always: {"reason":"rrr...","score":7}
TOKENS = len(orjson.dumps(REPLY)) // 4  # the server's count: 4 characters a token
ONE = 0.01  # USD a request costs


@pytest.fixture
def fixed(judge, tmp_path):
    """The judge's replies all alike, and a price file at which each costs exactly ONE."""
    judge.configure(overrides=REPLY)
    path = tmp_path / "prices.yaml"
    path.write_text(f"judge: {{input: 0, output: {ONE * 1e6 / TOKENS!r}}}\n", encoding="utf-8")
    return str(path)


def _run(ds, judge, tmp_path, prices, budget, **kw):
    kw.setdefault("max_tokens", TOKENS)
    return score(ds, ["QA_Clarity"], judge, tmp_path, prices=prices, max_cost=budget, **kw)


@pytest.mark.parametrize("concurrency", [1, 16, 256])
def test_max_cost_admits_requests_before_sending_so_in_flight_cannot_overshoot(judge, tmp_path, fixed, concurrency):
    """On main the budget was checked against the replies received: 16 or 256 requests in flight all went out
    past it ($0.12 under $0.01). Each request's worst case is reserved before it is sent: 10 requests for 10.5."""
    judge.configure(latency=0.02)
    with pytest.raises(CostExceededError) as e:
        _run(qa_dataset(400), judge, tmp_path, fixed, 10.5 * ONE, concurrency=concurrency)
    assert judge.stats()["requests"] == 10  # $0.10 paid of $0.105: the 11th would pass it
    message = str(e.value)
    assert "this job's replies cost $0.1000" in message and "could cost up to $0.0100" in message
    assert "earlier runs included" in message and "beyond their reservation" in message


def test_the_budget_holds_across_the_reruns_of_a_job(judge, tmp_path, fixed):
    """On main each run had the whole budget again: a job run twice spent twice. Earlier runs' replies of the
    job (in the store) count: the same command again sends nothing, a higher budget only the difference."""
    ds = qa_dataset(60)
    with pytest.raises(CostExceededError):
        _run(ds, judge, tmp_path, fixed, 10.5 * ONE, concurrency=16)
    assert judge.stats()["requests"] == 10
    with pytest.raises(CostExceededError, match=r"\$0\.1000 of it paid by earlier runs"):
        _run(ds, judge, tmp_path, fixed, 10.5 * ONE, concurrency=16)
    assert judge.stats()["requests"] == 10  # nothing new
    with pytest.raises(CostExceededError):
        _run(ds, judge, tmp_path, fixed, 25.5 * ONE, concurrency=16)
    assert judge.stats()["requests"] == 25
    done = _run(ds, judge, tmp_path, fixed, 60.5 * ONE, concurrency=16)
    assert judge.stats()["requests"] == 60 and done.summary.cost() == pytest.approx(35 * ONE)


def test_without_max_tokens_a_reply_is_reserved_at_1024_tokens(judge, tmp_path, fixed):
    """Without max_tokens the worst case is 1,024 reply tokens (or the longest reply, if longer): a budget under
    that sends nothing rather than a request that could pass it."""
    limit = 1024 * ONE / TOKENS
    with pytest.raises(CostExceededError):
        _run(qa_dataset(40), judge, tmp_path, fixed, limit * 0.99, max_tokens=None, concurrency=16)
    assert judge.stats()["requests"] == 0
    with pytest.raises(CostExceededError):
        _run(qa_dataset(40), judge, tmp_path, fixed, limit + 2.5 * ONE, max_tokens=None, concurrency=16)
    assert judge.stats()["requests"] == 3  # paid 3 and the next one's 1,024 tokens would pass it


@pytest.mark.parametrize("usage", ["omit", "null", "strings", "floats", "negative"])
def test_a_reply_without_usable_token_counts_is_counted_and_the_budget_holds(judge, tmp_path, fixed, usage):
    """On main such replies cost nothing: 500 of 500 requests went out under max_cost=0.001, "cost $0.0000".
    Their tokens are counted here (the reply's text, 4 bytes a token, at most max_tokens)."""
    judge.configure(usage=usage, latency=0.01)
    with pytest.raises(CostExceededError):
        _run(qa_dataset(200), judge, tmp_path, fixed, 10.5 * ONE, concurrency=64)
    assert judge.stats()["requests"] == 10
    judge.reset()
    judge.configure(overrides=REPLY, usage=usage)
    free = score(qa_dataset(4), ["QA_Clarity"], judge, tmp_path / "free", prices=fixed)
    counted = -(-len(orjson.dumps(REPLY)) // 4)  # rounded up, where the server rounds down
    assert free.summary.completion_tokens == 4 * counted
    assert free.summary.cost() == pytest.approx(4 * ONE * counted / TOKENS)
    assert free.summary.prompt_tokens > 4 * 50  # the request bodies, 4 bytes a token
    assert any("without usable token counts" in n for n in free.summary.notes)


def test_cli_max_cost_help_and_stop_state_the_bound(judge, tmp_path, fixed, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(50).to_json(data)
    args = score_args(data, judge, "--prices", fixed, "--max-cost", str(5.5 * ONE), "--max-tokens", str(TOKENS),
                      "--concurrency", "32", "--cache-dir", tmp_path / "cache", "-o", tmp_path / "out")  # fmt: skip
    code, _, err = run_cli(capfd, *args)
    assert code == 1 and "max_cost=$0.055 is used up" in err, err
    assert judge.stats()["requests"] == 5
    code, _, err = run_cli(capfd, *args)
    assert code == 1 and "paid by earlier runs" in err and judge.stats()["requests"] == 5
    code, out, _ = run_cli(capfd, "score", "--help")
    assert "earlier runs included" in " ".join(out.split())


@pytest.mark.parametrize(("provider", "server"), [("openai", "batch"), ("anthropic", "claude"), ("gemini", "gemini")])
def test_batch_lines_without_usage_are_counted_for_the_cost_and_the_budget(provider, server, request, tmp_path):
    """On main a batch line without usage cost nothing ("cost $0.0000"), and the budget of the passes after it
    counted nothing: its tokens are counted (the prompt as the requests written, the reply from its text)."""
    server = request.getfixturevalue(server)
    server.configure(usage="omit")
    model = JUDGES[provider][0]["model"]
    path = tmp_path / "prices.yaml"
    path.write_text(f"{model}: {{input: 1.0, output: 4.0, batch_input: 1.0, batch_output: 4.0}}\n", encoding="utf-8")
    url = server.url if provider == "anthropic" else server.base_url
    scored = score_as(provider, qa_dataset(4), url, tmp_path / "c", batch=True, prices=str(path), max_cost=1.0)
    s = scored.summary
    p, c = s.batch["prompt_tokens"], s.batch["completion_tokens"]
    assert p > 4 * 50 and c >= 4 * 5  # four prompts of a few hundred bytes, four replies of a JSON object
    assert (s.prompt_tokens, s.completion_tokens) == (p, c)
    assert s.cost() == pytest.approx((p * 1.0 + c * 4.0) / 1e6)
    assert any("without usable token counts" in n for n in s.notes), (s.notes, server.stats())
