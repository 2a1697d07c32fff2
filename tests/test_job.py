"""One job object: every public entry point resolves its keyword arguments into one ``JudgeJob``, with the same
checks and messages, and hands it on (the engines read the job, never the bundle again)."""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import operator
import pickle
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest
from datasets import Dataset
from helpers import qa_dataset

from hf_judge import ConfigError, Judge, UnknownMetricError, estimate_cost, export_batch, score_dataset
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
def test_every_entry_point_shows_the_same_arguments_and_types_its_settings(path):
    """The arguments an IDE shows: the common ones, keyword-only, with one annotation and default each, and the
    settings typed (``**setting_values: Unpack[SettingValues]``), not hidden behind ``**kwargs: Any``."""
    params = inspect.signature(_entry(path)).parameters
    reference = inspect.signature(_entry("hf_judge:score_dataset")).parameters
    skipped = NOT_APPLICABLE.get(path, {})
    for name in COMMON_ARGUMENTS:
        if name in skipped:
            assert name not in params, f"{path} takes {name}, which NOT_APPLICABLE says does not apply"
            continue
        assert name in params, f"{path} does not take {name}="
        p, want = params[name], reference[name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, (path, name)
        assert (p.annotation, p.default) == (want.annotation, want.default), (path, name)
    rest = [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in rest] == ["setting_values"], path
    typed = re.fullmatch(r"Unpack\[(\w+)\]", rest[0].annotation)
    assert typed, f"{path}'s **setting_values is {rest[0].annotation}, not Unpack[SettingValues]"
    keys = set(typing.get_type_hints(getattr(settings_module, typed[1])))
    assert keys == set(public_fields()) - set(skipped), f"{path} types settings {typed[1]}, not the public ones"


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
