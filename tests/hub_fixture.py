"""The loopback Hub for tests. Importing this module (conftest does) points
huggingface_hub and datasets at it: they read HF_ENDPOINT at import time, so
the port is chosen here, before anything imports them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

_sock = socket.socket()
_sock.bind(("127.0.0.1", 0))
PORT = _sock.getsockname()[1]
_sock.close()
_HOME = tempfile.mkdtemp(prefix="hfj-hfhome-")
os.environ.update(
    HF_ENDPOINT=f"http://127.0.0.1:{PORT}",
    HF_HUB_DISABLE_XET="1",
    HF_HUB_DISABLE_TELEMETRY="1",
    HF_HUB_ETAG_TIMEOUT="30",
    HF_HUB_DOWNLOAD_TIMEOUT="30",
    HF_TOKEN="hf_test_token_hfjudge_SECRET",
    HF_HOME=_HOME,
    HF_DATASETS_CACHE=os.path.join(_HOME, "datasets"),
    HF_HUB_DISABLE_PROGRESS_BARS="1",
)
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ.pop("HF_DATASETS_OFFLINE", None)


class HubServer:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.endpoint = os.environ["HF_ENDPOINT"]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("hub_server.py")),
                "--port",
                str(PORT),
                "--data-dir",
                str(data_dir),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("PORT"):
            raise RuntimeError(f"hub server did not start: {line!r}")

    def auth_headers(self) -> list[str]:
        import json

        with urllib.request.urlopen(f"{self.endpoint}/_admin/auth", timeout=10) as r:
            return json.loads(r.read())

    def requests(self) -> list[str]:
        """``METHOD /path`` of every request the Hub has had (admin ones left out), oldest first."""
        import json

        with urllib.request.urlopen(f"{self.endpoint}/_admin/requests", timeout=10) as r:
            return json.loads(r.read())

    def agents(self) -> list[str]:
        """Every User-Agent the Hub has seen: which libraries asked (``pyspark_huggingface/2.1.0; ...``)."""
        import json

        with urllib.request.urlopen(f"{self.endpoint}/_admin/agents", timeout=10) as r:
            return json.loads(r.read())

    def uploaded_files(self) -> list[Path]:
        return [p for p in self.data_dir.rglob("*") if p.is_file()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    server = HubServer(tmp_path_factory.mktemp("hub"))
    time.sleep(0.1)
    yield server
    server.stop()
