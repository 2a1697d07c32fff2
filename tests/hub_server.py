"""A Hub-compatible server on loopback, enough for push_to_hub, load_dataset and HfApi.

    python tests/hub_server.py --host 127.0.0.1 --port N --data-dir DIR   # prints "PORT <n>"

Repos live under DIR as a JSON state file each (one branch, a linear history);
every uploaded byte is kept under DIR/blobs, so tests can grep it. Requests it
does not implement are logged to stderr and answered 404, so gaps show.
Xet is never advertised: clients use the classic LFS upload path.

``--upload-delay S`` (or ``POST /_admin/upload-delay {"seconds": S}``) holds every upload (an LFS object's body,
a commit) for S seconds before it is read: a slow push, for the Ctrl-C tests.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import sys
import time
from pathlib import Path

from aiohttp import web


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


class Hub:
    def __init__(self, data_dir: Path):
        self.dir = data_dir
        (self.dir / "blobs").mkdir(parents=True, exist_ok=True)
        (self.dir / "repos").mkdir(parents=True, exist_ok=True)
        self.auth: list[str] = []
        self.pending_lfs: dict[str, bytes] = {}
        self.upload_delay = 0.0  # seconds each upload (LFS object, commit) is held before it is read

    async def _slow(self) -> None:
        if self.upload_delay:
            await asyncio.sleep(self.upload_delay)

    # -- storage ---------------------------------------------------------------
    def _state_path(self, rtype: str, repo: str) -> Path:
        return self.dir / "repos" / rtype / (repo.replace("/", "__") + ".json")

    def load(self, rtype: str, repo: str) -> dict | None:
        p = self._state_path(rtype, repo)
        return json.loads(p.read_text()) if p.exists() else None

    def save(self, rtype: str, repo: str, state: dict) -> None:
        p = self._state_path(rtype, repo)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(state))

    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        p = self.dir / "blobs" / sha
        if not p.exists():
            p.write_bytes(data)
        return sha

    def blob(self, sha: str) -> bytes:
        return (self.dir / "blobs" / sha).read_bytes()

    # -- helpers ---------------------------------------------------------------
    def _note_auth(self, request: web.Request) -> None:
        a = request.headers.get("Authorization")
        if a and len(self.auth) < 10_000:
            self.auth.append(a)

    @staticmethod
    def _rtype(segment: str) -> str:
        return {"datasets": "dataset", "models": "model", "spaces": "space"}.get(segment, segment)

    def _repo(self, request: web.Request) -> tuple[str, str, dict]:
        rtype = self._rtype(request.match_info.get("rtype", "datasets"))
        repo = f"{request.match_info['ns']}/{request.match_info['name']}"
        state = self.load(rtype, repo)
        if state is None:
            raise web.HTTPNotFound(
                text=json.dumps({"error": "Repository not found"}),
                content_type="application/json",
                headers={"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
            )
        return rtype, repo, state

    def _entry(self, path: str, f: dict) -> dict:
        e = {"type": "file", "oid": f["oid"], "size": f["size"], "path": path}
        if f.get("lfs"):
            e["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 134}
        return e

    def _info(self, rtype: str, repo: str, state: dict) -> dict:
        return {
            "_id": hashlib.md5(repo.encode()).hexdigest()[:24],
            "id": repo,
            "author": repo.split("/")[0],
            "sha": state["sha"],
            "lastModified": state["modified"],
            "private": state["private"],
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "cardData": {},
            "siblings": [{"rfilename": p} for p in sorted(state["files"])],
            "createdAt": state["created"],
        }

    # -- endpoints -------------------------------------------------------------
    async def whoami(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        return web.json_response(
            {
                "type": "user",
                "name": "tester",
                "fullname": "Tester",
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}},
            }
        )

    async def create_repo(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        body = await request.json()
        rtype = body.get("type") or "model"
        org = body.get("organization") or "tester"
        repo = f"{org}/{body['name']}"
        prefix = "" if rtype == "model" else f"{rtype}s/"
        url = f"{request.scheme}://{request.host}/{prefix}{repo}"
        if self.load(rtype, repo) is not None:
            return web.json_response({"error": "You already created this repo", "url": url}, status=409)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        sha = hashlib.sha1(f"{repo}{time.time()}".encode()).hexdigest()
        self.save(
            rtype,
            repo,
            {
                "files": {},
                "sha": sha,
                "commits": [sha],
                "private": bool(body.get("private")) or body.get("visibility") == "private",
                "created": now,
                "modified": now,
            },
        )
        return web.json_response({"url": url, "name": repo, "id": repo})

    async def repo_info(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        rtype, repo, state = self._repo(request)
        return web.json_response(self._info(rtype, repo, state))

    async def refs(self, request: web.Request) -> web.Response:
        _, _, state = self._repo(request)
        return web.json_response(
            {
                "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": state["sha"]}],
                "tags": [],
                "converts": [],
            }
        )

    async def preupload(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        _, _, state = self._repo(request)
        body = await request.json()
        files = []
        for f in body.get("files", []):
            ext = f["path"].rsplit(".", 1)[-1]
            lfs = f.get("size", 0) > 10_000 or ext in ("parquet", "arrow", "bin")
            files.append(
                {
                    "path": f["path"],
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": state["files"].get(f["path"], {}).get("oid"),
                }
            )
        return web.json_response({"files": files, "commitOid": state["sha"]})

    async def lfs_batch(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        body = await request.json()
        base = f"{request.scheme}://{request.host}"
        objects = []
        for o in body.get("objects", []):
            obj = {"oid": o["oid"], "size": o["size"], "authenticated": True}
            if not (self.dir / "blobs" / o["oid"]).exists():
                obj["actions"] = {"upload": {"href": f"{base}/_lfs/upload/{o['oid']}", "header": {}}}
            objects.append(obj)
        return web.json_response(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
            content_type="application/vnd.git-lfs+json",
        )

    async def lfs_upload(self, request: web.Request) -> web.Response:
        await self._slow()
        data = await request.read()
        sha = self.put_blob(data)
        if sha != request.match_info["oid"]:
            return web.json_response({"error": "sha256 mismatch"}, status=400)
        return web.Response(status=200)

    async def commit(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        await self._slow()
        rtype, repo, state = self._repo(request)
        raw = await request.read()
        files = state["files"]
        for line in raw.decode().splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "file":
                data = (
                    base64.b64decode(value["content"])
                    if value.get("encoding") == "base64"
                    else value["content"].encode()
                )
                sha = self.put_blob(data)
                files[value["path"]] = {"oid": _git_oid(data), "size": len(data), "sha256": sha, "lfs": False}
            elif key == "lfsFile":
                sha = value["oid"]
                if not (self.dir / "blobs" / sha).exists():
                    return web.json_response({"error": f"LFS object {sha} was not uploaded"}, status=422)
                files[value["path"]] = {
                    "oid": hashlib.sha1(sha.encode()).hexdigest(),
                    "size": value["size"],
                    "sha256": sha,
                    "lfs": True,
                }
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                for p in [p for p in files if p.startswith(prefix)]:
                    files.pop(p)
        sha = hashlib.sha1(f"{repo}{time.time()}{len(state['commits'])}".encode()).hexdigest()
        state["sha"] = sha
        state["commits"].append(sha)
        state["modified"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        self.save(rtype, repo, state)
        prefix = "" if rtype == "model" else f"{rtype}s/"
        return web.json_response(
            {
                "commitUrl": f"{request.scheme}://{request.host}/{prefix}{repo}/commit/{sha}",
                "commitOid": sha,
                "success": True,
            }
        )

    def _tree(self, state: dict, path: str, recursive: bool) -> list[dict]:
        path = path.strip("/")
        prefix = path + "/" if path else ""
        out, dirs = [], set()
        for p, f in sorted(state["files"].items()):
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix) :]
            if "/" in rest:
                parts = rest.split("/")
                for i in range(1, len(parts) if recursive else 2):
                    d = prefix + "/".join(parts[:i])
                    if d not in dirs and (recursive or i == 1):
                        dirs.add(d)
                        out.append(
                            {"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
                        )
                if not recursive:
                    continue
            out.append(self._entry(p, f))
        return out

    async def tree(self, request: web.Request) -> web.Response:
        self._note_auth(request)
        _, _, state = self._repo(request)
        path = request.match_info.get("path", "")
        recursive = request.query.get("recursive", "false").lower() in ("1", "true")
        if (
            path
            and path not in state["files"]
            and not any(p.startswith(path.rstrip("/") + "/") for p in state["files"])
        ):
            return web.json_response(
                {"error": f"{path} does not exist"}, status=404, headers={"X-Error-Code": "EntryNotFound"}
            )
        return web.json_response(self._tree(state, path, recursive))

    async def paths_info(self, request: web.Request) -> web.Response:
        _, _, state = self._repo(request)
        if request.content_type == "application/json":
            paths = (await request.json()).get("paths", [])
        else:
            form = await request.post()
            paths = form.getall("paths", [])
        out = []
        for p in paths:
            p = p.strip("/")
            if p in state["files"]:
                out.append(self._entry(p, state["files"][p]))
            elif any(q.startswith(p + "/") for q in state["files"]):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        return web.json_response(out)

    async def resolve(self, request: web.Request) -> web.StreamResponse:
        self._note_auth(request)
        _, _, state = self._repo(request)
        path = request.match_info["path"]
        f = state["files"].get(path)
        if f is None:
            return web.json_response(
                {"error": "Entry not found"},
                status=404,
                headers={"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"},
            )
        data = self.blob(f["sha256"])
        headers = {"ETag": f'"{f["oid"]}"', "X-Repo-Commit": state["sha"], "Accept-Ranges": "bytes"}
        if f.get("lfs"):
            headers["X-Linked-Etag"] = f'"{f["sha256"]}"'
            headers["X-Linked-Size"] = str(f["size"])
        status = 200
        rng = request.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start_s, _, end_s = rng[6:].partition("-")
            start = int(start_s) if start_s else max(0, len(data) - int(end_s))
            end = int(end_s) if end_s and start_s else len(data) - 1
            end = min(end, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data = data[start : end + 1]
            status = 206
        headers["Content-Length"] = str(len(data))
        if request.method == "HEAD":
            return web.Response(status=status, headers=headers)
        return web.Response(status=status, body=data, headers=headers)

    async def validate_yaml(self, request: web.Request) -> web.Response:
        return web.json_response({"errors": [], "warnings": []})

    async def admin_auth(self, request: web.Request) -> web.Response:
        return web.json_response(self.auth)

    async def admin_upload_delay(self, request: web.Request) -> web.Response:
        self.upload_delay = float((await request.json())["seconds"])
        return web.json_response({"seconds": self.upload_delay})

    async def admin_datadir(self, request: web.Request) -> web.Response:
        return web.json_response(str(self.dir))

    async def fallback(self, request: web.Request) -> web.Response:
        print(f"hub_server: not implemented: {request.method} {request.path_qs}", file=sys.stderr, flush=True)
        return web.json_response({"error": f"not implemented: {request.method} {request.path}"}, status=404)


def make_app(data_dir: Path, upload_delay: float = 0.0) -> web.Application:
    hub = Hub(data_dir)
    hub.upload_delay = upload_delay
    seen: list[str] = []  # every request but the admin ones: for "no request reached the Hub"
    agents: set[str] = set()  # the clients' User-Agent: which library asked (pyspark_huggingface/..., datasets/...)

    @web.middleware
    async def count(request: web.Request, handler):
        if not request.path.startswith("/_admin/"):
            seen.append(f"{request.method} {request.path}")
            agents.add(request.headers.get("User-Agent", ""))
        return await handler(request)

    async def admin_requests(request: web.Request) -> web.Response:
        return web.json_response(seen)

    async def admin_agents(request: web.Request) -> web.Response:
        return web.json_response(sorted(agents))

    app = web.Application(client_max_size=1 << 30, middlewares=[count])
    r = app.router
    repo = r"/{ns}/{name}"
    r.add_get("/api/whoami-v2", hub.whoami)
    r.add_post("/api/repos/create", hub.create_repo)
    r.add_post("/api/validate-yaml", hub.validate_yaml)
    for rt in ("{rtype:datasets|models|spaces}",):
        r.add_get(f"/api/{rt}{repo}", hub.repo_info)
        r.add_get(f"/api/{rt}{repo}/revision/{{rev}}", hub.repo_info)
        r.add_get(f"/api/{rt}{repo}/refs", hub.refs)
        r.add_post(f"/api/{rt}{repo}/preupload/{{rev}}", hub.preupload)
        r.add_post(f"/api/{rt}{repo}/commit/{{rev}}", hub.commit)
        r.add_get(f"/api/{rt}{repo}/tree/{{rev}}", hub.tree)
        r.add_get(f"/api/{rt}{repo}/tree/{{rev}}/{{path:.*}}", hub.tree)
        r.add_post(f"/api/{rt}{repo}/paths-info/{{rev}}", hub.paths_info)
        r.add_route("*", f"/{rt}{repo}/resolve/{{rev}}/{{path:.*}}", hub.resolve)
        r.add_post(f"/{rt}{repo}.git/info/lfs/objects/batch", hub.lfs_batch)
    r.add_route("*", "/{ns}/{name}/resolve/{rev}/{path:.*}", hub.resolve)
    r.add_put("/_lfs/upload/{oid}", hub.lfs_upload)
    r.add_post("/_lfs/upload/{oid}", hub.lfs_upload)
    r.add_get("/_admin/auth", hub.admin_auth)
    r.add_get("/_admin/datadir", hub.admin_datadir)
    r.add_post("/_admin/upload-delay", hub.admin_upload_delay)
    r.add_get("/_admin/requests", admin_requests)
    r.add_get("/_admin/agents", admin_agents)
    r.add_route("*", "/{tail:.*}", hub.fallback)
    return app


async def _serve(host: str, port: int, data_dir: Path, upload_delay: float = 0.0) -> None:
    runner = web.AppRunner(make_app(data_dir, upload_delay), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    print(f"PORT {site._server.sockets[0].getsockname()[1]}", flush=True)  # noqa: SLF001
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--upload-delay", type=float, default=0.0, help="hold each upload this many seconds")
    args = ap.parse_args()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(_serve(args.host, args.port, Path(args.data_dir), args.upload_delay))
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
