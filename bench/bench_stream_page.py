"""Peak memory of a long streamed push with and without its report page (results/report_stream.py).

The save loop of a streamed push (engine/stream_sink.py ``_write_split``: each scored batch written to a Parquet
shard as it arrives), fed a synthetic QA_All + QA_Clarity result (8 integer scores with their reasons, a question and an
answer, 1% error rows) of ROWS rows in batches of 1,024, without a server; with ``--page`` each batch also goes to
the page's keeper and the page is rendered at the end, as a push without ``-o DIR`` does. Each mode runs in a
process of its own, so its peak resident set (ru_maxrss) is its own.

python bench/bench_stream_page.py                      # 1,000,000 rows, both modes
python bench/bench_stream_page.py --rows 200000 3000000
python bench/bench_stream_page.py --e2e --rows 20000 300000   # a real streamed push (below)

With ``--e2e``: the whole streamed push, ``score_dataset`` on a stream of ``qa_dataset`` rows (QA_Clarity) against
the loopback judge, ``push_to_hub`` to the loopback Hub (tests/judge_server.py, tests/hub_server.py), with
``report=False`` then ``report=True``; the replies are stored by a first, unmeasured run, so both measured runs
read them back (the same work but for the page).

Measured 2026-11-25 on the shared 2-core box (busy; copied into the README, "Look at your scores"):
     1,000,000 rows: peak 235 MB without the page, 426 MB with it (x1.81; 318 MB before the page is rendered);
                     pass 1.9 s / 5.0 s, page 5.1 MB rendered in 0.8 s
     3,000,000 rows: peak 292 MB without the page, 482 MB with it (x1.65; 368 MB before it is rendered);
                     pass 5.7 s / 15.0 s, page 5.1 MB in 0.7 s
     6,000,000 rows: peak 370 MB without the page, 558 MB with it (x1.51; 467 MB before it is rendered);
                     pass 11.4 s / 29.5 s, page 5.1 MB in 1.0 s
With --e2e, the same day and box:
        20,000 rows: peak 249 MB without the page, 256 MB with it (x1.03); 1.1 s / 1.3 s; page 0.66 MB
       300,000 rows: peak 375 MB without the page, 375 MB with it (x1.00); 7.8 s / 8.1 s; page 1.29 MB
(the page's memory fits under the peak the push reaches anyway: the card reads every score column back).
In the save loop alone, the page adds ~190 MB whatever the rows (what grew in both modes was the error rows a
stream held, 1% here; they go to disk as they come since, bench/bench_stream_errors.py):
~80 MB kept during the pass (every row's 8 scores until 2,000,000 values, then a sample of as many; the kept
rows), ~110 MB to render (the 5,000 embedded rows' values and prompts, the JSON), as a Dataset's page costs; and
~3 microseconds a row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
BATCH = 1024


def run(rows: int, page: bool) -> dict:
    """One streamed save of ``rows`` rows; with ``page``, its page kept and rendered. Returns what it measured."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_report import synthetic

    from hf_judge.results.errors_split import ErrorWriter
    from hf_judge.results.report_stream import StreamPage

    pool = synthetic(8 * BATCH)  # rows to draw each batch's from (the texts and scores of a real run's columns)
    summary = pool.summary
    table = pool["train"].with_format("arrow")[:]
    features = pool["train"].features
    rng = np.random.default_rng(0)
    keeper = StreamPage(source="me/big-judged") if page else None
    if keeper is not None:
        keeper.start("train", features, summary)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        # the stream's error rows go to Parquet as they come (engine/stream.py), in both modes
        errors = ErrorWriter(Path(tmp, f"errors-{k:05d}.parquet") for k in itertools.count())
        writer = pq.ParquetWriter(Path(tmp, "train-00000.parquet"), table.schema)
        for first in range(0, rows, BATCH):
            n = min(BATCH, rows - first)
            batch = table.take(pa.array(rng.integers(0, table.num_rows, n)))
            failed = np.flatnonzero(rng.random(n) < 0.01)
            errs = [
                {"split": "train", "row": first + int(i), "metric": "QA_Clarity", "kind": "invalid_json",
                 "message": "the reply is not JSON", "raw": "{not json", "attempts": 3}
                for i in failed
            ]  # fmt: skip
            errors.add(errs)
            writer.write_table(batch)
            if keeper is not None:
                keeper.add("train", batch, errs)
        writer.close()
        passed = time.perf_counter() - started
        peak_pass = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        size = 0
        if keeper is not None:
            size = len(keeper.html(summary, errors.close()))
    return {
        "rows": rows,
        "page": page,
        "seconds": round(time.perf_counter() - started, 1),
        "pass_seconds": round(passed, 1),
        "page_mb": round(size / 1e6, 2),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_pass_mb": round(peak_pass / 1024),
    }


