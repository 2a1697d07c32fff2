"""The managed judge servers of this run (``--model vllm:MODEL``), as every process of the run knows them.

:func:`hf_judge.transport.vllm.vllm_judge` lists its server's base URL in :data:`SERVED_ENV` with the model's identity
and ``max_model_len``; the environment carries it to the processes the run starts (workers, executors on this
machine). :class:`~hf_judge.transport.client.JudgeClient` keys such a server's replies on the identity (not the port)
and checks each prompt's length with the server's tokenizer first: by a bound (the chat template's tokens, counted
once, plus the text's bytes) where the tokenizer allows one, with ``POST /tokenize`` for the prompts near the limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
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


# Tokens a message's own text may cost beyond its UTF-8 bytes where the bound holds: a prepended "▁" per piece of
# text and a template's tokens that merge differently around it (its overhead is measured with one character)
SLACK_PER_MESSAGE = 8
# the chat template's tokens per form of the messages, per client session (its futures belong to its event loop)
_TEMPLATE_TOKENS: weakref.WeakKeyDictionary[aiohttp.ClientSession, dict] = weakref.WeakKeyDictionary()


def bytes_bound(messages: list, form: str | None) -> int | None:
    """An upper bound of the tokens the messages' texts cost (their UTF-8 bytes, after the tokenizer's Unicode
    normalization ``form``: ``"NFKC"``, several comma-separated, or ``""``), or None where a content is not text or
    no bound holds (``form`` None: see :func:`hf_judge.transport.vllm.byte_bound`).

    Example:
        >>> bytes_bound([{"role": "user", "content": "héllo"}], "")
        6
        >>> bytes_bound([{"role": "user", "content": "\ufb01"}], "NFKC")  # the ligature "fi": 2 characters
        2
    """
    import unicodedata

    if form is None:
        return None
    total = 0
    for m in messages:
        text = m.get("content") if isinstance(m, dict) else None
        if not isinstance(text, str):
            return None
        for f in filter(None, form.split(",")):
            text = unicodedata.normalize(f, text)  # type: ignore[arg-type]
        total += len(text.encode("utf-8"))
    return total


async def _count(session: aiohttp.ClientSession, base_url: str, model: str, messages: list) -> int | None:
    """The prompt's tokens by the server's own tokenizer and chat template (``POST /tokenize``), None if it cannot."""
    import aiohttp

    body = json.dumps({"model": model, "messages": messages, "add_generation_prompt": True})
    headers = {"Content-Type": "application/json"}
    try:
        async with session.post(tokenize_url(base_url), data=body, headers=headers) as resp:
            count = json.loads(await resp.read())["count"] if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError):
        return None
    return count if isinstance(count, int) else None


async def _fits_by_bound(
    session: aiohttp.ClientSession, base_url: str, model: str, messages: list, served: dict[str, Any], overheads: dict
) -> bool:
    """Whether a cheap bound proves ``messages`` fit: the chat template's tokens around them (measured once per
    template form, i.e. the messages without their text, through ``/tokenize`` with one character each) plus the
    texts' bytes (:func:`bytes_bound`) plus a slack per message, under ``max_model_len``. Only a prompt near or
    over the limit then costs a ``/tokenize`` call of its own: one per row cost ~30 % of the throughput."""
    own = bytes_bound(messages, served.get("byte_bound"))
    if own is None:
        return False
    probe = [{**m, "content": "x"} for m in messages]
    form = json.dumps(probe, sort_keys=True)
    if form not in overheads:  # one call for every row of the form, even those that ask at the same time
        overheads[form] = asyncio.ensure_future(_count(session, base_url, model, probe))
    overhead = await asyncio.shield(overheads[form])
    if overhead is None:
        return False
    return overhead + own + SLACK_PER_MESSAGE * len(messages) < served["max_model_len"]


async def context_refusal(
    session: aiohttp.ClientSession, base_url: str, model: str, messages: list, served: dict[str, Any]
) -> str | None:
    """The errors row's message where ``messages`` leave no room for a reply in the managed judge's context, counted
    by the server's own tokenizer and chat template (``POST /tokenize``); None where they fit, or cannot be counted
    (the request then goes, and the server's 400 says the same). A prompt a bound proves short is not counted (see
    :func:`_fits_by_bound`)."""
    limit = served.get("max_model_len")
    if not limit:
        return None
    overheads = _TEMPLATE_TOKENS.setdefault(session, {})
    if await _fits_by_bound(session, base_url, model, messages, served, overheads):
        return None
    count = await _count(session, base_url, model, messages)
    return too_long(count, limit) if count is not None else None


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
