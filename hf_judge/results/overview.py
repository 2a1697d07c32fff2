"""What a run found, at a glance: per score column the rows scored, the nulls, the mean, the median and a
one-line histogram; the errors by kind and the command that lists them; where the result and its pictures are.

The CLI prints it at the end of ``score`` and ``run`` (in full in a terminal, as a few plain lines in a log),
the card shows its table ("Scores at a glance"), and a library user gets it with :func:`overview`:

    >>> from hf_judge import overview, score_dataset  # doctest: +SKIP
    >>> print(overview(score_dataset(ds, ["QA_All"], model="gpt-4.1-nano")))  # doctest: +SKIP

Every figure is computed from value counts, batch by batch (exact for integer, boolean and text columns; a
float column's median to 0.001; past 4,096 distinct values, to 3 significant digits), so the same code reads
a Dataset in memory and the Parquet shards a streamed run wrote, in bounded memory: 1M rows of a score
column in about 0.03 s.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..judging.ensemble import JUDGE_SEP  # a panel judge's own column: <column>__<judge>
from .columns import SCORE_TYPES
from .summary import RunSummary

if TYPE_CHECKING:
    from datasets import Dataset

BLOCKS = " ▁▂▃▄▅▆▇█"  # an empty bin is a space: the histogram keeps its width over the score range
FLOAT_BINS = 10
MAX_INT_BINS = 20  # an integer range wider than this (0..100) is grouped into FLOAT_BINS bins
TERMINAL_COLUMNS = 12  # score lines a terminal shows before it says how many more there are
PLAIN_COLUMNS = 8  # the same outside a terminal, where each is a short item of one line
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


class _Tally:
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
    """(label, count) over the range: one bin per integer, or FLOAT_BINS equal bins (the first label is the
    low end, the last the high end)."""
    lo, hi = min(counts), max(counts)
    if value_range is not None:
        lo, hi = min(lo, value_range[0]), max(hi, value_range[1])
    integers = all(float(v).is_integer() for v in counts) and float(lo).is_integer() and float(hi).is_integer()
    if integers and hi - lo < MAX_INT_BINS:
        return [(_label(v), counts.get(v, 0)) for v in range(int(lo), int(hi) + 1)]
    width = (hi - lo) / FLOAT_BINS or 1.0
    binned = [0] * FLOAT_BINS
    for v, c in counts.items():
        binned[min(FLOAT_BINS - 1, int((v - lo) / width))] += c
    labels = [_label(lo + i * width) for i in range(FLOAT_BINS)]
    labels[-1] = _label(hi)
    return list(zip(labels, binned, strict=True))


def _label(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def _kind(dtype: Any, column: str) -> str | None:
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
    from ..judging.metrics import parse_jinja_file, parse_seed_file

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


def _range_of(column: str, ranges: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
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
    tally = _Tally(kind)
    for arr in arrays:
        tally.add(arr)
    return tally.result(split, column, value_range)


def _wanted(features: Mapping[str, Any], summary: RunSummary | None) -> list[tuple[str, str]]:
    """(column, kind) of the score columns to show: the summary's (this run's and earlier runs'), else every
    numeric, boolean and pairwise-verdict column."""
    out = []
    for name, f in features.items():
        kind = _kind(getattr(f, "dtype", None), name)
        if kind is None or (summary is not None and summary.columns and name not in summary.columns):
            continue
        out.append((name, kind))
    return out


def split_overviews(ds: Dataset, split: str, summary: RunSummary | None = None) -> list[ColumnOverview]:
    """Every score column of one split (a ``datasets.Dataset``)."""
    ranges = declared_ranges(summary)
    table = ds.with_format("arrow")  # the rows a select/shuffle kept, in their order
    return [
        column_overview(split, c, [table[c]], kind, _range_of(c, ranges)) for c, kind in _wanted(ds.features, summary)
    ]


def folder_overviews(folder: str | Path, summary: RunSummary | None = None) -> list[ColumnOverview]:
    """Every score column of a streamed result's folder (``data/<split>-NNNNN.parquet``), read batch by batch."""
    import pyarrow.parquet as pq

    ranges = declared_ranges(summary)
    files: dict[str, list[Path]] = {}
    for f in sorted(Path(folder, "data").glob("*.parquet")):
        files.setdefault(f.name.rsplit("-", 1)[0], []).append(f)
    out = []
    for split, paths in files.items():
        schema = pq.read_schema(paths[0])
        features = {n: _Dtype(str(schema.field(n).type)) for n in schema.names}
        for c, kind in _wanted(features, summary):
            arrays = (b.column(0) for p in paths for b in pq.ParquetFile(p).iter_batches(columns=[c]))
            out.append(column_overview(split, c, arrays, kind, _range_of(c, ranges)))
    return out


@dataclass(frozen=True)
class _Dtype:
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype == "double":
            object.__setattr__(self, "dtype", "float64")
        elif self.dtype == "float":
            object.__setattr__(self, "dtype", "float32")


