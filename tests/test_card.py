"""The screen and the card tell the truth: live progress, summary.json, the card's provenance,
the recipes listing and the CLI's help. CLI tests run in-process through ``hf_judge.cli.main``."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from datasets import Dataset, load_from_disk
from helpers import qa_dataset, score, score_args
from huggingface_hub import DatasetCard, HfApi, hf_hub_download

from hf_judge import RunSummary, filter_by_scores
from hf_judge.cli import main
from hf_judge.cli.inputs import input_summary
from hf_judge.cli.parser import build_parser

KEY = "sk-test-card-0123456789"


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))

    def run(*args, code=0):
        rc = main([str(a) for a in args])
        out = capsys.readouterr()
        assert rc == code, f"exit {rc}\nstdout:\n{out.out}\nstderr:\n{out.err}"
        return out

    return run


def _jsonl(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"question": f"card-{i}: what is {i}*2?", "answer": str(2 * i)}) + "\n" for i in range(n))
    )
    return path


def _card(repo: str) -> DatasetCard:
    return DatasetCard.load(repo, repo_type="dataset")


def _card_number(card: str, label: str) -> str:
    return re.search(rf"- \*\*{label}:\*\* ([\d,]+)", card).group(1).replace(",", "")


# -- progress ----------------------------------------------------------------------


def test_progress_follows_replies_several_times_a_second(judge, tmp_path):
    judge.configure(latency=0.02, faults=[{"fault": "out_of_range", "match": "row-7:"}])
    seen = []
    out = score(qa_dataset(500), ["QA_Clarity"], judge, tmp_path, concurrency=16, retries=0, progress=seen.append)
    done = [p.rows_done for p in seen]
    assert done == sorted(done) and done[-1] == 500 and all(p.rows_total == 500 for p in seen)
    gaps = [b - a for a, b in zip([0, *done], done, strict=False)]  # pairs of neighbours
    # reports come every progress.INTERVAL (0.1 s), as docs/tutorials/first-hour.md promises ("several times a
    # second"): 16 in flight at 20 ms each finish at most 80 rows in that time, so a gap over 100 rows is a report
    # missed
    assert max(gaps) <= 100, gaps
    assert max(p.in_flight for p in seen) > 0 and seen[-1].in_flight == 0
    assert seen[-1].errors == 1 == len(out["errors"]) and seen[-1].requests == judge.stats()["requests"]


def test_one_bar_in_rows_and_no_empty_errors_bar(judge, tmp_path, capfd):
    out = score(qa_dataset(50), ["QA_Clarity"], judge, tmp_path)
    out.save_to_disk(tmp_path / "out")
    err = capfd.readouterr().err
    assert "Scoring train" in err and "50/50" in err and " rows" in err
    assert not any("Scoring" in s and "examples" in s for s in re.split(r"[\r\n]", err))  # Dataset.map's bar is off
    assert "0/0" not in err and " 0 examples" not in err  # the empty errors split saves silently


def test_progress_false_and_library_switch_draw_nothing(judge, tmp_path, capfd):
    import datasets

    score(qa_dataset(20), ["QA_Clarity"], judge, tmp_path, progress=False)
    datasets.disable_progress_bars()
    try:
        score(qa_dataset(20, "other"), ["QA_Clarity"], judge, tmp_path)
    finally:
        datasets.enable_progress_bars()
    assert "Scoring" not in capfd.readouterr().err


# -- summary.json and the runs behind a result ----------------------------------------


def test_save_to_disk_writes_summary_json(judge, tmp_path):
    out = score(qa_dataset(30), ["QA_Clarity"], judge, tmp_path)
    out.save_to_disk(tmp_path / "out")
    back = RunSummary.load(tmp_path / "out")
    assert back.to_dict() == out.summary.to_dict() and back.requests == 30
    assert len(load_from_disk(tmp_path / "out")["train"]) == 30


def test_a_result_built_over_several_runs_sums_them(judge, tmp_path):
    judge.configure(faults=[{"fault": "status", "status": 503, "match": "row-3:"}])  # sent again by the next run
    first = score(qa_dataset(40), ["QA_Clarity"], judge, tmp_path, retries=0)
    assert len(first["errors"]) == 1
    judge.configure(faults=[])
    second = score(qa_dataset(40), ["QA_Clarity"], judge, tmp_path, retries=0)  # retries the failed row only
    assert second.summary.requests == 1 and len(second["errors"]) == 0
    assert [r["requests"] for r in second.summary.runs] == [40, 1]
    third = score(qa_dataset(40), ["QA_Clarity"], judge, tmp_path)  # whole from the results cache
    t = third.summary.totals()
    assert third.summary.requests == 0 and t["requests"] == 41 == judge.stats()["requests"]
    assert t["prompt_tokens"] == first.summary.prompt_tokens + second.summary.prompt_tokens
    text = str(third.summary)
    assert "from cache     40 rows (train: 40; no request sent)" in text and "served from cache" not in text
    assert "scores from    2 runs: 41 requests" in text


def test_filter_by_scores_keeps_the_summary_and_adds_the_thresholds(judge, tmp_path):
    out = score(qa_dataset(30), ["QA_Clarity"], judge, tmp_path)
    best = filter_by_scores(out, min={"QA_Clarity": 5})
    kept = len(best["train"])
    assert best.summary.model == "judge" and best.summary.metrics == out.summary.metrics
    assert best.summary.filters["min"] == {"QA_Clarity": 5} and best.summary.filters["rows_kept"] == {"train": kept}
    assert out.summary.filters == {}  # the scoring run's own summary is untouched


# -- the card --------------------------------------------------------------------------


def test_score_then_push_card_shows_the_scoring_run(judge, hub, tmp_path, cli):
    Dataset.from_dict(
        {"question": [f"src-{i}?" for i in range(164)], "answer": [str(i) for i in range(164)]}
    ).push_to_hub("tester/card-src")
    args = score_args("tester/card-src", judge)
    p = cli(*args, "-o", tmp_path / "out")
    assert p.out.index("requests       164") < p.out.index("saved to")  # the summary, after the bars, before the paths
    assert " 0 examples" not in p.err
    scored = RunSummary.load(tmp_path / "out")
    assert scored.requests == 164 and scored.source_dataset == "tester/card-src" and scored.source_on_hub
    p = cli(*args, "--push-to-hub", "tester/card-scored")  # the natural order: score, then push (all from cache)
    assert "requests       0 " in p.out and "from cache     164 rows" in p.out
    card = _card("tester/card-scored")
    text = str(card)
    assert _card_number(text, "Requests") == "164" and judge.stats()["requests"] == 164
    assert f"{scored.prompt_tokens:,} prompt / {scored.completion_tokens:,} completion" in text
    assert "over 1 run" in text and "[tester/card-src](https://huggingface.co/datasets/tester/card-src)" in text
    meta = card.data
    assert meta.source_datasets == ["tester/card-src"] and meta.annotations_creators == ["machine-generated"]
    assert meta.size_categories == "n<1K" and "hf-judge" in meta.tags
    # the prompt hash names a file in the repo whose sha256 it is
    sha = re.search(
        r"\| \[`hf_judge/prompts/QA_Clarity.jinja`\]\(hf_judge/prompts/QA_Clarity.jinja\) \| `([0-9a-f]{64})` \|", text
    ).group(1)
    prompt = Path(
        hf_hub_download("tester/card-scored", "hf_judge/prompts/QA_Clarity.jinja", repo_type="dataset")
    ).read_bytes()
    assert hashlib.sha256(prompt).hexdigest() == sha
    assert sha == hashlib.sha256(Path("prompts/QA_Clarity.jinja").read_bytes()).hexdigest()
    pushed = json.loads(
        Path(hf_hub_download("tester/card-scored", "hf_judge/summary.json", repo_type="dataset")).read_text()
    )
    assert sum(r["requests"] for r in pushed["runs"]) == 164


def test_filtered_card_keeps_provenance_and_adds_thresholds(judge, hub, tmp_path, cli, monkeypatch):
    data = _jsonl(tmp_path / "data.jsonl", 60)
    monkeypatch.chdir(tmp_path)
    cli(*score_args(data, judge))
    assert (tmp_path / "data-judged" / "summary.json").is_file()
    p = cli("filter", "data-judged", "--min", "QA_Clarity=5")
    assert "saved to data-filtered" in p.out and not (tmp_path / "data-judged-judged").exists()
    assert "0/0" not in p.err and " 0 examples" not in p.err  # its empty errors split saves silently
    kept = len(load_from_disk(tmp_path / "data-filtered")["train"])
    stored = RunSummary.load(tmp_path / "data-filtered")
    assert stored.filters["rows_kept"] == {"train": kept} and stored.requests == 60
    cli("filter", "data-judged", "--min", "QA_Clarity=5", "--push-to-hub", "tester/card-best")
    text = str(_card("tester/card-best"))
    assert "`judge` at `127.0.0.1:" in text and "data.jsonl" in text
    assert re.search(r"`QA_Clarity`.*`[0-9a-f]{64}`", text)
    assert "**Filtered:** QA_Clarity >= 5 (inclusive)" in text and f"**Rows kept:** train: {kept:,} of 60" in text
    assert _card_number(text, "Requests") == "60"
    # and from the Hub: a filter of a pushed result keeps it too
    cli(*score_args(data, judge, "--push-to-hub", "tester/card-hubscored"))
    cli("filter", "tester/card-hubscored", "--min", "QA_Clarity=5", "--push-to-hub", "tester/card-hubbest")
    text = str(_card("tester/card-hubbest"))
    assert f"train: {kept:,} of 60" in text and _card_number(text, "Requests") == "60"
    # a dataset hf-judge did not push has no summary to keep: filtered, its card has no provenance to invent
    Dataset.from_dict({"QA_Clarity": [1, 9]}).push_to_hub("tester/card-plain")
    assert input_summary("tester/card-plain") is None and input_summary("tester/card-nope") is None
    cli("filter", "tester/card-plain", "--min", "QA_Clarity=5", "--push-to-hub", "tester/card-plainbest")
    assert "Model:" not in str(_card("tester/card-plainbest"))


def test_recipe_and_prompts_uploaded_beside_the_data(judge, hub, tmp_path, cli):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"instruction": f"q {i}", "output": f"a {i}"}) + "\n" for i in range(8)))
    cli(
        "run",
        "quality",
        "--dataset",
        path,
        "--base-url",
        judge.base_url,
        "-m",
        "judge",
        "--push-to-hub",
        "tester/card-recipe",
    )
    files = set(HfApi().list_repo_files("tester/card-recipe", repo_type="dataset"))
    assert {
        "hf_judge/recipe.yaml",
        "hf_judge/prompts/Q_All.jinja",
        "hf_judge/prompts/QA_All.jinja",
        "hf_judge/summary.json",
    } <= files
    recipe = Path(hf_hub_download("tester/card-recipe", "hf_judge/recipe.yaml", repo_type="dataset"))
    from hf_judge import load_recipe

    ran = load_recipe(recipe)
    assert ran.model == "judge" and ran.metrics == ["Q_All", "QA_All"] and ran.api_key == "env:OPENAI_API_KEY"
    text = str(_card("tester/card-recipe"))  # every scored row: the recipe's filters go to a second repo
    assert "**Recipe:** `quality`" in text and "**Filtered:**" not in text
    filtered = str(_card("tester/card-recipe-filtered"))
    assert "**Recipe:** `quality`" in filtered and "**Filtered:** QA_Correctness >= 7, Q_Clarity >= 6" in filtered
    assert KEY not in text and KEY not in filtered and KEY not in recipe.read_text()
    assert re.search(r"\*\*Rows kept:\*\* train: \d+ of 8", filtered)


# -- the command line --------------------------------------------------------------------


def test_recipes_shows_when_to_use_each_and_its_cost(cli):
    out = cli("recipes").out
    assert "quality  (2 calls per row: Q_All, QA_All)" in out and "correctness  (1 call per row: Binary)" in out
    assert "pairwise  (2 calls per row: Comparative)" in out and "difficulty  (2 calls per row" in out
    assert out.count("use it to ") == 4


def test_every_option_has_help_and_every_command_a_description_and_example():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert p.description and "\n" not in p.description.strip(), name
        assert "example" in (p.epilog or "") and f"hf-judge {name}" in p.epilog, name
        for a in p._actions:
            if a.dest != "help":
                assert a.help, f"{name} {a.option_strings or a.dest} has no help"
    for name in ("score", "run"):
        opts = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert {"-m", "-o", "-n"} <= opts
