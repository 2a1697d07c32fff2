"""``score_dataset``: the main entry point. It picks the engine a job runs on (:func:`engine_for`: one process,
``num_workers``, batch mode, a stream) and hands the job to the run driver (:mod:`.driver`), which runs it."""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

from datasets import Dataset, DatasetDict, Features, IterableDataset, IterableDatasetDict

from ..errors import BudgetExceededError, ConfigError
from ..judging.ensemble import Layout
from ..progress import ProgressCallback
from ..redact import install_log_filter
from ..results.scored import ScoredDatasetDict
from ..results.sink import ResultSink
from ..results.summary import gpu_seconds
from ..settings import JobValues, Settings, Unpack, resolved_provider
from ..transport.vllm import check_vllm_model, engine_record, parse_vllm_model
from .batch_mode import BatchMode
from .capabilities import check
from .cascade import score_cascade
from .core import Plan, score_features
from .counting import add_summary
from .driver import Named, Run, through
from .estimate import estimate_job
from .job import Job, JudgeJob
from .one_process import OneProcess
from .prepare import settings_doc, streams_as_one
from .stream import ScoredIterableDatasetDict, StreamReadings, Streams
from .vllm_turns import judges_in_turn, managed_judges, vllm_served
from .workers import Workers

logger = logging.getLogger("hf_judge")


