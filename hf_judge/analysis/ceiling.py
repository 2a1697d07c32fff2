"""The human ceiling: how far people agree with each other on the labels a judge is measured against.

A judge that agrees with one annotator 70% of the time is doing well when annotators agree with each other
72% of the time, and badly when they agree 95%. :func:`human_ceiling` gives the two figures the published
judge leaderboards give: the leave-one-out agreement (AlpacaEval's "human agreement": one annotator against
the majority of the others) with a seeded bootstrap interval over rows, and Krippendorff's alpha
(:mod:`hf_judge.analysis.alpha`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from . import stats
from .alpha import alpha_of_counts

# the level of measurement of Krippendorff's alpha for each kind of label
LEVELS = {"binary": "nominal", "pairwise": "nominal", "numeric": "ordinal"}


def human_ceiling(
    labels: Sequence[Sequence[Any]],
    kind: str,
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The agreement among annotators on ``labels`` (rows x annotators, None where an annotator gave none).

    ``loo_agreement``: leave-one-out, as AlpacaEval reports for its humans: for every label on a row with at
    least one other label, the annotator is compared with the majority (the mode) of the *others'* labels on
    that row; the figure is the mean over all such (row, annotator) comparisons. Ties: when the others' labels
    have several modes (one says "1", one says "2"), the comparison scores 1/m if the annotator's label is one
    of the m modes, else 0: the expected value of AlpacaEval's random choice among the modes, without its
    randomness. Labels are compared as they are written (``"tie"`` is a value like any other); ratings
    (``kind="numeric"``) agree when equal.
    ``interval``: the percentile bootstrap interval of ``loo_agreement`` over rows (``resamples``, ``seed``: the
    same seed gives the same interval, as in :mod:`hf_judge.analysis.stats`), None without resamples.
    ``alpha``: Krippendorff's alpha of the same labels, ``alpha_level`` its level: nominal for
    ``kind`` "binary" or "pairwise", ordinal for "numeric" ratings.
    ``annotators``: the number of annotator columns; ``rows``: the rows with at least two labels (the only
    rows either figure can use); ``comparisons``: the (row, annotator) comparisons behind ``loo_agreement``.

    Example:
        >>> c = human_ceiling([["1", "1", "2"], ["2", "2", "2"], ["1", None, "1"]], "pairwise", resamples=0)
        >>> round(c["loo_agreement"], 4), c["rows"], c["annotators"], round(c["alpha"], 4)
        (0.75, 3, 3, 0.5625)
    """
    if kind not in LEVELS:
        raise ConfigError(f"kind must be one of {', '.join(LEVELS)}, got {kind!r}")
    table = [list(row) for row in labels]
    width = max((len(row) for row in table), default=0)
    if any(len(row) != width for row in table):
        raise ConfigError("labels must be rows x annotators, every row as long (None where an annotator gave none)")
    counts, values = label_counts(table)
    return ceiling_of_counts(
        counts, values, kind, annotators=width, resamples=resamples, seed=seed, confidence=confidence
    )


def label_counts(table: Sequence[Sequence[Any]]) -> tuple[np.ndarray, list[Any]]:
    """A rows x annotators table as counts: rows x values, how many annotators gave each value on each row, and
    the distinct values (numbers sorted by value, then text). 1, 1.0 and True are one value, as alpha counts them.

    Example:
        >>> counts, values = label_counts([["1", "2", None], ["2", "2", "2"]])
        >>> counts.tolist(), values
        ([[1, 1], [0, 3]], ['1', '2'])
    """
    keys = [[_key(v) for v in row if _value(v) is not None] for row in table]
    values = sorted({v for row in keys for v in row}, key=lambda v: (isinstance(v, str), v))
    index = {v: i for i, v in enumerate(values)}
    counts = np.zeros((len(keys), len(values)), dtype=np.int64)
    for i, row in enumerate(keys):
        for v in row:
            counts[i, index[v]] += 1
    return counts, values


def ceiling_of_counts(
    counts: np.ndarray,
    values: Sequence[Any],
    kind: str,
    *,
    annotators: int,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """:func:`human_ceiling` from ``counts`` (rows x values: how many annotators gave each of ``values`` on
    each row, as :func:`label_counts` gives them) and the number of ``annotators``: time and memory grow with
    the rows and values, never with the annotators per row (25,000 reviewers of 40 rows: a 40 x 2 matrix).

    Example:
        >>> c = ceiling_of_counts(np.array([[2, 1], [0, 3], [2, 0]]), ["1", "2"], "pairwise", annotators=3,
        ...                       resamples=0)
        >>> round(c["loo_agreement"], 4), c["rows"], c["comparisons"]
        (0.75, 3, 8)
    """
    if kind not in LEVELS:
        raise ConfigError(f"kind must be one of {', '.join(LEVELS)}, got {kind!r}")
    counts = np.asarray(counts, dtype=np.int64).reshape(-1, len(values))
    sums, compared = _loo(counts)
    used = compared > 0
    total = int(compared.sum())
    ceiling: dict[str, Any] = {
        "loo_agreement": float(sums.sum() / total) if total else None,
        "interval": None,
        "alpha": None,
        "alpha_level": LEVELS[kind],
        "annotators": annotators,
        "rows": int(used.sum()),
        "comparisons": total,
    }
    if total and resamples:
        s, c = sums[used], compared[used]
        rows = stats.resample_rows(len(s), resamples, seed)
        ci = stats.percentile_interval(s[rows].sum(axis=1) / c[rows].sum(axis=1), confidence)
        ceiling["interval"] = list(ci) if ci else None
    if annotators >= 2 and len(counts):
        ceiling["alpha"] = alpha_of_counts(counts, values, LEVELS[kind])
    return ceiling


def _value(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and v != v) else v


def _loo(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the summed agreement of each label with the others' mode(s), and the number of such labels (0
    and 0 for a row of fewer than two labels). A value at a time over all rows at once: an annotator who gave
    value j sees the row's counts less one j; the ties among the others' modes score 1/m."""
    sums = np.zeros(len(counts))
    m = counts.sum(axis=1)
    pairable = m >= 2
    for j in range(counts.shape[1]):
        others = counts.copy()
        others[:, j] -= 1
        top = others.max(axis=1)
        modes = (others == top[:, None]).sum(axis=1)
        hit = (others[:, j] == top) & (counts[:, j] > 0) & pairable
        sums += np.where(hit, counts[:, j] / np.maximum(modes, 1), 0.0)
    return sums, np.where(pairable, m, 0)


def _key(v: Any) -> Any:
    """One key per label value: 1, 1.0 and True are one rating, as alpha counts them; text as written."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    return str(v)
