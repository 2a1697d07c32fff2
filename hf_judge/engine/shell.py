"""The run shell: the pieces around the row core that the run driver (:mod:`.driver`) puts together once for
every engine, and that the engines not yet on it (Ray, Spark, the ``Judge`` map transform) still use:

- :class:`RunResources`: the loop thread, the clients (one judge, a panel's, or one over a fleet's replicas), the
  reply store (opened ``shared`` by a process among several), closed once, best effort, in one order.
- :func:`fill_summary`: the summary's counters (:mod:`.counting`'s), cost and price, each judge's requests, and a
  panel's judge-vs-judge agreement (:func:`panel_agreement`; a stream's on the sample of its rows it keeps).
- :func:`bias_checks` and :func:`rows_figures`: the bias checks, built and checked against the input before the
  first request, then run on the scored rows with the panel's agreement (a stream: on its sample of them), the
  one place any engine runs them; :func:`scored_result` ends a run that holds its rows with it.
- :func:`interrupted`: what a Ctrl-C or a kill kept, in the same words for every engine.
- :class:`Checkpoints`: the run history's entry, rewritten every ``history_every_s`` while a split runs.
- :func:`progress_for`: a split's bar, or the caller's callback.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import errors as errors_module
from ..analysis.alpha import krippendorff_alpha
from ..errors import BudgetExceededError, ErrorKind, HfJudgeError, InterruptedRun
from ..judging.ensemble import JUDGE_SEP, Layout
from ..judging.metrics import Metric
from ..progress import ProgressBar, ProgressCallback
from ..results.bias import BiasChecks
from ..results.errors_split import ERRORS_SPLIT, errors_dataset
from ..results.scored import ScoredDatasetDict
from ..results.summary import RunSummary
from ..settings import Settings
from ..store.replies import ReplyStore
from ..store.segments import Remote, publish_backlog
from ..transport.budget import limit_text
from ..transport.client import JudgeClient, Stats, judge_panel
from ..transport.fleet import FleetClient
from ..transport.latency import latency_quantile
from .core import Plan
from .counting import summary_counters, total_stats
from .loop import LoopThread
from .pipeline import SplitRun
from .runs import run_entry, write_runs

logger = logging.getLogger("hf_judge")


# -- resources -----------------------------------------------------------------------------------------------------


def open_clients(specs: Sequence[tuple[Settings, str | None]], base_urls: Sequence[str] | None = None) -> list:
    """The clients of a run: one per judge of a panel, or (``base_urls``) one over a fleet of one model's replicas.

    Example:
        >>> [c.model for c in open_clients([(Settings(model="a"), None), (Settings(model="b"), None)])]
        ['a', 'b']
    """
    if base_urls:
        settings, key = specs[0]
        return [FleetClient(settings, list(base_urls), api_key=key)]
    return judge_panel(specs)


class RunResources(ExitStack):
    """What a run holds while it sends requests: the reply store (``shared``: claims for processes that share
    it), the event loop thread and the clients' sessions. Opened when the first split needs them; closed once,
    each step best effort, however the run ends: the split in flight cancelled, the sessions closed, the loop
    stopped, then the store flushed and closed, and last the backlog published to the store's remote.

    Example:
        >>> with RunResources(open_clients([(Settings(model="judge"), None)]), None) as res:  # doctest: +SKIP
        ...     res.open()
        ...     res.loop.run(...)
    """

    def __init__(
        self, clients: list[JudgeClient], store_path: Path | None, remote: Remote | None = None, shared: bool = False
    ):
        self.clients = clients
        self.store_path = store_path
        self.remote = remote  # the store's shared home on object storage, if any
        self.shared = shared
        self.store: ReplyStore | None = None
        self.loop: LoopThread | None = None
        self.active: SplitRun | None = None  # the split being scored, cancelled if the run stops
        super().__init__()
        self.callback(_quietly, self._publish_backlog)  # last, at exit

    @property
    def written(self) -> int:
        return self.store.written if self.store is not None else 0

    def open(self) -> RunResources:
        if self.loop is not None:
            return self
        for client in self.clients:
            client.caching = self.store_path is not None
        if self.store_path is not None:
            self.store = ReplyStore(self.store_path, shared=self.shared, remote=self.remote)
            self.callback(_quietly, functools.partial(_close_store, self.store))
        self.loop = loop = LoopThread()
        self.callback(_quietly, loop.stop)
        for client in self.clients:
            self.callback(_quietly, functools.partial(_close_client, loop, client))
        self.callback(_quietly, self._cancel_active)
        for client in self.clients:
            loop.run(client.open())
        return self

    def _publish_backlog(self) -> None:
        """A run that needed no store (its result was cached whole) still publishes what earlier runs on this
        machine could not: another node would pay for it again (an opened store does so itself)."""
        if self.store is None and self.remote is not None and self.store_path is not None:
            publish_backlog(self.remote, self.store_path)

    def _cancel_active(self) -> None:
        if self.active is not None and self.loop is not None:
            self.loop.run(self.active.cancel(), timeout=10)


def _close_client(loop: LoopThread, client: JudgeClient) -> None:
    loop.run(client.close(), timeout=10)


def _close_store(store: ReplyStore) -> None:
    store.flush(30)
    store.close()


def _quietly(step: Callable[[], Any]) -> None:
    try:
        step()
    except Exception:  # noqa: BLE001 - best effort while stopping
        pass


# -- the summary ---------------------------------------------------------------------------------------------------


def fill_summary(
    summary: RunSummary,
    clients: Sequence[JudgeClient],
    errors: Iterable[dict] | Mapping[str, int],
    started: float,
    stats: Sequence[Stats] | None = None,
) -> None:
    """The summary's figures of the run, for every engine: counters, failed attempts, each judge's requests (a
    panel's: a judge that answered nothing shows), error kinds, output mode, notes, elapsed time and the price.
    ``stats``: each judge's counters where they are not the ``clients``' own (Ray's batches bring them back);
    ``errors``: the error rows, or the count of each kind."""
    per_judge = list(stats) if stats is not None else [c.stats for c in clients]
    s = total_stats(per_judge)
    for name in summary_counters():
        setattr(summary, name, getattr(s, name))
    summary.failed_attempts = dict(s.failures)
    if len(per_judge) > 1:
        # a panel: each judge's own, to tell a judge that answered nothing (summary.losses), and what each
        # judge's replies took and cost (choose-judge's table)
        names = [j["name"] for j in summary.sampling.get("judges", [])]
        summary.judge_requests = {
            name: judge_figures(j, c) for name, j, c in zip(names, per_judge, clients, strict=False)
        }
    kinds = errors if isinstance(errors, Mapping) else Counter(e["kind"] for e in errors)
    summary.errors = {str(k): n for k, n in kinds.items()}
    summary.structured_output = s.structured_output
    summary.notes = [*summary.notes, *(n for n in s.notes if n not in summary.notes)]
    if s.replayed:  # error rows with no request behind them this run: where they come from, and how to resend
        summary.notes.append(replayed_note(s.replayed))
    summary.elapsed_s = time.perf_counter() - started
    # one price for the run's tokens: a panel of models priced differently has none (its cost is not one product)
    prices = {c.price for c in clients}
    price = prices.pop() if len(prices) == 1 else None
    summary.price = price.model_dump() if price is not None else None


def stopped_at_budget(
    summary: RunSummary,
    stop: BudgetExceededError,
    settings: Settings,
    result: Any,
    pairs: int | None = None,
    cached: bool = True,
) -> None:
    """A run the budget stopped whose engine went on without sending (pipeline.py's ``partial``): ``summary``
    says the result is incomplete (``stopped``: the card, the page and the end-of-run lines show it), and
    ``stop`` carries ``result`` and says where it went. ``pairs``: the run's (row, metric) pairs, where known: a
    result of which none was scored (the budget stopped it before anything) is not kept; nor is one of a run
    without the cache (``cached``), which no rerun can complete without paying for it all again."""
    what = limit_text(stop, settings.max_cost, settings.max_total_tokens)
    unsent = summary.errors.get(ErrorKind.BUDGET, 0)
    if (pairs is not None and unsent >= pairs) or (result is not None and not cached):
        return  # nothing to keep: the stop says what to do
    rerun = (
        "The same command with a higher budget (or none) completes it, paying only for what was not paid"
        if cached
        else "The cache is off (--no-cache): a rerun pays for every row again"
    )
    summary.stopped = (
        f"INCOMPLETE: the run stopped at its budget ({what}): {unsent:,} (row, metric) not sent, their scores null "
        f"(errors of kind `budget`). {rerun}"
    )
    stop.result = result
    if stop.args and "as a result" not in str(stop.args[0]):
        where = "Python: this error's `result`" if result is not None else "Python: the stream's rows, as read"
        stop.args = (
            f"{stop.args[0]} What was paid for is kept as a result: the rows scored, and an error row of kind "
            f"`budget` for each of the {unsent:,} (row, metric) not sent ({where}; the command line saves it to "
            "the output folder).",
            *stop.args[1:],
        )


def replayed_note(n: int) -> str:
    """The summary's note on the invalid replies a run replayed from the reply store (store/failures.py).

    Example:
        >>> replayed_note(6)
        '6 replies that failed validation in an earlier run were replayed from the reply cache as the same error rows, with no request sent; --retry-errors (retry_errors=True) sends them again'
    """  # noqa: E501 - a doctest line
    return (
        f"{n:,} {'reply' if n == 1 else 'replies'} that failed validation in an earlier run "
        f"{'was' if n == 1 else 'were'} replayed from the reply cache as the same error rows, with no request "
        "sent; --retry-errors (retry_errors=True) sends them again"
    )


def judge_figures(s: Stats, client: JudgeClient) -> dict[str, Any]:
    """One judge's entry of ``summary.judge_requests``: requests and failed attempts, the tokens of its replies,
    its latency (median and 95th percentile in seconds, of the answered requests) and its price."""
    return {
        "requests": s.requests,
        "failed_attempts": dict(s.failures),
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "cached_tokens": s.cached_tokens,
        "answered": s.statuses.get(200, 0),  # online, each has its latency; a batch line has none
        "latency_p50_s": latency_quantile(s.latency, 0.5),
        "latency_p95_s": latency_quantile(s.latency, 0.95),
        "price": client.price.model_dump() if client.price is not None else None,
    }


def panel_agreement(layout: Layout, tables: Mapping[str, Any], plans_by_split: Mapping[str, Sequence[Plan]]) -> dict:
    """Judge-vs-judge agreement of a panel, per split and metric (see ensemble.Layout.agreement), with each
    column's Krippendorff alpha; ``tables``: split -> its scored rows (a Dataset or a pyarrow Table)."""
    out: dict[str, Any] = {}
    for split, plans in plans_by_split.items():
        if split in tables and plans:
            table = tables[split]
            table = table.data.table if hasattr(table, "data") else table
            out[split] = {p.metric.name: layout.agreement(p.metric, table) for p in plans}
            for by_column in out[split].values():
                for column, entry in by_column.items():
                    entry.update(panel_alpha(table, column, layout.judges))
    return out


def panel_alpha(table: Any, column: str, judges: tuple[str, ...]) -> dict[str, Any]:
    """Krippendorff's alpha of a panel's judges on one column (a pyarrow Table's ``<column>__<judge>``
    columns): interval for numbers, nominal for verdicts and winners; ``alpha`` None when undefined."""
    import numpy as np

    cols = [table.column(f"{column}{JUDGE_SEP}{j}") for j in judges]
    numeric = all(pa.types.is_integer(c.type) or pa.types.is_floating(c.type) or pa.types.is_null(c.type) for c in cols)
    if numeric:  # straight to numpy: a panel over a million rows
        values = np.stack([c.cast(pa.float64()).to_numpy().astype(np.float64) for c in cols])
        return {"alpha": krippendorff_alpha(values, "interval"), "alpha_level": "interval"}
    return {"alpha": krippendorff_alpha([c.to_pylist() for c in cols], "nominal"), "alpha_level": "nominal"}


def bias_checks(
    on: bool, metrics: Sequence[Metric], columns: Mapping[str, str], settings: Settings, inputs: Mapping[str, Any]
) -> BiasChecks | None:
    """The run's bias checks (:class:`~hf_judge.results.bias.BiasChecks`), None where ``on`` is off (a cascade's
    tiers: their combined result is checked); ``inputs`` (split -> its column names, or the split) checked
    against them before the first request (``generator_column`` must be a column of each).

    Example:
        >>> checks = bias_checks(job.bias_checks, job.metrics, job.columns, job.settings, splits)  # doctest: +SKIP
    """
    if not on:
        return None
    checks = BiasChecks.of(list(metrics), dict(columns), settings)
    names = {s: list(d if isinstance(d, (list, tuple)) else d.column_names or []) for s, d in inputs.items()}
    checks.check_input(names)
    return checks


def rows_figures(
    summary: RunSummary,
    results: Mapping[str, Any],
    checks: BiasChecks | None,
    panel: tuple[Layout, Mapping[str, Sequence[Plan]]] | None = None,
    warned: set[str] | None = None,
) -> dict[str, Any]:
    """What the summary says of the scored rows, for every engine at one point, once its rows are scored (a
    stream: once a split has passed, on the sample it kept): a panel's judge-vs-judge agreement (``panel``: its
    layout and plans, where the rows are whole) and the bias checks (``length_bias``, ``longer_wins``,
    ``self_preference``), their warnings logged (``warned``: those said already, said once). Returns the splits,
    with ``<column>_lc`` where ``length_control`` asks for it.

    Example:
        >>> results = rows_figures(summary, results, checks, (layout, plans_by_split))  # doctest: +SKIP
    """
    if panel is not None and panel[0].panel:
        summary.agreement = panel_agreement(panel[0], results, panel[1])
    if checks is None:
        return dict(results)
    out, warnings = checks.run(summary, dict(results))
    for warning in warnings:
        if warned is None or warning not in warned:
            if warned is not None:
                warned.add(warning)
            logger.warning("%s", warning)
    return out


def scored_result(
    results: Mapping[str, Any],
    errors: Sequence[dict[str, Any]],
    summary: RunSummary,
    checks: BiasChecks | None,
    panel: tuple[Layout, Mapping[str, Sequence[Plan]]] | None = None,
) -> ScoredDatasetDict:
    """A finished run's result: its splits after :func:`rows_figures` (the panel's agreement, the bias checks), the
    errors split and the summary. Every engine that holds its scored rows ends here (one process, workers, batch
    mode, Ray).

    Example:
        >>> out = scored_result(results, errors, summary, checks, (layout, plans_by_split))  # doctest: +SKIP
    """
    out = ScoredDatasetDict(rows_figures(summary, results, checks, panel))
    out[ERRORS_SPLIT] = errors_dataset(list(errors))
    out.summary = summary
    return out


def judge_columns(layout: Layout, plans: Sequence[Plan], names: Iterable[str]) -> list[str]:
    """Of the columns ``names``, the ``<column>__<judge>`` ones a panel's agreement reads (none without a panel)."""
    if not layout.panel:
        return []
    wanted = {f"{c}{JUDGE_SEP}{j}" for p in plans for c in layout.judged(p.metric) for j in layout.judges}
    return [n for n in names if n in wanted]


# -- interruption --------------------------------------------------------------------------------------------------


NO_CACHE = "The cache is off (use_cache=False, --no-cache)"


def interrupted(use_cache: bool, written: int | None = None, *, batch: bool = False) -> InterruptedRun:
    """What a Ctrl-C (or a kill) kept, in one wording for every engine: the replies in the cache (``written`` of
    them; None: other processes wrote them, ``num_workers``'), the batches submitted, or nothing without a cache.

    Example:
        >>> print(interrupted(True, 1234))  # doctest: +ELLIPSIS
        interrupted. 1,234 replies of this run are saved in the cache; run the same command again to resume ...
    """
    if not use_cache:
        return InterruptedRun(f"interrupted. {NO_CACHE}: nothing of this run was kept.")
    saved = "The replies the workers received are saved"  # in the workers' stores: this process wrote none
    if written is not None:
        saved = f"{written:,} replies of this run are saved"
    batches = (
        " The batches submitted are recorded there too: the next run collects them, submitting nothing twice."
        if batch
        else ""
    )
    return InterruptedRun(
        f"interrupted. {saved} in the cache; run the same command again to resume where it stopped (a stream: read it "
        f"again); stored replies are not sent again.{batches}"
    )


# -- the run history's checkpoints ---------------------------------------------------------------------------------


class Checkpoints:
    """This run's entry of the run history of a split, written every ``every`` seconds while the split runs, so
    that a run killed with kill -9 leaves its counters up to the last checkpoint (Ctrl-C and errors write the
    final entry, :func:`~.runs.record_run`, which takes the checkpoints' place). Every engine that sends from
    this process runs them, streams included; ``num_workers``' parent keeps its judges' counters current.

    A thread of its own writes them; ``stop()``, from the thread that writes the final entry, waits for a
    write under way, so that no checkpoint can replace the final entry.

    Example:
        >>> cp = Checkpoints(10.0, summary, current, clients, run_id, started)  # doctest: +SKIP
        >>> cp.stop()  # doctest: +SKIP
    """

    def __init__(self, every: float, *entry_args: Any) -> None:
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._every, self._args = every, entry_args
        self._thread = threading.Thread(target=self._run, name="hf_judge-checkpoints", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        summary, current, clients, run_id, started = self._args
        while not self._stop.wait(self._every):
            with self._lock:
                if self._stop.is_set():
                    return
                write_runs(current[1], run_id, run_entry(summary, current, clients, run_id, started))

    def stop(self) -> None:
        with self._lock:
            self._stop.set()


def checkpoints(use_cache: bool, summary: RunSummary, current: tuple, clients: Sequence, run_id: str, started: str):
    """A split's :class:`Checkpoints` where the run keeps a history (the cache is on), else None."""
    if not use_cache or current[1] is None:
        return None
    every = clients[0].settings.history_every_s
    return Checkpoints(every, summary, current, list(clients), run_id, started)


# -- progress ------------------------------------------------------------------------------------------------------


def progress_for(
    progress: bool | ProgressCallback, split: str, total: int | None
) -> tuple[ProgressBar | None, ProgressCallback | None]:
    """A split's progress: (its bar to close at the end, or None; what the run reports to). ``True``: a bar (off
    with ``datasets.disable_progress_bars()``); a callable: the caller's; ``False``: nothing."""
    bar = ProgressBar(split, total) if progress is True and total != 0 else None
    on_progress = progress if callable(progress) else bar if bar is not None and not bar.disabled else None
    return bar, on_progress


def worker_error(e: BaseException) -> HfJudgeError | None:
    """The hf-judge error that a Spark task or a Ray actor raised, out of the exception the engine wraps it in
    (its text holds the worker's traceback, ending ``hf_judge.errors.NAME: message``), so that the run stops
    with that one line and its exit code, as in one process; None for any other failure.

    Example:
        >>> worker_error(RuntimeError("Traceback ...\\nhf_judge.errors.ServerUnreachableError: cannot reach it"))
        ServerUnreachableError('cannot reach it')
    """
    found = re.findall(r"^hf_judge\.errors\.(\w+): (.+)$", str(e), re.MULTILINE)
    if not found:
        return None
    name, message = found[-1]
    kind = getattr(errors_module, name, None)
    if not (isinstance(kind, type) and issubclass(kind, HfJudgeError)):
        return None
    try:
        return kind(message)
    except TypeError:  # an error class that takes more than its message
        return None
