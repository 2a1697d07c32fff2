"""What the report page embeds of a split: which rows (all of them, or those a reviewer needs), their values,
every row's scores, the distributions, and each row's prompt as sent.

Rows: a split of at most ``max_rows`` rows holding at most ``MAX_CHARS`` characters of text is embedded whole.
A larger one embeds, per score column, the lowest and highest rows and those nearest each threshold (a filter's,
else the quartiles), the rows where a panel's judges or a judge's samples disagree most, the rows with errors, then
a uniform sample, up to ``max_rows`` rows and ``MAX_CHARS`` characters; the page shows how many of each and how
many were left out. The scores of every row are embedded while they fit (``MAX_SCORE_VALUES``), so the page's
threshold counts are those of ``filter_by_scores`` over the whole split.

Prompts: for each metric the page gets the rendered messages once, with a marker where each column's value goes
(a *skeleton*), and the row's values fill it in; the rebuild is checked row by row against the messages
:mod:`hf_judge.judging.prompt` renders, and a row where the two differ (a filter in the template, a branch
taken) carries its own messages instead.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, TemplateError
from ..judging.prompt import NoRequest, prompt_values, request_messages
from ..judging.render import format_value
from ..judging.sandbox import RenderLimitError, render_limits
from .card import column_stats
from .columns import score_columns
from .prompts import Prompter
from .summary import RunSummary

if TYPE_CHECKING:
    from datasets import Dataset

MAX_ROWS = 5_000  # rows embedded per split; a larger split embeds a selection (see the module docstring)
MAX_TEXT = 20_000  # characters of one text value in the page; the rest is cut (show-prompt prints it whole)
MAX_CHARS = 25_000_000  # characters of text embedded per split (after the cut): long documents embed fewer rows
MAX_SCORE_VALUES = 2_000_000  # every row's scores embedded (for exact threshold counts) up to this many values
MAX_ERRORS = 5_000  # error rows embedded; the counts by kind are of all of them
EXTREMES = 50  # lowest and highest rows per score column
NEAR = 25  # rows on each side of each threshold
DISAGREE = 200  # rows where judges or samples disagree most
_SIZE_ROWS = 1024  # rows whose text sizes are counted at once (at most this many cut values held)
_MARK = re.compile("\ue000(\\d+)\ue001")  # private-use characters: no prompt file writes them


def split_scores(d: Dataset, summary: RunSummary | None) -> list[str]:
    """The score columns the page shows and thresholds apply to: numeric and boolean columns (those of the run,
    where its summary lists them)."""
    return [c for c in score_columns(d) if summary is None or not summary.columns or c in summary.columns]


def _numbers(table: pa.Table, column: str) -> np.ndarray:
    """A score column as float64, nulls as NaN (booleans as 0/1)."""
    arr = table.column(column)
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int8())
    return np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def cut_texts(table: pa.Table, cap: int) -> pa.Table:
    """The table with each text value cut after ``cap + 1`` characters, in Arrow: the page shows ``cap`` and marks
    the cut, and a value of 100 MB is never read whole (only the part kept is).

    Example:
        >>> cut_texts(pa.table({"q": ["abcdef"], "n": [1]}), 2).to_pylist()
        [{'q': 'abc', 'n': 1}]
    """
    import pyarrow.compute as pc

    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if _is_text(col.type):
            table = table.set_column(i, name, pc.utf8_slice_codeunits(col, 0, cap + 1))
    return table


def text_sizes(d: Dataset, max_text: int = MAX_TEXT) -> np.ndarray:
    """Per row, the characters of its text columns as the page holds them (each value cut at ``max_text``).
    Counted a few rows at a time from each value's first ``max_text`` characters, the rest never read."""
    import pyarrow.compute as pc

    table = d.with_format("arrow")[:]
    sizes = np.zeros(len(d), dtype=np.int64)
    for name in table.column_names:
        col = table.column(name)
        if _is_text(col.type):
            for start in range(0, len(col), _SIZE_ROWS):
                part = pc.utf8_slice_codeunits(col.slice(start, _SIZE_ROWS), 0, max_text)
                lengths = pc.fill_null(pc.utf8_length(part), 0)
                sizes[start : start + len(part)] += np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)
    return sizes


