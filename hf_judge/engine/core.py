"""The row core: judging one row, whatever engine carries its requests.

From a row and the plans, :meth:`RowCore.prepare_rows` renders the requests to send (one per judge x sample x
order of a swapped pairwise judge, each with its reply key and canonical body, the logprob fields where the
settings ask for them); from their outcomes, :meth:`RowCore._finish_part` makes the row's values (scores,
reasons, per-judge and per-sample columns, aggregates, ``_expected``/``_confidence``/``_p_positive``, token
columns) or its error rows. How requests travel (a window over a ``Dataset``, a stream, worker processes, provider
batches, Ray actors) is an engine's: :class:`~hf_judge.engine.pipeline.SplitRun` drives this core, and tells it
what to do once a row has finished (``_row_done``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from datasets import Features

from ..errors import ErrorKind, TemplateError
from ..judging import logprobs
from ..judging.ensemble import Layout, as_features, sample_key
from ..judging.metrics import Metric, MetricKind, OutputType
from ..judging.prompt import NoRequest, prompt_values, request_messages
from ..redact import scrub
from ..transport.client import JudgeClient, Outcome

# Bound to module names for the per-row paths: a member looked up on its enum class costs ~70 ns.
_BINARY, _PAIRWISE = MetricKind.BINARY, MetricKind.PAIRWISE
# Per-row token columns (token_columns=True): the usage the server reported for
# the replies that scored the row, summed over its metrics. Failed attempts are
# counted in the run summary only, so that a resumed run and an uninterrupted
# one give the same rows.
PROMPT_TOKENS = "judge_prompt_tokens"
COMPLETION_TOKENS = "judge_completion_tokens"
TOKEN_COLUMNS = [PROMPT_TOKENS, COMPLETION_TOKENS]


@dataclass
class Plan:
    """One metric of a split: how to read its variables from a row."""

    metric: Metric
    columns: dict[str, str | None]  # variable -> column (None: optional, absent)
    temperature: float
    images: frozenset[str] = frozenset()  # variables sent as images (images.image_variables)


class RowJob:
    """One (row, metric): one request, or two for a swapped pairwise judge; times K samples, times the judges
    of a panel. Part ``(judge * K + sample) * orders + order`` is one request."""

    __slots__ = ("row", "plan", "outcomes", "pending", "keys", "orders", "per_judge")

    def __init__(self, row: int, plan: Plan, n: int, orders: int = 1, per_judge: int | None = None):
        self.row = row
        self.plan = plan
        self.outcomes: list[Outcome | None] = [None] * n
        self.pending = n
        self.keys: list[bytes] = [b""] * n
        self.orders = orders
        self.per_judge = per_judge or n


class RowCore:
    """Judges rows: their requests from the plans, their values (or error rows) from the replies.

    ``values[r]`` holds row ``r``'s columns while it is being judged, ``errors`` its error rows; an engine
    subclasses it (:class:`~hf_judge.engine.pipeline.SplitRun`) and says what a finished row becomes.
    """

    def __init__(
        self,
        split: str,
        plans: Sequence[Plan],
        client: JudgeClient,
        *,
        max_input_chars: int | None = None,
        token_columns: bool = False,
        judges: Sequence[JudgeClient] = (),
        layout: Layout | None = None,
    ):
        self.split = split
        self.plans = plans
        self.client = client
        # a panel: one client per judge, in the layout's judge order (the first is `client`)
        self.clients = list(judges) or [client]
        self.layout = layout = layout or Layout()
        self.max_input_chars = max_input_chars
        self.logprobs = client.settings.logprobs
        self.token_columns = token_columns
        self.columns = list(score_types([p.metric for p in plans], layout, self.logprobs, token_columns))
        self.values: dict[int, dict[str, Any]] = {}
        self.row_pending: dict[int, int] = {}
        self.errors: list[dict[str, Any]] = []

    def _row_done(self, r: int) -> None:
        """One metric of row ``r`` has finished (its values are in ``values[r]``, or its error rows in
        ``errors``); ``row_pending[r]`` counts those still to come. What follows is the engine's."""
        raise NotImplementedError

    def prepare_rows(self, batch: dict, row: int, size: int) -> list[tuple[RowJob, int, list, bytes]]:
        """Render the requests of rows ``row .. row + size`` (``batch`` holds them): (job, part, messages,
        canonical body) each; a row that sends nothing for a metric gets its error row instead."""
        sends: list[tuple[RowJob, int, list, bytes]] = []
        for i in range(size):
            r = row + i
            self.values[r] = {}
            self.row_pending[r] = len(self.plans)
            for plan in self.plans:
                self._prepare(r, plan, batch, i, sends)
        if len(self.plans) > 1:
            # one metric's requests of the batch together, each row's orders of a pair side by side (stable): they
            # share the template's text, and a server with prefix caching (vLLM, llama.cpp) reuses it while cached
            rank = {id(plan): n for n, plan in enumerate(self.plans)}
            sends.sort(key=lambda send: rank[id(send[0].plan)])
        return sends

    def _prepare(self, r: int, plan: Plan, batch: dict, i: int, sends: list) -> None:
        metric = plan.metric
        try:
            values = prompt_values(metric, plan.columns, batch, i, plan.images)
        except NoRequest as e:
            return self._job_error(r, plan, e.kind, e.message)
        if self.max_input_chars is not None:
            size = sum(len(v) for v in values.values() if isinstance(v, str))
            if size > self.max_input_chars:
                return self._job_error(
                    r,
                    plan,
                    ErrorKind.INPUT_TOO_LONG,
                    f"the row's template values hold {size} characters, over max_input_chars={self.max_input_chars}",
                )
        try:
            rendered = request_messages(metric, values, plan.images)
        except TemplateError as e:
            return self._job_error(r, plan, ErrorKind.TEMPLATE, str(e))
        n_orders, k = len(rendered), self.layout.samples
        if k == 1 and len(self.clients) == 1:
            job = RowJob(r, plan, n_orders)
            client = self.client
            for part, messages in enumerate(rendered):
                body = client.body(metric, messages, plan.temperature, "json_schema")
                job.keys[part] = client.reply_key(metric, messages, plan.temperature, body)
                sends.append((job, part, messages, body))
            return
        job = RowJob(r, plan, n_orders * k * len(self.clients), n_orders, n_orders * k)
        for judge, client in enumerate(self.clients):
            for order, messages in enumerate(rendered):
                body = client.body(metric, messages, plan.temperature, "json_schema")
                key = client.reply_key(metric, messages, plan.temperature, body)
                for sample in range(k):
                    part = (judge * k + sample) * n_orders + order
                    job.keys[part] = sample_key(key, sample)
                    sends.append((job, part, messages, body))

    def _whole_body_key(self, job: RowJob, part: int, body: bytes) -> bytes:
        """The key ``part`` of ``job`` had before compatible reuse: the whole body's, of its judge and sample."""
        judge, in_judge = divmod(part, job.per_judge)
        return sample_key(self.clients[judge].request_key(body), in_judge // job.orders)

    def _job_error(
        self,
        r: int,
        plan: Plan,
        kind: ErrorKind | str,
        message: str,
        raw: str | None = None,
        attempts: int = 0,
        judge: str | None = None,
    ) -> None:
        self._error_row(r, plan, kind, message, raw, attempts, judge)
        self._row_done(r)

    def judge_name(self, judge: int) -> str:
        """What the errors split's ``judge`` column says of judge ``judge`` (its index): a panel judge's name (the
        suffix of its columns), or the model of the run's one judge."""
        return self.layout.judges[judge] if self.layout.panel else self.clients[judge].model

    def _error_row(
        self,
        r: int,
        plan: Plan,
        kind: ErrorKind | str,
        message: str,
        raw: str | None = None,
        attempts: int = 0,
        judge: str | None = None,
    ) -> None:
        # The one place error rows are made: whatever a server put in them, no secret goes on. ``judge``: whose
        # request failed (None: the row's own error, no request was made for it)
        message, raw = scrub(message), (None if raw is None else scrub(raw))
        self.errors.append(  # str(kind): a plain str, which any serialiser takes (orjson refuses enum dict keys)
            {
                "split": self.split,
                "row": r,
                "metric": plan.metric.name,
                "judge": judge,
                "kind": str(kind),
                "message": message,
                "raw": raw,
                "attempts": attempts,
            }
        )

    def _finish_part(self, job: RowJob, part: int, outcome: Outcome) -> None:
        job.outcomes[part] = outcome
        job.pending -= 1
        if job.pending:
            return
        metric = job.plan.metric
        outcomes = cast("list[Outcome]", job.outcomes)  # every part has finished
        row_values = self.values[job.row]
        if job.per_judge == len(outcomes) and self.layout.samples == 1:
            failed = [o for o in outcomes if o.value is None]
            if failed:
                o = failed[0]
                attempts = sum(x.attempts for x in outcomes)
                kind, message = o.kind or "error", o.message or ""
                return self._job_error(job.row, job.plan, kind, message, o.raw, attempts, self.judge_name(0))
            # none failed: every value is set
            self._put_values(metric, outcomes, row_values)
            if self.logprobs:
                self._put_logprobs(metric, outcomes, row_values, self.client.stats)
        elif not self._combine(job, outcomes, row_values):
            return self._row_done(job.row)
        if self.token_columns:
            for o in outcomes:
                if o.usage is not None:
                    row_values[PROMPT_TOKENS] = row_values.get(PROMPT_TOKENS, 0) + o.usage[0]
                    row_values[COMPLETION_TOKENS] = row_values.get(COMPLETION_TOKENS, 0) + o.usage[1]
        self._row_done(job.row)

    @staticmethod
    def _put_values(metric: Metric, outcomes: list[Outcome], into: dict[str, Any]) -> None:
        """The metric's columns from one reply (both orders of a swapped pairwise judge)."""
        if metric.kind == _PAIRWISE:
            into.update(combine_pairwise(metric, cast("list[dict[str, Any]]", [o.value for o in outcomes])))
            return
        value = cast("dict[str, Any]", outcomes[0].value)
        for out in metric.outputs:
            into[out.column] = value[out.key]
        if metric.kind == _BINARY:
            verdict = next(o for o in metric.outputs if o.enum)
            into[metric.name] = value[verdict.key] == metric.params["positive"]

    @staticmethod
    def _put_logprobs(metric: Metric, outcomes: Sequence[Outcome], into: dict[str, Any], stats: Any) -> None:
        """The probability-weighted columns of one reply (both orders of a swapped pairwise judge); ``stats``:
        the judge's client's, which counts (and says once) a reply without log-probabilities."""
        if metric.kind == _PAIRWISE:
            values = cast("list[dict[str, Any]]", [o.value for o in outcomes])
            into.update(logprobs.pair_values(metric, values, [o.logprobs for o in outcomes]))
            for o in outcomes:
                logprobs.notice(stats, metric, o.logprobs)
        elif logprobs.targets(metric):
            into.update(logprobs.row_values(metric, cast("dict[str, Any]", outcomes[0].value), outcomes[0].logprobs))
            logprobs.notice(stats, metric, outcomes[0].logprobs)

    def _combine(self, job: RowJob, outcomes: list[Outcome], row_values: dict[str, Any]) -> bool:
        """Samples and judges of a finished job -> its columns (see ensemble.py), and an error row for each
        judge with fewer than ``min_samples`` good samples. False when no judge has a value."""
        metric, layout, orders = job.plan.metric, self.layout, job.orders
        k = layout.samples
        judges: list[dict[str, Any] | None] = []
        for judge in range(len(self.clients)):
            samples: list[dict[str, Any] | None] = []
            failures: list[Outcome] = []
            for sample in range(k):
                start = (judge * k + sample) * orders
                parts = outcomes[start : start + orders]
                failed = next((o for o in parts if o.value is None), None)
                if failed is None:
                    values: dict[str, Any] = {}
                    self._put_values(metric, parts, values)
                    if self.logprobs:
                        self._put_logprobs(metric, parts, values, self.clients[judge].stats)
                    samples.append(values)
                else:
                    samples.append(None)
                    failures.append(failed)
            good = k - len(failures)
            if good < layout.min_samples:
                o = failures[0]
                where = f"judge {layout.judges[judge]!r}: " if layout.panel else ""
                missing = f"{len(failures)} of {k} samples failed (min_samples={layout.min_samples}); " if k > 1 else ""
                attempts = sum(x.attempts for x in outcomes[judge * job.per_judge : (judge + 1) * job.per_judge])
                message = f"{where}{missing}{o.message or ''}"
                self._error_row(job.row, job.plan, o.kind or "error", message, o.raw, attempts, self.judge_name(judge))
                judges.append(None)
            else:
                judges.append(samples[0] if k == 1 else self._combine_samples(metric, samples))
        if all(j is None for j in judges):
            return False
        if not layout.panel:
            row_values.update(cast("dict", judges[0]))
            return True
        row_values.update(layout.combine_judges(metric, judges))
        if self.logprobs:  # each judge's own went in with its other columns
            row_values.update(layout.combine_judge_logprobs(metric, judges))
        return True

    def _combine_samples(self, metric: Metric, samples: list[dict[str, Any] | None]) -> dict[str, Any]:
        """One judge's columns from its K samples, the probability-weighted ones included."""
        out = self.layout.combine_samples(metric, samples)
        if self.logprobs:
            out.update(self.layout.combine_sample_logprobs(metric, samples))
        return out


def score_types(
    metrics: Sequence[Metric], layout: Layout, logprobs: bool = False, token_columns: bool = False
) -> dict[str, Any]:
    """Every score column a run writes -> its Arrow type name (or ``("list", type)``), in the order it writes
    them: the one definition of a run's columns, for every engine (:attr:`RowCore.columns`, the features of
    a Dataset's and of a stream's result).

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> list(score_types([load_metric("QA_Clarity")], Layout(samples=3), logprobs=True))  # doctest: +ELLIPSIS
        ['QA_Clarity_reason', ..., 'QA_Clarity_samples', 'QA_Clarity_expected', 'QA_Clarity_expected_samples', ...]
    """
    types = {c: t for m in metrics for c, t in layout.column_types(m).items()}
    if logprobs:  # after every metric's own columns: where logprobs runs have always put them
        types.update({c: t for m in metrics for c, t in layout.logprob_types(m).items()})
    if token_columns:
        types.update(dict.fromkeys(TOKEN_COLUMNS, "int64"))
    return types


def score_features(
    metrics: Sequence[Metric], layout: Layout, logprobs: bool = False, token_columns: bool = False
) -> Features:
    """:func:`score_types` as datasets ``Features``."""
    return Features(as_features(score_types(metrics, layout, logprobs, token_columns)))


def combine_pairwise(metric: Metric, values: list[dict[str, Any]]) -> dict[str, Any]:
    """Columns of a pairwise judge from one order, or from both orders (swap)."""
    ints = [o for o in metric.outputs if o.type == OutputType.INTEGER]
    texts = [o for o in metric.outputs if o.type == OutputType.STRING]
    k1, k2 = ints[0].key, ints[1].key
    first = values[0]

    def winner(s1: float, s2: float) -> str:
        return "1" if s1 > s2 else "2" if s2 > s1 else "tie"

    out: dict[str, Any] = {}
    if len(values) == 1:
        out[ints[0].column], out[ints[1].column] = first[k1], first[k2]
        out[f"{metric.name}_winner"] = winner(first[k1], first[k2])
        for o in texts:
            out[o.column] = first[o.key]
        return out
    second = values[1]  # responses swapped: its k1 scores response 2
    s1 = (first[k1] + second[k2]) / 2
    s2 = (first[k2] + second[k1]) / 2
    out[ints[0].column], out[ints[1].column] = s1, s2
    out[f"{metric.name}_winner"] = winner(s1, s2)
    for o in texts:
        out[o.column] = first[o.key]
        out[f"{o.column}_swapped"] = second[o.key]
    out[f"{metric.name}_disagree"] = winner(first[k1], first[k2]) != winner(second[k2], second[k1])
    return out
