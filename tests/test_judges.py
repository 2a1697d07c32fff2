"""The seed-001 judges: binary, correctness and comparative (pairwise)."""

from __future__ import annotations

import pytest
from datasets import Dataset
from helpers import score

from hf_judge import load_metric


def _grading(n=6):
    return Dataset.from_dict(
        {
            "question": [f"q{i}: what is {i} + 1?" for i in range(n)],
            "answer": [str(i + 1) for i in range(n)],
            "prediction": [f"Let me think. {i} + 1 = {i + 1}. \\boxed{{{i + 1}}}" for i in range(n)],
        }
    )


def _pairs(n=5, context=False):
    d = {
        "question": [f"q{i}: explain recursion" for i in range(n)],
        "a": [f"answer A{i}" for i in range(n)],
        "b": [f"answer B{i}" for i in range(n)],
    }
    if context:
        d["ctx"] = [f"CTX-{i}" if i % 2 else None for i in range(n)]
    return Dataset.from_dict(d)


BINARY_COLS = {"question": "question", "answer": "answer", "prediction": "prediction"}


@pytest.mark.parametrize("name", ["Binary", "Correctness"])
def test_binary_judges_end_to_end(judge, tmp_path, name):
    judge.configure(record=True)
    out = score(_grading(), [name], judge, tmp_path, columns=BINARY_COLS)
    train = out["train"]
    assert train.features[name].dtype == "bool"
    assert set(train[f"{name}_verdict"]) <= {"1", "0"}
    assert train[name] == [v == "1" for v in train[f"{name}_verdict"]]
    bodies = judge.stats()["bodies"]
    assert all(
        b["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["1", "0"] for b in bodies
    )
    assert any("\\boxed{1}" in b["messages"][-1]["content"] for b in bodies)  # row 0's prediction, LaTeX intact


def test_binary_tokens_are_configurable(judge, tmp_path):
    judge.configure(record=True, overrides={"verdict": "yes"})
    out = score(
        _grading(3),
        ["Binary"],
        judge,
        tmp_path,
        columns=BINARY_COLS,
        metric_params={"Binary": {"positive": "yes", "negative": "no"}},
    )
    assert out["train"]["Binary"] == [True] * 3
    body = judge.stats()["bodies"][0]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["yes", "no"]
    assert "yes" in body["messages"][-1]["content"]
    m = load_metric("Binary", positive="correct", negative="wrong")
    assert m.outputs[0].enum == ("correct", "wrong")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0\nThe answer 12 is wrong", False),
        ("**1**", True),
        ("Reasoning...\nFinal answer: 1.", True),
        ("Yes, but no.", None),
        ("The answer 12 is wrong", None),
        ("1", True),
        ("0", False),
        ('"1"', True),
        ("2", None),
    ],
)
def test_binary_free_text_replies(judge, tmp_path, text, expected):
    judge.configure(faults=[{"fault": "text", "text": text}])
    out = score(_grading(1), ["Binary"], judge, tmp_path, columns=BINARY_COLS, retries=0)
    assert out["train"]["Binary"] == [expected]
    if expected is None:
        assert out["errors"]["kind"] == ["unparseable"]


def test_comparative_swap_sends_both_orders(judge, tmp_path):
    judge.configure(record=True)
    out = score(
        _pairs(4),
        ["Comparative"],
        judge,
        tmp_path,
        columns={"question": "question", "response1": "a", "response2": "b"},
    )
    bodies = judge.stats()["bodies"]
    assert len(bodies) == 8
    for i in range(4):
        texts = [b["messages"][-1]["content"] for b in bodies if f"q{i}:" in b["messages"][-1]["content"]]
        assert len(texts) == 2
        orders = sorted(t.index(f"answer A{i}") < t.index(f"answer B{i}") for t in texts)
        assert orders == [False, True]
    train = out["train"]
    for col in (
        "Comparative_score_1",
        "Comparative_score_2",
        "Comparative_winner",
        "Comparative_disagree",
        "Comparative_explanation",
    ):
        assert None not in train[col]


