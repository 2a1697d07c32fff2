"""The ``errors`` split's schema: one row per failed (split, row, metric), and for a panel one per judge that failed
it; a streamed result's errors split, kept on disk as it is written (:class:`ErrorWriter`) and read back from there
(:class:`ErrorFiles`).

``judge`` names whose request failed: a panel judge's name (the suffix of its columns, ``<column>__<judge>``), or
the model of a run with one judge; null for the row's own error, where no request was made (a null input, a
template error, an input over ``max_input_chars``). A reader picks a judge's rows by this column
(:func:`judge_errors`), never by the message's ``judge 'x': `` prefix, which is for people. An errors split written
before the column existed is read as one whose judge is unknown (:func:`current`)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Dataset, Features, Value
from datasets.fingerprint import generate_random_fingerprint

from ..tables import arrow_table, rows_renumbered

logger = logging.getLogger("hf_judge")


ERRORS_SPLIT = "errors"


ERROR_FEATURES = Features(
    {
        "split": Value("string"),
        "row": Value("int64"),
        "metric": Value("string"),
        "judge": Value("string"),
        "kind": Value("string"),
        "message": Value("string"),
        "raw": Value("string"),
        "attempts": Value("int64"),
    }
)

# What each column says (docs/reference/errors.md shows it)
ERROR_COLUMNS = {
    "split": "the split of the row",
    "row": "the row's index in its split, counted from 0 in the input's order",
    "metric": "the metric that has no score for the row",
    "judge": "whose request failed: a panel judge's name (the suffix of its columns, `<column>__<judge>`; a panel "
    "has a row per judge that failed), or the model of a run with one judge; null for the row's own error, where no "
    "request was made (`null_input`, `bad_image`, `input_too_long`, `template`), and in an errors split written "
    "before the column existed (read as every judge's). A cascade's rows name the tier's judge: the cheap or the "
    "strong model, or a judge of the strong panel",
    "kind": "what went wrong: one of the kinds below",
    "message": "what went wrong, in words (a panel's starts `judge 'name': `, for people: a program reads `judge`)",
    "raw": "the reply as it came, where one came",
    "attempts": "the requests made for it (retries included)",
}
assert list(ERROR_COLUMNS) == list(ERROR_FEATURES)

# The columns of an errors split written before the ``judge`` column (hf-judge 0.x): read, its judge unknown.
BEFORE_JUDGE = frozenset(ERROR_FEATURES) - {"judge"}

# Error rows a writer holds before it writes them out (one Parquet row group): about 1 KB each in memory.
ERROR_BATCH = 4096


def errors_dataset(errors: list[dict]) -> Dataset:
    """The ``errors`` split of these error rows (with its columns when there are none); a row without a ``judge``
    (an earlier version's) gets a null one.

    Example:
        >>> errors_dataset([]).column_names
        ['split', 'row', 'metric', 'judge', 'kind', 'message', 'raw', 'attempts']
    """
    return Dataset.from_dict({k: [e.get(k) for e in errors] for k in ERROR_FEATURES}, features=ERROR_FEATURES)


def is_errors_split(columns: Iterable[str]) -> bool:
    """Whether ``columns`` are an errors split's: this version's, or an earlier one's (no ``judge`` column).

    Example:
        >>> is_errors_split(["split", "row", "metric", "kind", "message", "raw", "attempts"])
        True
    """
    return set(columns) in (set(ERROR_FEATURES), BEFORE_JUDGE)


def current(errors: Dataset) -> Dataset:
    """An errors split in this version's schema: one an earlier version wrote (no ``judge`` column) gets a null
    one, so that every reader finds the column (its judge is unknown: a reader counts its rows as every judge's).

    Example:
        >>> old = errors_dataset([]).remove_columns("judge")
        >>> current(old).column_names
        ['split', 'row', 'metric', 'judge', 'kind', 'message', 'raw', 'attempts']
    """
    if "judge" in errors.column_names or set(errors.column_names) != BEFORE_JUDGE:
        return errors
    table = errors.with_format("arrow")[:]
    columns = [
        table.column(k) if k in table.column_names else pa.nulls(len(table), pa.string()) for k in ERROR_FEATURES
    ]
    return Dataset(pa.Table.from_arrays(columns, schema=ERROR_FEATURES.arrow_schema), split=errors.split)


def errors_of_rows(errors: Dataset, kept: Mapping[str, Sequence[int]], rows: Mapping[str, int]) -> Dataset:
    """The error rows of the rows ``kept`` (split -> the kept rows' numbers, in their new order, of that split's
    ``rows``), each ``row`` renumbered as its row's place among them; the others' left out. A filter keeps the
    errors split in step with the rows it kept: row 7's error, row 7 now row 2, says 2.

    Example:
        >>> e = errors_dataset([{"split": "train", "row": 3, "metric": "M", "kind": "http_500", "message": "x"},
        ...                     {"split": "train", "row": 1, "metric": "M", "kind": "http_500", "message": "y"}])
        >>> list(errors_of_rows(e, {"train": [0, 3]}, {"train": 4})["row"])
        [1]
    """
    out = rows_renumbered(arrow_table(current(errors)), kept, rows)
    return Dataset(out, split=errors.split, fingerprint=generate_random_fingerprint())


def judge_errors(errors: Dataset, judge: str) -> Dataset:
    """The error rows of one judge of a panel (its ``judge`` column) and the rows' own (no judge: no request was
    made, or an earlier version's split, whose judge is unknown). A message that names another judge in its text
    changes nothing: the column decides.

    Example:
        >>> rows = [{"row": 0, "metric": "M", "judge": "a", "kind": "http_500", "message": "judge 'b': down"},
        ...         {"row": 1, "metric": "M", "judge": None, "kind": "null_input", "message": "no input"}]
        >>> list(judge_errors(errors_dataset(rows), "b")["row"])
        [1]
    """
    mine = judge_error_table(current(errors).with_format("arrow")[:], judge)
    # a fingerprint of its own: hashing the table for one costs ~30 ms, paid per judge (and per group of --by)
    return Dataset(mine, split=errors.split, fingerprint=generate_random_fingerprint())


def judge_error_table(table: pa.Table, judge: str) -> pa.Table:
    """:func:`judge_errors` of the errors split's rows as a table (of today's schema: :func:`current`'s)."""
    theirs = table.column("judge")
    return table.filter(pc.or_kleene(pc.is_null(theirs), pc.equal(theirs, judge)))


class ErrorFiles:
    """Error rows on disk: Parquet files of the errors split's schema, in order, with the count of each kind.
    A streamed result's errors split: counted, iterated and its first rows read without holding it in memory.

    Example:
        >>> errors = ErrorFiles(sorted(Path("big-judged/errors").glob("*.parquet")))  # doctest: +SKIP
        >>> len(errors), errors.kinds, errors.head(2)  # doctest: +SKIP
        (2000000, Counter({'http_500': 2000000}), [{'split': 'train', 'row': 0, ...}, ...])
    """

    def __init__(self, files: Sequence[Path] = (), kinds: Mapping[str, int] | None = None):
        self.files = [Path(f) for f in files]
        self.kinds: Counter[str] = Counter(kinds) if kinds is not None else self._count()

    def _count(self) -> Counter[str]:
        kinds: Counter[str] = Counter()
        for batch in self.batches(["kind"]):
            for d in batch.column(0).value_counts().to_pylist():
                kinds[d["values"]] += d["counts"]
        return kinds

    def __len__(self) -> int:
        return sum(self.kinds.values())

    def __add__(self, other: ErrorFiles) -> ErrorFiles:
        return ErrorFiles([*self.files, *other.files], self.kinds + other.kinds)

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        for f in self.files:
            yield from pq.ParquetFile(f).iter_batches(batch_size=ERROR_BATCH, columns=columns)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.batches():
            yield from batch.to_pylist()

    def head(self, n: int) -> list[dict[str, Any]]:
        """The first ``n`` rows."""
        rows: list[dict[str, Any]] = []
        for batch in self.batches():
            if len(rows) >= n:
                break
            rows += batch.slice(0, n - len(rows)).to_pylist()
        return rows


class ErrorWriter:
    """Writes error rows to Parquet files as they come (each file at the next of ``paths``), holding at most
    ``ERROR_BATCH`` rows in memory. :meth:`close_file` ends the current file: a streamed save ends one with each
    data shard it closes, so that a save taken up again keeps the error rows of the rows it keeps. ``done``: the
    files ended so far (those of an earlier, interrupted save first).

    Example:
        >>> paths = (Path("out/errors") / f"errors-{k:05d}.parquet" for k in itertools.count(1))  # doctest: +SKIP
        >>> writer = ErrorWriter(paths)  # doctest: +SKIP
        >>> writer.add(batch_errors); errors = writer.close()  # doctest: +SKIP
    """

    def __init__(self, paths: Iterator[Path], done: ErrorFiles | None = None):
        self.paths = paths
        self.done = done if done is not None else ErrorFiles()
        self._rows: list[dict[str, Any]] = []
        self._kinds: Counter[str] = Counter()  # those of the current file
        self._writer: pq.ParquetWriter | None = None
        self._path: Path | None = None

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self._rows.append(row)
            self._kinds[row["kind"]] += 1
        if len(self._rows) >= ERROR_BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        if self._writer is None:
            self._path = next(self.paths)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self._path, ERROR_FEATURES.arrow_schema)
        self._writer.write_table(pa.Table.from_pylist(self._rows, schema=ERROR_FEATURES.arrow_schema))
        self._rows = []

    def close_file(self) -> None:
        """Write what is held and end the current file (none is made for no row)."""
        self._flush()
        if self._writer is not None:
            assert self._path is not None  # opened with the writer
            self._writer.close()
            self.done = self.done + ErrorFiles([self._path], self._kinds)
            self._writer, self._path, self._kinds = None, None, Counter()

    def close(self) -> ErrorFiles:
        """End the current file; every row added, on disk."""
        self.close_file()
        return self.done
