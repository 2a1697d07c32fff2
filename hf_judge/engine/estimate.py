"""``estimate_cost``: what a run would send and cost, without sending it (``hf-judge score --dry-run``).

Every request of the run is rendered exactly as the run renders it (the same
plans, templates, reply keys and reply store), and nothing goes to the chat
endpoint. Counted per metric:

* requests to send: distinct requests whose reply is not in the reply store.
  Replies found there cost nothing; a request identical to another of the run
  is sent once.
* input tokens of those requests, counted by the first of these that works:
  the server's tokenizer (vLLM's ``POST /tokenize`` with the chat messages, or
  llama.cpp's ``/apply-template`` and ``/tokenize``: the chat template applied,
  so exact; an Anthropic judge's ``/v1/messages/count_tokens``; llama-cpp-python's
  ``/extras/tokenize/count``: the messages' text
  without the chat template), tiktoken where installed (the model's encoding,
  else o200k_base, plus 3 tokens per message and 3 for the reply, OpenAI's chat
  overhead), else a character count divided by 4 (plus 4 per message). The
  request's JSON schema is not counted.
* output tokens, projected: the mean completion tokens of the metric's replies
  already in the reply store (a sample of real replies, paid for once), else
  the reply its declared outputs describe (a digit or two per score, the
  longest enum value, ``REASON_TOKENS`` per free-text output), capped at
  ``max_tokens``.
* cost, online and in batch mode, for a model with a price (genai-prices' list prices, or a ``--prices``
  file: see :mod:`hf_judge.transport.prices`), and where each price comes from. Retries are not projected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson

from ..errors import BudgetExceededError, CostExceededError
from ..judging.ensemble import Layout
from ..judging.images import IMAGE_TOKENS
from ..judging.metrics import Metric, OutputType
from ..redact import install_log_filter, scrub
from ..settings import JobValues, Unpack
from ..store.replies import ReplyStore
from ..transport import anthropic
from ..transport.client import JudgeClient, judge_panel
from ..transport.prices import Price, genai_prices_version
from .batch_book import submitted
from .job import Job, JudgeJob
from .pipeline import SplitRun, read_batches
from .prepare import as_splits, build_plans, judge_specs

logger = logging.getLogger("hf_judge")

# Tokens a free-text output (a reason) is projected to take where no cached reply tells better.
REASON_TOKENS = 60
# Rows rendered per step; tokenize calls in flight at most.
_ROWS_PER_STEP = 256
_TOKENIZE_IN_FLIGHT = 32
# Hosts known to have no /tokenize: the prompts are not offered to them.
_NO_TOKENIZE_HOSTS = ("api.openai.com", "generativelanguage.googleapis.com")


@dataclass
class MetricEstimate:
    """One metric's share of a run, from :func:`estimate_cost`."""

    metric: str
    requests: int = 0  # to send: not in the reply store, not identical to another request of the run
    cached: int = 0  # replies found in the reply store: not paid again
    duplicates: int = 0  # identical to another request of the run: sent once
    in_batches: int = 0  # in batches submitted earlier (--no-wait): the next --batch run collects them, unpaid again
    unsent: int = 0  # (row, metric)s that send nothing: null input, too long, bad image (the errors split's rows)
    input_tokens: int = 0  # of the requests to send
    output_tokens: int = 0  # projected, of the requests to send
    output_basis: str = ""  # where the projection comes from


