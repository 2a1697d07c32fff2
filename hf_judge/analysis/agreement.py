"""``agreement``: how far a judge's column agrees with labels you trust, or with another judge.

Three kinds of columns, told apart by their types (or ``kind=``):

* numeric scores (integers, expected scores, a panel's mean): Spearman, Kendall's tau-b, Pearson,
  mean absolute error; for integer values also the quadratic-weighted Cohen's kappa and the
  confusion matrix (not against true/false labels); the calibration table (mean label per score)
  for every numeric score;
* binary verdicts (a boolean column, or 0/1, yes/no, true/false): accuracy, precision, recall, F1
  and Cohen's kappa;
* pairwise judgments (``<metric>_winner``: "1", "2" or "tie"): agreement with the labelled
  preference, Cohen's kappa, the judge's tie rate and its position-bias rate, the share of rows whose
  two orders disagreed (``<metric>_disagree``, written when the metric ran both orders). Where each order of a
  pair is a row of its own (a ``choose-judge`` candidate's folder: the column ``__order__``), also the figure of
  ``choose-judge``'s table, by JudgeBench's rule over the pairs (``report.rules["judgebench"]``).

A row where either column is null (a failed metric, an unlabelled row) is dropped, and counted.
The headline figures get percentile bootstrap intervals, seeded: the same seed gives the same
interval. The statistics are in :mod:`hf_judge.analysis.stats`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict
from datasets import features as _features

from ..errors import ConfigError
from ..judging.ensemble import JUDGE_SEP
from . import bias, rules, stats
from .agreement_groups import agreement_groups, group_lines, group_markdown
from .label_rules import FALSE_WORDS, PREFERENCES, TRUE_WORDS, WINNERS, Where, check_labels, verdict
from .leaderboard import ORDER, orders_line

KINDS = ("numeric", "binary", "pairwise")
# figures that get an interval; Kendall's tau is left out: it costs ~4x Spearman per resample and moves with it
HEADLINE = {
    "numeric": ("spearman", "pearson", "mae", "quadratic_kappa"),
    "binary": ("accuracy", "f1", "cohen_kappa"),
    "pairwise": ("agreement", "cohen_kappa"),
}
_WINNERS = list(WINNERS)
_GIVEN = ("score", "label", "kind", "positive", "resamples", "seed", "confidence", "length_of", "generator_column",
          "judge_model", "label_threshold", "score_threshold", "rule", "votes", "subset_column")  # fmt: skip
_JSON = getattr(_features, "Json", ())  # the feature of a column of mixed JSON types (newer datasets only)
# the most values a confusion matrix (and a quadratic kappa) is drawn over: a 0-100 scale, not a measurement
MAX_SCALE = 101
_CALIBRATION_BINS = 10  # for scores with more distinct values than this (expected scores)


@dataclass
class AgreementReport:
    """What :func:`agreement` found; ``str(report)`` is a table, ``to_dict()`` is JSON-ready.

    ``figures``: name -> value on the compared rows (None where undefined, e.g. a correlation with a constant
    column); ``all_rows``: the figures over all labelled rows, where a row the judge did not decide (a null
    score: a failed request, an unparsed reply) counts as not agreeing, with the coverage (share decided) and
    the failures by error kind;
    ``intervals``: headline figure -> (low, high) bootstrap interval; ``confusion``: ``labels`` and
    ``matrix`` (rows: the label column, columns: the score column); ``calibration``: per score value
    (or bin), the rows and the mean label; ``histograms``: value -> count of each column.
    """

    score: str
    label: str
    kind: str
    split: str | None
    rows: int
    pairs: int
    missing: dict[str, int]
    figures: dict[str, float | None]
    intervals: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    confusion: dict[str, Any] | None = None
    calibration: list[dict[str, Any]] | None = None
    histograms: dict[str, dict[str, int]] = field(default_factory=dict)
    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95
    # how ``length_of``'s texts were measured: "tokens" (tiktoken's encoding of judge_model) or "characters"
    length_unit: str | None = None
    # what the comparison cannot say, and the option that makes it (a rating against true/false labels)
    note: str | None = None
    # the figures over ALL labelled rows, a row the judge did not decide counting as not agreeing
    # (:func:`hf_judge.analysis.stats.over_all_rows`): rows, decided, coverage, figures, intervals, failures
    all_rows: dict[str, Any] | None = None
    # the figures of another rule (hf_judge.analysis.leaderboard.RULES), where the rows allow it: "judgebench" for
    # the two orders of each pair as rows of their own (choose-judge's table): pairs, accuracy, interval
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the published rule asked for (agreement --rule NAME), whose figure ``rules[rule]`` the report leads with
    rule: str | None = None
    # by=COLUMN: the report of each group's rows alone (hf_judge.analysis.agreement_groups); None without it
    groups: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``json.dumps(report.to_dict())``)."""
        d = asdict(self)
        d["intervals"] = {k: list(v) if v else None for k, v in self.intervals.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgreementReport:
        """The report :meth:`to_dict` gave (e.g. read back from ``hf-judge agreement --out``'s JSON).

        Example:
            >>> report = AgreementReport.from_dict(json.loads(Path("report.json").read_text()))  # doctest: +SKIP
        """
        try:
            report = cls(**data)
        except TypeError as e:
            raise ConfigError(f"not an agreement report ({e}): save one with hf-judge agreement --out FILE") from None
        report.intervals = {k: tuple(v) if v else None for k, v in report.intervals.items()}  # type: ignore[misc]
        return report

    def _rows(self) -> list[tuple[str, str, str]]:
        out = []
        for name, v in self.figures.items():
            ci = self.intervals.get(name)
            out.append((name, _num(v), f"{_num(ci[0])} .. {_num(ci[1])}" if ci else ""))
        return out

    def _shows_all_rows(self) -> bool:
        """Whether the all-rows line says anything: figures (verdicts, winners) or rows left undecided."""
        a = self.all_rows
        return a is not None and (bool(a.get("figures")) or a.get("decided") != a.get("rows"))

    def _all_rows_line(self) -> str:
        """One line: the figures over all labelled rows, coverage and failures (``all_rows``)."""
        a = self.all_rows or {}
        parts = []
        for name, v in a.get("figures", {}).items():
            ci = a.get("intervals", {}).get(name)
            parts.append(f"{name} {_num(v)}" + (f" ({_num(ci[0])} .. {_num(ci[1])})" if ci else ""))
        cov = a.get("coverage")
        parts.append(f"coverage {cov:.1%}" if cov is not None else "coverage n/a")
        fails = ", ".join(f"{k} {v:,}" for k, v in a.get("failures", {}).items())
        parts.append(f"failures: {fails}" if fails else "no failures")
        return (
            f"over all {a.get('rows', 0):,} labelled rows (a row the judge did not decide counts as not agreeing): "
            + "; ".join(parts)
        )

    def _rules_lines(self) -> list[str]:
        """The figure of JudgeBench's rule, where each order of a pair is a row, and why the others differ."""
        out = [orders_line(self.rules["judgebench"])] if self.rules.get("judgebench") else []
        return out + ([rules.line(self.rule, self.rules[self.rule])] if self.rule in self.rules else [])

    def _kind(self) -> str:
        return "a rating against true/false labels" if self.note else self.kind

    def _dropped(self) -> str:
        m = self.missing
        return f"null score {m['score']:,}, null label {m['label']:,}, both {m['both']:,}"

    def __str__(self) -> str:
        where = f", split {self.split}" if self.split else ""
        lines = [
            f"Agreement of {self.score} with {self.label} ({self._kind()}{where})",
            f"rows {self.rows:,}, compared {self.pairs:,}, dropped: {self._dropped()}",
            *([self._all_rows_line()] if self._shows_all_rows() else []),
            *self._rules_lines(),
            "",
        ]
        if self.note:
            lines += [f"note: {self.note}", ""]
        if not self.pairs:
            lines += [
                f"nothing to compare: no row has both a {self.score} and a {self.label} value "
                "(a failed metric leaves its score null: see the errors split; label some rows)",
                "",
            ]
        ci = (
            f"{self.confidence:.0%} interval ({self.resamples:,} resamples, seed {self.seed})" if self.resamples else ""
        )
        rows = [("figure", "value", ci), *self._rows()]
        w = [max(len(r[i]) for r in rows) for i in range(2)]
        lines += [f"{a:<{w[0]}}  {b:>{w[1]}}  {c}".rstrip() for a, b, c in rows]
        if self.length_unit:
            lines += ["", self._length_note()]
        if self.confusion:
            lines += [
                "",
                f"confusion matrix (rows: {self.label}, columns: {self.score})",
                *_matrix_text(self.confusion),
            ]
        return "\n".join(lines + group_lines(self.groups, _num))

    def _length_note(self) -> str:
        """What the length figures measured, in words (the run's length bias measures alike)."""
        how = (
            "tiktoken's encoding of the judge's model"
            if self.length_unit == "tokens"
            else "tiktoken does not know the judge's model, or is not installed"
        )
        return f"length in {self.length_unit} ({how}), as the run's length bias measures it"

    def to_markdown(self, images: dict[str, str] | None = None) -> str:
        """The report as markdown for a dataset card; ``images``: title -> repo path of a PNG."""
        where = f" (split `{self.split}`)" if self.split else ""
        out = [
            f"**`{self.score}` vs `{self.label}`**{where}: {self._kind()}, {self.pairs:,} of {self.rows:,} rows "
            f"compared ({self._dropped()})",
            "",
            *([self._all_rows_line(), ""] if self._shows_all_rows() else []),
            *(f"{line}\n" for line in self._rules_lines()),
            *([f"Note: {self.note}", ""] if self.note else []),
            f"| figure | value | {self.confidence:.0%} interval |",
            "| --- | --- | --- |",
            *[f"| {a} | {b} | {c} |" for a, b, c in self._rows()],
            "",
            *([self._length_note(), ""] if self.length_unit else []),
        ]
        if self.confusion:
            labels = [str(v) for v in self.confusion["labels"]]
            out += [
                f"Confusion matrix (rows: `{self.label}`, columns: `{self.score}`)",
                "",
                "| | " + " | ".join(labels) + " |",
                "| --- |" + " --- |" * len(labels),
                *[
                    f"| **{lab}** | " + " | ".join(str(c) for c in row) + " |"
                    for lab, row in zip(labels, self.confusion["matrix"], strict=True)
                ],
                "",
            ]
        for title, path in (images or {}).items():
            out += [f"![{title}]({path})", ""]
        return "\n".join(out + group_markdown(self.groups, _num))


def _num(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _matrix_text(confusion: dict[str, Any]) -> list[str]:
    labels = [str(v) for v in confusion["labels"]]
    cells = [[str(c) for c in row] for row in confusion["matrix"]]
    w = max(len(s) for s in labels + [c for row in cells for c in row])
    head = " " * w + " " + " ".join(f"{s:>{w}}" for s in labels)
    return [
        head,
        *[f"{lab:>{w}} " + " ".join(f"{c:>{w}}" for c in row) for lab, row in zip(labels, cells, strict=True)],
    ]


def agreement(
    ds: Dataset | DatasetDict,
    score: str,
    label: str,
    *,
    split: str | None = None,
    kind: str | None = None,
    positive: Any = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    length_of: str | Sequence[str] | None = None,
    generator_column: str | None = None,
    judge_model: str | None = None,
    label_threshold: float | None = None,
    score_threshold: float | None = None,
    errors: Dataset | None = None,
    rows: Sequence[int] | None = None,
    rule: str | None = None,
    by: str | None = None,
    votes: Sequence[str] | None = None,
    subset_column: str | None = None,
) -> AgreementReport:
    """Compare the judge's column ``score`` with the column ``label`` (human labels, or another judge).

    ``kind``: "numeric", "binary" or "pairwise" (default: from the score column's type; ``score`` and
    ``label`` may name a pairwise metric, whose ``<score>_winner`` column is read, or a panel judge of one,
    ``Comparative__judge_a``). ``positive``: the label value that counts as positive for a binary judge,
    when the labels are not booleans, 0/1, yes/no or true/false (the judge's own verdicts are read as those).
    ``resamples``, ``seed``, ``confidence``: the bootstrap intervals (``resamples=0``: none).
    ``label_threshold``: numeric labels (1-5 ratings) read as verdicts, true where label >= it: a Binary judge's
    verdicts, or a score's calibration curve, against them (the report's label reads ``human >= 4``).
    ``score_threshold``: the judge's numeric score read as verdicts, true where score >= it, against true/false
    labels (the report's score reads ``QA_Correctness >= 8``). A rating (values beyond 0-1) against true/false
    labels has no scale in common with them (an MAE between a 1-10 score and 0/1 means nothing): it needs
    ``score_threshold``, or ``kind="numeric"`` for the rank correlations; a probability (``_p_positive``,
    ``_calibrated``) against them is compared as numbers, a calibration.

    Bias against the labels (:mod:`hf_judge.analysis.bias`): ``length_of``, the column(s) of the text the judge
    scored, adds ``length_rho`` and ``label_length_rho`` (Spearman's rho of the score, and of the label, with the
    text's length: a judge far above the labels prefers length), or for a pairwise judge the two responses'
    columns, ``longer_wins_rate`` and ``label_longer_wins_rate``. ``generator_column``, the column naming the
    model that wrote each text, with ``judge_model``: the judge's mean error (score minus label; for verdicts and
    winners the share of disagreements) on the rows its own family wrote and on the others
    (``own_family_error``, ``other_family_error`` and their row counts). ``judge_model`` also says how length is
    counted: in tokens of its tiktoken encoding where tiktoken knows it, else in characters, as the run's length
    bias counts it (``report.length_unit`` says which).

    Over all rows (``report.all_rows``): beside the figures on the compared rows, the agreement over every
    labelled row, a row the judge did not decide counting as not agreeing (the rule of
    :func:`hf_judge.analysis.stats.over_all_rows`, which ``choose-judge`` ranks judges by), its coverage and
    failures by error kind, read from ``errors`` (the result's errors split; default: ``ds["errors"]`` of a
    DatasetDict). ``rows``: the result's row index of each row of the split compared, where it is a selection
    (the labelled rows of ``--labels``); default: its own positions.

    ``rule``: a published rule of a pairwise judge (:mod:`hf_judge.analysis.rules`), its figures in
    ``report.rules[rule]`` and a line of the report: on a choose-judge candidate's folder, ``choose-judge --rule``'s
    figure (:func:`hf_judge.analysis.rules.of_rows`); a rule that does not apply is a ConfigError. ``votes``: the
    columns of each pair's people's votes those rules compare with, ``subset_column`` its subset's (choose-judge's).
    ``by``: a column of the split (a category, subset, source): ``report.groups``, each group's report as on its rows
    alone, the most rows first, at most 20 (:mod:`hf_judge.analysis.agreement_groups`); a missing column is refused.

    Example:
        >>> ds = Dataset.from_dict({"QA_Correctness": [9, 7, 3, None, 8], "human": [8, 7, 2, 5, 9]})
        >>> r = agreement(ds, score="QA_Correctness", label="human", resamples=200)
        >>> r.pairs, r.missing["score"], round(r.figures["spearman"], 3)
        (4, 1, 0.8)
    """
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    if resamples < 0:
        raise ConfigError(f"resamples must be 0 or more, got {resamples}")
    split, d = _pick_split(ds, split)
    given = {k: v for k, v in locals().items() if k in _GIVEN}  # as given: each group is compared as a dataset
    score, label = _winner(d, score), _winner(d, label)
    base_score = score
    for col, what in ((score, "score"), (label, "label")):
        if col not in d.column_names:
            raise ConfigError(f"no column {col!r} ({what}) in the dataset; it has: {', '.join(d.column_names)}")
    s_arr, l_arr = _column(d, score), _column(d, label)
    if label_threshold is not None:
        l_arr, label = _passed(l_arr, label, label_threshold, positive), f"{label} >= {label_threshold:g}"
    if score_threshold is not None:
        s_arr, score = _passed(s_arr, score, score_threshold, None, "score"), f"{score} >= {score_threshold:g}"
    kind = kind or _guess_kind(score, s_arr)
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    rule = rules.check_rule(rule, kind, ORDER in d.column_names and rows is None)
    s_null, l_null = _nulls(s_arr), _nulls(l_arr)
    keep = ~s_null & ~l_null
    missing = {"score": int((s_null & ~l_null).sum()), "label": int((l_null & ~s_null).sum()),
               "both": int((s_null & l_null).sum())}  # fmt: skip
    s_kept, l_kept = s_arr.filter(pa.array(keep)), l_arr.filter(pa.array(keep))
    report = AgreementReport(
        score=score,
        label=label,
        kind=kind,
        split=split,
        rows=len(s_arr),
        pairs=int(keep.sum()),
        missing=missing,
        figures={},
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
    at = _where(keep, rows)
    if kind == "numeric":
        x = _numbers(s_kept, score)
        y = np.array(check_labels(l_kept, "numeric", subject=f"column {label!r}", where=at), dtype=np.float64)
        # a 0/1 side (boolean labels, a calibration) has no scale in common with the other: no kappa, no matrix
        ordinal = not (pa.types.is_boolean(s_arr.type) or pa.types.is_boolean(l_arr.type))
        report.note = _rating_note(x, l_arr, score, label)
        fns = _numeric(report, x, y, ordinal, mae=report.note is None)
    elif kind == "binary":
        x = _booleans(s_kept, score)
        y = np.array(check_labels(l_kept, "binary", positive=positive, subject=f"column {label!r}", where=at), bool)
        fns = _binary(report, x, y)
    else:
        x = np.array(check_labels(s_kept, "pairwise", subject=f"column {score!r}", where=at), dtype=object)
        y = np.array(check_labels(l_kept, "pairwise", subject=f"column {label!r}", where=at), dtype=object)
        fns = _pairwise(report, x, y, d, score, keep)
    report.histograms = {score: _counts(x), label: _counts(y)}
    if length_of is not None:
        columns = [length_of] if isinstance(length_of, str) else list(length_of)
        _length_figures(report, d, keep, x, y, columns, bias.Lengths(judge_model or ""))
    if generator_column is not None:
        _family_figures(report, d, keep, x, y, generator_column, judge_model)
    if errors is None and isinstance(ds, DatasetDict) and "errors" in ds:
        errors = ds["errors"]
    failed = _failure_kinds(errors, split, base_score, rows)
    report.all_rows = _all_rows(report, l_arr, keep, x, label, positive, failed, rows)
    both = report.kind == "pairwise" and ORDER in d.column_names and rows is None  # each pair's two orders as rows
    order = d.with_format("arrow")[ORDER].to_pylist() if both else None
    rules.report_figures(report, rule, order, s_arr, l_arr, rules.people(d, votes), rules.subsets_in(d, subset_column))
    if resamples:
        for name in HEADLINE[kind]:
            if name in fns and report.figures.get(name) is not None:
                report.intervals[name] = stats.bootstrap(
                    fns[name], x, y, resamples=resamples, seed=seed, confidence=confidence
                )
    report.groups = agreement_groups(d, by, split, errors, rows, partial(_one_group, **given))
    return report


def _one_group(sub: Dataset, errors: Dataset | None, rows: Sequence[int] | None, **given: Any) -> AgreementReport:
    """:func:`agreement` on one group's rows (``by=``), as on a dataset of those rows alone."""
    return agreement(sub, errors=errors, rows=rows, **given)


def _failure_kinds(errors: Dataset | None, split: str | None, score: str, rows: Sequence[int] | None) -> dict[int, str]:
    """Row -> the error kind of the split's error rows: those of the metric behind ``score`` first (a metric
    ``Comparative`` writes ``Comparative_winner``; a panel judge's column ``X__judge_a`` is metric X's), else
    any (``QA_All`` fills ``QA_Clarity``). A panel judge's column counts its own judge's rows (the errors split's
    ``judge`` column) and the rows' own (no judge), never another judge's. Empty without an errors split."""
    if errors is None or not len(errors):
        return {}
    base = score.partition(JUDGE_SEP)[0]
    judge = _judge_of(score)
    wanted = set(rows) if rows is not None else None
    found: dict[int, str] = {}
    whole = errors.with_format("arrow")[:]
    # an errors split an earlier version wrote has no judge column: its rows are every judge's
    columns = ["split", "row", "metric", "kind", *(["judge"] if "judge" in whole.column_names else [])]
    for e in whole.select(columns).to_pylist():
        r = e["row"]
        if (split is not None and e["split"] != split) or (wanted is not None and r not in wanted):
            continue
        if judge is not None and e.get("judge") not in (None, judge):  # another judge of the panel failed here
            continue
        ours = base == e["metric"] or base.startswith(f"{e['metric']}_")
        if ours or r not in found:
            found[r] = e["kind"] if ours else f"{e['kind']} ({e['metric']})"
    return found


def _judge_of(score: str) -> str | None:
    """The panel judge whose column ``score`` is (``X__a``; a cascade's strong panel: ``X__a__strong``), None for a
    run's own column or a cascade tier's (``X__cheap``, ``X__strong``: no panel judge may be named so)."""
    names = [p for p in score.split(JUDGE_SEP)[1:] if p not in ("cheap", "strong")]
    return names[0] if names else None


def _all_rows(
    report: AgreementReport,
    l_arr: pa.Array,
    keep: np.ndarray,
    x: np.ndarray,
    label: str,
    positive: Any,
    failed: dict[int, str],
    rows: Sequence[int] | None,
) -> dict[str, Any]:
    """The figures over all labelled rows (:func:`stats.over_all_rows`): the compared rows' values, None for the
    labelled rows the judge left undecided, with each one's error kind."""
    labelled = ~_nulls(l_arr)
    at = np.nonzero(labelled)[0]
    truth: Any
    if report.kind in ("binary", "pairwise"):
        values = l_arr.filter(pa.array(labelled))
        where = _where(labelled, rows)
        truth = check_labels(values, report.kind, positive=positive, subject=f"column {label!r}", where=where)
    else:
        truth = [0] * len(at)  # ratings: coverage and failures only (see over_all_rows)
    pred: list[Any] = [None] * len(at)
    for i, v in zip(np.nonzero(keep[labelled])[0], x, strict=True):
        pred[i] = v
    index = [rows[int(i)] for i in at] if rows is not None else [int(i) for i in at]
    kinds = [None if p is not None else failed.get(r) for p, r in zip(pred, index, strict=True)]
    return stats.over_all_rows(
        truth,
        pred,
        report.kind,
        failures=kinds,
        resamples=report.resamples,
        seed=report.seed,
        confidence=report.confidence,
    )


def _passed(arr: pa.Array, label: str, threshold: float, positive: Any, what: str = "label") -> pa.Array:
    """Numeric labels (or scores) as verdicts: true where the value is >= ``threshold`` (nulls stay null)."""
    if positive is not None:
        raise ConfigError("give positive= (a label value) or label_threshold= (a cut on numeric labels), not both")
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        hint = "for verdicts name positive= instead" if what == "label" else "it is no numeric score"
        raise ConfigError(f"{what}_threshold needs numeric {what}s; {label!r} is {arr.type} ({hint})")
    return pc.greater_equal(arr, pa.scalar(float(threshold)))


def _rating_note(x: np.ndarray, labels: pa.Array, score: str, label: str) -> str | None:
    """What a rating (values beyond 0-1) against true/false labels is compared by, and what it needs to be
    compared as verdicts; None for any other pair. Its "MAE" would be the distance between a 1-10 scale and
    0/1, which means nothing; a probability (``_p_positive``) against the labels is a calibration, as numbers."""
    if not pa.types.is_boolean(labels.type) or not len(x) or (x.min() >= 0 and x.max() <= 1):
        return None
    lo, hi = float(x.min()), float(x.max())
    return (
        f"{score} is a rating ({lo:g}-{hi:g}) and {label} holds true/false labels: they share no scale, so no "
        "MAE; the correlations rank the rating against the labels, the calibration table gives the share of "
        f"true labels per score. To compare verdicts (accuracy, precision, recall, kappa), cut the rating: "
        f"--score-threshold {math.ceil((lo + hi) / 2):g} (score_threshold=; score >= it is true), or let "
        "hf-judge calibrate choose the cut from these labels"
    )


def _pick_split(ds: Dataset | DatasetDict, split: str | None) -> tuple[str | None, Dataset]:
    if isinstance(ds, Dataset):
        return split, ds
    splits = [k for k in ds if k != "errors"]
    if split is None:
        if len(splits) != 1:
            raise ConfigError(f"the dataset has splits {', '.join(splits)}: name one (split=..., --split)")
        split = splits[0]
    if split not in ds:
        raise ConfigError(f"no split {split!r}; the dataset has: {', '.join(splits)}")
    return split, ds[split]


def _winner(d: Dataset, name: str) -> str:
    """A pairwise metric's name stands for its winner column, a panel judge's too: ``Comparative`` ->
    ``Comparative_winner``, ``Comparative__judge_a`` -> ``Comparative_winner__judge_a``."""
    base, sep, judge = name.partition(JUDGE_SEP)
    winner = f"{base}_winner{sep}{judge}"
    return winner if name not in d.column_names and winner in d.column_names else name


def _column(d: Dataset, column: str) -> pa.Array:
    """The column as Arrow, the rows a select/shuffle kept, in their order. A column that mixes JSON types
    (labels 1, 2 and "tie" in one JSONL file) is a ``Json`` feature, stored as JSON text: its values are
    read back, as numbers when they all are numbers, else as their text ("tie", "1", "true")."""
    arr = d.with_format("arrow")[column].combine_chunks()
    if not isinstance(d.features.get(column), _JSON):
        return arr
    values = [None if v is None else json.loads(v) for v in arr.to_pylist()]
    present = [v for v in values if v is not None]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.array(values, pa.float64())
    return pa.array([None if v is None else json.dumps(v) if not isinstance(v, str) else v for v in values])


def _nulls(arr: pa.Array) -> np.ndarray:
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_floating(arr.type):
        null |= np.asarray(pc.is_nan(arr).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return null


def _guess_kind(score: str, s: pa.Array) -> str:
    """Numeric unless the score column is a verdict or a winner; a boolean label next to numeric scores
    is read as 0/1 (a calibration of ``p_positive``)."""
    if score.partition(JUDGE_SEP)[0].endswith("_winner"):  # Comparative_winner, Comparative_winner__judge_a
        return "pairwise"
    if pa.types.is_boolean(s.type):
        return "binary"
    if pa.types.is_string(s.type) or pa.types.is_large_string(s.type):
        values = {str(v).strip().lower() for v in pc.unique(pc.drop_null(s)).to_pylist()}
        if values <= TRUE_WORDS | FALSE_WORDS:
            return "binary"
        if values <= set(PREFERENCES):
            return "pairwise"
        raise ConfigError(
            f"column {score!r} holds text ({sorted(values)[:5]}...): name a score column, a verdict or a winner"
        )
    return "numeric"


def _numbers(arr: pa.Array, column: str) -> np.ndarray:
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int64())
    if pa.types.is_null(arr.type):  # a column with no value at all: every row was dropped
        return np.empty(0)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        try:  # labels written as text ("7"): numbers all the same
            arr = pc.cast(pc.utf8_trim_whitespace(arr), pa.float64())
        except pa.ArrowInvalid:
            bad = sorted({v for v in arr.to_pylist() if not _is_number(v)})
            raise ConfigError(
                f"column {column!r} is string, not numbers ({bad[:5]}): a numeric score is compared with numbers "
                "(or true/false labels); write the labels as numbers, or name a verdict or winner column as --score"
            ) from None
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise ConfigError(f"column {column!r} is {arr.type}, not numbers; a numeric comparison needs two score columns")
    values = np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False))
    bad = ~np.isfinite(values)  # a null or NaN is dropped before this: these came from text ("inf", "nan")
    if bad.any():
        n = int(bad.sum())
        what = f"{n:,} values that are" if n != 1 else "1 value that is"
        raise ConfigError(
            f"column {column!r} holds {what} not a finite number "
            f"({sorted({str(v) for v in values[bad]})}): a score or label must be a number; fix or remove those "
            "rows (a null value is left out of the comparison)"
        )
    return values


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _booleans(arr: pa.Array, column: str) -> np.ndarray:
    """The judge's verdicts (the labels are read by :func:`~hf_judge.analysis.label_rules.check_labels`)."""
    values = [verdict(v) for v in arr.to_pylist()]
    unknown = sorted({str(v) for v, b in zip(arr.to_pylist(), values, strict=True) if b is None})
    if unknown:  # positive= names a label value: no help for the judge's column
        raise ConfigError(
            f"column {column!r} holds {unknown[:5]}, not a judge's verdicts (true/false, 1/0, yes/no): compare "
            "scores as numbers (leave out kind=binary, --kind binary), or name a verdict column as the score"
        )
    return np.array(values, dtype=bool)


def _where(mask: np.ndarray, rows: Sequence[int] | None) -> Where:
    """Where the i-th of the rows ``mask`` keeps is: its row in the split (in the result, given ``rows``)."""
    at = np.nonzero(mask)[0]
    return lambda i: f"row {rows[int(at[i])] if rows is not None else int(at[i])}"


def _counts(values: np.ndarray) -> dict[str, int]:
    if values.dtype.kind == "f" and len(values) and not np.all(values == np.round(values)):
        counts, edges = np.histogram(values, bins=_CALIBRATION_BINS)
        return {f"{e:.2f}": int(c) for e, c in zip(edges[:-1], counts, strict=True)}
    keys, counts = np.unique(values, return_counts=True)
    return {_key(k): int(c) for k, c in zip(keys, counts, strict=True)}


def _key(v: Any) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v).lower() if isinstance(v, (bool, np.bool_)) else str(v)


