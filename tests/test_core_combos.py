"""logprobs with samples and with a judge panel, in one process and streamed, against the loopback judge.

Every probability-weighted value is computed here from what the server wrote (the score columns of each
sample or judge) by the server's own token rule (``judge_server.token_logprobs``), not read back from hf_judge.
"""

from __future__ import annotations

import statistics

import pytest
from datasets import Dataset, List, Value
from helpers import score

# QA_Clarity reads question and answer; Binary question, ref and pred; Comparative question, pred and ref.
# So "NOLP" (in row 1's answer) is in the prompts of QA_Clarity's row 1 only.
COLUMNS = {
    "instruction": "question",
    "output": "answer",
    "answer": "ref",
    "prediction": "pred",
    "response1": "pred",
    "response2": "ref",
}
METRICS = ["QA_Clarity", "Binary", "Comparative"]
CLARITY = "Evaluate the clarity"  # in QA_Clarity's prompt only
BINARY = "strict grader"  # in Binary's prompt only
ROWS = 6
P1, P0 = 0.6 / 0.7, 0.25 / 0.85  # p_positive of a written "1", of a written "0" (the server's rule)


def _data(n: int = ROWS) -> Dataset:
    return Dataset.from_dict(
        {
            "question": [f"q{i}: what is {i} + {i}?" for i in range(n)],
            "answer": [f"it is {2 * i}" + (" NOLP" if i == 1 else "") for i in range(n)],
            "ref": [str(2 * i) for i in range(n)],
            "pred": [f"{2 * i}, I think" for i in range(n)],
        }
    )


def _no_logprobs(content: str, **rule) -> dict:
    """A fault rule: a valid reply ``content`` with no ``logprobs`` in its choice (a server without them)."""
    return {"fault": "raw_message", "message": {"role": "assistant", "content": content}, **rule}


def _hand(v: int) -> tuple[float, float]:
    """(expected, confidence) of a 1-10 score ``v`` under the judge server's token rule, by hand."""
    up, down = (v + 1) % 10, (v - 1) % 10
    if v == 10:  # "1" .6 then "0" .7 / "," .2 / "5" .1 (15: out); "2" .25; "0" .1 (0: out)
        dist = {10: 0.6 * 0.7, 1: 0.6 * 0.2, 2: 0.25}
    else:  # "v" .6, up .25, down .1; a "1" not written (1 or 10) and a "0" are left out
        dist = {v: 0.6}
        for d, p in ((up, 0.25), (down, 0.1)):
            if d not in (0, 1):
                dist[d] = p
    total = sum(dist.values())
    return sum(k * p for k, p in dist.items()) / total, dist[v] / total


def _mean(values: list) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def _in_process_and_streamed(judge, tmp_path, configure: dict, **kw) -> tuple:
    """The in-process result, and the same job streamed into a cache of its own: row for row, column for
    column the same, for the same requests."""
    judge.configure(**configure)
    want = score(_data(), METRICS, judge, tmp_path / "a", columns=COLUMNS, logprobs=True, **kw)
    sent = judge.stats()["requests"]
    judge.reset()
    judge.configure(**configure)
    got = score(_data().to_iterable_dataset(num_shards=2), METRICS, judge, tmp_path / "b", columns=COLUMNS,
                logprobs=True, **kw)  # fmt: skip
    assert got["train"].features == want["train"].features
    assert list(got["train"]) == want["train"].to_list()
    assert list(got["errors"]) == want["errors"].to_list() == []
    assert judge.stats()["requests"] == sent
    return want, got


# -- logprobs with samples ------------------------------------------------------------------------------------------

# The n-th request of a prompt gets integer scores [4, 9, 10][n - 1]; QA_Clarity's first request of row 1 is
# answered 5 without logprobs: that sample has a score and a null probability-weighted part.
SAMPLES = {
    "attempt_scores": [4, 9, 10],
    "faults": [_no_logprobs('{"reason": "r", "score": 5}', match="NOLP", attempts=1)],
}
_SWAPPED = {4.0: (4, 4), 6.5: (4, 9), 7.0: (4, 10), 9.0: (9, 9), 9.5: (9, 10), 10.0: (10, 10)}


