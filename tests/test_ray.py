"""hf_judge.ray on a local two-node Ray cluster that the test starts; a kill -9 of the second node's workers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from datasets import Dataset
from helpers import history_of, score, until

ray = pytest.importorskip("ray")

COLUMNS = {"instruction": "question", "output": "answer"}
IN_FLIGHT = 8  # per actor


def _workers_of(raylet: int) -> list[int]:
    """The worker processes a raylet started: its children titled ``ray::...``, but not its agents
    (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``), without which the raylet itself exits."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                title = (d / "cmdline").read_bytes()
            except OSError:
                continue
            name = title.split(b"\0", 1)[0]
            if int(stat.rsplit(")", 1)[1].split()[1]) == raylet and name.startswith(b"ray::") and b"Agent" not in name:
                out.append(int(d.name))
    return out


def _scoring(pid: int) -> bool:
    """Whether worker ``pid`` is an actor of a map_batches stage (``ray::MapWorker(MapBatches(...))``)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().startswith(b"ray::MapWorker")
    except OSError:
        return False  # gone already


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    from ray.cluster_utils import Cluster

    small = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
    # each node its own local disk for a reply store on object storage, and the loopback S3 server's address
    # (the raylet's environment is its workers'): as on a real cluster, where each node has its own disk
    nodes = tmp_path_factory.mktemp("nodes")
    env_of = [{**s3_server.env, "HF_JUDGE_LOCAL_CACHE": str(nodes / f"node{i}")} for i in range(2)]
    with pytest.MonkeyPatch.context() as env:
        # no usage report: nothing leaves the machine, and Ray Data starts no actor for it (~1 s of CPU)
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        # no autoscaler monitor (the cluster is fixed) and no metrics export (nothing reads them): fewer processes
        # and less CPU beside the tests, and a shutdown ~1 s shorter
        head = {**small, "include_dashboard": False, "no_monitor": True, "env_vars": env_of[0]}
        c = Cluster(
            initialize_head=True,
            connect=True,
            head_node_args={**head, "_system_config": {"enable_metrics_collection": False}},
        )
        node = c.add_node(**small, env_vars=env_of[1])
        c.wait_for_nodes()
        c.local_dirs = [Path(e["HF_JUDGE_LOCAL_CACHE"]) for e in env_of]  # type: ignore[attr-defined]
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        yield c, node
        ray.shutdown()
        c.shutdown()


def test_two_nodes_two_endpoints_survive_a_kill_9_and_failed_rows_carry_their_errors(cluster, judge, tmp_path):
    from hf_judge.ray import score_ray_dataset

    _, node = cluster
    # every prompt twice, the copies 12 batches apart (so a second copy is read from the store the other actor
    # wrote); 12 batches per actor at 8 in flight and 20 ms a reply: ~0.6 s of scoring, and the kill (at a
    # quarter of the prompts) lands with batches left on both nodes
    n, distinct, batch = 960, 480, 40
    rows = [{"question": f"q{i % distinct}?", "answer": f"a{i % distinct}"} for i in range(n)]
    rows[3]["answer"] = None  # fails validation (its twin, row 3 + distinct, sends the prompt)
    judge.configure(latency=0.02)
    second = judge.base_url.replace("127.0.0.1", "localhost")  # a second endpoint of the same server
    scored = score_ray_dataset(
        ray.data.from_items(rows, override_num_blocks=n // batch),
        ["QA_Clarity"],
        columns=COLUMNS,
        model="judge",
        api_key="sk-test",
        base_urls=[judge.base_url, second],
        cache_dir=tmp_path / "cache",
        concurrency=2,
        in_flight=IN_FLIGHT,
        batch_size=batch,  # one actor per node: each node has one CPU, each actor takes one
    )
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("rows", scored.take_all()))
    t.start()
    deadline = time.monotonic() + 90
    while judge.stats()["ok"] < distinct // 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    raylet = node.all_processes["raylet"][0].process.pid
    killed = _workers_of(raylet)
    assert killed, "the second node runs no worker process"
    at_kill = judge.stats()["ok"]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    t.join(120)
    got = out["rows"]
    st = judge.stats()
    # every (row, metric) scored or errored exactly once, in input order
    assert [r["question"] for r in got] == [r["question"] for r in rows]
    assert all((r["QA_Clarity"] is None) == bool(r["judge_errors"]) for r in got)
    assert st["prompts"] == distinct
    assert at_kill < distinct  # the kill came mid-run
    print(f"killed {len(killed)} processes at {at_kill} replies; paid twice: {st['duplicates']}")
    # paid twice: at most what the killed actor had sent and not stored (in flight, or not yet committed: see
    # test_workers)
    assert st["duplicates"] <= 2 * IN_FLIGHT
    # a failed row carries its errors (Judge's list of structs); no other row failed: both endpoints served
    errors = {i: r["judge_errors"] for i, r in enumerate(got) if r["judge_errors"]}
    failed = {i: [(e["metric"], e["kind"]) for e in row] for i, row in errors.items()}
    assert failed == {3: [("QA_Clarity", "null_input")]}

    judge.configure(latency=0)  # the reference run only gives the values to compare
    single = score(Dataset.from_list(rows), ["QA_Clarity"], judge, tmp_path / "single", progress=False)
    assert [r["QA_Clarity"] for r in got] == single["train"]["QA_Clarity"]
    assert [r["QA_Clarity_reason"] for r in got] == single["train"]["QA_Clarity_reason"]
    assert [(e["row"], e["kind"]) for e in single["errors"]] == [(3, "null_input")]  # the same validation


def test_cli_score_with_ray_saves_the_same_result_and_concurrency_is_per_actor(cluster, judge, tmp_path, capfd):
    """``score --ray`` saves what ``score`` saves; --concurrency is each actor's requests in flight (as each
    worker's with --workers), the split is not reloaded by its builder's name, and the summary counts the rows
    and errors. One --ray run for all of it: each run on Ray starts its actors (seconds of imports)."""
    from datasets import load_from_disk
    from helpers import run_cli

    data = tmp_path / "data.jsonl"
    # 64 rows in 8 blocks of 8 (4 per actor): more than the 2 x 3 in flight that the bound below allows
    rows = [{"question": f"q{i}", "answer": None if i == 7 else "a"} for i in range(64)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "trap.json").write_text("not json")  # from_huggingface would read this (load_dataset("json"))
    judge.configure(latency=0.05)  # the requests of a batch overlap: the server sees how many are in flight
    args = ["score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column", "output=answer"]
    args += ["-m", "judge", "--base-url", judge.base_url, "--cache-dir", tmp_path / "cache", "--concurrency", 3]
    code, out, err = run_cli(capfd, *args, "--ray", "-o", tmp_path / "ray")
    assert code == 0, err
    # 3 in flight per actor, two actors at most (one per CPU); not one actor per --concurrency with 256 each
    assert 3 <= judge.stats()["max_inflight"] <= 2 * 3
    assert "rows           train: 64" in out and "errors         null_input: 1" in out
    # the actors' counters, added up from their batches (the summary said they were not summed)
    assert judge.stats()["requests"] == 63 and "requests       63 (0 retries)" in out
    assert "scores         train (64 rows), mean: QA_Clarity " in out and "; 1 null score\n" in out  # the overview
    # what it saves (summary.json's run history, the card's and the page's totals) is what it printed: it was empty
    tokens = re.search(r"\ntokens +([\d,]+) in / ([\d,]+) out", out)
    assert tokens is not None, out
    saved = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert [r["split"] for r in saved["runs"]] == ["train"]
    paid = [63, int(tokens[1].replace(",", "")), int(tokens[2].replace(",", ""))]
    assert [saved["runs"][0][k] for k in ("requests", "prompt_tokens", "completion_tokens")] == paid
    assert "Failed to load JSON" not in out + err
    judge.configure(latency=0)
    code, out, err = run_cli(capfd, *args, "-o", tmp_path / "single")
    assert code == 0, err
    assert "from cache     63 replies from the reply store" in out  # the same store: nothing sent again
    on_ray, single = load_from_disk(tmp_path / "ray"), load_from_disk(tmp_path / "single")
    assert on_ray["train"]["QA_Clarity"] == single["train"]["QA_Clarity"]
    assert on_ray["errors"].to_list() == single["errors"].to_list()


def test_ray_address_nothing_listens_at_is_a_config_error(capfd, tmp_path):
    from helpers import run_cli

    data = tmp_path / "data.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    args = ["score", data, "--metrics", "QA_Clarity", "-m", "judge", "--base-url", "http://127.0.0.1:9/v1"]
    code, out, err = run_cli(capfd, *args, "--ray-address", "127.0.0.1:1", "-o", tmp_path / "out")
    assert code == 2
    assert "no Ray cluster answers at '127.0.0.1:1'" in err and "--ray-address" in err


JOBS_OF = """
import json, sys
from ray._raylet import GcsClient
jobs = GcsClient(address=sys.argv[1]).get_all_job_info(timeout=60).values()
print(json.dumps(sorted(j.driver_pid for j in jobs)))
"""


def test_ray_without_an_address_starts_its_own_and_never_joins_a_cluster_it_finds(judge, tmp_path):
    """Real processes: a stranger's cluster (`ray start --head`, recorded where Ray looks for one), then
    `hf-judge score --ray` with no address. It joined that cluster (Ray's default: the rows went to another user's
    cluster); it now starts a Ray of its own, and the stranger's cluster sees no driver of the run. An explicit
    `--ray-address auto` joins it."""
    import subprocess
    import sys
    import tempfile

    from helpers import score_args

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"a{i}"}) + "\n" for i in range(4)))
    # Ray records the cluster `ray start` started in $TMPDIR/ray (/tmp/ray by default): a short folder of this
    # test's, so that no other Ray on the machine finds it (and Unix socket paths stay short)
    home = Path(tempfile.mkdtemp(prefix="hfj-ray-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(TMPDIR=str(home), RAY_USAGE_STATS_ENABLED="0", OPENAI_API_KEY="sk-test")
    head = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--port=0", "--num-cpus=1"]
    head += ["--include-dashboard=false", "--disable-usage-stats"]
    stranger = subprocess.Popen(
        head, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert stranger.wait(180) == 0
        address = (home / "ray" / "ray_current_cluster").read_text().strip()

        def drivers() -> list[int]:  # the pids of the drivers that joined the stranger's cluster
            # its GCS asks for the token `ray start` made (~/.ray/auth_token)
            found = subprocess.run([sys.executable, "-c", JOBS_OF, address], env={**env, "RAY_AUTH_MODE": "token"},
                                   capture_output=True, text=True, timeout=120)  # fmt: skip
            assert found.returncode == 0, found.stderr
            return json.loads(found.stdout)

        def run(*extra: str) -> subprocess.Popen:
            args = score_args(data, judge, "--no-cache", "-o", tmp_path / "out", "--overwrite", "--ray", *extra)
            p = subprocess.Popen([sys.executable, "-m", "hf_judge.cli", *args], env=env, stderr=subprocess.PIPE)
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            return p

        own = run()
        assert judge.stats()["requests"] == 4
        assert own.pid not in drivers()  # on its own Ray: no row was sent to the stranger's cluster
        joined = run("--ray-address", "auto")
        assert judge.stats()["requests"] == 8
        assert joined.pid in drivers()  # asked to, it joins
    finally:
        # the stranger's processes are in the group of the `ray start` that started them (`ray stop` would stop
        # every Ray of this machine's user)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stranger.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


def test_an_actor_s_hf_judge_error_stops_the_run_with_its_own_line_and_exit_code(cluster, tmp_path, capfd):
    """A wrong URL on Ray: the actors' ServerUnreachableError came back as "RayTaskError(UserCodeException)" and
    40 lines of traceback; the run stops with its one line, as in one process (exit 1, "stopped:")."""
    from helpers import run_cli

    data = tmp_path / "data.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    args = ["score", data, "--metrics", "QA_Clarity", "-m", "judge", "--base-url", "http://127.0.0.1:9/v1"]
    code, _, err = run_cli(capfd, *args, "--ray", "-o", tmp_path / "out")
    assert code == 1, err
    assert err.strip().splitlines()[-1] == (
        "hf-judge: stopped: cannot reach the server: connection refused at http://127.0.0.1:9/v1/chat/completions. "
        "Check the base URL and that the server is running."
    )
    assert "RayTaskError" not in err and "Traceback" not in err


def test_a_panel_with_a_fleet_is_a_config_error_before_ray_starts(judge, tmp_path):
    """base_urls are replicas of one model; a panel's judges each name their own server (models=)."""
    from hf_judge import ConfigError
    from hf_judge.ray import score_dataset_on_ray

    with pytest.raises(ConfigError, match="base_urls .* applies to a single judge"):
        score_dataset_on_ray(
            Dataset.from_dict({"question": ["q"], "answer": ["a"]}), ["QA_Clarity"], models="a,b", columns=COLUMNS,
            base_urls=[judge.base_url, judge.base_url], api_key="sk-test", cache_dir=tmp_path / "c",
        )  # fmt: skip
    assert judge.stats()["requests"] == 0


