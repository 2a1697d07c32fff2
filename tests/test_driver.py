"""The run driver (hf_judge/engine/driver.py): what it does once for every engine on it, whichever entry point
starts the run (``score_dataset``, or a resolved job's ``score_job``, as the cascade and the CLI call it)."""

from __future__ import annotations

import json

import pytest
from datasets import load_from_disk
from helpers import qa_dataset

from hf_judge import AuthenticationError, ConfigError, OutputExistsError
from hf_judge.engine.capabilities import refusal
from hf_judge.engine.counting import StatsReporter, Tally
from hf_judge.engine.job import JudgeJob
from hf_judge.engine.score import score_job
from hf_judge.results.output import FolderSink
from hf_judge.transport.client import JudgeClient

COLUMNS = {"instruction": "question", "output": "answer"}


def _job(judge, tmp_path, **settings) -> JudgeJob:
    return JudgeJob.resolve(
        ["QA_Clarity"],
        model="judge",
        base_url=judge.base_url,
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
        retries=0,
        **settings,
    )


def test_the_sink_is_started_before_the_first_request_and_written_at_the_end(judge, tmp_path):
    """Ray Data's Datasink steps at fixed points: a place that would lose something refuses the run before it pays;
    a finished run's splits, errors and summary are written there; a failed run leaves nothing half-written."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError):
        score_job(qa_dataset(4), _job(judge, tmp_path), progress=False, sink=FolderSink(taken, source="data.jsonl"))
    assert judge.stats()["requests"] == 0 and (taken / "notes.txt").read_text() == "mine"

    out = score_job(qa_dataset(4), _job(judge, tmp_path), progress=False, sink=FolderSink(tmp_path / "ok", source="d"))
    saved = load_from_disk(str(tmp_path / "ok"))
    assert saved["train"].to_list() == out["train"].to_list() and len(saved["errors"]) == 0
    assert json.loads((tmp_path / "ok" / "summary.json").read_text())["requests"] == 4 == judge.stats()["requests"]

    judge.configure(require_key="another")  # every request a 401: the run stops
    with pytest.raises(AuthenticationError):
        score_job(
            qa_dataset(4, prefix="new"),
            _job(judge, tmp_path),
            progress=False,
            sink=FolderSink(tmp_path / "no", source="d"),
        )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith((".no", "no"))] == []


def test_a_resolved_job_is_refused_by_the_engine_it_runs_on_before_any_request(judge, tmp_path):
    """The refusal is the driver's (capabilities.check in Run.prepare), not only score_dataset's: a stream with
    num_workers given to score_job was scored by one process, the workers dropped without a word."""
    stream = qa_dataset(4).to_iterable_dataset()
    with pytest.raises(ConfigError) as raised:
        score_job(stream, _job(judge, tmp_path, num_workers=2), progress=False)
    assert str(raised.value) == refusal("stream", "workers")
    assert judge.stats()["requests"] == 0


def test_a_report_of_the_counting_bridge_counts_once_however_it_travels():
    """The worker side reports what moved since its last report; the driver side adds each report it reads (here
    through JSON, as a Ray batch's or a Spark row's stats column carries it)."""
    from hf_judge import Settings

    worker = [JudgeClient(Settings(model="m"), api_key=None), JudgeClient(Settings(model="n"), api_key=None)]
    driver = Tally([JudgeClient(Settings(model="m"), api_key=None), JudgeClient(Settings(model="n"), api_key=None)])
    reporter = StatsReporter(worker)
    worker[0].stats.requests += 3
    worker[0].stats.failures["timeout"] += 1
    driver.merge(json.loads(json.dumps(reporter.report())))
    worker[1].stats.requests += 2
    worker[1].stats.latency[5] += 2
    driver.merge(json.loads(json.dumps(reporter.report())))
    driver.merge(json.loads(json.dumps(reporter.report())))  # nothing moved since
    assert [s.requests for s in driver.stats] == [3, 2]
    assert dict(driver.stats[0].failures) == {"timeout": 1} and dict(driver.stats[1].latency) == {5: 2}
