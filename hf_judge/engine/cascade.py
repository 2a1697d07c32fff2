"""A cascade of judges: the run's judge (the cheap tier) scores every row, a stronger one (``escalate_model``) the
rows whose cheap replies say they are doubtful.

Two passes over the same engine, so that a cascade runs wherever a Dataset is scored (one process, workers,
batch mode): the cheap pass is the run without its ``escalate_*`` settings; its result says, per (row, metric),
whether the strong tier's request is made (:func:`pick`); the strong pass scores those rows with the strong
judge as a job of its own (its model, server and key; its own samples and panel: ``escalate_samples``,
``escalate_models``), and :func:`combine` puts the two
together. Both passes keep their replies in the reply store, so a rerun pays neither tier again.

A (row, metric) escalates when any condition of ``escalate_when`` holds on its cheap values
(:func:`hf_judge.settings.escalation_conditions`), or when the cheap tier has no value for it (a failed
reply: the strong judge may answer where the cheap one could not). ``escalate_audit`` sends a share of the
other rows too, chosen by a hash of the row's judged values and the metric (the same rows on every rerun);
their final score stays the cheap tier's, and the report says how often the strong judge agreed with it.

Columns: the metric's usual columns hold the deciding tier's values; ``<metric>_judge`` says which tier
decided (``cheap`` or ``strong``); ``<column>__cheap`` and ``<column>__strong`` hold both tiers' judgments
(and their probability-weighted columns) where both ran. A cheap tier's ensemble columns (``_std``,
``_samples``, a panel's ``__<judge>``) stay the cheap tier's; the strong tier's are ``<its column>__strong``
(``_samples__strong``, ``__<judge>__strong``). Token columns add the strong tier's tokens on the rows it judged.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features, IterableDataset, IterableDatasetDict

from ..errors import ConfigError, CostExceededError
from ..judging import logprobs
from ..judging.ensemble import JUDGE_SEP, NUMERIC, Layout
from ..judging.metrics import Metric, MetricKind
from ..progress import ProgressCallback, datasets_bars_off
from ..results.errors_split import ERRORS_SPLIT, errors_dataset
from ..results.scored import ScoredDatasetDict
from ..results.summary import RunSummary
from ..settings import escalation_conditions
from ..tables import arrow_table
from .capabilities import check
from .cascade_report import report
from .core import COMPLETION_TOKENS, PROMPT_TOKENS, score_types
from .counting import add_summary
from .job import ESCALATE_FIELDS, JudgeJob
from .prepare import as_splits
from .shell import bias_checks, rows_figures

CHEAP, STRONG = "cheap", "strong"
Runner = Callable[..., ScoredDatasetDict]


def score_cascade(
    ds: Dataset | DatasetDict, job: JudgeJob, run: Runner, *, progress: bool | ProgressCallback, if_exists: str
) -> ScoredDatasetDict:
    """Score ``ds`` with the cascade of ``job`` (see the module docstring); ``run`` scores a job
    (:func:`hf_judge.engine.score.score_job`), once for each tier.

    Example:
        >>> score_cascade(ds, job, score_job, progress=False, if_exists="keep")  # doctest: +SKIP
    """
    settings = job.settings
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        check("stream", settings, only=("cascade",))
    conditions = escalation_conditions(settings.escalate_when or "")
    check_margins(conditions, job.metrics)
    check_disagreement(conditions, job.metrics, job.layout)
    inputs, _ = as_splits(ds)
    # the bias checks read the scores that decided, once the tiers are combined (not each tier's)
    checks = bias_checks(job.bias_checks, job.metrics, job.columns, settings, inputs)
    strong_job = replace(job.strong_tier(), bias_checks=False)
    check_strong_samples(strong_job)  # before the cheap tier pays: its replies would be wasted on a refusal
    cheap_job = job.with_settings(**dict.fromkeys(ESCALATE_FIELDS), escalate_audit=0.0, escalate_samples=1)
    cheap = run(ds, replace(cheap_job, bias_checks=False), progress=progress, if_exists=if_exists)
    picks: dict[str, dict[str, tuple[list[str | None], list[bool]]]] = {}
    for split, d in inputs.items():
        # a metric whose columns the input had and kept (if_exists="keep") was not scored: nothing to escalate
        fresh = [
            m for m in job.metrics if if_exists == "overwrite" or not set(job.layout.columns(m)) & set(d.column_names)
        ]
        table = arrow_table(cheap[split])
        picks[split] = {m.name: pick(table, m, job, conditions, d) for m in fresh}
    strong: dict[tuple[str, str], tuple[list[int], Dataset]] = {}
    tokens: dict[str, dict[int, list[int | None]]] = {}  # split -> row -> the strong tier's [prompt, completion]
    strong_errors: list[dict] = []
    summaries: list[Any] = []
    for metrics, rows in _groups(job.metrics, picks):
        with datasets_bars_off():  # the selection's own bar says nothing to the user
            sub = DatasetDict({s: inputs[s].select(r).flatten_indices() for s, r in rows.items()})
        out = _strong_pass(run, sub, strong_job.for_metrics(metrics), progress, [cheap.summary, *summaries])
        summaries.append(out.summary)
        for s, r in rows.items():
            for m in metrics:
                strong[(s, m.name)] = (r, out[s])
            if job.token_columns:
                add_tokens(tokens.setdefault(s, {}), r, out[s])
        strong_errors += [{**e, "row": rows[e["split"]][e["row"]]} for e in out[ERRORS_SPLIT].to_list()]
    out = combine(job, strong_job, cheap, picks, strong, strong_errors, summaries, inputs, tokens)
    assert out.summary is not None  # combine's: the tiers' summaries together
    out.update(rows_figures(out.summary, {k: v for k, v in out.items() if k != ERRORS_SPLIT}, checks))
    return out


def check_strong_samples(strong: JudgeJob) -> None:
    """``escalate_samples`` > 1 for a metric whose own temperature is 0 (no ``escalate_temperature`` or
    ``temperature`` given): a ConfigError before either tier sends (``Settings`` checks the temperatures given)."""
    if strong.settings.samples == 1 or strong.settings.temperature is not None:
        return
    cold = sorted(m.name for m in strong.metrics if m.temperature == 0)
    if cold:
        raise ConfigError(
            f"escalate_samples={strong.settings.samples} for {', '.join(cold)}, whose temperature is 0: the stronger "
            "judge's replies would be the same reply paid for each time. Give it a temperature above 0: "
            "escalate_temperature=0.7 (--escalate-temperature 0.7)"
        )


def add_tokens(into: dict[int, list[int | None]], rows: list[int], d: Dataset) -> None:
    """Add a strong pass's per-row token columns (``d``, the rows ``rows`` of a split) to ``into``."""
    for r, p, c in zip(rows, d[PROMPT_TOKENS], d[COMPLETION_TOKENS], strict=True):
        got = into.setdefault(r, [None, None])
        got[0], got[1] = _plus(got[0], p), _plus(got[1], c)