@dataclass
class CostEstimate:
    """What a run would send and cost (see :func:`estimate_cost`); ``str()`` is the table ``--dry-run`` prints.

    Example:
        >>> est = estimate_cost(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> est.requests, est.input_tokens, est.cost_online, est.cost_batch  # doctest: +SKIP
        (1000, 412000, 0.0528, 0.0264)
    """

    model: str
    metrics: list[MetricEstimate] = field(default_factory=list)
    token_counter: str = ""  # how input tokens were counted
    price: Price | None = None
    # a panel's: one estimate per judge, each at its own model's price; ``metrics`` then holds their sums
    judges: list[CostEstimate] = field(default_factory=list)
    judge: str = ""  # a panel judge's column name (``<column>__<judge>``)
    # a cascade's (escalate_model): the strong judge on every row, the most its tier can send
    strong: CostEstimate | None = None

    @classmethod
    def panel(cls, judges: Sequence[CostEstimate]) -> CostEstimate:
        """A panel's estimate: the judges' requests and tokens summed per metric, each judge's cost at its price.

        Example:
            >>> a = CostEstimate("m1", [MetricEstimate("Q", requests=2)], judge="m1")
            >>> b = CostEstimate("m2", [MetricEstimate("Q", requests=2)], judge="m2")
            >>> CostEstimate.panel([a, b]).requests
            4
        """
        merged: dict[str, MetricEstimate] = {}
        for j in judges:
            for m in j.metrics:
                total = merged.setdefault(m.metric, MetricEstimate(m.metric))
                for f in ("requests", "cached", "duplicates", "in_batches", "unsent", "input_tokens", "output_tokens"):
                    setattr(total, f, getattr(total, f) + getattr(m, f))
                bases = [b for b in total.output_basis.split("; ") if b]
                total.output_basis = "; ".join(dict.fromkeys([*bases, m.output_basis]))
        counters = "; ".join(dict.fromkeys(j.token_counter for j in judges))
        return cls(", ".join(j.model for j in judges), list(merged.values()), counters, None, list(judges))

    @property
    def requests(self) -> int:
        return sum(m.requests for m in self.metrics)

    @property
    def cached(self) -> int:
        return sum(m.cached for m in self.metrics)

    @property
    def input_tokens(self) -> int:
        return sum(m.input_tokens for m in self.metrics)

    @property
    def output_tokens(self) -> int:
        return sum(m.output_tokens for m in self.metrics)

    @property
    def cost_online(self) -> float | None:
        """USD at the online price; None where the model (a panel: any judge's) has no price."""
        if self.judges:
            return _sum_or_none([j.cost_online for j in self.judges])
        return None if self.price is None else self.price.cost(self.input_tokens, self.output_tokens)

    @property
    def cost_batch(self) -> float | None:
        """USD at the batch price (by default half the online price)."""
        if self.judges:
            return _sum_or_none([j.cost_batch for j in self.judges])
        return None if self.price is None else self.price.cost(self.input_tokens, self.output_tokens, batch=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "metrics": [asdict(m) for m in self.metrics],
            "token_counter": self.token_counter,
            "price": None if self.price is None else self.price.model_dump(),
            "requests": self.requests,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_online": self.cost_online,
            "cost_batch": self.cost_batch,
            **({"judges": [j.to_dict() for j in self.judges]} if self.judges else {}),
            **({"judge": self.judge} if self.judge else {}),
            **({"strong_every_row": self.strong.to_dict()} if self.strong is not None else {}),
        }

    def __str__(self) -> str:
        return self._text() + (self._strong_text() if self.strong is not None else "")

    def _strong_text(self) -> str:
        """A cascade's line: its strong tier scores the rows the cheap tier's replies pick, at most every row."""
        s = self.strong
        assert s is not None
        cost = f", ${s.cost_online:,.4f} online" if s.cost_online is not None else " (no price in the price table)"
        return (
            f"\ncascade        the strong tier ({s.model}) scores the rows the cheap tier's replies pick (known once "
            f"they are in); on every row: {s.requests:,} requests, {s.input_tokens:,} input tokens, "
            f"{s.output_tokens:,} output tokens{cost}"
        )

    def _text(self) -> str:
        if not self.judges:
            return f"dry run: nothing was sent to the chat endpoint; model {self.model}\n\n" + self._table()
        # a panel: each judge's table (its requests at its own model's price), then the panel's total
        lines = [f"dry run: nothing was sent to the chat endpoint; a panel of {len(self.judges)} judges", ""]
        for j in self.judges:
            lines += [f"judge {j.judge} (model {j.model})", j._table(), ""]
        total = f"{self.requests:,} requests, {self.input_tokens:,} input tokens, {self.output_tokens:,} output tokens"
        lines.append(f"panel total    {total}")
        if self.cost_online is not None and self.cost_batch is not None:
            lines.append(f"cost online    ${self.cost_online:,.4f} (each judge at its model's price)")
            lines.append(f"cost batch     ${self.cost_batch:,.4f} (--batch: one batch per judge)")
        else:
            lines.append("cost           a judge has no price (see its table above)")
        return "\n".join(lines)

    def _table(self) -> str:
        """The per-metric table and the notes below it (the cost at this estimate's model's price)."""
        head = f"{'metric':<24} {'requests':>10} {'cached':>10} {'input tok':>12} {'output tok':>12}  output from"
        lines = [head]
        for m in self.metrics:
            lines.append(
                f"{m.metric:<24} {m.requests:>10,} {m.cached:>10,} {m.input_tokens:>12,} {m.output_tokens:>12,}  "
                f"{m.output_basis}"
            )
        lines.append(
            f"{'total':<24} {self.requests:>10,} {self.cached:>10,} {self.input_tokens:>12,} {self.output_tokens:>12,}"
        )
        lines += ["", f"input tokens   counted with {self.token_counter}"]
        dup = sum(m.duplicates for m in self.metrics)
        unsent = sum(m.unsent for m in self.metrics)
        if dup:
            lines.append(f"duplicates     {dup:,} requests identical to another: sent once")
        if unsent:
            lines.append(f"not sent       {unsent:,} (row, metric)s with a null, too long or bad input (errors split)")
        if self.cached:
            lines.append(f"cached         {self.cached:,} replies in the reply store: not paid again")
        in_batches = sum(m.in_batches for m in self.metrics)
        if in_batches:
            lines.append(
                f"in batches     {in_batches:,} requests submitted in batches that the next --batch run collects: "
                "not paid again"
            )
        if self.price is None:
            lines.append(
                f"cost           no price for {self.model!r} in {genai_prices_version()} or a prices file; add it "
                "with --prices FILE (a YAML file: `MODEL: {input: 0.10, output: 0.40}`, USD per 1M tokens)"
            )
        else:
            lines += [
                f"cost online    ${self.cost_online:,.4f} ({self.price.describe()})",
                f"cost batch     ${self.cost_batch:,.4f} ({self.price.describe_batch()}; --batch)",
                f"prices from    {self.price.origin()}",
                *([f"batch prices   {self.price.batch_source}"] if self.price.batch_source else []),
                "               retries, and a server's prompt-cache discount, are not counted",
            ]
        return "\n".join(lines)


