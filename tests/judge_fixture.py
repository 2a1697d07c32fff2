"""Pytest fixtures for the loopback judge server (tests/judge_server.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("judge_server.py")


class JudgeServer:
    """The judge server in a subprocess on 127.0.0.1."""

    SCRIPT = SERVER

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(self.SCRIPT), "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"judge server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"

    def _admin(self, path: str, payload: dict | None = None) -> dict:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            f"{self.url}/_admin/{path}", data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def configure(self, **cfg) -> dict:
        return self._admin("config", cfg)

    def reset(self) -> None:
        self._admin("reset", {})

    def stats(self) -> dict:
        return self._admin("stats")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def server_fixtures(server: type[JudgeServer], proc: str, name: str):
    """A loopback server's two fixtures: ``proc``, its process, one for the session, and ``name``, that server
    reset for a test. A fixture module binds them to their names, for ``import *`` to take::

        batch_server_proc, batch = server_fixtures(BatchServer, "batch_server_proc", "batch")
    """

    @pytest.fixture(scope="session", name=proc)
    def started():
        s = server()
        yield s
        s.stop()

    @pytest.fixture(name=name)
    def reset(request):
        s = request.getfixturevalue(proc)
        s.reset()
        yield s

    return started, reset


judge_server_proc, judge = server_fixtures(JudgeServer, "judge_server_proc", "judge")
