"""hf_judge: score Hugging Face datasets with LLM-as-judge metrics.

Example:
    >>> from hf_judge import score_dataset, filter_by_scores  # doctest: +SKIP
    >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano",  # doctest: +SKIP
    ...                        columns={"instruction": "question", "output": "answer"})
    >>> good = filter_by_scores(scored, min={"QA_Correctness": 8})  # doctest: +SKIP
"""

from .errors import (
    AuthenticationError,
    BudgetExceededError,
    CacheError,
    CacheLockedError,
    CircuitOpenError,
    ConfigError,
    DiskFullError,
    HfJudgeError,
    InterruptedRun,
    MissingColumnError,
    ModelNotFoundError,
    PromptFileError,
    RunStopped,
    TemplateError,
    UnknownMetricError,
)
from .filter import filter_by_scores
from .hub import push_scored
from .metrics import Metric, Output, available_metrics, load_metric
from .recipes import Recipe, load_recipe
from .score import ScoredDatasetDict, score_dataset
from .summary import RunSummary
from .validate import parse_binary_verdict, parse_pair_scores

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BudgetExceededError",
    "CacheError",
    "CacheLockedError",
    "CircuitOpenError",
    "ConfigError",
    "DiskFullError",
    "HfJudgeError",
    "InterruptedRun",
    "Metric",
    "MissingColumnError",
    "ModelNotFoundError",
    "Output",
    "PromptFileError",
    "Recipe",
    "RunStopped",
    "RunSummary",
    "ScoredDatasetDict",
    "TemplateError",
    "UnknownMetricError",
    "available_metrics",
    "filter_by_scores",
    "load_metric",
    "load_recipe",
    "parse_binary_verdict",
    "parse_pair_scores",
    "push_scored",
    "score_dataset",
]
