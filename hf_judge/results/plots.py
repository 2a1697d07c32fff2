"""Pictures of scores as PNG: a column's distribution, the confusion matrix as a heat map, the calibration curve.

Drawn with matplotlib, the optional extra ``pip install "hf-judge[plots]"``; without it the card and the
terminal keep their text histograms (:func:`hf_judge.results.card.text_histogram`). Figures are made with
matplotlib's object API (``Figure``, no pyplot): no window, no global state, no backend switched for the
caller. The PNGs carry no timestamp, so the same data gives the same bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..analysis.agreement import AgreementReport
    from ..analysis.calibration import Calibration

INSTALL_HINT = 'pip install "hf-judge[plots]"'
_SIZE = (5.0, 3.2)
_COLOR = "#4C72B0"


def available() -> bool:
    """Whether matplotlib (the ``plots`` extra) is installed.

    Example:
        >>> available() in (True, False)
        True
    """
    try:
        import matplotlib  # noqa: F401 - imported only to learn whether it can be
    except ImportError:
        return False
    return True


def require() -> None:
    """A ConfigError that says how to install the extra, when it is missing."""
    if not available():
        raise ConfigError(f"pictures need matplotlib: {INSTALL_HINT}")


def file_name(text: str) -> str:
    """``text`` as a safe file name part (column names may hold anything).

    Example:
        >>> file_name("QA Correctness/1")
        'QA_Correctness_1'
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "column"


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=_SIZE, dpi=100, layout="constrained")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def histogram_png(hist: Mapping[Any, int], title: str, xlabel: str = "score") -> bytes:
    """A bar chart of ``hist`` (value -> count, as :func:`hf_judge.results.card.column_stats` gives it).

    Example:
        >>> histogram_png({1: 3, 2: 5, 3: 1}, "QA_Correctness")[:4]  # doctest: +SKIP
        b'\\x89PNG'
    """
    fig = _figure()
    ax = fig.add_subplot()
    labels = [str(k) for k in hist]
    ax.bar(range(len(labels)), list(hist.values()), color=_COLOR)
    ax.set_xticks(range(len(labels)), labels, rotation=45 if max(map(len, labels), default=0) > 3 else 0)
    ax.set(title=title, xlabel=xlabel, ylabel="rows")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def confusion_png(report: AgreementReport) -> bytes:
    """The report's confusion matrix as a heat map, counts written in the cells."""
    assert report.confusion is not None
    labels = [str(v) for v in report.confusion["labels"]]
    matrix = report.confusion["matrix"]
    fig = _figure()
    ax = fig.add_subplot()
    image = ax.imshow(matrix, cmap="Blues")
    fig.colorbar(image, ax=ax, label="rows")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set(xlabel=f"judge: {report.score}", ylabel=f"label: {report.label}", title="Confusion matrix")
    peak = max((c for row in matrix for c in row), default=0) or 1
    if len(labels) <= 12:  # numbers in 144 cells still read; beyond, the colours say it
        for i, row in enumerate(matrix):
            for j, c in enumerate(row):
                ax.text(j, i, str(c), ha="center", va="center", fontsize=8, color="white" if c > peak / 2 else "black")
    return _png(fig)


def calibration_png(report: AgreementReport) -> bytes:
    """The mean label per score (point size: rows) against the diagonal where they would be equal."""
    assert report.calibration
    xs = [c["score"] for c in report.calibration]
    ys = [c["label_mean"] for c in report.calibration]
    sizes = [20 + 180 * c["count"] / max(c["count"] for c in report.calibration) for c in report.calibration]
    fig = _figure()
    ax = fig.add_subplot()
    lo, hi = min(xs + ys), max(xs + ys)
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="label = score")
    ax.plot(xs, ys, color=_COLOR, linewidth=1)
    ax.scatter(xs, ys, s=sizes, color=_COLOR, zorder=3, label="mean label (size: rows)")
    ax.set(xlabel=f"judge: {report.score}", ylabel=f"mean of {report.label}", title="Calibration")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def report_pngs(report: AgreementReport) -> dict[str, bytes]:
    """File name -> PNG of every picture of an agreement report: both columns' distributions, the confusion
    matrix and the calibration curve (those the report has).

    Example:
        >>> for name, png in report_pngs(report).items():  # doctest: +SKIP
        ...     Path("plots", name).write_bytes(png)
    """
    require()
    out = {}
    for column, hist in report.histograms.items():
        if hist:
            out[f"{file_name(column)}_distribution.png"] = histogram_png(hist, column, "value")
    stem = f"{file_name(report.score)}_vs_{file_name(report.label)}"
    if report.confusion:
        out[f"{stem}_confusion.png"] = confusion_png(report)
    if report.calibration:
        out[f"{stem}_calibration.png"] = calibration_png(report)
    return out


def reliability_png(cal: Calibration) -> bytes:
    """The reliability diagram of a calibration: mean label against mean prediction per bin, for the judge's
    score (read as a probability, or as the human score) and for the calibrated map out of fold (point size:
    rows), against the diagonal of a perfect calibration."""
    require()
    fig = _figure()
    ax = fig.add_subplot()
    lo, hi = cal.ece["low"], cal.ece["high"]
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1, label="perfect")
    peak = max((r["count"] for rows in cal.reliability.values() for r in rows), default=1)
    for name, color in (("judge", "#DD8452"), ("calibrated", _COLOR)):
        rows = cal.reliability.get(name, [])
        xs, ys = [r["prediction_mean"] for r in rows], [r["label_mean"] for r in rows]
        ax.plot(xs, ys, color=color, linewidth=1)
        e = cal.ece.get(name)
        label = f"{name} (ECE {e:.3f})" if e is not None else name
        ax.scatter(xs, ys, s=[20 + 120 * r["count"] / peak for r in rows], color=color, zorder=3, label=label)
    what = "P(positive)" if cal.kind == "binary" else "human score"
    ax.set(xlabel=f"predicted {what}", ylabel=f"observed {what}", title=f"Reliability: {cal.score}")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
