"""Probability-weighted scores: what a judge's token log-probabilities say about its score.

With ``logprobs=True`` a request for a metric with integer outputs (a score or
a pairwise judge) or a binary verdict asks the server for ``top_logprobs`` alternatives of every
token (:func:`request_fields`). From the reply's ``choices[0].logprobs.content``
:func:`distributions` reads, for each such output, the probability the model
gave each valid value at the position where the value was written; that small
table is what the reply store keeps beside the reply, so a cached rerun gives
the same columns. :func:`row_values` turns it into the columns
``<column>_expected`` (the probability-weighted mean over the valid integers,
renormalised), ``<column>_confidence`` (the renormalised probability of the
value the judge wrote) and, for a binary judge, ``<metric>_p_positive``. A
pairwise judge gets ``<column>_expected`` only (:func:`pair_values`): with
both orders its score is the mean of two replies, as its expected score is.

Finding the value's position. The tokens are joined (their ``bytes`` where
given, so a character split across tokens stays exact) into the reply's text;
a JSON reply (bare or in a code fence) is walked key by key to the value of
each output; a free-text binary reply is read by the rules of
:func:`hf_judge.judging.validate.parse_binary_verdict` (its last, then its first,
non-empty line), a free-text pairwise one on its first line, as
:func:`hf_judge.judging.validate.parse_pair_scores` reads it. The value must read the same there as in the validated
reply, else the output gets no probabilities (never a guess). The value
starts inside one token; the bytes of that token before the value (``": "``,
``"``) are the *prefix* every alternative at that position must start with
(a prefix of only whitespace may also be left out: JSON allows either).

Integers written over several tokens (``10`` as ``1``, ``0``): an
alternative at the first position that ends the number inside its own token
(``7,``) is that number. One whose digits run to the end of the token may go
on in the next token. For the token the judge actually wrote, the next
position's alternatives say how: ``P(10) = P("1") x P("0" | "1")`` and
``P(1) = P("1") x P(anything that ends the number | "1")``. For any other
alternative the continuation is unknown: it counts as the one value of the
range it can still become (``"7"`` in 1-10 is 7), and where it could become
several (``"1"`` in 1-10: 1 or 10) its mass is *ambiguous* and left out.
Values outside the output's range, numbers with a leading zero, decimals and
tokens that are no number are left out too; what remains is renormalised.
Tokenizers that write ``10`` as one token (OpenAI's) have no ambiguity.

A binary verdict: an alternative is a verdict when it is one (followed by
nothing or a non-alphanumeric character), or when it begins exactly one of
the two (the first token of a verdict written over several);
``p_positive = P(positive) / (P(positive) + P(negative))``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .metrics import Metric, MetricKind, Output, OutputType
from .validate import clean_token  # the parser's own rule for the verdict of a line

__all__ = ["columns", "distributions", "notice", "pair_values", "request_fields", "row_values", "targets"]

logger = logging.getLogger("hf_judge")
# The version of the method behind a stored table: a later, different method can tell old tables apart.
VERSION = 1
_DIGITS = re.compile(rb"-?[0-9]+")
_MORE_DIGITS = re.compile(rb"[0-9]+")
_NOT_AN_INTEGER = (b".", b"e", b"E")  # what turns the digits before it into a decimal
_MAX_DIGITS = 40
_decoder = json.JSONDecoder()


def targets(metric: Metric) -> tuple[Output, ...]:
    """The outputs whose token probabilities are read: the integers of a score or pairwise metric, a binary
    judge's verdict."""
    if metric.kind == MetricKind.BINARY:
        return tuple(o for o in metric.outputs if o.enum)
    return tuple(o for o in metric.outputs if o.type == OutputType.INTEGER)