def _integers(v: np.ndarray) -> bool:
    return bool(len(v)) and bool(np.all(v == np.round(v)))


def _numeric(
    report: AgreementReport, x: np.ndarray, y: np.ndarray, ordinal: bool, mae: bool = True
) -> dict[str, stats.Stat]:
    fns: dict[str, stats.Stat] = {
        "spearman": stats.spearman,
        "kendall_tau_b": stats.kendall_tau_b,
        "pearson": stats.pearson,
    }
    if mae:  # no common scale (a rating against 0/1): no distance between them
        fns["mae"] = stats.mae
    labels = _scale(x, y) if ordinal and _integers(x) and _integers(y) else None
    if labels is not None:

        def qwk(a: np.ndarray, b: np.ndarray) -> float | None:
            return stats.cohen_kappa(b, a, labels, quadratic=True)

        fns["quadratic_kappa"] = qwk
        report.confusion = {"labels": labels, "matrix": stats.confusion_matrix(y, x, labels).tolist()}
    report.figures = {name: fn(x, y) for name, fn in fns.items()}
    report.calibration = _calibration(x, y)
    return fns


def _scale(x: np.ndarray, y: np.ndarray) -> list[int] | None:
    """The labels of the confusion matrix and the quadratic kappa: the whole range of a rating scale (a value
    no row has still shows), else only the values present (an outlier, 5000 among 0-9, adds one row, not
    5,000); None past ``MAX_SCALE`` values, which is no rating scale (no matrix, no kappa: the correlations
    and MAE still hold). The kappa is the same either way: it weighs by the values' distance, not their index.

    Example:
        >>> _scale(np.array([1.0, 3.0]), np.array([2.0, 5000.0]))
        [1, 2, 3, 5000]
    """
    lo, hi = int(min(x.min(), y.min())), int(max(x.max(), y.max()))
    if hi - lo < MAX_SCALE:
        return list(range(lo, hi + 1))
    present = np.union1d(x, y)
    return [int(v) for v in present] if len(present) <= MAX_SCALE else None