def estimate_cost(
    ds: Any,
    metrics: Any,
    *,
    if_exists: str = "keep",
    tokenizer: str = "auto",
    **values: Unpack[JobValues],
) -> CostEstimate:
    """What ``score_dataset`` with the same arguments would send and cost, without sending it.

    Takes the arguments of :func:`hf_judge.score_dataset` (settings as keyword arguments or
    ``settings=``), or a :class:`hf_judge.Job` in place of ``metrics``: ``estimate_cost(ds, metrics, **values)``
    is ``estimate_cost(ds, Job(metrics, **values))``. ``tokenizer``: ``"auto"`` (the server's ``/tokenize``,
    an Anthropic judge's ``/v1/messages/count_tokens``, else tiktoken, else characters / 4), ``"server"``,
    ``"tiktoken"`` or ``"chars"``. See the module docstring for what is counted and how.

    Example:
        >>> est = estimate_cost(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> print(est)  # doctest: +SKIP
    """
    install_log_filter()
    if tokenizer not in ("auto", "server", "tiktoken", "chars"):
        raise ValueError(f"tokenizer must be 'auto', 'server', 'tiktoken' or 'chars', got {tokenizer!r}")
    job = Job.of(metrics, values, "estimate_cost").resolved
    return estimate_job(ds, job, if_exists=if_exists, tokenizer=tokenizer)


