"""A batch-mode scoring job in its own process, for the kill and Ctrl-C tests, with any provider's judge.

python tests/batch_job.py openai|anthropic|gemini BASE_URL CACHE_DIR N
python tests/batch_job.py panel MODELS_JSON CACHE_DIR N   # a panel: each judge names its own base_url
"""

import json
import sys

import datasets

datasets.disable_progress_bars()

from helpers import JUDGES, QA_COLUMNS, qa_dataset  # noqa: E402

from hf_judge import Settings, score_dataset  # noqa: E402


def main() -> None:
    provider, target, cache_dir, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if provider == "panel":
        metric, more = "QA_Correctness", {"settings": Settings(models=json.loads(target), batch_poll_s=0.01, retries=0)}
        api_key = "sk-test"
    else:
        values, api_key = JUDGES[provider]
        metric, more = "QA_Clarity", {"settings": Settings(**values, batch_poll_s=0.01), "base_url": target}
    print("started", flush=True)
    scored = score_dataset(
        qa_dataset(n),
        [metric],
        api_key=api_key,
        cache_dir=cache_dir,
        batch=True,
        columns=QA_COLUMNS,
        progress=False,
        **more,
    )
    print("done", scored.summary.batch, flush=True)


if __name__ == "__main__":
    main()
