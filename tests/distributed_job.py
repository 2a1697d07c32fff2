"""A Ray or Spark run's driver in its own process, for the kill -9 tests (tests/test_ray.py, test_spark_cli.py).

python tests/distributed_job.py ray RAY_ADDRESS BASE_URL CACHE_DIR ROWS
python tests/distributed_job.py spark BASE_URL CACHE_DIR OUTPUT_DIR ROWS

Scores ROWS rows (IN_FLIGHT requests in flight per worker, the run history checkpointed every 0.2 s) and prints,
once done, the run's history (``summary.runs``) as JSON. :func:`job_env` and :func:`rerun_after_kill` are the two
tests' common steps.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

COLUMNS = {"instruction": "question", "output": "answer"}
IN_FLIGHT = 4


def job_env() -> dict[str, str]:
    """The job's environment: this folder importable (its processes import the tests' helpers)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}


def stall_and_settle(judge, cache, slots: int) -> int:
    """Hold every request from now on, and wait until each one in flight is a held one and every reply the judge
    sent is committed to the store in ``cache``: a kill -9 then lands where nothing answered is in transit, so the
    rerun's count is exact (a kill at a random instant may also lose the replies of the last group commit, 5 ms:
    docs/guarantees.md). ``slots``: workers x IN_FLIGHT, the most that can be in flight. Returns the replies
    answered."""
    import sqlite3

    from helpers import until

    judge.configure(faults=[{"fault": "delay", "seconds": 60}])

    def only_held() -> bool:  # every request held so far (the last row's, if sent) is still waiting
        s = judge.stats()
        return 0 < s["inflight"] == s["by_fault"].get("delay", 0)

    until(only_held, timeout=120)
    stats = judge.stats()
    answered = stats["ok"]
    store = sqlite3.connect(f"file:{Path(cache) / 'replies.sqlite3'}?mode=ro", uri=True)
    committed = "SELECT count(*) FROM (SELECT key FROM replies UNION SELECT key FROM pending)"
    try:
        until(lambda: store.execute(committed).fetchone()[0] == answered, timeout=60)
    finally:
        store.close()
    stats = judge.stats()
    # nothing answered since; what is in flight is held (a worker between batches may have sent one more)
    assert stats["ok"] == answered and stats["inflight"] <= slots, (stats, slots)
    return answered


def rerun_after_kill(job: list[str], judge, n: int, answered: int, killed: dict) -> int:
    """The same job run again once the killed one's processes are gone (``answered``: the judge's replies by then):
    its history lists the killed run's last checkpoint, then its own. Returns the requests paid twice (answered
    before the kill, sent again)."""
    judge.reset()
    done = subprocess.run(job, capture_output=True, text=True, env=job_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["id"] for r in got["runs"]][0] == killed["id"] and len(got["runs"]) == 2
    assert 0 < killed["requests"] <= answered
    return judge.stats()["requests"] - (n - answered)


def rows(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"id": i, "question": f"row-{i}: q{i}?", "answer": f"a{i}"} for i in range(n)])


def settings(base_url: str):
    from hf_judge import Settings

    return Settings(model="judge", base_url=base_url, concurrency=IN_FLIGHT, history_every_s=0.2)


def on_ray(address: str, base_url: str, cache: str, n: int):
    from hf_judge.ray import score_dataset_on_ray

    return score_dataset_on_ray(
        rows(n), ["QA_Clarity"], address=address, actors=2, columns=COLUMNS, settings=settings(base_url),
        api_key="sk-test", cache_dir=cache,
    )  # fmt: skip


def on_spark(base_url: str, cache: str, out: str, n: int):
    from datasets import DatasetDict

    from hf_judge.engine.spark_run import arrow_frames, score_frames_on_spark, spark_session

    os.environ["JOB_KEY"] = "sk-test"  # the Python workers the session starts read it
    spark = spark_session("local[2]")
    frames = arrow_frames(spark, DatasetDict({"train": rows(n)}))
    return score_frames_on_spark(
        {s: df.repartition(8) for s, df in frames.items()}, ["QA_Clarity"], output_dir=out, output_overwrite=True,
        columns=COLUMNS, settings=settings(base_url), api_key="env:JOB_KEY", cache_dir=cache, batch_size=10,
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
