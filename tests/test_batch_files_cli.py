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


def test_import_of_an_output_with_lines_that_are_no_output_lines_saves_every_good_line(tmp_path, capfd):
    from batch_server import BatchService

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"{i}+2?"}) + "\n" for i in range(3)))
    common = ["--metrics", "Q_Clarity", "-m", "judge", "--base-url", "http://127.0.0.1:9/v1", "--cache-dir", tmp_path]
    code, _, _ = run_cli(capfd, "batch", "export", data, "-o", tmp_path / "requests.jsonl", *common)
    assert code == 0
    svc = BatchService()
    lines = [json.loads(t) for t in (tmp_path / "requests.jsonl").read_text().splitlines()]
    good = [
        {"custom_id": x["custom_id"], "response": {"status_code": 200, "body": svc.reply(x["body"])}} for x in lines
    ]
    results = tmp_path / "results.jsonl"
    bad = ["[1,2,3]", '"str"', "null", '{"custom_id": 5}', '{"response": "x"}']
    results.write_text("".join(t + "\n" for t in [bad[0], *map(json.dumps, good), *bad[1:]]))
    code, out, err = run_cli(capfd, "batch", "import", data, results, "-o", tmp_path / "out", *common)
    assert code == 0, err
    assert "skipped 5 line(s) of results.jsonl that are no batch output line" in err
    from datasets import load_from_disk

    assert [r["Q_Clarity"] is not None for r in load_from_disk(tmp_path / "out")["train"]] == [True] * 3
