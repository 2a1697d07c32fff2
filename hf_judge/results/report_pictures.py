"""What a result folder holds beside its data that the report's overview shows: the pictures (PNG, embedded as
``data:`` URIs so the page stays one file) and the calibration ``hf-judge calibrate`` saved.

Found in the folder, never drawn here: the plots extra draws them when the command that makes them runs
(``hf-judge calibrate`` writes ``<score>_reliability.png`` beside ``calibration.json``; ``hf-judge agreement
--plots DIR`` writes where it is told, and a result downloaded from the Hub holds ``hf_judge/plots/agreement/``).
The score distributions are left out: the page draws them from the data.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

from ..analysis.calibration import FILE_NAME

# pictures a page embeds at most, in bytes (before base64): a folder of many PNGs does not make a page of many MB
MAX_PICTURE_BYTES = 3_000_000
_PNG = b"\x89PNG\r\n\x1a\n"
# where the pictures that are not score distributions lie in a result folder (a local run's, a Hub download's)
_WHERE = ("*.png", "plots/agreement/**/*.png", "hf_judge/plots/agreement/**/*.png", "agreement/**/*.png")
_CALIBRATION_KEYS = ("score", "column", "label", "kind", "pairs", "ece", "threshold", "cv", "dropped")


def folder_pictures(folder: str | Path | None, max_bytes: int = MAX_PICTURE_BYTES) -> dict[str, Any]:
    """The PNGs of a result folder as the page embeds them: ``{"items": [{"name", "title", "src"}], "left_out":
    n}`` (``src`` a ``data:image/png;base64,`` URI; past ``max_bytes`` the rest are counted, not embedded).

    Example:
        >>> folder_pictures("out/")["items"][0]["name"]  # doctest: +SKIP
        'QA_Correctness_reliability.png'
    """
    out: dict[str, Any] = {"items": [], "left_out": 0}
    if folder is None or not Path(folder).is_dir():
        return out
    root = Path(folder)
    seen: set[Path] = set()
    used = 0
    for pattern in _WHERE:
        for path in sorted(root.glob(pattern)):
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            data = path.read_bytes()
            if not data.startswith(_PNG):
                continue
            if used + len(data) > max_bytes:
                out["left_out"] += 1
                continue
            used += len(data)
            out["items"].append(
                {
                    "name": path.relative_to(root).as_posix(),
                    "title": path.stem.replace("_", " "),
                    "src": "data:image/png;base64," + base64.b64encode(data).decode("ascii"),
                }
            )
    return out


def folder_calibrations(folder: str | Path | None) -> list[dict[str, Any]]:
    """The figures of each calibration the folder holds (``calibration.json``, ``calibration_<score>.json``: one
    per score): score, labels, kind, pairs, calibration errors, threshold and its cross-validated figures. Files
    that are not a calibration are left out.

    Example:
        >>> folder_calibrations("out/")[0]["ece"]["calibrated"]  # doctest: +SKIP
        0.041
    """
    if folder is None or not Path(folder).is_dir():
        return []
    out = []
    for path in sorted(Path(folder).glob("calibration*.json")):
        if path.name != FILE_NAME and not path.name.startswith("calibration_"):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "score" in data:
            out.append({k: data[k] for k in _CALIBRATION_KEYS if k in data})
    return out


CHOICE_FILE = "choose_judge.json"  # analysis.leaderboard.FILE: the page reads it without the analysis layer
_CHOICE_KEYS = ("name", "judge", "model", "metric", "score", "interval", "kappa", "kendall", "coverage",
                "cost_per_1000", "cost_per_1000_batch", "latency_p50_s", "latency_p95_s")  # fmt: skip


def _no_number(_: str) -> None:
    """NaN, Infinity and -Infinity in a JSON file: no figure."""
    return None


def _finite(text: str) -> float | None:
    """A JSON number as a float, None where it overflows to an infinity (1e999)."""
    value = float(text)
    return value if math.isfinite(value) else None


def folder_choice(folder: str | Path | None) -> dict[str, Any] | None:
    """What ``choose-judge -o DIR`` found (``DIR/choose_judge.json``), as the page's section shows it: a bar per
    judge with its interval, the recommendation, the human ceiling. Read from ``folder`` or, for a candidate's
    own folder (``DIR/<judge>/``), from the folder above it; None where neither holds one. A figure that is no
    finite number (NaN, Infinity: a hand-edited or foreign file) is None, which the page shows as "-", and an
    interval with such an end is none.

    Example:
        >>> folder_choice("choice/")["recommendation"]["name"]  # doctest: +SKIP
        'gpt-4.1-nano'
    """
    if folder is None:
        return None
    for where in (Path(folder), Path(folder).parent):
        path = where / CHOICE_FILE
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_number, parse_float=_finite)
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
            return None
        out = {k: data.get(k) for k in ("metric", "kind", "rows", "headline", "recommendation", "ceiling")}
        entries = [
            {**{k: e.get(k) for k in _CHOICE_KEYS}, **_checks(e)} for e in data["entries"] if isinstance(e, dict)
        ]
        for e in entries:
            if not isinstance(e["interval"], list) or len(e["interval"]) != 2 or None in e["interval"]:
                e["interval"] = None
        return {**out, "entries": entries, "groups": choice_groups(data.get("groups"), data.get("rule"))}
    return None


def _checks(e: dict[str, Any]) -> dict[str, Any]:
    """The checks that need no labels, as the page's table shows them beside each other: the share of pairs whose
    orders disagree (``judgebench.orders_disagree.share``) and the intransitive triads (``transitivity``: violations
    of triads); None where the entry has none (or a foreign file holds something else)."""
    jb = e.get("judgebench")
    disagree = jb.get("orders_disagree") if isinstance(jb, dict) else None
    share = disagree.get("share") if isinstance(disagree, dict) else None
    t = e.get("transitivity")
    counts = [t.get(k) for k in ("violations", "triads")] if isinstance(t, dict) else []
    return {
        "orders_disagree": share if isinstance(share, (int, float)) and not isinstance(share, bool) else None,
        "transitivity": dict(zip(("violations", "triads"), counts, strict=True))
        if counts and all(isinstance(v, int) and not isinstance(v, bool) for v in counts)
        else None,
    }


def _figure(e: dict[str, Any]) -> dict[str, Any]:
    """A figure with its interval (``name`` kept where it has one); an interval that is not two numbers: none."""
    out = {k: e.get(k) for k in ("name", "score", "interval") if k != "name" or "name" in e}
    if not isinstance(out["interval"], list) or len(out["interval"]) != 2 or None in out["interval"]:
        out["interval"] = None
    return out


def choice_groups(groups: Any, rule: Any = None) -> dict[str, Any] | None:
    """The figures per group of a ``choose-judge --by`` output, as the page's table of groups shows them: each
    group's rows, best judge, chance level, the people's own figure under the table's ``rule`` (where the labels
    are people's votes) and each judge's figure with its interval (a figure that is no number: none)."""
    if not isinstance(groups, dict) or not isinstance(groups.get("groups"), list):
        return None
    out = []
    for g in groups["groups"]:
        if not isinstance(g, dict):
            continue
        entries = [_figure({**e, "name": e.get("name")}) for e in g.get("entries") or [] if isinstance(e, dict)]
        fit = g.get("fit") if isinstance(g.get("fit"), list) else []
        chance: dict[str, Any] = g["chance"] if isinstance(g.get("chance"), dict) else {}
        people: dict[str, Any] = g["humans"] if isinstance(g.get("humans"), dict) else {}
        humans = people.get(rule)
        out.append(
            {
                "name": g.get("name"), "rows": g.get("rows"), "best": g.get("best"), "fit": fit, "entries": entries,
                "chance": chance.get("score"), "humans": _figure(humans) if isinstance(humans, dict) else None,
            }
        )  # fmt: skip
    more = {k: groups.get(k) if isinstance(groups.get(k), int) else 0 for k in ("more", "more_rows")}
    return {"by": groups.get("by"), "groups": out, **more}
