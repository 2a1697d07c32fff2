"""Rows and splits: empty splits in every engine, inputs that are not what they seem (issue 24)."""

from __future__ import annotations

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from datasets import DatasetDict, Features, Value, load_dataset
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge.inputs import load_input
from hf_judge.score import shards_for

SCORES = {"QA_Clarity_reason": Value("string"), "QA_Clarity": Value("int64")}


def _with_empty_test(tmp_path, rows: int = 3):
    dd = DatasetDict({"train": qa_dataset(rows), "test": qa_dataset(1).select([])})
    dd.save_to_disk(tmp_path / "in", num_shards=shards_for(dd))
    return tmp_path / "in"


@pytest.mark.parametrize("kw", [{}, {"use_cache": False}, {"num_workers": 2}], ids=["cache", "no-cache", "workers"])
def test_an_empty_split_among_others_comes_back_with_the_score_columns(judge, tmp_path, kw):
    # the cache on: a FileNotFoundError for the empty split after the other was paid for
    dd = DatasetDict({"train": qa_dataset(3), "test": qa_dataset(1).select([])})
    out = score(dd, ["QA_Clarity"], judge, tmp_path, progress=False, **kw)
    assert len(out["test"]) == 0 and out["test"].features == Features({**dd["test"].features, **SCORES})
    assert out["train"].features == out["test"].features and None not in out["train"]["QA_Clarity"]
    assert out.summary.rows == {"train": 3, "test": 0} and judge.stats()["requests"] == 3
    again = score(dd, ["QA_Clarity"], judge, tmp_path, progress=False, **kw)  # the rerun pays nothing
    assert len(again["test"]) == 0 and list(again["test"].features) == list(out["test"].features)
    assert judge.stats()["requests"] == 3 * (1 + (kw.get("use_cache") is False))


def test_a_dataset_of_one_empty_split_is_scored_as_zero_rows(judge, tmp_path):
    out = score(qa_dataset(1).select([]), ["QA_Clarity"], judge, tmp_path, progress=False)
    assert len(out["train"]) == 0 and {k: out["train"].features[k] for k in SCORES} == SCORES
    assert judge.stats()["requests"] == 0


@pytest.mark.parametrize(
    "extra", [[], ["--no-cache"], ["--workers", "2"], ["--batch"], ["--streaming"]], ids=lambda e: " ".join(e) or "-"
)
def test_cli_scores_a_folder_with_an_empty_split_in_every_engine(batch, tmp_path, capfd, extra):
    # the batch server answers chat completions as the judge does, so one server serves every engine
    data = _with_empty_test(tmp_path)
    code, _, err = run_cli(capfd, *score_args(data, batch, "--cache-dir", tmp_path / "c", "-o", tmp_path / "o", *extra))
    assert code == 0, err
    assert "(train: 3 rows, test: 0 rows)" in err + _
    # a streamed result is Parquet shards, which datasets reads as 0 rows only as a stream
    streamed = "--streaming" in extra
    out = load_dataset(str(tmp_path / "o"), streaming=True) if streamed else load_input(str(tmp_path / "o"))
    assert list(out["test"].features) == ["question", "answer", *SCORES] and list(out["test"]) == []
    assert [r["QA_Clarity"] is not None for r in out["train"]] == [True] * 3


def test_cli_scores_a_folder_whose_only_split_is_empty(judge, tmp_path, capfd):
    dd = DatasetDict({"train": qa_dataset(1).select([])})
    dd.save_to_disk(tmp_path / "in", num_shards=shards_for(dd))
    code, out, err = run_cli(
        capfd, *score_args(tmp_path / "in", judge, "--cache-dir", tmp_path / "c", "-o", tmp_path / "o")
    )
    assert code == 0, err
    assert list(load_input(str(tmp_path / "o"))["train"].features) == ["question", "answer", *SCORES]
    assert judge.stats()["requests"] == 0
