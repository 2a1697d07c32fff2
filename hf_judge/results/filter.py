"""``filter_by_scores``: keep the rows whose scores pass thresholds."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from .calibrated import Calibrations, apply_calibration, as_calibrations
from .columns import ROW_NUMBER, score_columns
from .errors_split import ERRORS_SPLIT, errors_of_rows, is_errors_split
from .group_filter import filter_groups, group_rule
from .scored import ScoredDatasetDict


def check_threshold_columns(names: Sequence[str], columns: Sequence[str], where: str) -> None:
    """A ConfigError for the first of ``names`` not in ``columns``, with a did-you-mean.

    Example:
        >>> check_threshold_columns(["QA_Corectness"], ["QA_Correctness"], "filters")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: no score column 'QA_Corectness' in filters; did you mean 'QA_Correctness'? ...
    """
    for name in names:
        if name not in columns:
            close = difflib.get_close_matches(name, list(columns), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            have = ", ".join(columns) or "(none)"
            raise ConfigError(f"no score column {name!r} in {where}; {hint}Score columns: {have}")


def _check(ds: Dataset, names: list[str], split: str, verdicts: dict[str, bool]) -> None:
    check_threshold_columns(names, score_columns(ds) + [n for n in names if n in ds.column_names], f"split {split!r}")
    bad = [n for n in names if n not in score_columns(ds)]
    if bad:
        raise ConfigError(
            f"column {bad[0]!r} in split {split!r} is not numeric or boolean; thresholds apply to score columns"
        )
    for name, v in verdicts.items():
        if getattr(ds.features[name], "dtype", None) != "bool":
            raise ConfigError(
                f"threshold {name}={str(v).lower()}: true/false applies to a true/false score, and {name!r} in "
                f"split {split!r} is {ds.features[name].dtype}: give a number (min={{{name!r}: 8}}, --min {name}=8)"
            )


def filter_by_scores(
    ds: Dataset | DatasetDict,
    min: Mapping[str, float | bool] | None = None,  # noqa: A002 - the natural name for users
    max: Mapping[str, float | bool] | None = None,  # noqa: A002
    keep_missing: bool = False,
    *,
    min_prob: Mapping[str, float] | None = None,
    calibration: Calibrations | None = None,
    keep_groups: Mapping[str, Iterable[Any]] | None = None,
    drop_groups: Mapping[str, Iterable[Any]] | None = None,
    allow_other_judge: bool = False,
) -> Dataset | DatasetDict:
    """Keep rows with ``min[col] <= row[col] <= max[col]`` for every threshold (inclusive).

    ``keep_groups``: column -> the values to keep (``{"subject": ["algebra", "geometry"]}``), ``drop_groups``:
    column -> the values to drop; a value is named as the scores by group name it (:func:`hf_judge.overview`
    with ``by=``: a number or boolean as text, ``3``, ``true``; a null as ``(null)``), and one that the column
    does not hold is refused with a did-you-mean. They combine with the thresholds, or stand alone.

    ``min_prob``: score -> the lowest calibrated probability to keep (``{"QA_Correctness": 0.8}``), with
    ``calibration`` (a :class:`hf_judge.Calibration` of true/false labels, its ``calibration.json``, or a
    list of them): the result gets ``<score>_calibrated`` (:func:`hf_judge.apply_calibration`) and keeps
    the rows where it is >= the probability. A calibration with no threshold keeps every row and adds the
    column. A calibration fitted on another judge (or prompt) than the result's is refused unless
    ``allow_other_judge=True`` (:func:`hf_judge.apply_calibration`).

    A true/false score is filtered the way it is written: ``min={"Binary": True}`` keeps the true rows,
    ``max={"Binary": False}`` the false ones (false < true, as 0 < 1: ``min=False`` or ``max=True`` keeps
    both); a true/false threshold on a numeric score is an error. A numeric threshold on a true/false score
    compares it as 0/1.

    A row whose score is null (the metric failed) is dropped unless
    ``keep_missing``. A NaN score passes no threshold (``keep_missing`` keeps nulls, not NaN). On a
    ``DatasetDict`` every split is filtered, and the ``errors`` split keeps the error rows of the rows kept,
    each ``row`` renumbered as its row's place in the result (the summary records how many). The
    result of ``score_dataset`` stays a ``ScoredDatasetDict`` with its
    ``summary``, so ``.push_to_hub(repo)`` pushes it with its errors and card.

    Example:
        >>> from datasets import Dataset
        >>> ds = Dataset.from_dict({"QA_Correctness": [9, 3, None], "Binary": [True, False, True]})
        >>> list(filter_by_scores(ds, min={"QA_Correctness": 8})["QA_Correctness"])
        [9]
        >>> list(filter_by_scores(ds, max={"Binary": False})["QA_Correctness"])
        [3]
    """
    numbered = _numbered(ds)
    out = _filtered(
        numbered, original=ds, min=min, max=max, keep_missing=keep_missing, min_prob=min_prob,
        calibration=calibration, keep_groups=keep_groups, drop_groups=drop_groups,
        allow_other_judge=allow_other_judge,
    )  # fmt: skip
    return out if numbered is ds else _errors_in_step(out, ds)


def _numbered(ds: Dataset | DatasetDict) -> Dataset | DatasetDict:
    """A result with error rows (hf-judge's), each other split with its rows' numbers (``ROW_NUMBER``), so that
    the errors split can follow the rows the filter keeps; anything else as it is."""
    errors = ds.get(ERRORS_SPLIT) if isinstance(ds, DatasetDict) else None
    if errors is None or not len(errors) or not is_errors_split(errors.column_names):
        return ds
    out = type(ds)(ds)  # a ScoredDatasetDict stays one, with its summary
    if hasattr(ds, "summary"):
        out.summary = ds.summary
    for split, d in ds.items():
        if split != ERRORS_SPLIT:
            out[split] = d.add_column(ROW_NUMBER, np.arange(len(d), dtype=np.int64))
    return out


def _errors_in_step(out: Dataset | DatasetDict, ds: Dataset | DatasetDict) -> Dataset | DatasetDict:
    """``out`` without the row numbers, its errors split those of the rows it kept, renumbered (it kept every
    error row, with the numbers of rows it had dropped or moved: a reader charged them to the wrong rows)."""
    assert isinstance(out, DatasetDict) and isinstance(ds, DatasetDict)
    kept = {k: d.with_format("arrow")[ROW_NUMBER].to_numpy() for k, d in out.items() if k != ERRORS_SPLIT}
    for split in kept:
        out[split] = out[split].remove_columns(ROW_NUMBER)
    before = ds[ERRORS_SPLIT]
    out[ERRORS_SPLIT] = errors_of_rows(before, kept, {k: len(d) for k, d in ds.items() if k != ERRORS_SPLIT})
    summary = getattr(out, "summary", None)
    if summary is not None and summary.filters:
        summary.filters["error_rows"] = {"before": len(before), "kept": len(out[ERRORS_SPLIT])}
    return out


def _filtered(
    ds: Dataset | DatasetDict,
    *,
    original: Dataset | DatasetDict,
    min: Mapping[str, float | bool] | None,  # noqa: A002
    max: Mapping[str, float | bool] | None,  # noqa: A002
    keep_missing: bool,
    min_prob: Mapping[str, float] | None,
    calibration: Calibrations | None,
    keep_groups: Mapping[str, Iterable[Any]] | None,
    drop_groups: Mapping[str, Iterable[Any]] | None,
    allow_other_judge: bool,
) -> Dataset | DatasetDict:
    lo = dict(min or {})
    hi = dict(max or {})
    groups = group_rule(keep_groups, drop_groups)
    if groups:
        ds = filter_groups(ds, groups)
    if min_prob or calibration is not None:
        ds, probs = _calibrated(ds, dict(min_prob or {}), calibration, allow_other_judge)
        lo.update(probs)
        if not lo and not hi:  # a calibration alone: every row, with its calibrated column
            return ds
    if not lo and not hi and groups:
        return _recorded(ds, original, lo, hi, keep_missing, groups)
    if not lo and not hi:
        raise ConfigError(
            "give at least one threshold: min={'QA_Correctness': 8} (CLI: --min QA_Correctness=8), or groups to "
            "keep: keep_groups={'subject': ['algebra']} (CLI: --keep-group subject=algebra)"
        )
    verdicts = {}
    for name, v in [*lo.items(), *hi.items()]:
        if isinstance(v, bool):
            verdicts[name] = v
            continue
        if not isinstance(v, (int, float)):
            raise ConfigError(f"threshold for {name!r} must be a number or true/false, got {v!r}")
        if not math.isfinite(v):  # nan compares false with everything: it would keep every row
            raise ConfigError(f"threshold for {name!r} must be a finite number, got {v!r}")
    names = sorted(set(lo) | set(hi))
    if isinstance(ds, DatasetDict):
        for split, d in ds.items():
            if split != "errors":
                _check(d, names, split, verdicts)
        out = DatasetDict(
            {split: d if split == "errors" else _filter(d, lo, hi, names, keep_missing) for split, d in ds.items()}
        )
        return _recorded(out, original, lo, hi, keep_missing, groups)
    _check(ds, names, "train", verdicts)
    return _filter(ds, lo, hi, names, keep_missing)


def _recorded(
    out: Dataset | DatasetDict, original: Dataset | DatasetDict, lo: dict, hi: dict, keep_missing: bool, groups: dict
) -> Dataset | DatasetDict:
    """``out``, where ``original`` is a scored result, as one with its summary: its card keeps the provenance and
    adds the thresholds and groups, and the rows before and after."""
    summary = getattr(original, "summary", None)
    if summary is None or not isinstance(out, DatasetDict):
        return out

    scored = ScoredDatasetDict(out)
    rows = {k: len(v) for k, v in original.items() if k != "errors"}
    scored.summary = summary.with_filter(lo, hi, keep_missing, rows, {k: len(out[k]) for k in rows}, groups)
    return scored


def _calibrated(
    ds: Dataset | DatasetDict, min_prob: dict[str, float], calibration: Calibrations | None, allow_other_judge: bool
) -> tuple[Dataset | DatasetDict, dict[str, float]]:
    """The dataset with the calibrated columns, and the thresholds on them that ``min_prob`` asks for."""
    cals = as_calibrations(calibration)
    if not cals:
        raise ConfigError(
            "min_prob needs the calibration that turns scores into probabilities: calibration='calibration.json' "
            "(CLI: --calibration FILE, saved by hf-judge calibrate)"
        )
    out = {}
    for name, p in min_prob.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ConfigError(f"min_prob for {name!r} must be a probability between 0 and 1, got {p!r}")
        cal = cals.get(name.removesuffix("_calibrated"))
        if cal is None:
            raise ConfigError(f"no calibration of {name!r}: the calibrations are of {', '.join(sorted(cals))}")
        if cal.kind != "binary":
            raise ConfigError(
                f"the calibration of {cal.score!r} maps to a human score, not a probability: "
                f"use min={{'{cal.output}': 7}} (CLI: --min {cal.output}=7)"
            )
        out[cal.output] = float(p)
    return apply_calibration(ds, cals, allow_other_judge=allow_other_judge), out


def _filter(ds: Dataset, lo: dict, hi: dict, names: list[str], keep_missing: bool) -> Dataset:
    def keep(batch: dict) -> list[bool]:
        n = len(batch[names[0]])
        out = [True] * n
        for name in names:
            col = batch[name]
            a, b = lo.get(name), hi.get(name)
            for i in range(n):
                v = col[i]
                if v is None:
                    if not keep_missing:
                        out[i] = False
                elif v != v or (a is not None and v < a) or (b is not None and v > b):  # v != v: NaN
                    out[i] = False
        return out

    return ds.filter(keep, batched=True, input_columns=None, desc="Filtering")
