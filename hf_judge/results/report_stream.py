"""The report page of a streamed result that has no folder to read back (a push with no ``-o DIR``): built from
the rows as they pass, once, in bounded memory, by the same code as a Dataset's page (:mod:`.report`).

Per split it keeps, as the rows pass (each row gets two random keys: its tie-break, and its place in the sample):

- a uniform sample of ``max_rows`` rows (the rows of the smallest sample keys: a reservoir);
- per score column, the ``EXTREMES`` lowest and highest rows;
- per value of a score column with at most ``DISCRETE`` values, the ``2 * NEAR`` rows of smallest key: the
  neighbourhood of a threshold that falls on that value (the quartiles are known only at the end);
- the ``DISAGREE`` rows whose judges or samples disagree most, and the first ``max_rows`` rows with errors;
- every row's score columns while they fit ``MAX_SCORE_VALUES`` values, else a uniform sample of that many values,
  with exact counts, nulls, mean, minimum, maximum and integer and boolean histograms;

their text values cut at ``max_text`` characters (as the page shows them). At the end
:func:`~.report_data.select_rows` chooses among the kept rows as it does among all the rows of a Dataset, so a split
that fits is embedded whole, and the extremes, the disagreements and the error rows are those of every row. What
differs from a Dataset's page: the neighbourhood of a quartile on a score of more than ``DISCRETE`` values is the
nearest rows of the sample, not of the split; past ``MAX_SCORE_VALUES`` the quantiles, a float score's histogram
and the counts of every judgment are those of a uniform sample (as a Dataset's page, it then has no exact threshold
counts).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Dataset, DatasetInfo, Features

from . import report_data as rd
from .columns import SCORE_TYPES
from .errors_split import ErrorFiles, errors_dataset
from .groups import GroupTally, group_by_of, group_tally
from .pooled import pooled_distributions
from .report import embed_split, errors_data, page_data, render_page
from .summary import RunSummary, panel_judges
from .tally import declared_ranges

MAX_VALUES = 1_000  # an integer score's exact histogram up to this many values
DISCRETE = 32  # a score column of at most this many values keeps the neighbourhood of each of them
_ROW, _KEY = "__hf_judge_row", "__hf_judge_key"


class _Best:
    """The ``k`` rows of smallest (``first``, ``second``) seen so far."""

    def __init__(self, k: int):
        self.k = k
        self.rows = np.zeros(0, dtype=np.int64)
        self.first = np.zeros(0)
        self.second = np.zeros(0)

    def offer(self, rows: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """Take the rows among these that are among the ``k`` best; returns those taken."""
        if len(self.rows) >= self.k:  # only those better than the worst kept can enter
            wf, ws = self.first[-1], self.second[-1]
            better = (first < wf) | ((first == wf) & (second < ws))
            rows, first, second = rows[better], first[better], second[better]
        if not len(rows):
            return rows
        all_rows = np.concatenate([self.rows, rows])
        all_first, all_second = np.concatenate([self.first, first]), np.concatenate([self.second, second])
        order = np.lexsort((all_second, all_first))[: self.k]
        self.rows, self.first, self.second = all_rows[order], all_first[order], all_second[order]
        return np.intersect1d(rows, self.rows)


def _floats(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if pa.types.is_boolean(column.type):
        column = column.cast(pa.int8())
    return np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


class _Counts:
    """Exact count, nulls, sum, minimum, maximum and (integers and booleans) value counts of one score column."""

    def __init__(self) -> None:
        self.count = self.null = 0
        self.total = 0.0
        self.low, self.high = np.inf, -np.inf
        self.values: dict[Any, int] | None = {}

    def add(self, column: pa.ChunkedArray) -> None:
        valid = pc.drop_null(column)
        self.null += len(column) - len(valid)
        if not len(valid):
            return
        v = _floats(valid)
        self.count += len(v)
        self.total += float(v.sum())
        self.low, self.high = min(self.low, float(v.min())), max(self.high, float(v.max()))
        if self.values is not None and (pa.types.is_integer(valid.type) or pa.types.is_boolean(valid.type)):
            for d in pc.value_counts(valid).to_pylist():
                self.values[d["values"]] = self.values.get(d["values"], 0) + d["counts"]
            if len(self.values) > MAX_VALUES:  # a histogram of so many bars is the sample's, scaled
                self.values = None
        else:
            self.values = None

    def patch(self, stats: dict[str, Any]) -> dict[str, Any]:
        """A sample's stats with what is exact of every row in their place."""
        sampled = stats.get("count", 0)
        stats.update(count=self.count, null=self.null, sample=sampled)
        if not self.count:
            return stats
        stats["mean"] = self.total / self.count
        if self.values is not None and any(isinstance(k, bool) for k in self.values):
            stats["hist"] = {"true": self.values.get(True, 0), "false": self.values.get(False, 0)}
            return stats
        stats.update(min=self.low, max=self.high)
        if self.values is not None:
            stats["hist"] = {int(k): self.values[k] for k in sorted(self.values)}
        elif sampled:  # a float score's bins: the sample's, scaled to every row
            stats["hist"] = {k: round(n * self.count / sampled) for k, n in stats.get("hist", {}).items()}
        return stats


