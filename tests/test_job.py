"""One job object: every public entry point resolves its keyword arguments into one ``JudgeJob``, with the same
checks and messages, and hands it on (the engines read the job, never the bundle again)."""

from __future__ import annotations

import pickle

import pytest
from datasets import Dataset
from helpers import qa_dataset

from hf_judge import ConfigError, Judge, UnknownMetricError, estimate_cost, export_batch, score_dataset
from hf_judge.engine.job import JudgeJob
from hf_judge.ray import score_dataset_on_ray

COLUMNS = {"instruction": "question", "output": "answer"}


def _entry_points(tmp_path):
    """Each public entry point, called with the same bundle (the dataset first where it takes one)."""
    ds = qa_dataset(2)
    return {
        "score_dataset": lambda m, **kw: score_dataset(ds, m, **kw),
        "estimate_cost": lambda m, **kw: estimate_cost(ds, m, **kw),
        "export_batch": lambda m, **kw: export_batch(ds, m, tmp_path / "requests.jsonl", **kw),
        "score_dataset_on_ray": lambda m, **kw: score_dataset_on_ray(ds, m, **kw),
        "Judge": lambda m, **kw: Judge(m, **kw),
        "JudgeJob.resolve": lambda m, **kw: JudgeJob.resolve(m, **kw),
    }


@pytest.mark.parametrize(
    "entry", ["score_dataset", "estimate_cost", "export_batch", "score_dataset_on_ray", "Judge", "JudgeJob.resolve"]
)
def test_every_entry_point_refuses_a_bad_bundle_with_the_jobs_message(entry, tmp_path):
    call = _entry_points(tmp_path)[entry]
    base = {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "cache_dir": tmp_path / "c", "columns": COLUMNS}
    with pytest.raises(UnknownMetricError) as e:
        call(["QA_Clarityy"], **base)
    with pytest.raises(UnknownMetricError) as want:
        JudgeJob.resolve(["QA_Clarityy"], **base)
    assert str(e.value) == str(want.value) and "QA_Clarity" in str(e.value)  # the close name is suggested
    with pytest.raises(TypeError, match=r"did you mean 'model' for 'modle'"):
        call(["QA_Clarity"], **{**base, "modle": "x"})
    with pytest.raises(ConfigError, match="temperature"):
        call(["QA_Clarity"], **{**base, "temperature": "hot"})


def test_a_job_resolves_settings_metrics_and_store_once(tmp_path):
    job = JudgeJob.resolve(
        ["QA_All", "QA_Clarity"], model="judge", samples=3, columns=COLUMNS, cache_dir=tmp_path / "c", use_cache=False
    )
    # QA_All next to QA_Clarity: the All's clashing column moves, settled once
    assert [m.name for m in job.metrics] == ["QA_All", "QA_Clarity"]
    assert "QA_All_Clarity" in job.metrics[0].columns
    assert job.layout.samples == 3 and job.settings.samples == 3
    assert job.store_path is None and job.store_file == (tmp_path / "c" / "replies.sqlite3").absolute()
    # settled metrics resolve to themselves: a job handed on is not resolved into something else
    again = JudgeJob.of(job.settings, job.metrics, job.columns)
    assert [m.columns for m in again.metrics] == [m.columns for m in job.metrics]
    fleet = job.with_settings(base_url="http://127.0.0.1:8001/v1")
    assert fleet.settings.base_url == "http://127.0.0.1:8001/v1" and job.settings.base_url != fleet.settings.base_url


def test_a_key_named_by_variable_is_read_where_it_is_sent(judge, tmp_path, monkeypatch):
    """``api_key="env:NAME"`` holds the name (a pickled job carries no key) and every entry point reads it when
    it sends: score_dataset sends what the variable holds, as the map transform does."""
    monkeypatch.setenv("HFJ_JOB_KEY", "sk-from-the-variable")
    judge.configure(record=True)
    job = JudgeJob.resolve(["QA_Clarity"], model="judge", api_key="env:HFJ_JOB_KEY", base_url=judge.base_url)
    assert b"sk-from-the-variable" not in pickle.dumps(job)
    assert job.key(needed=True) == "sk-from-the-variable"
    scored = score_dataset(
        qa_dataset(2),
        ["QA_Clarity"],
        model="judge",
        base_url=judge.base_url,
        columns=COLUMNS,
        api_key="env:HFJ_JOB_KEY",
        cache_dir=tmp_path / "c",
        progress=False,
    )
    assert None not in scored["train"]["QA_Clarity"] and len(scored["errors"]) == 0
    assert set(judge.stats()["auth"]) == {"Bearer sk-from-the-variable"}
    monkeypatch.delenv("HFJ_JOB_KEY")
    with pytest.raises(ConfigError, match="HFJ_JOB_KEY is not set"):
        score_dataset(Dataset.from_dict({"question": ["q"], "answer": ["a"]}), ["QA_Clarity"], model="judge",
                      base_url=judge.base_url, columns=COLUMNS, api_key="env:HFJ_JOB_KEY", use_cache=False)  # fmt: skip
