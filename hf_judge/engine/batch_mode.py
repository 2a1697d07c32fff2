"""Batch mode on the run driver: :class:`BatchMode` fills the reply store through the provider's batch API
(:mod:`.batch`) before the first split (its ``before_splits``), then the one-process dispatch builds each split
from the store, a request the store lacks ending as the batch book says (or sent online: ``batch_fallback``)."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BudgetExceededError, ErrorKind
from ..judging.ensemble import Layout
from ..progress import bars_wanted
from ..redact import scrub
from ..store.failures import KEPT_KINDS, failure_key, failure_record
from ..store.replies import ReplyStore
from ..transport.budget import limit_text, unsent_message
from ..transport.client import JudgeClient, Outcome
from .batch import BatchRunner, run_all
from .batch_book import BatchReport
from .estimate import check_batch_budget, project
from .one_process import OneProcess
from .prepare import judge_key, plan_requests

if TYPE_CHECKING:
    from .driver import Run, SplitWork

# (name, client, key, layout of its requests) of each judge whose batches a run sends
BatchJudge = tuple[str, JudgeClient, str | None, Layout]


class BatchMode(OneProcess):
    """Batch mode (``batch=True``, ``batch_import=``): one batch (or more) per judge of a panel, each at its
    judge's server with its model and key, submitted and collected before the splits are built.

    Example:
        >>> scored = Run(job, BatchMode(), progress=False).score(ds)  # doctest: +SKIP
    """

    name = "batch"

    def before_splits(self, run: Run, works: list[SplitWork]) -> None:
        """Fill the reply store through the batch API; what it could not score ends as the batch book says
        (``batch_fallback='online'``: sent online)."""
        res, settings = run.resources, run.client.settings
        assert res is not None and res.store_path is not None  # batch mode requires the cache (capabilities)
        res.open()
        metrics = {p.metric.name: p.metric for w in works for p in w.plans}
        # the batches' news go where the bars go (off with them); a callback gets none: its Progress is per split
        on_status = _say if run.progress is True and bars_wanted() else None
        judges = batch_judges(run)
        runners = [
            BatchRunner(c, key, res.store_path, metrics, on_status=on_status, judge=name) for name, c, key, _ in judges
        ]
        for runner in runners:
            res.callback(runner.close)
        if settings.batch_fallback == "batch" or settings.batch_import:
            # the book's requests are every judge's: one lookup by key
            self.unsent = keeping_failures(runners[0].book.failure, res.store, runners[0].tries, run.client.max_tokens)
        else:  # online fallback: what failed for good in a batch (a content filter) is not sent online either
            self.unsent = runners[0].book.final_failure
        if settings.batch_import:
            runner = runners[0]  # one judge: a panel's import is refused (capabilities.check)
            try:
                runner.read_output(Path(settings.batch_import))
            finally:
                run.summary.batch = {**runner.report.to_dict(), "imported": Path(settings.batch_import).name}
            return
        self._submit(run, works, runners, judges)

    def _submit(self, run: Run, works: list[SplitWork], runners: list[BatchRunner], judges: list[BatchJudge]) -> None:
        """Submit (and collect) the requests of every split the results cache does not hold, within the budget."""
        res = run.resources
        assert res is not None
        todo: list[list[Callable[[], Any]]] = [[] for _ in judges]
        todo_works = [w for w in works if w.plans and not w.cache_file.exists()]
        for w in todo_works:
            for i, (_, c, _, layout) in enumerate(judges):
                todo[i].append(functools.partial(plan_requests, w.name, w.data, w.plans, c, layout, res.store))
        budget = batch_budget(run, todo_works, judges)
        try:
            run_all(runners, todo, run.settings.no_wait, budget)
        except BudgetExceededError as e:  # before a pass would submit: the splits are built from what was collected
            run.stopped = e
            self.unsent = unsent_at_budget(self.unsent, runners[0], e)
        finally:
            run.summary.batch = BatchReport.total(r.report for r in runners).to_dict()


def keeping_failures(
    settled: Callable[[bytes], Outcome], store: ReplyStore | None, tries: int, max_tokens: int | None
) -> Callable[[bytes], Outcome]:
    """Batch mode's error rows (``settled``: the book's), with a reply that failed validation on its last try
    also kept in the reply store as an online run keeps it (store/failures.py): a later run, in a batch or
    online, replays it rather than paying for it again (unless ``retry_errors``)."""

    def unsent(key: bytes) -> Outcome:
        outcome = settled(key)
        if store is not None and outcome.kind in KEPT_KINDS and outcome.attempts >= tries:
            raw = None if outcome.raw is None else scrub(outcome.raw)
            record = failure_record(str(outcome.kind), scrub(outcome.message or ""), raw, outcome.attempts, max_tokens)
            store.put(failure_key(key), record)
        return outcome

    return unsent


def unsent_at_budget(
    settled: Callable[[bytes], Any] | None, runner: BatchRunner, stop: BudgetExceededError
) -> Callable:
    """Batch mode stopped by its budget: a request the store lacks that the book says is to be sent (never
    submitted, or failed with tries left) ends as a ``budget`` error row; any other as ``settled`` says."""
    c = runner.client
    outcome = Outcome(None, None, ErrorKind.BUDGET, unsent_message(limit_text(stop, c.max_cost, c.max_total_tokens)))

    def unsent(key: bytes) -> Any:
        state = runner.book.states([key]).get(key)
        if state is None or (state[0] is None and state[1] < runner.tries and not state[2]):
            return outcome
        return settled(key) if settled is not None else None

    return unsent


def batch_judges(run: Run) -> list[BatchJudge]:
    """(name, client, key, layout of its requests) per judge whose batches the run sends. A panel's judge renders
    its own requests alone (its samples, without the other judges): a batch holds one model's requests."""
    if not run.layout.panel:
        return [("", run.client, run.api_key, run.layout)]
    alone = dataclasses.replace(run.layout, judges=())
    keys = [judge_key(judge, run.client.settings, run.api_key) for judge in run.client.settings.judges]
    return list(zip(run.layout.judges, run.clients, keys, [alone] * len(keys), strict=True))


def batch_budget(run: Run, works: list[SplitWork], judges: list[BatchJudge]) -> Callable[[], None] | None:
    """A batch is paid as a whole once submitted, so a budget is checked before: the projection of what a pass
    would submit (the requests ``--dry-run --batch`` counts, at the batch price) must fit in what is left. A
    panel's projection is every judge's, each at its own model's batch price."""
    settings, res = run.client.settings, run.resources
    if (settings.max_cost is None and settings.max_total_tokens is None) or not works:
        return None
    assert res is not None and res.store_path is not None
    store_path = res.store_path
    splits = {w.name: w.data for w in works}
    plans = {w.name: w.plans for w in works}
    metrics = list({p.metric.name: p.metric for ps in run.plans.values() for p in ps}.values())

    def check() -> None:
        ests = [
            (c, project(splits, plans, metrics, c, res.store, key, "auto", store_path, layout))
            for _, c, key, layout in judges
        ]
        check_batch_budget(run.client, ests[0][1], ests if len(ests) > 1 else None)

    return check


def _say(text: str) -> None:
    print(f"hf-judge: {text}", file=sys.stderr, flush=True)
