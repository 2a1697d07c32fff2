"""An OpenAI-compatible batch server for tests and benchmarks (loopback), with the judge's own replies.

    python tests/batch_server.py --host 127.0.0.1 --port 0   # prints "PORT <n>"

It speaks OpenAI's wire format for ``/v1/files`` (multipart upload, list, retrieve, content, delete) and
``/v1/batches`` (create, retrieve, cancel, list), and answers ``/v1/chat/completions`` online as
tests/judge_server.py does. A batch line's reply is the judge server's deterministic reply to the same
body (its function, imported), so a batch run and an online run get equal replies.

``POST /_admin/config`` sets the modes (``DEFAULTS``, faulty output files included; a key of the judge
server's own modes, such as ``overrides``, goes to the judge, for its batch lines and its online replies
alike: two servers, one per judge of a panel, can then answer differently), ``POST /_admin/reset``
restores them and clears everything, ``GET /_admin/stats`` returns counters: files uploaded, batches
created, how many times each request (``custom_id``) was run, that is paid for, and the Authorization
headers the files and batches endpoints were sent (``auth``).
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))
from batch_server_base import BATCH_DEFAULTS, BatchServiceBase, Stages, after, app, judge_reply, main, public  # noqa: E402
from judge_server import shape_usage  # noqa: E402

DEFAULTS: dict = {
    **BATCH_DEFAULTS,  # fail_lines: an HTTP 500 in the error file; fail_batch: the batch fails validation
    "hold_upload": False,  # an upload is stored, then its reply waits while this is true
    # -- output files as a faulty provider writes them
    "extra_lines": [],  # raw lines put before the next output file's own ("$CID": the custom_id of its first line)
    "cross_lines": False,  # an output also answers the first request of every other batch, with its own first reply
    "duplicate_lines": 0,  # each line this many times more: an error line as it is, a reply to another prompt
    "huge_line": 0,  # a file's first line is padded to over this many bytes, on its request's first try
}


class BatchService(BatchServiceBase):
    DEFAULTS = DEFAULTS
    STAGES = Stages(
        running="in_progress",
        cancelling="cancelling",
        cancelable=frozenset({"validating", "in_progress"}),
        ended=frozenset({"completed", "failed", "expired", "cancelled"}),
    )

    def reset(self) -> None:
        if getattr(self, "dir", None) is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        super().reset()
        self.files: dict[str, dict] = {}
        # file contents live on disk: a benchmark's million lines would not fit in memory twice
        self.dir = Path(tempfile.mkdtemp(prefix="batch-server-"))
        self.content: dict[str, Path] = {}
        self.stats.update(uploads=0, deleted=0, auth=[])

    def state(self, b: dict) -> str:
        return b["status"]

    def set_state(self, b: dict, state: str) -> None:
        b["status"] = state

    def not_found(self) -> web.Response:
        return _error(404, "No such Batch object")

    def stats_view(self) -> dict:
        return dict(self.stats, files=len(self.files), online=self.judge.stats["requests"])

    # -- files ------------------------------------------------------------------
    def _file(self, name: str, path: Path, purpose: str) -> dict:
        fid = f"file-{uuid.uuid4().hex[:24]}"
        self.files[fid] = {
            "id": fid,
            "object": "file",
            "bytes": path.stat().st_size,
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }
        self.content[fid] = path
        return self.files[fid]

    def _auth(self, request: web.Request) -> None:
        auth = request.headers.get("Authorization", "")
        if auth not in self.stats["auth"]:
            self.stats["auth"].append(auth)

    async def upload(self, request: web.Request) -> web.Response:
        self._auth(request)
        reader = await request.multipart()
        name, purpose = "upload.jsonl", ""
        path = self.dir / uuid.uuid4().hex
        async for part in reader:
            if part.name == "file":
                name = part.filename or name
                with open(path, "wb") as f:
                    while chunk := await part.read_chunk():
                        f.write(chunk)
            elif part.name == "purpose":
                purpose = await part.text()
        self.stats["uploads"] += 1
        stored = self._file(name, path, purpose)
        await self.hold("hold_upload")  # stored, but the caller has not heard so yet
        return web.json_response(stored)

    async def list_files(self, request: web.Request) -> web.Response:
        purpose = request.query.get("purpose")
        data = [f for f in self.files.values() if purpose in (None, f["purpose"])]
        return web.json_response(_page(data, request))

    async def get_file(self, request: web.Request) -> web.Response:
        f = self.files.get(request.match_info["id"])
        return web.json_response(f) if f else _error(404, "No such File object")

    async def file_content(self, request: web.Request) -> web.Response:
        fid = request.match_info["id"]
        if fid not in self.content:
            return _error(404, "No such File object")
        return web.FileResponse(self.content[fid], headers={"Content-Type": "application/octet-stream"})

    async def delete_file(self, request: web.Request) -> web.Response:
        fid = request.match_info["id"]
        if self.files.pop(fid, None) is None:
            return _error(404, "No such File object")
        self.content.pop(fid).unlink()
        self.stats["deleted"] += 1
        return web.json_response({"id": fid, "object": "file", "deleted": True})

    # -- batches ----------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        self._auth(request)
        self.stats["creates"] += 1
        if await self.hold("hold_create") and self.config["drop_held"]:
            return _error(503, "the server went away")
        fid = body.get("input_file_id")
        if fid not in self.content:
            return _error(400, f"no input file {fid}")
        bid = f"batch_{uuid.uuid4().hex[:24]}"
        with open(self.content[fid], "rb") as f:
            first = next((x for x in f if x.strip()), b"")
            total = sum(1 for x in f if x.strip()) + bool(first)
        b = {
            "id": bid,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "errors": None,
            "input_file_id": fid,
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "request_counts": {"total": total, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        message = self.take_fail_batch()
        if message:
            b["status"] = "failed"
            b["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": message, "param": "body", "line": 1}],
            }
        else:
            self.arm_expiry(b)
        b["_first"] = orjson.loads(first) if first else None  # cross_lines answer it in other batches' outputs
        self.register(bid, b)
        return web.json_response(public(b))

    def end(self, b: dict, cancelled: bool) -> None:
        if cancelled:
            b["status"] = "cancelled"
            return
        total = b["request_counts"]["total"]
        n = self.ran(b, total)
        cfg = self.config
        out_path, err_path = self.dir / uuid.uuid4().hex, self.dir / uuid.uuid4().hex
        done = failed = 0
        with (
            open(self.content[b["input_file_id"]], "rb") as src,
            open(out_path, "wb") as out,
            open(err_path, "wb") as err,
        ):
            extra = self._extra_lines(b, cfg)
            out.write(extra)
            for i, raw in enumerate((x for x in src if x.strip()), 1):
                if i > n:
                    break
                ln = orjson.loads(raw)
                line = self._run_line(ln, i, cfg)
                ok = line["response"]["status_code"] == 200
                for copy in [line, *self._copies(line, ln, cfg)]:
                    (out if ok else err).write(orjson.dumps(copy) + b"\n")
                done, failed = (done + 1, failed) if ok else (done, failed + 1)
        if done or extra:
            b["output_file_id"] = self._file(f"{b['id']}_output.jsonl", out_path, "batch_output")["id"]
        if failed:
            b["error_file_id"] = self._file(f"{b['id']}_error.jsonl", err_path, "batch_output")["id"]
        b["request_counts"] = {"total": total, "completed": done, "failed": failed}
        b["status"] = "expired" if "_expire" in b else "completed"

    def _extra_lines(self, b: dict, cfg: dict) -> bytes:
        """The lines ``extra_lines`` and ``cross_lines`` put in ``b``'s output, before its own."""
        first = b["_first"]
        if first is None:
            return b""
        out = [x.replace("$CID", first["custom_id"]).encode() + b"\n" for x in cfg["extra_lines"]]
        cfg["extra_lines"] = []
        if cfg["cross_lines"]:  # a reply, valid, to a request this batch was not sent
            reply = self.reply(first["body"])
            for other in self.batches.values():
                if other is not b and other["_first"] is not None:
                    cid = other["_first"]["custom_id"]
                    line = {"id": "batch_req_cross", "custom_id": cid, "response": {"status_code": 200, "body": reply}}
                    out.append(orjson.dumps(line) + b"\n")
        return b"".join(out)

    def _copies(self, line: dict, ln: dict, cfg: dict) -> list[dict]:
        """``duplicate_lines`` more lines for ``line``'s request: the error again, or a reply to another prompt."""
        if line["response"]["status_code"] != 200:
            return [line] * cfg["duplicate_lines"]
        out = []
        for k in range(cfg["duplicate_lines"]):
            body = {**ln["body"], "messages": [{"role": "user", "content": f"another prompt {k}"}]}
            out.append({**line, "response": {"status_code": 200, "body": self.reply(body)}})
        return out

    def _run_line(self, ln: dict, i: int, cfg: dict) -> dict:
        """One request line run: its output line (status 200) or its error line."""
        cid = ln["custom_id"]
        tries = self.pay(cid)
        rid = f"batch_req_{uuid.uuid4().hex[:16]}"
        if self.fails(i, tries):
            body = {"error": {"message": "The server had an error processing your request", "type": "server"}}
            return {"id": rid, "custom_id": cid, "response": {"status_code": 500, "body": body}, "error": None}
        reply = self.reply(ln["body"], self.invalid(i, tries), filtered=self.filtered(cid, i, tries))
        if cfg["huge_line"] and i == 1 and tries == 1:  # a valid reply, but larger than any client should hold
            reply["system_fingerprint"] = "x" * cfg["huge_line"]
        return {"id": rid, "custom_id": cid, "response": {"status_code": 200, "body": reply}, "error": None}

    def reply(self, body: dict, invalid: bool = False, filtered: bool = False) -> dict:
        """The judge server's reply to ``body`` (tests/judge_server.py), as a chat completion; ``filtered``: one
        the content filter withheld."""
        completion = judge_reply(self.judge, body, invalid, filtered=filtered)
        return shape_usage(completion, "usage", self.judge.config["usage"])

    async def list_batches(self, request: web.Request) -> web.Response:
        data = [public(b) for b in reversed(list(self.batches.values()))]
        return web.json_response(_page(data, request))