def estimate_job(ds: Any, job: JudgeJob, *, if_exists: str = "keep", tokenizer: str = "auto") -> CostEstimate:
    """:func:`estimate_cost` of a job resolved already."""
    settings = job.settings
    splits, _ = as_splits(ds)
    loaded = job.metrics
    plans_by_split, _, _ = build_plans(splits, loaded, job.columns, settings.temperature, if_exists, False)
    api_key = job.key(needed=False)
    store_path = job.store_file
    store = ReplyStore(store_path, remote=job.remote) if job.use_cache and (store_path.exists() or job.remote) else None
    # only a --batch run collects the batches in flight (an online run would send their requests again), and
    # it sends each of K samples as a request of its own, as the batch projection of score_dataset counts them
    batch = store_path if settings.batch else None
    layout = Layout(settings.samples) if settings.batch else None
    if not settings.models:
        client = JudgeClient(settings, api_key=api_key)
        judges = [("", client, api_key)]
    else:
        # a panel: each judge's requests rendered alone (as a run of its model alone: the same keys, the same
        # batch), counted with its own server's tokenizer and priced at its own model's price
        specs = judge_specs(settings, api_key)
        names = [j.column_name for j in settings.judges]
        judges = [(n, c, key) for n, c, (_, key) in zip(names, judge_panel(specs), specs, strict=True)]
    try:
        ests = [
            project(splits, plans_by_split, loaded, c, store, key, tokenizer, batch, layout) for _, c, key in judges
        ]
    finally:
        if store is not None:
            store.close()
    if len(ests) > 1:
        for (name, _, _), est in zip(judges, ests, strict=True):
            est.judge = name
    out = ests[0] if len(ests) == 1 else CostEstimate.panel(ests)
    if settings.escalation is not None:  # a cascade: the most its strong tier can send
        out.strong = estimate_job(ds, job.strong_tier(), if_exists=if_exists, tokenizer=tokenizer)
    return out


def project(
    splits: dict[str, Any],
    plans_by_split: dict[str, list],
    metrics: list[Metric],
    client: JudgeClient,
    store: ReplyStore | None,
    api_key: str | None,
    tokenizer: str = "auto",
    batches: Path | None = None,
    layout: Layout | None = None,
) -> CostEstimate:
    """The estimate of these splits' plans (see :func:`estimate_cost`, which builds them from its arguments).

    ``batches``: the reply store's path, whose batches in flight are not counted (a --batch run collects
    them). ``layout``: K samples are K requests (a batch's lines). score_dataset calls it before a batch run
    with a budget, with the plans and the open store of the run.
    """
    counter = _TokenCounter(client, api_key, tokenizer)
    per_metric = {m.name: MetricEstimate(m.name) for m in metrics}
    outputs: dict[str, list[int]] = {m.name: [] for m in metrics}  # completion tokens of cached replies
    try:
        for split, d in splits.items():
            if plans_by_split[split]:
                args = (client, store, counter, per_metric, outputs, batches, layout)
                _estimate_split(split, d, plans_by_split[split], *args)
    finally:
        counter.close()
    settings = client.settings
    for m in metrics:
        est = per_metric[m.name]
        seen = outputs[m.name]
        if seen:
            per_reply = sum(seen) / len(seen)
            est.output_basis = f"mean of {len(seen):,} cached replies"
        else:
            per_reply = declared_output_tokens(m)
            est.output_basis = "declared outputs"
        if settings.max_tokens is not None and per_reply > settings.max_tokens:
            per_reply = settings.max_tokens
            est.output_basis += f", capped at max_tokens={settings.max_tokens}"
        est.output_tokens = round(per_reply * est.requests)
    return CostEstimate(client.model, [e for e in per_metric.values()], counter.method, client.price)


