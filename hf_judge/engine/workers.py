"""``num_workers``: one split scored by several processes of this machine together.

One process sends 5,000-8,000 requests a second from one core; a split whose
server fleet can take more is cut into ``num_workers`` contiguous shards, one
per process (a fresh process forked from a ``forkserver``, its own event loop
and connection pool). Every worker opens the reply store ``shared=True`` (see
:mod:`hf_judge.store.replies`): a request two shards share is sent by one of them only,
and the other takes the reply from the store. Each worker writes its shard's
score columns to an Arrow file; the parent joins them in shard order, so the
result is the single-process result row for row.

The parent sums the workers' progress, and their counters come through the
counting bridge (:mod:`.counting`): each progress report and each worker's last
word carries its :class:`~.counting.StatsReporter`'s report, which the run's
:class:`~.counting.Tally` merges as it arrives, so that the run history's
checkpoints (``history_every_s``) and a Ctrl-C count what the workers paid for
and saved. Everything around a split is the run driver's (:mod:`.driver`):
:class:`Workers` only dispatches it. A worker
that stops the run (a 401, the token budget, a full disk) stops the others with
SIGINT, as Ctrl-C does; a worker that dies (kill -9, out of memory) is reported
once the others have finished their shards, whose replies are saved for the
next run. A worker whose parent dies (kill -9 of the run) stops as at a Ctrl-C,
at once: it watches a pipe only the parent writes to (EOF: the parent
is gone) and, on Linux, also gets SIGINT from ``PR_SET_PDEATHSIG`` when the
forkserver it was forked from exits with the parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import pickle
import queue
import resource
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from datasets import Dataset, Features

from ..errors import BudgetExceededError, RunStopped, WorkerDiedError
from ..judging.ensemble import Layout
from ..progress import INTERVAL, Progress, ProgressCallback
from ..redact import install_log_filter, register
from ..settings import Settings
from ..store.segments import Remote
from ..transport.served import SERVED_ENV
from .core import Plan
from .counting import StatsReporter, Tally
from .driver import SplitResult
from .loop import sparse_gc
from .one_process import OneProcess, map_scores
from .pipeline import SplitRun
from .shell import RunResources, open_clients

if TYPE_CHECKING:
    from .driver import Run, SplitScope, SplitWork

logger = logging.getLogger("hf_judge")

# Rows per claim transaction in the shared store: 128 rather than the pipeline's 32 took the CPU per request
# of a worker from 0.30 to 0.275 ms (bench/bench_workers.py; 0.23 ms for a single process).
CLAIM_BATCH = 128
# How long stopping workers may take to save their replies before they are terminated.
STOP_WAIT_S = 30.0
# How often a worker looks for its parent besides the pipe's EOF (a parent whose pipe a fork of it still holds).
PARENT_POLL_S = 1.0


@dataclass
class ShardJob:
    """What one worker scores: rows ``start:stop`` of a split, into ``out`` (an Arrow file)."""

    index: int
    start: int
    stop: int
    split: str
    data: Dataset
    plans: Sequence[Plan]
    settings: Settings
    api_key: str | None
    store_path: Path | None
    features: Features
    out: Path
    window: int
    max_input_chars: int | None
    token_columns: bool
    # a panel: each judge's (settings, key), resolved by the parent; () for one judge (`settings`, `api_key`)
    judges: Sequence[tuple[Settings, str | None]] = ()
    layout: Layout | None = None  # samples, judges and aggregator, as SplitRun takes them
    remote: Remote | None = None  # the store's shared home on object storage


def shard_bounds(n: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous, nearly equal ``(start, stop)`` ranges of ``n`` rows, at most ``workers`` of them, none empty.

    Example:
        >>> shard_bounds(10, 4)
        [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    k = max(1, min(workers, n))
    size, extra = divmod(n, k)
    bounds, start = [], 0
    for i in range(k):
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


class Workers(OneProcess):
    """``num_workers`` processes over contiguous shards of each split (a split of one row: in this process).

    Example:
        >>> scored = Run(job, Workers(), progress=False).score(ds)  # doctest: +SKIP
    """

    name = "workers"

    def dispatch(self, run: Run, work: SplitWork, scope: SplitScope) -> SplitResult:
        d, client = work.data, run.client
        if len(d) <= 1:
            return super().dispatch(run, work, scope)
        bounds = shard_bounds(len(d), client.settings.num_workers)
        n = len(bounds)
        jobs = [
            ShardJob(
                index=i,
                start=a,
                stop=b,
                split=work.name,
                data=d.select(range(a, b)),
                plans=work.plans,
                settings=budget_share(client.settings, n),
                api_key=run.api_key,
                judges=[(budget_share(spec, n), key) for spec, key in run.specs],
                layout=run.layout,
                store_path=run.job.store_path,
                remote=run.job.remote,
                features=work.features,
                out=scope.folder / f"{work.fingerprint}-{i}.arrow",
                window=run.window,
                max_input_chars=run.max_input_chars,
                token_columns=run.token_columns,
            )
            for i, (a, b) in enumerate(bounds)
        ]
        paths, errors, stopped = score_split(jobs, run.tally, scope.on_progress)
        if stopped is not None:
            stopped.args = (f"{stopped} (--workers {n}: each worker held 1/{n} of the run's budget)",)
        concat_arrow(paths, scope.out)
        return SplitResult(Dataset.from_file(str(scope.out), in_memory=not run.use_cache), errors, stopped)


def score_split(
    jobs: list[ShardJob],
    tally: Tally,
    on_progress: ProgressCallback | None = None,
) -> tuple[list[Path], list[dict[str, Any]], BudgetExceededError | None]:
    """Run one worker process per job; (their Arrow files in shard order, their error rows in row order, the
    budget stop of the first worker whose share of the budget ran out: its shard went on without sending, as
    every worker's does once its own share is spent, see :func:`budget_share`).

    The workers' counters reach ``tally`` (the run's, one ``Stats`` per judge) as their reports arrive (a few
    times a second, and their last words: also those of a worker that was interrupted or died, up to its last
    report), so that the run driver's checkpoints (``history_every_s``) count what the workers paid for so far.
    Raises what a worker raised, :class:`WorkerDiedError` for a worker that
    died, ``KeyboardInterrupt`` once every worker has stopped after a Ctrl-C.
    """
    # forkserver: a clean single-threaded server imports hf_judge and datasets once (~2-3 s of CPU), and
    # each worker is a fork of it; spawn paid those imports in every worker of every run.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["hf_judge.engine.workers"])
    messages = ctx.Queue()
    # the workers' end of a pipe that nobody writes to: it reads EOF when this process is gone (kill -9)
    parent_alive, alive_w = ctx.Pipe(duplex=False)
    # a worker is a fork of the forkserver, whose environment is this process's when it first started: the vLLM
    # judges of this run now (a panel's turn, a judge stopped) go to the workers themselves
    served = os.environ.get(SERVED_ENV)
    procs = [
        ctx.Process(target=_work, args=(job, messages, parent_alive, served), name=f"hf_judge-worker-{job.index}")
        for job in jobs
    ]
    crew = _Crew(tally, procs)
    total = sum(j.stop - j.start for j in jobs)
    started = time.perf_counter()
    last_report = started
    try:
        with _main_left_out():
            for p in procs:
                p.start()
        while len(crew.done) + len(crew.died) < len(jobs):
            try:
                crew.take(messages.get(timeout=INTERVAL))
            except queue.Empty:
                pass
            crew.look_for_dead()
            if on_progress is not None and time.perf_counter() - last_report >= INTERVAL:
                last_report = time.perf_counter()
                on_progress(_summed(jobs[0].split, crew.progress, total, started))
    except KeyboardInterrupt:
        _interrupt(procs)
        crew.drain(messages)  # their last words count what they paid since their last report
        raise
    finally:
        _join(procs)
        messages.close()
        alive_w.close()
    if on_progress is not None:
        on_progress(_summed(jobs[0].split, crew.progress, total, started))
    return crew.outcome(jobs)


def budget_share(settings: Settings, workers: int) -> Settings:
    """A worker's settings: ``max_cost`` and ``max_total_tokens`` split evenly between the ``workers``, each of
    which holds its own account (a shared one would need the processes to agree on every request); the run's
    total stays within the budget, and a worker whose share is spent stops sending while the others go on.

    Example:
        >>> budget_share(Settings(model="m", max_cost=1.0, max_total_tokens=10), 4).max_cost
        0.25
    """
    if workers <= 1 or (settings.max_cost is None and settings.max_total_tokens is None):
        return settings
    share: dict[str, Any] = {}
    if settings.max_cost is not None:
        share["max_cost"] = settings.max_cost / workers
    if settings.max_total_tokens is not None:
        share["max_total_tokens"] = max(1, settings.max_total_tokens // workers)
    return settings.model_copy(update=share)


def concat_arrow(paths: Sequence[Path], out: Path) -> None:
    """Write the record batches of the Arrow stream files ``paths``, in order, to ``out`` (same schema)."""
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    writer = None
    try:
        with pa.OSFile(str(tmp), "wb") as sink:
            for p in paths:
                with pa.memory_map(str(p)) as source:
                    reader = pa.ipc.open_stream(source)
                    if writer is None:
                        writer = pa.ipc.new_stream(sink, reader.schema)
                    for batch in reader:
                        writer.write_batch(batch)
            if writer is not None:
                writer.close()
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def _main_left_out() -> Iterator[None]:
    """Start processes that do not import the caller's ``__main__``.

    A spawned child runs the parent's main script again unless it is guarded by
    ``if __name__ == "__main__"``; a notebook or a short script calling
    ``score_dataset(num_workers=4)`` has no such guard, and the workers need
    nothing from it (plans, settings and rows pickle by their own modules).
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _summed(split: str, progress: dict[int, tuple[int, int, int, int]], total: int, started: float) -> Progress:
    rows, in_flight, errors, requests = (sum(v[k] for v in progress.values()) for k in range(4))
    return Progress(split, rows, total, in_flight, errors, requests, time.perf_counter() - started)


