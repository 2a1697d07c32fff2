"""What the loopback batch servers share: the fault modes, a batch's life, the state, the admin endpoints and
the HTTP plumbing (tests/batch_server.py: OpenAI, tests/anthropic_server.py: Anthropic, tests/gemini_server.py:
Gemini). Each server keeps its own wire format: its routes, its shapes, its names for a batch's states; this
module only runs what the three do alike.

A batch's life, as each provider names its stages (:class:`Stages`): made (or refused, or failed as a whole
with ``fail_batch``), running until ``delay`` seconds have passed since its creation (the delay as configured
at the poll), then ended: every line run, or ``expire_done`` of them where ``expire`` armed it. A cancel
marks a running batch; its next poll ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))
from judge_server import DEFAULTS as JUDGE_DEFAULTS  # noqa: E402
from judge_server import Judge  # noqa: E402

BATCH_DEFAULTS: dict = {
    "delay": 0.0,  # seconds from a batch's creation to its end
    "fail_lines": 0,  # every Nth line of a batch fails, on its request's first try
    "invalid_lines": 0,  # every Nth line's reply is not JSON, on its request's first try
    "filtered_lines": 0,  # every Nth line's reply is withheld by the content filter, and its request's ever after
    "expire": 0,  # this many of the next batches expire, with `expire_done` of their lines run
    "expire_done": 0.5,
    "fail_batch": None,  # a message: the next batch is refused or fails as a whole
    "hold_create": False,  # a batch create waits while this is true...
    "drop_held": True,  # ...and then makes no batch (the caller died first) or, false, makes it
}


@dataclass(frozen=True)
class Stages:
    """A provider's names for a batch's stages."""

    running: str  # what a poll before the delay is over shows
    cancelling: str  # a cancel asked for, not yet seen by a poll
    cancelable: frozenset[str]  # the states a cancel marks ``cancelling``
    ended: frozenset[str]  # the states a poll leaves as they are


class BatchServiceBase:
    """One provider's batch service: subclasses name the stages, read and write a batch's state, and end it."""

    DEFAULTS: dict = BATCH_DEFAULTS
    STAGES: Stages
    ID_PREFIX = ""  # what a batch's name has before the {id} of its URL

    def __init__(self) -> None:
        self.judge = Judge()
        self.reset()

    def reset(self) -> None:
        self.config = copy.deepcopy(self.DEFAULTS)
        self.batches: dict[str, dict] = {}
        self.tries: dict = {}
        self.blocked: set = set()  # the requests the content filter withholds (filtered_lines)
        self.stats: dict = {"creates": 0, "batches": 0, "paid": {}, "cancels": 0}
        self.judge.config = copy.deepcopy(JUDGE_DEFAULTS)
        self.judge.reset_stats()

    # -- what each provider says its own way --------------------------------------
    def state(self, b: dict) -> str:
        raise NotImplementedError

    def set_state(self, b: dict, state: str) -> None:
        raise NotImplementedError

    def end(self, b: dict, cancelled: bool) -> None:
        """End ``b``: its lines run (as many as :meth:`ran` says), or, ``cancelled``, none of them."""
        raise NotImplementedError

    def not_found(self) -> web.Response:
        raise NotImplementedError

    def cancel_reply(self, b: dict) -> web.Response:
        return web.json_response(public(b))

    def stats_view(self) -> dict:
        return self.stats

    # -- the faults -----------------------------------------------------------------
    async def hold(self, mode: str) -> bool:
        """Wait while the mode ``mode`` (``hold_create``, ``hold_upload``) is on; whether it was."""
        held = False
        while self.config[mode]:
            held = True
            await asyncio.sleep(0.02)
        return held

    def take_fail_batch(self) -> str | None:
        """``fail_batch``'s message, taken (it fails one batch), or None."""
        message = self.config["fail_batch"]
        if not message:
            return None
        self.config["fail_batch"] = None
        return message

    def arm_expiry(self, b: dict) -> None:
        """``b`` expires with ``expire_done`` of its lines run, if ``expire`` has batches left."""
        if self.config["expire"] > 0:
            self.config["expire"] -= 1
            b["_expire"] = self.config["expire_done"]

    def pay(self, key: str, tries_key=None) -> int:
        """A line of request ``key`` run (paid for); its tries so far, this one included."""
        tk = key if tries_key is None else tries_key
        self.tries[tk] = tries = self.tries.get(tk, 0) + 1
        self.stats["paid"][key] = self.stats["paid"].get(key, 0) + 1
        return tries

    def fails(self, i: int, tries: int) -> bool:
        """Line ``i`` fails (``fail_lines``): on its request's first try."""
        return bool(self.config["fail_lines"] and i % self.config["fail_lines"] == 0 and tries == 1)

    def filtered(self, key: str, i: int, tries: int) -> bool:
        """Line ``i``'s reply is content-filtered (``filtered_lines``, on its request's first try), and so is every
        later try of its request ``key``, wherever its line is: a filter says the same of the same prompt."""
        n = self.config["filtered_lines"]
        if n and i % n == 0 and tries == 1:
            self.blocked.add(key)
        return key in self.blocked

    def invalid(self, i: int, tries: int) -> bool:
        """Line ``i``'s reply is not JSON (``invalid_lines``): on its request's first try."""
        return bool(self.config["invalid_lines"] and i % self.config["invalid_lines"] == 0 and tries == 1)

    # -- a batch's life ---------------------------------------------------------------
    def register(self, key: str, b: dict) -> None:
        b.setdefault("_created", time.monotonic())
        self.batches[key] = b
        self.stats["batches"] += 1

    @staticmethod
    def ran(b: dict, total: int) -> int:
        """How many of ``b``'s ``total`` lines run: all, or ``expire_done`` of them where it expires."""
        return int(total * b["_expire"]) if "_expire" in b else total

    def advance(self, b: dict) -> None:
        """``b`` as a poll finds it: running until the delay is over, then ended."""
        st = self.STAGES
        state = self.state(b)
        if state in st.ended:
            return
        if state == st.cancelling:
            self.end(b, cancelled=True)
        elif time.monotonic() < b["_created"] + self.config["delay"]:  # the delay as configured now
            self.set_state(b, st.running)
        else:
            self.end(b, cancelled=False)

    def find(self, request: web.Request) -> dict | None:
        return self.batches.get(self.ID_PREFIX + request.match_info["id"])

    async def get_batch(self, request: web.Request) -> web.Response:
        b = self.find(request)
        if b is None:
            return self.not_found()
        self.advance(b)
        return web.json_response(public(b))

    async def cancel(self, request: web.Request) -> web.Response:
        b = self.find(request)
        if b is None:
            return self.not_found()
        self.stats["cancels"] += 1
        if self.state(b) in self.STAGES.cancelable:
            self.set_state(b, self.STAGES.cancelling)
        return self.cancel_reply(b)

    # -- admin ----------------------------------------------------------------------
    async def admin_config(self, request: web.Request) -> web.Response:
        """A judge server's mode (``overrides``...) goes to the judge, unless this server has one of that name."""
        values = await request.json()
        own = self.DEFAULTS
        self.judge.config.update({k: v for k, v in values.items() if k in JUDGE_DEFAULTS and k not in own})
        self.config.update({k: v for k, v in values.items() if k not in JUDGE_DEFAULTS or k in own})
        return web.json_response(self.config)

    async def admin_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def admin_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats_view())


