"""A Ray or Spark run's driver in its own process, for the kill -9 tests (tests/test_ray.py, test_spark_cli.py).

python tests/distributed_job.py ray RAY_ADDRESS BASE_URL CACHE_DIR ROWS
python tests/distributed_job.py spark BASE_URL CACHE_DIR OUTPUT_DIR ROWS

Scores ROWS rows (two in-flight requests per worker, the run history checkpointed every 0.2 s) and prints, once
done, the run's id and its history (``summary.runs``) as JSON.
"""

import json
import os
import sys

COLUMNS = {"instruction": "question", "output": "answer"}
IN_FLIGHT = 4


def rows(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"id": i, "question": f"row-{i}: q{i}?", "answer": f"a{i}"} for i in range(n)])


def on_ray(address: str, base_url: str, cache: str, n: int):
    from hf_judge.ray import score_dataset_on_ray

    return score_dataset_on_ray(
        rows(n), ["QA_Clarity"], address=address, actors=2, columns=COLUMNS, model="judge", api_key="sk-test",
        base_url=base_url, cache_dir=cache, concurrency=IN_FLIGHT, history_every_s=0.2,
    )  # fmt: skip


def on_spark(base_url: str, cache: str, out: str, n: int):
    from datasets import DatasetDict

    from hf_judge.engine.spark_run import arrow_frames, score_frames_on_spark, spark_session

    os.environ["JOB_KEY"] = "sk-test"  # the Python workers the session starts read it
    spark = spark_session("local[2]")
    frames = arrow_frames(spark, DatasetDict({"train": rows(n)}))
    return score_frames_on_spark(
        {s: df.repartition(8) for s, df in frames.items()}, ["QA_Clarity"], output_dir=out, output_overwrite=True,
        columns=COLUMNS, model="judge", api_key="env:JOB_KEY", base_url=base_url, cache_dir=cache,
        concurrency=IN_FLIGHT, history_every_s=0.2, batch_size=10,
    )  # fmt: skip


def main() -> None:
    engine, args = sys.argv[1], sys.argv[2:]
    print("started", flush=True)
    if engine == "ray":
        out = on_ray(*args[:3], int(args[3]))
    else:
        out = on_spark(*args[:3], int(args[3]))
    print(json.dumps({"runs": out.summary.runs, "requests": out.summary.requests}), flush=True)


if __name__ == "__main__":
    main()
