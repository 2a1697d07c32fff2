"""An OpenAI-compatible judge server for tests and benchmarks, with fault injection.

    python tests/judge_server.py --host 127.0.0.1 --port 0   # prints "PORT <n>"

It answers ``/v1/chat/completions`` with a JSON object that has exactly the
requested schema's keys, whose values are a deterministic function of the
messages, so the same prompt always gets the same scores. ``POST
/_admin/config`` changes its behaviour (latency, admission limit, faults, see
``DEFAULTS``), ``POST /_admin/reset`` restores the defaults and clears the
stats, ``GET /_admin/stats`` returns what it received.

A request with ``logprobs: true`` gets ``choices[0].logprobs.content`` in
OpenAI's shape (config ``logprobs: false``: ``null``, as from a server without
them), by a fixed rule that tests can compute by hand (:func:`token_logprobs`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import hashlib
import math
import random
import re
import sys
import time
import zlib

import orjson
from aiohttp import web

DEFAULTS: dict = {
    "latency": 0.0,
    "latency_range": None,
    "tail": None,  # {"rate": 0.01, "seconds": 5.0}
    "max_concurrent": None,
    "over_limit_status": 429,
    "over_limit_retry_after": 1,
    "reject_json_schema": False,
    "reject_json_schema_status": 400,
    "models": None,
    "require_key": None,
    "overrides": {},
    # {"b": {"score": 11}}: replies to model "b" (one judge of a panel) carry these values, e.g. an out-of-range score
    "model_overrides": {},
    "n": "ignore",  # a request for n choices: "ignore" (one choice), "honour" (n choices), "refuse" (400)
    "attempt_scores": None,  # [4, 9, 9]: the n-th request of a prompt gets integer outputs [n-1 % len] (samples)
    # {"pattern": regex, "step": 20, "noise": 1}: a judge biased to length. The i-th integer output (in the schema's
    # order) is minimum + len(i-th match of the pattern in the prompt) // step, plus a noise in [-noise, noise] from
    # the prompt's hash, clipped to the range (one match: every output follows it; none: the usual hash values);
    # "model": "a" biases only the replies to that model (one judge of a panel)
    "length_scores": None,
    "text_reply": "ok",
    "record": False,
    "faults": [],
    "logprobs": True,  # False: never send token log-probabilities, even when asked
    # [{"match": "row-3", "p": 0.4}]: in replies to prompts holding "row-3", a digit that starts a number has
    # probability p and the next digit 1 - p (a score of 5 in 1-10: confidence exactly p); first rule that matches
    "confidence": [],
    # usage.prompt_tokens_details.cached_tokens: prompt prefixes seen before, in blocks of PREFIX_BLOCK characters
    "prefix_cache": False,
    "tokenize": True,  # POST /tokenize, vLLM's form: {"model", "messages"} -> {"count", "tokens", "max_model_len"}
    # a completion's usage: "reported" (counts), "omit" (no usage), "null", or its counts as "strings", "floats",
    # "negative" numbers (what a careless gateway sends: not to be trusted)
    "usage": "reported",
}
USAGE_FORMS = {"strings": str, "floats": lambda n: n + 0.5, "negative": lambda n: -n}


def shape_usage(reply: dict, key: str, form: str) -> dict:
    """``reply[key]`` (a reply's usage: OpenAI's ``usage``, Anthropic's, Gemini's ``usageMetadata``) in the
    config's ``usage`` form, in place: left out, null, or its counts as strings, fractions or negative numbers."""
    if form == "reported" or key not in reply:
        return reply
    if form == "omit":
        del reply[key]
    elif form == "null":
        reply[key] = None
    else:
        reply[key] = {k: USAGE_FORMS[form](v) if isinstance(v, int) else v for k, v in reply[key].items()}
    return reply


MAX_EVENTS = 200_000
PREFIX_BLOCK = 64  # characters: 16 tokens at this server's 4 characters a token
CHUNK = 64 * 1024
_TOKEN = re.compile(r"\d|[^\W\d]+|\s+|[^\w\s]")


