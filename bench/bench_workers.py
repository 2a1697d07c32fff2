"""Requests/s of score_dataset with 1, 2 and 4 workers against a latency-bound server, in one run.

Starts the loopback judge server (tests/judge_server.py) with 200 ms of latency,
then runs ``score_dataset(num_workers=W, concurrency=256)`` for each W in a fresh
subprocess (fresh cache, distinct prompts), and prints requests/s (end to end:
the call's wall time, the forking of the workers included; the forkserver is
started before), the steady rate (between 20 % and 80 % of the requests, from the
run's progress reports), the scaling against one
worker, and the CPU ms per request of each worker beside the single-process
run's (the process's CPU during the call).

    python bench/bench_workers.py                      # 1, 2 and 4 workers, ~1 min
    python bench/bench_workers.py --workers 1,2 --seconds 4
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"


def child(base_url: str, workers: int, rows: int, concurrency: int) -> None:
    """One measured run; prints a JSON line."""
    import datasets

    datasets.disable_progress_bars()
    from datasets import Dataset

    from hf_judge import score_dataset

    cpu_lines: list[tuple[int, float]] = []  # (requests, CPU seconds) of each worker

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            m = re.match(r"worker \d+ of \d+: (\d+) requests, ([\d.]+) s of CPU", record.getMessage())
            if m:
                cpu_lines.append((int(m[1]), float(m[2])))

    log = logging.getLogger("hf_judge")
    log.addHandler(Grab())
    log.setLevel(logging.INFO)
    ds = Dataset.from_dict(
        {"question": [f"question {i}?" for i in range(rows)], "answer": [f"answer {i}" for i in range(rows)]}
    )
    kw = dict(
        model="judge", base_url=base_url, api_key="sk-bench", columns={"instruction": "question", "output": "answer"}
    )
    if workers > 1:  # start the forkserver (one import of hf_judge and datasets, ~2-5 s) before the clock does
        score_dataset(
            ds.select(range(workers)), ["QA_Clarity"], use_cache=False, num_workers=workers, progress=False, **kw
        )
    cpu_lines.clear()
    samples: list[tuple[float, int]] = []  # (seconds, requests) from the run's progress reports
    with tempfile.TemporaryDirectory() as cache:
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        out = score_dataset(
            ds,
            ["QA_Clarity"],
            cache_dir=cache,
            concurrency=concurrency,
            num_workers=workers,
            progress=lambda p: samples.append((time.perf_counter(), p.requests)),
            **kw,
        )
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    requests = out.summary.requests
    # steady state: the rate between 20 % and 80 % of the requests, start-up and the last replies left out
    inside = [(t, r) for t, r in samples if 0.2 * requests <= r <= 0.8 * requests]
    steady = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) if len(inside) > 1 else None
    own = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    print(
        json.dumps(
            {
                "workers": workers,
                "requests": requests,
                "errors": len(out["errors"]),
                "elapsed": elapsed,
                "steady": steady,
                "parent_cpu_s": own,
                "worker_cpu_s": cpu_lines,
            }
        ),
        flush=True,
    )


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=8.0, help="ideal run time of each configuration")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, w, rows, conc = args.child
        child(url, int(w), int(rows), int(conc))
        return 0
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", "0", "--latency", str(args.latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline().split()[1])  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/v1"
        ideal_per_worker = args.concurrency / args.latency
        results = []
        for w in [int(x) for x in args.workers.split(",")]:
            rows = int(ideal_per_worker * w * args.seconds)
            server_cpu0, t0 = _cpu_of(server.pid), time.perf_counter()
            out = subprocess.run(
                [sys.executable, __file__, "--child", url, str(w), str(rows), str(args.concurrency)],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            r["ideal"] = ideal_per_worker * w
            # the loopback server is one Python process: near 1.0 (a whole core) it, not hf_judge, is the limit
            r["server_cores"] = (_cpu_of(server.pid) - server_cpu0) / (time.perf_counter() - t0)
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"{args.latency * 1000:.0f} ms latency, {args.concurrency} in flight per worker, "
        f"~{args.seconds:.0f} s of ideal work per configuration; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'workers':>7} {'requests':>9} {'req/s':>8} {'steady':>8} {'ideal':>7} {'x 1 worker':>10} {'steady x 1':>10}"
        f" {'server cores':>12}  CPU ms/request per worker"
    )
    base = steady1 = None
    for r in results:
        rps = r["requests"] / r["elapsed"]
        base = base or rps
        steady = r["steady"] or rps
        steady1 = steady1 or steady
        if r["worker_cpu_s"]:
            cpu = ", ".join(f"{c / max(n, 1) * 1000:.3f}" for n, c in r["worker_cpu_s"])
        else:
            cpu = f"{r['parent_cpu_s'] / r['requests'] * 1000:.3f} (single process)"
        print(
            f"{r['workers']:>7} {r['requests']:>9,} {rps:>8,.0f} {steady:>8,.0f} {r['ideal']:>7,.0f} "
            f"{rps / base:>10.2f} {steady / steady1:>10.2f} {r['server_cores']:>12.2f}  {cpu}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
