"""A ``summary.json`` as the report page may trust it: the page reads a result's summary, which may come from a Hub
repo someone else wrote (or an older, a newer, a hand-edited hf-judge). What the page cannot use is dropped with a
warning that names it, and the page is written all the same: a NaN or an infinity becomes null, a lone surrogate
(no UTF-8 can hold it) becomes U+FFFD, a field of the wrong type takes its default, an entry of the wrong type in
a mapping or a list is left out.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .summary import BATCH_COUNTERS, RUN_COUNTERS, RunSummary

# fields holding a mapping of name -> count, of name -> text
_COUNTS = ("rows", "errors", "failed_attempts")
_TEXTS = ("metrics", "column_mapping")
_PRICE_TEXTS = ("source", "batch_source")  # Price's texts beside its numbers


def _clean(value: Any, found: set[str]) -> Any:
    """``value`` with NaN and infinities as None and lone surrogates replaced (``found`` says which occurred)."""
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
        return {_clean(k, found) if isinstance(k, str) else str(k): _clean(v, found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, found) for v in value]
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
    if name == "price":
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
        value = _clean(getattr(summary, f.name), found)
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
