"""The ``errors`` split's schema: one row per failed (split, row, metric)."""

from __future__ import annotations

import logging

from datasets import Features, Value

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
