"""One engine's run and cascade with the counter ``probe`` added (sitecustomize.py beside this file; see
tests/test_counters.py): ``run.py ENGINE BASE_URL CACHE_DIR ROWS`` prints, as JSON, the counter in the run's summary
and in the cascade's (its tiers' too; None where the engine runs no cascade). A new engine gets a branch in
``KEYWORDS`` (or a runner of its own in ``RUNNERS``)."""

import json
import os
import sys

import datasets

datasets.disable_progress_bars()

from helpers import qa_dataset  # noqa: E402

from hf_judge import Settings, score_dataset  # noqa: E402
from hf_judge.engine import capabilities  # noqa: E402

engine, base_url, cache, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# each engine: what score_dataset is given to run on it
KEYWORDS = {"dataset": {}, "stream": {}, "workers": {"num_workers": 2}, "batch": {"batch": True}}
settings = Settings(model="judge", base_url=base_url, backoff_base=0.001, batch_poll_s=0.01, retries=0)
COLUMNS = {"instruction": "question", "output": "answer"}


def on_ray(folder: str, **kw):
    from hf_judge.ray import score_dataset_on_ray

    # a Ray of the run's own: its actors start with this process's PYTHONPATH, so with the counter
    return score_dataset_on_ray(
        qa_dataset(rows), ["QA_Clarity"], settings=settings, api_key="sk-test", cache_dir=f"{cache}/{folder}",
        columns=COLUMNS, actors=2, **kw,
    )  # fmt: skip


def on_spark(folder: str, **kw):
    from datasets import DatasetDict

    from hf_judge.engine.spark_run import arrow_frames, score_frames_on_spark, spark_session

    os.environ["PROBE_KEY"] = "sk-test"  # read by the Python workers the session starts
    spark = spark_session("local[2]")
    frames = {s: df.repartition(2) for s, df in arrow_frames(spark, DatasetDict({"train": qa_dataset(rows)})).items()}
    return score_frames_on_spark(
        frames, ["QA_Clarity"], settings=settings, api_key="env:PROBE_KEY", cache_dir=f"{cache}/{folder}",
        columns=COLUMNS, output_dir=f"{cache}/{folder}-out", **kw,
    )  # fmt: skip


def on_the_driver(folder: str, **kw):
    data = qa_dataset(rows)
    scored = score_dataset(
        data.to_iterable_dataset(num_shards=2) if engine == "stream" else data, ["QA_Clarity"], settings=settings,
        api_key="sk-test", cache_dir=f"{cache}/{folder}", columns=COLUMNS, progress=False,
        **KEYWORDS.get(engine, {}), **kw,
    )  # fmt: skip
    if engine == "stream":  # a stream is scored as it is read: its summary is the reading's
        list(scored["train"])
    return scored


RUNNERS = {"ray": on_ray, "spark": on_spark}
run = RUNNERS.get(engine, on_the_driver)
plain = run("plain").summary
got = {"plain": plain.probe, "cascade": None, "tiers": None}
if isinstance(capabilities.cell(engine, "cascade"), capabilities.Yes):
    # every row escalates: the cheap score is within 10 of 5
    cascade = run("cascade", escalate_model="strong", escalate_when="margin:QA_Clarity=5+-10").summary
    tiers = cascade.cascade["tiers"]
    got.update(cascade=cascade.probe, tiers={t: tiers[t].get("probe") for t in tiers})
print(json.dumps(got))
