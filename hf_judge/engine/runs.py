"""The history of the runs behind a result (``<fingerprint>.runs.json`` beside the results cache): each run's
entry per split, from the counters its clients moved (the run driver, :mod:`.driver`, writes its checkpoints and
final entries)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results.summary import RunSummary
from ..transport.client import JudgeClient

logger = logging.getLogger("hf_judge")


COUNTERS = (
    "requests", "retries", "cache_hits", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens"
)  # fmt: skip
# what batch mode did before the splits began (summary.batch), counted in the first entry of the run's history
BATCH_FIGURES = ("submitted", "prompt_tokens", "completion_tokens")


def counters(clients: Sequence[JudgeClient]) -> dict[str, int]:
    return {k: sum(getattr(c.stats, k) for c in clients) for k in COUNTERS}


def _runs_file(cache_file: Path) -> Path:
    return cache_file.with_name(f"{cache_file.stem}.runs.json")


def read_runs(cache_file: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(_runs_file(cache_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def record_run(summary: RunSummary, current: tuple, clients: Sequence[JudgeClient], run_id: str, started: str) -> None:
    """Add this run's share of one split to the summary, after the earlier runs that worked on the same
    result (an interrupted run, one whose failed rows this run retried); keep the list beside the results cache.

    The entry is made from the final counters, the figures the terminal prints: it takes the place of this run's
    checkpoints (:class:`~.shell.Checkpoints`, every ``history_every_s``), which the history file holds until now."""
    cache_file = current[1]
    entry = run_entry(summary, current, clients, run_id, started)
    earlier = [r for r in read_runs(cache_file) if r.get("id") != run_id] if cache_file is not None else []
    # this run's entry of the split takes the place of the one an earlier part of it made (a stream read again)
    summary.runs = [r for r in summary.runs if (r.get("id"), r.get("split")) != (run_id, entry["split"])]
    summary.add_runs([*earlier, entry])
    if cache_file is not None:
        write_runs(cache_file, run_id, entry)


def run_entry(summary: RunSummary, current: tuple, clients: Sequence[JudgeClient], run_id: str, started: str) -> dict:
    """This run's entry of the run history of one split: what its counters moved since the split began."""
    split, _, before, t0 = current
    now = counters(clients)
    entry: dict[str, Any] = {"id": run_id, "started": started, "split": split}
    entry.update({k: now[k] - before[k] for k in COUNTERS})
    entry["elapsed_s"] = round(time.perf_counter() - t0, 3)
    b = summary.batch
    if any(b.get(k) for k in BATCH_FIGURES) and all(r.get("id") != run_id for r in summary.runs):
        # batch mode submitted its lines and collected its replies before any split began: their requests and
        # tokens go in this run's first entry
        entry["requests"] += b.get("submitted", 0)
        entry["retries"] += b.get("resubmitted", 0)
        for k in ("prompt_tokens", "completion_tokens"):
            entry[k] += b.get(k, 0)
            entry[f"batch_{k}"] = b.get(k, 0)
    return entry


def moved_entry(run_id: str, started: str, split: str, moved: Mapping[str, Any], elapsed_s: float) -> dict:
    """A run's entry of the history of one split from the counters it moved (Ray's batches, merged by the run
    shell): the same keys as :func:`run_entry`'s.

    Example:
        >>> moved_entry("r1", "2025-01-01T00:00:00+00:00", "train", {"requests": 5}, 1.5)["requests"]
        5
    """
    entry: dict[str, Any] = {"id": run_id, "started": started, "split": split}
    entry.update({k: moved.get(k, 0) for k in COUNTERS})
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


def unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
