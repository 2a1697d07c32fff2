"""Model prices, and what tokens cost at them.

A model's price comes from the first of:

1. the ``prices`` setting's file (``--prices FILE``), then ``$HF_JUDGE_PRICES``: YAML mapping model names to
   USD per 1M tokens, for private deployments, gateways and negotiated prices;
2. `genai-prices <https://github.com/pydantic/genai-prices>`_ (MIT, maintained by the pydantic team): the
   list prices of the providers hf-judge speaks to (OpenAI, Anthropic, Google), online, batch and cache-read.
   Its data bundled with the installed version is read, never fetched (a run stays offline); where it has no
   batch price for a model, the provider's documented batch discount (50 %) applies to the online price, and
   :attr:`Price.batch_source` says so.

Each :class:`Price` says where it came from (:attr:`Price.source`), which the dry-run prints.

Example:
    >>> p = Price(input=0.10, output=0.40, cached_input=0.025)
    >>> round(p.cost(1_000_000, 100_000), 4), round(p.cost(1_000_000, 100_000, batch=True), 4)
    (0.14, 0.07)
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import constants
from ..errors import ConfigError
from ..settings import Usd, config_error

logger = logging.getLogger("hf_judge")

_PER = 1_000_000  # prices are per 1M tokens
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # gpt-4.1-nano-2025-04-14: a dated snapshot of gpt-4.1-nano
# hf-judge's providers -> genai-prices' provider ids. Only the first-party providers are asked: a reseller's
# price (OpenRouter, Together, ...) is no list price of the model, and a self-hosted model has none.
_GENAI_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
# The batch discount each provider documents for its batch API, applied where genai-prices has no batch price.
BATCH_DISCOUNT = {"openai": 0.5, "anthropic": 0.5, "google": 0.5}


class Price(BaseModel):
    """A model's price in USD per 1M tokens, online and in batch mode, and where it came from.

    Example:
        >>> Price(input=2.0, output=8.0).batch_output
        4.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Usd = Field(ge=0, description="prompt tokens")
    output: Usd = Field(ge=0, description="completion tokens")
    cached_input: Usd | None = Field(None, ge=0, description="prompt tokens served from the server's prompt cache")
    batch_input: Usd | None = Field(None, ge=0, description="prompt tokens in batch mode (default: input / 2)")
    batch_output: Usd | None = Field(None, ge=0, description="completion tokens in batch mode (default: output / 2)")
    batch_cached_input: Usd | None = Field(
        None, ge=0, description="cached prompt tokens in batch mode (default: the lower of batch_input, cached_input)"
    )
    cache_write_input: Usd | None = Field(
        None, ge=0, description="prompt tokens written to the prompt cache (Anthropic's: 1.25x input; default: input)"
    )
    # where the numbers come from (not read from a prices file: set by whoever made the price)
    source: str | None = Field(None, description="where the online prices come from")
    batch_source: str | None = Field(None, description="where the batch prices come from, where not from source")

    def model_post_init(self, _context: object) -> None:
        # the defaults follow from the online price: filled in once, so every reader sees numbers
        cached = self.input if self.cached_input is None else self.cached_input
        batch_in = self.input / 2 if self.batch_input is None else self.batch_input
        fills = {
            "cached_input": cached,
            "batch_input": batch_in,
            "batch_output": self.output / 2 if self.batch_output is None else self.batch_output,
            "batch_cached_input": min(batch_in, cached) if self.batch_cached_input is None else self.batch_cached_input,
            "cache_write_input": self.input if self.cache_write_input is None else self.cache_write_input,
        }
        for k, v in fills.items():
            object.__setattr__(self, k, v)

    def cost(
        self,
        prompt_tokens: float,
        completion_tokens: float,
        cached_tokens: float = 0,
        cache_write_tokens: float = 0,
        *,
        batch=False,
    ) -> float:
        """USD for these tokens; ``cached_tokens`` (part of ``prompt_tokens``) at the cached price,
        ``cache_write_tokens`` (part of them too, Anthropic's ``cache_creation_input_tokens``) at the cache-write
        price (in batch mode with the batch discount: the batch input price's share of the online one).

        In batch mode, prompt tokens cost the batch price, cached ones the batch cached price.

        Example:
            >>> p = Price(input=1.0, output=5.0, cached_input=0.1, cache_write_input=1.25)
            >>> p.cost(1_000_000, 0, 0, 1_000_000), p.cost(1_000_000, 0, 0, 1_000_000, batch=True)
            (1.25, 0.625)
        """
        cached = min(cached_tokens, prompt_tokens)
        written = min(cache_write_tokens, prompt_tokens - cached)
        assert self.cached_input is not None and self.batch_input is not None and self.batch_output is not None
        assert self.batch_cached_input is not None and self.cache_write_input is not None
        if batch:
            rate_in, rate_cached, rate_out = self.batch_input, self.batch_cached_input, self.batch_output
            rate_write = self.cache_write_input * (self.batch_input / self.input) if self.input else rate_in
        else:
            rate_in, rate_cached, rate_out = self.input, self.cached_input, self.output
            rate_write = self.cache_write_input
        plain = prompt_tokens - cached - written
        return (plain * rate_in + cached * rate_cached + written * rate_write + completion_tokens * rate_out) / _PER

    def describe(self) -> str:
        """``$0.10 in / $0.40 out per 1M tokens`` (and the cached and cache-write prices where they differ)."""
        apart = [f"${self.cached_input:g} cached"] if self.cached_input != self.input else []
        if self.cache_write_input != self.input:
            apart.append(f"${self.cache_write_input:g} cache write")
        cached = f" ({', '.join(apart)})" if apart else ""
        return f"${self.input:g} in{cached} / ${self.output:g} out per 1M tokens"

    def describe_batch(self) -> str:
        """``$0.05 in / $0.20 out per 1M tokens`` in batch mode (and the cached price where it differs)."""
        cached = f" (${self.batch_cached_input:g} cached)" if self.batch_cached_input != self.batch_input else ""
        return f"${self.batch_input:g} in{cached} / ${self.batch_output:g} out per 1M tokens"

    def origin(self, batch: bool = False) -> str:
        """Where the (batch) price comes from, for the dry-run: a file, or genai-prices' version and data."""
        if batch and self.batch_source:
            return self.batch_source
        return self.source or "a price given in code"


