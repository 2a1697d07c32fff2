"""Probability-weighted scores (logprobs=True): hand-computed values, multi-token numbers, servers without them."""

from __future__ import annotations

import hashlib
import math
import sqlite3
from dataclasses import replace

import orjson
import pytest
from helpers import qa_dataset, score
from judge_server import Judge, token_logprobs

from hf_judge import load_metric
from hf_judge.judging.logprobs import distributions, row_values
from hf_judge.store.replies import ReplyStore

COLUMNS = {"instruction": "question", "output": "answer"}
BOTH = {**COLUMNS, "prediction": "answer"}  # the score metrics' variables and Binary's (question, answer: by name)


def tok(text: str, p: float, *alts: tuple[str, float]) -> dict:
    """One token entry in OpenAI's shape; the chosen token is listed among its alternatives."""
    top = [(text, p), *alts]
    return {
        "token": text,
        "logprob": math.log(p),
        "top_logprobs": [{"token": t, "logprob": math.log(q)} for t, q in top],
    }


def lp(*entries: dict) -> dict:
    return {"content": list(entries)}


# -- the method, by hand --------------------------------------------------------------------------------------------


def test_ten_over_two_tokens_is_p1_times_p0_given_1():
    """Gemma/Llama write 10 as "1", "0": P(10) = P("1") P("0"|"1"), P(1) = P("1") P(end|"1")."""
    m = load_metric("QA_Clarity")
    logprobs = lp(
        tok('{"reason": "fine", "score": ', 1.0),
        tok("1", 0.6, ("2", 0.25), ("0", 0.1), (" ", 0.05)),
        tok("0", 0.7, (",", 0.2), ("5", 0.1)),
        tok("}", 1.0),
    )
    value = {"reason": "fine", "score": 10}
    d = distributions(m, value, logprobs)
    # 10: .6 x .7; 1: .6 x .2 (a comma ends it); 15: out of range; "2" can only be 2 in 1-10; 0: out of range
    assert d["outputs"]["score"] == pytest.approx({"10": 0.42, "1": 0.12, "2": 0.25})
    cols = row_values(m, value, d)
    assert cols["QA_Clarity_expected"] == pytest.approx((10 * 0.42 + 1 * 0.12 + 2 * 0.25) / 0.79)
    assert cols["QA_Clarity_confidence"] == pytest.approx(0.42 / 0.79)


def test_a_1_not_written_is_ambiguous_in_1_to_10_and_left_out():
    m = load_metric("QA_Clarity")
    logprobs = lp(tok('{"reason":"x","score":', 1.0), tok("2", 0.6, ("3", 0.25), ("1", 0.1), (" ", 0.05)), tok("}", 1))
    d = distributions(m, {"reason": "x", "score": 2}, logprobs)
    assert d["outputs"]["score"] == pytest.approx({"2": 0.6, "3": 0.25})  # "1" could be 1 or 10: no guess
    cols = row_values(m, {"reason": "x", "score": 2}, d)
    assert cols["QA_Clarity_expected"] == pytest.approx((2 * 0.6 + 3 * 0.25) / 0.85)
    assert cols["QA_Clarity_confidence"] == pytest.approx(0.6 / 0.85)


def test_a_1_is_not_ambiguous_where_the_range_allows_only_1():
    base = load_metric("QA_Clarity")  # as a 1-5 scale: "1" can only be 1
    m = replace(base, outputs=tuple(replace(o, maximum=5) if o.key == "score" else o for o in base.outputs))
    logprobs = lp(tok('{"reason":"x","score":', 1.0), tok("2", 0.5, ("1", 0.5)), tok("}", 1))
    d = distributions(m, {"reason": "x", "score": 2}, logprobs)
    assert d["outputs"]["score"] == pytest.approx({"2": 0.5, "1": 0.5})


