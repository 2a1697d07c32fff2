"""Agreement statistics on two aligned arrays, in numpy.

numpy comes with datasets, so the agreement report needs no new dependency:
scipy is ~110 MB installed, and ``scipy.stats`` ~1 s to import, for the
handful of formulas used here. Each function matches its scipy / scikit-learn
counterpart (``tests/test_agreement.py`` compares them on fixed data with ties,
constant columns and missing values), with one difference: a figure that is
undefined (a constant column's correlation, a precision with no predicted
positive) is ``None``, not ``nan`` and a warning.
The inputs hold no missing values (:mod:`hf_judge.analysis.agreement` drops them first), except in
:func:`over_all_rows`, where a row the judge did not decide counts as not agreeing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Stat = Callable[..., "float | None"]


def rankdata(x: np.ndarray) -> np.ndarray:
    """Average ranks, 1-based, ties sharing the mean of their ranks (scipy's ``rankdata``).

    Example:
        >>> rankdata(np.array([10, 20, 20, 5])).tolist()
        [2.0, 3.5, 3.5, 1.0]
    """
    order = np.argsort(x, kind="mergesort")
    inverse = np.empty(len(x), dtype=np.intp)
    inverse[order] = np.arange(len(x))
    xs = x[order]
    starts = np.r_[True, xs[1:] != xs[:-1]]
    dense = np.cumsum(starts)[inverse]
    bounds = np.r_[np.nonzero(starts)[0], len(x)]
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r; None when either column is constant (or fewer than 2 pairs).

    Example:
        >>> pearson(np.array([1, 2, 3]), np.array([2, 4, 7]))
        0.9933992677987828
    """
    if len(x) < 2:
        return None
    xm, ym = x - x.mean(), y - y.mean()
    den = np.sqrt((xm @ xm) * (ym @ ym))
    if den == 0:
        return None
    return float(np.clip((xm @ ym) / den, -1.0, 1.0))


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks.

    Example:
        >>> spearman(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4]))
        0.8
    """
    return pearson(rankdata(x), rankdata(y))


def _tied_pairs(x: np.ndarray) -> int:
    _, counts = np.unique(x, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _inversions(r: np.ndarray) -> int:
    """Pairs i < j with r[i] > r[j], for non-negative ints: a bottom-up merge sort, one vectorised pass
    per level (O(n log² n)), because Kendall's tau on a few thousand rows is bootstrapped a thousand times."""
    n = len(r)
    span = int(r.max()) + 1 if n else 1
    a = r.astype(np.int64)
    idx = np.arange(n)
    total = 0
    width = 1
    while width < n:
        block = idx // (2 * width)
        right = (idx % (2 * width)) >= width
        # each half is sorted: offset by its block, the left halves form one sorted array
        left_keys = block[~right] * span + a[~right]
        rb, rv = block[right], a[right]
        above = np.searchsorted(left_keys, (rb + 1) * span, "left") - np.searchsorted(
            left_keys, rb * span + rv, "right"
        )
        total += int(above.sum())
        a = np.sort(block * span + a) % span
        width *= 2
    return total


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float | None:
    """Kendall's tau-b (ties in either column corrected for, as scipy's ``kendalltau``); None if undefined.

    Example:
        >>> kendall_tau_b(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4]))
        0.6666666666666666
    """
    n = len(x)
    if n < 2:
        return None
    pairs = n * (n - 1) // 2
    tx, ty = _tied_pairs(x), _tied_pairs(y)
    txy = _tied_pairs(x.astype(np.float64) + 1j * y.astype(np.float64)) if tx and ty else 0
    den = (pairs - tx) * (pairs - ty)
    if den == 0:
        return None
    order = np.lexsort((y, x))  # by x, then y: pairs tied in x are never counted discordant
    _, ranks = np.unique(y[order], return_inverse=True)
    discordant = _inversions(ranks)
    concordant = pairs - tx - ty + txy - discordant
    return float((concordant - discordant) / np.sqrt(float(den)))


def mae(x: np.ndarray, y: np.ndarray) -> float | None:
    """Mean absolute error.

    Example:
        >>> mae(np.array([1, 2, 3]), np.array([1, 4, 3]))
        0.6666666666666666
    """
    return float(np.abs(x - y).mean()) if len(x) else None