def _read(source: str, text: str) -> dict[str, Price]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"the prices file {source} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"the prices file {source} must map model names to prices, e.g. `my-model: {{input: 0.10, output: 0.40}}`"
        )
    table = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise ConfigError(
                f"the price of {model!r} in {source} must be a mapping like {{input: 0.10, output: 0.40}}"
            )
        extra = sorted({"source", "batch_source"} & set(entry))
        if extra:
            raise ConfigError(f"the price of {model!r} in {source} has {extra[0]!r}, which hf-judge sets: remove it")
        try:
            table[str(model)] = Price(**entry, source=f"the file {source}")
        except ValidationError as e:
            raise ConfigError(
                f"{config_error(e, f'price of {model!r} in {source}')}. A price is a finite number of USD per 1M "
                f"tokens, 0 or more: fix it in that file, e.g. `{model}: {{input: 0.10, output: 0.40}}`"
            ) from None
    return table


def _read_file(path: str) -> dict[str, Price]:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read the prices file {p}: {e.strerror or e}") from None
    return _read(str(p), text)


class PriceTable(Mapping[str, Price]):
    """Model name -> :class:`Price`: the prices files' entries, else genai-prices' list price.

    ``provider`` (``openai``, ``anthropic``, ``gemini``) is asked first; the other first-party providers
    after it, so a ``claude-`` model behind an OpenAI-compatible gateway still has Anthropic's list price.
    Iterating lists the files' models, then genai-prices' models of those providers.

    Example:
        >>> load_prices()["gpt-4.1-nano"].input
        0.1
    """

    def __init__(self, files: dict[str, Price], provider: str | None = None):
        self.files = files
        first = _GENAI_PROVIDERS.get(provider or "openai", "openai")
        self.providers = [first, *(p for p in _GENAI_PROVIDERS.values() if p != first)]

    def __getitem__(self, model: str) -> Price:
        found = self.files.get(model) or self.files.get(_DATED.sub("", model)) or genai_price(model, *self.providers)
        if found is None:
            raise KeyError(model)
        return found

    def __iter__(self) -> Iterator[str]:
        yield from self.files
        for model in _genai_models(tuple(self.providers)):
            if model not in self.files:
                yield model

    def __len__(self) -> int:
        return sum(1 for _ in self)


def load_prices(path: str | None = None, provider: str | None = None) -> PriceTable:
    """The price table: the models ``path`` lists, then those of ``$HF_JUDGE_PRICES``, then genai-prices'
    bundled list prices (the first that lists a model gives its price).

    Example:
        >>> load_prices()["gpt-4.1-nano"].output
        0.4
        >>> load_prices()["gpt-4.1-nano"].origin()  # doctest: +ELLIPSIS
        'genai-prices ... (bundled data, prices of ...)'
    """
    files: dict[str, Price] = {}
    for extra in (constants.prices_file(), path):  # later files win for the models they list
        if extra:
            files.update(_read_file(extra))
    return PriceTable(files, provider)


def price_of(model: str, path: str | None = None, provider: str | None = None) -> Price | None:
    """The price of ``model`` (its dated snapshot takes the model's price), or None when no table lists it.

    Example:
        >>> price_of("gpt-4.1-nano-2025-04-14").describe() == price_of("gpt-4.1-nano").describe()
        True
    """
    return load_prices(path, provider).get(model)


