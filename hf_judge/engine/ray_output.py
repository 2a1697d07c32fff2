"""A Ray run's scored output on object storage (``score_dataset_on_ray(..., output_dir="s3://...")``,
``hf-judge score --ray --output-dir s3://...``).

Each split is written by Ray Data's own Parquet writer to ``<output_dir>/<split>/`` as its shards finish, so the
finished part of a killed job is kept; a rerun (which pays nothing for the replies the store published) writes
each split anew. The errors split goes to ``<output_dir>/errors/`` and the run's ``summary.json`` beside them once
every split is done. The rows and errors come back to the driver too: from the files written (the summary,
the bias checks and the overview need them), and from a small actor each batch reports its errors to.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from datasets import Dataset

from ..errors import ConfigError
from ..redact import resolve_storage_options
from ..results.sink import RAY_MARKER
from ..results.summary import SUMMARY_FILE
from ..store.segments import credentials_message, has_credentials, missing_package
from .distributed import STATS_COLUMN, Merge, merging
from .transform import ERRORS_COLUMN

if TYPE_CHECKING:
    import ray.data

# the input row's position, carried through the scoring stage so a batch's errors name their rows; never written
ROW_COLUMN = "_hf_judge_row"
MARKER = RAY_MARKER  # written first: a rerun after a kill finds its own partial output (hf_judge.load_result reads it)


class RayOutput:
    """Where a Ray run writes (a :class:`~hf_judge.results.sink.ResultSink`): an fsspec URL and its
    ``storage_options`` (the store's, given once); ``overwrite``: write over files no hf-judge run wrote there.

    Example:
        >>> with open_sink(RayOutput("s3://bucket/scored")) as output:  # doctest: +SKIP
        ...     train, errors = output.write("train", stage, run.tally.merge)
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None, overwrite: bool = False):
        import fsspec

        if has_credentials(url):  # never repeated: it would be printed, and name the output
            raise ConfigError(credentials_message("output_dir", url.split("://", 1)[0]))
        self.url, self.overwrite = url.rstrip("/"), overwrite
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **resolve_storage_options(storage_options))
        except ImportError as e:
            needs = missing_package(self.url.split("://", 1)[0].lower())
            raise ConfigError(f"output_dir={url!r} needs {needs} ({e})") from None
        except ValueError as e:
            raise ConfigError(f"output_dir={url!r}: {e}") from None
        self.root = self.root.rstrip("/")

    def check(self, overwrite: bool) -> None:
        """Refuse a URL that holds something other than an earlier (or killed) hf-judge output, unless ``overwrite``."""
        found = self.fs.find(self.root, maxdepth=1, withdirs=True) if self.fs.exists(self.root) else []
        held = [p for p in found if p.rstrip("/") != self.root]
        if held and not overwrite and not self.fs.exists(f"{self.root}/{MARKER}"):
            raise ConfigError(
                f"--output-dir {self.url} holds files that no hf-judge run wrote: give an empty location, or pass "
                "--overwrite to write the result's splits there anyway"
            )

    def start(self) -> None:
        """The URL checked (:meth:`check`, with ``overwrite``) and marked as an hf-judge output before the first
        request: a rerun after a kill finds its own partial output."""
        self.check(self.overwrite)
        self.fs.makedirs(self.root, exist_ok=True)
        self.fs.pipe(f"{self.root}/{MARKER}", b"hf-judge: a scored output (see summary.json once the run ends)\n")

    def write(
        self, split: str, data: ray.data.Dataset, merge: Merge | None = None
    ) -> tuple[Dataset, list[dict[str, Any]]]:
        """Run ``data`` (the scoring stage over rows numbered in ``ROW_COLUMN``) into ``<url>/<split>/``; return the
        split as written and its error rows. Each batch's counters (the stage's ``STATS_COLUMN``, taken off the
        rows written with its ``ERRORS_COLUMN``) go to ``merge`` while the shards are written."""
        import pyarrow.fs as pafs
        import ray
        from ray.data import SaveMode

        collector: Any = ray.remote(num_cpus=0)(_Collector).remote()
        stripped = data.map_batches(
            cast(Any, _report),  # its keywords come by fn_kwargs
            fn_kwargs={"collector": collector, "split": split},
            batch_format="pyarrow",
            batch_size=None,
            num_cpus=0,  # the actors hold every CPU (one per CPU): the shards are written while they score
        )
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))
        with merging(lambda: ray.get(collector.take.remote()), merge or (lambda _: None)):
            # overwrite: a rerun after a kill replaces the shards it kept, whatever the batches were then
            stripped.write_parquet(
                f"{self.root}/{split}", filesystem=fs, mode=SaveMode.OVERWRITE, ray_remote_args={"num_cpus": 0}
            )
        errors = ray.get(collector.errors_by_row.remote())
        ray.kill(collector)
        return Dataset(self.read_split(split)), errors

    def read_split(self, split: str) -> pa.Table:
        """A split's shards, in the order Ray's writer named them: its tasks' order, which is the input's
        (``preserve_order``)."""
        import pyarrow.parquet as pq

        files = sorted(p for p in self.fs.find(f"{self.root}/{split}") if p.endswith(".parquet"))
        tables = []
        for path in files:
            with self.fs.open(path, "rb") as f:
                tables.append(pq.read_table(f))
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def write_errors(self, errors: Dataset) -> None:
        """The errors split (``<url>/errors/``, one Parquet file), once every split is written."""
        self.fs.makedirs(f"{self.root}/errors", exist_ok=True)
        with self.fs.open(f"{self.root}/errors/errors.parquet", "wb") as f:
            errors.to_parquet(f)

    def complete(self, summary: Any) -> None:
        """``summary.json``: the output is complete (written again by ``hf-judge score`` with the provenance)."""
        text = json.dumps(summary.to_dict(), indent=1, default=str)
        self.fs.pipe(f"{self.root}/{SUMMARY_FILE}", text.encode())

    def fail(self, error: BaseException) -> None:  # noqa: ARG002 - ResultSink.fail's
        """The marker and the splits written so far stay: a rerun (which pays nothing for the replies the store
        published) writes each split anew over them."""


