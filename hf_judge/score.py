"""``score_dataset``: the main entry point."""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import functools
import hashlib
import json
import logging
import os
import shutil
import socket
import sys
import threading
import time
import traceback
import uuid
import weakref
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, IterableDataset, IterableDatasetDict, Value, concatenate_datasets

from . import constants, logprobs
from .client import JudgeClient, Stats, has_credentials, judge_panel
from .ensemble import Layout
from .errors import ConfigError, DiskFullError, InterruptedRun, RunStopped, TemplateError
from .images import ImageValueError, image_urls, image_variables, saveable
from .metrics import resolve_metrics
from .pages import file_paths, release
from .pipeline import (
    TOKEN_COLUMNS,
    LoopThread,
    Plan,
    SplitRun,
    read_batches,
    score_features,
    score_types,
    sparse_gc,
)
from .progress import ProgressBar, ProgressCallback, datasets_bars_off
from .redact import install_log_filter, register
from .settings import Settings, check_base_url, public_fields, resolve_settings
from .store import ReplyStore, free_space, human_bytes, is_disk_full
from .summary import SUMMARY_FILE, RunSummary

logger = logging.getLogger("hf_judge")

ERRORS_SPLIT = "errors"
ERROR_FEATURES = Features(
    {
        "split": Value("string"),
        "row": Value("int64"),
        "metric": Value("string"),
        "kind": Value("string"),
        "message": Value("string"),
        "raw": Value("string"),
        "attempts": Value("int64"),
    }
)


class ScoredDatasetDict(DatasetDict):
    """A ``DatasetDict`` of the scored splits plus ``errors``, with the run's ``summary``.

    Example:
        >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> print(scored.summary)  # doctest: +SKIP
    """

    summary: RunSummary | None = None

    def save_to_disk(
        self, dataset_dict_path, max_shard_size=None, num_shards=None, num_proc=None, storage_options=None
    ):
        """``DatasetDict.save_to_disk``, plus the run's ``summary.json`` beside the splits.

        ``hf-judge filter`` and a later push read it back, so the card of a
        result saved here still tells how its scores were made.
        """
        shards = {**shards_for(self), **(num_shards or {})}
        for split, d in self.items():
            # one DatasetDict per split keeps datasets' own layout; the empty errors split draws no `0 examples` bar
            with datasets_bars_off() if len(d) == 0 else nullcontext():
                # a path-only image whose file is gone would fail datasets' embedding of it (see images.saveable)
                DatasetDict({split: saveable(d)}).save_to_disk(
                    dataset_dict_path,
                    max_shard_size=max_shard_size,
                    num_shards={split: shards.get(split)},
                    num_proc=num_proc,
                    storage_options=storage_options,
                )
        from fsspec.core import url_to_fs

        fs, root = url_to_fs(os.fspath(dataset_dict_path), **(storage_options or {}))
        with fs.open(f"{root}/dataset_dict.json", "w", encoding="utf-8") as f:
            json.dump({"splits": list(self)}, f)
        summary = getattr(self, "summary", None)
        if summary is not None:
            with fs.open(f"{root}/{SUMMARY_FILE}", "w", encoding="utf-8") as f:
                json.dump(summary.to_dict(), f, indent=1, default=str)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | None = None,
        revision: str | None = None,
        **kwargs,
    ) -> str:
        """Push as :func:`hf_judge.push_scored` does: the scored splits in the default config,
        ``errors`` in a config of its own (always present, empty when nothing failed), and the card.

        A plain ``DatasetDict.push_to_hub`` cannot: all splits of one config must share features.
        Other keyword arguments (``max_shard_size``, ``commit_message``, ...) go to the data's push.

        Example:
            >>> good = filter_by_scores(scored, min={"QA_Correctness": 8})  # doctest: +SKIP
            >>> good.push_to_hub("me/gsm8k-judged")  # doctest: +SKIP
        """
        from .hub import push_scored

        return push_scored(
            self, repo_id, private=private, token=token, revision=revision, summary=self.summary, **kwargs
        )


def shards_for(dd: DatasetDict) -> dict[str, int | None]:
    """``num_shards`` for ``save_to_disk``: one shard for an empty split, which
    datasets would otherwise write without a data file and then fail to load."""
    return {k: (1 if len(v) == 0 else None) for k, v in dd.items()}


def _as_splits(ds: Dataset | DatasetDict) -> tuple[dict[str, Dataset], Dataset | None]:
    """The splits to score, and the ``errors`` split of an earlier run (a scored input), if any."""
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        from .stream import stream_splits

        return stream_splits(ds)  # type: ignore[return-value,unused-ignore]  # a stream split stands for a Dataset
    if isinstance(ds, Dataset):
        return {"train": ds}, None
    if isinstance(ds, DatasetDict):
        splits = dict(ds)
        earlier = splits.pop(ERRORS_SPLIT, None)
        if earlier is not None and set(earlier.column_names) != set(ERROR_FEATURES):
            raise ConfigError(
                f"the input has a split named {ERRORS_SPLIT!r} that is not an hf_judge errors split "
                f"(columns {earlier.column_names}); hf_judge writes its own: rename that split"
            )
        return splits, earlier
    raise ConfigError(
        f"score_dataset takes a datasets.Dataset, DatasetDict, IterableDataset or IterableDatasetDict, "
        f"got {type(ds).__name__}. "
        "Load files with datasets.load_dataset('json', data_files=...) first."
    )


