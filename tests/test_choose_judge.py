"""choose_judge / hf-judge choose-judge against loopback judges of known behaviour: one that agrees with the
labels on a known share of pairs (it prefers the longer response; the labels name the longer one on 80 % of
pairs), one that always prefers the response shown first, one that fails on about a fifth of its rows, and a
slow, expensive one. Every figure of the table is checked against a hand computation or scikit-learn."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from datasets import Dataset
from judge_fixture import JudgeServer
from sklearn.metrics import cohen_kappa_score

from hf_judge import agreement, choose_judge, load_result
from hf_judge.analysis.leaderboard import FILE, pair_verdicts

N = 40
FIRST_REPLY = {"score_1": 9, "score_2": 2, "explanation": "the first"}


@pytest.fixture(scope="module")
def servers():
    with JudgeServer() as a, JudgeServer() as b, JudgeServer() as c:
        yield a, b, c


def _pairs() -> Dataset:
    """Pairs whose longer response is the label on 80 % of rows (rows 0, 5, 10, ...: the shorter one)."""
    q, r1, r2, label = [], [], [], []
    for i in range(N):
        long, short = "L" * (60 + i), "S" * (20 + i % 7)
        first_long = i % 2 == 0
        q.append(f"question {i}")
        r1.append(long if first_long else short)
        r2.append(short if first_long else long)
        longer = "1" if first_long else "2"
        label.append(longer if i % 5 else {"1": "2", "2": "1"}[longer])
    return Dataset.from_dict({"question": q, "response1": r1, "response2": r2, "human": label})


def _judges(servers, tmp_path):
    a, b, c = servers
    for s in servers:
        s.reset()
    # agree: the i-th score follows the length of the i-th response (pattern: runs of L or S)
    a.configure(
        length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"},
        faults=[{"fault": "status", "status": 400, "rate": 0.2, "model": "faulty"}],
    )
    b.configure(overrides=FIRST_REPLY)
    c.configure(latency=0.05)
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "agree: {input: 0, output: 1.0}\nfirst: {input: 0, output: 2.0}\n"
        "faulty: {input: 0, output: 1.0}\nslow: {input: 0, output: 100.0}\n"
    )
    return [
        {"model": "agree", "base_url": a.base_url},
        {"model": "first", "base_url": b.base_url},
        {"model": "faulty", "base_url": a.base_url},
        {"model": "slow", "base_url": c.base_url},
    ], str(prices)


def test_the_table_of_four_judges_of_known_behaviour(servers, tmp_path):
    judges, prices = _judges(servers, tmp_path)
    ds = _pairs()
    choice = choose_judge(
        ds,
        "Comparative",
        judges,
        label="human",
        api_key="k",
        cache_dir=tmp_path / "c",
        prices=prices,
        progress=False,
        output_dir=tmp_path / "out",
        resamples=200,
    )
    by = {e["judge"]: e for e in choice.entries}
    labels = ds["human"]
    # agree: prefers the longer response in both orders, the labels name the longer one on 80 % of pairs
    assert by["agree"]["score"] == pytest.approx(0.8) and by["agree"]["coverage"] == 1.0
    assert by["agree"]["judgebench"]["orders_disagree"]["share"] == 0.0
    lo, hi = by["agree"]["interval"]
    assert lo < 0.8 < hi
    # first: each order picks the response shown first: the votes cancel (0), never correct by JudgeBench's rule
    assert by["first"]["score"] == 0.0
    assert by["first"]["judgebench"]["single_order_accuracy"] == pytest.approx(labels.count("1") / N)
    disagree = by["first"]["judgebench"]["orders_disagree"]
    assert disagree == {"share": 1.0, "first_position": N, "second_position": 0, "other": 0, "pairs": N}
    # faulty: a fifth of its requests refused (400: not retried); a pair with both orders refused is undecided
    scored = load_result(tmp_path / "out" / "faulty")  # the candidate's own folder: its columns under their names
    assert scored["train"]["__order__"] == [1] * N + [2] * N
    winners = scored["train"]["Comparative_winner"]
    first, second = winners[:N], [{"1": "2", "2": "1"}.get(w, w) for w in winners[N:]]
    undecided = sum(1 for a, b in zip(first, second, strict=True) if a is None and b is None)
    assert by["faulty"]["coverage"] == pytest.approx((N - undecided) / N)
    assert 0 < sum(w is None for w in winners) < 2 * N * 0.4
    expected = pair_verdicts(first, second, labels, resamples=0)
    assert by["faulty"]["score"] == expected["accuracy"]
    # Cohen's kappa over all pairs, an undecided pair one more value (scikit-learn)
    combined = []
    for a, b in zip(first, second, strict=True):
        s = sum({"1": 1, "2": -1}.get(w, 0) for w in (a, b) if w is not None)
        combined.append("undecided" if a is None and b is None else "1" if s > 0 else "2" if s < 0 else "tie")
    assert by["faulty"]["kappa"] == pytest.approx(cohen_kappa_score(labels, combined))
    if undecided:
        assert by["faulty"]["failures"] == {"http_400": undecided}
    # cost per 1,000 rows: every reply of 'first' is the same JSON (completion tokens = len // 4), two per row
    n_out = max(1, len(orjson.dumps(FIRST_REPLY)) // 4)
    assert by["first"]["cost_per_1000"] == pytest.approx(1000 * 2 * n_out * 2.0 / 1e6)
    assert by["first"]["cost_per_1000_batch"] == pytest.approx(by["first"]["cost_per_1000"] / 2)
    # latency: the slow server waits 50 ms before each reply (the histogram's bins are 9 % wide); an upper bound
    # would test the machine's load, not the figure
    assert by["slow"]["latency_p50_s"] > 0.045 and by["slow"]["latency_p95_s"] >= by["slow"]["latency_p50_s"]
    assert all(by[j]["latency_p50_s"] is not None for j in by)
    # the recommendation: the best, 'agree' (no other interval reaches it), whatever the price
    assert choice.recommendation["name"] == "agree" and choice.recommendation["best"] == "agree"
    saved = json.loads((tmp_path / "out" / FILE).read_text())
    assert saved["recommendation"]["name"] == "agree" and len(saved["entries"]) == 4
    text = str(choice)
    assert "recommended: agree" in text and "orders disagree" in text


def test_agreement_all_rows_figure_equals_the_table_for_one_judge(servers, tmp_path):
    """The shared rule: a binary judge's accuracy over all labelled rows, by `agreement` and by the table."""
    judges, prices = _judges(servers, tmp_path)
    rng = np.random.default_rng(0)
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(N)],
            "answer": [f"a{i}" for i in range(N)],
            "human": [bool(v) for v in rng.integers(0, 2, N)],
        }
    )
    columns = {"prediction": "answer"}
    choice = choose_judge(
        ds,
        "Binary",
        judges[2:],
        label="human",
        api_key="k",
        cache_dir=tmp_path / "c",
        prices=prices,
        progress=False,
        output_dir=tmp_path / "out",
        resamples=100,
        columns=columns,
    )
    scored = load_result(tmp_path / "out" / "faulty")  # the candidate's own result: its rows, errors and summary
    entry = next(e for e in choice.entries if e["judge"] == "faulty")
    assert scored.summary.model == "faulty" and scored.summary.errors == entry["failures"]
    report = agreement(scored["train"], "Binary", "__label__", errors=scored["errors"], resamples=100)
    assert entry["score"] == report.all_rows["figures"]["accuracy"]
    assert entry["coverage"] == report.all_rows["coverage"] < 1.0
    assert entry["failures"] == report.all_rows["failures"]
    # and by hand: decided and equal to the label, over all rows
    verdicts = scored["train"]["Binary"]
    hits = sum(v is not None and v == h for v, h in zip(verdicts, ds["human"], strict=True))
    assert entry["score"] == pytest.approx(hits / N)


