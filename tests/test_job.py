"""One job object: every public entry point resolves its keyword arguments into one ``JudgeJob``, with the same
checks and messages, and hands it on (the engines read the job, never the bundle again)."""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import json
import operator
import pickle
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from datasets import Dataset
from helpers import qa_dataset

from hf_judge import ConfigError, Job, Judge, UnknownMetricError, estimate_cost, export_batch, score_dataset
from hf_judge import settings as settings_module
from hf_judge.engine.job import COMMON_ARGUMENTS, ENTRY_POINTS, NOT_APPLICABLE, JudgeJob
from hf_judge.ray import score_dataset_on_ray
from hf_judge.settings import Panelist, Settings, SettingValues, public_fields

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
    again = JudgeJob.of(job.settings, job.metrics, columns=job.columns)
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


def _entry(path: str):
    module, name = path.split(":")
    obj = getattr(importlib.import_module(module), name)
    return obj.__init__ if inspect.isclass(obj) else obj


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_every_entry_point_types_the_shared_keywords_once(path):
    """The arguments an IDE shows: the entry point's own, then ``**values: Unpack[JobValues]`` (the common ones and
    the settings, typed once in settings.py), less what NOT_APPLICABLE says does not apply; none of them repeated
    as a parameter of its own (Ray's ``concurrency`` is its actors, not the setting)."""
    params = inspect.signature(_entry(path)).parameters
    skipped = NOT_APPLICABLE.get(path, {})
    rest = [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in rest] == ["values"], path
    typed = re.fullmatch(r"Unpack\[(\w+)\]", rest[0].annotation)
    assert typed, f"{path}'s **values is {rest[0].annotation}, not Unpack[JobValues]"
    keys = set(typing.get_type_hints(getattr(settings_module, typed[1])))
    assert keys == (set(COMMON_ARGUMENTS) | set(public_fields())) - set(skipped), f"{path} types {typed[1]}"
    repeated = (set(COMMON_ARGUMENTS) | set(public_fields())) & set(params) - set(skipped)
    assert not repeated, f"{path} repeats {sorted(repeated)} as parameters of its own"
    second = list(params)[1]  # after the dataset (or Judge's self)
    assert second in ("metrics", "metric"), f"{path}: the Job goes where the metrics go, not {second}"


