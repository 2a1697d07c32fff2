"""``apply_calibration``: a scored dataset with ``<score>_calibrated`` columns from saved calibrations."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from datasets import Dataset, DatasetDict

from ..analysis.calibration import Calibration, judge_of
from ..errors import ConfigError
from .calibration_card import calibration_entry
from .summary import RunSummary

logger = logging.getLogger("hf_judge")

Calibrations = (
    Calibration | str | Path | Sequence["Calibration | str | Path"] | Mapping[str, "Calibration | str | Path"]
)


def as_calibrations(calibration: Calibrations | None) -> dict[str, Calibration]:
    """Score column -> calibration, from one calibration or file, a list of them, or a dict.

    Example:
        >>> as_calibrations("out/calibration.json")  # doctest: +SKIP
        {'QA_Correctness': Calibration(score='QA_Correctness', ...)}
    """
    if calibration is None:
        return {}
    if isinstance(calibration, Mapping):
        items: list[Any] = list(calibration.values())
    elif isinstance(calibration, (Calibration, str, Path)):
        items = [calibration]
    else:
        items = list(calibration)
    out = {}
    for c in items:
        cal = c if isinstance(c, Calibration) else Calibration.load(c)
        if cal.warning:  # saved with the warning: whoever applies it hears it too
            logger.warning("the calibration of %s cannot be trusted: %s", cal.score, cal.warning)
        out[cal.score] = cal
    return out


def folder_calibrations(folder: str | Path) -> list[tuple[Path, Calibration]]:
    """The calibrations ``hf-judge calibrate`` saved in a result folder (``calibration.json``, and
    ``calibration_<score>.json`` for each further score), as (path, calibration); files that are not one are
    left out, and one whose map is broken (NaN or unsorted knots) is a ConfigError naming it.

    Example:
        >>> [(p.name, c.score) for p, c in folder_calibrations("out/")]  # doctest: +SKIP
        [('calibration.json', 'QA_Correctness'), ('calibration_QA_Clarity.json', 'QA_Clarity')]
    """
    out = []
    for path in sorted(Path(folder).glob("calibration*.json")):
        if path.name != "calibration.json" and not path.name.startswith("calibration_"):
            continue
        try:
            out.append((path, Calibration.load(path)))
        except ConfigError:
            if _has_map(path):  # a calibration, damaged: left out, the filter would run without it unsaid
                raise
            continue
    return out


def _has_map(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "knots_x" in data


def _column(d: Dataset, cal: Calibration) -> list[float | None]:
    if cal.column not in d.column_names:
        hint = (
            " (the calibration read the probability-weighted score: run with --logprobs)"
            if cal.column != cal.score
            else ""
        )
        raise ConfigError(f"no column {cal.column!r} to calibrate{hint}; the dataset has: {', '.join(d.column_names)}")
    arr = d.with_format("arrow")[cal.column].combine_chunks()
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise ConfigError(f"column {cal.column!r} is {arr.type}, not a numeric score: it cannot be calibrated")
    values = np.asarray(arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))
    out = cal.predict(np.nan_to_num(values))
    return [None if np.isnan(v) else float(p) for v, p in zip(values, out, strict=True)]


def _judge_text(j: dict[str, Any]) -> str:
    sha = (j.get("prompt_sha256") or "?")[:12]
    provider = f" ({j['provider']})" if j.get("provider") else ""
    models = ", ".join(j.get("models") or ["?"])
    return f"{models}{provider}, prompt {j.get('metric')} sha256 {sha}, params {j.get('params')}"


def check_judge(cal: Calibration, summary: Any, allow_other_judge: bool = False) -> str | None:
    """Whether ``cal`` was fitted on the judge that scored the result with ``summary``: its models, provider,
    prompt file (sha256) and metric parameters. Another judge's is a ConfigError naming both, unless
    ``allow_other_judge``: then the mismatch is returned, for the summary and card to record. A calibration
    saved without its judge (older files) is applied with a warning that it cannot be checked; a result with no
    summary has nothing to check against. None when nothing is to be recorded.

    Example:
        >>> check_judge(cal, RunSummary.load("out/"))  # doctest: +SKIP
    """
    theirs = judge_of(summary, cal.score)
    if theirs is None:
        return None
    if cal.judge is None:
        logger.warning(
            "the calibration of %s records no judge (saved by an older hf-judge): it cannot be checked against "
            "this result's judge (%s); fit it again with hf-judge calibrate to bind it",
            cal.score,
            _judge_text(theirs),
        )
        return None
    keys = ("models", "provider", "prompt_sha256", "params")
    if all(cal.judge.get(k) == theirs.get(k) for k in keys):
        return None
    which = ", ".join(k for k in keys if cal.judge.get(k) != theirs.get(k))
    mismatch = f"fitted on {_judge_text(cal.judge)}; the scores are of {_judge_text(theirs)} ({which} differ)"
    if not allow_other_judge:
        raise ConfigError(
            f"the calibration of {cal.score} was {mismatch}: a calibration maps one judge's scores, so fit one "
            "on this judge (hf-judge calibrate), or apply it anyway with allow_other_judge=True (CLI: --force)"
        )
    logger.warning("the calibration of %s is applied to another judge's scores: it was %s", cal.score, mismatch)
    return mismatch


def apply_calibration(
    scored: Dataset | DatasetDict, calibration: Calibrations, *, allow_other_judge: bool = False
) -> Dataset | DatasetDict:
    """Add ``<score>_calibrated`` (P(label is positive), or the expected human score) to every split but
    ``errors``, for each calibration (a :class:`hf_judge.Calibration`, a ``calibration.json`` path, or a list
    of them); null where the judge gave no score. A scored result keeps its summary.

    A calibration is bound to the judge it was fitted on: applied to a result (with a summary) judged by
    another model, provider, prompt file or metric parameters, it is a ConfigError naming both, unless
    ``allow_other_judge=True``, which the summary (and so the card) then records.

    Example:
        >>> cal = hf_judge.calibrate(labelled, "QA_Correctness", "human_ok")  # doctest: +SKIP
        >>> scored = hf_judge.apply_calibration(scored, cal)  # doctest: +SKIP
        >>> scored["train"]["QA_Correctness_calibrated"][:3]  # doctest: +SKIP
        [0.91, 0.12, 0.55]
    """
    cals = as_calibrations(calibration)
    if not cals:
        raise ConfigError("give a calibration: hf_judge.calibrate(...) or the path of its calibration.json")
    summary = getattr(scored, "summary", None)
    forced = {cal.score: check_judge(cal, summary, allow_other_judge) for cal in cals.values()}

    def one(d: Dataset) -> Dataset:
        for cal in cals.values():
            values = _column(d, cal)
            if cal.output in d.column_names:
                d = d.remove_columns(cal.output)
            d = d.add_column(cal.output, values)
        return d

    if isinstance(scored, Dataset):
        return one(scored)
    out = type(scored)({k: v if k == "errors" else one(v) for k, v in scored.items()})
    if hasattr(scored, "summary"):  # a ScoredDatasetDict: its summary goes with it, saying what the column is
        out.summary = with_calibrations(scored.summary, cals.values(), calibration, forced)
    return out


def with_calibrations(
    summary: RunSummary | None,
    cals: Iterable[Calibration],
    given: Any = None,
    other_judge: Mapping[str, str | None] | None = None,
) -> RunSummary | None:
    """A copy of ``summary`` recording each calibration (``summary.calibration``, which the card and
    ``str(summary)`` show); None stays None. ``given``: what the caller passed, for the file's name;
    ``other_judge``: score -> the mismatch of a calibration forced onto another judge's scores (recorded).

    Example:
        >>> with_calibrations(RunSummary(), [cal]).calibration["QA_Correctness"]["labels"]  # doctest: +SKIP
        200
    """
    if summary is None:
        return None
    out = RunSummary.from_dict(summary.to_dict())
    file = Path(given).name if isinstance(given, (str, Path)) else None
    for cal in cals:
        out.calibration[cal.score] = calibration_entry(cal, file)
        if (other_judge or {}).get(cal.score):
            out.calibration[cal.score]["other_judge"] = (other_judge or {})[cal.score]
    return out