def confusion_matrix(truth: np.ndarray, pred: np.ndarray, labels: Sequence) -> np.ndarray:
    """Counts: row = the true label's index in ``labels``, column = the prediction's (scikit-learn's layout).

    Example:
        >>> confusion_matrix(np.array([1, 1, 2]), np.array([1, 2, 2]), [1, 2]).tolist()
        [[1, 1], [0, 1]]
    """
    lookup = np.asarray(labels)
    k = len(lookup)
    order = np.argsort(lookup, kind="mergesort")
    t = order[np.searchsorted(lookup, truth, sorter=order)]
    p = order[np.searchsorted(lookup, pred, sorter=order)]
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k)


def cohen_kappa(truth: np.ndarray, pred: np.ndarray, labels: Sequence, quadratic: bool = False) -> float | None:
    """Cohen's kappa over ``labels``; ``quadratic``: weighted by the squared distance of the label *values*
    (for integer scores give the whole range, so a 1-vs-10 miss weighs 81 even if no row scored 2 to 9).

    Example:
        >>> cohen_kappa(np.array([1, 2, 3, 3]), np.array([1, 2, 3, 2]), [1, 2, 3])
        0.6363636363636364
    """
    cm = confusion_matrix(truth, pred, labels).astype(np.float64)
    n = cm.sum()
    if n == 0:
        return None
    expected = np.outer(cm.sum(axis=1), cm.sum(axis=0)) / n
    if quadratic:
        v = np.asarray(labels, dtype=np.float64)
        w = (v[:, None] - v[None, :]) ** 2
    else:
        w = 1.0 - np.eye(len(labels))
    den = (w * expected).sum()
    if den == 0:
        return None
    return float(1.0 - (w * cm).sum() / den)


def binary_scores(truth: np.ndarray, pred: np.ndarray) -> dict[str, float | None]:
    """Accuracy, precision, recall, F1 and Cohen's kappa of boolean predictions against boolean labels.

    Example:
        >>> binary_scores(np.array([True, True, False, False]), np.array([True, False, False, True]))["f1"]
        0.5
    """
    n = len(truth)
    tp = int((truth & pred).sum())
    fp = int((~truth & pred).sum())
    fn = int((truth & ~pred).sum())
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {
        "accuracy": float((truth == pred).mean()) if n else None,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "cohen_kappa": cohen_kappa(truth, pred, [False, True]),
    }


def bootstrap(
    stat: Callable[[np.ndarray, np.ndarray], float | None],
    x: np.ndarray,
    y: np.ndarray,
    *,
    resamples: int,
    seed: int,
    confidence: float,
) -> tuple[float, float] | None:
    """Percentile interval of ``stat`` over ``resamples`` resamplings of the pairs (x[i], y[i]) with
    replacement; the same ``seed`` gives the same interval. None when the statistic is undefined in
    every resample. A resample where it is undefined (all one value) is left out.

    Example:
        >>> x = np.arange(20.0); y = x + np.tile([0.0, 3.0], 10)
        >>> bootstrap(mae, x, y, resamples=200, seed=0, confidence=0.9)
        (0.9, 2.1)
    """
    n = len(x)
    if n == 0 or resamples < 1:
        return None
    rng = np.random.default_rng(seed)
    values = np.full(resamples, np.nan)
    for b in range(resamples):
        i = rng.integers(0, n, n)
        v = stat(x[i], y[i])
        if v is not None:
            values[b] = v
    return percentile_interval(values, confidence)


def _row_ranks(codes: np.ndarray, k: int) -> np.ndarray:
    """Average ranks (1-based, ties sharing the mean) within each row of ``codes``, ints in [0, k): each row's
    counts of each code, summed along the row, give the rows below a code; linear in the rows, no sort."""
    b, _ = codes.shape
    keys = codes + (np.arange(b, dtype=np.int64) * k)[:, None]
    counts = np.bincount(keys.ravel(), minlength=b * k).reshape(b, k)
    below = counts.cumsum(axis=1) - counts
    average = below + (counts + 1) / 2.0
    return np.take_along_axis(average, codes, axis=1)