def _fingerprint(
    ds: Dataset,
    split: str,
    plans: list[Plan],
    client: JudgeClient,
    max_input_chars: int | None,
    token_columns: bool,
    layout: Layout | None = None,
    judges: list[JudgeClient] | None = None,
) -> str:
    state = {
        "v": constants.CACHE_VERSION,
        # private, but datasets (5.2) has no public getter, and the fingerprint is what names the data's state
        "data": ds._fingerprint,
        "split": split,
        "metrics": [
            # images only where there are some: text-only fingerprints stay what they were, and
            # results of runs from before images were sent as images are not reused
            [p.metric.name, p.metric.prompt_hash, p.metric.json_schema, p.metric.columns, p.columns, p.temperature]
            + ([sorted(p.images)] if p.images else [])
            for p in plans
        ],
        "model": client.model,
        "base_url": client.server_id,
        "top_p": client.top_p,
        "max_tokens": client.max_tokens,
        "max_input_chars": max_input_chars,
        "token_columns": token_columns,
    }
    ensemble = layout.fingerprint() if layout is not None else None
    if ensemble is not None:  # only then: the fingerprints of one-reply runs stay what they were
        state["ensemble"] = {**ensemble, "servers": [[j.model, j.server_id] for j in judges or [client]]}
    if client.settings.logprobs:  # only then: the fingerprints of runs without it stay what they were
        state["logprobs"] = client.settings.top_logprobs
    if client.settings.reuse == "strict":  # only then: the default run's fingerprint stays what it was
        state["reuse"] = "strict"
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _preflight(split: str, ds: Dataset, plans: list[Plan]) -> None:
    """Render every metric on the split's first row, so template errors surface before any request."""
    needed = sorted({c for p in plans for c in p.columns.values() if c})
    if isinstance(ds, IterableDataset):  # a stream: its first row, read now (nothing more)
        from .stream import first_row

        row = first_row(ds, needed) if plans else None
        if row is None:
            return
        first = row
    elif len(ds) == 0:
        return
    else:
        raw_images = any(p.images for p in plans)
        first = (
            {c: v[0] for c, v in next(read_batches(ds.select_columns(needed), 1, raw_images)).items()} if needed else {}
        )
    from .render import format_value

    for p in plans:
        values = {v: format_value(first[c]) if c and v not in p.images else None for v, c in p.columns.items()}
        values = {k: ("" if v is None and k not in p.metric.optional else v) for k, v in values.items()}
        for var in p.images:
            col = p.columns[var]
            if not col:  # an optional image variable left unmapped: sent as nothing, like a text one
                continue
            try:
                values[var] = image_urls(first[col]) if first[col] is not None else None
            except ImageValueError as e:
                if isinstance(first[col], str):  # a text column that does not hold URLs
                    raise ConfigError(
                        f"metric {p.metric.name} sends {var!r} as an image, but column {col!r} holds text: "
                        f"row 0 of split {split!r}: {e}. "
                        f"Map {var!r} to a datasets.Image column or a column of http(s) URLs."
                    ) from None
                values[var] = ["data:,"]  # a bad image is that row's error, found when it is sent
        try:
            p.metric.messages(values, p.images)
        except TemplateError as e:
            raise TemplateError(f"{e} (split {split!r}, row 0)") from None


preflight = _preflight  # the public name (hf_judge.transform)


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
    **setting_values: Any,
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
    run resumes where it stopped when called again.

    An ``IterableDataset`` or ``IterableDatasetDict`` (``load_dataset(...,
    streaming=True)``) is scored as it is read: the result is a
    :class:`~hf_judge.stream.ScoredIterableDatasetDict` whose splits score
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
    settings = _settings(settings, setting_values)
    _check_batch(settings, ds, use_cache)
    layout = Layout.from_settings(settings)
    _check_workers(settings, ds)
    splits, earlier_errors = _as_splits(ds)
    loaded = resolve_metrics(metrics, prompts_dir, metric_params)
    plans_by_split, kept, renamed = _build_plans(
        splits, loaded, columns, settings.temperature, if_exists, token_columns, layout
    )
    check_samples(settings, plans_by_split)
    api_key = _api_key(settings, api_key, needed=any(plans_by_split.values()) and not settings.batch_import)
    specs = judge_specs(settings, api_key)
    clients = judge_panel(specs)
    client = clients[0]
    for c in clients:
        c.caching = use_cache
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else constants.default_cache_dir()
    if use_cache and not (settings.batch or settings.batch_import) and any(plans_by_split.values()):
        _warn_batches_in_flight(cache_root / "replies.sqlite3", client)
    summary = _new_summary(settings, client, loaded, splits, kept, renamed, layout, clients)
    summary.column_mapping = _column_mapping(loaded, columns, splits)
    ctx = _SplitContext(
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
    )
    errors: list[dict] = _earlier_errors(earlier_errors, splits, plans_by_split)
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        from .stream import ScoredIterableDatasetDict, _Streams

        features = {
            s: _stream_features(d, plans_by_split[s], token_columns, layout, settings.logprobs)
            for s, d in splits.items()
        }
        store_path = cache_root / "replies.sqlite3" if use_cache else None
        streams = _Streams(ctx, splits, plans_by_split, features, errors, store_path)  # type: ignore[arg-type,unused-ignore]
        return ScoredIterableDatasetDict._of(streams)  # type: ignore[return-value,unused-ignore]
    started = time.perf_counter()
    results: dict[str, Dataset] = {}
    try:
        with sparse_gc(), _RunResources(clients, cache_root / "replies.sqlite3" if use_cache else None) as res:
            ctx.resources = res
            if settings.batch or settings.batch_import:
                _run_batches(ctx, splits, plans_by_split, api_key)
            for split, d in splits.items():
                results[split] = _score_split(ctx, split, d, plans_by_split[split], errors)
                summary.rows[split] = len(d)
    except KeyboardInterrupt:
        raise _interrupted(ctx, settings) from None
    except RunStopped as e:
        logger.debug("run stopped: %s", e)  # the exception carries the message; say it once
        raise
    finally:
        _fill_summary(summary, clients, errors, started)
    if layout.panel:
        summary.agreement = panel_agreement(layout, results, plans_by_split)

    out = ScoredDatasetDict(results)
    out[ERRORS_SPLIT] = (
        Dataset.from_list(errors, features=ERROR_FEATURES)
        if errors
        else Dataset.from_dict({k: [] for k in ERROR_FEATURES}, features=ERROR_FEATURES)
    )
    out.summary = summary
    logger.info("hf_judge run summary\n%s", summary)
    return out


