"""A score column's figures from its value counts: rows, nulls, mean, median and the bins of its histogram,
counted batch by batch in bounded memory (:class:`Tally`), and which columns of a result are scores.

The overview (:mod:`hf_judge.results.overview`) shows them per column, the scores by group
(:mod:`hf_judge.results.groups`) per value of a column the user names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..judging.ensemble import JUDGE_SEP  # a panel judge's own column: <column>__<judge>
from ..judging.metrics import parse_jinja_file, parse_seed_file
from .columns import SCORE_TYPES
from .summary import RunSummary

BLOCKS = " ▁▂▃▄▅▆▇█"  # an empty bin is a space: the histogram keeps its width over the score range
FLOAT_BINS = 10
MAX_INT_BINS = 20  # an integer range wider than this (0..100) is grouped into FLOAT_BINS bins
MAX_DISTINCT = 4096  # distinct values a column's counts keep exactly; past it, SIGNIFICANT digits
SIGNIFICANT = 3
SLICE = 65_536  # rows counted at a time
# columns a run writes beside each score: shown in the card's full table, not at a glance
AUX_SUFFIXES = ("_std", "_majority", "_samples", "_confidence", "_disagree")
WINNER_SUFFIX = "_winner"  # a pairwise judge's verdict: "1", "2" or "tie"
WINNERS = ("1", "2", "tie")


@dataclass
class ColumnOverview:
    """One score column of one split: rows, nulls, mean, median and the counts its histogram draws.

    ``kind`` is ``number``, ``bool`` (true/false counts) or ``pairwise`` (response 1 / 2 / tie counts).
    ``bins``: (label, count) in order over the score range (the declared range where the prompt gives one).
    """

    split: str
    column: str
    kind: str
    rows: int
    nulls: int
    mean: float | None = None
    median: float | None = None
    bins: list[tuple[str, int]] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.rows - self.nulls

    def histogram(self) -> str:
        """One line: blocks over the range for numbers (``1 ▁ ▂▅█▃    10``), counts for the others.

        Example:
            >>> ColumnOverview("train", "s", "number", 6, 0, bins=[("1", 1), ("2", 0), ("3", 4)]).histogram()
            '1 ▂ █ 3'
            >>> ColumnOverview("train", "ok", "bool", 8, 0, bins=[("true", 5), ("false", 3)]).histogram()
            'true 5 · false 3'
        """
        if not self.bins or self.scored == 0:
            return ""
        if self.kind == "pairwise":  # the verdict column holds "1", "2" or "tie"
            (_, one), (_, two), (_, tie) = self.bins
            return f"1 wins {one:,} · 2 wins {two:,} · ties {tie:,}"
        if self.kind != "number":
            return " · ".join(f"{label} {count:,}" for label, count in self.bins)
        return f"{self.bins[0][0]} {spark([c for _, c in self.bins])} {self.bins[-1][0]}"


def spark(counts: list[int]) -> str:
    """Counts as block characters, the tallest a full block, an empty bin a space, any other at least ``▁``.

    Example:
        >>> spark([0, 1, 4, 8, 2])
        ' ▁▄█▂'
    """
    peak = max(counts, default=0) or 1
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[max(1, math.ceil(top * c / peak))] if c else BLOCKS[0] for c in counts)


class Tally:
    """Value counts of one column, fed Arrow arrays batch by batch.

    Past MAX_DISTINCT values (a column of ids, of free measurements) the counts go coarse: each value rounded
    to SIGNIFICANT digits, so memory stays bounded and the median is good to 3 significant digits. A NaN or
    an infinite number is no score: it counts with the nulls.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.rows = self.nulls = 0
        self.total = 0.0
        self.counts: Counter = Counter()
        self.coarse = False

    def add(self, arr: pa.Array | pa.ChunkedArray) -> None:
        # in slices: a column of distinct values goes coarse after its first slice, not after all of them
        for start in range(0, len(arr), SLICE):
            self._add(arr.slice(start, SLICE))

    def _add(self, arr: pa.Array | pa.ChunkedArray) -> None:
        self.rows += len(arr)
        self.nulls += arr.null_count
        valid = pc.drop_null(arr)
        if len(valid) and self.kind == "number":
            num = valid.cast(pa.float64())
            finite = pc.is_finite(num)
            if not pc.all(finite).as_py():
                num, valid = num.filter(finite), valid.filter(finite)
                self.nulls += len(finite) - len(num)
            self.total += pc.sum(num).as_py() or 0.0
            if self.coarse:
                valid = _significant(num)
            elif not pa.types.is_integer(valid.type):  # a mean of samples, a probability-weighted score
                valid = pc.round(num, 3)
        elif len(valid) and self.kind == "bool":
            valid = valid.cast(pa.int64())  # True -> 1: the mean is the share that is true
            self.total += pc.sum(valid).as_py()
        if len(valid) == 0:
            return
        for d in pc.value_counts(valid).to_pylist():
            self.counts[d["values"]] += d["counts"]
        if self.kind == "number" and not self.coarse and len(self.counts) > MAX_DISTINCT:
            self.coarse = True
            keys = list(self.counts)
            coarse: Counter = Counter()
            for k, v in zip(_significant(pa.array(keys, pa.float64())).to_pylist(), keys, strict=True):
                coarse[k] += self.counts[v]
            self.counts = coarse

    def result(self, split: str, column: str, value_range: tuple[float, float] | None) -> ColumnOverview:
        out = ColumnOverview(split, column, self.kind, self.rows, self.nulls)
        n = self.rows - self.nulls
        if n == 0:
            return out
        if self.kind == "pairwise":
            out.bins = [(w, self.counts.get(w, 0)) for w in WINNERS]
            return out
        out.mean = self.total / n
        if self.kind == "bool":
            out.bins = [("true", self.counts.get(1, 0)), ("false", self.counts.get(0, 0))]
            return out
        out.median = _median(self.counts, n)
        out.bins = _bins(self.counts, value_range)
        return out


