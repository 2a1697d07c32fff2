"""``score_dataset``: the main entry point."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import traceback
import uuid
import weakref
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, Value, concatenate_datasets

from . import constants
from .client import JudgeClient
from .errors import ConfigError, DiskFullError, InterruptedRun, RunStopped, TemplateError
from .metrics import resolve_metrics
from .pages import file_paths, release
from .pipeline import TOKEN_COLUMNS, LoopThread, Plan, SplitRun, sparse_gc
from .redact import install_log_filter, register
from .settings import client_settings
from .store import ReplyStore, free_space, human_bytes, is_disk_full
from .summary import RunSummary

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

    summary: RunSummary

    def save_to_disk(self, dataset_dict_path, *args, **kwargs):
        kwargs.setdefault("num_shards", shards_for(self))
        return super().save_to_disk(dataset_dict_path, *args, **kwargs)


def shards_for(dd: DatasetDict) -> dict[str, int | None]:
    """``num_shards`` for ``save_to_disk``: one shard for an empty split, which
    datasets would otherwise write without a data file and then fail to load."""
    return {k: (1 if len(v) == 0 else None) for k, v in dd.items()}


def _as_splits(ds: Dataset | DatasetDict) -> dict[str, Dataset]:
    if isinstance(ds, Dataset):
        return {"train": ds}
    if isinstance(ds, DatasetDict):
        if ERRORS_SPLIT in ds:
            raise ConfigError(f"the input already has a split named {ERRORS_SPLIT!r}; drop it first (ds.pop('errors')), hf_judge adds its own")
        return dict(ds)
    raise ConfigError(
        f"score_dataset takes a datasets.Dataset or DatasetDict, got {type(ds).__name__}. "
        "Load files with datasets.load_dataset('json', data_files=...) first."
    )


def _fingerprint(ds: Dataset, split: str, plans: list[Plan], client: JudgeClient, max_input_chars: int | None, token_columns: bool) -> str:
    state = {
        "v": constants.CACHE_VERSION,
        "data": ds._fingerprint,
        "split": split,
        "metrics": [
            [p.metric.name, p.metric.prompt_hash, p.metric.json_schema, p.metric.columns, p.columns, p.temperature] for p in plans
        ],
        "model": client.model,
        "base_url": client.base_url,
        "top_p": client.top_p,
        "max_tokens": client.max_tokens,
        "max_input_chars": max_input_chars,
        "token_columns": token_columns,
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _preflight(split: str, ds: Dataset, plans: list[Plan]) -> None:
    """Render every metric on the split's first row, so template errors surface before any request."""
    if len(ds) == 0:
        return
    needed = sorted({c for p in plans for c in p.columns.values() if c})
    first = ds.select_columns(needed)[0] if needed else {}
    from .render import format_value

    for p in plans:
        values = {v: format_value(first[c]) if c else None for v, c in p.columns.items()}
        values = {k: ("" if v is None and k not in p.metric.optional else v) for k, v in values.items()}
        try:
            p.metric.messages(values)
        except TemplateError as e:
            raise TemplateError(f"{e} (split {split!r}, row 0)") from None


