"""``score_dataset``: the main entry point."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import socket
import sys
import time
import traceback
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, IterableDataset, IterableDatasetDict, concatenate_datasets

from ..errors import BudgetExceededError, ConfigError, DiskFullError, ErrorKind, RunStopped
from ..judging.ensemble import Layout
from ..pages import file_paths, release
from ..progress import ProgressCallback, bars_wanted, datasets_bars_off
from ..redact import install_log_filter, scrub
from ..results.scored import ScoredDatasetDict
from ..settings import Settings, SettingValues, Unpack
from ..store.failures import KEPT_KINDS, failure_key, failure_record
from ..store.replies import ReplyStore
from ..store.sqlite import free_space, human_bytes, is_disk_full
from ..transport.budget import limit_text, unsent_message
from ..transport.client import JudgeClient, Outcome, judge_panel
from .batch import BatchRunner, run_all
from .batch_api import offline_runner_format
from .batch_book import BatchReport, in_flight, server_tag
from .capabilities import check
from .cascade import score_cascade
from .core import Plan, score_features
from .estimate import check_batch_budget, project
from .job import JudgeJob
from .loop import sparse_gc
from .pipeline import SplitRun
from .prepare import (
    as_splits,
    build_plans,
    check_samples,
    column_mapping,
    judge_key,
    judge_specs,
    new_summary,
    plan_requests,
    results_fingerprint,
    run_settings,
    settings_doc,
)
from .providers import provider_notes
from .runs import counters, read_runs, record_run, unlink_quietly
from .shell import (
    RunResources,
    SplitContext,
    bias_checks,
    checkpoints,
    fill_summary,
    interrupted,
    progress_for,
    scored_result,
    stopped_at_budget,
)
from .stream import ScoredIterableDatasetDict, Streams
from .workers import ShardJob, budget_share, concat_arrow, score_split, shard_bounds

logger = logging.getLogger("hf_judge")


def score_dataset(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    metrics: Any,
    *,
    columns: dict[str, str] | None = None,
    api_key: str | None = None,
    prompts_dir: str | os.PathLike | list | None = None,
    metric_params: dict[str, dict[str, Any]] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    token_columns: bool = False,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
    settings: Settings | None = None,
    storage_options: dict[str, Any] | None = None,
    local_cache_dir: str | os.PathLike | None = None,
    **setting_values: Unpack[SettingValues],
) -> ScoredDatasetDict:
    """Score every row of ``ds`` with LLM-as-judge ``metrics``.

    Returns the input splits (a bare ``Dataset`` becomes ``train``) with one
    column per declared output, rows in their original order and null where a
    metric failed, plus an ``errors`` split with one row per failed (split,
    row, metric). ``result.summary`` holds the run's numbers.

    How requests are sent is set by keyword arguments named after the fields
    of :class:`hf_judge.Settings` (``model=`` is required), or by a whole
    ``settings=Settings(...)``; keyword arguments override it:

    {settings}

    Replies are cached: a repeated call sends no request, and an interrupted
    run resumes where it stopped when called again. ``cache_dir`` may be on
    object storage (``"s3://bucket/prefix"``, ``gs://``, ``az://``,
    ``file://``), shared by every machine: ``storage_options`` configure it
    as in fsspec, and ``local_cache_dir`` holds this machine's copy
    (:mod:`hf_judge.store.segments`).

    An ``IterableDataset`` or ``IterableDatasetDict`` (``load_dataset(...,
    streaming=True)``) is scored as it is read: the result is a
    :class:`~hf_judge.engine.stream.ScoredIterableDatasetDict` whose splits score
    their rows when iterated, memory bounded by the window; its ``errors``
    split, ``save_to_disk`` (Parquet shards) and ``push_to_hub`` read the
    splits once.

    ``token_columns=True`` adds ``judge_prompt_tokens`` and
    ``judge_completion_tokens``: per row, the tokens of the replies that scored
    it, as the server reported them (null where it reports no usage).

    ``progress`` draws a bar per split that follows the replies as they
    arrive (off with ``datasets.disable_progress_bars()``); ``False`` draws
    none; a callable receives a ``hf_judge.Progress`` a few times a second.

    ``if_exists`` decides what happens to a metric whose columns a split
    already has (a scored result, its ``errors`` split included, can be scored
    again to add metrics): ``"keep"`` (default) keeps those columns as they
    are, nulls of an earlier failure included, and does not score the metric;
    ``"overwrite"`` scores it again and replaces them (replies already in the
    cache cost nothing, so only the rows that failed are sent); ``"error"``
    raises. A split with only some of a metric's columns, or one of another
    type, is a conflict that only ``"overwrite"`` resolves.

    A misbehaving server cannot stall or swamp the run: a ``Retry-After`` wait
    is capped at ``Settings.backoff_max`` seconds (30), a reply body over
    ``max_reply_bytes`` (default 1 MiB, compressed or not) is an error
    (``bad_response``), and a server that answers nothing but 429 for
    ``max_throttle_s`` seconds (default 300) stops the run with
    :class:`RateLimitedError`.

    Example:
        >>> from datasets import Dataset
        >>> ds = Dataset.from_dict({{"question": ["2+2?"], "answer": ["4"]}})
        >>> scored = score_dataset(  # doctest: +SKIP
        ...     ds, ["QA_All"], model="gpt-4.1-nano",
        ...     columns={{"instruction": "question", "output": "answer"}},
        ... )
        >>> scored["train"]["QA_Correctness"]  # doctest: +SKIP
        [9]
    """
    install_log_filter()
    if if_exists not in _IF_EXISTS:
        raise ConfigError(f"if_exists must be one of {', '.join(map(repr, _IF_EXISTS))}, got {if_exists!r}")
    settings = run_settings(settings, setting_values)
    engine = engine_of(settings, ds)
    check(engine, settings, stream=isinstance(ds, (IterableDataset, IterableDatasetDict)), use_cache=use_cache)
    if settings.batch_import:
        offline_runner_format(settings)  # the provider's refusal: a file in OpenAI's batch format
    job = JudgeJob.of(
        settings,
        metrics,
        columns,
        api_key,
        prompts_dir,
        metric_params,
        cache_dir,
        use_cache,
        token_columns,
        storage_options=storage_options,
        local_cache_dir=local_cache_dir,
    )
    if job.remote is not None:
        check(engine, settings, only=("remote_cache",), remote=True, url=job.remote.url)
    return score_job(ds, job, progress=progress, if_exists=if_exists)


def score_job(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    job: JudgeJob,
    *,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
) -> ScoredDatasetDict:
    """:func:`score_dataset` of a job resolved already (the engines' and the CLI's entry)."""
    install_log_filter()
    if job.settings.escalate_model is not None:  # a cascade: this function once per tier (engine/cascade.py)
        return _cascade(ds, job, progress, if_exists)
    settings, layout, token_columns, use_cache = job.settings, job.layout, job.token_columns, job.use_cache
    splits, earlier_errors = as_splits(ds)
    loaded = job.metrics
    plans_by_split, kept, renamed = build_plans(
        splits, loaded, job.columns, settings.temperature, if_exists, token_columns, layout
    )
    check_samples(settings, plans_by_split)
    needed = any(plans_by_split.values()) and not settings.batch_import
    api_key = job.key(needed=bool(needed))
    specs = judge_specs(settings, api_key)
    clients = judge_panel(specs)
    client = clients[0]
    for c in clients:
        c.caching = use_cache
    cache_root = job.cache_root
    if use_cache and not (settings.batch or settings.batch_import) and any(plans_by_split.values()):
        _warn_batches_in_flight(job.store_file, client)
    summary = new_summary(settings, client, loaded, splits, kept, renamed, layout, clients)
    summary.column_mapping = column_mapping(loaded, job.columns, splits)
    checks = bias_checks(job.bias_checks, loaded, job.columns, settings, splits)
    if use_cache and any(plans_by_split.values()):
        summary.notes += provider_notes(cache_root, clients)
    ctx = SplitContext(
        client=client,
        summary=summary,
        use_cache=use_cache,
        cache_root=cache_root,
        token_columns=token_columns,
        progress=progress,
        window=settings.window or max(4096, 64 * settings.concurrency),
        max_input_chars=settings.max_input_chars,
        layout=layout,
        judges=clients,
        api_key=api_key,
        judge_specs=specs,
        remote=job.remote,
    )
    errors: list[dict] = _earlier_errors(earlier_errors, splits, plans_by_split)
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        features = {
            s: _stream_features(d, plans_by_split[s], token_columns, layout, settings.logprobs)
            for s, d in splits.items()
        }
        check("stream", settings, only=("length_control",))
        streams = Streams(ctx, splits, plans_by_split, features, errors, job.store_path, checks)  # type: ignore[arg-type,unused-ignore]
        return ScoredIterableDatasetDict._of(streams)  # type: ignore[return-value,unused-ignore]
    started = time.perf_counter()
    results: dict[str, Dataset] = {}
    try:
        with sparse_gc(), RunResources(clients, job.store_path, job.remote) as res:
            ctx.resources = res
            if settings.batch or settings.batch_import:
                _run_batches(ctx, splits, plans_by_split, api_key)
            for split, d in splits.items():
                results[split] = _score_split(ctx, split, d, plans_by_split[split], errors)
                summary.rows[split] = len(d)
    except KeyboardInterrupt:
        raise interrupted(
            ctx.use_cache,
            None if settings.num_workers > 1 else ctx.resources.written if ctx.resources else 0,
            batch=settings.batch,
        ) from None
    except RunStopped as e:
        logger.debug("run stopped: %s", e)  # the exception carries the message; say it once
        raise
    finally:
        fill_summary(summary, clients, errors, started)
    out = scored_result(results, errors, summary, checks, (layout, plans_by_split))
    if ctx.stopped is not None:  # a budget stop: what it paid for is the error's result, never a finished one
        pairs = sum(len(d) * len(plans_by_split[s]) for s, d in splits.items())
        stopped_at_budget(summary, ctx.stopped, settings, out, pairs, use_cache)
        logger.debug("run stopped at its budget: %s", ctx.stopped)
        raise ctx.stopped
    logger.info("hf_judge run summary\n%s", summary)
    return out


def _cascade(ds: Any, job: JudgeJob, progress: bool | ProgressCallback, if_exists: str) -> ScoredDatasetDict:
    """A cascade's result (engine/cascade.py): :func:`score_job` once per tier. A budget stop keeps no result: one
    tier's is not the cascade's, and its replies are in the store for the rerun."""
    try:
        return score_cascade(ds, job, score_job, progress=progress, if_exists=if_exists)
    except BudgetExceededError as e:
        e.result = None
        raise


def engine_of(settings: Settings, ds: object) -> str:
    """Which engine of :mod:`hf_judge.engine.capabilities` ``score_dataset`` runs a job on: batch mode, a stream,
    workers, or one process (a job that asks for two is checked against the first)."""
    if settings.batch or settings.batch_import:
        return "batch"
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        return "stream"
    return "workers" if settings.num_workers > 1 else "dataset"


def _warn_batches_in_flight(store_path: Path, client: JudgeClient) -> None:
    """An online run does not collect batches: requests in them that it needs are sent and paid for again."""
    batches, requests = in_flight(store_path, server_tag(client))
    if batches:
        logger.warning(
            "%s of %s requests %s in flight at this server (see `hf-judge batch status`); this online run sends "
            "those it needs again and pays for them twice. To collect them instead, stop and add --batch "
            "(batch=True); to drop them, `hf-judge batch cancel` first",
            f"{batches:,} batch" + ("es" if batches != 1 else ""),
            f"{requests:,}",
            "is" if batches == 1 else "are",
        )


def _run_batches(
    ctx: SplitContext, splits: dict[str, Dataset], plans_by_split: dict[str, list[Plan]], api_key: str | None
) -> None:
    """Batch mode: fill the reply store through the provider's batch API (batch.py) before the splits are
    built from it, one batch (or more) per judge of a panel, each at its judge's server with its model and key;
    what it could not score ends as the batch book says (``batch_fallback='online'``: sent online)."""
    res, settings = ctx.resources, ctx.client.settings
    assert res is not None and res.store_path is not None  # batch mode requires the cache (checked above)
    res.open()
    metrics = {p.metric.name: p.metric for plans in plans_by_split.values() for p in plans}
    # the batches' news go where the bars go (off with them); a callback gets none: its Progress is per split
    on_status = _say if ctx.progress is True and bars_wanted() else None
    judges = _batch_judges(ctx, api_key)
    runners = [
        BatchRunner(c, key, res.store_path, metrics, on_status=on_status, judge=name) for name, c, key, _ in judges
    ]
    for runner in runners:
        res.callback(runner.close)
    if settings.batch_fallback == "batch" or settings.batch_import:
        # the book's requests are every judge's: one lookup by key
        ctx.unsent = _keeping_failures(runners[0].book.failure, res.store, runners[0].tries, ctx.client.max_tokens)
    else:  # online fallback: what failed for good in a batch (a content filter) is not sent online either
        ctx.unsent = runners[0].book.final_failure
    if settings.batch_import:
        runner = runners[0]  # one judge: a panel's import is refused (capabilities.check)
        try:
            runner.read_output(Path(settings.batch_import))
        finally:
            ctx.summary.batch = {**runner.report.to_dict(), "imported": Path(settings.batch_import).name}
        return
    todo: list[list[Callable[[], Any]]] = [[] for _ in judges]
    todo_splits: dict[str, Dataset] = {}
    for split, d in splits.items():
        plans = plans_by_split[split]
        fp = results_fingerprint(
            d, split, plans, ctx.client, ctx.max_input_chars, ctx.token_columns, ctx.layout, ctx.judges
        )
        if plans and not (ctx.cache_root / "results" / f"{fp}.arrow").exists():
            for i, (_, c, _, layout) in enumerate(judges):
                todo[i].append(functools.partial(plan_requests, split, d, plans, c, layout, res.store))
            todo_splits[split] = d
    budget = _batch_budget(ctx, todo_splits, plans_by_split, list(metrics.values()), judges)
    try:
        run_all(runners, todo, settings.no_wait, budget)
    except BudgetExceededError as e:  # before a pass would submit: the splits are built from what was collected
        ctx.stopped = e
        ctx.unsent = _unsent_at_budget(ctx.unsent, runners[0], e)
    finally:
        ctx.summary.batch = BatchReport.total(r.report for r in runners).to_dict()


def _keeping_failures(
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


def _unsent_at_budget(settled: Callable[[bytes], Any], runner: BatchRunner, stop: BudgetExceededError) -> Callable:
    """Batch mode stopped by its budget: a request the store lacks that the book says is to be sent (never
    submitted, or failed with tries left) ends as a ``budget`` error row; any other as ``settled`` says."""
    c = runner.client
    outcome = Outcome(None, None, ErrorKind.BUDGET, unsent_message(limit_text(stop, c.max_cost, c.max_total_tokens)))

    def unsent(key: bytes) -> Any:
        state = runner.book.states([key]).get(key)
        if state is None or (state[0] is None and state[1] < runner.tries and not state[2]):
            return outcome
        return settled(key)

    return unsent


def _batch_judges(ctx: SplitContext, api_key: str | None) -> list[tuple[str, JudgeClient, str | None, Layout]]:
    """(name, client, key, layout of its requests) per judge whose batches the run sends. A panel's judge renders
    its own requests alone (its samples, without the other judges): a batch holds one model's requests."""
    if not ctx.layout.panel:
        return [("", ctx.client, api_key, ctx.layout)]
    alone = dataclasses.replace(ctx.layout, judges=())
    keys = [judge_key(judge, ctx.client.settings, api_key) for judge in ctx.client.settings.judges]
    return list(zip(ctx.layout.judges, ctx.judges, keys, [alone] * len(keys), strict=True))


def _batch_budget(
    ctx: SplitContext,
    splits: dict[str, Dataset],
    plans_by_split: dict[str, list[Plan]],
    metrics: list,
    judges: list[tuple[str, JudgeClient, str | None, Layout]],
) -> Callable[[], None] | None:
    """A batch is paid as a whole once submitted, so a budget is checked before: the projection of what a pass
    would submit (the requests ``--dry-run --batch`` counts, at the batch price) must fit in what is left. A
    panel's projection is every judge's, each at its own model's batch price."""
    settings, res = ctx.client.settings, ctx.resources
    if (settings.max_cost is None and settings.max_total_tokens is None) or not splits:
        return None

    assert res is not None and res.store_path is not None

    def check() -> None:
        plans = {s: plans_by_split[s] for s in splits}
        ests = [
            (c, project(splits, plans, metrics, c, res.store, key, "auto", res.store_path, layout))
            for _, c, key, layout in judges
        ]
        check_batch_budget(ctx.client, ests[0][1], ests if len(ests) > 1 else None)

    return check


def _say(text: str) -> None:
    print(f"hf-judge: {text}", file=sys.stderr, flush=True)


if score_dataset.__doc__:  # None under python -OO
    score_dataset.__doc__ = score_dataset.__doc__.format(settings=settings_doc())


def _score_split(ctx: SplitContext, split: str, d: Dataset, plans: list[Plan], errors: list[dict]) -> Dataset:
    """One split, scored: its columns kept as they are, its result reused from the cache, or a fresh run
    (which saves a finished result to the cache and keeps a result with errors out of it)."""
    summary = ctx.summary
    # `_indices`: datasets has no public test for an indices mapping (select, shuffle), and
    # flatten_indices() rewrites the whole table even when there is none
    base = d.flatten_indices() if d._indices is not None else d
    if not plans:  # every metric's columns were kept
        return base
    fp = results_fingerprint(
        d, split, plans, ctx.client, ctx.max_input_chars, ctx.token_columns, ctx.layout, ctx.judges
    )
    features = score_features([p.metric for p in plans], ctx.layout, ctx.client.settings.logprobs, ctx.token_columns)
    if len(d) == 0:
        # Nothing to send or to cache. Not through a run: datasets' map returns an empty input as it is, without
        # the new columns or the file _fresh_run moves into the cache, and concatenate_datasets drops an empty one.
        both = Features({**base.features, **features})
        return Dataset.from_dict({c: [] for c in both}, features=both, split=base.split)
    cache_file = ctx.cache_root / "results" / f"{fp}.arrow"
    if ctx.use_cache:
        _remove_partials(cache_file)
        saved = _load_result(cache_file, len(d), features) if cache_file.exists() else None
        if saved is not None:
            summary.cached_splits.append(split)
            summary.add_runs(read_runs(cache_file))
            return concatenate_datasets([base, saved], axis=1)
    fresh = _workers_run if ctx.client.settings.num_workers > 1 and len(d) > 1 else _fresh_run
    scores = fresh(ctx, split, d, plans, fp, features, cache_file, errors)
    return concatenate_datasets([base, scores], axis=1)


def _workers_run(
    ctx: SplitContext,
    split: str,
    d: Dataset,
    plans: list[Plan],
    fp: str,
    features: Features,
    cache_file: Path,
    errors: list[dict],
) -> Dataset:
    """:func:`_fresh_run` by ``num_workers`` processes over contiguous shards (see :mod:`hf_judge.engine.workers`)."""
    import tempfile

    client = ctx.client
    if ctx.use_cache:
        folder = cache_file.with_name(f"{fp}.run-{_RUN_DIR_OWNER}-{uuid.uuid4().hex[:8]}")
        folder.mkdir(parents=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="hf_judge-workers-"))
    bounds = shard_bounds(len(d), client.settings.num_workers)
    n = len(bounds)
    jobs = [
        ShardJob(
            index=i,
            start=a,
            stop=b,
            split=split,
            data=d.select(range(a, b)),
            plans=plans,
            settings=budget_share(client.settings, n),
            api_key=ctx.api_key,
            judges=[(budget_share(spec, n), key) for spec, key in ctx.judge_specs],
            layout=ctx.layout,
            store_path=ctx.cache_root / "replies.sqlite3" if ctx.use_cache else None,
            remote=ctx.remote,
            features=features,
            out=folder / f"{fp}-{i}.arrow",
            window=ctx.window,
            max_input_chars=ctx.max_input_chars,
            token_columns=ctx.token_columns,
        )
        for i, (a, b) in enumerate(bounds)
    ]
    bar, on_progress = progress_for(ctx.progress, split, len(d))
    judges = ctx.judges or [client]
    current = (split, cache_file if ctx.use_cache else None, counters(judges), time.perf_counter())
    # score_split keeps the judges' counters current with the workers' reports: the checkpoints read them
    saving = checkpoints(ctx.use_cache, ctx.summary, current, judges, ctx.run_id, ctx.run_started)
    try:
        paths, shard_errors, stopped = score_split(jobs, [j.stats for j in judges], on_progress)
        errors.extend(shard_errors)
        if stopped is not None and ctx.stopped is None:
            stopped.args = (f"{stopped} (--workers {n}: each worker held 1/{n} of the run's budget)",)
            ctx.stopped = stopped
        if not ctx.use_cache:
            concat_arrow(paths, folder / "scores.arrow")
            return Dataset.from_file(str(folder / "scores.arrow"), in_memory=True)
        # as _fresh_run: a result with errors stays out of the fingerprint cache; the next run rebuilds it from the
        # reply store (kept invalid replies replayed, store/failures.py; the other failures sent again)
        done = cache_file.with_name(f"{fp}.partial-{uuid.uuid4().hex[:8]}.arrow") if shard_errors else cache_file
        concat_arrow(paths, done)
        scores = Dataset.from_file(str(done))
        if shard_errors:
            weakref.finalize(scores.data, unlink_quietly, done)
        return scores
    finally:
        if saving is not None:
            saving.stop()
        if bar is not None:
            bar.close()
        shutil.rmtree(folder, ignore_errors=True)
        record_run(ctx.summary, current, judges, ctx.run_id, ctx.run_started)


