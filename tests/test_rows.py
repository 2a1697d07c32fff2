"""Rows and splits: empty splits in every engine, inputs that are not what they seem (issue 24)."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from datasets import DatasetDict, Features, Value, load_dataset
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge.cli.inputs import load_input
from hf_judge.results.scored import shards_for

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


def test_cli_a_jsonl_column_of_two_types_names_the_file_line_and_column(judge, tmp_path, capfd):
    # datasets reads a mixed column as JSON text, but from a file with a blank line (here the last) it
    # failed with a bare "ValueError: Expected object or value", exit 1
    data = tmp_path / "mixed.jsonl"
    rows = [{"question": f"q{i}", "answer": "a"} for i in range(3)] + [{"question": "q3", "answer": {"k": 1}}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", tmp_path / "c", "-o", tmp_path / "o"))
    assert code == 2, err
    assert f"{data}, line 4: column 'answer' is an object, but a string on line 1. Make 'answer' one type" in err
    assert judge.stats()["requests"] == 0


def _compress(data: bytes, suffix: str) -> bytes:
    return {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](data)


@pytest.mark.parametrize("name", ["d.jsonl.gz", "d.json.gz", "d.csv.gz", "d.jsonl.bz2", "d.csv.xz", "d.json.xz"])
def test_cli_reads_compressed_data_files(judge, tmp_path, capfd, name):
    ds = qa_dataset(2)
    plain = tmp_path / name.rsplit(".", 1)[0]
    if plain.suffix == ".json":  # one JSON document
        plain.write_text(json.dumps(ds.to_list()))
    else:
        (ds.to_json if plain.suffix == ".jsonl" else ds.to_csv)(plain)
    data = tmp_path / name
    data.write_bytes(_compress(plain.read_bytes(), data.suffix))
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", tmp_path / "c", "-o", tmp_path / "o"))
    assert code == 0, err
    out = load_input(str(tmp_path / "o"))["train"]
    assert out["question"] == ds["question"] and None not in out["QA_Clarity"]


def test_cli_compressed_files_that_cannot_be_read_are_usage_errors(tmp_path, capfd):
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(gzip.compress(b"\n"))
    parquet = tmp_path / "d.parquet.gz"
    qa_dataset(2).to_parquet(tmp_path / "d.parquet")
    parquet.write_bytes(gzip.compress((tmp_path / "d.parquet").read_bytes()))
    zst = tmp_path / "d.jsonl.zst"
    zst.write_bytes(b"(\xb5/\xfd")  # zstandard is not installed here: the message says what to install
    expected = {
        empty: f"{empty} is empty: no rows to score",
        parquet: "unsupported file type '.parquet.gz'",
        zst: "pip install zstandard",
    }
    for data, message in expected.items():
        code, _, err = run_cli(capfd, *score_args(data, "http://127.0.0.1:9/v1"))
        assert code == 2 and message in err, err


def test_cli_a_missing_folder_with_a_trailing_slash_is_not_looked_up_on_the_hub(hub, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = len(hub.requests())
    code, _, err = run_cli(capfd, *score_args("nothere/", "http://127.0.0.1:9/v1"))
    assert code == 2 and "nothere/: no such folder" in err, err
    assert hub.requests()[before:] == []


def test_two_spellings_of_one_base_url_share_the_cache_and_credentials_stay_out_of_it(judge, tmp_path):
    import shutil

    from hf_judge import score_dataset

    ds = qa_dataset(3)
    first = score(ds, ["QA_Clarity"], judge, tmp_path, progress=False)
    assert first.summary.requests == 3
    host_port = judge.base_url.removeprefix("http://").removesuffix("/v1")
    # one server: scheme and host in any case, a trailing slash, user:password (a header), its root for its /v1
    spellings = [
        (f"HTTP://{host_port}/v1/", "sk-test"),
        (f"http://hfj:pw-SECRET-9@{host_port}/v1", None),
        (f"http://{host_port}", "sk-test"),
        (f"http://{host_port}/", "sk-test"),
    ]
    for spelling, key in spellings:
        shutil.rmtree(tmp_path / "cache" / "results")  # the replies themselves, not the saved split, are found
        again = score_dataset(
            ds, ["QA_Clarity"], model="judge", base_url=spelling, api_key=key, cache_dir=tmp_path / "cache",
            columns={"instruction": "question", "output": "answer"}, progress=False,
        )  # fmt: skip
        assert again.summary.requests == 0 and again["train"]["QA_Clarity"] == first["train"]["QA_Clarity"]
    assert judge.stats()["requests"] == 3
    for f in (tmp_path / "cache").rglob("*"):
        assert not f.is_file() or b"pw-SECRET-9" not in f.read_bytes(), f


def test_the_server_in_cache_keys_is_the_url_requested():
    from hf_judge import Settings
    from hf_judge.transport.client import JudgeClient

    def client(url):
        return JudgeClient(Settings(model="m", base_url=url), api_key=None)

    same = [client(u) for u in ("http://h.example/v1", "HTTP://H.Example:80/v1/", "http://u:p@h.example/v1")]
    assert {c.server_id for c in same} == {"http://h.example/v1"} and {str(c._url) for c in same} == {
        "http://h.example/v1/chat/completions"
    }
    # the client adds no /v1 to the URL it asks, but a server's root is the server of its /v1 in cache keys
    bare = client("http://h.example")
    assert str(bare._url) == "http://h.example/chat/completions" and bare.server_id == "http://h.example/v1"
    assert client("http://h.example/openai").server_id == "http://h.example/openai"  # another route: its own
    assert client("https://h.example:443/v1?api-version=2").server_id == "https://h.example/v1?api-version=2"
