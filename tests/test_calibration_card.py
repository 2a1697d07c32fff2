"""A calibrated result says so: `calibrate` records its figures in the result's summary.json, and the card (local
render and the Hub copy) and `str(summary)` show the labels, the calibration errors, the threshold and what
`<score>_calibrated` means, with the figures `calibrate` computed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from datasets import load_from_disk
from helpers import run_cli, scored_result
from huggingface_hub import hf_hub_download

from hf_judge import Calibration
from hf_judge.results.calibration_card import END, START
from hf_judge.results.card import render_section
from hf_judge.results.summary import RunSummary


@pytest.fixture
def scored(judge, tmp_path, capfd):
    """A 80-row result scored by the loopback judge, and true/false labels of every row (in labels.jsonl)."""
    out = scored_result(capfd, judge, tmp_path, 80)
    d = load_from_disk(str(out))["train"]
    rows = [
        {"split": "train", "row": i, "label": s >= 6 if i % 5 else s >= 9} for i, s in enumerate(d["QA_Correctness"])
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _card_row(card: str, score: str) -> list[str]:
    """The cells of the calibration table's row of ``score``."""
    section = card[card.index(START) : card.index(END)]
    line = next(x for x in section.splitlines() if x.startswith(f"| `{score}` |"))
    return [c.strip() for c in line.strip("|").split("|")]


def _assert_shows(card: str, cal: Calibration) -> None:
    cells = _card_row(card, cal.score)
    assert cells[1].startswith(f"{cal.pairs:,} labelled rows of {cal.label} (binary")
    assert float(cells[2]) == pytest.approx(cal.ece["judge"], abs=5e-4)
    assert float(cells[3]) == pytest.approx(cal.ece["calibrated"], abs=5e-4)
    t = cal.threshold
    assert cells[4] == f"P >= {t['probability']:.3f} (score >= {int(t['min_score'])})"
    assert [float(c) for c in cells[5:9]] == pytest.approx(
        [t["precision"], t["recall"], cal.cv["precision"], cal.cv["recall"]], abs=5e-4
    )
    assert f"`{cal.output}`" in card and "P(a reviewer labels the row positive) at this judge score" in card


def test_the_card_of_a_calibrated_result_shows_the_figures_calibrate_computed(scored, tmp_path, capfd):
    args = ["calibrate", scored, "--score", "QA_Correctness", "--labels", tmp_path / "labels.jsonl"]
    code, out, err = run_cli(capfd, *args, "--target-precision", "0.8")
    assert code == 0, err
    assert f"recorded in {scored / 'summary.json'}" in out
    cal = Calibration.load(scored)
    summary = RunSummary.load(scored)
    entry = summary.calibration["QA_Correctness"]
    assert entry["labels"] == cal.pairs == 80 and entry["source"] == "labels.jsonl"
    assert entry["ece"]["judge"] == cal.ece["judge"] and entry["ece"]["calibrated"] == cal.ece["calibrated"]
    assert entry["threshold"]["probability"] == cal.threshold["probability"] and entry["cv"]["f1"] == cal.cv["f1"]
    card = render_section(load_from_disk(str(scored)), summary)
    _assert_shows(card, cal)
    assert "added by `hf-judge filter --calibration FILE`" in card  # the column is not in this data yet
    line = next(x for x in str(summary).splitlines() if x.startswith("calibration"))
    assert f"ECE {cal.ece['judge']:.3f} judge, {cal.ece['calibrated']:.3f} calibrated" in line
    assert "QA_Correctness_calibrated = P(a reviewer labels the row positive)" in line

    # filtering on it: the filtered result's summary and card carry it, the column now in the data
    best = tmp_path / "best"
    code, _, err = run_cli(capfd, "filter", scored, "--min-prob", "QA_Correctness=0.5", "-o", best)
    assert code == 0, err
    kept = RunSummary.load(best)
    assert kept.calibration["QA_Correctness"] == {**entry, "file": "calibration.json"}
    card = render_section(load_from_disk(str(best)), kept)
    _assert_shows(card, cal)
    assert "`QA_Correctness_calibrated` (in this dataset)" in card