def public(b: dict) -> dict:
    """A batch as the API shows it: without the server's own ``_`` fields."""
    return {k: v for k, v in b.items() if not k.startswith("_")}


def after(items: list[dict], cursor: str | None) -> list[dict]:
    """The items after the one whose id is ``cursor`` (a list's cursor paging); none for an unknown cursor."""
    if cursor is None:
        return items
    ids = [d["id"] for d in items]
    return items[ids.index(cursor) + 1 :] if cursor in ids else []


def judge_reply(
    judge: Judge, body: dict, invalid: bool = False, confidence: bool = True, filtered: bool = False
) -> dict:
    """The judge server's reply to the chat body ``body`` (tests/judge_server.py), as a chat completion; ``invalid``:
    one whose content is not JSON; ``confidence``: the judge's ``confidence`` rules shape its log-probabilities;
    ``filtered``: one the content filter withheld (no content, finish_reason ``content_filter``), paid all the same."""
    text = "".join(Judge._text(m.get("content"), judge.stats) for m in body.get("messages", []))
    if filtered:
        return orjson.loads(Judge._completion_body(body.get("model", ""), "", "content_filter", len(text), None, None))
    if invalid:
        content = "this is not JSON"
    else:
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else rf.get("schema")
        content = orjson.dumps(judge._reply_object(text, schema or {}, model=body.get("model", ""))).decode()
    top = int(body.get("top_logprobs") or 1) if body.get("logprobs") else None  # as the judge server reads it
    p = judge.confidence_for(text) if confidence else None
    return orjson.loads(Judge._completion_body(body.get("model", ""), content, "stop", len(text), top, None, p))


def app(svc: BatchServiceBase, routes: list[web.RouteDef]) -> web.Application:
    """The application: a provider's ``routes`` and the admin endpoints."""
    application = web.Application(client_max_size=1 << 30)
    admin = [
        web.post("/_admin/config", svc.admin_config),
        web.post("/_admin/reset", svc.admin_reset),
        web.get("/_admin/stats", svc.admin_stats),
    ]
    application.add_routes([*routes, *admin])
    return application


async def _serve(make_app: Callable[[], web.Application], host: str, port: int, backlog: int) -> None:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=backlog)
    await site.start()
    print(f"PORT {site._server.sockets[0].getsockname()[1]}", flush=True)  # noqa: SLF001 - the port the OS picked
    await asyncio.Event().wait()


def main(make_app: Callable[[], web.Application], doc: str | None, backlog: int = 128) -> None:
    """Serve ``make_app()`` on ``--host``/``--port`` (0: one the OS picks, printed as ``PORT <n>``) until SIGTERM."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(_serve(make_app, args.host, args.port, backlog))
    except (KeyboardInterrupt, SystemExit):
        pass
