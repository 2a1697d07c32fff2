"""The job a scoring command runs: the defaults, overridden by a recipe, overridden by the flags
(:func:`resolve_job`), and the API key it sends (:func:`resolve_api_key`)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from .. import constants
from ..errors import ConfigError
from ..redact import resolve_secret
from .options import key_variable


def _client_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (a flag not given is None)."""
    from ..settings import public_fields

    return {k: getattr(args, k) for k in public_fields() if getattr(args, k, None) is not None}


def resolve_api_key(args: argparse.Namespace, recipe_key: str | None = None, base_url: str | None = None) -> str | None:
    """The key from ``--api-key-env NAME``, else the recipe's ``api_key`` (``env:VAR``), else None (then
    ``score_dataset`` reads OPENAI_API_KEY, or ANTHROPIC_API_KEY for an Anthropic judge)."""
    from urllib.parse import urlparse

    if args.api_key_env:
        return os.environ[key_variable(args.api_key_env)]
    if recipe_key:
        try:
            return resolve_secret(recipe_key)
        except ConfigError:
            # a recipe written for OpenAI, run against a local server (--base-url): that one usually
            # needs no key, and one that does answers 401, which stops the run with its own message
            if urlparse(base_url or constants.default_base_url()).hostname == "api.openai.com":
                raise
            return None
    return None  # score_dataset reads OPENAI_API_KEY, unless the base URL carries its own credentials


@dataclass
class Job:
    """One scoring job, as :func:`resolve_job` assembles it."""

    dataset: str | None = None
    subset: str | None = None
    splits: list[str] | None = None
    revision: str | None = None
    limit: int | None = None
    local_port: int | None = None  # where --model local starts its judge: the server's, not a request setting
    metrics: Any = None
    columns: dict[str, str] = field(default_factory=dict)
    prompts_dir: Any = None
    client: dict[str, Any] = field(default_factory=dict)
    recipe_api_key: str | None = None
    token_columns: bool = False
    filters: Any = None
    output_dir: str | None = None
    push_to_hub: str | None = None
    private: bool | None = None
    recipe: Any = None

    def library_args(self, args: argparse.Namespace, api_key: str | None = None) -> dict[str, Any]:
        """The keyword arguments every library entry point takes (score_dataset, estimate_cost,
        export_batch, score_dataset_on_ray), from this job and the shared flags: given in one place, so
        the commands cannot drift apart. Each command adds what only it takes.

        Example:
            >>> ns = argparse.Namespace(cache_dir=None, no_cache=False)
            >>> sorted(Job(metrics=["QA_All"], client={"model": "m"}).library_args(ns))
            ['api_key', 'cache_dir', 'columns', 'model', 'prompts_dir', 'use_cache']
        """
        out = {
            "columns": self.columns,
            "prompts_dir": self.prompts_dir,
            "api_key": api_key,
            "cache_dir": getattr(args, "cache_dir", None),
            "use_cache": not getattr(args, "no_cache", False),
            **self.client,
        }
        if getattr(args, "storage_option", None):
            from ..store.segments import parse_storage_options

            out["storage_options"] = parse_storage_options(args.storage_option)
        if getattr(args, "local_cache_dir", None):
            out["local_cache_dir"] = args.local_cache_dir
        return out


def resolve_job(args: argparse.Namespace, recipe=None, dataset: str | None = None) -> Job:
    """The job to run: the defaults, overridden by the recipe, overridden by the flags.

    This is the one place that precedence is applied, for ``score --recipe``
    and ``run`` alike. ``--column`` adds to the recipe's columns (a flag wins
    for its variable). A dataset given on the command line replaces the
    recipe's dataset together with its subset, splits and revision. The
    settings are merged as :func:`hf_judge.settings.resolve_settings` does.
    """
    from ..settings import merge_layers

    job = Job(recipe=recipe)
    if recipe is not None:
        if recipe.dataset is not None and dataset is None:
            split = recipe.dataset.split
            job.dataset, job.subset, job.revision = recipe.dataset.name, recipe.dataset.subset, recipe.dataset.revision
            job.splits = [split] if isinstance(split, str) else split
        job.limit = recipe.limit
        job.local_port = recipe.local_port
        job.metrics = recipe.metric_specs()
        job.columns = dict(recipe.columns)
        job.prompts_dir = recipe.prompts_dir
        job.client = recipe.settings()
        job.recipe_api_key = recipe.api_key
        job.token_columns = recipe.token_columns
        job.filters = recipe.filters
        job.output_dir = recipe.output_dir
        if recipe.push_to_hub is not None:
            job.push_to_hub, job.private = recipe.push_to_hub.repo, recipe.push_to_hub.private
    if dataset is not None:
        job.dataset = dataset
    given = ("subset", "revision", "limit", "local_port", "output_dir", "push_to_hub", "private", "token_columns")
    for name in (*given, "prompts_dir"):
        if getattr(args, name, None) is not None:
            setattr(job, name, getattr(args, name))
    if args.splits:
        job.splits = args.splits
    if args.metrics:
        job.metrics = [m.strip() for item in args.metrics for m in item.split(",") if m.strip()]
    job.columns.update(dict(args.column or []))
    job.client = merge_layers(job.client, _client_kwargs(args))
    return job
