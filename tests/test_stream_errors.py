"""A stream's error rows go to disk as they come (Parquet, like its scored splits), and its result's page is read
from the Parquet shards: neither memory nor disk grows with the rows (bench/bench_stream_errors.py measures it)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from helpers import qa_dataset, run_cli, score

import hf_judge.engine.core
from hf_judge.results import errors_split

WINDOW = 64


def _error_rows_held(judge, tmp_path: Path, n: int) -> tuple[int, int]:
    """Stream ``n`` rows that each fail (over max_input_chars: no request is sent) and count the error rows the
    stream holds (the objects made where error rows are made, engine/core.py, still alive: tracemalloc's count
    of its blocks): at its last row, and once it has been read."""
    got = score(qa_dataset(n).to_iterable_dataset(), ["QA_Clarity"], judge, tmp_path, window=WINDOW, max_input_chars=5)
    made_there = [tracemalloc.Filter(True, hf_judge.engine.core.__file__)]
    tracemalloc.start()
    try:
        for i, _ in enumerate(got["train"]):
            if i == n - 1:
                at_last_row = tracemalloc.take_snapshot().filter_traces(made_there)
        read = tracemalloc.take_snapshot().filter_traces(made_there)
    finally:
        tracemalloc.stop()
    assert got.summary.errors == {"input_too_long": n}
    assert len(list(got["errors"])) == n  # every error row is there, read back from disk
    return sum(s.count for s in at_last_row.statistics("filename")), sum(s.count for s in read.statistics("filename"))


def test_the_error_rows_a_stream_holds_do_not_grow_with_its_error_rows(judge, tmp_path, monkeypatch):
    monkeypatch.setattr(
        errors_split, "ERROR_BATCH", 256, raising=False
    )  # a writer's buffer: small beside the rows here
    small = _error_rows_held(judge, tmp_path / "small", 1_000)
    large = _error_rows_held(judge, tmp_path / "large", 4_000)
    # about 5 blocks each (the row, its message, its kind), for at most the writer's buffer and the window's batches;
    # before: every error row stayed in memory (4,750 and 19,750 blocks: the run's list and the split's)
    bound = 5 * (256 + 4 * WINDOW)
    assert small[0] < bound and large[0] < bound, (small, large)
    assert small[1] < bound and large[1] < bound, (small, large)


def test_a_saved_stream_s_error_rows_are_in_parquet_files_in_order(judge, tmp_path):
    """The errors split of a saved stream: its files, in the order the rows failed, loadable as the errors config."""
    from datasets import load_dataset

    failed = [5, 55, 105, 155, 205, 255]
    judge.configure(faults=[{"fault": "status", "status": 400, "match": f"row-{i}:"} for i in failed])
    got = score(qa_dataset(300).to_iterable_dataset(num_shards=3), ["QA_Clarity"], judge, tmp_path, window=WINDOW)
    out = tmp_path / "out"
    got.save_to_disk(out, max_shard_size="4KB")  # several data shards, each closing its error rows' file
    files = sorted((out / "errors").glob("*.parquet"))
    assert len(files) > 1
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert [r["row"] for r in rows] == failed
    assert load_dataset(str(out), "errors")["errors"].to_list() == rows
    assert got.summary.errors == {"http_400": len(rows)}


STOP: dict[str, int | None] = {"at": None}


def _rows(n: int):
    for i in range(n):
        if i == STOP["at"]:
            raise KeyboardInterrupt  # a Ctrl-C while the input is read
        yield {"question": f"row-{i}: what is {i} + {i}?", "answer": f"row-{i}: it is {2 * i}"}


def test_a_save_taken_up_after_a_ctrl_c_keeps_each_error_row_once(judge, tmp_path):
    """The error rows of the closed shards are kept by the save that goes on after them; those of the rows read
    again are written again, once."""
    from datasets import IterableDataset, load_dataset

    from hf_judge import InterruptedRun

    failed = [5, 55, 105, 155, 205, 255]
    judge.configure(faults=[{"fault": "status", "status": 400, "match": f"row-{i}:"} for i in failed])
    out = tmp_path / "out"
    STOP["at"] = 180
    try:
        got = score(
            IterableDataset.from_generator(_rows, gen_kwargs={"n": 300}), ["QA_Clarity"], judge, tmp_path, window=WINDOW
        )
        with pytest.raises(InterruptedRun):
            got.save_to_disk(out, max_shard_size="2KB")
    finally:
        STOP["at"] = None
    kept = json.loads((out / "hf_judge_progress.json").read_text())["splits"]["train"]
    assert 55 < kept["rows"] <= 180 and kept["kinds"] == {"http_400": sum(i < kept["rows"] for i in failed)}
    got = score(
        IterableDataset.from_generator(_rows, gen_kwargs={"n": 300}), ["QA_Clarity"], judge, tmp_path, window=WINDOW
    )
    closed = {name: (out / "errors" / name).stat().st_mtime_ns for name in kept["errors"]}
    assert closed  # the error rows of the rows kept, in files of their own
    got.save_to_disk(out, max_shard_size="2KB")
    assert {name: (out / "errors" / name).stat().st_mtime_ns for name in closed} == closed  # kept as they were
    errors = load_dataset(str(out), "errors")["errors"]
    assert [e["row"] for e in errors] == failed
    assert got.summary.errors == {"http_400": len(failed)}
    assert len(load_dataset(str(out))["train"]) == 300


def _arrow_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_viewing_and_pushing_a_streamed_result_leave_no_arrow_cache(judge, hub, tmp_path, capfd, monkeypatch):
    """The page of a streamed result's folder is read from its Parquet shards: `load_dataset` of the folder wrote an
    Arrow cache of it (4.5 GB for a 244 MB result) and left it there."""
    qa_dataset(120, "nocache").push_to_hub("tester/stream-nocache-src", num_shards=2)
    judge.configure(faults=[{"fault": "status", "status": 400, "match": f"nocache-{i}:"} for i in (7, 9)])
    cache = tmp_path / "hf_datasets_cache"
    cache.mkdir()
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))  # where datasets writes Arrow caches
    out = tmp_path / "nocache-out"
    args = ["score", "tester/stream-nocache-src", "--streaming", "--metrics", "QA_Clarity", "-m", "judge"]
    args += ["--base-url", judge.base_url, "--column", "instruction=question", "--column", "output=answer"]
    args += ["--cache-dir", tmp_path / "cache", "-o", out, "--push-to-hub", "tester/stream-nocache-judged"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, stdout, stderr = run_cli(capfd, *args)
    assert code == 0, stderr
    assert "report" in stdout and (out / "report.html").is_file()
    assert [p for p in _arrow_files(cache) if p.suffix == ".arrow"] == []  # the page of the push: no Arrow cache
    for p in _arrow_files(cache):  # what the streamed input left (no Arrow file); then a view, into an empty cache
        p.unlink()
    (out / "report.html").unlink()
    code, stdout, stderr = run_cli(capfd, "view", out)
    assert code == 0, stderr
    assert _arrow_files(cache) == []
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "nocache-7: what is 7" in page  # an error row's row is embedded
    assert '"total":2,"by_kind":{"http_400":2}' in page  # the errors split, counted on disk


@pytest.mark.parametrize("splits", [None, ["train"]])
def test_the_page_of_a_streamed_folder_is_the_page_of_its_dataset(judge, tmp_path, splits):
    """The page read from the shards embeds what a Dataset's page of the same rows embeds."""
    from datasets import Dataset, DatasetDict

    from hf_judge.results import report_data as rd
    from hf_judge.results.errors_split import errors_dataset
    from hf_judge.results.report import report_data
    from hf_judge.results.report_stream import folder_page

    judge.configure(faults=[{"fault": "status", "status": 400, "match": f"row-{i}:"} for i in (3, 7)])
    ds = qa_dataset(40)
    out = tmp_path / "out"
    got = score(ds.to_iterable_dataset(), ["QA_Clarity"], judge, tmp_path, window=WINDOW)
    got.save_to_disk(out)
    data = folder_page(out, summary=got.summary, source=str(out), splits=splits)
    errors = [r for f in sorted((out / "errors").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    train = pq.read_table(out / "data" / "train-00000.parquet")
    want = report_data(
        DatasetDict({"train": Dataset(train), "errors": errors_dataset(errors)}),
        summary=got.summary,
        source=str(out),
        max_rows=rd.MAX_ROWS,
    )
    assert data["errors"] == want["errors"] and data["errors"]["total"] == 2
    assert data["splits"]["train"]["indices"] == want["splits"]["train"]["indices"]
    assert data["splits"]["train"]["stats"] == want["splits"]["train"]["stats"]


def test_only_a_streamed_result_s_folder_is_read_as_one(tmp_path):
    """A Hub repo's layout (``<split>-00000-of-00001.parquet``) or a Dataset's save is read by ``load_dataset``."""
    from hf_judge.results.report_stream import stream_folder

    def folder(name: str, *files: str) -> Path:
        for f in files:
            (tmp_path / name / f).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / f).write_bytes(b"")
        return tmp_path / name

    streamed = folder(
        "s", "data/train-00000.parquet", "data/train-00001.parquet", "data/my-test-00000.parquet", "errors/e"
    )
    assert stream_folder(streamed) == {
        "my-test": [streamed / "data/my-test-00000.parquet"],
        "train": [streamed / "data/train-00000.parquet", streamed / "data/train-00001.parquet"],
    }
    assert stream_folder(folder("hub", "data/train-00000-of-00001.parquet", "errors/e")) is None
    assert stream_folder(folder("saved", "data/train-00000.parquet", "errors/e", "dataset_dict.json")) is None
    assert stream_folder(folder("no-errors", "data/train-00000.parquet")) is None