def _check_samples(d: Dataset) -> None:
    assert d.features["QA_Clarity_expected"] == Value("float64")
    assert d.features["QA_Clarity_expected_samples"] == List(Value("float64"))
    assert d.features["Binary_p_positive_samples"] == List(Value("float64"))
    for r, row in enumerate(d.to_list()):
        written = row["QA_Clarity_samples"]
        assert sorted(written) == ([5, 9, 10] if r == 1 else [4, 9, 10])
        for what, i in (("expected", 0), ("confidence", 1)):
            each = [None if v == 5 else _hand(v)[i] for v in written]  # sample by sample, in the row's order
            assert row[f"QA_Clarity_{what}_samples"] == pytest.approx(each)
            assert row[f"QA_Clarity_{what}"] == pytest.approx(_mean(each))  # the mean of those that have one
        p = [P1 if v == "1" else P0 for v in row["Binary_verdict_samples"]]
        assert row["Binary_p_positive_samples"] == pytest.approx(p)
        assert row["Binary_p_positive"] == pytest.approx(statistics.fmean(p))
        for c in ("Comparative_score_1", "Comparative_score_2"):
            # a sample of both orders: the mean of its two expected scores, each read where the response stood
            each = [statistics.fmean(_hand(s)[0] for s in _SWAPPED[v]) for v in row[f"{c}_samples"]]
            assert row[f"{c}_expected_samples"] == pytest.approx(each)
            assert row[f"{c}_expected"] == pytest.approx(statistics.fmean(_hand(v)[0] for v in (4, 9, 10)))


def test_logprobs_with_samples_in_one_process_and_streamed(judge, tmp_path):
    """A server that honours n: one request of 3 choices per (row, metric, order), each choice with its tokens."""
    kw = dict(samples=3, temperature=0.7, retries=0)
    want, got = _in_process_and_streamed(judge, tmp_path, {**SAMPLES, "n": "honour", "record": True}, **kw)
    assert {b["n"] for b in judge.stats()["bodies"]} == {3}
    d = want["train"]
    _check_samples(d)
    assert d["QA_Clarity_samples"][0] == [4, 9, 10]  # choice i is sample i
    notes = [n for n in want.summary.notes if "no token log-probabilities" in n]
    assert len(notes) == 1  # the sample without them is said once
    assert [c for c in d.column_names if c.startswith("Binary")] == [
        "Binary",
        "Binary_samples",
        "Binary_verdict",
        "Binary_verdict_samples",
        "Binary_p_positive",
        "Binary_p_positive_samples",
    ]
    assert want.summary.columns == [c for c in d.column_names if c not in _data().column_names]


def test_logprobs_with_samples_sent_one_by_one_and_served_from_the_store(judge, tmp_path):
    """A server that ignores n: each sample a request of its own; a rerun reads every sample's table back."""
    judge.configure(**SAMPLES)
    kw = dict(columns=COLUMNS, logprobs=True, samples=3, temperature=0.7, retries=0)
    out = score(_data(), METRICS, judge, tmp_path, **kw)
    _check_samples(out["train"])
    assert judge.stats()["requests"] == ROWS * (3 + 3 + 6)
    streamed = score(_data().to_iterable_dataset(), METRICS, judge, tmp_path, **kw)
    assert list(streamed["train"]) == out["train"].to_list()
    assert judge.stats()["requests"] == ROWS * 12  # nothing sent again


# -- logprobs with a panel ------------------------------------------------------------------------------------------

# Judge b scores QA_Clarity 3 (row 1: without logprobs) and says "0" on Binary; judge "judge" answers as the server
# does. Both answer Comparative alike.
PANEL = {
    "faults": [
        _no_logprobs('{"reason": "r", "score": 3}', model="b", match="NOLP"),
        {"fault": "text", "text": '{"reason": "r", "score": 3}', "model": "b", "match": CLARITY},
        {"fault": "text", "text": '{"verdict": "0"}', "model": "b", "match": BINARY},
    ]
}
AGGREGATE = {
    "mean": statistics.fmean,
    "majority": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
}


