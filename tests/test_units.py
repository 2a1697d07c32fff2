"""Unit tests with exact expected values: the card's column statistics and ``filter_by_scores``.

No server, no clock: each test builds a small in-memory Dataset and checks every number.
"""

from __future__ import annotations

import math

import pytest
from datasets import Dataset, DatasetDict, Features, Value

from hf_judge import ConfigError, filter_by_scores
from hf_judge.results.card import column_stats


def _ds(values, dtype: str) -> Dataset:
    return Dataset.from_dict({"s": values}, features=Features({"s": Value(dtype)}))


# -- column_stats -------------------------------------------------------------------------------------------------
def test_column_stats_ints_with_nulls():
    # pyarrow's quantiles interpolate linearly between the sorted values [1, 2, 3, 4, 10]:
    # p10 at position 0.4 -> 1.4, p50 at 2 -> 3, p90 at 3.6 -> 4 + 0.6 * 6 = 7.6
    stats = column_stats(_ds([1, 2, None, 3, 4, None, 10], "int64"), "s")
    assert stats == {
        "count": 5,
        "null": 2,
        "mean": 4.0,
        "min": 1.0,
        "p10": pytest.approx(1.4),
        "p50": 3.0,
        "p90": pytest.approx(7.6),
        "max": 10.0,
        "hist": {1: 1, 2: 1, 3: 1, 4: 1, 10: 1},
    }


def test_column_stats_int_histogram_counts_each_value_in_order():
    stats = column_stats(_ds([7, 3, 7, 7, 3, 9], "int8"), "s")
    assert stats["hist"] == {3: 2, 7: 3, 9: 1} and list(stats["hist"]) == [3, 7, 9]
    assert stats["mean"] == 6.0 and stats["count"] == 6 and stats["null"] == 0


def test_column_stats_floats_use_ten_equal_bins_labelled_by_their_lower_edge():
    stats = column_stats(_ds([0.0, 0.45, 1.0, None], "float64"), "s")
    assert stats["count"] == 3 and stats["null"] == 1
    assert stats["mean"] == pytest.approx(1.45 / 3) and stats["min"] == 0.0 and stats["max"] == 1.0
    assert stats["p50"] == 0.45
    assert stats["hist"] == {"0.00": 1, "0.40": 1, "0.90": 1}  # the maximum falls in the last bin, not an 11th


def test_column_stats_floats_on_half_points_get_a_bar_per_value():
    # a pairwise judge's score is the mean of its two orders' integer scores: 1, 1.5, ..., 10, one bar each
    stats = column_stats(_ds([1.0, 1.5, 1.5, 10.0, None], "float64"), "s")
    assert stats["hist"] == {"1": 1, "1.5": 2, "10": 1}


def test_column_stats_counts_a_nan_score_with_the_nulls():
    # a NaN in a float score (a user's own column, a calibration gone wrong) is no score: the card's figures and
    # histogram are those of the real values, and the NaN is counted as missing (it made the card fail before)
    stats = column_stats(_ds([0.0, float("nan"), 1.0, None], "float64"), "s")
    assert stats["count"] == 2 and stats["null"] == 2 and stats["mean"] == 0.5
    assert stats["hist"] == {"0": 1, "1": 1}  # the real values, on a grid of whole numbers: a bar each
    assert column_stats(_ds([float("nan")], "float32"), "s") == {"count": 0, "null": 1}


def test_column_stats_constant_floats_are_one_bin():
    stats = column_stats(_ds([2.5, 2.5, 2.5], "float32"), "s")
    assert stats["hist"] == {"2.5": 3} and stats["min"] == stats["max"] == stats["p50"] == 2.5


def test_column_stats_bools_count_true_and_false():
    stats = column_stats(_ds([True, False, True, None], "bool"), "s")
    assert stats == {"count": 3, "null": 1, "mean": 2 / 3, "hist": {"true": 2, "false": 1}}


@pytest.mark.parametrize("dtype", ["int64", "float64", "bool"])
def test_column_stats_all_null_has_counts_only(dtype):
    assert column_stats(_ds([None, None, None], dtype), "s") == {"count": 0, "null": 3}


def test_column_stats_of_a_selection_counts_the_selected_rows_only():
    ds = _ds([1, 2, 3, 4, None], "int64").select([0, 3, 4])  # an indices mapping over the full table
    assert column_stats(ds, "s") == {
        "count": 2,
        "null": 1,
        "mean": 2.5,
        "min": 1.0,
        "p10": pytest.approx(1.3),
        "p50": 2.5,
        "p90": pytest.approx(3.7),
        "max": 4.0,
        "hist": {1: 1, 4: 1},
    }