@dataclass
class RunOverview:
    """What a run found: its score columns' overviews, its errors and the command that lists them.

    ``str()`` gives the terminal form; :meth:`lines` the form for a log too (``terminal=False``);
    :meth:`to_markdown` the card's table.
    """

    columns: list[ColumnOverview]
    summary: RunSummary | None = None
    rows: dict[str, int] = field(default_factory=dict)
    errors_command: str = ""

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def lines(self, terminal: bool = True, width: int = 100) -> list[str]:
        """The overview as lines of at most ``width`` characters (a command may run over): a table with
        histograms in a terminal; outside one (a CI log), one short line per split.

        Example:
            >>> print("\\n".join(overview(scored).lines(terminal=False)))  # doctest: +SKIP
            scores         train (8 rows), mean: QA_Relevance 7.25, QA_Clarity 6.5
        """
        out = _table(self, width) if terminal else _plain(self, width)
        failed = sum(self.summary.errors.values()) if self.summary is not None else 0
        if failed and self.errors_command:  # on a line of its own: a command to copy, whatever its length
            out += [
                f"{'errors split':<15}{failed:,} row{'s' if failed != 1 else ''}, listed by:",
                f"  {self.errors_command}",
            ]
        return out

    def to_markdown(self) -> str:
        """The "Scores at a glance" table of the card: column, rows scored, nulls, mean, median, histogram."""
        splits = len({c.split for c in self.columns}) > 1
        head = ["split"] * splits + ["column", "scored", "nulls", "mean", "median", "histogram"]
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for c in _shown(self.columns):
            hist = c.histogram()
            cells = [c.split] * splits + [f"`{c.column}`", f"{c.scored:,}", f"{c.nulls:,}", _num(c.mean)]
            cells += [_num(c.median), f"`{hist}`" if hist else ""]
            out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out)


def _shown(columns: list[ColumnOverview]) -> list[ColumnOverview]:
    """The columns shown at a glance: the scores, not what a run writes beside them (when there are scores)."""
    main = [c for c in columns if not is_aux(c.column)]
    return main or columns


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def _rows_text(rows: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v:,} rows" for k, v in rows.items())


def _table(ov: RunOverview, width: int) -> list[str]:
    """The terminal form: one line per score column, its histogram over the score range."""
    shown = _shown(ov.columns)
    if not shown:
        return [f"{'scores':<15}no score columns"] if ov.columns or ov.rows else []
    splits = len({c.split for c in shown}) > 1
    agree, bias = _agreement(ov.summary), _length_bias(ov.summary)
    names = [f"{c.split}: {c.column}" if splits else c.column for c in shown]
    name_w = min(max(map(len, names)), 32)
    extra = ["agree"] * bool(agree) + ["len ρ"] * bool(bias)
    head = f"  {'column':<{name_w}} {'scored':>7} {'nulls':>6} {'mean':>6} {'median':>7}"
    head += "".join(f" {h:>6}" for h in extra) + "  histogram"
    rows_line = _rows_text(ov.rows) or _rows_text({c.split: c.rows for c in shown})
    out = [f"{'scores':<15}{rows_line}", head[:width]]
    for name, c in list(zip(names, shown, strict=True))[:TERMINAL_COLUMNS]:
        name = name if len(name) <= name_w else name[: name_w - 1] + "…"
        line = f"  {name:<{name_w}} {c.scored:>7,} {c.nulls:>6,} {_num(c.mean):>6} {_num(c.median):>7}"
        if agree:
            line += f" {agree.get((c.split, c.column), ''):>6}"
        if bias:
            line += f" {bias.get(c.column, ''):>6}"
        out.append(f"{line}  {c.histogram()}"[:width].rstrip())
    hidden = len(shown) - TERMINAL_COLUMNS
    aux = len(ov.columns) - len(shown)
    if hidden > 0 or aux > 0:
        more = [f"{hidden} more score columns"] * (hidden > 0) + [
            f"{aux} columns beside them (each judge's, spreads)"
        ] * (aux > 0)
        out.append(f"  + {' and '.join(more)}: in the data and its plots"[:width])
    # the short headers said in words: beside the rows where they fit (the table must still fit one screen)
    legend = ["agree: judges scored alike"] * bool(agree)
    legend += ["len ρ: score/length rank corr. (!: bias)"] * bool(bias)
    if legend and len(out[0]) + 2 + len("; ".join(legend)) <= width:
        out[0] += "; " + "; ".join(legend)
    elif legend:
        out.append(f"  {'; '.join(legend)}"[:width])
    return out


