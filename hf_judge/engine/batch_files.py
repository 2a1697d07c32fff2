"""Batch files for offline runners: ``export_batch`` writes the batch JSONL of a run (for ``vllm run-batch``
or any runner that speaks OpenAI's batch format), ``import_batch`` reads the runner's output back and builds
the scored dataset from it, with the same validation, columns and ``errors`` split as an online run.

The export records its requests in the reply cache's batch book (hf_judge/batch.py), so import needs the
same cache folder, model and base URL: they make the requests' keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from ..progress import ProgressCallback
from ..results.scored import ScoredDatasetDict
from ..settings import Settings, SettingValues, Unpack, merge_layers, resolved_provider, validated
from ..store.replies import ReplyStore
from ..transport.client import JudgeClient
from .batch import BatchRunner
from .capabilities import check
from .job import JudgeJob
from .prepare import as_splits, build_plans, plan_requests, run_settings
from .score import score_dataset


def export_batch(
    ds: Dataset | DatasetDict,
    metrics: Any,
    path: str | os.PathLike,
    *,
    columns: dict[str, str] | None = None,
    prompts_dir: str | os.PathLike | list | None = None,
    metric_params: dict[str, dict[str, Any]] | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    settings: Settings | None = None,
    storage_options: dict[str, Any] | None = None,
    local_cache_dir: str | os.PathLike | None = None,
    **setting_values: Unpack[SettingValues],
) -> int:
    """Write the requests of scoring ``ds`` with ``metrics`` as one batch JSONL file; returns how many lines.

    The same requests as :func:`hf_judge.score_dataset` would send with the same arguments, less those whose
    replies the cache already holds; one line each, ``custom_id`` the request's cache key in hex. It takes
    ``score_dataset``'s arguments but ``api_key`` (nothing is sent) and ``token_columns`` (no columns are
    written); the cache must be a local folder that is used (the import reads the requests back from it).

    Example:
        >>> export_batch(ds, ["QA_All"], "requests.jsonl", model="Qwen/Qwen3-8B")  # doctest: +SKIP
        1000
        >>> # vllm run-batch -i requests.jsonl -o results.jsonl --model Qwen/Qwen3-8B
    """
    s = run_settings(settings, setting_values)
    check(
        "batch_files",
        s,
        only=("batch_panel", "no_cache", "runner_format"),
        files=True,
        use_cache=use_cache,
        provider=resolved_provider(s),
    )
    job = JudgeJob.of(
        s,
        metrics,
        columns,
        None,
        prompts_dir,
        metric_params,
        cache_dir,
        storage_options=storage_options,
        local_cache_dir=local_cache_dir,
    )
    return export_job(ds, job, path)


def export_job(ds: Dataset | DatasetDict, job: JudgeJob, path: str | os.PathLike) -> int:
    """:func:`export_batch` of a job resolved already."""
    if job.remote is not None:
        check("batch_files", job.settings, only=("remote_cache",), remote=True, url=job.remote.url)

    layout = job.layout
    splits, _ = as_splits(ds)
    plans_by_split, _, _ = build_plans(
        splits, job.metrics, job.columns, job.settings.temperature, "keep", False, layout
    )
    client = JudgeClient(job.settings, api_key=None)
    store_path = job.store_file
    ReplyStore(store_path).close()  # the tables, and the replies earlier runs left to merge
    runner = BatchRunner(client, None, store_path, {m.name: m for m in job.metrics})
    try:
        todo = [
            (lambda split=split, d=d: plan_requests(split, d, plans_by_split[split], client, layout))
            for split, d in splits.items()
            if plans_by_split[split]
        ]
        return runner.export(todo, Path(path))
    finally:
        runner.close()


def import_batch(
    ds: Dataset | DatasetDict,
    metrics: Any,
    output_file: str | os.PathLike,
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
    """Read a batch runner's output JSONL into the reply cache and return the scored dataset.

    Takes the arguments of :func:`hf_judge.score_dataset` (the same as the :func:`export_batch` that wrote
    the requests, cache folder included). Nothing is sent: a reply that fails validation, a failed line and a
    request the output lacks are rows of the ``errors`` split (``batch_missing`` for the last).

    Example:
        >>> scored = import_batch(ds, ["QA_All"], "results.jsonl", model="Qwen/Qwen3-8B")  # doctest: +SKIP
        >>> scored["errors"].num_rows  # doctest: +SKIP
        0
    """
    path = Path(output_file)
    if not path.is_file():
        raise ConfigError(f"no batch output file {path}: give the JSONL the batch runner wrote (-o of vllm run-batch)")
    # the judge settings go in with the import's: a Settings needs its model (or a panel's, refused then)
    values: dict[str, Any] = dict(setting_values)
    judge = {k: v for k in ("model", "models") if (v := values.pop(k, None))}
    layers = merge_layers(settings, {"batch_import": str(path.resolve())} | judge)
    return score_dataset(
        ds,
        metrics,
        columns=columns,
        api_key=api_key,
        prompts_dir=prompts_dir,
        metric_params=metric_params,
        cache_dir=cache_dir,
        use_cache=use_cache,
        token_columns=token_columns,
        progress=progress,
        if_exists=if_exists,
        settings=validated(Settings, layers, "settings"),
        storage_options=storage_options,
        local_cache_dir=local_cache_dir,
        **values,
    )
