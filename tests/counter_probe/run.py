"""One engine's run and cascade with the counter ``probe`` added (sitecustomize.py beside this file; see
tests/test_counters.py): ``run.py ENGINE BASE_URL CACHE_DIR ROWS`` prints, as JSON, the counter in the run's summary
and in the cascade's (its tiers' too). A new engine gets a branch in ``KEYWORDS`` (or a runner of its own)."""

import json
import sys

import datasets

datasets.disable_progress_bars()

from helpers import qa_dataset  # noqa: E402

from hf_judge import Settings, score_dataset  # noqa: E402
from hf_judge.engine.capabilities import refusal  # noqa: E402

engine, base_url, cache, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# each engine: what score_dataset is given to run on it
KEYWORDS = {"dataset": {}, "stream": {}, "workers": {"num_workers": 2}, "batch": {"batch": True}}
settings = Settings(model="judge", base_url=base_url, backoff_base=0.001, batch_poll_s=0.01, retries=0)


def run(folder: str, **kw):
    data = qa_dataset(rows)
    scored = score_dataset(
        data.to_iterable_dataset(num_shards=2) if engine == "stream" else data,
        ["QA_Clarity"],
        settings=settings,
        api_key="sk-test",
        cache_dir=f"{cache}/{folder}",
        columns={"instruction": "question", "output": "answer"},
        progress=False,
        **KEYWORDS[engine],
        **kw,
    )
    if engine == "stream":  # a stream is scored as it is read: its summary is the reading's
        list(scored["train"])
    return scored.summary


plain = run("plain")
got = {"plain": plain.probe}
if refusal(engine, "cascade") is None:  # a stream is read once, and a cascade reads its split twice
    # every row escalates: the cheap score is within 10 of 5
    cascade = run("cascade", escalate_model="strong", escalate_when="margin:QA_Clarity=5+-10")
    tiers = cascade.cascade["tiers"]
    got.update(cascade=cascade.probe, tiers={t: tiers[t].get("probe") for t in tiers})
print(json.dumps(got))
