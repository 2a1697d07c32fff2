"""The groups of ``--by COLUMN`` for ``choose-judge`` and ``agreement``: which rows each value of a column holds,
named as the scores by group name them (:mod:`hf_judge.results.groups`: text as it is, a number or boolean as
Arrow writes it, a ``ClassLabel`` by its name, a null as ``(null)``), the most rows first, capped.

Each group's figures are those of the command run on the group's rows alone (the rows in their order, the same
bootstrap seed): ``hf-judge filter --keep-group COLUMN=VALUE`` then the command gives the same numbers.

Example:
    >>> from datasets import Dataset
    >>> ds = Dataset.from_dict({"subject": ["math", "code", "math", None]})
    >>> found = group_rows(ds, "subject", "the labelled rows")
    >>> [(g, rows) for g, rows in found.groups], found.more
    ([('math', [0, 2]), ('(null)', [3]), ('code', [1])], 0)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset

from ..errors import ConfigError
from ..tables import arrow_table

MAX_GROUPS = 20  # groups whose figures are computed and shown (the scores by group's cap); the rest summed up
TERMINAL_GROUPS = 10  # groups a terminal table shows
NULL_GROUP = "(null)"


@dataclass
class Groups:
    """The groups of a column: ``groups`` (name, the rows' positions), the most rows first; ``more`` groups past
    the cap, holding ``more_rows`` rows."""

    by: str
    groups: list[tuple[str, list[int]]] = field(default_factory=list)
    more: int = 0
    more_rows: int = 0


def check_by(columns: Iterable[str], by: str, where: str, examples: str = "its category, subset or source") -> None:
    """A ConfigError unless ``by`` is one of ``columns``, with a did-you-mean (the scores by group's words).

    Example:
        >>> check_by(["category", "question"], "categroy", "the labelled rows")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: no column 'categroy' to group by in the labelled rows; did you mean 'category'? ...
    """
    columns = list(columns)
    if by in columns:
        return
    close = difflib.get_close_matches(by, columns, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        f"no column {by!r} to group by in {where}; {hint}Columns: {', '.join(columns) or '(none)'} "
        f"(--by COLUMN names a column of the dataset, such as {examples})"
    )


def group_rows(d: Dataset, by: str, where: str, max_groups: int = MAX_GROUPS) -> Groups:
    """The rows of each value of ``d[by]`` (checked with :func:`check_by`), the most rows first, then by name; at
    most ``max_groups`` groups, the rest counted in ``more`` / ``more_rows``."""
    check_by(d.column_names, by, where)
    names = _names(d, by)
    arr = arrow_table(d).column(by).combine_chunks()
    if names is not None and pa.types.is_integer(arr.type):
        arr = pa.array(names, pa.string()).take(arr)
    elif pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    try:
        keys = pc.fill_null(arr.cast(pa.string()), NULL_GROUP).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ConfigError(
            f"a group column must hold text, numbers, booleans or dates; {by!r} holds {arr.type}: group by a "
            "column of categories, subsets or sources"
        ) from None
    values, inverse = np.unique(keys, return_inverse=True)
    rows = [np.flatnonzero(inverse == i).tolist() for i in range(len(values))]
    order = sorted(range(len(values)), key=lambda i: (-len(rows[i]), str(values[i])))
    found = Groups(by, [(str(values[i]), rows[i]) for i in order[:max_groups]])
    found.more = max(0, len(order) - max_groups)
    found.more_rows = sum(len(rows[i]) for i in order[max_groups:])
    return found


def more_text(more: int, more_rows: int, noun: str = "rows") -> str:
    """``3 more groups (120 rows)``, as the scores by group sum up the groups they leave out; "" for none.

    Example:
        >>> more_text(3, 120), more_text(1, 4, "pairs"), more_text(0, 0)
        ('3 more groups (120 rows)', '1 more group (4 pairs)', '')
    """
    if not more:
        return ""
    return f"{more:,} more group{'s' if more != 1 else ''} ({more_rows:,} {noun})"


def _names(d: Dataset, by: str) -> list[str] | None:
    feature = d.features.get(by)
    names = getattr(feature, "names", None)
    return list(names) if isinstance(names, list) and hasattr(feature, "int2str") else None
