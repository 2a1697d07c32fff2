"""Several replies for one (row, metric): repeated samples and judge panels, and the columns they make.

A judge answers ``samples`` times (K). Each reply that passes validation is a
sample; a failed one is a missing sample. With K > 1 every column ``c`` of the
metric becomes:

* numbers: ``c`` the mean, ``c_std`` the population standard deviation
  (ddof=0), ``c_majority`` the most common value, ``c_samples`` the K values;
* booleans and strings (verdicts, winners, reasons): ``c`` the most common
  value, ``c_samples`` the K values.

A missing sample is null in ``c_samples`` and left out of the others. Ties of
a majority go to the value seen first (sample order, then judge order): a
free-text reason's majority is the first sample's.

A panel (several judges) writes each judge's columns as ``<column>__<judge>``
and the panel's aggregate in the metric's usual columns: numbers by
``aggregator`` (mean by default; median, majority, min or max), booleans by
majority (``min``: every judge must say yes; ``max``: any one), strings by
majority. The aggregate is taken over the judges that answered.

With ``logprobs=True`` the probability-weighted columns of each reply
(:func:`hf_judge.judging.logprobs.columns`: ``_expected``, ``_confidence``,
``_p_positive``) follow the same layout (:meth:`Layout.logprob_types`): with
K > 1, ``c`` the mean over the samples and ``c_samples`` the K values; in a
panel, ``c__<judge>`` per judge and ``c`` the aggregator over the judges
(``majority`` takes the mean: these are probabilities and expectations, not
votes). A reply without log-probabilities is null in ``c_samples`` and left
out of the mean, as a missing sample is.

Example:
    >>> from hf_judge.judging.catalogue import load_metric
    >>> layout = Layout(samples=3, min_samples=2)
    >>> list(layout.column_types(load_metric("Binary")))
    ['Binary', 'Binary_samples', 'Binary_verdict', 'Binary_verdict_samples']
"""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ..settings import Aggregator, Settings
from . import logprobs
from .metrics import Metric, MetricKind

NUMERIC = frozenset({"int64", "float64"})
JUDGE_SEP = "__"  # <column>__<judge>: valid in Arrow, Parquet and datasets, and never in a metric's own names


def majority(values: Sequence[Any]) -> Any:
    """The most common value; a tie goes to the one seen first; None for no values.

    Example:
        >>> majority([7, 8, 8]), majority(["1", "0"]), majority([])
        (8, '1', None)
    """
    return Counter(values).most_common(1)[0][0] if values else None


