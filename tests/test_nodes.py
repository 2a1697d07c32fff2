"""Two nodes on the same rows over one reply store on object storage never pay a request twice at the same moment
(hf_judge/store/leases.py): two processes, each with its own local store, one shared store on a loopback object
store (real HTTP, real s3fs / gcsfs / adlfs), the requests counted by the judge server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from s3_fixture import subprocess_env

from hf_judge.store.segments import Remote

JOB = Path(__file__).with_name("score_job.py")
CLAIMS = "claims"  # <url>/claims/: where the nodes' claims are
ROWS = 1000
IN_FLIGHT = 16


def _node(judge, server, url: str, tmp: Path, name: str, rows: int = ROWS, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(JOB), judge.base_url, url, str(rows), str(IN_FLIGHT), str(tmp / f"out-{name}")],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(server, tmp / name, **env),
    )


def _done(p: subprocess.Popen) -> int:
    """The requests the node's run paid for (its summary), once it exited cleanly."""
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    return int(re.search(r"^done (\d+)$", out, re.M)[1])


def _scored(tmp: Path, name: str) -> list:
    from datasets import load_from_disk

    return load_from_disk(str(tmp / f"out-{name}"))["train"]["QA_Clarity"]


def test_two_nodes_started_at_the_same_moment_pay_each_row_once(judge, object_store, tmp_path):
    """Both processes are up, then told to go at once: the judge server sees each request once (on the base: twice,
    2 x the rows), and both results hold every row's score. On S3, GCS and Azure alike: claims need only puts,
    listings and deletes, which each emulator has."""
    url = object_store.bucket() + "/cache"
    judge.configure(latency=0.02)
    go = tmp_path / "go"
    nodes = [_node(judge, object_store, url, tmp_path, n, SCORE_JOB_GO=str(go)) for n in ("a", "b")]
    for p in nodes:
        assert p.stdout.readline().strip() == "started"
    go.touch()
    paid = [_done(p) for p in nodes]
    stats = judge.stats()
    print(f"{object_store.scheme}: {stats['requests']} requests for {ROWS} rows ({paid[0]} + {paid[1]})")
    assert stats["requests"] <= 1.1 * ROWS
    a, b = _scored(tmp_path, "a"), _scored(tmp_path, "b")
    assert a == b and None not in a and len(a) == ROWS


def test_two_nodes_with_two_workers_each_started_at_the_same_moment_pay_each_row_once(judge, s3, tmp_path):
    """``num_workers=2`` on each node: a node's workers claim among themselves in their local store, and each worker
    claims across machines in the s3:// store, so four processes on the same rows pay each about once."""
    url = s3.bucket() + "/cache"
    judge.configure(latency=0.02)
    go = tmp_path / "go"
    nodes = [_node(judge, s3, url, tmp_path, n, SCORE_JOB_GO=str(go), SCORE_JOB_WORKERS="2") for n in ("a", "b")]
    for p in nodes:
        assert p.stdout.readline().strip() == "started"
    go.touch()
    paid = [_done(p) for p in nodes]
    requests = judge.stats()["requests"]
    print(f"workers: {requests} requests for {ROWS} rows ({paid[0]} + {paid[1]})")
    assert requests <= 1.1 * ROWS
    a, b = _scored(tmp_path, "a"), _scored(tmp_path, "b")
    assert a == b and None not in a and len(a) == ROWS


def test_two_runs_on_one_local_cache_started_at_the_same_moment_pay_each_row_once(judge, tmp_path):
    """A second user's run (another process) on the same local cache folder, told to go at the same moment: the
    stores see each other in the file's ``openers`` table and claim in it (as workers do), so the judge server sees
    each request about once, and both results hold every row's score."""
    judge.configure(latency=0.02)
    go = tmp_path / "go"
    env = {**os.environ, "SCORE_JOB_GO": str(go)}
    cache = tmp_path / "cache"
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                str(JOB),
                judge.base_url,
                str(cache),
                str(ROWS),
                str(IN_FLIGHT),
                str(tmp_path / f"out-{n}"),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in ("a", "b")
    ]
    for p in nodes:
        assert p.stdout.readline().strip() == "started"
    go.touch()
    paid = [_done(p) for p in nodes]
    requests = judge.stats()["requests"]
    print(f"local cache: {requests} requests for {ROWS} rows ({paid[0]} + {paid[1]})")
    assert requests <= 1.1 * ROWS
    a, b = _scored(tmp_path, "a"), _scored(tmp_path, "b")
    assert a == b and None not in a and len(a) == ROWS


