"""FleetClient (hf_judge.fleet): a judge fleet of several replicas, one of them down."""

from __future__ import annotations

import asyncio
import socket

import pytest

from hf_judge.batchscore import score_batch
from hf_judge.errors import ServerUnreachableError
from hf_judge.fleet import FleetClient
from hf_judge.metrics import resolve_metrics
from hf_judge.pipeline import Plan
from hf_judge.settings import Settings

IN_FLIGHT = 16


def _closed_port_url() -> str:
    """A loopback base URL where nothing listens: connections are refused, as from a replica that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _score(urls: list[str], n: int) -> tuple[FleetClient, dict, list]:
    (metric,) = resolve_metrics(["QA_Clarity"], None)
    plan = Plan(metric, metric.resolve_columns({}, ["instruction", "output"]), metric.temperature)
    settings = Settings(model="judge", concurrency=IN_FLIGHT, retries=3)
    client = FleetClient(settings, urls, api_key="sk-test")
    batch = {"instruction": [f"q{i}?" for i in range(n)], "output": [f"a{i}" for i in range(n)]}

    async def run() -> tuple[dict, list]:
        await client.open()
        try:
            return await score_batch(batch, [plan], client, None)
        finally:
            await client.close()

    cols, errors = asyncio.run(run())
    return client, cols, errors


def test_a_replica_that_refuses_connections_costs_no_row_and_no_retry(judge):
    n = 300
    client, cols, errors = _score([_closed_port_url(), judge.base_url], n)
    assert errors == []
    assert all(v is not None for v in cols["QA_Clarity"])
    assert judge.stats()["requests"] == n  # each row sent once to the live replica
    assert client.stats.retries == 0 and not client.stats.failures
    # the dead replica is passed over after its first refusals (the first burst), not given half the load
    assert client.sent[0] <= IN_FLIGHT


def test_every_replica_down_stops_the_run_as_one_server_down_does():
    dead = [_closed_port_url(), _closed_port_url()]
    with pytest.raises(ServerUnreachableError, match="connection refused at http://127.0.0.1:"):
        _score(dead, 4)
