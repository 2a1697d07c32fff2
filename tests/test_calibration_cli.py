"""`hf-judge calibrate`, `sample-for-review`, `agreement --labels` and `filter --min-prob` end to end: a result
scored by the loopback judge, labels written in the labels layout, the docs' worked example re-run."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from datasets import load_from_disk
from helpers import run_cli, scored_result
from huggingface_hub import HfApi, hf_hub_download

from hf_judge import Calibration, read_labels

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorials" / "trusting-a-judge.md"  # its worked example


@pytest.fixture
def scored(judge, tmp_path, capfd):
    """A 120-row result scored by the loopback judge (QA_Correctness 1-10, a reason each)."""
    return scored_result(capfd, judge, tmp_path, 120)


def labels_for_all(scored: Path, path: Path, reviewers=("ana",), shift=(0,)) -> list[int]:
    """Labels for every row (the judge's score, moved by ``shift`` per reviewer), and the same as a column."""
    d = load_from_disk(str(scored))["train"]
    rows = []
    for reviewer, delta in zip(reviewers, shift, strict=True):
        for i, s in enumerate(d["QA_Correctness"]):
            label = int(np.clip(s + (delta if i % 3 else -delta), 1, 10))
            rows.append({"split": "train", "row": i, "score": "QA_Correctness", "label": label, "reviewer": reviewer})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [r["label"] for r in rows[: len(d)]]


def test_agreement_with_a_labels_file_equals_agreement_with_a_label_column(scored, tmp_path, capfd):
    labels = labels_for_all(scored, tmp_path / "labels.jsonl", shift=(1,))
    d = load_from_disk(str(scored))["train"]
    d.add_column("human", labels).to_json(tmp_path / "with-column.jsonl")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    args = ["--score", "QA_Correctness", "--resamples", "50"]
    code, _, err = run_cli(capfd, "agreement", scored, *args, "--labels", tmp_path / "labels.jsonl", "--out", a)
    assert code == 0, err
    # a saved result's summary names the judged column (its length figures); the JSONL copy needs --length-of
    code, _, err = run_cli(
        capfd,
        "agreement",
        tmp_path / "with-column.jsonl",
        *args,
        "--label",
        "human",
        "--length-of",
        "answer",
        "--out",
        b,
    )
    assert code == 0, err
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ra["label"] == "labels.jsonl" and rb["label"] == "human"
    for key in ("figures", "intervals", "confusion", "calibration", "pairs", "missing"):
        assert ra[key] == rb[key], key
    assert ra["pairs"] == 120


def test_agreement_labels_of_several_reviewers_report_their_alpha(scored, tmp_path, capfd):
    path = tmp_path / "labels.jsonl"
    labels_for_all(scored, path, reviewers=("ana", "ben"), shift=(0, 2))
    code, out, err = run_cli(capfd, "agreement", scored, "--score", "QA_Correctness", "--labels", path)
    assert code == 0, err
    by = {(r["reviewer"], r["row"]): r["label"] for r in read_labels(path)}
    data = np.array([[by[(who, i)] for i in range(120)] for who in ("ana", "ben")], dtype=float)
    want = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    shown = re.search(r"^reviewers_alpha_interval\s+(\S+)", out, flags=re.M)
    assert shown and float(shown.group(1)) == pytest.approx(want, abs=5e-4)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_sample_for_review_writes_n_rows_in_the_labels_layout(scored, tmp_path, capfd, suffix):
    out = tmp_path / f"to-label{suffix}"
    args = ["sample-for-review", scored, "--score", "QA_Correctness", "--n", "25", "--by", "threshold"]
    code, printed, err = run_cli(capfd, *args, "--threshold", "7", "-o", out)
    assert code == 0, err
    assert f"25 rows to label (--by threshold) saved to {out}" in printed
    d = load_from_disk(str(scored))["train"]
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert list(rows[0])[:6] == ["split", "row", "score", "label", "note", "reviewer"]
        assert all(r["label"] is None for r in rows)
    else:
        header = out.read_text().splitlines()[0].split(",")
        assert header[:6] == ["split", "row", "score", "label", "note", "reviewer"]
        assert read_labels(out) == []  # nothing labelled yet
        rows = [json.loads(json.dumps(r)) for r in _csv(out)]
    assert len(rows) == 25
    picked = [int(r["row"]) for r in rows]
    dist = np.abs(np.array(d["QA_Correctness"], dtype=float) - 7)
    assert max(dist[picked]) <= min(np.delete(dist, picked))  # the 25 rows nearest the threshold
    for r in rows:  # the context a reviewer needs: the judged text, the score and its reason
        row = d[int(r["row"])]
        assert r["question"] == row["question"] and r["answer"] == row["answer"]
        assert str(r["QA_Correctness"]) == str(row["QA_Correctness"]) and r["QA_Correctness_reason"]
    code, _, err = run_cli(capfd, *args, "--threshold", "7", "-o", out)
    assert code != 0 and "--overwrite" in err  # a file being labelled is never replaced unasked


def _csv(path: Path) -> list[dict]:
    import csv

    return list(csv.DictReader(path.read_text().splitlines()))


def test_calibrate_saves_in_the_result_and_filter_min_prob_uses_it(scored, tmp_path, capfd):
    d = load_from_disk(str(scored))["train"]
    rows = [
        {"split": "train", "row": i, "label": s >= 6 if i % 5 else s >= 9} for i, s in enumerate(d["QA_Correctness"])
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["calibrate", scored, "--score", "QA_Correctness", "--labels", tmp_path / "labels.jsonl"]
    code, out, err = run_cli(capfd, *args, "--target-precision", "0.9", "--seed", "3")
    assert code == 0, err
    cal = Calibration.load(scored)
    assert f"saved to {scored / 'calibration.json'}" in out
    assert cal.pairs == 120 and cal.cv["seed"] == 3 and cal.threshold["criterion"] == "precision >= 0.9"
    assert "cross-validated (5 folds, seed 3" in out and "expected calibration error" in out
    code, _, _ = run_cli(capfd, *args, "--target-precision", "0.9", "--seed", "3", "-o", tmp_path / "again.json")
    assert Calibration.load(tmp_path / "again.json") == cal  # seeded: the same figures
    best = tmp_path / "best"
    code, out, err = run_cli(
        capfd, "filter", scored, "--min-prob", "QA_Correctness=0.7", "--calibration", scored / "calibration.json",
        "-o", best,
    )  # fmt: skip
    assert code == 0, err
    kept = load_from_disk(str(best))["train"]
    probs = cal.predict(d["QA_Correctness"])
    assert len(kept) == int((probs >= 0.7).sum()) and min(kept["QA_Correctness_calibrated"]) >= 0.7
    assert f"train: kept {len(kept)} of 120 rows" in out
    from hf_judge.results.output import read_manifest

    assert read_manifest(best)["filters"]["min"] == {"QA_Correctness_calibrated": 0.7}  # what the folder holds
    # no --calibration: the result folder's own (calibrate saved it there), said so
    code, out, err = run_cli(capfd, "filter", scored, "--min-prob", "QA_Correctness=0.7", "-o", tmp_path / "b2")
    assert code == 0 and "the result's own, saved by hf-judge calibrate" in err, err
    assert load_from_disk(str(tmp_path / "b2"))["train"]["QA_Correctness"] == kept["QA_Correctness"]


def test_calibrate_pushes_calibration_json_beside_the_data(scored, hub, tmp_path, capfd):
    d = load_from_disk(str(scored))["train"]
    rows = [{"split": "train", "row": i, "label": s >= 6} for i, s in enumerate(d["QA_Correctness"])]
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    repo = "tester/calibrated"
    code, _, err = run_cli(capfd, "filter", scored, "--min", "QA_Correctness=1", "--push-to-hub", repo)
    assert code == 0, err
    args = ["calibrate", scored, "--score", "QA_Correctness", "--labels", tmp_path / "l.jsonl", "--push-to-hub", repo]
    code, out, err = run_cli(capfd, *args, "-o", tmp_path / "c.json")
    assert code == 0, err
    remote = json.loads(Path(hf_hub_download(repo, "hf_judge/calibration.json", repo_type="dataset")).read_text())
    assert Calibration(**remote) == Calibration.load(tmp_path / "c.json")
    # a later push of the scores keeps it: a calibration belongs to the data, not to one run's files
    code, _, err = run_cli(capfd, "filter", scored, "--min", "QA_Correctness=2", "--push-to-hub", repo)
    assert code == 0, err
    assert "hf_judge/calibration.json" in HfApi().list_repo_files(repo, repo_type="dataset")


def plain_blocks(text: str) -> list[str]:
    """The lines of the ```text blocks (program output), not of ```bash or ```markdown ones."""
    lines, inside, plain = [], False, False
    for line in text.splitlines():
        if line.startswith("```"):
            inside, plain = (not inside), line == "```text" and not inside
            continue
        if inside and plain:
            lines.append(line)
    return lines


def load_example():
    spec = importlib.util.spec_from_file_location("calibration_example", ROOT / "docs" / "calibration_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_worked_example_prints_what_the_docs_show(judge, tmp_path, monkeypatch):
    """The tutorial's "Calibrate against a labelled sample" output is what the example's commands print against
    the loopback judge (docs/calibration_example.py), line for line (the docs' examples test checks it only
    loosely: digits there match any number)."""
    from hf_judge.cli import main

    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    example = load_example()
    printed = example.run(tmp_path, judge.base_url, main)
    text = TUTORIAL.read_text(encoding="utf-8")
    text = text[text.index("## 2. Calibrate against a labelled sample") :]
    section = text[: text.index("\n### ", 10)]
    shown = [line for line in plain_blocks(section) if line.strip()]
    everything = "\n".join(printed.values()).splitlines()
    missing = [line for line in shown if line not in everything]
    assert not missing, f"docs lines the example did not print: {missing}"
    assert len(shown) > 30 and any(line.startswith("threshold (precision >= 0.9)") for line in shown)
    truth = re.search(r"simulated truth: ([\d.]+)% of the (\d+) kept rows", printed["truth"])
    assert truth and float(truth.group(1)) >= 88  # the cut meant for 90 % precision holds on the truth
    # the card row the tutorial shows is the one the example's result renders (calibrate recorded it there)
    from hf_judge.results.calibration_card import calibration_card
    from hf_judge.results.summary import RunSummary

    rendered = calibration_card(RunSummary.load(tmp_path / "humaneval-judged").calibration)
    row = next(line for line in rendered if line.startswith("| `QA_Correctness` |"))
    assert row in text[: text.index("\n## ")].splitlines()


def test_agreement_labels_for_a_pairwise_metric_read_its_winner_column(tmp_path, capfd):
    from datasets import Dataset

    winners = ["1", "2", "tie", "1", "2", "1", "1", "2"]
    Dataset.from_dict({"Comparative_winner": winners}).to_json(tmp_path / "pairs.jsonl")
    said = ["A", "B", "tie", "B", "B", "A", "A", "tie"]
    (tmp_path / "prefs.jsonl").write_text(
        "".join(
            json.dumps({"split": "train", "row": i, "score": "Comparative", "label": v}) + "\n"
            for i, v in enumerate(said)
        )
    )
    args = ["agreement", tmp_path / "pairs.jsonl", "--score", "Comparative", "--labels", tmp_path / "prefs.jsonl"]
    code, out, err = run_cli(capfd, *args, "--resamples", "0")
    assert code == 0, err
    assert "(pairwise, split train)" in out
    assert re.search(r"^agreement\s+0\.750$", out, flags=re.M)  # 6 of 8 the same


def test_sample_for_review_pushes_the_rows_as_a_hub_dataset(scored, hub, tmp_path, capfd):
    from datasets import load_dataset

    args = ["sample-for-review", scored, "--score", "QA_Correctness", "--n", "12", "--by", "random"]
    code, out, err = run_cli(capfd, *args, "-o", tmp_path / "r.jsonl", "--push-to-hub", "tester/to-label")
    assert code == 0, err
    pushed = load_dataset("tester/to-label", split="train")
    local = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert pushed["row"] == [r["row"] for r in local] and set(pushed["label"]) == {None}


def test_with_logprobs_calibrate_reads_expected_and_review_reads_confidence(judge, tmp_path, capfd):
    out = scored_result(capfd, judge, tmp_path, 60, "--logprobs")
    d = load_from_disk(str(out))["train"]
    assert None not in d["QA_Correctness_expected"]
    human = [s >= 6 for s in d["QA_Correctness"]]
    d.add_column("human_ok", human).to_json(tmp_path / "labelled.jsonl")
    args = ["calibrate", tmp_path / "labelled.jsonl", "--score", "QA_Correctness", "--label", "human_ok"]
    code, printed, err = run_cli(capfd, *args, "-o", tmp_path / "c.json", "--plots", tmp_path / "plots")
    assert code == 0, err
    assert "Calibration of QA_Correctness (read from QA_Correctness_expected) against human_ok" in printed
    assert (tmp_path / "plots" / "QA_Correctness_reliability.png").read_bytes()[:4] == b"\x89PNG"
    code, printed, err = run_cli(capfd, *args, "-o", tmp_path / "plain.json", "--no-expected")
    assert "read from" not in printed and Calibration.load(tmp_path / "plain.json").column == "QA_Correctness"
    review = tmp_path / "r.jsonl"
    code, _, err = run_cli(capfd, "sample-for-review", out, "--score", "QA_Correctness", "--n", "10", "-o", review)
    assert code == 0, err
    rows = [json.loads(line) for line in review.read_text().splitlines()]
    confidence = sorted(d["QA_Correctness_confidence"])
    assert sorted(r["QA_Correctness_confidence"] for r in rows) == confidence[:10]  # the least certain first
    assert all("QA_Correctness_expected" in r for r in rows)


def test_a_folder_keeps_one_calibration_per_score_and_filter_finds_each(judge, tmp_path, capfd):
    """Calibrating a second score in a result folder does not overwrite the first's calibration.json: it goes to
    calibration_<score>.json, the summary records both files, and filter --min-prob finds each score's own."""
    out = scored_result(capfd, judge, tmp_path, 60, metrics="QA_Correctness,QA_Clarity", name="two-scores")
    d = load_from_disk(str(out))["train"]
    for score in ("QA_Correctness", "QA_Clarity"):
        rows = [
            {"split": "train", "row": i, "label": bool(s >= 6 if i % 4 else s >= 8)} for i, s in enumerate(d[score])
        ]
        labels = tmp_path / f"{score}.jsonl"
        labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
        code, printed, err = run_cli(capfd, "calibrate", out, "--score", score, "--labels", labels, "--seed", "1")
        assert code == 0, err
    assert (
        "calibration.json holds another score's calibration, kept: this one is calibration_QA_Clarity.json" in printed
    )
    first, second = Calibration.load(out / "calibration.json"), Calibration.load(out / "calibration_QA_Clarity.json")
    assert (first.score, second.score) == ("QA_Correctness", "QA_Clarity")
    recorded = json.loads((out / "summary.json").read_text())["calibration"]
    assert {k: v["file"] for k, v in recorded.items()} == {
        "QA_Correctness": "calibration.json", "QA_Clarity": "calibration_QA_Clarity.json",
    }  # fmt: skip
    # calibrating the second score again rewrites its own file, not the first's
    code, printed, err = run_cli(capfd, "calibrate", out, "--score", "QA_Clarity", "--labels", labels, "--seed", "2")
    assert code == 0 and f"saved to {out / 'calibration_QA_Clarity.json'}" in printed, err
    assert Calibration.load(out / "calibration.json") == first
    code, printed, err = run_cli(
        capfd, "filter", out, "--min-prob", "QA_Correctness=0.5", "--min-prob", "QA_Clarity=0.5", "-o", tmp_path / "f"
    )
    assert code == 0, err
    assert "calibration.json (the result's own" in err and "calibration_QA_Clarity.json (the result's own" in err
    second = Calibration.load(out / "calibration_QA_Clarity.json")
    keep = (first.predict(d["QA_Correctness"]) >= 0.5) & (second.predict(d["QA_Clarity"]) >= 0.5)
    assert len(load_from_disk(str(tmp_path / "f"))["train"]) == int(keep.sum())


def test_a_mistyped_score_is_named_before_an_empty_labels_file(scored, tmp_path, capfd):
    """A typo in --score is the first thing to fix: said (with the column meant) even when no label names a split."""
    (tmp_path / "empty.jsonl").write_text("")
    code, _, err = run_cli(capfd, "calibrate", scored, "--score", "QA_Corectness", "--labels", tmp_path / "empty.jsonl")
    assert code == 2 and "no score column 'QA_Corectness' in the result: did you mean 'QA_Correctness'?" in err, err


def test_the_score_a_labels_file_names_is_the_default_of_agreement_and_calibrate(scored, tmp_path, capfd):
    """``--score`` was required even where every row of the labels file names it (as sample-for-review writes
    them): left out, agreement and calibrate compare that score and say so; a file naming several scores, or none,
    or a --label column without --score, is told to pass --score."""
    labels_for_all(scored, tmp_path / "labels.jsonl", shift=(1,))
    given = ["--resamples", "50", "--labels", tmp_path / "labels.jsonl"]
    code, _, err = run_cli(capfd, "agreement", scored, *given, "--out", tmp_path / "named.json")
    assert code == 0, err
    assert "scores compared: QA_Correctness (the score the labels file names)" in err
    explicit_args = ["--score", "QA_Correctness", "--out", tmp_path / "a.json"]
    code, _, err = run_cli(capfd, "agreement", scored, *given, *explicit_args)
    assert code == 0, err
    named, explicit = (json.loads((tmp_path / f).read_text()) for f in ("named.json", "a.json"))
    assert named["score"] == explicit["score"] == "QA_Correctness" and named["figures"] == explicit["figures"]
    code, _, err = run_cli(capfd, "calibrate", scored, "--labels", tmp_path / "labels.jsonl", "-o", tmp_path / "c.json")
    assert code == 0 and json.loads((tmp_path / "c.json").read_text())["score"] == "QA_Correctness", err
    rows = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    rows[0]["score"], rows[1]["score"] = "QA_Clarity", None
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli(capfd, "agreement", scored, "--labels", tmp_path / "mixed.jsonl")
    assert code == 2 and "--score is needed: it names QA_Clarity, QA_Correctness;" in err, err
    code, _, err = run_cli(capfd, "calibrate", scored, "--label", "QA_Correctness")
    assert code == 2 and "--score is needed with --label" in err, err