def _page(data: list[dict], request: web.Request) -> dict:
    """One page of a list, as OpenAI pages them: ``limit`` items after the cursor ``after`` (an item's id).
    Older openai SDKs (1.55) follow ``after`` until a page is empty, whatever ``has_more`` says."""
    data = after(data, request.query.get("after"))
    limit = int(request.query.get("limit", 10_000))
    return {"object": "list", "data": data[:limit], "has_more": len(data) > limit}


def _jsonl(rows: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


def make_app() -> web.Application:
    svc = BatchService()
    atexit.register(lambda: shutil.rmtree(svc.dir, ignore_errors=True))
    return app(
        svc,
        [
            web.post("/v1/files", svc.upload),
            web.get("/v1/files", svc.list_files),
            web.get("/v1/files/{id}", svc.get_file),
            web.get("/v1/files/{id}/content", svc.file_content),
            web.delete("/v1/files/{id}", svc.delete_file),
            web.post("/v1/batches", svc.create),
            web.get("/v1/batches", svc.list_batches),
            web.get("/v1/batches/{id}", svc.get_batch),
            web.post("/v1/batches/{id}/cancel", svc.cancel),
            web.post("/v1/chat/completions", svc.judge.completions),
        ],
    )


if __name__ == "__main__":
    main(make_app, __doc__)