def _check_workers(settings: Settings, ds: object) -> None:
    """``num_workers`` > 1 shards a Dataset on disk; a stream is a ConfigError, before any work."""
    if settings.num_workers > 1 and isinstance(ds, (IterableDataset, IterableDatasetDict)):
        raise ConfigError(
            "num_workers (--workers) shards a Dataset on local disk; a stream (streaming=True, --streaming) is "
            "scored by one process: leave num_workers at 1, or load the dataset without streaming to use workers"
        )


def _interrupted(ctx: _SplitContext, settings: Settings) -> InterruptedRun:
    """What a Ctrl-C kept: the replies in the cache (and the batches submitted), or nothing without a cache."""
    if not ctx.use_cache:
        return InterruptedRun(
            "interrupted. The cache is off (use_cache=False, --no-cache): nothing of this run was kept."
        )
    batches = (
        " The batches submitted are recorded there too: the next run collects them, submitting nothing twice."
        if settings.batch
        else ""
    )
    saved = (
        "The replies the workers received are saved"  # in the workers' stores: this process wrote none
        if settings.num_workers > 1
        else f"{ctx.resources.written if ctx.resources else 0:,} replies of this run are saved"
    )
    return InterruptedRun(
        f"interrupted. {saved} in the cache; run the same command again to resume where it stopped.{batches}"
    )


def _warn_batches_in_flight(store_path: Path, client: JudgeClient) -> None:
    """An online run does not collect batches: requests in them that it needs are sent and paid for again."""
    from .batch import in_flight, server_tag

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


def _check_batch(settings: Settings, ds: Any, use_cache: bool) -> None:
    """Batch mode's conditions, before anything is read or sent."""
    if settings.no_wait and not settings.batch:
        raise ConfigError("no_wait (--no-wait) submits batches and stops: it needs batch=True (--batch)")
    if not (settings.batch or settings.batch_import):
        return
    if settings.models and settings.batch_import:
        raise ConfigError(
            "batch import reads one runner's output, for one model, and a panel has several (models=): import each "
            "judge's output with its own --model (and --base-url), then score the panel (--models) with the same "
            "--cache-dir: every reply is in the cache, so nothing is sent"
        )
    if not use_cache:
        raise ConfigError(
            "batch mode keeps its batches and their replies in the reply cache: drop use_cache=False (--no-cache)"
        )
    if isinstance(ds, (IterableDataset, IterableDatasetDict)) or settings.num_workers > 1:
        raise ConfigError(
            "batch mode scores a whole Dataset in one process: drop streaming=True / num_workers (--workers), or "
            "score without --batch"
        )


def _run_batches(
    ctx: _SplitContext, splits: dict[str, Dataset], plans_by_split: dict[str, list[Plan]], api_key: str | None
) -> None:
    """Batch mode: fill the reply store through the provider's batch API (batch.py) before the splits are
    built from it, one batch (or more) per judge of a panel, each at its judge's server with its model and key;
    what it could not score ends as the batch book says (``batch_fallback='online'``: sent online)."""
    from .batch import BatchReport, BatchRunner, run_all
    from .progress import bars_wanted

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
        ctx.unsent = runners[0].book.failure  # the book's requests are every judge's: one lookup by key
    if settings.batch_import:
        runner = runners[0]  # one judge: a panel's import is refused (_check_batch)
        try:
            runner.read_output(Path(settings.batch_import))
        finally:
            ctx.summary.batch = {**runner.report.to_dict(), "imported": Path(settings.batch_import).name}
        return
    todo: list[list[Callable[[], Any]]] = [[] for _ in judges]
    todo_splits: dict[str, Dataset] = {}
    for split, d in splits.items():
        plans = plans_by_split[split]
        fp = _fingerprint(d, split, plans, ctx.client, ctx.max_input_chars, ctx.token_columns, ctx.layout, ctx.judges)
        if plans and not (ctx.cache_root / "results" / f"{fp}.arrow").exists():
            for i, (_, c, _, layout) in enumerate(judges):
                todo[i].append(functools.partial(_requests, split, d, plans, c, layout, res.store))
            todo_splits[split] = d
    budget = _batch_budget(ctx, todo_splits, plans_by_split, list(metrics.values()), judges)
    try:
        run_all(runners, todo, settings.no_wait, budget)
    finally:
        ctx.summary.batch = BatchReport.total(r.report for r in runners).to_dict()


