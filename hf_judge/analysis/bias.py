"""Two biases a judge is known for, measured on the scores alone (no labels needed).

* **Length**: LLM judges prefer longer answers (FastChat #3911: the longer of two answers wins 68 % of
  pairwise verdicts). :func:`length_bias` is Spearman's rho between a score and the length of the text
  it judged, with a bootstrap interval; :func:`longer_wins` is how often a pairwise judge picks the longer
  response; :func:`length_controlled` removes the part of a score that log length explains.
* **Self-preference**: judges favour their own family's outputs. :func:`model_family` names a model's
  family from its name (``gpt-4o-mini`` -> ``openai``), from the table ``FAMILIES``.

The figures are computed on at most ``POINT_ROWS`` rows (a seeded uniform sample above that), and their
intervals on at most ``INTERVAL_ROWS`` of them: an interval from fewer rows is wider, never narrower, so a
warning drawn from it is not overstated. At 1,000,000 rows the whole check takes well under a second per
column (with lengths in characters).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import stats

POINT_ROWS = 100_000  # rows a figure is computed on (a sample above that)
INTERVAL_ROWS = 2_000  # rows its bootstrap interval resamples (1,000 resamples in ~0.1 s on an idle core)
RESAMPLES = 1000
CONFIDENCE = 0.95
RHO_WARNING = 0.3  # |rho| from which a length bias is worth a warning (when its interval excludes 0)
LONGER_WINS_WARNING = 0.15  # distance of the longer-wins rate from 1/2 worth a warning (65 %: FastChat saw 68 %)

# (pattern matched at the start of a part of the model's name, family): the first that matches names it
FAMILIES: tuple[tuple[str, str], ...] = (
    (r"(chat)?gpt|o[134](-|$)|text-davinci|davinci|babbage|openai", "openai"),
    (r"claude|anthropic", "anthropic"),
    (r"gemini|gemma|palm|bison|google", "google"),
    (r"(code|meta-)?llama|meta$", "meta"),
    (r"qwen|qwq", "alibaba"),
    (r"mistral|mixtral|codestral|ministral|pixtral|magistral|devstral", "mistral"),
    (r"deepseek", "deepseek"),
    (r"command|c4ai|cohere", "cohere"),
    (r"phi-?\d", "microsoft"),
    (r"grok", "xai"),
    (r"(chat)?glm", "zhipu"),
    (r"kimi|moonshot", "moonshot"),
    (r"yi-", "01.ai"),
    (r"nemotron", "nvidia"),
    (r"granite", "ibm"),
    (r"olmo", "allenai"),
)
_FAMILY_RES = tuple((re.compile(p), f) for p, f in FAMILIES)


def model_family(model: str | None) -> str | None:
    """The family of a model, from its name; None when the table does not know it.

    The name is read in parts (split at ``/``, ``:``, ``.`` and spaces), the last part that names a family
    deciding: ``meta-llama/Llama-3.1-8B-Instruct`` is meta, ``ft:gpt-4o-mini:org::id`` openai,
    ``us.anthropic.claude-3-5-sonnet`` anthropic.

    Example:
        >>> model_family("gpt-4o-mini"), model_family("o3-mini"), model_family("Qwen/Qwen2.5-7B-Instruct")
        ('openai', 'openai', 'alibaba')
        >>> model_family("claude-3-5-haiku"), model_family("gemma-3-270m"), model_family("judge")
        ('anthropic', 'google', None)
    """
    if not model:
        return None
    for part in reversed(re.split(r"[/:.\s]+", model.strip().lower())):
        for pattern, family in _FAMILY_RES:
            if pattern.match(part):
                return family
    return None


class Lengths:
    """How a text's length is counted: tokens of the judge's tiktoken encoding, where tiktoken is installed and
    knows the model, else characters."""

    def __init__(self, model: str) -> None:
        self.encoding = _encoding(model)
        self.unit = "tokens" if self.encoding is not None else "characters"

    def of(self, table: pa.Table, columns: list[str]) -> np.ndarray:
        """Per row, the length of the columns' texts together; NaN where every one of them is null."""
        total = np.zeros(table.num_rows)
        present = np.zeros(table.num_rows, dtype=bool)
        for c in columns:
            if c not in table.column_names:
                continue
            arr = table.column(c).combine_chunks()
            if pa.types.is_struct(arr.type) or pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
                continue  # an image (datasets' Image is a struct of bytes and path): no text to measure
            valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            total += np.where(valid, self._count(arr), 0.0)
            present |= valid
        return np.where(present, total, np.nan)

    def _count(self, arr: pa.Array) -> np.ndarray:
        if self.encoding is None and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            return np.asarray(pc.utf8_length(arr).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
        texts = ["" if v is None else v if isinstance(v, str) else str(v) for v in arr.to_pylist()]
        if self.encoding is None:
            return np.array([len(t) for t in texts], dtype=np.float64)
        return np.array([len(t) for t in self.encoding.encode_ordinary_batch(texts)], dtype=np.float64)


def _encoding(model: str) -> Any:
    """tiktoken's encoding of ``model`` where tiktoken is installed, knows the model and has the encoding
    (it downloads encodings on first use: offline, none); else None."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        return tiktoken.encoding_for_model(model)
    except Exception:  # noqa: BLE001 - a model it does not know, or no encoding file offline: count characters
        return None


def _sample(n: int, rows: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded uniform sample of ``rows`` of ``n`` (all of them when ``n <= rows``)."""
    if n <= rows:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))


