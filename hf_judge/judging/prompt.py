"""A row's prompt: its template values, and the messages of each request (both orders of a swapped pairwise
judge).

The one code path from a row to the messages sent: the row core (:class:`hf_judge.engine.core.RowCore`) sends
what it gives, and the report page and ``hf-judge show-prompt`` rebuild a row's prompt with it, so what they
show is what was sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ErrorKind
from .images import ImageValueError, image_urls
from .metrics import Metric, MetricKind
from .render import format_value


class NoRequest(Exception):
    """A row sends no request for a metric: its error row's ``kind`` and ``message``."""

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def prompt_values(
    metric: Metric, columns: Mapping[str, str | None], batch: Mapping[str, Any], i: int, images: Iterable[str] = ()
) -> dict[str, Any]:
    """The template values of row ``i`` of ``batch`` (column -> values) for ``metric``; ``columns``: variable ->
    column (None: an optional variable without one). Raises :class:`NoRequest` for a row that sends nothing.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> prompt_values(load_metric("Q_Clarity"), {"instruction": "q"}, {"q": [3]}, 0)
        {'instruction': '3'}
    """
    values: dict[str, Any] = {}
    for var, col in columns.items():
        v = batch[col][i] if col is not None else None
        if v is None and var not in metric.optional:
            raise NoRequest(ErrorKind.NULL_INPUT, f"column {col!r} is null in this row; nothing was sent")
        if var in images and v is not None:
            try:
                values[var] = image_urls(v)
            except ImageValueError as e:
                raise NoRequest(ErrorKind.BAD_IMAGE, f"column {col!r}: {e}; nothing was sent") from None
        else:
            values[var] = format_value(v)
    return values


def request_messages(metric: Metric, values: dict[str, Any], images: Iterable[str] = ()) -> list[list[dict]]:
    """The messages of each request for one row's ``values``: one list, or two for a pairwise judge asked in
    both orders (the second with the swapped variables' values exchanged). Raises ``TemplateError``.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> len(request_messages(load_metric("Q_Clarity"), {"instruction": "Why?"}))
        1
    """
    orders = [values]
    if metric.kind == MetricKind.PAIRWISE and metric.swap:
        a, b = metric.swap
        orders.append({**values, a: values[b], b: values[a]})
    images = frozenset(images)
    return [metric.messages(vals, images) for vals in orders]
