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

from .constants import VERSION

# Importing the package imports nothing heavy (datasets alone takes about a second):
# each public name is loaded from its submodule on first use (PEP 562), so
# `hf-judge --help`, `metrics` and `recipes` start fast.
_SUBMODULE_ATTRS = {
    "analysis.agreement": ["AgreementReport", "agreement"],
    "analysis.alpha": ["krippendorff_alpha"],
    "analysis.calibration": ["Calibration", "calibrate"],
    "analysis.leaderboard": ["JudgeChoice"],
    "analysis.labels": ["read_labels", "write_labels"],
    "analysis.review": ["sample_for_review"],
    "results.calibrated": ["apply_calibration"],
    "engine.batch_files": ["export_batch", "import_batch"],
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
        "PushInterrupted",
        "QuotaExceededError",
        "RateLimitedError",
        "ReplyError",
        "RunStopped",
        "ServerUnreachableError",
        "TemplateError",
        "UnknownMetricError",
        "WorkerDiedError",
    ],
    "engine.choose": ["choose_judge"],
    "engine.estimate": ["CostEstimate", "estimate_cost"],
    "engine.job": ["Job"],
    "results.filter": ["filter_by_scores"],
    "results.hub": ["push_scored"],
    "results.loader": ["load_result"],
    "results.overview": ["RunOverview", "overview"],
    "results.report": ["write_report"],
    "transport.local": ["local_judge"],
    "judging.catalogue": ["available_metrics", "load_metric"],
    "judging.metrics": ["Metric", "Output"],
    "transport.prices": ["Price", "load_prices"],
    "progress": ["Progress"],
    "cli.recipes": ["Recipe", "load_recipe"],
    "engine.score": ["score_dataset"],
    "engine.transform": ["Judge"],
    "results.scored": ["ScoredDatasetDict"],
    "settings": ["Aggregator", "JobValues", "Panelist", "SettingValues", "Settings"],
    "engine.stream": ["ScoredIterableDatasetDict", "score_batches"],
    "results.summary": ["RunSummary"],
    "judging.validate": ["parse_binary_verdict", "parse_pair_scores"],
}
_ATTR_TO_SUBMODULE = {attr: mod for mod, attrs in _SUBMODULE_ATTRS.items() for attr in attrs}

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ does this
    from .analysis.agreement import AgreementReport, agreement
    from .analysis.alpha import krippendorff_alpha
    from .analysis.calibration import Calibration, calibrate
    from .analysis.labels import read_labels, write_labels
    from .analysis.leaderboard import JudgeChoice
    from .analysis.review import sample_for_review
    from .cli.recipes import Recipe, load_recipe
    from .engine.batch_files import export_batch, import_batch
    from .engine.choose import choose_judge
    from .engine.estimate import CostEstimate, estimate_cost
    from .engine.job import Job
    from .engine.score import score_dataset
    from .engine.stream import ScoredIterableDatasetDict, score_batches
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
        PushInterrupted,
        QuotaExceededError,
        RateLimitedError,
        ReplyError,
        RunStopped,
        ServerUnreachableError,
        TemplateError,
        UnknownMetricError,
        WorkerDiedError,
    )
    from .judging.catalogue import available_metrics, load_metric
    from .judging.metrics import Metric, Output
    from .judging.validate import parse_binary_verdict, parse_pair_scores
    from .progress import Progress
    from .results.calibrated import apply_calibration
    from .results.loader import load_result
    from .results.overview import RunOverview, overview
    from .results.report import write_report
    from .results.summary import RunSummary
    from .settings import Aggregator, JobValues, Panelist, Settings, SettingValues
    from .transport.local import local_judge
    from .transport.prices import Price, load_prices

__version__ = VERSION

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
