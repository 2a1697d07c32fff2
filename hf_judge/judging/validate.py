"""Strict validation of judge replies, and the free-text parsers of the seed-001 judges.

A reply is accepted only when it is a JSON object with exactly the declared
keys and every value of the declared type and range: ``7.9``, ``"8"`` and
``true`` are not integers. Nothing is ever coerced, rounded or defaulted.

Free text (servers or prompts without structured output) is parsed by strict
rules, never by searching for a substring:

* binary verdict: the reply's last non-empty line, with surrounding markdown
  (``*``, ``_``, backticks, quotes), a leading ``Answer:``/``Verdict:`` label
  and a trailing ``.`` removed, compared case-insensitively with the
  positive/negative token. If the last line is not exactly a token, the first
  line is tried the same way (``"0\\nThe answer 12 is wrong"`` is negative).
  Anything else, ``"Yes, but no."`` included, is ``unparseable``.
* pairwise scores: the first non-empty line must hold exactly two numbers and
  nothing but separators (spaces, commas, ``/``, ``;``), both integers in the
  score range. ``"Assistant 1: 8, Assistant 2: 7"`` and ``"8/10 7/10"`` are
  therefore ``unparseable``, never (1, 8) or (8, 10).

A binary or pairwise reply that is valid JSON but not an object is what those
prompts ask for, so it gets the same free-text rules: for a binary judge a bare
``1``, ``"1"`` or ``"**1**"`` (the rules run on the scalar's text, or on the
string's value), for a pairwise judge ``"8 7"`` or ``[8, 7]`` (the array's
numbers joined by a space, so ``[8.5, 7]`` is ``unparseable`` and ``[11, 7]``
``out_of_range``). Score metrics get no such leniency: a bare ``7`` is a
``schema`` error.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import ErrorKind, ReplyError
from .metrics import Metric, MetricKind, Output, OutputType

__all__ = ["ReplyError", "check_value", "parse_binary_verdict", "parse_pair_scores", "parse_reply", "validate_object"]

# Members bound to module names: looking one up on its enum class costs ~70 ns (Python 3.11), a global
# ~10, and check_value runs for every output of every reply.
_INTEGER, _NUMBER, _STRING = OutputType.INTEGER, OutputType.NUMBER, OutputType.STRING
_BINARY, _PAIRWISE = MetricKind.BINARY, MetricKind.PAIRWISE
_FREE_TEXT = (_BINARY, _PAIRWISE)  # kinds whose prompts ask for text, not an object


def check_value(output: Output, value: Any) -> None:
    """Raise :class:`ReplyError` unless ``value`` has ``output``'s exact type and range."""
    t = output.type
    if t == _INTEGER:
        if type(value) is not int:
            raise ReplyError(ErrorKind.SCHEMA, f"{output.key} must be an integer, got {value!r}")
    elif t == _NUMBER:
        if type(value) not in (int, float):
            raise ReplyError(ErrorKind.SCHEMA, f"{output.key} must be a number, got {value!r}")
    elif t == _STRING:
        if type(value) is not str:
            raise ReplyError(ErrorKind.SCHEMA, f"{output.key} must be a string, got {value!r}")
    elif type(value) is not bool:
        raise ReplyError(ErrorKind.SCHEMA, f"{output.key} must be a boolean, got {value!r}")
    if output.enum is not None and value not in output.enum:
        raise ReplyError(ErrorKind.OUT_OF_RANGE, f"{output.key} must be one of {list(output.enum)}, got {value!r}")
    if output.minimum is not None and value < output.minimum:
        raise ReplyError(ErrorKind.OUT_OF_RANGE, f"{output.key}={value} is below the minimum {output.minimum}")
    if output.maximum is not None and value > output.maximum:
        raise ReplyError(ErrorKind.OUT_OF_RANGE, f"{output.key}={value} is above the maximum {output.maximum}")


