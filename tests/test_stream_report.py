"""The report page of a streamed push (results/report_stream.py): built from the rows as they pass into the push,
uploaded as hf_judge/report.html and linked from the card; with -o DIR, the folder's page is the one pushed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset, DatasetDict, load_dataset
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge.results import report_data as rd
from hf_judge.results.errors_split import errors_dataset
from hf_judge.results.report import errors_data, report_data
from hf_judge.results.report_stream import StreamPage
from hf_judge.results.summary import RunSummary

PAGE = "hf_judge/report.html"


def _embedded(text: str) -> dict:
    """The data a page embeds (the JSON in its ``hf-judge-data`` script)."""
    start = text.index(">", text.index("id='hf-judge-data'")) + 1
    return json.loads(text[start : text.index("</script>", start)])


def _hub_page(repo: str) -> tuple[dict, str]:
    from huggingface_hub import DatasetCard, hf_hub_download

    page = Path(hf_hub_download(repo, PAGE, repo_type="dataset")).read_text(encoding="utf-8")
    return _embedded(page), str(DatasetCard.load(repo, repo_type="dataset"))


def _faults(judge):
    judge.configure(
        faults=[{"fault": "status", "status": 400, "match": "row-3:"}, {"fault": "malformed_json", "match": "row-7:"}]
    )


@pytest.mark.parametrize("max_rows", [None, 30], ids=["whole", "selected"])
def test_a_streamed_push_uploads_the_page_it_kept_as_the_rows_passed(judge, hub, tmp_path, monkeypatch, max_rows):
    n, repo = 40, f"tester/stream-page-{max_rows}"
    if max_rows:  # the caps lowered: the page chooses among the rows it kept, as a large stream's does
        monkeypatch.setattr(rd, "MAX_ROWS", max_rows)
        monkeypatch.setattr(rd, "EXTREMES", 3)
        monkeypatch.setattr(rd, "NEAR", 1)
    _faults(judge)
    streamed = score(qa_dataset(n).to_iterable_dataset(num_shards=2), ["QA_Clarity", "QA_Correctness"], judge, tmp_path)
    streamed.push_to_hub(repo)
    assert judge.stats()["requests"] < 3 * n  # 2 per row and the failures' retries: the page reads nothing again
    data, card = _hub_page(repo)
    assert f"[Report page]({PAGE})" in card
    pushed = load_dataset(repo)["train"]
    errors = load_dataset(repo, "errors")["errors"]
    train = data["splits"]["train"]
    assert train["rows"] == len(pushed) == n and data["title"] == repo and data["source"] == repo
    # every row's scores, equal to the pushed data's: the page's threshold counts are exact
    assert train["all_scores"]["QA_Clarity"] == pushed["QA_Clarity"]
    assert train["all_scores"]["QA_Correctness"] == pushed["QA_Correctness"]
    want = report_data(DatasetDict({"train": pushed, "errors": errors}), max_rows=rd.MAX_ROWS)
    want = json.loads(json.dumps(want["splits"]["train"]))  # as the page holds it
    assert train["stats"] == want["stats"] and train["thresholds"] == want["thresholds"]
    assert data["errors"]["total"] == len(errors) == 4  # two rows, each failed for both metrics
    assert sorted(r["row"] for r in data["errors"]["rows"]) == sorted(errors["row"]) == [3, 3, 7, 7]
    assert {3, 7} <= set(train["indices"])  # the error rows are embedded
    for pos, row in enumerate(train["indices"]):  # each embedded row is the pushed row of its number
        assert train["columns"]["question"][pos] == pushed[row]["question"]
        assert train["columns"]["QA_Clarity"][pos] == pushed[row]["QA_Clarity"]
    if max_rows:
        assert len(train["indices"]) == max_rows and "all" not in train["reasons"]
        assert set(train["reasons"]) == set(want["reasons"]) == {
            "lowest", "highest", "near a threshold", "errors", "uniform sample"
        }  # fmt: skip
        values = [v for v in pushed["QA_Clarity"] if v is not None]
        shown = [v for v in train["columns"]["QA_Clarity"] if v is not None]
        assert min(shown) == min(values) and max(shown) == max(values)
    else:
        assert train["indices"] == list(range(n)) and train["reasons"] == {"all": n}
    assert train["prompts"]["QA_Clarity"]["rows"], "each row's prompt rebuilt"


def test_cli_streaming_with_a_folder_and_a_push_uploads_the_folder_s_page(judge, hub, tmp_path, capfd):
    data = tmp_path / "d.jsonl"
    qa_dataset(12, "sp").to_json(data)
    out_dir, repo = tmp_path / "streamed-page-both", "tester/stream-page-both"
    args = score_args(data, judge, "--streaming", "-o", out_dir, "--push-to-hub", repo, "--retries", "0")
    code, out, err = run_cli(capfd, *args)
    assert code == 0, err
    assert f"{'report':<15}{out_dir / 'report.html'}" in out
    local = _embedded((out_dir / "report.html").read_text(encoding="utf-8"))
    pushed, card = _hub_page(repo)
    assert f"[Report page]({PAGE})" in card
    # the same page, naming the repo instead of the folder (its title and `hf-judge filter` commands)
    assert pushed["title"] == repo and local["title"] == str(out_dir)
    assert {**pushed, "title": "", "source": ""} == {**local, "title": "", "source": ""}
    from huggingface_hub import HfApi

    files = HfApi().list_repo_files(repo, repo_type="dataset")
    assert PAGE in files and "report.html" not in files  # the folder's copy, under hf_judge/ only
    assert pushed["splits"]["train"]["columns"]["QA_Clarity"] == load_dataset(repo)["train"]["QA_Clarity"]


def test_cli_streaming_push_without_a_folder_uploads_a_page(judge, hub, tmp_path, capfd):
    data = tmp_path / "d.jsonl"
    qa_dataset(9, "np").to_json(data)
    repo = "tester/stream-page-cli"
    code, _, err = run_cli(capfd, *score_args(data, judge, "--streaming", "--push-to-hub", repo, "--retries", "0"))
    assert code == 0, err
    pushed, card = _hub_page(repo)
    assert f"[Report page]({PAGE})" in card and pushed["splits"]["train"]["rows"] == 9
    assert pushed["splits"]["train"]["columns"]["QA_Clarity"] == load_dataset(repo)["train"]["QA_Clarity"]


def _feed(ds: Dataset, errors: list[dict], step: int = 1000, summary=None, **caps) -> dict:
    page = StreamPage(**caps)
    page.start("train", ds.features, None)
    table = ds.with_format("arrow")[:]
    for s in range(0, len(ds), step):
        page.add("train", table.slice(s, step), [e for e in errors if s <= e["row"] < s + step])
    return page.splits["train"].embedded("train", summary, errors_data(errors_dataset(errors)), None)


# S__a and S__b are a panel's judges' columns where the run's summary declares judges a and b (issue 33: a user's
# own a__b columns are no panel)
PANEL = RunSummary(sampling={"judges": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}]})


def _large(n: int) -> tuple[Dataset, list[dict]]:
    rng = np.random.default_rng(1)
    clarity = rng.integers(1, 11, n).tolist()
    clarity[5] = None
    ds = Dataset.from_dict(
        {
            "text": [f"row {i}" for i in range(n)],
            "S": clarity,
            "F": rng.random(n).tolist(),
            "S__a": clarity,
            "S__b": rng.integers(1, 11, n).tolist(),
            "ok": (rng.random(n) > 0.3).tolist(),
            "T": [i / n for i in range(n)],  # a score that grows along the stream: a sample weighted to its end shows
        }
    )
    errors = [
        {"split": "train", "row": r, "metric": "S", "kind": "x", "message": "m", "raw": None, "attempts": 1}
        for r in (5, n - 3)
    ]
    return ds, errors


def test_the_kept_rows_give_the_dataset_s_extremes_disagreements_errors_and_exact_figures():
    ds, errors = _large(20_000)
    got = _feed(ds, errors, summary=PANEL)
    want = report_data(DatasetDict({"train": ds, "errors": errors_dataset(errors)}), summary=PANEL)["splits"]["train"]
    assert got["rows"] == 20_000 and len(got["indices"]) == rd.MAX_ROWS == len(want["indices"])
    assert set(got["reasons"]) == set(want["reasons"])
    for key in ("all_scores", "stats", "pooled", "thresholds", "scores"):
        assert got[key] == want[key], key
    assert {5, 19_997} <= set(got["indices"])
    for c in ("S", "F"):  # the extremes of every row, not of a sample
        shown = [v for v in got["columns"][c] if v is not None]
        every = [v for v in ds[c] if v is not None]
        assert min(shown) == min(every) and max(shown) == max(every)
    # the rows the judges disagree on most: those of every row (first by spread, then by row)
    a, b = (np.asarray([np.nan if v is None else v for v in ds[c]]) for c in ("S__a", "S__b"))
    spread = np.nan_to_num(np.abs(a - b))
    top = np.argsort(-spread, kind="stable")[: rd.DISAGREE]
    assert set(top.tolist()) <= set(got["indices"])
    for pos, row in enumerate(got["indices"]):
        assert got["columns"]["text"][pos] == ds[row]["text"] and got["columns"]["F"][pos] == ds[row]["F"]


def test_past_the_score_cap_the_counts_stay_exact_and_the_rest_is_sampled(monkeypatch):
    monkeypatch.setattr(rd, "MAX_SCORE_VALUES", 10_000)
    ds, errors = _large(11_000)  # the last rows came after the last pruning of the sample
    got = _feed(ds, errors)
    want = report_data(DatasetDict({"train": ds, "errors": errors_dataset(errors)}))["splits"]["train"]
    assert got["all_scores"] is None is want["all_scores"]
    for c in ("S", "ok"):  # integers and booleans: exact histograms
        for key in ("count", "null", "mean", "hist"):
            assert got["stats"][c][key] == pytest.approx(want["stats"][c][key]), (c, key)
    assert got["stats"]["F"]["count"] == 11_000 and got["stats"]["F"]["min"] == want["stats"]["F"]["min"]
    assert got["stats"]["F"]["sample"] < 11_000 and abs(got["stats"]["F"]["p50"] - want["stats"]["F"]["p50"]) < 0.05
    # a uniform sample of the whole stream, as many rows as the cap holds: not the rows since the last pruning
    assert got["stats"]["T"]["sample"] == 10_000 // len(got["scores"]) and abs(got["stats"]["T"]["p50"] - 0.5) < 0.05


def test_text_is_kept_cut_as_the_page_shows_it():
    ds = Dataset.from_dict({"text": ["x" * 50, "short"] * 3, "S": [1, 2, 3, 4, 5, 6]})
    got = _feed(ds, [], max_text=10)
    want = report_data(ds, max_text=10)["splits"]["train"]
    assert got["columns"] == want["columns"] and got["cut"] == want["cut"] == {"text": [0, 2, 4]}


def test_what_a_long_stream_keeps_does_not_grow_with_its_rows(monkeypatch):
    monkeypatch.setattr(rd, "MAX_SCORE_VALUES", 6_000)
    block, _ = _large(2_048)
    table = block.with_format("arrow")[:]
    page = StreamPage(max_rows=100)
    page.start("train", block.features, None)
    keeper = page.splits["train"]
    held = []
    for i in range(200):  # 204,800 rows
        batch = table.slice((i % 2) * 1024, 1024)
        page.add("train", batch, [{"row": i * 1024 + 7, "kind": "x"}] if i < 150 else [])
        held.append((keeper.pooled, keeper.kept_values, len(keeper.pool)))
    assert keeper.rows == 204_800
    pooled, values, tables = (max(h[k] for h in held[100:]) for k in range(3))
    assert pooled <= 2 * keeper.live + 4096 and keeper.live < 3_000  # the rows of the keepers, not of the stream
    assert values <= 2 * (6_000 // len(keeper.scores)) and tables <= 257
    assert len(keeper.errors) == 100  # the first max_rows rows with errors
