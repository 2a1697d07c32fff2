"""Model prices, and what tokens cost at them.

The built-in table (``hf_judge/prices.yaml``, USD per 1M tokens) is extended,
entry by entry, by ``$HF_JUDGE_PRICES`` and then by the ``prices`` setting
(``--prices FILE``): later files win for the models they list. Each model has an
online price and a batch price; the batch price defaults to half the online one,
as OpenAI's Batch API charges.

Example:
    >>> p = Price(input=0.10, output=0.40, cached_input=0.025)
    >>> round(p.cost(1_000_000, 100_000), 4), round(p.cost(1_000_000, 100_000, batch=True), 4)
    (0.14, 0.07)
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import constants
from ..errors import ConfigError
from ..settings import Usd, config_error

_PER = 1_000_000  # prices are per 1M tokens
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # gpt-4.1-nano-2025-04-14: a dated snapshot of gpt-4.1-nano


class Price(BaseModel):
    """A model's price in USD per 1M tokens, online and in batch mode.

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

    def model_post_init(self, _context: object) -> None:
        # the defaults follow from the online price: filled in once, so every reader sees numbers
        fills = {
            "cached_input": self.input if self.cached_input is None else self.cached_input,
            "batch_input": self.input / 2 if self.batch_input is None else self.batch_input,
            "batch_output": self.output / 2 if self.batch_output is None else self.batch_output,
        }
        for k, v in fills.items():
            object.__setattr__(self, k, v)

    def cost(self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0, *, batch=False) -> float:
        """USD for these tokens; ``cached_tokens`` (part of ``prompt_tokens``) at the cached price.

        In batch mode, prompt tokens cost the batch price, cached ones the lower of it and the cached price.
        """
        cached = min(cached_tokens, prompt_tokens)
        assert self.cached_input is not None and self.batch_input is not None and self.batch_output is not None
        if batch:
            rate_in, rate_cached, rate_out = (
                self.batch_input,
                min(self.batch_input, self.cached_input),
                self.batch_output,
            )
        else:
            rate_in, rate_cached, rate_out = self.input, self.cached_input, self.output
        return ((prompt_tokens - cached) * rate_in + cached * rate_cached + completion_tokens * rate_out) / _PER

    def describe(self) -> str:
        """``$0.10 in / $0.40 out per 1M tokens`` (and the cached price where it differs)."""
        cached = f" (${self.cached_input:g} cached)" if self.cached_input != self.input else ""
        return f"${self.input:g} in{cached} / ${self.output:g} out per 1M tokens"


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
        try:
            table[str(model)] = Price(**entry)
        except ValidationError as e:
            raise ConfigError(
                f"{config_error(e, f'price of {model!r} in {source}')}. A price is a finite number of USD per 1M "
                f"tokens, 0 or more: fix it in that file, e.g. `{model}: {{input: 0.10, output: 0.40}}`"
            ) from None
    return table


def load_prices(path: str | None = None) -> dict[str, Price]:
    """The price table: built-in, then ``$HF_JUDGE_PRICES``, then ``path`` (later entries win).

    Example:
        >>> load_prices()["gpt-4.1-nano"].output
        0.4
    """
    table = _read("hf_judge/prices.yaml", resources.files("hf_judge").joinpath("prices.yaml").read_text("utf-8"))
    for extra in (constants.prices_file(), path):
        if extra:
            p = Path(extra).expanduser()
            try:
                text = p.read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read the prices file {p}: {e.strerror or e}") from None
            table.update(_read(str(p), text))
    return table


def price_of(model: str, path: str | None = None) -> Price | None:
    """The price of ``model`` (its dated snapshot takes the model's price), or None when no table lists it.

    Example:
        >>> price_of("gpt-4.1-nano-2025-04-14") == price_of("gpt-4.1-nano")
        True
    """
    table = load_prices(path)
    return table.get(model) or table.get(_DATED.sub("", model))


def no_price_error(model: str, why: str) -> ConfigError:
    """The error for ``why`` (e.g. ``max_cost``) needing a price that no table has."""
    return ConfigError(
        f"{why} needs the price of model {model!r}, which the price table does not list. Add it in a YAML file, "
        f"e.g. `{model}: {{input: 0.10, output: 0.40}}` (USD per 1M tokens), and pass it with --prices FILE "
        "(library: prices=; or set HF_JUDGE_PRICES)"
    )
