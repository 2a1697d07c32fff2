"""The obvious call works, and no mistake destroys a result (issue 15).

CLI tests run in-process through ``hf_judge.cli.main``, against the loopback
judge and Hub servers.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from datasets import Dataset, load_dataset, load_from_disk
from helpers import score_args

from hf_judge import ConfigError, ServerUnreachableError, Settings, filter_by_scores, score_dataset
from hf_judge.cli import main

KEY = "sk-test-SECRETKEY-safety-0123456789"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(path: Path, n: int, prefix: str = "q") -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"instruction": f"{prefix}-{i}: what is {i}*2?", "output": f"{2 * i}"}) + "\n")
    return path


def server(judge) -> list[str]:
    return ["--model", "judge", "--base-url", judge.base_url, "--retries", "0"]


# the score_args of a run that never reaches a judge: data with the template's column names, any model name
NO_JUDGE = {"metrics": "Q_Clarity", "columns": (), "model": "m"}


def dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    return f"http://127.0.0.1:{port}/v1"


def same(a: Path, b) -> bool:
    x = load_from_disk(str(a))
    return {k: v.to_list() for k, v in x.items()} == {k: v.to_list() for k, v in b.items()}


# -- the library example (README, docs/index.md) -----------------------------


def test_readme_library_example_pushes_scores_errors_and_card(judge, hub, tmp_path):
    ds = Dataset.from_dict({"question": [f"readme-{i}?" for i in range(12)], "answer": [str(i) for i in range(12)]})
    judge.configure(faults=[{"fault": "out_of_range", "match": "readme-4?"}])
    scored = score_dataset(
        ds,
        metrics=["QA_All"],
        model="judge",
        base_url=judge.base_url,
        retries=0,
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question", "output": "answer"},
    )
    good = filter_by_scores(scored, min={"QA_Correctness": 5})
    assert good.summary.requests == scored.summary.requests and good.summary.model == scored.summary.model
    assert good.summary.filters["min"] == {"QA_Correctness": 5}  # provenance kept, thresholds added
    good.push_to_hub("tester/readme-good")  # a plain DatasetDict push raises: the errors split has other features
    kept = [v for v in scored["train"]["QA_Correctness"] if v is not None and v >= 5]
    train = load_dataset("tester/readme-good", split="train")
    assert train["QA_Correctness"] == kept and "QA_Clarity" in train.column_names
    # the failed row 4 is not among the rows kept: neither is its error row (the errors split follows the rows
    # kept); the card says so. datasets 5.2 reads a 0-row split only streaming (huggingface/datasets#8401)
    assert list(load_dataset("tester/readme-good", "errors", split="errors", streaming=True)) == []
    from huggingface_hub import DatasetCard

    card = DatasetCard.load("tester/readme-good", repo_type="dataset")
    assert "hf-judge:start" in card.text and "`judge` at `127.0.0.1" in card.text and "hf-judge" in card.data.tags
    assert "- **Error rows kept:** 0 of 1 (those of the rows kept)" in card.text

    scored.push_to_hub("tester/readme-all")
    assert load_dataset("tester/readme-all", split="train").num_rows == 12
    errors = load_dataset("tester/readme-all", "errors", split="errors")
    assert errors["row"] == [4] and errors["metric"] == ["QA_All"] and errors["kind"] == ["out_of_range"]


def test_errors_config_exists_after_a_push_without_errors(judge, hub, tmp_path):
    ds = Dataset.from_dict({"question": ["clean-1?", "clean-2?"], "answer": ["1", "2"]})
    scored = score_dataset(
        ds,
        ["QA_Clarity"],
        model="judge",
        base_url=judge.base_url,
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question", "output": "answer"},
    )
    scored.push_to_hub("tester/no-errors")
    from datasets import get_dataset_config_names

    assert get_dataset_config_names("tester/no-errors") == ["default", "errors"]
    # datasets 5.2 cannot load a 0-row split without streaming (huggingface/datasets#8401)
    rows = load_dataset("tester/no-errors", "errors", split="errors", streaming=True)
    assert list(rows) == [] and list(rows.features) == [
        "split",
        "row",
        "metric",
        "judge",
        "kind",
        "message",
        "raw",
        "attempts",
    ]


# -- run takes score's flags; recipes by name from any folder ------------------


def test_run_takes_scores_flags_and_flags_override_the_recipe(judge, tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.jsonl"
    with data.open("w") as f:
        for i in range(6):
            f.write(json.dumps({"question": f"run-{i}?", "answer": str(i)}) + "\n")
    monkeypatch.chdir(tmp_path)  # not the checkout: built-in recipes are found by name
    code, out, err = run(
        capsys,
        "run",
        "quality",
        "--dataset",
        data,
        "--column",
        "instruction=question",
        "--column",
        "output=answer",
        *server(judge),
        "--limit",
        "4",
        "--output-dir",
        tmp_path / "out",
    )
    assert code == 0, err
    assert judge.stats()["requests"] == 8  # Q_All + QA_All on 4 rows, from the judge (the recipe says gpt-4.1-nano)
    assert len(load_from_disk(tmp_path / "out")["train"]) == 4
    code, out, err = run(capsys, "run", "quality", "--dataset", data, "--metrics", "QA_Clarity", *server(judge))
    assert code == 2 and "'QA_Correctness' in the recipe's filters" in err  # --metrics replaced the recipe's metrics


def test_recipe_for_openai_runs_against_a_local_server_without_a_key(judge, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    data = jsonl(tmp_path / "d.jsonl", 2)
    code, out, err = run(capsys, "run", "quality", "--dataset", data, *server(judge), "--output-dir", tmp_path / "o")
    assert code == 0, err  # the recipe says api_key: env:OPENAI_API_KEY, for OpenAI's server
    code, out, err = run(capsys, "run", "quality", "--dataset", data, "--output-dir", tmp_path / "o2")
    assert code == 2 and "OPENAI_API_KEY" in err


def test_old_recipe_path_works_from_any_folder(judge, tmp_path, capsys, monkeypatch):
    data = jsonl(tmp_path / "d.jsonl", 2)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(
        capsys, "run", "recipes/quality.yaml", "--dataset", data, *server(judge), "--output-dir", tmp_path / "o"
    )
    assert code == 0, err
    assert judge.stats()["requests"] == 4


# -- recipe filters: every row saved, the filtered rows beside them -------------


def test_recipe_filters_write_a_second_output_and_keep_every_row(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 20)
    code, out, err = run(capsys, "score", data, "--recipe", "quality", *server(judge), "--output-dir", tmp_path / "out")
    assert code == 0, err
    full = load_from_disk(tmp_path / "out")["train"]
    good = load_from_disk(tmp_path / "out-filtered")["train"]
    expect = [i for i in range(20) if full["QA_Correctness"][i] >= 7 and full["Q_Clarity"][i] >= 6]
    assert len(full) == 20 and 0 < len(good) == len(expect) < 20
    assert f"saved to {tmp_path / 'out'} (train: 20 rows)" in out
    assert f"train: {len(expect)} of 20 rows pass the recipe's filters (QA_Correctness >= 7, Q_Clarity >= 6)" in out
    assert f"saved to {tmp_path / 'out-filtered'} (train: {len(expect)} rows)" in out


def test_recipe_filter_typo_fails_before_any_request(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 5)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("metrics: [Q_All, QA_All]\nmodel: judge\nfilters:\n  min:\n    QA_Corectness: 7\n")
    code, out, err = run(
        capsys, "run", recipe, "--dataset", data, "--base-url", judge.base_url, "--output-dir", tmp_path / "out"
    )
    assert code == 2
    assert "QA_Corectness" in err and "did you mean 'QA_Correctness'?" in err
    assert judge.stats()["requests"] == 0 and not (tmp_path / "out").exists()


# -- existing score columns ---------------------------------------------------------


def test_adding_metrics_keeps_existing_scores_and_errors(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 6)
    out = tmp_path / "out"
    judge.configure(faults=[{"fault": "out_of_range", "match": "q-2:"}])
    assert run(capsys, "score", data, "--metrics", "Q_Clarity", *server(judge), "--output-dir", out)[0] == 0
    first = load_from_disk(out)
    judge.reset()
    code, stdout, err = run(
        capsys, "score", out, "--metrics", "Q_Clarity,QA_Clarity", *server(judge), "--output-dir", out
    )
    assert code == 0, err
    assert judge.stats()["requests"] == 6  # QA_Clarity only: Q_Clarity's columns are kept
    second = load_from_disk(out)
    assert second["train"]["Q_Clarity"] == first["train"]["Q_Clarity"] and None not in second["train"]["QA_Clarity"]
    assert second["errors"].to_list() == first["errors"].to_list()  # row 2 of Q_Clarity is still null, still explained
    assert "kept the existing columns of Q_Clarity" in stdout


def test_adding_a_single_metric_to_an_all_result_keeps_every_score_and_the_provenance(judge, tmp_path, capsys):
    """QA_All wrote QA_Clarity; adding QA_Clarity later moves the All's score to QA_All_Clarity (the name it gets
    when both run together) instead of refusing, and summary.json keeps both metrics and both runs."""
    data = jsonl(tmp_path / "d.jsonl", 5)
    out = tmp_path / "out"
    assert run(capsys, "score", data, "--metrics", "QA_All", *server(judge), "--output-dir", out)[0] == 0
    first = load_from_disk(out)
    judge.reset()
    code, stdout, err = run(capsys, "score", out, "--metrics", "QA_Clarity", *server(judge), "--output-dir", out)
    assert code == 0, err
    assert judge.stats()["requests"] == 5  # the single metric only
    train = load_from_disk(out)["train"]
    assert train["QA_All_Clarity"] == first["train"]["QA_Clarity"]
    assert train["QA_Relevance"] == first["train"]["QA_Relevance"]
    assert None not in train["QA_Clarity"] and None not in train["QA_Clarity_reason"]
    assert "renamed QA_Clarity to QA_All_Clarity" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == {"QA_All", "QA_Clarity"} and summary["source_dataset"] == "d.jsonl"
    assert sum(r["requests"] for r in summary["runs"]) == 10  # both runs that produced the scores


def test_a_real_column_conflict_names_the_flag(judge, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"c{i}", "Q_Clarity": i}) + "\n" for i in range(3)))
    code, out, err = run(
        capsys, "score", data, "--metrics", "Q_Clarity", *server(judge), "--output-dir", tmp_path / "o"
    )
    assert code == 2 and "--overwrite-scores" in err and "Q_Clarity_reason" in err and "remove_columns" not in err
    args = ["--metrics", "Q_Clarity", *server(judge), "--output-dir", tmp_path / "o", "--overwrite-scores"]
    code, out, err = run(capsys, "score", data, *args)
    assert code == 0, err
    assert judge.stats()["requests"] == 3 and None not in load_from_disk(tmp_path / "o")["train"]["Q_Clarity_reason"]


def test_library_if_exists(judge, tmp_path):
    ds = Dataset.from_dict({"instruction": ["a", "b"]})
    kw = dict(model="judge", base_url=judge.base_url, cache_dir=tmp_path / "cache")
    scored = score_dataset(ds, ["Q_Clarity"], **kw)
    with pytest.raises(ConfigError, match="if_exists='overwrite'"):
        score_dataset(scored, ["Q_Clarity"], if_exists="error", **kw)
    again = score_dataset(scored, ["Q_Clarity"], **kw)
    assert again["train"]["Q_Clarity"] == scored["train"]["Q_Clarity"] and again.summary.requests == 0


# -- no mistake destroys a result ------------------------------------------------


@pytest.mark.parametrize("limit", ["0", "-1", "x"])
def test_bad_limit_is_a_usage_error_and_leaves_the_result(judge, tmp_path, capsys, limit):
    data = jsonl(tmp_path / "d.jsonl", 5)
    out = tmp_path / "out"
    assert run(capsys, "score", data, "--metrics", "Q_Clarity", *server(judge), "--output-dir", out)[0] == 0
    before = load_from_disk(out)
    with pytest.raises(SystemExit) as e:
        main(["score", str(data), "--metrics", "Q_Clarity", *server(judge), "--output-dir", str(out), "--limit", limit])
    assert e.value.code == 2 and "--limit" in capsys.readouterr().err
    assert same(out, before)


def test_a_different_result_needs_overwrite(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 5)
    other = jsonl(tmp_path / "other.jsonl", 5, prefix="other")
    out = tmp_path / "out"
    args = ["--metrics", "Q_Clarity", *server(judge), "--output-dir", out]
    assert run(capsys, "score", data, *args)[0] == 0
    before = load_from_disk(out)
    judge.reset()
    for attempt in ([other, *args], [data, *args, "--limit", "2"], [data, "--metrics", "QA_Clarity", *args[2:]]):
        code, stdout, err = run(capsys, "score", *attempt)
        assert code == 2 and "--overwrite" in err, err
        assert judge.stats()["requests"] == 0 and same(out, before)
    assert run(capsys, "score", data, *args)[0] == 0  # the same command again is not "different"
    code, stdout, err = run(capsys, "score", other, *args, "--overwrite")
    assert code == 0, err
    assert load_from_disk(out)["train"]["instruction"][0].startswith("other-0")


# -- the server: scheme, reachability, key -----------------------------------------


def test_base_url_without_scheme_writes_nothing(tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 3)
    args = score_args(data, "127.0.0.1:8000/v1", "--output-dir", tmp_path / "out", **NO_JUDGE)
    code, out, err = run(capsys, *args)
    assert code == 2 and "'http://127.0.0.1:8000/v1'" in err
    assert not (tmp_path / "out").exists()


def test_unreachable_server_stops_before_writing_and_says_so_once(tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 3)
    url = dead_url()
    args = score_args(data, url, "--retries", "1", "--no-cache", "--output-dir", tmp_path / "out", **NO_JUDGE)
    code, out, err = run(capsys, *args)
    assert code == 1
    assert err.count(f"connection refused at {url}/chat/completions") == 1, err
    assert "cached" not in err and not (tmp_path / "out").exists()


def test_unreachable_server_in_the_library(tmp_path):
    ds = Dataset.from_dict({"instruction": ["a", "b"]})
    with pytest.raises(ServerUnreachableError, match="connection refused at http://127.0.0.1"):
        fast = Settings(model="m", base_url=dead_url(), backoff_base=0.001)
        score_dataset(ds, ["Q_Clarity"], settings=fast, cache_dir=tmp_path / "c")


def test_no_key_for_openai_is_an_error_before_sending(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    data = jsonl(tmp_path / "d.jsonl", 2)
    code, out, err = run(
        capsys, "score", data, "--metrics", "Q_Clarity", "--model", "gpt-4.1-nano", "--output-dir", tmp_path / "o"
    )
    assert code == 2 and "OPENAI_API_KEY" in err and "--base-url" in err
    assert not (tmp_path / "o").exists()


def test_stop_message_under_no_cache_promises_no_cache(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 4)
    args = ["--metrics", "Q_Clarity", *server(judge), "--max-total-tokens", "1", "--no-cache", "--concurrency", "1"]
    code, out, err = run(capsys, "score", data, *args, "--output-dir", tmp_path / "o")
    assert code == 1 and "max_total_tokens" in err and "cached" not in err and "nothing of this run was kept" in err


# -- input files ---------------------------------------------------------------------


def test_empty_and_malformed_input_files_are_usage_errors(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "a"}\n{"instruction": "b",}\n')
    base = ["--metrics", "Q_Clarity", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    code, out, err = run(capsys, "score", empty, *base)
    assert code == 2 and f"{empty} is empty" in err
    code, out, err = run(capsys, "score", bad, *base)
    assert code == 2 and f"{bad}, line 2: not valid JSON" in err


# -- what DATASET names: a path is never looked up on the Hub -----------------------------


@pytest.mark.parametrize("spec", ["nonexist.jsonl", "sub/nonexist.parquet", "nonexist.CSV", "a/b/c", "./nonexist"])
def test_a_missing_local_path_is_a_usage_error_at_once(spec, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "score", spec, "--metrics", "QA_All", "--model", "m", "--base-url", dead_url())
    assert code == 2 and f"{spec}: no such file or folder" in err, err
    assert "Hub" not in err


def test_what_looks_like_a_path():
    from hf_judge.cli.inputs import looks_like_path

    for spec in ("d.jsonl", "d.json", "d.parquet", "d.csv", "d.arrow", "./d", "../d", "/d", "~/d", "a/b/c"):
        assert looks_like_path(spec), spec
    for spec in ("gsm8k", "openai/gsm8k", "me/data.v2", "me/my-data_1"):
        assert not looks_like_path(spec), spec


@pytest.mark.parametrize("files", [[], ["notes.md"], ["blob.bin", "sub/more.bin"]])
def test_a_folder_without_data_files_is_a_usage_error(files, tmp_path, capsys):
    folder = tmp_path / "emptydir"
    folder.mkdir()
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"\x00\x01 not data")
    code, out, err = run(capsys, "score", folder, "--metrics", "QA_All", "--model", "m", "--base-url", dead_url())
    assert code == 2, err
    assert (
        f"{folder}: " in err and "data files (.jsonl, .json, .parquet, .csv, .arrow)" in err and "save_to_disk" in err
    )
    assert ("the folder is empty" in err) == (not files)


def test_an_arrow_file_is_scored(judge, tmp_path, capsys):
    saved = tmp_path / "saved"
    Dataset.from_dict({"instruction": ["a?", "b?", "c?"]}).save_to_disk(str(saved))
    arrow = next(saved.glob("*.arrow"))
    code, out, err = run(capsys, "score", arrow, "--metrics", "Q_Clarity", *server(judge), "-o", tmp_path / "out")
    assert code == 0, err
    assert load_from_disk(tmp_path / "out")["train"]["instruction"] == ["a?", "b?", "c?"]


# -- filter over an earlier filtered result ------------------------------------------------


def test_filter_with_other_thresholds_or_fewer_rows_needs_overwrite(judge, tmp_path, capsys):
    from hf_judge.results.output import read_manifest

    data = jsonl(tmp_path / "d.jsonl", 20)
    judged, best = tmp_path / "d-judged", tmp_path / "best"
    assert run(capsys, "score", data, "--metrics", "QA_Correctness", *server(judge), "-o", judged)[0] == 0
    scores = load_from_disk(judged)["train"]["QA_Correctness"]
    lo, hi = min(scores), max(scores)
    assert lo < hi and None not in scores
    loose, strict = ["--min", f"QA_Correctness={lo}"], ["--min", f"QA_Correctness={hi}"]

    code, out, err = run(capsys, "filter", judged, *loose, "-o", best)
    assert code == 0 and f"saved to {best} (train: 20 rows)" in out, err
    assert read_manifest(best)["filters"] == {"min": {"QA_Correctness": float(lo)}, "max": {}, "keep_missing": False}
    before = load_from_disk(best)
    assert run(capsys, "filter", judged, *loose, "-o", best)[0] == 0  # the same filter again: a rerun
    code, out, err = run(capsys, "filter", judged, *strict, "-o", best)
    assert code == 2 and f"the rows that pass QA_Correctness >= {lo:g}" in err and "--overwrite" in err, err
    assert same(best, before)
    code, out, err = run(capsys, "filter", judged, *loose, "--limit", "5", "-o", best)  # same filter, fewer rows
    assert code == 2 and "20 rows of split 'train', and this result has 5" in err and "--overwrite" in err, err
    assert same(best, before)

    code, out, err = run(capsys, "filter", judged, *strict, "-o", best, "--overwrite")
    assert code == 0 and f"saved to {best} (train: {scores.count(hi)} rows)" in out, err
    assert read_manifest(best)["filters"]["min"] == {"QA_Correctness": float(hi)}
    kept = load_from_disk(best)
    code, out, err = run(capsys, "filter", judged, *loose, "-o", best)  # more rows, but another filter's
    assert code == 2 and f"QA_Correctness >= {hi:g}" in err, err
    assert same(best, kept)


def test_recipe_filters_again_are_a_rerun_and_other_filters_need_overwrite(judge, tmp_path, capsys):
    data = jsonl(tmp_path / "d.jsonl", 10)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("metrics: [QA_Correctness]\nmodel: judge\nfilters:\n  min:\n    QA_Correctness: 5\n")
    args = ["run", recipe, "--dataset", data, "--base-url", judge.base_url, "--output-dir", tmp_path / "out"]
    assert run(capsys, *args)[0] == 0
    before = load_from_disk(tmp_path / "out-filtered")
    assert run(capsys, *args)[0] == 0
    judge.reset()
    recipe.write_text("metrics: [QA_Correctness]\nmodel: judge\nfilters:\n  min:\n    QA_Correctness: 9\n")
    code, out, err = run(capsys, *args)
    assert code == 2 and "out-filtered already holds the rows that pass QA_Correctness >= 5" in err, err
    assert judge.stats()["requests"] == 0 and same(tmp_path / "out-filtered", before)


# -- help and summary say what is true -------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "default", "not_default"),
    [
        ("score", "(default: <name>-judged;", "<name>-filtered"),
        ("filter", "(default: <name>-filtered)", "-judged"),
        ("run", "(default: <name>-judged;", "<name>-filtered"),
    ],
)
def test_each_command_shows_its_own_output_default(command, default, not_default, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--output-dir OUTPUT_DIR")
    help_o = text[start : text.index("--push-to-hub", start)]
    assert default in help_o and not_default not in help_o, help_o


def test_duplicates_within_a_run_are_not_reported_as_cache_hits(judge, tmp_path, capsys):
    data = tmp_path / "dup.jsonl"
    with data.open("w") as f:
        for i in range(1000):
            f.write(json.dumps({"instruction": f"dup-{i % 20}: what is {i % 20}*2?"}) + "\n")
    code, out, err = run(capsys, "score", data, "--metrics", "Q_Clarity", *server(judge), "-o", tmp_path / "out")
    assert code == 0, err
    assert judge.stats()["requests"] == 20
    assert "requests       20 (0 retries)" in out
    assert "duplicates     980 requests identical to another of this run: sent once, reply reused" in out
    assert "from cache" not in out and "reply store" not in out, out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["cache_hits"], summary["shared"]) == (0, 980)


def test_a_key_on_the_command_line_is_refused_with_the_fix_and_never_repeated(judge, tmp_path, capfd):
    """``--api-key KEY`` was read as an abbreviation of ``--api-key-env`` ("that environment variable is not set"):
    it is refused with the fix, as is the key given to ``--api-key-env``; neither repeats the key, nor sends."""
    from helpers import run_cli

    data = jsonl(tmp_path / "in.jsonl", 2)
    secret = "sk-proj-OnTheCommandLine-8c1d2e3f4a"
    for flags in (["--api-key", secret], [f"--api-key={secret}"]):
        code, out, err = run_cli(capfd, *score_args(data, judge, *flags, columns=()))
        assert code == 2 and "takes no key on the command line" in err and "--api-key-env JUDGE_KEY" in err, err
        assert secret not in out + err
    code, out, err = run_cli(capfd, *score_args(data, judge, "--api-key-env", secret, columns=()))
    assert code == 2 and "takes the name of the environment variable that holds the key, not the key" in err, err
    assert secret not in out + err
    assert judge.stats()["requests"] == 0