def test_a_node_started_while_another_is_mid_run_pays_only_what_that_one_has_not(judge, s3, tmp_path):
    """b is up and waiting (imports done) when a starts; it is told to go once a has answered a third of the rows."""
    url = s3.bucket() + "/cache"
    judge.configure(latency=0.05)
    go = tmp_path / "go"
    b = _node(judge, s3, url, tmp_path, "b", SCORE_JOB_GO=str(go))
    assert b.stdout.readline().strip() == "started"
    a = _node(judge, s3, url, tmp_path, "a")
    deadline = time.monotonic() + 120
    while judge.stats()["ok"] < ROWS // 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    assert judge.stats()["ok"] < ROWS // 2  # mid-run
    paid = [_done(a), _done(b)]
    requests = judge.stats()["requests"]
    print(f"{requests} requests for {ROWS} rows ({paid[0]} + {paid[1]})")
    assert requests <= 1.1 * ROWS
    assert _scored(tmp_path, "a") == _scored(tmp_path, "b")


LEASE_S = 3.0
PUBLISH_S = 0.5


def _claims_of(url: str, pid: int) -> list[str]:
    fs, segments = Remote.of(url).filesystem()
    path = segments.rstrip("/").rsplit("/", 1)[0] + "/" + CLAIMS
    fs.invalidate_cache(path)
    try:
        return [p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False) if f"-{pid}-" in p.rsplit("/", 1)[-1]]
    except FileNotFoundError:
        return []


def _lease_end(names: list[str], lease_s: float) -> float:
    """The end of a node's lease by its objects' names (wall clock): its newest claim's time + the lease, or its
    lease object's time."""
    ends = [int(m[1]) / 1000 + lease_s for n in names if (m := re.match(r"^c-(\d{13})-", n))]
    ends += [int(m[1]) / 1000 for n in names if (m := re.match(r"^l-.+-(\d{13})$", n))]
    return max(ends)


def test_a_node_killed_mid_run_frees_its_claims_after_its_lease_and_the_other_takes_them(judge, s3, tmp_path):
    """Node a claims every row and pays; node b starts and waits for a's replies. a is killed with kill -9: b sends
    nothing while a's lease runs, then takes a's keys over and finishes. Paid twice: at most what a had in flight
    and the replies it had not published yet."""
    url = s3.bucket() + "/cache"
    judge.configure(latency=0.1)
    env = {"HF_JUDGE_LEASE_S": str(LEASE_S), "HF_JUDGE_PUBLISH_S": str(PUBLISH_S), "HF_JUDGE_PULL_S": "0.5"}
    go = tmp_path / "go"
    b = _node(judge, s3, url, tmp_path, "b", SCORE_JOB_GO=str(go), **env)
    assert b.stdout.readline().strip() == "started"
    a = _node(judge, s3, url, tmp_path, "a", **env)
    deadline = time.monotonic() + 120
    while judge.stats()["ok"] < ROWS // 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    while not _claims_of(url, b.pid) and b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _claims_of(url, b.pid), "b claims the rows too, and waits for a's replies"
    answered: list[tuple[float, int]] = []
    while judge.stats()["ok"] < ROWS // 2 and time.monotonic() < deadline:
        answered.append((time.monotonic(), judge.stats()["ok"]))
        time.sleep(0.02)
    lease_end = _lease_end(_claims_of(url, a.pid), LEASE_S)
    os.kill(a.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    a.wait(10)
    at_kill, ok_at_kill = judge.stats()["requests"], judge.stats()["ok"]
    assert 0 < ok_at_kill < ROWS
    during_lease = []
    while time.time() < lease_end - 0.3:  # a's claims hold: b sends nothing
        during_lease.append(judge.stats()["requests"])
        time.sleep(0.05)
    assert during_lease and set(during_lease) == {at_kill}
    paid_b = _done(b)
    requests = judge.stats()["requests"]
    window = PUBLISH_S + 0.25 + 0.1  # a's replies of its last publish interval may be unpublished
    before = max((n for t, n in answered if t <= killed_at - window), default=0)
    bound = IN_FLIGHT + (ok_at_kill - before)  # a's requests unanswered, and its replies unpublished
    print(f"killed with {at_kill} requests sent; b paid {paid_b}; {requests} in all (bound {ROWS + bound})")
    assert requests <= ROWS + bound
    assert paid_b >= ROWS - ok_at_kill  # b paid what a claimed and never had answered
    scored = _scored(tmp_path, "b")
    assert len(scored) == ROWS and None not in scored