def sample_rows(n: int, seed: int = 0) -> np.ndarray:
    """The rows (of ``n``) a figure is computed on: all of them up to ``POINT_ROWS``, else a seeded sample.

    Example:
        >>> len(sample_rows(10)), len(sample_rows(10**6))
        (10, 100000)
    """
    return _sample(n, POINT_ROWS, seed)


def length_bias(scores: np.ndarray, lengths: np.ndarray, unit: str, *, seed: int = 0) -> dict[str, Any]:
    """Spearman's rho between ``scores`` and ``lengths`` (NaN in either: left out), its bootstrap interval,
    and whether it is worth a warning: the interval excludes 0 and ``|rho| >= RHO_WARNING``.

    Example:
        >>> b = length_bias(np.arange(50.0), np.arange(50.0) ** 2, "characters")
        >>> b["rho"], b["n"], b["warning"]
        (1.0, 50, True)
    """
    keep = ~(np.isnan(scores) | np.isnan(lengths))
    x, y = scores[keep], lengths[keep]
    rho = stats.spearman(x, y)
    low = high = None
    if rho is not None:
        part = _sample(len(x), INTERVAL_ROWS, seed)
        ci = stats.bootstrap_spearman(x[part], y[part], resamples=RESAMPLES, seed=seed, confidence=CONFIDENCE)
        low, high = ci if ci is not None else (None, None)
    warning = rho is not None and low is not None and high is not None and abs(rho) >= RHO_WARNING
    warning = warning and not (low <= 0.0 <= high)  # type: ignore[operator]
    return {"rho": rho, "low": low, "high": high, "n": int(len(x)), "unit": unit, "warning": bool(warning)}