def _batch_judges(ctx: _SplitContext, api_key: str | None) -> list[tuple[str, JudgeClient, str | None, Layout]]:
    """(name, client, key, layout of its requests) per judge whose batches the run sends. A panel's judge renders
    its own requests alone (its samples, without the other judges): a batch holds one model's requests."""
    if not ctx.layout.panel:
        return [("", ctx.client, api_key, ctx.layout)]
    alone = dataclasses.replace(ctx.layout, judges=())
    keys = [_judge_key(judge, ctx.client.settings, api_key) for judge in ctx.client.settings.judges]
    return list(zip(ctx.layout.judges, ctx.judges, keys, [alone] * len(keys), strict=True))


def _batch_budget(
    ctx: _SplitContext,
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
    from .estimate import check_batch_budget, project

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


def _requests(
    split: str,
    d: Dataset,
    plans: list[Plan],
    client: JudgeClient,
    layout: Layout | None = None,
    store: ReplyStore | None = None,
):
    # large read batches: nothing waits on the renderer here, unlike in the online feeder.
    # K samples are K lines with the same body (their keys differ): a batch asks for no `n`.
    # The store: replies cached under an older key (compatible reuse) are left out of the batches.
    return SplitRun(split, d, plans, client, store, window=1024, read_batch=1024, layout=layout).requests()


def _settings_doc() -> str:
    """The keyword arguments' list in the docstring, from the fields of :class:`Settings`."""
    import textwrap

    lines = []
    for name, f in public_fields().items():
        default = " (required)" if f.is_required() else "" if f.default is None else f" (default {f.default!r})"
        item = f"* ``{name}``{default}: {f.description}"
        lines.append(textwrap.fill(item, 100, subsequent_indent="  ", break_on_hyphens=False))
    return textwrap.indent("\n".join(lines), "    ").lstrip()


if score_dataset.__doc__:  # None under python -OO
    score_dataset.__doc__ = score_dataset.__doc__.format(settings=_settings_doc())


def _settings(settings: Settings | None, values: dict[str, Any]) -> Settings:
    """``settings`` overridden by the keyword arguments, which must name public settings."""
    unknown = sorted(set(values) - set(public_fields()))
    if unknown:
        internal = [k for k in unknown if k in Settings.model_fields]
        how = f"; set {', '.join(internal)} through settings=Settings(...)" if internal else ""
        close = [(k, difflib.get_close_matches(k, list(public_fields()), n=1)) for k in unknown]
        how += "".join(f"; did you mean {m[0]!r} for {k!r}?" for k, m in close if m and k not in internal)
        raise TypeError(
            f"score_dataset() got unexpected keyword argument(s) {', '.join(unknown)}{how}. "
            f"Its settings are: {', '.join(public_fields())}"
        )
    return resolve_settings(settings, values)


settings_from = _settings  # the public name (hf_judge.transform)


def _build_plans(
    splits: dict[str, Dataset],
    loaded: list,
    columns: dict[str, str] | None,
    temperature: float | None,
    if_exists: str,
    token_columns: bool,
    layout: Layout | None = None,
) -> tuple[dict[str, list[Plan]], dict[str, list[str]], dict[str, dict[str, str]]]:
    """Per split, the metrics to score and how each reads its variables (checked on the first row), the
    names of the metrics whose columns are kept, and the columns renamed to make room for a single metric
    (see _free_single_metric_columns). Drops the columns ``if_exists='overwrite'`` replaces."""
    columns = dict(columns or {})
    for var, col in columns.items():
        if not isinstance(var, str) or not isinstance(col, str):
            raise ConfigError(f"columns maps template variables to column names (strings), got {var!r}: {col!r}")
    plans_by_split: dict[str, list[Plan]] = {}
    kept: dict[str, list[str]] = {}
    renamed: dict[str, dict[str, str]] = {}
    for split in list(splits):
        renamed[split] = _free_single_metric_columns(splits[split], loaded)
        if renamed[split]:
            splits[split] = splits[split].rename_columns(renamed[split])
        todo, kept[split], drop = _existing_columns(
            split, splits[split], loaded, if_exists, token_columns, layout or Layout()
        )
        if drop:
            splits[split] = splits[split].remove_columns(drop)
        d = splits[split]
        plans = [
            Plan(m, m.resolve_columns(columns, d.column_names), m.temperature if temperature is None else temperature)
            for m in todo
        ]
        for p in plans:
            p.images = image_variables(p.metric, p.columns, d.features)
        used = {v for m in loaded for v in (*m.variables, *m.optional)}
        unused = sorted(set(columns) - used)
        if unused:
            logger.warning(
                "columns maps %s, which no chosen metric uses (they use: %s)", unused, ", ".join(sorted(used))
            )
        _preflight(split, d, plans)
        plans_by_split[split] = plans
    return plans_by_split, kept, renamed


def check_samples(settings: Settings, plans_by_split: dict[str, list[Plan]]) -> None:
    """K samples at temperature 0 are the same reply K times, each paid for: refuse them."""
    if settings.samples == 1:
        return
    cold = sorted({p.metric.name for plans in plans_by_split.values() for p in plans if p.temperature == 0})
    if cold:
        raise ConfigError(
            f"samples={settings.samples} at temperature 0 ({', '.join(cold)}): the {settings.samples} replies would "
            "be the same reply paid for each time. Sample at a temperature above 0: temperature=0.7 (--temperature 0.7)"
        )


def _judge_clients(settings: Settings, api_key: str | None) -> list[JudgeClient]:
    """One client per judge (one for a run without a panel): its model, its server, its key."""
    return judge_panel(judge_specs(settings, api_key))


def judge_specs(settings: Settings, api_key: str | None) -> list[tuple[Settings, str | None]]:
    """Each judge's settings and key, resolved here (picklable: what a worker process or a Ray actor builds
    the panel's clients from, with :func:`hf_judge.client.judge_panel`)."""
    if not settings.models:
        return [(settings, api_key)]
    specs: list[tuple[Settings, str | None]] = []
    for judge in settings.judges:
        own = settings.model_copy(update={"model": judge.model, "base_url": judge.base_url or settings.base_url})
        specs.append((own, _judge_key(judge, settings, api_key)))
    return specs


def _judge_key(judge: Any, settings: Settings, api_key: str | None) -> str | None:
    """A panel judge's key: its own (``api_key: env:VAR``), else the run's, unless its URL carries credentials."""
    from .recipes import resolve_secret

    key = resolve_secret(judge.api_key, f"the api_key of judge {judge.column_name!r}")
    register(key)
    base = judge.base_url or settings.base_url or constants.default_base_url()
    if key is None and not has_credentials(base):
        key = api_key
    return key


def panel_agreement(layout: Layout, results: dict[str, Dataset], plans_by_split: dict[str, list[Plan]]) -> dict:
    """Judge-vs-judge agreement of a panel, per split and metric (see ensemble.Layout.agreement)."""
    out: dict[str, Any] = {}
    for split, plans in plans_by_split.items():
        if split in results and plans:
            table = results[split].data.table
            out[split] = {p.metric.name: layout.agreement(p.metric, table) for p in plans}
    return out


def _api_key(settings: Settings, api_key: str | None, needed: bool) -> str | None:
    """The key to send: given, else ``OPENAI_API_KEY``, unless the base URL carries its own credentials.
    In a panel, the key of every judge that names none of its own (``api_key: env:VAR``)."""
    base = settings.base_url or check_base_url(constants.default_base_url())
    bases = [j.base_url or base for j in settings.judges if not j.api_key] if settings.models else [base]
    if api_key is None and any(not has_credentials(b) for b in bases):  # user:password@ is a URL's own auth
        api_key = constants.default_api_key()
    for base in bases:
        if needed and not api_key and not has_credentials(base) and urlparse(base).hostname == "api.openai.com":
            raise ConfigError(
                f"no API key for {base}: set OPENAI_API_KEY (library: api_key=; CLI: --api-key-env NAME), "
                "or point base_url (--base-url) at your own server"
            )
    register(api_key)
    return api_key


resolve_api_key = _api_key  # the public name (hf_judge.transform)


def _new_summary(
    settings: Settings,
    client: JudgeClient,
    loaded: list,
    splits: dict[str, Dataset],
    kept: dict[str, list[str]],
    renamed: dict[str, dict[str, str]],
    layout: Layout | None = None,
    clients: list[JudgeClient] | None = None,
) -> RunSummary:
    layout = layout or Layout()
    sampling: dict[str, Any] = {
        "temperature": settings.temperature
        if settings.temperature is not None
        else {m.name: m.temperature for m in loaded},
        "top_p": settings.top_p,
        "max_tokens": settings.max_tokens,
    }
    if settings.logprobs:  # only when on: the summaries and cards of runs without logprobs stay as they were
        sampling["top_logprobs"] = settings.top_logprobs
    if layout.samples > 1:
        sampling.update(samples=layout.samples, min_samples=layout.min_samples)
    if layout.panel:
        sampling["aggregator"] = str(layout.aggregator)
        sampling["judges"] = [
            {"name": name, "model": c.model, "base_url_host": _host(c)}
            for name, c in zip(layout.judges, clients or [], strict=True)
        ]
    summary = RunSummary(
        model=settings.model,
        base_url_host=_host(client),
        metrics={m.name: m.prompt_hash for m in loaded},
        columns=list(score_types(loaded, layout, settings.logprobs)),
        sampling=sampling,
        source_dataset=_source_name(splits),
        prompts={m.name: _prompt_record(m) for m in loaded},
    )
    summary.notes += [
        f"kept the existing columns of {', '.join(names)} in {split} (not scored again; if_exists='overwrite', "
        "CLI --overwrite-scores, scores them again)"
        for split, names in kept.items()
        if names
    ]
    summary.notes += [
        f"renamed {', '.join(f'{a} to {b}' for a, b in names.items())} in {split}: the score an All metric wrote, "
        "beside the single metric's own columns"
        for split, names in renamed.items()
        if names
    ]
    return summary


def _host(client: JudgeClient) -> str:
    return urlparse(client.base_url).netloc.rpartition("@")[2]  # never user:password@


class _RunResources(ExitStack):
    """What a run holds while it sends requests: the reply store, the event loop thread and the client's
    session. Opened when the first split needs them; closed once, each best effort, however the run ends:
    the split in flight cancelled, the session closed, the loop stopped, then the store flushed and closed."""

    def __init__(self, clients: list[JudgeClient], store_path: Path | None):
        self.clients = clients
        self.store_path = store_path
        self.store: ReplyStore | None = None
        self.loop: LoopThread | None = None
        self.active: SplitRun | None = None  # the split being scored, cancelled if the run stops
        super().__init__()

    @property
    def written(self) -> int:
        return self.store.written if self.store is not None else 0

    def open(self) -> None:
        if self.loop is not None:
            return
        if self.store_path is not None:
            self.store = ReplyStore(self.store_path)
            self.callback(self._close_store, self.store)
        self.loop = loop = LoopThread()
        self.callback(loop.stop)
        for client in self.clients:
            self.callback(self._quietly, functools.partial(self._close_client, loop, client))
        self.callback(self._quietly, self._cancel_active)
        for client in self.clients:
            loop.run(client.open())

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
class _SplitContext:
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
    resources: _RunResources | None = None
    unsent: Callable[[bytes], Any] | None = None  # batch mode: how a request the store lacks ends (batch.py)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    run_started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


def _score_split(ctx: _SplitContext, split: str, d: Dataset, plans: list[Plan], errors: list[dict]) -> Dataset:
    """One split, scored: its columns kept as they are, its result reused from the cache, or a fresh run
    (which saves a finished result to the cache and keeps a result with errors out of it)."""
    summary = ctx.summary
    # `_indices`: datasets has no public test for an indices mapping (select, shuffle), and
    # flatten_indices() rewrites the whole table even when there is none
    base = d.flatten_indices() if d._indices is not None else d
    if not plans:  # every metric's columns were kept
        return base
    fp = _fingerprint(d, split, plans, ctx.client, ctx.max_input_chars, ctx.token_columns, ctx.layout, ctx.judges)
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
            summary.add_runs(_read_runs(cache_file))
            return concatenate_datasets([base, saved], axis=1)
    fresh = _workers_run if ctx.client.settings.num_workers > 1 and len(d) > 1 else _fresh_run
    scores = fresh(ctx, split, d, plans, fp, features, cache_file, errors)
    return concatenate_datasets([base, scores], axis=1)


def _workers_run(
    ctx: _SplitContext,
    split: str,
    d: Dataset,
    plans: list[Plan],
    fp: str,
    features: Features,
    cache_file: Path,
    errors: list[dict],
) -> Dataset:
    """:func:`_fresh_run` by ``num_workers`` processes over contiguous shards (see :mod:`hf_judge.workers`)."""
    import tempfile

    from .workers import ShardJob, concat_arrow, score_split, shard_bounds

    client = ctx.client
    if ctx.use_cache:
        folder = cache_file.with_name(f"{fp}.run-{_RUN_DIR_OWNER}-{uuid.uuid4().hex[:8]}")
        folder.mkdir(parents=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="hf_judge-workers-"))
    jobs = [
        ShardJob(
            index=i,
            start=a,
            stop=b,
            split=split,
            data=d.select(range(a, b)),
            plans=plans,
            settings=client.settings,
            api_key=ctx.api_key,
            judges=ctx.judge_specs,
            layout=ctx.layout,
            store_path=ctx.cache_root / "replies.sqlite3" if ctx.use_cache else None,
            features=features,
            out=folder / f"{fp}-{i}.arrow",
            window=ctx.window,
            max_input_chars=ctx.max_input_chars,
            token_columns=ctx.token_columns,
        )
        for i, (a, b) in enumerate(shard_bounds(len(d), client.settings.num_workers))
    ]
    progress = ctx.progress
    bar = ProgressBar(split, len(d)) if progress is True else None
    on_progress = progress if callable(progress) else bar if bar is not None and not bar.disabled else None
    judges = ctx.judges or [client]
    current = (split, cache_file if ctx.use_cache else None, _counters(judges), time.perf_counter())

    def checkpoint() -> None:  # as _Checkpoints does for one process: a kill -9 keeps the counters so far
        _write_runs(cache_file, ctx.run_id, _run_entry(ctx.summary, current, judges, ctx.run_id, ctx.run_started))

    try:
        stats = [j.stats for j in judges]
        paths, shard_errors = score_split(jobs, stats, on_progress, checkpoint if ctx.use_cache else None)
        errors.extend(shard_errors)
        if not ctx.use_cache:
            concat_arrow(paths, folder / "scores.arrow")
            return Dataset.from_file(str(folder / "scores.arrow"), in_memory=True)
        # as _fresh_run: a result with errors stays out of the fingerprint cache, so the next run retries them
        done = cache_file.with_name(f"{fp}.partial-{uuid.uuid4().hex[:8]}.arrow") if shard_errors else cache_file
        concat_arrow(paths, done)
        scores = Dataset.from_file(str(done))
        if shard_errors:
            weakref.finalize(scores.data, _unlink, done)
        return scores
    finally:
        if bar is not None:
            bar.close()
        shutil.rmtree(folder, ignore_errors=True)
        _record_run(ctx.summary, current, judges, ctx.run_id, ctx.run_started)


