"""Pytest fixtures for the loopback Anthropic server (tests/anthropic_server.py)."""

from __future__ import annotations

from pathlib import Path

from judge_fixture import JudgeServer, server_fixtures


class AnthropicServer(JudgeServer):
    """The Anthropic server in a subprocess on 127.0.0.1; the same admin calls as the judge server. Its
    ``url`` is the base URL as Anthropic's SDK and hf-judge take it (``/v1/messages`` is added)."""

    SCRIPT = Path(__file__).with_name("anthropic_server.py")


anthropic_server_proc, claude = server_fixtures(AnthropicServer, "anthropic_server_proc", "claude")
