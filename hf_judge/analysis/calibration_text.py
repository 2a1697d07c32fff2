"""A calibration as text: what ``hf-judge calibrate`` prints (the reliability picture without the plots extra)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# a Calibration (calibration.py imports this module to print one: no import back, no cycle)
Calibration = Any


def _n(v: Any, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _score(v: float) -> str:
    """A judge value: 7 for an integer score, 7.25 for an expected one."""
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(f"{c:>{w[i]}}" for i, c in enumerate(r)).rstrip() for r in rows]


def describe(cal: Calibration) -> str:
    """The calibration's figures, its map per judge value and its reliability table, as lines of text."""
    binary = cal.kind == "binary"
    cut = getattr(cal, "label_threshold", None)
    target = "P(label is positive)" if binary else "the expected human score"
    target = f"P(label >= {cut:g})" if cut is not None else target
    read = f" (read from {cal.column})" if cal.column != cal.score else ""
    kind = f"{cal.kind} (label >= {cut:g} counted positive)" if cut is not None else cal.kind
    lines = [
        f"Calibration of {cal.score}{read} against {cal.label}: {kind}, {cal.pairs:,} labelled rows"
        + (f" ({cal.dropped:,} without a score or label left out)" if cal.dropped else ""),
        "",
        f"isotonic map: judge value -> {target}",
    ]
    if getattr(cal, "warning", None):  # before the figures it makes meaningless
        lines[1:1] = ["", f"WARNING: {cal.warning}"]
    mean = "positive" if binary else "mean label"
    by = cal.by_score
    if len(by) > 20:  # an _expected column: the knots would be hundreds of lines; the bins say it
        by = [b for i, b in enumerate(by) if i % max(1, len(by) // 20) == 0]
    lines += _table(
        [("judge", "rows", mean, "calibrated")]
        + [(_score(b["score"]), f"{b['count']:,}", _n(b["label_mean"], 2), _n(b["calibrated"])) for b in by]
    )
    e = cal.ece
    what = "the score rescaled to 0-1 as a probability" if binary else "the score read as the human score"
    lines += [
        "",
        f"expected calibration error ({e['bins']} equal-width bins over {_score(e['low'])}-{_score(e['high'])}):",
        f"  judge ({what})  {_n(e['judge'])}",
        f"  calibrated ({cal.cv['folds']}-fold, out of fold, seed {cal.cv['seed']})  {_n(e['calibrated'])}",
        "",
        "reliability (calibrated, out of fold): mean prediction vs mean label per bin",
    ]
    lines += _table(
        [("bin", "rows", "predicted", "observed")]
        + [
            (f"{_n(r['low'], 2)}-{_n(r['high'], 2)}", f"{r['count']:,}", _n(r["prediction_mean"]), _n(r["label_mean"]))
            for r in cal.reliability.get("calibrated", [])
        ]
    )
    if not binary:
        lines += ["", f"cross-validated MAE of the calibrated score: {_n(cal.cv.get('mae'))}"]
    elif cal.threshold is not None:
        lines += ["", *_threshold(cal)]
    return "\n".join(lines)


def _threshold(cal: Calibration) -> list[str]:
    t = cal.threshold or {}
    cv = cal.cv
    if t.get("probability") is None:
        return [
            f"threshold ({t.get('criterion')}): none reaches it on these labels; label more rows or lower the target"
        ]
    return [
        f"threshold ({t['criterion']}): P >= {_n(t['probability'])}, i.e. {cal.column} >= {_score(t['min_score'])}",
        f"  on the labelled rows: precision {_n(t.get('precision'))}, recall {_n(t.get('recall'))}, "
        f"F1 {_n(t.get('f1'))}",
        f"  cross-validated ({cv['folds']} folds, seed {cv['seed']}, the threshold chosen on the other folds): "
        f"precision {_n(cv.get('precision'))}, recall {_n(cv.get('recall'))}, F1 {_n(cv.get('f1'))}",
    ]
