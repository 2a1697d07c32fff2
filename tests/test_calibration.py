"""Calibration against labels, the labels layout and Krippendorff's alpha, on fixed data: the isotonic map
against scikit-learn's, the ECE by hand, seeded cross-validation, alpha against the krippendorff package."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from datasets import Dataset, DatasetDict
from sklearn.isotonic import IsotonicRegression

from hf_judge import (
    Calibration,
    ConfigError,
    apply_calibration,
    calibrate,
    filter_by_scores,
    krippendorff_alpha,
    read_labels,
    sample_for_review,
    write_labels,
)
from hf_judge.analysis.calibration import choose_threshold, ece, isotonic_fit, isotonic_predict
from hf_judge.analysis.labels import join_labels


def known(n: int = 400, seed: int = 3, expected: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Judge scores 1-10 and true/false labels drawn with a known P(positive | score) = score / 10."""
    rng = np.random.default_rng(seed)
    s = rng.integers(1, 11, n).astype(float)
    if expected:
        s = s + rng.random(n)  # an _expected column: many distinct values
    return s, rng.random(n) < np.floor(s) / 10


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("expected", [False, True])
def test_isotonic_fit_equals_scikit_learn(seed, expected):
    x, y = known(seed=seed, expected=expected)
    kx, ky = isotonic_fit(x, y.astype(float))
    ref = IsotonicRegression(out_of_bounds="clip").fit(x, y.astype(float))
    grid = np.linspace(-2, 14, 401)
    np.testing.assert_allclose(isotonic_predict(kx, ky, grid), ref.predict(grid), atol=1e-12)
    np.testing.assert_allclose(isotonic_predict(kx, ky, x), ref.predict(x), atol=1e-12)
    # the saved calibration (knots inside flat steps dropped) is the same map
    cal = calibrate(Dataset.from_dict({"S": x.tolist(), "ok": y.tolist()}), "S", "ok")
    np.testing.assert_allclose(cal.predict(grid), ref.predict(grid), atol=1e-12)
    assert len(cal.knots_x) <= len(kx)


def test_numeric_labels_fit_the_expected_human_score_as_scikit_learn():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 11, 300).astype(float)
    human = np.clip(x + rng.integers(-3, 3, 300), 1, 10).astype(float)
    cal = calibrate(Dataset.from_dict({"S": x.tolist(), "human": human.tolist()}), "S", "human")
    assert cal.kind == "numeric" and cal.threshold is None
    ref = IsotonicRegression(out_of_bounds="clip").fit(x, human)
    np.testing.assert_allclose(cal.predict(np.arange(0, 12)), ref.predict(np.arange(0, 12)))
    assert cal.cv["mae"] is not None


def test_ece_equals_a_computation_by_hand():
    pred = np.array([0.05, 0.15, 0.18, 0.55, 0.62, 0.95, 1.0])
    truth = np.array([0, 0, 1, 1, 0, 1, 1], dtype=float)
    # 5 bins of 0.2: [0,.2): .05 .15 .18 -> mean .12667 vs 1/3; [.4,.6): .55 vs 1; [.6,.8): .62 vs 0; [.8,1]: .975 vs 1
    by_hand = (3 * abs(1 / 3 - (0.05 + 0.15 + 0.18) / 3) + abs(1 - 0.55) + abs(0 - 0.62) + 2 * abs(1 - 0.975)) / 7
    assert ece(pred, truth, bins=5) == pytest.approx(by_hand, abs=1e-12)
    assert ece(np.array([]), np.array([])) is None


def test_the_chosen_threshold_maximises_f1_or_meets_the_target_precision():
    prob = np.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.95])
    truth = np.array([False, False, True, False, True, True])
    assert choose_threshold(prob, truth) == 0.5  # F1 0.857 at 0.5 beats 0.8 at 0.9
    assert choose_threshold(prob, truth, target_precision=0.9) == 0.9  # lowest cut with precision >= 0.9
    assert choose_threshold(prob, ~truth, target_precision=0.5) == 0.1  # every row: 3 of 6 positive
    assert choose_threshold(prob, ~truth, target_precision=1.0) is None  # no cut keeps only positives
    assert choose_threshold(np.array([0.5]), np.array([False]), target_precision=0.5) is None


