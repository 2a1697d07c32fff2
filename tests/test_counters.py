"""A counter added to ``Stats`` reaches the summary of every engine and a cascade's, with no list to edit (issue 41).

Before, the summary copied a hand list of counters and a cascade added its tiers' by another (``judge_requests``
and any later counter were dropped). The counter is added as a new one would be (tests/counter_probe/: a field
``probe`` of ``Stats`` and the summary, in the counters tuple, counted by the client per reply), in every process of
the run, so an engine whose requests are sent by other processes (workers; Ray and Spark later) shows it only if its
counting bridge carries every counter (workers' queue; Ray's batches; Spark's accumulator). Each engine runs in a
subprocess: its processes must start with the counter.

To put an engine on this test, take it off ``NOT_ON_THE_DRIVER`` and give it a branch in
tests/counter_probe/run.py (``KEYWORDS``, or a runner of its own in ``RUNNERS``). An engine that refuses a
cascade (a stream, Spark) is checked on its run alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures

from hf_judge.engine import capabilities

HERE = Path(__file__).parent
PROBE = HERE / "counter_probe"
ROWS = 6
# engines whose runs make no summary (their rows carry their errors, a batch at a time)
NO_SUMMARY = {"map", "ray_stage", "batch_files"}
# engines not yet run by the driver (hf_judge/engine/driver.py): the next steps of issue 41 take them off
NOT_ON_THE_DRIVER: set[str] = set()
ENGINES = [e for e in capabilities.ENGINES if e not in NO_SUMMARY | NOT_ON_THE_DRIVER]


def _probe(engine: str, server, tmp_path: Path) -> dict:
    path = os.pathsep.join([str(PROBE), str(HERE), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(PROBE / "run.py"), engine, server.base_url, str(tmp_path), str(ROWS)],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Spark's cell needs the spark extra (the lowest-versions run leaves it out: -m "not spark")
@pytest.mark.parametrize("engine", [pytest.param(e, marks=pytest.mark.spark) if e == "spark" else e for e in ENGINES])
def test_a_counter_added_to_stats_is_in_every_engines_summary_and_a_cascades(engine, request, tmp_path):
    server = request.getfixturevalue("batch" if engine == "batch" else "judge")
    got = _probe(engine, server, tmp_path)
    # one reply per row, counted once wherever it was received (a worker's reaches the run's summary)
    assert got["plain"] == ROWS
    if not isinstance(capabilities.cell(engine, "cascade"), capabilities.Yes):
        assert got["cascade"] is None  # a stream, Spark: no cascade (the capability table's refusal)
        return
    # the cascade: every row escalated, so each tier has a reply per row, and the run has both
    assert got["tiers"] == {"cheap": ROWS, "strong": ROWS}
    assert got["cascade"] == 2 * ROWS
