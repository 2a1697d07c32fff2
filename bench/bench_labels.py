"""choose-judge on a big labels file: 1,000,000 lines of 25,000 reviewers (40 rows, each labelled by all of them),
against merely reading the same file with pyarrow, in one run; and the same file with one bad label on its last line,
refused before any request.

Each phase runs in a process of its own (its peak memory, VmHWM, is its own), after the same imports (hf_judge,
datasets): ``read`` reads the file with ``pyarrow.json.read_json`` (the floor: no labels file is read faster);
``choose`` runs ``choose_judge(..., labels=FILE)`` with two judges on the loopback judge server (tests/judge_server.py):
reading and checking the labels, the majority of each row, the requests, the table and the human ceiling;
``refuse`` the same with the last line's label "maybe" (a ConfigError naming the line; the judge server counts the
requests that reached it; "maybe" among booleans is a column pyarrow cannot type: the line-by-line reader).
``--kind pairwise`` writes the labels 1, 2 and "tie" in one column (mixed JSON types: the line-by-line reader) for
``Comparative``; its ``read`` floor is then ``json.loads`` of each line, keeping nothing.

    python bench/bench_labels.py                          # 40 rows x 25,000 reviewers
    python bench/bench_labels.py --reviewers 2500 --timeout 300
    python bench/bench_labels.py --kind pairwise

A phase still running after ``--timeout`` seconds is stopped and reported so, with its peak memory so far (main
before issue 40 never ended: its human ceiling compared every reviewer with every other one of a row).

Measured 2026-11-29 on the shared 2-core box (load 16-20), 1,000,000 lines (75 MB):
  before (main at f820d43), binary:
      read: 3.05 s, peak 346 MB (pyarrow)
    choose: still running after 240 s, peak 805 MB so far, 80 requests already sent
    refuse: still running after 240 s, peak 805 MB so far, 80 requests sent ("maybe" lost in its row's majority)
  after, binary (pyarrow reads the file):
      read: 2.7-3.3 s, peak 336-338 MB
    choose: 4.8-7.8 s, peak 426-441 MB, 80 requests; ratio 1.8-2.3x the time, 1.27-1.31x the peak memory
    refuse: 16-23 s, peak 354-362 MB, 0 requests, naming line 1,000,000 ("maybe" among booleans: line by line)
  after, pairwise (1, 2, "tie": the line-by-line reader; the floor is json.loads per line):
      read: 8.6 s, peak 214 MB
    choose: 14.4 s, peak 303 MB, 160 requests; ratio 1.7x the time, 1.41x the peak memory
    refuse: 14.0 s, peak 272 MB, 0 requests
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"


def write_labels(path: Path, rows: int, reviewers: int, kind: str, bad_last: bool) -> int:
    """``rows`` x ``reviewers`` lines, reviewer by reviewer (as a labelling tool writes them); each row's labels
    lean one way (seeded), so that rows have a majority and the reviewers disagree on some."""
    rng = random.Random(0)
    lean = [rng.random() for _ in range(rows)]
    lines = 0
    with path.open("w", encoding="utf-8") as f:
        for k in range(reviewers):
            for r in range(rows):
                yes = rng.random() < 0.3 + 0.4 * lean[r]
                label: object = yes if kind == "binary" else (1 if yes else rng.choice([2, "tie"]))
                lines += 1
                if bad_last and k == reviewers - 1 and r == rows - 1:
                    label = "maybe"
                f.write(json.dumps({"split": "train", "row": r, "label": label, "reviewer": f"reviewer-{k}"}) + "\n")
    return lines


def child(phase: str, labels: str, rows: int, kind: str, url: str) -> dict:
    """One phase in this process: its seconds, its peak memory, what it found."""
    import datasets

    datasets.disable_progress_bars()
    import pyarrow as pa
    import pyarrow.json as pj
    from datasets import Dataset

    from hf_judge import choose_judge
    from hf_judge.errors import ConfigError

    out: dict = {}
    t0 = time.perf_counter()
    if phase == "read":  # pyarrow where it can type the file; else json.loads of each line, keeping nothing
        try:
            out["lines"], out["reader"] = pj.read_json(labels).num_rows, "pyarrow"
        except pa.ArrowInvalid:
            with open(labels, encoding="utf-8") as f:
                out["lines"], out["reader"] = sum(1 for line in f if json.loads(line)), "json.loads per line"
    else:
        data = {"question": [f"question {i}?" for i in range(rows)], "answer": [f"answer {i}" for i in range(rows)]}
        metric, columns = "Binary", {"prediction": "answer"}
        if kind == "pairwise":
            data = {"question": data["question"], "response1": data["answer"], "response2": ["no"] * rows}
            metric, columns = "Comparative", {}
        try:
            with tempfile.TemporaryDirectory() as cache:
                choice = choose_judge(
                    Dataset.from_dict(data), metric, ["judge-a", "judge-b"], labels=labels, base_url=url,
                    api_key="sk-bench", columns=columns, cache_dir=cache, progress=False,
                )  # fmt: skip
            out["ceiling"] = {k: choice.ceiling[k] for k in ("loo_agreement", "alpha", "annotators", "rows")}
            out["rows"] = choice.rows
        except ConfigError as e:
            out["refused"] = str(e)[:200]
    out["seconds"] = time.perf_counter() - t0
    status = Path("/proc/self/status").read_text()
    out["peak_mb"] = int(status.split("VmHWM:")[1].split()[0]) / 1024
    return out


def run_child(phase: str, labels: Path, a: argparse.Namespace, url: str) -> dict:
    args = [sys.executable, __file__, "--child", phase, "--labels", str(labels), "--rows", str(a.rows)]
    args += ["--kind", a.kind, "--url", url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        out, err = proc.communicate(timeout=a.timeout)
    except subprocess.TimeoutExpired:  # its peak memory so far, then stop it
        status = Path(f"/proc/{proc.pid}/status").read_text()
        proc.kill()
        proc.communicate()
        peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
        return {"timed_out": True, "seconds": time.perf_counter() - t0, "peak_mb": peak}
    if proc.returncode:
        raise SystemExit(f"{phase} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _admin(url: str, path: str, payload: dict | None = None) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(f"{url}/_admin/{path}", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--reviewers", type=int, default=25_000)
    ap.add_argument("--kind", choices=("binary", "pairwise"), default="binary")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a phase may run (default 600)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--labels", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.labels, a.rows, a.kind, a.url)))
        return
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
        with tempfile.TemporaryDirectory() as tmp:
            good, bad = Path(tmp) / "labels.jsonl", Path(tmp) / "bad.jsonl"
            lines = write_labels(good, a.rows, a.reviewers, a.kind, bad_last=False)
            write_labels(bad, a.rows, a.reviewers, a.kind, bad_last=True)
            size = good.stat().st_size / 1e6
            print(f"{lines:,} lines ({size:.0f} MB): {a.rows} rows x {a.reviewers:,} reviewers, {a.kind} labels")
            found = {}
            for phase, path in (("read", good), ("choose", good), ("refuse", bad)):
                _admin(url, "reset", {})
                found[phase] = run_child(phase, path, a, url)
                found[phase]["requests"] = _admin(url, "stats")["requests"]
                _report(phase, found[phase], a.timeout)
        base, run = found["read"], found["choose"]
        if not run.get("timed_out"):
            print(
                f"ratio choose-judge / read ({base['reader']}): {run['seconds'] / base['seconds']:.1f}x the time, "
                f"{run['peak_mb'] / base['peak_mb']:.2f}x the peak memory"
            )
    finally:
        server.terminate()
        server.wait(10)


def _report(phase: str, r: dict, timeout: float) -> None:
    if r.get("timed_out"):
        print(
            f"{phase:>6}: still running after {timeout:.0f} s (stopped), peak {r['peak_mb']:.0f} MB so far; "
            f"{r['requests']:,} requests had been sent"
        )
        return
    what = {
        "read": f"{r.get('lines', 0):,} lines read by {r.get('reader')}",
        "choose": f"rows {r.get('rows')}, ceiling {r.get('ceiling')}",
        "refuse": f"refused: {r.get('refused')}",
    }[phase]
    print(f"{phase:>6}: {r['seconds']:.2f} s, peak {r['peak_mb']:.0f} MB, {r['requests']:,} requests; {what}")


if __name__ == "__main__":
    main()