def _interrupt(procs: list) -> None:
    for p in procs:
        if p.is_alive() and p.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGINT)


def _join(procs: list) -> None:
    deadline = time.monotonic() + STOP_WAIT_S
    for p in procs:
        if p.pid is None:
            continue
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            logger.warning("worker %s did not stop within %.0f s; terminating it", p.name, STOP_WAIT_S)
            p.terminate()
            p.join(5)


class _Crew:
    """What the parent knows of its workers: their progress, results, deaths and the first failure; their counters
    go to the run's tally as their reports arrive."""

    def __init__(self, tally: Tally, procs: list) -> None:
        self.tally, self.procs = tally, procs
        self.progress: dict[int, tuple[int, int, int, int]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.died: dict[int, int | None] = {}
        self.failure: BaseException | None = None

    def take(self, message: tuple) -> None:
        kind, index, payload = message
        if kind == "progress":
            self.progress[index], report = payload
            self.tally.merge(report)
        elif kind == "done":
            self.tally.merge(payload.pop("report"))
            self.done[index] = payload
        elif kind in ("error", "interrupted"):
            error, report = payload
            self.tally.merge(report)
            self.done[index] = {}
            if self.failure is None:
                self.failure = KeyboardInterrupt() if kind == "interrupted" else _unpickle_error(error)
                _interrupt(self.procs)  # one worker's stop (a 401, the budget, Ctrl-C) is every worker's

    def look_for_dead(self) -> None:
        for i, p in enumerate(self.procs):
            if i not in self.done and i not in self.died and p.exitcode not in (None, 0):
                self.died[i] = p.exitcode

    def drain(self, messages: Any) -> None:
        """Read the workers' messages until each has had its last word or is gone (at most ``STOP_WAIT_S``)."""
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            try:
                self.take(messages.get(timeout=INTERVAL))
                continue
            except queue.Empty:
                pass
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for the counters
                return
            if all(i in self.done or not p.is_alive() for i, p in enumerate(self.procs)):
                return

    def outcome(self, jobs: list[ShardJob]) -> tuple[list[Path], list[dict[str, Any]], BudgetExceededError | None]:
        """The split's files, error rows and budget stop once every worker is done; what stopped it raised."""
        done, died = self.done, self.died
        for i, result in sorted(done.items()):
            if "cpu_s" in result:  # bench/bench_workers.py reads these
                logger.info(
                    "worker %d of %d: %d requests, %.3f s of CPU", i + 1, len(jobs), result["requests"], result["cpu_s"]
                )
        if self.failure is not None:
            raise self.failure
        if died:
            i, code = next(iter(died.items()))
            j = jobs[i]
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            raise WorkerDiedError(
                f"worker {i + 1} of {len(jobs)} (rows {j.start:,}-{j.stop - 1:,} of split {j.split!r}, pid "
                f"{self.procs[i].pid}) {how}. The replies the workers received are saved in the reply cache: run the "
                "same command again to resume (a worker that keeps dying may be out of memory: try fewer --workers)."
            )
        errors = [e for i in sorted(done) for e in done[i].get("errors", [])]
        stopped = next((done[i]["stopped"] for i in sorted(done) if done[i].get("stopped") is not None), None)
        return [Path(done[i]["path"]) for i in range(len(jobs))], errors, stopped


def _unpickle_error(payload: bytes) -> BaseException:
    try:
        e = pickle.loads(payload)
    except Exception as x:  # noqa: BLE001 - an exception class that cannot be rebuilt
        return RunStopped(f"a worker stopped: {x}")
    return e if isinstance(e, BaseException) else RunStopped(f"a worker stopped: {e}")


# -- in the worker process ----------------------------------------------------------


def _quiet_about_the_stop(unraisable: Any) -> None:
    """A worker's ``sys.unraisablehook``: the KeyboardInterrupt of its stop, raised where Python can only print it
    (a weakref or GC callback that was running when the parent stopped the worker), is no error to show; any other
    goes to Python's own hook."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def _work(job: ShardJob, messages: Any, parent_alive: Any, served: str | None = None) -> None:
    """A worker's main: score its shard, report ("done", index, result) or ("error", index, (pickled error,
    report)); ("interrupted", index, (None, report)) after a Ctrl-C; nothing once its parent is gone. Each report
    is its :class:`~.counting.StatsReporter`'s (None before it had clients). ``served``: the parent's
    :data:`~hf_judge.transport.served.SERVED_ENV` (the vLLM judges of this run)."""
    if served is None:
        os.environ.pop(SERVED_ENV, None)
    else:
        os.environ[SERVED_ENV] = served
    stopping: list[bool] = []

    def on_sigint(_signum: int, _frame: Any) -> None:
        if not stopping:  # once: a second Ctrl-C must not break the saving of the replies
            stopping.append(True)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = _quiet_about_the_stop
    orphaned = _watch_parent(parent_alive)
    box: dict[str, StatsReporter] = {}

    def report(p: tuple[int, int, int, int]) -> None:
        if not orphaned.is_set():  # a report is a dict of its own: the queue pickles it later, in its own thread
            messages.put(("progress", job.index, (p, box["reporter"].report())))

    def last() -> dict[str, Any] | None:
        return box["reporter"].report() if "reporter" in box else None

    try:
        result = _score_shard(job, report, box)
    except KeyboardInterrupt:
        _last_word(messages, ("interrupted", job.index, (None, last())), orphaned)
        return
    except BaseException as e:  # noqa: BLE001 - handed to the parent
        try:
            payload = pickle.dumps(e)
        except Exception:  # noqa: BLE001
            payload = pickle.dumps(RunStopped(f"worker {job.index + 1}: {type(e).__name__}: {e}"))
        _last_word(messages, ("error", job.index, (payload, last())), orphaned)
        return
    _last_word(messages, ("done", job.index, result), orphaned)


def _watch_parent(parent_alive: Any) -> threading.Event:
    """Stop this worker as a Ctrl-C does once the run's process is gone; the returned event is then set.

    Nobody else stops it: kill -9 of the run leaves the workers sending (hours of a big split) with no
    budget in force. Three signs, whichever comes first: EOF on the pipe only the parent writes to,
    a new parent process (the forkserver exits with the run), and on Linux ``PR_SET_PDEATHSIG``.
    """
    gone = threading.Event()
    forkserver = os.getppid()
    _parent_death_signal(signal.SIGINT)

    def watch() -> None:
        while os.getppid() == forkserver:
            try:
                if parent_alive.poll(PARENT_POLL_S):
                    parent_alive.recv_bytes()  # the parent never writes: this raises EOFError
            except (EOFError, OSError):
                break
        gone.set()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="hf_judge-parent-watch", daemon=True).start()
    return gone


def _parent_death_signal(sig: int) -> None:
    """Linux: have the kernel send ``sig`` when this process's parent (the forkserver) exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc prctl: the pipe and the parent pid still tell
        pass