def _fresh_run(
    ctx: SplitContext,
    split: str,
    d: Dataset,
    plans: list[Plan],
    fp: str,
    features: Features,
    cache_file: Path,
    errors: list[dict],
) -> Dataset:
    """Send the split's requests through ``Dataset.map``; the scores, as a dataset of their own."""
    map_kwargs, run_dir = _map_kwargs(ctx, split, d, fp, features, cache_file)
    res = ctx.resources
    assert res is not None  # set by score_dataset before the first split
    res.open()
    loop = res.loop
    assert loop is not None  # open() started it
    client = ctx.client
    bar, on_progress = progress_for(ctx.progress, split, len(d))
    run = res.active = SplitRun(
        split,
        d,
        plans,
        client,
        res.store,
        window=ctx.window,
        max_input_chars=ctx.max_input_chars,
        token_columns=ctx.token_columns,
        on_progress=on_progress,
        unsent=ctx.unsent,
        judges=ctx.judges,
        layout=ctx.layout,
        partial=True,
    )
    current = (split, cache_file if ctx.use_cache else None, counters(ctx.judges or [client]), time.perf_counter())
    judges = ctx.judges or [client]
    saving = checkpoints(ctx.use_cache, ctx.summary, current, judges, ctx.run_id, ctx.run_started)
    try:
        feeder = loop.submit(run.feed())
        try:
            with datasets_bars_off():  # the map's bar moves per batch; ours follows the replies
                scores = d.map(lambda _idx: run.consume(_idx), **map_kwargs)
            errors.extend(run.in_order(run.errors))
            ctx.stopped = ctx.stopped or run.stopped
            if run_dir is not None:
                scores = _keep_result(scores, bool(run.errors), run_dir, cache_file, fp)
        except OSError as e:
            if not is_disk_full(e):
                raise
            _close_left_open(e, run_dir)
            if isinstance(run.failure, DiskFullError):
                raise run.failure from None
            raise _results_disk_full(cache_file.parent, e, _results_needed(run_dir, run, len(d))) from None
        finally:
            if not feeder.done():
                loop.run(run.cancel())
                feeder.cancel()
            if bar is not None:
                try:
                    feeder.result(30)  # its last report reaches the bar before the bar closes
                except BaseException:  # noqa: BLE001 - the map has raised it already
                    pass
                bar.close()
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)
        release(run.input_files | file_paths(scores.cache_files))  # read again only where used
        res.active = None
    finally:
        if saving is not None:
            saving.stop()
        # also when stopped mid-split: what it paid for counts when a later run resumes
        record_run(ctx.summary, current, judges, ctx.run_id, ctx.run_started)
    return scores