def test_one_token_numbers_whitespace_and_merged_prefixes():
    """OpenAI-style tokens: ' 8' after ':'; '10' in one token; '7' without the space is the same JSON value."""
    m = load_metric("QA_Clarity")
    logprobs = lp(
        tok('{"reason": "ok", "score":', 1.0),
        tok(" 8", 0.5, (" 10", 0.2), ("7", 0.1), (" 9.", 0.05), (" 1", 0.05), (' "', 0.1)),
        tok("}", 1.0),
    )
    d = distributions(m, {"reason": "ok", "score": 8}, logprobs)
    # " 10" runs to its token's end but only 10 fits the range; " 9." is a decimal; " 1" is 1 or 10
    assert d["outputs"]["score"] == pytest.approx({"8": 0.5, "10": 0.2, "7": 0.1})


def test_every_integer_output_of_an_all_metric_and_a_fenced_reply():
    m = load_metric("Q_All")
    keys = [o.key for o in m.outputs]
    value = {k: 3 + i % 5 for i, k in enumerate(keys)}
    content = "```json\n" + orjson.dumps(value).decode() + "\n```"
    d = distributions(m, value, {"content": token_logprobs(content, 20)})
    cols = row_values(m, value, d)
    for o in m.outputs:
        v = value[o.key]  # the server's rule: v .6, v+1 .25, v-1 .1, " " .05 (v-1 >= 2: never ambiguous)
        assert cols[f"{o.column}_expected"] == pytest.approx((v * 0.6 + (v + 1) * 0.25 + (v - 1) * 0.1) / 0.95)
        assert cols[f"{o.column}_confidence"] == pytest.approx(0.6 / 0.95)


def test_binary_p_positive_in_json_and_in_free_text():
    m = load_metric("Binary")
    d = distributions(m, {"verdict": "1"}, {"content": token_logprobs('{"verdict": "1"}', 20)})
    assert row_values(m, {"verdict": "1"}, d) == {"Binary_p_positive": pytest.approx(0.6 / 0.7)}
    # free text: the verdict is read on the first line here (the last is no verdict), as the parser reads it
    text = "0\nThe answer 12 is wrong"
    d = distributions(m, {"verdict": "0"}, {"content": token_logprobs(text, 20)})
    assert d["outputs"]["verdict"] == pytest.approx({"0": 0.6, "1": 0.25})  # "9" and " " are no verdict
    assert row_values(m, {"verdict": "0"}, d) == {"Binary_p_positive": pytest.approx(0.25 / 0.85)}


def test_no_guess_without_logprobs_or_when_the_tokens_do_not_spell_the_reply():
    m = load_metric("QA_Clarity")
    value = {"reason": "x", "score": 7}
    assert distributions(m, value, None) is None
    assert distributions(m, value, {"content": None}) is None
    assert row_values(m, value, None) == {"QA_Clarity_expected": None, "QA_Clarity_confidence": None}
    for damaged in (
        {"version": 2, "outputs": {"score": {"7": 1.0}}},
        {"outputs": 3},
        {"version": 1, "outputs": {"score": {"seven": 1.0}}},
        {"version": 1, "outputs": {"score": {"7": "high"}}},
    ):
        assert row_values(m, value, damaged) == {"QA_Clarity_expected": None, "QA_Clarity_confidence": None}
    other = distributions(m, value, {"content": token_logprobs('{"reason":"x","score":6}', 20)})
    assert other == {"version": 1, "outputs": {}}  # the tokens say 6, the reply 7: nothing read
    assert row_values(m, value, other) == {"QA_Clarity_expected": None, "QA_Clarity_confidence": None}