def _row_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    am = a - a.mean(axis=1, keepdims=True)
    bm = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((am * am).sum(axis=1) * (bm * bm).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (am * bm).sum(axis=1) / den
    r[den == 0] = np.nan  # a resample of one value: undefined, left out as in ``bootstrap``
    return np.clip(r, -1.0, 1.0)


def resample_rows(n: int, resamples: int, seed: int) -> np.ndarray:
    """The (resamples, n) row indices of a seeded bootstrap, drawn with replacement.

    Example:
        >>> resample_rows(5, 2, seed=0).shape
        (2, 5)
    """
    if n * resamples <= _KEPT_DRAW:  # the figures of every judge (and group) of a table draw the same rows
        return _kept_rows(n, resamples, seed)
    return np.random.default_rng(seed).integers(0, n, (resamples, n))


_KEPT_DRAW = 2_000_000  # 16 MB: a draw kept for the next figure on as many rows (1,000 resamples of 2,000 rows)


@functools.lru_cache(maxsize=4)
def _kept_rows(n: int, resamples: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).integers(0, n, (resamples, n))
    rows.flags.writeable = False  # shared by every caller
    return rows


def _draw_weights(n: int, resamples: int, seed: int) -> np.ndarray | None:
    """How many times each row is drawn in each resample of :func:`resample_rows` (resamples, n), for a draw small
    enough to keep (None otherwise): a sum over a resample's rows is then one matrix product, computed for every
    resample at once (a judge's kappa interval on 1,000 rows: 0.3 ms, 5 ms by gathering the rows). Counts are
    float32, exact for the integers they hold (and the sums of 0/1 values over them)."""
    if n * resamples > _KEPT_DRAW:
        return None
    return _kept_weights(n, resamples, seed)


@functools.lru_cache(maxsize=4)
def _kept_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    rows = _kept_rows(n, resamples, seed)
    weights = np.empty((resamples, n), dtype=np.float32)
    for i, r in enumerate(rows):  # a row at a time stays in the cache: 5x faster than one bincount of them all
        weights[i] = np.bincount(r, minlength=n)
    weights.flags.writeable = False
    return weights


def bootstrap_spearman(
    x: np.ndarray,
    y: np.ndarray,
    *,
    resamples: int,
    seed: int,
    confidence: float,
    chunk: int = 100,
) -> tuple[float, float] | None:
    """:func:`bootstrap` of :func:`spearman`, vectorised: the resamples of :func:`resample_rows` ranked a
    ``chunk`` at a time, each row's ranks from counts instead of a sort (measured side by side: 4 times faster than
    the loop on 2,000 rows, 10 times on 60). A resample where the correlation is undefined is left out; None if it
    is undefined in all.

    Example:
        >>> x = np.arange(30.0); y = x + np.tile([0.0, 9.0, 4.0], 10)
        >>> lo, hi = bootstrap_spearman(x, y, resamples=200, seed=0, confidence=0.9)
        >>> 0.7 < lo < hi <= 1.0
        True
    """
    n = len(x)
    if n == 0 or resamples < 1:
        return None
    # dense codes: a resample keeps the order of the values, so ranking codes ranks values
    _, cx = np.unique(x, return_inverse=True)
    _, cy = np.unique(y, return_inverse=True)
    cx, cy = cx.reshape(-1).astype(np.int64), cy.reshape(-1).astype(np.int64)
    kx, ky = int(cx.max()) + 1, int(cy.max()) + 1
    rows = resample_rows(n, resamples, seed)
    values = np.concatenate(
        [
            _row_pearson(_row_ranks(cx[rows[s : s + chunk]], kx), _row_ranks(cy[rows[s : s + chunk]], ky))
            for s in range(0, resamples, chunk)
        ]
    )
    return percentile_interval(values, confidence)


def bootstrap_mean(
    x: np.ndarray, *, resamples: int, seed: int, confidence: float, chunk: int = 100
) -> tuple[float, float] | None:
    """Percentile interval of the mean of ``x`` (a rate, for 0/1 values) over the resamples of
    :func:`resample_rows`; None for no values.

    Example:
        >>> lo, hi = bootstrap_mean(np.array([0.0, 1.0] * 50), resamples=500, seed=0, confidence=0.95)
        >>> round(lo, 1), round(hi, 1)
        (0.4, 0.6)
    """
    n = len(x)
    if n == 0 or resamples < 1:
        return None
    weights = _draw_weights(n, resamples, seed)
    if weights is not None and bool(((x == 0) | (x == 1)).all()):  # a rate: its sums exact in float32
        values = (weights @ x.astype(np.float32)).astype(np.float64) / n
        return percentile_interval(values, confidence)
    rows = resample_rows(n, resamples, seed)
    values = np.concatenate([x[rows[s : s + chunk]].mean(axis=1) for s in range(0, resamples, chunk)])
    return percentile_interval(values, confidence)


def bootstrap_kappa(
    truth: np.ndarray, pred: np.ndarray, k: int, *, resamples: int, seed: int, confidence: float, chunk: int = 100
) -> tuple[float, float] | None:
    """:func:`bootstrap` of :func:`cohen_kappa` over codes ``0..k-1``, every resample's confusion matrix counted
    at once (a ``bincount``, no Python loop per resample): the same resamples, the same interval.

    Example:
        >>> t, p = np.array([0, 1, 1, 0, 1, 2] * 5), np.array([0, 1, 0, 0, 1, 2] * 5)
        >>> bootstrap_kappa(t, p, 3, resamples=300, seed=1, confidence=0.9) == bootstrap(
        ...     lambda a, b: cohen_kappa(a, b, [0, 1, 2]), t, p, resamples=300, seed=1, confidence=0.9)
        True
    """
    n = len(truth)
    if n == 0 or resamples < 1:
        return None
    weights = _draw_weights(n, resamples, seed)
    if weights is not None:  # every resample's confusion counts at once: the draw's counts x each row's cell
        cells = np.zeros((n, k * k), dtype=np.float32)
        cells[np.arange(n), np.asarray(truth, dtype=np.int64) * k + pred] = 1.0
        return percentile_interval(_kappas((weights @ cells).astype(np.float64).reshape(-1, k, k), n, k), confidence)
    rows = resample_rows(n, resamples, seed)
    parts = []
    for s in range(0, resamples, chunk):
        r = rows[s : s + chunk]
        b = len(r)
        keys = (np.arange(b, dtype=np.int64)[:, None] * k + truth[r]) * k + pred[r]
        parts.append(_kappas(np.bincount(keys.ravel(), minlength=b * k * k).reshape(b, k, k).astype(np.float64), n, k))
    return percentile_interval(np.concatenate(parts), confidence)


def _kappas(cm: np.ndarray, n: int, k: int) -> np.ndarray:
    """Cohen's kappa of each (k, k) confusion matrix of ``cm`` over ``n`` rows (NaN where undefined)."""
    expected = cm.sum(axis=2)[:, :, None] * cm.sum(axis=1)[:, None, :] / n
    off = 1.0 - np.eye(k)
    den = (expected * off).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = 1.0 - (cm * off).sum(axis=(1, 2)) / den
    kappa[den == 0] = np.nan  # undefined in that resample: left out, as bootstrap does
    return kappa


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The central ``confidence`` interval of bootstrap ``values`` (NaN resamples left out); None for none.

    Example:
        >>> [round(v, 6) for v in percentile_interval(np.arange(101.0), 0.9)]
        [5.0, 95.0]
    """
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


UNDECIDED = "undecided"  # the failure kind of a row the judge gave no value and no error row explains
ALL_ROWS_HEADLINE = {"binary": "accuracy", "pairwise": "agreement", "numeric": None}


def over_all_rows(
    truth: Sequence[Any] | np.ndarray,
    pred: Sequence[Any] | np.ndarray,
    kind: str,
    *,
    failures: Sequence[str | None] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Agreement of a judge with labels over ALL labelled rows: a row the judge did not decide counts as not
    agreeing. The one rule of ``agreement``'s all-rows figures and of ``choose-judge``'s leaderboard.

    ``truth``: the label of each labelled row (no None); ``pred``: the judge's value on the same rows, None (or
    NaN) where it gave none (a null score: the row failed, or its reply did not parse); ``kind``: "binary"
    (verdicts, ``accuracy``) or "pairwise" (winners, ``agreement``); "numeric" (ratings) gives coverage and failures
    only, no figure: a rank correlation has no value to give a row the judge did not rate, so the correlations stay
    figures of the compared rows (cut the ratings with a threshold for verdicts). ``failures``: per row, the error
    kind of an undecided row (from the errors split), None where unknown (counted as ``"undecided"``).

    The figures: ``accuracy`` (or ``agreement``) = rows decided AND equal to the label / all labelled rows;
    ``cohen_kappa`` with "undecided" as one more value of the judge's, which no label has (so it never agrees,
    and a judge that fails often is not rewarded for the rows it skipped); each with a percentile bootstrap
    interval over the labelled rows (``resamples``, ``seed``: the same seed, the same interval);
    ``coverage`` = decided / rows; ``failures``: error kind -> rows, for the undecided rows.

    Example:
        >>> r = over_all_rows([True, True, False, False, True], [True, None, False, True, True], "binary",
        ...                   failures=[None, "http_500", None, None, None], resamples=0)
        >>> r["figures"]["accuracy"], r["coverage"], r["failures"]
        (0.6, 0.8, {'http_500': 1})
    """
    if kind not in ALL_ROWS_HEADLINE:
        raise ValueError(f"kind must be one of {', '.join(ALL_ROWS_HEADLINE)}, got {kind!r}")
    t, p = list(truth), list(pred)
    if len(t) != len(p) or (failures is not None and len(failures) != len(t)):
        raise ValueError(f"truth, pred (and failures) must align row by row: {len(t)} vs {len(p)}")
    undecided = np.array([_missing(v) for v in p], dtype=bool)
    n, decided = len(t), int((~undecided).sum())
    # codes: the values of labels and verdicts, then one more for "undecided"
    values = sorted({str(v) for v in t} | {str(v) for v, u in zip(p, undecided, strict=True) if not u})
    index = {v: i for i, v in enumerate(values)}
    tc = np.array([index[str(v)] for v in t], dtype=np.int64)
    pc = np.array([len(values) if u else index[str(v)] for v, u in zip(p, undecided, strict=True)], dtype=np.int64)
    codes = list(range(len(values) + 1))
    headline = ALL_ROWS_HEADLINE[kind]
    agree = (tc == pc).astype(np.float64)

    def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
        return cohen_kappa(a, b, codes)

    figures: dict[str, float | None] = {}
    intervals: dict[str, list[float] | None] = {}
    if headline is not None:
        figures = {headline: float(agree.mean()) if n else None, "cohen_kappa": kappa(tc, pc) if n else None}
    if headline is not None and resamples and n:
        ci = bootstrap_mean(agree, resamples=resamples, seed=seed, confidence=confidence)
        intervals[headline] = list(ci) if ci else None
        if figures["cohen_kappa"] is not None:
            ci = bootstrap_kappa(tc, pc, len(codes), resamples=resamples, seed=seed, confidence=confidence)
            intervals["cohen_kappa"] = list(ci) if ci else None
    kinds: dict[str, int] = {}
    for i in np.nonzero(undecided)[0]:
        why = (failures[int(i)] if failures is not None else None) or UNDECIDED
        kinds[why] = kinds.get(why, 0) + 1
    return {
        "rows": n,
        "decided": decided,
        "coverage": decided / n if n else None,
        "figures": figures,
        "intervals": intervals,
        "failures": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def headline_figures(found: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`over_all_rows`'s result as a leaderboard entry's figures: the headline (accuracy or agreement) and
    Cohen's kappa with their intervals, the coverage and the failures by kind.

    Example:
        >>> headline_figures(over_all_rows([True, False], [True, None], "binary", resamples=0))["score"]
        0.5
    """
    key = "accuracy" if "accuracy" in found["figures"] else "agreement"
    return {
        "score": found["figures"].get(key),
        "interval": found["intervals"].get(key),
        "kappa": found["figures"].get("cohen_kappa"),
        "kappa_interval": found["intervals"].get("cohen_kappa"),
        "coverage": found["coverage"],
        "failures": found["failures"],
    }


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)