def _map_kwargs(
    ctx: SplitContext, split: str, d: Dataset, fp: str, features: Features, cache_file: Path
) -> tuple[dict[str, Any], Path | None]:
    """``Dataset.map``'s arguments for a fresh run of the split, and (with the cache on) the folder it writes in."""
    map_kwargs: dict[str, Any] = dict(
        batched=True,
        with_indices=True,
        input_columns=[],
        remove_columns=d.column_names,
        features=features,
        new_fingerprint=fp,
        desc=f"Scoring {split}",
        load_from_cache_file=False,
    )
    if not ctx.use_cache:
        map_kwargs.update(keep_in_memory=True)
        return map_kwargs, None
    # The map writes into a folder of its own, so that whatever it leaves
    # behind (a temporary file on a full disk) goes with the folder.
    run_dir = cache_file.with_name(f"{fp}.run-{_RUN_DIR_OWNER}-{uuid.uuid4().hex[:8]}")
    try:
        run_dir.mkdir(parents=True)
    except OSError as e:
        raise (_results_disk_full(cache_file.parent, e, None) if is_disk_full(e) else e) from None
    map_kwargs.update(cache_file_name=str(run_dir / cache_file.name))
    return map_kwargs, run_dir


def _keep_result(scores: Dataset, failed: bool, run_dir: Path, cache_file: Path, fp: str) -> Dataset:
    """The map's result moved out of its run folder: into the results cache, or, when some (row, metric)
    failed, beside it under a name of its own (a result with errors is not a finished one: the next run rebuilds
    it from the reply store, where the replies that failed validation are kept and replayed, unless
    ``retry_errors``, and sends the other failed pairs again)."""
    done = cache_file.with_name(f"{fp}.partial-{uuid.uuid4().hex[:8]}.arrow") if failed else cache_file
    # One resident copy of the result at a time: the map's own mapping has read the whole file,
    # and the reopened one below reads it again (the peak RSS of a 1,000,000-row run went 1.26x->1.48x).
    release(file_paths(scores.cache_files))
    del scores
    os.replace(run_dir / cache_file.name, done)
    scores = Dataset.from_file(str(done))
    if failed:  # deleted once no dataset reads it, at the latest when the process ends
        weakref.finalize(scores.data, unlink_quietly, done)
    return scores