def _last_word(messages: Any, message: tuple, orphaned: threading.Event) -> None:
    """A worker's final report. From here on a Ctrl-C has nothing left to stop: the parent's, sent to every
    worker when one of them reports an error, would otherwise break this one's exit (a traceback from
    multiprocessing's finalizers and a leaked semaphore). An orphan tells nobody: its exit must not wait
    for the queue's pipe, which nobody reads any more and its progress reports may have filled."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if orphaned.is_set():
        messages.cancel_join_thread()
        return
    messages.put(message)


def _score_shard(
    job: ShardJob, report: Callable[[tuple[int, int, int, int]], None], box: dict[str, StatsReporter]
) -> dict[str, Any]:
    """Score the shard; ``box["reporter"]``: its judges' counters and stored replies for the parent, as soon as
    there are clients (a report is counted once: the last word's is what moved since the last progress)."""
    install_log_filter()
    register(job.api_key)
    clients = open_clients(job.judges or [(job.settings, job.api_key)])
    with RunResources(clients, job.store_path, job.remote, shared=True) as res:
        box["reporter"] = StatsReporter(clients, res)
        res.open()
        loop = res.loop
        assert loop is not None  # open() started it
        run = res.active = SplitRun(
            job.split,
            job.data,
            job.plans,
            clients[0],
            res.store,
            window=job.window,
            read_batch=CLAIM_BATCH,
            max_input_chars=job.max_input_chars,
            token_columns=job.token_columns,
            on_progress=lambda p: report((p.rows_done, p.in_flight, p.errors, p.requests)),
            judges=clients,
            layout=job.layout,
            partial=True,
        )
        with sparse_gc():
            scores = map_scores(loop, run, job.data, job.features, job.out.stem, job.out)
        res.active = None
    errors = run.in_order(run.errors)
    for e in errors:
        e["row"] += job.start
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    # the report once the store is closed: its last replies are committed, and counted
    result = {"path": scores.cache_files[0]["filename"], "errors": errors, "report": box["reporter"].report()}
    result["stopped"] = run.stopped  # its share of the budget ran out: the shard went on without sending
    result["cpu_s"] = cpu.ru_utime + cpu.ru_stime
    result["requests"] = sum(c.stats.requests for c in clients)
    return result