def check_batch_budget(
    client: JudgeClient, est: CostEstimate, judges: Sequence[tuple[JudgeClient, CostEstimate]] | None = None
) -> None:
    """Stop a batch run before it submits ``est``'s requests when they would take it past ``max_cost`` (at the
    batch price) or ``max_total_tokens``, with what the run has spent already: CostExceededError or
    BudgetExceededError, the projection and the fix in the message. A projection is not a bill: see
    :func:`estimate_cost` for how tokens are counted and projected.

    ``judges``: a panel's (client, projection) per judge, one batch each: the budget holds their sum, each
    judge's requests at its own model's batch price (``est`` is then ignored).

    Example:
        >>> check_batch_budget(client, project(...))  # doctest: +SKIP
        >>> check_batch_budget(a, est_a, [(a, est_a), (b, est_b)])  # doctest: +SKIP
    """
    pairs = list(judges) if judges else [(client, est)]
    requests = sum(e.requests for _, e in pairs)
    if not requests:
        return  # nothing to submit: nothing to refuse
    dry = "`--dry-run --batch`"  # a panel's: judge by judge, each at its price
    fix = (
        "Nothing of it was submitted. Raise {flag}, or score fewer rows (--limit N; library: select rows), then "
        f"{client.resume_hint()} {dry} shows the projection per metric."
    )
    inputs, outputs = sum(e.input_tokens for _, e in pairs), sum(e.output_tokens for _, e in pairs)
    what = "the batch" if len(pairs) == 1 else f"the batches of the {len(pairs)} judges"
    what += f" this run would submit ({requests:,} requests, {inputs:,} input tokens counted "
    what += f"with {est.token_counter}, {outputs:,} output tokens projected)"
    limit = client.max_cost
    costs = [e.cost_batch for _, e in pairs]
    cost = None if None in costs else sum(c for c in costs if c is not None)
    spent = sum(c.spent() or 0.0 for c in client.budget_peers)  # a panel's judges share the budget
    if limit is not None and cost is not None and not spent + cost <= limit:  # NaN: refused too
        paid = f" on top of the ${spent:.4f} the run has spent" if spent else ""
        raise CostExceededError(
            f"{what} would cost ${cost:.4f} at {_batch_prices(pairs)}{paid}, over the budget max_cost=${limit:g}. "
            + fix.format(flag="--max-cost (library: max_cost=)")
        )
    tokens = client.max_total_tokens
    used = sum(c.stats.prompt_tokens + c.stats.completion_tokens for c in client.budget_peers)
    if tokens is not None and used + inputs + outputs > tokens:
        paid = f" on top of the {used:,} tokens the run has used" if used else ""
        raise BudgetExceededError(
            f"{what} would use {inputs + outputs:,} tokens{paid}, over the budget "
            f"max_total_tokens={tokens:,}. " + fix.format(flag="--max-total-tokens (library: max_total_tokens=)")
        )


def _sum_or_none(costs: list[float | None]) -> float | None:
    """The sum of the judges' costs, or None when one of them has no price (a partial sum would mislead)."""
    return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


def _batch_prices(pairs: list[tuple[JudgeClient, CostEstimate]]) -> str:
    """Which batch price a projection was counted at: the model's, or each judge's of a panel with its share."""

    def price(c: JudgeClient) -> str:
        assert c.price is not None  # max_cost is refused for a model without a price (JudgeClient)
        return f"{c.model}'s batch price ({c.price.describe_batch()}, from {c.price.origin(batch=True)})"

    if len(pairs) == 1:
        return price(pairs[0][0])
    return "the judges' batch prices: " + ", ".join(f"${e.cost_batch or 0:.4f} at {price(c)}" for c, e in pairs)


def _estimate_split(
    split: str,
    d: Any,
    plans: list,
    client: JudgeClient,
    store: ReplyStore | None,
    counter: _TokenCounter,
    per_metric: dict[str, MetricEstimate],
    outputs: dict[str, list[int]],
    batches: Path | None = None,
    layout: Layout | None = None,
) -> None:
    """Render every request of one split, as the run would, and count it."""
    run = SplitRun(split, d, plans, client, None, window=_ROWS_PER_STEP, layout=layout)
    needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
    source = d.select_columns(needed) if needed else d
    seen: set[bytes] = set()
    row = 0
    for batch in read_batches(source, _ROWS_PER_STEP, any(p.images for p in plans)):
        size = len(batch[needed[0]]) if needed else min(_ROWS_PER_STEP, len(d) - row)
        sends = run.prepare_rows(batch, row, size)
        row += size
        for e in run.errors:
            per_metric[e["metric"]].unsent += 1
        run.errors.clear()
        run.values.clear()
        run.row_pending.clear()
        found = run.cached_replies(store, sends, copy_forward=False) if store is not None and sends else {}
        # a request whose reply failed validation in an earlier run is replayed, not sent (store/failures.py)
        kept = (
            {s[0].keys[s[1]] for s, r in zip(sends, run.kept_failures(store, sends), strict=True) if r is not None}
            if store is not None
            else set()
        )
        in_batches = submitted(batches, [job.keys[part] for job, part, _, _ in sends]) if batches else set()
        fresh = []
        for job, part, messages, _body in sends:
            metric = job.plan.metric
            est = per_metric[metric.name]
            key = job.keys[part]
            if key in seen:
                est.duplicates += 1
                continue
            seen.add(key)
            hit = found.get(key)
            outcome = run._from_cache(metric, hit) if hit is not None else None
            if outcome is not None:
                est.cached += 1
                if outcome.usage is not None:
                    outputs[metric.name].append(outcome.usage[1])
                continue
            if key in kept:
                est.cached += 1
                continue
            if key in in_batches:
                est.in_batches += 1
                continue
            est.requests += 1
            fresh.append((est, messages))
        for (est, _), n in zip(fresh, counter.count([m for _, m in fresh]), strict=True):
            est.input_tokens += n


