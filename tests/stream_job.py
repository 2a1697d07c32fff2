"""A streaming scoring job in its own process, for the kill and interrupt tests of streaming input.

python tests/stream_job.py BASE_URL CACHE_DIR N CONCURRENCY OUT_DIR [SHARD_SIZE]

With SHARD_SIZE (e.g. 8KB), rows are read 128 at a time and a shard closes after each batch or so,
so that an interrupted save has closed shards to go on after. The tests resume in their own process
with :func:`run` (no interpreter start and imports, ~2 s).
"""

import sys

from helpers import qa_dataset

from hf_judge import RunSummary, Settings, score_dataset


def run(base_url: str, cache_dir: str, n: int, concurrency: int, out: str, shard_size: str | None = None) -> RunSummary:
    """Score ``qa_dataset(n)`` as a stream of 4 shards and save it to ``out``: the job this script runs."""
    scored = score_dataset(
        qa_dataset(n).to_iterable_dataset(num_shards=4),
        ["QA_Clarity"],
        settings=Settings(model="judge", window=128 if shard_size else None),
        base_url=base_url,
        api_key="sk-test",
        cache_dir=cache_dir,
        concurrency=concurrency,
        columns={"instruction": "question", "output": "answer"},
    )
    scored.save_to_disk(out, max_shard_size=shard_size)
    return scored.summary


def main() -> None:
    import datasets

    datasets.disable_progress_bars()  # here, not at import: the tests import run()
    base_url, cache_dir, n, concurrency, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    shard_size = sys.argv[6] if len(sys.argv) > 6 else None
    print("started", flush=True)
    summary = run(base_url, cache_dir, n, concurrency, out, shard_size)
    print("done", summary.requests, summary.cache_hits, flush=True)


if __name__ == "__main__":
    main()
