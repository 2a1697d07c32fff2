"""The managed judge servers of this run (``--model vllm:MODEL``), as every process of the run knows them.

:func:`hf_judge.transport.vllm.vllm_judge` lists its server's base URL in :data:`SERVED_ENV` with the model's identity
and ``max_model_len``; the environment carries it to the processes the run starts (workers, executors on this
machine). :class:`~hf_judge.transport.client.JudgeClient` keys such a server's replies on the identity (not the port)
and checks each prompt's length with the server's tokenizer first.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

    from .prices import Price

SERVED_ENV = "HF_JUDGE_MANAGED_SERVERS"


def served_model(base_url: str) -> dict[str, Any] | None:
    """The managed vLLM server at ``base_url`` as this run's processes know it (``identity``, ``max_model_len``),
    or None for any other server.

    Example:
        >>> served_model("https://api.openai.com/v1") is None
        True
    """
    try:
        served = json.loads(os.environ.get(SERVED_ENV) or "{}")
    except ValueError:
        return None
    return served.get(base_url.rstrip("/"))


def tokenize_url(base_url: str) -> str:
    """vLLM's ``/tokenize`` endpoint (at the server's root, beside ``/v1``).

    Example:
        >>> tokenize_url("http://127.0.0.1:8000/v1")
        'http://127.0.0.1:8000/tokenize'
    """
    return base_url.rstrip("/").removesuffix("/v1") + "/tokenize"


def too_long(count: int, max_model_len: int) -> str | None:
    """The errors row's message where a prompt of ``count`` tokens leaves no room for a reply, else None.

    Example:
        >>> too_long(2100, 2048)[:40]
        "the prompt is 2,100 tokens (the model's "
    """
    if count < max_model_len:
        return None
    return (
        f"the prompt is {count:,} tokens (the model's tokenizer and chat template) and the judge's max_model_len is "
        f"{max_model_len:,}: not sent. Shorten the row's text, or raise --vllm-arg max_model_len=N if the model "
        "supports it"
    )


async def context_refusal(
    session: aiohttp.ClientSession, base_url: str, model: str, messages: list, served: dict[str, Any]
) -> str | None:
    """The errors row's message where ``messages`` leave no room for a reply in the managed judge's context, counted
    by the server's own tokenizer and chat template (``POST /tokenize``); None where they fit, or cannot be counted
    (the request then goes, and the server's 400 says the same)."""
    import aiohttp

    limit = served.get("max_model_len")
    if not limit:
        return None
    body = json.dumps({"model": model, "messages": messages, "add_generation_prompt": True})
    headers = {"Content-Type": "application/json"}
    try:
        async with session.post(tokenize_url(base_url), data=body, headers=headers) as resp:
            count = json.loads(await resp.read())["count"] if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError):
        return None
    return too_long(count, limit) if isinstance(count, int) else None


def engine_dead(status: int, message: str) -> bool:
    """Whether an HTTP error says vLLM's engine died (every later request fails the same way).

    Example:
        >>> engine_dead(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.")
        True
    """
    return status >= 500 and "EngineCore encountered" in message


def context_refused(status: int, message: str) -> bool:
    """Whether an HTTP error is a server's own refusal of a prompt longer than its context (vLLM's words).

    Example:
        >>> context_refused(400, "This model's maximum context length is 2048 tokens. However, ...")
        True
    """
    return status == 400 and "maximum context length" in message


def served_price(served: dict[str, Any] | None) -> Price | None:
    """A managed judge's price: 0 per token (what it costs is its engine's time, in the summary); None for others."""
    if served is None:
        return None
    from .prices import Price

    return Price.model_validate({"input": 0, "output": 0, "source": "a vLLM judge hf-judge runs: no per-token price"})
