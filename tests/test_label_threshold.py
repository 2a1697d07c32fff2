"""Numeric labels (1-5 ratings) against a judge: `--label-threshold T` reads them as pass/fail (label >= T) for
`calibrate` and `agreement`, and several reviewers' integer ratings get their ordinal alpha."""

from __future__ import annotations

import json
import re

import krippendorff
import numpy as np
import pytest
from datasets import Dataset, load_from_disk
from helpers import run_cli, scored_result

from hf_judge import Calibration, agreement, calibrate
from hf_judge.errors import ConfigError
from hf_judge.results.calibration_card import calibration_card, calibration_entry


def _ratings(scores, reviewer_shift=0):
    """A 1-5 rating that follows a 1-10 score, off by one on every third row (and by ``reviewer_shift``)."""
    return [
        int(np.clip(round(s / 2) + (1 if i % 3 == 0 else 0) + reviewer_shift * (i % 2), 1, 5))
        for i, s in enumerate(scores)
    ]


def test_a_label_threshold_calibrates_ratings_as_the_same_pass_fail_labels():
    rng = np.random.default_rng(0)
    scores = rng.integers(1, 11, 300).tolist()
    ratings = _ratings(scores)
    ds = Dataset.from_dict({"S": scores, "rating": ratings, "ok": [r >= 4 for r in ratings]})
    by_cut = calibrate(ds, "S", "rating", label_threshold=4, folds=3, seed=1)
    by_bool = calibrate(ds, "S", "ok", folds=3, seed=1)
    assert by_cut.kind == "binary" and by_cut.label_threshold == 4
    for key in ("knots_x", "knots_y", "ece", "reliability", "by_score", "threshold", "cv", "pairs"):
        assert getattr(by_cut, key) == getattr(by_bool, key), key
    assert "against rating: binary (label >= 4 counted positive)" in str(by_cut)
    assert "isotonic map: judge value -> P(label >= 4)" in str(by_cut)
    card = "\n".join(calibration_card({"S": calibration_entry(by_cut)}))
    assert "(binary, label >= 4 counted positive)" in card and "P(human label >= 4) at this judge score" in card
    # a file saved before the option existed still loads (no label_threshold: None)
    data = by_bool.to_dict()
    del data["label_threshold"]
    assert Calibration(**data).label_threshold is None


def test_a_label_threshold_refuses_what_it_cannot_cut():
    ds = Dataset.from_dict({"S": [1, 5, 9, 3], "rating": [1, 3, 5, 2], "word": ["a", "b", "a", "b"]})
    with pytest.raises(ConfigError, match="needs numeric labels"):
        calibrate(ds, "S", "word", label_threshold=4, folds=2)
    with pytest.raises(ConfigError, match="leave out positive="):
        calibrate(ds, "S", "rating", label_threshold=4, positive=5, folds=2)
    with pytest.raises(ConfigError, match="every label is below 6"):
        calibrate(ds, "S", "rating", label_threshold=6, folds=2)
    with pytest.raises(ConfigError, match="needs numeric labels"):
        agreement(ds, "S", "word", label_threshold=4, resamples=0)


def test_agreement_of_a_verdict_judge_with_ratings_through_a_threshold():
    ratings = [1, 2, 3, 4, 5, 5, 4, 2, None, 3]
    verdicts = [False, False, True, True, True, False, True, False, True, None]
    ds = Dataset.from_dict({"Binary": verdicts, "rating": ratings})
    r = agreement(ds, "Binary", "rating", kind="binary", label_threshold=4, resamples=0)
    passed = [None if v is None else v >= 4 for v in ratings]
    pairs = [(v, p) for v, p in zip(verdicts, passed, strict=True) if v is not None and p is not None]
    assert r.pairs == len(pairs) == 8 and r.label == "rating >= 4"
    assert r.figures["accuracy"] == pytest.approx(sum(v == p for v, p in pairs) / len(pairs))


@pytest.fixture
def scored(judge, tmp_path, capfd):
    return scored_result(capfd, judge, tmp_path, 90)


def test_cli_label_threshold_and_the_reviewers_ordinal_alpha(scored, tmp_path, capfd):
    scores = load_from_disk(str(scored))["train"]["QA_Correctness"]
    by = {"ana": _ratings(scores), "ben": _ratings(scores, reviewer_shift=-1)}
    rows = [
        {"split": "train", "row": i, "score": "QA_Correctness", "label": v, "reviewer": who}
        for who, ratings in by.items()
        for i, v in enumerate(ratings)
    ]
    path = tmp_path / "ratings.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["calibrate", scored, "--score", "QA_Correctness", "--labels", path, "--label-threshold", "4"]
    code, out, err = run_cli(capfd, *args, "--folds", "3")
    assert code == 0, err
    cal = Calibration.load(scored)
    mean = (np.array(by["ana"]) + np.array(by["ben"])) / 2  # two reviewers of one row: their mean
    want = calibrate(
        Dataset.from_dict({"S": scores, "ok": (mean >= 4).tolist()}), "S", "ok", folds=3, use_expected=False
    )
    assert cal.knots_y == want.knots_y and cal.threshold == want.threshold and cal.label_threshold == 4
    assert "against ratings.jsonl: binary (label >= 4 counted positive), 90 labelled rows" in out
    code, out, err = run_cli(capfd, "filter", scored, "--min-prob", "QA_Correctness=0.5", "-o", tmp_path / "best")
    assert code == 0, err  # a threshold calibration gives probabilities: --min-prob takes it

    agree = ["agreement", scored, "--score", "QA_Correctness", "--labels", path, "--resamples", "0"]
    code, out, err = run_cli(capfd, *agree)
    assert code == 0, err
    data = np.array([by["ana"], by["ben"]], dtype=float)
    for level in ("interval", "ordinal"):
        shown = re.search(rf"^reviewers_alpha_{level}\s+(\S+)", out, flags=re.M)
        want = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert shown and float(shown.group(1)) == pytest.approx(want, abs=5e-4), level
    code, out, err = run_cli(capfd, *agree, "--label-threshold", "4", "--out", tmp_path / "a.json")
    assert code == 0, err
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["label"] == "ratings.jsonl >= 4" and report["pairs"] == 90
    # the calibration curve: per judge score, the share of rows whose (mean) rating is >= 4
    passed = mean >= 4
    for c in report["calibration"]:
        at = np.array(scores) == c["score"]
        assert c["count"] == int(at.sum()) and c["label_mean"] == pytest.approx(passed[at].mean())
