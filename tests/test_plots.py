"""Pictures: the card of a pushed run shows its score distributions and agreement reports as PNGs in the
repo (loopback Hub); the agreement command saves them; without the plots extra, text histograms."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict, load_from_disk
from helpers import qa_dataset, run_cli, score
from huggingface_hub import DatasetCard, HfApi, hf_hub_download

from hf_judge import ConfigError, agreement, push_scored

mpimg = pytest.importorskip("matplotlib.image")

PNG = b"\x89PNG\r\n\x1a\n"


def thumbnail(path: str, title: str) -> str:
    """A picture in the card's gallery: a small image that links to the full-size one."""
    return f'<a href="{path}"><img src="{path}" alt="{title}" width="240"></a><br><sub>{title}</sub>'


def _png(repo: str, path: str) -> bytes:
    return Path(hf_hub_download(repo, path, repo_type="dataset")).read_bytes()


def test_pushed_run_card_shows_distributions_and_agreement_pictures(judge, hub, tmp_path):
    scored = score(qa_dataset(40, "plots"), ["QA_Clarity"], judge, tmp_path)
    labelled = scored["train"].add_column("human_score", [(i % 10) + 1 for i in range(40)])
    report = agreement(labelled, score="QA_Clarity", label="human_score", resamples=100)
    scored.push_to_hub("tester/plots", agreement=report)
    files = set(HfApi().list_repo_files("tester/plots", repo_type="dataset"))
    pictures = {f for f in files if f.startswith("hf_judge/plots/")}
    assert pictures == {
        "hf_judge/plots/train/QA_Clarity.png",
        "hf_judge/plots/agreement/0_QA_Clarity_distribution.png",
        "hf_judge/plots/agreement/0_human_score_distribution.png",
        "hf_judge/plots/agreement/0_QA_Clarity_vs_human_score_confusion.png",
        "hf_judge/plots/agreement/0_QA_Clarity_vs_human_score_calibration.png",
    }
    text = str(DatasetCard.load("tester/plots", repo_type="dataset"))
    # a gallery of thumbnails, each a link to its full-size picture
    assert thumbnail("hf_judge/plots/train/QA_Clarity.png", "QA_Clarity (train)") in text
    path = "hf_judge/plots/agreement/0_QA_Clarity_vs_human_score_confusion.png"
    assert thumbnail(path, "QA_Clarity_vs_human_score_confusion") in text
    assert "### Agreement with labels" in text and "| spearman |" in text and "40 of 40 rows compared" in text
    for f in pictures:  # every picture is a PNG in the repo that the card shows
        assert _png("tester/plots", f).startswith(PNG) and f'<img src="{f}"' in text
    (tmp_path / "d.png").write_bytes(_png("tester/plots", "hf_judge/plots/train/QA_Clarity.png"))
    assert mpimg.imread(tmp_path / "d.png").shape[:2] == (320, 500)

    # pushed again without pictures: the card falls back to text, the old pictures leave the repo
    scored.push_to_hub("tester/plots", plots=False)
    files = set(HfApi().list_repo_files("tester/plots", repo_type="dataset"))
    assert not any(f.startswith("hf_judge/plots/") for f in files) and "hf_judge/summary.json" in files
    text = str(DatasetCard.load("tester/plots", repo_type="dataset"))
    assert "<img" not in text and "`QA_Clarity`\n```\n" in text and "Agreement with labels" not in text


def test_pictures_without_a_summary_replace_only_their_own(hub):
    ds = Dataset.from_dict(
        {"QA_Clarity": [3, 7, 7, 9], "QA_Clarity_expected": [3.4, 6.9, 7.2, 8.7], "note": ["a", "b", "c", "d"]}
    )
    push_scored(ds.train_test_split(test_size=2, shuffle=False), "tester/plots-bare")
    files = set(HfApi().list_repo_files("tester/plots-bare", repo_type="dataset"))
    assert {
        "hf_judge/plots/train/QA_Clarity.png",
        "hf_judge/plots/test/QA_Clarity.png",
        "hf_judge/plots/train/QA_Clarity_expected.png",  # a float column: binned
    } <= files
    push_scored(DatasetDict({"train": ds.select_columns(["note", "QA_Clarity"])}), "tester/plots-bare")
    files = set(HfApi().list_repo_files("tester/plots-bare", repo_type="dataset"))
    # and the report page, made again for this push
    assert {f for f in files if f.startswith("hf_judge/")} == {
        "hf_judge/plots/train/QA_Clarity.png",
        "hf_judge/report.html",
    }


