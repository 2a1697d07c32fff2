"""Validated run settings: one pydantic model shared by the library, recipes and the CLI."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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

    @field_validator("base_url")
    @classmethod
    def _has_scheme(cls, v: str | None) -> str | None:
        return None if v is None else check_base_url(v)


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
            parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
    return ConfigError(f"invalid {where}: " + "; ".join(parts))


def client_settings(**kwargs) -> ClientSettings:
    try:
        return ClientSettings(**kwargs)
    except ValidationError as e:
        raise config_error(e) from None