def test_an_empty_split_on_ray_comes_back_with_the_score_columns(cluster, judge, tmp_path):
    """Ray Data gives no block back for 0 rows: the split is not scored there (it raised KeyError after the
    other splits were paid)."""
    from datasets import DatasetDict
    from helpers import qa_dataset

    from hf_judge.ray import score_dataset_on_ray

    dd = DatasetDict({"train": qa_dataset(2), "test": qa_dataset(1).select([])})
    out = score_dataset_on_ray(
        dd, ["QA_Clarity"], model="judge", base_urls=[judge.base_url], api_key="sk-test", cache_dir=tmp_path / "c",
        columns=COLUMNS, actors=1,
    )  # fmt: skip
    assert len(out["test"]) == 0 and out["test"].features == out["train"].features
    assert "QA_Clarity" in out["test"].column_names and judge.stats()["requests"] == 2


def test_the_ray_stage_and_the_map_transform_write_one_errors_column(cluster, judge, tmp_path):
    """score_ray_dataset's per-row errors column is hf_judge.Judge's: the same name, the same Arrow type (a list
    of {metric, kind, message, raw, attempts}, empty for a row that scored) and the same values (it was a JSON
    string, null for a row that scored)."""
    import pyarrow as pa
    from helpers import qa_dataset

    from hf_judge import Judge
    from hf_judge.ray import score_ray_dataset

    rows = qa_dataset(3).to_list()
    rows[1]["answer"] = None  # a null input: an error entry, nothing sent
    kw = dict(columns=COLUMNS, model="judge", base_url=judge.base_url, api_key="sk-test", cache_dir=tmp_path / "c")
    judging = Judge(["QA_Clarity"], **kw)
    mapped = Dataset.from_list(rows).map(judging, batched=True)
    staged = score_ray_dataset(ray.data.from_items(rows), ["QA_Clarity"], **kw)
    table = pa.concat_tables(ray.get(staged.to_arrow_refs()))
    want = judging.features().arrow_schema.field(judging.errors_column)
    assert table.schema.field(judging.errors_column) == want
    assert table.column(judging.errors_column).to_pylist() == mapped[judging.errors_column]
    assert [[e["kind"] for e in row] for row in mapped[judging.errors_column]] == [[], ["null_input"], []]


