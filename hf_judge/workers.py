"""``num_workers``: one split scored by several processes of this machine together.

One process sends 5,000-8,000 requests a second from one core; a split whose
server fleet can take more is cut into ``num_workers`` contiguous shards, one
per process (a fresh process forked from a ``forkserver``, its own event loop
and connection pool). Every worker opens the reply store ``shared=True`` (see
:mod:`hf_judge.store`): a request two shards share is sent by one of them only,
and the other takes the reply from the store. Each worker writes its shard's
score columns to an Arrow file; the parent joins them in shard order, so the
result is the single-process result row for row.

The parent sums the workers' progress and counters. A worker that stops the
run (a 401, the token budget, a full disk) stops the others with SIGINT, as
Ctrl-C does; a worker that dies (kill -9, out of memory) is reported once the
others have finished their shards, whose replies are saved for the next run.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import queue
import resource
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from datasets import Dataset, Features

from .client import JudgeClient, Stats
from .errors import RunStopped, WorkerDiedError
from .pipeline import LoopThread, Plan, sparse_gc
from .progress import INTERVAL, Progress, ProgressCallback
from .settings import Settings

logger = logging.getLogger("hf_judge")

# Rows per claim transaction in the shared store: 128 rather than the pipeline's 32 took the CPU per request
# of a worker from 0.30 to 0.275 ms (bench/bench_workers.py; 0.23 ms for a single process).
CLAIM_BATCH = 128
# How long stopping workers may take to save their replies before they are terminated.
STOP_WAIT_S = 30.0


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
    stats: Stats,
    on_progress: ProgressCallback | None = None,
) -> tuple[list[Path], list[dict[str, Any]]]:
    """Run one worker process per job; (their Arrow files in shard order, their error rows in row order).

    The workers' counters are added to ``stats``. Raises what a worker raised,
    :class:`WorkerDiedError` for a worker that died, ``KeyboardInterrupt``
    once every worker has stopped after a Ctrl-C.
    """
    # forkserver: a clean single-threaded server imports hf_judge and datasets once (~2-3 s of CPU), and
    # each worker is a fork of it; spawn paid those imports in every worker of every run.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["hf_judge.workers", "hf_judge.batchscore"])
    messages = ctx.Queue()
    procs = [ctx.Process(target=_work, args=(job, messages), name=f"hf_judge-worker-{job.index}") for job in jobs]
    done: dict[int, dict[str, Any]] = {}
    died: dict[int, int | None] = {}
    progress: dict[int, tuple[int, int, int, int]] = {}
    failure: BaseException | None = None
    total = sum(j.stop - j.start for j in jobs)
    started = time.perf_counter()
    last_report = 0.0
    try:
        with _main_left_out():
            for p in procs:
                p.start()
        while len(done) + len(died) < len(jobs):
            try:
                kind, index, payload = messages.get(timeout=INTERVAL)
            except queue.Empty:
                kind = None
            if kind == "progress":
                progress[index] = payload
            elif kind == "done":
                done[index] = payload
            elif kind in ("error", "interrupted"):
                done[index] = {}
                if failure is None:
                    failure = KeyboardInterrupt() if kind == "interrupted" else _unpickle_error(payload)
                    _interrupt(procs)  # one worker's stop (a 401, the budget, Ctrl-C) is every worker's
            for i, p in enumerate(procs):
                if i not in done and i not in died and p.exitcode not in (None, 0):
                    died[i] = p.exitcode
            if on_progress is not None and time.perf_counter() - last_report >= INTERVAL:
                last_report = time.perf_counter()
                on_progress(_summed(jobs[0].split, progress, total, started))
    except KeyboardInterrupt:
        _interrupt(procs)
        _join(procs)
        _merge_stats(stats, done)
        raise
    finally:
        _join(procs)
        messages.close()
    for i, result in sorted(done.items()):
        if "cpu_s" in result:  # bench/bench_workers.py reads these
            logger.info(
                "worker %d of %d: %d requests, %.3f s of CPU", i + 1, len(jobs), result["requests"], result["cpu_s"]
            )
    _merge_stats(stats, done)
    if on_progress is not None:
        on_progress(_summed(jobs[0].split, progress, total, started))
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
    return [Path(done[i]["path"]) for i in range(len(jobs))], errors


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


def _merge_stats(stats: Stats, done: dict[int, dict[str, Any]]) -> None:
    for result in done.values():
        s: Stats | None = result.get("stats")
        if s is None:
            continue
        for name in ("requests", "retries", "cache_hits", "shared", "capped_waits", "prompt_tokens"):
            setattr(stats, name, getattr(stats, name) + getattr(s, name))
        stats.completion_tokens += s.completion_tokens
        stats.failures.update(s.failures)
        stats.statuses.update(s.statuses)
        if s.structured_output != "json_schema":
            stats.structured_output = s.structured_output
        stats.notes.extend(n for n in s.notes if n not in stats.notes)
        result["stats"] = None  # counted once, also when a Ctrl-C follows


def _unpickle_error(payload: bytes) -> BaseException:
    try:
        e = pickle.loads(payload)
    except Exception as x:  # noqa: BLE001 - an exception class that cannot be rebuilt
        return RunStopped(f"a worker stopped: {x}")
    return e if isinstance(e, BaseException) else RunStopped(f"a worker stopped: {e}")


# -- in the worker process ----------------------------------------------------------


def _work(job: ShardJob, messages: Any) -> None:
    """A worker's main: score its shard, report ("done", index, result) or ("error", index, pickled error)."""
    stopping: list[bool] = []

    def on_sigint(_signum: int, _frame: Any) -> None:
        if not stopping:  # once: a second Ctrl-C must not break the saving of the replies
            stopping.append(True)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        result = _score_shard(job, lambda p: messages.put(("progress", job.index, p)))
    except KeyboardInterrupt:
        _last_word(messages, ("interrupted", job.index, None))
        return
    except BaseException as e:  # noqa: BLE001 - handed to the parent
        try:
            payload = pickle.dumps(e)
        except Exception:  # noqa: BLE001
            payload = pickle.dumps(RunStopped(f"worker {job.index + 1}: {type(e).__name__}: {e}"))
        _last_word(messages, ("error", job.index, payload))
        return
    _last_word(messages, ("done", job.index, result))