def _plus(a: int | None, b: int | None) -> int | None:
    """A sum of token counts where a missing one (null: no usage reported, no reply) adds nothing."""
    return a if b is None else b if a is None else a + b


def check_margins(conditions: list[tuple], metrics: list[Metric]) -> None:
    """A ``margin:COLUMN=...`` condition must name a numeric column of a metric of the run."""
    numeric = {c for m in metrics for c, t in m.column_types.items() if t in NUMERIC}
    for c in conditions:
        if c[0] == "margin" and c[1] not in numeric:
            raise ConfigError(
                f"escalate_when: margin:{c[1]}=... names no score column of the run's metrics; "
                f"its score columns are {', '.join(sorted(numeric)) or 'none'}"
            )


def check_disagreement(conditions: list[tuple], metrics: list[Metric], layout: Layout) -> None:
    """A ``disagreement`` condition needs several replies per (row, metric): samples, a panel's judges, or a
    pairwise judge's two orders (``swap``); with none of them it could never hold, and is refused."""
    if not any(c[0] == "disagreement" for c in conditions) or not layout.plain:
        return
    if any(m.kind == MetricKind.PAIRWISE and m.swap for m in metrics):
        return
    raise ConfigError(
        "escalate_when='disagreement' compares several replies per (row, metric), and the run gets one for "
        f"{', '.join(m.name for m in metrics)}: add samples=3 (--samples 3, with a temperature above 0) or a panel "
        "(models=[...], --models a,b); a pairwise metric judged in both orders (Comparative) has two replies a row"
    )