def score_dataset(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    metrics: Any,
    *,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
    **values: Unpack[JobValues],
) -> ScoredDatasetDict:
    """Score every row of ``ds`` with LLM-as-judge ``metrics``.

    Returns the input splits (a bare ``Dataset`` becomes ``train``) with one
    column per declared output, rows in their original order and null where a
    metric failed, plus an ``errors`` split with one row per failed (split,
    row, metric). ``result.summary`` holds the run's numbers.

    ``metrics`` may be a :class:`hf_judge.Job` instead, which holds the
    metrics and every keyword argument below but ``progress`` and
    ``if_exists``: ``score_dataset(ds, metrics, **values)`` is
    ``score_dataset(ds, Job(metrics, **values))``, the same result from the
    same requests (the keyword arguments, :class:`hf_judge.settings.JobValues`,
    are typed once for every entry point).

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
    return score_checked(ds, Job.of(metrics, values, "score_dataset").resolved, progress, if_exists)


def score_checked(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    job: JudgeJob,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
) -> ScoredDatasetDict:
    """:func:`score_dataset` of a job resolved: its refusals (the driver's, said before the dataset is read), then
    :func:`score_job`."""
    install_log_filter()
    if if_exists not in _IF_EXISTS:
        raise ConfigError(f"if_exists must be one of {', '.join(map(repr, _IF_EXISTS))}, got {if_exists!r}")
    ds = streams_as_one(ds)
    stream = isinstance(ds, (IterableDataset, IterableDatasetDict))
    # the driver's refusal (Run.prepare), said before any request
    engine = engine_for(job.settings, ds).name
    check(engine, job.settings, stream=stream, use_cache=job.use_cache, provider=resolved_provider(job.settings))
    return _served(ds, job, progress=progress, if_exists=if_exists)


def _served(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    job: JudgeJob,
    *,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
) -> ScoredDatasetDict:
    """:func:`score_job` with the vLLM judges it names started one at a time (engine/vllm_turns.py): a cascade's in
    the pass of their tier (:func:`_cascade` runs each tier through here), a panel's each in its turn, one judge's
    around the run."""
    settings = job.settings
    for model in _managed_models(settings):  # each refused before any judge starts (a tier's after minutes)
        check_vllm_model(model)
    if settings.escalate_model is not None:
        return score_job(ds, job, progress=progress, if_exists=if_exists)
    say = _say if progress is not False else None
    # whether a judge has nothing to send is worth counting only where replies may be stored: not on a first run
    # (rendering every prompt of a large dataset first), nor on a stream (read twice)
    counted = not isinstance(ds, (IterableDataset, IterableDatasetDict)) and (
        job.remote is not None or (job.store_path is not None and job.store_path.exists())
    )
    if managed_judges(settings):
        turns: list[Any] = []

        def to_send(one: Settings) -> int:  # what a judge's turn would send, its server not yet started
            return (
                estimate_job(ds, _with(job, one), if_exists="overwrite", tokenizer="chars").requests if counted else 1
            )

        # a turn fills the reply store; its counters are the run's
        def alone(one: Settings, name: str, judge: Any) -> None:
            turn = score_job(ds, _with(job, one), progress=progress, if_exists="overwrite").summary
            if turn is not None:  # and the judge's, as a panel counts each of its judges
                answered = max(0, turn.requests - sum(turn.failed_attempts.values()))
                figures: dict[str, Any] = {"requests": turn.requests, "answered": answered}
                figures |= {"prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens}
                turn.engine = engine_record(judge)  # its engine's seconds: the run's and its judge's
                if turn.engine is not None:
                    figures |= {"served_s": turn.engine["served_s"], "gpu_s": gpu_seconds(turn.engine)}
                turn.judge_requests = {name: figures}
                turns.append(turn)

        with judges_in_turn(settings, alone, to_send, say) as panel:
            scored = score_job(ds, _with(job, panel), progress=progress, if_exists=if_exists)
        for turn in turns:
            if scored.summary is not None:
                add_summary(scored.summary, turn)
        return scored

    def to_send_alone(one: Settings) -> int:  # what this judge would send, its server not yet started
        if not counted:
            return 1
        return estimate_job(ds, dataclasses.replace(job, settings=one), if_exists=if_exists, tokenizer="chars").requests

    with vllm_served(settings, to_send_alone, say) as (settings, judge):
        if settings is not job.settings:
            job = dataclasses.replace(job, settings=settings)
        scored = score_job(ds, job, progress=progress, if_exists=if_exists)
        if judge is not None and scored.summary is not None:
            scored.summary.engine = engine_record(judge)
        return scored


def _managed_models(settings: Settings) -> list[str]:
    """The MODEL of each ``vllm:MODEL`` judge of the run that hf-judge starts (its own, a panel's, a tier's)."""
    models = [j.model for j in managed_judges(settings)]
    if not settings.models and settings.model and not settings.base_url:
        models.append(settings.model)
    if settings.escalate_model and not settings.escalate_base_url:
        models.append(settings.escalate_model)
    return [name for m in models if (name := parse_vllm_model(m)) is not None]


def _say(line: str) -> None:
    """A vLLM judge's start and stop, beside the progress bars (its load takes minutes)."""
    print(f"hf-judge: {line}", file=sys.stderr, flush=True)


def _with(job: JudgeJob, settings: Settings) -> JudgeJob:
    """``job`` with other settings (its layout follows them: one judge, or a panel)."""
    return dataclasses.replace(job, settings=settings).with_settings()


def score_job(
    ds: Dataset | DatasetDict | IterableDataset | IterableDatasetDict,
    job: JudgeJob,
    *,
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
    sink: ResultSink | None = None,
) -> ScoredDatasetDict:
    """:func:`score_dataset` of a job resolved already (the engines' and the CLI's entry). ``sink``: where the
    result goes as well (a Dataset's run: started before the first request, failed if the run fails; see
    :func:`~.driver.through`).

    Example:
        >>> scored = score_job(ds, JudgeJob.resolve(["QA_All"], model="m"), progress=False)  # doctest: +SKIP
    """
    install_log_filter()
    stream = isinstance(ds, (IterableDataset, IterableDatasetDict))
    if sink is not None and stream:
        raise ValueError("a stream's result is written as it is read: save_to_disk or push_to_hub it")
    if job.settings.escalate_model is not None:  # a cascade: this function once per tier (engine/cascade.py)
        return through(sink, lambda: _cascade(ds, job, progress, if_exists))
    run = Run(job, engine_for(job.settings, ds), progress=progress, sink=sink)
    if not stream:
        return run.score(ds, if_exists)
    run.prepare(ds, if_exists)
    features = {
        s: _stream_features(d, run.plans[s], job.token_columns, job.layout, job.settings.logprobs)
        for s, d in run.splits.items()
    }
    streams = Streams(run, features)
    return ScoredIterableDatasetDict._of(streams)  # type: ignore[return-value,unused-ignore]


def _cascade(ds: Any, job: JudgeJob, progress: bool | ProgressCallback, if_exists: str) -> ScoredDatasetDict:
    """A cascade's result (engine/cascade.py): :func:`score_job` once per tier. A budget stop keeps no result: one
    tier's is not the cascade's, and its replies are in the store for the rerun."""
    try:
        return score_cascade(ds, job, _served, progress=progress, if_exists=if_exists)
    except BudgetExceededError as e:
        e.result = None
        raise


def engine_for(settings: Settings, ds: object) -> Named:
    """The engine :func:`score_dataset` runs a job on (its name is its row of :mod:`hf_judge.engine.capabilities`):
    batch mode, a stream, workers, or one process (a job that asks for two is checked against the first).

    Example:
        >>> engine_for(Settings(model="m", num_workers=4), None).name
        'workers'
    """
    if settings.batch or settings.batch_import:
        return BatchMode()
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        return StreamReadings()
    return Workers() if settings.num_workers > 1 else OneProcess()


_IF_EXISTS = ("keep", "overwrite", "error")


def _stream_features(
    d: IterableDataset, plans: list[Plan], token_columns: bool, layout: Layout, with_logprobs: bool = False
) -> Features:
    """A streamed split's output features: its own, then the score columns (those of a Dataset's run)."""
    scores = score_features([p.metric for p in plans], layout, with_logprobs, token_columns and bool(plans))
    return Features({**(d.features or {}), **scores})


if score_dataset.__doc__:  # None under python -OO
    score_dataset.__doc__ = score_dataset.__doc__.format(settings=settings_doc())
