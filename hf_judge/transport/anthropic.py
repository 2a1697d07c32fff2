"""Anthropic's Messages API, natively (``provider="anthropic"``): the request body and the reply's parts.

:class:`~hf_judge.transport.client.JudgeClient` keeps everything else (attempts, backoff, ``Retry-After``,
limits, validation): only the wire differs. A rendered metric's chat messages become a Messages body: the
system message as a ``system`` text block, the user message as content blocks (images as ``image`` blocks: a
``data:`` URL as base64, an http(s) URL as a ``url`` source), ``max_tokens`` always (the API requires it),
no ``temperature`` or ``top_p`` (it takes neither: a metric's temperature is not sent).

Structured output by Anthropic's own means: ``output_config.format`` (a JSON schema; numeric limits, which
it does not take, move into the description: the reply is checked against them anyway), or, where the
model refuses that, a forced tool call whose ``input_schema`` is the metric's schema (the client negotiates
it once, as it does json_schema -> json_object for OpenAI-compatible servers).

Prompt caching: the static prefix (the tool definition, the system prompt, and the metric's instructions:
the user message up to the line of its first variable, :func:`static_prefix`, sent as a text block of its
own) carries ``cache_control: {"type": "ephemeral"}``; a reply's ``cache_read_input_tokens`` are counted as cached
prompt tokens, ``cache_creation_input_tokens`` as cache writes (priced at the model's cache-write price), both
and ``input_tokens`` as prompt tokens.

Errors need nothing of their own: Anthropic's statuses fall into the retry table as they are (529
``overloaded_error`` and 500 ``api_error`` retried, 429 ``rate_limit_error`` retried after its
``retry-after``, 401/403 ``authentication_error``/``permission_error`` and 404 ``not_found_error`` stop the
run, 400 ``invalid_request_error`` and 413 ``request_too_large`` are error rows, 402 ``billing_error``
stops it as a used-up quota), and its error body's ``error.message`` is read like OpenAI's.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import orjson

from .. import constants
from ..errors import ConfigError
from ..judging.metrics import Metric
from ..settings import Settings

ROUTE = "/v1/messages"
BATCHES_ROUTE = "/v1/messages/batches"
EPHEMERAL = {"type": "ephemeral"}
# stop_reason -> the finish_reason the validator knows (validate.parse_reply)
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_LIMITS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength")


def check_settings(settings: Settings) -> None:
    """A ConfigError for a setting the Messages API cannot honour (rather than a run that silently ignores it).

    Example:
        >>> check_settings(Settings(model="claude-haiku-4-5", temperature=0.5))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: temperature=0.5 (--temperature): Anthropic's Messages API takes no ...
    """
    if settings.logprobs:
        raise ConfigError("logprobs=True (--logprobs): Anthropic's Messages API returns no token log-probabilities")
    if settings.temperature is not None:
        raise ConfigError(
            f"temperature={settings.temperature:g} (--temperature): Anthropic's Messages API takes no temperature; "
            "drop it"
        )
    if settings.top_p is not None and settings.top_p != 1:
        raise ConfigError(f"top_p={settings.top_p:g} (--top-p): Anthropic's Messages API takes no top_p; drop it")


def headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request: the key as ``x-api-key`` and the API version.

    Example:
        >>> headers("sk-ant-x")
        {'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-x'}
    """
    out = {"anthropic-version": constants.ANTHROPIC_VERSION}
    if api_key:
        out["x-api-key"] = api_key
    return out