_IF_EXISTS = ("keep", "overwrite", "error")


def _stream_features(
    d: IterableDataset, plans: list[Plan], token_columns: bool, layout: Layout, with_logprobs: bool = False
) -> Features:
    """A streamed split's output features: its own, then the score columns (those of ``_score_split``)."""
    scores = score_features([p.metric for p in plans], layout, with_logprobs, token_columns and bool(plans))
    return Features({**(d.features or {}), **scores})


def _earlier_errors(earlier: Dataset | None, splits: dict[str, Dataset], plans: dict[str, list[Plan]]) -> list[dict]:
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


def _load_result(path: Path, rows: int, features: Features) -> Dataset | None:
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


# A run folder's name says which process writes it (host and pid), so that the folder a killed run left
# behind is recognised and removed by the next run, and the folder of a live run beside it is left alone.
_RUN_DIR_OWNER = f"{socket.gethostname()}_{os.getpid()}".replace("-", "_")


def _remove_partials(cache_file: Path) -> None:
    """Remove the partial results and run folders earlier runs of this fingerprint left (a kill -9 skips
    their clean-up)."""
    for p in cache_file.parent.glob(f"{cache_file.stem}.partial-*.arrow"):
        unlink_quietly(p)  # a dataset of this process that still maps one keeps reading it (Linux)
    host = _RUN_DIR_OWNER.rsplit("_", 1)[0]
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