def _strong_pass(
    run: Runner, sub: DatasetDict, job: JudgeJob, progress: bool | ProgressCallback, before: list
) -> ScoredDatasetDict:
    """One pass of the strong tier, with what is left of ``max_cost``: the budget is the cascade's, both tiers
    together (``before``: the summaries of the passes that spent some)."""
    budget = job.settings.max_cost
    if budget is None:
        return run(sub, job, progress=progress, if_exists="overwrite")
    spent = sum(s.cost() or 0.0 for s in before)
    try:
        return run(sub, job.with_settings(max_cost=max(budget - spent, 1e-9)), progress=progress, if_exists="overwrite")
    except CostExceededError as e:
        raise CostExceededError(
            f"max_cost=${budget:g} is the cascade's, both tiers together: ${spent:.4f} went before the strong "
            f"tier ({job.settings.model}) began, which then spent the rest. {e}"
        ) from None


def _groups(metrics: list[Metric], picks: dict) -> list[tuple[list[Metric], dict[str, list[int]]]]:
    """The strong pass's jobs: metrics whose rows to send are the same go in one job (one pass, one batch)."""
    by_rows: dict[tuple, list[Metric]] = {}
    for m in metrics:
        rows = {
            s: [i for i, (why, audit) in enumerate(zip(*p[m.name], strict=True)) if why or audit]
            for s, p in picks.items()
            if m.name in p
        }
        rows = {s: r for s, r in rows.items() if r}
        if rows:
            by_rows.setdefault(tuple((s, tuple(r)) for s, r in rows.items()), []).append(m)
    return [(ms, {s: list(r) for s, r in key}) for key, ms in by_rows.items()]


def judged_columns(metric: Metric) -> list[str]:
    """The columns of ``metric`` that hold a judgment (numbers, booleans, enums, a pairwise winner)."""
    verdicts = {o.column for o in metric.outputs if o.enum}
    if metric.kind == MetricKind.PAIRWISE:
        verdicts.add(f"{metric.name}_winner")
    return [c for c, t in metric.column_types.items() if t in NUMERIC or t == "bool" or c in verdicts]


def pick(
    table: pa.Table, metric: Metric, job: JudgeJob, conditions: list[tuple], data: Dataset
) -> tuple[list[str | None], list[bool]]:
    """Per row of a cheap result: why the row escalates (the first condition that holds, ``failed`` where the
    cheap tier has no value) or None; and whether it is audited (sent too, its score kept)."""
    n = table.num_rows
    main = table.column((judged_columns(metric) or list(metric.column_types))[0]).to_pylist()
    why: list[str | None] = ["failed" if v is None else None for v in main]
    for c in conditions:
        hit = _condition(c, table, metric, job.layout)
        why = [w or (c[0] if h else None) for w, h in zip(why, hit, strict=True)]
    rate = job.settings.escalate_audit
    if not rate or all(why):
        return why, [False] * n
    shares = audit_shares(data, metric, job.columns)
    return why, [w is None and s < rate for w, s in zip(why, shares, strict=True)]


def _condition(c: tuple, table: pa.Table, metric: Metric, layout: Layout) -> list[bool]:
    """Per row: whether condition ``c`` holds on the cheap tier's values."""
    n = table.num_rows
    names = set(table.column_names)
    if c[0] == "margin":
        if c[1] not in metric.column_types:  # a column of another metric: it decides that metric's rows only
            return [False] * n
        at, by = c[2], c[3]
        return [v is not None and abs(v - at) <= by + 1e-9 for v in table.column(c[1]).to_pylist()]
    if c[0] == "confidence":
        return _low_confidence(table, metric, c[1])
    hit = [False] * n
    for col in judged_columns(metric):
        groups = [f"{col}_samples"] if layout.samples > 1 and not layout.panel else []
        for name in groups:
            for i, values in enumerate(table.column(name).to_pylist()):
                hit[i] = hit[i] or len({v for v in values or () if v is not None}) > 1
        if layout.panel:
            judges = [table.column(f"{col}{JUDGE_SEP}{j}").to_pylist() for j in layout.judges]
            for i, values in enumerate(zip(*judges, strict=True)):
                hit[i] = hit[i] or len({v for v in values if v is not None}) > 1
    if f"{metric.name}_disagree" in names:  # a swapped pairwise judge whose two orders disagree
        hit = [h or bool(v) for h, v in zip(hit, table.column(f"{metric.name}_disagree").to_pylist(), strict=True)]
    return hit


def _low_confidence(table: pa.Table, metric: Metric, cut: float) -> list[bool]:
    """Per row: the lowest confidence of the metric's judgments under ``cut``; a reply without
    log-probabilities (no confidence) counts as under it. A binary judge's confidence is max(p, 1 - p)."""
    cols = [c for c in logprobs.columns(metric) if c.endswith(("_confidence", "_p_positive"))]
    hit = [False] * table.num_rows
    for c in cols:
        for i, v in enumerate(table.column(c).to_pylist()):
            conf = None if v is None else max(v, 1 - v) if c.endswith("_p_positive") else v
            hit[i] = hit[i] or conf is None or conf < cut
    return hit


