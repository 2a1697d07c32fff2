"""hf_judge: score Hugging Face datasets with LLM-as-judge metrics.

Example:
    >>> from hf_judge import score_dataset, filter_by_scores  # doctest: +SKIP
    >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano",  # doctest: +SKIP
    ...                        columns={"instruction": "question", "output": "answer"})
    >>> good = filter_by_scores(scored, min={"QA_Correctness": 8})  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Importing the package imports nothing heavy (datasets alone takes about a second):
# each public name is loaded from its submodule on first use (PEP 562), so
# `hf-judge --help`, `metrics` and `recipes` start fast.
_SUBMODULE_ATTRS = {
    "judge_agreement": ["AgreementReport", "agreement"],
    "batch_files": ["export_batch", "import_batch"],
    "errors": [
        "AuthenticationError",
        "BatchesPending",
        "BudgetExceededError",
        "CacheError",
        "CacheLockedError",
        "CircuitOpenError",
        "ConfigError",
        "CostExceededError",
        "DiskFullError",
        "HfJudgeError",
        "HubUnreachableError",
        "InterruptedRun",
        "MissingColumnError",
        "ModelNotFoundError",
        "OutputExistsError",
        "PromptFileError",
        "QuotaExceededError",
        "RateLimitedError",
        "ReplyError",
        "RunStopped",
        "ServerUnreachableError",
        "Settings",
        "TemplateError",
        "UnknownMetricError",
        "WorkerDiedError",
    ],
    "estimate": ["CostEstimate", "estimate_cost"],
    "filter": ["filter_by_scores"],
    "hub": ["push_scored"],
    "local": ["local_judge"],
    "metrics": ["Metric", "Output", "available_metrics", "load_metric"],
    "prices": ["Price", "load_prices"],
    "progress": ["Progress"],
    "recipes": ["Recipe", "load_recipe"],
    "score": ["ScoredDatasetDict", "score_dataset"],
    "settings": ["Aggregator", "Panelist", "Settings"],
    "stream": ["ScoredIterableDatasetDict", "score_batches"],
    "summary": ["RunSummary"],
    "transform": ["Judge"],
    "validate": ["parse_binary_verdict", "parse_pair_scores"],
}
_ATTR_TO_SUBMODULE = {attr: mod for mod, attrs in _SUBMODULE_ATTRS.items() for attr in attrs}

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ does this
    from .batch_files import export_batch, import_batch
    from .errors import (
        AuthenticationError,
        BatchesPending,
        BudgetExceededError,
        CacheError,
        CacheLockedError,
        CircuitOpenError,
        ConfigError,
        CostExceededError,
        DiskFullError,
        HfJudgeError,
        HubUnreachableError,
        InterruptedRun,
        MissingColumnError,
        ModelNotFoundError,
        OutputExistsError,
        PromptFileError,
        QuotaExceededError,
        RateLimitedError,
        ReplyError,
        RunStopped,
        ServerUnreachableError,
        TemplateError,
        UnknownMetricError,
        WorkerDiedError,
    )
    from .estimate import CostEstimate, estimate_cost
    from .filter import filter_by_scores
    from .hub import push_scored
    from .judge_agreement import AgreementReport, agreement
    from .local import local_judge
    from .metrics import Metric, Output, available_metrics, load_metric
    from .prices import Price, load_prices
    from .progress import Progress
    from .recipes import Recipe, load_recipe
    from .score import ScoredDatasetDict, score_dataset
    from .settings import Aggregator, Panelist, Settings
    from .stream import ScoredIterableDatasetDict, score_batches
    from .summary import RunSummary
    from .transform import Judge
    from .validate import parse_binary_verdict, parse_pair_scores

__version__ = "0.1.0"

# the public names, sorted (a test checks): every name of the lazy map above, no other
__all__ = sorted(_ATTR_TO_SUBMODULE)


def __getattr__(name: str):
    submodule = _ATTR_TO_SUBMODULE.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{submodule}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