def test_agreement_command_saves_pngs_beside_the_report(tmp_path, capfd):
    path = tmp_path / "labelled.jsonl"
    Dataset.from_dict({"QA_Correctness": [9, 7, 3, 8, 2, 6, 6, 10], "human": [8, 7, 2, 9, 3, 5, 7, 9]}).to_json(path)
    code, out, err = run_cli(
        capfd, "agreement", path, "--score", "QA_Correctness", "--label", "human", "--out", tmp_path / "r/report.json"
    )
    assert code == 0, err
    saved = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert saved == [
        "QA_Correctness_distribution.png",
        "QA_Correctness_vs_human_calibration.png",
        "QA_Correctness_vs_human_confusion.png",
        "human_distribution.png",
        "report.json",
    ]
    assert all((tmp_path / "r" / n).read_bytes().startswith(PNG) for n in saved if n.endswith(".png"))
    assert "saved to " in out and "pictures (4 PNG) in " in out and " | #" not in out  # pictures: no text histogram


def test_without_the_plots_extra_the_terminal_and_the_card_show_text(tmp_path, capfd, monkeypatch, hub):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed: `import matplotlib` fails
    path = tmp_path / "labelled.jsonl"
    Dataset.from_dict({"QA_Correctness": [9, 7, 3, 8], "human": [8, 7, 2, 9]}).to_json(path)
    code, out, err = run_cli(capfd, "agreement", path, "--score", "QA_Correctness", "--label", "human")
    assert code == 0, err
    assert "QA_Correctness\n     3 | " in out and 'pip install "hf-judge[plots]"' in out
    code, _, err = run_cli(capfd, "agreement", path, "--score", "QA_Correctness", "--label", "human", "--plots", "p")
    assert code == 2 and 'pictures need matplotlib: pip install "hf-judge[plots]"' in err
    push_scored(DatasetDict({"train": Dataset.from_dict({"QA_Correctness": [9, 7]})}), "tester/plots-text")
    text = str(DatasetCard.load("tester/plots-text", repo_type="dataset"))
    assert "<img" not in text and "`QA_Correctness`\n```\n" in text
    with pytest.raises(ConfigError, match="matplotlib"):
        push_scored(DatasetDict({"train": Dataset.from_dict({"x": [1]})}), "tester/plots-text", plots=True)


