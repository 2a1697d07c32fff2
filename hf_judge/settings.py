"""Validated run settings: one pydantic model shared by the library, recipes and the CLI."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import constants
from .errors import ConfigError


class ClientSettings(BaseModel):
    """How requests are sent. Every field is checked; a bad value names its field.

    Example:
        >>> ClientSettings(model="gpt-4.1-nano", concurrency=64).concurrency
        64
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Annotated[str, Field(min_length=1)]
    base_url: str | None = None
    concurrency: Annotated[int, Field(ge=1, le=100_000)] = constants.DEFAULT_CONCURRENCY
    timeout: Annotated[float, Field(gt=0)] = constants.DEFAULT_TIMEOUT
    retries: Annotated[int, Field(ge=0, le=100)] = constants.DEFAULT_RETRIES
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = constants.DEFAULT_TOP_P
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_requests_per_minute: Annotated[float, Field(gt=0)] | None = None
    max_tokens_per_minute: Annotated[float, Field(gt=0)] | None = None
    max_total_tokens: Annotated[int, Field(ge=1)] | None = None
    max_input_chars: Annotated[int, Field(ge=1)] | None = None
    backoff_base: Annotated[float, Field(ge=0)] = 0.5
    backoff_max: Annotated[float, Field(ge=0)] = 30.0
    max_reply_bytes: Annotated[int, Field(ge=1024)] = constants.DEFAULT_MAX_REPLY_BYTES
    max_throttle_s: Annotated[float, Field(gt=0)] = constants.DEFAULT_MAX_THROTTLE_S


def config_error(e: ValidationError, where: str = "settings") -> ConfigError:
    """A pydantic error as one readable line per field."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {loc!r}")
        else:
            parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError(f"invalid {where}: " + "; ".join(parts))


def client_settings(**kwargs) -> ClientSettings:
    try:
        return ClientSettings(**kwargs)
    except ValidationError as e:
        raise config_error(e) from None
