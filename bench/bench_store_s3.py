"""The reply store on object storage (``cache_dir="s3://..."``) against a local one, in one run.

Starts the loopback judge server (tests/judge_server.py, 200 ms of latency) and an S3-compatible server on
loopback (moto's server mode, used through s3fs as a real bucket is), then:

1. runs ``score_dataset(concurrency=1024)`` in a fresh subprocess with a local ``cache_dir`` and with
   ``cache_dir="s3://bench/..."`` (fresh local copy), alternately, and prints requests/s of each and their
   ratio (end to end, and steady: between 20 % and 80 % of the requests);
2. prints the count and size of the segments the S3 runs published, per 100,000 replies (default publish
   interval: 5 s or 5,000 replies), and the size of one compacted segment;
3. publishes 1,000,000 replies (the runs' replies under new keys) as 200 segments of 5,000, then times the
   start of a run on a fresh machine that must import them all, a restart (nothing new), and a fresh start
   after ``hf-judge cache compact``.

The S3 runs go with claims across machines (the default) and without (``HF_JUDGE_CLAIMS=0``, "unclaimed"): their
ratio is what claims cost one node.

``--nodes``: instead, two nodes (two processes, each with its own local store, one ``s3://`` store) score the same
``--rows`` rows, started together and then ``--apart`` seconds apart, and the requests the judge server received
are counted (the promise: at most 1.1 x the rows).

    python bench/bench_store_s3.py                 # ~2-3 min
    python bench/bench_store_s3.py --seconds 4 --keys 200000
    python bench/bench_store_s3.py --nodes --rows 2000 --concurrency 16   # ~1-2 min
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))


def child(base_url: str, cache_dir: str, rows: int, concurrency: int, tag: str) -> None:
    """One measured run; prints a JSON line."""
    import datasets

    datasets.disable_progress_bars()
    from datasets import Dataset

    from hf_judge import score_dataset

    ds = Dataset.from_dict(
        {
            "question": [f"{tag} question {i}?" for i in range(rows)],
            "answer": [f"answer {i}" for i in range(rows)],
        }
    )
    samples: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    out = score_dataset(
        ds,
        ["QA_Clarity"],
        model="judge",
        base_url=base_url,
        api_key="sk-bench",
        columns={"instruction": "question", "output": "answer"},
        cache_dir=cache_dir,
        concurrency=concurrency,
        progress=lambda p: samples.append((time.perf_counter(), p.requests)),
    )
    elapsed = time.perf_counter() - t0
    requests = out.summary.requests
    inside = [(t, r) for t, r in samples if 0.2 * requests <= r <= 0.8 * requests]
    steady = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) if len(inside) > 1 else None
    print(json.dumps({"requests": requests, "elapsed": elapsed, "steady": steady}), flush=True)


def _start(env: dict, url: str, cache_dir: str, rows: int, concurrency: int, tag: str) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "--child", url, cache_dir, str(rows), str(concurrency), tag]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _result(p: subprocess.Popen) -> dict:
    out, err = p.communicate()
    if p.returncode:
        raise SystemExit(err[-3000:])
    return json.loads(out.strip().splitlines()[-1])


def _run(env: dict, url: str, cache_dir: str, rows: int, concurrency: int, tag: str) -> dict:
    return _result(_start(env, url, cache_dir, rows, concurrency, tag))


def _admin(url: str, path: str, payload: dict | None = None) -> dict:
    import urllib.request

    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url.rsplit("/v1", 1)[0] + "/_admin/" + path, data=data)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def two_nodes(env: dict, url: str, bucket: str, args: argparse.Namespace, work: Path) -> list[tuple[float, dict]]:
    """Two nodes on the same rows over one s3:// store, ``apart`` seconds between their starts (0, then
    ``--apart``): the requests the judge server received, each node's, and the seconds until both were done."""
    out = []
    for i, apart in enumerate((0.0, args.apart)):
        _admin(url, "reset", {})  # the stats, and the configuration: the latency is set again
        _admin(url, "config", {"latency": args.latency})
        t0 = time.perf_counter()
        procs = []
        for node in range(2):
            if node and apart:
                time.sleep(apart)
            own = {**env, "HF_JUDGE_LOCAL_CACHE": str(work / f"apart{i}-node{node}")}
            procs.append(_start(own, url, f"{bucket}/nodes{i}", args.rows, args.concurrency, f"nodes{i}"))
        each = [_result(p) for p in procs]
        seconds = time.perf_counter() - t0
        total = _admin(url, "stats")["requests"]
        out.append((apart, {"requests": total, "each": [r["requests"] for r in each], "seconds": seconds}))
        print(f"apart {apart:g} s", json.dumps(out[-1][1]), file=sys.stderr, flush=True)
    return out