def capped_rows(d: Dataset, indices: Sequence[int], max_text: int = MAX_TEXT) -> Dataset:
    """The rows ``indices`` of ``d`` (ascending), as a Dataset of their own, with each text value cut after
    ``max_text + 1`` characters (:func:`cut_texts`) before any is read into Python: embedding 12 values of 100 MB
    costs what embedding their first ``max_text`` characters costs.

    Example:
        >>> from datasets import Dataset
        >>> capped_rows(Dataset.from_dict({"q": ["a" * 9, "b"]}), [0], 3).to_list()
        [{'q': 'aaaa'}]
    """
    from datasets import Dataset, DatasetInfo

    arrow = d.with_format("arrow")
    parts = []
    start = 0
    while start < len(indices):  # runs of consecutive rows: a slice each, which copies nothing
        stop = start + 1
        while stop < len(indices) and indices[stop] == indices[stop - 1] + 1:
            stop += 1
        parts.append(cut_texts(arrow[int(indices[start]) : int(indices[stop - 1]) + 1], max_text))
        start = stop
    table = pa.concat_tables(parts) if parts else cut_texts(arrow[:0], max_text)
    return Dataset(table, info=DatasetInfo(features=d.features))


def select_rows(
    d: Dataset,
    scores: Sequence[str],
    error_rows: set[int],
    thresholds: dict[str, list[float]],
    max_rows: int = MAX_ROWS,
    seed: int = 0,
    max_chars: int = MAX_CHARS,
    max_text: int = MAX_TEXT,
    sample: Sequence[int] | None = None,
    every_row: bool = True,
    tiebreak: np.ndarray | None = None,
    judges: Collection[str] | None = None,
) -> tuple[list[int], dict[str, int]]:
    """The row indices to embed, in order, and how many each reason added (``all`` when every row fits in
    ``max_rows`` rows and ``max_chars`` characters of text). ``sample``: the rows of the uniform sample, in the
    order they are taken (default: every row, shuffled); a stream's page gives its reservoir, and ``every_row=False``
    where ``d`` holds only the rows it kept, and ``tiebreak``: each row's random key, by which it kept them.

    Example:
        >>> from datasets import Dataset
        >>> select_rows(Dataset.from_dict({"s": [3, 1, 2]}), ["s"], set(), {}, max_rows=10)
        ([0, 1, 2], {'all': 3})
    """
    n = len(d)
    sizes = text_sizes(d, max_text)
    if every_row and n <= max_rows and int(sizes.sum()) <= max_chars:
        return list(range(n)), {"all": n}
    table = d.with_format("arrow")[:] if scores else None
    rng = np.random.default_rng(seed)
    if tiebreak is None:
        tiebreak = rng.permutation(n)  # ties (integer scores) broken at random, not by row order
    chosen: dict[int, None] = {}
    counts: dict[str, int] = {}
    used = 0

    def add(reason: str, rows: Any) -> None:
        nonlocal used
        before = len(chosen)
        for r in rows:
            if len(chosen) >= max_rows or used >= max_chars:
                break
            r = int(r)
            if r not in chosen and used + sizes[r] <= max_chars:  # a row too long for what is left: the next
                chosen[r] = None
                used += int(sizes[r])
        counts[reason] = counts.get(reason, 0) + len(chosen) - before

    values = {c: _numbers(table, c) for c in scores} if table is not None else {}
    for c, v in values.items():
        ok = np.flatnonzero(~np.isnan(v))
        order = ok[np.lexsort((tiebreak[ok], v[ok]))]
        add("lowest", order[:EXTREMES])
        add("highest", order[::-1][:EXTREMES])
        for t in thresholds.get(c, []):
            dist = np.abs(v[ok] - t)
            add("near a threshold", ok[np.lexsort((tiebreak[ok], dist))][: 2 * NEAR])
    spread = disagreement(values, judges)
    if spread is not None:
        top = np.flatnonzero(spread > 0)
        add("judges or samples disagree", top[np.argsort(-spread[top], kind="stable")][:DISAGREE])
    add("errors", sorted(error_rows))
    add("uniform sample", rng.permutation(n) if sample is None else sample)
    return sorted(chosen), {k: v for k, v in counts.items() if v}


def disagreement(values: dict[str, np.ndarray], judges: Collection[str] | None = None) -> np.ndarray | None:
    """Per row, how much its panel's judges (``c__judge`` columns, a pairwise ``_disagree``) or a judge's samples
    (``c_std``) disagree: the largest spread over its score columns; None without such columns. ``judges``: the
    panel's judges where known (a ``c__name`` column of another name is no judge's).

    Example:
        >>> disagreement({"S__a": np.array([1.0, 5.0]), "S__b": np.array([1.0, 2.0])})
        array([0., 3.])
    """
    spread = None
    groups: dict[str, list[np.ndarray]] = {}
    for c, v in values.items():
        base, sep, judge = c.partition("__")
        if sep and (judges is None or judge in judges):
            groups.setdefault(base, []).append(v)
        elif c.endswith(("_std", "_disagree")):
            s = np.nan_to_num(v)
            spread = s if spread is None else np.maximum(spread, s)
    for vs in groups.values():
        if len(vs) > 1:
            stack = np.vstack(vs)
            # a row no judge answered is all NaN: its spread is 0, not a RuntimeWarning printed to the reader
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                s = np.nan_to_num(np.nanmax(stack, axis=0) - np.nanmin(stack, axis=0))
            spread = s if spread is None else np.maximum(spread, s)
    return spread


