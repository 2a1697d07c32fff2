"""Start-up time of the quick CLI commands, as a ratio to a bare `python -c pass`.

    python bench/bench_startup.py              # 9 runs of each command, median and best
    python bench/bench_startup.py -n 21 --check 3

Each command runs as `python -m hf_judge.cli ARGS` (the `hf-judge` script does the
same import; `-m` imports hf_judge from the current folder first: run it from the
checkout root to measure the checkout), with the bare interpreter measured in the same run, interleaved, so
CPU contention hits both alike. `--check R` exits 1 when a command's median is more
than R times the interpreter's median: `--help`, `--version`, `metrics` and
`recipes` must not import datasets, pyarrow or aiohttp.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "metrics": ["metrics"],
    "recipes": ["recipes"],
}


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=9, help="runs of each command (default 9)")
    ap.add_argument("--check", type=float, metavar="RATIO", help="exit 1 if a median exceeds RATIO x `python -c pass`")
    args = ap.parse_args()
    base_cmd = [sys.executable, "-c", "pass"]
    times: dict[str, list[float]] = {"python -c pass": [], **{name: [] for name in COMMANDS}}
    wall(base_cmd)  # warm the page cache once
    for _ in range(args.n):
        times["python -c pass"].append(wall(base_cmd))
        for name, argv in COMMANDS.items():
            times[name].append(wall([sys.executable, "-m", "hf_judge.cli", *argv]))
    base = statistics.median(times["python -c pass"])
    failed = []
    print(f"{'command':<16} {'median':>8} {'best':>8} {'ratio':>6}   ({args.n} runs each)")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<16} {med:7.3f}s {min(ts):7.3f}s {med / base:6.1f}x")
        if args.check is not None and name in COMMANDS and med / base > args.check:
            failed.append(name)
    if failed:
        print(f"FAIL: {', '.join(failed)} over {args.check:g}x `python -c pass`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
