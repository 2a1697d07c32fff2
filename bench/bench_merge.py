"""Peak memory of `hf-judge merge` (merge_scores) as the files grow: it must stay flat.

python bench/bench_merge.py            # 10,000 vs 100,000 items
python bench/bench_merge.py --quick    # 2,000 vs 20,000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_files(d: Path, n: int) -> tuple[Path, Path]:
    data, scores = d / f"data_{n}.jsonl", d / f"scores_{n}.jsonl"
    with data.open("w") as f:
        for i in range(n):
            f.write(
                json.dumps({"id": f"id-{i}", "instruction": f"question {i} " * 20, "output": f"answer {i} " * 40})
                + "\n"
            )
    with scores.open("w") as f:
        for i in range(n - 1, -1, -1):  # reverse order: the merge must not rely on order
            f.write(
                json.dumps(
                    {
                        "id": f"id-{i}",
                        "scores": {
                            "Q": {"All": {"Clarity": i % 10 + 1}},
                            "QA": {"Correctness": {"reason": "r" * 200, "score": 7}},
                        },
                    }
                )
                + "\n"
            )
    return data, scores


def run(data: Path, scores: Path, out: Path) -> tuple[float, float]:
    code = (
        "import resource, sys, time; from hf_judge.cli.seed import merge_scores; t=time.perf_counter(); "
        f"merge_scores({str(scores)!r}, {str(data)!r}, {str(out)!r}); "
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)"
    )
    baseline = "import resource, hf_judge.cli.seed; print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    b = subprocess.run([sys.executable, "-c", baseline], capture_output=True, text=True, check=True)
    secs, rss = map(float, p.stdout.split())
    return secs, rss - float(b.stdout.split()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    small, big = (2_000, 20_000) if args.quick else (10_000, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        res = {}
        for n in (small, big):
            data, scores = make_files(d, n)
            time.perf_counter()
            res[n] = run(data, scores, d / f"out_{n}.jsonl")
            size = (data.stat().st_size + scores.stat().st_size) / 2**20
            print(
                f"merge {n:>7,} items ({size:6.1f} MB in): {res[n][0]:5.2f} s, "
                f"peak RSS above the interpreter {res[n][1]:6.1f} MB"
            )
        print(
            f"peak RSS growth ratio {big:,}/{small:,} items: {(res[big][1] + 1) / (res[small][1] + 1):.2f} "
            "(target: about 1, flat)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