def _fresh_run(
    ctx: _SplitContext,
    split: str,
    d: Dataset,
    plans: list[Plan],
    fp: str,
    features: Features,
    cache_file: Path,
    errors: list[dict],
) -> Dataset:
    """Send the split's requests through ``Dataset.map``; the scores, as a dataset of their own."""
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
    run_dir: Path | None = None
    if ctx.use_cache:
        # The map writes into a folder of its own, so that whatever it leaves
        # behind (a temporary file on a full disk) goes with the folder.
        run_dir = cache_file.with_name(f"{fp}.run-{_RUN_DIR_OWNER}-{uuid.uuid4().hex[:8]}")
        try:
            run_dir.mkdir(parents=True)
        except OSError as e:
            raise (_results_disk_full(cache_file.parent, e, None) if is_disk_full(e) else e) from None
        map_kwargs.update(cache_file_name=str(run_dir / cache_file.name))
    else:
        map_kwargs.update(keep_in_memory=True)
    res = ctx.resources
    assert res is not None  # set by score_dataset before the first split
    res.open()
    loop = res.loop
    assert loop is not None  # open() started it
    client, progress = ctx.client, ctx.progress
    bar = ProgressBar(split, len(d)) if progress is True and len(d) else None
    on_progress = progress if callable(progress) else bar if bar is not None and not bar.disabled else None
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
    )
    current = (split, cache_file if ctx.use_cache else None, _counters(ctx.judges or [client]), time.perf_counter())
    judges = ctx.judges or [client]
    every = client.settings.history_every_s
    checkpoints = (
        _Checkpoints(loop, every, ctx.summary, current, judges, ctx.run_id, ctx.run_started) if ctx.use_cache else None
    )
    try:
        feeder = loop.submit(run.feed())
        try:
            with datasets_bars_off():  # the map's bar moves per batch; ours follows the replies
                scores = d.map(lambda _idx: run.consume(_idx), **map_kwargs)
            errors.extend(run.in_order(run.errors))
            if ctx.use_cache:
                # A result with errors is not a finished one: keep it out of the fingerprint
                # cache so that the next run retries exactly the failed (row, metric) pairs.
                partial = cache_file.with_name(f"{fp}.partial-{uuid.uuid4().hex[:8]}.arrow")
                done = partial if run.errors else cache_file
                assert run_dir is not None  # made above whenever the cache is on
                # One resident copy of the result at a time: the map's own mapping has read the whole file,
                # and the reopened one below reads it again (the peak RSS of a 1,000,000-row run went 1.26x->1.48x).
                release(file_paths(scores.cache_files))
                del scores
                os.replace(run_dir / cache_file.name, done)
                scores = Dataset.from_file(str(done))
                if run.errors:  # deleted once no dataset reads it, at the latest when the process ends
                    weakref.finalize(scores.data, _unlink, done)
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
        if checkpoints is not None:
            checkpoints.stop()
        # also when stopped mid-split: what it paid for counts when a later run resumes
        _record_run(ctx.summary, current, judges, ctx.run_id, ctx.run_started)
    return scores