# -- filter_by_scores ---------------------------------------------------------------------------------------------
def test_filter_min_and_max_are_inclusive():
    ds = _ds(list(range(1, 11)), "int64")
    assert filter_by_scores(ds, min={"s": 3}, max={"s": 7})["s"] == [3, 4, 5, 6, 7]
    assert filter_by_scores(ds, min={"s": 10})["s"] == [10]
    assert filter_by_scores(ds, max={"s": 1})["s"] == [1]
    assert filter_by_scores(ds, min={"s": 3.5})["s"] == [4, 5, 6, 7, 8, 9, 10]


def test_filter_every_threshold_must_pass():
    ds = Dataset.from_dict({"a": [9, 9, 2, 2], "b": [1.0, 8.0, 8.0, 1.0]})
    assert filter_by_scores(ds, min={"a": 5, "b": 5}).to_dict() == {"a": [9], "b": [8.0]}
    assert filter_by_scores(ds, min={"a": 5}, max={"b": 5}).to_dict() == {"a": [9], "b": [1.0]}


def test_filter_drops_nulls_unless_keep_missing():
    ds = _ds([5, None, 2, None], "int64")
    assert filter_by_scores(ds, min={"s": 3})["s"] == [5]
    assert filter_by_scores(ds, min={"s": 3}, keep_missing=True)["s"] == [5, None, None]


def test_filter_booleans_compare_as_0_and_1():
    ds = _ds([True, False, None, True], "bool")
    assert filter_by_scores(ds, min={"s": 1})["s"] == [True, True]
    assert filter_by_scores(ds, max={"s": 0})["s"] == [False]
    assert filter_by_scores(ds, min={"s": 0.5})["s"] == [True, True]
    assert filter_by_scores(ds, min={"s": 0}, keep_missing=True)["s"] == [True, False, None, True]


def test_filter_dataset_dict_filters_every_split_and_passes_errors_through():
    errors = Dataset.from_dict({"split": ["train"], "row": [1], "metric": ["s"], "kind": ["timeout"]})
    dd = DatasetDict(
        {
            "train": _ds([1, None, 9], "int64"),
            "test": _ds([8, 2], "int64"),
            "errors": errors,  # no score column: it is not checked, not filtered
        }
    )
    out = filter_by_scores(dd, min={"s": 5})
    assert isinstance(out, DatasetDict) and list(out) == ["train", "test", "errors"]
    assert out["train"]["s"] == [9] and out["test"]["s"] == [8]
    assert out["errors"].to_dict() == errors.to_dict()


def test_filter_unknown_column_names_the_split_and_suggests_the_close_name():
    ds = Dataset.from_dict({"QA_Correctness": [9, 3], "text": ["a", "b"]})
    with pytest.raises(ConfigError) as e:
        filter_by_scores(ds, min={"QA_Corectness": 8})
    assert str(e.value) == (
        "no score column 'QA_Corectness' in split 'train'; did you mean 'QA_Correctness'? Score columns: QA_Correctness"
    )
    with pytest.raises(ConfigError, match=r"no score column 'nope' in split 'test'; Score columns: s$"):
        filter_by_scores(DatasetDict({"test": _ds([1], "int64")}), max={"nope": 1})


def test_filter_on_a_text_column_says_thresholds_need_scores():
    ds = Dataset.from_dict({"QA_Correctness": [9, 3], "text": ["a", "b"]})
    with pytest.raises(ConfigError) as e:
        filter_by_scores(ds, min={"text": 1})
    assert str(e.value) == "column 'text' in split 'train' is not numeric or boolean; thresholds apply to score columns"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_filter_rejects_a_non_finite_threshold(bad):
    # nan compares false with everything: it would keep every row silently
    with pytest.raises(ConfigError, match=r"threshold for 's' must be a finite number, got (nan|inf|-inf)"):
        filter_by_scores(_ds([1, 2], "int64"), min={"s": bad})


@pytest.mark.parametrize("bad", ["8", None])
def test_filter_rejects_a_threshold_that_is_not_a_number(bad):
    with pytest.raises(ConfigError, match=r"threshold for 's' must be a number or true/false, got "):
        filter_by_scores(_ds([1, 2], "int64"), max={"s": bad})


def test_filter_needs_a_threshold():
    with pytest.raises(ConfigError, match="give at least one threshold"):
        filter_by_scores(_ds([1, 2], "int64"))


def test_a_misspelt_metric_names_the_closest_one():
    """`--metrics Q_Clarty`: the error suggests the metric meant, and still lists every one."""
    from hf_judge import UnknownMetricError, load_metric

    with pytest.raises(UnknownMetricError, match=r"unknown metric 'Q_Clarty'\. Did you mean 'Q_Clarity'\? Known"):
        load_metric("Q_Clarty")
    with pytest.raises(UnknownMetricError) as e:
        load_metric("Nothing_Like_It")
    assert "Did you mean" not in str(e.value) and "Known metrics: Binary" in str(e.value)