def throughput(env: dict, url: str, bucket: str, args: argparse.Namespace, work: Path) -> list[tuple[str, dict]]:
    rows = int(args.concurrency / args.latency * args.seconds)
    results = []
    kinds = ["local", "s3", "unclaimed"]
    for i in range(args.repeat):
        for kind in kinds[i % 3 :] + kinds[: i % 3]:  # each kind first, second and third in turn
            local = work / f"{kind}-{i}"
            if kind == "local":
                r = _run(env, url, str(local), rows, args.concurrency, f"{kind}{i}")
            else:  # the store on S3, with claims across machines, and without (HF_JUDGE_CLAIMS=0)
                own = {**env, "HF_JUDGE_LOCAL_CACHE": str(local), "HF_JUDGE_CLAIMS": str(int(kind == "s3"))}
                where = f"{bucket}/{'run' if kind == 's3' else 'unclaimed'}"
                r = _run(own, url, where, rows, args.concurrency, f"{kind}{i}")
            results.append((kind, r))
            print(kind, json.dumps(r), file=sys.stderr, flush=True)
    return results


def segments_report(remote) -> tuple[int, int, list[tuple]]:
    """(count, bytes, the rows) of the published segments."""
    from hf_judge.store.segments import decode, segment_names

    fs, path = remote.filesystem()
    names = segment_names(fs, path)
    size = sum(fs.size(f"{path}/{n}") for n in names)
    rows = [r for n in names for r in decode(fs.cat_file(f"{path}/{n}"))]
    return len(names), size, rows


def open_store(url: str, local: str, keys: int) -> None:
    """Open (and close) a store on ``url`` with the local copy at ``local``; prints the seconds the open took."""
    from hf_judge.store.replies import ReplyStore
    from hf_judge.store.segments import Remote

    t = time.perf_counter()
    store = ReplyStore(Path(local) / "replies.sqlite3", remote=Remote.of(url))
    took = time.perf_counter() - t
    assert len(store) >= keys, len(store)
    store.close()
    print(took, flush=True)