def score_dataset(
    ds: Dataset | DatasetDict,
    metrics: Any,
    *,
    model: str,
    columns: dict[str, str] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    concurrency: int = constants.DEFAULT_CONCURRENCY,
    timeout: float = constants.DEFAULT_TIMEOUT,
    retries: int = constants.DEFAULT_RETRIES,
    temperature: float | None = None,
    top_p: float | None = constants.DEFAULT_TOP_P,
    max_tokens: int | None = None,
    prompts_dir: str | os.PathLike | list | None = None,
    metric_params: dict[str, dict[str, Any]] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    max_input_chars: int | None = None,
    max_requests_per_minute: float | None = None,
    max_tokens_per_minute: float | None = None,
    max_total_tokens: int | None = None,
    token_columns: bool = False,
    backoff_base: float = 0.5,
    backoff_max: float = 30.0,
    window: int | None = None,
) -> ScoredDatasetDict:
    """Score every row of ``ds`` with LLM-as-judge ``metrics``.

    Returns the input splits (a bare ``Dataset`` becomes ``train``) with one
    column per declared output, rows in their original order and null where a
    metric failed, plus an ``errors`` split with one row per failed (split,
    row, metric). ``result.summary`` holds the run's numbers.

    Replies are cached: a repeated call sends no request, and an interrupted
    run resumes where it stopped when called again.

    ``token_columns=True`` adds ``judge_prompt_tokens`` and
    ``judge_completion_tokens``: per row, the tokens of the replies that scored
    it, as the server reported them (null where it reports no usage).

    Example:
        >>> from datasets import Dataset
        >>> ds = Dataset.from_dict({"question": ["2+2?"], "answer": ["4"]})
        >>> scored = score_dataset(  # doctest: +SKIP
        ...     ds, ["QA_All"], model="gpt-4.1-nano",
        ...     columns={"instruction": "question", "output": "answer"},
        ... )
        >>> scored["train"]["QA_Correctness"]  # doctest: +SKIP
        [9]
    """
    install_log_filter()
    settings = client_settings(
        model=model,
        base_url=base_url,
        concurrency=concurrency,
        timeout=timeout,
        retries=retries,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        max_requests_per_minute=max_requests_per_minute,
        max_tokens_per_minute=max_tokens_per_minute,
        max_total_tokens=max_total_tokens,
        max_input_chars=max_input_chars,
        backoff_base=backoff_base,
        backoff_max=backoff_max,
    )
    splits = _as_splits(ds)
    loaded = resolve_metrics(metrics, prompts_dir, metric_params)
    columns = dict(columns or {})
    for var, col in columns.items():
        if not isinstance(var, str) or not isinstance(col, str):
            raise ConfigError(f"columns maps template variables to column names (strings), got {var!r}: {col!r}")

    plans_by_split: dict[str, list[Plan]] = {}
    for split, d in splits.items():
        clash = [c for m in loaded for c in m.columns if c in d.column_names]
        clash += [c for c in TOKEN_COLUMNS if token_columns and c in d.column_names]
        if clash:
            raise ConfigError(
                f"split {split!r} already has column(s) {clash}; remove them first (ds.remove_columns({clash!r})) or score into a copy"
            )
        plans = [Plan(m, m.resolve_columns(columns, d.column_names), m.temperature if temperature is None else temperature) for m in loaded]
        used = {v for m in loaded for v in (*m.variables, *m.optional)}
        unused = sorted(set(columns) - used)
        if unused:
            logger.warning("columns maps %s, which no chosen metric uses (they use: %s)", unused, ", ".join(sorted(used)))
        _preflight(split, d, plans)
        plans_by_split[split] = plans

    api_key = api_key if api_key is not None else constants.default_api_key()
    register(api_key)
    client = JudgeClient(
        base_url=settings.base_url or constants.default_base_url(),
        api_key=api_key,
        model=settings.model,
        concurrency=settings.concurrency,
        timeout=settings.timeout,
        retries=settings.retries,
        top_p=settings.top_p,
        max_tokens=settings.max_tokens,
        backoff_base=settings.backoff_base,
        backoff_max=settings.backoff_max,
        max_requests_per_minute=settings.max_requests_per_minute,
        max_tokens_per_minute=settings.max_tokens_per_minute,
        max_total_tokens=settings.max_total_tokens,
    )
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else constants.default_cache_dir()
    summary = RunSummary(
        model=settings.model,
        base_url_host=urlparse(client.base_url).netloc,
        metrics={m.name: m.prompt_hash for m in loaded},
        columns=[c for m in loaded for c in m.columns],
        sampling={
            "temperature": temperature if temperature is not None else {m.name: m.temperature for m in loaded},
            "top_p": settings.top_p,
            "max_tokens": settings.max_tokens,
        },
    )
    started = time.perf_counter()
    results: dict[str, Dataset] = {}
    errors: list[dict] = []
    store: ReplyStore | None = None
    loop: LoopThread | None = None
    run: SplitRun | None = None
    win = window or max(4096, 64 * settings.concurrency)
    with sparse_gc():
        try:
            for split, d in splits.items():
                plans = plans_by_split[split]
                fp = _fingerprint(d, split, plans, client, settings.max_input_chars, token_columns)
                features = Features({c: f for p in plans for c, f in p.metric.features.items()})
                if token_columns:
                    features.update({c: Value("int64") for c in TOKEN_COLUMNS})
                map_kwargs: dict[str, Any] = dict(
                    batched=True,
                    with_indices=True,
                    input_columns=[],
                    remove_columns=d.column_names,
                    features=features,
                    new_fingerprint=fp,
                    desc=f"Scoring {split}",
                )
                cache_file = cache_root / "results" / f"{fp}.arrow"
                run_dir: Path | None = None
                if use_cache:
                    _remove_partials(cache_file)
                    saved = _load_result(cache_file, len(d), features) if cache_file.exists() else None
                    if saved is not None:
                        base = d.flatten_indices() if d._indices is not None else d
                        results[split] = concatenate_datasets([base, saved], axis=1)
                        summary.cached_splits.append(split)
                        summary.rows[split] = len(d)
                        continue
                    # The map writes into a folder of its own, so that whatever it leaves
                    # behind (a temporary file on a full disk) goes with the folder.
                    run_dir = cache_file.with_name(f"{fp}.run-{uuid.uuid4().hex[:8]}")
                    try:
                        run_dir.mkdir(parents=True)
                    except OSError as e:
                        raise (_results_disk_full(cache_file.parent, e, None) if is_disk_full(e) else e) from None
                    map_kwargs.update(cache_file_name=str(run_dir / cache_file.name), load_from_cache_file=False)
                else:
                    map_kwargs.update(keep_in_memory=True, load_from_cache_file=False)
                if loop is None:
                    loop = LoopThread()
                    loop.run(client.open())
                    if use_cache:
                        store = ReplyStore(cache_root / "replies.sqlite3")
                run = SplitRun(
                    split, d, plans, client, store, window=win, max_input_chars=settings.max_input_chars, token_columns=token_columns
                )
                feeder = loop.submit(run.feed())
                try:
                    scores = d.map(lambda _idx: run.consume(_idx), **map_kwargs)
                    errors.extend(sorted(run.errors, key=lambda e: e["row"]))
                    if use_cache:
                        # A result with errors is not a finished one: keep it out of the fingerprint
                        # cache so that the next run retries exactly the failed (row, metric) pairs.
                        partial = cache_file.with_name(f"{fp}.partial-{uuid.uuid4().hex[:8]}.arrow")
                        done = partial if run.errors else cache_file
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
                    if run_dir is not None:
                        shutil.rmtree(run_dir, ignore_errors=True)
                base = d.flatten_indices() if d._indices is not None else d
                results[split] = concatenate_datasets([base, scores], axis=1)
                release(run.input_files | file_paths(scores.cache_files))  # read again only where used
                summary.rows[split] = len(d)
                run = None
        except KeyboardInterrupt:
            raise InterruptedRun(
                f"interrupted. {store.written if store else 0:,} replies of this run are saved in the cache; "
                "run the same command again to resume where it stopped."
            ) from None
        except RunStopped as e:
            logger.error("%s", e)
            raise
        finally:
            if run is not None and loop is not None:
                try:
                    loop.run(run.cancel(), timeout=10)
                except Exception:  # noqa: BLE001 - best effort while stopping
                    pass
            if loop is not None:
                try:
                    loop.run(client.close(), timeout=10)
                except Exception:  # noqa: BLE001
                    pass
                loop.stop()
            if store is not None:
                store.flush(30)
                store.close()
            _fill_summary(summary, client, errors, started)

    out = ScoredDatasetDict(results)
    out[ERRORS_SPLIT] = Dataset.from_list(errors, features=ERROR_FEATURES) if errors else Dataset.from_dict(
        {k: [] for k in ERROR_FEATURES}, features=ERROR_FEATURES
    )
    out.summary = summary
    logger.info("hf_judge run summary\n%s", summary)
    return out


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
        path, problem, aside,
    )
    return None


def _remove_partials(cache_file: Path) -> None:
    """Remove the partial results earlier runs of this fingerprint left (a kill -9 skips their clean-up)."""
    for p in cache_file.parent.glob(f"{cache_file.stem}.partial-*.arrow"):
        _unlink(p)  # a dataset of this process that still maps one keeps reading it (Linux)


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


def _fill_summary(summary: RunSummary, client: JudgeClient, errors: list[dict], started: float) -> None:
    s = client.stats
    summary.requests = s.requests
    summary.retries = s.retries
    summary.cache_hits = s.cache_hits
    summary.prompt_tokens = s.prompt_tokens
    summary.completion_tokens = s.completion_tokens
    summary.failed_attempts = dict(s.failures)
    summary.errors = dict(Counter(e["kind"] for e in errors))
    summary.structured_output = s.structured_output
    summary.notes = list(s.notes)
    summary.elapsed_s = time.perf_counter() - started