def no_price_error(model: str, why: str) -> ConfigError:
    """The error for ``why`` (e.g. ``max_cost``) needing a price that no table has."""
    return ConfigError(
        f"{why} needs the price of model {model!r}, which neither genai-prices ({genai_prices_version()}) nor a "
        f"prices file lists. Add it in a YAML file, e.g. `{model}: {{input: 0.10, output: 0.40}}` (USD per 1M "
        "tokens), and pass it with --prices FILE (library: prices=; or set HF_JUDGE_PRICES)"
    )


# -- genai-prices ----------------------------------------------------------------------------------------------------


def genai_prices_version() -> str:
    """``genai-prices 0.2.3``, or why it cannot be used."""
    try:
        import genai_prices
    except ImportError:
        return 'genai-prices is not installed (Python 3.11+: pip install "genai-prices")'
    return f"genai-prices {genai_prices.__version__}"


@lru_cache(maxsize=1)
def _snapshot() -> Any:
    """genai-prices' bundled data, never its auto-updated copy: a run reads no price from the network, and its
    prices do not change under it. None where genai-prices is not installed."""
    try:
        from genai_prices.data import providers
        from genai_prices.data_snapshot import DataSnapshot
    except ImportError:
        return None
    return DataSnapshot(providers=providers, from_auto_update=False)


@lru_cache(maxsize=1)
def genai_data_date() -> str:
    """The date of the newest price change in genai-prices' bundled data that is in effect today
    (``2026-10-14``): how current its prices are. Empty where it has none or is not installed."""
    snap = _snapshot()
    if snap is None:
        return ""
    today = dt.date.today()
    dates = [
        c.constraint.start_date
        for p in snap.providers
        for m in p.models
        if isinstance(m.prices, list)
        for c in m.prices
        if getattr(c.constraint, "start_date", None) is not None and c.constraint.start_date <= today
    ]
    return max(dates).isoformat() if dates else ""


@lru_cache(maxsize=1)
def _genai_models(providers: tuple[str, ...]) -> list[str]:
    snap = _snapshot()
    if snap is None:
        return []
    return [m.id for p in snap.providers if p.id in providers for m in p.models]


def _flat(value: Any) -> float | None:
    """A genai-prices price as a number: a tiered price's base (its tiers start past 200k prompt tokens per
    request, which a judge's prompt does not reach)."""
    if value is None:
        return None
    return float(getattr(value, "base", value))


@lru_cache(maxsize=512)
def genai_price(model: str, *providers: str) -> Price | None:
    """genai-prices' list price of ``model`` at the first of ``providers`` (genai-prices ids) that lists it.

    Example:
        >>> genai_price("claude-sonnet-4-5", "anthropic").batch_input
        1.5
    """
    snap = _snapshot()
    if snap is None:
        return None
    for provider_id in providers:
        try:
            provider, info = snap.find_provider_model(model, None, provider_id, None)
        except LookupError:
            continue
        if provider.id != provider_id:
            continue
        return _to_price(model, provider.id, info)
    return None


def _to_price(model: str, provider: str, info: Any) -> Price | None:
    now = dt.datetime.now(dt.timezone.utc)
    online = info.get_prices(now)
    batch = info.get_prices(now, {"processing": "batch"})
    rates = [_flat(getattr(online, k)) for k in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")]
    if rates[0] is None or rates[1] is None:
        return None  # priced per request or per second: no token price to count with
    has_batch = any(getattr(batch, k) != getattr(online, k) for k in ("input_mtok", "output_mtok"))
    where = f"{genai_prices_version()} (bundled data, prices of {genai_data_date() or 'an unknown date'}"
    where += f"; {provider} {info.id})" if info.id != model else f"; {provider})"
    kw: dict[str, Any] = {"input": rates[0], "output": rates[1], "cached_input": rates[2], "source": where}
    kw["cache_write_input"] = rates[3]  # the 5-minute write (genai-prices' cache_write_mtok; the 1-hour one is apart)
    if has_batch:
        kw.update(
            batch_input=_flat(batch.input_mtok),
            batch_output=_flat(batch.output_mtok),
            batch_cached_input=_flat(batch.cache_read_mtok),
        )
    else:
        share = BATCH_DISCOUNT.get(provider, 0.5)
        kw.update(batch_input=rates[0] * share, batch_output=rates[1] * share)
        kw["batch_source"] = (
            f"{1 - share:.0%} off the online price: {provider}'s documented batch discount ({genai_prices_version()} "
            f"has no batch price for {info.id})"
        )
    try:
        return Price(**kw)
    except ValidationError as e:  # a price genai-prices could not have meant (negative, NaN): no price
        logger.warning("genai-prices' price of %s is not usable (%s); give it with --prices FILE", model, e)
        return None
