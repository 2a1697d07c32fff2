"""A labels file counted per row: what ``choose_judge`` ranks judges against, read in one vectorised pass.

:func:`count_labels` reads a labels file (the layout of :mod:`hf_judge.analysis.labels`) into columns with
pyarrow's JSON reader, checks every label by its kind's rule (:func:`~hf_judge.analysis.label_rules.check_labels`,
on the distinct values), and counts per row how many annotators gave each value, a reviewer once per row (their
last label of it). Time and memory grow with the file, never with rows x reviewers: a million lines of 25,000
reviewers are a few columns of integers and a rows x values matrix.

What pyarrow cannot type (labels 1, 2 and "tie" in one column, a row written as text, a bad line), a CSV file and
labels on the Hub are read line by line (:func:`~hf_judge.analysis.labels.label_entries`) into the same columns;
a bad line is refused there, with its line, and so is a label the kind's rule refuses.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..errors import ConfigError
from .label_rules import check_labels
from .labels import check_entry, label_entries

Source = str | os.PathLike | Sequence[Mapping[str, Any]]
# a number a label may be: beyond it a float holds no integer exactly (check_entry's limit)
_LARGEST = 2**53
_LABEL_TYPES = (pa.types.is_null, pa.types.is_boolean, pa.types.is_int64, pa.types.is_float64, pa.types.is_string)


@dataclass
class LabelCounts:
    """The labels of one split, counted per row: ``rows`` (the labelled rows, sorted), ``values`` (the distinct
    labels as the kind reads them: bools, "1"/"2"/"tie", floats), ``counts`` (rows x values: how many annotators
    gave each value; a reviewer counts once per row), ``annotators`` (the reviewers named, plus the most unnamed
    labels of one row: each unnamed line is an annotator of its own) and ``entries`` (the labelled lines read)."""

    split: str
    rows: np.ndarray
    values: list[Any]
    counts: np.ndarray
    annotators: int
    entries: int

    def majority(self) -> list[Any]:
        """Each row's most given label; None where two values tie for it (the people split on that row)."""
        if not len(self.values):
            return [None] * len(self.rows)
        top = self.counts.max(axis=1)
        tied = (self.counts == top[:, None]).sum(axis=1) > 1
        pick = self.counts.argmax(axis=1)
        return [None if t else self.values[int(j)] for j, t in zip(pick, tied, strict=True)]

    @property
    def several(self) -> bool:
        """Whether some row has two labels or more (a human ceiling to show)."""
        return bool(len(self.counts)) and int(self.counts.sum(axis=1).max()) >= 2


@dataclass
class _Columns:
    """The labelled entries as codes: split, row, label (an index into ``labels``, the distinct raw values),
    reviewer (an index, -1 where none is named); ``places``: where each distinct label was first met, where the
    reader knew it (the line-by-line reader; else a second pass finds it, for a refusal only)."""

    splits: list[str]
    split: np.ndarray
    row: np.ndarray
    labels: list[Any]
    label: np.ndarray
    reviewer: np.ndarray
    places: list[str] | None = None


def count_labels(
    source: Source,
    kind: str,
    *,
    positive: Any = None,
    threshold: float | None = None,
    token: str | None = None,
) -> LabelCounts:
    """The labels of ``source`` (a labels file, local or on the Hub, or a list of entries in its layout) counted
    per row, each checked by ``kind``'s rule (``positive``, ``threshold``: as
    :func:`~hf_judge.analysis.label_rules.check_labels` reads them) before anything else is done with them. One
    split only: labels of several are a ConfigError. A reviewer who labels a row twice counts once, with the
    later label.

    Example:
        >>> c = count_labels([{"split": "train", "row": 0, "label": "A", "reviewer": "ana"},
        ...                   {"split": "train", "row": 0, "label": 2, "reviewer": "bo"},
        ...                   {"split": "train", "row": 0, "label": 1, "reviewer": "bo"}], "pairwise")
        >>> c.rows.tolist(), c.values, c.counts.tolist(), c.annotators, c.majority()
        ([0], ['1'], [[2]], 2, ['1'])
    """
    cols = _columns(source, token)
    if len(cols.splits) > 1:
        raise ConfigError(f"the labels name several splits ({', '.join(sorted(cols.splits))}): give one split's labels")
    _, first = np.unique(cols.label, return_index=True)  # each distinct value's first entry: where it is
    subject = "the labels file" if isinstance(source, (str, os.PathLike)) else "the list of labels"

    def where(j: int) -> str:
        return cols.places[j] if cols.places is not None else _place(source, int(first[j]), token)

    read = check_labels(cols.labels, kind, positive=positive, threshold=threshold, subject=subject, where=where)
    values = sorted(set(read), key=lambda v: (isinstance(v, str), v))
    index = {v: i for i, v in enumerate(values)}
    to_value = np.array([index[v] for v in read], dtype=np.int64)
    keep = _last_of_each_reviewer(cols.row, cols.reviewer)
    rows, at = np.unique(cols.row[keep], return_inverse=True)
    counts = np.zeros((len(rows), len(values)), dtype=np.int64)
    np.add.at(counts, (at, to_value[cols.label[keep]]), 1)
    given = counts.sum(axis=0) > 0  # a value only a reviewer's earlier label gave is no value of theirs
    counts, values = counts[:, given], [v for v, g in zip(values, given, strict=True) if g]
    unnamed = cols.reviewer[keep] < 0
    most_unnamed = int(np.bincount(at[unnamed], minlength=len(rows)).max()) if unnamed.any() else 0
    named = len(np.unique(cols.reviewer[cols.reviewer >= 0]))
    split = cols.splits[0] if cols.splits else "train"
    return LabelCounts(split, rows, values, counts, named + most_unnamed, len(cols.row))