def test_cross_validation_is_deterministic_with_a_seed():
    x, y = known()
    ds = Dataset.from_dict({"S": x.tolist(), "ok": y.tolist()})
    a = calibrate(ds, "S", "ok", seed=7, target_precision=0.8)
    b = calibrate(ds, "S", "ok", seed=7, target_precision=0.8)
    c = calibrate(ds, "S", "ok", seed=8, target_precision=0.8)
    assert a.cv == b.cv and a.ece == b.ece
    assert a.cv["per_fold"] != c.cv["per_fold"]  # other folds, other figures
    assert a.cv["precision"] == pytest.approx(
        sum(_tp(f) for f in a.cv["per_fold"]) / sum(_predicted(f) for f in a.cv["per_fold"])
    )
    assert a.threshold["criterion"] == "precision >= 0.8" and a.threshold["precision"] >= 0.8
    # the threshold's score is the lowest judge value the map puts at or above the cut
    assert a.predict([a.threshold["min_score"]])[0] >= a.threshold["probability"]
    assert a.predict([a.threshold["min_score"] - 1])[0] < a.threshold["probability"]


def _tp(fold: dict) -> float:
    return fold["precision"] * _predicted(fold) if fold["precision"] is not None else 0.0


def _predicted(fold: dict) -> float:
    return fold.get("predicted", 0) or 0


def test_the_fitted_map_recovers_a_known_calibration():
    x, y = known(n=4000)
    cal = calibrate(Dataset.from_dict({"S": x.tolist(), "ok": y.tolist()}), "S", "ok")
    np.testing.assert_allclose(cal.predict(np.arange(1, 11)), np.arange(1, 11) / 10, atol=0.06)
    assert cal.ece["calibrated"] < 0.05 < cal.ece["judge"]  # 1-10 rescaled to 0-1 reads 10 as 1.0: off by ~0.05


def test_expected_is_read_when_every_labelled_row_has_one(tmp_path):
    x, y = known(expected=True)
    ds = DatasetDict({"train": Dataset.from_dict({"S": np.floor(x).tolist(), "S_expected": x.tolist()})})
    labels = [{"split": "train", "row": i, "score": "S", "label": bool(v)} for i, v in enumerate(y)]
    cal = calibrate(ds, "S", labels=labels)
    assert cal.column == "S_expected"
    assert calibrate(ds, "S", labels=labels, use_expected=False).column == "S"
    with pytest.raises(ConfigError, match="--logprobs"):
        without = DatasetDict({"train": ds["train"].remove_columns("S_expected")})
        calibrate(without, "S", labels=labels, use_expected=True)
    out = apply_calibration(ds, cal)
    np.testing.assert_allclose(out["train"]["S_calibrated"], cal.predict(x))
    path = cal.save(tmp_path)
    assert Calibration.load(path) == cal and path.name == "calibration.json"


def test_min_prob_keeps_exactly_the_rows_whose_calibrated_probability_reaches_it(tmp_path):
    x, y = known()
    scores = [None if i % 37 == 0 else int(v) for i, v in enumerate(x)]  # failed rows: never kept
    ds = DatasetDict({"train": Dataset.from_dict({"S": scores}), "errors": Dataset.from_dict({"row": [0]})})
    cal = calibrate(Dataset.from_dict({"S": x.tolist(), "ok": y.tolist()}), "S", "ok")
    path = cal.save(tmp_path / "c.json")
    for p in (0.3, 0.55, 0.8):
        kept = filter_by_scores(ds, min_prob={"S": p}, calibration=path)
        probs = cal.predict([s if s is not None else np.nan for s in scores])
        want = [i for i, s in enumerate(scores) if s is not None and probs[i] >= p]
        assert kept["train"]["S"] == [scores[i] for i in want]
        assert kept["train"]["S_calibrated"] == pytest.approx([probs[i] for i in want])
        assert len(kept["errors"]) == 1
    every = filter_by_scores(ds, calibration=cal)  # no threshold: every row, calibrated
    assert every["train"]["S"] == scores and len(every["train"]["S_calibrated"]) == len(scores)
    with pytest.raises(ConfigError, match="calibration"):
        filter_by_scores(ds, min_prob={"S": 0.5})
    with pytest.raises(ConfigError, match="between 0 and 1"):
        filter_by_scores(ds, min_prob={"S": 8}, calibration=cal)
    numeric = calibrate(Dataset.from_dict({"S": x.tolist(), "h": x.tolist()}), "S", "h")
    with pytest.raises(ConfigError, match="S_calibrated"):
        filter_by_scores(ds, min_prob={"S": 0.5}, calibration=numeric)


