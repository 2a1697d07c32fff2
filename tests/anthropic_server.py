"""An Anthropic-compatible server for tests and benchmarks (loopback): Messages and Message Batches.

    python tests/anthropic_server.py --host 127.0.0.1 --port 0   # prints "PORT <n>"

It speaks Anthropic's wire format (shapes from the ``anthropic`` SDK's types: ``Message``, ``MessageBatch``,
``MessageBatchIndividualResponse``, ``ErrorResponse``): ``POST /v1/messages`` online,
``POST /v1/messages/count_tokens``, and ``/v1/messages/batches`` (create, retrieve, list, cancel, delete,
``results``). A reply's values are the judge server's deterministic
function of the prompt (tests/judge_server.py, imported), read against the schema of ``output_config.format``
or of the forced tool, so an online run and a batch run get equal replies, and a run against
tests/judge_server.py the same scores.

Requests are checked as the API checks them (``x-api-key`` and ``anthropic-version`` headers, ``model``,
``max_tokens``, ``messages``, a batch's ``custom_id`` pattern and uniqueness). Prompt caching: a system
block or tool with ``cache_control`` is written to the cache on its first use and read from it after
(``cache_creation_input_tokens``, ``cache_read_input_tokens``, at 4 characters a token).

``POST /_admin/config`` sets the modes (``DEFAULTS``), ``POST /_admin/reset`` restores them and clears
everything, ``GET /_admin/stats`` returns counters: requests, bodies (with ``record``), batches created, how
many times each request (``custom_id``) was run, that is paid for.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import re
import sys
import time
import uuid
from pathlib import Path

import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))
from batch_server_base import BATCH_DEFAULTS, BatchServiceBase, Stages, after, app, main, public  # noqa: E402
from judge_server import shape_usage  # noqa: E402

DEFAULTS: dict = {
    # -- online and batch lines
    "latency": 0.0,
    "overloaded": 0,  # the first N tries of each prompt get 529 overloaded_error
    "rate_limited": 0,  # the next N tries of each prompt get 429 rate_limit_error with retry-after
    "retry_after": "0",
    "invalid_first": False,  # the first try of each prompt past those faults gets a reply that is not JSON
    "reject_output_config": False,  # 400 for output_config.format (a model without structured outputs)
    "require_key": None,
    "models": None,  # model names that exist (else 404 not_found_error)
    "record": False,
    "overrides": {},
    "usage": "reported",  # a Message's usage: "omit", "null", or counts as "strings", "floats", "negative" numbers
    # -- batches: fail_lines: an api_error result; expire: part of a batch's requests expired; drop_held: a 529
    # either way, having made no batch or, false, having made it; fail_batch: the create refused with it (400)
    **BATCH_DEFAULTS,
    "overload_create": 0,  # the next N batch creates get 529
}
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _error(status: int, type_: str, message: str, headers: dict | None = None) -> web.Response:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": f"req_{uuid.uuid4().hex[:12]}"}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)


class Anthropic(BatchServiceBase):
    DEFAULTS = DEFAULTS
    STAGES = Stages(
        running="in_progress",
        cancelling="canceling",
        cancelable=frozenset({"in_progress"}),
        ended=frozenset({"ended"}),
    )

    def reset(self) -> None:
        super().reset()  # self.tries: of each prompt's hash and each batch line's custom_id, in bytes
        self.cached: set[bytes] = set()
        self.stats.update(requests=0, ok=0, by_status={}, bodies=[], headers=[], lists=0, cache_read=0)
        self.stats.update(cache_creation=0, count_tokens=0, counted=0)  # count_tokens requests, the tokens answered

    def state(self, b: dict) -> str:
        return b["processing_status"]

    def set_state(self, b: dict, state: str) -> None:
        b["processing_status"] = state
        if state == "canceling":
            b["cancel_initiated_at"] = _now()

    def not_found(self) -> web.Response:
        return _error(404, "not_found_error", "No such message batch")

    # -- one request ---------------------------------------------------------------
    def check(self, params: dict) -> tuple[int, str, str] | None:
        """What the API would refuse in a Messages body: (status, error type, message), or None."""
        if not isinstance(params.get("model"), str):
            return 400, "invalid_request_error", "model: Field required"
        if not isinstance(params.get("max_tokens"), int):
            return 400, "invalid_request_error", "max_tokens: Field required"
        messages = params.get("messages")
        if not isinstance(messages, list) or not messages or any(m.get("role") == "system" for m in messages):
            return 400, "invalid_request_error", "messages: roles must be user or assistant (system is top-level)"
        for extra in ("temperature", "top_p", "response_format", "n"):  # not in the SDK's MessageCreateParams
            if extra in params:
                return 400, "invalid_request_error", f"{extra}: Extra inputs are not permitted"
        if "output_config" in params and self.config["reject_output_config"]:
            return 400, "invalid_request_error", "output_config.format: structured outputs are not supported"
        models = self.config["models"]
        if models is not None and params["model"] not in models:
            return 404, "not_found_error", f"model: {params['model']}"
        return None

    @staticmethod
    def _text(blocks) -> str:
        if isinstance(blocks, str):
            return blocks
        out = []
        for b in blocks or []:
            if b.get("type") == "image":
                src = b["source"]
                out.append(src.get("url") or f"data:{src.get('media_type')};base64,{src.get('data')}")
            else:
                out.append(b.get("text", ""))
        return "".join(out)

    def prompt(self, params: dict) -> tuple[str, str]:
        """(system text, the whole prompt's text) as the judge server reads an OpenAI body's messages."""
        system = self._text(params.get("system"))
        return system, system + "".join(self._text(m.get("content")) for m in params["messages"])

    def run(self, params: dict, batch_line: int = 0) -> tuple[int, dict, dict | None]:
        """(status, body, headers) of one Messages request (online, or a batch's line ``batch_line``)."""
        cfg = self.config
        refused = self.check(params)
        if refused is not None:
            return refused[0], _error_body(refused[1], refused[2]), None
        system, text = self.prompt(params)
        phash = hashlib.blake2b(text.encode(), digest_size=16).digest()
        self.tries[phash] = tries = self.tries.get(phash, 0) + 1
        if tries <= cfg["overloaded"]:
            return 529, _error_body("overloaded_error", "Overloaded"), None
        if tries <= cfg["overloaded"] + cfg["rate_limited"]:
            return 429, _error_body("rate_limit_error", "rate limited"), {"retry-after": cfg["retry_after"]}
        fmt = (params.get("output_config") or {}).get("format") or {}
        tools = params.get("tools") or []
        choice = params.get("tool_choice") or {}
        tool = next((t for t in tools if t.get("name") == choice.get("name")), None)
        schema = fmt.get("schema") if fmt.get("type") == "json_schema" else (tool or {}).get("input_schema")
        invalid = (cfg["invalid_first"] and tries == cfg["overloaded"] + cfg["rate_limited"] + 1) or (
            batch_line and self.invalid(batch_line, tries)
        )
        obj = self.judge._reply_object(text, _limits(schema or {}))
        if invalid:
            content = [{"type": "text", "text": "this is not JSON"}]
        elif tool is not None and choice.get("type") == "tool":
            content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": tool["name"], "input": obj}]
        else:
            content = [{"type": "text", "text": orjson.dumps(obj).decode()}]
        usage = self._usage(params, system, text)
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": params["model"],
            "content": content,
            "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        self.stats["ok"] += 1
        return 200, shape_usage(message, "usage", self.config["usage"]), None

    @staticmethod
    def tokens(params: dict) -> int:
        """A request's input tokens, at 4 characters each: the tools' JSON, the system and the messages' text (what
        ``count_tokens`` answers and a reply's usage adds up to)."""
        seen = "".join(orjson.dumps(t).decode() for t in params.get("tools") or [])
        blocks = params.get("system")
        seen += "".join(b.get("text", "") for b in (blocks if isinstance(blocks, list) else [{"text": blocks or ""}]))
        for m in params["messages"]:
            content = m["content"]
            seen += "".join(b.get("text", "") for b in (content if isinstance(content, list) else [{"text": content}]))
        return max(1, len(seen) // 4)

    async def count_tokens(self, request: web.BaseRequest) -> web.Response:
        """``POST /v1/messages/count_tokens``: the Messages body without ``max_tokens``; ``{"input_tokens": N}``."""
        refused = self._auth(request)
        if refused is not None:
            return refused
        params = orjson.loads(await request.read())
        if not isinstance(params.get("model"), str) or not isinstance(params.get("messages"), list):
            return _error(400, "invalid_request_error", "model and messages: Field required")
        if "max_tokens" in params:  # not in the SDK's MessageCountTokensParams
            return _error(400, "invalid_request_error", "max_tokens: Extra inputs are not permitted")
        n = self.tokens(params)
        self.stats["count_tokens"] += 1
        self.stats["counted"] += n
        return web.json_response({"input_tokens": n})

    def _usage(self, params: dict, system: str, text: str) -> dict:
        """Tokens at 4 characters each; a cache_control prefix (tools, then system) is written once, then read."""
        # the prompt in the API's cache order (tools, system, messages), up to its last cache_control block
        prefix, seen = "", ""
        for t in params.get("tools") or []:
            seen += orjson.dumps(t).decode()
            prefix = seen if "cache_control" in t else prefix
        blocks = params.get("system")
        for b in blocks if isinstance(blocks, list) else [{"text": blocks or ""}]:
            seen += b.get("text", "")
            prefix = seen if "cache_control" in b else prefix
        for m in params["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]:
                seen += b.get("text", "")
                prefix = seen if "cache_control" in b else prefix
        read = write = 0
        if prefix:
            key = hashlib.blake2b((params["model"] + "\0" + prefix).encode(), digest_size=16).digest()
            if key in self.cached:
                read = len(prefix) // 4
            else:
                self.cached.add(key)
                write = len(prefix) // 4
        self.stats["cache_read"] += read
        self.stats["cache_creation"] += write
        total = self.tokens(params)
        return {
            "input_tokens": max(0, total - read - write),
            "output_tokens": 20,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "service_tier": "standard",
        }

    def _auth(self, request: web.BaseRequest) -> web.Response | None:
        cfg = self.config
        if "anthropic-version" not in request.headers:
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        if cfg["require_key"] is not None and request.headers.get("x-api-key") != cfg["require_key"]:
            return _error(401, "authentication_error", "invalid x-api-key")
        return None

    async def messages(self, request: web.BaseRequest) -> web.Response:
        st = self.stats
        st["requests"] += 1
        refused = self._auth(request)
        try:
            params = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "invalid_request_error", "the body is not JSON")
        if self.config["record"]:
            st["bodies"].append(params)
            st["headers"].append({k.lower(): v for k, v in request.headers.items() if k.lower() != "content-length"})
        if refused is not None:
            st["by_status"]["401"] = st["by_status"].get("401", 0) + 1
            return refused
        if self.config["latency"]:
            await asyncio.sleep(self.config["latency"])
        status, body, headers = self.run(params)
        st["by_status"][str(status)] = st["by_status"].get(str(status), 0) + 1
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)

    # -- batches ------------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        refused = self._auth(request)
        if refused is not None:
            return refused
        cfg = self.config
        body = await request.json()
        self.stats["creates"] += 1
        if cfg["overload_create"] > 0:
            cfg["overload_create"] -= 1
            return _error(529, "overloaded_error", "Overloaded")
        message = self.take_fail_batch()
        if message:
            return _error(400, "invalid_request_error", message)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return _error(400, "invalid_request_error", "requests: Field required")
        seen = set()
        for i, r in enumerate(requests):
            cid = r.get("custom_id")
            if not isinstance(cid, str) or not _CUSTOM_ID.fullmatch(cid):
                return _error(400, "invalid_request_error", f"requests.{i}.custom_id: String should match pattern")
            if cid in seen:
                return _error(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate custom_id {cid}")
            seen.add(cid)
            if not isinstance(r.get("params"), dict) or not isinstance(r["params"].get("max_tokens"), int):
                return _error(400, "invalid_request_error", f"requests.{i}.params.max_tokens: Field required")
        held = await self.hold("hold_create")
        bid = f"msgbatch_{uuid.uuid4().hex[:24]}"
        b = {
            "id": bid,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None,
            "created_at": _now(),
            "expires_at": _now(),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
            "_created": time.monotonic(),
            "_requests": requests,
            "_base": f"{request.scheme}://{request.host}",
        }
        self.arm_expiry(b)
        if not (held and cfg["drop_held"]):
            self.register(bid, b)
        if held:  # the caller died, or the connection broke, before the reply
            return _error(529, "overloaded_error", "the server went away")
        return web.json_response(public(b))

    def end(self, b: dict, cancelled: bool) -> None:
        requests = b.pop("_requests")
        n = 0 if cancelled else self.ran(b, len(requests))
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        lines = []
        for i, r in enumerate(requests, 1):
            cid = r["custom_id"]
            if i > n:
                kind = "canceled" if cancelled else "expired"
                result: dict = {"type": kind}
            else:
                result = self._line(r["params"], i, cid)
            counts[result["type"]] += 1
            lines.append({"custom_id": cid, "result": result})
        b["_results"] = b"".join(orjson.dumps(x) + b"\n" for x in lines)
        b["request_counts"] = counts
        b["processing_status"] = "ended"
        b["ended_at"] = _now()
        b["results_url"] = f"{b['_base']}/v1/messages/batches/{b['id']}/results"

    def _line(self, params: dict, i: int, cid: str) -> dict:
        tries = self.pay(cid, cid.encode())
        if self.fails(i, tries):
            return {"type": "errored", "error": _error_body("api_error", "Internal server error")}
        status, body, _ = self.run(params, batch_line=i)
        if status != 200:
            return {"type": "errored", "error": body}
        return {"type": "succeeded", "message": body}

    async def results(self, request: web.Request) -> web.Response:
        b = self.find(request)
        if b is None or "_results" not in b:
            return _error(404, "not_found_error", "No results for this message batch (yet)")
        return web.Response(body=b["_results"], content_type="application/binary")

    async def delete(self, request: web.Request) -> web.Response:
        b = self.find(request)
        if b is None:
            return self.not_found()
        if b["processing_status"] != "ended":
            return _error(400, "invalid_request_error", "a batch in progress cannot be deleted; cancel it first")
        del self.batches[b["id"]]
        return web.json_response({"id": b["id"], "type": "message_batch_deleted"})

    async def list_batches(self, request: web.Request) -> web.Response:
        """Newest first, as the API lists them; ``after_id`` pages on, ``limit`` (default 20) items a page."""
        self.stats["lists"] += 1
        data = after([public(b) for b in reversed(list(self.batches.values()))], request.query.get("after_id"))
        limit = int(request.query.get("limit", 20))
        page = data[:limit]
        return web.json_response(
            {
                "data": page,
                "has_more": len(data) > limit,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
        )

    async def admin_config(self, request: web.Request) -> web.Response:
        """Every mode is this server's; the judge only lends its replies, with ``overrides``."""
        values = await request.json()
        self.config.update(values)
        self.judge.config["overrides"] = self.config["overrides"]
        return web.json_response(self.config)


def _limits(schema: dict) -> dict:
    """The schema with the limits output_config's form moved into descriptions put back (as a model reads them)."""
    props = {}
    for k, spec in (schema.get("properties") or {}).items():
        found = re.search(r"\{minimum: (-?\d+), maximum: (-?\d+)\}", spec.get("description", ""))
        props[k] = {**spec, "minimum": int(found[1]), "maximum": int(found[2])} if found else spec
    return {**schema, "properties": props}


def _error_body(type_: str, message: str) -> dict:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": None}


def make_app() -> web.Application:
    svc = Anthropic()
    return app(
        svc,
        [
            web.post("/v1/messages", svc.messages),
            web.post("/v1/messages/count_tokens", svc.count_tokens),
            web.post("/v1/messages/batches", svc.create),
            web.get("/v1/messages/batches", svc.list_batches),
            web.get("/v1/messages/batches/{id}", svc.get_batch),
            web.get("/v1/messages/batches/{id}/results", svc.results),
            web.post("/v1/messages/batches/{id}/cancel", svc.cancel),
            web.delete("/v1/messages/batches/{id}", svc.delete),
        ],
    )


if __name__ == "__main__":
    main(make_app, __doc__, backlog=4096)