def columns(metric: Metric) -> dict[str, str]:
    """The columns a ``logprobs=True`` run adds for ``metric``, name -> Arrow type.

    Example:
        >>> from hf_judge import load_metric
        >>> columns(load_metric("QA_Clarity"))
        {'QA_Clarity_expected': 'float64', 'QA_Clarity_confidence': 'float64'}
        >>> columns(load_metric("Binary"))
        {'Binary_p_positive': 'float64'}
        >>> columns(load_metric("Comparative"))
        {'Comparative_score_1_expected': 'float64', 'Comparative_score_2_expected': 'float64'}
    """
    if metric.kind == MetricKind.BINARY:
        return {f"{metric.name}_p_positive": "float64"} if targets(metric) else {}
    cols: dict[str, str] = {}
    for o in targets(metric):
        cols[f"{o.column}_expected"] = "float64"
        if metric.kind != MetricKind.PAIRWISE:  # a pairwise score may be the mean of two orders: no one value
            cols[f"{o.column}_confidence"] = "float64"
    return cols


def request_fields(metric: Metric, top_logprobs: int) -> dict[str, Any]:
    """What a request for ``metric`` adds to its body: nothing for a metric with no output to read."""
    return {"logprobs": True, "top_logprobs": top_logprobs} if targets(metric) else {}


def distributions(metric: Metric, value: Mapping[str, Any], logprobs: Any) -> dict[str, Any] | None:
    """The probability of each valid value of each target output, from a reply's ``choices[0].logprobs``.

    ``value``: the validated reply (output key -> value). Returns
    ``{"version": 1, "outputs": {key: {value: probability}}}``, small JSON that
    the reply store keeps; an output whose value cannot be found among the
    tokens is left out. None when the reply has no token log-probabilities.

    Example:
        >>> from hf_judge import load_metric
        >>> tok = lambda t, p, alts=(): {"token": t, "logprob": math.log(p),
        ...     "top_logprobs": [{"token": a, "logprob": math.log(q)} for a, q in alts]}
        >>> lp = {"content": [tok('{"verdict": "', 1), tok("1", 0.8, [("1", 0.8), ("0", 0.15)]), tok('"}', 1)]}
        >>> d = distributions(load_metric("Binary"), {"verdict": "1"}, lp)
        >>> {k: round(p, 2) for k, p in d["outputs"]["verdict"].items()}
        {'1': 0.8, '0': 0.15}
    """
    entries = _entries(logprobs)
    if entries is None:
        return None
    tokens = [_bytes(e) for e in entries]
    doc = b"".join(tokens).decode("utf-8", "surrogateescape")
    starts, at = [], 0
    for t in tokens:
        starts.append(at)
        at += len(t)
    out: dict[str, dict[str, float]] = {}
    table = {"version": VERSION, "outputs": out}
    if metric.kind == MetricKind.BINARY:
        o = targets(metric)[0]
        where = _verdict_offset(metric, o, doc, value[o.key])
        if where is not None:
            dist = _verdict_dist(metric, entries, tokens, starts, *where)
            if dist is not None:
                out[o.key] = dist
        return table
    spans = _object_values(doc)
    if spans is None and metric.kind == MetricKind.PAIRWISE:
        spans = _pair_values(doc, targets(metric))
    for o in targets(metric):
        start = spans.get(o.key) if spans is not None else None
        if start is None:
            continue
        written = _written_int(doc, start)
        if written is None or written != value.get(o.key):
            continue
        k, prefix = _position(tokens, starts, len(doc[:start].encode("utf-8", "surrogateescape")))
        dist = _int_dist(entries, tokens, k, prefix, o)
        if dist and str(written) in dist:
            out[o.key] = dist
    return table


