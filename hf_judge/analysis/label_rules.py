"""What a label may be, by kind of judgment: the one rule that ``agreement``, ``choose_judge`` and the public
labelled sets (:mod:`hf_judge.analysis.benchmarks`) check labels by, before anything is compared or paid for.

* ``binary`` (a verdict): true/false, 1/0 or yes/no (also y/n, correct/incorrect, pass/fail, positive/negative;
  1.0 and 0.0 are 1 and 0); with ``positive=``, two values of your own, the one named positive; with
  ``threshold=``, ratings (finite numbers), positive where the rating is >= it;
* ``pairwise`` (a preference between two responses): 1, 2 or tie (also A/B, model_a/model_b, draw, and
  "tie (bothbad)");
* ``numeric`` (a rating): a finite number (a number written as text too; true/false count as 1/0).

None, and a float NaN (how a table writes a missing number), is no label: the row is not labelled. Any other
value that breaks the rule is refused, naming where it is (a row, a file's line), the value and what is accepted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError

KINDS = ("numeric", "binary", "pairwise")
TRUE_WORDS = frozenset({"1", "true", "yes", "y", "correct", "pass", "positive"})
FALSE_WORDS = frozenset({"0", "false", "no", "n", "incorrect", "fail", "negative"})
PREFERENCES = {"1": "1", "a": "1", "model_a": "1", "2": "2", "b": "2", "model_b": "2", "tie": "tie", "draw": "tie"}
WINNERS = ("1", "2", "tie")
Where = Callable[[int], str]  # a value's index -> where it is, in the user's terms ("row 17", "labels.jsonl, line 18")
_SHOWN = 3  # the bad values a refusal names with their place
_REPR = 40  # a value longer than this is cut in a message


def unlabelled(v: Any) -> bool:
    """True for no label: None, or a float NaN.

    Example:
        >>> unlabelled(None), unlabelled(float("nan")), unlabelled(0)
        (True, True, False)
    """
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))


def verdict(v: Any) -> bool | None:
    """A verdict label as True/False; None where ``v`` is no verdict.

    Example:
        >>> verdict(True), verdict("Yes"), verdict(0), verdict(1.0), verdict("maybe")
        (True, True, False, True, None)
    """
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    w = _word(v)
    return True if w in TRUE_WORDS else False if w in FALSE_WORDS else None


def preference(v: Any) -> str | None:
    """A preference label as "1", "2" or "tie"; None where ``v`` is none.

    Example:
        >>> preference(1), preference("B"), preference("tie (bothbad)"), preference("both")
        ('1', '2', 'tie', None)
    """
    if isinstance(v, (bool, np.bool_)):
        return None
    w = _word(v)
    return "tie" if w.startswith("tie") else PREFERENCES.get(w)


def rating(v: Any) -> float | None:
    """A rating label as a float; None where ``v`` is no finite number.

    Example:
        >>> rating(4), rating(" 3.5"), rating(True), rating(float("inf")), rating("good")
        (4.0, 3.5, 1.0, None, None)
    """
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    try:
        if isinstance(v, (int, float, np.integer, np.floating)):
            f = float(v)
        elif isinstance(v, str):
            f = float(v.strip())
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def _word(v: Any) -> str:
    text = str(v).strip().lower()
    return text[:-2] if isinstance(v, (float, np.floating)) and text.endswith(".0") else text


def check_labels(
    values: Sequence[Any] | pa.Array,
    kind: str,
    *,
    positive: Any = None,
    threshold: float | None = None,
    subject: str = "the label column",
    where: Where | None = None,
) -> list[Any]:
    """Each label read as its ``kind`` reads it: a bool (binary), "1"/"2"/"tie" (pairwise), a float (numeric);
    None where a row is not labelled (None, NaN). A value that breaks the rule (see the module) is a ConfigError
    naming ``subject``, where the first few are (``where(i)``, default "row i"), the values and what is accepted.

    ``positive``: binary labels of two values of your own (the one that is positive; a third value is refused);
    ``threshold``: binary labels that are ratings, positive where >= it.

    Example:
        >>> check_labels(["A", 2, "tie", None], "pairwise")
        ['1', '2', 'tie', None]
        >>> check_labels([True, "no", 1.0], "binary")
        [True, False, True]
        >>> check_labels([1, "maybe"], "binary")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: the label column holds 1 value that is not a verdict (['maybe']) at row 1: ...
    """
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    where = where or _row
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if kind == "numeric" and (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
            return _numbers(values, subject, where)
        values = values.to_pylist()
    read = _reader(kind, positive, threshold)
    out: list[Any] = []
    bad: list[int] = []
    seen: dict[Any, Any] = {}
    for i, v in enumerate(values):
        if unlabelled(v):
            out.append(None)
            continue
        try:
            key = (type(v), v)
            x = seen[key] if key in seen else seen.setdefault(key, read(v))
        except TypeError:  # unhashable (a dict, a list): no label of any kind
            x = None
        if x is None:
            bad.append(i)
        out.append(x)
    if bad:
        raise _refusal(subject, kind, [(i, values[i]) for i in bad], where, threshold)
    if kind == "binary" and positive is not None:
        _two_values(values, subject, where, positive)
    return out


def _row(i: int) -> str:
    return f"row {i}"


def _reader(kind: str, positive: Any, threshold: float | None) -> Callable[[Any], Any]:
    if kind == "pairwise":
        return preference
    if kind == "numeric":
        return rating
    if threshold is not None:
        if positive is not None:
            raise ConfigError("give positive= (a label value) or label_threshold= (a cut on numeric labels), not both")

        def cut(v: Any) -> bool | None:
            r = None if isinstance(v, (bool, np.bool_)) else rating(v)
            return None if r is None else r >= threshold

        return cut
    if positive is not None:
        return lambda v: bool(v) if isinstance(v, (bool, np.bool_)) else str(v) == str(positive)
    return verdict


def _numbers(arr: pa.Array | pa.ChunkedArray, subject: str, where: Where) -> list[Any]:
    """A numeric column's ratings at once (a million judge scores against a million), NaN and null unlabelled."""
    x = np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    inf = np.isinf(x)
    if inf.any():
        at = np.nonzero(inf)[0]
        raise _refusal(subject, "numeric", [(int(i), float(x[i])) for i in at], where, None)
    return [None if v != v else v for v in x.tolist()]


