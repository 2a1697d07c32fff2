"""A calibration in a result's summary and card: which labels it was fitted on, the figures ``calibrate``
reported, and what ``<score>_calibrated`` means.

``summary.calibration`` maps a score column to :func:`calibration_entry` of its calibration; it is recorded
where a calibration meets a result: ``apply_calibration`` (``filter --calibration`` / ``--min-prob``),
``hf-judge calibrate`` on a result folder (its ``summary.json``) and ``calibrate --push-to-hub`` (the Hub
copy's ``summary.json`` and card). Only stdlib here: ``str(summary)`` reads it in quick commands.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analysis.calibration import Calibration

START = "<!-- hf-judge:calibration:start -->"
END = "<!-- hf-judge:calibration:end -->"


def calibration_entry(cal: Calibration, file: str | None = None) -> dict[str, Any]:
    """What the summary keeps of a calibration: the labels (count, source name), the column read, the
    calibration errors, the threshold and its cross-validated figures, and ``file`` (where it is saved, a name).

    Example:
        >>> from hf_judge.analysis.calibration import Calibration
        >>> e = calibration_entry(Calibration("S", "S", "labels.jsonl", "binary", 40, [1.0, 9.0], [0.1, 0.9]))
        >>> e["labels"], e["source"], e["output"]
        (40, 'labels.jsonl', 'S_calibrated')
    """
    t = cal.threshold or {}
    cv = cal.cv or {}
    return {
        "source": cal.label,
        "labels": cal.pairs,
        "dropped": cal.dropped,
        "kind": cal.kind,
        "label_threshold": getattr(cal, "label_threshold", None),
        "column": cal.column,
        "output": cal.output,
        "ece": {k: cal.ece.get(k) for k in ("judge", "calibrated", "bins")},
        "folds": cv.get("folds"),
        "seed": cv.get("seed"),
        "threshold": (
            {k: t.get(k) for k in ("criterion", "probability", "min_score", "precision", "recall", "f1")} if t else None
        ),
        "cv": {k: cv[k] for k in ("precision", "recall", "f1", "mae") if k in cv},
        "file": file,
        "warning": getattr(cal, "warning", None),
    }


def _n(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _score(v: Any) -> str:
    return "n/a" if v is None else str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def meaning(c: dict[str, Any]) -> str:
    """What the calibrated column holds, in words.

    Example:
        >>> print(meaning({"kind": "numeric", "source": "l.jsonl"}))
        the expected human label (on the labels' scale) at this judge score
    """
    if c["kind"] != "binary":
        return "the expected human label (on the labels' scale) at this judge score"
    if c.get("label_threshold") is not None:
        return f"P(human label >= {c['label_threshold']:g}) at this judge score"
    return "P(a reviewer labels the row positive) at this judge score"


def _labels(c: dict[str, Any]) -> str:
    cut = f", label >= {c['label_threshold']:g} counted positive" if c.get("label_threshold") is not None else ""
    return f"{c['labels']:,} labelled rows of {c['source']} ({c['kind']}{cut})"


def _threshold(c: dict[str, Any]) -> str:
    t, cv = c.get("threshold") or {}, c.get("cv") or {}
    if c["kind"] != "binary":
        return f"cross-validated MAE {_n(cv.get('mae'))}"
    if t.get("probability") is None:
        return f"no threshold reaches {t.get('criterion', 'the target')} on these labels"
    return (
        f"threshold ({t['criterion']}) P >= {_n(t['probability'])}, i.e. {c['column']} >= {_score(t['min_score'])}: "
        f"precision {_n(t.get('precision'))} / recall {_n(t.get('recall'))} on the labels, "
        f"{_n(cv.get('precision'))} / {_n(cv.get('recall'))} cross-validated"
    )


def calibration_lines(calibration: dict[str, dict[str, Any]]) -> list[str]:
    """The summary's lines (``str(summary)``): one per calibrated score column; none without a calibration.

    Example:
        >>> calibration_lines({})
        []
    """
    out = []
    for score, c in calibration.items():
        e = c.get("ece") or {}
        out.append(
            f"calibration    {score} against {_labels(c)}: ECE {_n(e.get('judge'))} judge, "
            f"{_n(e.get('calibrated'))} calibrated (out of fold); {_threshold(c)}; {c['output']} = {meaning(c)}"
            + (f"; WARNING: {c['warning']}" if c.get("warning") else "")
            + (f"; FORCED onto another judge: it was {c['other_judge']}" if c.get("other_judge") else "")
        )
    return out


def calibration_card(calibration: dict[str, dict[str, Any]], columns: Collection[str] = ()) -> list[str]:
    """The card's "Calibration against labels" part (between its own markers, so ``calibrate --push-to-hub``
    can replace it in a card it did not render); none without a calibration. ``columns``: the data's
    columns (says whether ``<score>_calibrated`` is in it).

    Example:
        >>> calibration_card({})
        []
    """
    if not calibration:
        return []
    out = [START, "### Calibration against labels", ""]
    out += [
        "| score | labels | ECE judge | ECE calibrated | threshold | precision | recall | cv precision | cv recall |"
    ]
    out += ["| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for score, c in calibration.items():
        e, t, cv = c.get("ece") or {}, c.get("threshold") or {}, c.get("cv") or {}
        cut = f"P >= {_n(t['probability'])} (score >= {_score(t['min_score'])})" if t.get("probability") else "n/a"
        if c["kind"] != "binary":
            cut = f"MAE {_n(cv.get('mae'))} (cv)"
        out.append(
            f"| `{score}` | {_labels(c)} | {_n(e.get('judge'))} | {_n(e.get('calibrated'))} | {cut} | "
            f"{_n(t.get('precision'))} | {_n(t.get('recall'))} | {_n(cv.get('precision'))} | {_n(cv.get('recall'))} |"
        )
    out.append("")
    for c in calibration.values():
        where = "in this dataset" if c["output"] in columns else "added by `hf-judge filter --calibration FILE`"
        saved = f" (`{c['file']}`)" if c.get("file") else ""
        out.append(
            f"- `{c['output']}` ({where}): {meaning(c)}, from an isotonic map of `{c['column']}` fitted on the "
            f"labels{saved}; ECE over {(c.get('ece') or {}).get('bins')} bins, the calibrated one out of fold "
            f"({c.get('folds')} folds, seed {c.get('seed')})"
            + (f". **Warning**: {c['warning']}" if c.get("warning") else "")
            + (f". **Applied to another judge** (forced): it was {c['other_judge']}" if c.get("other_judge") else "")
        )
    out += ["", END]
    return out


def merge_calibration_card(text: str, section: list[str], end_marker: str) -> str:
    """``text`` (a card) with its calibration part replaced by ``section``, or ``section`` put before
    ``end_marker`` (the end of hf-judge's part), or at the end where there is neither.

    Example:
        >>> merge_calibration_card("a\\nEND\\n", ["x"], "END")
        'a\\nx\\n\\nEND\\n'
    """
    block = "\n".join(section)
    if START in text and END in text:
        head, _, rest = text.partition(START)
        return head + block + rest.partition(END)[2]
    if end_marker in text:
        head, _, tail = text.partition(end_marker)
        return head + block + "\n\n" + end_marker + tail
    return text.rstrip("\n") + "\n\n" + block + "\n"
