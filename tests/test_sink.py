"""One result sink (results/sink.py): every engine's result is pushed by one rule and reads back one way.

Two divergences of issue 34, each failing before: a streamed push deleted an earlier `calibrate --push-to-hub`'s
files and card part (one process kept them), and a streamed run's folder (Parquet shards) could not be read by
`load_from_disk`, with nothing to read it the way a saved folder is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import load_from_disk
from helpers import qa_dataset, run_cli, score, score_args
from huggingface_hub import HfApi, hf_hub_download

CALIBRATION_MARK = "<!-- hf-judge:calibration:start -->"


def _score(capfd, judge, tmp_path, name, *extra):
    data = tmp_path / "data.jsonl"
    if not data.exists():
        qa_dataset(60).to_json(data)
    out = tmp_path / name
    args = score_args(
        data, judge, "-o", out, "--cache-dir", tmp_path / f"cache-{name}", *extra, metrics="QA_Correctness"
    )
    code, _, err = run_cli(capfd, *args)
    assert code == 0, err
    return out


def _repo_card(repo: str) -> str:
    return Path(hf_hub_download(repo, "README.md", repo_type="dataset")).read_text(encoding="utf-8")


def _repo_summary(repo: str) -> dict:
    return json.loads(Path(hf_hub_download(repo, "hf_judge/summary.json", repo_type="dataset")).read_text())


@pytest.mark.parametrize("streaming", [False, True])
def test_a_push_over_a_calibrated_repo_keeps_the_calibration_whichever_engine_scored(
    judge, hub, tmp_path, capfd, streaming
):
    """score --push-to-hub, calibrate --push-to-hub, then score again (one process or streamed) --push-to-hub: the
    calibration file, the card's calibration part and the summary's calibration are kept by both pushes."""
    repo = f"tester/sink-calibrated-{'stream' if streaming else 'plain'}"
    first = _score(capfd, judge, tmp_path, "first", "--push-to-hub", repo)
    d = load_from_disk(str(first))["train"]
    rows = [{"split": "train", "row": i, "label": s >= 6} for i, s in enumerate(d["QA_Correctness"])]
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["calibrate", first, "--score", "QA_Correctness", "--labels", tmp_path / "l.jsonl", "--push-to-hub", repo]
    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "c.json")
    assert code == 0, err
    assert CALIBRATION_MARK in _repo_card(repo)
    # an earlier run's prompt file that this one does not use: a re-push removes it (the result's files only)
    api = HfApi()
    api.upload_file(path_or_fileobj=b"x", path_in_repo="hf_judge/prompts/Old.jinja", repo_id=repo, repo_type="dataset")
    api.upload_file(path_or_fileobj=b"{}\n", path_in_repo="labels.jsonl", repo_id=repo, repo_type="dataset")

    _score(capfd, judge, tmp_path, "second", "--push-to-hub", repo, *(["--streaming"] if streaming else []))
    files = api.list_repo_files(repo, repo_type="dataset")
    assert "hf_judge/calibration.json" in files and "labels.jsonl" in files
    assert "hf_judge/prompts/Old.jinja" not in files
    card = _repo_card(repo)
    assert CALIBRATION_MARK in card and "Calibration against labels" in card
    assert set(_repo_summary(repo)["calibration"]) == {"QA_Correctness"}


def test_a_streamed_runs_folder_reads_back_as_the_one_process_folder(judge, tmp_path, capfd, monkeypatch):
    """hf_judge.load_result reads a streamed run's Parquet shards as it reads a saved folder: the same rows,
    columns, errors and summary; no Arrow cache written. Every command reads it that way: `filter` keeps its
    errors split (it lost it before, load_dataset(folder) giving the default config only)."""
    import datasets

    from hf_judge import ScoredDatasetDict, load_result

    judge.configure(
        faults=[{"fault": "status", "status": 400, "match": "row-3:"}, {"fault": "malformed_json", "match": "row-7:"}]
    )
    plain = _score(capfd, judge, tmp_path, "plain")
    streamed = _score(capfd, judge, tmp_path, "streamed", "--streaming")
    with pytest.raises(FileNotFoundError):  # datasets reads Arrow files only: the loader is the one way
        load_from_disk(str(streamed))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    a, b = load_result(plain), load_result(streamed)
    assert isinstance(b, ScoredDatasetDict) and list(a) == list(b) == ["train", "errors"]
    assert not (tmp_path / "hf-cache").exists()
    for split in a:
        assert a[split].column_names == b[split].column_names
        assert a[split].to_list() == b[split].to_list()
    assert len(b["errors"]) == 2
    for field in ("rows", "errors", "columns", "model", "prompts", "column_mapping"):
        assert getattr(a.summary, field) == getattr(b.summary, field), field
    for name, folder in (("pf", plain), ("sf", streamed)):
        code, _, err = run_cli(capfd, "filter", folder, "--min", "QA_Correctness=1", "-o", tmp_path / name)
        assert code == 0, err
    assert load_result(tmp_path / "sf")["errors"].to_list() == load_result(tmp_path / "pf")["errors"].to_list()


def test_the_card_is_rendered_from_the_template_the_wheel_ships():
    """The card's section comes from hf_judge/results/templates/card.md.j2 (jinja2, as huggingface_hub renders its
    dataset card template), a file inside the package that the wheel's `packages = ["hf_judge"]` ships."""
    import hf_judge
    from hf_judge.results import card

    template = card._card_template()
    package = Path(hf_judge.__file__).parent
    assert Path(template.filename) == package / "results" / "templates" / card.CARD_TEMPLATE
    pyproject = (package.parent / "pyproject.toml").read_text()
    wheel = pyproject.partition("[tool.hatch.build.targets.wheel]\n")[2].partition("\n[")[0]
    assert wheel.strip() == 'packages = ["hf_judge"]'  # every file of the package, the template included
    from datasets import Dataset, DatasetDict

    text = card.render_section(DatasetDict({"train": Dataset.from_dict({"QA_Clarity": [1, 2, 2]})}), None)
    assert text.startswith(card.START + "\n## Scored with hf-judge\n") and text.endswith("\n" + card.END)
    assert "| `QA_Clarity` | 3 | 0 | 1.67 |" in text


