"""The Gemini API's own shapes: a chat-completions request as a ``GenerateContentRequest``, a
``GenerateContentResponse`` as a chat completion, and a small client of its files and batches endpoints
(``upload/v1beta/files``, ``models/{model}:batchGenerateContent``, ``batches/{id}``), as google-genai's
``client.files`` and ``client.batches`` speak them.

Online, a Gemini judge goes through Google's OpenAI-compatible endpoint (``.../v1beta/openai``: the same
transport as any OpenAI-compatible server); batch mode needs the native batch API, which takes
``GenerateContentRequest`` lines keyed by the request key and answers ``GenerateContentResponse`` lines
under the same key. The conversion keeps what a judge asks for: the system prompt (``systemInstruction``),
the user's text and images (``inlineData``, ``fileData``), temperature, top_p, max tokens, n
(``candidateCount``), log-probabilities, and structured output (``responseMimeType: application/json``
with the metric's JSON schema as ``responseJsonSchema``).

No SDK is needed: the standard library's HTTP client speaks to it, so a Gemini batch needs nothing more
installed.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

logger = logging.getLogger("hf_judge")

# finishReason -> the chat completion's finish_reason (what the reply's validation reads)
_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}


def _parts(content: Any) -> list[dict]:
    """A chat message's content as Gemini parts: text, and images as inline data (a data URL) or a file URI."""
    if isinstance(content, str):
        return [{"text": content}]
    parts: list[dict] = []
    for p in content or []:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            parts.append({"text": p.get("text", "")})
        elif p.get("type") == "image_url":
            url = (p.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                mime, _, data = url[5:].partition(";base64,")
                parts.append({"inlineData": {"mimeType": mime, "data": data}})
            else:
                parts.append({"fileData": {"fileUri": url}})
    return parts


def to_gemini_request(body: dict) -> dict:
    """A chat-completions request body as a ``GenerateContentRequest`` (the model goes in the URL).

    Example:
        >>> r = to_gemini_request({"model": "gemini-2.5-flash", "temperature": 0.1, "messages": [
        ...     {"role": "system", "content": "Be strict."}, {"role": "user", "content": "Rate: 2+2=4"}],
        ...     "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}})
        >>> r["systemInstruction"], r["contents"]
        ({'parts': [{'text': 'Be strict.'}]}, [{'role': 'user', 'parts': [{'text': 'Rate: 2+2=4'}]}])
        >>> r["generationConfig"]
        {'temperature': 0.1, 'responseMimeType': 'application/json', 'responseJsonSchema': {'type': 'object'}}
    """
    system: list[dict] = []
    contents: list[dict] = []
    for m in body.get("messages", []):
        role = m.get("role")
        if role in ("system", "developer"):
            system += _parts(m.get("content"))
        else:
            contents.append({"role": "model" if role == "assistant" else "user", "parts": _parts(m.get("content"))})
    config: dict[str, Any] = {}
    for ours, theirs in (("temperature", "temperature"), ("top_p", "topP"), ("seed", "seed")):
        if body.get(ours) is not None:
            config[theirs] = body[ours]
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit is not None:
        config["maxOutputTokens"] = limit
    if (body.get("n") or 1) > 1:
        config["candidateCount"] = body["n"]
    if body.get("logprobs"):
        config["responseLogprobs"] = True
        if body.get("top_logprobs"):
            config["logprobs"] = body["top_logprobs"]
    rf = body.get("response_format") or {}
    if rf.get("type") in ("json_schema", "json_object"):
        config["responseMimeType"] = "application/json"
        schema = (rf.get("json_schema") or {}).get("schema") if rf["type"] == "json_schema" else rf.get("schema")
        if schema is not None:
            config["responseJsonSchema"] = schema
    request: dict[str, Any] = {"contents": contents}
    if system:
        request["systemInstruction"] = {"parts": system}
    if config:
        request["generationConfig"] = config
    return request


def _logprobs(result: Any) -> dict | None:
    """Gemini's ``logprobsResult`` as a chat completion choice's ``logprobs`` (``content``: token, logprob,
    top_logprobs)."""
    if not isinstance(result, dict):
        return None
    chosen = result.get("chosenCandidates") or []
    tops = result.get("topCandidates") or []
    content = []
    for i, c in enumerate(chosen):
        alts = tops[i].get("candidates", []) if i < len(tops) and isinstance(tops[i], dict) else []
        content.append(
            {
                "token": c.get("token", ""),
                "logprob": c.get("logProbability", 0.0),
                "top_logprobs": [{"token": a.get("token", ""), "logprob": a.get("logProbability", 0.0)} for a in alts],
            }
        )
    return {"content": content}


def to_chat_completion(response: dict, model: str = "") -> dict:
    """A ``GenerateContentResponse`` as a chat completion: a choice per candidate (its text, thoughts left
    out; its finish reason), the usage (thinking tokens count as completion tokens: they are paid as output).

    Example:
        >>> c = to_chat_completion({"candidates": [{"content": {"role": "model", "parts": [{"text": '{"score": 7}'}]},
        ...     "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5}})
        >>> c["choices"][0]["message"]["content"], c["choices"][0]["finish_reason"], c["usage"]["completion_tokens"]
        ('{"score": 7}', 'stop', 5)
    """
    choices = []
    for i, cand in enumerate(response.get("candidates") or []):
        parts = ((cand.get("content") or {}).get("parts")) or []
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought"))
        reason = cand.get("finishReason", "STOP")
        choice: dict[str, Any] = {
            "index": cand.get("index", i),
            "message": {"role": "assistant", "content": text},
            "finish_reason": _FINISH.get(reason, reason.lower() if isinstance(reason, str) else "stop"),
        }
        lp = _logprobs(cand.get("logprobsResult"))
        if lp is not None:
            choice["logprobs"] = lp
        choices.append(choice)
    block = (response.get("promptFeedback") or {}).get("blockReason")
    if not choices and block:  # the prompt itself was blocked: no candidate
        choices.append({"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "content_filter"})
    out = {
        "id": response.get("responseId", ""),
        "object": "chat.completion",
        "model": response.get("modelVersion", model),
        "choices": choices,
    }
    meta = response.get("usageMetadata")
    u: dict[str, Any] = meta if isinstance(meta, dict) else {}
    p: Any = u.get("promptTokenCount")
    c: Any = u.get("candidatesTokenCount")
    thoughts: Any = u.get("thoughtsTokenCount")
    if _count(p) and _count(c) and (thoughts is None or _count(thoughts)):
        # no usage where the counts are missing or no counts ("12", 7.9, -5): the client counts such a reply
        usage: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c + (thoughts or 0)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        cached = u.get("cachedContentTokenCount")
        if _count(cached) and cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        out["usage"] = usage
    return out


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


# -- the files and batches endpoints ---------------------------------------------------------------------------------


class GeminiApiError(Exception):
    """An HTTP error of the Gemini API: ``status_code`` and the API's ``message``."""

    def __init__(self, status_code: int, message: str):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message


class GeminiConnectionError(Exception):
    """The Gemini API could not be reached (or did not answer in time)."""


# Statuses worth another try of a read (a create is retried by its caller, which first looks for what it made).
_TRANSIENT = {408, 429, 500, 502, 503, 504}


@dataclass
class GeminiApi:
    """The Gemini API's files and batches endpoints at ``base_url`` (``https://generativelanguage.googleapis.com
    /v1beta``: the version is its last part), with an API key (sent as ``x-goog-api-key``).

    Example:
        >>> api = GeminiApi("https://generativelanguage.googleapis.com/v1beta", "key")
        >>> api.url("batches/abc"), api.upload_url
        ('https://generativelanguage.googleapis.com/v1beta/batches/abc', \
'https://generativelanguage.googleapis.com/upload/v1beta/files')
    """

    base_url: str
    api_key: str | None
    timeout: float = 120.0
    retries: int = 5
    backoff: float = 0.5

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        root, _, version = self.base_url.rpartition("/")
        self.upload_url = f"{root}/upload/{version}/files"

    def url(self, path: str, query: dict | None = None) -> str:
        return f"{self.base_url}/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")

    def _headers(self, extra: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["x-goog-api-key"] = self.api_key
        return {**headers, **(extra or {})}

    def _open(self, method: str, url: str, data: bytes | BinaryIO | None, headers: dict, retry: bool) -> Any:
        """The response of one request (retried where ``retry`` and the failure is transient). ``data`` may be
        a file (with its Content-Length in ``headers``): streamed, never held whole."""
        for attempt in range(self.retries + 1 if retry else 1):
            if hasattr(data, "seek"):
                data.seek(0)  # type: ignore[union-attr]
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers(headers))
            try:
                return urllib.request.urlopen(req, timeout=self.timeout)  # noqa: S310 - an http(s) URL we built
            except urllib.error.HTTPError as e:
                status, message = e.code, _error_message(e)
                e.close()
                if not retry or status not in _TRANSIENT or attempt == self.retries:
                    raise GeminiApiError(status, message) from None
            except (urllib.error.URLError, OSError) as e:
                if not retry or attempt == self.retries:
                    raise GeminiConnectionError(str(getattr(e, "reason", e))) from None
            time.sleep(min(30.0, self.backoff * 2**attempt))
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, payload: Any = None, *, query: dict | None = None, retry=True) -> dict:
        """One JSON call: ``GET batches/abc``, ``POST models/m:batchGenerateContent``, ..."""
        data = None if payload is None else json.dumps(payload).encode()
        with self._open(method, self.url(path, query), data, {}, retry) as r:
            raw = r.read()
        return json.loads(raw) if raw.strip() else {}

    def pages(self, path: str, field: str, page_size: int = 100) -> Iterator[dict]:
        """Every item of a listing (``files``, ``batches``), page by page."""
        token = None
        while True:
            query = {"pageSize": page_size, **({"pageToken": token} if token else {})}
            doc = self.call("GET", path, query=query)
            yield from doc.get(field) or []
            token = doc.get("nextPageToken")
            if not token:
                return

    def upload(self, f: BinaryIO, size: int, display_name: str, mime_type: str = "application/jsonl") -> dict:
        """Upload a file by the resumable protocol (start, then upload and finalize); returns its ``File``."""
        start = {
            "X-Goog-Upload-Protocol": "resumable",
            "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(size),
            "X-Goog-Upload-Header-Content-Type": mime_type,
        }
        meta = {"file": {"displayName": display_name, "mimeType": mime_type, "sizeBytes": str(size)}}
        with self._open("POST", self.upload_url, json.dumps(meta).encode(), start, True) as r:
            target = r.headers.get("x-goog-upload-url")
        if not target:
            raise GeminiApiError(502, "the upload start returned no x-goog-upload-url")
        command = {"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0"}
        headers = {**command, "Content-Type": mime_type, "Content-Length": str(size)}
        with self._open("POST", target, f, headers, True) as r:
            doc = json.loads(r.read())
        return doc.get("file", doc)

    def download(self, name: str, out: BinaryIO) -> None:
        """Stream a file's content (``files/abc``, a batch's responses file) into ``out``."""
        url = f"{self.base_url}/{name}:download?alt=media"  # where google-genai's files.download reads
        with self._open("GET", url, None, {}, True) as r:
            while chunk := r.read(1 << 20):
                out.write(chunk)


def _error_message(e: urllib.error.HTTPError) -> str:
    """The API's own words in an error body (``{"error": {"message": ...}}``), else the reason phrase."""
    try:
        doc = json.loads(e.read(65536) or b"{}")
    except (ValueError, OSError):
        return str(e.reason)
    err = doc.get("error") if isinstance(doc, dict) else None
    return str(err.get("message") or e.reason) if isinstance(err, dict) else str(e.reason)