def token_logprobs(content: str, top: int, p: float | None = None) -> list[dict]:
    """The reply's tokens and their ``top`` alternatives, by a rule that tests compute by hand.

    Tokens: each digit alone (as Llama and Gemma write numbers), runs of letters, runs of
    whitespace, any other character alone. A digit that starts a number: itself 0.6, the next
    digit (mod 10) 0.25, the one before 0.1, a space 0.05 (``p`` given: itself ``p``, the next
    digit ``1 - p``). A digit that continues one: itself 0.7, ``,`` 0.2, the digit 5 places on
    0.1. Any other token: itself, probability 1.
    """

    def entry(t: str, p: float) -> dict:
        return {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}

    out, prev = [], ""
    for tok in _TOKEN.findall(content):
        if tok.isdigit():
            d = int(tok)
            if prev.isdigit():
                alts = [(tok, 0.7), (",", 0.2), (str((d + 5) % 10), 0.1)]
            elif p is not None:
                alts = [(tok, p), (str((d + 1) % 10), 1 - p)]
            else:
                alts = [(tok, 0.6), (str((d + 1) % 10), 0.25), (str((d - 1) % 10), 0.1), (" ", 0.05)]
        else:
            alts = [(tok, 1.0)]
        prev = tok[-1]
        out.append({**entry(*alts[0]), "top_logprobs": [entry(t, p) for t, p in alts[:top]]})
    return out


def _new_stats() -> dict:
    return {
        "requests": 0,
        "ok": 0,
        "by_status": {},
        "by_fault": {},
        "max_inflight": 0,
        "inflight": 0,
        "events": [],
        "prompts": 0,
        "duplicates": 0,
        "bodies": [],
        "auth": [],
        "paths": [],
        "image_parts": 0,
        "tokenize": 0,
    }