def test_labels_read_from_jsonl_and_csv_alike(tmp_path):
    rows = [
        {"split": "train", "row": 2, "score": "S", "label": 7, "note": "terse", "reviewer": "ana", "text": "ctx"},
        {"split": "train", "row": 0, "score": "S", "label": True},
        {"split": "train", "row": 1, "score": "S", "label": "tie"},
        {"split": "train", "row": 3, "score": "S", "label": None},  # not labelled yet: skipped
    ]
    for name in ("l.jsonl", "l.csv"):
        write_labels(rows, tmp_path / name)
        got = read_labels(tmp_path / name)
        assert [r["label"] for r in got] == [7, True, "tie"]
        assert got[0] == {"split": "train", "row": 2, "score": "S", "label": 7, "note": "terse", "reviewer": "ana"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ('{"row": 1, "label": 3}', "line 2: no split"),
        ('{"split": "train", "row": "x", "label": 3}', "line 2: row 'x' is not a row number"),
        ('{"split": "train", "row": -1, "label": 3}', "line 2: row -1"),
        ('{"split": "train", "row": 1, "label": [3]}', "line 2: label \\[3\\] is a list"),
        ("[1, 2]", "line 2: a list, not an object"),
    ],
)
def test_a_bad_labels_line_is_named_with_the_fix(tmp_path, line, message):
    p = tmp_path / "labels.jsonl"
    p.write_text('{"split": "train", "row": 0, "label": 1}\n' + line + "\n")
    with pytest.raises(ConfigError, match=message) as e:
        read_labels(p)
    assert "labels.jsonl" in str(e.value)


def test_join_by_split_and_row_and_refuse_labels_of_another_result():
    ds = DatasetDict({"train": Dataset.from_dict({"S": [1, 2, 3]}), "test": Dataset.from_dict({"S": [7, 8]})})
    labels = [
        {"split": "test", "row": 1, "score": "S", "label": 1, "reviewer": "a"},
        {"split": "test", "row": 1, "score": "S", "label": 3, "reviewer": "b"},
        {"split": "train", "row": 0, "score": None, "label": 5, "reviewer": None},
    ]
    j = join_labels(ds, labels, "S")
    assert j.keys == [("test", 1), ("train", 0)] and j.scores == [8, 1] and j.labels == [2.0, 5]
    assert j.raters == {("test", 1): {"a": 1, "b": 3}} and j.reviewers == ["a", "b"]
    with pytest.raises(ConfigError, match="row 5 of split 'train', which has 3 rows"):
        join_labels(ds, [{"split": "train", "row": 5, "label": 1, "score": "S"}], "S")
    with pytest.raises(ConfigError, match="split 'dev'"):
        join_labels(ds, [{"split": "dev", "row": 0, "label": 1, "score": "S"}], "S")
    with pytest.raises(ConfigError, match="--score T"):
        join_labels(ds, [{"split": "train", "row": 0, "label": 1, "score": "T"}], "S")


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("seed", range(4))
def test_alpha_equals_the_krippendorff_package(level, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 8, (3 + seed % 2, 40)).astype(float)
    data[1] = np.where(rng.random(40) < 0.6, data[0], data[1])  # some agreement
    data[rng.random(data.shape) < 0.25] = np.nan
    assert krippendorff_alpha(data, level) == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-12
    )


def test_alpha_on_verdicts_and_undefined_cases():
    verdicts = [[True, False, True, None], [True, False, False, True], [None, False, True, True]]
    codes = np.array([[np.nan if v is None else float(v) for v in r] for r in verdicts])
    assert krippendorff_alpha(verdicts, "nominal") == pytest.approx(
        krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal")
    )
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None  # one value: no disagreement to expect
    assert krippendorff_alpha([[1, None], [None, 2]]) is None  # no unit rated twice
    with pytest.raises(ConfigError, match="nominal"):
        krippendorff_alpha([["a", "b"], ["a", "a"]], "interval")


