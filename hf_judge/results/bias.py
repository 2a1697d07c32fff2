"""The bias checks of a finished run: length bias of every integer score, the longer-wins rate of pairwise
judges, self-preference, and the opt-in length-controlled scores (``<column>_lc``).

:class:`BiasChecks` is built once per run from its metrics, column mapping and settings; :meth:`BiasChecks.run`
reads the scored splits (pooled: a judge's bias is the judge's, not a split's), fills the summary's
``length_bias``, ``longer_wins`` and ``self_preference``, and returns the splits (with ``<column>_lc`` when
``length_control`` is on) and the warnings to log. No engine calls it itself: the run shell does
(``engine.shell.bias_checks`` builds them, ``engine.shell.rows_figures`` runs them), at the same point for every
engine, on the finished result (one process, workers, batch mode, Ray, the cascade) or, for a stream, on
:class:`StreamSample`, a bounded uniform sample of the rows that passed. The figures are in
:mod:`hf_judge.analysis.bias`.

A panel's judges are checked one by one too: each judge's own column ``<column>__<judge>`` gets its entry in
``length_bias`` (with ``judge`` and ``panel_column``), its length counted as the aggregate's, so the judges
compare. ``<column>_lc`` stays on the aggregate: it is the column a filter reads.

What length is: the text the metric judged, that is its ``output`` variable, or, for a metric without one
(``Q_Clarity`` judges the question), all its text variables together; for a pairwise metric each response.
Counted in tokens of the judge's encoding where tiktoken is installed and knows the model (``gpt-4o``),
else in characters; ``unit`` says which.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..analysis import bias as figures
from ..errors import ConfigError
from ..judging.ensemble import JUDGE_SEP
from ..judging.metrics import Metric, MetricKind, OutputType
from ..pages import file_paths, release

if TYPE_CHECKING:
    from datasets import Dataset

    from ..settings import Settings

logger = logging.getLogger("hf_judge")

LC_SUFFIX = "_lc"
STREAM_SAMPLE_ROWS = 10_000  # a stream's checks read a uniform sample of this many rows per split


def judged_variables(metric: Metric) -> list[str]:
    """The variables whose text a metric judged: ``output``, else all its text (non-image) variables.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> judged_variables(load_metric("QA_Clarity")), judged_variables(load_metric("Q_Clarity"))
        (['output'], ['instruction'])
    """
    text = [v for v in metric.variables if v not in metric.images]
    return ["output"] if "output" in text else text


def pair_variables(metric: Metric) -> tuple[str, str] | None:
    """A pairwise metric's two response variables: those it swaps, else a pair named ``x1``/``x2``."""
    if metric.swap:
        return metric.swap[0], metric.swap[1]
    for v in metric.variables:
        if v.endswith("1") and f"{v[:-1]}2" in metric.variables:
            return v, f"{v[:-1]}2"
    return None


def integer_scores(metric: Metric) -> list[str]:
    """The columns of a score metric's integer outputs (a pairwise metric's get the longer-wins rate)."""
    if metric.kind != MetricKind.SCORE:
        return []
    return [o.column for o in metric.outputs if o.type == OutputType.INTEGER]


def _numbers(table: pa.Table, column: str) -> np.ndarray:
    """A numeric or boolean column as floats, NaN where null."""
    arr = table.column(column).combine_chunks()
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int64())
    return np.asarray(arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)


def _strings(table: pa.Table, column: str) -> np.ndarray:
    return np.array(table.column(column).to_pylist(), dtype=object)


