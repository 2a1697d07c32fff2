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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..judging.ensemble import JUDGE_SEP  # a panel judge's own column: <column>__<judge>
from .groups import GroupTable, folder_groups, group_by_of, overview_lines, split_groups
from .summary import RunSummary
from .tally import (
    ArrowDtype,
    ColumnOverview,
    column_overview,
    declared_ranges,
    folder_splits,
    is_aux,
    range_of,
    score_kinds,
)

if TYPE_CHECKING:
    from datasets import Dataset

TERMINAL_COLUMNS = 12  # score lines a terminal shows before it says how many more there are
PLAIN_COLUMNS = 8  # the same outside a terminal, where each is a short item of one line


def split_overviews(ds: Dataset, split: str, summary: RunSummary | None = None) -> list[ColumnOverview]:
    """Every score column of one split (a ``datasets.Dataset``)."""
    ranges = declared_ranges(summary)
    table = ds.with_format("arrow")  # the rows a select/shuffle kept, in their order
    return [
        column_overview(split, c, [table[c]], kind, range_of(c, ranges))
        for c, kind in score_kinds(ds.features, summary)
    ]


def folder_overviews(folder: str | Path, summary: RunSummary | None = None) -> list[ColumnOverview]:
    """Every score column of a streamed result's folder (``data/<split>-NNNNN.parquet``), read batch by batch."""
    import pyarrow.parquet as pq

    ranges = declared_ranges(summary)
    out = []
    for split, paths in folder_splits(folder).items():
        schema = pq.read_schema(paths[0])
        features = {n: ArrowDtype(str(schema.field(n).type)) for n in schema.names}
        for c, kind in score_kinds(features, summary):
            arrays = (b.column(0) for p in paths for b in pq.ParquetFile(p).iter_batches(columns=[c]))
            out.append(column_overview(split, c, arrays, kind, range_of(c, ranges)))
    return out


@dataclass
class RunOverview:
    """What a run found: its score columns' overviews, its errors and the command that lists them.

    ``str()`` gives the terminal form; :meth:`lines` the form for a log too (``terminal=False``);
    :meth:`to_markdown` the card's table. ``groups``: the scores by group (:mod:`hf_judge.results.groups`),
    a table per score column, where a column to group by was named.
    """

    columns: list[ColumnOverview]
    summary: RunSummary | None = None
    rows: dict[str, int] = field(default_factory=dict)
    errors_command: str = ""
    groups: list[GroupTable] = field(default_factory=list)

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
        out += overview_lines(self.groups, terminal, width)
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
    aux = [c.column for c in ov.columns if c not in shown]
    if hidden > 0 or aux:
        more = [f"{hidden} more score {_columns(hidden)}"] * (hidden > 0)
        more += [f"{len(aux)} {_columns(len(aux))} beside them ({_beside(aux)})"] * bool(aux)
        out.append(f"  + {' and '.join(more)}: in the data and its plots"[:width])
    # the short headers said in words: beside the rows where they fit (the table must still fit one screen)
    legend = ["agree: judges scored alike"] * bool(agree)
    legend += ["len ρ: score/length rank corr. (!: bias)"] * bool(bias)
    if legend and len(out[0]) + 2 + len("; ".join(legend)) <= width:
        out[0] += "; " + "; ".join(legend)
    elif legend:
        out.append(f"  {'; '.join(legend)}"[:width])
    return out


# what a column beside the scores holds, by its suffix (tally.AUX_SUFFIXES); a panel judge's own: JUDGE_SEP
_BESIDE = {
    "_std": "spreads",
    "_majority": "majorities",
    "_samples": "samples",
    "_confidence": "confidences",
    "_disagree": "the two orders' disagreement",
}


def _columns(n: int) -> str:
    return "column" if n == 1 else "columns"


def _beside(columns: list[str]) -> str:
    """What the columns beside the scores are, in words: ``each judge's, spreads``."""
    words = [
        "each judge's" if JUDGE_SEP in c else next((w for s, w in _BESIDE.items() if c.endswith(s)), "")
        for c in columns
    ]
    return ", ".join(w for w in dict.fromkeys(words) if w) or "other figures"


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
        # a streamed run's Parquet shards: load_from_disk reads Arrow files only, hf_judge.load_result any folder
        load = f"hf_judge.load_result({saved_to!r})" if streamed else f"d.load_from_disk({saved_to!r})"
        where = saved_to
    elif repo:
        load, where = f"d.load_dataset({repo!r}, 'errors')", repo
    else:
        return ""
    module = "hf_judge" if streamed and saved_to else "datasets as d"
    code = f"import {module}; print(*{load}['errors'], sep='\\n')"
    # double quotes read best, and are safe unless the path holds what a shell expands inside them
    return f'python -c "{code}"' if not set(where) & set("\"$`\\!'") else f"python -c {shlex.quote(code)}"


def overview(
    scored: Mapping[str, Any],
    summary: RunSummary | None = None,
    *,
    saved_to: str | None = None,
    repo: str | None = None,
    by: str | None = None,
) -> RunOverview:
    """The overview of a scored result (``score_dataset``'s, ``filter_by_scores``'s, a ``DatasetDict``):
    per score column, rows scored, nulls, mean, median and a histogram. ``summary``: the run's (default: the
    result's own); ``saved_to``/``repo``: where the result went, for the command that lists its errors.
    ``by``: a column to show the scores by group of (``by="subject"``: per subject, the lowest mean first;
    default: the one the run recorded, ``summary.group_by``; ``""``: none), in ``.groups``.

    Example:
        >>> from hf_judge import overview
        >>> from datasets import Dataset, DatasetDict
        >>> print(overview(DatasetDict(train=Dataset.from_dict({"QA_Clarity": [7, 8, 8, None]}))))
        scores         train: 4 rows
          column      scored  nulls   mean  median  histogram
          QA_Clarity       3      1   7.67    8.00  7 ▄█ 8
        >>> ds = Dataset.from_dict({"subject": ["algebra", "geometry", "algebra"], "QA_Clarity": [8, 3, 6]})
        >>> print("\\n".join(overview(DatasetDict(train=ds), by="subject").lines()[3:]))
        by subject     QA_Clarity, lowest mean first
          subject     rows  nulls   mean  median  histogram
          geometry       1      0   3.00    3.00  3 █      8
          algebra        2      0   7.00    7.00  3    █ █ 8
    """
    summary = summary if summary is not None else getattr(scored, "summary", None)
    by = group_by_of(by, summary)
    columns: list[ColumnOverview] = []
    groups: list[GroupTable] = []
    for split, d in scored.items():
        if split != "errors":
            columns += split_overviews(d, split, summary)
            groups += split_groups(d, split, by, summary) if by else []
    rows = {k: len(d) for k, d in scored.items() if k != "errors"}
    return RunOverview(columns, summary, rows, errors_command(saved_to, repo=repo), groups)


def folder_overview(folder: str | Path, summary: RunSummary | None = None, *, by: str | None = None) -> RunOverview:
    """The overview of a streamed run's saved folder (Parquet shards), read batch by batch; ``summary``:
    the run's (default: the folder's ``summary.json``); ``by``: as :func:`overview`'s."""
    summary = summary if summary is not None else RunSummary.load(folder)
    by = group_by_of(by, summary)
    columns = folder_overviews(folder, summary)
    groups = folder_groups(folder, by, summary) if by else []
    rows = dict(summary.rows) if summary is not None else {}
    return RunOverview(columns, summary, rows, errors_command(str(folder), streamed=True), groups)
