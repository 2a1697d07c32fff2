"""Krippendorff's alpha in numpy: agreement among several raters (a judge panel, human reviewers) that
allows missing ratings and any number of raters per unit.

alpha = 1 - D_o / D_e, the disagreement observed within units over the disagreement expected by chance,
from the coincidence matrix of the values (Krippendorff, "Computing Krippendorff's Alpha-Reliability",
2011). Levels of measurement: ``nominal`` (verdicts, winners: any two different values disagree equally),
``ordinal`` (ranks: the distance counts the values between), ``interval`` (scores: the squared
difference), ``ratio``. ``tests/test_calibration.py`` checks it against the ``krippendorff`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError

LEVELS = ("nominal", "ordinal", "interval", "ratio")


def krippendorff_alpha(ratings: Sequence[Sequence[Any]] | np.ndarray, level: str = "interval") -> float | None:
    """Krippendorff's alpha of ``ratings``, one row per rater, one column per unit (row of data), None or
    NaN where a rater gave no value. Units with fewer than two values are left out (nothing to compare).
    None when undefined: fewer than two pairable values, or every value the same.

    Example:
        >>> round(krippendorff_alpha([[1, 2, 3, 3], [1, 2, 3, 4]], "interval"), 4)
        0.8889
        >>> krippendorff_alpha([["yes", "no", None], ["yes", "no", "no"]], "nominal")
        1.0
    """
    if level not in LEVELS:
        raise ConfigError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if level == "interval":
        return _interval(_floats(ratings))
    codes, values = _codes(ratings, numeric=level != "nominal")
    if codes.size == 0:
        return None
    counts = np.zeros((codes.shape[1], len(values)))  # units x values: how many raters gave each value
    for rater in codes:
        given = rater >= 0
        np.add.at(counts, (np.nonzero(given)[0], rater[given]), 1)
    return alpha_of_counts(counts, values, level)


def alpha_of_counts(counts: np.ndarray, values: np.ndarray | Sequence[Any], level: str = "nominal") -> float | None:
    """Krippendorff's alpha from ``counts``, units x values: how many raters gave each value on each unit
    (``values``: the distinct values, numbers sorted for ``ordinal`` and ``ratio``). Memory and time grow with
    the units and values, not the raters: 25,000 reviewers of 40 rows is a 40 x k matrix. None when undefined.

    Example:
        >>> round(alpha_of_counts(np.array([[2, 0], [0, 2], [1, 1]]), ["yes", "no"], "nominal"), 4)
        0.4444
    """
    if level not in LEVELS or level == "interval":
        raise ConfigError(f"level must be nominal, ordinal or ratio from counts, got {level!r}")
    values = np.asarray(values, dtype=object if level == "nominal" else np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0:
        return None
    m = counts.sum(axis=1)
    counts, m = counts[m >= 2], m[m >= 2]
    if not len(m):
        return None
    # o[c, k] = sum over units of n_uc * n_uk (c == k: n_uc * (n_uc - 1)) / (m_u - 1)
    weighted = counts / (m - 1)[:, None]
    o = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    delta = _distances(values, n_c, level)
    expected = (np.outer(n_c, n_c) * delta).sum()
    if n <= 1 or expected == 0:
        return None
    return float(1.0 - (n - 1) * (o * delta).sum() / expected)


def _floats(ratings: Any) -> np.ndarray:
    """The ratings as a raters x units float array, NaN where missing."""
    if isinstance(ratings, np.ndarray) and ratings.dtype.kind == "f":
        return ratings.astype(np.float64, copy=False)
    try:
        return np.array([[np.nan if v is None else float(v) for v in r] for r in ratings], dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError("ordinal, interval and ratio alpha need numbers; use level='nominal'") from None


def _interval(x: np.ndarray) -> float | None:
    """Interval alpha without the coincidence matrix (whose size grows with the distinct values: a mean of
    samples, an expected score): within a unit of m values, the sum of squared differences over ordered pairs
    is 2 (m * sum(x^2) - sum(x)^2); over all pairable values alike."""
    if x.ndim != 2 or not x.size:
        return None
    given = ~np.isnan(x)
    m = given.sum(axis=0)
    keep = m >= 2
    if not keep.any():
        return None
    v = np.where(given, x, 0.0)[:, keep]
    m = m[keep].astype(np.float64)
    s1, s2 = v.sum(axis=0), (v * v).sum(axis=0)
    within = (2 * (m * s2 - s1 * s1) / (m - 1)).sum()
    n, t1, t2 = m.sum(), s1.sum(), s2.sum()
    total = 2 * (n * t2 - t1 * t1)
    if n <= 1 or total <= 1e-12 * max(1.0, n * t2):
        return None
    return float(1.0 - (n - 1) * within / total)


def _codes(ratings: Any, numeric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each rating as the index of its value among the sorted distinct values (-1: missing)."""
    rows = [list(r) for r in ratings]
    if not rows:
        return np.empty((0, 0), dtype=np.int64), np.empty(0)
    width = {len(r) for r in rows}
    if len(width) != 1:
        raise ConfigError(f"every rater needs a value (or None) for every unit; got rows of lengths {sorted(width)}")

    def missing(v: Any) -> bool:
        return v is None or (isinstance(v, float) and np.isnan(v))

    if numeric:  # vectorised: a panel's columns over a million rows
        try:
            arr = np.array([[np.nan if missing(v) else float(v) for v in r] for r in rows], dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError("ordinal, interval and ratio alpha need numbers; use level='nominal'") from None
        given = ~np.isnan(arr)
        values, inverse = np.unique(arr[given], return_inverse=True)
        codes = np.full(arr.shape, -1, dtype=np.int64)
        codes[given] = inverse
        return codes, values
    present = sorted({v for r in rows for v in r if not missing(v)}, key=lambda v: (str(type(v)), v))
    index = {v: i for i, v in enumerate(present)}
    codes = np.array([[-1 if missing(v) else index[v] for v in r] for r in rows], dtype=np.int64)
    return codes, np.array(present, dtype=object)


def _distances(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    k = len(values)
    if level == "nominal":
        return 1.0 - np.eye(k)
    v = values.astype(np.float64)
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if level == "ratio":
        total = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = ((v[:, None] - v[None, :]) / total) ** 2
        return np.nan_to_num(d)
    # ordinal: (the values' counts from c to k, less half of the two ends)^2
    cum = np.cumsum(n_c)
    i, j = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
    between = cum[j] - np.where(i > 0, cum[i - 1], 0.0)
    return (between - (n_c[i] + n_c[j]) / 2) ** 2
