"""Memory and disk of a stream whose rows fail: the error rows it keeps, and what viewing its result leaves behind.

A stream of ROWS rows (``score_dataset`` on an ``IterableDataset``), every row over ``max_input_chars``, so each row
gets an error row and no request is sent (no server needed: the run is the stream, its error rows and its save),
is saved with ``save_to_disk`` (Parquet shards); then ``hf-judge view`` makes the folder's report page, as a
``score --streaming -o DIR`` run does at its end. Each step runs in a process of its own: its peak resident set
(ru_maxrss) is its own. ``HF_DATASETS_CACHE`` points to a fresh folder per run; what is left in it after the view is
the Arrow cache that building the page wrote.

python bench/bench_stream_errors.py                       # 200,000 and 1,000,000 error rows
python bench/bench_stream_errors.py --rows 50000 200000
PYTHONPATH=/work/wt/base python bench/bench_stream_errors.py   # the same with another checkout's hf_judge

Measured 2026-11-26 on the shared 2-core box (busy); "before": PYTHONPATH=/work/wt/base (every error row held in
memory until the save's end, the view through ``load_dataset`` of the folder):
      before:   200,000 error rows: stream + save peak   445 MB; view peak 327 MB; 46.2 MB left in HF_DATASETS_CACHE
              1,000,000 error rows: stream + save peak 1,149 MB; view peak 733 MB; 231.7 MB left (2 .arrow files)
      after:    200,000 error rows: stream + save peak   288 MB; view peak 270 MB; nothing left
              1,000,000 error rows: stream + save peak   328 MB; view peak 326 MB; nothing left
(the result itself: 6.5 / 28.4 MB of Parquet). What still grows after, up to fixed caps, is not the error rows: the
card reads every score column back (here 1,000,000 nulls) and the page keeps every row's scores up to 2 million
values (results/report_stream.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = "What is the derivative of $x^2 \\sin x$? Show each step."  # every row is over max_input_chars


def _rows(n: int):
    for i in range(n):
        yield {"question": f"{i}: {TEXT}", "answer": f"answer {i}"}


def stream(rows: int, out: str) -> dict:
    """Score a stream of ``rows`` failing rows and save it to ``out``."""
    from datasets import IterableDataset

    import hf_judge

    ds = IterableDataset.from_generator(_rows, gen_kwargs={"n": rows})
    started = time.perf_counter()
    scored = hf_judge.score_dataset(
        ds,
        ["QA_Clarity"],
        model="judge",
        base_url="http://127.0.0.1:9/v1",  # never reached: every row is over max_input_chars
        api_key="sk-unused",
        columns={"instruction": "question", "output": "answer"},
        max_input_chars=10,
        cache_dir=Path(out).with_name("cache"),
        progress=False,
    )
    scored.save_to_disk(out)
    return {"seconds": time.perf_counter() - started, "errors": dict(scored.summary.errors)}


def view(out: str) -> dict:
    from hf_judge.cli import main

    started = time.perf_counter()
    code = main(["view", out])
    return {"seconds": time.perf_counter() - started, "code": code}


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), sum(p.suffix == ".arrow" for p in files)


def _child(step: str, out: str) -> dict:
    result = stream(int(os.environ["BENCH_ROWS"]), out) if step == "stream" else view(out)
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def measure(rows: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-stream-errors-") as tmp:
        cache = Path(tmp, "hf_datasets_cache")
        cache.mkdir()
        env = {**os.environ, "BENCH_ROWS": str(rows), "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
        got: dict = {"rows": rows}
        out = str(Path(tmp, "out"))
        for step in ("stream", "view"):
            p = subprocess.run(
                [sys.executable, __file__, "--child", step, out], env=env, capture_output=True, text=True, check=False
            )
            if p.returncode:
                raise SystemExit(f"{step} failed:\n{p.stderr[-3000:]}")
            got[step] = json.loads(p.stdout.strip().splitlines()[-1])
        got["result_mb"] = _size(Path(out))[0] / 1e6
        left, arrow = _size(cache)
        got["cache_left_mb"], got["cache_arrow_files"] = left / 1e6, arrow
        return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    import hf_judge

    print(f"hf_judge from {Path(hf_judge.__file__).parent}")
    for n in args.rows:
        r = measure(n)
        stream, view = r["stream"], r["view"]
        print(
            f"{n:>10,} error rows: stream + save peak {stream['peak_mb']:,.0f} MB ({stream['seconds']:.1f} s); "
            f"view peak {view['peak_mb']:,.0f} MB ({view['seconds']:.1f} s); result {r['result_mb']:,.1f} MB; "
            f"left in HF_DATASETS_CACHE {r['cache_left_mb']:,.1f} MB ({r['cache_arrow_files']} .arrow files)",
            flush=True,
        )


if __name__ == "__main__":
    main()