def test_an_anthropic_judge_on_ray_gives_the_one_process_result(cluster, tmp_path):
    """provider="anthropic" on Ray: each actor's client speaks the Messages API (tests/anthropic_server.py)."""
    from anthropic_fixture import AnthropicServer
    from helpers import qa_dataset

    from hf_judge import score_dataset
    from hf_judge.ray import score_dataset_on_ray

    with AnthropicServer() as claude:
        kw = dict(
            model="claude-haiku-4-5", provider="anthropic", base_url=claude.url, api_key="sk-ant-test", columns=COLUMNS
        )
        want = score_dataset(qa_dataset(4), ["QA_Clarity"], cache_dir=tmp_path / "one", progress=False, **kw)
        got = score_dataset_on_ray(qa_dataset(4), ["QA_Clarity"], cache_dir=tmp_path / "ray", actors=1, **kw)
        assert got["train"].to_list() == want["train"].to_list()
        assert claude.stats()["by_status"] == {"200": 8}


RAY_JOB = Path(__file__).with_name("ray_store_job.py")


def test_a_driver_killed_mid_run_then_rerun_pays_twice_only_unpublished_batches(cluster, judge, s3, tmp_path):
    """The store and the output on object storage; each node its own local store, so a batch that the rerun
    gives to the other node is found in the segments. Ray writes the output's shards as they finish."""
    import subprocess
    import sys

    import pyarrow.dataset as pads
    import pyarrow.fs as pafs
    from ray_store_job import rows
    from s3_fixture import subprocess_env

    c, node = cluster
    n, batch, actors = 960, 40, 2
    bucket = s3.bucket()
    job = [sys.executable, str(RAY_JOB), c.address, judge.base_url, f"{bucket}/cache", f"{bucket}/out", str(n)]
    env = subprocess_env(s3, tmp_path / "driver")
    judge.configure(latency=0.02)
    raylets = [r.all_processes["raylet"][0].process.pid for r in (c.head_node, node)]
    before = {w for r in raylets for w in _workers_of(r)}
    p = subprocess.Popen([*job, str(batch)], stdout=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while judge.stats()["ok"] < n // 3 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    # the driver's scoring actors (Ray Data's detached helpers outlive it, an idle worker sends nothing)
    drivers = {w for r in raylets for w in _workers_of(r) if w not in before and _scoring(w)}
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    at_kill = judge.stats()["ok"]
    assert 0 < at_kill < n, "the kill came mid-run"
    assert drivers, "the driver runs no scoring actor"
    # Ray ends the dead driver's workers; what they still had in flight is answered meanwhile. Their exits, not a
    # fixed second: a loaded machine took longer, and a request sent after the reset counted as paid twice.
    until(lambda: not any(Path(f"/proc/{w}").exists() for w in drivers), timeout=120)
    answered = judge.stats()["ok"]
    judge.reset()
    rerun = subprocess.run([*job, str(batch)], capture_output=True, text=True, env=env, timeout=240)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    paid_twice = judge.stats()["requests"] - (n - answered)
    print(f"driver killed at {at_kill} replies ({answered} answered in all): paid twice {paid_twice}")
    # a batch's replies are published when it ends: each actor's batch in progress, at most
    assert paid_twice <= actors * batch

    s3fs_ = pafs.S3FileSystem(endpoint_override=s3.endpoint, access_key="testing", secret_key="testing")
    table = pads.dataset(f"{bucket[5:]}/out", format="parquet", filesystem=s3fs_).to_table().sort_by("id")
    judge.configure(latency=0)
    single = score(Dataset.from_list(rows(n)), ["QA_Clarity"], judge, tmp_path / "single", progress=False)
    assert table.column("id").to_pylist() == list(range(n))  # each row once: the rerun wrote the output anew
    assert table.column("QA_Clarity").to_pylist() == single["train"]["QA_Clarity"]
    assert table.column("QA_Clarity_reason").to_pylist() == single["train"]["QA_Clarity_reason"]


DISTRIBUTED_JOB = Path(__file__).with_name("distributed_job.py")


def test_a_ray_driver_killed_mid_run_leaves_its_history_and_the_rerun_pays_again_what_was_in_flight(
    cluster, judge, tmp_path
):
    """kill -9 of a ``score_dataset_on_ray`` driver mid-run (issue 41): its history checkpoints (from the batches'
    counters, merged as they came back) are beside the results cache as one process leaves them, the rerun's
    summary lists the killed run, and the rerun pays again only what the actors had in flight."""
    import subprocess
    import sys

    from distributed_job import IN_FLIGHT, job_env, rerun_after_kill, stall_and_settle

    c, node = cluster
    n, actors = 400, 2
    cache = tmp_path / "cache"
    job = [sys.executable, str(DISTRIBUTED_JOB), "ray", c.address, judge.base_url, str(cache), str(n)]
    # the last row's reply held: the run cannot end before the kill
    judge.configure(latency=0.05, faults=[{"fault": "delay", "seconds": 60, "match": f"row-{n - 1}:"}])
    raylets = [r.all_processes["raylet"][0].process.pid for r in (c.head_node, node)]
    before = {w for r in raylets for w in _workers_of(r)}
    p = subprocess.Popen(job, stdout=subprocess.PIPE, text=True, env=job_env())
    until(lambda: judge.stats()["ok"] >= n // 3 or p.poll() is not None, timeout=240)
    assert p.poll() is None, "the job ended before the kill"
    # a checkpoint that counts the batches come back: what a killed driver leaves (main's Ray wrote none)
    until(lambda: any(r.get("requests", 0) > 0 for r in history_of(cache)), timeout=30)
    drivers = {w for r in raylets for w in _workers_of(r) if w not in before and _scoring(w)}
    # every actor's every slot waits on a held request, and every reply answered is committed
    answered = stall_and_settle(judge, cache, actors * IN_FLIGHT)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    (killed,) = history_of(cache)
    assert 0 < answered < n and drivers
    until(lambda: not any(Path(f"/proc/{w}").exists() for w in drivers), timeout=120)
    assert judge.stats()["ok"] == answered  # the held requests were answered to no one
    paid_twice = rerun_after_kill(job, judge, n, answered, killed)
    print(f"ray driver killed at {answered} replies (up to {actors} x {IN_FLIGHT} in flight), its history "
          f"{killed['requests']} requests; rerun paid twice {paid_twice}")  # fmt: skip
    # what was answered is never sent again: the rerun pays the rows never answered, the ones in flight among them
    assert paid_twice == 0


def test_cli_score_with_ray_and_a_cache_on_object_storage(cluster, judge, s3, tmp_path, capfd):
    """``--ray --cache-dir s3://...``: the actors publish what they pay, and a run elsewhere (no Ray, a fresh local
    store) pays nothing and saves the same scores."""
    from datasets import load_from_disk
    from helpers import run_cli, score_args

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": "a"}) + "\n" for i in range(48)))
    url = s3.bucket() + "/cache"
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", url, "--ray", "-o", tmp_path / "ray"))
    assert code == 0, err
    assert judge.stats()["requests"] == 48
    elsewhere = ["--local-cache-dir", tmp_path / "elsewhere", "-o", tmp_path / "o"]
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", url, *elsewhere))
    assert code == 0, err
    assert judge.stats()["requests"] == 48  # every reply from the segments the actors published
    scores = [load_from_disk(tmp_path / d)["train"]["QA_Clarity"] for d in ("o", "ray")]
    assert scores[0] == scores[1]


def test_cli_score_with_ray_writes_the_output_to_object_storage_as_the_one_process_run(
    cluster, judge, s3, tmp_path, capfd
):
    """``--ray --output-dir s3://...``: Ray Data's writer puts each split there shard by shard, then ``errors/``
    and ``summary.json``; read back, it is the one-process result row for row, and ``hf_judge.load_result`` reads
    it as it reads the saved folder and a streamed folder of the same job: the same rows, errors and summary."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import load_from_disk
    from helpers import run_cli, score_args

    from hf_judge import load_result

    data = tmp_path / "data.jsonl"
    rows = [{"question": f"q{i}", "answer": None if i == 5 else f"a{i}"} for i in range(40)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = s3.bucket() + "/scored"
    cache = ["--cache-dir", s3.bucket() + "/cache"]
    code, printed, err = run_cli(capfd, *score_args(data, judge, *cache, "--ray", "-o", out))
    assert code == 0, err
    assert f"saved to {out}/ (train: 40 rows" in printed and "errors         null_input: 1" in printed
    assert judge.stats()["requests"] == 39
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", tmp_path / "one", "-o", tmp_path / "one_out"))
    assert code == 0, err
    single = load_from_disk(tmp_path / "one_out")

    fs = fsspec.filesystem("s3")
    shards = sorted(p for p in fs.find(out + "/train") if p.endswith(".parquet"))
    assert shards, "Ray's writer wrote no shard"
    train = pa.concat_tables([pq.read_table(fs.open(p, "rb")) for p in shards])
    assert train.to_pylist() == single["train"].to_list()  # row for row, in input order, no helper column
    errors = pq.read_table(fs.open(out + "/errors/errors.parquet", "rb")).to_pylist()
    assert errors == single["errors"].to_list() and [(e["row"], e["kind"]) for e in errors] == [(5, "null_input")]
    summary = json.loads(fs.cat(out + "/summary.json"))
    assert summary["rows"] == {"train": 40} and summary["requests"] == 39 and summary["source_dataset"]
    # one loader for any engine's folder: the Ray output_dir, the saved folder and a streamed folder of the same
    # job (the one-process store: it pays nothing) read back equal
    streamed = ["--cache-dir", tmp_path / "one", "--streaming", "-o", tmp_path / "streamed_out"]
    code, _, err = run_cli(capfd, *score_args(data, judge, *streamed))
    assert code == 0, err
    assert judge.stats()["requests"] == 39 * 2
    results = [load_result(where) for where in (out, tmp_path / "one_out", tmp_path / "streamed_out")]
    for other in results[1:]:
        assert list(other) == list(results[0]) == ["train", "errors"]
        for split in other:
            assert other[split].to_list() == results[0][split].to_list(), split
        for field in ("rows", "errors", "columns", "model", "prompts", "column_mapping", "source_dataset"):
            assert getattr(other.summary, field) == getattr(results[0].summary, field), field
    # a rerun pays nothing and writes the same output anew (no shard of the first run is left beside it)
    code, _, err = run_cli(capfd, *score_args(data, judge, *cache, "--ray", "-o", out))
    assert code == 0, err
    assert judge.stats()["requests"] == 39 * 2  # the one-process run paid its own (another store)
    again = sorted(p for p in fs.find(out + "/train") if p.endswith(".parquet"))
    assert sum(pq.read_metadata(fs.open(p, "rb")).num_rows for p in again) == 40


def test_a_node_whose_workers_are_killed_with_the_store_on_object_storage_pays_twice_one_batch(
    cluster, judge, s3, tmp_path
):
    """kill -9 of the second node's workers mid-run, the store on object storage and each node its own local copy:
    Ray retries the lost batch (on the other node, or on an actor it starts again), which finds in the segments
    every batch the dead actor finished. The node's local copy is wiped with its workers (a node replaced: its disk
    gone), so nothing it paid is found but in the segments. Paid twice: at most the replies of the batch it was
    scoring (each batch's replies are published when it ends: the publish interval on Ray)."""
    import shutil

    from hf_judge.ray import score_ray_dataset

    c, node = cluster
    n, batch = 480, 40  # 12 batches, ~6 per actor
    # prompts of its own: a node's local copy ($HF_JUDGE_LOCAL_CACHE) holds the other tests' replies
    rows = [{"question": f"node kill {i}?", "answer": f"a{i}"} for i in range(n)]
    judge.configure(latency=0.05)  # a batch's requests take longer than its publish: the kill lands mid-batch
    scored = score_ray_dataset(
        ray.data.from_items(rows, override_num_blocks=n // batch),
        ["QA_Clarity"],
        columns=COLUMNS,
        model="judge",
        api_key="sk-test",
        base_urls=[judge.base_url],
        cache_dir=s3.bucket() + "/cache",
        concurrency=2,
        in_flight=IN_FLIGHT,
        batch_size=batch,
    )
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("rows", scored.take_all()))
    t.start()
    deadline = time.monotonic() + 90
    while judge.stats()["ok"] < n // 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    killed = _workers_of(node.all_processes["raylet"][0].process.pid)
    assert killed, "the second node runs no worker process"
    at_kill = judge.stats()["ok"]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(c.local_dirs[1], ignore_errors=True)
    t.join(120)
    got, st = out["rows"], judge.stats()
    assert 0 < at_kill < n  # the kill came mid-run
    print(f"killed {len(killed)} processes at {at_kill} replies; paid twice: {st['duplicates']} (batch {batch})")
    assert st["prompts"] == n and st["duplicates"] <= batch
    assert [r["question"] for r in got] == [r["question"] for r in rows]
    judge.configure(latency=0)
    single = score(Dataset.from_list(rows), ["QA_Clarity"], judge, tmp_path / "single", progress=False)
    assert [r["QA_Clarity"] for r in got] == single["train"]["QA_Clarity"]
    assert [r["QA_Clarity_reason"] for r in got] == single["train"]["QA_Clarity_reason"]
    assert not any(r["judge_errors"] for r in got)


def test_a_result_that_has_the_metrics_columns_is_scored_on_ray_as_in_one_process(cluster, judge, tmp_path):
    """Ray's plans come from build_plans, as every engine's: a metric already there is kept (nothing sent),
    ``QA_Clarity`` beside ``QA_All`` moves the All's score to ``QA_All_Clarity``, and ``if_exists='overwrite'``
    scores it again (it was a ConfigError: the stage refused any column it would write)."""
    from helpers import qa_dataset, score

    from hf_judge.ray import score_dataset_on_ray

    kw = dict(model="judge", base_urls=[judge.base_url], api_key="sk-test", columns=COLUMNS, actors=1)
    alone = score(qa_dataset(3), ["QA_All"], judge, tmp_path)["train"]
    sent = judge.stats()["requests"]
    again = score_dataset_on_ray(alone, ["QA_All"], cache_dir=tmp_path / "ray", **kw)
    assert judge.stats()["requests"] == sent, "kept: nothing sent"
    assert again["train"].to_list() == alone.to_list()
    assert any(n.startswith("kept the existing columns of QA_All in train") for n in again.summary.notes)
    both = score_dataset_on_ray(alone, ["QA_All", "QA_Clarity"], cache_dir=tmp_path / "ray", **kw)["train"]
    in_process = score(alone, ["QA_All", "QA_Clarity"], judge, tmp_path)["train"]
    assert both.column_names == in_process.column_names
    assert both["QA_All_Clarity"] == alone["QA_Clarity"] and both["QA_Clarity"] == in_process["QA_Clarity"]
    over = score_dataset_on_ray(alone, ["QA_All"], cache_dir=tmp_path / "ray", if_exists="overwrite", **kw)
    assert over["train"].column_names == alone.column_names and over["train"]["QA_Clarity"] == alone["QA_Clarity"]
