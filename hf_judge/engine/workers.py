"""``num_workers``: one split scored by several processes of this machine together.

One process sends 5,000-8,000 requests a second from one core; a split whose
server fleet can take more is cut into ``num_workers`` contiguous shards, one
per process (a fresh process forked from a ``forkserver``, its own event loop
and connection pool). Every worker opens the reply store ``shared=True`` (see
:mod:`hf_judge.store.replies`): a request two shards share is sent by one of them only,
and the other takes the reply from the store. Each worker writes its shard's
score columns to an Arrow file; the parent joins them in shard order, so the
result is the single-process result row for row.

The parent sums the workers' progress and counters: each progress report
carries the worker's counters, so that the run history's checkpoints
(``history_every_s``) and a Ctrl-C count what the workers paid for. A worker
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
import copy
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
from typing import Any

import pyarrow as pa
from datasets import Dataset, Features

from ..errors import BudgetExceededError, RunStopped, WorkerDiedError
from ..judging.ensemble import Layout
from ..progress import INTERVAL, Progress, ProgressCallback, datasets_bars_off
from ..redact import install_log_filter, register
from ..settings import Settings
from ..store.segments import Remote
from ..transport.client import Stats
from .core import Plan
from .loop import sparse_gc
from .pipeline import SplitRun
from .shell import RunResources, copy_stats, merge_stats, open_clients

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


def score_split(
    jobs: list[ShardJob],
    stats: Sequence[Stats],
    on_progress: ProgressCallback | None = None,
) -> tuple[list[Path], list[dict[str, Any]], BudgetExceededError | None]:
    """Run one worker process per job; (their Arrow files in shard order, their error rows in row order, the
    budget stop of the first worker whose share of the budget ran out: its shard went on without sending, as
    every worker's does once its own share is spent, see :func:`budget_share`).

    The workers' counters are added to ``stats`` (one per judge), also those of a worker that
    was interrupted or died (up to its last report), and kept current while they run (a few times a second),
    so that the run shell's checkpoints (``history_every_s``) count what the workers paid for so far.
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
    procs = [
        ctx.Process(target=_work, args=(job, messages, parent_alive), name=f"hf_judge-worker-{job.index}")
        for job in jobs
    ]
    tally = _Tally(copy_stats(stats), procs)
    total = sum(j.stop - j.start for j in jobs)
    started = time.perf_counter()
    last_report = last_sync = started
    try:
        with _main_left_out():
            for p in procs:
                p.start()
        while len(tally.done) + len(tally.died) < len(jobs):
            try:
                tally.take(messages.get(timeout=INTERVAL))
            except queue.Empty:
                pass
            tally.look_for_dead()
            if on_progress is not None and time.perf_counter() - last_report >= INTERVAL:
                last_report = time.perf_counter()
                on_progress(_summed(jobs[0].split, tally.progress, total, started))
            if time.perf_counter() - last_sync >= INTERVAL:
                last_sync = time.perf_counter()
                tally.add_to(stats)
    except KeyboardInterrupt:
        _interrupt(procs)
        tally.drain(messages)  # their last words count what they paid since their last report
        raise
    finally:
        _join(procs)
        tally.add_to(stats)
        messages.close()
        alive_w.close()
    done, died, failure = tally.done, tally.died, tally.failure
    for i, result in sorted(done.items()):
        if "cpu_s" in result:  # bench/bench_workers.py reads these
            logger.info(
                "worker %d of %d: %d requests, %.3f s of CPU", i + 1, len(jobs), result["requests"], result["cpu_s"]
            )
    if on_progress is not None:
        on_progress(_summed(jobs[0].split, tally.progress, total, started))
    if failure is not None:
        raise failure
    if died:
        i, code = next(iter(died.items()))
        j = jobs[i]
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        raise WorkerDiedError(
            f"worker {i + 1} of {len(jobs)} (rows {j.start:,}-{j.stop - 1:,} of split {j.split!r}, pid "
            f"{procs[i].pid}) {how}. The replies the workers received are saved in the reply cache: run the same "
            "command again to resume (a worker that keeps dying may be out of memory: try fewer --workers)."
        )
    errors = [e for i in sorted(done) for e in done[i].get("errors", [])]
    stopped = next((done[i]["stopped"] for i in sorted(done) if done[i].get("stopped") is not None), None)
    return [Path(done[i]["path"]) for i in range(len(jobs))], errors, stopped


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


class _Tally:
    """What the parent knows of its workers: their progress, counters, results, deaths and the first failure."""

    def __init__(self, base: list[Stats], procs: list) -> None:
        self.base, self.procs = base, procs  # base: each judge's counters before the workers started
        self.progress: dict[int, tuple[int, int, int, int]] = {}
        self.counted: dict[int, list[Stats]] = {}  # each worker's counters per judge: its last report, then its final
        self.done: dict[int, dict[str, Any]] = {}
        self.died: dict[int, int | None] = {}
        self.failure: BaseException | None = None

    def take(self, message: tuple) -> None:
        kind, index, payload = message
        if kind == "progress":
            self.progress[index], self.counted[index] = payload
        elif kind == "done":
            self.counted[index] = payload.pop("stats")
            self.done[index] = payload
        elif kind in ("error", "interrupted"):
            error, self.counted[index] = payload
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

    def add_to(self, stats: Sequence[Stats]) -> None:
        """Set each judge's ``stats`` to its counters before the workers plus what each worker reported last."""
        for judge, into in enumerate(stats):
            total = copy.deepcopy(self.base[judge])
            for per_judge in self.counted.values():
                if judge < len(per_judge):  # a worker that failed before it had clients reports none
                    merge_stats(total, per_judge[judge])
            into.__dict__.update(total.__dict__)


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


def _work(job: ShardJob, messages: Any, parent_alive: Any) -> None:
    """A worker's main: score its shard, report ("done", index, result) or ("error", index, (pickled error,
    stats)); ("interrupted", index, (None, stats)) after a Ctrl-C; nothing once its parent is gone."""
    stopping: list[bool] = []

    def on_sigint(_signum: int, _frame: Any) -> None:
        if not stopping:  # once: a second Ctrl-C must not break the saving of the replies
            stopping.append(True)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = _quiet_about_the_stop
    orphaned = _watch_parent(parent_alive)
    box: dict[str, list[Stats]] = {}

    def report(p: tuple[int, int, int, int]) -> None:
        if not orphaned.is_set():  # a copy: the queue pickles it later, in its own thread
            messages.put(("progress", job.index, (p, copy.deepcopy(box["stats"]))))

    try:
        result = _score_shard(job, report, box)
    except KeyboardInterrupt:
        _last_word(messages, ("interrupted", job.index, (None, box.get("stats", []))), orphaned)
        return
    except BaseException as e:  # noqa: BLE001 - handed to the parent
        try:
            payload = pickle.dumps(e)
        except Exception:  # noqa: BLE001
            payload = pickle.dumps(RunStopped(f"worker {job.index + 1}: {type(e).__name__}: {e}"))
        _last_word(messages, ("error", job.index, (payload, box.get("stats", []))), orphaned)
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
    job: ShardJob, report: Callable[[tuple[int, int, int, int]], None], box: dict[str, list[Stats]]
) -> dict[str, Any]:
    """Score the shard; ``box["stats"]``: the clients' counters (one per judge), as soon as there are clients."""
    install_log_filter()
    register(job.api_key)
    clients = open_clients(job.judges or [(job.settings, job.api_key)])
    client = clients[0]
    box["stats"] = [c.stats for c in clients]
    with RunResources(clients, job.store_path, job.remote, shared=True) as res:
        res.open()
        loop = res.loop
        assert loop is not None  # open() started it
        run = res.active = SplitRun(
            job.split,
            job.data,
            job.plans,
            client,
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
        feeder = loop.submit(run.feed())
        try:
            with sparse_gc(), datasets_bars_off():
                scores = job.data.map(
                    lambda idx: run.consume(idx),
                    batched=True,
                    with_indices=True,
                    input_columns=[],
                    remove_columns=job.data.column_names,
                    features=job.features,
                    cache_file_name=str(job.out),
                    load_from_cache_file=False,
                    new_fingerprint=f"{job.out.stem}",
                )
        finally:
            if not feeder.done():
                loop.run(run.cancel())
                feeder.cancel()
        res.active = None
    errors = run.in_order(run.errors)
    for e in errors:
        e["row"] += job.start
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    result = {"path": scores.cache_files[0]["filename"], "errors": errors, "stats": box["stats"]}
    result["stopped"] = run.stopped  # its share of the budget ran out: the shard went on without sending
    result["cpu_s"] = cpu.ru_utime + cpu.ru_stime
    result["requests"] = sum(s.requests for s in box["stats"])
    return result
