"""Scoring one batch of rows with the row core: the driver a Ray actor uses.

:func:`score_batch` runs :class:`~hf_judge.engine.pipeline.SplitRun` over a batch of
rows (a dict of columns, as Ray Data's ``map_batches`` hands it) and returns the
score columns and the error rows. Everything a row's judging needs (samples, a
panel's judges, logprobs) is the core's, so a batch scores as the whole
Dataset would. With a store opened ``shared=True`` the core claims each key
before sending it (see :meth:`ReplyStore.claim`): of several processes
scoring one dataset only one sends each distinct request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from ..judging.ensemble import Layout
from ..store.replies import ReplyStore
from ..transport.client import JudgeClient
from .core import Plan
from .pipeline import SplitRun


async def score_batch(
    batch: dict[str, Sequence[Any]],
    plans: Sequence[Plan],
    client: JudgeClient,
    store: ReplyStore | None,
    *,
    split: str = "train",
    first_row: int = 0,
    max_input_chars: int | None = None,
    token_columns: bool = False,
    read_batch: int = 128,
    judges: Sequence[JudgeClient] = (),
    layout: Layout | None = None,
) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """Score a batch of rows in the client's event loop: (score columns in row order, error rows).

    ``batch`` maps column names to equal-length lists; error rows count rows
    from ``first_row``. ``judges`` (a panel's clients, the first being
    ``client``) and ``layout`` (samples, judges, aggregator) are as
    :class:`~hf_judge.engine.pipeline.SplitRun` takes them.

    Example:
        >>> batch = {"question": ["2+2?"], "answer": ["4"]}
        >>> cols, errors = loop.run(score_batch(batch, plans, client, store))  # doctest: +SKIP
    """
    needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
    ds = Dataset.from_dict({c: list(batch[c]) for c in needed})
    n = len(ds)
    run = SplitRun(
        split,
        ds,
        plans,
        client,
        store,
        window=max(n, 1),  # the whole batch: nothing consumes it before it is done
        read_batch=read_batch,
        max_input_chars=max_input_chars,
        token_columns=token_columns,
        judges=judges,
        layout=layout,
    )
    await run.feed()
    if run.failure is not None:
        raise run.failure
    cols = {c: [run.values[r].get(c) for r in range(n)] for c in run.columns}
    errors = run.in_order(run.errors)
    for e in errors:
        e["row"] += first_row
    return cols, errors
