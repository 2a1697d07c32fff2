"""Batch files for offline runners: ``export_batch`` writes the batch JSONL of a run (for ``vllm run-batch``
or any runner that speaks OpenAI's batch format), ``import_batch`` reads the runner's output back and builds
the scored dataset from it, with the same validation, columns and ``errors`` split as an online run.

The export records its requests in the reply cache's batch book (hf_judge/batch.py), so import needs the
same cache folder, model and base URL: they make the requests' keys.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from ..progress import ProgressCallback
from ..results.scored import ScoredDatasetDict
from ..settings import ExportValues, JobValues, Settings, Unpack, merge_layers, resolved_provider, validated
from ..store.replies import ReplyStore
from ..transport.client import JudgeClient
from .batch import BatchRunner
from .capabilities import check
from .job import Job, JudgeJob
from .prepare import as_splits, build_plans, plan_requests
from .score import score_checked


def export_batch(
    ds: Dataset | DatasetDict,
    metrics: Any,
    path: str | os.PathLike,
    **values: Unpack[ExportValues],
) -> int:
    """Write the requests of scoring ``ds`` with ``metrics`` as one batch JSONL file; returns how many lines.

    The same requests as :func:`hf_judge.score_dataset` would send with the same arguments, less those whose
    replies the cache already holds; one line each, ``custom_id`` the request's cache key in hex. It takes
    ``score_dataset``'s arguments but ``api_key`` (nothing is sent) and ``token_columns`` (no columns are
    written); the cache must be a local folder that is used (the import reads the requests back from it).
    ``metrics`` may be a :class:`hf_judge.Job` (its key and token columns unused): ``export_batch(ds, metrics,
    path, **values)`` is ``export_batch(ds, Job(metrics, **values), path)``.

    Example:
        >>> export_batch(ds, ["QA_All"], "requests.jsonl", model="Qwen/Qwen3-8B")  # doctest: +SKIP
        1000
        >>> # vllm run-batch -i requests.jsonl -o results.jsonl --model Qwen/Qwen3-8B
    """
    job = Job.of(metrics, values, "export_batch").resolved
    check(
        "batch_files",
        job.settings,
        only=("batch_panel", "no_cache", "runner_format"),
        files=True,
        use_cache=job.use_cache,
        provider=resolved_provider(job.settings),
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
    progress: bool | ProgressCallback = True,
    if_exists: str = "keep",
    **values: Unpack[JobValues],
) -> ScoredDatasetDict:
    """Read a batch runner's output JSONL into the reply cache and return the scored dataset.

    Takes the arguments of :func:`hf_judge.score_dataset` (the same as the :func:`export_batch` that wrote
    the requests, cache folder included), or a :class:`hf_judge.Job` in place of ``metrics``:
    ``import_batch(ds, metrics, output_file, **values)`` is ``import_batch(ds, Job(metrics, **values),
    output_file)``. Nothing is sent: a reply that fails validation, a failed line and a
    request the output lacks are rows of the ``errors`` split (``batch_missing`` for the last).

    Example:
        >>> scored = import_batch(ds, ["QA_All"], "results.jsonl", model="Qwen/Qwen3-8B")  # doctest: +SKIP
        >>> scored["errors"].num_rows  # doctest: +SKIP
        0
    """
    path = Path(output_file)
    if not path.is_file():
        raise ConfigError(f"no batch output file {path}: give the JSONL the batch runner wrote (-o of vllm run-batch)")
    job = Job.of(metrics, values, "import_batch").resolved
    # the import's setting, checked with the others (validated, as a Settings given with batch_import would be)
    settings = validated(Settings, merge_layers(job.settings, {"batch_import": str(path.resolve())}), "settings")
    return score_checked(ds, replace(job, settings=settings), progress, if_exists)