def _last_of_each_reviewer(row: np.ndarray, reviewer: np.ndarray) -> np.ndarray:
    """The entries that count: each named reviewer's last label of a row, and every unnamed one."""
    keep = reviewer < 0
    named = np.nonzero(~keep)[0]
    if len(named):
        key = row[named] * (int(reviewer.max()) + 1) + reviewer[named]
        _, last = np.unique(key[::-1], return_index=True)
        keep[named[len(named) - 1 - last]] = True
    return keep


def _columns(source: Source, token: str | None) -> _Columns:
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if p.is_file() and p.suffix.lower() != ".csv":
            fast = _arrow_columns(p)
            if fast is not None:
                return fast
    return _entry_columns(_entries(source, token))


def _entries(source: Source, token: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(source, (str, os.PathLike)):
        yield from label_entries(os.fspath(source), token=token)
        return
    for i, obj in enumerate(source):
        where = f"labels[{i}]"
        if not isinstance(obj, Mapping):
            raise ConfigError(f"{where}: a {type(obj).__name__}, not a mapping like {{'split': 'train', 'row': 3, "
                              "'label': 1}")  # fmt: skip
        entry = check_entry(dict(obj), where)
        if entry is not None:
            yield where, entry


def _place(source: Source, index: int, token: str | None) -> str:
    """Where the ``index``-th labelled entry is (a second pass, taken only to name a refused label)."""
    for i, (where, _) in enumerate(_entries(source, token)):
        if i == index:
            return where
    return f"entry {index + 1}"


def _entry_columns(entries: Iterable[tuple[str, dict[str, Any]]]) -> _Columns:
    """Checked entries as codes, one at a time (a value's code, not the value, is kept per line), and where each
    distinct label was first met."""
    splits: dict[str, int] = {}
    reviewers: dict[str, int] = {}
    labels: dict[tuple[type, Any], int] = {}
    places: list[str] = []
    split, row, label, reviewer = array("q"), array("q"), array("q"), array("q")
    for where, e in entries:
        split.append(splits.setdefault(e["split"], len(splits)))
        row.append(e["row"])
        key = (type(e["label"]), e["label"])
        if key not in labels:
            labels[key] = len(labels)
            places.append(where)
        label.append(labels[key])
        who = e["reviewer"]
        reviewer.append(-1 if who is None else reviewers.setdefault(who, len(reviewers)))
    return _Columns(
        list(splits), np.asarray(split, dtype=np.int64), np.asarray(row, dtype=np.int64),
        [v for _, v in labels], np.asarray(label, dtype=np.int64), np.asarray(reviewer, dtype=np.int64), places,
    )  # fmt: skip


def _arrow_columns(path: Path) -> _Columns | None:
    """The file's entries read by pyarrow at once; None where a line needs the line-by-line reader (a type
    pyarrow cannot hold in one column, or anything check_entry would refuse: it then names the line)."""
    known = pa.schema([("split", pa.string()), ("row", pa.int64()), ("reviewer", pa.string())])
    options = pj.ParseOptions(explicit_schema=known, unexpected_field_behavior="infer")
    try:
        table = pj.read_json(path, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError):
        return None
    if "label" not in table.column_names:
        return None
    label = table.column("label").combine_chunks()
    if not any(is_type(label.type) for is_type in _LABEL_TYPES):
        return None
    given = pc.is_valid(label)
    table, label = table.filter(given), label.filter(given)
    split, row = table.column("split").combine_chunks(), table.column("row").combine_chunks()
    if split.null_count or row.null_count or (len(row) and pc.min(row).as_py() < 0) or _unheld(label):
        return None
    split_codes, label_codes = split.dictionary_encode(), label.dictionary_encode()
    reviewer = table.column("reviewer").combine_chunks().dictionary_encode()
    return _Columns(
        split_codes.dictionary.to_pylist(),
        _codes(split_codes),
        np.asarray(row.to_numpy(zero_copy_only=False), dtype=np.int64),
        label_codes.dictionary.to_pylist(),
        _codes(label_codes),
        _codes(reviewer),
    )


def _unheld(label: pa.Array) -> bool:
    """Numbers check_entry refuses (not finite; beyond 2**53): the line-by-line reader names their line."""
    if not (pa.types.is_int64(label.type) or pa.types.is_float64(label.type)) or not len(label):
        return False
    x = np.asarray(label.to_numpy(zero_copy_only=False), dtype=np.float64)
    return bool((~np.isfinite(x)).any() or (np.abs(x) > _LARGEST).any())


def _codes(encoded: pa.DictionaryArray) -> np.ndarray:
    return np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