def declared_output_tokens(metric: Metric) -> float:
    """The tokens of the reply a metric's declared outputs describe: its JSON with a digit or two per number,
    the longest enum value, and ``REASON_TOKENS`` per free-text output (characters / 4 for the rest).

    Example:
        >>> from hf_judge import load_metric
        >>> declared_output_tokens(load_metric("QA_Clarity"))
        66.0
    """
    example: dict[str, Any] = {}
    free_text = 0
    for o in metric.outputs:
        if o.enum:
            example[o.key] = max((str(v) for v in o.enum), key=len)
        elif o.type in (OutputType.INTEGER, OutputType.NUMBER):
            example[o.key] = o.maximum if o.maximum is not None else 10
        elif o.type == OutputType.BOOLEAN:
            example[o.key] = False
        else:
            example[o.key] = ""
            free_text += 1
    return len(orjson.dumps(example)) / 4 + free_text * REASON_TOKENS


# The token-count endpoints of servers, tried in this order until one answers: (name, how it counts).
_SERVER_FORMS = (
    ("vllm", "the server's tokenizer, chat template applied (vLLM's POST /tokenize with the messages)"),
    ("llama.cpp", "the server's tokenizer, chat template applied (llama.cpp's /apply-template and /tokenize)"),
    (
        "llama-cpp-python",
        "the server's tokenizer on the messages' text, without the chat template "
        "(llama-cpp-python's /extras/tokenize/count)",
    ),
)
# An Anthropic judge's: the Messages API's own token counting (POST /v1/messages/count_tokens)
_ANTHROPIC_FORM = ("anthropic", "Anthropic's token counting (POST /v1/messages/count_tokens with the messages)")


