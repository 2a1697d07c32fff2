"""A calibration bound to its judge: ``calibration.json`` records the judge model(s), provider, prompt sha256
and metric parameters it was fitted on; applying it to another judge's or prompt's scores is a ConfigError
naming both, unless forced (``allow_other_judge=True`` / ``--force``), which the summary and card record."""

from __future__ import annotations

import json
import logging

import pytest
from datasets import load_from_disk
from helpers import run_cli, score_args, scored_result

from hf_judge import Calibration, apply_calibration
from hf_judge.errors import ConfigError
from hf_judge.results.calibration_card import calibration_card
from hf_judge.results.scored import ScoredDatasetDict
from hf_judge.results.summary import RunSummary


def _labels(folder, path):
    d = load_from_disk(str(folder))["train"]
    rows = [
        {"split": "train", "row": i, "label": s >= 6 if i % 5 else s >= 9} for i, s in enumerate(d["QA_Correctness"])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def fitted(judge, tmp_path, capfd):
    """A result scored by model "judge", calibrated; and the same rows scored by model "other-judge"."""
    mine = scored_result(capfd, judge, tmp_path, 60)
    labels = _labels(mine, tmp_path / "labels.jsonl")
    code, _, err = run_cli(capfd, "calibrate", mine, "--score", "QA_Correctness", "--labels", labels)
    assert code == 0, err
    other = tmp_path / "other"
    args = score_args(tmp_path / "data.jsonl", judge, "-o", other, "--cache-dir", tmp_path / "cache",
                      metrics="QA_Correctness", model="other-judge")  # fmt: skip
    code, _, err = run_cli(capfd, *args)
    assert code == 0, err
    return mine, other


def test_calibrate_records_the_judge_it_was_fitted_on(fitted):
    mine, _ = fitted
    cal = Calibration.load(mine)
    summary = RunSummary.load(mine)
    assert cal.judge == {
        "models": ["judge"],
        "provider": "",
        "metric": "QA_Correctness",
        "prompt_sha256": summary.prompts["QA_Correctness"]["sha256"],
        "params": summary.prompts["QA_Correctness"].get("params") or {},
    }
    assert len(cal.judge["prompt_sha256"]) == 64


def test_filter_refuses_another_judges_scores_naming_both_and_force_records_it(fitted, tmp_path, capfd):
    mine, other = fitted
    cal = mine / "calibration.json"
    code, out, err = run_cli(
        capfd, "filter", other, "--min-prob", "QA_Correctness=0.5", "--calibration", cal, "-o", tmp_path / "f"
    )
    assert code != 0 and "fitted on judge" in err and "the scores are of other-judge" in err and "--force" in err
    assert not (tmp_path / "f").exists()  # refused before any work
    code, out, err = run_cli(
        capfd,
        "filter",
        other,
        "--min-prob",
        "QA_Correctness=0.5",
        "--calibration",
        cal,
        "--force",
        "-o",
        tmp_path / "f",
    )
    assert code == 0, err
    entry = RunSummary.load(tmp_path / "f").calibration["QA_Correctness"]
    assert "fitted on judge" in entry["other_judge"] and "models differ" in entry["other_judge"]
    assert any("Applied to another judge" in line for line in calibration_card({"QA_Correctness": entry}))
    # the same judge's own result: applied without a word
    code, _, err = run_cli(capfd, "filter", mine, "--min-prob", "QA_Correctness=0.5", "-o", tmp_path / "g")
    assert code == 0 and "another judge" not in err, err


def test_apply_calibration_refuses_a_changed_prompt_unless_allowed_and_an_old_file_warns(fitted, tmp_path, caplog):
    mine, _ = fitted
    cal = Calibration.load(mine)
    summary = RunSummary.load(mine)
    data = ScoredDatasetDict({"train": load_from_disk(str(mine))["train"]})
    summary.prompts["QA_Correctness"]["sha256"] = "0" * 64  # the prompt file was edited since
    data.summary = summary
    with pytest.raises(ConfigError, match=r"prompt_sha256 differ.*allow_other_judge=True"):
        apply_calibration(data, cal)
    out = apply_calibration(data, cal, allow_other_judge=True)
    assert "QA_Correctness_calibrated" in out["train"].column_names
    assert "prompt_sha256 differ" in out.summary.calibration["QA_Correctness"]["other_judge"]
    # a calibration.json saved before the judge was recorded: applied, with a warning that it cannot be checked
    old = json.loads((mine / "calibration.json").read_text())
    del old["judge"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        out = apply_calibration(data, tmp_path / "old.json")
    assert "QA_Correctness_calibrated" in out["train"].column_names
    assert "records no judge" in caplog.text and "cannot be checked" in caplog.text
