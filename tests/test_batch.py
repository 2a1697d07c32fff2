"""Batch mode (hf_judge/batch.py) against the loopback batch server (tests/batch_server.py)."""

from __future__ import annotations

from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from helpers import qa_dataset

from hf_judge import Settings, score_dataset

COLUMNS = {"instruction": "question", "output": "answer"}


def run(ds, server, cache, metrics=("QA_Clarity",), **kw):
    knobs = {"backoff_base": 0.001, "backoff_max": 0.01, "batch_poll_s": 0.01}
    knobs.update({k: kw.pop(k) for k in list(kw) if k in ("batch_poll_s", "batch_offline")})
    return score_dataset(
        ds,
        list(metrics),
        settings=Settings(model="judge", **knobs),
        base_url=server.base_url,
        api_key="sk-test",
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
        **kw,
    )


def rows(scored):
    return {k: v.to_list() for k, v in scored.items()}


def test_batch_run_equals_online_row_for_row(batch, tmp_path):
    ds = qa_dataset(40)
    online = run(ds, batch, tmp_path / "online", metrics=("QA_All",))
    assert batch.stats()["online"] == 40
    batched = run(ds, batch, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(batched) == rows(online)
    st = batch.stats()
    assert st["online"] == 40 and st["batches"] == 1 and st["uploads"] == 1
    assert sorted(st["paid"].values()) == [1] * 40
    assert batched.summary.batch["collected"] == 40 and batched.summary.batch["batches"] == 1
    assert batched.summary.batch["prompt_tokens"] > 0
    assert "batch mode" in str(batched.summary)
    # everything is in the reply store now: the same call sends nothing, submits nothing
    again = run(ds, batch, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(again) == rows(online) and batch.stats()["batches"] == 1
