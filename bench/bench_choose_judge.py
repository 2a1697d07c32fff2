"""choose-judge at the speed of the wire: requests/s of ``choose_judge`` over 3 judges x N rows against a plain
``score_dataset`` run of the same requests (the same 3 judges as a panel over the same rows), in one run.

Starts the loopback judge server (tests/judge_server.py) with a little latency, then times, each on a fresh
cache: the plain score run, then choose_judge (which also computes the table: agreement, intervals, costs), and
prints both rates and their ratio (the target: at least 0.9); each measured twice (``--repeat``), alternating,
after a warm-up, the best of each kept. ``--by N``: choose_judge with ``by=`` a column of N groups (JudgeBench's four
categories: 4), every figure computed per group too, against the same plain score run (the target: still 0.9).

    python bench/bench_choose_judge.py                 # 3 judges x 1,000 rows
    python bench/bench_choose_judge.py --rows 200 --latency 0.02
    python bench/bench_choose_judge.py --by 4          # and per group of 4 categories
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"
JUDGES = ["judge-a", "judge-b", "judge-c"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.01, help="the server's seconds per reply (default 0.01)")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--by", type=int, default=0, metavar="N", help="choose_judge(by=) a column of N groups")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each, alternating; the best kept (default 2)")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import datasets

    datasets.disable_progress_bars()
    from datasets import Dataset

    from hf_judge import choose_judge, score_dataset

    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(
            f"{url}/_admin/config",
            data=json.dumps({"latency": a.latency}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()
        ds = Dataset.from_dict(
            {
                "question": [f"question {i}?" for i in range(a.rows)],
                "answer": [f"answer {i}" for i in range(a.rows)],
                "human": [i % 3 != 0 for i in range(a.rows)],
                "category": [f"category {i % max(a.by, 1)}" for i in range(a.rows)],
            }
        )
        by = {"by": "category"} if a.by else {}
        kw = dict(
            base_url=f"{url}/v1",
            api_key="sk-bench",
            columns={"prediction": "answer"},
            progress=False,
            concurrency=a.concurrency,
        )
        times: dict[str, list[float]] = {"plain": [], "choose": []}
        with tempfile.TemporaryDirectory() as tmp:
            # warm up both (imports, the server's first connections), then each twice, alternating: the best of
            # each (the machine's other load only ever slows a run down)
            score_dataset(ds.select(range(20)), ["Binary"], models=JUDGES, cache_dir=Path(tmp) / "w1", **kw)
            choose_judge(ds.select(range(20)), "Binary", JUDGES, label="human", cache_dir=Path(tmp) / "w2", **by, **kw)
            for attempt in range(a.repeat):
                t = time.perf_counter()
                plain = score_dataset(ds, ["Binary"], models=JUDGES, cache_dir=Path(tmp) / f"plain{attempt}", **kw)
                times["plain"].append(time.perf_counter() - t)
                t = time.perf_counter()
                choice = choose_judge(
                    ds, "Binary", JUDGES, label="human", cache_dir=Path(tmp) / f"c{attempt}", **by, **kw
                )
                times["choose"].append(time.perf_counter() - t)
        plain_s, choose_s = min(times["plain"]), min(times["choose"])
        requests = plain.summary.requests
        sent = len(JUDGES) * a.rows
        print(
            f"score (a panel of {len(JUDGES)}): {requests:,} requests in {plain_s:.2f} s = {requests / plain_s:,.0f}/s"
        )
        what = f"table and {a.by} groups' tables included" if a.by else "table included"
        print(f"choose-judge:         {sent:,} requests in {choose_s:.2f} s = {sent / choose_s:,.0f}/s ({what})")
        print(f"ratio choose-judge / score: {plain_s / choose_s:.2f} (target >= 0.9)")
        print(f"recommended: {choice.recommendation['name'] if choice.recommendation else None}")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