_IF_EXISTS = ("keep", "overwrite", "error")


def _kind(feature: Any) -> str | None:
    dtype = getattr(feature, "dtype", None)
    if dtype is None:
        return None
    return "bool" if dtype == "bool" else "number" if dtype.startswith(("int", "uint", "float")) else dtype


def _column_mapping(loaded: list, columns: dict[str, str] | None, splits: dict[str, Any]) -> dict[str, str]:
    """Template variable -> the column judged as it, the identity mapping included, over every metric (an
    optional variable no split has a column for is left out): a summary and a card say what was judged as what.

    Example:
        >>> _column_mapping(resolve_metrics(["QA_Clarity"]), {"output": "answer"}, {})
        {'instruction': 'instruction', 'output': 'answer'}
    """
    columns = columns or {}
    present = {c for d in splits.values() for c in (d.column_names or ())}
    mapping = {v: columns.get(v, v) for m in loaded for v in m.variables}
    mapping.update({v: columns.get(v, v) for m in loaded for v in m.optional if columns.get(v, v) in present})
    return mapping


def _free_single_metric_columns(d: Dataset, loaded: list) -> dict[str, str]:
    """Columns of an earlier ``<Mode>_All`` run that a single metric asked for now needs: old -> new name.

    ``QA_All`` wrote ``QA_Clarity``; scoring ``QA_Clarity`` later needs that name for its own score. The All's
    score moves to ``QA_All_Clarity``, the name it gets when both run together (see metrics.resolve_metrics),
    so adding a single metric to a scored dataset keeps every score. Only when the dataset holds every column
    of the All metric and none of the single metric's other columns: anything else is a real conflict.
    """
    from .metrics import load_metric

    names = set(d.column_names)
    renames: dict[str, str] = {}
    for m in loaded:
        if m.mode is None or m.name.endswith("_All") or m.name not in names:
            continue
        others = [c for c in m.columns if c != m.name]
        if not others or any(c in names for c in others):
            continue
        try:
            all_columns = load_metric(f"{m.mode}_All").columns
        except ConfigError:
            continue
        target = f"{m.mode}_All_{m.name.removeprefix(m.mode + '_')}"
        if m.name in all_columns and names.issuperset(all_columns) and target not in names:
            renames[m.name] = target
    return renames


