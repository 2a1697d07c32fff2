"""The agreement report: every statistic against scipy / scikit-learn on fixed data (ties, constant
columns, missing values), the bootstrap's seed, the three kinds of judge, the CLI command."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from datasets import Dataset, DatasetDict
from helpers import run_cli

from hf_judge import ConfigError, agreement
from hf_judge.analysis import stats

scipy_stats = pytest.importorskip("scipy.stats")
metrics = pytest.importorskip("sklearn.metrics")

# fixed data: a judge's 1-10 scores against labels, with many ties, and a few shapes that break formulas
JUDGE = [7, 8, 8, 3, 10, 5, 5, 5, 9, 2, 7, 7, 6, 1, 8, 4, 10, 6, 3, 9]
HUMAN = [6, 8, 9, 2, 9, 5, 6, 4, 9, 3, 7, 5, 6, 2, 7, 4, 10, 7, 1, 8]
PAIRS = {
    "ties": (JUDGE, HUMAN),
    "reversed": (JUDGE, [11 - v for v in HUMAN]),
    "few values": ([1, 1, 2, 2, 2, 3, 3, 3, 3, 1], [1, 2, 2, 2, 3, 3, 3, 3, 3, 1]),
    "floats": ([7.25, 8.5, 8.5, 2.75, 9.9, 5.0, 5.0], [6, 8, 9, 2, 9, 5, 6]),
    "two rows": ([1, 2], [2, 1]),
}
CONSTANT = {"constant score": ([5] * 8, HUMAN[:8]), "constant label": (JUDGE[:8], [3] * 8), "both": ([4] * 5, [4] * 5)}


def _same(ours, ref):
    if ours is None:
        return math.isnan(ref)
    return ours == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("case", list(PAIRS))
def test_correlations_and_mae_match_scipy(case):
    x, y = (np.array(v, dtype=float) for v in PAIRS[case])
    assert _same(stats.spearman(x, y), scipy_stats.spearmanr(x, y).statistic)
    assert _same(stats.kendall_tau_b(x, y), scipy_stats.kendalltau(x, y, variant="b").statistic)
    assert _same(stats.pearson(x, y), scipy_stats.pearsonr(x, y).statistic)
    assert stats.mae(x, y) == pytest.approx(metrics.mean_absolute_error(y, x))
    assert stats.rankdata(x).tolist() == scipy_stats.rankdata(x).tolist()


@pytest.mark.parametrize("case", list(CONSTANT))
def test_a_constant_column_has_no_correlation_where_scipy_has_nan(case):
    x, y = (np.array(v, dtype=float) for v in CONSTANT[case])
    with pytest.warns(scipy_stats.ConstantInputWarning):
        ref = scipy_stats.spearmanr(x, y).statistic
    assert math.isnan(ref) and stats.spearman(x, y) is None and stats.pearson(x, y) is None
    assert math.isnan(scipy_stats.kendalltau(x, y).statistic) and stats.kendall_tau_b(x, y) is None


def test_kendall_on_many_rows_and_values_matches_scipy():
    rng = np.random.default_rng(7)  # the merge passes: odd lengths, many distinct values, ties in both
    for n, k in [(1001, 10), (777, 700), (4096, 3)]:
        x = rng.integers(0, k, n).astype(float)
        y = x + rng.integers(-3, 4, n)
        assert stats.kendall_tau_b(x, y) == pytest.approx(scipy_stats.kendalltau(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize("case", ["ties", "reversed", "few values", "two rows"])
def test_kappas_and_confusion_matrix_match_scikit_learn(case):
    x, y = (np.array(v) for v in PAIRS[case])
    labels = list(range(min(x.min(), y.min()), max(x.max(), y.max()) + 1))
    ref = metrics.cohen_kappa_score(y, x, labels=labels, weights="quadratic")
    assert _same(stats.cohen_kappa(y, x, labels, quadratic=True), ref)
    assert _same(stats.cohen_kappa(y, x, labels), metrics.cohen_kappa_score(y, x, labels=labels))
    assert stats.confusion_matrix(y, x, labels).tolist() == metrics.confusion_matrix(y, x, labels=labels).tolist()


def test_quadratic_kappa_weighs_by_value_over_the_whole_range():
    # no row scored 3..9: a 2-vs-10 miss weighs 64, not 1 (the next label), as scikit-learn given the range
    x, y = np.array([1, 2, 10, 10, 1, 2]), np.array([1, 10, 10, 2, 2, 2])
    ours = stats.cohen_kappa(y, x, list(range(1, 11)), quadratic=True)
    assert ours == pytest.approx(metrics.cohen_kappa_score(y, x, labels=list(range(1, 11)), weights="quadratic"))
    assert ours == pytest.approx(0.31746031746031744)
    assert metrics.cohen_kappa_score(y, x, weights="quadratic") == pytest.approx(0.5714285714285714)  # by index


BINARY = {
    "mixed": ([1, 1, 0, 1, 0, 0, 1, 1, 0, 1], [1, 0, 0, 1, 1, 0, 1, 1, 0, 0]),
    "all right": ([1, 0, 1], [1, 0, 1]),
    "never positive": ([0, 0, 0, 0], [1, 0, 1, 0]),
    "no positive label": ([1, 0, 1, 0], [0, 0, 0, 0]),
    "constant both": ([1, 1, 1], [1, 1, 1]),
}


@pytest.mark.parametrize("case", list(BINARY))
def test_binary_scores_match_scikit_learn(case):
    pred, truth = (np.array(v, dtype=bool) for v in BINARY[case])
    ours = stats.binary_scores(truth, pred)
    nan = {"zero_division": np.nan}
    assert _same(ours["accuracy"], metrics.accuracy_score(truth, pred))
    assert _same(ours["precision"], metrics.precision_score(truth, pred, **nan))
    assert _same(ours["recall"], metrics.recall_score(truth, pred, **nan))
    assert _same(ours["f1"], metrics.f1_score(truth, pred, **nan))
    with warnings.catch_warnings():  # scikit-learn warns where kappa is undefined (one label): nan
        warnings.simplefilter("ignore")
        kappa = metrics.cohen_kappa_score(truth, pred, labels=[False, True])
    assert _same(ours["cohen_kappa"], kappa)


# -- the report ----------------------------------------------------------------------------------------------


def _with_missing() -> Dataset:
    judge = [*JUDGE, None, 4, None]
    human = [*HUMAN, 3, None, None]
    return Dataset.from_dict({"QA_Correctness": judge, "human_score": human})


def test_missing_values_are_dropped_pairwise_and_counted():
    r = agreement(_with_missing(), score="QA_Correctness", label="human_score", resamples=0)
    assert (r.rows, r.pairs, r.missing) == (23, 20, {"score": 1, "label": 1, "both": 1})
    x, y = np.array(JUDGE, float), np.array(HUMAN, float)
    assert r.figures["spearman"] == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert r.figures["kendall_tau_b"] == pytest.approx(scipy_stats.kendalltau(x, y).statistic)
    assert r.figures["mae"] == pytest.approx(metrics.mean_absolute_error(y, x))
    qwk = metrics.cohen_kappa_score(HUMAN, JUDGE, labels=list(range(1, 11)), weights="quadratic")
    assert r.figures["quadratic_kappa"] == pytest.approx(qwk)
    assert r.confusion["labels"] == list(range(1, 11))
    assert r.confusion["matrix"] == metrics.confusion_matrix(HUMAN, JUDGE, labels=list(range(1, 11))).tolist()
    eights = [h for j, h in zip(JUDGE, HUMAN, strict=True) if j == 8]
    cal = {c["score"]: c for c in r.calibration}
    assert cal[8.0] == {"score": 8.0, "count": 3, "label_mean": pytest.approx(sum(eights) / 3)}
    assert r.intervals == {} and "spearman" in str(r) and "null score 1, null label 1, both 1" in str(r)


def test_nan_counts_as_missing_and_expected_scores_get_no_kappa():
    ds = Dataset.from_dict({"QA_Correctness_expected": [7.2, float("nan"), 3.1, 8.8, 5.5], "human": [7, 6, 3, 9, 5]})
    r = agreement(ds, score="QA_Correctness_expected", label="human", resamples=0)
    assert r.pairs == 4 and r.missing["score"] == 1
    assert "quadratic_kappa" not in r.figures and r.confusion is None  # kappa needs whole-number scores
    assert r.figures["pearson"] == pytest.approx(scipy_stats.pearsonr([7.2, 3.1, 8.8, 5.5], [7, 3, 9, 5]).statistic)


def test_bootstrap_is_reproducible_with_a_seed_and_covers_the_estimate():
    ds = _with_missing()
    a = agreement(ds, score="QA_Correctness", label="human_score", resamples=500, seed=3)
    b = agreement(ds, score="QA_Correctness", label="human_score", resamples=500, seed=3)
    c = agreement(ds, score="QA_Correctness", label="human_score", resamples=500, seed=4)
    assert a.intervals == b.intervals and a.intervals != c.intervals
    assert set(a.intervals) == {"spearman", "pearson", "mae", "quadratic_kappa"}
    for name, (lo, hi) in a.intervals.items():
        assert lo < a.figures[name] < hi, name
    # against scipy's percentile bootstrap on the same resamples (same generator, same draws)
    x, y = np.array(JUDGE, float), np.array(HUMAN, float)
    rng = np.random.default_rng(3)
    draws = [stats.mae(x[i], y[i]) for i in (rng.integers(0, 20, 20) for _ in range(500))]
    assert a.intervals["mae"] == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])))
    ref = scipy_stats.bootstrap(
        (x, y), lambda s, t: np.abs(s - t).mean(), paired=True, n_resamples=2000, method="percentile", random_state=0
    ).confidence_interval
    lo, hi = a.intervals["mae"]
    assert abs(lo - ref.low) < 0.25 and abs(hi - ref.high) < 0.25  # two samplings of one distribution


def test_binary_verdicts_against_yes_no_labels():
    pred, truth = BINARY["mixed"]
    ds = Dataset.from_dict(
        {"Binary": [bool(v) for v in pred] + [None], "gold": ["yes" if v else "No" for v in truth] + ["yes"]}
    )
    r = agreement(ds, score="Binary", label="gold", resamples=200)
    assert r.kind == "binary" and r.pairs == 10 and r.missing["score"] == 1
    assert r.figures["f1"] == pytest.approx(metrics.f1_score(truth, pred))
    assert r.figures["cohen_kappa"] == pytest.approx(metrics.cohen_kappa_score(truth, pred))
    assert r.confusion["matrix"] == metrics.confusion_matrix(truth, pred).tolist()
    assert set(r.intervals) == {"accuracy", "f1", "cohen_kappa"}


def test_binary_labels_with_other_words_need_positive():
    ds = Dataset.from_dict({"Binary": [True, False, True], "gold": ["good", "bad", "bad"]})
    with pytest.raises(ConfigError, match=r"'bad', 'good'.*positive="):
        agreement(ds, score="Binary", label="gold")
    r = agreement(ds, score="Binary", label="gold", positive="good", resamples=0)
    assert r.figures["accuracy"] == pytest.approx(2 / 3) and r.figures["precision"] == 0.5


def test_pairwise_agreement_tie_rate_and_position_bias():
    ds = Dataset.from_dict(
        {
            "Comparative_winner": ["1", "2", "tie", "1", "2", None, "1", "tie"],
            "Comparative_disagree": [False, True, True, False, False, None, True, False],
            "preferred": ["1", "2", "1", "model_a", "b", "1", "2", "tie"],
        }
    )
    r = agreement(ds, score="Comparative", label="preferred", resamples=100)  # the metric's name finds _winner
    assert r.score == "Comparative_winner" and r.kind == "pairwise" and r.pairs == 7
    assert r.figures["agreement"] == pytest.approx(5 / 7)
    assert r.figures["tie_rate"] == pytest.approx(2 / 7) and r.figures["label_tie_rate"] == pytest.approx(1 / 7)
    assert r.figures["position_bias_rate"] == pytest.approx(3 / 7)
    judge = ["1", "2", "tie", "1", "2", "1", "tie"]
    human = ["1", "2", "1", "1", "2", "2", "tie"]
    assert r.figures["cohen_kappa"] == pytest.approx(metrics.cohen_kappa_score(human, judge))
    one_order = agreement(ds.remove_columns("Comparative_disagree"), score="Comparative", label="preferred")
    assert one_order.figures["position_bias_rate"] is None  # swap off: no second order to compare


def test_judge_vs_judge_on_a_dataset_dict_split():
    a = [8, 6, 7, 2, 9, 4, 4, 5]
    b = [7, 6, 8, 3, 9, 5, 3, 5]
    dd = DatasetDict(
        {
            "train": Dataset.from_dict({"QA_Correctness_judge_a": a, "QA_Correctness_judge_b": b}),
            "test": Dataset.from_dict({"QA_Correctness_judge_a": [1], "QA_Correctness_judge_b": [1]}),
        }
    )
    with pytest.raises(ConfigError, match="name one"):
        agreement(dd, score="QA_Correctness_judge_a", label="QA_Correctness_judge_b")
    r = agreement(dd, score="QA_Correctness_judge_a", label="QA_Correctness_judge_b", split="train", resamples=0)
    assert r.split == "train" and r.figures["spearman"] == pytest.approx(scipy_stats.spearmanr(a, b).statistic)


def test_bad_columns_name_the_problem():
    ds = Dataset.from_dict({"QA_Correctness": [1, 2], "note": ["x", "y"]})
    with pytest.raises(ConfigError, match="no column 'human'.*it has: QA_Correctness, note"):
        agreement(ds, score="QA_Correctness", label="human")
    with pytest.raises(ConfigError, match="'note' holds 2 values that are not finite numbers"):
        agreement(ds, score="QA_Correctness", label="note")


def test_report_to_dict_is_json_and_round_trips():
    r = agreement(_with_missing(), score="QA_Correctness", label="human_score", resamples=50)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["figures"]["mae"] == r.figures["mae"] and d["intervals"]["mae"] == list(r.intervals["mae"])
    assert d["histograms"]["QA_Correctness"]["8"] == 3 and d["missing"] == r.missing


# -- the CLI ---------------------------------------------------------------------------------------------------


def test_cli_agreement_prints_the_table_and_saves_json(tmp_path, capfd):
    path = tmp_path / "labelled.jsonl"
    _with_missing().to_json(path)
    out = tmp_path / "report.json"
    code, stdout, err = run_cli(
        capfd, "agreement", path, "--score", "QA_Correctness", "--label", "human_score", "--out", out, "--seed", 3
    )
    assert code == 0, err
    assert "spearman" in stdout and "compared 20" in stdout and "confusion matrix" in stdout
    saved = json.loads(out.read_text())
    same = agreement(_with_missing(), "QA_Correctness", "human_score", seed=3)
    assert saved["intervals"] == same.to_dict()["intervals"]
    code, _, err = run_cli(capfd, "agreement", path, "--score", "QA_Correctnes", "--label", "human_score")
    assert code == 2 and "no column 'QA_Correctnes'" in err


def test_p_positive_against_boolean_labels_is_a_calibration():
    p = [0.91, 0.15, 0.62, 0.08, 0.77, 0.55, 0.33, 0.97, 0.41, 0.69, 0.12,
         0.86, 0.24, 0.58, 0.49, 0.73, 0.05, 0.93, 0.36, 0.81, 0.66, 0.19]  # fmt: skip
    gold = [v > 0.5 for v in p]
    gold[5], gold[8], gold[13], gold[20] = False, True, True, False  # the judge's near misses
    r = agreement(Dataset.from_dict({"Binary_p_positive": p, "gold": gold}), "Binary_p_positive", "gold", resamples=0)
    assert r.kind == "numeric" and r.confusion is None
    assert r.figures["pearson"] == pytest.approx(scipy_stats.pointbiserialr(gold, p).statistic)
    assert r.figures["mae"] == pytest.approx(np.mean(np.abs(np.array(p) - np.array(gold))))  # the Brier-like error
    bins = r.calibration
    assert len(bins) <= 10 and sum(b["count"] for b in bins) == 22
    assert bins[0]["label_mean"] == 0.0 and bins[-1]["label_mean"] == 1.0


def test_nothing_to_compare_gives_an_empty_report_not_an_error():
    ds = Dataset.from_dict({"QA_Correctness": [None, 3, None], "human": [4, None, None]})
    r = agreement(ds, "QA_Correctness", "human")
    assert r.pairs == 0 and r.missing == {"score": 1, "label": 1, "both": 1}
    assert set(r.figures.values()) == {None} and r.intervals == {} and "n/a" in str(r)


def test_the_docs_agreement_example_is_what_the_command_prints(capsys):
    """The tutorial "Trusting a judge" shows a report: it is the one `hf-judge agreement` prints for the simulated
    sample it builds (docs/agreement-example.jsonl, written by docs/agreement_example.py), figure for figure (the
    docs' examples test checks it only loosely: digits there match any number)."""
    import re
    from pathlib import Path

    from hf_judge.cli import main

    docs = Path(__file__).resolve().parent.parent / "docs"
    text = (docs / "tutorials" / "trusting-a-judge.md").read_text(encoding="utf-8")
    section = text[text.index("## 1. Agreement with labels") :]
    shown = re.search(r"^```text\n(Agreement of .*?)^```", section, flags=re.S | re.M)
    assert shown, "no example report under '1. Agreement with labels'"
    assert main(["agreement", str(docs / "agreement-example.jsonl"), "--score", "QA_Correctness",
                 "--label", "human_score"]) == 0  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    for line in shown.group(1).splitlines():  # not the lines about the files it saved (the page passes --out)
        if line.strip() and not line.startswith("saved to"):
            assert line in printed, f"docs line not printed by the command: {line!r}"
