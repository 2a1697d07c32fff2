"""Which columns of a scored dataset are scores: the numbers and booleans that thresholds, the card's tables
and the pictures apply to."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasets import Dataset

SCORE_TYPES = ("int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")
# a row's number while filter_by_scores filters (to renumber the errors split): never a score column
ROW_NUMBER = "__hf_judge_row__"


def score_columns(ds: Dataset) -> list[str]:
    """Numeric and boolean columns: the ones thresholds apply to.

    Example:
        >>> from datasets import Dataset
        >>> score_columns(Dataset.from_dict({"text": ["a"], "QA_Clarity": [7], "Binary": [True]}))
        ['QA_Clarity', 'Binary']
    """
    return [n for n, f in ds.features.items() if getattr(f, "dtype", None) in SCORE_TYPES and n != ROW_NUMBER]