@pytest.mark.parametrize("streaming", [False, True])
def test_a_push_keeps_the_owners_card_metadata_and_text_whichever_engine_scored(judge, hub, tmp_path, capfd, streaming):
    """A repo whose card the owner wrote (tags, annotations, text): a push of scores adds hf-judge's tags and
    section and keeps the owner's, one process or streamed (a streamed folder's push is HubSink's, with the card
    rendered by result_card over the repo's; before, its own merge overwrote the owner's tags and annotations)."""
    from huggingface_hub import DatasetCard

    repo = f"tester/sink-owned-card-{'stream' if streaming else 'plain'}"
    HfApi().create_repo(repo, repo_type="dataset", exist_ok=True)
    owned = (
        "---\ntags:\n- medical\nannotations_creators:\n- expert-generated\nlicense: mit\n---\n# Mine\n\nOwner text.\n"
    )
    HfApi().upload_file(path_or_fileobj=owned.encode(), path_in_repo="README.md", repo_id=repo, repo_type="dataset")
    _score(capfd, judge, tmp_path, "scored", "--push-to-hub", repo, *(["--streaming"] if streaming else []))
    card = DatasetCard(_repo_card(repo))
    assert card.data.tags == ["medical", "hf-judge", "llm-as-judge"]
    assert card.data.annotations_creators == ["expert-generated", "machine-generated"]
    assert card.data.license == "mit" and "Owner text." in card.text and "## Scored with hf-judge" in card.text
    files = HfApi().list_repo_files(repo, repo_type="dataset")
    assert "hf_judge/summary.json" in files and "hf_judge/prompts/QA_Correctness.jinja" in files


def test_save_to_disk_goes_through_the_folder_sink_locally_and_to_a_url(judge, tmp_path):
    """ScoredDatasetDict.save_to_disk writes through the result folder's sink (results/output.py): a local folder
    is written beside and put in place, so the result read from a folder can be saved over it (datasets refused:
    its files are mapped), a folder of other files is refused before anything is written (the save would replace
    it), overwrite=False refuses a save that loses rows; a URL (fsspec) gets the same files, written in place."""
    import fsspec

    from hf_judge import OutputExistsError, load_result

    folder = tmp_path / "judged"
    first = score(qa_dataset(30), ["QA_Clarity"], judge, tmp_path)
    first.save_to_disk(folder)
    back = load_result(folder)  # memory-mapped from the folder
    back["train"] = back["train"].add_column("note", ["n"] * 30)
    back.save_to_disk(folder)
    again = load_result(folder)
    assert again["train"]["note"] == ["n"] * 30 and again.summary.to_dict() == first.summary.to_dict()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".judged")) == []  # no sibling left

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="no saved result"):
        first.save_to_disk(mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    small = score(qa_dataset(10), ["QA_Clarity"], judge, tmp_path)
    with pytest.raises(OutputExistsError, match="30 rows of split 'train'"):
        small.save_to_disk(folder, overwrite=False)
    assert len(load_result(folder)["train"]) == 30
    small.save_to_disk(folder)  # a saved result is replaced, as datasets saves over one
    assert len(load_result(folder)["train"]) == 10

    first.save_to_disk("memory://sink-url/judged", num_shards={"train": 2})
    fs = fsspec.filesystem("memory")
    assert json.loads(fs.cat("/sink-url/judged/dataset_dict.json")) == {"splits": ["train", "errors"]}
    assert json.loads(fs.cat("/sink-url/judged/summary.json")) == json.loads(json.dumps(first.summary.to_dict()))
    assert len(fs.glob("/sink-url/judged/train/*.arrow")) == 2
    url = load_result("memory://sink-url/judged")
    assert url["train"].to_list() == first["train"].to_list() and len(url["errors"]) == 0