def longer_wins(winners: np.ndarray, first: np.ndarray, second: np.ndarray, unit: str, *, seed: int = 0) -> dict:
    """How often a pairwise judge's winner (``"1"``, ``"2"``, ``"tie"``, None) is the longer response.

    Rows with a tie, no winner, or two responses of one length are left out (``skipped``). ``rate``: the
    share of the other rows that the longer response won, with a bootstrap interval; ``warning``: the
    interval excludes 1/2 and the rate is ``LONGER_WINS_WARNING`` or more from it.

    Example:
        >>> w = np.array(["1", "2", "1", "tie"], dtype=object)
        >>> longer_wins(w, np.array([9.0, 2, 1, 5]), np.array([3.0, 8, 4, 1]), "characters")["rate"]
        0.6666666666666666
    """
    decided = np.array([w in ("1", "2") for w in winners], dtype=bool)
    keep = decided & ~np.isnan(first) & ~np.isnan(second) & (first != second)
    won = (winners[keep] == "1") == (first[keep] > second[keep])
    n = int(keep.sum())
    rate = float(won.mean()) if n else None
    ci = stats.bootstrap_mean(
        won[_sample(n, INTERVAL_ROWS, seed)].astype(np.float64), resamples=RESAMPLES, seed=seed, confidence=CONFIDENCE
    )
    low, high = ci if ci is not None else (None, None)
    warning = (
        rate is not None
        and low is not None
        and high is not None
        and abs(rate - 0.5) >= LONGER_WINS_WARNING
        and not (low <= 0.5 <= high)
    )
    return {
        "rate": rate,
        "low": low,
        "high": high,
        "n": n,
        "skipped": int(len(winners) - n),
        "unit": unit,
        "warning": bool(warning),
    }


def length_controlled(scores: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, float]:
    """The scores with the part that log length explains removed, and the slope removed.

    An ordinary least-squares line of the score on ``log(1 + length)``, fitted on the rows that have both
    (NaN elsewhere, and in the result): ``lc = score - b * (log(1 + length) - mean(log(1 + length)))``. The
    mean score is kept; a row of average length keeps its score. With fewer than two distinct lengths there
    is nothing to fit: ``b = 0``.

    Example:
        >>> lc, b = length_controlled(np.array([2.0, 4.0, 6.0]), np.exp([1.0, 2.0, 3.0]) - 1)
        >>> round(b, 6), lc.round(6).tolist()
        (2.0, [4.0, 4.0, 4.0])
    """
    x = np.log1p(lengths)
    keep = ~(np.isnan(scores) | np.isnan(x))
    xs, ys = x[keep], scores[keep]
    slope = 0.0
    if len(xs) > 1 and np.ptp(xs) > 0:
        xm = xs - xs.mean()
        slope = float((xm @ (ys - ys.mean())) / (xm @ xm))
    centre = xs.mean() if len(xs) else 0.0
    out = np.full(len(scores), np.nan)
    out[keep] = ys - slope * (xs - centre)
    return out, slope


def self_preference(
    families: np.ndarray, judges: list[str], scores: dict[str, np.ndarray], source: str
) -> dict[str, Any]:
    """Which rows a judge of the same family as their writer scored: per judge, its family and its own-family
    rows; per score column, the mean score of the first such judge's own-family rows and of the others (a gap
    is no proof of bias: its family's texts may be better; labels tell, see ``agreement``).

    ``families``: per row, the family of the model that wrote it (None: unknown). ``warning``: some judge
    scored rows of its own family.

    Example:
        >>> fams = np.array(["openai", "meta", "openai"], dtype=object)
        >>> found = self_preference(fams, ["gpt-4o-mini"], {"s": np.array([9.0, 5.0, 8.0])}, "column 'model'")
        >>> found["judges"][0]["own_rows"], found["scores"]["s"]["own_mean"], found["warning"]
        (2, 8.5, True)
    """
    rows = len(families)
    named = [f if f is not None else "unknown" for f in families]
    by_family = {f: named.count(f) for f in sorted(set(named))}
    judged = []
    for model in dict.fromkeys(judges):
        family = model_family(model)
        own = int(sum(1 for f in families if f is not None and f == family)) if family else 0
        judged.append({"model": model, "family": family, "own_rows": own})
    found: dict[str, Any] = {"source": source, "rows": rows, "by_family": by_family, "judges": judged, "scores": {}}
    first = next((j for j in judged if j["own_rows"]), None)
    if first is not None:
        own_rows = np.array([f == first["family"] for f in families], dtype=bool)
        found["family"] = first["family"]
        for column, values in scores.items():
            ok = ~np.isnan(values)
            mine, other = values[ok & own_rows], values[ok & ~own_rows]
            found["scores"][column] = {
                "own_mean": float(mine.mean()) if len(mine) else None,
                "other_mean": float(other.mean()) if len(other) else None,
                "own_rows": int(len(mine)),
                "other_rows": int(len(other)),
            }
    found["warning"] = first is not None
    return found


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _interval(found: dict[str, Any], fmt: str = ".2f") -> str:
    if found.get("low") is None or found.get("high") is None:
        return "no interval"
    return f"{CONFIDENCE:.0%} interval {_num(found['low'], fmt)} .. {_num(found['high'], fmt)}"


