"""FleetClient (hf_judge.fleet): a judge fleet of several replicas, one of them down."""

from __future__ import annotations

import asyncio
import socket

import pytest
from judge_fixture import JudgeServer

from hf_judge.engine.batchscore import score_batch
from hf_judge.engine.core import Plan
from hf_judge.errors import ServerUnreachableError
from hf_judge.judging.catalogue import resolve_metrics
from hf_judge.settings import Settings
from hf_judge.transport.fleet import DOWN_S, FleetClient

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


def test_a_replica_that_answers_garbage_fast_is_taken_out_and_the_run_goes_on(judge):
    """A replica whose 200s are an HTML page answers fastest, so least-busy would give it nearly every request
    (402 of 410, and the run stopped): its failures take it out of rotation as a dead one is."""
    n = 300
    with JudgeServer() as garbage:
        garbage.configure(faults=[{"fault": "invalid_body"}])  # 200, text/html: <html>gateway</html>
        judge.configure(latency=0.005)
        client, cols, errors = _score([garbage.base_url, judge.base_url], n)
        paid_to_garbage = garbage.stats()["requests"]
    assert errors == [] and all(v is not None for v in cols["QA_Clarity"])
    assert judge.stats()["prompts"] == n
    # the first answers judge it: about a burst of requests, then none for DOWN_S (longer than this run)
    assert paid_to_garbage == client.sent[0] <= IN_FLIGHT
    assert client.stats.retries == paid_to_garbage  # each of its rows sent once more, to the healthy replica


def test_replicas_that_fail_alike_stay_in_rotation():
    """A model that fails a share of every replica's requests is no replica's fault: none is taken out; one that
    fails far more often than the others is, and after its rest a failed trial doubles the next one."""
    client = FleetClient(Settings(model="judge"), ["http://a:1/v1", "http://b:1/v1"], api_key=None)
    for k in range(40):  # both: 3 failures in 5
        for i in (0, 1):
            client._judge(i, 0.0, k % 5 < 3, "invalid_json")
    assert client.rested_at == [None, None]
    for _ in range(20):  # now replica 1 answers well: replica 0, still at 60 %, is the odd one out
        client._judge(1, 0.0, False, None)
    client._judge(0, 0.0, True, "invalid_json")
    assert client.rested_at[0] is not None and client.down_until[0] > client._now()
    client.down_until[0] = 0.0  # its rest is over: one trial request, which fails
    assert client._pick(set()) == 0 and client._pick(set()) == 1  # the trial is alone on replica 0
    client._judge(0, client._now(), True, "bad_response")
    assert client.rest_s[0] == 2 * DOWN_S and client.down_until[0] > client._now()
