"""Keeping or dropping groups of rows by the value of a column: ``filter_by_scores(ds, keep_groups={"subject":
["algebra"]})``, ``hf-judge filter out/ --keep-group subject=algebra,geometry`` (``drop_groups`` /
``--drop-group``: the other way). A value is named as the scores by group name it (:mod:`hf_judge.results.groups`):
text as it is, a number or boolean as text (``3``, ``true``), a ``ClassLabel`` by its name, a null as ``(null)``.

Example:
    >>> from datasets import Dataset
    >>> ds = Dataset.from_dict({"subject": ["algebra", "geometry", "algebra"], "s": [1, 2, 3]})
    >>> list(filter_groups(ds, group_rule({"subject": ["algebra"]}, None))["s"])
    [1, 3]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from .errors_split import ERRORS_SPLIT
from .groups import SLICE, GroupValues, check_group_column, class_names, group_labels

RULES = ("keep_groups", "drop_groups")


def group_name(value: Any) -> str:
    """A value as a group's name (the scores by group's, and what ``--keep-group`` compares with).

    Example:
        >>> group_name("algebra"), group_name(3), group_name(True), group_name(None)
        ('algebra', '3', 'true', '(null)')
    """
    if isinstance(value, str):
        return value
    try:
        return str(group_labels(pa.array([value])).to_pylist()[0])
    except (pa.ArrowException, ConfigError):
        raise ConfigError(f"a group is named by a text, a number or a boolean, got {value!r}") from None


def group_rule(keep: Mapping[str, Any] | None, drop: Mapping[str, Any] | None) -> dict[str, dict[str, list[str]]]:
    """``{"keep_groups": {column: [names]}, "drop_groups": {...}}`` from the two arguments (a column's values a
    list, or one value), as the summary records it; ``{}`` for none.

    Example:
        >>> group_rule({"subject": "algebra"}, {"level": [3, 4]})
        {'keep_groups': {'subject': ['algebra']}, 'drop_groups': {'level': ['3', '4']}}
    """
    out = {}
    for key, given in zip(RULES, (keep, drop), strict=True):
        if not given:
            continue
        if not isinstance(given, Mapping):
            raise ConfigError(f"{key} maps a column to its values: {key}={{'subject': ['algebra', 'geometry']}}")
        rule = {}
        for column, values in given.items():
            listed = [values] if isinstance(values, (str, int, float, bool)) or values is None else list(values)
            if not listed:
                raise ConfigError(f"{key}[{column!r}] names no value: {key}={{{column!r}: ['a value']}}")
            rule[str(column)] = list(dict.fromkeys(group_name(v) for v in listed))
        out[key] = rule
    return out


def filter_groups(ds: Dataset | DatasetDict, rule: Mapping[str, Mapping[str, list[str]]]) -> Dataset | DatasetDict:
    """The rows of ``ds`` whose groups ``rule`` (:func:`group_rule`'s) keeps: every ``keep_groups`` column holds
    one of its values, no ``drop_groups`` column one of its. A ``DatasetDict``'s ``errors`` split passes as it is
    (:func:`~hf_judge.results.filter.filter_by_scores` then keeps those of the rows kept).
    A column missing from a split, or a value no split holds, is refused before any row is filtered."""
    splits = {"train": ds} if isinstance(ds, Dataset) else {k: d for k, d in ds.items() if k != ERRORS_SPLIT}
    columns = sorted({c for key in RULES for c in rule.get(key, {})})
    for column in columns:
        seen = GroupValues(column)
        for split, d in splits.items():
            check_group_column(d.column_names, column, f"split {split!r} (the groups to keep or drop)")
            names = class_names(d.features[column])
            table = d.select_columns([column]).with_format("arrow")
            for start in range(0, len(d), SLICE):
                seen.add(table[start : start + SLICE][column], names)
        for key in RULES:
            seen.check(rule.get(key, {}).get(column, []), f"{key}[{column!r}]")
    if isinstance(ds, Dataset):
        return _filter(ds, rule, columns)
    return DatasetDict({k: d if k == ERRORS_SPLIT else _filter(d, rule, columns) for k, d in ds.items()})


def _filter(d: Dataset, rule: Mapping[str, Mapping[str, list[str]]], columns: list[str]) -> Dataset:
    schema = d.features.arrow_schema
    names = {c: class_names(d.features[c]) for c in columns}
    keep = {c: pa.array(v, pa.string()) for c, v in rule.get("keep_groups", {}).items()}
    drop = {c: pa.array(v, pa.string()) for c, v in rule.get("drop_groups", {}).items()}

    def kept(*values: Iterable[Any]) -> list[bool]:
        mask = None
        for c, vs in zip(columns, values, strict=True):
            labels = group_labels(pa.array(list(vs), schema.field(c).type), names[c])
            parts = [pc.is_in(labels, value_set=keep[c])] if c in keep else []
            parts += [pc.invert(pc.is_in(labels, value_set=drop[c]))] if c in drop else []
            for part in parts:
                mask = part if mask is None else pc.and_(mask, part)
        assert mask is not None  # filter_groups filters by one column at least
        return mask.to_pylist()

    return d.filter(kept, batched=True, input_columns=columns, desc="Filtering groups")