def length_warning(column: str, found: dict[str, Any]) -> str:
    """The warning of a length bias worth one (see :func:`length_bias`)."""
    way = "higher" if (found["rho"] or 0) > 0 else "lower"
    head = (
        f"length bias: {column} follows the length of the text it judged (Spearman's rho {_num(found['rho'])}, "
        f"{_interval(found)}, {found['n']:,} rows, length in {found['unit']}): longer texts score {way}. "
    )
    if found.get("judge") is not None:  # one judge of a panel: the remedy is the panel's, not a column's
        return head + (
            f"It is the panel's judge {found['judge']!r}: replace it, check it against labels (hf-judge agreement "
            f"--score {column}), or add {found['panel_column']}_lc with length_control=True (--length-control)"
        )
    return head + (
        f"Check against labels (hf-judge agreement), or add {column}_lc with length_control=True (--length-control)"
    )


def longer_wins_warning(column: str, found: dict[str, Any]) -> str:
    """The warning of a longer-wins rate worth one (see :func:`longer_wins`)."""
    return (
        f"length bias: {column} goes to the longer response in {_num(found['rate'], '.0%')} of {found['n']:,} "
        f"decided pairs ({_interval(found, '.0%')}, length in {found['unit']}); an unbiased judge is near 50%"
    )


def self_preference_warning(found: dict[str, Any]) -> str:
    """The warning of a judge scoring its own family's texts (see :func:`self_preference`)."""
    own = [j for j in found["judges"] if j["own_rows"]]
    who = ", ".join(f"{j['model']} ({j['family']}) on {j['own_rows']:,} of {found['rows']:,} rows" for j in own)
    return (
        f"self-preference: a judge of the same family as the model that wrote the text ({found['source']}): {who}. "
        "Judges favour their own family's outputs: use a judge of another family, or compare its error on those "
        "rows with the others' against labels (hf-judge agreement --generator-column ...)"
    )


def describe(length: dict[str, dict], longer: dict[str, dict], preference: dict[str, Any]) -> list[str]:
    """The summary's lines for its bias checks (``str(summary)``); none for a run without them.

    Example:
        >>> describe({"s": {"rho": 0.5, "low": 0.4, "high": 0.6, "n": 90, "unit": "characters", "warning": True}},
        ...          {}, {})
        ['length bias    s: rho 0.50 (95% interval 0.40 .. 0.60), 90 rows, characters  WARNING']
    """
    lines = []
    shown = {c: f for c, f in length.items() if f.get("judge") is None}
    if len(shown) > 2:  # an All metric: each column's rho is in the overview's table; name the flagged ones here
        # (a line only when one is flagged: the overview's table has each column's rho)
        shown = {c: f for c, f in shown.items() if f["warning"]}
    # a panel judge's own column: a line only when flagged (the card and summary.json have every judge's)
    flagged = {c: f for c, f in length.items() if f.get("judge") is not None and f["warning"]}
    if len(flagged) == 1:
        shown.update(flagged)
    for column, f in shown.items():
        lines.append(
            f"length bias    {column}: rho {_num(f['rho'])} ({_interval(f)}), {f['n']:,} rows, {f['unit']}"
            + (f", judge {f['judge']}" if f.get("judge") is not None else "")
            + ("  WARNING" if f["warning"] else "")
        )
    if len(flagged) > 1:  # several (a panel over an All metric): one line, as the screen has room for
        lines.append(_flagged_judges(flagged))
    for column, f in longer.items():
        lines.append(
            f"longer wins    {column}: {_num(f['rate'], '.0%')} of {f['n']:,} decided pairs ({_interval(f, '.0%')}), "
            f"length in {f['unit']}" + ("  WARNING" if f["warning"] else "")
        )
    if preference:
        judges = ", ".join(f"{j['model']} ({j['family'] or 'family unknown'})" for j in preference["judges"])
        own = ", ".join(f"{j['own_rows']:,}" for j in preference["judges"])
        lines.append(
            f"self-pref      judges {judges}: {own} of {preference['rows']:,} rows written by their own family "
            f"({preference['source']})" + ("  WARNING" if preference["warning"] else "")
        )
        for column, s in preference.get("scores", {}).items():
            lines.append(
                f"self-pref      {column}: mean {_num(s['own_mean'])} on own-family rows ({s['own_rows']:,}), "
                f"{_num(s['other_mean'])} on the others ({s['other_rows']:,})"
            )
    return lines