def test_the_store_keeps_tables_and_reads_old_rows(tmp_path):
    path = tmp_path / "replies.sqlite3"
    table = {"version": 1, "outputs": {"score": {"8": 0.6, "9": 0.25}}}
    s = ReplyStore(path)
    s.put(b"a" * 16, '{"score": 8}', (12, 5), table)
    s.put(b"b" * 16, '{"score": 8}', None, table)
    s.put(b"c" * 16, '{"score": 8}', (12, 5))
    s.close()
    db = sqlite3.connect(path)  # a row written by an earlier version: usage only, or nothing
    db.execute("INSERT INTO replies VALUES (?, ?, ?)", (b"d" * 16, "x", "3 4"))
    db.execute("INSERT INTO replies VALUES (?, ?, ?)", (b"e" * 16, "x", None))
    db.commit()
    db.close()
    s = ReplyStore(path)
    got = s.get_many([k * 16 for k in (b"a", b"b", b"c", b"d", b"e")], with_logprobs=True)
    assert s.get_many([b"a" * 16]) == {b"a" * 16: ('{"score": 8}', (12, 5))}  # as before, without
    s.close()
    assert got[b"a" * 16] == ('{"score": 8}', (12, 5), table)
    assert got[b"b" * 16] == ('{"score": 8}', None, table)
    assert got[b"c" * 16] == ('{"score": 8}', (12, 5), None)
    assert got[b"d" * 16] == ("x", (3, 4), None)
    assert got[b"e" * 16] == ("x", None, None)


# -- end to end, against the loopback judge -------------------------------------------------------------------------


def _hand(v: int) -> tuple[float, float]:
    """(expected, confidence) of a 1-10 score ``v`` under the judge server's rule (token_logprobs), by hand."""
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


def test_expected_scores_equal_hand_computed_values_and_survive_a_cached_rerun(judge, tmp_path):
    judge.configure(record=True, overrides={"Clarity": 10, "Coherence": 2})
    ds = qa_dataset(6)
    out = score(ds, ["Q_All", "Binary"], judge, tmp_path, logprobs=True, columns=BOTH)
    bodies = judge.stats()["bodies"]
    assert len(bodies) == 12 and all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in bodies)
    train = out["train"]
    assert train["Q_Clarity_expected"] == pytest.approx([_hand(10)[0]] * 6)  # 6.1013: 10 over two tokens
    assert train["Q_Clarity_confidence"] == pytest.approx([_hand(10)[1]] * 6)
    assert train["Q_Coherence_expected"] == pytest.approx([(2 * 0.6 + 3 * 0.25) / 0.85] * 6)
    for o in load_metric("Q_All").outputs:
        assert train[f"{o.column}_expected"] == pytest.approx([_hand(v)[0] for v in train[o.column]])
        assert train[f"{o.column}_confidence"] == pytest.approx([_hand(v)[1] for v in train[o.column]])
    assert train["Binary_p_positive"] == pytest.approx([0.6 / 0.7 if v else 0.25 / 0.85 for v in train["Binary"]])
    assert len(set(train["Binary"])) == 2  # both verdicts occur
    assert out.summary.notes == [] and len(out["errors"]) == 0

    # the reply store keeps the tables: without the results file, a rerun sends nothing and gives the same columns
    for f in (tmp_path / "cache" / "results").iterdir():
        if f.is_file():
            f.unlink()
    again = score(ds, ["Q_All", "Binary"], judge, tmp_path, logprobs=True, columns=BOTH)
    assert again.summary.requests == 0 and again.summary.cache_hits == 12
    assert again["train"].to_dict() == train.to_dict()


def test_without_logprobs_the_bodies_and_columns_are_those_of_before(judge, tmp_path):
    judge.configure(record=True)
    out = score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path)
    assert not any("logprobs" in b or "top_logprobs" in b for b in judge.stats()["bodies"])
    assert out["train"].column_names == ["question", "answer", "QA_Clarity_reason", "QA_Clarity"]
    # with it, the request (and so its cache key) differs: a reply cached without logprobs is not reused
    on = score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, logprobs=True, top_logprobs=5)
    assert on.summary.requests == 2 and on.summary.cache_hits == 0
    assert {b.get("top_logprobs") for b in judge.stats()["bodies"]} == {None, 5}
    assert on["train"].column_names[-2:] == ["QA_Clarity_expected", "QA_Clarity_confidence"]