class _TokenCounter:
    """Counts the input tokens of chat messages: the server's tokenizer, tiktoken, or characters / 4."""

    def __init__(self, client: JudgeClient, api_key: str | None, tokenizer: str):
        self.model = client.model
        self.root = client.base_url.removesuffix("/v1")  # vLLM and llama.cpp serve these beside /v1
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.methods: list[str] = []
        self.unreachable = ""  # why the server could not be reached, where it could not
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._encoding: Any = None
        host = urlparse(client.base_url).hostname or ""
        offered = tokenizer in ("auto", "server") and host not in _NO_TOKENIZE_HOSTS
        self._forms = list(_SERVER_FORMS) if offered else []
        if client.provider == "anthropic":  # api.anthropic.com counts too: its endpoint is beside /v1/messages
            self.root, self.headers = client.url, anthropic.headers(api_key)
            offered = tokenizer in ("auto", "server")
            self._forms = [_ANTHROPIC_FORM] if offered else []
        self._try_tiktoken = tokenizer in ("auto", "tiktoken")
        if tokenizer == "server" and not offered:
            raise ValueError(f"{host} has no token-count endpoint; use tokenizer='auto'")

    @property
    def method(self) -> str:
        """How the tokens were counted (two ways when the server's tokenizer stopped answering midway)."""
        return "; then ".join(self.methods) or "nothing (no request to count)"

    def _used(self, method: str) -> None:
        if not self.methods or self.methods[-1] != method:
            self.methods.append(method)

    def count(self, batch: list[list[dict]]) -> list[int]:
        if not batch:
            return []
        while self._forms:
            form, method = self._forms[0]
            counts = self._server(batch, form)
            if counts is not None:
                self._forms = self._forms[:1]  # this server's form: the others are not tried again
                self._used(method)
                return counts
            self._forms.pop(0)
        note = f"; {self.root} could not be reached ({self.unreachable}): check --base-url" if self.unreachable else ""
        if self._try_tiktoken and self._encoding is None:
            self._encoding = _tiktoken_encoding(self.model)
            self._try_tiktoken = self._encoding is not None
        if self._encoding is not None:
            self._used(f"tiktoken {self._encoding.name} (+3 per message, +3 per reply){note}")
            enc = self._encoding
            return [3 + sum(3 + len(enc.encode(_text(m))) + 1 for m in msgs) for msgs in batch]
        self._used("an estimate: characters / 4, +4 per message (no token count from the server, no tiktoken)" + note)
        return [round(sum(4 + _chars_tokens(m) for m in msgs)) for msgs in batch]

    def _server(self, batch: list[list[dict]], form: str) -> list[int] | None:
        """Counts from the server in ``form``, or None when it does not answer in that form."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        try:
            return self._loop.run_until_complete(self._server_counts(batch, form))
        except Exception as e:  # noqa: BLE001 - any failure means: count another way
            logger.info("no %s token count from the server (%s)", form, scrub(str(e))[:200])
            import aiohttp

            if isinstance(e, (aiohttp.ClientConnectionError, asyncio.TimeoutError)):
                # nothing answers there (a wrong --base-url?): no other form will do better, and the user must know
                self.unreachable = scrub(str(e) or type(e).__name__)[:200]
                self._forms = self._forms[:1]
            return None

    async def _server_counts(self, batch: list[list[dict]], form: str) -> list[int]:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self.headers, timeout=aiohttp.ClientTimeout(total=60))
        session = self._session
        slots = asyncio.Semaphore(_TOKENIZE_IN_FLIGHT)

        async def post(path: str, payload: dict, key: str) -> Any:
            async with session.post(self.root + path, json=payload) as r:
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status} from {self.root}{path}")
                doc = await r.json(content_type=None)
            value = doc.get(key) if isinstance(doc, dict) else None
            if value is None or isinstance(value, bool):
                raise RuntimeError(f"{self.root}{path} answered without {key!r}")
            return value

        async def one(messages: list[dict]) -> int:
            async with slots:
                if form == "anthropic":
                    n = await post("/count_tokens", anthropic.count_tokens_body(self.model, messages), "input_tokens")
                elif form == "vllm":
                    n = await post("/tokenize", {"model": self.model, "messages": messages}, "count")
                elif form == "llama.cpp":
                    prompt = await post("/apply-template", {"messages": messages}, "prompt")
                    n = len(await post("/tokenize", {"content": prompt}, "tokens"))
                else:
                    text = "\n".join(_text(m) for m in messages)
                    n = await post("/extras/tokenize/count", {"input": text, "model": self.model}, "count")
            if not isinstance(n, int):
                raise RuntimeError(f"{self.root} answered a token count that is not an integer: {n!r}")
            return n

        return list(await asyncio.gather(*(one(m) for m in batch)))

    def close(self) -> None:
        if self._loop is None:
            return
        if self._session is not None:
            self._loop.run_until_complete(self._session.close())
        self._loop.close()


def _tiktoken_encoding(model: str) -> Any:
    """tiktoken's encoding for ``model`` (o200k_base for a model it does not know), or None."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        try:
            return tiktoken.encoding_for_model(model)
        except KeyError:
            return tiktoken.get_encoding("o200k_base")
    except Exception as e:  # noqa: BLE001 - its encodings are downloaded on first use: offline, count another way
        logger.info("tiktoken could not load an encoding (%s); counting characters / 4", e)
        return None


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _chars_tokens(message: dict) -> float:
    content = message.get("content")
    images = (
        sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url")
        if isinstance(content, list)
        else 0
    )
    return len(_text(message)) / 4 + images * IMAGE_TOKENS