class SplitKeeper:
    """What one split's page needs of its rows, kept as they pass (see the module docstring).

    Example:
        >>> keeper = SplitKeeper(features, summary)  # doctest: +SKIP
        >>> for table, errors in batches: keeper.add(table, errors)  # doctest: +SKIP
        >>> split = keeper.embedded("train", summary, errors_data(errors_dataset(all_errors)))  # doctest: +SKIP
    """

    def __init__(
        self,
        features: Features,
        summary: RunSummary | None,
        max_rows: int = rd.MAX_ROWS,
        max_text: int = rd.MAX_TEXT,
        seed: int = 0,
    ):
        self.features, self.max_rows, self.max_text = features, max_rows, max_text
        wanted = set(summary.columns) if summary is not None and summary.columns else None
        self.scores = [
            n
            for n, f in features.items()
            if getattr(f, "dtype", None) in SCORE_TYPES and (wanted is None or n in wanted)
        ]
        # the columns whose every value the page counts: the scores and each judgment's samples (pooled.py)
        self.counted = [*self.scores, *(n for n in features if "_samples" in n and n not in self.scores)]
        self.rng = np.random.default_rng(seed)
        self.rows = 0
        self.pool: list[pa.Table] = []  # the kept rows, with their row number
        self.pooled = 0
        self.live = self.max_rows  # rows the keepers held at the last compaction
        self.sample = _Best(max_rows)
        self.low = {c: _Best(rd.EXTREMES) for c in self.scores}
        self.high = {c: _Best(rd.EXTREMES) for c in self.scores}
        self.near: dict[str, dict[float, _Best] | None] = {c: {} for c in self.scores}
        self.disagree = _Best(rd.DISAGREE)
        self.errors: dict[int, None] = {}
        self.values: list[pa.Table] = []  # the counted columns of every row, or of a uniform sample of them
        self.kept_values = 0
        self.exact = True
        self.counts = {c: _Counts() for c in self.scores}

    def add(self, table: pa.Table, errors: Iterable[dict[str, Any]] = ()) -> None:
        """The next rows of the split (in order, with the score columns) and their error rows."""
        n = table.num_rows
        mine = []
        for e in errors:  # the batch's own (the first max_rows rows with errors are kept)
            if len(self.errors) < self.max_rows and int(e["row"]) not in self.errors:
                self.errors[int(e["row"])] = None
                mine.append(int(e["row"]) - self.rows)
        if not n:
            return
        rows = np.arange(self.rows, self.rows + n, dtype=np.int64)
        keys = self.rng.random(n)  # the tie-break, as report_data's permutation: lowest first, highest last
        drawn = self.rng.random(n)  # the sample's own, as report_data's second permutation
        self.rows += n
        taken = [self.sample.offer(rows, drawn, drawn)]
        values = {c: _floats(table.column(c)) for c in self.scores}
        for c, v in values.items():
            ok = ~np.isnan(v)
            taken.append(self.low[c].offer(rows[ok], v[ok], keys[ok]))
            taken.append(self.high[c].offer(rows[ok], -v[ok], -keys[ok]))
            taken += self._near(c, rows[ok], v[ok], keys[ok])
            self.counts[c].add(table.column(c))
        spread = rd.disagreement(values)
        if spread is not None:
            top = spread > 0
            taken.append(self.disagree.offer(rows[top], -spread[top], rows[top].astype(np.float64)))
        mine = [r for r in mine if 0 <= r < n]
        keep = np.unique(np.concatenate([*taken, rows[np.asarray(mine, dtype=np.int64)]]))
        if len(keep):
            part = rd.cut_texts(table.take(pa.array(keep - rows[0])), self.max_text)
            self.pool.append(
                part.append_column(_ROW, pa.array(keep)).append_column(_KEY, pa.array(keys[keep - rows[0]]))
            )
            self.pooled += len(keep)
            # the rows no keeper holds any more go, now and then; and the small tables of a long stream's few new
            # rows per batch are joined (each costs its columns' buffers)
            if self.pooled > 2 * self.live + 4096 or len(self.pool) > 256:
                self._compact()
        self._count(table, drawn)

    def _near(self, c: str, rows: np.ndarray, v: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
        by_value = self.near[c]
        if by_value is None:
            return []
        taken = []
        for u in np.unique(v):
            if u not in by_value:
                if len(by_value) >= DISCRETE:  # a continuous score: its quartiles' rows come from the sample
                    self.near[c] = None
                    return []
                by_value[float(u)] = _Best(2 * rd.NEAR)
            at = v == u
            taken.append(by_value[float(u)].offer(rows[at], keys[at], keys[at]))
        return taken

    def _count(self, table: pa.Table, keys: np.ndarray) -> None:
        """Keep the counted columns of every row while they fit ``MAX_SCORE_VALUES`` values, then of a sample."""
        if not self.counted:
            return
        self.values.append(table.select(self.counted).append_column(_KEY, pa.array(keys)))
        self.kept_values += table.num_rows
        if self.kept_values > self._room():
            self.exact = False
        if not self.exact and self.kept_values > 2 * self._room():
            self._prune()

    def _room(self) -> int:
        return rd.MAX_SCORE_VALUES // max(1, len(self.scores))

    def _prune(self) -> None:
        """Keep the counted columns of the rows of the smallest sample keys: a uniform sample of them."""
        room = self._room()
        kept = pa.concat_tables(self.values)
        if kept.num_rows > room:
            smallest = np.argpartition(np.asarray(kept.column(_KEY)), room)[:room]
            kept = kept.take(pa.array(np.sort(smallest)))
        self.values, self.kept_values = [kept], kept.num_rows

    def _live(self) -> np.ndarray:
        keepers = [self.sample, self.disagree, *self.low.values(), *self.high.values()]
        keepers += [b for by in self.near.values() if by for b in by.values()]
        return np.unique(np.concatenate([*(k.rows for k in keepers), np.fromiter(self.errors, np.int64)]))

    def _compact(self) -> None:
        table = pa.concat_tables(self.pool)
        table = table.filter(pc.is_in(table.column(_ROW), pa.array(self._live())))
        self.pool, self.pooled = [table], table.num_rows
        self.live = table.num_rows

    def embedded(
        self, name: str, summary: RunSummary | None, errors: dict[str, Any], cache: tuple[str | Path, str | None] | None
    ) -> dict[str, Any]:
        """The split as the page embeds it (``errors``: :func:`errors_data`'s, of every split)."""
        schema = self.features.arrow_schema
        if self.pool:
            self._compact()
            kept = self.pool[0].sort_by(_ROW)
        else:
            kept = schema.empty_table().append_column(_ROW, pa.array([], pa.int64()))
            kept = kept.append_column(_KEY, pa.array([], pa.float64()))
        numbers = np.asarray(kept.column(_ROW), dtype=np.int64)
        keys = np.asarray(kept.column(_KEY), dtype=np.float64)
        # the split's features (Image, ClassLabel, ...), which the page reads, not those Arrow's types would give
        d = Dataset(kept.drop_columns([_ROW, _KEY]).cast(schema), info=DatasetInfo(features=self.features))
        where = {int(r): i for i, r in enumerate(numbers)}
        values = self._values()
        thresholds = rd.thresholds_of(values, self.scores, summary)
        error_rows = {where[int(e["row"])] for e in errors["rows"] if e.get("split") == name and int(e["row"]) in where}
        sample = [where[int(r)] for r in self.sample.rows]  # smallest sample key first: a uniform order
        local, reasons = rd.select_rows(
            d, self.scores, error_rows, thresholds, self.max_rows, max_text=self.max_text, sample=sample,
            every_row=len(d) == self.rows, tiebreak=keys, judges=panel_judges(summary),
        )  # fmt: skip
        stats = rd.distributions(values, self.scores)
        if not self.exact:
            stats = {c: self.counts[c].patch(s) for c, s in stats.items()}
        whole = {
            "rows": self.rows,
            "all_scores": rd.all_scores(values, self.scores) if self.exact else None,
            "stats": stats,
            "pooled": pooled_distributions(values, panel_judges(summary)),
        }
        indices = [int(numbers[i]) for i in local]
        return embed_split(
            d.select(local), indices, reasons, thresholds, self.scores, whole, summary, self.max_text, cache
        )

    def _values(self) -> Dataset:
        if not self.exact:  # the rows since the last pruning would weigh more than those before
            self._prune()
        table = pa.concat_tables(self.values) if self.values else None
        features = Features({c: self.features[c] for c in self.counted})
        table = features.arrow_schema.empty_table() if table is None else table.drop_columns([_KEY])
        return Dataset(table.cast(features.arrow_schema), info=DatasetInfo(features=features))


class StreamPage:
    """The page of a streamed result's splits, built as their rows pass (``add``), rendered once all have (``html``).

    Example:
        >>> page = StreamPage(source="me/big-judged")  # doctest: +SKIP
        >>> page.start("train", features, summary); page.add("train", table, errors)  # doctest: +SKIP
        >>> html = page.html(summary, all_errors)  # doctest: +SKIP
    """

    def __init__(self, source: str = "", max_rows: int | None = None, max_text: int | None = None):
        self.source = source
        self.max_rows = rd.MAX_ROWS if max_rows is None else max_rows  # read now: a test lowers the caps
        self.max_text = rd.MAX_TEXT if max_text is None else max_text
        self.splits: dict[str, SplitKeeper] = {}
        self.groups: dict[str, GroupTally] = {}  # the scores by group (summary.group_by), counted as rows pass

    def start(self, split: str, features: Features, summary: RunSummary | None, by: str | None = None) -> None:
        """A split begins (again: a new reading replaces what an earlier one kept)."""
        self.splits[split] = SplitKeeper(features, summary, self.max_rows, self.max_text)
        by = group_by_of(by, summary)
        if by:
            self.groups[split] = group_tally(by, features, summary, f"split {split!r}")

    def add(self, split: str, table: pa.Table, errors: Iterable[dict[str, Any]] = ()) -> None:
        self.splits[split].add(table, errors)
        tally = self.groups.get(split)
        if tally is not None:
            tally.add(table[tally.by], {c: table[c] for c, _ in tally.kinds})

    def html(self, summary: RunSummary | None, errors: ErrorFiles) -> bytes:
        """The page, as :func:`hf_judge.write_report` writes a Dataset's; ``errors``: the result's, on disk."""
        return render_page(self.data(summary, embedded_errors(errors, self.max_text))).encode("utf-8")

    def data(
        self,
        summary: RunSummary | None,
        errors: dict[str, Any],
        folder: str | Path | None = None,
        cache: tuple[str | Path, str | None] | None = None,
    ) -> dict[str, Any]:
        """The page's data (:func:`~.report.page_data`'s); ``errors``: :func:`embedded_errors`'."""
        splits = {s: k.embedded(s, summary, errors, cache) for s, k in self.splits.items()}
        ranges = declared_ranges(summary)
        groups = [t for s, tally in self.groups.items() for t in tally.tables(s, ranges)]
        return page_data(
            splits,
            errors,
            summary=summary,
            source=self.source,
            max_rows=self.max_rows,
            max_text=self.max_text,
            groups=groups,
            folder=folder,
            read_store=cache is not None,
        )


def embedded_errors(errors: ErrorFiles, max_text: int, splits: Sequence[str] | None = None) -> dict[str, Any]:
    """The errors split as the page embeds it (:func:`~.report.errors_data`'s) from its files, read batch by batch:
    the first rows, the total and the count of each kind (of ``splits`` only, where given)."""
    if splits is None:
        # the first rows (those the page shows), counted by kind over all of them: no Dataset of every error row
        out = errors_data(errors_dataset(errors.head(rd.MAX_ERRORS)), max_text)
        out.update(total=len(errors), by_kind=dict(errors.kinds))
        return out
    first: list[dict[str, Any]] = []
    kinds: Counter[str] = Counter()
    for batch in errors.batches():
        batch = batch.filter(pc.is_in(batch.column("split"), pa.array(list(splits), pa.string())))
        kinds.update(batch.column("kind").to_pylist())
        if len(first) < rd.MAX_ERRORS:
            first += batch.slice(0, rd.MAX_ERRORS - len(first)).to_pylist()
    out = errors_data(errors_dataset(first), max_text)
    out.update(total=sum(kinds.values()), by_kind=dict(kinds))
    return out


# rows read from a folder's Parquet shards at a time, for its page
FOLDER_BATCH = 4096


def stream_folder(folder: str | Path) -> dict[str, list[Path]] | None:
    """A streamed result's folder (``data/<split>-NNNNN.parquet``, ``errors/``): its Parquet shards by split, in
    order; None for any other folder or file.

    Example:
        >>> stream_folder("big-judged")  # doctest: +SKIP
        {'train': [PosixPath('big-judged/data/train-00000.parquet'), ...]}
    """
    root = Path(folder)
    if not (root / "errors").is_dir() or (root / "dataset_dict.json").exists():
        return None
    files: dict[str, list[Path]] = {}
    for f in sorted((root / "data").glob("*.parquet")) if (root / "data").is_dir() else ():
        shard = _SHARD.fullmatch(f.name)
        if shard is None:  # another layout (a Hub repo's <split>-00000-of-00001.parquet): not a stream's
            return None
        files.setdefault(shard["split"], []).append(f)
    return files or None


_SHARD = re.compile(r"(?P<split>.+)(?<!-of)-\d{5}\.parquet")


def folder_page(
    folder: str | Path,
    *,
    summary: RunSummary | None,
    source: str = "",
    splits: Sequence[str] | None = None,
    cache: tuple[str | Path, str | None] | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """The page's data of a streamed result's folder (:func:`stream_folder`), read from its Parquet shards batch by
    batch as a push keeps its page (:class:`StreamPage`): no Arrow cache is written, memory does not grow with the
    rows. ``splits``: those to show (default: all); ``cache``: the reply store's folder and the judge's base URL
    (:func:`~.report.write_report`'s ``cache_dir`` and ``base_url``); ``by``: the column to show the scores by
    group of (default: the summary's ``group_by``).

    Example:
        >>> html = render_page(folder_page("big-judged", summary=RunSummary.load("big-judged")))  # doctest: +SKIP
    """
    files = stream_folder(folder) or {}
    order = list(summary.rows) if summary is not None else []  # the splits in the run's order
    chosen = [*(s for s in order if s in files), *(s for s in files if s not in order)]
    chosen = [s for s in chosen if not splits or s in splits]
    errors = ErrorFiles(sorted(Path(folder, "errors").glob("*.parquet")))
    page = StreamPage(source=source)
    # the first rows with errors of each split, which the page keeps (its keeper takes those of each batch)
    failed: dict[str, set[int]] = {s: set() for s in chosen}
    for batch in errors.batches(["split", "row"]):
        for split, row in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            if split in failed and len(failed[split]) < page.max_rows:
                failed[split].add(row)
    for split in chosen:
        page.start(split, Features.from_arrow_schema(pq.read_schema(files[split][0])), summary, by)
        start, rows = 0, sorted(failed[split])
        for path in files[split]:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=FOLDER_BATCH):
                stop = start + batch.num_rows
                mine = rows[bisect.bisect_left(rows, start) : bisect.bisect_left(rows, stop)]
                page.add(split, pa.Table.from_batches([batch]), [{"row": r} for r in mine])
                start = stop
    return page.data(summary, embedded_errors(errors, page.max_text, splits), folder=folder, cache=cache)
