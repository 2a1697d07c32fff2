"""Score distributions over every judgment a row got: each sample of each judge, pooled, per judge.

With ``samples=K`` a row's score column holds the mean of its K samples (a float between the values a judge can
give) and ``<column>_samples`` holds each sample; a panel adds ``<column>__<judge>`` per judge. A histogram of the
mean smears a 1-10 scale into bins and hides how often a judge changes its mind, so the report page and the
run's pictures also count the values themselves: per score column, every sample of every judge, per judge
(where judges differ in leniency, the bars say so) and pooled, with the spread of a row's samples (how many rows
got the same value from every sample, and by how much the others differ). A pairwise judge's winner and its
``_disagree`` flag (the two orders chose different winners: position bias) count the same way, per sample.

Read from the columns the run wrote (``hf_judge.judging.ensemble``); nothing is computed twice elsewhere: the
page and the PNGs draw what :func:`pooled_distributions` returns.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..judging.ensemble import JUDGE_SEP

if TYPE_CHECKING:
    from datasets import Dataset

SAMPLES = "_samples"
# columns derived from a judgment (a spread, a vote, a probability-weighted value): not judgments to count
_DERIVED = ("_std", "_majority", "_expected", "_confidence", "_p_positive", "_lc", "_reason", "_explanation")
MAX_VALUES = 40  # distinct values past which a column is not counted value by value (a float score)


def _judgment(base: str, kind: pa.DataType) -> bool:
    """Whether a column (its name without the judge and ``_samples``) holds a judgment to count per value."""
    if base.endswith(_DERIVED) or "_swapped" in base:
        return False
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return base.endswith("_winner")  # a pairwise judge's verdict: "1", "2", "tie"
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)


def _sources(d: Dataset, judges: Collection[str] | None = None) -> dict[str, dict[str, tuple[str, bool]]]:
    """Score column -> judge ("" for a lone judge) -> (the column holding its judgments, whether a list of
    samples); a judge's samples where the run drew several, else its one value (a panel without samples).
    ``judges``: the panel's judges, where known: a ``<column>__<name>`` column of another name is a column of
    its own (a user's ``a__b``), not a judge's."""
    schema = d.with_format("arrow")[:0].schema
    found: dict[str, dict[str, tuple[str, bool]]] = {}
    for field in schema:
        base, _, judge = field.name.partition(JUDGE_SEP)
        if judge and judges is not None and judge not in judges:
            base, judge = field.name, ""
        is_list = pa.types.is_list(field.type) or pa.types.is_large_list(field.type)
        if is_list and base.endswith(SAMPLES):
            base = base.removesuffix(SAMPLES)
            if _judgment(base, field.type.value_type):
                found.setdefault(base, {})[judge] = (field.name, True)
        elif not is_list and judge and _judgment(base, field.type):
            found.setdefault(base, {}).setdefault(judge, (field.name, False))
    # a lone judge's one value per row is the column's own histogram already: only samples or a panel add to it
    return {b: js for b, js in found.items() if len(js) > 1 or any(s for _, s in js.values())}


def _key(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _order(keys: list[str]) -> list[str]:
    try:
        return sorted(keys, key=float)
    except ValueError:
        return sorted(keys)


def _counts(values: pa.Array) -> dict[str, int]:
    found = {_key(x["values"]): x["counts"] for x in pc.value_counts(values).to_pylist() if x["values"] is not None}
    return {k: found[k] for k in _order(list(found))}


def _spread(values: pa.Array, parents: np.ndarray, rows: int) -> dict[str, Any]:
    """How a row's samples differ: rows with two or more, those where every sample gave the same value, and the
    rows by their samples' range (max - min; numbers and booleans)."""
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        codes = np.asarray(pc.dictionary_encode(values).indices.to_numpy(zero_copy_only=False), dtype=np.float64)
        numeric = False
    else:
        codes = np.asarray(values.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        numeric = True
    codes, parents = codes[valid], parents[valid]
    per_row = np.bincount(parents, minlength=rows)
    lo = np.full(rows, np.inf)
    hi = np.full(rows, -np.inf)
    np.minimum.at(lo, parents, codes)
    np.maximum.at(hi, parents, codes)
    multi = per_row >= 2
    out: dict[str, Any] = {"multi": int(multi.sum()), "agree": int((multi & (lo == hi)).sum())}
    if numeric and out["multi"]:
        ranges = np.round(hi[multi] - lo[multi], 6)
        keys, counts = np.unique(ranges, return_counts=True)
        out["spread"] = {_key(float(k)): int(c) for k, c in zip(keys, counts, strict=True)}
    return out


def _judge(table: pa.Table, column: str, is_list: bool) -> dict[str, Any] | None:
    """One judge's counts of one score column: per value, over every sample of every row."""
    arr = table.column(column).combine_chunks()
    rows = len(arr)
    if is_list:
        values = pc.list_flatten(arr)
        parents = np.asarray(pc.list_parent_indices(arr).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        values, parents = arr, np.arange(rows, dtype=np.int64)
    if pa.types.is_floating(values.type) and len(pc.unique(pc.drop_null(values))) > MAX_VALUES:
        return None  # a continuous score: its histogram is the column's own, binned
    hist = _counts(values)
    out = {"hist": hist, "values": sum(hist.values()), "missing": values.null_count, "rows": rows}
    if is_list:
        out.update(_spread(values, parents, rows))
    return out


def pooled_distributions(d: Dataset, judges: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """Score column -> its judgments counted per value: ``{"judges": {judge: {"hist": {value: count}, "values",
    "missing", "rows"[, "multi", "agree", "spread"]}}, "hist": {value: count} (every judge's), "values",
    "samples": whether from samples}``, for the columns a run with ``samples`` > 1 or a panel wrote ({} else).
    ``multi``: rows with two or more samples; ``agree``: those whose samples all gave one value; ``spread``: rows
    by their samples' range. Judge ``""``: a run with one judge. ``judges``: the panel's judge names, where the
    run's summary says them (only their ``<column>__<judge>`` columns are a judge's).

    Example:
        >>> from datasets import Dataset
        >>> d = Dataset.from_dict({"QA_Clarity": [7.5, 8.0], "QA_Clarity_samples": [[7, 8], [8, 8]]})
        >>> p = pooled_distributions(d)["QA_Clarity"]
        >>> p["hist"], p["judges"][""]["agree"], p["judges"][""]["spread"]
        ({'7': 1, '8': 3}, 1, {'0': 1, '1': 1})
    """
    sources = _sources(d, judges)
    if not sources:
        return {}
    table = d.with_format("arrow")[:]
    out: dict[str, dict[str, Any]] = {}
    for base, judges in sources.items():
        per = {j: _judge(table, col, is_list) for j, (col, is_list) in judges.items()}
        if any(v is None for v in per.values()):
            continue
        counted = {j: v for j, v in per.items() if v is not None}
        pooled: dict[str, int] = {}
        for v in counted.values():
            for k, n in v["hist"].items():
                pooled[k] = pooled.get(k, 0) + n
        out[base] = {
            "judges": counted,
            "hist": {k: pooled[k] for k in _order(list(pooled))},
            "values": sum(pooled.values()),
            "samples": any(is_list for _, is_list in judges.values()),
        }
    return out