def startup(remote, rows: list[tuple], keys: int, work: Path, env: dict) -> dict:
    """Seconds to open a store on a fresh machine that must import ``keys`` published replies, and more: each
    open in a process of its own (the S3 server's threads are this process's)."""
    from hf_judge.store.segments import PUBLISH_N, compact, encode, new_name, put_segment

    fs, path = remote.filesystem()
    t0 = time.perf_counter()
    for s in range(0, keys, PUBLISH_N):
        seg = [
            (hashlib.sha256(b"%d" % i).digest(), *rows[i % len(rows)][1:]) for i in range(s, min(keys, s + PUBLISH_N))
        ]
        put_segment(fs, path, new_name("bench", s // PUBLISH_N), encode(seg))
    publish_s = time.perf_counter() - t0

    def open_close(local: Path) -> float:
        cmd = [sys.executable, __file__, "--open", remote.url, str(local), str(keys)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        return float(out.stdout.strip().splitlines()[-1])

    fresh = open_close(work / "fresh")
    again = open_close(work / "fresh")
    t = time.perf_counter()
    merged = compact(remote)
    compact_s = time.perf_counter() - t
    after = open_close(work / "fresh-after-compact")
    return {
        "publish_s": publish_s,
        "fresh": fresh,
        "restart": again,
        "compact_s": compact_s,
        "merged": merged,
        "after_compact": after,
    }


def nodes_report(args: argparse.Namespace, nodes: list[tuple[float, dict]]) -> int:
    print(
        f"two nodes, {args.rows:,} rows each, {args.latency * 1000:.0f} ms latency, {args.concurrency} in flight a "
        f"node; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    for apart, r in nodes:
        each = " + ".join(f"{n:,}" for n in r["each"])
        print(
            f"started {apart:g} s apart: {r['requests']:,} requests ({each}) = {r['requests'] / args.rows:.2f} x the "
            f"rows, both done in {r['seconds']:.1f} s"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=8.0, help="ideal run time of each run")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of runs (local, s3, unclaimed), rotating their order")
    ap.add_argument("--keys", type=int, default=1_000_000, help="published replies a fresh start imports")
    ap.add_argument("--nodes", action="store_true", help="two nodes on the same rows (see above), nothing else")
    ap.add_argument("--rows", type=int, default=2000, help="--nodes: rows each node scores")
    ap.add_argument("--apart", type=float, default=10.0, help="--nodes: seconds between the second run's starts")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--open", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.open:
        open_store(args.open[0], args.open[1], int(args.open[2]))
        return 0
    if args.child:
        url, cache, rows, conc, tag = args.child
        child(url, cache, int(rows), int(conc), tag)
        return 0

    from s3_fixture import S3Server

    from hf_judge.store.segments import Remote, compact

    s3 = S3Server()
    os.environ.update(s3.env)
    bucket = s3.bucket()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", "0", "--latency", str(args.latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    env = {**os.environ, **s3.env}
    try:
        port = int(server.stdout.readline().split()[1])  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if args.nodes:
                nodes = two_nodes(env, url, bucket, args, work)
                return nodes_report(args, nodes)
            results = throughput(env, url, bucket, args, work)
            remote = Remote.of(f"{bucket}/run")
            count, size, rows = segments_report(remote)
            compact(remote)
            _, compacted, _ = segments_report(remote)
            start = startup(Remote.of(f"{bucket}/startup"), rows, args.keys, work, env)
    finally:
        server.terminate()
        server.wait(10)
        s3.stop()

    print(
        f"{args.latency * 1000:.0f} ms latency, {args.concurrency} in flight, "
        f"~{args.seconds:.0f} s of ideal work a run; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"{'store':>9} {'requests':>9} {'req/s':>8} {'steady':>8}   (unclaimed: s3 with HF_JUDGE_CLAIMS=0)")
    totals: dict[str, list[float]] = {k: [0, 0] for k in ("local", "s3", "unclaimed")}
    steadies: dict[str, list[float]] = {k: [] for k in totals}
    for kind, r in results:
        rps = r["requests"] / r["elapsed"]
        totals[kind][0] += r["requests"]
        totals[kind][1] += r["elapsed"]
        steadies[kind].append(r["steady"] or rps)
        print(f"{kind:>9} {r['requests']:>9,} {rps:>8,.0f} {r['steady'] or rps:>8,.0f}")
    for a, b in (("s3", "local"), ("unclaimed", "local"), ("s3", "unclaimed")):
        if totals[a][1] and totals[b][1]:
            ratio = (totals[a][0] / totals[a][1]) / (totals[b][0] / totals[b][1])
            steady = (sum(steadies[a]) / len(steadies[a])) / (sum(steadies[b]) / len(steadies[b]))
            print(f"{a} / {b}: {ratio:.3f} end to end, {steady:.3f} steady")
    n = len(rows)
    print(
        f"segments: {count} for {n:,} replies = {count * 100_000 / n:.0f} segments, "
        f"{size * 100_000 / n / 1e6:.1f} MB per 100,000 replies ({size / n:.0f} B a reply); "
        f"compacted: one segment of {compacted / 1e6:.1f} MB ({compacted / n:.0f} B a reply)"
    )
    print(
        f"start-up with {args.keys:,} published keys ({args.keys // 5000} segments, published in "
        f"{start['publish_s']:.1f} s): fresh local store {start['fresh']:.1f} s, restart {start['restart']:.2f} s; "
        f"compacted in {start['compact_s']:.1f} s, then a fresh start {start['after_compact']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
