"""A Google Cloud Storage emulator on loopback (gcp-storage-emulator) for the reply store on ``gs://``.

Used through gcsfs exactly as a user's bucket is: ``STORAGE_EMULATOR_HOST`` is the variable gcsfs (and
Google's own clients) read for an emulator; with no credentials there, gcsfs falls back to anonymous access.
"""

from __future__ import annotations

import logging
import os
import uuid

import pytest

# gcsfs (2025.x and later) asks Google's Storage Control API over gRPC for each bucket's layout (zonal,
# hierarchical) unless this is off; an emulator has no gRPC port, and every call would wait out 60 s of
# retries before gcsfs falls back. Read when gcsfs is imported, so it is set here, before any test imports it.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


class GcsServer:
    """gcp-storage-emulator in a thread of this process, in memory, on a free loopback port."""

    scheme = "gs"

    def __init__(self) -> None:
        from gcp_storage_emulator.server import create_server

        for name in ("gcp_storage_emulator", "gcp_storage_emulator.server"):
            logging.getLogger(name).setLevel(logging.ERROR)  # one log line per request otherwise
        self.server = create_server("127.0.0.1", 0, in_memory=True)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.server._api._httpd.server_address[1]}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach it: the emulator's address, and no probe for a GCE metadata server
        (google-auth's, which may wait seconds for an answer off Google's cloud)."""
        return {
            "STORAGE_EMULATOR_HOST": self.endpoint,
            "NO_GCE_CHECK": "true",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }

    @property
    def options(self) -> dict[str, str]:
        """The same as ``storage_options`` (for a process whose environment does not point at it)."""
        return {"endpoint_url": self.endpoint, "token": "anon"}

    @property
    def cli_options(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.options.items()]

    def bucket(self) -> str:
        """A new empty bucket's URL."""
        import gcsfs

        name = f"b-{uuid.uuid4().hex[:10]}"
        gcsfs.GCSFileSystem(**self.options).mkdir(name)
        return f"gs://{name}"

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="session")
def gcs_server():
    server = GcsServer()
    yield server
    server.stop()


@pytest.fixture
def gcs(gcs_server, monkeypatch):
    """The emulator, with this process's Google Cloud configuration pointed at it."""
    for k, v in gcs_server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    yield gcs_server
