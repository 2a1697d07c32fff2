"""Settings read from the environment, and the defaults, in one place.

| variable | meaning |
| --- | --- |
| ``OPENAI_API_KEY`` | API key when ``api_key`` is not given |
| ``OPENAI_BASE_URL`` | server URL when ``base_url`` is not given |
| ``ANTHROPIC_API_KEY`` | API key of an Anthropic judge (``provider="anthropic"``) when ``api_key`` is not given |
| ``ANTHROPIC_BASE_URL`` | an Anthropic judge's server URL when ``base_url`` is not given |
| ``HF_JUDGE_CACHE`` | cache folder (default: ``$HF_DATASETS_CACHE/hf_judge``) |
| ``HF_JUDGE_DEBUG`` | ``1``: debug logging and full tracebacks in the CLI |
| ``GEMINI_API_KEY``, ``GOOGLE_API_KEY`` | API key of a Gemini judge (``provider="gemini"``) with no ``api_key`` |
| ``HF_JUDGE_PRICES`` | YAML file of model prices over genai-prices' (``settings.prices`` wins) |
"""

from __future__ import annotations

import os
from pathlib import Path

# the package's version (hf_judge.__version__), here so that every layer can name it
VERSION = "0.1.0"

DEFAULT_BASE_URL = "https://api.openai.com/v1"
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"  # the Gemini API (google-genai's)
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"  # the anthropic-version header of every request
# Anthropic requires max_tokens; this is sent when the run sets none (a judge's reply is far shorter).
ANTHROPIC_MAX_TOKENS = 4096
# Anthropic's Message Batches limits per batch (100,000 requests, 256 MB)
ANTHROPIC_BATCH_MAX_REQUESTS = 100_000
ANTHROPIC_BATCH_MAX_BYTES = 256 * 1000 * 1000
DEFAULT_CONCURRENCY = 256
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 3
DEFAULT_TOP_P = 1.0
# A judge reply is a few kB. Every request in flight may buffer up to this much,
# so peak memory for replies is at most concurrency x this (256 MiB at 256).
DEFAULT_MAX_REPLY_BYTES = 1024 * 1024
# OpenAI's Batch API limits per batch (https://platform.openai.com/docs/guides/batch)
DEFAULT_BATCH_MAX_REQUESTS = 50_000
DEFAULT_BATCH_MAX_BYTES = 200 * 1000 * 1000
# A server that answers nothing but 429 for this long stops the run.
DEFAULT_MAX_THROTTLE_S = 300.0
# Temperature escalation (seed 004): each retry after an invalid reply doubles
# the temperature, capped here; a temperature of 0 starts from the floor.
MAX_ESCALATED_TEMPERATURE = 1.0
ESCALATION_FLOOR = 0.1
# Bumped whenever the meaning of a cached entry changes.
CACHE_VERSION = "1"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def debug_enabled() -> bool:
    return env_flag("HF_JUDGE_DEBUG")


def default_api_key() -> str | None:
    return os.environ.get("OPENAI_API_KEY") or None


def default_base_url(provider: str = "openai") -> str:
    """The server of a judge with no base_url: ``$OPENAI_BASE_URL`` or OpenAI's; Gemini's OpenAI-compatible
    endpoint for ``provider="gemini"`` (its native batch API is beside it, at ``GEMINI_BASE_URL``); for
    ``provider="anthropic"``, ``$ANTHROPIC_BASE_URL`` or Anthropic's."""
    if provider == "gemini":
        return GEMINI_BASE_URL + "/openai"
    if provider == "anthropic":
        return os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
    return os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def default_gemini_key() -> str | None:
    """``GEMINI_API_KEY``, else ``GOOGLE_API_KEY`` (the names google-genai reads)."""
    return os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY") or None


def provider_api_key(provider: str) -> str | None:
    """The API key a provider's judge reads from the environment when none is given."""
    if provider == "anthropic":
        return os.environ.get("ANTHROPIC_API_KEY") or None
    if provider == "gemini":
        return default_gemini_key()
    return default_api_key()


def default_cache_dir() -> Path:
    """``HF_JUDGE_CACHE``, else ``hf_judge/`` inside the datasets cache."""
    if os.environ.get("HF_JUDGE_CACHE"):
        return Path(os.environ["HF_JUDGE_CACHE"]).expanduser()
    from datasets import config

    return Path(config.HF_DATASETS_CACHE) / "hf_judge"


def prices_file() -> str | None:
    """``HF_JUDGE_PRICES``: a YAML file of model prices over genai-prices' list prices."""
    return os.environ.get("HF_JUDGE_PRICES") or None
