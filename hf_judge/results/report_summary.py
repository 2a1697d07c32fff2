"""A ``summary.json`` as the report page may trust it: the page reads a result's summary, which may come from a Hub
repo someone else wrote (or an older, a newer, a hand-edited hf-judge). What the page cannot use is dropped with a
warning that names it, and the page is written all the same: a NaN or an infinity becomes null, a lone surrogate
(no UTF-8 can hold it) becomes U+FFFD, a field of the wrong type takes its default, an entry of the wrong type in
a mapping or a list is left out.

What is read is bounded whatever the file holds: a file over ``MAX_SUMMARY_BYTES`` is not read (the page is written
without it), a value nested deeper than ``MAX_DEPTH`` is cut there (one nested past what Python's JSON reader goes
leaves the file out), and the overview the page embeds of it (:func:`bounded_overview`) keeps ``MAX_NOTES`` notes of
``MAX_NOTE`` characters, texts of ``MAX_TEXT`` characters, lists of ``MAX_ITEMS`` entries and at most
``MAX_OVERVIEW`` characters in all, saying what it left out. hf-judge's own summaries are far below every cap.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from .summary import BATCH_COUNTERS, RUN_COUNTERS, RunSummary

MAX_SUMMARY_BYTES = 16_000_000  # a summary.json over this is not read (hf-judge's own: kilobytes)
MAX_DEPTH = 32  # levels of nesting kept of a summary's value (hf-judge's own: 6 at most)
MAX_NOTES = 100  # notes the page shows
MAX_NOTE = 2_000  # characters of a note the page shows
MAX_TEXT = 20_000  # characters of any other text of the overview
MAX_ITEMS = 1_000  # entries of a list or a mapping of the overview (a run's history keeps its newest)
MAX_OVERVIEW = 2_000_000  # characters of the overview's JSON in all: past it, its largest figures are left out

# fields holding a mapping of name -> count, of name -> text
_COUNTS = ("rows", "errors", "failed_attempts")
_TEXTS = ("metrics", "column_mapping")
_PRICE_TEXTS = ("source", "batch_source")  # Price's texts beside its numbers


def read_summary(path: str | Path | None) -> tuple[RunSummary | None, list[str]]:
    """The summary in the file ``path`` as the page may use it (:func:`checked_summary`), read within bounds: None,
    with the reason, for a file over ``MAX_SUMMARY_BYTES``, nested past what Python's JSON reader goes, or not a
    JSON object; (None, []) where ``path`` is None.

    Example:
        >>> read_summary("out/summary.json")  # doctest: +SKIP
        (RunSummary(model='gpt-4.1-nano', ...), [])
    """
    if path is None:
        return None, []
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_SUMMARY_BYTES:
        return None, [
            f"{path} is {size / 1e6:,.1f} MB, over the {MAX_SUMMARY_BYTES / 1e6:.1f} MB a summary.json may be "
            "(hf-judge writes kilobytes): it is not read, and the page shows no run details and no prompts"
        ]
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except RecursionError:
        return None, [
            f"{path} nests deeper than Python's JSON reader goes: it is not read, and the page shows no run "
            "details and no prompts"
        ]
    except ValueError as e:  # not JSON, not UTF-8
        return None, [f"{path} cannot be read ({type(e).__name__}: {e}); it is left out"]
    if not isinstance(data, dict):
        return None, [f"{path} holds a {type(data).__name__}, not a JSON object; it is left out"]
    return checked_summary(RunSummary.from_dict(data))


def _clean(value: Any, found: set[str], name: str = "", depth: int = 0) -> Any:
    """``value`` with NaN and infinities as None, lone surrogates replaced and what is nested past ``MAX_DEPTH``
    left out (``found`` says which occurred; ``name``: the field it is in)."""
    if depth > MAX_DEPTH:
        found.add(f"`{name}` nests deeper than {MAX_DEPTH} levels: what is deeper is left out (now null)")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        found.add("a NaN or infinite number (now null)")
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            found.add("a lone surrogate in a text (now U+FFFD)")
            return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
        return value
    if isinstance(value, dict):
        return {
            _clean(k, found) if isinstance(k, str) else str(k): _clean(v, found, name, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_clean(v, found, name, depth + 1) for v in value]
    return value


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _typed(name: str, value: Any, default: Any, problems: list[str]) -> Any:
    """``value`` where it has the type of the field's ``default``, else the default (with a problem)."""
    kind: tuple[type, ...] = (
        (dict,) if isinstance(default, dict) else (list,) if isinstance(default, list) else (type(default),)
    )
    if kind == (float,):
        kind = (int, float)
    if name in ("price", "engine"):  # a mapping, or null (none)
        kind = (dict, type(None))
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind[0] in (int, float))
    if ok:
        return value
    want = {dict: "a mapping", list: "a list", int: "a number", str: "a text", bool: "true/false"}.get(kind[0], "null")
    problems.append(f"`{name}` is {type(value).__name__}, not {want}: ignored")
    return default


def _entries(name: str, value: dict, keep: Any, problems: list[str]) -> dict:
    kept = {k: v for k, v in value.items() if keep(v)}
    if len(kept) < len(value):
        problems.append(f"`{name}`: {len(value) - len(kept)} entries of the wrong type left out")
    return kept