def _calibration(x: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    """Mean label per score value, or per equal-width score bin when there are many values."""
    if not len(x):
        return []
    values = np.unique(x)
    if len(values) <= 2 * _CALIBRATION_BINS:
        groups = [(float(v), x == v) for v in values]
    else:
        edges = np.linspace(x.min(), x.max(), _CALIBRATION_BINS + 1)
        bins = np.clip(np.searchsorted(edges, x, "right") - 1, 0, _CALIBRATION_BINS - 1)
        groups = [(float(x[bins == b].mean()), bins == b) for b in range(_CALIBRATION_BINS) if (bins == b).any()]
    return [{"score": s, "count": int(m.sum()), "label_mean": float(y[m].mean())} for s, m in groups]


def _binary(report: AgreementReport, x: np.ndarray, y: np.ndarray) -> dict[str, stats.Stat]:
    report.figures = stats.binary_scores(y, x)
    report.confusion = {"labels": [False, True], "matrix": stats.confusion_matrix(y, x, [False, True]).tolist()}

    def pick(name: str) -> stats.Stat:
        return lambda a, b: stats.binary_scores(b, a)[name]

    return {name: pick(name) for name in report.figures}


def _pairwise(
    report: AgreementReport, x: np.ndarray, y: np.ndarray, d: Dataset, score: str, keep: np.ndarray
) -> dict[str, stats.Stat]:
    def agree(a: np.ndarray, b: np.ndarray) -> float | None:
        return float((a == b).mean()) if len(a) else None

    def kappa(a: np.ndarray, b: np.ndarray) -> float | None:
        return stats.cohen_kappa(b, a, _WINNERS)

    report.figures = {
        "agreement": agree(x, y),
        "cohen_kappa": kappa(x, y),
        "tie_rate": float((x == "tie").mean()) if len(x) else None,
        "label_tie_rate": float((y == "tie").mean()) if len(y) else None,
        "position_bias_rate": None,
    }
    base, sep, judge = score.partition(JUDGE_SEP)
    disagree = f"{base.removesuffix('_winner')}_disagree{sep}{judge}"
    if disagree in d.column_names:  # written only when the metric judged both orders (swap)
        flags = d.with_format("arrow")[disagree].combine_chunks().filter(pa.array(keep))
        flags = pc.drop_null(flags).to_numpy(zero_copy_only=False)
        report.figures["position_bias_rate"] = float(np.mean(flags)) if len(flags) else None
    report.confusion = {"labels": _WINNERS, "matrix": stats.confusion_matrix(y, x, _WINNERS).tolist()}
    return {"agreement": agree, "cohen_kappa": kappa}


def _text_columns(d: Dataset, columns: list[str], keep: np.ndarray, what: str) -> pa.Table:
    missing = [c for c in columns if c not in d.column_names]
    if missing:
        raise ConfigError(f"no column {missing[0]!r} ({what}) in the dataset; it has: {', '.join(d.column_names)}")
    return d.with_format("arrow")[:].select(columns).filter(pa.array(keep))


def _length_figures(
    report: AgreementReport,
    d: Dataset,
    keep: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    columns: list[str],
    lengths: bias.Lengths,
) -> None:
    """``length_rho`` and ``label_length_rho`` (numbers, verdicts), or the longer-wins rates (pairwise), with
    lengths counted as the run's length bias counts them (``lengths``: the judge's model's)."""
    table = _text_columns(d, columns, keep, "length_of")
    report.length_unit = lengths.unit
    if report.kind == "pairwise":
        if len(columns) != 2:
            raise ConfigError(
                f"a pairwise judge's length_of names its two responses' columns (--length-of A --length-of B), "
                f"got {columns}"
            )
        first, second = lengths.of(table, columns[:1]), lengths.of(table, columns[1:])
        for name, values in (("longer_wins_rate", x), ("label_longer_wins_rate", y)):
            found = bias.longer_wins(values, first, second, lengths.unit, seed=report.seed)
            report.figures[name] = found["rate"]
            if report.resamples and found["rate"] is not None:
                report.intervals[name] = (found["low"], found["high"])
        return
    total = lengths.of(table, columns)
    ok = ~np.isnan(total)
    for name, values in (("length_rho", x), ("label_length_rho", y)):
        v = values.astype(np.float64)[ok]
        report.figures[name] = stats.spearman(v, total[ok])
        if report.resamples and report.figures[name] is not None:
            report.intervals[name] = stats.bootstrap_spearman(
                v, total[ok], resamples=report.resamples, seed=report.seed, confidence=report.confidence
            )


def _family_figures(
    report: AgreementReport,
    d: Dataset,
    keep: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    column: str,
    judge_model: str | None,
) -> None:
    """The judge's error on the rows its own family wrote and on the others (self-preference)."""
    family = bias.model_family(judge_model)
    if family is None:
        named = f": {judge_model!r} names no family hf-judge knows" if judge_model else ""
        raise ConfigError(
            "generator_column needs the judge's model, to know its family: judge_model= (--judge-model NAME)" + named
        )
    writers = _text_columns(d, [column], keep, "generator_column").column(0).to_pylist()
    own = np.array([bias.model_family(None if w is None else str(w)) == family for w in writers], dtype=bool)
    if report.kind == "numeric":
        error = x.astype(np.float64) - y.astype(np.float64)
    else:
        error = (x != y).astype(np.float64)  # a verdict or a winner: the share of disagreements
    for name, rows in (("own_family", own), ("other_family", ~own)):
        report.figures[f"{name}_error"] = float(error[rows].mean()) if rows.any() else None
        report.figures[f"{name}_rows"] = int(rows.sum())