def _significant(num: pa.Array) -> pa.Array:
    """``num`` rounded to SIGNIFICANT digits (1234.5 -> 1230.0)."""
    import numpy as np

    x = num.to_numpy(zero_copy_only=False)
    magnitude = np.floor(np.log10(np.abs(x), where=x != 0, out=np.zeros_like(x)))
    scale = 10.0 ** (magnitude - (SIGNIFICANT - 1))
    return pa.array(np.round(x / scale) * scale)


def _median(counts: Mapping[float, int], n: int) -> float:
    """The median of the values ``counts`` holds (the mean of the two middle ones for an even ``n``)."""
    wanted, middle, seen = {(n - 1) // 2, n // 2}, [], 0
    for value in sorted(counts):
        c = counts[value]
        middle += [value for i in sorted(wanted) if seen <= i < seen + c]
        seen += c
        if len(middle) == 2 or seen > n // 2:
            break
    return (middle[0] + middle[-1]) / 2


def _bins(counts: Mapping[float, int], value_range: tuple[float, float] | None) -> list[tuple[str, int]]:
    """(label, count) over the range: one bin per step of the values' scale (integers, or the half points of a
    pairwise judge's mean of two orders), or FLOAT_BINS equal bins (the first label is the low end, the last the
    high end)."""
    lo, hi = min(counts), max(counts)
    if value_range is not None:
        lo, hi = min(lo, value_range[0]), max(hi, value_range[1])
    step = grid_step([*counts, lo, hi])
    if step is not None and (hi - lo) / step < MAX_INT_BINS:
        return [(value_label(lo + i * step), counts.get(lo + i * step, 0)) for i in range(round((hi - lo) / step) + 1)]
    width = (hi - lo) / FLOAT_BINS or 1.0
    binned = [0] * FLOAT_BINS
    for v, c in counts.items():
        binned[min(FLOAT_BINS - 1, int((v - lo) / width))] += c
    labels = [_label(lo + i * width) for i in range(FLOAT_BINS)]
    labels[-1] = _label(hi)
    return list(zip(labels, binned, strict=True))


def _label(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def grid_step(values: Iterable[float]) -> float | None:
    """The scale every value lies on: 1 (integers), 0.5 (half points: a pairwise score, the mean of two orders'
    integer scores), or None (any other number: equal bins).

    Example:
        >>> grid_step([1, 3, 10]), grid_step([1, 3.5, 8]), grid_step([1, 3.25])
        (1.0, 0.5, None)
    """
    values = [float(v) for v in values]
    for step in (1.0, 0.5):
        if all((v / step).is_integer() for v in values):
            return step
    return None


def value_label(v: float) -> str:
    """A value on its scale, as a histogram's bin shows it: ``3``, ``3.5``."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def value_kind(dtype: Any, column: str) -> str | None:
    """``number``, ``bool`` or ``pairwise`` (a pairwise judge's verdict) for a score column's dtype; None for
    any other column.

    Example:
        >>> value_kind("int64", "QA_Clarity"), value_kind("string", "QA_Pairwise_winner"), value_kind("string", "q")
        ('number', 'pairwise', None)
    """
    if dtype == "bool":
        return "bool"
    if dtype in SCORE_TYPES:
        return "number"
    if dtype in ("string", "large_string") and column.endswith(WINNER_SUFFIX):
        return "pairwise"
    return None


def is_aux(column: str) -> bool:
    """A column written beside a score (a panel judge's own, a spread, a majority, a confidence).

    Example:
        >>> is_aux("QA_Clarity_std"), is_aux("QA_Clarity__gpt"), is_aux("QA_Clarity_expected")
        (True, True, False)
    """
    return JUDGE_SEP in column or column.endswith(AUX_SUFFIXES)


def declared_ranges(summary: RunSummary | None) -> dict[str, tuple[float, float]]:
    """Score column -> (minimum, maximum) as its prompt declares it, read from the prompt texts the summary
    records; a prompt that no longer parses gives none (its histogram spans the values seen)."""
    out: dict[str, tuple[float, float]] = {}
    for name, record in (summary.prompts if summary is not None else {}).items():
        path = Path(record.get("file") or f"{name}.jinja")
        parse = parse_seed_file if path.suffix == ".txt" else parse_jinja_file
        try:
            metric = parse(name, path, record.get("text") or "", dict(record.get("params") or {}))
        except Exception:  # noqa: BLE001 - a prompt of another hf-judge version: the range seen will do
            continue
        for o in metric.outputs:
            if o.minimum is not None and o.maximum is not None:
                out[o.column] = (o.minimum, o.maximum)
    return out


def range_of(column: str, ranges: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    """A column's declared range, or that of the score it derives from (``c_expected``, ``c__judge``)."""
    base = column.split(JUDGE_SEP)[0]
    for name in (column, base, base.removesuffix("_expected")):
        if name in ranges:
            return ranges[name]
    return None


def column_overview(
    split: str, column: str, arrays: Iterable[pa.Array], kind: str, value_range: tuple[float, float] | None = None
) -> ColumnOverview:
    """The overview of one column from its values, given as Arrow arrays (one, or batch by batch)."""
    tally = Tally(kind)
    for arr in arrays:
        tally.add(arr)
    return tally.result(split, column, value_range)


def score_kinds(features: Mapping[str, Any], summary: RunSummary | None) -> list[tuple[str, str]]:
    """(column, kind) of the score columns to show: the summary's (this run's and earlier runs'), else every
    numeric, boolean and pairwise-verdict column."""
    out = []
    for name, f in features.items():
        kind = value_kind(getattr(f, "dtype", None), name)
        if kind is None or (summary is not None and summary.columns and name not in summary.columns):
            continue
        out.append((name, kind))
    return out


def folder_splits(folder: str | Path) -> dict[str, list[Path]]:
    """Split -> its Parquet shards in a streamed result's folder (``data/<split>-NNNNN.parquet``), in order."""
    files: dict[str, list[Path]] = {}
    for f in sorted(Path(folder, "data").glob("*.parquet")):
        files.setdefault(f.name.rsplit("-", 1)[0], []).append(f)
    return files


@dataclass(frozen=True)
class ArrowDtype:
    """An Arrow type's name as a ``datasets`` feature names it (``double`` -> ``float64``), for a Parquet
    schema's columns read as features."""

    dtype: str

    def __post_init__(self) -> None:
        if self.dtype == "double":
            object.__setattr__(self, "dtype", "float64")
        elif self.dtype == "float":
            object.__setattr__(self, "dtype", "float32")
