"""The managed judge servers of this run (``--model vllm:MODEL``), as every process of the run knows them.

:func:`hf_judge.transport.vllm.vllm_judge` lists its server's base URL in :data:`SERVED_ENV` with the model's identity
and ``max_model_len``; the environment carries it to the processes the run starts (workers, executors on this
machine). :class:`~hf_judge.transport.client.JudgeClient` keys such a server's replies on the identity (not the port)
and checks each prompt's length with the server's tokenizer first.
"""

from __future__ import annotations

import json
import os
from typing import Any

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