def e2e_child(rows: int, report: bool, base_url: str, cache: str) -> dict:
    """One streamed push of ``rows`` rows (in a process of its own; the loopback Hub's HF_ENDPOINT is set)."""
    import datasets
    from helpers import qa_dataset
    from huggingface_hub import HfApi

    from hf_judge import Settings, score_dataset

    datasets.disable_progress_bars()
    repo = f"tester/bench-stream-page-{rows}-{int(report)}"
    started = time.perf_counter()
    scored = score_dataset(
        qa_dataset(rows).to_iterable_dataset(num_shards=4),
        ["QA_Clarity"],
        settings=Settings(model="judge"),
        base_url=base_url,
        api_key="sk-test",
        cache_dir=cache,
        columns={"instruction": "question", "output": "answer"},
        progress=False,
    )
    scored.push_to_hub(repo, report=report)
    seconds = time.perf_counter() - started
    files = HfApi().list_repo_tree(repo, repo_type="dataset", recursive=True)
    size = sum(getattr(f, "size", 0) or 0 for f in files if f.path == "hf_judge/report.html")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": round(seconds, 1), "page_mb": round(size / 1e6, 2), "peak_mb": round(peak / 1024)}


def e2e(rows_list: list[int]) -> None:
    """--e2e: a first push stores the replies; then one without the page and one with it, each in a process."""
    import os

    sys.path[:0] = [str(ROOT / "tests")]
    import hub_fixture  # noqa: F401 - sets HF_ENDPOINT and the Hub's environment before anything reads them
    from hub_fixture import HubServer
    from judge_fixture import JudgeServer

    def child(rows: int, report: bool, cache: str) -> dict:
        args = [sys.executable, __file__, "--e2e-child", str(rows), str(int(report)), judge.base_url, cache]
        out = subprocess.run(args, capture_output=True, text=True, env=os.environ)
        if out.returncode:
            sys.exit(out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])

    with tempfile.TemporaryDirectory() as tmp:
        hub, judge = HubServer(Path(tmp, "hub")), JudgeServer()
        try:
            for rows in rows_list:
                cache = str(Path(tmp, f"cache-{rows}"))
                child(rows, False, cache)  # stores the replies: both measured runs read them back
                none, page = child(rows, False, cache), child(rows, True, cache)
                print(
                    f"{rows:>10,} rows: peak {none['peak_mb']} MB without the page, {page['peak_mb']} MB with it "
                    f"(x{page['peak_mb'] / none['peak_mb']:.2f}); {none['seconds']} s / {page['seconds']} s; "
                    f"page {page['page_mb']} MB",
                    flush=True,
                )
        finally:
            hub.stop()
            judge.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--e2e", action="store_true", help="a real streamed push against the loopback servers")
    parser.add_argument("--one", choices=["page", "none"], help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--e2e-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.e2e_child:
        rows, report, base_url, cache = args.e2e_child
        sys.path[:0] = [str(ROOT / "tests")]
        print(json.dumps(e2e_child(int(rows), report == "1", base_url, cache)))
        return
    if args.e2e:
        e2e(args.rows)
        return
    if args.one:
        print(json.dumps(run(args.rows[0], args.one == "page")))
        return
    for rows in args.rows:
        got = {}
        for mode in ("none", "page"):
            out = subprocess.run(
                [sys.executable, __file__, "--rows", str(rows), "--one", mode], capture_output=True, text=True
            )
            if out.returncode:
                sys.exit(out.stderr)
            got[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        none, page = got["none"], got["page"]
        print(
            f"{rows:>10,} rows: peak {none['peak_mb']} MB without the page, {page['peak_mb']} MB with it "
            f"(x{page['peak_mb'] / none['peak_mb']:.2f}; {page['peak_pass_mb']} MB before the page is rendered); "
            f"pass {none['pass_seconds']} s / {page['pass_seconds']} s, "
            f"page {page['page_mb']} MB in {page['seconds'] - page['pass_seconds']:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