def test_position_bias_cancels_to_a_tie(judge, tmp_path):
    judge.configure(overrides={"score_1": 9, "score_2": 3})  # always prefers position 1
    out = score(
        _pairs(5),
        ["Comparative"],
        judge,
        tmp_path,
        columns={"question": "question", "response1": "a", "response2": "b"},
    )
    train = out["train"]
    assert train["Comparative_winner"] == ["tie"] * 5
    assert train["Comparative_disagree"] == [True] * 5
    assert train["Comparative_score_1"] == [6.0] * 5 and train["Comparative_score_2"] == [6.0] * 5


def test_comparative_without_swap_and_score_range(judge, tmp_path):
    judge.configure(record=True)
    out = score(
        _pairs(3),
        [{"name": "Comparative", "params": {"swap": False, "min_score": 0, "max_score": 5}}],
        judge,
        tmp_path,
        columns={"question": "question", "response1": "a", "response2": "b"},
    )
    assert judge.stats()["requests"] == 3
    assert all(0 <= s <= 5 for s in out["train"]["Comparative_score_1"])
    assert out["train"].features["Comparative_score_1"].dtype == "int64"
    schema = judge.stats()["bodies"][0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["score_1"]["minimum"] == 0 and schema["properties"]["score_1"]["maximum"] == 5


def test_optional_context_section(judge, tmp_path):
    judge.configure(record=True)
    score(
        _pairs(4, context=True),
        ["Comparative"],
        judge,
        tmp_path,
        columns={"question": "question", "response1": "a", "response2": "b", "context": "ctx"},
    )
    texts = [b["messages"][-1]["content"] for b in judge.stats()["bodies"]]
    with_ctx = [t for t in texts if "CTX-" in t]
    assert len(with_ctx) == 4  # rows 1 and 3, both orders
    assert all("[Context]" not in t for t in texts if "CTX-" not in t)
    assert all("[Context]" in t for t in with_ctx)


@pytest.mark.parametrize(
    "text, scores, kind",
    [
        ("8 7\nAssistant 1 is more precise.", (8, 7), None),
        ("Assistant 1: 8, Assistant 2: 7", None, "unparseable"),
        ("8/10 7/10", None, "unparseable"),
        ("11 7", None, "out_of_range"),
        ("[8, 7]", (8, 7), None),
        ('"8 7"', (8, 7), None),
        ("[8.5, 7]", None, "unparseable"),
        ("[8, 11]", None, "out_of_range"),
    ],
)
def test_comparative_free_text(judge, tmp_path, text, scores, kind):
    judge.configure(faults=[{"fault": "text", "text": text}])
    out = score(
        _pairs(1),
        [{"name": "Comparative", "params": {"swap": False}}],
        judge,
        tmp_path,
        columns={"question": "question", "response1": "a", "response2": "b"},
        retries=0,
    )
    train = out["train"]
    if scores:
        assert (train["Comparative_score_1"][0], train["Comparative_score_2"][0]) == scores
    else:
        assert train["Comparative_score_1"] == [None] and out["errors"]["kind"] == [kind]


def test_bare_verdict_is_read_the_same_from_the_reply_store(judge, tmp_path):
    # the store keeps the raw reply and validates it again on a hit: "1" must pass there too, not be paid for twice
    judge.configure(faults=[{"fault": "text", "text": "1"}])
    first = score(_grading(3), ["Binary"], judge, tmp_path, columns=BINARY_COLS, retries=0)
    assert first["train"]["Binary"] == [True] * 3 and judge.stats()["requests"] == 3
    judge.reset()
    again = score(_grading(3).map(lambda r: r), ["Binary"], judge, tmp_path, columns=BINARY_COLS, retries=0)
    assert again["train"]["Binary"] == [True] * 3 and judge.stats()["requests"] == 0
