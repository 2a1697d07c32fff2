"""The run driver: one run of a job on any engine, with everything around the dispatch done once.

As datatrove's ``PipelineExecutor._run_for_rank`` does everything around a rank for every executor, and Ray
Data's executor calls a ``Datasink`` at fixed points, :class:`Run` owns, for every engine:

- the run id and start, and the refusals: ``capabilities.check(engine.name, ...)`` in :meth:`Run.prepare`, the
  one place an engine on the driver refuses a job, before any request;
- the preparation (:meth:`Run.prepare`): the splits and their plans, the key, the judges' clients, the summary
  (``new_summary``, the column mapping, the provider notes), the bias checks (checked against the input before
  the first request), the error rows of a scored input;
- the resources (:meth:`Run.hold`: a ``RunResources`` whose loop, sessions and store open when the engine first
  needs them) and Ctrl-C: the one ``interrupted`` line, with the true count of the replies saved (what this
  process's stores wrote and what the counting bridge reported from other processes);
- the counters: :attr:`Run.tally` (:class:`~.counting.Tally`), each judge's ``Stats``, fed by this process's
  clients and by other processes' reports (:mod:`.counting`: the bridge);
- the results cache (:meth:`Run.split_scores`): a split's finished scores kept under its results fingerprint, a
  result with errors kept beside it (the next run rebuilds it from the reply store), a saved one reused, what
  killed runs left removed;
- per split (:meth:`Run.split`, a :class:`SplitScope`): its progress, the run history's checkpoints while it
  runs (``history_every_s``, read from the tally) and its final entry at its end, also when it stopped;
- the end: the summary filled (``fill_summary``), the panel's agreement and the bias checks on the scored rows
  (``scored_result``), a budget stop's partial result;
- the sink (:func:`through`): ``start`` before the first request, ``write``/``write_errors``/``complete`` at
  fixed points, ``fail`` on any exception.

An engine (:class:`Engine`) supplies only ``name`` (its row of ``capabilities.ENGINES``) and how a split is
dispatched: ``dispatch(run, work, scope) -> SplitResult``, the split's score columns (written to ``scope.out``
where the results cache is on), its error rows and a budget stop. Optional: ``before_splits(run, works)``, a step
before the first split (batch mode's submission) and ``writes`` (True: ``dispatch`` writes each split through
``run.sink`` itself, as Ray Data's writer does shard by shard; the driver then writes the errors and completes).

On the driver: one process (:class:`~.one_process.OneProcess`), ``num_workers`` (:class:`~.workers.Workers`,
whose processes report through the counting bridge), batch mode (:class:`~.batch_mode.BatchMode`, the
one-process dispatch after its ``before_splits``) and a stream, lazily:

- **a stream** (``score.score_job`` makes its :class:`Run` and :meth:`Run.prepare` s it; ``stream.Streams`` reads
  the run's clients, summary and settings): each reading of a split is ``with run.hold(), run.split(name, history,
  total) as scope:`` around ``score_batches`` (its resources, checkpoints, entry of the run history and Ctrl-C
  line: :meth:`Run.ctrl_c`), and :meth:`Run.reading_ended` fills the summary once a reading ends, its agreement
  and bias checks on the uniform sample of the rows the stream kept (its memory stays bounded). A split read
  again is a part of the same run: its entry of the history goes on from the earlier reading's.

How the others plug in:

- **Ray and Spark** (:mod:`.distributed`: ``DistributedRun``, a :class:`Run` with the one split loop of both):
  each engine (``RayEngine``, ``SparkEngine``) numbers a split's rows, builds its stage, writes it through
  ``run.sink`` (Ray's ``output_dir``, Spark's Parquet writer) or collects it, and returns the split with its error
  rows; their actors and Python workers hold a runtime whose ``reporter`` (:class:`~.counting.StatsReporter`)
  reports each batch's counters (Ray: in the stats column of a batch's first row; Spark: an accumulator), merged
  with ``run.tally.merge`` as the batches come back, so the checkpoints and a kill -9 of the driver leave this
  run's history.
- **the map transform** (``Judge``): no summary and no run of its own; its per-process ``Runtime`` keeps using
  ``shell.RunResources``, and a caller that wants its counters holds a ``StatsReporter`` over the runtime's
  judges.
- **the cascade** (``cascade.score_cascade``): each tier is a :class:`Run` already (``score_job``); the tiers'
  summaries add up by :func:`~.counting.add_summary`, the driver's one rule. It keeps its two passes.
- **choose-judge**: each candidate panel is a :class:`Run` (through ``score_dataset``); reading each judge's
  figures from ``summary.judge_requests`` and each error's
  judge from the errors split's ``judge`` column.

Example:
    >>> run = Run(job, OneProcess(), progress=False)  # doctest: +SKIP
    >>> scored = run.score(ds)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pyarrow as pa
from datasets import Dataset, Features, IterableDataset, IterableDatasetDict, concatenate_datasets

from ..errors import BudgetExceededError, DiskFullError, InterruptedRun, RunStopped
from ..pages import file_paths, release
from ..progress import ProgressBar, ProgressCallback
from ..results.errors_split import ERRORS_SPLIT
from ..results.scored import ScoredDatasetDict
from ..results.sink import ResultSink, open_sink
from ..settings import resolved_provider
from ..store.sqlite import free_space, human_bytes, is_disk_full
from ..transport.client import JudgeClient, judge_panel
from .capabilities import check
from .core import Plan, score_features
from .counting import Tally
from .loop import sparse_gc
from .prepare import (
    as_splits,
    build_plans,
    check_samples,
    column_mapping,
    judge_specs,
    new_summary,
    results_fingerprint,
)
from .providers import provider_notes
from .runs import counters, read_runs, record_run, unlink_quietly
from .shell import (
    RunResources,
    bias_checks,
    checkpoints,
    fill_summary,
    interrupted,
    progress_for,
    rows_figures,
    scored_result,
    stopped_at_budget,
)

if TYPE_CHECKING:
    from ..judging.ensemble import Layout
    from ..results.summary import RunSummary
    from ..settings import Settings
    from .job import JudgeJob

logger = logging.getLogger("hf_judge")

# A run folder's name says which process writes it (host and pid), so that the folder a killed run left
# behind is recognised and removed by the next run, and the folder of a live run beside it is left alone.
RUN_DIR_OWNER = f"{socket.gethostname()}_{os.getpid()}".replace("-", "_")


@dataclass
class SplitWork:
    """One split an engine dispatches: its rows, its plans, and where its finished scores are kept.

    ``features``: the score columns alone; ``cache_file``: ``<fingerprint>.arrow`` in the results cache, whether
    the run uses the cache or not (batch mode looks there for what it need not submit)."""

    name: str
    data: Dataset
    plans: list[Plan]
    fingerprint: str
    features: Features
    cache_file: Path


@dataclass
class SplitResult:
    """What a dispatch gives back: the split's score columns (a row per input row, in order: in ``scope.out`` where
    the results cache is on, else in memory), its error rows (``row`` counted in the split) and the budget stop
    of its sending, if any (the split went on without sending: ``pipeline.SplitRun``'s ``partial``)."""

    scores: Dataset
    errors: list[dict[str, Any]] = field(default_factory=list)
    stopped: BudgetExceededError | None = None


class Named(Protocol):
    """An engine as the capability table knows it: ``name`` is its key in ``capabilities.ENGINES``."""

    name: str


@runtime_checkable
class Engine(Protocol):
    """An engine the driver dispatches splits to (see the module docstring for the optional ``before_splits``
    and ``writes``).

    Example:
        >>> class OneSplitAtATime:  # doctest: +SKIP
        ...     name = "dataset"
        ...     def dispatch(self, run, work, scope):
        ...         return SplitResult(scores, errors)
    """

    name: str

    def dispatch(self, run: Run, work: SplitWork, scope: SplitScope) -> SplitResult: ...


class SplitScope:
    """One split while it runs (:meth:`Run.split`): its progress (``bar``, ``on_progress``: what the engine
    reports to), the run history's checkpoints from the run's tally (``history``: the results cache file the
    history is kept beside; None: none is kept), and a folder of its own for what the engine writes
    (``folder``, ``out``: made when first asked for, removed at the end). :meth:`close` stops the checkpoints,
    closes the bar and records this run's entry of the split's history, also when the split stopped."""

    def __init__(self, run: Run, name: str, history: Path | None, total: int | None) -> None:
        self.run, self.name, self.history = run, name, history
        self.bar: ProgressBar | None
        self.on_progress: ProgressCallback | None
        self.bar, self.on_progress = progress_for(run.progress, name, total)
        self.current = (name, history, *_baseline(run, name))
        self.saving = checkpoints(run.use_cache, run.summary, self.current, run.clients, run.run_id, run.run_started)
        self._folder: Path | None = None

    @property
    def folder(self) -> Path:
        """The split's run folder: beside the results cache file (a killed run's is found by its name and removed,
        :func:`remove_partials`), or a temporary one without the cache."""
        if self._folder is None:
            if self.history is None:
                self._folder = Path(tempfile.mkdtemp(prefix="hf_judge-run-"))
            else:
                folder = self.history.with_name(f"{self.history.stem}.run-{RUN_DIR_OWNER}-{uuid.uuid4().hex[:8]}")
                try:
                    folder.mkdir(parents=True)
                except OSError as e:
                    raise (results_disk_full(self.history.parent, e, None) if is_disk_full(e) else e) from None
                self._folder = folder
        return self._folder

    @property
    def out(self) -> Path:
        """Where the engine writes the split's score columns (an Arrow file) for the results cache."""
        return self.folder / (self.history.name if self.history is not None else "scores.arrow")

    def close(self) -> None:
        if self.saving is not None:
            self.saving.stop()
        if self.bar is not None:
            self.bar.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        # also when stopped mid-split: what it paid for counts when a later run resumes
        record_run(self.run.summary, self.current, self.run.clients, self.run.run_id, self.run.run_started)


def _baseline(run: Run, split: str) -> tuple[dict[str, int], float]:
    """The counters and the clock a split's entry of the run history counts from: now, or, where this run scored
    the split before (a stream read again: each reading is a part of its run), that far back, so that the run's
    one entry holds what all its readings paid (the next reading's would take its place, paid for or not)."""
    now, t0 = counters(run.clients), time.perf_counter()
    earlier = next((r for r in run.summary.runs if r.get("id") == run.run_id and r.get("split") == split), None)
    if earlier is None:
        return now, t0
    return {k: n - int(earlier.get(k, 0)) for k, n in now.items()}, t0 - float(earlier.get("elapsed_s", 0.0))


class Run:
    """One run of ``job`` on ``engine`` (see the module docstring): ``progress`` as ``score_dataset`` takes it,
    ``sink`` where the result goes (None: returned only). :meth:`score` runs a Dataset's splits eagerly; a lazy
    engine (a stream) calls :meth:`prepare`, then :meth:`hold` and :meth:`split` around each reading.

    Example:
        >>> scored = Run(job, Workers(), progress=False).score(ds, if_exists="keep")  # doctest: +SKIP
    """

    def __init__(
        self, job: JudgeJob, engine: Named, *, progress: bool | ProgressCallback = True, sink: ResultSink | None = None
    ) -> None:
        self.job, self.engine, self.progress, self.sink = job, engine, progress, sink
        # what the engines read of the job (frozen)
        self.settings: Settings = job.settings
        self.layout: Layout = job.layout
        self.use_cache, self.token_columns = job.use_cache, job.token_columns
        self.max_input_chars = job.settings.max_input_chars
        self.window = job.settings.window or max(4096, 64 * job.settings.concurrency)
        self.run_id = uuid.uuid4().hex[:12]
        self.run_started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.started = time.perf_counter()
        self.stopped: BudgetExceededError | None = None  # the run's budget stop: the first split's
        self.errors: list[dict[str, Any]] = []
        self._held: list[RunResources] = []  # what hold() holds now (a stream's splits may be read at once)
        self._written = 0  # replies the resources this run held and closed stored

    @property
    def resources(self) -> RunResources | None:
        """The resources :meth:`hold` holds now (the latest, where a stream reads several splits at once)."""
        return self._held[-1] if self._held else None

    @property
    def client(self) -> JudgeClient:
        """The first judge's client (the only one without a panel)."""
        return self.clients[0]

    @property
    def written(self) -> int:
        """Replies of this run saved so far: by this process's stores, and as other processes reported."""
        return self._written + sum(r.written for r in self._held) + self.tally.written

    # -- before the first request ------------------------------------------------------------------------------

    def key(self, needed: bool) -> str | None:
        """The key this process sends with (``needed``: none for OpenAI's API is a ConfigError)."""
        return self.job.key(needed=needed)

    def prepare(self, ds: Any, if_exists: str = "keep") -> None:
        """Check the job against the engine and the input, before any request: the refusal, the splits and their
        plans (``if_exists``), the key, the clients, the summary and the bias checks."""
        job, settings = self.job, self.job.settings
        stream = isinstance(ds, (IterableDataset, IterableDatasetDict))
        remote = job.remote.url if job.remote is not None else ""
        check(
            self.engine.name,
            settings,
            stream=stream,
            use_cache=job.use_cache,
            remote=bool(remote),
            url=remote,
            provider=resolved_provider(settings),
        )
        self.splits, earlier = as_splits(ds)
        self.plans, kept, renamed = build_plans(
            self.splits, job.metrics, job.columns, settings.temperature, if_exists, job.token_columns, job.layout
        )
        check_samples(settings, self.plans)
        self.api_key = self.key(needed=any(self.plans.values()) and not settings.batch_import)
        self.specs = judge_specs(settings, self.api_key)
        self.clients: list[JudgeClient] = judge_panel(self.specs)
        for c in self.clients:
            c.caching = job.use_cache
        self.tally = Tally(self.clients)
        self.summary: RunSummary = new_summary(
            settings, self.client, job.metrics, self.splits, kept, renamed, job.layout, self.clients
        )
        self.summary.column_mapping = column_mapping(job.metrics, job.columns, self.splits)
        self.checks = bias_checks(job.bias_checks, job.metrics, job.columns, settings, self.splits)
        if job.use_cache and any(self.plans.values()):
            self.summary.notes += provider_notes(job.cache_root, self.clients)
        self.errors = earlier_errors(earlier, self.splits, self.plans)
        self.started = time.perf_counter()  # a stream's elapsed time counts from here (its readings come later)

    def works(self) -> list[SplitWork]:
        """Each split with what its dispatch needs: its plans, results fingerprint, score features, cache file."""
        out = []
        for name, d in self.splits.items():
            plans = self.plans[name]
            fp = results_fingerprint(
                d, name, plans, self.client, self.max_input_chars, self.token_columns, self.layout, self.clients
            )
            metrics = [p.metric for p in plans]
            features = score_features(metrics, self.layout, self.settings.logprobs, self.token_columns)
            out.append(SplitWork(name, d, plans, fp, features, self.job.cache_root / "results" / f"{fp}.arrow"))
        return out

    # -- the run -----------------------------------------------------------------------------------------------

    def score(self, ds: Any, if_exists: str = "keep") -> ScoredDatasetDict:
        """The eager run of ``ds`` (a Dataset or DatasetDict): prepared, each split from the results cache or
        dispatched to the engine, the result (through the sink, where there is one)."""
        engine = self.engine
        if not isinstance(engine, Engine):
            raise TypeError(f"{engine.name} is read lazily: Run.score dispatches an Engine's splits")
        return through(self.sink, lambda: self._score(engine, ds, if_exists), writes=getattr(engine, "writes", False))

    def _score(self, engine: Engine, ds: Any, if_exists: str) -> ScoredDatasetDict:
        self.prepare(ds, if_exists)
        works = self.works()
        results: dict[str, Dataset] = {}
        self.started = time.perf_counter()
        try:
            with sparse_gc(), self.hold():
                before = getattr(engine, "before_splits", None)
                if before is not None:
                    before(self, works)
                for work in works:
                    results[work.name] = self.split_scores(engine, work)
                    self.summary.rows[work.name] = len(work.data)
        except RunStopped as e:
            logger.debug("run stopped: %s", e)  # the exception carries the message; say it once
            raise
        finally:
            self.fill(self.errors)
        return self.result(results)

    def fill(self, errors: list[dict[str, Any]] | Counter[str]) -> None:
        """The summary's figures of the run so far (``fill_summary``): its counters (the tally's), ``errors`` (the
        error rows, or the count of each kind), the time since it started, the price."""
        fill_summary(self.summary, self.clients, errors, self.started)

    def reading_ended(self, errors: Counter[str], rows: dict[str, Dataset], warned: set[str]) -> None:
        """The summary of a lazy run (a stream) once a reading of a split ended or stopped: :meth:`fill`, a budget
        stop said (the rows as read are its result), and the panel's agreement and the bias checks on ``rows``
        (split -> the rows kept of it: a stream's uniform sample), each warning said once (``warned``)."""
        self.fill(errors)
        if self.stopped is not None:  # the result, written as it is read, says it is incomplete
            stopped_at_budget(self.summary, self.stopped, self.settings, None, cached=self.use_cache)
        rows_figures(self.summary, rows, self.checks, (self.layout, self.plans), warned)

    def result(self, results: dict[str, Any]) -> ScoredDatasetDict:
        """The run's result from its scored splits: the panel's agreement and the bias checks (``scored_result``);
        a budget stop raised with it (the run is incomplete: its error carries what was paid for)."""
        out = scored_result(results, self.errors, self.summary, self.checks, (self.layout, self.plans))
        if self.stopped is not None:  # what it paid for is the error's result, never a finished one
            pairs = sum(len(d) * len(self.plans[s]) for s, d in self.splits.items())
            stopped_at_budget(self.summary, self.stopped, self.settings, out, pairs, self.use_cache)
            logger.debug("run stopped at its budget: %s", self.stopped)
            raise self.stopped
        logger.info("hf_judge run summary\n%s", self.summary)
        return out

    @contextlib.contextmanager
    def hold(self) -> Iterator[RunResources]:
        """The run's resources while the block runs (the loop, sessions and store open on the engine's first
        ``open()``), closed however it ends; a Ctrl-C ends it with the run's one line, once the store is closed
        (the close commits the last replies it counts)."""
        res = RunResources(self.clients, self.job.store_path, self.job.remote)
        self._held.append(res)
        try:
            with self.ctrl_c(), res:
                yield res
        finally:
            self._held.remove(res)
            self._written += res.written

    @contextlib.contextmanager
    def ctrl_c(self) -> Iterator[None]:
        """A Ctrl-C in the block ends the run with its one line (:meth:`interrupted`); the block holds no
        resources, or closes them first (:meth:`hold`: the close commits the last replies the line counts)."""
        try:
            yield
        except KeyboardInterrupt:
            raise self.interrupted() from None

    def interrupted(self) -> InterruptedRun:
        """What a Ctrl-C kept, in the one wording of every engine, with the replies of this run saved so far."""
        return interrupted(self.use_cache, self.written, batch=self.settings.batch)

    @contextlib.contextmanager
    def split(self, name: str, history: Path | None, total: int | None) -> Iterator[SplitScope]:
        """A split while the block dispatches it (see :class:`SplitScope`); ``total``: its rows, where known."""
        scope = SplitScope(self, name, history, total)
        try:
            yield scope
        finally:
            scope.close()

    def split_scores(self, engine: Engine, work: SplitWork) -> Dataset:
        """One split, scored: its columns kept as they are (no plan), its result reused from the results cache,
        or dispatched to ``engine`` (a finished result saved to the cache; one with errors kept out of it)."""
        d = work.data
        # `_indices`: datasets has no public test for an indices mapping (select, shuffle), and
        # flatten_indices() rewrites the whole table even when there is none
        base = d.flatten_indices() if d._indices is not None else d
        if not work.plans:  # every metric's columns were kept
            return base
        if len(d) == 0:
            return empty_scores(base, work.features)
        if self.use_cache:
            remove_partials(work.cache_file)
            saved = load_result(work.cache_file, len(d), work.features) if work.cache_file.exists() else None
            if saved is not None:
                self.summary.cached_splits.append(work.name)
                self.summary.add_runs(read_runs(work.cache_file))
                return concatenate_datasets([base, saved], axis=1)
        with self.split(work.name, work.cache_file if self.use_cache else None, len(d)) as scope:
            result = engine.dispatch(self, work, scope)
            self.errors.extend(result.errors)
            self.stopped = self.stopped or result.stopped
            scores = result.scores
            if self.use_cache:
                scores = keep_result(scores, bool(result.errors), scope.out, work.cache_file)
        return concatenate_datasets([base, scores], axis=1)


def empty_scores(base: Dataset, features: Features) -> Dataset:
    """A split of no rows with its score columns (``features``): nothing to send or to cache. Not through an engine:
    datasets' map returns an empty input as it is, without the new columns, concatenate_datasets drops an empty one,
    and Ray Data gives no block back."""
    both = Features({**base.features, **features})
    return Dataset.from_dict({c: [] for c in both}, features=both, split=base.split)


def through(
    sink: ResultSink | None, make: Callable[[], ScoredDatasetDict], *, writes: bool = False
) -> ScoredDatasetDict:
    """``make()``'s result through ``sink``'s steps (:class:`~hf_judge.results.sink.ResultSink`), where there is
    one: ``start`` before ``make`` sends anything, each split (unless the engine wrote each itself: ``writes``) and
    the errors once the result is made, ``complete`` with its summary; ``fail`` on any exception.

    Example:
        >>> through(FolderSink("out/", source=None), lambda: run.score(ds))  # doctest: +SKIP
    """
    if sink is None:
        return make()
    with open_sink(sink):
        out = make()
        if not writes:
            for split, data in out.items():
                if split != ERRORS_SPLIT:
                    sink.write(split, data)
        sink.write_errors(out[ERRORS_SPLIT])
        sink.complete(out.summary)
    return out


def earlier_errors(earlier: Dataset | None, splits: dict[str, Any], plans: dict[str, list[Plan]]) -> list[dict]:
    """The error rows of a scored input that still describe its nulls: those of metrics not scored again."""
    if earlier is None or len(earlier) == 0:
        return []
    rescored = {(s, p.metric.name) for s, ps in plans.items() for p in ps}
    return [
        e
        for e in earlier.to_list()
        if e["split"] in splits
        and (e["split"], e["metric"]) not in rescored
        and (isinstance(splits[e["split"]], IterableDataset) or e["row"] < len(splits[e["split"]]))
    ]


# -- the results cache ---------------------------------------------------------------------------------------------


def load_result(path: Path, rows: int, features: Features) -> Dataset | None:
    """A split's saved scores, or None when the file is damaged: then it is moved aside with a warning,
    and the split is scored again from the reply cache (no request for a reply it holds)."""
    try:
        scores = Dataset.from_file(str(path))
        if len(scores) == rows and scores.features == features:
            return scores
        problem = (
            f"{len(scores):,} rows of columns {sorted(scores.column_names)} where {rows:,} of {sorted(features)} belong"
        )
    except (pa.ArrowException, OSError) as e:
        problem = str(e)
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    os.replace(path, aside)
    logger.warning(
        "the saved scores %s are damaged (%s); moved them to %s and scoring the split again from the reply cache",
        path,
        problem,
        aside,
    )
    return None


def keep_result(scores: Dataset, failed: bool, written: Path, cache_file: Path) -> Dataset:
    """An engine's scores (the Arrow file ``written``, in the split's run folder) moved into the results cache, or,
    when some (row, metric) failed, beside it under a name of its own (a result with errors is not a finished one:
    the next run rebuilds it from the reply store, where the replies that failed validation are kept and replayed,
    unless ``retry_errors``, and sends the other failed pairs again)."""
    done = cache_file.with_name(f"{cache_file.stem}.partial-{uuid.uuid4().hex[:8]}.arrow") if failed else cache_file
    # One resident copy of the result at a time: the map's own mapping has read the whole file,
    # and the reopened one below reads it again (the peak RSS of a 1,000,000-row run went 1.26x->1.48x).
    release(file_paths(scores.cache_files))
    del scores
    os.replace(written, done)
    scores = Dataset.from_file(str(done))
    if failed:  # deleted once no dataset reads it, at the latest when the process ends
        weakref.finalize(scores.data, unlink_quietly, done)
    release(file_paths(scores.cache_files))  # read again only where used
    return scores


def remove_partials(cache_file: Path) -> None:
    """Remove the partial results and run folders earlier runs of this fingerprint left (a kill -9 skips
    their clean-up)."""
    for p in cache_file.parent.glob(f"{cache_file.stem}.partial-*.arrow"):
        unlink_quietly(p)  # a dataset of this process that still maps one keeps reading it (Linux)
    host = RUN_DIR_OWNER.rsplit("_", 1)[0]
    for p in cache_file.parent.glob(f"{cache_file.stem}.run-{host}_*-*"):
        pid = p.name.rsplit("-", 1)[0].rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def results_disk_full(folder: Path, error: OSError, needed: int | None) -> DiskFullError:
    """The error of a full disk under the results folder: every reply is kept, the scores need ``needed`` bytes."""
    need = f"about {human_bytes(needed)} more" if needed else "more space"
    return DiskFullError(
        f"the disk that holds the results folder {folder} is full ({human_bytes(free_space(folder))} free): {error}. "
        f"Every reply received is kept in the reply cache; the scores of this split need {need}. Free it there "
        "(or point cache_dir= / --cache-dir at a larger disk) and run the same command again."
    )
