"""Scores by group: for a column the user names (``--by subject``), each score's rows, nulls, mean, median and
histogram per value of that column, to answer "which source is worse?".

The groups of a table are sorted by mean, the lowest first (for a score where higher is better, the worst
first), then by rows (most first) and name; a group without a scored row comes last. A table shows at most
``max_groups`` groups (default MAX_GROUPS) and sums up the rest as "N more groups". The end-of-run overview
(:mod:`hf_judge.results.overview`) prints a few of these tables, the card and the report page show one per score.

Counted batch by batch with the overview's value counts (:class:`~hf_judge.results.tally.Tally`, one per group
and score), so a Dataset, a streamed run's Parquet folder and a stream are read the same way, in bounded
memory: the counts of at most TRACKED_GROUPS groups per split are kept; the values past them (a column of ids)
are counted, rows and distinct values, but not compared, and the tables say so.

Example:
    >>> from datasets import Dataset
    >>> ds = Dataset.from_dict({"subject": ["algebra", "geometry", "algebra"], "QA_Correctness": [8, 3, 6]})
    >>> [(g.name, g.figures.mean) for g in split_groups(ds, "train", "subject")[0].groups]
    [('geometry', 3.0), ('algebra', 7.0)]
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from .summary import RunSummary
from .tally import (
    SLICE,
    ArrowDtype,
    ColumnOverview,
    Tally,
    declared_ranges,
    folder_splits,
    is_aux,
    range_of,
    score_kinds,
)

if TYPE_CHECKING:
    from datasets import Dataset

MAX_GROUPS = 20  # groups a table shows (card, page); the rest are summed up as "N more groups"
TERMINAL_GROUPS = 10  # groups a terminal table shows
TERMINAL_TABLES = 3  # tables (score columns) a terminal shows; the card and the page show each one
TRACKED_GROUPS = 1_000  # groups per split whose value counts are kept (and compared)
MAX_UNTRACKED = 100_000  # distinct values past TRACKED_GROUPS counted exactly; past it, "over"
NULL_GROUP = "(null)"  # the group of the rows whose group column is null
NAME_CHARS = 60  # a group name is cut here in a table


@dataclass
class Group:
    """One group of a table: its name (the column's value as text) and its figures for the table's score."""

    name: str
    figures: ColumnOverview


@dataclass
class GroupTable:
    """One score column of one split, by group: the groups shown (lowest mean first), and what is left out.

    ``more``: groups not shown, ``more_rows`` their rows; ``untracked``: of these, the groups past
    TRACKED_GROUPS, which were counted but not compared (``over``: more than MAX_UNTRACKED of them).
    """

    split: str
    by: str
    column: str
    kind: str
    groups: list[Group]
    more: int = 0
    more_rows: int = 0
    untracked: int = 0
    over: bool = False

    def more_text(self) -> str:
        """``12 more groups (1,234 rows)``, with the untracked ones said; "" when every group is shown.

        Example:
            >>> GroupTable("train", "subject", "s", "number", [], more=12, more_rows=1234).more_text()
            '12 more groups (1,234 rows)'
        """
        if not self.more:
            return ""
        n = f"over {self.more:,}" if self.over else f"{self.more:,}"
        text = f"{n} more group{'s' if self.more != 1 else ''} ({self.more_rows:,} rows)"
        if self.untracked:
            text += f"; past the first {TRACKED_GROUPS:,} values of {self.by}, not compared"
        return text

    def lines(self, width: int = 100, max_groups: int = TERMINAL_GROUPS, split: bool = False) -> list[str]:
        """The terminal form: a heading, then a line per group (rows, nulls, mean, median, histogram)."""
        where = f" ({self.split})" if split else ""
        shown = self.groups[:max_groups]
        more = self.more + len(self.groups) - len(shown)
        more_rows = self.more_rows + sum(g.figures.rows for g in self.groups[len(shown) :])
        head = f"{'by ' + self.by:<15}{self.column}{where}, {_order_text(self.kind)}"
        name_w = min(max([len(self.by), *(len(g.name) for g in shown)]), 24)
        out = [
            head[:width],
            f"  {self.by[:name_w]:<{name_w}} {'rows':>7} {'nulls':>6} {'mean':>6} {'median':>7}  histogram",
        ]
        for g in shown:
            f = g.figures
            name = g.name if len(g.name) <= name_w else g.name[: name_w - 1] + "…"
            line = f"  {name:<{name_w}} {f.rows:>7,} {f.nulls:>6,} {_num(f.mean):>6} {_num(f.median):>7}"
            out.append(f"{line}  {f.histogram()}"[:width].rstrip())
        rest = GroupTable(self.split, self.by, self.column, self.kind, [], more, more_rows, self.untracked, self.over)
        if more:
            out.append(f"  + {rest.more_text()}"[:width])
        return out

    def to_markdown(self) -> str:
        """The card's table: group, rows, nulls, mean, median, histogram, and the groups left out."""
        out = [
            f"| {_cell(self.by)} | rows | nulls | mean | median | histogram |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for g in self.groups:
            f, hist = g.figures, g.figures.histogram()
            out.append(
                f"| {_cell(g.name)} | {f.rows:,} | {f.nulls:,} | {_num(f.mean)} | {_num(f.median)} | "
                + (f"`{hist}` |" if hist else " |")
            )
        if self.more:
            out.append(f"| *{_cell(self.more_text())}* | | | | | |")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """The page's form (JSON): the table's fields, each group's figures and its one-line histogram."""
        groups = [
            {
                "name": g.name,
                "rows": g.figures.rows,
                "nulls": g.figures.nulls,
                "mean": g.figures.mean,
                "median": g.figures.median,
                "histogram": g.figures.histogram(),
            }
            for g in self.groups
        ]
        return {
            "split": self.split,
            "by": self.by,
            "column": self.column,
            "kind": self.kind,
            "order": _order_text(self.kind),
            "groups": groups,
            "more": self.more,
            "more_text": self.more_text(),
        }


def _order_text(kind: str) -> str:
    return "by rows, most first" if kind == "pairwise" else "lowest mean first"


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def _cell(text: str) -> str:
    """A value of the data in a markdown table cell: no HTML, no column break, no line break, cut."""
    text = " ".join(text.split())
    text = text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"
    return html.escape(text).replace("|", "\\|").replace("`", "\\`")


def group_labels(arr: pa.Array | pa.ChunkedArray, names: Sequence[str] | None = None) -> pa.Array:
    """A group column's values as text, the groups' names: a number or a boolean as Arrow writes it (``3``,
    ``true``), a ``ClassLabel``'s name where ``names`` gives them, a null as NULL_GROUP.

    Example:
        >>> group_labels(pa.array([3, None])).to_pylist(), group_labels(pa.array([1, 0]), ["neg", "pos"]).to_pylist()
        (['3', '(null)'], ['pos', 'neg'])
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if names is not None and pa.types.is_integer(arr.type):
        arr = pa.array(list(names), pa.string()).take(arr)
    elif pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if not _groupable(arr.type):
        raise ConfigError(
            f"a group column must hold text, numbers, booleans or dates; this one holds {arr.type}: "
            "group by a column of sources or subjects"
        )
    return pc.fill_null(arr.cast(pa.string()), NULL_GROUP)


def _groupable(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
        or pa.types.is_null(t)
    )


def class_names(feature: Any) -> list[str] | None:
    """A ``ClassLabel`` feature's names (its values are their indices); None for any other feature."""
    names = getattr(feature, "names", None)
    return list(names) if isinstance(names, list) and hasattr(feature, "int2str") else None


def check_group_column(columns: Iterable[str], by: str, where: str) -> None:
    """A ConfigError unless ``by`` is one of ``columns``, with a did-you-mean.

    Example:
        >>> check_group_column(["subject", "question"], "subjet", "split 'train'")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: no column 'subjet' to group by in split 'train'; did you mean 'subject'? ...
    """
    from ..analysis.by_group import check_by

    check_by(columns, by, where, "its source or subject")


class GroupTally:
    """The value counts of each score column per group of one split, fed Arrow batches.

    Example:
        >>> t = GroupTally("subject", [("s", "number")])
        >>> t.add(pa.array(["a", "b", "a"]), {"s": pa.array([1, 2, 3])})
        >>> [(g.name, g.figures.mean) for g in t.tables("train")[0].groups]
        [('a', 2.0), ('b', 2.0)]
    """

    def __init__(self, by: str, kinds: Sequence[tuple[str, str]], names: Sequence[str] | None = None) -> None:
        self.by = by
        self.kinds = [(c, k) for c, k in kinds if c != by]
        self.names = names
        self.groups: dict[str, dict[str, Tally]] = {}
        self.untracked: dict[str, int] = {}  # group past TRACKED_GROUPS -> its rows
        self.untracked_rows = 0
        self.over = False

    def add(self, keys: pa.Array | pa.ChunkedArray, values: Mapping[str, pa.Array | pa.ChunkedArray]) -> None:
        """Count one batch: ``keys`` the group column's values, ``values`` each score column's, row for row."""
        for start in range(0, len(keys), SLICE):
            self._add(keys.slice(start, SLICE), {c: values[c].slice(start, SLICE) for c, _ in self.kinds})

    def _add(self, keys: pa.Array | pa.ChunkedArray, values: Mapping[str, pa.Array | pa.ChunkedArray]) -> None:
        import numpy as np

        encoded = group_labels(keys, self.names).dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")  # each group's rows, one run after another
        counts = np.bincount(codes, minlength=len(encoded.dictionary))
        starts = np.concatenate([[0], np.cumsum(counts)])
        for code, name in enumerate(encoded.dictionary.to_pylist()):
            n = int(counts[code])
            if n == 0:
                continue
            tallies = self.groups.get(name)
            if tallies is None and len(self.groups) >= TRACKED_GROUPS:
                self._untrack(name, n)
                continue
            if tallies is None:
                tallies = self.groups[name] = {c: Tally(k) for c, k in self.kinds}
            rows = pa.array(order[starts[code] : starts[code + 1]])
            for c, tally in tallies.items():
                tally.add(values[c].take(rows))

    def _untrack(self, name: str, n: int) -> None:
        self.untracked_rows += n
        if name in self.untracked or len(self.untracked) < MAX_UNTRACKED:
            self.untracked[name] = self.untracked.get(name, 0) + n
        else:
            self.over = True

    def tables(
        self,
        split: str,
        ranges: Mapping[str, tuple[float, float]] | None = None,
        max_groups: int = MAX_GROUPS,
    ) -> list[GroupTable]:
        """A table per score column: its groups sorted, the first ``max_groups`` shown. ``ranges``: the
        columns' declared ranges (the histograms span them; else the values seen in every group)."""
        out = []
        for column, kind in self.kinds:
            value_range = range_of(column, ranges or {}) or self._seen_range(column)
            groups = [Group(name, t[column].result(split, column, value_range)) for name, t in self.groups.items()]
            groups.sort(key=_sort_key)
            rest = groups[max_groups:]
            out.append(
                GroupTable(
                    split,
                    self.by,
                    column,
                    kind,
                    groups[:max_groups],
                    more=len(rest) + len(self.untracked),
                    more_rows=sum(g.figures.rows for g in rest) + self.untracked_rows,
                    untracked=len(self.untracked),
                    over=self.over,
                )
            )
        return out

    def _seen_range(self, column: str) -> tuple[float, float] | None:
        """The lowest and highest value of ``column`` in any group: each group's histogram spans the same."""
        seen = [v for t in self.groups.values() if t[column].kind == "number" for v in t[column].counts]
        return (min(seen), max(seen)) if seen else None


def _sort_key(g: Group) -> tuple[bool, float, int, str]:
    f = g.figures
    return (f.mean is None, f.mean if f.mean is not None else 0.0, -f.rows, g.name)


def _kinds(features: Mapping[str, Any], summary: RunSummary | None) -> list[tuple[str, str]]:
    """The score columns a group table is made of: those the overview shows, not what a run writes beside them."""
    kinds = score_kinds(features, summary)
    return [(c, k) for c, k in kinds if not is_aux(c)] or kinds


def group_tally(by: str, features: Mapping[str, Any], summary: RunSummary | None, where: str) -> GroupTally:
    """An empty :class:`GroupTally` of the score columns of a split with ``features`` (``datasets`` features,
    or :class:`~hf_judge.results.tally.ArrowDtype` by column) by ``by``, refused where ``by`` is none of them."""
    check_group_column(features, by, where)
    return GroupTally(by, _kinds(features, summary), class_names(features[by]))


def split_groups(
    ds: Dataset, split: str, by: str, summary: RunSummary | None = None, max_groups: int = MAX_GROUPS
) -> list[GroupTable]:
    """A table per score column of one split (a ``datasets.Dataset``), by the values of its column ``by``."""
    tally = group_tally(by, ds.features, summary, f"split {split!r}")
    # the rows a select/shuffle kept, in their order; only the columns counted
    table = ds.select_columns([by, *(c for c, _ in tally.kinds)]).with_format("arrow")
    for start in range(0, len(ds), SLICE):
        batch = table[start : start + SLICE]
        tally.add(batch[by], {c: batch[c] for c, _ in tally.kinds})
    return tally.tables(split, declared_ranges(summary), max_groups)


def folder_groups(
    folder: str | Path, by: str, summary: RunSummary | None = None, max_groups: int = MAX_GROUPS
) -> list[GroupTable]:
    """The same from a streamed result's folder (``data/<split>-NNNNN.parquet``), read batch by batch."""
    import pyarrow.parquet as pq

    out = []
    for split, paths in folder_splits(folder).items():
        schema = pq.read_schema(paths[0])
        check_group_column(schema.names, by, f"split {split!r}")
        kinds = _kinds({n: ArrowDtype(str(schema.field(n).type)) for n in schema.names}, summary)
        tally = GroupTally(by, kinds, _parquet_class_names(schema, by))
        columns = [by, *(c for c, _ in tally.kinds)]
        for p in paths:
            for batch in pq.ParquetFile(p).iter_batches(columns=columns):
                tally.add(batch.column(by), {c: batch.column(c) for c, _ in tally.kinds})
        out += tally.tables(split, declared_ranges(summary), max_groups)
    return out


def _parquet_class_names(schema: pa.Schema, by: str) -> list[str] | None:
    """A ``ClassLabel`` column's names, from the features ``datasets`` keeps in a Parquet file's metadata."""
    import json

    raw = (schema.metadata or {}).get(b"huggingface")
    if raw is None:
        return None
    try:
        feature = json.loads(raw)["info"]["features"][by]
    except (ValueError, KeyError, TypeError):
        return None
    names = feature.get("names") if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" else None
    return [str(n) for n in names] if isinstance(names, list) else None


@dataclass
class GroupValues:
    """The distinct values of a group column (as :func:`group_labels` names them), up to a cap, for a
    did-you-mean on a group name that is not one of them."""

    column: str
    names: set[str] = field(default_factory=set)
    cap: int = MAX_UNTRACKED

    def add(self, arr: pa.Array | pa.ChunkedArray, names: Sequence[str] | None = None) -> None:
        if len(self.names) < self.cap:
            self.names.update(pc.unique(group_labels(arr, names)).to_pylist())

    def check(self, wanted: Iterable[str], option: str) -> None:
        """A ConfigError for the first of ``wanted`` that is no value of the column, with a did-you-mean."""
        for name in wanted:
            if name in self.names or len(self.names) >= self.cap:
                continue
            close = difflib.get_close_matches(name, sorted(self.names), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            have = sorted(self.names)
            listed = ", ".join(have[:20]) + (f", ... ({len(have):,} in all)" if len(have) > 20 else "")
            raise ConfigError(
                f"{option}: no group {name!r} in column {self.column!r}; {hint}its values: {listed or '(none)'}"
            )


def group_by_of(by: str | None, summary: RunSummary | None) -> str:
    """The column to group by: ``by`` where given, else the one the run recorded (``summary.group_by``); ""
    for none. ``by=""`` turns a recorded one off.

    Example:
        >>> group_by_of(None, RunSummary(group_by="subject")), group_by_of("", RunSummary(group_by="subject"))
        ('subject', '')
    """
    if by is not None:
        return by
    return str(getattr(summary, "group_by", "") or "")


def overview_lines(tables: Sequence[GroupTable], terminal: bool, width: int = 100) -> list[str]:
    """The end-of-run lines of the group tables: in a terminal the first TERMINAL_TABLES tables of
    TERMINAL_GROUPS groups; in a log, a line per table (its groups' means, the lowest first)."""
    import textwrap

    if not tables:
        return []
    splits = len({t.split for t in tables}) > 1
    out: list[str] = []
    if terminal:
        for t in tables[:TERMINAL_TABLES]:
            out += t.lines(width, split=splits)
        if len(tables) > TERMINAL_TABLES:
            n = len(tables) - TERMINAL_TABLES
            out.append(f"  + {n} more score column{'s' if n != 1 else ''} by {tables[0].by}: in the report page")
        return out
    for t in tables:
        items = [f"{g.name} {_num(g.figures.mean) or 'no scores'}" for g in t.groups[:TERMINAL_GROUPS]]
        more = t.more + len(t.groups[TERMINAL_GROUPS:])
        items += [f"+{more:,} more"] if more else []
        text = f"{t.column}{f' ({t.split})' if splits else ''}, mean, lowest first: {', '.join(items)}"
        out += textwrap.wrap(text, width, initial_indent=f"{'by ' + t.by:<15}", subsequent_indent=" " * 15)
    return out


def groups_markdown(tables: Sequence[GroupTable]) -> str:
    """The card's section: a table per score column (and split), its groups sorted, the lowest mean first."""
    if not tables:
        return ""
    splits = len({t.split for t in tables}) > 1
    out = [
        f"Per value of `{_cell(tables[0].by)}`: rows, nulls, mean, median and histogram of each score, "
        f"the lowest mean first (at most {MAX_GROUPS} groups a table).",
        "",
    ]
    for t in tables:
        out += [f"**`{t.column}`**" + (f" ({t.split})" if splits else ""), "", t.to_markdown(), ""]
    return "\n".join(out).rstrip()