def thresholds_of(d: Dataset, scores: Sequence[str], summary: RunSummary | None) -> dict[str, list[float]]:
    """The thresholds whose neighbourhood a large split embeds: a filter's where the result records one, else
    each score column's quartiles."""
    f = (summary.filters if summary is not None else None) or {}
    given: dict[str, list[float]] = {}
    for c, v in [*f.get("min", {}).items(), *f.get("max", {}).items()]:
        given.setdefault(c, []).append(float(v))
    if given:
        return given
    table = d.with_format("arrow")[:]
    out = {}
    for c in scores:
        v = _numbers(table, c)
        v = v[~np.isnan(v)]
        if len(v):
            out[c] = sorted(set(np.percentile(v, [25, 50, 75]).tolist()))
    return out


def _cell(value: Any, cap: int) -> tuple[Any, bool]:
    """A value as the page holds it, and whether it was cut: numbers and booleans as they are, text (and any
    other value, as its prompt text) cut at ``cap`` characters."""
    if value is None or isinstance(value, bool):
        return value, False
    if isinstance(value, (int, float)):
        return (None if isinstance(value, float) and not math.isfinite(value) else value), False
    if isinstance(value, list) and all(x is None or isinstance(x, (bool, int, float)) for x in value):
        return [None if isinstance(x, float) and not math.isfinite(x) else x for x in value], False
    text = format_value(value)
    text = text if isinstance(text, str) else str(text)
    return (text[:cap], True) if len(text) > cap else (text, False)


def _images(d: Dataset) -> set[str]:
    return {c for c, f in d.features.items() if type(f).__name__ in ("Image", "Audio", "Video", "Pdf")}


def split_rows(d: Dataset, indices: list[int], max_text: int) -> tuple[dict[str, list], dict[str, list[int]], list]:
    """(column -> values of the ``indices`` rows as the page shows them, column -> positions cut at
    ``max_text``, the rows as Python values for the prompts)."""
    table = d.select(indices).with_format("arrow")[:] if indices else d.with_format("arrow")[:0]
    media = _images(d)
    cols: dict[str, list] = {}
    cut: dict[str, list[int]] = {}
    raw_rows = table.to_pylist()
    for c in table.column_names:
        out = []
        for pos, row in enumerate(raw_rows):
            if c in media:
                out.append(None if row[c] is None else "[image]")
                continue
            v, was_cut = _cell(row[c], max_text)
            if was_cut:
                cut.setdefault(c, []).append(pos)
            out.append(v)
        cols[c] = out
    return cols, cut, raw_rows


def metric_columns(d: Dataset, prompter: Prompter | None, names: Sequence[str]) -> dict[str, list[str]]:
    """Metric -> the split's columns that are its own (its outputs, with their per-judge, per-sample and
    probability-weighted columns): each column goes to the metric whose output name it extends the most."""
    bases: list[tuple[str, str]] = []  # (output column or metric name, metric)
    for name in names:
        metric = prompter.metrics.get(name) if prompter is not None else None
        bases += [(b, name) for b in [name, *(metric.columns if metric is not None else [])]]
    out: dict[str, list[str]] = {name: [] for name in names}
    for c in d.column_names:
        # the longest output name it extends; between equals, the metric it is named after (QA_Clarity's own
        # score beside QA_All's Clarity)
        owners = [(len(b), c.startswith(m), m) for b, m in bases if c == b or c.startswith((b + "_", b + "__"))]
        if owners:
            out[max(owners)[2]].append(c)
    return out


