"""What a run owns and counts: its resources (loop, store, client session), the split context, the
counters of its clients, and the history of the runs behind a result (``runs.jsonl`` beside the results)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datasets import Dataset

from ..judging.ensemble import Layout
from ..progress import ProgressCallback
from ..results.summary import RunSummary
from ..settings import Settings
from ..store.replies import ReplyStore
from ..store.segments import Remote, publish_backlog
from ..transport.client import JudgeClient, Stats
from .core import Plan
from .pipeline import LoopThread, SplitRun

logger = logging.getLogger("hf_judge")


def panel_agreement(layout: Layout, results: dict[str, Dataset], plans_by_split: dict[str, list[Plan]]) -> dict:
    """Judge-vs-judge agreement of a panel, per split and metric (see ensemble.Layout.agreement)."""
    out: dict[str, Any] = {}
    for split, plans in plans_by_split.items():
        if split in results and plans:
            table = results[split].data.table
            out[split] = {p.metric.name: layout.agreement(p.metric, table) for p in plans}
            for by_column in out[split].values():
                for column, entry in by_column.items():
                    entry.update(panel_alpha(table, column, layout.judges))
    return out


def panel_alpha(table: Any, column: str, judges: tuple[str, ...]) -> dict[str, Any]:
    """Krippendorff's alpha of a panel's judges on one column (a pyarrow Table's ``<column>__<judge>``
    columns): interval for numbers, nominal for verdicts and winners; ``alpha`` None when undefined."""
    import numpy as np
    import pyarrow as pa

    from ..analysis.alpha import krippendorff_alpha
    from ..judging.ensemble import JUDGE_SEP

    cols = [table.column(f"{column}{JUDGE_SEP}{j}") for j in judges]
    numeric = all(pa.types.is_integer(c.type) or pa.types.is_floating(c.type) or pa.types.is_null(c.type) for c in cols)
    if numeric:  # straight to numpy: a panel over a million rows
        values = np.stack([c.cast(pa.float64()).to_numpy().astype(np.float64) for c in cols])
        return {"alpha": krippendorff_alpha(values, "interval"), "alpha_level": "interval"}
    return {"alpha": krippendorff_alpha([c.to_pylist() for c in cols], "nominal"), "alpha_level": "nominal"}


class RunResources(ExitStack):
    """What a run holds while it sends requests: the reply store, the event loop thread and the client's
    session. Opened when the first split needs them; closed once, each best effort, however the run ends:
    the split in flight cancelled, the session closed, the loop stopped, then the store flushed and closed."""

    def __init__(self, clients: list[JudgeClient], store_path: Path | None, remote: Remote | None = None):
        self.clients = clients
        self.store_path = store_path
        self.remote = remote  # the store's shared home on object storage, if any
        self.store: ReplyStore | None = None
        self.loop: LoopThread | None = None
        self.active: SplitRun | None = None  # the split being scored, cancelled if the run stops
        super().__init__()
        self.callback(self._quietly, self._publish_backlog)  # last, at exit

    @property
    def written(self) -> int:
        return self.store.written if self.store is not None else 0

    def open(self) -> None:
        if self.loop is not None:
            return
        if self.store_path is not None:
            self.store = ReplyStore(self.store_path, remote=self.remote)
            self.callback(self._close_store, self.store)
        self.loop = loop = LoopThread()
        self.callback(loop.stop)
        for client in self.clients:
            self.callback(self._quietly, functools.partial(self._close_client, loop, client))
        self.callback(self._quietly, self._cancel_active)
        for client in self.clients:
            loop.run(client.open())

    def _publish_backlog(self) -> None:
        """A run that needed no store (its result was cached whole) still publishes what earlier runs on this
        machine could not: another node would pay for it again (an opened store does so itself)."""
        if self.store is None and self.remote is not None and self.store_path is not None:
            publish_backlog(self.remote, self.store_path)

    @staticmethod
    def _close_client(loop: LoopThread, client: JudgeClient) -> None:
        loop.run(client.close(), timeout=10)

    def _cancel_active(self) -> None:
        if self.active is not None and self.loop is not None:
            self.loop.run(self.active.cancel(), timeout=10)

    @staticmethod
    def _close_store(store: ReplyStore) -> None:
        store.flush(30)
        store.close()

    @staticmethod
    def _quietly(step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 - best effort while stopping
            pass


@dataclass
class SplitContext:
    """What every split of one run shares."""

    client: JudgeClient
    summary: RunSummary
    use_cache: bool
    cache_root: Path
    token_columns: bool
    progress: bool | ProgressCallback
    window: int
    max_input_chars: int | None
    layout: Layout = field(default_factory=Layout)
    judges: list[JudgeClient] = field(default_factory=list)  # a panel's clients, the first is `client`
    api_key: str | None = None  # for the worker processes of num_workers
    judge_specs: list[tuple[Settings, str | None]] = field(default_factory=list)  # what workers build `judges` from
    resources: RunResources | None = None
    unsent: Callable[[bytes], Any] | None = None  # batch mode: how a request the store lacks ends (None: sent)
    remote: Remote | None = None  # the reply store's shared home on object storage (JudgeJob.remote)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    run_started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


COUNTERS = (
    "requests", "retries", "cache_hits", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens"
)  # fmt: skip


# every counter of a run that adds up across clients (a panel's judges, Ray's actors)
RUN_COUNTERS = (*COUNTERS, "shared", "capped_waits")


def counters(clients: list[JudgeClient]) -> dict[str, int]:
    return {k: sum(getattr(c.stats, k) for c in clients) for k in COUNTERS}


def total_stats(clients: list[JudgeClient]) -> Stats:
    """The stats of a run: its one client's, or those of a panel's judges added up."""
    if len(clients) == 1:
        return clients[0].stats
    total = Stats(structured_output=", ".join(dict.fromkeys(c.stats.structured_output for c in clients)))
    for c in clients:
        s = c.stats
        for k in RUN_COUNTERS:
            setattr(total, k, getattr(total, k) + getattr(s, k))
        total.failures.update(s.failures)
        total.notes += [n for n in s.notes if n not in total.notes]  # judges on one server: said once
    return total


def _runs_file(cache_file: Path) -> Path:
    return cache_file.with_name(f"{cache_file.stem}.runs.json")


def read_runs(cache_file: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(_runs_file(cache_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def record_run(summary: RunSummary, current: tuple, clients: list[JudgeClient], run_id: str, started: str) -> None:
    """Add this run's share of one split to the summary, after the earlier runs that worked on the same
    result (an interrupted run, one whose failed rows this run retried); keep the list beside the results cache.

    The entry is made from the final counters, the figures the terminal prints: it takes the place of this run's
    checkpoints (:class:`Checkpoints`, every ``history_every_s``), which the history file holds until now."""
    cache_file = current[1]
    entry = run_entry(summary, current, clients, run_id, started)
    earlier = [r for r in read_runs(cache_file) if r.get("id") != run_id] if cache_file is not None else []
    summary.add_runs([*earlier, entry])
    if cache_file is not None:
        write_runs(cache_file, run_id, entry)


def run_entry(summary: RunSummary, current: tuple, clients: list[JudgeClient], run_id: str, started: str) -> dict:
    """This run's entry of the run history of one split: what its counters moved since the split began."""
    split, _, before, t0 = current
    now = counters(clients)
    entry: dict[str, Any] = {"id": run_id, "started": started, "split": split}
    entry.update({k: now[k] - before[k] for k in COUNTERS})
    entry["elapsed_s"] = round(time.perf_counter() - t0, 3)
    b = summary.batch
    if (b.get("prompt_tokens") or b.get("completion_tokens")) and all(r.get("id") != run_id for r in summary.runs):
        # batch mode collected its replies before any split began: their tokens go in this run's first entry
        for k in ("prompt_tokens", "completion_tokens"):
            entry[k] += b.get(k, 0)
            entry[f"batch_{k}"] = b.get(k, 0)
    return entry


