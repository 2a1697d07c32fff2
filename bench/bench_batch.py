"""Batch mode at scale: rows/s of `export` and `import`, and the peak memory of a whole batch run against the
loopback batch server (tests/batch_server.py), at 1,000,000 rows and at 100,000; the ratios show that memory is
bounded (by the batch file limits and the pipeline's window), not proportional to the dataset.

python bench/bench_batch.py                 # 100,000 vs 1,000,000 rows (long: a million replies)
python bench/bench_batch.py --rows 10000 100000

Measured 2026-11-23 on the shared 2-core box (load ~15), QA_Clarity:
    100,000 rows: export 2,594 rows/s, import 3,720 rows/s, batch run 117 s, peak RSS 248 MB (anon 171 MB)
  1,000,000 rows: export 1,906 rows/s, import 2,630 rows/s, batch run 555 s, peak RSS 315 MB (anon 176 MB)
  ratios (10x the rows): peak RSS 1.27x, anon 1.03x; export rows/s 0.73x, import rows/s 0.71x
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
COLUMNS = {"instruction": "question", "output": "answer"}


def make_dataset(n: int, where: str):
    from datasets import Dataset

    def gen():
        for i in range(n):
            yield {"question": f"question {i}: what is {i} squared?", "answer": f"answer {i}: {i * i}"}

    return Dataset.from_generator(gen, cache_dir=where)


def child(phase: str, work: str, n: int, url: str) -> dict:
    """One phase in this process (run by ``run_child``): its seconds, and its peak memory beside."""
    import datasets

    datasets.disable_progress_bars()
    from hf_judge import Settings, export_batch, import_batch, score_dataset

    ds = make_dataset(n, os.path.join(work, "data"))
    kw = dict(model="judge", base_url=url, columns=COLUMNS)
    t0 = time.perf_counter()
    if phase == "export":
        lines = export_batch(ds, ["QA_Clarity"], os.path.join(work, "requests.jsonl"), cache_dir=work + "/c", **kw)
        assert lines == n, lines
        return {"inner_s": time.perf_counter() - t0}
    kw.update(api_key="x", progress=False)
    if phase == "import":
        out = import_batch(ds, ["QA_Clarity"], os.path.join(work, "results.jsonl"), cache_dir=work + "/c", **kw)
        assert len(out["errors"]) == 0 and len(out["train"]) == n, out["errors"][:3]
    else:
        out = score_dataset(
            ds,
            ["QA_Clarity"],
            settings=Settings(model="judge", batch_poll_s=0.5),
            batch=True,
            cache_dir=work + "/run",
            **kw,
        )
        assert len(out["errors"]) == 0 and len(out["train"]) == n, out["errors"][:3]
        assert out.summary.batch["collected"] == n, out.summary.batch
    return {"inner_s": time.perf_counter() - t0}


def run_child(phase: str, work: str, n: int, url: str) -> dict:
    code = (
        "import resource, sys, json; sys.path.insert(0, %r); import bench_throughput as t; t.watch_anon(); "  # noqa: UP031
        "import bench_batch as b; r = b.child(%r, %r, %d, %r); "
        "r.update(rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024, anon_mb=t.ANON_PEAK[0]/1024); "
        "print(json.dumps(r))"
    ) % (str(ROOT / "bench"), phase, work, n, url)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["rows_s"] = n / res["inner_s"]
    return res


def play_runner(work: str) -> float:
    """The external runner (vllm run-batch's part): one output line per request, the judge server's reply."""
    from batch_server import BatchService

    svc = BatchService()
    t0 = time.perf_counter()
    import orjson

    with (
        open(os.path.join(work, "requests.jsonl"), "rb") as src,
        open(os.path.join(work, "results.jsonl"), "wb") as out,
    ):
        for raw in src:
            req = orjson.loads(raw)
            body = svc.reply(req["body"])
            out.write(orjson.dumps({"custom_id": req["custom_id"], "response": {"status_code": 200, "body": body}}))
            out.write(b"\n")
    svc.reset()
    return time.perf_counter() - t0


def measure(n: int, url: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hfj-batch-bench-") as work:
        r = {"export": run_child("export", work, n, url)}
        play_runner(work)
        r["import"] = run_child("import", work, n, url)
        r["run"] = run_child("run", work, n, url)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs=2, default=[100_000, 1_000_000], metavar=("SMALL", "LARGE"))
    args = ap.parse_args()
    from batch_fixture import BatchServer

    server = BatchServer()
    try:
        results = {}
        for n in args.rows:
            server.reset()
            results[n] = r = measure(n, server.base_url)
            print(
                f"{n:>9,} rows: export {r['export']['rows_s']:>8,.0f} rows/s, import {r['import']['rows_s']:>8,.0f} "
                f"rows/s, batch run {r['run']['inner_s']:>7.1f} s, peak RSS {r['run']['rss_mb']:>6.0f} MB "
                f"(anon {r['run']['anon_mb']:>5.0f} MB); export/import peak RSS {r['export']['rss_mb']:.0f}/"
                f"{r['import']['rss_mb']:.0f} MB",
                flush=True,
            )
        small, large = (results[n] for n in args.rows)
        x = args.rows[1] / args.rows[0]
        print(
            f"ratios {args.rows[1]:,} / {args.rows[0]:,} rows ({x:g}x the rows): batch run peak RSS "
            f"{large['run']['rss_mb'] / small['run']['rss_mb']:.2f}x, "
            f"anon {large['run']['anon_mb'] / small['run']['anon_mb']:.2f}x; "
            f"export rows/s {large['export']['rows_s'] / small['export']['rows_s']:.2f}x, "
            f"import rows/s {large['import']['rows_s'] / small['import']['rows_s']:.2f}x"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