class Judge:
    def __init__(self, config: dict | None = None):
        self.config = copy.deepcopy(DEFAULTS)
        self.config.update(config or {})
        self._bombs: dict[int, bytes] = {}
        self.reset_stats()

    def reset_stats(self) -> None:
        self.stats = _new_stats()
        self.attempts: dict[bytes, int] = {}
        self.answered: set[bytes] = set()
        self.prefixes: set[bytes] = set()
        self.t0 = time.monotonic()

    # -- helpers --------------------------------------------------------------
    @staticmethod
    def _value(text: str, key: str, spec: dict):
        h = int.from_bytes(hashlib.blake2b((text + "\x00" + key).encode(), digest_size=8).digest(), "big")
        if "enum" in spec:
            return spec["enum"][h % len(spec["enum"])]
        t = spec.get("type")
        if t == "integer":
            lo, hi = int(spec.get("minimum", 1)), int(spec.get("maximum", 10))
            return lo + h % (hi - lo + 1)
        if t == "number":
            lo, hi = float(spec.get("minimum", 0)), float(spec.get("maximum", 1))
            return lo + (h % 10_000) / 10_000 * (hi - lo)
        if t == "boolean":
            return bool(h % 2)
        return f"reason {h & 0xFFFFFFFF:08x}"

    def _length_scores(self, text: str, props: dict, model: str) -> dict:
        rule = self.config["length_scores"]
        found = re.findall(rule["pattern"], text)
        if not found or rule.get("model") not in (None, model):
            return {}
        noise, step = int(rule.get("noise", 0)), int(rule.get("step", 20))
        out = {}
        for i, k in enumerate(k for k, s in props.items() if s.get("type") == "integer"):
            spec = props[k]
            lo, hi = int(spec.get("minimum", 1)), int(spec.get("maximum", 10))
            h = int.from_bytes(hashlib.blake2b((text + "\x00" + k).encode(), digest_size=8).digest(), "big")
            shift = h % (2 * noise + 1) - noise if noise else 0
            out[k] = max(lo, min(hi, lo + len(found[min(i, len(found) - 1)]) // step + shift))
        return out

    def _reply_object(self, text: str, schema: dict, attempt: int = 1, model: str = "") -> dict:
        props = schema.get("properties", {})
        overrides = {**self.config["overrides"], **self.config["model_overrides"].get(model, {})}
        if self.config["length_scores"]:
            overrides = {**self._length_scores(text, props, model), **overrides}
        by_attempt = self.config["attempt_scores"]
        if by_attempt:
            score = by_attempt[(attempt - 1) % len(by_attempt)]
            overrides.update({k: score for k, s in props.items() if s.get("type") == "integer" and k not in overrides})
        return {k: overrides[k] if k in overrides else self._value(text, k, s) for k, s in props.items()}

    @staticmethod
    def _text(content, st: dict) -> str:
        """A message's text; OpenAI content parts count their images and stand for them by URL."""
        if not isinstance(content, list):
            return str(content or "")
        out = []
        for part in content:
            if part.get("type") == "image_url":
                st["image_parts"] += 1
                out.append(part["image_url"]["url"])
            else:
                out.append(part.get("text", ""))
        return "".join(out)

    @staticmethod
    def _error(
        status: int, message: str, code: str | None = None, headers: dict | None = None, type_: str | None = None
    ) -> web.Response:
        err = {"message": message, "type": type_ or ("invalid_request_error" if status < 500 else "server_error")}
        if code:
            err["code"] = code
        return web.Response(
            status=status, body=orjson.dumps({"error": err}), content_type="application/json", headers=headers
        )

    def _cached_tokens(self, text: str) -> int:
        """The tokens of ``text``'s leading blocks that an earlier prompt began with (a server's prefix cache)."""
        h = hashlib.blake2b(digest_size=16)
        hits, hitting = 0, True
        for i in range(len(text) // PREFIX_BLOCK):
            h.update(text[i * PREFIX_BLOCK : (i + 1) * PREFIX_BLOCK].encode())
            d = h.digest()
            if hitting and d in self.prefixes:
                hits += 1
            else:
                hitting = False
                self.prefixes.add(d)
        return hits * PREFIX_BLOCK // 4

    def confidence_for(self, text: str) -> float | None:
        """The first digit's probability the ``confidence`` rules give a reply to ``text`` (None: the default)."""
        return next((r["p"] for r in self.config["confidence"] if r.get("match", "") in text), None)

    @staticmethod
    def _completion_body(
        model: str, content, finish: str = "stop", prompt_len: int = 0, top: int | None = None, cached=None,
        p: float | None = None,
    ) -> bytes:  # fmt: skip
        n_out = max(1, len(content) // 4 if isinstance(content, str) else 1)
        n_in = max(1, prompt_len // 4)
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        }
        if top is not None:  # asked for: the tokens (where there is text and the config allows), else null
            lp = {"content": token_logprobs(content, top, p)} if top and isinstance(content, str) else None
            body["choices"][0]["logprobs"] = lp
        if cached is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": min(cached, n_in)}
        return orjson.dumps(body)

    def _completion(
        self, model: str, content, finish: str = "stop", prompt_len: int = 0, top: int | None = None, cached=None,
        p: float | None = None,
    ) -> web.Response:  # fmt: skip
        body = self._completion_body(model, content, finish, prompt_len, top, cached, p)
        if self.config["usage"] != "reported":
            doc = orjson.loads(body)
            shape_usage(doc, "usage", self.config["usage"])
            body = orjson.dumps(doc)
        return web.Response(body=body, content_type="application/json")

    async def _huge(self, request: web.BaseRequest, rule: dict, completion: bytes) -> web.StreamResponse:
        """A valid completion after ``size`` bytes of JSON whitespace, written 64 kB at a time (the server
        holds one shared buffer, not a copy per request); ``chunked``: no Content-Length; ``endless``: whitespace
        until the client hangs up."""
        size = int(rule.get("size", 100 * 1024 * 1024))
        endless = rule["fault"] == "endless_chunks"
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if endless or rule.get("chunked"):
            resp.enable_chunked_encoding()
        else:
            resp.content_length = size + len(completion)
        pad = memoryview(b" " * CHUNK)
        try:
            await resp.prepare(request)
            sent = 0
            while endless or sent < size:
                n = CHUNK if endless else min(CHUNK, size - sent)
                await resp.write(pad[:n])
                sent += n
            await resp.write(completion)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):  # the client hung up: what a capped client does
            pass
        return resp

    def _gzip_bomb(self, rule: dict, completion: bytes) -> web.Response:
        """A small gzip body that expands to ``size`` bytes of whitespace, then a valid completion
        (two gzip members: the padding, made once per size, and the completion)."""
        size = int(rule.get("size", 1024 * 1024 * 1024))
        bomb = self._bombs.get(size)
        if bomb is None:
            z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip framing
            pad = b" " * (1024 * 1024)
            parts = [z.compress(pad) for _ in range(size // len(pad))]
            parts += [z.compress(pad[: size % len(pad)]), z.flush()]
            bomb = self._bombs[size] = b"".join(parts)
        body = bomb + zlib.compress(completion, 9, wbits=31)
        return web.Response(body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    def _select_fault(self, text: str, phash: bytes, attempt: int, model: str = ""):
        for rule in self.config["faults"]:
            match = rule.get("match")
            if match is not None and match not in text:
                continue
            if rule.get("model") is not None and rule["model"] != model:  # one judge of a panel
                continue
            rate = rule.get("rate", 1.0)
            if rule.get("random"):
                if random.random() >= rate:
                    continue
            elif rate < 1.0 and int.from_bytes(phash[:8], "big") / 2**64 >= rate:
                continue
            limit = rule.get("attempts")
            if limit is not None and attempt > limit:
                continue
            return rule
        return None

    def _event(self, status: int, inflight: int) -> None:
        st = self.stats
        st["by_status"][str(status)] = st["by_status"].get(str(status), 0) + 1
        if len(st["events"]) < MAX_EVENTS:
            st["events"].append([round(time.monotonic() - self.t0, 4), status, inflight])

    # -- the endpoint -----------------------------------------------------------
    async def completions(self, request: web.BaseRequest) -> web.StreamResponse:
        # this request's stats: a request still in flight when a test resets the server (an earlier test's,
        # its client gone) counts in the old stats, not in the next test's prompts and duplicates
        st, answered = self.stats, self.answered
        cfg = self.config
        st["requests"] += 1
        st["inflight"] += 1
        inflight = st["inflight"]
        if inflight > st["max_inflight"]:
            st["max_inflight"] = inflight
        try:
            raw = await request.read()
            if cfg["max_concurrent"] is not None and inflight > cfg["max_concurrent"]:
                self._event(cfg["over_limit_status"], inflight)
                return self._error(
                    cfg["over_limit_status"],
                    "Rate limit reached: too many concurrent requests",
                    headers={"Retry-After": str(cfg["over_limit_retry_after"])},
                )
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self._event(400, inflight)
                return self._error(400, "invalid JSON body")
            auth = request.headers.get("Authorization", "")
            if cfg["record"] and len(st["bodies"]) < 100_000:
                st["bodies"].append(body)
                st["auth"].append(auth)
                st["paths"].append(request.path_qs)
            if cfg["require_key"] is not None and auth != f"Bearer {cfg['require_key']}":
                self._event(401, inflight)
                return self._error(401, "Incorrect API key provided", code="invalid_api_key")
            model = body.get("model", "")
            if cfg["models"] is not None and model not in cfg["models"]:
                self._event(404, inflight)
                return self._error(404, f"The model `{model}` does not exist", code="model_not_found")
            n = body.get("n") or 1
            if n > 1 and cfg["n"] == "refuse":
                self._event(400, inflight)
                return self._error(400, "Invalid value for 'n': this model supports only n=1")
            text = "".join(self._text(m.get("content"), st) for m in body.get("messages", []))
            phash = hashlib.blake2b(text.encode(), digest_size=16).digest()
            attempt = self.attempts.get(phash, 0) + 1
            self.attempts[phash] = attempt
            rf = body.get("response_format") or {}
            if rf.get("type") == "json_schema" and cfg["reject_json_schema"]:
                self._event(cfg["reject_json_schema_status"], inflight)
                return self._error(cfg["reject_json_schema_status"], "response_format json_schema is not supported")
            delay = cfg["latency"]
            if cfg["latency_range"]:
                delay = random.uniform(*cfg["latency_range"])
            tail = cfg["tail"]
            if tail and random.random() < tail.get("rate", 0):
                delay = tail["seconds"]
            rule = self._select_fault(text, phash, attempt, model)
            if rule is not None:
                kind = rule["fault"]
                st["by_fault"][kind] = st["by_fault"].get(kind, 0) + 1
                if kind == "delay":
                    delay = rule.get("seconds", 1.0)
                    rule = None
            if delay:
                await asyncio.sleep(delay)
            schema = (
                (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else rf.get("schema")
            )
            top = None  # logprobs not asked for; 0: asked for, none sent
            if body.get("logprobs"):
                top = int(body.get("top_logprobs") or 1) if cfg["logprobs"] else 0
            if rule is not None:
                resp = self._fault(rule, model, text, schema, inflight, request, top)
                if asyncio.iscoroutine(resp):
                    return await resp
                return self._more_choices(resp, n, text, schema, phash, top) if cfg["n"] == "honour" else resp
            if schema is None:
                content = cfg["text_reply"]
            else:
                content = orjson.dumps(self._reply_object(text, schema, attempt, model)).decode()
            self._event(200, inflight)
            st["ok"] += 1
            if phash in answered:
                st["duplicates"] += 1
            else:
                answered.add(phash)
                st["prompts"] = len(answered)
            cached = self._cached_tokens(text) if cfg["prefix_cache"] else None
            resp = self._completion(model, content, "stop", len(text), top, cached, self.confidence_for(text))
            return self._more_choices(resp, n, text, schema, phash, top) if cfg["n"] == "honour" else resp
        finally:
            st["inflight"] -= 1

    def _more_choices(self, resp, n: int, text: str, schema: dict | None, phash: bytes, top: int | None = None):
        """A completion with n choices: the first as answered, each other one the reply to the prompt's next
        attempt (so `attempt_scores` gives choice i the score of attempt + i), with its own logprobs if asked."""
        if n <= 1 or resp.status != 200 or schema is None:
            return resp
        doc = orjson.loads(resp.body)
        if not isinstance(doc, dict) or not doc.get("choices"):
            return resp
        first = self.attempts[phash]
        for i in range(1, n):
            content = orjson.dumps(self._reply_object(text, schema, first + i, doc.get("model", ""))).decode()
            choice = {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            if top is not None:
                choice["logprobs"] = {"content": token_logprobs(content, top)} if top else None
            doc["choices"].append(choice)
        self.attempts[phash] = first + n - 1
        return web.Response(body=orjson.dumps(doc), content_type="application/json")

    def _fault(
        self,
        rule: dict,
        model: str,
        text: str,
        schema: dict | None,
        inflight: int,
        request: web.BaseRequest,
        top: int | None = None,
    ):
        kind = rule["fault"]
        if kind == "status":
            status = rule.get("status", 500)
            headers = {}
            if rule.get("retry_after") is not None:
                headers["Retry-After"] = str(rule["retry_after"])
            if rule.get("retry_after_ms") is not None:
                headers["retry-after-ms"] = str(rule["retry_after_ms"])
            default = "This model's maximum context length is 8192 tokens" if status == 400 else f"error {status}"
            self._event(status, inflight)
            return self._error(
                status, rule.get("message", default), code=rule.get("code"), headers=headers, type_=rule.get("type")
            )
        if kind == "reset":
            self._event(0, inflight)
            request.transport.close()
            raise ConnectionResetError("reset by fault injection")
        if kind == "invalid_body":
            self._event(200, inflight)
            return web.Response(body=b"<html>gateway</html>", content_type="text/html")
        if kind == "no_choices":
            self._event(200, inflight)
            return web.Response(body=orjson.dumps({"id": "x", "choices": []}), content_type="application/json")
        obj = self._reply_object(text, schema or {"properties": {"score": {"type": "integer"}}}, model=model)
        ints = [k for k, s in (schema or {}).get("properties", {}).items() if s.get("type") == "integer"]
        finish = "stop"
        if kind == "malformed_json":
            content = '{"score": 7, "reason": '
        elif kind == "wrong_keys":
            content = orjson.dumps({f"x_{k}": v for k, v in obj.items()}).decode()
        elif kind == "extra_key":
            content = orjson.dumps({**obj, "extra": 1}).decode()
        elif kind == "missing_key":
            content = orjson.dumps(dict(list(obj.items())[:-1])).decode()
        elif kind in ("out_of_range", "float_score", "string_score", "bool_score"):
            props = (schema or {}).get("properties", {})
            for k in ints:
                obj[k] = {
                    "out_of_range": props[k].get("maximum", 10) + 1,
                    "float_score": 7.9,
                    "string_score": "8",
                    "bool_score": True,
                }[kind]
            content = orjson.dumps(obj).decode()
        elif kind == "finish_length":
            full = orjson.dumps(obj).decode()
            content, finish = full[: len(full) // 2], "length"
        elif kind == "content_filter":
            content, finish = "", "content_filter"
        elif kind == "empty":
            content = None
        elif kind == "text":
            content = rule.get("text", "")
        elif kind == "echo_auth":  # a judge quoting the Authorization header it got, and what Basic auth decodes to
            auth = request.headers.get("Authorization", "")
            scheme, _, value = auth.partition(" ")
            decoded = base64.b64decode(value).decode("utf-8", "replace") if scheme == "Basic" else ""
            content = f"not json: you sent Authorization: {auth} ({decoded}) and {value}"
        elif kind == "list_content":  # the valid reply as content parts
            full = orjson.dumps(obj).decode()
            half = len(full) // 2
            content = [{"type": "text", "text": full[:half]}, {"type": "text", "text": full[half:]}]
        elif kind == "raw_content":  # message.content exactly as given: a dict, an int, a list of anything
            content = rule.get("content")
        elif kind == "raw_message":  # choices[0].message exactly as given
            self._event(200, inflight)
            body = {"choices": [{"index": 0, "message": rule.get("message"), "finish_reason": "stop"}]}
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        elif kind in ("huge_body", "endless_chunks", "gzip_bomb"):
            self._event(200, inflight)
            completion = self._completion_body(model, orjson.dumps(obj).decode(), finish, len(text))
            if kind == "gzip_bomb":
                return self._gzip_bomb(rule, completion)
            return self._huge(request, rule, completion)
        else:
            return self._error(500, f"unknown fault {kind}")
        self._event(200, inflight)
        return self._completion(model, content, finish, len(text), top)

    async def tokenize(self, request: web.BaseRequest) -> web.Response:
        """vLLM's /tokenize for chat messages; the count is this server's usage.prompt_tokens for them."""
        if not self.config["tokenize"]:
            return web.Response(status=404, text="no route POST /tokenize")
        body = orjson.loads(await request.read())
        self.stats["tokenize"] += 1
        text = "".join(self._text(m.get("content"), {"image_parts": 0}) for m in body.get("messages", []))
        n = max(1, len(text) // 4)
        return web.json_response({"count": n, "max_model_len": 131072, "tokens": list(range(n))})

    # -- admin ------------------------------------------------------------------
    async def models(self, request: web.BaseRequest) -> web.Response:
        names = self.config["models"] or ["judge"]
        return web.json_response(
            {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in names]}
        )

    async def admin_config(self, request: web.BaseRequest) -> web.Response:
        self.config.update(await request.json() if request.can_read_body else {})
        return web.Response(body=orjson.dumps(self.config), content_type="application/json")

    async def admin_reset(self, request: web.BaseRequest) -> web.Response:
        self.config = copy.deepcopy(DEFAULTS)
        self.reset_stats()
        return web.json_response({"ok": True})

    async def admin_stats(self, request: web.BaseRequest) -> web.Response:
        return web.Response(body=orjson.dumps(self.stats), content_type="application/json")


def make_server(config: dict | None = None) -> web.Server:
    """aiohttp's low-level server with a table of routes: the benchmarks measure
    clients, so the server spends as little as it can per request (the router
    and application layers cost ~5 % of its CPU)."""
    judge = Judge(config)
    routes = {
        ("POST", "/_admin/config"): judge.admin_config,
        ("POST", "/_admin/reset"): judge.admin_reset,
        ("GET", "/_admin/stats"): judge.admin_stats,
        ("POST", "/tokenize"): judge.tokenize,
    }
    for prefix in ("/v1", ""):
        routes["POST", prefix + "/chat/completions"] = judge.completions
        routes["GET", prefix + "/models"] = judge.models
    loop = asyncio.get_running_loop()

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        route = routes.get((request.method, request.path))
        if route is None:
            return web.Response(status=404, text=f"no route {request.method} {request.path}")
        return await route(request)

    def make_request(message, payload, protocol, writer, task) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=64 * 1024 * 1024)

    return web.Server(handle, request_factory=make_request)


async def _serve(host: str, port: int, config: dict) -> None:
    runner = web.ServerRunner(make_server(config), access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - the port the OS picked
    print(f"PORT {bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--config", default="{}", help="initial config as JSON")
    args = ap.parse_args()
    config = orjson.loads(args.config)
    config.setdefault("latency", args.latency)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    import logging
    import signal

    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # the reset fault is on purpose
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(_serve(args.host, args.port, config))
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