def _flagged_judges(judges: dict[str, dict], width: int = 100) -> str:
    """One line naming the flagged judges' columns and their rho, cut to ``width`` with what is left counted.

    Example:
        >>> _flagged_judges({"QA_Clarity__a": {"rho": 0.91}, "QA_Clarity__b": {"rho": -0.4}})
        'length bias    judges: QA_Clarity__a +0.91, QA_Clarity__b -0.40  WARNING'
    """
    items = [f"{c} {_num(f['rho'], '+.2f')}" for c, f in judges.items()]
    head, tail = "length bias    judges: ", "  WARNING"
    for shown in range(len(items), 0, -1):
        more = f", +{len(items) - shown} more in summary.json" if shown < len(items) else ""
        line = head + ", ".join(items[:shown]) + more + tail
        if len(line) <= width or shown == 1:
            return line
    return head + tail


def _judged(length: dict[str, dict]) -> bool:
    return any(f.get("judge") is not None for f in length.values())


def markdown(length: dict[str, dict], longer: dict[str, dict], preference: dict[str, Any]) -> list[str]:
    """The card's section on the bias checks (markdown lines); none for a run without them."""
    if not (length or longer or preference):
        return []
    out = ["### Bias checks", ""]
    if length:
        out += [
            "Length bias: Spearman's rho between each score and the length of the text it judged "
            "(a warning where the interval excludes 0 and |rho| is 0.3 or more)"
            + ("; a panel's judges each on their own column (`<column>__<judge>`)." if _judged(length) else "."),
            "",
            "| column | rho | 95% interval | rows | length in | warning |",
            "| --- | --- | --- | --- | --- | --- |",
            *[
                f"| `{c}` | {_num(f['rho'])} | {_num(f['low'])} .. {_num(f['high'])} | {f['n']:,} | {f['unit']} | "
                f"{'yes' if f['warning'] else ''} |"
                for c, f in length.items()
            ],
            "",
        ]
    if longer:
        out += [
            "Pairwise: how often the longer response wins (ties and equal lengths left out).",
            "",
            "| column | longer wins | 95% interval | decided pairs | length in | warning |",
            "| --- | --- | --- | --- | --- | --- |",
            *[
                f"| `{c}` | {_num(f['rate'], '.0%')} | {_num(f['low'], '.0%')} .. {_num(f['high'], '.0%')} | "
                f"{f['n']:,} | {f['unit']} | {'yes' if f['warning'] else ''} |"
                for c, f in longer.items()
            ],
            "",
        ]
    if preference:
        out += [f"Self-preference ({preference['source']}, {preference['rows']:,} rows):", ""]
        out += [
            f"- judge `{j['model']}` ({j['family'] or 'family unknown'}): {j['own_rows']:,} rows written by its family"
            for j in preference["judges"]
        ]
        out += [
            f"- `{c}`: mean {_num(s['own_mean'])} on own-family rows, {_num(s['other_mean'])} on the others"
            for c, s in preference.get("scores", {}).items()
        ]
        out.append("")
    return out