def _accepted(tp):
    """What a caller may give for a setting of type ``tp``: an enum also as its value's string, a panel also as
    model names, mappings or a flag's "a,b"."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp | Literal[tuple(e.value for e in tp)]
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list and args == (Panelist,):
        return str | Sequence[Panelist | str | Mapping[str, Any]]
    if args and typing.get_origin(tp) in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, [_accepted(a) for a in args])
    return tp


def test_setting_values_has_one_key_per_public_setting_of_its_type():
    typed = typing.get_type_hints(SettingValues)
    fields = typing.get_type_hints(Settings)
    assert set(typed) == set(public_fields()), "SettingValues and Settings' public fields differ"
    wrong = {k: (typed[k], _accepted(fields[k])) for k in typed if typed[k] != _accepted(fields[k])}
    assert not wrong, f"SettingValues' types differ from Settings' (given, wanted): {wrong}"
    assert not SettingValues.__required_keys__  # every setting is optional, as the keyword arguments are


def test_the_cache_arguments_reach_every_entry_point(tmp_path):
    """storage_options / local_cache_dir are arguments of estimate_cost and export_batch too: they reach the
    job's checks (a local cache_dir with local_cache_dir, batch files with a store on object storage) instead
    of a TypeError that calls them unknown settings."""
    base = {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "columns": COLUMNS}
    with pytest.raises(ConfigError, match="local_cache_dir= is the local copy"):
        estimate_cost(qa_dataset(2), ["QA_Clarity"], cache_dir=tmp_path / "c", local_cache_dir=tmp_path / "l", **base)
    url = (tmp_path / "remote").as_uri()
    with pytest.raises(ConfigError, match="local reply store"):
        export_batch(qa_dataset(2), ["QA_Clarity"], tmp_path / "r.jsonl", cache_dir=url, storage_options={}, **base)
    with pytest.raises(ConfigError, match=r"drop use_cache=False"):
        export_batch(qa_dataset(2), ["QA_Clarity"], tmp_path / "r.jsonl", use_cache=False, **base)


# -- hf_judge.Job: every entry point takes one, with the result and the requests of its keyword form


def _base(server, cache, **extra) -> dict[str, Any]:
    """The values of a job on ``server``: its judge ``model="judge"`` (a panel's ``models=`` in ``extra`` instead)."""
    judge = {} if "models" in extra else {"model": "judge"}
    return {**judge, "base_url": server.base_url, "columns": COLUMNS, "cache_dir": cache, **extra}


def _both(server, tmp_path, run) -> tuple[tuple[Any, dict], tuple[Any, dict]]:
    """``run(form, cache)`` with the keyword form, then with the Job form, each on a fresh store and a server reset:
    (result, the server's counters) of each."""
    out = []
    for form in ("keywords", "job"):
        server.reset()
        result = run(form, tmp_path / form)
        out.append((result, server.stats()))
    return out[0], out[1]


def _called(entry, ds, metrics, form, values, *args, **own):
    """``entry`` called in ``form``: ``entry(ds, metrics, *args, **own, **values)`` or ``entry(ds, Job(metrics,
    **values), *args, **own)``."""
    if form == "job":
        return entry(ds, Job(metrics, **values), *args, **own)
    return entry(ds, metrics, *args, **own, **values)


ENGINES = {
    "one process": {},
    "workers": {"num_workers": 2},
    "cascade": {"escalate_model": "strong", "escalate_when": "margin:QA_Clarity=5+-3"},
    "panel and samples": {"models": ["judge", "other"], "samples": 2, "temperature": 0.7},
}


@pytest.mark.parametrize("engine", ENGINES)
def test_score_dataset_takes_a_job_with_the_result_and_requests_of_its_keywords(engine, judge, tmp_path):
    ds = qa_dataset(6)
    (a, sent_a), (b, sent_b) = _both(
        judge,
        tmp_path,
        lambda form, cache: _called(
            score_dataset, ds, ["QA_Clarity", "QA_Relevance"], form, _base(judge, cache, **ENGINES[engine]),
            progress=False,
        ),
    )  # fmt: skip
    assert {k: v.to_list() for k, v in a.items()} == {k: v.to_list() for k, v in b.items()}
    assert sent_a["requests"] == sent_b["requests"] > 0
    assert a.summary.to_dict()["requests"] == b.summary.to_dict()["requests"]


def test_a_stream_takes_a_job_with_the_rows_and_requests_of_its_keywords(judge, tmp_path):
    ds = qa_dataset(5).to_iterable_dataset()
    (a, sent_a), (b, sent_b) = _both(
        judge,
        tmp_path,
        lambda form, cache: {
            split: list(rows)
            for split, rows in _called(
                score_dataset, ds, ["QA_Clarity"], form, _base(judge, cache), progress=False
            ).items()
        },
    )
    assert a == b and len(a["train"]) == 5
    assert sent_a["requests"] == sent_b["requests"] == 5


def test_batch_mode_export_and_import_take_a_job_with_the_results_and_requests_of_their_keywords(batch, tmp_path):
    from batch_server import BatchService
    from helpers import FAST

    from hf_judge import import_batch

    ds = qa_dataset(4)
    settings = Settings(model="judge", **FAST)
    # batch mode: the batch server's counters (files, batches, lines paid) alike
    (a, sent_a), (b, sent_b) = _both(
        batch,
        tmp_path,
        lambda form, cache: _called(
            score_dataset, ds, ["QA_Clarity"], form,
            {**_base(batch, cache, batch=True, api_key="sk-test"), "settings": settings}, progress=False,
        ),
    )  # fmt: skip
    assert {k: v.to_list() for k, v in a.items()} == {k: v.to_list() for k, v in b.items()}
    assert sent_a == sent_b and sent_a["batches"] >= 1

    def exported_and_imported(form, cache):
        values = _base(batch, cache)
        lines = _called(export_batch, ds, ["QA_Clarity"], form, values, cache / "requests.jsonl")
        svc, out = BatchService(), []
        for text in (cache / "requests.jsonl").read_text().splitlines():
            req = json.loads(text)
            out.append(
                {"custom_id": req["custom_id"], "response": {"status_code": 200, "body": svc.reply(req["body"])}}
            )
        (cache / "results.jsonl").write_text("".join(json.dumps(o) + "\n" for o in out))
        scored = _called(import_batch, ds, ["QA_Clarity"], form, values, cache / "results.jsonl", progress=False)
        return lines, (cache / "requests.jsonl").read_bytes(), {k: v.to_list() for k, v in scored.items()}

    (a, sent_a), (b, sent_b) = _both(batch, tmp_path / "files", exported_and_imported)
    assert a == b and a[0] == 4 and len(a[2]["train"]) == 4
    assert sent_a == sent_b  # nothing sent by either


def test_estimate_cost_takes_a_job_with_the_estimate_of_its_keywords(judge, tmp_path):
    ds = qa_dataset(4)
    (a, sent_a), (b, sent_b) = _both(
        judge,
        tmp_path,
        lambda form, cache: _called(estimate_cost, ds, ["QA_All", "QA_Clarity"], form, _base(judge, cache),
                                    tokenizer="server"),
    )  # fmt: skip
    assert str(a) == str(b) and a.requests == b.requests == 8
    assert sent_a["requests"] == sent_b["requests"] == 0 and sent_a["tokenize"] == sent_b["tokenize"] > 0


def test_the_map_transform_takes_a_job_with_the_rows_and_requests_of_its_keywords(judge, tmp_path):
    ds = qa_dataset(5)

    def mapped(form, cache):
        values = _base(judge, cache)
        with Judge(Job(["QA_Clarity"], **values)) if form == "job" else Judge(["QA_Clarity"], **values) as j:
            return ds.map(j, batched=True, batch_size=2, features=j.features(ds.features)).to_list()

    (a, sent_a), (b, sent_b) = _both(judge, tmp_path, mapped)
    assert a == b and all(r["QA_Clarity"] is not None for r in a)
    assert sent_a["requests"] == sent_b["requests"] == 5


def test_choose_judge_takes_a_job_whose_judge_the_candidates_replace(judge, tmp_path):
    from hf_judge import choose_judge

    ds = Dataset.from_dict({"question": ["q"] * 6, "answer": list("abcdef"), "human": [True, False] * 3})
    candidates = [{"model": "one", "base_url": judge.base_url}, {"model": "two", "base_url": judge.base_url}]
    values = {"columns": {"prediction": "answer"}, "api_key": "k"}

    def chosen(form, cache):
        own = {"label": "human", "progress": False, "resamples": 0}
        if form == "job":  # the Job's model: any, the candidates replace it
            choice = choose_judge(ds, Job("Binary", model="judge", cache_dir=cache, **values), candidates, **own)
        else:
            choice = choose_judge(ds, "Binary", candidates, cache_dir=cache, **own, **values)
        return [(e["name"], e["score"], e["coverage"]) for e in choice.entries], choice.recommendation

    (a, sent_a), (b, sent_b) = _both(judge, tmp_path, chosen)
    assert a == b and [name for name, *_ in a[0]] == ["one", "two"]
    assert sent_a["requests"] == sent_b["requests"] == 12


def test_a_job_is_reusable_across_entry_points(judge, tmp_path):
    """One Job: estimated, scored, scored again (from the store), mapped, exported: each entry point reads it
    alike and none changes it."""
    ds = qa_dataset(4)
    job = Job(["QA_Clarity"], **_base(judge, tmp_path / "c"))
    before = repr(job)
    judge.reset()
    assert estimate_cost(ds, job).requests == 4 and judge.stats()["requests"] == 0
    first = score_dataset(ds, job, progress=False)
    assert judge.stats()["requests"] == 4
    again = score_dataset(ds, job, progress=False)
    assert again["train"].to_list() == first["train"].to_list() and judge.stats()["requests"] == 4
    with Judge(job) as j:
        mapped = ds.map(j, batched=True, features=j.features(ds.features))
    assert mapped["QA_Clarity"] == first["train"]["QA_Clarity"] and judge.stats()["requests"] == 4
    assert export_batch(ds, job, tmp_path / "requests.jsonl") == 0  # every reply in the store already
    assert repr(job) == before and judge.stats()["requests"] == 4


BAD_JOBS = {
    "unknown metric": ({"metrics": ["QA_Clarityy"]}, UnknownMetricError, "QA_Clarity"),
    "unknown setting": ({"modle": "x"}, TypeError, r"Job\(\) got unexpected keyword argument\(s\) modle; did you mean"),
    "a value out of range": ({"temperature": 7}, ConfigError, r"temperature .*less than or equal to 2 \(got 7\)"),
    "storage options of a local store": ({"storage_options": {}}, ConfigError, "storage_options= configures"),
    "a panel judge's key written out": (
        {"models": [{"model": "m", "api_key": "sk-written-out-1234"}]}, ConfigError, "names the environment variable"
    ),
}  # fmt: skip


@pytest.mark.parametrize("bad", BAD_JOBS)
def test_a_bad_field_is_refused_when_the_job_is_made(bad, judge, tmp_path):
    change, error, message = BAD_JOBS[bad]
    values = _base(judge, tmp_path / "c", **change)
    judge.reset()
    with pytest.raises(error, match=message) as e:
        Job(values.pop("metrics", ["QA_Clarity"]), **values)
    assert "sk-written-out-1234" not in str(e.value)
    assert judge.stats()["requests"] == 0


def test_a_job_with_keyword_arguments_or_an_unset_key_is_refused_before_any_request(judge, tmp_path, monkeypatch):
    from hf_judge.ray import score_ray_dataset
    from hf_judge.spark import score_spark_dataframe

    ds = qa_dataset(3)
    job = Job(["QA_Clarity"], **_base(judge, tmp_path / "c"))
    judge.reset()
    with pytest.raises(TypeError, match=r"score_dataset\(\) got a Job and keyword arguments of a job \(model=\)"):
        score_dataset(ds, job, model="other", progress=False)
    with pytest.raises(TypeError, match=r"Judge\(\) got a Job and keyword arguments of a job \(columns=\)"):
        Judge(job, columns=COLUMNS)
    for entry in (score_ray_dataset, score_spark_dataframe):  # their in_flight= is the Job's concurrency
        with pytest.raises(TypeError, match=r"in_flight is the Job's concurrency setting.*replace\(concurrency=4\)"):
            entry(None, job, in_flight=4)
    monkeypatch.delenv("HFJ_UNSET_KEY", raising=False)
    keyless = job.replace(api_key="env:HFJ_UNSET_KEY")
    with pytest.raises(ConfigError, match="HFJ_UNSET_KEY is not set"):
        score_dataset(ds, keyless, progress=False)
    assert judge.stats()["requests"] == 0


def test_a_jobs_repr_shows_what_it_was_given_and_never_a_secret(tmp_path):
    secrets = ["sk-live-0123456789abcdef", "hunter2-password", "AKIA-EXAMPLE-KEY-ID", "wJalr-secret-access-key"]
    job = Job(
        ["QA_Clarity"],
        models=[{"model": "judge", "api_key": "env:JUDGE_KEY"}, "other"],
        base_url="http://gateway-user:hunter2-password@127.0.0.1:9/v1",
        api_key="sk-live-0123456789abcdef",
        cache_dir="s3://bucket/judge-cache",
        local_cache_dir=tmp_path / "local",
        storage_options={"key": "AKIA-EXAMPLE-KEY-ID", "secret": "wJalr-secret-access-key", "anon": False},
    )
    for shown in (repr(job), str(job), f"{job!r}", repr([job]), repr(job.replace(samples=1)), repr(job.resolved)):
        assert not [s for s in secrets if s in shown], shown
    assert "base_url='http://gateway-user:***@127.0.0.1:9/v1'" in repr(job) and repr(job).startswith(
        "Job(['QA_Clarity'], "
    )
    assert "api_key='***'" in repr(job) and "'key': '***', 'secret': '***', 'anon': False" in repr(job)
    assert "env:JUDGE_KEY" in repr(job)  # a variable's name is no secret
    with pytest.raises(TypeError) as e:
        score_dataset(qa_dataset(1), job, api_key="sk-live-0123456789abcdef")
    assert "sk-live" not in str(e.value)


def test_ray_takes_a_job_with_the_rows_and_requests_of_its_keywords(judge, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from hf_judge.ray import score_dataset_on_ray, score_ray_dataset

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    ds = qa_dataset(4)

    def on_ray(form, cache):
        scored = _called(score_dataset_on_ray, ds, ["QA_Clarity"], form, _base(judge, cache), actors=1)
        return {k: v.to_list() for k, v in scored.items()}

    def stage(form, cache):
        scored = _called(
            score_ray_dataset, ray.data.from_items(ds.to_list()), ["QA_Clarity"], form, _base(judge, cache)
        )
        return sorted((r["question"], r["QA_Clarity"], r["QA_Clarity_reason"]) for r in scored.take_all())

    try:
        (a, sent_a), (b, sent_b) = _both(judge, tmp_path / "driver", on_ray)
        assert a == b and len(a["train"]) == 4 and sent_a["requests"] == sent_b["requests"] == 4
        (a, sent_a), (b, sent_b) = _both(judge, tmp_path / "stage", stage)
        assert a == b and None not in [score for _, score, _ in a] and sent_a["requests"] == sent_b["requests"] == 4
    finally:
        ray.shutdown()


def test_spark_takes_a_job_with_the_rows_schema_and_requests_of_its_keywords(judge, tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    import os
    import sys

    from pyspark.sql import SparkSession

    from hf_judge.spark import score_spark_dataframe, spark_output_schema

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:  # another test file's: getOrCreate would return it as it is
        active.stop()
    session = (
        SparkSession.builder.master("local[1]")
        .appName("hf-judge-job")
        .config("spark.ui.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
        .getOrCreate()
    )
    df = session.createDataFrame(qa_dataset(4).to_list(), "question string, answer string")

    def scored(form, cache):
        values = _base(judge, cache, batch_size=2) if form == "keywords" else _base(judge, cache)
        own = {} if form == "keywords" else {"batch_size": 2}
        out = _called(score_spark_dataframe, df, ["QA_Clarity"], form, values, **own)
        schema = _called(spark_output_schema, df, ["QA_Clarity"], form, values, **own)
        assert out.schema == schema
        return schema, sorted((r["question"], r["QA_Clarity"], r["QA_Clarity_reason"]) for r in out.collect())

    try:
        (a, sent_a), (b, sent_b) = _both(judge, tmp_path, scored)
        assert a == b and len(a[1]) == 4 and sent_a["requests"] == sent_b["requests"] == 4
    finally:
        session.stop()
