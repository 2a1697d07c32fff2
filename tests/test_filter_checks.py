"""Thresholds as a user writes them, and what may not pass one: a true/false score filtered with true/false
(`--min Correctness=true`), a NaN score that passes no threshold, a calibration file checked on load (NaN,
unsorted or out-of-range knots), and a calibration fitted on labels of one class, which says so."""

from __future__ import annotations

import json
import math
import re

import pytest
from datasets import Dataset, DatasetDict, load_from_disk
from helpers import run_cli

from hf_judge import Calibration, calibrate, filter_by_scores
from hf_judge.errors import ConfigError


def _saved(tmp_path, **columns) -> str:
    path = tmp_path / "result"
    DatasetDict({"train": Dataset.from_dict(columns)}).save_to_disk(str(path))
    return str(path)


# -- item 5: a true/false score is filtered the way it is written ------------------------------------------------
def test_filter_cli_keeps_true_or_false_rows_of_a_true_false_score(tmp_path, capfd):
    data = _saved(tmp_path, Correctness=[True, False, None, True], q=["a", "b", "c", "d"])
    code, out, err = run_cli(capfd, "filter", data, "--min", "Correctness=true", "-o", tmp_path / "t")
    assert code == 0, err
    assert "train: kept 2 of 4 rows" in out
    assert load_from_disk(str(tmp_path / "t"))["train"]["q"] == ["a", "d"]
    code, out, err = run_cli(capfd, "filter", data, "--max", "Correctness=FALSE", "-o", tmp_path / "f")
    assert code == 0, err
    assert load_from_disk(str(tmp_path / "f"))["train"]["q"] == ["b"]


def test_filter_by_scores_reads_true_false_thresholds():
    ds = Dataset.from_dict({"Correctness": [True, False, None, True], "S": [9, 2, 5, 7]})
    assert filter_by_scores(ds, min={"Correctness": True})["S"] == [9, 7]
    assert filter_by_scores(ds, max={"Correctness": False})["S"] == [2]
    assert filter_by_scores(ds, min={"Correctness": False})["S"] == [9, 2, 7]  # false <= every verdict
    assert filter_by_scores(ds, max={"Correctness": True}, keep_missing=True)["S"] == [9, 2, 5, 7]
    # true/false on a 1-10 score is a mistake, said as one (not read as >= 1)
    with pytest.raises(ConfigError, match=r"threshold S=true: true/false applies to a true/false score, and 'S'"):
        filter_by_scores(ds, min={"S": True})


def test_filter_cli_refuses_a_word_that_is_neither_a_number_nor_true_false(tmp_path, capfd):
    data = _saved(tmp_path, Correctness=[True, False])
    code, _, err = run_cli(capfd, "filter", data, "--min", "Correctness=maybe")
    assert code == 2
    assert "'maybe' is not a number (nor true/false, for a true/false score)" in err


# -- item 21: NaN passes no threshold; a calibration file is checked on load --------------------------------------
def test_a_nan_score_passes_no_threshold():
    ds = Dataset.from_dict({"S": [1.0, math.nan, 9.0, None]})
    assert filter_by_scores(ds, min={"S": 5})["S"] == [9.0]
    assert filter_by_scores(ds, max={"S": 5})["S"] == [1.0]
    # keep_missing keeps the null (a failed metric), never the NaN
    assert filter_by_scores(ds, min={"S": 5}, keep_missing=True)["S"] == [9.0, None]


def test_filter_cli_drops_a_nan_score_and_finishes(tmp_path, capfd):
    data = _saved(tmp_path, S=[1.0, math.nan, 9.0], q=["a", "b", "c"])
    for flag, kept in (("--min", ["c"]), ("--max", ["a"])):
        out_dir = tmp_path / flag.strip("-")
        code, out, err = run_cli(capfd, "filter", data, flag, "S=5", "-o", out_dir)
        assert code == 0, err
        assert "train: kept 1 of 3 rows" in out
        assert load_from_disk(str(out_dir))["train"]["q"] == kept


def _binary_calibration() -> dict:
    ds = Dataset.from_dict({"S": [2, 4, 6, 8] * 10, "ok": [False, False, True, True] * 10})
    return calibrate(ds, "S", "ok", folds=2).to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"knots_y": [0.0, math.nan]}, r"knots_y holds nan: every knot must be a finite number"),
        ({"knots_x": [math.nan, 6.0]}, r"knots_x holds nan: every knot must be a finite number"),
        ({"knots_x": [6.0, 4.0]}, r"knots_x must be increasing"),
        ({"knots_y": [1.0, 0.0]}, r"knots_y must be non-decreasing"),
        ({"knots_y": [0.0, 7.0]}, r"knots_y of a binary calibration are probabilities between 0 and 1; got 0.0 .. 7.0"),
        ({"knots_y": [0.0]}, r"knots_x and knots_y must be two lists of numbers of the same length"),
        ({"knots_y": ["0", "1"]}, r"knots_y holds '0': every knot must be a finite number"),
    ],
)
def test_a_broken_calibration_file_is_refused_on_load_naming_it(tmp_path, capfd, change, message):
    data = {**_binary_calibration(), "knots_x": [4.0, 6.0], "knots_y": [0.0, 1.0]}  # the same map, shorter
    Calibration(**data)  # which is a valid one
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({**data, **change}))  # json writes NaN as NaN, as a hand-edited file may hold it
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))} is no usable calibration: {message}"):
        Calibration.load(path)
    result = _saved(tmp_path, S=[2, 4, 6, 8], q=["a", "b", "c", "d"])
    code, _, err = run_cli(capfd, "filter", result, "--min-prob", "S=0.5", "--calibration", path)
    assert code == 2 and f"{path} is no usable calibration" in err
    # in the result folder, where filter finds it by itself: not left out as "no calibration" but named
    (tmp_path / "result" / "calibration.json").write_text(path.read_text())
    code, _, err = run_cli(capfd, "filter", result, "--min-prob", "S=0.5")
    assert code == 2 and "calibration.json is no usable calibration" in err


# -- item 22: labels of one class ---------------------------------------------------------------------------------
def test_calibration_on_labels_of_one_class_warns_and_records_it(tmp_path, capfd):
    data = _saved(tmp_path, S=[1, 3, 5, 7, 8, 9], ok=[True] * 6)
    code, out, err = run_cli(capfd, "calibrate", data, "--score", "S", "--label", "ok", "-o", tmp_path / "c.json")
    assert code == 0, err
    assert "WARNING hf_judge: calibration of S: every label is positive: the map is a constant" in err
    assert "WARNING: every label is positive" in out and "(WARNING: labels of one class, see above)" in out
    saved = Calibration.load(tmp_path / "c.json")
    assert saved.warning is not None and saved.warning.startswith("every label is positive")
    # applied later, it warns again: the file carries it
    code, _, err = run_cli(capfd, "filter", data, "--calibration", tmp_path / "c.json", "-o", tmp_path / "f")
    assert code == 0 and "the calibration of S cannot be trusted: every label is positive" in err
    # two classes: no warning, none recorded
    ds = Dataset.from_dict({"S": [1, 3, 5, 7, 8, 9], "ok": [False, False, True, False, True, True]})
    assert calibrate(ds, "S", "ok", folds=2).warning is None
