"""A scoring job in its own process, for the kill and interrupt tests.

python tests/score_job.py BASE_URL CACHE_DIR N CONCURRENCY OUT_DIR [MODELS]

MODELS (``a,b``): a panel of those judges, each at BASE_URL. ``SCORE_JOB_GO=FILE``: after "started", wait for FILE to
exist before scoring (so that two jobs start at the same moment). ``SCORE_JOB_WORKERS=N``: with ``num_workers=N``.

The tests call ``run`` in-process for the runs that need no process of their own (the reference, the rerun).
"""

import os
import sys
import time

from helpers import qa_dataset

from hf_judge import score_dataset


def run(base_url: str, cache_dir, n: int, concurrency: int, out, models: str | None = None):
    """Score ``n`` rows of ``qa_dataset`` with QA_Clarity (by the panel ``models``, where given) and save them to
    ``out``; the same keys in any process."""
    scored = score_dataset(
        qa_dataset(n),
        ["QA_Clarity"],
        **({"models": models} if models else {"model": "judge"}),
        base_url=base_url,
        api_key="sk-test",
        cache_dir=cache_dir,
        concurrency=concurrency,
        **({"num_workers": int(os.environ["SCORE_JOB_WORKERS"])} if os.environ.get("SCORE_JOB_WORKERS") else {}),
        columns={"instruction": "question", "output": "answer"},
    )
    scored.save_to_disk(out)
    return scored


def main() -> None:
    import datasets

    datasets.disable_progress_bars()
    base_url, cache_dir, n, concurrency, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    models = sys.argv[6] if len(sys.argv) > 6 else None
    print("started", flush=True)
    go = os.environ.get("SCORE_JOB_GO")
    while go and not os.path.exists(go):
        time.sleep(0.005)
    scored = run(base_url, cache_dir, n, concurrency, out, models)
    print("done", scored.summary.requests, flush=True)


if __name__ == "__main__":
    main()