def _last_word(messages: Any, message: tuple) -> None:
    """A worker's final report. From here on a Ctrl-C has nothing left to stop: the parent's, sent to every
    worker when one of them reports an error, would otherwise break this one's exit (a traceback from
    multiprocessing's finalizers and a leaked semaphore)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    messages.put(message)


def _score_shard(job: ShardJob, report: Callable[[tuple[int, int, int, int]], object]) -> dict[str, Any]:
    from .batchscore import SharedRun
    from .progress import datasets_bars_off
    from .redact import install_log_filter, register
    from .store import ReplyStore

    install_log_filter()
    register(job.api_key)
    client = JudgeClient(job.settings, api_key=job.api_key)
    client.caching = job.store_path is not None
    store = ReplyStore(job.store_path, shared=True) if job.store_path is not None else None
    loop = LoopThread()
    run = None
    try:
        loop.run(client.open())
        run = SharedRun(
            job.split,
            job.data,
            job.plans,
            client,
            store,
            window=job.window,
            read_batch=CLAIM_BATCH,
            max_input_chars=job.max_input_chars,
            token_columns=job.token_columns,
            on_progress=lambda p: report((p.rows_done, p.in_flight, p.errors, p.requests)),
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
        errors = sorted(run.errors, key=lambda e: e["row"])
        for e in errors:
            e["row"] += job.start
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        result = {"path": scores.cache_files[0]["filename"], "errors": errors, "stats": client.stats}
        result["cpu_s"] = cpu.ru_utime + cpu.ru_stime
        result["requests"] = client.stats.requests
        return result
    finally:
        with contextlib.suppress(Exception):
            loop.run(client.close(), timeout=10)
        loop.stop()
        if store is not None:
            store.flush(30)
            store.close()
