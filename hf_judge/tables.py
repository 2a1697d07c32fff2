"""Arrow tables of ``datasets`` objects, read without the copies ``with_format`` makes."""

from __future__ import annotations

import pyarrow as pa
from datasets import Dataset


def arrow_table(d: Dataset) -> pa.Table:
    """A Dataset's rows as one Arrow table: its own table where it has no indices mapping (no copy; a result, a
    ``Dataset(table)``), else the rows its mapping picks (``d.with_format("arrow")[:]``, which deep-copies the
    Dataset first: ~0.5 ms each, which choose-judge's figures, read per judge and per group, paid dozens of times).

    Example:
        >>> from datasets import Dataset
        >>> d = Dataset.from_dict({"x": [1, 2, 3]})
        >>> arrow_table(d).column("x").to_pylist(), arrow_table(d.select([2, 0])).column("x").to_pylist()
        ([1, 2, 3], [3, 1])
    """
    # `_indices`: datasets has no public test for an indices mapping
    return d.data.table if d._indices is None else d.with_format("arrow")[:]