def test_score_push_with_a_saved_agreement_report_shows_it_in_the_card(judge, hub, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plots")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    labelled = tmp_path / "labelled.jsonl"
    Dataset.from_dict({"QA_Clarity": [9, 7, 3, 8, 2, 6], "human": [8, 7, 2, 9, 3, 5]}).to_json(labelled)
    report = tmp_path / "report.json"
    code, _, err = run_cli(capfd, "agreement", labelled, "--score", "QA_Clarity", "--label", "human", "--out", report)
    assert code == 0, err
    data = tmp_path / "d.jsonl"
    qa_dataset(6, "agree").to_json(data)
    args = ["score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column", "output=answer"]
    args += ["-m", "judge", "--base-url", judge.base_url, "--push-to-hub", "tester/plots-cli"]
    code, _, err = run_cli(capfd, *args, "--agreement", tmp_path / "missing.json")
    assert code == 2 and "missing.json" in err and judge.stats()["requests"] == 0  # found before any request
    code, out, err = run_cli(capfd, *args, "--agreement", report)
    assert code == 0, err
    text = str(DatasetCard.load("tester/plots-cli", repo_type="dataset"))
    assert "**`QA_Clarity` vs `human`** (split `train`): numeric, 6 of 6 rows compared" in text
    assert "| spearman | 0.886 |" in text  # scipy: 0.8857142857142858
    path = "hf_judge/plots/agreement/0_QA_Clarity_vs_human_confusion.png"
    assert thumbnail(path, "QA_Clarity_vs_human_confusion") in text


def test_score_output_folder_gets_distribution_pictures(judge, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plots")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "d.jsonl"
    qa_dataset(12, "folder").to_json(data)
    out = tmp_path / "out"
    common = ["--column", "instruction=question", "--column", "output=answer", "-m", "judge"]
    code, _, err = run_cli(
        capfd, "score", data, "--metrics", "QA_Clarity", *common, "--base-url", judge.base_url, "-o", out
    )
    assert code == 0, err
    assert (out / "plots/train/QA_Clarity.png").read_bytes().startswith(PNG)
    # the folder is still a result hf-judge reads and adds to: a second metric, both pictures
    code, _, err = run_cli(
        capfd, "score", out, "--metrics", "Q_Clarity", *common, "--base-url", judge.base_url, "-o", out
    )
    assert code == 0, err
    assert sorted(p.name for p in (out / "plots/train").iterdir()) == ["QA_Clarity.png", "Q_Clarity.png"]


def test_every_kind_of_report_draws_its_pictures():
    from hf_judge.results.plots import report_pngs

    binary = Dataset.from_dict({"Binary": [True, False, True, True], "gold": [1, 0, 0, 1]})
    pairwise = Dataset.from_dict({"Comparative_winner": ["1", "2", "tie", "1"], "preferred": ["1", "2", "1", "2"]})
    expected = Dataset.from_dict({"QA_Correctness_expected": [7.5, 2.25, 9.0, 5.5], "human": [8, 2, 9, 6]})
    names = {
        "binary": sorted(report_pngs(agreement(binary, "Binary", "gold", resamples=0))),
        "pairwise": sorted(report_pngs(agreement(pairwise, "Comparative", "preferred", resamples=0))),
        "expected": sorted(report_pngs(agreement(expected, "QA_Correctness_expected", "human", resamples=0))),
    }
    assert names == {
        "binary": ["Binary_distribution.png", "Binary_vs_gold_confusion.png", "gold_distribution.png"],
        "pairwise": [
            "Comparative_winner_distribution.png",
            "Comparative_winner_vs_preferred_confusion.png",
            "preferred_distribution.png",
        ],
        "expected": [  # not whole numbers: no confusion matrix, a calibration curve
            "QA_Correctness_expected_distribution.png",
            "QA_Correctness_expected_vs_human_calibration.png",
            "human_distribution.png",
        ],
    }


@pytest.mark.parametrize(
    ("extra", "columns"),
    [
        # a panel: each judge's scores and the panel's aggregate
        ({"models": "m1,m2"}, {"QA_Clarity", "QA_Clarity__m1", "QA_Clarity__m2"}),
        # probability-weighted scores: the expected score and the confidence beside the sampled one
        ({"logprobs": True}, {"QA_Clarity", "QA_Clarity_expected", "QA_Clarity_confidence"}),
    ],
    ids=["panel", "logprobs"],
)
def test_the_card_of_a_pushed_panel_or_logprobs_run_shows_its_pictures(judge, hub, tmp_path, extra, columns):
    """Issue 19: the card of a pushed panel or logprob run shows the distribution of every score column the run
    added, as PNGs in the repo on the (loopback) Hub that the card links to."""
    scored = score(qa_dataset(12, "panel-plots"), ["QA_Clarity"], judge, tmp_path, **extra)
    repo = f"tester/plots-{'panel' if 'models' in extra else 'logprobs'}"
    scored.push_to_hub(repo)
    files = set(HfApi().list_repo_files(repo, repo_type="dataset"))
    pictures = {f for f in files if f.startswith("hf_judge/plots/")}
    assert {f"hf_judge/plots/train/{c}.png" for c in columns} <= pictures, sorted(pictures)
    text = str(DatasetCard.load(repo, repo_type="dataset"))
    for c in columns:
        assert thumbnail(f"hf_judge/plots/train/{c}.png", f"{c} (train)") in text
        assert _png(repo, f"hf_judge/plots/train/{c}.png").startswith(PNG)


def test_a_panel_run_with_samples_saves_every_judgment_and_the_judges_agreement_as_pictures(
    judge, tmp_path, capfd, monkeypatch
):
    """Issue 26: a run with samples, a panel and a pairwise judge in both orders writes, beside each column's
    distribution, a picture of every judgment per score column (what ``pooled_distributions`` counts, which are
    the result's samples) and the panel's agreement heat map (from the summary's figures)."""
    from panel_run import COLUMNS, configure, counts_of, panel_dataset

    from hf_judge.results.pooled import pooled_distributions

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plots")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    configure(judge)
    data = tmp_path / "pairs.jsonl"
    panel_dataset().to_json(data)
    out = tmp_path / "out"
    columns = [a for v, c in COLUMNS.items() for a in ("--column", f"{v}={c}")]
    code, stdout, err = run_cli(
        capfd, "score", data, "--metrics", "QA_Clarity,Comparative", *columns, "--models", "j1,j2,j3",
        "--samples", 2, "--temperature", 0.7, "--base-url", judge.base_url, "-o", out,
    )  # fmt: skip
    assert code == 0, err
    folder = out / "plots/train"
    drawn = sorted(p.name for p in (folder / "all_judgments").iterdir())
    assert drawn == [
        f"{c}.png"
        for c in sorted(["QA_Clarity", *(f"Comparative_{x}" for x in ("disagree", "score_1", "score_2", "winner"))])
    ]
    assert mpimg.imread(folder / "agreement/judges.png").shape[2] == 4  # a PNG matplotlib reads back
    assert all((folder / "all_judgments" / n).read_bytes().startswith(PNG) for n in drawn)
    # what the pictures draw is what the saved result holds, every sample of every judge
    saved = load_from_disk(str(out))["train"]
    rows = saved.to_list()
    pooled = pooled_distributions(saved)
    for col, p in pooled.items():
        for who, counts in p["judges"].items():
            assert counts["hist"] == counts_of(rows, [f"{col}_samples__{who}"])
    assert pooled["Comparative_disagree"]["hist"] == {"false": 32, "true": 16}
    # the run's page read its own reply store for each order's winner (j2 picks the response shown first)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '"j2":{"pairs":{"1":{"2":16}},"judgments":16,"first_shown":16,"second_shown":0}' in page
    n = len(list(out.glob("plots/**/*.png")))
    assert f"{n} PNGs in {out / 'plots'}/" in stdout


def test_a_users_own_double_underscore_columns_are_no_judges_in_the_pictures():
    """Issue 33, item 23: ``<score>__<name>`` columns are a judge's only where the summary declares the panel; a
    user's own ``QA_Clarity__old`` beside a lone judge's ``QA_Clarity`` draws no picture of "every judgment"."""
    from hf_judge.results.card import picture_files
    from hf_judge.results.summary import RunSummary

    d = Dataset.from_dict({"QA_Clarity": [7, 8, 9, 8], "QA_Clarity__old": [1, 2, 3, 2], "QA_Clarity__v2": [2, 2, 3, 3]})
    lone = picture_files(DatasetDict({"train": d}), RunSummary())
    assert not [p for p in lone if "all_judgments" in p], sorted(lone)
    panel = RunSummary(sampling={"judges": [{"name": "old"}, {"name": "new"}]})
    two = Dataset.from_dict({**d.remove_columns("QA_Clarity__v2").to_dict(), "QA_Clarity__new": [7, 8, 9, 8]})
    drawn = picture_files(DatasetDict({"train": two}), panel)
    assert "hf_judge/plots/train/all_judgments/QA_Clarity.png" in drawn, sorted(drawn)
