"""Length bias, the longer-wins rate, length-controlled scores and self-preference, against a loopback judge whose
scores follow the answer's length (``length_scores``: the score is 1 + the length of the text between ⟦ and ⟧,
in steps of 25 characters, plus a noise of at most 1), so the figures are known: checked against scipy and numpy
on the same data."""

from __future__ import annotations

import json
import logging
import random
import sys
import types

import numpy as np
import pytest
import scipy.stats
from datasets import Dataset
from helpers import run_cli, score, score_args

from hf_judge import ConfigError, RunSummary, agreement
from hf_judge.analysis import bias, stats
from hf_judge.results.bias import StreamSample
from hf_judge.results.card import render_section

COLUMNS = {"instruction": "question", "output": "answer"}
BIASED = {"pattern": "⟦[^⟧]*⟧", "step": 25, "noise": 1}
ROWS = 60
WRITERS = ["gpt-4o", "llama-3-8b-instruct", "claude-3-haiku"]


def _data(rows: int = ROWS, seed: int = 0) -> Dataset:
    rng = random.Random(seed)
    return Dataset.from_dict(
        {
            "question": [f"b-{i}: what is it?" for i in range(rows)],
            "answer": ["⟦" + "z" * rng.randint(5, 250) + "⟧" for _ in range(rows)],
            "short": ["⟦" + "y" * rng.randint(5, 120) + "⟧" for _ in range(rows)],
            "writer": [WRITERS[i % 3] for i in range(rows)],
            "human": [rng.randint(1, 10) for _ in range(rows)],
        }
    )


def _lengths(values) -> np.ndarray:
    return np.array([np.nan if v is None else len(v) for v in values], dtype=np.float64)


