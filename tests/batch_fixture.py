"""Pytest fixtures for the loopback batch server (tests/batch_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_fixture import JudgeServer


class BatchServer(JudgeServer):
    """The batch server in a subprocess on 127.0.0.1; the same admin calls as the judge server."""

    SCRIPT = Path(__file__).with_name("batch_server.py")


@pytest.fixture(scope="session")
def batch_server_proc():
    server = BatchServer()
    yield server
    server.stop()


@pytest.fixture
def batch(batch_server_proc):
    batch_server_proc.reset()
    yield batch_server_proc
