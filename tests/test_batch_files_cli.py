"""`hf-judge batch export|import` refuse `score`'s flags that a batch file cannot honour, instead of ignoring them."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli


@pytest.mark.parametrize(
    "flags",
    [["--dry-run"], ["--no-cache"], ["--batch", "--no-wait"], ["--workers", "2"], ["--max-cost", "1"]],
)
@pytest.mark.parametrize("action", ["export", "import"])
def test_flags_a_batch_file_cannot_honour_are_refused(tmp_path, capfd, action, flags):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"instruction": "2+2?"}) + "\n")
    results = tmp_path / "results.jsonl"
    results.write_text("")
    where = ["-o", tmp_path / ("requests.jsonl" if action == "export" else "out")]
    if action == "import":
        where.insert(0, results)
    code, out, err = run_cli(
        capfd, "batch", action, data, *where, "--metrics", "Q_Clarity", "-m", "judge", "--cache-dir", tmp_path, *flags
    )
    assert code == 2
    assert flags[0] in err and f"hf-judge batch {action}" in err and "hf-judge score" in err
    assert not (tmp_path / "requests.jsonl").exists()


def test_export_names_every_option_the_import_must_repeat(tmp_path, capfd):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"instruction": "2+2?"}) + "\n")
    url = "http://127.0.0.1:9/v1"  # export sends nothing: the URL only makes the requests' keys
    code, out, _ = run_cli(
        capfd, "batch", "export", data, "-o", tmp_path / "r.jsonl", "--metrics", "Q_Clarity", "-m", "judge",
        "--base-url", url, "--cache-dir", tmp_path / "cache",
    )  # fmt: skip
    assert code == 0 and "wrote 1 requests" in out
    # the requests' keys are made of these: an import without the same --base-url finds none of its replies
    assert "--metrics, --model, --base-url and --cache-dir" in out