def test_calibrate_push_to_hub_puts_the_calibration_in_the_hub_card_and_a_later_push_keeps_it(
    scored, hub, tmp_path, capfd
):
    repo = "tester/calibrated-card"
    code, _, err = run_cli(capfd, "filter", scored, "--min", "QA_Correctness=1", "--push-to-hub", repo)
    assert code == 0, err
    args = ["calibrate", scored, "--score", "QA_Correctness", "--labels", tmp_path / "labels.jsonl"]
    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "c.json", "--push-to-hub", repo)
    assert code == 0, err
    cal = Calibration.load(tmp_path / "c.json")
    assert (
        "calibration" not in json.loads((scored / "summary.json").read_text())
        or not RunSummary.load(scored).calibration
    )  # saved elsewhere (-o): the folder's summary is left alone

    def remote(path: str) -> str:
        return Path(hf_hub_download(repo, path, repo_type="dataset", force_download=True)).read_text()

    card = remote("README.md")
    _assert_shows(card, cal)
    assert card.count(START) == 1 and card.index(END) < card.index("<!-- hf-judge:end -->")
    assert json.loads(remote("hf_judge/summary.json"))["calibration"]["QA_Correctness"]["labels"] == 80
    # calibrating again replaces the part, never adds a second one
    code, _, err = run_cli(capfd, *args, "--target-precision", "0.9", "-o", tmp_path / "c2.json", "--push-to-hub", repo)
    assert code == 0, err
    card = remote("README.md")
    assert card.count(START) == 1 and "precision >= 0.9" not in card  # the table gives the cut, not the rule
    _assert_shows(card, Calibration.load(tmp_path / "c2.json"))
    # a later push of the scores (from a folder whose summary does not know it) keeps it in the card
    code, _, err = run_cli(capfd, "filter", scored, "--min", "QA_Correctness=2", "--push-to-hub", repo)
    assert code == 0, err
    card = remote("README.md")
    _assert_shows(card, Calibration.load(tmp_path / "c2.json"))
    assert re.search(r"labelled rows of labels\.jsonl", card) and str(tmp_path) not in card


def test_a_streamed_result_folder_records_it_in_its_summary_and_its_own_card(judge, tmp_path, capfd):
    """A streamed run writes its card beside the data (README.md): calibrate fills in its calibration part."""
    out = scored_result(capfd, judge, tmp_path, 60, "--streaming", name="streamed")
    from hf_judge.cli.inputs import load_input

    d = load_input(str(out))["train"]
    rows = [
        {"split": "train", "row": i, "label": s >= 6 if i % 4 else s >= 9} for i, s in enumerate(d["QA_Correctness"])
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, printed, err = run_cli(
        capfd, "calibrate", out, "--score", "QA_Correctness", "--labels", tmp_path / "labels.jsonl", "--folds", "3"
    )
    assert code == 0, err
    assert f"and in its card {out / 'README.md'}" in printed
    cal = Calibration.load(out)
    assert RunSummary.load(out).calibration["QA_Correctness"]["labels"] == 60
    _assert_shows((out / "README.md").read_text(), cal)


def test_two_scores_calibrated_on_the_hub_keep_a_file_each_and_the_card_shows_both(judge, hub, tmp_path, capfd):
    """The Hub copy keeps one calibration per score, as a result folder does: the second score's goes to
    hf_judge/calibration_<score>.json, the card and summary.json show both, and a later push keeps both."""
    repo = "tester/two-calibrations"
    out = scored_result(capfd, judge, tmp_path, 50, metrics="QA_Correctness,QA_Clarity", name="two")
    code, _, err = run_cli(capfd, "filter", out, "--min", "QA_Correctness=1", "--push-to-hub", repo)
    assert code == 0, err
    d = load_from_disk(str(out))["train"]
    cals = {}
    for score in ("QA_Correctness", "QA_Clarity"):
        labels = tmp_path / f"{score}.jsonl"
        rows = [
            {"split": "train", "row": i, "label": bool(s >= 6 if i % 4 else s >= 8)} for i, s in enumerate(d[score])
        ]
        labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
        args = ["calibrate", out, "--score", score, "--labels", labels, "-o", tmp_path / f"{score}.json"]
        code, printed, err = run_cli(capfd, *args, "--push-to-hub", repo)
        assert code == 0, err
        cals[score] = Calibration.load(tmp_path / f"{score}.json")
    assert "hf_judge/calibration_QA_Clarity.json" in printed

    def remote(path: str) -> str:
        return Path(hf_hub_download(repo, path, repo_type="dataset", force_download=True)).read_text()

    assert Calibration(**json.loads(remote("hf_judge/calibration.json"))) == cals["QA_Correctness"]
    assert Calibration(**json.loads(remote("hf_judge/calibration_QA_Clarity.json"))) == cals["QA_Clarity"]
    files = {k: v["file"] for k, v in json.loads(remote("hf_judge/summary.json"))["calibration"].items()}
    assert files == {
        "QA_Correctness": "calibration.json",
        "QA_Clarity": "calibration_QA_Clarity.json",
    }
    for cal in cals.values():
        _assert_shows(remote("README.md"), cal)
    # a later push of the scores, from a folder whose summary knows neither, keeps both in the card
    code, _, err = run_cli(capfd, "filter", out, "--min", "QA_Correctness=2", "--push-to-hub", repo)
    assert code == 0, err
    for cal in cals.values():
        _assert_shows(remote("README.md"), cal)
