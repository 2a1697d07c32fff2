"""What a cascade of judges did and cost (``summary.cascade``): the escalation rate, each tier's requests, tokens
and cost, the strong judge's cost on every row (the rows it did not score projected as ``estimate_cost``
projects a run), and the audit's agreement. See :mod:`hf_judge.engine.cascade`."""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import numpy as np
from datasets import Dataset

from ..analysis.stats import cohen_kappa
from ..judging.ensemble import NUMERIC
from ..progress import datasets_bars_off
from ..results.summary import RunSummary
from ..transport.client import JudgeClient
from .counting import add_summary, summary_counters
from .estimate import project
from .job import JudgeJob
from .prepare import build_plans

logger = logging.getLogger("hf_judge")
# rows of a metric whose strong-only cost is projected by rendering them (estimate.py): a sample, evenly spread
PROJECTION_ROWS = 2000


def report(
    job: JudgeJob,
    strong_job: JudgeJob,
    picks: dict[str, dict[str, tuple[list[str | None], list[bool]]]],
    summaries: list[RunSummary],
    cheap: RunSummary,
    audit: dict[str, list[tuple[Any, Any, str]]],
    audit_failed: int,
    inputs: dict[str, Dataset],
) -> dict[str, Any]:
    """The ``cascade`` entry of the run summary.

    Example:
        >>> scored.summary.cascade["escalated"], scored.summary.cascade["rate"]  # doctest: +SKIP
        (12, 0.3)
    """
    by_metric: dict[str, dict[str, int]] = {}
    reasons: Counter = Counter()
    for p in picks.values():
        for name, (why, audited) in p.items():
            m = by_metric.setdefault(name, {"rows": 0, "escalated": 0, "audited": 0})
            m["rows"] += len(why)
            m["escalated"] += sum(1 for w in why if w)
            m["audited"] += sum(1 for w, a in zip(why, audited, strict=True) if a and not w)
            reasons.update(w for w in why if w)
    pairs = sum(m["rows"] for m in by_metric.values())
    escalated = sum(m["escalated"] for m in by_metric.values())
    sent = escalated + sum(m["audited"] for m in by_metric.values())
    cheap_model = ", ".join(j.model for j in job.settings.judges)  # a panel's: every judge's
    strong_model = ", ".join(j.model for j in strong_job.settings.judges)
    tiers = {"cheap": _tier(cheap_model, [cheap], pairs), "strong": _tier(strong_model, summaries, sent)}
    tiers["strong"]["base_url_host"] = urlparse(strong_job.settings.base_url or "").netloc.rpartition("@")[2]
    cascade_cost = _sum(tiers["cheap"]["total_cost"], tiers["strong"]["total_cost"])
    projected = _strong_only(strong_job, picks, inputs, tiers["strong"])
    strong_only = _sum(tiers["strong"]["total_cost"], projected)
    out: dict[str, Any] = {
        "when": job.settings.escalate_when,
        "strong_model": strong_model,
        "strong_samples": strong_job.settings.samples,
        "pairs": pairs,
        "escalated": escalated,
        "rate": round(escalated / pairs, 4) if pairs else None,
        "reasons": dict(reasons.most_common()),
        "metrics": by_metric,
        "tiers": tiers,
        "cost": cascade_cost,
        "strong_only_cost": strong_only,
        "saved": None if cascade_cost is None or strong_only is None else round(strong_only - cascade_cost, 6),
    }
    if job.settings.escalate_audit:
        out["audit"] = {
            "share": job.settings.escalate_audit,
            "rows": sum(m["audited"] for m in by_metric.values()),
            "failed": audit_failed,
            "agreement": {col: agreement(p) for col, p in audit.items()},
        }
    return out


def _tier(model: str, summaries: list[RunSummary], pairs: int) -> dict[str, Any]:
    """One tier's counters (this run's), its cost this run, and the (row, metric)s it scored with their tokens
    and cost (every run's that made this result: the same on a rerun that pays nothing)."""
    out: dict[str, Any] = {"model": model, "pairs": pairs}
    merged = RunSummary()
    for s in summaries:  # the driver's one rule: every counter of the summaries
        add_summary(merged, s)
    out.update({k: getattr(merged, k) for k in summary_counters()})
    out["cost"] = _sum(*[s.cost() for s in summaries]) if summaries else 0.0
    out["total_cost"] = _sum(*[s.cost(s.totals()) for s in summaries]) if summaries else 0.0
    totals = [s.totals() for s in summaries]
    out["scored_prompt_tokens"] = sum(int(t["prompt_tokens"]) for t in totals)
    out["scored_completion_tokens"] = sum(int(t["completion_tokens"]) for t in totals)
    return out