def _existing_columns(
    split: str, d: Dataset, loaded: list, if_exists: str, token_columns: bool, layout: Layout
) -> tuple[list, list[str], list[str]]:
    """(metrics to score, names of metrics kept, columns to drop first) for one split."""
    todo, kept, drop, conflicts = [], [], [], []
    for m in loaded:
        features = layout.features(m)
        present = [c for c in features if c in d.column_names]
        if not present:
            todo.append(m)
        elif if_exists == "overwrite":
            todo.append(m)
            # with them the probability-weighted columns of the scores replaced: never beside newer scores
            weighted = {*logprobs.columns(m), *layout.logprob_types(m)}
            drop += present + [c for c in d.column_names if c in weighted]
        elif if_exists == "error":
            conflicts.append(f"{m.name} ({', '.join(present)})")
        elif len(present) < len(features):
            missing = [c for c in features if c not in present]
            conflicts.append(f"{m.name} (has {', '.join(present)} but not {', '.join(missing)})")
        else:
            odd = [c for c in present if _kind(d.features[c]) != _kind(features[c])]
            if odd:
                conflicts.append(f"{m.name} ({odd[0]} is {d.features[odd[0]]}, {m.name} writes {features[odd[0]]})")
            else:
                kept.append(m.name)
    tokens = [c for c in TOKEN_COLUMNS if token_columns and c in d.column_names]
    if tokens and if_exists == "overwrite":
        drop += tokens
    elif tokens and todo:
        conflicts.append(f"token columns ({', '.join(tokens)}) that this run's token_columns would replace")
    if conflicts:
        raise ConfigError(
            f"split {split!r} already has columns of {'; '.join(conflicts)}. "
            "Score them again and replace those columns "
            "with --overwrite-scores (library: if_exists='overwrite')"
        )
    return todo, kept, drop


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
        _unlink(p)  # a dataset of this process that still maps one keeps reading it (Linux)
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


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


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