def validate_object(metric: Metric, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ReplyError(ErrorKind.SCHEMA, f"the reply is a JSON {type(obj).__name__}, not an object")
    outputs = metric.outputs
    if len(obj) != len(outputs) or any(o.key not in obj for o in outputs):
        declared = [o.key for o in outputs]
        missing = [k for k in declared if k not in obj]
        extra = [k for k in obj if k not in declared]
        raise ReplyError(ErrorKind.SCHEMA, f"keys must be exactly {declared}; missing {missing}, unexpected {extra}")
    for o in outputs:
        check_value(o, obj[o.key])
    return obj


def parse_reply(metric: Metric, content: str | None, finish_reason: str | None) -> dict[str, Any]:
    """Validate one reply; returns the reply object keyed by output key.

    Also used on a reply store hit, so a cached reply is judged by exactly the
    rules that accepted it.

    Example:
        >>> from hf_judge import load_metric
        >>> parse_reply(load_metric("Binary"), "1", "stop")
        {'verdict': '1'}
        >>> parse_reply(load_metric("Comparative", swap=False), "[8, 7]", "stop")
        {'score_1': 8, 'score_2': 7, 'explanation': ''}
    """
    if finish_reason == "length":
        raise ReplyError(ErrorKind.TRUNCATED, "the reply was cut off (finish_reason=length); raise max_tokens")
    if finish_reason == "content_filter":
        raise ReplyError(ErrorKind.CONTENT_FILTER, "the server's content filter withheld the reply")
    if content is None or not content.strip():
        raise ReplyError(ErrorKind.EMPTY, "the reply has no content")
    loaded = _load_json(content)
    if loaded is None:
        if metric.kind in _FREE_TEXT:
            return _from_text(metric, content)
        raise ReplyError(ErrorKind.INVALID_JSON, "the reply is not valid JSON")
    obj, text = loaded
    if metric.kind in _FREE_TEXT and not isinstance(obj, dict):
        # A judge asked for "1" or "8 7" may answer exactly that, which happens
        # to be valid JSON: it gets the free-text rules, never a looser path.
        scalar = _scalar_text(metric, obj, text)
        if scalar is not None:
            return _from_text(metric, scalar)
    return validate_object(metric, obj)


def _load_json(content: str) -> tuple[Any, str] | None:
    """(value, its JSON text) of a JSON reply, bare or in a markdown code fence; None for anything else."""
    try:
        return orjson.loads(content), content.strip()
    except orjson.JSONDecodeError:
        pass
    m = re.fullmatch(r"\s*```(?:json)?\s*\n(.*)\n\s*```\s*", content, re.S)
    if not m:
        return None
    try:
        return orjson.loads(m.group(1)), m.group(1).strip()
    except orjson.JSONDecodeError:
        return None


def _scalar_text(metric: Metric, obj: Any, text: str) -> str | None:
    """The free-text form of a non-object JSON reply of a binary or pairwise judge, or None (then: schema)."""
    if isinstance(obj, str):
        return obj
    if metric.kind == _BINARY:
        return None if isinstance(obj, list) else text
    if isinstance(obj, list):
        if obj and all(type(v) in (int, float) for v in obj):
            return " ".join(orjson.dumps(v).decode() for v in obj)
        return None
    return text if type(obj) in (int, float) else None


def _from_text(metric: Metric, text: str) -> dict[str, Any]:
    if metric.kind == _PAIRWISE:
        return _pair_from_text(metric, text)
    key = _verdict_key(metric)
    obj: dict[str, Any] = {key: parse_binary_verdict(text, metric.params["positive"], metric.params["negative"])}
    # A judge's own binary metric may also declare, say, a reason: free text can only fill strings.
    obj.update({o.key: text.strip() for o in metric.outputs if o.key != key and o.type == OutputType.STRING})
    return validate_object(metric, obj)


def _verdict_key(metric: Metric) -> str:
    return next(o.key for o in metric.outputs if o.enum)


_DECOR = re.compile(r"^[\s*_`\"'>#]+|[\s*_`\"']+$")
_LABEL = re.compile(r"^(final answer|answer|verdict|judgement|judgment|output|result)\s*[:\-]\s*", re.I)


def clean_token(line: str) -> str:
    s = _DECOR.sub("", line)
    s = _LABEL.sub("", s)
    s = _DECOR.sub("", s)
    if s.endswith("."):
        s = s[:-1]
    return _DECOR.sub("", s).strip()


def parse_binary_verdict(text: str, positive: str, negative: str) -> str:
    """The exact verdict token of a free-text binary judge reply (see module docstring).

    Raises :class:`~hf_judge.ReplyError` (kind ``empty`` or ``unparseable``) when there is none.

    Example:
        >>> parse_binary_verdict("0\\nThe answer 12 is wrong", "1", "0")
        '0'
        >>> parse_binary_verdict("**Yes**", "yes", "no")
        'yes'
    """
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ReplyError(ErrorKind.EMPTY, "the reply has no content")
    pos, neg = str(positive).strip().lower(), str(negative).strip().lower()
    for line in (lines[-1], lines[0]):
        token = clean_token(line).lower()
        if token == pos:
            return positive
        if token == neg:
            return negative
    raise ReplyError(
        ErrorKind.UNPARSEABLE, f"no verdict: the reply's final line is not exactly {positive!r} or {negative!r}"
    )


_PAIR = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:[\s,;/|]\s*)\s*(-?\d+(?:\.\d+)?)\s*$")


def parse_pair_scores(text: str, minimum: float, maximum: float) -> tuple[int, int]:
    """The two scores on the first line of a free-text pairwise reply.

    Raises :class:`~hf_judge.ReplyError` (kind ``unparseable`` or ``out_of_range``) when they are not there.

    Example:
        >>> parse_pair_scores("8 7\\nAssistant 1 was more precise", 1, 10)
        (8, 7)
    """
    first = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    m = _PAIR.match(_DECOR.sub("", first))
    if not m:
        raise ReplyError(ErrorKind.UNPARSEABLE, f"the first line must hold exactly two scores, got {first[:80]!r}")
    values = []
    for g in m.groups():
        if "." in g:
            raise ReplyError(ErrorKind.UNPARSEABLE, f"scores must be integers, got {g}")
        v = int(g)
        if not minimum <= v <= maximum:
            raise ReplyError(ErrorKind.OUT_OF_RANGE, f"score {v} is outside {minimum}-{maximum}")
        values.append(v)
    return values[0], values[1]


def _pair_from_text(metric: Metric, text: str) -> dict[str, Any]:
    ints = [o for o in metric.outputs if o.type == OutputType.INTEGER]
    lo = ints[0].minimum if ints[0].minimum is not None else float("-inf")
    hi = ints[0].maximum if ints[0].maximum is not None else float("inf")
    a, b = parse_pair_scores(text, lo, hi)
    obj: dict[str, Any] = {ints[0].key: a, ints[1].key: b}
    rest = text.strip().split("\n", 1)
    for o in metric.outputs:
        if o.type == OutputType.STRING:
            obj[o.key] = rest[1].strip() if len(rest) > 1 else ""
    return validate_object(metric, obj)