@dataclass(frozen=True)
class Layout:
    """How the replies of one (row, metric) become columns: K samples, a panel's judges and its aggregator."""

    samples: int = 1
    min_samples: int = 1
    judges: tuple[str, ...] = ()  # column names of a panel's judges; () or one: no panel
    aggregator: Aggregator = Aggregator.MEAN

    @classmethod
    def from_settings(cls, settings: Settings) -> Layout:
        names = tuple(j.column_name for j in settings.judges)
        return cls(settings.samples, settings.required_samples, names if len(names) > 1 else (), settings.aggregator)

    @property
    def panel(self) -> bool:
        return len(self.judges) > 1

    @property
    def plain(self) -> bool:
        """One reply per (row, metric): the metric's own columns, as without this module."""
        return self.samples == 1 and not self.panel

    def fingerprint(self) -> dict[str, Any] | None:
        """What a results cache must tell apart; None for the plain layout (its fingerprints stay as they were)."""
        if self.plain:
            return None
        return {"samples": self.samples, "min": self.min_samples, "judges": self.judges, "agg": str(self.aggregator)}

    def judge_types(self, metric: Metric) -> dict[str, Any]:
        """One judge's columns -> Arrow type name, or ``("list", type)`` for a list of samples."""
        if self.samples == 1:
            return dict(metric.column_types)
        out: dict[str, Any] = {}
        for c, t in metric.column_types.items():
            if t in NUMERIC:
                out.update({c: "float64", f"{c}_std": "float64", f"{c}_majority": t})
            else:
                out[c] = t
            out[f"{c}_samples"] = ("list", t)
        return out

    def column_types(self, metric: Metric) -> dict[str, Any]:
        """Every column a metric writes under this layout -> Arrow type name (or ``("list", type)``); with
        logprobs, :meth:`logprob_types` adds its own (``pipeline.score_types`` puts a run's together)."""
        own = self.judge_types(metric)
        if not self.panel:
            return own
        out = {c: self._panel_type(t, own[c]) for c, t in metric.column_types.items()}
        for name in self.judges:
            out.update({f"{c}{JUDGE_SEP}{name}": t for c, t in own.items()})
        return out

    def features(self, metric: Metric) -> dict[str, Any]:
        """:meth:`column_types` as datasets features."""
        return as_features(self.column_types(metric))

    def logprob_types(self, metric: Metric) -> dict[str, Any]:
        """The probability-weighted columns a ``logprobs=True`` run writes for ``metric`` under this layout.

        Example:
            >>> from hf_judge.judging.catalogue import load_metric
            >>> Layout(samples=3).logprob_types(load_metric("Binary"))
            {'Binary_p_positive': 'float64', 'Binary_p_positive_samples': ('list', 'float64')}
            >>> list(Layout(judges=("a", "b")).logprob_types(load_metric("Binary")))
            ['Binary_p_positive', 'Binary_p_positive__a', 'Binary_p_positive__b']
        """
        own: dict[str, Any] = {}
        for c, t in logprobs.columns(metric).items():
            own[c] = t
            if self.samples > 1:
                own[f"{c}_samples"] = ("list", t)
        if not self.panel:
            return own
        out: dict[str, Any] = dict(logprobs.columns(metric))
        for name in self.judges:
            out.update({f"{c}{JUDGE_SEP}{name}": t for c, t in own.items()})
        return out

    def columns(self, metric: Metric) -> list[str]:
        return list(self.column_types(metric))

    def _panel_type(self, declared: str, judge: str) -> str:
        if declared in NUMERIC and self.aggregator in (Aggregator.MEAN, Aggregator.MEDIAN):
            return "float64"
        return judge

    def combine_samples(self, metric: Metric, samples: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        """One judge's columns from its K samples (None: a missing sample)."""
        out: dict[str, Any] = {}
        for c, t in metric.column_types.items():
            values = [None if s is None else s.get(c) for s in samples]
            got = [v for v in values if v is not None]
            if t in NUMERIC:
                out[c] = statistics.fmean(got) if got else None
                out[f"{c}_std"] = statistics.pstdev(got) if got else None
                out[f"{c}_majority"] = majority(got)
            else:
                out[c] = majority(got)
            out[f"{c}_samples"] = values
        return out

    def combine_judges(self, metric: Metric, judges: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        """The panel's aggregate columns and each judge's own (None: a judge without an answer)."""
        out: dict[str, Any] = {}
        agg = self.aggregator
        for c, t in metric.column_types.items():
            got = [j[c] for j in judges if j is not None and j.get(c) is not None]
            if not got:
                out[c] = None
            elif t in NUMERIC or (t == "bool" and agg in (Aggregator.MIN, Aggregator.MAX)):
                out[c] = _aggregate(agg, got) if t in NUMERIC else (min(got) if agg == Aggregator.MIN else max(got))
            else:
                out[c] = majority(got)
        for name, values in zip(self.judges, judges, strict=True):
            if values is not None:
                out.update({f"{c}{JUDGE_SEP}{name}": v for c, v in values.items()})
        return out

    def combine_sample_logprobs(self, metric: Metric, samples: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        """One judge's probability-weighted columns from its K samples' (None: a missing sample).

        The mean over the samples: for ``_expected`` and ``_p_positive`` it is exactly the value of the
        samples' distributions averaged (each sample weighs 1/K; the expectation is linear), which is the
        judge's distribution over its sampled replies, so nothing is lost by not keeping the tables. For
        ``_confidence`` the mean is the samples' average certainty of what each wrote: the averaged
        distribution has no one written value (the row's score is a mean), and its probability of the
        majority value would mix the samples' agreement, which ``_std`` and ``_majority`` already show,
        into each reply's certainty.
        """
        out: dict[str, Any] = {}
        for c in logprobs.columns(metric):
            values = [None if s is None else s.get(c) for s in samples]
            got = [v for v in values if v is not None]
            out[c] = statistics.fmean(got) if got else None
            out[f"{c}_samples"] = values
        return out

    def combine_judge_logprobs(self, metric: Metric, judges: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
        """The panel's probability-weighted columns: ``aggregator`` over the judges that have a value
        (``majority`` takes the mean: a vote among expectations would pick one judge's, ties by judge order).
        Each judge's own columns are written by :meth:`combine_judges` with the rest of its columns."""
        agg = Aggregator.MEAN if self.aggregator == Aggregator.MAJORITY else self.aggregator
        out: dict[str, Any] = {}
        for c in logprobs.columns(metric):
            got = [j[c] for j in judges if j is not None and j.get(c) is not None]
            out[c] = _aggregate(agg, got) if got else None
        return out

    def judged(self, metric: Metric) -> list[str]:
        """The columns of ``metric`` that hold a judgment a panel's judges can agree on (numbers, booleans, enums,
        a pairwise winner): those :meth:`agreement` compares."""
        verdicts = {o.column for o in metric.outputs if o.enum}
        if metric.kind == MetricKind.PAIRWISE:
            verdicts.add(f"{metric.name}_winner")  # "1"/"2"/"tie": a pairwise judge's verdict, a plain string
        return [c for c, t in metric.column_types.items() if t in NUMERIC or t == "bool" or c in verdicts]

    def agreement(self, metric: Metric, table: Any) -> dict[str, Any]:
        """Judge-vs-judge agreement on a scored split (a pyarrow Table): per column that holds a judgment
        (numbers, booleans, enums, a pairwise winner), per pair of judges, the rows both answered, the share
        where they gave the same value, and for numbers the mean absolute difference."""
        import pyarrow.compute as pc

        out: dict[str, Any] = {}
        for c in self.judged(metric):
            pairs: dict[str, Any] = {}
            for a, b in combinations(self.judges, 2):
                x, y = table.column(f"{c}{JUDGE_SEP}{a}"), table.column(f"{c}{JUDGE_SEP}{b}")
                both = pc.and_(pc.is_valid(x), pc.is_valid(y))
                x, y = pc.filter(x, both), pc.filter(y, both)
                n = len(x)
                entry: dict[str, Any] = {"rows": n, "exact": None}
                if n:
                    entry["exact"] = round(pc.sum(pc.equal(x, y).cast("int64")).as_py() / n, 4)
                    if metric.column_types[c] in NUMERIC:
                        diff = pc.abs(pc.subtract(x.cast("float64"), y.cast("float64")))
                        entry["mean_abs_diff"] = round(pc.mean(diff).as_py(), 4)
                pairs[f"{a}~{b}"] = entry
            rated = [p["exact"] for p in pairs.values() if p["exact"] is not None]
            out[c] = {"pairs": pairs, "mean_exact": round(statistics.fmean(rated), 4) if rated else None}
        return out


def as_features(types: dict[str, Any]) -> dict[str, Any]:
    """Column -> Arrow type name (or ``("list", type)``), as datasets features.

    Example:
        >>> as_features({"a": "float64", "b": ("list", "int64")})
        {'a': Value('float64'), 'b': List(Value('int64'))}
    """
    from datasets import List, Value

    return {c: List(Value(t[1])) if isinstance(t, tuple) else Value(t) for c, t in types.items()}


def _aggregate(agg: Aggregator, values: list[Any]) -> Any:
    if agg == Aggregator.MEAN:
        return statistics.fmean(values)
    if agg == Aggregator.MEDIAN:
        return float(statistics.median(values))
    if agg == Aggregator.MIN:
        return min(values)
    if agg == Aggregator.MAX:
        return max(values)
    return majority(values)


def sample_key(key: bytes, sample: int) -> bytes:
    """The reply-store key of sample ``sample`` of a request: the request's own key for sample 0 (a run with
    ``samples=1`` and the first sample of any K share their replies), a key of its own for every other."""
    if sample == 0:
        return key
    return hashlib.blake2b(key + b"\0sample" + sample.to_bytes(4, "big"), digest_size=len(key)).digest()