def _plain(ov: RunOverview, width: int) -> list[str]:
    """Outside a terminal: per split, the mean of each score (the first few), and the nulls where any."""
    import textwrap

    out = []
    by_split: dict[str, list[ColumnOverview]] = {}
    for c in _shown(ov.columns):
        by_split.setdefault(c.split, []).append(c)
    for split, cols in by_split.items():
        means = [_plain_item(c) for c in cols[:PLAIN_COLUMNS] if c.scored]
        if len(cols) > PLAIN_COLUMNS:
            means.append(f"+{len(cols) - PLAIN_COLUMNS} more")
        nulls = sum(c.nulls for c in cols)
        text = f"{split} ({ov.rows.get(split, cols[0].rows):,} rows), mean: {', '.join(means) or 'no values'}"
        text += f"; {nulls:,} null score{'s' if nulls != 1 else ''}" if nulls else ""
        out += textwrap.wrap(text, width, initial_indent=f"{'scores':<15}", subsequent_indent=" " * 15)
    return out


def _plain_item(c: ColumnOverview) -> str:
    """One column in a log's line: its mean, a boolean's share of true, a pairwise judge's wins."""
    if c.kind == "bool" and c.mean is not None:
        return f"{c.column} {c.mean:.0%} true"
    if c.kind == "pairwise":
        return f"{c.column} {c.histogram()}"
    return f"{c.column} {c.mean:.2f}"


def _agreement(summary: RunSummary | None) -> dict[tuple[str, str], str]:
    """(split, column) -> a judge panel's share of rows on which its judges gave the same value."""
    out = {}
    for split, by_metric in (summary.agreement if summary is not None else {}).items():
        for column, a in ((c, a) for cols in by_metric.values() for c, a in cols.items()):
            if isinstance(a, dict) and a.get("mean_exact") is not None:
                out[(split, column)] = f"{a['mean_exact']:.0%}"
    return out


def _length_bias(summary: RunSummary | None) -> dict[str, str]:
    """Column -> the rank correlation of its score with the judged text's length (``!``: a warning), where the
    summary measured it (``RunSummary.length_bias``, read defensively: older summaries have none)."""
    found = getattr(summary, "length_bias", None) or {}
    out = {}
    for column, b in found.items() if isinstance(found, dict) else ():
        rho = b.get("rho") if isinstance(b, dict) else None
        if isinstance(rho, (int, float)) and not math.isnan(rho):
            out[column] = f"{rho:+.2f}" + ("!" if b.get("warning") else "")
    return out


def errors_command(saved_to: str | None = None, *, streamed: bool = False, repo: str | None = None) -> str:
    """The command that lists a result's ``errors`` split, a row a line: from the folder it was saved to
    (``streamed``: the Parquet folder of a streamed run), else from the Hub repo it was pushed to.

    Example:
        >>> print(errors_command("out"))
        python -c "import datasets as d; print(*d.load_from_disk('out')['errors'], sep='\\n')"
    """
    if saved_to:
        load = f"load_dataset({saved_to!r}, 'errors')" if streamed else f"load_from_disk({saved_to!r})"
        where = saved_to
    elif repo:
        load, where = f"load_dataset({repo!r}, 'errors')", repo
    else:
        return ""
    code = f"import datasets as d; print(*d.{load}['errors'], sep='\\n')"
    # double quotes read best, and are safe unless the path holds what a shell expands inside them
    return f'python -c "{code}"' if not set(where) & set("\"$`\\!'") else f"python -c {shlex.quote(code)}"


def overview(
    scored: Mapping[str, Any],
    summary: RunSummary | None = None,
    *,
    saved_to: str | None = None,
    repo: str | None = None,
) -> RunOverview:
    """The overview of a scored result (``score_dataset``'s, ``filter_by_scores``'s, a ``DatasetDict``):
    per score column, rows scored, nulls, mean, median and a histogram. ``summary``: the run's (default: the
    result's own); ``saved_to``/``repo``: where the result went, for the command that lists its errors.

    Example:
        >>> from hf_judge import overview
        >>> from datasets import Dataset, DatasetDict
        >>> print(overview(DatasetDict(train=Dataset.from_dict({"QA_Clarity": [7, 8, 8, None]}))))
        scores         train: 4 rows
          column      scored  nulls   mean  median  histogram
          QA_Clarity       3      1   7.67    8.00  7 ▄█ 8
    """
    summary = summary if summary is not None else getattr(scored, "summary", None)
    columns: list[ColumnOverview] = []
    for split, d in scored.items():
        if split != "errors":
            columns += split_overviews(d, split, summary)
    rows = {k: len(d) for k, d in scored.items() if k != "errors"}
    return RunOverview(columns, summary, rows, errors_command(saved_to, repo=repo))


def folder_overview(folder: str | Path, summary: RunSummary | None = None) -> RunOverview:
    """The overview of a streamed run's saved folder (Parquet shards), read batch by batch; ``summary``:
    the run's (default: the folder's ``summary.json``)."""
    summary = summary if summary is not None else RunSummary.load(folder)
    columns = folder_overviews(folder, summary)
    rows = dict(summary.rows) if summary is not None else {}
    return RunOverview(columns, summary, rows, errors_command(str(folder), streamed=True))