def _sum(*costs: float | None) -> float | None:
    """A sum of costs, or None when one has no price (a partial sum would mislead)."""
    return None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6)


def _strong_only(
    strong_job: JudgeJob, picks: dict, inputs: dict[str, Dataset], strong_tier: dict[str, Any]
) -> float | None:
    """The projected cost of the strong judge on the (row, metric)s it did not score: their requests rendered and
    their input tokens counted as ``estimate_cost`` counts them (over at most ``PROJECTION_ROWS`` rows, evenly
    spread, scaled up), their output tokens at the strong judge's mean per (row, metric) in this result (else projected
    from the declared outputs), at its price (the batch price in batch mode). None: the model has no price."""
    settings = strong_job.settings
    if not strong_job.layout.plain:
        return _strong_only_by_pair(picks, strong_tier)
    # it sends nothing: no budget (a model without a price and a max_cost is the strong pass's error, not this)
    client = JudgeClient(settings.model_copy(update={"max_cost": None}), api_key=strong_job.key(needed=False))
    if client.price is None:
        return None
    n_in = n_pairs = n_out = 0.0
    for m in strong_job.metrics:
        for split, p in picks.items():
            if m.name not in p:
                continue
            rows = [i for i, (w, a) in enumerate(zip(*p[m.name], strict=True)) if not (w or a)]
            if not rows:
                continue
            sample = rows[:: math.ceil(len(rows) / PROJECTION_ROWS)]
            with datasets_bars_off():
                splits = {split: inputs[split].select(sample).flatten_indices()}
            columns = strong_job.for_metrics([m]).columns
            plans, _, _ = build_plans(splits, [m], columns, settings.temperature, "overwrite", False)
            est = project(splits, plans, [m], client, None, strong_job.key(needed=False))
            share = len(rows) / len(sample)
            n_in += est.input_tokens * share
            n_pairs += len(rows)
            n_out += est.output_tokens * share
    if strong_tier["pairs"] and strong_tier["scored_completion_tokens"]:  # its own replies say best how long
        n_out = strong_tier["scored_completion_tokens"] / strong_tier["pairs"] * n_pairs
    return round(client.price.cost(n_in, n_out, batch=settings.batch), 6)


def _strong_only_by_pair(picks: dict, strong_tier: dict[str, Any]) -> float | None:
    """The projection of a strong tier of several replies per (row, metric) (a panel, samples: each judge at its
    own price): the (row, metric)s it did not score at its mean cost per (row, metric) in this result."""
    if strong_tier["total_cost"] is None or not strong_tier["pairs"]:
        return None
    pairs = [zip(why, audited, strict=True) for p in picks.values() for why, audited in p.values()]
    rest = sum(1 for z in pairs for w, a in z if not (w or a))
    return round(strong_tier["total_cost"] / strong_tier["pairs"] * rest, 6)


def agreement(pairs: list[tuple[Any, Any, str]]) -> dict[str, Any]:
    """The cascade's final value against the strong judge's on the audited rows: the rows both answered, the
    share with the same value, and for numbers the mean absolute difference, for verdicts Cohen's kappa.

    Example:
        >>> agreement([(7, 7, "int64"), (5, 8, "int64")])
        {'rows': 2, 'exact': 0.5, 'mean_abs_diff': 1.5}
    """
    both = [(a, b, t) for a, b, t in pairs if a is not None and b is not None]
    out: dict[str, Any] = {"rows": len(both), "exact": None}
    if not both:
        return out
    out["exact"] = round(sum(a == b for a, b, _ in both) / len(both), 4)
    if both[0][2] in NUMERIC:
        out["mean_abs_diff"] = round(sum(abs(a - b) for a, b, _ in both) / len(both), 4)
    else:
        labels = sorted({v for a, b, _ in both for v in (a, b)}, key=str)
        k = cohen_kappa(np.array([b for _, b, _ in both]), np.array([a for a, _, _ in both]), labels)
        out["kappa"] = None if k is None or math.isnan(k) else round(k, 4)
    return out