class _Collector:
    """Each batch's counters (by the row they ride on) and each row's errors, by row: a batch retried reports once."""

    def __init__(self) -> None:
        self.moved: dict[int, dict[str, Any]] = {}
        self.errors: dict[int, list[dict[str, Any]]] = {}
        self.new: list[dict[str, Any]] = []

    def add(self, moved: dict[int, dict[str, Any]], errors: dict[int, list[dict[str, Any]]]) -> None:
        self.new += [m for r, m in moved.items() if r not in self.moved]
        self.moved.update(moved)
        self.errors.update(errors)

    def take(self) -> list[dict[str, Any]]:
        """The counters of the batches reported since the last call."""
        out, self.new = self.new, []
        return out

    def errors_by_row(self) -> list[dict[str, Any]]:
        """The error rows, in row order."""
        return [e for _, es in sorted(self.errors.items()) for e in es]


def _report(table: pa.Table, collector: Any, split: str) -> pa.Table:
    """A scored batch as it is written: its counters and error rows sent to the driver's collector first."""
    import ray

    rows = table.column(ROW_COLUMN).to_pylist()
    moved = {r: json.loads(t) for r, t in zip(rows, table.column(STATS_COLUMN).to_pylist(), strict=True) if t}
    found = {
        r: [{"split": split, "row": r, **item} for item in items]
        for r, items in zip(rows, table.column(ERRORS_COLUMN).to_pylist(), strict=True)
        if items
    }
    if moved or found:
        ray.get(collector.add.remote(moved, found))
    return table.drop_columns([ROW_COLUMN, STATS_COLUMN, ERRORS_COLUMN])
