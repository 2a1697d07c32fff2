"""``choose_judge``: candidate judges scored on labelled rows in one run, then ranked (analysis/leaderboard.py).

The candidates run as one panel (``models=``): one pass over the rows at the speed of the wire, one reply store,
one budget, batch mode with a batch per judge at once, each judge's columns ``<column>__<judge>`` and its own
counters, tokens, latency and price in ``summary.judge_requests``. A pairwise metric that asks both orders is
scored as two rows per pair (the responses as given, then swapped, the metric's ``swap`` off) so that each
order's verdict is kept: JudgeBench's rule needs them (:func:`~hf_judge.analysis.leaderboard.pair_verdicts`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Value, concatenate_datasets

from ..analysis import bias, rules, stats
from ..analysis.agreement import agreement
from ..analysis.benchmarks import alpaca_mode
from ..analysis.ceiling import ceiling_of_counts, label_counts
from ..analysis.chance import chance_level
from ..analysis.label_rules import check_labels, verdict
from ..analysis.label_table import count_labels
from ..analysis.leaderboard import JudgeChoice, combined_winner, flip, pair_verdicts, recommend, rule_of
from ..analysis.stats import headline_figures, over_all_rows
from ..errors import ConfigError
from ..judging.catalogue import resolve_metrics
from ..judging.ensemble import JUDGE_SEP
from ..judging.metrics import Metric, MetricKind
from ..progress import ProgressCallback
from ..results.bias import pair_variables
from ..results.errors_split import ERRORS_SPLIT, current, judge_error_table
from ..results.scored import ScoredDatasetDict
from ..results.summary import RunSummary
from ..settings import JobValues, Panelist, Settings, Unpack
from ..tables import arrow_table
from .choose_checks import Items, add_recorded, add_transitivity, check_items, check_recorded
from .choose_costs import costs, projected_costs, projection
from .choose_groups import by_group, check_by_column
from .choose_output import check_output_dir, write_output
from .choose_push import check_push, push_choice
from .choose_rules import by_rules, check_votes, people_of, subsets_of
from .job import COMMON_ARGUMENTS, Job
from .score import score_dataset

LABEL = "__label__"  # the labels' column in the scored rows, whatever the data calls it
NO_CEILING = (
    "one label per row; the ceiling needs several people's labels of the same rows (annotators=[...], "
    "--annotators A,B,C, or a labels file with a reviewer column)"
)


def choose_judge(
    data: Dataset | DatasetDict,
    metric: str | Sequence[str],
    judges: Sequence[str | Mapping[str, Any] | Panelist],
    *,
    label: str | None = None,
    labels: str | os.PathLike | Sequence[Mapping[str, Any]] | None = None,
    annotators: Sequence[str] | None = None,
    label_threshold: float | None = None,
    positive: Any = None,
    for_dataset: Dataset | DatasetDict | None = None,
    output_dir: str | os.PathLike | None = None,
    resamples: int = 1000,
    seed: int = 0,
    progress: bool | ProgressCallback = True,
    rule: str | None = None,
    recorded: Mapping[str, str] | None = None,
    items: Items | None = None,
    push_to_hub: str | None = None,
    token: str | None = None,
    by: str | None = None,
    votes: Sequence[str] | None = None,
    subset_column: str | None = None,
    **values: Unpack[JobValues],
) -> JudgeChoice:
    """Score the labelled rows of ``data`` with each candidate judge and rank them: which judge to use, how far
    to trust it, what it costs.

    ``judges``: one or more model names, or panelist specs (``{"model": ..., "base_url": ..., "api_key":
    "env:VAR", "provider": ...}``, as in a panel) to put each on its own server. ``metric``: the metric judged, or
    several prompt files of one kind (``["QA_Correctness", "MyCorrectness"]``: ranks judge x prompt).
    The labels: the column ``label`` of ``data``, or ``labels`` (a labels file as ``agreement`` reads it, its
    rows addressing ``data``'s; several reviewers of one row: their majority, and the human ceiling), or
    ``annotators`` (several people's label columns: their majority is the label, and the human ceiling is
    shown). ``label_threshold``: ratings read as verdicts (label >= it) for a binary judge; ``positive``: the
    label value that is positive. Every label is checked before any request, by ``agreement``'s rule
    (:func:`~hf_judge.analysis.label_rules.check_labels`): a value that is no verdict, preference or finite
    rating is a ConfigError naming its row or line; a null or NaN label is a row left out (a note says how many).
    A labels file is counted in one pass (:func:`~hf_judge.analysis.label_table.count_labels`), a reviewer once
    per row.

    The table's figures count ALL labelled rows (a row a judge did not decide counts as not agreeing; its
    coverage and failures by error kind are columns): accuracy and Cohen's kappa for verdicts and winners,
    Spearman's rho and Kendall's tau for ratings (on the rated rows), each with a seeded bootstrap interval
    (``resamples``, ``seed``); for a pairwise metric judged in both orders JudgeBench's rule (a pair is right
    when the sum of its orders' votes, +1 right, -1 wrong, 0 tie or unparsed, is above 0), the single-order
    accuracy and the share of pairs whose orders disagree; length bias (from the run's bias checks) and, with
    ``generator_column``, each judge's error on its own family's texts against the others'; cost per 1,000
    rows at list and batch price (the tokens the run's replies used), median and p95 latency.

    Chance (the table's last row): what always answering the majority label scores (kappa 0; for ratings, rho 0).
    The recommendation: of the judges whose interval (and kappa's) lies wholly above chance, the cheapest whose
    interval overlaps the best one's; none when no judge is beyond chance (``recommendation["name"]`` is None and
    ``recommendation["unfit"]`` says why), with about how many labelled rows would settle it when the intervals
    overlap. One judge alone is measured the same way (nothing is compared).
    ``for_dataset``: what scoring it with the recommended judge would cost (``--dry-run``'s projection).
    ``rule``: the published rule the table's headline (and so the recommendation) is computed by, for a pairwise
    metric (:mod:`hf_judge.analysis.rules`: "judgebench", "llmbar", "alpacaeval", "mt-bench", "rewardbench"; a
    name that is no rule, or a rule that does not apply to the metric, is a ConfigError before any request);
    default: JudgeBench's for a pairwise metric in both orders. Each pairwise entry's ``rules`` holds every
    applicable rule's figures, by name, whichever is the headline.
    ``by``: a column of the data (a category, subset or source): every figure per group too, with its interval,
    each group's figures those of a run on its rows alone, and its best judge (``choice.groups``,
    :mod:`hf_judge.engine.choose_groups`); a column the data lacks is refused before any request.
    ``votes``: the columns of each pair's people's votes (default: ``annotators``'), which the alpacaeval rule
    (their mode) and the mt-bench rule (each vote, as FastChat compares GPT-4 with each expert) compare a judge
    with, rather than the majority label; ``choice.humans`` then holds the people's own figure under each (mt-bench:
    every two votes on a pair; alpacaeval: each vote against the mode of the others), a row of the table under
    those rules. ``mt-bench-human`` names its experts' votes (not its authors').
    ``subset_column``: the column naming each pair's subset: the rewardbench rule's figure per subset and per section,
    its headline the sections' mean (RewardBench's weights; ``rewardbench`` names ``subset``), and llmbar's
    Adversarial mean (its adversarial subsets' unweighted mean); a column the data lacks is refused before any request.
    ``output_dir``: ``choose_judge.json``, ``choose_judge.md`` (a card's section) and beside them a folder per
    candidate, ``<judge>/``, the scored result that judge alone would have written (``load_result``, ``hf-judge
    view`` read it; :mod:`hf_judge.engine.choose_output` says why a folder each); with the plots extra,
    ``plots/choose_judge.png``. ``hf-judge view DIR`` shows the table as a section of the report page.

    The other arguments are :func:`hf_judge.score_dataset`'s (settings as keyword arguments, typed by
    :class:`~hf_judge.settings.JobValues`, or ``settings=``; ``generator_column`` is one of them). ``metric`` may
    be a :class:`hf_judge.Job` instead, whose judge (``model``, ``models``) the candidates replace:
    ``choose_judge(data, metric, judges, **values)`` is ``choose_judge(data, Job(metric, model=..., **values),
    judges)``, the same table from the same requests.

    Example:
        >>> from datasets import Dataset
        >>> ds = Dataset.from_dict({"question": ["2+2?"], "answer": ["4"], "human": [True]})
        >>> choice = choose_judge(ds, "Binary", ["gpt-4.1-nano", "gpt-4.1-mini"], label="human",  # doctest: +SKIP
        ...                       columns={"instruction": "question", "output": "answer"})
        >>> print(choice)  # doctest: +SKIP
        >>> choice.recommendation["name"]  # doctest: +SKIP
        'gpt-4.1-nano'
    """
    metric, setting_values = _judged(metric, values)
    where = {k: setting_values.pop(k) for k in COMMON_ARGUMENTS if k in setting_values}
    columns, prompts_dir, metric_params = where.get("columns"), where.get("prompts_dir"), where.get("metric_params")
    settings = where.get("settings")
    if setting_values.get("model") or setting_values.get("models"):
        raise ConfigError("choose_judge takes its candidates from judges=[...], not model= or models=")
    generator_column = setting_values.get("generator_column") or (settings.generator_column if settings else None)
    candidates = _candidates(judges)
    if output_dir is not None:
        check_output_dir(output_dir)
    if push_to_hub is not None:
        check_push(push_to_hub, token)
    names = [m.strip() for m in metric.split(",")] if isinstance(metric, str) else list(metric)
    metrics = resolve_metrics(names, prompts_dir, metric_params)
    kind = _kind_of(metrics)
    swapped = kind == "pairwise" and all(m.swap for m in metrics)
    rule = rules.check_rule(rule, kind, swapped)
    by_votes = rule in rules.BY_VOTES and kind == "pairwise"
    found = _labelled(
        data, label, labels, annotators, _Rule(kind, positive, label_threshold, _outputs(metrics), by_votes)
    )
    ds = found.ds
    check_by_column(ds, by, LABEL)
    vote_columns = check_votes(ds, votes, annotators, kind)
    subsets_of(ds, subset_column)
    verdicts, named_items = check_recorded(ds, recorded, kind, LABEL), check_items(ds, items)
    scored_ds, params = _orders(ds, metrics, columns or {}, metric_params, swapped)
    # the metrics as loaded (resolving again costs ~18 ms: the packs' entry points, the prompt files), unless the
    # orders changed their params (a pair's own swap off)
    same = params == dict(metric_params or {})
    result = score_dataset(
        scored_ds,
        metrics if same else names,
        progress=progress,
        **{**where, "metric_params": None if same else params or None},
        **_panel_settings(setting_values, candidates, generator_column),
    )
    assert isinstance(result, ScoredDatasetDict)
    # checked before scoring (label_rules): verdicts True/False, winners "1"/"2"/"tie"
    truth = _head(ds, LABEL, len(ds))
    choice = _rank(result, ds, metrics, candidates, kind, swapped, generator_column, truth, resamples, seed)
    pair_votes, subsets = people_of(ds, vote_columns), subsets_of(ds, subset_column)
    by_rules(choice, result["train"], swapped, truth, rule, resamples, seed, pair_votes, subsets)
    _longer_wins(choice, result["train"], len(ds), metrics, candidates, columns or {}, truth)
    if by is not None:
        rank = partial(
            _rank_group, metrics=metrics, candidates=candidates, kind=kind, swapped=swapped,
            generator_column=generator_column, resamples=resamples, seed=seed, columns=columns or {}, rule=rule,
            votes=vote_columns, subset_column=subset_column,
        )  # fmt: skip
        choice.groups = by_group(result, ds, by, swapped, truth, rank)
    if found.ceiling is not None:
        counts, label_values, people = found.ceiling
        choice.ceiling = ceiling_of_counts(
            counts, label_values, kind, annotators=people, resamples=resamples, seed=seed
        )
    else:
        choice.ceiling_missing = NO_CEILING
    if found.left_out:
        choice.notes.append(found.left_out)
    projected_costs(choice, scored_ds, candidates, columns, prompts_dir, params, settings, setting_values)
    add_recorded(choice, verdicts, truth, resamples, seed, (rule, pair_votes, subsets))
    if named_items is not None:
        add_transitivity(choice, ds, result["train"], named_items, swapped, verdicts)
    choice.recommendation = recommend([e for e in choice.entries if not e.get("recorded")], choice.chance, choice.rows)
    if for_dataset is not None and (choice.recommendation or {}).get("name"):
        choice.projection = projection(
            for_dataset, choice, candidates, columns, prompts_dir, metric_params, settings, setting_values
        )
    pairs = (LABEL, truth) if swapped else None  # each order's rows with the label in their own terms
    if output_dir is not None:
        write_output(output_dir, result, choice, candidates, len(ds) if swapped else None, pairs)
    if push_to_hub is not None:
        push_choice(push_to_hub, token, output_dir, result, choice, candidates, len(ds) if swapped else None, pairs)
    return choice


def _judged(metric: Any, values: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(the metrics, the keyword arguments) of a call: a Job's, less its judge (the candidates replace it), or
    those given."""
    if not isinstance(metric, Job):
        return metric, dict(values)
    job = Job.of(metric, values, "choose_judge")  # a TypeError when keyword arguments come with it
    given = job.values
    for judge in ("model", "models"):
        given.pop(judge, None)
    return job.given_metrics, given


def _panel_settings(
    setting_values: Mapping[str, Any], candidates: Sequence[Panelist], generator_column: str | None
) -> dict[str, Any]:
    """The run's settings: the candidates as a panel (no ``model`` of its own), the generator column."""
    out: dict[str, Any] = {**setting_values, "models": [c.model_dump(exclude_none=True) for c in candidates]}
    out["model"] = None
    if generator_column:
        out["generator_column"] = generator_column
    return out


def _candidates(judges: Sequence[str | Mapping[str, Any] | Panelist]) -> list[Panelist]:
    if isinstance(judges, str):
        judges = [j.strip() for j in judges.split(",") if j.strip()]
    if not judges:
        raise ConfigError(
            "choose_judge needs a candidate judge, e.g. judges=['gpt-4.1-nano', 'gpt-4.1-mini'] (--judges a,b, or "
            "--judges-file FILE)"
        )
    return Settings(models=list(judges)).judges  # type: ignore[arg-type]  # a panel's checks: names, keys


def _kind_of(metrics: Sequence[Metric]) -> str:
    kinds = {
        "pairwise" if m.kind == MetricKind.PAIRWISE else "binary" if m.kind == MetricKind.BINARY else "numeric"
        for m in metrics
    }
    if len(kinds) != 1:
        raise ConfigError(
            f"the metrics {', '.join(m.name for m in metrics)} are of different kinds ({', '.join(sorted(kinds))}): "
            "a table ranks one kind of judgment; give prompt files of one kind"
        )
    return kinds.pop()


@dataclass
class _Rule:
    """How the labels are read (``kind``, ``positive``, ``threshold``: label_rules.check_labels), and the columns
    the run writes (``outputs``), which a label column may not keep its name beside."""

    kind: str
    positive: Any
    threshold: float | None
    outputs: frozenset[str]
    # a rule that compares with each person's vote: a row whose people split evenly is kept, labelled by
    # AlpacaEval's tie-break of their mode (its target), not left out
    by_votes: bool = False


@dataclass
class _Found:
    """The labelled rows (the checked label in column :data:`LABEL`); the human ceiling's counts (rows x values,
    the values, the annotators) where several people labelled rows; a note on the rows left out."""

    ds: Dataset
    ceiling: tuple[np.ndarray, list[Any], int] | None = None
    left_out: str | None = None


def _outputs(metrics: Sequence[Metric]) -> frozenset[str]:
    return frozenset(c for m in metrics for c in m.column_types)


def _labelled(
    data: Dataset | DatasetDict,
    label: str | None,
    labels: str | os.PathLike | Sequence[Mapping[str, Any]] | None,
    annotators: Sequence[str] | None,
    rule: _Rule,
) -> _Found:
    """The labelled rows, every label checked by ``rule`` (agreement's rule: label_rules) before any request, so
    that a bad label costs nothing; and, with several people's labels, their counts for the human ceiling."""
    if sum(x is not None for x in (label, labels, annotators)) != 1:
        raise ConfigError("give the labels one way: label= a column, labels= a labels file, or annotators= columns")
    if labels is not None:
        return _from_file(data, labels, rule)
    d = _one_split(data, None)
    columns = [label] if label is not None else list(annotators or ())
    missing = [c for c in columns if c not in d.column_names]
    if missing or not columns:
        what = "label" if label is not None else "annotator"
        raise ConfigError(
            f"no {what} column {missing[0] if missing else ''!r}; the data has: {', '.join(d.column_names)}"
        )
    if LABEL in d.column_names and LABEL not in columns:
        raise ConfigError(
            f"the data has a column {LABEL!r}, where choose-judge puts the labels it compares with: rename it "
            "(or name it as the label column)"
        )
    table = [
        check_labels(
            _values(d, c), rule.kind, positive=rule.positive, threshold=rule.threshold,  # decoded (a JSON column)
            subject=f"the {'label' if label is not None else 'annotator'} column {c!r}",
        )
        for c in columns
    ]  # fmt: skip
    d = d.remove_columns([c for c in columns if c == LABEL or c.partition(JUDGE_SEP)[0] in rule.outputs])
    if label is not None:
        return _kept(d, table[0], None)
    rows = [list(r) for r in zip(*table, strict=True)]
    people = [r for r in rows if any(v is not None for v in r)]  # the ceiling: every row someone labelled
    counts, values = label_counts(people)
    found = _kept(d, [_majority(r, rule.by_votes) for r in rows], (counts, values, len(columns)))
    split = sum(1 for r in rows if _majority(r) is None and any(v is not None for v in r))
    if rule.by_votes and split:
        kept = (
            f"{split:,} rows whose people split evenly are kept, their label AlpacaEval's tie-break of their mode "
            "(the larger preference): the rule compares the judge with each person's vote"
        )
        found.left_out = f"{found.left_out}; {kept}" if found.left_out else kept
    return found


def _values(d: Dataset, column: str) -> list[Any]:
    """A column's values as Python objects: read as Arrow where its feature is a plain value (30x faster than
    ``list(d[column])``, which formats each row), decoded by ``datasets`` otherwise (a JSON or nested column)."""
    if isinstance(d.features.get(column), Value):
        return arrow_table(d).column(column).to_pylist()
    return list(d[column])


def _kept(d: Dataset, values: list[Any], ceiling: tuple[np.ndarray, list[Any], int] | None) -> _Found:
    """The rows with a label (``values``: None where a row has none, or its people split), it in :data:`LABEL`."""
    keep = [i for i, v in enumerate(values) if v is not None]
    if not keep:
        raise ConfigError(
            "no labelled row: every label is null (or NaN), or the people split on every row; label some rows"
        )
    d = d.add_column(LABEL, values)
    found = _Found(d if len(keep) == len(d) else d.select(keep), ceiling)
    if len(keep) < len(d):
        found.left_out = (
            f"{len(d) - len(keep):,} of {len(d):,} rows have no label (null or NaN, or their people split evenly): "
            "left out, not scored"
        )
    return found


def _from_file(data: Dataset | DatasetDict, labels: Any, rule: _Rule) -> _Found:
    """A labels file's rows (or a list of its entries), counted per row in one pass (label_table): the majority
    of a row's reviewers is its label, each reviewer counted once."""
    source = labels if isinstance(labels, (str, os.PathLike)) else list(labels)
    counted = count_labels(source, rule.kind, positive=rule.positive, threshold=rule.threshold)
    if not len(counted.rows):
        raise ConfigError("no labelled row: every label of the labels is null (not labelled yet); label some rows")
    d = _one_split(data, counted.split)
    if LABEL in d.column_names:
        raise ConfigError(f"the data has a column {LABEL!r}, where choose-judge puts the labels it compares with: "
                          "rename it")  # fmt: skip
    last = int(counted.rows[-1])
    if last >= len(d):
        raise ConfigError(f"the labels name row {last}; the data has {len(d)} rows (labels of other data?)")
    d = d.select(counted.rows.tolist())
    ceiling = (counted.counts, counted.values, counted.annotators) if counted.several else None
    return _kept(d, counted.majority(), ceiling)


def _one_split(data: Dataset | DatasetDict, split: str | None) -> Dataset:
    if isinstance(data, Dataset):
        return data
    names = [s for s in data if s != ERRORS_SPLIT]
    pick = split or (names[0] if len(names) == 1 else None)
    if pick is None or pick not in data:
        raise ConfigError(f"the data has splits {', '.join(names)}: choose one (data['{names[0]}'], --split)")
    return data[pick]


def _majority(values: Sequence[Any], tie_break: bool = False) -> Any:
    """The most common label of a row; None when none, or when two values tie for it (``tie_break``: winners
    split evenly resolved as AlpacaEval resolves its target, :func:`~hf_judge.analysis.benchmarks.alpaca_mode`)."""
    counts = Counter(v for v in values if v is not None).most_common(2)
    if not counts:
        return None
    if len(counts) == 2 and counts[0][1] == counts[1][1]:
        return alpaca_mode([v for v in values if v is not None]) if tie_break else None
    return counts[0][0]


def _orders(
    ds: Dataset,
    metrics: Sequence[Metric],
    columns: Mapping[str, str],
    metric_params: Mapping[str, dict[str, Any]] | None,
    swapped: bool,
) -> tuple[Dataset, dict[str, Any]]:
    """The rows to score and the metrics' params: for pairs in both orders, each order a row of its own (JudgeBench's
    rule needs each order's verdict), the metric's own swap off. A variable without its column is the metric's own
    error, before the orders are swapped."""
    for m in metrics:
        m.resolve_columns(dict(columns), ds.column_names)
    params = dict(metric_params or {})
    if not swapped:
        return ds, params
    params = {m.name: {**params.get(m.name, {}), "swap": False} for m in metrics} | {
        k: v for k, v in params.items() if k not in {m.name for m in metrics}
    }
    return concatenate_datasets([ds, _swap(ds, metrics[0], columns)]), params


def _swap(ds: Dataset, metric: Metric, columns: Mapping[str, str]) -> Dataset:
    """``ds`` with the two responses' columns exchanged (the second order of each pair)."""
    assert metric.swap is not None
    a, b = (columns.get(v, v) for v in metric.swap)
    return ds.rename_columns({a: "__swap_a__", b: a}).rename_columns({"__swap_a__": b}).select_columns(ds.column_names)


def _column(metric: Metric, judge: str | None) -> str:
    """A candidate's column: ``<column>__<judge>`` in a panel, the metric's own (``judge`` None) for one judge."""
    base = f"{metric.name}_winner" if metric.kind == MetricKind.PAIRWISE else _score_column(metric)
    return base if judge is None else f"{base}{JUDGE_SEP}{judge}"


def _score_column(metric: Metric) -> str:
    if metric.kind == MetricKind.BINARY or metric.name in metric.columns:
        return metric.name
    numeric = [c for c, t in metric.column_types.items() if t.startswith(("int", "float"))]
    return numeric[0] if numeric else metric.columns[0]


def _judge_errors(errors: pa.Table, judge: str | None, rows: int) -> pa.Table:
    """The error rows of the first ``rows`` rows that are ``judge``'s: a panel judge's by the errors split's
    ``judge`` column, with the rows' own (:func:`~hf_judge.results.errors_split.judge_errors`); every one for a
    candidate alone (``judge`` None). A table, not a Dataset: this runs per judge and per group of ``by``."""
    mine = judge_error_table(errors, judge) if judge is not None else errors
    return mine.filter(pc.less(mine.column("row"), rows))


def _judge_figures(summary: RunSummary, name: str, panel: bool) -> dict[str, Any]:
    """One candidate's requests, tokens, price and latency: its entry of ``judge_requests`` in a panel; one judge
    alone, the run's own counters (a run of one judge keeps no latency of its own: none is shown)."""
    if panel:
        return dict(summary.judge_requests.get(name, {}))
    return {
        "requests": summary.requests,
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "answered": max(0, summary.requests - sum(summary.failed_attempts.values())),
        "price": summary.price,
    }


def _rank(
    result: ScoredDatasetDict,
    ds: Dataset,
    metrics: Sequence[Metric],
    candidates: Sequence[Panelist],
    kind: str,
    swapped: bool,
    generator_column: str | None,
    truth: list[Any],
    resamples: int,
    seed: int,
) -> JudgeChoice:
    """The table's entries, a candidate (x prompt) each; ``truth``: the labels as the table compares them (checked
    by label_rules: verdicts True/False, winners "1"/"2"/"tie", ratings as floats)."""
    scored, errors = result["train"], arrow_table(current(result[ERRORS_SPLIT]))
    table = arrow_table(scored)  # read once: each judge's figures take their columns from it
    summary = result.summary
    assert summary is not None  # score_dataset always sets it
    n = len(ds)
    headline = {"binary": "accuracy", "pairwise": "agreement", "numeric": "spearman"}[kind]
    choice = JudgeChoice(metric=", ".join(m.name for m in metrics), kind=kind, rows=n, headline=headline)
    choice.rule, choice.chance = rule_of(kind, swapped), chance_level(truth, kind)
    panel = len(candidates) > 1
    for m in metrics:
        for judge in candidates:
            name = judge.column_name
            column = _column(m, name if panel else None)
            own_errors = _judge_errors(errors, name if panel else None, 2 * n if swapped else n)
            entry: dict[str, Any] = {
                "name": name if len(metrics) == 1 else f"{name} x {m.name}",
                "judge": name,
                "model": judge.model,
                "metric": m.name,
                "column": column,
                "rule": choice.rule,
            }
            if swapped:
                entry.update(_pairs(table, n, column, own_errors, truth, resamples, seed))
            else:
                entry.update(_figures(table, n, column, own_errors, kind, resamples, seed))
            if generator_column is not None:
                entry["self_preference"] = _self_preference(
                    scored.select(range(n)), column, kind, generator_column, judge
                )
            entry.update(costs(_judge_figures(summary, name, panel), n, 2 if swapped else 1, entry["coverage"]))
            entry["length_bias"] = summary.length_bias.get(column.replace("_winner", ""))
            choice.entries.append(entry)
    return choice


def _rank_group(
    result: ScoredDatasetDict,
    ds: Dataset,
    truth: list[Any],
    *,
    metrics: Sequence[Metric],
    candidates: Sequence[Panelist],
    kind: str,
    swapped: bool,
    generator_column: str | None,
    resamples: int,
    seed: int,
    columns: Mapping[str, str],
    rule: str | None,
    votes: list[str] | None = None,
    subset_column: str | None = None,
) -> JudgeChoice:
    """The table of one group's rows (``by=``): ranked, by the rules (against the group's ``votes``), and the
    longer-wins rates, as for all the rows."""
    choice = _rank(result, ds, metrics, candidates, kind, swapped, generator_column, truth, resamples, seed)
    by_rules(
        choice,
        result["train"],
        swapped,
        truth,
        rule,
        resamples,
        seed,
        people_of(ds, votes),
        subsets_of(ds, subset_column),
    )
    _longer_wins(choice, result["train"], len(ds), metrics, candidates, columns, truth)
    return choice


def _self_preference(
    rows: Dataset,
    column: str,
    kind: str,
    generator_column: str,
    judge: Panelist,
) -> dict[str, Any]:
    """The judge's error on its own family's texts against the others' (agreement's figures)."""
    report = agreement(
        rows,
        column,
        LABEL,
        kind=kind,
        resamples=0,
        generator_column=generator_column,
        judge_model=judge.model,
    )
    return {
        "own_error": report.figures.get("own_family_error"),
        "other_error": report.figures.get("other_family_error"),
        "own_rows": report.figures.get("own_family_rows"),
    }


def _longer_wins(
    choice: JudgeChoice,
    scored: Dataset,
    n: int,
    metrics: Sequence[Metric],
    candidates: Sequence[Panelist],
    columns: Mapping[str, str],
    truth: list[Any],
) -> None:
    """A pairwise judge's P(it prefers the longer response) over every order it judged, beside the labels' own
    (how often the labelled winner is the longer one, by the first metric's responses): lengths counted as the
    run's bias check counts them (in the first candidate's tokens, else characters)."""
    if choice.kind != "pairwise":
        return
    lengths = bias.Lengths(candidates[0].model or "")
    by_metric: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in metrics:
        pair = pair_variables(m)
        if pair is not None:
            a, b = (columns.get(v, v) for v in pair)
            table = arrow_table(scored).select([a, b])
            by_metric[m.name] = (lengths.of(table, [a]), lengths.of(table, [b]))
    for e in choice.entries:
        if e["metric"] in by_metric:
            winners = np.array(_head(scored, e["column"], len(scored)), dtype=object)
            e["longer_wins"] = bias.longer_wins(winners, *by_metric[e["metric"]], lengths.unit)
    if metrics[0].name in by_metric:
        first, second = by_metric[metrics[0].name]
        choice.label_longer_wins = bias.longer_wins(np.array(truth, dtype=object), first[:n], second[:n], lengths.unit)


def _figures(
    scored: pa.Table,
    n: int,
    column: str,
    errors: pa.Table,
    kind: str,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """One judge's figures over the ``n`` labelled rows: over_all_rows's (agreement's rule) for verdicts and
    winners; Spearman (with its interval) and Kendall on the rated rows for ratings."""
    pred, truth = _head(scored, column, n), _head(scored, LABEL, n)
    kinds = _error_kinds(errors, n)
    failures = [kinds.get(i) for i in range(n)]
    if kind == "numeric":
        found = over_all_rows([0] * n, pred, "numeric", failures=failures, resamples=0)
        keep = [i for i in range(n) if pred[i] is not None and truth[i] is not None]
        x = np.array([pred[i] for i in keep], dtype=np.float64)
        y = np.array([truth[i] for i in keep], dtype=np.float64)
        ci = stats.bootstrap_spearman(x, y, resamples=resamples, seed=seed, confidence=0.95) if resamples else None
        return {
            "score": stats.spearman(x, y),
            "interval": _list(ci),
            "kendall": stats.kendall_tau_b(x, y),
            "rated_rows": len(keep),
            "coverage": found["coverage"],
            "failures": found["failures"],
        }
    labels = truth  # checked before scoring (label_rules): verdicts True/False, winners "1"/"2"/"tie"
    if kind == "binary":
        pred = [None if v is None else verdict(v) for v in pred]
    return headline_figures(over_all_rows(labels, pred, kind, failures=failures, resamples=resamples, seed=seed))


def _head(scored: Dataset | pa.Table, column: str, n: int) -> list[Any]:
    """The first ``n`` values of a column, read as Arrow (``scored[column][:n]`` formats each row: 20x slower)."""
    if isinstance(scored, pa.Table):
        return scored.column(column)[:n].to_pylist()
    return arrow_table(scored).column(column)[:n].to_pylist()


def _error_kinds(errors: pa.Table, n: int) -> dict[int, str]:
    """Row (of the first ``n``) -> its error kind; a row of the second order (a swapped pair's) is its pair's."""
    kinds: dict[int, str] = {}
    for e in errors.select(["row", "kind"]).to_pylist():
        kinds.setdefault(e["row"] % n, e["kind"])
    return kinds


def _list(ci: Any) -> list[float] | None:
    return list(ci) if ci else None


def _pairs(
    scored: pa.Table, n: int, column: str, errors: pa.Table, truth: list[Any], resamples: int, seed: int
) -> dict[str, Any]:
    """JudgeBench's figures of one judge: rows ``[0, n)`` are the first order, ``[n, 2n)`` the second. Coverage and
    failures count the orders (each a request of its own: a pair with one order failed is still judged, by the
    other order's vote, but the failed order is a failure); ``pair_coverage``: the pairs with an order decided."""
    winners = _head(scored, column, 2 * n)
    first = winners[:n]
    second = [flip(w) for w in winners[n:]]
    found = pair_verdicts(first, second, truth, resamples=resamples, seed=seed)
    kinds = _error_kinds(errors, n)
    combined = [combined_winner(a, b) for a, b in zip(first, second, strict=True)]
    decided = over_all_rows(
        truth, combined, "pairwise", failures=[kinds.get(i) for i in range(n)], resamples=resamples, seed=seed
    )
    by_order = _error_kinds(errors, 2 * n)
    orders = over_all_rows([0] * 2 * n, winners, "numeric", failures=[by_order.get(i) for i in range(2 * n)])
    return {
        "score": found["accuracy"],
        "interval": found["interval"],
        "kappa": decided["figures"].get("cohen_kappa"),
        "kappa_interval": decided["intervals"].get("cohen_kappa"),
        "coverage": orders["coverage"],
        "failures": orders["failures"],
        "pair_coverage": decided["coverage"],
        "judgebench": {k: found[k] for k in ("single_order_accuracy", "orders_disagree")},
    }
