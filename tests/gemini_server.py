"""A Gemini API server for tests (loopback): its batch endpoints, with the judge's own replies.

    python tests/gemini_server.py --host 127.0.0.1 --port 0   # prints "PORT <n>"

It speaks the Gemini API's REST shapes as google-genai's ``client.files`` and ``client.batches`` send and
read them (google/genai/files.py, batches.py, types.py):

* ``POST /upload/v1beta/files``: the resumable upload (``X-Goog-Upload-Command: start`` answers an
  ``x-goog-upload-url``; ``upload, finalize`` to it stores the bytes and answers ``{"file": File}``);
  ``GET /v1beta/files`` (``{"files", "nextPageToken"}``), ``GET``/``DELETE /v1beta/files/{id}``,
  ``GET /v1beta/files/{id}:download?alt=media``;
* ``POST /v1beta/models/{model}:batchGenerateContent`` (``{"batch": {"displayName", "inputConfig":
  {"fileName"} | {"requests": {"requests": [InlinedRequest]}}}}``), ``GET /v1beta/batches`` (``operations``),
  ``GET /v1beta/batches/{id}``, ``POST /v1beta/batches/{id}:cancel``, ``DELETE /v1beta/batches/{id}``: a
  batch is an operation ``{"name": "batches/..", "metadata": GenerateContentBatch, "done"}`` whose
  ``state`` is ``BATCH_STATE_*`` and whose ``output`` is a ``responsesFile`` of ``{"key", "response" |
  "error"}`` lines (a file's input) or ``inlinedResponses`` (inlined requests');
* ``POST /v1beta/openai/chat/completions``: Google's OpenAI-compatible endpoint, answered as
  tests/judge_server.py answers (online Gemini).

A line's reply is the judge server's reply to the same prompt (the request turned back into a chat body),
as a ``GenerateContentResponse``: a batch run and an online run get equal replies.

Modes (``POST /_admin/config``): ``delay`` (seconds from a batch's creation to its end), ``fail_lines``
(every Nth line fails, on its request's first try), ``invalid_lines`` (every Nth line's reply is not JSON, on
its first try), ``filtered_lines`` (every Nth line's reply is blocked, ``SAFETY``, and its request's ever
after), ``expire`` (this many of the next batches expire with ``expire_done`` of their lines run),
``fail_batch`` (a message: the next batch fails as a whole, the operation's ``error``), ``hold_upload`` /
``hold_create`` / ``drop_held`` (as tests/batch_server.py's). ``GET /_admin/stats``:
uploads, creates, batches, ``paid`` (how many times each key was run), files left, online requests.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))
from batch_server_base import BATCH_DEFAULTS, BatchServiceBase, Stages, app, judge_reply, main, public  # noqa: E402
from judge_server import shape_usage  # noqa: E402

# fail_batch: the next batch fails as a whole (state FAILED, the operation's error)
DEFAULTS: dict = {**BATCH_DEFAULTS, "hold_upload": False}
_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"


def chat_body(request: dict, model: str) -> dict:
    """A ``GenerateContentRequest`` turned back into the chat body hf-judge would send online."""
    messages = []
    system = "".join(p.get("text", "") for p in (request.get("systemInstruction") or {}).get("parts", []))
    if system:
        messages.append({"role": "system", "content": system})
    for c in request.get("contents", []):
        parts = []
        for p in c.get("parts", []):
            if "text" in p:
                parts.append({"type": "text", "text": p["text"]})
            elif "inlineData" in p:
                d = p["inlineData"]
                parts.append({"type": "image_url", "image_url": {"url": f"data:{d['mimeType']};base64,{d['data']}"}})
            elif "fileData" in p:
                parts.append({"type": "image_url", "image_url": {"url": p["fileData"]["fileUri"]}})
        content = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
        messages.append({"role": "assistant" if c.get("role") == "model" else "user", "content": content})
    cfg = request.get("generationConfig") or {}
    body: dict = {"model": model, "messages": messages}
    if "responseJsonSchema" in cfg or "responseSchema" in cfg:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"schema": cfg.get("responseJsonSchema", cfg.get("responseSchema"))},
        }
    if cfg.get("responseLogprobs"):
        body.update(logprobs=True, top_logprobs=cfg.get("logprobs", 1))
    return body


def gemini_response(completion: dict) -> dict:
    """A chat completion as a ``GenerateContentResponse``."""
    choice = completion["choices"][0]
    cand: dict = {
        "content": {"role": "model", "parts": [{"text": choice["message"]["content"]}]},
        "finishReason": {"stop": "STOP", "length": "MAX_TOKENS"}.get(choice["finish_reason"], "OTHER"),
        "index": 0,
    }
    if choice["finish_reason"] == "content_filter":  # as Gemini blocks a reply: no content, its safety ratings
        cand = {
            "finishReason": "SAFETY",
            "index": 0,
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}],
        }
    lp = (choice.get("logprobs") or {}).get("content")
    if lp:
        cand["logprobsResult"] = {
            "chosenCandidates": [{"token": t["token"], "logProbability": t["logprob"]} for t in lp],
            "topCandidates": [
                {"candidates": [{"token": a["token"], "logProbability": a["logprob"]} for a in t["top_logprobs"]]}
                for t in lp
            ],
        }
    u = completion["usage"]
    return {
        "candidates": [cand],
        "usageMetadata": {
            "promptTokenCount": u["prompt_tokens"],
            "candidatesTokenCount": u["completion_tokens"],
            "totalTokenCount": u["total_tokens"],
        },
        "modelVersion": completion["model"],
        "responseId": uuid.uuid4().hex[:12],
    }


class GeminiService(BatchServiceBase):
    DEFAULTS = DEFAULTS
    STAGES = Stages(
        running="BATCH_STATE_RUNNING",
        cancelling="BATCH_STATE_CANCELLING",
        cancelable=frozenset({"BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_CANCELLING"}),
        ended=frozenset(
            {"BATCH_STATE_SUCCEEDED", "BATCH_STATE_EXPIRED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED"}
        ),
    )
    ID_PREFIX = "batches/"

    def reset(self) -> None:
        super().reset()
        self.files: dict[str, dict] = {}
        self.content: dict[str, bytes] = {}
        self.uploads: dict[str, dict] = {}
        self.stats.update(uploads=0, keys=[])

    def state(self, b: dict) -> str:
        return b["metadata"]["state"]

    def set_state(self, b: dict, state: str) -> None:
        b["metadata"]["state"] = state

    def not_found(self) -> web.Response:
        return _error(404, "NOT_FOUND", "no such batch")

    def cancel_reply(self, b: dict) -> web.Response:
        return web.json_response({})

    def stats_view(self) -> dict:
        inputs = sum(1 for f in self.files.values() if f["source"] == "UPLOADED")
        return dict(self.stats, files=len(self.files), inputs=inputs, online=self.judge.stats["requests"])

    def _key(self, request: web.Request) -> None:
        key = request.headers.get("x-goog-api-key", "")
        if key not in self.stats["keys"]:
            self.stats["keys"].append(key)

    # -- files ------------------------------------------------------------------
    def _file(self, data: bytes, display: str, mime: str, source: str = "UPLOADED") -> dict:
        name = f"files/{uuid.uuid4().hex[:12]}"
        now = _now()
        self.files[name] = {
            "name": name,
            "displayName": display,
            "mimeType": mime,
            "sizeBytes": str(len(data)),
            "createTime": now,
            "updateTime": now,
            "state": "ACTIVE",
            "source": source,
            **({"downloadUri": f"/v1beta/{name}:download?alt=media"} if source == "GENERATED" else {}),
        }
        self.content[name] = data
        return self.files[name]

    async def upload(self, request: web.Request) -> web.Response:
        command = request.headers.get("X-Goog-Upload-Command", "")
        if command == "start":  # the upload itself goes to the session's URL, which stands for the key
            self._key(request)
            meta = (await request.json()).get("file") or {}
            uid = uuid.uuid4().hex
            self.uploads[uid] = {  # proto JSON: a field in lowerCamelCase or as its proto name (the SDK's)
                "displayName": meta.get("displayName", meta.get("display_name", "")),
                "mimeType": request.headers.get("X-Goog-Upload-Header-Content-Type", "application/octet-stream"),
            }
            url = f"{request.scheme}://{request.host}/upload/v1beta/files?upload_id={uid}"
            return web.json_response({}, headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        uid = request.query.get("upload_id", "")
        if uid not in self.uploads or "finalize" not in command:
            return _error(400, "INVALID_ARGUMENT", "unknown upload or not finalized")
        data = await request.read()
        meta = self.uploads.pop(uid)
        self.stats["uploads"] += 1
        stored = self._file(data, meta["displayName"], meta["mimeType"])
        await self.hold("hold_upload")  # stored, but the caller has not heard so yet
        return web.json_response({"file": stored}, headers={"x-goog-upload-status": "final"})

    async def list_files(self, request: web.Request) -> web.Response:
        return web.json_response(_page(list(self.files.values()), request, "files"))

    async def get_file(self, request: web.Request) -> web.Response:
        f = self.files.get("files/" + request.match_info["id"])
        return web.json_response(f) if f else _error(404, "NOT_FOUND", "no such file")

    async def delete_file(self, request: web.Request) -> web.Response:
        name = "files/" + request.match_info["id"]
        if self.files.pop(name, None) is None:
            return _error(404, "NOT_FOUND", "no such file")
        self.content.pop(name, None)
        return web.json_response({})

    async def download(self, request: web.Request) -> web.Response:
        name = "files/" + request.match_info["id"]
        if name not in self.content:
            return _error(404, "NOT_FOUND", "no such file")
        return web.Response(body=self.content[name], content_type="application/octet-stream")

    # -- batches ----------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        self._key(request)
        model = request.match_info["model"]
        batch = (await request.json()).get("batch") or {}
        self.stats["creates"] += 1
        if await self.hold("hold_create") and self.config["drop_held"]:
            return _error(503, "UNAVAILABLE", "the server went away")
        source = batch.get("inputConfig") or {}
        if "fileName" in source:
            if source["fileName"] not in self.content:
                return _error(400, "INVALID_ARGUMENT", f"no input file {source['fileName']}")
            lines = [orjson.loads(x) for x in self.content[source["fileName"]].splitlines() if x.strip()]
        else:
            lines = [
                {"key": (r.get("metadata") or {}).get("key"), "request": r["request"], "_inline": r.get("metadata")}
                for r in (source.get("requests") or {}).get("requests", [])
            ]
        name = f"batches/{uuid.uuid4().hex[:12]}"
        b = {
            "name": name,
            "metadata": {
                "@type": _TYPE,
                "model": f"models/{model}",
                "displayName": batch.get("displayName", ""),
                "inputConfig": source if "fileName" in source else {"requests": {}},
                "createTime": _now(),
                "updateTime": _now(),
                "state": "BATCH_STATE_PENDING",
                "batchStats": {"requestCount": str(len(lines)), "pendingRequestCount": str(len(lines))},
            },
            "done": False,
            "_lines": lines,
            "_created": time.monotonic(),
            "_model": model,
        }
        message = self.take_fail_batch()
        if message:
            b["metadata"]["state"], b["done"] = "BATCH_STATE_FAILED", True
            b["error"] = {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
        else:
            self.arm_expiry(b)
        self.register(name, b)
        return web.json_response(public(b))

    def end(self, b: dict, cancelled: bool) -> None:
        meta = b["metadata"]
        if cancelled:
            meta["state"], b["done"] = "BATCH_STATE_CANCELLED", True
            return
        lines = b["_lines"]
        n = self.ran(b, len(lines))
        out, ok, failed = [], 0, 0
        for i, ln in enumerate(lines[:n], 1):
            result = self._run_line(ln, i, b["_model"])
            ok, failed = (ok + 1, failed) if "response" in result else (ok, failed + 1)
            out.append(result)
        inline = "_inline" in (lines[0] if lines else {})
        if inline:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": out}}
        else:
            data = b"".join(orjson.dumps(r) + b"\n" for r in out)
            meta["output"] = {
                "responsesFile": self._file(data, f"{b['name']}-responses", "application/jsonl", "GENERATED")["name"]
            }
        meta["batchStats"] = {
            "requestCount": str(len(lines)),
            "successfulRequestCount": str(ok),
            "failedRequestCount": str(failed),
            "pendingRequestCount": str(len(lines) - n),
        }
        meta["state"] = "BATCH_STATE_EXPIRED" if "_expire" in b else "BATCH_STATE_SUCCEEDED"
        meta["endTime"] = meta["updateTime"] = _now()
        b["done"] = True

    def _run_line(self, ln: dict, i: int, model: str) -> dict:
        key = ln.get("key")
        tries = self.pay(key)
        tag = {"metadata": ln["_inline"]} if "_inline" in ln else {"key": key}
        if self.fails(i, tries):
            return {**tag, "error": {"code": 13, "message": "Internal error encountered.", "status": "INTERNAL"}}
        # the judge's confidence rules are OpenAI-only: a Gemini reply's log-probabilities are the default ones
        body = chat_body(ln["request"], model)
        completion = judge_reply(
            self.judge, body, self.invalid(i, tries), confidence=False, filtered=self.filtered(key, i, tries)
        )
        response = shape_usage(gemini_response(completion), "usageMetadata", self.judge.config["usage"])
        return {**tag, "response": response}

    async def delete_batch(self, request: web.Request) -> web.Response:
        b = self.find(request)
        if b is None:
            return self.not_found()
        del self.batches[b["name"]]
        return web.json_response({})

    async def list_batches(self, request: web.Request) -> web.Response:
        ops = [public(b) for b in reversed(list(self.batches.values()))]
        return web.json_response(_page(ops, request, "operations"))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def _page(items: list[dict], request: web.Request, field: str) -> dict:
    """One page as the Gemini API pages a list: ``pageSize`` items from the ``pageToken`` (an offset here)."""
    start = int(request.query.get("pageToken") or 0)
    size = int(request.query.get("pageSize") or 50)
    page = {field: items[start : start + size]}
    if start + size < len(items):
        page["nextPageToken"] = str(start + size)
    return page


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message, "status": code}}, status=status)


def make_app() -> web.Application:
    svc = GeminiService()
    return app(
        svc,
        [
            web.post("/upload/v1beta/files", svc.upload),
            web.get("/v1beta/files", svc.list_files),
            web.get("/v1beta/files/{id}:download", svc.download),  # before /files/{id}, which would match it
            web.get("/v1beta/files/{id}", svc.get_file),
            web.delete("/v1beta/files/{id}", svc.delete_file),
            web.post("/v1beta/models/{model}:batchGenerateContent", svc.create),
            web.get("/v1beta/batches", svc.list_batches),
            web.get("/v1beta/batches/{id}", svc.get_batch),
            web.post("/v1beta/batches/{id}:cancel", svc.cancel),
            web.delete("/v1beta/batches/{id}", svc.delete_batch),
            web.post("/v1beta/openai/chat/completions", svc.judge.completions),
        ],
    )


if __name__ == "__main__":
    main(make_app, __doc__)
