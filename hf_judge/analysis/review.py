"""``sample_for_review``: which rows of a scored result are worth a person's label.

Strategies (``by``):

* ``uncertainty``: the judge's least certain rows: lowest ``<score>_confidence`` where the run asked for
  log-probabilities, else ``<metric>_p_positive`` nearest 0.5 for a verdict, else the score nearest the
  middle of its observed range;
* ``disagreement``: the rows a panel's judges (``<score>__<judge>``) or repeated samples
  (``<score>_samples``) disagree on most (the spread: max - min of their values);
* ``threshold``: the rows whose score lies nearest ``threshold``, where a filter's cut decides;
* ``stratified``: equal counts per score value (a value with too few rows gives its share to the others);
* ``random``: a uniform sample, the baseline.

Ties are broken by a seeded shuffle: the same result, strategy and seed give the same rows.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyarrow as pa
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from ..judging.ensemble import JUDGE_SEP

STRATEGIES = ("uncertainty", "disagreement", "threshold", "stratified", "random")
# the score's own companions shown to the reviewer beside the row's text (those the result has)
_COMPANIONS = ("_reason", "_expected", "_confidence", "_std")


def _numbers(d: Dataset, column: str) -> np.ndarray:
    arr = d.with_format("arrow")[column].combine_chunks()
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int64())
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise ConfigError(f"column {column!r} is {arr.type}, not numbers: name a score column (--score)")
    return np.asarray(arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False))


def _spread(d: Dataset, score: str) -> np.ndarray:
    judges = [c for c in d.column_names if c.startswith(f"{score}{JUDGE_SEP}")]
    if len(judges) >= 2:
        values = np.column_stack([_numbers(d, c) for c in judges])
    elif f"{score}_samples" in d.column_names:
        lists = d[f"{score}_samples"]
        width = max((len(v) for v in lists if v), default=0)
        values = np.full((len(d), width), np.nan)
        for i, v in enumerate(lists):
            for j, x in enumerate(v or []):
                if x is not None:
                    values[i, j] = float(x)
    else:
        raise ConfigError(
            f"--by disagreement needs several judgments of {score!r} per row: a panel (--models a,b) or samples "
            "(--samples 3); use --by uncertainty otherwise"
        )
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: nanmax warns, the NaN is what we want
        spread = np.nanmax(values, axis=1) - np.nanmin(values, axis=1)
    spread[np.sum(~np.isnan(values), axis=1) < 2] = np.nan  # one judgment: no disagreement to measure
    return spread


def priority(d: Dataset, score: str, by: str, threshold: float | None = None) -> tuple[np.ndarray, str]:
    """Per row, how much it needs a label (lower first; NaN: never picked) and what was read, for ``by``
    among uncertainty, disagreement, threshold and random (stratified picks by value, not by order).

    Example:
        >>> d = Dataset.from_dict({"S": [1, 5, 9, None]})
        >>> priority(d, "S", "threshold", 6)[0].tolist()
        [5.0, 1.0, 3.0, nan]
    """
    s = _numbers(d, score)
    if by == "threshold":
        if threshold is None:
            raise ConfigError("--by threshold needs the cut: --threshold 7 (the filter's threshold)")
        return np.abs(s - threshold), f"distance of {score} to {threshold:g}"
    if by == "disagreement":
        return -_spread(d, score), "the spread of the judges' (or samples') values"
    if by == "random":
        return np.where(np.isnan(s), np.nan, 0.0), "a uniform sample"
    base = score.partition(JUDGE_SEP)[0]
    confidence = f"{score}_confidence"
    p_positive = f"{base}_p_positive"
    if confidence in d.column_names:
        c = _numbers(d, confidence)
        return np.where(np.isnan(s), np.nan, c), f"{confidence} (lowest first)"
    if p_positive in d.column_names:
        return np.abs(_numbers(d, p_positive) - 0.5), f"{p_positive} nearest 0.5"
    present = s[~np.isnan(s)]
    if not len(present):
        return s, "no score"
    middle = (present.min() + present.max()) / 2
    return np.abs(s - middle), f"distance of {score} to the middle of its range ({middle:g}; no _confidence)"


def _stratified(s: np.ndarray, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` rows, as even across the score values as their counts allow, random within a value."""
    values = np.unique(s[~np.isnan(s)])
    pools = {v: list(rng.permutation(np.nonzero(s == v)[0])) for v in values}
    picked: list[int] = []
    while len(picked) < n and any(pools.values()):
        open_ = [v for v in values if pools[v]]
        share = max(1, (n - len(picked)) // len(open_))
        for v in open_:
            take = pools[v][: min(share, n - len(picked))]
            pools[v] = pools[v][len(take) :]
            picked += [int(i) for i in take]
            if len(picked) >= n:
                break
    return sorted(picked)


def sample_for_review(
    result: Dataset | DatasetDict,
    n: int,
    *,
    by: str = "uncertainty",
    score: str | None = None,
    split: str | None = None,
    threshold: float | None = None,
    seed: int = 0,
    context: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The ``n`` rows to label first, in the labels layout (``split``, ``row``, ``score``, ``label`` null,
    ``note``, ``reviewer``) plus context for the reviewer: the row's text columns (or ``context``), the
    judge's score and its reason, expected score and confidence where the result has them. Rows without a
    score are never picked. ``by``: one of uncertainty, disagreement, threshold, stratified, random.

    Example:
        >>> rows = sample_for_review(scored, 200, by="threshold", score="QA_Correctness", threshold=7)  # doctest: +SKIP
        >>> write_labels(rows, "to-label.jsonl")  # doctest: +SKIP
    """
    if by not in STRATEGIES:
        raise ConfigError(f"by must be one of {', '.join(STRATEGIES)}, got {by!r}")
    if n < 1:
        raise ConfigError(f"n must be 1 or more, got {n}")
    dd = result if isinstance(result, DatasetDict) else DatasetDict({split or "train": result})
    names = [k for k in dd if k != "errors"]
    if split is None and len(names) != 1:
        raise ConfigError(f"the result has splits {', '.join(names)}: name one (split=..., --split)")
    split = split or names[0]
    if split not in names:
        raise ConfigError(f"no split {split!r}; the result has: {', '.join(names)}")
    d = dd[split]
    score = score or _only_score(d)
    if score not in d.column_names:
        raise ConfigError(f"no column {score!r} in split {split!r}; it has: {', '.join(d.column_names)}")
    rng = np.random.default_rng(seed)
    s = _numbers(d, score)
    if by == "stratified":
        rows = _stratified(s, n, rng)
    else:
        key, _ = priority(d, score, by, threshold)
        shuffle = rng.permutation(len(d))  # ties in a random order, then by the key
        order = shuffle[np.argsort(key[shuffle], kind="stable")]
        order = order[~np.isnan(key[order])]
        rows = sorted(int(i) for i in order[:n])
    return _records(d, split, score, rows, context)


def _only_score(d: Dataset) -> str:
    ints = [c for c, f in d.features.items() if getattr(f, "dtype", None) == "int64" and JUDGE_SEP not in c]
    if len(ints) == 1:
        return ints[0]
    raise ConfigError(f"name the score column to review (score=..., --score {ints[0] if ints else 'QA_Correctness'})")


def _records(d: Dataset, split: str, score: str, rows: list[int], context: list[str] | None) -> list[dict[str, Any]]:
    base = score.partition(JUDGE_SEP)[0]
    companions = [f"{score}{c}" for c in _COMPANIONS] + [f"{base}_p_positive"]
    if context is None:
        context = [c for c, f in d.features.items() if getattr(f, "dtype", None) in ("string", "large_string")]
        # the row's own text, not the judges' (another metric's reason, a panel judge's)
        context = [c for c in context if not c.startswith(base) and not c.endswith("_reason") and JUDGE_SEP not in c]
    missing = [c for c in context if c not in d.column_names]
    if missing:
        raise ConfigError(f"no context column {missing[0]!r}; the result has: {', '.join(d.column_names)}")
    shown = [*context, score, *[c for c in companions if c in d.column_names and c not in context]]
    picked = d.select(rows).select_columns(list(dict.fromkeys(shown))).to_list()
    return [
        {"split": split, "row": r, "score": score, "label": None, "note": None, "reviewer": None, **values}
        for r, values in zip(rows, picked, strict=True)
    ]