def scored_for_review() -> DatasetDict:
    rng = np.random.default_rng(5)
    n = 300
    s = rng.integers(1, 11, n)
    return DatasetDict(
        {
            "train": Dataset.from_dict(
                {
                    "question": [f"q{i}" for i in range(n)],
                    "S": [None if i % 50 == 7 else int(v) for i, v in enumerate(s)],
                    "S_reason": [f"r{i}" for i in range(n)],
                    "S_confidence": rng.random(n).round(4).tolist(),
                    "S__a": s.tolist(),
                    "S__b": np.clip(s + rng.integers(-4, 5, n), 1, 10).tolist(),
                }
            )
        }
    )


def test_each_review_strategy_picks_what_it_says():
    ds = scored_for_review()
    d = ds["train"]
    s = np.array([np.nan if v is None else v for v in d["S"]], dtype=float)
    scored = ~np.isnan(s)
    n = 40

    def rows(by, **kw):
        out = sample_for_review(ds, n, by=by, score="S", **kw)
        assert len(out) == n and all(r["label"] is None and r["split"] == "train" for r in out)
        assert all(r["S"] == d[r["row"]]["S"] and r["question"] == d[r["row"]]["question"] for r in out)
        return [r["row"] for r in out]

    near = rows("threshold", threshold=7)
    dist = np.abs(s - 7)
    assert max(dist[near]) <= min(dist[[i for i in np.nonzero(scored)[0] if i not in near]])
    conf = np.array(d["S_confidence"])
    low = rows("uncertainty")
    assert sorted(low) == sorted(np.argsort(np.where(scored, conf, np.inf))[:n].tolist())
    spread = np.abs(np.array(d["S__a"]) - np.array(d["S__b"]))
    split = rows("disagreement")
    rest = [i for i in range(len(d)) if i not in split]
    assert min(spread[split]) >= max(spread[rest])
    even = rows("stratified")
    assert set(np.bincount(s[even].astype(int))[1:]) == {4}  # 40 rows over 10 values
    assert rows("random", seed=1) == rows("random", seed=1) != rows("random", seed=2)
    assert not any(np.isnan(s[i]) for i in near + low + split + even)


def test_uncertainty_without_confidence_is_distance_to_the_middle_and_disagreement_needs_judges():
    ds = scored_for_review()
    d = ds["train"].remove_columns(["S_confidence", "S__a", "S__b"])
    picked = [r["S"] for r in sample_for_review(d, 30, by="uncertainty", score="S")]
    assert set(picked) <= {5, 6}  # the middle of 1..10 is 5.5
    with pytest.raises(ConfigError, match="panel"):
        sample_for_review(d, 10, by="disagreement", score="S")
    with pytest.raises(ConfigError, match="--threshold"):
        sample_for_review(d, 10, by="threshold", score="S")


def test_calibrate_from_the_labels_file_sample_for_review_wrote(tmp_path):
    ds = scored_for_review()
    rows = sample_for_review(ds, 120, by="stratified", score="S")
    for r in rows:
        r["label"] = r["S"] >= 6
    path = write_labels(rows, tmp_path / "labels.jsonl")
    assert json.loads(path.read_text().splitlines()[0])["label"] is not None
    from_file = calibrate(path, "S")  # the records carry the judge's value
    joined = calibrate(ds, "S", labels=path)
    assert from_file.knots_x == joined.knots_x and from_file.knots_y == joined.knots_y
    assert from_file.threshold["min_score"] == 6 and from_file.threshold["precision"] == 1.0


def test_the_cli_lists_the_strategies_the_library_has():
    from hf_judge.analysis import review
    from hf_judge.cli import review as cli_review

    assert cli_review.STRATEGIES == review.STRATEGIES


def test_interval_alpha_on_many_distinct_values_equals_the_package():
    """Means of samples or expected scores: ~100 distinct values; the closed form needs no value x value matrix."""
    rng = np.random.default_rng(11)
    truth = rng.random(300) * 9 + 1
    data = np.round(truth + rng.normal(0, 1.5, (3, 300)), 1)
    data[rng.random(data.shape) < 0.2] = np.nan
    assert krippendorff_alpha(data, "interval") == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="interval"), abs=1e-12
    )