def _two_values(values: Sequence[Any], subject: str, where: Where, positive: Any) -> None:
    """Verdicts of two words of one's own (positive= names one): a third word is a typo or another kind."""
    first: dict[str, int] = {}
    for i, v in enumerate(values):
        if not unlabelled(v) and not isinstance(v, (bool, np.bool_)):
            first.setdefault(str(v), i)
    if len(first) > 2:
        shown = "; ".join(f"{where(i)}: {_short(values[i])}" for i in sorted(first.values())[:_SHOWN])
        raise ConfigError(
            f"{subject} holds {len(first)} different values ({sorted(first)[:5]}) at {shown}: a verdict is one of "
            f"two, positive={positive!r} (--positive) naming the positive one; write each label as one of two "
            "values (or null: not labelled), or cut ratings with label_threshold= (--label-threshold T)"
        )


def _refusal(subject: str, kind: str, bad: list[tuple[int, Any]], where: Where, threshold: float | None) -> ConfigError:
    """The refusal of the ``bad`` (index, value) pairs: how many, which values, where the first are, the fix."""
    n = len(bad)
    distinct = sorted({_short(v, quote=False) for _, v in bad})
    shown = "; ".join(f"{where(i)}: {_short(v)}" for i, v in bad[:_SHOWN])
    more = f"; and {n - _SHOWN:,} more" if n > _SHOWN else ""
    noun, fix = _what(kind, [v for _, v in bad], threshold)
    count = f"1 value that is not a {noun}" if n == 1 else f"{n:,} values that are not {noun}s"
    return ConfigError(f"{subject} holds {count} ({distinct[:5]}) at {shown}{more}: {fix}")


def _what(kind: str, values: list[Any], threshold: float | None) -> tuple[str, str]:
    """The noun for what a label of ``kind`` is, and the fix for these ``values``."""
    if kind == "pairwise":
        return "preference", (
            "a preference is 1 (the first response is better), 2 or tie (also A/B, model_a/model_b, draw); write "
            "one of them (or null: not labelled)"
        )
    if kind == "numeric" or threshold is not None:
        cut = " to cut at label_threshold" if threshold is not None else ""
        return "finite number", (
            f"a rating is a finite number{cut}: write the labels as numbers (null where a row is not labelled); "
            "verdicts or winners are compared with a binary or pairwise judge"
        )
    if all(rating(v) is not None for v in values):
        return "verdict", (
            "a verdict is true/false, 1/0 or yes/no; ratings against a judge's verdicts need a cut: label_threshold= "
            "(--label-threshold T: label >= T is positive)"
        )
    return "verdict", (
        "a verdict is true/false, 1/0 or yes/no; for two words of your own, name the positive value "
        "(positive=..., --positive); or write null where a row is not labelled"
    )


def _short(v: Any, quote: bool = True) -> str:
    text = repr(v) if quote else str(v)
    return text if len(text) <= _REPR else text[: _REPR - 3] + "..."
