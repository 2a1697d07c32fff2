"""A streaming scoring job in its own process, for the kill and interrupt tests of streaming input.

python tests/stream_job.py BASE_URL CACHE_DIR N CONCURRENCY OUT_DIR
"""

import sys

import datasets

datasets.disable_progress_bars()

from helpers import qa_dataset  # noqa: E402

from hf_judge import score_dataset  # noqa: E402


def main() -> None:
    base_url, cache_dir, n, concurrency, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    print("started", flush=True)
    scored = score_dataset(
        qa_dataset(n).to_iterable_dataset(num_shards=4),
        ["QA_Clarity"],
        model="judge",
        base_url=base_url,
        api_key="sk-test",
        cache_dir=cache_dir,
        concurrency=concurrency,
        columns={"instruction": "question", "output": "answer"},
    )
    scored.save_to_disk(out)
    print("done", scored.summary.requests, flush=True)


if __name__ == "__main__":
    main()