def test_a_server_without_logprobs_gives_null_columns_and_one_notice(judge, tmp_path, caplog):
    judge.configure(logprobs=False)
    with caplog.at_level("WARNING", logger="hf_judge"):
        out = score(qa_dataset(5), ["QA_Clarity", "Binary"], judge, tmp_path, logprobs=True, columns=BOTH)
    train = out["train"]
    for c in ("QA_Clarity_expected", "QA_Clarity_confidence", "Binary_p_positive"):
        assert train[c] == [None] * 5
    assert train["QA_Clarity"] == [v for v in train["QA_Clarity"] if v is not None]  # the scores themselves are there
    notices = [r for r in caplog.records if "no token log-probabilities" in r.getMessage()]
    assert len(notices) == 1
    assert sum("no token log-probabilities" in n for n in out.summary.notes) == 1


def test_logprobs_is_a_flag_a_recipe_key_and_part_of_the_results_fingerprint(judge, tmp_path):
    from hf_judge import Recipe, Settings
    from hf_judge.cli.job import _client_kwargs
    from hf_judge.cli.parser import build_parser
    from hf_judge.engine.core import Plan
    from hf_judge.engine.prepare import results_fingerprint
    from hf_judge.judging.catalogue import resolve_metrics
    from hf_judge.transport.client import JudgeClient

    args = build_parser().parse_args(["score", "x", "--logprobs", "--top-logprobs", "5"])
    assert _client_kwargs(args) == {"logprobs": True, "top_logprobs": 5}
    assert _client_kwargs(build_parser().parse_args(["score", "x"])) == {}
    assert Recipe(metrics=["QA_All"], logprobs=True).logprobs is True
    ds = qa_dataset(1)
    plans = [
        Plan(m, m.resolve_columns(COLUMNS, ds.column_names), m.temperature)
        for m in resolve_metrics(["QA_Clarity"], None, None)
    ]
    prints = {
        results_fingerprint(ds, "train", plans, JudgeClient(Settings(model="j", **kw), api_key=None), None, False)
        for kw in ({}, {"logprobs": True}, {"logprobs": True, "top_logprobs": 5})
    }
    assert len(prints) == 3
    base = load_metric("QA_Clarity")
    reason_only = replace(base, outputs=tuple(o for o in base.outputs if o.key == "reason"))
    body = JudgeClient(Settings(model="j", logprobs=True), api_key=None).body(reason_only, [], 0.0)
    assert b"logprobs" not in body  # no integer and no verdict: no columns, so nothing asked for
    plain = JudgeClient(Settings(model="j"), api_key=None).body(reason_only, [], 0.0)
    assert hashlib.sha256(body).digest() == hashlib.sha256(plain).digest()


def test_scoring_again_replaces_the_weighted_columns_and_the_card_shows_them(judge, tmp_path):
    from hf_judge.results.card import render_section

    first = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, logprobs=True)
    assert first.summary.sampling["top_logprobs"] == 20
    assert first.summary.columns == ["QA_Clarity_reason", "QA_Clarity", "QA_Clarity_expected", "QA_Clarity_confidence"]
    assert "| `QA_Clarity_expected` | 3 | 0 |" in render_section(first, first.summary)
    again = score(first, ["QA_Clarity"], judge, tmp_path, logprobs=True, if_exists="overwrite")
    assert again["train"].to_dict() == first["train"].to_dict()
    plain = score(first, ["QA_Clarity"], judge, tmp_path, if_exists="overwrite")  # no stale weighted columns beside
    assert plain["train"].column_names == ["question", "answer", "QA_Clarity_reason", "QA_Clarity"]
    assert "top_logprobs" not in plain.summary.sampling


