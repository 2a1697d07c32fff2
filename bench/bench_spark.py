"""Spark ``local[2]`` against one process, on the same rows, at 200 ms of judge latency.

Starts the loopback judge server (tests/judge_server.py) with ``--latency``, then scores the same rows twice,
each with a fresh reply store: ``score_dataset(concurrency=C)`` in this process, and
``score_spark_dataframe(in_flight=C)`` over a DataFrame of 2 partitions on a ``local[2]`` session (its start is
timed apart: a cluster's session is up before a job). Prints each run's requests/s, their ratio, and each run's
per-row overhead: its wall time less the time a perfect client needs at that latency (one round of
``latency`` per ``C`` rows in flight, per partition), divided by the rows.

    python bench/bench_spark.py                    # 2,000 rows, 64 in flight per worker
    python bench/bench_spark.py --rows 500 --concurrency 32
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"
COLUMNS = {"instruction": "question", "output": "answer"}


def rows_of(n: int):
    from datasets import Dataset

    return Dataset.from_dict({"question": [f"question {i}?" for i in range(n)], "answer": [f"a{i}" for i in range(n)]})


def one_process(base_url: str, n: int, concurrency: int) -> float:
    from hf_judge import score_dataset

    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        score_dataset(
            rows_of(n), ["QA_Clarity"], model="judge", base_url=base_url, api_key="sk-bench", columns=COLUMNS,
            cache_dir=cache, concurrency=concurrency, progress=False,
        )  # fmt: skip
        return time.perf_counter() - started


def on_spark(base_url: str, n: int, concurrency: int, partitions: int) -> tuple[float, float]:
    """(session start, scoring wall time) of ``local[partitions]``."""
    from pyspark.sql import SparkSession

    from hf_judge.spark import score_spark_dataframe

    os.environ["HF_JUDGE_BENCH_KEY"] = "sk-bench"
    started = time.perf_counter()
    spark = (
        SparkSession.builder.master(f"local[{partitions}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
        .getOrCreate()
    )
    df = spark.createDataFrame(rows_of(n).with_format("arrow")[:]).repartition(partitions).cache()
    df.count()  # the rows are in Spark before the clock starts, as a table's are
    session = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        scored = score_spark_dataframe(
            df, ["QA_Clarity"], model="judge", base_url=base_url, api_key="env:HF_JUDGE_BENCH_KEY", columns=COLUMNS,
            cache_dir=cache, in_flight=concurrency,
        )  # fmt: skip
        done = scored.where(scored.QA_Clarity.isNotNull()).count()
        wall = time.perf_counter() - started
    spark.stop()
    assert done == n, f"{done} of {n} rows scored"
    return session, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight per process / Spark worker")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", "0", "--latency", str(args.latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline().split()[1])  # type: ignore[union-attr]
        base_url = f"http://127.0.0.1:{port}/v1"
        n, c, lat = args.rows, args.concurrency, args.latency
        single = one_process(base_url, n, c)
        session, spark = on_spark(base_url, n, c, args.partitions)
    finally:
        server.terminate()
    ideal_single = math.ceil(n / c) * lat
    ideal_spark = math.ceil(n / args.partitions / c) * lat
    print(f"{n:,} rows, {lat * 1000:.0f} ms latency, {c} in flight per process / worker")
    print(
        f"one process      {single:7.2f} s  {n / single:8.1f} req/s  "
        f"overhead {(single - ideal_single) / n * 1e3:.2f} ms/row"
    )
    print(
        f"spark local[{args.partitions}]  {spark:7.2f} s  {n / spark:8.1f} req/s  "
        f"overhead {(spark - ideal_spark) / n * 1e3:.2f} ms/row  (session start {session:.1f} s, not counted)"
    )
    print(f"ratio            {single / spark:.2f}x the one process's requests/s")


if __name__ == "__main__":
    main()
