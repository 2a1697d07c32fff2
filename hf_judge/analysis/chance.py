"""Whether a judge's agreement with labels is beyond chance, and how many labelled rows would tell two judges
apart: the checks behind ``choose-judge``'s recommendation (:func:`hf_judge.analysis.leaderboard.recommend`).

Chance is what a judge that knows nothing about the rows scores: for verdicts and winners, always answering the
labels' most common value (the majority label's share of the rows; Cohen's kappa 0); for ratings, no relation
(Spearman's rho 0). A judge is *beyond chance* when the lower end of its bootstrap interval is above chance, for
its headline figure and, where it has one, for its kappa's interval too: a judge whose interval reaches chance
cannot be told, on these labels, from one that answers at random. Without an interval (no resamples) nobody can
tell: such a judge is never called beyond chance.

How many rows would settle it (:func:`rows_to_separate`, :func:`rows_beyond_chance`): a bootstrap interval
narrows as one over the square root of the rows, so two intervals that overlap on ``n`` rows stop overlapping
near ``n * ((w1 + w2) / d)**2`` rows, where ``d`` is the distance between the two figures and ``w1``, ``w2`` the
half-widths facing each other. The estimate holds only if the figures stay where they are on more rows: it is
an order of magnitude to plan labelling with, not a promise, and it is ``None`` where the figures are equal (or
on the wrong side), which no number of rows separates.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any


def chance_level(labels: Sequence[Any], kind: str) -> dict[str, Any]:
    """What answering without looking scores on ``labels`` (the normalised labels: verdicts True/False, winners
    "1"/"2"/"tie"): ``score``, the majority label's share (``label``: that value; rho 0 for ``kind`` "numeric"),
    and ``kappa`` 0.

    Example:
        >>> chance_level(["1", "2", "1", "1"], "pairwise")
        {'kind': 'pairwise', 'score': 0.75, 'kappa': 0.0, 'label': '1', 'rows': 4}
        >>> chance_level([3, 5, 4], "numeric")
        {'kind': 'numeric', 'score': 0.0, 'kappa': 0.0, 'label': None, 'rows': 3}
    """
    given = [v for v in labels if v is not None]
    if kind == "numeric" or not given:
        return {"kind": kind, "score": 0.0, "kappa": 0.0, "label": None, "rows": len(given)}
    value, count = Counter(given).most_common(1)[0]
    return {"kind": kind, "score": count / len(given), "kappa": 0.0, "label": value, "rows": len(given)}


def beyond_chance(entry: Mapping[str, Any], chance: Mapping[str, Any] | None) -> bool | None:
    """Whether ``entry``'s interval (and its kappa's, where it has one) lies wholly above ``chance``; None where
    that cannot be told (no interval, no chance level).

    Example:
        >>> chance = {"score": 0.5, "kappa": 0.0}
        >>> beyond_chance({"score": 0.7, "interval": [0.6, 0.8], "kappa_interval": [0.2, 0.6]}, chance)
        True
        >>> beyond_chance({"score": 0.6, "interval": [0.45, 0.75]}, chance), beyond_chance({"score": 0.6}, chance)
        (False, None)
    """
    interval = entry.get("interval")
    if chance is None or entry.get("score") is None or not interval or interval[0] is None:
        return None
    if interval[0] <= chance["score"]:
        return False
    kappa = entry.get("kappa_interval")
    return not (kappa and kappa[0] is not None and kappa[0] <= chance["kappa"])


def why_not(entry: Mapping[str, Any], chance: Mapping[str, Any] | None) -> str:
    """Why ``entry`` is not beyond chance, in words (for the line under the table).

    Example:
        >>> why_not({"score": 0.6, "interval": [0.45, 0.75]}, {"kind": "binary", "score": 0.5, "kappa": 0.0})
        'its interval [45.0%, 75.0%] reaches chance (50.0%)'
        >>> why_not({"score": 0.3, "interval": [0.25, 0.4]}, {"kind": "binary", "score": 0.5, "kappa": 0.0})
        'its interval [25.0%, 40.0%] lies below chance (50.0%)'
    """
    pct = chance is None or chance.get("kind") != "numeric"
    fmt = (lambda v: f"{v:.1%}") if pct else (lambda v: f"{v:.3g}")
    interval = entry.get("interval")
    if chance is None or not interval or interval[0] is None:
        return "it has no interval (resamples 0), so it cannot be told from chance"
    if interval[0] <= chance["score"]:
        lies = "lies below" if interval[1] is not None and interval[1] < chance["score"] else "reaches"
        return f"its interval [{fmt(interval[0])}, {fmt(interval[1])}] {lies} chance ({fmt(chance['score'])})"
    kappa = entry.get("kappa_interval") or [None, None]
    return f"its kappa's interval [{kappa[0]:.3g}, {kappa[1]:.3g}] reaches 0 (chance)"


def rows_to_separate(high: Mapping[str, Any], low: Mapping[str, Any], rows: int) -> int | None:
    """About how many labelled rows would make the intervals of ``high`` (the higher figure) and ``low`` stop
    overlapping, if their figures held; None where the figures are equal (no number of rows separates them).

    Example:
        >>> rows_to_separate({"score": 0.8, "interval": [0.7, 0.9]}, {"score": 0.7, "interval": [0.6, 0.8]}, 100)
        400
    """
    gap = high["score"] - low["score"]
    if gap <= 0 or not high.get("interval") or not low.get("interval"):
        return None
    width = (high["score"] - high["interval"][0]) + (low["interval"][1] - low["score"])
    return _rows(rows, width, gap)


def rows_beyond_chance(entry: Mapping[str, Any], chance: Mapping[str, Any], rows: int) -> int | None:
    """About how many labelled rows would lift ``entry``'s interval (and its kappa's) above chance, if its
    figures held; None where a figure is at or below chance (more rows would not lift it).

    Example:
        >>> rows_beyond_chance({"score": 0.6, "interval": [0.45, 0.75]}, {"score": 0.5, "kappa": 0.0}, 40)
        90
    """
    needs = []
    for figure, interval, level in (
        ("score", "interval", chance["score"]),
        ("kappa", "kappa_interval", chance["kappa"]),
    ):
        ci, value = entry.get(interval), entry.get(figure)
        if not ci or ci[0] is None or value is None:
            continue
        if value <= level:
            return None
        needs.append(_rows(rows, value - ci[0], value - level))
    return max(needs) if needs else None


def _rows(rows: int, width: float, gap: float) -> int:
    """The rows at which a half-width ``width`` on ``rows`` rows, narrowing as 1/sqrt(rows), is below ``gap``
    (rounded to 1e-9 first: 0.1 + 0.1 is not quite 0.2, and the estimate is no finer than that)."""
    return max(1, math.ceil(round(rows * (width / gap) ** 2, 9)))


def about(n: int) -> str:
    """``n`` to two significant figures, rounded up: an estimate shown as one.

    Example:
        >>> about(87), about(1234), about(40)
        ('87', '1,300', '40')
    """
    if n < 100:
        return str(n)
    step = 10 ** (len(str(n)) - 2)
    return f"{math.ceil(n / step) * step:,}"