@dataclass
class BiasChecks:
    """What a run checks its finished scores for; ``run`` checks them. See the module docstring.

    Example:
        >>> checks = BiasChecks.of(metrics, {"output": "answer"}, settings)  # doctest: +SKIP
        >>> splits, warnings = checks.run(summary, {"train": scored_train})  # doctest: +SKIP
    """

    metrics: list[Metric]
    columns: dict[str, str]  # template variable -> dataset column, where they differ
    model: str
    judges: list[str]
    length_control: bool = False
    generator_column: str | None = None
    generator_model: str | None = None
    # a panel's judges as its columns name them (<column>__<judge>): each judge's own length bias; none: no panel
    panel: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, metrics: list[Metric], columns: dict[str, str], settings: Settings) -> BiasChecks:
        return cls(
            list(metrics),
            dict(columns),
            settings.model,
            [j.model for j in settings.judges],
            settings.length_control,
            settings.generator_column,
            settings.generator_model,
            [j.column_name for j in settings.judges] if len(settings.judges) > 1 else [],
        )

    def column(self, variable: str) -> str:
        return self.columns.get(variable, variable)

    def judge_columns(self, column: str) -> list[str]:
        """A panel's per-judge columns of a score column (``<column>__<judge>``); none without a panel."""
        return [f"{column}{JUDGE_SEP}{name}" for name in self.panel]

    def needed(self) -> list[str]:
        """The dataset columns the checks read (a stream's sample keeps only these)."""
        cols: list[str] = []
        for m in self.metrics:
            cols += [self.column(v) for v in judged_variables(m)]
            cols += [c for col in integer_scores(m) for c in (col, *self.judge_columns(col))]
            pair = pair_variables(m) if m.kind == MetricKind.PAIRWISE else None
            if pair is not None:
                cols += [self.column(pair[0]), self.column(pair[1]), f"{m.name}_winner"]
        if self.generator_column:
            cols.append(self.generator_column)
        return list(dict.fromkeys(cols))

    def check_input(self, splits: dict[str, list[str]]) -> None:
        """Before any request: ``generator_column`` must be a column of every split (name -> its columns)."""
        if self.generator_column is None:
            return
        for split, names in splits.items():
            if names and self.generator_column not in names:
                raise ConfigError(
                    f"generator_column (--generator-column) {self.generator_column!r} is not a column of split "
                    f"{split!r} (it has: {', '.join(names)}): name the column that says which model wrote each "
                    "judged text, or give generator_model (--generator-model NAME) when one model wrote them all"
                )

    def run(self, summary: Any, results: dict[str, Dataset]) -> tuple[dict[str, Dataset], list[str]]:
        """Fill ``summary.length_bias``, ``longer_wins`` and ``self_preference`` from the scored ``results``;
        returns the splits (with ``<column>_lc`` when ``length_control``) and the warnings to log."""
        tables = [_table(d, self.needed()) for d in results.values() if len(d)]
        if not tables:
            return results, []
        table = pa.concat_tables(tables, promote_options="permissive")
        if table.num_rows > figures.POINT_ROWS:
            table = table.take(pa.array(figures.sample_rows(table.num_rows)))
        lengths = figures.Lengths(self.model)
        warnings = self._length_bias(summary, table, lengths) + self._longer_wins(summary, table, lengths)
        warnings += self._self_preference(summary, table)
        # the judged texts were read from the input's files: give their pages back, as the run itself does (a
        # million-row input stays out of the resident set after the run)
        release(file_paths([f for d in results.values() for f in d.cache_files]))
        if self.length_control:
            results = self._length_control(summary, results, lengths)
        return results, warnings

    def _length_bias(self, summary: Any, table: pa.Table, lengths: figures.Lengths) -> list[str]:
        warnings, seen = [], {}
        for m in self.metrics:
            text = [self.column(v) for v in judged_variables(m)]
            for col in integer_scores(m):
                if col not in table.column_names or not text:
                    continue
                key = tuple(text)
                if key not in seen:
                    seen[key] = lengths.of(table, text)
                found = figures.length_bias(_numbers(table, col), seen[key], lengths.unit)
                summary.length_bias[col] = found
                if found["warning"]:
                    warnings.append(figures.length_warning(col, found))
                warnings += self._judges_length_bias(summary, table, col, seen[key], lengths.unit)
        return warnings

    def _judges_length_bias(
        self, summary: Any, table: pa.Table, column: str, judged: np.ndarray, unit: str
    ) -> list[str]:
        """Each panel judge's own column beside the aggregate's (``<column>__<judge>``, marked with ``judge``
        and ``panel_column``): which judge of a panel follows length, which its aggregate hides or dilutes."""
        warnings = []
        for name, own in zip(self.panel, self.judge_columns(column), strict=True):
            if own not in table.column_names:
                continue
            found = {**figures.length_bias(_numbers(table, own), judged, unit), "judge": name, "panel_column": column}
            summary.length_bias[own] = found
            if found["warning"]:
                warnings.append(figures.length_warning(own, found))
        return warnings

    def _longer_wins(self, summary: Any, table: pa.Table, lengths: figures.Lengths) -> list[str]:
        warnings = []
        for m in self.metrics:
            pair = pair_variables(m) if m.kind == MetricKind.PAIRWISE else None
            winner = f"{m.name}_winner"
            if pair is None or winner not in table.column_names:
                continue
            first = lengths.of(table, [self.column(pair[0])])
            second = lengths.of(table, [self.column(pair[1])])
            found = figures.longer_wins(_strings(table, winner), first, second, lengths.unit)
            summary.longer_wins[winner] = found
            if found["warning"]:
                warnings.append(figures.longer_wins_warning(winner, found))
        return warnings

    def _self_preference(self, summary: Any, table: pa.Table) -> list[str]:
        if self.generator_column is None and self.generator_model is None:
            return []
        if self.generator_column is not None:
            if self.generator_column not in table.column_names:  # a stream without known columns: checked here
                logger.warning(
                    "generator_column %r is not a column of the data: no self-preference report", self.generator_column
                )
                return []
            writers = _strings(table, self.generator_column)
            source = f"column {self.generator_column!r}"
        else:
            writers = np.array([self.generator_model] * table.num_rows, dtype=object)
            source = f"generator model {self.generator_model!r}"
        families = np.array([figures.model_family(None if w is None else str(w)) for w in writers], dtype=object)
        scores = {c: _numbers(table, c) for m in self.metrics for c in integer_scores(m) if c in table.column_names}
        found = figures.self_preference(families, self.judges, scores, source)
        summary.self_preference = found
        return [figures.self_preference_warning(found)] if found["warning"] else []

    def _length_control(
        self, summary: Any, results: dict[str, Dataset], lengths: figures.Lengths
    ) -> dict[str, Dataset]:
        """``<column>_lc`` in every split, the line fitted on all rows of the run (every split together)."""
        names = [s for s, d in results.items() if len(d)]
        out = dict(results)
        for m in self.metrics:
            text = [self.column(v) for v in judged_variables(m)]
            tables = {s: _table(results[s], [*text, *integer_scores(m)]) for s in names}
            for col in integer_scores(m):
                if not text or any(col not in t.column_names for t in tables.values()):
                    continue
                scores = np.concatenate([_numbers(t, col) for t in tables.values()])
                sizes = np.cumsum([t.num_rows for t in tables.values()])[:-1]
                judged = np.concatenate([lengths.of(t, text) for t in tables.values()])
                lc, _ = figures.length_controlled(scores, judged)
                for s, part in zip(names, np.split(lc, sizes), strict=True):
                    d = out[s]
                    name = f"{col}{LC_SUFFIX}"
                    if name in d.column_names:
                        d = d.remove_columns(name)
                    out[s] = d.add_column(name, pa.array(part, mask=np.isnan(part)))
                if f"{col}{LC_SUFFIX}" not in summary.columns:
                    summary.columns.append(f"{col}{LC_SUFFIX}")
        return out


