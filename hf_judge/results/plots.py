"""Pictures of scores as PNG: a column's distribution, the confusion matrix as a heat map, the calibration curve,
every judgment of a run with samples or a panel (a bar per judge), and a panel's agreement as a heat map.

Drawn with matplotlib, the optional extra ``pip install "hf-judge[plots]"``; without it the card and the
terminal keep their text histograms (:func:`hf_judge.results.card.text_histogram`). Figures are made with
matplotlib's object API (``Figure``, no pyplot): no window, no global state, no backend switched for the
caller. The PNGs carry no timestamp, so the same data gives the same bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .pooled import pooled_distributions

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


_JUDGE_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def pooled_png(pooled: Mapping[str, Any], title: str) -> bytes:
    """The counts of one score column's judgments per value (:func:`hf_judge.results.pooled.pooled_distributions`):
    a bar per judge side by side (every sample of each), and in the title how often a row's samples agree.

    Example:
        >>> pooled_png({"judges": {"": {"hist": {"7": 3, "8": 5}}}, "hist": {"7": 3, "8": 5}}, "QA_Clarity")[:4]
        b'\\x89PNG'
    """
    fig = _figure()
    ax = fig.add_subplot()
    keys = list(pooled["hist"])
    judges = pooled["judges"]
    width = 0.8 / max(1, len(judges))
    for i, (name, j) in enumerate(judges.items()):
        xs = [k + (i - (len(judges) - 1) / 2) * width for k in range(len(keys))]
        ys = [j["hist"].get(k, 0) for k in keys]
        ax.bar(xs, ys, width=width, color=_JUDGE_COLORS[i % len(_JUDGE_COLORS)], label=name or None)
    ax.set_xticks(range(len(keys)), keys, rotation=45 if max(map(len, keys), default=0) > 3 else 0)
    multi = sum(j.get("multi", 0) for j in judges.values())
    agree = sum(j.get("agree", 0) for j in judges.values())
    rows = "rows x judges" if len(judges) > 1 else "rows"
    sub = f"samples agree on {agree:,} of {multi:,} {rows}" if multi else f"{len(judges)} judges"
    ax.set(title=f"{title}: every judgment\n{sub}", xlabel="value", ylabel="judgments")
    ax.title.set_fontsize(9)
    if any(judges):
        ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def judge_agreement_png(agreement: Mapping[str, Mapping[str, Any]], title: str) -> bytes:
    """A panel's judge-vs-judge agreement on one split as a heat map: a row per score column, a column per pair
    of judges, each cell the share of rows both judges gave the same value (the summary's ``agreement``, metric ->
    column -> ``pairs``), written in the cell; Krippendorff's alpha beside each row's name where it was computed.

    Example:
        >>> a = {"QA_Clarity": {"QA_Clarity": {"pairs": {"j1~j2": {"rows": 8, "exact": 0.75}}, "alpha": 0.6}}}
        >>> judge_agreement_png(a, "train")[:4]
        b'\\x89PNG'
    """
    import numpy as np

    columns = [(c, a) for by_column in agreement.values() for c, a in by_column.items()]
    pairs = list(dict.fromkeys(p for _, a in columns for p in a["pairs"]))
    cells = np.array(
        [[np.nan if a["pairs"].get(p, {}).get("exact") is None else a["pairs"][p]["exact"] for p in pairs]
         for _, a in columns],
        dtype=float,
    )  # fmt: skip
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2.2 + 1.1 * len(pairs), 1.2 + 0.35 * len(columns)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(cells), cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    fig.colorbar(image, ax=ax, label="same value")
    names = [c + (f"  (α {a['alpha']:.2f})" if a.get("alpha") is not None else "") for c, a in columns]
    ax.set_xticks(range(len(pairs)), [p.replace("~", " ~ ") for p in pairs], fontsize=8)
    ax.set_yticks(range(len(columns)), names, fontsize=8)
    for i, row in enumerate(cells):
        for j, v in enumerate(row):
            ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.0%}", ha="center", va="center", fontsize=8)
    ax.set_title(f"Judges' agreement: {title}", fontsize=9)
    return _png(fig)


def panel_pngs(
    split: str, d: Any, agreement: Mapping[str, Any] | None, judges: Collection[str] | None = None
) -> dict[str, bytes]:
    """Name -> PNG of a split's pictures of samples and judges: per score column every judgment counted
    (``all_judgments/<column>.png``, for a run with samples or a panel) and the judges' agreement heat map
    (``agreement/judges.png``, from the summary's figures: ``agreement`` is ``summary.agreement[split]``).
    ``judges``: the panel's judges (``summary.panel_judges``): another ``<column>__<name>`` column is the user's own.

    Example:
        >>> sorted(panel_pngs("train", scored["train"], scored.summary.agreement.get("train")))  # doctest: +SKIP
        ['agreement/judges.png', 'all_judgments/QA_Clarity.png']
    """
    require()
    out = {
        f"all_judgments/{file_name(c)}.png": pooled_png(p, f"{c} ({split})")
        for c, p in pooled_distributions(d, judges).items()
        if p["hist"]
    }
    if agreement and any(a["pairs"] for by in agreement.values() for a in by.values()):
        out["agreement/judges.png"] = judge_agreement_png(agreement, split)
    return out


def choice_png(choice: Mapping[str, Any]) -> bytes:
    """``choose-judge``'s table as a picture (``choose_judge.json``'s content, :class:`hf_judge.JudgeChoice`'s
    ``to_dict()``): a horizontal bar per judge, its headline figure, with its bootstrap interval as an error bar;
    the recommended judge's bar in a colour of its own, the human ceiling (where labelled by several people) a
    dashed line.

    Example:
        >>> choice_png({"metric": "Binary", "headline": "accuracy", "rows": 40, "recommendation": {"name": "a"},
        ...             "entries": [{"name": "a", "score": 0.8, "interval": [0.7, 0.9]},
        ...                         {"name": "b", "score": 0.6, "interval": None}]})[:4]
        b'\\x89PNG'
    """
    from matplotlib.figure import Figure

    entries = [e for e in choice.get("entries") or [] if e.get("score") is not None]
    pick = (choice.get("recommendation") or {}).get("name")
    fig = Figure(figsize=(6.0, 1.2 + 0.4 * max(1, len(entries))), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(len(entries)))[::-1]  # the table's first row on top
    scores = [e["score"] for e in entries]
    lo = [e["score"] - e["interval"][0] if e.get("interval") else 0.0 for e in entries]
    hi = [e["interval"][1] - e["score"] if e.get("interval") else 0.0 for e in entries]
    colors = ["#DD8452" if e["name"] == pick else _COLOR for e in entries]
    ax.barh(ys, scores, xerr=[lo, hi], color=colors, capsize=3, error_kw={"elinewidth": 1})
    ax.set_yticks(ys, [e["name"] + ("  (recommended)" if e["name"] == pick else "") for e in entries], fontsize=8)
    ceiling = (choice.get("ceiling") or {}).get("loo_agreement")
    if ceiling is not None:
        ax.axvline(ceiling, color="#55A868", linestyle="--", label="human ceiling")
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    headline = choice.get("headline", "score")
    ax.set(xlabel=f"{headline} (95% interval, all {choice.get('rows', 0):,} labelled rows)")
    ax.set_title(f"Choosing the judge: {choice.get('metric', '')}", fontsize=9)
    if headline != "spearman":
        ax.set_xlim(0, 1)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
