"""Mapped Arrow pages do not pile up in the resident set (pages.py)."""

from __future__ import annotations

import os
import sys

import pytest
from datasets import Dataset
from helpers import score

from hf_judge.pages import file_paths, release

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/smaps; release() is Linux-only"
)


def _resident_kb(path: str) -> int:
    """Resident kB of this process's mappings of one file."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if "-" in head[0] and len(head) >= 5 and head[0][0] in "0123456789abcdef":
                inside = len(head) == 6 and head[5].strip() == path
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def _file_dataset(tmp_path, n):
    def gen():
        for i in range(n):
            yield {"question": f"question {i}: what is {i} squared? " * 3, "answer": f"{i * i}"}

    return Dataset.from_generator(gen, cache_dir=str(tmp_path / "data"))


def test_release_drops_resident_pages_and_keeps_the_data(tmp_path):
    ds = _file_dataset(tmp_path, 60_000)
    (path,) = file_paths(ds.cache_files)
    assert os.path.getsize(path) > 5_000_000
    rows = sum(len(b["question"]) for b in ds.iter(batch_size=1000))  # touch every page
    assert rows == 60_000
    before = _resident_kb(path)
    assert before > 4_000
    assert release(file_paths(ds.cache_files)) >= os.path.getsize(path) // 2
    assert _resident_kb(path) < before // 10
    assert ds[59_999]["answer"] == str(59_999 * 59_999)  # read back from the page cache


def test_a_run_leaves_its_input_out_of_the_resident_set(judge, tmp_path):
    ds = _file_dataset(tmp_path, 8_000)  # a file of about 1 MB
    (path,) = file_paths(ds.cache_files)
    out = score(ds, ["QA_Clarity"], judge, tmp_path, concurrency=64)
    assert len(out["train"]) == 8_000 and len(out["errors"]) == 0
    size_kb = os.path.getsize(path) // 1024
    assert _resident_kb(path) < size_kb // 4
    assert out["train"][7_999]["answer"] == str(7_999**2)
