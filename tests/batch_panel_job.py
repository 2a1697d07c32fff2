"""A batch-mode panel run in its own process, for the kill tests of tests/test_batch_panel.py.

python tests/batch_panel_job.py CACHE_DIR N MODELS_JSON
"""

import json
import sys

import datasets

datasets.disable_progress_bars()

from helpers import qa_dataset  # noqa: E402

from hf_judge import Settings, score_dataset  # noqa: E402


def main() -> None:
    cache_dir, n, models = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    print("started", flush=True)
    scored = score_dataset(
        qa_dataset(n),
        ["QA_Correctness"],
        settings=Settings(models=models, batch_poll_s=0.01, retries=0),
        api_key="sk-test",
        cache_dir=cache_dir,
        batch=True,
        columns={"instruction": "question", "output": "answer"},
        progress=False,
    )
    print("done", scored.summary.batch, flush=True)


if __name__ == "__main__":
    main()