def test_a_number_of_many_tokens_is_read_without_deep_recursion():
    base = load_metric("QA_Clarity")  # unbounded: any integer is valid
    m = replace(base, outputs=tuple(replace(o, maximum=None) if o.key == "score" else o for o in base.outputs))
    digits = "1" * 3000
    logprobs = lp(tok('{"reason":"x","score":', 1.0), *(tok(d, 1.0) for d in digits), tok("}", 1.0))
    nothing = {"version": 1, "outputs": {}}
    assert distributions(m, {"reason": "x", "score": int(digits)}, logprobs) == nothing  # nothing read, no crash
    short = lp(tok('{"reason":"x","score":', 1.0), tok("4", 0.5, ("5", 0.5)), tok("2", 1.0), tok("}", 1.0))
    assert distributions(m, {"reason": "x", "score": 42}, short)["outputs"]["score"] == {
        "42": 0.5
    }  # "5": 5, 50, 51...: left out


def test_the_cli_flag_adds_the_columns(judge, tmp_path, capfd, monkeypatch):
    import json

    from datasets import load_from_disk
    from helpers import run_cli

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"q": f"{i} + 1?", "a": str(i + 1)}) + "\n" for i in range(3)))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    args = ["score", data, "--metrics", "Binary", "--column", "question=q", "--column", "answer=a"]
    args += ["--column", "prediction=a", "--model", "judge", "--base-url", judge.base_url, "--logprobs"]
    code, out, err = run_cli(capfd, *args, "--output-dir", tmp_path / "out")
    assert code == 0, err
    train = load_from_disk(tmp_path / "out")["train"]
    assert train["Binary_p_positive"] == pytest.approx([0.6 / 0.7 if v else 0.25 / 0.85 for v in train["Binary"]])


def test_pairwise_in_free_text_and_in_both_orders(judge, tmp_path):
    from datasets import Dataset

    m = load_metric("Comparative", swap=False)
    d = distributions(m, {"score_1": 8, "score_2": 7, "explanation": "x"}, {"content": token_logprobs("8 7\nx", 20)})
    assert d["outputs"] == {
        "score_1": pytest.approx({"8": 0.6, "9": 0.25, "7": 0.1}),
        "score_2": pytest.approx({"7": 0.6, "8": 0.25, "6": 0.1}),
    }
    # both orders (swap): the server's scores are a function of each prompt, so each order's are known
    judge.configure(record=True)
    ds = Dataset.from_dict({"question": [f"q{i}" for i in range(6)], "a": [f"A{i}" for i in range(6)], "b": ["B"] * 6})
    out = score(ds, ["Comparative"], judge, tmp_path, logprobs=True, columns={"response1": "a", "response2": "b"})
    bodies = judge.stats()["bodies"]
    assert len(bodies) == 12 and all(b["logprobs"] for b in bodies)
    orders: dict[tuple[int, bool], dict] = {}
    for b in bodies:
        text = "".join(msg["content"] for msg in b["messages"])
        props = b["response_format"]["json_schema"]["schema"]["properties"]
        row = next(i for i in range(6) if f"q{i}" in text)
        orders[row, text.index(f"A{row}") < text.index("B")] = {k: Judge._value(text, k, props[k]) for k in props}
    train = out["train"]
    assert train.column_names[-2:] == ["Comparative_score_1_expected", "Comparative_score_2_expected"]
    for r in range(6):
        first, second = orders[r, True], orders[r, False]  # in the second, response 1 is Assistant 2
        assert train["Comparative_score_1"][r] == (first["score_1"] + second["score_2"]) / 2
        e1 = (_hand(first["score_1"])[0] + _hand(second["score_2"])[0]) / 2
        e2 = (_hand(first["score_2"])[0] + _hand(second["score_1"])[0]) / 2
        assert train["Comparative_score_1_expected"][r] == pytest.approx(e1)
        assert train["Comparative_score_2_expected"][r] == pytest.approx(e2)
    assert len({(o["score_1"], o["score_2"]) for o in orders.values()}) > 3  # not one case over and over
