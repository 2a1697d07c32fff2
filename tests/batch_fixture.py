"""Pytest fixtures for the loopback batch server (tests/batch_server.py)."""

from __future__ import annotations

from pathlib import Path

from judge_fixture import JudgeServer, server_fixtures


class BatchServer(JudgeServer):
    """The batch server in a subprocess on 127.0.0.1; the same admin calls as the judge server."""

    SCRIPT = Path(__file__).with_name("batch_server.py")


batch_server_proc, batch = server_fixtures(BatchServer, "batch_server_proc", "batch")