def moved_entry(run_id: str, started: str, split: str, moved: list[dict[str, Any]], elapsed_s: float) -> dict:
    """A run's entry of the history of one split from the counters its batches moved (Ray's actors report them
    with each batch): the same keys as :func:`run_entry`'s.

    Example:
        >>> moved_entry("r1", "2025-01-01T00:00:00+00:00", "train", [{"requests": 2}, {"requests": 3}], 1.5)["requests"]
        5
    """
    entry: dict[str, Any] = {"id": run_id, "started": started, "split": split}
    entry.update({k: sum(m.get(k, 0) for m in moved) for k in COUNTERS})
    entry["elapsed_s"] = round(elapsed_s, 3)
    return entry


def write_runs(cache_file: Path, run_id: str, entry: dict) -> None:
    """Put ``entry`` in the run history beside ``cache_file``, in place of this run's earlier one (a checkpoint)."""
    runs = [r for r in read_runs(cache_file) if r.get("id") != run_id] + [entry]
    tmp = _runs_file(cache_file).with_suffix(f".tmp-{run_id}")
    try:
        tmp.write_text(json.dumps(runs), encoding="utf-8")
        os.replace(tmp, _runs_file(cache_file))
    except OSError as e:  # a full disk: the history is a nicety, the run's own error must show
        unlink_quietly(tmp)
        logger.debug("could not record the run history beside %s: %s", cache_file, e)


class Checkpoints:
    """This run's entry of the run history, written every ``every`` seconds while its split runs, so that a run
    killed with kill -9 leaves its counters up to the last checkpoint (Ctrl-C and errors write them at the end).

    The writes run on the event loop's thread; ``stop()``, from the thread that writes the final entry, waits
    for a write under way, so that no checkpoint can replace the final entry."""

    def __init__(self, loop: LoopThread, every: float, *entry_args: Any) -> None:
        self._lock, self._stopped = threading.Lock(), False
        self._every, self._args = every, entry_args
        self._future = loop.submit(self._run())

    async def _run(self) -> None:
        summary, current, clients, run_id, started = self._args
        while True:
            await asyncio.sleep(self._every)
            with self._lock:
                if self._stopped:
                    return
                write_runs(current[1], run_id, run_entry(summary, current, clients, run_id, started))

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._future.cancel()


def fill_summary(summary: RunSummary, clients: list[JudgeClient], errors: list[dict], started: float) -> None:
    s = total_stats(clients)
    for name in (*COUNTERS, "capped_waits"):
        setattr(summary, name, getattr(s, name))
    summary.failed_attempts = dict(s.failures)
    if len(clients) > 1:  # a panel: each judge's own, to tell a judge that answered nothing (summary.losses)
        names = [j["name"] for j in summary.sampling.get("judges", [])]
        summary.judge_requests = {
            name: {"requests": c.stats.requests, "failed_attempts": dict(c.stats.failures)}
            for name, c in zip(names, clients, strict=False)
        }
    summary.errors = dict(Counter(e["kind"] for e in errors))
    summary.structured_output = s.structured_output
    summary.notes = [*summary.notes, *s.notes]
    summary.elapsed_s = time.perf_counter() - started
    summary.shared = s.shared
    # one price for the run's tokens: a panel of models priced differently has none (its cost is not one product)
    prices = {c.price for c in clients}
    price = prices.pop() if len(prices) == 1 else None
    summary.price = price.model_dump() if price is not None else None


def unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
