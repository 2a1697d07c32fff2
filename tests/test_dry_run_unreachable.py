"""--dry-run against a server that cannot be reached says so, beside its estimate."""

from __future__ import annotations

import socket

from helpers import qa_dataset

from hf_judge import estimate_cost


def _closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dry_run_says_the_server_could_not_be_reached(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    est = estimate_cost(
        qa_dataset(3),
        ["Q_Clarity"],
        model="judge",
        base_url=url,
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question"},
        tokenizer="auto",
    )
    assert est.requests == 3 and est.input_tokens > 0  # the estimate is still made
    assert f"{url.removesuffix('/v1')} could not be reached (" in est.token_counter
    assert "check --base-url" in str(est)