def test_cli_choose_judge_prints_the_table_and_writes_its_files(servers, tmp_path, capfd):
    from helpers import run_cli

    judges, prices = _judges(servers, tmp_path)
    data = tmp_path / "pairs.jsonl"
    _pairs().to_json(str(data))
    spec = tmp_path / "judges.yaml"
    spec.write_text("".join(f"- {{model: {j['model']}, base_url: '{j['base_url']}'}}\n" for j in judges[1:]))
    code, out, err = run_cli(
        capfd,
        "choose-judge",
        str(data),
        "--metric",
        "Comparative",
        "--judges",
        "agree",
        "--base-url",
        judges[0]["base_url"],
        "--judges-file",
        str(spec),
        "--label",
        "human",
        "--prices",
        prices,
        "--cache-dir",
        str(tmp_path / "c"),
        "-o",
        str(tmp_path / "out"),
        "--resamples",
        "50",
        "--for",
        str(data),
    )
    assert code == 0, err
    assert "recommended: agree" in out and "scoring" in out and "requests" in out
    saved = json.loads((tmp_path / "out" / FILE).read_text())
    assert [e["judge"] for e in saved["entries"]] == ["agree", "first", "faulty", "slow"]
    assert saved["projection"]["requests"] == 2 * N  # both orders of each pair, by the recommended judge
    assert "| agree |" in (tmp_path / "out" / "choose_judge.md").read_text()


def test_a_second_run_pays_nothing_and_projects_the_cost(servers, tmp_path):
    judges, prices = _judges(servers, tmp_path)
    ds = Dataset.from_dict({"question": ["q"] * 4, "answer": ["a", "b", "c", "d"], "human": [True, False] * 2})
    kw = dict(label="human", api_key="k", cache_dir=tmp_path / "c", prices=prices, progress=False, resamples=0)
    kw["columns"] = {"prediction": "answer"}
    first = choose_judge(ds, "Binary", judges[:2], **kw)
    sent = servers[0].stats()["requests"] + servers[1].stats()["requests"]
    again = choose_judge(ds, "Binary", judges[:2], **kw)
    assert servers[0].stats()["requests"] + servers[1].stats()["requests"] == sent  # all from the reply store
    assert [e["cost_basis"] for e in first.entries] == ["replies", "replies"]
    assert [e["cost_basis"] for e in again.entries] == ["projected", "projected"]
    assert all(e["cost_per_1000"] > 0 for e in again.entries)
    assert [e["score"] for e in again.entries] == [e["score"] for e in first.entries]