def _table(d: Dataset, columns: list[str]) -> pa.Table:
    """The split's rows (those a select kept, in order) with those of ``columns`` it has."""
    table = d.with_format("arrow")[:]
    return table.select([c for c in columns if c in table.column_names])


def warn_self_preference(settings: Settings) -> None:
    """``generator_model`` checked at once where no summary reports it (a map transform): a warning if the judge is
    of its family. (What such an engine refuses is in :mod:`hf_judge.engine.capabilities`.)"""
    if settings.generator_model is not None:
        family = figures.model_family(settings.generator_model)
        same = [j.model for j in settings.judges if family is not None and figures.model_family(j.model) == family]
        if same:
            logger.warning(
                "self-preference: the judge %s is of the %s family, as %s, the model that wrote the texts: judges "
                "favour their own family's outputs; use a judge of another family",
                ", ".join(same),
                family,
                settings.generator_model,
            )


class StreamSample:
    """A uniform sample (reservoir) of at most ``size`` rows of a stream, of the ``columns`` the checks read:
    the rows seen so far, while there are fewer; each later row replaces one at random with probability
    ``size / seen``. Seeded: the same stream gives the same sample."""

    def __init__(self, columns: list[str], size: int = STREAM_SAMPLE_ROWS, seed: int = 0) -> None:
        self.columns, self.size = columns, size
        self.rows: list[dict[str, Any]] = []
        self.seen = 0
        self.schema: pa.Schema | None = None
        self._rng = np.random.default_rng(seed)

    def add(self, table: pa.Table) -> None:
        table = table.select([c for c in self.columns if c in table.column_names])
        if self.schema is None:
            self.schema = table.schema
        n = table.num_rows
        room = max(0, min(n, self.size - len(self.rows)))
        if room:
            self.rows += table.slice(0, room).to_pylist()
        if n > room:
            seen = self.seen + room + np.arange(n - room)  # rows before each of the rest
            slots = self._rng.integers(0, seen + 1)
            chosen = np.nonzero(slots < self.size)[0]
            if len(chosen):
                picked = table.take(pa.array(chosen + room)).to_pylist()
                for slot, row in zip(slots[chosen], picked, strict=True):
                    self.rows[int(slot)] = row
        self.seen += n

    def dataset(self) -> Dataset:
        from datasets import Dataset

        return Dataset(pa.Table.from_pylist(self.rows, schema=self.schema))
