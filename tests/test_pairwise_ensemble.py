"""A pairwise metric (Comparative, both orders) with repeated samples and with a judge panel, against loopback
judge servers: each sample / judge combines its two orders first, then the samples / judges combine; cached, resumed."""

from __future__ import annotations

import json
import statistics

import pytest
from datasets import Dataset
from helpers import score
from judge_fixture import JudgeServer

COLUMNS = {"question": "question", "response1": "response1", "response2": "response2"}


def _pairs(n: int) -> Dataset:
    return Dataset.from_dict(
        {
            "question": [f"row-{i}: which is better?" for i in range(n)],
            "response1": [f"resp-A-{i}" for i in range(n)],
            "response2": [f"resp-B-{i}" for i in range(n)],
        }
    )


def _reply(s1: int, s2: int, **rule) -> dict:
    return {"fault": "text", "text": json.dumps({"score_1": s1, "score_2": s2, "explanation": f"{s1}-{s2}"}), **rule}


# The prompt shows response1 first ("[Assistant 1]\nresp-A-i") in the first order, response2 first when swapped.
def _first(row: int | str) -> str:
    return f"[Assistant 1]\nresp-A-{row}"


def _swapped(row: int | str) -> str:
    return f"[Assistant 1]\nresp-B-{row}"


@pytest.fixture(scope="module")
def second_server():
    with JudgeServer() as server:
        yield server


def test_comparative_with_samples(judge, tmp_path):
    judge.configure(
        faults=[
            # row 0: the first request of the first order says 8-3, later ones 6-5; swapped always A 8, B 4
            _reply(8, 3, match=_first(0), attempts=1),
            _reply(6, 5, match=_first(0)),
            _reply(4, 8, match=_swapped(0)),
            # row 1: the first order's first request is bad JSON (a missing sample), then 2-9; swapped: A 5, B 3,
            # so the two orders disagree on the winner
            {"fault": "malformed_json", "match": _first(1), "attempts": 1},
            _reply(2, 9, match=_first(1)),
            _reply(3, 5, match=_swapped(1)),
        ]
    )
    kw = dict(samples=3, retries=0, temperature=0.7, columns=COLUMNS)
    out = score(_pairs(2), ["Comparative"], judge, tmp_path, **kw)
    assert judge.stats()["requests"] == 12  # 2 rows x 3 samples x 2 orders
    rows = out["train"].to_list()
    # row 0: each sample averages its two orders: (8+8)/2 vs (3+4)/2 once, (6+8)/2 vs (5+4)/2 twice
    r = rows[0]
    assert sorted(r["Comparative_score_1_samples"]) == [7, 7, 8]
    assert sorted(r["Comparative_score_2_samples"]) == [3.5, 4.5, 4.5]
    assert r["Comparative_score_1"] == pytest.approx(22 / 3)
    assert r["Comparative_score_1_std"] == pytest.approx(statistics.pstdev([7, 7, 8]))
    assert r["Comparative_score_1_majority"] == 7 and r["Comparative_score_2_majority"] == 4.5
    assert r["Comparative_winner_samples"] == ["1"] * 3 and r["Comparative_winner"] == "1"
    assert r["Comparative_disagree"] is False and r["Comparative_disagree_samples"] == [False] * 3
    # row 1: one sample lost its first order, so the whole sample is missing; 2 of 3 meet min_samples
    r = rows[1]
    assert sorted(r["Comparative_score_1_samples"], key=str) == [3.5, 3.5, None]
    assert (r["Comparative_score_1"], r["Comparative_score_2"], r["Comparative_winner"]) == (3.5, 6.0, "2")
    assert r["Comparative_disagree"] is True and r["Comparative_disagree_samples"].count(True) == 2
    assert len(out["errors"]) == 0

    # An identical call returns the saved result without a request (row 1 keeps its missing sample).
    score(_pairs(2), ["Comparative"], judge, tmp_path, **kw)
    assert judge.stats()["requests"] == 12
    # Needing all three samples, row 1 fails: its invalid reply is kept, and replayed with no request.
    short = score(_pairs(2), ["Comparative"], judge, tmp_path, **{**kw, "min_samples": 3})
    assert judge.stats()["requests"] == 12 and short["errors"]["row"] == [1]
    # Sent again (retry_errors), row 1 is scored again from the reply store: only the order that failed is sent.
    again = score(_pairs(2), ["Comparative"], judge, tmp_path, **{**kw, "min_samples": 3, "retry_errors": True})
    assert judge.stats()["requests"] == 13 and again.summary.cache_hits == 11
    assert again["train"][1]["Comparative_score_1_samples"] == [3.5, 3.5, 3.5]
    assert again["train"][0] == out["train"][0] and len(again["errors"]) == 0