def row_values(metric: Metric, value: Mapping[str, Any], table: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The logprob columns of one reply from its :func:`distributions` table: null where it has none for an
    output (never a guess).

    Example:
        >>> from hf_judge import load_metric
        >>> m = load_metric("QA_Clarity")
        >>> row_values(m, {"reason": "", "score": 8}, {"version": 1, "outputs": {"score": {"8": 0.75, "9": 0.25}}})
        {'QA_Clarity_expected': 8.25, 'QA_Clarity_confidence': 0.75}
    """
    if metric.kind == MetricKind.PAIRWISE:
        return pair_values(metric, [value], [table])
    out: dict[str, float | None] = dict.fromkeys(columns(metric))
    dists = _outputs(table)
    if not dists:
        return out
    if metric.kind == MetricKind.BINARY:
        o = targets(metric)[0]
        dist = dists.get(o.key)
        if dist:
            pos = dist.get(str(metric.params["positive"]), 0.0)
            neg = dist.get(str(metric.params["negative"]), 0.0)
            if pos + neg > 0:
                out[f"{metric.name}_p_positive"] = pos / (pos + neg)
        return out
    for o in targets(metric):
        weighted = _weighted(dists.get(o.key), value[o.key])
        if weighted is not None:
            out[f"{o.column}_expected"], out[f"{o.column}_confidence"] = weighted
    return out


def pair_values(
    metric: Metric, values: Sequence[Mapping[str, Any]], tables: Sequence[Mapping[str, Any] | None]
) -> dict[str, float | None]:
    """The ``_expected`` columns of a pairwise judge from the replies of one order, or of both (``swap``): then,
    as for the scores themselves, the mean of the two orders, each response's score read where it stood.

    Example:
        >>> from hf_judge import load_metric
        >>> m = load_metric("Comparative")
        >>> first = {"version": 1, "outputs": {"score_1": {"8": 0.5, "6": 0.5}, "score_2": {"5": 1.0}}}
        >>> second = {"version": 1, "outputs": {"score_1": {"4": 1.0}, "score_2": {"8": 1.0}}}  # responses swapped
        >>> pair_values(m, [{"score_1": 8, "score_2": 5}, {"score_1": 4, "score_2": 8}], [first, second])
        {'Comparative_score_1_expected': 7.5, 'Comparative_score_2_expected': 4.5}
    """
    (a, b), cols = targets(metric), list(columns(metric))
    seen = []
    for value, table in zip(values, tables, strict=True):
        dists = _outputs(table)
        seen.append([_weighted(dists.get(o.key), value[o.key]) for o in (a, b)])
    if len(seen) == 1:
        return {c: w[0] if w else None for c, w in zip(cols, seen[0], strict=True)}
    (a1, b1), (a2, b2) = seen  # in the second order response 1 was scored as b, response 2 as a
    return {c: (x[0] + y[0]) / 2 if x and y else None for c, x, y in ((cols[0], a1, b2), (cols[1], b1, a2))}


def _weighted(dist: Mapping[str, float] | None, written: Any) -> tuple[float, float] | None:
    """(expected value, confidence of ``written``) of one output's distribution; None when there is none."""
    total = sum(dist.values()) if dist else 0.0
    if not dist or total <= 0:
        return None
    try:
        expected = sum(int(v) * p for v, p in dist.items()) / total
    except ValueError:  # not a table of integers: nothing to say about this output
        return None
    return expected, dist.get(str(written), 0.0) / total


def notice(stats: Any, metric: Metric, table: Mapping[str, Any] | None) -> None:
    """Count a reply whose columns stay null for want of log-probabilities, and say so the first time.

    ``stats``: the run's :class:`hf_judge.transport.client.Stats`; what is said also goes into the run summary's notes.
    """
    if table is None:
        stats.no_logprobs += 1
        if stats.no_logprobs == 1:
            _say(
                stats,
                "the server sent no token log-probabilities although logprobs=True asked for them; the "
                "probability-weighted columns (_expected, _confidence, _p_positive) are null where it sends none. "
                "OpenAI, vLLM and llama.cpp send them; other servers may need their own option.",
            )
    elif any(o.key not in _outputs(table) for o in targets(metric)):
        stats.unplaced_logprobs += 1
        if stats.unplaced_logprobs == 1:
            _say(
                stats,
                f"a reply of {metric.name} came with token log-probabilities, but a score's value could not be "
                "found among its tokens; its probability-weighted columns are null (never a guess).",
            )


def _say(stats: Any, note: str) -> None:
    logger.warning(note)
    stats.notes.append(note)


def _outputs(table: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """The distributions of a table, only those of the shape :func:`distributions` writes (a store entry
    damaged or written by a later version reads as nothing, never as a crash)."""
    outputs = table.get("outputs") if isinstance(table, Mapping) and table.get("version") == VERSION else None
    if not isinstance(outputs, dict):
        return {}
    return {
        k: d
        for k, d in outputs.items()
        if isinstance(d, dict) and all(type(p) in (int, float) and p >= 0 for p in d.values())
    }


# -- reading the tokens ---------------------------------------------------------------------------------------------


def _entries(logprobs: Any) -> list[dict] | None:
    """``logprobs.content`` when it is a non-empty list of token entries, else None."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    if not all(isinstance(e, dict) and isinstance(e.get("token"), str) for e in content):
        return None
    return content


def _bytes(entry: Mapping[str, Any]) -> bytes:
    """A token's bytes: its ``bytes`` list where the server gives one (exact for split characters), else its text."""
    b = entry.get("bytes")
    if isinstance(b, list):
        try:
            return bytes(b)
        except (TypeError, ValueError):
            pass
    return str(entry.get("token", "")).encode("utf-8", "surrogateescape")


def _prob(entry: Mapping[str, Any]) -> float:
    lp = entry.get("logprob")
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp) or lp > 0:
        return 0.0
    return math.exp(lp)


def _alternatives(entry: Mapping[str, Any], chosen: bytes) -> dict[bytes, float]:
    """Each distinct text at one position -> its probability (tokens of the same text summed), the chosen one
    included where the server left it out of ``top_logprobs``."""
    alts: dict[bytes, float] = {}
    top = entry.get("top_logprobs")
    for alt in top if isinstance(top, list) else ():
        if isinstance(alt, dict) and isinstance(alt.get("token"), str):
            b = _bytes(alt)
            alts[b] = alts.get(b, 0.0) + _prob(alt)
    if chosen not in alts:
        alts[chosen] = _prob(entry)
    return alts


def _position(tokens: Sequence[bytes], starts: Sequence[int], offset: int) -> tuple[int, bytes]:
    """The token that holds byte ``offset`` of the joined text, and its bytes before it."""
    k = next(i for i, (t, at) in enumerate(zip(tokens, starts, strict=True)) if at <= offset < at + len(t))
    return k, tokens[k][: offset - starts[k]]


def _strip(text: bytes, prefix: bytes) -> bytes | None:
    """``text`` after ``prefix``; a prefix of only whitespace may also be absent (JSON allows either)."""
    if text.startswith(prefix):
        return text[len(prefix) :]
    if not prefix.strip():
        return text.lstrip()
    return None


# -- integers -------------------------------------------------------------------------------------------------------


def _object_values(doc: str) -> dict[str, int] | None:
    """Top-level key -> character offset of its value, in a JSON object (bare or in a code fence); None else."""
    i = len(doc) - len(doc.lstrip())
    if doc.startswith("```", i):
        nl = doc.find("\n", i)
        if nl < 0:
            return None
        i = nl + 1
    ws = re.compile(r"\s*")
    i = ws.match(doc, i).end()  # type: ignore[union-attr]  # \s* always matches
    if not doc.startswith("{", i):
        return None
    i = ws.match(doc, i + 1).end()  # type: ignore[union-attr]
    spans: dict[str, int] = {}
    try:
        while not doc.startswith("}", i):
            key, i = _decoder.raw_decode(doc, i)
            i = ws.match(doc, i).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or not doc.startswith(":", i):
                return None
            i = ws.match(doc, i + 1).end()  # type: ignore[union-attr]
            spans.setdefault(key, i)
            _, i = _decoder.raw_decode(doc, i)
            i = ws.match(doc, i).end()  # type: ignore[union-attr]
            if doc.startswith(",", i):
                i = ws.match(doc, i + 1).end()  # type: ignore[union-attr]
            elif not doc.startswith("}", i):
                return None
    except (ValueError, IndexError):
        return None
    return spans


def _pair_values(doc: str, outputs: Sequence[Output]) -> dict[str, int] | None:
    """Offsets of the two scores of a free-text pairwise reply, on its first non-empty line (``8 7``, ``[8, 7]``)
    as :func:`hf_judge.judging.validate.parse_pair_scores` reads them; None unless there are exactly two numbers."""
    line = next((m for m in re.finditer(r"[^\n]+", doc) if m.group().strip()), None)
    if line is None or len(outputs) != 2:
        return None
    numbers = list(re.finditer(r"-?[0-9]+(?:\.[0-9]+)?", line.group()))
    if len(numbers) != 2:
        return None
    return {o.key: line.start() + n.start() for o, n in zip(outputs, numbers, strict=True)}


def _written_int(doc: str, start: int) -> int | None:
    m = re.compile(r"-?[0-9]+(?![0-9.eE])").match(doc, start)
    return int(m.group()) if m else None


def _canonical(digits: bytes) -> bool:
    """No leading zero (``07``), as in JSON."""
    bare = digits.lstrip(b"-")
    return bool(bare) and (bare == b"0" or not bare.startswith(b"0"))


def _completions(digits: bytes, lo: float | None, hi: float | None) -> list[int]:
    """The integers in [lo, hi] whose text starts with ``digits`` (two at most: enough to tell one from many)."""
    if lo is None or hi is None:  # unbounded: always more than one
        return [int(digits), int(digits + b"0")] if _canonical(digits) else []
    bare, neg = digits.lstrip(b"-"), digits.startswith(b"-")
    found: list[int] = []
    if not _canonical(digits):
        return found
    width = len(str(int(max(abs(lo), abs(hi)))))
    d = int(bare)
    for extra in range(0, max(0, width - len(bare)) + 1):
        if extra and d == 0:
            break  # 0 followed by digits has a leading zero
        a, b = d * 10**extra, (d + 1) * 10**extra - 1 if extra else d
        if neg:
            a, b = -b, -a
        a, b = max(a, math.ceil(lo)), min(b, math.floor(hi))
        for v in range(a, min(b, a + 1) + 1):
            found.append(v)
            if len(found) > 1:
                return found
    return found


def _in_range(v: int, o: Output) -> bool:
    return (o.minimum is None or v >= o.minimum) and (o.maximum is None or v <= o.maximum)


def _int_dist(
    entries: Sequence[Mapping[str, Any]], tokens: Sequence[bytes], k: int, prefix: bytes, o: Output
) -> dict[str, float]:
    """Value (as text) -> probability, over the valid integers of ``o``, at token ``k`` (see the module docstring)."""
    dist: dict[str, float] = {}

    def add(v: int, p: float) -> None:
        if _in_range(v, o) and p > 0:
            dist[str(v)] = dist.get(str(v), 0.0) + p

    for text, p in _alternatives(entries[k], tokens[k]).items():
        rest = _strip(text, prefix)
        m = _DIGITS.match(rest) if rest is not None else None
        if m is None:
            continue
        digits = m.group()
        if m.end() < len(rest):  # type: ignore[arg-type]  # m is set only when rest is
            if rest[m.end() : m.end() + 1] not in _NOT_AN_INTEGER and _canonical(digits):  # type: ignore[index]
                add(int(digits), p)
        elif text == tokens[k]:
            for v, q in _continued(entries, tokens, k + 1, digits, o).items():
                add(v, p * q)
        else:
            values = _completions(digits, o.minimum, o.maximum)
            if len(values) == 1:
                add(values[0], p)
    return dist


def _continued(
    entries: Sequence[Mapping[str, Any]], tokens: Sequence[bytes], j: int, digits: bytes, o: Output
) -> dict[int, float]:
    """The number begun with ``digits`` before token ``j``, along the tokens the judge wrote: value -> P(value)."""
    if len(digits) > _MAX_DIGITS:  # no score is that long; and the recursion stays shallow whatever a server sends
        return {}
    if j >= len(tokens):
        return {int(digits): 1.0} if _canonical(digits) else {}
    out: dict[int, float] = {}
    for text, p in _alternatives(entries[j], tokens[j]).items():
        m = _MORE_DIGITS.match(text)
        if m is None:
            if text[:1] not in _NOT_AN_INTEGER and _canonical(digits):
                out[int(digits)] = out.get(int(digits), 0.0) + p
            continue
        longer = digits + m.group()
        if m.end() < len(text):
            if text[m.end() : m.end() + 1] not in _NOT_AN_INTEGER and _canonical(longer):
                out[int(longer)] = out.get(int(longer), 0.0) + p
        elif text == tokens[j]:
            for v, q in _continued(entries, tokens, j + 1, longer, o).items():
                out[v] = out.get(v, 0.0) + p * q
        else:
            values = _completions(longer, o.minimum, o.maximum)
            if len(values) == 1:
                out[values[0]] = out.get(values[0], 0.0) + p
    return out


# -- binary verdicts ------------------------------------------------------------------------------------------------


def _verdict_offset(metric: Metric, o: Output, doc: str, verdict: Any) -> tuple[int, bool] | None:
    """(character offset of the verdict in ``doc``, whether it is matched exactly), or None when not found."""
    spans = _object_values(doc)
    if spans is not None:
        start = spans.get(o.key)
        if start is None or not doc.startswith(json.dumps(verdict, ensure_ascii=False), start):
            return None
        return start + 1, True  # after the opening quote
    stripped = doc.strip()
    if stripped.startswith('"'):  # a JSON string: "1"
        try:
            if json.loads(stripped) == verdict:
                return doc.index('"') + 1, True
        except ValueError:
            pass
    lines = [m for m in re.finditer(r"[^\n]+", doc) if m.group().strip()]
    if not lines:
        return None
    want = str(verdict).strip().lower()
    for line in (lines[-1], lines[0]):
        token = clean_token(line.group()).lower()
        if token in (str(metric.params["positive"]).lower(), str(metric.params["negative"]).lower()):
            if token != want:
                return None
            at = line.group().lower().find(token)
            return (line.start() + at, False) if at >= 0 else None
    return None


def _verdict_dist(
    metric: Metric,
    entries: Sequence[Mapping[str, Any]],
    tokens: Sequence[bytes],
    starts: Sequence[int],
    char_offset: int,
    exact: bool,
) -> dict[str, float] | None:
    verdicts = [str(metric.params["positive"]), str(metric.params["negative"])]
    doc = b"".join(tokens).decode("utf-8", "surrogateescape")
    k, prefix = _position(tokens, starts, len(doc[:char_offset].encode("utf-8", "surrogateescape")))
    wanted = verdicts if exact else [v.lower() for v in verdicts]
    dist: dict[str, float] = {}
    for text, p in _alternatives(entries[k], tokens[k]).items():
        rest = _strip(text, prefix)
        if not rest or p <= 0:
            continue
        s = rest.decode("utf-8", "replace")
        s = s if exact else s.lower()
        pairs = list(zip(verdicts, wanted, strict=True))
        hit = [v for v, w in pairs if s.startswith(w) and (len(s) == len(w) or not s[len(w)].isalnum())]
        if not hit:
            hit = [v for v, w in pairs if w.startswith(s)]  # the first token of a verdict written over several
        if len(hit) == 1:
            dist[hit[0]] = dist.get(hit[0], 0.0) + p
    return dist or None
