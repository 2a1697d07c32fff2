"""A run's counters, one way for every engine: each judge's :class:`~hf_judge.transport.client.Stats`, merged by one
rule, carried across processes by one bridge, and added up by the same rule when a run is made of parts.

- :func:`merge_stats` / :func:`total_stats` / :func:`merged_per_judge`: the counters of one judge's parts add up
  (a worker's, a Ray batch's); a panel's judges give the run's total. Every counter of :data:`SUMMED` is added:
  a counter added to ``Stats`` and to ``SUMMED`` needs nothing more here.
- **The counting bridge**, for engines whose requests are sent by other processes. The worker side is
  :class:`StatsReporter`: each judge's counters moved since its last report (the dict form :func:`stats_delta`
  gives), and the replies its store wrote, as one JSON-able dict. The driver side is :class:`Tally`: the run's
  judges' counters (their clients' own ``Stats``), into which each report is merged as it arrives, so that the
  run history's checkpoints and a Ctrl-C count what the workers paid for so far. A transport only carries the
  dicts: ``num_workers``' processes put them on their multiprocessing queue (with each progress report and their
  last word); a Ray actor or a Spark Python worker puts ``json.dumps(reporter.report())`` in a column of its batch's
  first row (or a Spark accumulator adds them), and the driver merges each one it reads back
  (``tally.merge(json.loads(cell))``). One reporter per process and judge set (a Spark worker keys it by its
  runtime, a Ray actor holds its own), never a module-level dict of counters.
- :func:`summary_counters` and :func:`add_summary`: the one rule by which the summaries of a run's parts add up (a
  cascade's tiers): every counter the summary holds, each judge's figures, failed attempts, notes, runs.

Example:
    >>> reporter = StatsReporter([JudgeClient(Settings(model="m"), api_key=None)])  # doctest: +SKIP
    >>> tally.merge(reporter.report())  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..results.summary import RunSummary, added_engine
from ..transport.client import JudgeClient, Stats
from .runs import COUNTERS

# every counter of a Stats that adds up across its parts (a panel's judges, workers, Ray's batches)
SUMMED = (*COUNTERS, "shared", "capped_waits", "no_logprobs", "unplaced_logprobs", "replayed")
# the mode a client starts in: a part that says it fell back to nothing (it sent no request, or the server took it)
DEFAULT_MODE = Stats().structured_output
# the figures of a judge (summary.judge_requests) that do not add up over parts: the later part's stands where the
# earlier has none (a latency quantile is no sum; a price is the judge's)
NOT_ADDED = ("latency_p50_s", "latency_p95_s", "price")


def merge_stats(total: Stats, part: Stats | Mapping[str, Any]) -> Stats:
    """Add ``part`` (a Stats, or its :func:`stats_delta` form) to ``total``, parts of one judge: a worker's
    counters, a Ray batch's. Counters, failed attempts and HTTP statuses add up; a note is said once; the output
    mode is the one a part fell back to (a part that sent nothing, or whose server took the schema, says the
    default). Returns ``total``.

    Example:
        >>> s = merge_stats(Stats(requests=2), {"requests": 3, "failures": {"timeout": 1}})
        >>> s.requests, dict(s.failures), s.structured_output
        (5, {'timeout': 1}, 'json_schema')
    """
    get = part.get if isinstance(part, Mapping) else functools.partial(getattr, part)
    for name in SUMMED:
        setattr(total, name, getattr(total, name) + (get(name, 0) or 0))
    total.failures.update(get("failures", None) or {})
    total.statuses.update({int(k): v for k, v in (get("statuses", None) or {}).items()})
    total.latency.update({int(k): v for k, v in (get("latency", None) or {}).items()})
    mode = get("structured_output", None) or DEFAULT_MODE
    if mode != DEFAULT_MODE:
        total.structured_output = mode
    total.notes.extend(n for n in (get("notes", None) or []) if n not in total.notes)
    return total


def total_stats(per_judge: Sequence[Stats]) -> Stats:
    """The stats of a run from each judge's (one judge: its own): the counters added up by :func:`merge_stats`,
    the output mode of each judge listed once (``"json_schema, json_object"``: a panel's judges differ)."""
    if len(per_judge) == 1:
        return per_judge[0]
    total = Stats()
    for s in per_judge:
        merge_stats(total, s)
    total.structured_output = ", ".join(dict.fromkeys(s.structured_output for s in per_judge))
    return total


def stats_dict(s: Stats) -> dict[str, Any]:
    """``s`` in the dict form :func:`merge_stats` takes (JSON: keys of statuses and latency bins as strings).

    Example:
        >>> stats_dict(Stats(requests=2))["requests"]
        2
    """
    out: dict[str, Any] = {k: getattr(s, k) for k in SUMMED}
    for key in ("failures", "statuses", "latency"):
        out[key] = {str(k): n for k, n in getattr(s, key).items() if n}
    out["structured_output"] = s.structured_output
    out["notes"] = list(s.notes)
    return out


def dict_delta(now: Mapping[str, Any], before: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``now`` moved since ``before`` (both :func:`stats_dict` forms), in the same form."""
    before = before or {}
    out: dict[str, Any] = {k: now.get(k, 0) - before.get(k, 0) for k in SUMMED}
    for key in ("failures", "statuses", "latency"):
        was = before.get(key, {})
        out[key] = {k: n - was.get(k, 0) for k, n in now.get(key, {}).items() if n - was.get(k, 0)}
    out["structured_output"] = now.get("structured_output", DEFAULT_MODE)
    out["notes"] = list(now.get("notes", []))
    return out


def stats_delta(now: Stats, before: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``now`` moved since ``before`` (an earlier :func:`stats_dict`), in the dict form :func:`merge_stats`
    takes: what the counting bridge carries (:class:`StatsReporter`).

    Example:
        >>> stats_delta(Stats(requests=5), {"requests": 2})["requests"]
        3
    """
    return dict_delta(stats_dict(now), before)


def merged_per_judge(parts: Iterable[Sequence[Stats | Mapping[str, Any]]], judges: int) -> list[Stats]:
    """Each judge's counters over ``parts`` (each a list of per-judge counters: a worker's, a Ray batch's)."""
    out = [Stats() for _ in range(judges)]
    for per_judge in parts:
        for total, part in zip(out, per_judge, strict=False):  # a part that failed before it had clients has none
            merge_stats(total, part)
    return out


# -- the counting bridge -------------------------------------------------------------------------------------------


class Written(Protocol):
    """What holds the count of replies a process stored (:class:`~hf_judge.engine.shell.RunResources`)."""

    @property
    def written(self) -> int: ...


class StatsReporter:
    """The worker side of the counting bridge: one per process (and set of judges) that sends a run's requests
    outside the driver's process (``num_workers``' workers; Ray actors and Spark Python workers, see the module
    docstring). :meth:`report` gives what each judge's counters moved since the last report, and the replies
    ``store`` wrote since then, as a JSON-able dict that :meth:`Tally.merge` adds to the run's counters; a report
    is counted once, however it travels.

    Call it where the clients' counters do not move under it: on their event loop (a progress callback), or once
    the loop has stopped (a worker's last word).

    Example:
        >>> from hf_judge import Settings
        >>> reporter = StatsReporter([JudgeClient(Settings(model="m"), api_key=None)])
        >>> reporter.judges[0].stats.requests += 2
        >>> reporter.report()["judges"][0]["requests"], reporter.report()["judges"][0]["requests"]
        (2, 0)
    """

    def __init__(self, judges: Sequence[JudgeClient], store: Written | None = None) -> None:
        self.judges = list(judges)
        self.store = store
        self._before: list[dict[str, Any] | None] = [None] * len(self.judges)
        self._written = 0

    def report(self) -> dict[str, Any]:
        """``{"judges": [each judge's stats_delta since the last report], "written": replies stored since}``."""
        now = [stats_dict(j.stats) for j in self.judges]  # read once: what moves after this is the next report's
        moved = [dict_delta(n, b) for n, b in zip(now, self._before, strict=True)]
        self._before = list(now)
        written = self.store.written if self.store is not None else 0
        out = {"judges": moved, "written": written - self._written}
        self._written = written
        return out


class Tally:
    """The driver side of the counting bridge: a run's counters, one ``Stats`` per judge (the run's clients' own:
    this process's requests count there as they are sent), with every report of another process merged in as it
    arrives (:meth:`merge`). What the summary, the run history and its checkpoints read.

    Example:
        >>> from hf_judge import Settings
        >>> tally = Tally([JudgeClient(Settings(model="m"), api_key=None)])
        >>> tally.merge({"judges": [{"requests": 3}], "written": 3})
        >>> tally.stats[0].requests, tally.written
        (3, 3)
    """

    def __init__(self, judges: Sequence[JudgeClient]) -> None:
        self.judges = list(judges)
        self.written = 0  # replies other processes reported they stored
        self._lock = threading.Lock()

    @property
    def stats(self) -> list[Stats]:
        return [j.stats for j in self.judges]

    def merge(self, report: Mapping[str, Any] | None) -> None:
        """Add a :meth:`StatsReporter.report` (None: a part that had no clients yet, which reports nothing)."""
        if not report:
            return
        with self._lock:
            for judge, part in zip(self.judges, report.get("judges") or (), strict=False):
                merge_stats(judge.stats, part)
            self.written += int(report.get("written") or 0)


# -- summaries of parts --------------------------------------------------------------------------------------------


def summary_counters() -> tuple[str, ...]:
    """The counters a run summary holds: those of :data:`SUMMED` that :class:`RunSummary` has a field for (a counter
    added to both is filled by ``shell.fill_summary`` and added up by :func:`add_summary`, with no list to edit).

    Example:
        >>> summary_counters()[:3]
        ('requests', 'retries', 'cache_hits')
    """
    return tuple(k for k in SUMMED if hasattr(RunSummary, k))


def add_summary(total: RunSummary, part: RunSummary) -> RunSummary:
    """Add ``part``'s figures to ``total``: the one rule by which the summaries of a run's parts add up (a
    cascade's tiers, each a run of the driver). Every counter of :func:`summary_counters` and the elapsed time
    add; so do failed attempts by kind, each judge's figures (``judge_requests``: their counts and failed
    attempts; :data:`NOT_ADDED` kept), and the batch report's numbers; notes are said once, runs listed once; the
    output modes are listed once each; one price stands only where both have it; the judges' engines add up
    (:func:`~hf_judge.results.summary.added_engine`). Returns ``total``.

    Example:
        >>> s = add_summary(RunSummary(requests=2, judge_requests={"a": {"requests": 2}}),
        ...                 RunSummary(requests=3, judge_requests={"a": {"requests": 1}, "b": {"requests": 2}}))
        >>> s.requests, s.judge_requests
        (5, {'a': {'requests': 3}, 'b': {'requests': 2}})
    """
    for k in (*summary_counters(), "elapsed_s"):
        setattr(total, k, getattr(total, k) + getattr(part, k))
    total.failed_attempts = _added(total.failed_attempts, part.failed_attempts)
    for name, figures in part.judge_requests.items():
        total.judge_requests[name] = _added(total.judge_requests.get(name, {}), figures)
    for k, v in part.batch.items():
        if isinstance(v, (int, float)) and isinstance(total.batch.get(k, 0), (int, float)):
            total.batch[k] = total.batch.get(k, 0) + v
    total.engine = added_engine(total.engine, part.engine)  # a panel's turns, a cascade's tiers
    total.notes += [n for n in part.notes if n not in total.notes]
    total.add_runs(part.runs)
    modes = [m.strip() for s in (total, part) for m in s.structured_output.split(",")]
    total.structured_output = ", ".join(dict.fromkeys(modes))
    if part.price != total.price:
        total.price = None
    return total


def _added(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two figures' dicts added key by key: numbers and dicts of numbers add, a key of :data:`NOT_ADDED` keeps
    ``a``'s value where it has one."""
    out = dict(a)
    for k, v in b.items():
        mine = out.get(k)
        if k in NOT_ADDED:
            out[k] = v if mine is None else mine
        elif isinstance(v, Mapping):
            out[k] = dict(Counter(mine or {}) + Counter(v)) if all(isinstance(n, int) for n in v.values()) else v
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(mine, (int, float, type(None))):
            out[k] = (mine or 0) + v
        else:
            out[k] = v if mine is None else mine
    return out