def test_the_length_bias_is_scipys_rho_on_the_same_data_and_warns(judge, tmp_path, caplog):
    judge.configure(length_scores=BIASED)
    ds = _data()
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        out = score(ds, ["QA_Clarity", "Q_Clarity"], judge, tmp_path, progress=False)
    summary = out.summary
    found = summary.length_bias["QA_Clarity"]
    scores = out["train"]["QA_Clarity"]
    assert found["rho"] == pytest.approx(scipy.stats.spearmanr(scores, _lengths(ds["answer"])).statistic, abs=1e-12)
    assert set(found) == {"rho", "low", "high", "n", "unit", "warning"}
    assert found["n"] == ROWS and found["unit"] == "characters" and found["rho"] > 0.9
    assert found["low"] <= found["rho"] <= found["high"] and found["low"] > 0.3 and found["warning"] is True
    # Q_Clarity judged the question, whose length the judge ignores: no warning
    q = summary.length_bias["Q_Clarity"]
    rho = scipy.stats.spearmanr(out["train"]["Q_Clarity"], _lengths(ds["question"])).statistic
    assert q["rho"] == pytest.approx(rho, abs=1e-12) and q["warning"] is False and q["low"] < 0 < q["high"]
    warnings = [r.getMessage() for r in caplog.records if "length bias" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("length bias: QA_Clarity follows the length")
    text = str(summary)
    assert "length bias    QA_Clarity: rho" in text and "WARNING" in text.split("QA_Clarity: rho")[1].splitlines()[0]
    out.save_to_disk(tmp_path / "out")
    assert RunSummary.load(tmp_path / "out").length_bias == summary.length_bias  # summary.json
    card = render_section(out, summary)
    assert "### Bias checks" in card and "| `QA_Clarity` |" in card


def test_an_unbiased_judge_gets_no_warning(judge, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        out = score(_data(), ["QA_Clarity"], judge, tmp_path, progress=False)
    found = out.summary.length_bias["QA_Clarity"]
    assert found["warning"] is False and abs(found["rho"]) < 0.3
    assert not [r for r in caplog.records if "length bias" in r.getMessage()]


def test_a_panel_reports_each_judges_length_bias_and_flags_the_biased_one(judge, tmp_path, caplog):
    """A panel of two judges of which only ``a`` follows length: each judge's own column gets its figure (scipy's
    rho on the same data); ``a`` is flagged, ``b`` is not; ``_lc`` stays on the panel's aggregate."""
    judge.configure(length_scores={**BIASED, "model": "a"})
    ds = _data()
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        out = score(ds, ["QA_Clarity"], judge, tmp_path, progress=False, models="a,b", length_control=True)
    found, train = out.summary.length_bias, out["train"]
    assert list(found) == ["QA_Clarity", "QA_Clarity__a", "QA_Clarity__b"]
    assert set(found["QA_Clarity"]) == {"rho", "low", "high", "n", "unit", "warning"}  # the aggregate's, as before
    lengths = _lengths(ds["answer"])
    for column in found:
        rho = scipy.stats.spearmanr(train[column], lengths).statistic
        assert found[column]["rho"] == pytest.approx(rho, abs=1e-12) and found[column]["n"] == ROWS, column
    a, b = found["QA_Clarity__a"], found["QA_Clarity__b"]
    assert a["judge"] == "a" and a["panel_column"] == "QA_Clarity" and b["judge"] == "b"
    assert a["rho"] > 0.9 and a["low"] > 0.3 and a["warning"] is True
    assert abs(b["rho"]) < 0.3 and b["warning"] is False
    warnings = [r.getMessage() for r in caplog.records if "length bias" in r.getMessage()]
    judged = [w for w in warnings if "__" in w]
    assert len(judged) == 1 and judged[0].startswith("length bias: QA_Clarity__a follows the length")
    assert "the panel's judge 'a'" in judged[0] and "QA_Clarity_lc" in judged[0]
    lines = [line for line in str(out.summary).splitlines() if line.startswith("length bias")]
    assert any(line.startswith("length bias    QA_Clarity: rho") for line in lines)  # the aggregate: always
    flagged = [line for line in lines if "__" in line]  # a judge's: only when flagged
    assert len(flagged) == 1 and "QA_Clarity__a: rho" in flagged[0] and flagged[0].endswith("judge a  WARNING")
    assert [c for c in train.column_names if c.endswith("_lc")] == ["QA_Clarity_lc"]
    out.save_to_disk(tmp_path / "out")
    assert RunSummary.load(tmp_path / "out").length_bias == found  # summary.json
    card = render_section(out, out.summary)
    assert "| `QA_Clarity__a` |" in card and "| `QA_Clarity__b` |" in card and "`<column>__<judge>`" in card


def test_length_control_is_the_ols_residual_on_log_length(judge, tmp_path):
    judge.configure(length_scores=BIASED)
    ds = _data()
    answers = list(ds["answer"])
    answers[3] = None  # an error row: no score, no _lc
    ds = ds.remove_columns("answer").add_column("answer", answers)
    out = score(ds, ["QA_Clarity"], judge, tmp_path, progress=False, length_control=True)
    train = out["train"]
    s = np.array([np.nan if v is None else v for v in train["QA_Clarity"]], dtype=np.float64)
    x = np.log1p(_lengths(train["answer"]))
    ok = ~np.isnan(s)
    slope = np.polyfit(x[ok], s[ok], 1)[0]
    expected = s[ok] - slope * (x[ok] - x[ok].mean())
    got = list(train["QA_Clarity_lc"])
    assert got[3] is None and np.allclose([v for v in got if v is not None], expected)
    assert slope > 1  # the judge's length bias, removed: what is left is uncorrelated with log length
    assert abs(np.corrcoef(np.array([v for v in got if v is not None]), x[ok])[0, 1]) < 1e-9
    assert "QA_Clarity_lc" in out.summary.columns
    assert out.summary.length_bias["QA_Clarity"]["warning"] is True  # the bias is still reported on the score


def test_length_control_on_a_stream_or_in_a_map_is_refused(judge, tmp_path):
    from hf_judge import Judge

    with pytest.raises(ConfigError, match="length_control .* is not for a stream"):
        score(_data().to_iterable_dataset(), ["QA_Clarity"], judge, tmp_path, length_control=True)
    with pytest.raises(ConfigError, match="not for a map transform"):
        Judge(["QA_Clarity"], model="judge", base_url=judge.base_url, api_key="k", length_control=True)
    with pytest.raises(ConfigError, match="generator_column is not for a map transform"):
        Judge(["QA_Clarity"], model="judge", base_url=judge.base_url, api_key="k", generator_column="writer")
    assert judge.stats()["requests"] == 0


def test_a_map_transform_checks_the_generator_model_when_it_starts(judge, caplog):
    from hf_judge import Judge

    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        Judge(["QA_Clarity"], model="gpt-4o-mini", base_url=judge.base_url, api_key="k", generator_model="o3-mini")
        Judge(["QA_Clarity"], model="claude-3-5-haiku", base_url=judge.base_url, api_key="k", generator_model="o3")
    said = [r.getMessage() for r in caplog.records if "self-preference" in r.getMessage()]
    assert len(said) == 1 and "gpt-4o-mini is of the openai family" in said[0]


def test_a_pairwise_judges_longer_wins_rate_is_counted_by_hand(judge, tmp_path):
    judge.configure(length_scores=BIASED)
    ds = _data()
    out = score(
        ds, ["Comparative"], judge, tmp_path, progress=False, columns={"response1": "answer", "response2": "short"}
    )
    winners = out["train"]["Comparative_winner"]
    a, b = _lengths(ds["answer"]), _lengths(ds["short"])
    decided = [(w, x, y) for w, x, y in zip(winners, a, b, strict=True) if w in ("1", "2") and x != y]
    won = sum((w == "1") == (x > y) for w, x, y in decided)
    found = out.summary.longer_wins["Comparative_winner"]
    assert found["n"] == len(decided) and found["rate"] == pytest.approx(won / len(decided))
    assert found["skipped"] == ROWS - len(decided) and found["rate"] > 0.9 and found["warning"] is True
    assert found["low"] <= found["rate"] <= found["high"]
    assert "longer wins    Comparative_winner" in str(out.summary)
    # the same rate in agreement, beside the position-bias rate; the labels' own rate beside it
    labelled = out["train"].add_column("preferred", ["1" if i % 2 else "2" for i in range(ROWS)])
    r = agreement(labelled, "Comparative", "preferred", length_of=["answer", "short"], resamples=200)
    assert r.figures["longer_wins_rate"] == pytest.approx(won / len(decided))
    assert "position_bias_rate" in r.figures and "longer_wins_rate" in r.intervals
    pref = labelled["preferred"]
    hand = [(p == "1") == (x > y) for p, x, y in zip(pref, a, b, strict=True) if x != y]
    assert r.figures["label_longer_wins_rate"] == pytest.approx(sum(hand) / len(hand))


def test_self_preference_warns_for_a_judge_of_the_writers_family_only(judge, tmp_path, caplog):
    ds = _data()
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        out = score(ds, ["QA_Clarity"], judge, tmp_path, progress=False, model="gpt-4o-mini", generator_column="writer")
    found = out.summary.self_preference
    assert found["judges"] == [{"model": "gpt-4o-mini", "family": "openai", "own_rows": ROWS // 3}]
    assert found["by_family"] == {"openai": 20, "meta": 20, "anthropic": 20} and found["warning"] is True
    own = [s for s, w in zip(out["train"]["QA_Clarity"], ds["writer"], strict=True) if w == "gpt-4o"]
    assert found["scores"]["QA_Clarity"]["own_mean"] == pytest.approx(np.mean(own))
    assert [r for r in caplog.records if r.getMessage().startswith("self-preference")]
    assert "self-pref" in str(out.summary) and "Self-preference" in render_section(out, out.summary)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        other = score(
            ds, ["QA_Clarity"], judge, tmp_path, progress=False, model="mistral-small", generator_model="gpt-4.1"
        )
    assert other.summary.self_preference["warning"] is False
    assert other.summary.self_preference["judges"][0] == {"model": "mistral-small", "family": "mistral", "own_rows": 0}
    assert not [r for r in caplog.records if "self-preference" in r.getMessage()]
    mine = score(ds, ["QA_Clarity"], judge, tmp_path, progress=False, model="gpt-4o-mini", generator_model="gpt-4.1")
    assert mine.summary.self_preference["judges"][0]["own_rows"] == ROWS and mine.summary.self_preference["warning"]


def test_a_generator_column_that_is_not_there_is_an_error_before_any_request(judge, tmp_path):
    with pytest.raises(ConfigError, match="generator_column .* 'nope' is not a column"):
        score(_data(), ["QA_Clarity"], judge, tmp_path, generator_column="nope")
    with pytest.raises(ConfigError, match="not both"):
        score(_data(), ["QA_Clarity"], judge, tmp_path, generator_column="writer", generator_model="gpt-4o")
    assert judge.stats()["requests"] == 0


def test_agreement_reports_the_judges_error_on_its_own_familys_rows(judge, tmp_path):
    out = score(_data(), ["QA_Clarity"], judge, tmp_path, progress=False)
    d = out["train"]
    r = agreement(d, "QA_Clarity", "human", generator_column="writer", judge_model="gpt-4o-mini", resamples=0)
    err = np.array(d["QA_Clarity"], dtype=float) - np.array(d["human"], dtype=float)
    own = np.array([w == "gpt-4o" for w in d["writer"]])
    assert r.figures["own_family_error"] == pytest.approx(err[own].mean())
    assert r.figures["other_family_error"] == pytest.approx(err[~own].mean())
    assert (r.figures["own_family_rows"], r.figures["other_family_rows"]) == (20, 40)
    with pytest.raises(ConfigError, match="judge_model"):
        agreement(d, "QA_Clarity", "human", generator_column="writer")


def test_the_cli_flags_and_agreement_read_the_judged_column_from_the_summary(judge, tmp_path, capfd):
    judge.configure(length_scores=BIASED)
    path = tmp_path / "data.jsonl"
    _data().to_json(path)
    extra = ["--cache-dir", tmp_path / "c", "-o", tmp_path / "out", "--length-control", "--generator-model", "gpt-4o"]
    code, stdout, err = run_cli(capfd, *score_args(path, judge, *extra, model="gpt-4o-mini"))
    assert code == 0, err
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["length_bias"]["QA_Clarity"]["warning"] is True and saved["self_preference"]["warning"] is True
    assert "length bias" in stdout + err and "QA_Clarity_lc" in saved["columns"]
    code, stdout, err = run_cli(capfd, "agreement", tmp_path / "out", "--score", "QA_Clarity", "--label", "human")
    assert code == 0, err
    assert "length_rho" in stdout and "label_length_rho" in stdout  # the judged column came from summary.json


def test_the_end_of_run_names_the_panels_length_biased_judge(judge, tmp_path, capfd):
    judge.configure(length_scores={**BIASED, "model": "b"})
    path = tmp_path / "data.jsonl"
    _data().to_json(path)
    extra = ["--models", "a,b", "--cache-dir", tmp_path / "c", "-o", tmp_path / "out"]
    args = score_args(path, judge, *extra)
    del args[args.index("--model") : args.index("--model") + 2]  # a panel's judges are its models
    code, stdout, err = run_cli(capfd, *args)
    assert code == 0, err
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())["length_bias"]
    assert saved["QA_Clarity__b"]["warning"] is True and saved["QA_Clarity__a"]["warning"] is False
    printed = [line for line in stdout.splitlines() if line.startswith("length bias") and "__" in line]
    assert len(printed) == 1 and printed[0].startswith("length bias    QA_Clarity__b: rho"), stdout
    assert "length bias: QA_Clarity__b follows" in err and "QA_Clarity__a follows" not in err


@pytest.mark.parametrize("panel", [{}, {"models": "a,b"}], ids=["one judge", "panel"])
def test_a_streams_length_bias_is_the_in_process_one(judge, tmp_path, panel):
    judge.configure(length_scores={**BIASED, "model": "a"} if panel else BIASED)
    ds = _data()
    ref = score(ds, ["QA_Clarity"], judge, tmp_path / "a", progress=False, **panel).summary.length_bias
    out = score(ds.to_iterable_dataset(num_shards=2), ["QA_Clarity"], judge, tmp_path / "b", progress=False, **panel)
    list(out["train"])
    assert out.summary.length_bias == ref
    assert len(ref) == (3 if panel else 1) and (ref.get("QA_Clarity__a") or ref["QA_Clarity"])["warning"] is True


def test_the_stream_sample_is_a_bounded_uniform_sample():
    import pyarrow as pa

    small = StreamSample(["a"], size=100)
    for start in range(0, 50, 7):
        small.add(pa.table({"a": list(range(start, min(start + 7, 50))), "b": [0] * min(7, 50 - start)}))
    assert small.dataset()["a"] == list(range(50)) and small.dataset().column_names == ["a"]
    big = StreamSample(["a"], size=100)
    for start in range(0, 10_000, 1000):
        big.add(pa.table({"a": list(range(start, start + 1000))}))
    kept = big.dataset()["a"]
    assert len(kept) == 100 == len(set(kept)) and big.seen == 10_000
    assert 3000 < np.mean(kept) < 7000  # drawn from the whole stream, not its start


def test_the_vectorised_bootstrap_is_the_loop_over_the_same_resamples():
    rng = np.random.default_rng(3)
    x = rng.integers(1, 11, 80).astype(float)
    y = x * 10 + rng.integers(0, 60, 80)
    rows = stats.resample_rows(80, 300, seed=5)
    loop = np.array([scipy.stats.spearmanr(x[r], y[r]).statistic for r in rows])
    lo, hi = np.quantile(loop[~np.isnan(loop)], [0.05, 0.95])
    assert stats.bootstrap_spearman(x, y, resamples=300, seed=5, confidence=0.9) == pytest.approx((lo, hi))
    assert stats.bootstrap_spearman(np.ones(5), np.arange(5.0), resamples=50, seed=0, confidence=0.9) is None


def test_model_families():
    cases = {
        "gpt-4.1-nano": "openai",
        "o1": "openai",
        "o4-mini": "openai",
        "ft:gpt-4o-mini:my-org::abc": "openai",
        "openai/gpt-oss-20b": "openai",
        "claude-sonnet-4-5": "anthropic",
        "us.anthropic.claude-3-5-sonnet-20240620-v1:0": "anthropic",
        "gemini-2.5-flash": "google",
        "google/gemma-3-270m": "google",
        "meta-llama/Llama-3.1-8B-Instruct": "meta",
        "Qwen/Qwen2.5-7B-Instruct": "alibaba",
        "mistral-large-latest": "mistral",
        "mixtral-8x7b": "mistral",
        "deepseek-ai/DeepSeek-V3": "deepseek",
        "judge": None,
        "olmo-2": "allenai",
        "": None,
    }
    assert {m: bias.model_family(m) for m in cases} == cases


def _words_as_tokens(monkeypatch) -> None:
    """A stand-in tiktoken (not installed here) that knows the ``gpt-`` models and counts words as tokens."""

    class Encoding:
        name = "o200k_base"

        @staticmethod
        def encode_ordinary_batch(texts):
            return [t.split() for t in texts]

    def encoding_for_model(model):
        if not model.startswith("gpt-"):
            raise KeyError(model)
        return Encoding()

    fake = types.ModuleType("tiktoken")
    fake.Encoding, fake.encoding_for_model = Encoding, encoding_for_model
    monkeypatch.setitem(sys.modules, "tiktoken", fake)


def test_lengths_count_tokens_where_tiktoken_knows_the_model(monkeypatch):
    import pyarrow as pa

    _words_as_tokens(monkeypatch)
    table = pa.table({"a": ["one two three", None, "x"], "b": ["four", None, None]})
    tokens = bias.Lengths("gpt-4o")
    assert tokens.unit == "tokens" and tokens.of(table, ["a", "b"]).tolist()[::2] == [4.0, 1.0]
    assert np.isnan(tokens.of(table, ["a", "b"])[1])
    chars = bias.Lengths("judge")
    assert chars.unit == "characters" and chars.of(table, ["a"]).tolist()[::2] == [13.0, 1.0]


def test_the_checks_at_a_million_rows_are_cheap():
    """The figures read a sample above POINT_ROWS and the interval INTERVAL_ROWS rows: one column of 1M rows
    takes well under a second of CPU here (measured: about 0.3 s). CPU time, not wall time: a loaded machine
    stretches the second, not the first."""
    import time

    rng = np.random.default_rng(0)
    n = 1_000_000
    lengths = rng.integers(1, 2000, n).astype(float)
    scores = np.clip(1 + lengths // 250 + rng.integers(-1, 2, n), 1, 10).astype(float)
    t = time.process_time()
    rows = bias.sample_rows(n)
    found = bias.length_bias(scores[rows], lengths[rows], "characters")
    took = time.process_time() - t
    assert found["n"] == bias.POINT_ROWS and found["warning"] is True and took < 5


def test_agreement_counts_length_as_the_runs_length_bias_does(judge, tmp_path, capfd, monkeypatch):
    """A judge tiktoken knows (a stand-in that counts words): the run's length bias is in tokens, and
    ``agreement --length-of`` counts the same tokens, so its length_rho over every row is the run's rho."""

    _words_as_tokens(monkeypatch)
    judge.configure(length_scores=BIASED)
    rng = random.Random(1)
    words = [" ".join("w" * rng.randint(1, 40) for _ in range(rng.randint(1, 12))) for _ in range(ROWS)]
    ds = _data().remove_columns("answer").add_column("answer", [f"⟦{w}⟧" for w in words])
    path = tmp_path / "data.jsonl"
    ds.to_json(path)
    extra = ["--cache-dir", tmp_path / "c", "-o", tmp_path / "out"]
    code, _, err = run_cli(capfd, *score_args(path, judge, *extra, model="gpt-4o-mini"))
    assert code == 0, err
    run = json.loads((tmp_path / "out" / "summary.json").read_text())["length_bias"]["QA_Clarity"]
    assert run["unit"] == "tokens"
    code, stdout, err = run_cli(capfd, "agreement", tmp_path / "out", "--score", "QA_Clarity", "--label", "human",
                                "--resamples", "0", "--out", tmp_path / "r.json")  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["length_unit"] == "tokens" and report["figures"]["length_rho"] == pytest.approx(run["rho"], abs=1e-12)
    assert "length in tokens (tiktoken's encoding of the judge's model), as the run's length bias" in stdout
    tokens = [len(a.split()) for a in ds["answer"]]
    chars = [len(a) for a in ds["answer"]]
    # the figure is the rho with the token counts, not with the characters (which differ here)
    from datasets import load_from_disk

    got = load_from_disk(str(tmp_path / "out"))["train"]["QA_Clarity"]
    assert run["rho"] == pytest.approx(scipy.stats.spearmanr(got, tokens).statistic, abs=1e-12)
    assert abs(scipy.stats.spearmanr(got, chars).statistic - run["rho"]) > 0.01
    # no tokenizer for the judge's model: characters, said so
    r = agreement(ds.add_column("QA_Clarity", got), "QA_Clarity", "human", length_of="answer", judge_model="judge",
                  resamples=0)  # fmt: skip
    assert r.length_unit == "characters" and "length in characters" in str(r)
    assert r.figures["length_rho"] == pytest.approx(scipy.stats.spearmanr(got, chars).statistic, abs=1e-12)


def test_no_engine_runs_the_bias_checks_itself_the_run_shell_does():
    """The bias checks are built, checked against the input and run by the run shell (engine/shell.py:
    bias_checks, rows_figures, scored_result) at one point for every engine, so an engine cannot forget them or
    run them another way. Before, each engine (one process, Ray, the cascade, the stream) built and ran them
    itself."""
    import ast
    from pathlib import Path

    import hf_judge.engine

    engine = Path(hf_judge.engine.__file__).parent
    found = []
    for path in sorted(engine.glob("*.py")):
        if path.name == "shell.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
            if (owner == "BiasChecks" and node.attr == "of") or (owner == "checks" and node.attr != "needed"):
                found.append(f"{path.name}:{node.lineno} {owner}.{node.attr}")
    assert found == []
    from hf_judge.engine import shell

    assert {"bias_checks", "rows_figures", "scored_result"} <= set(vars(shell))
