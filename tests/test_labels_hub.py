"""Labels kept on the Hub: `calibrate` and `agreement --labels` read a Hub dataset id or an hf:// file with the
user's token, against the loopback Hub, and give the same figures as the same labels in a local file."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset, load_dataset
from helpers import run_cli, scored_result
from huggingface_hub import HfApi

from hf_judge import Calibration, read_labels
from hf_judge.analysis.labels_hub import hub_labels
from hf_judge.errors import ConfigError

TOKEN = "hf_other_user_token_SECRET42"


@pytest.fixture
def scored(judge, tmp_path, capfd):
    """A 60-row result scored by the loopback judge (QA_Correctness 1-10)."""
    return scored_result(capfd, judge, tmp_path, 60)


def _label(row: dict) -> bool:
    """A reviewer's verdict that mostly follows the judge (some rows disagree: a calibration with something to fit)."""
    return int(row["QA_Correctness"]) >= (6 if row["row"] % 4 else 9)


def test_labels_filled_in_on_the_hub_calibrate_as_the_same_labels_in_a_file(scored, hub, tmp_path, capfd):
    repo = "tester/to-label-hub"
    args = ["sample-for-review", scored, "--score", "QA_Correctness", "--n", "40", "--by", "stratified"]
    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "r.jsonl", "--push-to-hub", repo)
    assert code == 0, err
    # a reviewer fills the labels in on the Hub copy (pandas, the viewer's export, a notebook: a new push)
    rows = load_dataset(repo, split="train").to_list()
    for r in rows:
        r["label"], r["reviewer"] = _label(r), "ana"
    Dataset.from_list(rows).push_to_hub(repo)
    local = tmp_path / "labels.jsonl"
    local.write_text("".join(json.dumps(r) + "\n" for r in rows))

    calibrate = ["calibrate", scored, "--score", "QA_Correctness", "--folds", "4"]
    code, out, err = run_cli(capfd, *calibrate, "--labels", repo, "--token", TOKEN, "-o", tmp_path / "hub.json")
    assert code == 0, err
    code, _, err = run_cli(capfd, *calibrate, "--labels", local, "-o", tmp_path / "file.json")
    assert code == 0, err
    from_hub, from_file = Calibration.load(tmp_path / "hub.json"), Calibration.load(tmp_path / "file.json")
    assert from_hub.pairs == 40 and from_hub.label == repo and from_file.label == "labels.jsonl"
    from_hub.label = from_file.label
    assert from_hub == from_file  # the same labels, the same map, errors and threshold
    assert f"against {repo}: binary, 40 labelled rows" in out
    # read with the token given, which shows in no output or file
    assert f"Bearer {TOKEN}" in hub.auth_headers()
    assert TOKEN not in out + err and TOKEN not in (tmp_path / "hub.json").read_text()

    agree = ["agreement", scored, "--score", "QA_Correctness", "--resamples", "0", "--kind", "numeric"]
    code, out, err = run_cli(capfd, *agree, "--labels", repo, "--out", tmp_path / "a.json")
    assert code == 0, err
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["pairs"] == 40 and report["label"] == repo


def test_an_hf_path_names_one_labels_file_of_a_hub_dataset(hub, tmp_path):
    repo = "tester/labels-files"
    rows = [{"split": "train", "row": i, "score": "QA_Correctness", "label": i % 5 + 1} for i in range(12)]
    rows[3]["label"] = None  # not labelled yet: left out, as in a file
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "labels.csv").write_text(
        "split,row,score,label\n" + "".join(f"train,{r['row']},QA_Correctness,{r['label'] or ''}\n" for r in rows)
    )
    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    for name in ("labels.jsonl", "labels.csv"):
        api.upload_file(path_or_fileobj=tmp_path / name, path_in_repo=name, repo_id=repo, repo_type="dataset")
    for name in ("labels.jsonl", "labels.csv"):
        got = read_labels(f"hf://datasets/{repo}/{name}")
        assert got == read_labels(tmp_path / name) and len(got) == 11
    # the dataset id reads every labels file of it, in path order
    assert read_labels(repo) == read_labels(tmp_path / "labels.csv") + read_labels(tmp_path / "labels.jsonl")
    # a bad line is named as in a local file: the Hub file and its line
    bad = b'{"split": "train", "row": 0, "label": 3}\n{"split": "train", "label": 4}\n'
    api.upload_file(path_or_fileobj=bad, path_in_repo="more/bad.jsonl", repo_id=repo, repo_type="dataset")
    with pytest.raises(ConfigError, match=f"hf://datasets/{repo}/more/bad.jsonl, line 2: no row"):
        read_labels(repo)


def test_labels_neither_here_nor_on_the_hub_name_both(scored, hub, tmp_path, capfd):
    calibrate = ["calibrate", scored, "--score", "QA_Correctness", "-o", tmp_path / "c.json"]
    code, _, err = run_cli(capfd, *calibrate, "--labels", "tester/no-such-labels", "--token", TOKEN)
    assert code != 0
    assert "cannot read labels tester/no-such-labels: no such file here, and the Hub dataset" in err
    assert "check the name" in err and TOKEN not in err
    code, _, err = run_cli(capfd, *calibrate, "--labels", tmp_path / "missing.jsonl")
    assert code != 0 and "no such file here, and not a Hub dataset" in err
    code, _, err = run_cli(capfd, "agreement", scored, "--score", "QA_Correctness", "--labels", "tester/nope")
    assert code != 0 and "no such file here, and the Hub dataset tester/nope cannot be read" in err
    with pytest.raises(ConfigError, match="holds no labels file"):
        HfApi().create_repo("tester/empty-labels", repo_type="dataset", exist_ok=True)
        read_labels("tester/empty-labels")
    # a local folder named like a dataset id is the user's folder, not a Hub dataset that "cannot be read"
    folder = tmp_path / "tester" / "no-such-labels"
    folder.mkdir(parents=True)
    (folder / "ana.jsonl").write_text('{"split": "train", "row": 0, "label": true}\n')
    code, _, err = run_cli(capfd, *calibrate, "--labels", folder)
    assert (
        code != 0
        and f"cannot read labels {folder}: it is a folder; give one labels file in it ({folder / 'ana.jsonl'})" in err
    )


def test_what_names_hub_labels_and_what_stays_a_local_name():
    assert hub_labels("me/to-label").name == "me/to-label"
    assert hub_labels("hf://datasets/me/x@v1/l.jsonl").name == "hf://datasets/me/x@v1/l.jsonl"
    assert hub_labels("me/labels.jsonl") is None and hub_labels("a/b/c") is None and hub_labels("x") is None
    with pytest.raises(ConfigError, match="name a dataset"):
        hub_labels("hf://datasets/me")