def audit_shares(data: Dataset, metric: Metric, columns: dict[str, str]) -> list[float]:
    """Per row, a number in [0, 1) from a hash of the metric's name and the row's judged values: the same row
    gets the same number on every run, and a row whose content changes gets another.

    Example:
        >>> from hf_judge import load_metric
        >>> ds = Dataset.from_dict({"instruction": ["a", "b"], "output": ["x", "y"]})
        >>> [round(s, 3) for s in audit_shares(ds, load_metric("QA_Clarity"), {})]  # doctest: +SKIP
        [0.415, 0.872]
    """
    used = [c for c in metric.resolve_columns(columns, data.column_names).values() if c is not None]
    rows = data.select_columns(used).with_format("arrow")[:].to_pylist() if used else [{}] * len(data)
    out = []
    for row in rows:
        text = repr([metric.name, *[row[c] for c in used]]).encode()
        out.append(int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2**64)
    return out


def combine(
    job: JudgeJob,
    strong_job: JudgeJob,
    cheap: ScoredDatasetDict,
    picks: dict,
    strong: dict[tuple[str, str], tuple[list[int], Dataset]],
    strong_errors: list[dict],
    summaries: list,
    inputs: dict[str, Dataset],
    tokens: dict[str, dict[int, list[int | None]]] | None = None,
) -> ScoredDatasetDict:
    """The two tiers' results as one: each split's columns (see the module docstring), the errors of the tier
    that decided each (row, metric), and the summary's ``cascade`` report (:func:`report`). ``tokens``: per split
    and row, the strong tier's tokens, added to the token columns (``token_columns=True``)."""
    out = ScoredDatasetDict()
    added: list[str] = []
    audit: dict[str, list[tuple[Any, Any, str]]] = {}
    for split in cheap:
        if split == ERRORS_SPLIT:
            continue
        if split not in picks or not picks[split]:
            out[split] = cheap[split]
            continue
        out[split], cols = _split(job, strong_job.layout, cheap[split], picks[split], strong, split, audit)
        out[split] = _with_tokens(out[split], (tokens or {}).get(split, {}))
        added += [c for c in cols if c not in added]
    escalated = {(s, i, m) for s, p in picks.items() for m, (why, _) in p.items() for i, w in enumerate(why) if w}
    errors = [e for e in cheap[ERRORS_SPLIT].to_list() if (e["split"], e["row"], e["metric"]) not in escalated]
    errors += [e for e in strong_errors if (e["split"], e["row"], e["metric"]) in escalated]
    order = {s: i for i, s in enumerate(inputs)}
    errors.sort(key=lambda e: (order.get(e["split"], len(order)), e["row"]))
    out[ERRORS_SPLIT] = errors_dataset(errors)
    summary = cheap.summary
    assert summary is not None  # score_job sets it
    summary.columns = [*summary.columns, *added]
    summary.errors = dict(Counter(e["kind"] for e in errors))
    audit_failed = len(strong_errors) - sum(
        1 for e in strong_errors if (e["split"], e["row"], e["metric"]) in escalated
    )
    summary.cascade = report(job, strong_job, picks, summaries, summary, audit, audit_failed, inputs)
    add_tiers(summary, summaries)
    out.summary = summary
    return out


def add_tiers(summary: RunSummary, strong: list[RunSummary]) -> None:
    """The run's counters are both tiers' (``cascade.tiers`` has each one's), added by the driver's one rule
    (:func:`~.counting.add_summary`: every counter, each judge's figures, failed attempts, notes, runs); its one
    price only where both tiers have the same (else the cost is the cascade report's, each tier at its model's
    price)."""
    for s in strong:
        add_summary(summary, s)


