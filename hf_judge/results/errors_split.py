"""The ``errors`` split's schema: one row per failed (split, row, metric); and a streamed result's errors split,
kept on disk as it is written (:class:`ErrorWriter`) and read back from there (:class:`ErrorFiles`)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset, Features, Value

logger = logging.getLogger("hf_judge")


ERRORS_SPLIT = "errors"


ERROR_FEATURES = Features(
    {
        "split": Value("string"),
        "row": Value("int64"),
        "metric": Value("string"),
        "kind": Value("string"),
        "message": Value("string"),
        "raw": Value("string"),
        "attempts": Value("int64"),
    }
)

# Error rows a writer holds before it writes them out (one Parquet row group): about 1 KB each in memory.
ERROR_BATCH = 4096


def errors_dataset(errors: list[dict]) -> Dataset:
    """The ``errors`` split of these error rows (with its columns when there are none).

    Example:
        >>> errors_dataset([]).column_names
        ['split', 'row', 'metric', 'kind', 'message', 'raw', 'attempts']
    """
    if errors:
        return Dataset.from_list(errors, features=ERROR_FEATURES)
    return Dataset.from_dict({k: [] for k in ERROR_FEATURES}, features=ERROR_FEATURES)


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
