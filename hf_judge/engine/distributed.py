"""One distributed driver for Ray and Spark: their runs' one split loop, on the run driver (:class:`~.driver.Run`).

A Ray run (``score_dataset_on_ray``, ``--ray``) and a Spark run (``hf-judge score --spark``) differ only in how a
split's rows reach their workers and come back; everything around that is :class:`DistributedRun`'s, which is a
:class:`~.driver.Run` (run id, resources, summary, the refusal in ``prepare``, the counters' tally, each split's
history and checkpoints, the bias checks, the sink's steps, Ctrl-C's line) with one loop for both:

- per split (:meth:`DistributedRun.score_splits`): its history's checkpoints while it runs (``Run.split``), then the
  engine's :meth:`Distributed.score_split`: number the rows, build the stage, write it through the run's sink
  (Ray's ``output_dir``, Spark's Parquet writer) or collect it, and give back the split and its error rows;
- the counters: each worker (a Ray actor, a Spark Python worker) holds a runtime whose ``reporter``
  (:class:`~.counting.StatsReporter`, the one counting bridge) reports what it sent since its last report; the
  reports come back with the batches (Ray: in :data:`STATS_COLUMN` of a batch's first row; Spark: an accumulator
  of :class:`ReportList`) and are merged into the run's tally as they arrive (:func:`merging`), so that the
  history's checkpoints are current and a kill -9 of the driver leaves this run's entry, as one process does.

What is each engine's own stays in its module: Ray Data's ``map_batches`` and actor pool (``engine/ray.py``),
Spark's ``mapInArrow``, session, row numbering and Parquet writer (``engine/spark.py``, ``engine/spark_run.py``).
The process side they share (the runtime registry, the store's local copy on a node) is
:mod:`hf_judge.engine.transform`'s.

Example:
    >>> out = DistributedRun(job, RayEngine(actors=4, base_urls=None)).score_splits(ds)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
from datasets import Dataset

from .. import constants
from ..settings import resolved_provider
from .core import score_features
from .driver import Run, empty_scores
from .shell import fill_summary, interrupted, worker_error
from .transform import ERRORS_COLUMN, errors_feature

if TYPE_CHECKING:
    from datasets import Features

    from ..errors import InterruptedRun
    from ..judging.metrics import Metric
    from ..results.scored import ScoredDatasetDict
    from ..results.sink import ResultSink
    from ..settings import Settings
    from .job import JudgeJob

logger = logging.getLogger("hf_judge")

# on each batch's first row (Ray), its runtime's report (JSON): merged into the run's tally, never written
STATS_COLUMN = "_hf_judge_batch_stats"
# how often the reports a run's workers sent are merged while a split is written (the checkpoints read them)
MERGE_EVERY_S = 0.5

Merge = Callable[[Mapping[str, Any] | None], None]


class Distributed(Protocol):
    """An engine of :class:`DistributedRun` (Ray's, Spark's): how a split reaches the workers and comes back.

    ``inputs(ds)``: the splits as :meth:`~.driver.Run.prepare` reads them (Datasets: their columns, and rows where
    known), ``data(ds, run)``: each split's rows as the engine scores them; ``rows(data)``: a split's rows where
    known without a job (None: Spark's); ``history(run, split)``: where the split's run history is kept (None:
    none); ``score_split``: the split scored (written through ``run.sink`` where there is one), its error rows;
    ``note``: the line the summary gets."""

    name: str

    def inputs(self, ds: Any) -> Any: ...
    def data(self, ds: Any, run: DistributedRun) -> Mapping[str, Any]: ...
    def rows(self, data: Any) -> int | None: ...
    def history(self, run: DistributedRun, split: str) -> Path | None: ...
    def score_split(self, run: DistributedRun, split: str, data: Any) -> tuple[Dataset, list[dict[str, Any]]]: ...
    def note(self) -> str: ...


class DistributedRun(Run):
    """A run whose requests are sent by a cluster's workers (see the module docstring): :meth:`score_splits` is its
    one split loop; ``sink``: where each split is written as its shards finish (None: collected here).

    Example:
        >>> run = DistributedRun(job, SparkEngine(frames, None, 1024), sink=SparkOutput("out/"))  # doctest: +SKIP
        >>> out = run.score_splits(frames)  # doctest: +SKIP
    """

    engine: Distributed

    def __init__(self, job: JudgeJob, engine: Distributed, sink: ResultSink | None = None) -> None:
        super().__init__(job, engine, progress=False, sink=sink)

    def key(self, needed: bool) -> str | None:
        """The driver's key: none where the engine reads it on its workers (Spark: ``env:NAME``)."""
        own = getattr(self.engine, "key", None)
        return own(self.job, needed) if own is not None else super().key(needed)

    def interrupted(self) -> InterruptedRun:
        """A Ctrl-C's line: the workers' stores hold what they received (the tally has only their finished
        batches)."""
        return interrupted(self.use_cache, None)

    def score_splits(self, ds: Any, if_exists: str = "keep") -> ScoredDatasetDict:
        """Every split of ``ds`` scored by the engine, through the sink's steps (the engine writes each split)."""
        from .driver import through

        return through(self.sink, lambda: self._score_splits(ds, if_exists), writes=True)

    def _score_splits(self, ds: Any, if_exists: str) -> ScoredDatasetDict:
        self.prepare(self.engine.inputs(ds), if_exists)
        results: dict[str, Any] = {}
        self.started = time.perf_counter()
        try:
            with self.hold():
                for split, data in self.engine.data(ds, self).items():
                    results[split] = self._split(split, data)
        finally:
            fill_summary(self.summary, self.clients, self.errors, self.started)
        self.summary.notes.append(self.engine.note())
        return self.result(results)

    def _split(self, split: str, data: Any) -> Any:
        rows = self.engine.rows(data)
        if not self.plans[split]:  # every metric's columns kept: nothing to send
            return data
        if rows == 0:  # Ray Data gives no block back, so no columns: the one-process run's empty split
            return empty_scores(data, self.works_by_split()[split].features)
        history = self.engine.history(self, split)
        if history is not None:  # where the results cache is, which no split of this engine writes to
            history.parent.mkdir(parents=True, exist_ok=True)
        with self.split(split, history, rows):
            try:
                scores, errors = self.engine.score_split(self, split, data)
            except Exception as e:  # noqa: BLE001 - a worker's hf-judge error comes back wrapped in Ray's or Spark's
                raise worker_error(e) or e from None
        self.errors.extend(errors)
        self.summary.rows[split] = len(scores)
        return scores

    def works_by_split(self) -> dict[str, Any]:
        """:meth:`~.driver.Run.works` by split name, made once (their results fingerprints: the history's file)."""
        if not hasattr(self, "_works"):
            self._works = {w.name: w for w in self.works()}
        return self._works


# -- what a Ray stage and a Spark step are built from ---------------------------------------------------------------


def fleet_urls(settings: Settings, base_urls: list[str] | None) -> list[str]:
    """The judge's servers a stage's workers send to: the fleet's replicas, else the ``base_url`` setting (or the
    provider's default).

    Example:
        >>> from hf_judge import Settings
        >>> fleet_urls(Settings(model="m", base_url="http://gpu1:8000/v1"), None)
        ['http://gpu1:8000/v1']
    """
    return list(base_urls or [settings.base_url or constants.default_base_url(resolved_provider(settings))])


def stage_features(job: JudgeJob, metrics: list[Metric] | None = None) -> Features:
    """The columns a Ray stage or a Spark step adds: the score columns of ``metrics`` (default: the job's), then the
    per-row errors column (:class:`~hf_judge.Judge`'s: one transform, one shape)."""
    features = score_features(metrics or job.metrics, job.layout, job.settings.logprobs, job.token_columns)
    features[ERRORS_COLUMN] = errors_feature()
    return features


# -- the counting bridge's transports ------------------------------------------------------------------------------


def with_report(table: pa.Table, report: Mapping[str, Any]) -> pa.Table:
    """``table`` with :data:`STATS_COLUMN`: ``report`` (a :meth:`~.counting.StatsReporter.report`) as JSON on its
    first row, null on the others (a batch that travels back as rows carries its worker's counters).

    Example:
        >>> with_report(pa.table({"a": [1, 2]}), {"written": 2}).column(STATS_COLUMN).to_pylist()
        ['{"written": 2}', None]
    """
    cells = ([json.dumps(report)] + [None] * (table.num_rows - 1)) if table.num_rows else []
    return table.append_column(pa.field(STATS_COLUMN, pa.string()), pa.array(cells, type=pa.string()))


def merge_column(table: pa.Table, merge: Merge) -> pa.Table:
    """Merge the reports of ``table``'s :data:`STATS_COLUMN` (:func:`with_report`); ``table`` without it."""
    for cell in table.column(STATS_COLUMN).to_pylist():
        if cell:
            merge(json.loads(cell))
    return table.drop_columns([STATS_COLUMN])


class ReportList:
    """A Spark accumulator's parameter (``sparkContext.accumulator([], ReportList())``): lists of reports, added up by
    concatenation on the executors and on the driver. Duck-typed as pyspark's ``AccumulatorParam`` (no pyspark
    import here).

    Example:
        >>> ReportList().addInPlace([{"written": 1}], [{"written": 2}])
        [{'written': 1}, {'written': 2}]
    """

    def zero(self, value: list[Any]) -> list[Any]:  # noqa: ARG002 - AccumulatorParam's signature
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:  # noqa: N802 - pyspark's name
        return [*value1, *value2]


@contextlib.contextmanager
def merging(take: Callable[[], list[Any]], merge: Merge, every: float = MERGE_EVERY_S) -> Iterator[None]:
    """While the block runs (a split being written), the reports ``take()`` gives (those arrived since its last
    call) merged every ``every`` seconds by a thread of its own, and once more when the block ends.

    Example:
        >>> with merging(collector_take, run.tally.merge):  # doctest: +SKIP
        ...     stage.write_parquet(url)
    """
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            try:
                for report in take():
                    merge(report)
            except Exception as e:  # noqa: BLE001 - a source gone (the job ending): the last take says the rest
                logger.debug("reading the workers' reports: %s", e)

    thread = threading.Thread(target=loop, name="hf_judge-reports", daemon=True)
    thread.start()
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        stop.set()
        thread.join()
        with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
            for report in take():
                merge(report)


def new_items(values: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
    """A ``take`` for :func:`merging` over a list that only grows (a Spark accumulator's value): its new items."""
    seen = 0

    def take() -> list[Any]:
        nonlocal seen
        now = values()
        out, seen = now[seen:], len(now)
        return out

    return take