def _split(
    job: JudgeJob,
    strong_layout: Layout,
    cheap: Dataset,
    picks: dict[str, tuple[list[str | None], list[bool]]],
    strong: dict,
    split: str,
    audit: dict[str, list[tuple[Any, Any, str]]],
) -> tuple[Dataset, list[str]]:
    """One split's cascade columns: the usual ones from the deciding tier, ``_judge``, ``__cheap``/``__strong``,
    and the strong tier's own ensemble columns (its samples, its panel's judges) with ``__strong``."""
    table = base = arrow_table(cheap)
    added: list[str] = []
    metrics = {m.name: m for m in job.metrics}
    for name, (why, audited) in picks.items():
        metric = metrics[name]
        rows, s = strong.get((split, name), ([], None))
        at = {r: j for j, r in enumerate(rows)}
        lp = list(logprobs.columns(metric)) if job.settings.logprobs else []
        types = strong_types(metric, strong_layout, job.settings.logprobs)
        for col in [*metric.column_types, *lp]:
            if col not in table.column_names:
                continue
            values, theirs = table.column(col).to_pylist(), s[col] if s is not None else []
            for r, j in at.items():
                if why[r]:
                    values[r] = theirs[j]
            # the type of the strong tier's layout too where it decided no row: each split, each run alike
            i = table.column_names.index(col)
            table = table.set_column(i, col, pa.array(values, type=_wider(table.schema.field(col).type, types[col])))
        judge = [STRONG if w else CHEAP for w in why]
        table = table.append_column(f"{name}_judge", pa.array(judge, pa.string()))
        added.append(f"{name}_judge")
        for col in [*judged_columns(metric), *lp]:
            ours = base.column(col).to_pylist()
            theirs = s[col] if s is not None else []
            both_c = [ours[r] if r in at else None for r in range(len(why))]
            both_s = [theirs[at[r]] if r in at else None for r in range(len(why))]
            table = table.append_column(f"{col}{JUDGE_SEP}{CHEAP}", pa.array(both_c, base.schema.field(col).type))
            table = table.append_column(f"{col}{JUDGE_SEP}{STRONG}", pa.array(both_s, types[col]))
            added += [f"{col}{JUDGE_SEP}{CHEAP}", f"{col}{JUDGE_SEP}{STRONG}"]
            if col in metric.column_types:
                audit.setdefault(col, []).extend(
                    (ours[r], theirs[at[r]], metric.column_types[col]) for r in at if audited[r] and not why[r]
                )
        own = {*metric.column_types, *logprobs.columns(metric)}
        for col in [c for c in types if c not in own]:  # the strong tier's samples and judges
            theirs = s[col] if s is not None else []
            values = [theirs[at[r]] if r in at else None for r in range(len(why))]
            table = table.append_column(f"{col}{JUDGE_SEP}{STRONG}", pa.array(values, types[col]))
            added.append(f"{col}{JUDGE_SEP}{STRONG}")
    recast = [
        c for c in metrics_columns(job) if c in table.column_names and table.schema.field(c) != base.schema.field(c)
    ]
    info = cheap.info.copy()
    new = {c: Features.from_arrow_schema(pa.schema([table.schema.field(c)]))[c] for c in [*recast, *added]}
    info.features = Features({**cheap.features, **new})
    return Dataset(table.replace_schema_metadata(None), info=info, split=cheap.split), added


def metrics_columns(job: JudgeJob) -> list[str]:
    """The usual columns of the run's metrics (and their probability-weighted ones)."""
    return [c for m in job.metrics for c in (*m.column_types, *logprobs.columns(m))]


def strong_types(metric: Metric, layout: Layout, with_logprobs: bool) -> dict[str, pa.DataType]:
    """Every column the strong tier writes for ``metric`` -> its Arrow type (its layout's: a mean of samples is a
    float64, a sample list a list)."""

    def arrow(t: Any) -> pa.DataType:
        return pa.list_(arrow(t[1])) if isinstance(t, tuple) else pa.type_for_alias(str(t))

    return {c: arrow(t) for c, t in score_types([metric], layout, with_logprobs).items()}


def _wider(cheap: pa.DataType, strong: pa.DataType) -> pa.DataType:
    """The usual column's type when both tiers write it: the cheap tier's, or float64 where one tier's is an
    integer and the other's a float (one judge's score against the mean of the strong tier's samples)."""
    if cheap == strong or not (pa.types.is_floating(strong) and pa.types.is_integer(cheap)):
        return cheap
    return pa.float64()


def _with_tokens(d: Dataset, tokens: dict[int, list[int | None]]) -> Dataset:
    """``d`` with the strong tier's tokens added to its token columns, at the rows the strong tier judged."""
    if not tokens or PROMPT_TOKENS not in d.column_names:
        return d
    table = arrow_table(d)
    for k, col in enumerate((PROMPT_TOKENS, COMPLETION_TOKENS)):
        values = table.column(col).to_pylist()
        for r, both in tokens.items():
            values[r] = _plus(values[r], both[k])
        table = table.set_column(table.column_names.index(col), col, pa.array(values, pa.int64()))
    return Dataset(table, info=d.info.copy(), split=d.split)
