"""``hf-judge batch``: batch JSONL files for offline runners (``export``, ``import``) and the batches a cache
records (``status``, ``cancel``). Scoring through a provider's batch API is ``hf-judge score ... --batch``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import constants
from ..errors import ConfigError, RunStopped
from .job import Job, resolve_api_key, resolve_job
from .options import add_api_key_env, add_cache_dir, add_job_options
from .score import score_job

BATCH_EXAMPLE = """examples:
  hf-judge score data.jsonl --metrics QA_All -m gpt-4.1-nano --batch            # half the price, within 24 h
  hf-judge score data.jsonl --metrics QA_All -m gpt-4.1-nano --batch --no-wait  # submit and exit; rerun collects
  hf-judge batch status
  hf-judge batch cancel
  hf-judge batch export data.jsonl --metrics QA_All -m Qwen/Qwen3-8B -o requests.jsonl
  vllm run-batch -i requests.jsonl -o results.jsonl --model Qwen/Qwen3-8B
  hf-judge batch import data.jsonl results.jsonl --metrics QA_All -m Qwen/Qwen3-8B -o out/
"""


def add_batch(sub: Any, settings: bool) -> None:
    """The ``batch`` command's parser and its actions'; ``settings``: export and import with the request
    settings' flags (they make the requests' keys)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "batch",
        help="batch API files and batches: export, import, status, cancel",
        description="Batch mode's tools. Scoring through a batch API is `hf-judge score ... --batch`.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    bsub = p.add_subparsers(dest="batch_command", metavar="ACTION", required=True, help="what to do")
    b = bsub.add_parser(
        "export",
        help="write the batch JSONL of a run for an offline runner (vllm run-batch)",
        description="Write the requests `hf-judge score` would send as one OpenAI batch JSONL file (custom_id: the "
        "request's cache key), less those the cache holds. Import the runner's output with the same dataset, "
        "metrics, --model, --base-url and --cache-dir.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    b.add_argument("dataset", help="Hub repo id, local folder, or data file")
    b.add_argument("--output", "-o", required=True, help="the JSONL file to write")
    add_job_options(b, settings=settings, output=None)
    b.set_defaults(func=cmd_batch_export)
    b = bsub.add_parser(
        "import",
        help="read a batch runner's output JSONL and save the scored dataset",
        description="Read RESULTS (the output JSONL of a batch runner) into the cache and build the scored dataset "
        "from it, with the same validation and errors split as `hf-judge score`. Nothing is sent.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    b.add_argument("dataset", help="the dataset the requests were exported from")
    b.add_argument("results", help="the runner's output JSONL")
    add_job_options(b, settings=settings, output="<name>-judged")
    b.set_defaults(func=cmd_batch_import)
    b = bsub.add_parser(
        "status",
        help="list the batches of a cache with their states and counts",
        description="List the batches recorded in the reply cache, as last seen (a --batch run refreshes them).",
        epilog="example:\n  hf-judge batch status --cache-dir ~/.cache/hf_judge",
        formatter_class=fmt,
    )
    add_cache_dir(b)
    b.set_defaults(func=cmd_batch_status)
    b = bsub.add_parser(
        "cancel",
        help="cancel the batches of a cache that are still running",
        description="Cancel batches in flight (all of them, or those named). Lines already run are kept: the "
        "next --batch run collects them and submits the rest again.",
        epilog="example:\n  hf-judge batch cancel\n  hf-judge batch cancel batch_abc123",
        formatter_class=fmt,
    )
    b.add_argument("ids", nargs="*", metavar="BATCH_ID", help="batch ids to cancel (default: every one in flight)")
    add_cache_dir(b)
    add_api_key_env(b)
    b.set_defaults(func=cmd_batch_cancel)


# `score`'s flags that export and import share but cannot honour (they send nothing): refused, not ignored
_NOT_FOR_BATCH_FILES = {
    "dry_run": "--dry-run",
    "no_cache": "--no-cache",
    "batch": "--batch",
    "no_wait": "--no-wait",
    "num_workers": "--workers",
    "ray": "--ray",
    "ray_address": "--ray-address",
    "max_cost": "--max-cost",
    "max_total_tokens": "--max-total-tokens",
}


def _batch_job(args: argparse.Namespace) -> Job:
    given = [
        flag
        for name, flag in _NOT_FOR_BATCH_FILES.items()
        if getattr(args, name, None) not in (None, False) and not (name == "num_workers" and args.num_workers == 1)
    ]
    if given:
        what = "writes requests for a runner" if args.batch_command == "export" else "reads a runner's output"
        raise ConfigError(
            f"{', '.join(given)} cannot apply to `hf-judge batch {args.batch_command}`, which {what} and sends "
            f"nothing (the cache is where export and import meet): drop {'it' if len(given) == 1 else 'them'}, or "
            "use `hf-judge score`"
        )
    job = resolve_job(args, None, dataset=args.dataset)
    if not job.metrics:
        raise ConfigError("no metrics: pass --metrics QA_All (see `hf-judge metrics`)")
    if "model" not in job.client:
        raise ConfigError("no model: pass --model NAME, the model name the runner serves")
    return job


def cmd_batch_export(args: argparse.Namespace) -> int:
    """hf-judge batch export DATASET -o requests.jsonl ... (see BATCH_EXAMPLE)."""
    from ..engine.batch_files import export_batch
    from .inputs import load_input

    job = _batch_job(args)
    assert job.dataset is not None
    ds = load_input(
        job.dataset, subset=job.subset, splits=job.splits, revision=job.revision, token=None, limit=job.limit
    )
    # an export sends nothing (no key) and records its requests in the cache (always used)
    kwargs = {k: v for k, v in job.library_args(args).items() if k not in ("api_key", "use_cache")}
    n = export_batch(ds, job.metrics, args.output, **kwargs)
    model = job.client["model"]
    print(
        f"wrote {n:,} requests to {args.output}\n"
        f"next: vllm run-batch -i {args.output} -o results.jsonl --model {model}\n"
        f"then: hf-judge batch import {job.dataset} results.jsonl (with this export's dataset options, --metrics, "
        "--model, --base-url and --cache-dir: they make the requests' keys)"
    )
    return 0


def cmd_batch_import(args: argparse.Namespace) -> int:
    """hf-judge batch import DATASET RESULTS.jsonl ... (see BATCH_EXAMPLE)."""
    return score_job(args, _batch_job(args), batch_import=args.results)


def _book(cache_dir: str | None):
    import sqlite3

    from ..engine.batch_book import BatchBook

    path = (Path(cache_dir).expanduser() if cache_dir else constants.default_cache_dir()) / "replies.sqlite3"
    if not path.is_file():
        raise ConfigError(f"no reply cache at {path}: pass the --cache-dir the batch run used")
    try:
        return BatchBook(path, server="")
    except sqlite3.Error as e:
        raise ConfigError(f"cannot read the reply cache {path}: {e}") from None


def cmd_batch_status(args: argparse.Namespace) -> int:
    """hf-judge batch status: the batches of a cache."""
    book = _book(args.cache_dir)
    try:
        jobs = book.jobs(every_server=True)
    finally:
        book.close()
    if not jobs:
        print("no batches in this cache")
        return 0
    print(f"{'batch':34} {'state':11} {'requests':>9} {'done':>9} {'failed':>7} {'tokens in/out':>19}  server")
    for j in jobs:
        tokens = f"{j.prompt_tokens:,}/{j.completion_tokens:,}"
        print(
            f"{j.batch_id or j.name:34} {j.state:11} {j.requests:>9,} {j.done:>9,} {j.failed:>7,} {tokens:>19}  "
            f"{j.base_url or ''}"
        )
    return 0


def cmd_batch_cancel(args: argparse.Namespace) -> int:
    """hf-judge batch cancel [BATCH_ID ...]: cancel batches in flight."""
    from ..engine.batch_book import DONE

    given = resolve_api_key(args)
    book = _book(args.cache_dir)
    try:
        live = [j for j in book.jobs(every_server=True) if j.batch_id and j.state not in DONE | {"collected"}]
        if args.ids:
            unknown = set(args.ids) - {j.batch_id for j in live}
            if unknown:
                raise ConfigError(
                    f"no batch in flight with id {', '.join(sorted(unknown))} (see `hf-judge batch status`)"
                )
            live = [j for j in live if j.batch_id in args.ids]
        for j in live:
            state = _cancel(j, given)
            book.update(j.name, state=state)
            print(f"{j.batch_id}: {state}")
    finally:
        book.close()
    if not live:
        print("no batch in flight")
    return 0


def _cancel(j, given: str | None) -> str:
    """Cancel one batch at its provider's batch API; its state after."""
    import time

    from openai import OpenAI

    from ..engine.batch_api import BatchApiError, BatchApiUnreachable, batch_api
    from ..engine.batch_gemini import GeminiBatches, is_gemini_batch

    assert j.batch_id is not None and j.base_url is not None
    if is_gemini_batch(j.batch_id):  # Gemini's batch API: its key is GEMINI_API_KEY's
        return GeminiBatches.at(j.base_url, given or constants.default_gemini_key()).batches.cancel(j.batch_id).status
    provider = j.provider or "openai"
    remote = batch_api(provider, j.base_url, given or constants.provider_api_key(provider), time.sleep)
    if remote is not None:  # another provider's batch API (Anthropic's Message Batches)
        try:
            return remote.cancel(j.batch_id)
        except (BatchApiError, BatchApiUnreachable) as e:
            raise RunStopped(f"could not cancel {j.batch_id} at {j.base_url}: {e}") from None
    with OpenAI(base_url=j.base_url, api_key=given or constants.default_api_key() or "none") as api:
        return api.batches.cancel(j.batch_id).status