def test_comparative_with_a_panel(judge, second_server, tmp_path):
    # judge a: A 8-3 first, A 8 vs B 4 swapped -> 8, 3.5, winner 1, the orders agree
    judge.configure(faults=[_reply(8, 3, match=_first("")), _reply(4, 8, match=_swapped(""))])
    # judge b: 2-9 first, A 5 vs B 3 swapped -> 3.5, 6, winner 2, the orders disagree; row 1's first order fails once
    second_server.reset()
    second_server.configure(
        faults=[
            {"fault": "malformed_json", "match": _first(1), "attempts": 1},
            _reply(2, 9, match=_first("")),
            _reply(3, 5, match=_swapped("")),
        ]
    )
    models = [
        {"model": "judge-a", "base_url": judge.base_url},
        {"model": "judge-b", "base_url": second_server.base_url},
    ]
    kw = dict(models=models, retries=0, columns=COLUMNS)
    out = score(_pairs(2), ["Comparative"], judge, tmp_path, **kw)
    assert judge.stats()["requests"] == 4 and second_server.stats()["requests"] == 4
    rows = out["train"].to_list()
    for r in rows:
        assert (r["Comparative_score_1__judge_a"], r["Comparative_score_2__judge_a"]) == (8, 3.5)
        assert (r["Comparative_winner__judge_a"], r["Comparative_disagree__judge_a"]) == ("1", False)
    r = rows[0]
    assert (r["Comparative_score_1__judge_b"], r["Comparative_score_2__judge_b"]) == (3.5, 6)
    assert (r["Comparative_winner__judge_b"], r["Comparative_disagree__judge_b"]) == ("2", True)
    # the panel: scores by the mean, the winner and the disagreement by majority (a tie: the first judge)
    assert (r["Comparative_score_1"], r["Comparative_score_2"]) == (5.75, 4.75)
    assert (r["Comparative_winner"], r["Comparative_disagree"]) == ("1", False)
    # row 1: judge b's reply failed: an error row naming it, and the aggregate of judge a alone
    r = rows[1]
    assert r["Comparative_score_1__judge_b"] is None and r["Comparative_winner__judge_b"] is None
    assert (r["Comparative_score_1"], r["Comparative_score_2"], r["Comparative_winner"]) == (8, 3.5, "1")
    errors = out["errors"].to_list()
    assert [(e["row"], e["metric"], e["kind"]) for e in errors] == [
        (1, "Comparative", "unparseable")
    ]  # pairwise replies may be free text
    assert errors[0]["message"].startswith("judge 'judge_b': ")
    pairs = out.summary.agreement["train"]["Comparative"]["Comparative_winner"]["pairs"]
    assert pairs["judge_a~judge_b"] == {"rows": 1, "exact": 0.0}

    # Judge b's unparseable reply is kept: the same call replays it; retry_errors asks it again, and only it.
    kept = score(_pairs(2), ["Comparative"], judge, tmp_path, **kw)
    assert judge.stats()["requests"] == 4 and second_server.stats()["requests"] == 4
    # the same row, but for its attempts: the failed order's (kept); the other order, from the store, took none
    assert kept["errors"].to_list() == [{**errors[0], "attempts": 1}]
    again = score(_pairs(2), ["Comparative"], judge, tmp_path, retry_errors=True, **kw)
    assert judge.stats()["requests"] == 4 and second_server.stats()["requests"] == 5
    assert again.summary.cache_hits == 7 and len(again["errors"]) == 0
    r = again["train"][1]
    assert (r["Comparative_score_1"], r["Comparative_winner"], r["Comparative_winner__judge_b"]) == (5.75, "1", "2")