def output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as ``output_config.format`` takes it: the limits it does not support said in the description.

    Example:
        >>> output_schema({"type": "integer", "minimum": 1, "maximum": 10})
        {'type': 'integer', 'description': '{minimum: 1, maximum: 10}'}
    """
    out: dict[str, Any] = {}
    limits = []
    for k, v in schema.items():
        if k in _LIMITS:
            limits.append(f"{k}: {v}")
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: output_schema(s) if isinstance(s, dict) else s for name, s in v.items()}
        elif k == "items" and isinstance(v, dict):
            out[k] = output_schema(v)
        else:
            out[k] = v
    if limits:
        said = "{" + ", ".join(limits) + "}"
        out["description"] = f"{out['description']}\n\n{said}" if out.get("description") else said
    return out


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """A user message's content (a string, or OpenAI content parts from judging/images.py) as Messages blocks.

    Example:
        >>> content_blocks([{"type": "text", "text": "See "},
        ...                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}])[1]
        {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': 'iVBO'}}
        >>> content_blocks([{"type": "image_url", "image_url": {"url": "https://x/a.png"}}])
        [{'type': 'image', 'source': {'type': 'url', 'url': 'https://x/a.png'}}]
    """
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content:
        if part.get("type") != "image_url":
            blocks.append({"type": "text", "text": part.get("text", "")})
            continue
        url = part["image_url"]["url"]
        if url[:5].lower() == "data:":
            head, _, data = url.partition(",")
            media = head[5:].split(";")[0].lower().replace("image/jpg", "image/jpeg")
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
        else:
            blocks.append({"type": "image", "source": {"type": "url", "url": url}})
    return blocks


def count_tokens_body(model: str, messages: list) -> dict[str, Any]:
    """The body of ``POST /v1/messages/count_tokens`` for chat messages: the Messages request without
    ``max_tokens`` (and without the structured-output fields, which the dry-run does not count for any provider).

    Example:
        >>> count_tokens_body("claude-haiku-4-5", [{"role": "system", "content": "Judge."},
        ...                                        {"role": "user", "content": "Q?"}])
        {'model': 'claude-haiku-4-5', 'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'Q?'}]}], 'system': 'Judge.'}
    """  # noqa: E501 - a doctest line
    body: dict[str, Any] = {"model": model, "messages": []}
    for m in messages:
        if m["role"] == "system":
            body["system"] = m["content"]
        else:
            body["messages"].append({"role": m["role"], "content": content_blocks(m["content"])})
    return body


def static_prefix(metric: Metric) -> str:
    """The part of ``metric``'s user message that is the same for every row: up to the line where its first
    variable goes (found by rendering it twice with different values). Empty where there is none.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> static_prefix(load_metric("QA_Clarity")).endswith("# Question\\n")
        True
    """
    try:
        a, b = (metric.messages(dict.fromkeys((*metric.variables, *metric.optional), v)) for v in ("\x01a", "\x02b"))
    except Exception:  # noqa: BLE001 - a template that cannot render so: no prefix, the request is sent whole
        return ""
    a_text, b_text = a[-1]["content"], b[-1]["content"]
    if not isinstance(a_text, str) or not isinstance(b_text, str):
        return ""
    n = len(os.path.commonprefix([a_text, b_text]))
    return a_text[: a_text.rfind("\n", 0, n) + 1]


class AnthropicWire:
    """Request bodies for one client's model and settings, and the parts of a reply (see the module docstring).

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> wire = AnthropicWire("claude-haiku-4-5", max_tokens=None)
        >>> m = load_metric("Q_Clarity")
        >>> body = orjson.loads(wire.body(m, m.messages({"instruction": "Why?"}), 0.1, "json_schema"))
        >>> body["max_tokens"], body["output_config"]["format"]["type"], body["messages"][0]["role"]
        (4096, 'json_schema', 'user')
    """

    route = ROUTE

    def __init__(self, model: str, *, max_tokens: int | None):
        self.model = model
        self.max_tokens = max_tokens or constants.ANTHROPIC_MAX_TOKENS
        # Keyed by the metric object, weakly (not by id(metric): a freed metric's address is reused).
        self._static: weakref.WeakKeyDictionary[Metric, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()
        self._prefix: weakref.WeakKeyDictionary[Metric, str] = weakref.WeakKeyDictionary()

    def structured(self, metric: Metric, mode: str) -> dict[str, Any]:
        """The body's structured-output fields: ``output_config`` (mode json_schema), else a forced tool call."""
        by_mode = self._static.get(metric)
        if by_mode is None:
            by_mode = self._static[metric] = {}
        fields = by_mode.get(mode)
        if fields is None:
            if mode == "json_schema":
                fields = {
                    "output_config": {"format": {"type": "json_schema", "schema": output_schema(metric.json_schema)}}
                }
            else:
                tool = {
                    "name": metric.schema_name,
                    "description": f"Record the judgment of {metric.name}.",
                    "input_schema": metric.json_schema,
                    "cache_control": EPHEMERAL,
                }
                fields = {"tools": [tool], "tool_choice": {"type": "tool", "name": metric.schema_name}}
            by_mode[mode] = fields
        return fields

    def body(
        self,
        metric: Metric,
        messages: list,
        temperature: float,  # noqa: ARG002 - the chat-completions signature; the Messages API takes none
        mode: str,
        *,
        max_tokens: bool = True,
    ) -> bytes:
        """The Messages request body; ``max_tokens=False`` leaves max_tokens out (the body a reply key hashes).

        ``temperature`` is not sent: the Messages API takes none (the SDK's ``MessageCreateParams`` has no
        ``temperature`` or ``top_p``), so a retry after an invalid reply is the same request again."""
        payload: dict[str, Any] = {"model": self.model}
        if max_tokens:
            payload["max_tokens"] = self.max_tokens
        turns = []
        for m in messages:
            if m["role"] == "system":
                payload["system"] = [{"type": "text", "text": m["content"], "cache_control": EPHEMERAL}]
            else:
                turns.append({"role": m["role"], "content": self._cached(metric, m["content"])})
        payload["messages"] = turns
        payload.update(self.structured(metric, mode))
        return orjson.dumps(payload)

    def _cached(self, metric: Metric, content: Any) -> Any:
        """The user message's content, its static prefix in a block of its own with ``cache_control``."""
        prefix = self._prefix.get(metric)
        if prefix is None:
            prefix = self._prefix[metric] = static_prefix(metric)
        if isinstance(content, str):  # the usual message, without images: no blocks to build first
            first, blocks = content, []
        else:
            blocks = content_blocks(content)
            first = blocks[0].get("text", "") if blocks[0]["type"] == "text" else ""
            blocks = blocks[1:] if first else blocks
        if not prefix or not first.startswith(prefix):
            return (
                content
                if isinstance(content, str)
                else [*([{"type": "text", "text": first}] if first else []), *blocks]
            )
        head = {"type": "text", "text": prefix, "cache_control": EPHEMERAL}
        rest = first[len(prefix) :]
        return [head, *([{"type": "text", "text": rest}] if rest else []), *blocks]


def reply(data: bytes | dict) -> tuple[str | None, str | None, tuple[int, int, int, int] | None] | str:
    """(content, finish_reason, (prompt, completion, cache-read, cache-written prompt tokens)) of a Message, or
    what is wrong with it. The tokens are None where the usage holds no ``input_tokens``/``output_tokens``
    counts (missing, strings, fractions, negative): not to be trusted, the client counts them itself.

    The content is the text blocks joined, or the forced tool call's input as JSON.

    Example:
        >>> reply(b'{"type":"message","content":[{"type":"text","text":"{}"}],"stop_reason":"end_turn",'
        ...       b'"usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":100}}')
        ('{}', 'stop', (105, 2, 100, 0))
    """
    try:
        doc = orjson.loads(data) if isinstance(data, bytes) else data
        blocks = doc["content"]
        stop = doc.get("stop_reason")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return "the server's 200 reply is not a Message (no content blocks)"
    if not isinstance(blocks, list):
        return "the reply's content is not a list of blocks"
    texts = []
    for block in blocks:
        if not isinstance(block, dict):
            return "a content block of the reply is not an object"
        if block.get("type") == "tool_use":
            texts = [orjson.dumps(block.get("input")).decode()]
            break
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
    usage = doc.get("usage")
    finish = _FINISH.get(stop, stop) if isinstance(stop, str) else None
    counted = isinstance(usage, dict) and all(_valid(usage.get(k)) for k in ("input_tokens", "output_tokens"))
    return ("".join(texts) if texts else None), finish, (usage_tokens(usage) if counted else None)


def usage_tokens(usage: Any) -> tuple[int, int, int, int]:
    """(prompt, completion, cache-read, cache-written) tokens of a Message's usage: the prompt counts what the
    cache served and wrote (``input_tokens`` is the rest), as OpenAI's ``prompt_tokens`` counts its
    ``cached_tokens``; the writes apart, as they cost more than other prompt tokens (1.25x for 5 minutes).

    Example:
        >>> usage_tokens({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 7, "x": True})
        (17, 5, 0, 7)
    """
    if not isinstance(usage, dict):
        return 0, 0, 0, 0
    read, written = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
    prompt = _count(usage.get("input_tokens")) + read + written
    return prompt, _count(usage.get("output_tokens")), read, written


def _valid(v: Any) -> bool:
    return type(v) is int and v >= 0


def _count(v: Any) -> int:
    """A token count: a positive int (not a bool, a string, a negative number); anything else counts 0."""
    return v if type(v) is int and v > 0 else 0
