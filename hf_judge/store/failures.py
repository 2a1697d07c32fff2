"""Invalid replies kept in the reply store: a reply that failed validation after every attempt was paid for, and
at temperature 0 the same request brings the same reply back, so it is kept as the request's outcome and replayed
by the next run as the same error row (kind, message, raw reply, attempts) without a request. ``retry_errors``
(``--retry-errors``) sends such requests again.

A kept failure sits in the ``replies`` table under a key of its own (:func:`failure_key`, derived from the request's
key), its content a JSON record (:func:`failure_record`): a version that does not know of them never looks one up,
and a valid reply stored later under the request's own key is found first. Only what a reply said is kept
(:data:`KEPT_KINDS`): a timeout, a connection failure, an HTTP error or a reply that is no chat completion is
sent again by the next run, as before.

Example:
    >>> record = failure_record("out_of_range", "score 11 is over 10", '{"score": 11}', 4, None)
    >>> read_failure(record)["kind"], read_failure("a reply")
    ('out_of_range', None)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ErrorKind

if TYPE_CHECKING:
    from .replies import ReplyStore

# what a reply said, after every attempt: kept and replayed (the rest is sent again by the next run)
KEPT_KINDS = frozenset(
    {
        ErrorKind.INVALID_JSON,
        ErrorKind.SCHEMA,
        ErrorKind.OUT_OF_RANGE,
        ErrorKind.TRUNCATED,
        ErrorKind.EMPTY,
        ErrorKind.UNPARSEABLE,
        ErrorKind.CONTENT_FILTER,
    }
)
_MARK = "hf_judge.failed_reply"  # the record's first key: no valid reply of a metric has it


def failure_key(key: bytes) -> bytes:
    """The store key of the kept failure of the request whose reply key is ``key``.

    Example:
        >>> failure_key(bytes(16)) != bytes(16), len(failure_key(bytes(16)))
        (True, 16)
    """
    return hashlib.blake2b(b"hf_judge failed reply\0" + key, digest_size=len(key)).digest()


def failure_record(kind: str, message: str, raw: str | None, attempts: int, max_tokens: int | None) -> str:
    """The stored form of a failed request's outcome (``max_tokens``: the run's, which a truncated reply was cut at)."""
    return json.dumps(
        {_MARK: 1, "kind": str(kind), "message": message, "raw": raw, "attempts": attempts, "max_tokens": max_tokens},
        ensure_ascii=False,
    )


def read_failure(content: str) -> dict[str, Any] | None:
    """A kept failure's fields (kind, message, raw, attempts, max_tokens); None for anything else (a reply, a
    damaged record: the request is then sent again)."""
    try:
        d = json.loads(content)
    except (ValueError, TypeError):
        return None
    if not isinstance(d, dict) or d.get(_MARK) != 1 or d.get("kind") not in KEPT_KINDS:
        return None
    if not isinstance(d.get("message"), str) or not isinstance(d.get("raw"), (str, type(None))):
        return None
    attempts, cap = d.get("attempts"), d.get("max_tokens")
    if type(attempts) is not int or not (cap is None or type(cap) is int):
        return None
    return d


def replays(record: dict[str, Any], max_tokens: int | None) -> bool:
    """Whether a kept failure stands for a run with ``max_tokens``: a reply cut at the length limit does not
    where the limit is now higher (or gone), as raising it is the fix; any other always does.

    Example:
        >>> cut = {"kind": "truncated", "max_tokens": 100}
        >>> replays(cut, 100), replays(cut, 400), replays(cut, None), replays({"kind": "schema"}, None)
        (True, False, False, True)
    """
    if record["kind"] != ErrorKind.TRUNCATED:
        return True
    was = record.get("max_tokens")
    return was is not None and max_tokens is not None and max_tokens <= was


def kept_failures(store: ReplyStore, keys: Sequence[bytes], caps: Sequence[int | None]) -> list[dict[str, Any] | None]:
    """For each request key of ``keys``, the failure ``store`` keeps of it where it stands for a run whose
    max_tokens is the matching one of ``caps`` (:func:`replays`), else None.

    Example:
        >>> kept_failures(store, [key], [None])  # doctest: +SKIP
        [{'kind': 'out_of_range', 'message': '...', 'raw': '{"score": 11}', 'attempts': 4, 'max_tokens': None, ...}]
    """
    failed = [failure_key(k) for k in keys]
    found = store.get_many(list(dict.fromkeys(failed))) if failed else {}
    out: list[dict[str, Any] | None] = []
    for key, cap in zip(failed, caps, strict=True):
        record = read_failure(found[key][0]) if key in found else None
        out.append(record if record is not None and replays(record, cap) else None)
    return out
