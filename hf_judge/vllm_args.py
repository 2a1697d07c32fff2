"""``vllm_args`` (``--vllm-arg KEY=VALUE``): the engine arguments of a vLLM judge hf-judge starts, as a mapping.

Example:
    >>> parse_vllm_args(["dtype=float32", "enforce_eager"])
    {'dtype': 'float32', 'enforce_eager': True}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator


def parse_vllm_args(v: Any) -> Any:
    """``--vllm-arg KEY=VALUE`` (a list of those, from the flag or a recipe) or a mapping -> {key: value}."""
    if v is None or isinstance(v, Mapping):
        return v
    if isinstance(v, str):
        v = [v]
    out: dict[str, Any] = {}
    for item in v:
        if not isinstance(item, str):
            raise ValueError(f"a vLLM argument is KEY=VALUE text, not {item!r}")
        key, sep, value = item.partition("=")
        if not key.strip():
            raise ValueError(f"vLLM argument {item!r} has no KEY: write KEY=VALUE, e.g. max_model_len=4096")
        out[key.strip()] = value.strip() if sep else True
    return out


# vLLM engine arguments (``vllm_args``): names as vLLM spells them (max_model_len or max-model-len), values as
# their flags take them; True: a switch (enforce_eager), False: left out
VllmArgs = Annotated[dict[str, str | int | float | bool], BeforeValidator(parse_vllm_args)]
