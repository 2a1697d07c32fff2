"""A batch-mode scoring job with an Anthropic judge in its own process, for the kill and Ctrl-C tests.

python tests/claude_batch_job.py BASE_URL CACHE_DIR N
"""

import sys

import datasets

datasets.disable_progress_bars()

from helpers import qa_dataset  # noqa: E402

from hf_judge import Settings, score_dataset  # noqa: E402


def main() -> None:
    base_url, cache_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("started", flush=True)
    scored = score_dataset(
        qa_dataset(n),
        ["QA_Clarity"],
        settings=Settings(model="claude-haiku-4-5", provider="anthropic", batch_poll_s=0.01),
        base_url=base_url,
        api_key="sk-ant-test",
        cache_dir=cache_dir,
        batch=True,
        columns={"instruction": "question", "output": "answer"},
        progress=False,
    )
    print("done", scored.summary.batch, flush=True)


if __name__ == "__main__":
    main()