def _source_name(splits: dict[str, Dataset]) -> str:
    """The dataset's name as ``datasets`` knows it (the CLI passes the exact Hub id instead)."""
    for d in splits.values():
        name = getattr(d.info, "dataset_name", None) or getattr(d.info, "builder_name", None)
        if name and name not in ("json", "csv", "parquet", "text", "arrow", "generator", "dataset"):
            return str(name)
    return ""


def _prompt_record(metric) -> dict[str, Any]:
    """The prompt file a metric was loaded from: name, full sha256 of its text, params, text (for the Hub),
    and the metric pack that ships it, if one does (name, version, entry point)."""
    return {
        "file": metric.path.name if metric.path is not None else f"{metric.name}.jinja",
        "sha256": hashlib.sha256(metric.text.encode()).hexdigest(),
        "params": metric.params,
        "text": metric.text,
        **({"pack": metric.pack} if metric.pack else {}),
    }


_COUNTERS = ("requests", "retries", "cache_hits", "prompt_tokens", "completion_tokens", "cached_tokens")
# every counter of a run that adds up across clients (a panel's judges, Ray's actors)
_RUN_COUNTERS = (*_COUNTERS, "shared", "capped_waits")


def _counters(clients: list[JudgeClient]) -> dict[str, int]:
    return {k: sum(getattr(c.stats, k) for c in clients) for k in _COUNTERS}


def total_stats(clients: list[JudgeClient]) -> Stats:
    """The stats of a run: its one client's, or those of a panel's judges added up."""
    if len(clients) == 1:
        return clients[0].stats
    total = Stats(structured_output=", ".join(dict.fromkeys(c.stats.structured_output for c in clients)))
    for c in clients:
        s = c.stats
        for k in _RUN_COUNTERS:
            setattr(total, k, getattr(total, k) + getattr(s, k))
        total.failures.update(s.failures)
        total.notes += [n for n in s.notes if n not in total.notes]  # judges on one server: said once
    return total


def _runs_file(cache_file: Path) -> Path:
    return cache_file.with_name(f"{cache_file.stem}.runs.json")


def _read_runs(cache_file: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(_runs_file(cache_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def _record_run(summary: RunSummary, current: tuple, clients: list[JudgeClient], run_id: str, started: str) -> None:
    """Add this run's share of one split to the summary, after the earlier runs that worked on the same
    result (an interrupted run, one whose failed rows this run retried); keep the list beside the results cache."""
    cache_file = current[1]
    entry = _run_entry(summary, current, clients, run_id, started)
    earlier = _read_runs(cache_file) if cache_file is not None else []
    summary.add_runs([*earlier, entry])
    if cache_file is not None:
        _write_runs(cache_file, run_id, entry)


def _run_entry(summary: RunSummary, current: tuple, clients: list[JudgeClient], run_id: str, started: str) -> dict:
    """This run's entry of the run history of one split: what its counters moved since the split began."""
    split, _, before, t0 = current
    now = _counters(clients)
    entry: dict[str, Any] = {"id": run_id, "started": started, "split": split}
    entry.update({k: now[k] - before[k] for k in _COUNTERS})
    entry["elapsed_s"] = round(time.perf_counter() - t0, 3)
    b = summary.batch
    if (b.get("prompt_tokens") or b.get("completion_tokens")) and all(r.get("id") != run_id for r in summary.runs):
        # batch mode collected its replies before any split began: their tokens go in this run's first entry
        for k in ("prompt_tokens", "completion_tokens"):
            entry[k] += b.get(k, 0)
            entry[f"batch_{k}"] = b.get(k, 0)
    return entry


def _write_runs(cache_file: Path, run_id: str, entry: dict) -> None:
    """Put ``entry`` in the run history beside ``cache_file``, in place of this run's earlier one (a checkpoint)."""
    runs = [r for r in _read_runs(cache_file) if r.get("id") != run_id] + [entry]
    tmp = _runs_file(cache_file).with_suffix(f".tmp-{run_id}")
    try:
        tmp.write_text(json.dumps(runs), encoding="utf-8")
        os.replace(tmp, _runs_file(cache_file))
    except OSError as e:  # a full disk: the history is a nicety, the run's own error must show
        _unlink(tmp)
        logger.debug("could not record the run history beside %s: %s", cache_file, e)


class _Checkpoints:
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
                _write_runs(current[1], run_id, _run_entry(summary, current, clients, run_id, started))

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._future.cancel()


def _fill_summary(summary: RunSummary, clients: list[JudgeClient], errors: list[dict], started: float) -> None:
    s = total_stats(clients)
    for name in (*_COUNTERS, "capped_waits"):
        setattr(summary, name, getattr(s, name))
    summary.failed_attempts = dict(s.failures)
    summary.errors = dict(Counter(e["kind"] for e in errors))
    summary.structured_output = s.structured_output
    summary.notes = [*summary.notes, *s.notes]
    summary.elapsed_s = time.perf_counter() - started
    summary.shared = s.shared
    # one price for the run's tokens: a panel of models priced differently has none (its cost is not one product)
    prices = {c.price for c in clients}
    price = prices.pop() if len(prices) == 1 else None
    summary.price = price.model_dump() if price is not None else None
