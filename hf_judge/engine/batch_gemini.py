"""Batch mode through Gemini's batch API: ``GeminiBatches`` gives :class:`hf_judge.engine.batch.BatchRunner`
the part of the ``openai`` SDK's surface it uses (``files.create/list/delete/content``, ``batches.create/
list/retrieve/cancel``), speaking Gemini's endpoints behind it (:mod:`hf_judge.transport.gemini`).

So the runner's promises hold unchanged: every step recorded before the next, resume after a stop (an
upload a kill hid is found by its display name, a batch by its input file), partial outcomes resubmitted.

* Upload: the runner's OpenAI-shaped file (one ``{"custom_id", "body"}`` line per request) is rewritten as
  Gemini's (``{"key": custom_id, "request": GenerateContentRequest}``) and uploaded by the resumable
  protocol, named after the runner's job.
* Create: ``POST models/{model}:batchGenerateContent`` with the file as its input.
* Follow: ``GET batches/{id}``: its state (``BATCH_STATE_*``, or ``JOB_STATE_*``) in OpenAI's words, its
  ``batchStats`` as the request counts.
* Collect: the responses file (or the inlined responses), each ``{"key", "response"|"error"}`` line written
  back as an OpenAI output line (``custom_id``, a chat completion), which the runner validates as any other.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..transport.client import JudgeClient
from ..transport.gemini import GeminiApi, to_chat_completion, to_gemini_request
from .batch_lines import bounded_lines

# Gemini's batch states (BATCH_STATE_* in the REST API, JOB_STATE_* in google-genai) in OpenAI's words, which
# the batch book records and batch.DONE reads.
STATES = {
    "UNSPECIFIED": "validating",
    "QUEUED": "validating",
    "PENDING": "validating",
    "RUNNING": "in_progress",
    "PAUSED": "in_progress",
    "UPDATING": "in_progress",
    "SUCCEEDED": "completed",
    "PARTIALLY_SUCCEEDED": "completed",
    "FAILED": "failed",
    "CANCELLING": "cancelling",
    "CANCELLED": "cancelled",
    "EXPIRED": "expired",
}
_INLINE = "inline:"  # the "file id" of a batch's inlined responses


def status_of(state: str | None) -> str:
    """A Gemini batch state in OpenAI's words.

    Example:
        >>> status_of("BATCH_STATE_SUCCEEDED"), status_of("JOB_STATE_RUNNING")
        ('completed', 'in_progress')
    """
    short = (state or "UNSPECIFIED").removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")
    return STATES.get(short, short.lower())


def native_base(base_url: str) -> str:
    """The native API beside the OpenAI-compatible endpoint a Gemini judge's base_url names.

    Example:
        >>> native_base("https://generativelanguage.googleapis.com/v1beta/openai")
        'https://generativelanguage.googleapis.com/v1beta'
    """
    return base_url.rstrip("/").removesuffix("/openai")


@dataclass
class _Counts:
    completed: int = 0
    failed: int = 0


@dataclass
class _Error:
    code: str
    message: str
    line: int | None = None


@dataclass
class _Errors:
    data: list[_Error] = field(default_factory=list)


@dataclass
class BatchView:
    """A Gemini batch as the runner reads an OpenAI one."""

    id: str
    status: str
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None = None
    request_counts: _Counts | None = None
    errors: _Errors | None = None

    @classmethod
    def of(cls, op: dict) -> BatchView:
        meta = op.get("metadata") or {}
        stats = meta.get("batchStats") or {}
        output = meta.get("output") or {}
        out = output.get("responsesFile")
        if not out and (output.get("inlinedResponses") or {}).get("inlinedResponses"):
            out = _INLINE + op.get("name", "")
        err = op.get("error")
        errors = None
        if isinstance(err, dict):
            errors = _Errors([_Error(str(err.get("status") or err.get("code")), str(err.get("message", "")))])
        return cls(
            id=op.get("name", ""),
            status=status_of(meta.get("state")),
            input_file_id=(meta.get("inputConfig") or {}).get("fileName"),
            output_file_id=out,
            request_counts=_Counts(
                int(stats.get("successfulRequestCount") or 0), int(stats.get("failedRequestCount") or 0)
            ),
            errors=errors,
        )


@dataclass
class _FileView:
    id: str
    filename: str | None


class _Files:
    def __init__(self, owner: GeminiBatches):
        self.owner = owner
        self.with_streaming_response = self

    def create(self, *, file: tuple[str, Any], purpose: str = "batch") -> _FileView:  # noqa: ARG002 - the SDK's
        """Upload the runner's file in Gemini's line format, named ``name`` (how a hidden upload is found)."""
        name, f = file
        with tempfile.TemporaryFile() as out:
            for raw in f:
                if raw.strip():
                    doc = orjson.loads(raw)
                    out.write(orjson.dumps({"key": doc["custom_id"], "request": to_gemini_request(doc["body"])}))
                    out.write(b"\n")
            size = out.tell()
            out.seek(0)
            made = self.owner.gemini.upload(out, size, name)
        return _FileView(made["name"], made.get("displayName"))

    def list(self, purpose: str = "batch") -> Iterator[_FileView]:  # noqa: ARG002 - the SDK's
        for f in self.owner.gemini.pages("files", "files"):
            yield _FileView(f.get("name", ""), f.get("displayName"))

    def delete(self, file_id: str) -> None:
        if not file_id.startswith(_INLINE):
            self.owner.gemini.call("DELETE", file_id)

    @contextmanager
    def content(self, file_id: str) -> Iterator[_Download]:
        yield _Download(self.owner, file_id)


class _Download:
    def __init__(self, owner: GeminiBatches, file_id: str):
        self.owner, self.file_id = owner, file_id

    def stream_to_file(self, path: str | os.PathLike) -> None:
        """The responses, as OpenAI output lines, in ``path``: read in bounded lines (a line over the cap is
        copied with its key renamed, so the runner sees an over-long line of that request)."""
        cap = self.owner.max_reply_bytes
        with open(path, "wb") as out, tempfile.TemporaryFile() as raw:
            if self.file_id.startswith(_INLINE):
                op = self.owner.gemini.call("GET", self.file_id.removeprefix(_INLINE))
                inline = (((op.get("metadata") or {}).get("output") or {}).get("inlinedResponses") or {}).get(
                    "inlinedResponses"
                ) or []
                for item in inline:
                    key = (item.get("metadata") or {}).get("key")
                    raw.write(orjson.dumps({"key": key, **{k: v for k, v in item.items() if k != "metadata"}}) + b"\n")
            else:
                self.owner.gemini.download(self.file_id, raw)
            raw.seek(0)
            for line in bounded_lines(raw, cap):
                if isinstance(line, bytes):
                    out.write(self.owner.output_line(line))
                    continue
                # over the cap: its key renamed (where it leads the line), padded to its size in pieces, so that
                # the runner counts a line too long of that request without any of it held whole
                prefix = line.prefix.replace(b'"key"', b'"custom_id"', 1)
                out.write(prefix)
                left = line.size - len(prefix)
                while left > 0:
                    out.write(b" " * min(left, 1 << 20))
                    left -= 1 << 20
                out.write(b"\n")


class _Batches:
    def __init__(self, owner: GeminiBatches):
        self.owner = owner

    def create(
        self,
        *,
        input_file_id: str,
        endpoint: str = "",  # noqa: ARG002 - the SDK's
        completion_window: str = "",  # noqa: ARG002 - the SDK's
        metadata: dict | None = None,
    ) -> BatchView:
        model = self.owner.model if "/" in self.owner.model else f"models/{self.owner.model}"
        batch = {"displayName": (metadata or {}).get("hf_judge", ""), "inputConfig": {"fileName": input_file_id}}
        # never retried here: a create whose reply was lost may have made a batch (the runner looks first)
        op = self.owner.gemini.call("POST", f"{model}:batchGenerateContent", {"batch": batch}, retry=False)
        return BatchView.of(op)

    def list(self, limit: int = 100) -> Iterator[BatchView]:
        for op in self.owner.gemini.pages("batches", "operations", page_size=limit):
            yield BatchView.of(op)

    def retrieve(self, batch_id: str) -> BatchView:
        return BatchView.of(self.owner.gemini.call("GET", batch_id))

    def cancel(self, batch_id: str) -> BatchView:
        self.owner.gemini.call("POST", f"{batch_id}:cancel", {}, retry=False)
        return self.retrieve(batch_id)


class GeminiBatches:
    """The Gemini batch API in the shape of the ``openai`` SDK's client, for :class:`BatchRunner`.

    Example:
        >>> api = GeminiBatches.at("http://127.0.0.1:9/v1beta/openai", "key", "gemini-2.5-flash")
        >>> api.gemini.base_url
        'http://127.0.0.1:9/v1beta'
    """

    def __init__(self, gemini: GeminiApi, model: str, max_reply_bytes: int = 10 << 20):
        self.gemini = gemini
        self.model = model
        self.max_reply_bytes = max_reply_bytes
        self.files = _Files(self)
        self.batches = _Batches(self)

    @classmethod
    def at(cls, base_url: str, api_key: str | None, model: str = "", max_reply_bytes: int = 10 << 20) -> GeminiBatches:
        return cls(GeminiApi(native_base(base_url), api_key), model, max_reply_bytes)

    @classmethod
    def of(cls, client: JudgeClient, api_key: str | None) -> GeminiBatches:
        return cls.at(client.base_url, api_key, client.model, client.settings.max_reply_bytes)

    def with_options(self, **_: Any) -> GeminiBatches:
        return self

    def close(self) -> None:
        pass

    def output_line(self, line: bytes) -> bytes:
        """One Gemini output line as an OpenAI output line (``custom_id``, ``response.body`` a chat completion,
        or ``error``); a line that is none is passed on as it is (the runner counts it)."""
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            return line if line.endswith(b"\n") else line + b"\n"
        if not isinstance(doc, dict) or not isinstance(doc.get("key"), str):
            return orjson.dumps(doc) + b"\n"
        out: dict[str, Any] = {"custom_id": doc["key"]}
        if isinstance(doc.get("response"), dict):
            out["response"] = {"status_code": 200, "body": to_chat_completion(doc["response"], self.model)}
        else:
            err = doc["error"] if isinstance(doc.get("error"), dict) else {}
            out["error"] = {"code": err.get("status") or err.get("code"), "message": err.get("message", "")}
        return orjson.dumps(out) + b"\n"


def is_gemini_batch(batch_id: str | None) -> bool:
    """Whether a batch id is Gemini's (``batches/...``; OpenAI's are ``batch_...``)."""
    return bool(batch_id) and str(batch_id).startswith("batches/")
