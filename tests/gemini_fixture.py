"""Pytest fixtures for the loopback Gemini API server (tests/gemini_server.py)."""

from __future__ import annotations

from pathlib import Path

from judge_fixture import JudgeServer, server_fixtures


class GeminiServer(JudgeServer):
    """The Gemini server in a subprocess on 127.0.0.1: ``base_url`` is its OpenAI-compatible endpoint (what a
    Gemini judge's --base-url names), ``api_root`` what google-genai's ``base_url`` names."""

    SCRIPT = Path(__file__).with_name("gemini_server.py")

    def __init__(self) -> None:
        super().__init__()
        self.api_root = self.url
        self.base_url = self.url + "/v1beta/openai"


gemini_server_proc, gemini = server_fixtures(GeminiServer, "gemini_server_proc", "gemini")
