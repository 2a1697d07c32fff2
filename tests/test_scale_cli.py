"""The scale flags as a stranger meets them: `score --help` shows --workers and --ray, --workers on a stream."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from helpers import run_cli

from hf_judge.cli.score import SCORE_EXAMPLE


def test_score_examples_show_workers_and_ray_and_continue_lines_with_a_backslash():
    lines = SCORE_EXAMPLE.splitlines()[1:]
    commands = [ln for ln in lines if ln.startswith("  hf-judge ")]
    assert any("--workers" in c for c in commands) and any("--ray" in c for c in commands)
    for before, line in pairwise(lines):
        if line.startswith("      "):  # a continuation line: the line before ends with `\` (shown to the user)
            assert before.endswith(" \\"), before
    assert all("  --" not in ln.split("#")[0].strip() for ln in lines)  # no line run into the next


def test_workers_on_a_stream_is_a_config_error_not_one_process_in_silence(judge, capfd, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"q{i}", "output": "a"}) + "\n" for i in range(4)))
    args = ["score", data, "--metrics", "QA_Clarity", "-m", "judge", "--base-url", judge.base_url, "--streaming"]
    code, out, err = run_cli(capfd, *args, "--workers", 2, "--cache-dir", tmp_path / "c", "-o", tmp_path / "out")
    assert code == 2
    assert "num_workers (--workers)" in err and "leave num_workers at 1" in err
    assert judge.stats()["requests"] == 0


def test_a_bad_setting_names_its_flag_too(capfd, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    args = ["score", data, "--metrics", "QA_Clarity", "-m", "judge", "--base-url", "http://127.0.0.1:9/v1"]
    code, out, err = run_cli(capfd, *args, "--workers", 0, "--concurrency", 0, "-o", tmp_path / "out")
    assert code == 2
    assert "num_workers (--workers): Input should be greater than or equal to 1 (got 0)" in err
    assert "concurrency (--concurrency): Input should be greater than or equal to 1 (got 0)" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--streaming"], "scoring on Ray takes a Dataset on local disk, not a stream"),
        (["--workers", "2"], "num_workers (--workers) does not apply on Ray"),
    ],
)
def test_ray_with_streaming_or_workers_is_a_config_error_before_ray_starts(flags, message, capfd, tmp_path):
    pytest.importorskip("ray")
    data = tmp_path / "data.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    args = ["score", data, "--metrics", "QA_Clarity", "-m", "judge", "--base-url", "http://127.0.0.1:9/v1", "--ray"]
    code, out, err = run_cli(capfd, *args, *flags, "-o", tmp_path / "out")
    assert code == 2 and message in err