def checked_summary(summary: RunSummary | None) -> tuple[RunSummary | None, list[str]]:
    """``summary`` with what the page cannot use dropped, and what was dropped (see the module docstring).

    Example:
        >>> s, problems = checked_summary(RunSummary(rows="many"))  # type: ignore[arg-type]
        >>> s.rows, problems
        ({}, ['summary.json: `rows` is str, not a mapping: ignored'])
    """
    if summary is None:
        return None, []
    found: set[str] = set()
    problems: list[str] = []
    defaults = RunSummary()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(RunSummary):
        value = _clean(getattr(summary, f.name), found, f.name)
        values[f.name] = _typed(f.name, value, getattr(defaults, f.name), problems)
    for name in _COUNTS:
        values[name] = _entries(name, values[name], _number, problems)
    for name in _TEXTS:
        values[name] = _entries(name, values[name], lambda v: isinstance(v, str), problems)
    values["prompts"] = _entries("prompts", values["prompts"], lambda v: isinstance(v, dict), problems)
    for record in values["prompts"].values():
        for key, kind in (("text", str), ("file", str), ("sha256", str), ("params", dict)):
            if record.get(key) is not None and not isinstance(record[key], kind):
                problems.append(f"`prompts`: a {key} of the wrong type left out")
                record.pop(key)
    counters = (*RUN_COUNTERS, *BATCH_COUNTERS)
    runs = [r for r in values["runs"] if isinstance(r, dict) and all(_number(r.get(k, 0)) for k in counters)]
    if len(runs) < len(values["runs"]):
        problems.append(f"`runs`: {len(values['runs']) - len(runs)} entries of the wrong type left out")
    values["runs"] = runs
    judges = values["sampling"].get("judges")
    if judges is not None and not (isinstance(judges, list) and all(isinstance(j, dict) for j in judges)):
        problems.append("`sampling.judges` is not a list of judges: ignored")
        values["sampling"] = {k: v for k, v in values["sampling"].items() if k != "judges"}
    for key in ("min", "max"):
        given = values["filters"].get(key)
        if given is not None and not (isinstance(given, dict) and all(_number(v) for v in given.values())):
            problems.append(f"`filters.{key}` is not column -> number: ignored")
            values["filters"] = {k: v for k, v in values["filters"].items() if k != key}
    price = values["price"] or {}
    # the USD figures are numbers (or null: not given); where they came from is a text
    if not all(_number(v) or v is None or (k in _PRICE_TEXTS and isinstance(v, str)) for k, v in price.items()):
        problems.append("`price` holds something other than numbers: ignored")
        values["price"] = None
    tiers = values["cascade"].get("tiers")
    if tiers is not None and not (isinstance(tiers, dict) and all(isinstance(t, dict) for t in tiers.values())):
        problems.append("`cascade.tiers` is not a mapping of tiers: ignored")
        values["cascade"] = {}
    checked = RunSummary(**values)
    try:
        checked.cost(checked.totals())
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        problems.append(f"`price` cannot price the tokens ({e}): ignored")
        checked.price, checked.cascade = None, {}
    return checked, [f"summary.json: {p}" for p in sorted(found)] + [f"summary.json: {p}" for p in problems]


def _bounded(value: Any, cut: list[str], where: str) -> Any:
    """``value`` with its texts cut at ``MAX_TEXT`` characters and its lists and mappings at ``MAX_ITEMS`` entries
    (a list keeps its last ones: a run's history, newest last), each cut said in ``cut``."""
    if isinstance(value, str) and len(value) > MAX_TEXT:
        cut.append(f"a text of {len(value):,} characters in `{where}` (cut at {MAX_TEXT:,})")
        return value[:MAX_TEXT] + f" [cut at {MAX_TEXT:,} characters]"
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            cut.append(f"{len(value) - MAX_ITEMS:,} of the {len(value):,} entries of `{where}`")
        items = list(value.items())[:MAX_ITEMS]
        return {_bounded(k, cut, where): _bounded(v, cut, where) for k, v in items}
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            cut.append(f"the first {len(value) - MAX_ITEMS:,} of the {len(value):,} entries of `{where}`")
        return [_bounded(v, cut, where) for v in value[-MAX_ITEMS:]]
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def bounded_overview(overview: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The overview the page embeds of a summary (``report._overview``'s), within the caps of the module docstring,
    and what was left out, one line each (the page shows them under Notes, the CLI warns).

    Example:
        >>> o, left_out = bounded_overview({"model": "m", "notes": ["x" * 5000]})
        >>> len(o["notes"][0]), left_out
        (2026, ['a note of 5,000 characters (cut at 2,000)'])
    """
    cut: list[str] = []
    notes = [n if isinstance(n, str) else json.dumps(n, default=str) for n in overview.get("notes") or []]
    if len(notes) > MAX_NOTES:
        cut.append(f"{len(notes) - MAX_NOTES:,} of the {len(notes):,} notes")
    kept_notes = []
    for note in notes[:MAX_NOTES]:
        if len(note) > MAX_NOTE:
            cut.append(f"a note of {len(note):,} characters (cut at {MAX_NOTE:,})")
            note = note[:MAX_NOTE] + f" [cut at {MAX_NOTE:,} characters]"
        kept_notes.append(note)
    out = {k: _bounded(v, cut, k) for k, v in overview.items() if k != "notes"}
    out["notes"] = kept_notes
    figures = out.get("figures") or {}
    for name in sorted(figures, key=lambda k: _size(figures[k]), reverse=True):
        if _size(out) <= MAX_OVERVIEW:
            break
        cut.append(f"the figure `{name}` ({_size(figures.pop(name)):,} characters)")
    if _size(out) > MAX_OVERVIEW:  # what is left past the cap is no summary hf-judge wrote: its essentials only
        cut.append(f"every detail but the model, the totals and the notes (over {MAX_OVERVIEW:,} characters)")
        out = {k: out[k] for k in ("model", "host", "totals", "cost", "notes") if k in out}
    return out, cut