@pytest.mark.parametrize("aggregator", ["mean", "majority", "min"])
def test_logprobs_with_a_panel_in_one_process_and_streamed(judge, tmp_path, aggregator):
    agg = AGGREGATE[aggregator]
    kw = dict(models="judge,b", aggregator=aggregator, retries=0)
    want, _ = _in_process_and_streamed(judge, tmp_path, PANEL, **kw)
    d = want["train"]
    assert d.features["QA_Clarity_expected__b"] == Value("float64")
    for r, row in enumerate(d.to_list()):
        assert row["QA_Clarity__b"] == 3
        for what, i in (("expected", 0), ("confidence", 1)):
            mine, b = _hand(row["QA_Clarity__judge"])[i], None if r == 1 else _hand(3)[i]
            assert row[f"QA_Clarity_{what}__judge"] == pytest.approx(mine)
            assert row[f"QA_Clarity_{what}__b"] == pytest.approx(b)
            assert row[f"QA_Clarity_{what}"] == pytest.approx(agg([mine] if b is None else [mine, b]))
        assert row["Binary_verdict__b"] == "0" and row["Binary_p_positive__b"] == pytest.approx(P0)
        mine = P1 if row["Binary_verdict__judge"] == "1" else P0
        assert row["Binary_p_positive__judge"] == pytest.approx(mine)
        assert row["Binary_p_positive"] == pytest.approx(agg([mine, P0]))
        for c in ("Comparative_score_1", "Comparative_score_2"):
            # a swapped pair: the mean of two orders' expected scores (each checked by hand in test_logprobs)
            assert row[f"{c}_expected__judge"] == row[f"{c}_expected__b"] == pytest.approx(row[f"{c}_expected"])
    assert len(set(d["Binary_verdict__judge"])) == 2
    assert len([n for n in want.summary.notes if "no token log-probabilities" in n]) == 1


def test_logprobs_with_samples_and_a_panel(judge, tmp_path):
    judge.configure(**SAMPLES, n="honour")
    out = score(_data(), ["QA_Clarity"], judge, tmp_path, columns=COLUMNS, logprobs=True, samples=3,
                temperature=0.7, models="judge,b", aggregator="max")  # fmt: skip
    for row in out["train"].to_list():
        means = []
        for name in ("judge", "b"):
            written = row[f"QA_Clarity_samples__{name}"]
            each = [None if v == 5 else _hand(v)[0] for v in written]
            assert row[f"QA_Clarity_expected_samples__{name}"] == pytest.approx(each)
            means.append(_mean(each))
            assert row[f"QA_Clarity_expected__{name}"] == pytest.approx(means[-1])
        assert row["QA_Clarity_expected"] == pytest.approx(max(means))


# -- streaming keeps the columns ------------------------------------------------------------------------------------


def test_a_streamed_run_with_logprobs_equals_the_in_process_run(judge, tmp_path):
    """The stream's columns come from the run's one definition: with logprobs, the weighted columns too."""
    want, got = _in_process_and_streamed(judge, tmp_path, {})
    assert got["train"].features["QA_Clarity_expected"] == Value("float64")
    d = want["train"]
    assert d["QA_Clarity_expected"] == pytest.approx([_hand(v)[0] for v in d["QA_Clarity"]])
    assert d["Binary_p_positive"] == pytest.approx([P1 if v else P0 for v in d["Binary"]])


def test_the_cli_runs_logprobs_with_samples_again_into_the_same_folder(judge, tmp_path, capfd, monkeypatch):
    """The output check knows a run's columns from the same definition: the weighted ones are no loss."""
    from datasets import load_from_disk
    from helpers import run_cli, score_args

    data = tmp_path / "d.jsonl"
    _data(3).to_json(data)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    args = score_args(data, judge, "--logprobs", "--samples", "3", "--temperature", "0.7", "--output-dir",
                      tmp_path / "out")  # fmt: skip
    for _ in range(2):
        code, _, err = run_cli(capfd, *args)
        assert code == 0, err
    assert judge.stats()["requests"] == 9  # the second run: every reply from the store
    d = load_from_disk(tmp_path / "out")["train"]
    assert [c for c in d.column_names if c.startswith("QA_Clarity_expected")] == [
        "QA_Clarity_expected",
        "QA_Clarity_expected_samples",
    ]
    for row in d.to_list():
        each = [_hand(v)[0] for v in row["QA_Clarity_samples"]]
        assert row["QA_Clarity_expected_samples"] == pytest.approx(each)
