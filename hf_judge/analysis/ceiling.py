"""The human ceiling: how far people agree with each other on the labels a judge is measured against.

A judge that agrees with one annotator 70% of the time is doing well when annotators agree with each other
72% of the time, and badly when they agree 95%. :func:`human_ceiling` gives the two figures the published
judge leaderboards give: the leave-one-out agreement (AlpacaEval's "human agreement": one annotator against
the majority of the others) with a seeded bootstrap interval over rows, and Krippendorff's alpha
(:mod:`hf_judge.analysis.alpha`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from . import stats
from .alpha import krippendorff_alpha

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
    sums, counts = _loo(table)
    used = counts > 0
    total = int(counts.sum())
    ceiling: dict[str, Any] = {
        "loo_agreement": float(sums.sum() / total) if total else None,
        "interval": None,
        "alpha": None,
        "alpha_level": LEVELS[kind],
        "annotators": width,
        "rows": int(used.sum()),
        "comparisons": total,
    }
    if total and resamples:
        s, c = sums[used], counts[used]
        rows = stats.resample_rows(len(s), resamples, seed)
        ci = stats.percentile_interval(s[rows].sum(axis=1) / c[rows].sum(axis=1), confidence)
        ceiling["interval"] = list(ci) if ci else None
    raters = [[_value(row[j]) for row in table] for j in range(width)]  # alpha reads raters x units
    if width >= 2 and table:
        ceiling["alpha"] = krippendorff_alpha(raters, LEVELS[kind])
    return ceiling


def _value(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and v != v) else v


def _loo(table: list[list[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the summed agreement of each label with the others' mode(s), and the number of such labels."""
    sums, counts = np.zeros(len(table)), np.zeros(len(table), dtype=np.int64)
    for i, row in enumerate(table):
        given = [_key(v) for v in row if _value(v) is not None]
        if len(given) < 2:
            continue
        for j, mine in enumerate(given):
            others = Counter(given[:j] + given[j + 1 :])
            top = max(others.values())
            modes = [v for v, c in others.items() if c == top]
            sums[i] += 1.0 / len(modes) if mine in modes else 0.0
            counts[i] += 1
    return sums, counts


def _key(v: Any) -> Any:
    """One key per label value: 1, 1.0 and True are one rating, as alpha counts them; text as written."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    return str(v)
