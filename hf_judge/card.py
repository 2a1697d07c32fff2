"""The dataset card: what was scored, how, and what the scores look like.

The card records the model, the server's host (never a key), each metric
with the sha256 of its prompt text, the sampling parameters, rows scored,
errors by kind, tokens, and each score column's distribution. hf_judge owns
only the part between its two markers: text and metadata around it survive a
second push.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict

from .filter import score_columns
from .redact import scrub
from .summary import RunSummary

START = "<!-- hf-judge:start -->"
END = "<!-- hf-judge:end -->"
_BAR = 30


def column_stats(ds: Dataset, column: str) -> dict[str, Any]:
    """Count, nulls, mean, quantiles and a histogram of one score column."""
    arr = ds.data.column(column).combine_chunks() if hasattr(ds.data.column(column), "combine_chunks") else ds.data.column(column)
    if ds._indices is not None:
        arr = ds.flatten_indices().data.column(column)
    valid = pc.drop_null(arr)
    n = len(valid)
    stats: dict[str, Any] = {"count": n, "null": len(arr) - n}
    if n == 0:
        return stats
    if pa.types.is_boolean(valid.type):
        t = pc.sum(valid.cast(pa.int64())).as_py()
        stats.update(mean=t / n, hist={"true": t, "false": n - t})
        return stats
    num = valid.cast(pa.float64())
    q = pc.quantile(num, q=[0.1, 0.5, 0.9]).to_pylist()
    stats.update(mean=pc.mean(num).as_py(), min=pc.min(num).as_py(), p10=q[0], p50=q[1], p90=q[2], max=pc.max(num).as_py())
    if pa.types.is_integer(valid.type):
        vc = pc.value_counts(valid).to_pylist()
        stats["hist"] = {int(d["values"]): d["counts"] for d in sorted(vc, key=lambda d: d["values"])}
    else:
        lo, hi = stats["min"], stats["max"]
        width = (hi - lo) / 10 or 1.0
        hist: dict[str, int] = {}
        for v in num.to_pylist():
            b = min(9, int((v - lo) / width))
            label = f"{lo + b * width:.2f}"
            hist[label] = hist.get(label, 0) + 1
        stats["hist"] = dict(sorted(hist.items(), key=lambda kv: float(kv[0])))
    return stats


def _histogram(hist: dict) -> str:
    peak = max(hist.values()) or 1
    return "\n".join(f"{str(k):>6} | {'#' * max(1, round(_BAR * c / peak)) if c else '':<{_BAR}} {c}" for k, c in hist.items())


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def render_section(scored: DatasetDict, summary: RunSummary | None) -> str:
    """The markdown hf_judge owns in the card."""
    out = [START, "## Scored with hf-judge", ""]
    if summary is not None:
        out += [
            f"- **Model:** `{summary.model}` at `{summary.base_url_host}`",
            f"- **Structured output:** {summary.structured_output}",
            f"- **Sampling:** {', '.join(f'{k}={v}' for k, v in summary.sampling.items())}",
            f"- **Rows scored:** {', '.join(f'{k}: {v:,}' for k, v in summary.rows.items())}",
            f"- **Requests:** {summary.requests:,} ({summary.retries:,} retries, {summary.cache_hits:,} from cache)",
            f"- **Tokens:** {summary.prompt_tokens:,} prompt / {summary.completion_tokens:,} completion",
            f"- **Errors:** {', '.join(f'{k}: {v:,}' for k, v in summary.errors.items()) or 'none'}"
            + (" (see the `errors` config)" if summary.errors else ""),
            "",
            "| metric | prompt sha256 |",
            "| --- | --- |",
            *[f"| `{m}` | `{h[:16]}` |" for m, h in summary.metrics.items()],
            "",
        ]
    out += ["### Score distributions", ""]
    for split, d in scored.items():
        if split == "errors":
            continue
        cols = [c for c in score_columns(d) if summary is None or not summary.columns or c in summary.columns]
        if not cols:
            continue
        out += [f"**{split}**", "", "| column | count | null | mean | p10 | p50 | p90 |", "| --- | --- | --- | --- | --- | --- | --- |"]
        details = []
        for c in cols:
            s = column_stats(d, c)
            out.append(
                f"| `{c}` | {s['count']:,} | {s['null']:,} | {_fmt(s.get('mean'))} | {_fmt(s.get('p10'))} | {_fmt(s.get('p50'))} | {_fmt(s.get('p90'))} |"
            )
            if s.get("hist"):
                details.append(f"`{c}`\n```\n{_histogram(s['hist'])}\n```")
        out += ["", *details, ""]
    out.append(END)
    return scrub("\n".join(out))  # the model name and the rest come from the user's settings: no secret goes public


def merge_card_text(existing: str, section: str) -> str:
    """Replace hf_judge's section in ``existing`` card text, keeping everything else."""
    if START in existing and END in existing:
        head, _, rest = existing.partition(START)
        _, _, tail = rest.partition(END)
        return head + section + tail
    return existing.rstrip() + "\n\n" + section + "\n"