def skeleton(prompter: Prompter, name: str, nulls: frozenset[str]) -> list[list[dict]] | None:
    """The messages of metric ``name`` with a marker for each column's value (``parts``: text, or
    ``{"c": column}``); ``nulls``: the optional variables whose column is null. None for a metric with images."""
    metric, columns, images = prompter.metrics[name], prompter.columns[name], prompter.images[name]
    if images:
        return None
    names = [v for v, c in columns.items() if c is not None]
    values = {v: (None if v in nulls else f"\ue000{i}\ue001") for i, v in enumerate(names)}
    values.update({v: None for v, c in columns.items() if c is None})
    try:
        requests = request_messages(metric, values)
    except TemplateError:
        return None
    out = []
    for messages in requests:
        parts_of = []
        for m in messages:
            pieces = _MARK.split(m["content"])
            parts = [p if k % 2 == 0 else {"c": columns[names[int(p)]]} for k, p in enumerate(pieces)]
            parts_of.append({"role": m["role"], "parts": [p for p in parts if p != ""]})
        out.append(parts_of)
    return out


def fill(skel: list[list[dict]], row: dict[str, Any]) -> list[list[dict]]:
    """A skeleton's messages with ``row``'s values (as prompt text) in place of the markers."""
    return [
        [
            {
                "role": m["role"],
                "content": "".join(p if isinstance(p, str) else format_value(row[p["c"]]) for p in m["parts"]),
            }
            for m in messages
        ]
        for messages in skel
    ]


def split_prompts(prompter: Prompter, names: Sequence[str], raw_rows: list[dict]) -> dict[str, Any]:
    """Metric -> {"skeletons": key -> skeleton, "rows": per embedded row a skeleton's key, or {"messages": ...}
    where the skeleton does not rebuild it, or {"none": why}}; metrics that cannot be rebuilt -> {"none": why}."""
    out: dict[str, Any] = {}
    for name in names:
        if name not in prompter.metrics:
            out[name] = {"none": prompter.problems.get(name, f"{name}: not rebuilt")}
            continue
        try:  # a recorded prompt someone else wrote renders within bounds (judging/sandbox.py)
            with render_limits():
                out[name] = _metric_prompts(prompter, name, raw_rows)
        except RenderLimitError as e:
            prompter.problems[name] = f"{name}: the recorded prompt cannot be shown: {e}"
            out[name] = {"none": prompter.problems[name]}
    return out


def _metric_prompts(prompter: Prompter, name: str, raw_rows: list[dict]) -> dict[str, Any]:
    """One metric's entry of :func:`split_prompts`."""
    metric, columns, images = prompter.metrics[name], prompter.columns[name], prompter.images[name]
    skeletons: dict[str, Any] = {}
    rows: list[Any] = []
    for row in raw_rows:
        batch = {c: [row.get(c)] for c in columns.values() if c is not None}
        try:
            sent = request_messages(metric, prompt_values(metric, columns, batch, 0, images), images)
        except RenderLimitError:
            raise  # not this row's: the template's (split_prompts)
        except NoRequest as e:
            rows.append({"none": f"no request was sent for this row ({e.kind}: {e.message})"})
            continue
        except (TemplateError, ConfigError) as e:
            rows.append({"none": f"the template fails on this row, so nothing was sent: {e}"})
            continue
        nulls = frozenset(v for v, c in columns.items() if c is not None and row.get(c) is None)
        key = ",".join(sorted(nulls))
        if key not in skeletons:
            skeletons[key] = skeleton(prompter, name, nulls)
        skel = skeletons[key]
        rows.append(key if skel is not None and fill(skel, row) == sent else {"messages": _cap_messages(sent)})
    return {"skeletons": {k: v for k, v in skeletons.items() if v is not None}, "rows": rows}


def _cap_messages(requests: list[list[dict]], cap: int = 4 * MAX_TEXT) -> list[list[dict]]:
    """Messages whose image parts are shown as a placeholder and whose text is cut at ``cap`` characters."""
    out = []
    for messages in requests:
        shown = []
        for m in messages:
            content = m["content"]
            if not isinstance(content, str):
                content = "".join(p.get("text", "") if p.get("type") == "text" else "[image]" for p in content)
            shown.append({"role": m["role"], "content": content[:cap]})
        out.append(shown)
    return out


def all_scores(d: Dataset, scores: Sequence[str]) -> dict[str, list] | None:
    """Every row's value of each score column (NaN as null), while they fit ``MAX_SCORE_VALUES``."""
    if not scores or len(d) * len(scores) > MAX_SCORE_VALUES:
        return None
    table = d.with_format("arrow")[:]
    out = {}
    for c in scores:
        arr = table.column(c)
        if pa.types.is_floating(arr.type):
            out[c] = [None if v is None or not math.isfinite(v) else v for v in arr.to_pylist()]
        else:
            out[c] = arr.to_pylist()
    return out


def distributions(d: Dataset, scores: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Score column -> count, nulls, mean, quantiles and histogram over the whole split (the card's)."""
    return {c: column_stats(d, c) for c in scores}
