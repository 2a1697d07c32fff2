"""The ``errors`` split's schema: one row per failed (split, row, metric)."""

from __future__ import annotations

import logging

from datasets import Dataset, Features, Value

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


def errors_dataset(errors: list[dict]) -> Dataset:
    """The ``errors`` split of these error rows (with its columns when there are none).

    Example:
        >>> errors_dataset([]).column_names
        ['split', 'row', 'metric', 'kind', 'message', 'raw', 'attempts']
    """
    if errors:
        return Dataset.from_list(errors, features=ERROR_FEATURES)
    return Dataset.from_dict({k: [] for k in ERROR_FEATURES}, features=ERROR_FEATURES)