def _close_left_open(error: BaseException, folder: Path | None) -> None:
    """Close the files in ``folder`` that a map stopped by a full disk left open.

    When the disk is full, finalizing the map's writer fails again, and datasets
    then leaves its temporary file (and the writer's stream) open: their last
    flush, at garbage collection, would print an ignored-exception traceback.
    """
    if folder is None:
        return
    prefix = str(folder)
    for frame, _ in traceback.walk_tb(error.__traceback__):
        for v in list(frame.f_locals.values()):
            for f in (v, getattr(v, "stream", None)):
                if f is None:
                    continue
                name = getattr(f, "name", None) or getattr(f, "path", None)
                if isinstance(name, str) and name.startswith(prefix) and callable(getattr(f, "close", None)):
                    try:
                        f.close()
                    except (OSError, ValueError):
                        pass


def _results_needed(run_dir: Path | None, run: SplitRun, rows: int) -> int | None:
    """About the space the rest of a split's scores take, judged by what the map had written."""
    if run_dir is None or not run.consumed:
        return None
    written = sum(p.stat().st_size for p in run_dir.iterdir() if p.is_file())
    return int(written / run.consumed * (rows - run.consumed) * 1.2) if written else None


def _results_disk_full(folder: Path, error: OSError, needed: int | None) -> DiskFullError:
    need = f"about {human_bytes(needed)} more" if needed else "more space"
    return DiskFullError(
        f"the disk that holds the results folder {folder} is full ({human_bytes(free_space(folder))} free): {error}. "
        f"Every reply received is kept in the reply cache; the scores of this split need {need}. Free it there "
        "(or point cache_dir= / --cache-dir at a larger disk) and run the same command again."
    )
