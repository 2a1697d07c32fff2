"""The first hour with hf-judge (issue 24): the README's first commands, and what a run prints and records.

CLI runs are in-process (``run_cli``, stderr captured: not a terminal), against the loopback judge server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import EXAMPLE_ROWS, run_cli

from hf_judge.cli.inputs import example_dataset_path

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _judge(judge) -> list[str]:
    return ["--model", "judge", "--base-url", judge.base_url, "--retries", "0"]


# -- the example dataset is known by its content, not by where it is installed -----------------------


def test_the_example_from_another_install_is_the_same_dataset(judge, tmp_path, capfd, monkeypatch):
    """`pip install .` then `pip install -e .`: the example moves from site-packages into the checkout. The
    second `hf-judge score` over it reuses the first's replies and writes over its own example-judged/."""
    copies = []
    for where in ("site-packages", "checkout"):
        (tmp_path / where).mkdir()
        copies.append(shutil.copy(example_dataset_path(), tmp_path / where / "example.jsonl"))
    (tmp_path / "user").mkdir()
    monkeypatch.chdir(tmp_path / "user")
    code, out, err = run_cli(capfd, "score", copies[0], "--metrics", "QA_Clarity", *_judge(judge))
    assert code == 0, err
    assert judge.stats()["requests"] == EXAMPLE_ROWS
    code, out, err = run_cli(capfd, "score", copies[1], "--metrics", "QA_Clarity", *_judge(judge))
    assert code == 0, err
    assert "another" not in err and "already holds" not in err
    assert judge.stats()["requests"] == EXAMPLE_ROWS  # nothing sent again
    assert "saved to example-judged" in out and (tmp_path / "user" / "example-judged").is_dir()


def test_other_content_at_the_same_path_is_another_dataset(judge, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"instruction": "a", "output": "b"}) + "\n")
    assert run_cli(capfd, "score", data, "--metrics", "QA_Clarity", *_judge(judge))[0] == 0
    data.write_text(json.dumps({"instruction": "other", "output": "rows"}) + "\n")
    code, out, err = run_cli(capfd, "score", data, "--metrics", "QA_Clarity", *_judge(judge))
    assert code == 2 and "already holds the result of d.jsonl sha256:" in err and "--overwrite" in err


def test_a_result_saved_with_a_path_as_its_source_is_still_the_same_dataset(judge, tmp_path, capfd, monkeypatch):
    """Results saved before sources were contents name the input by its absolute path: the same command
    again over the same file needs no --overwrite."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"instruction": "a", "output": "b"}) + "\n")
    assert run_cli(capfd, "score", data, "--metrics", "QA_Clarity", *_judge(judge))[0] == 0
    manifest = tmp_path / "d-judged" / "hf_judge.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "source": str(data.resolve())}))
    code, out, err = run_cli(capfd, "score", data, "--metrics", "QA_Clarity", *_judge(judge))
    assert code == 0, err


def test_a_checkout_ignores_the_example_result():
    """`hf-judge score --example` run in a checkout leaves example-judged/ there: git does not see it."""
    lines = (CHECKOUT / ".gitignore").read_text().split()
    assert "/example-judged/" in lines


# -- which column was judged as which variable ----------------------------------------------------------


def test_a_plain_run_records_its_column_mapping_in_summary_and_card(judge, hub, tmp_path, capfd, monkeypatch):
    """No --column given: the identity mapping is recorded all the same; a --column is recorded as given."""
    from huggingface_hub import hf_hub_download

    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capfd, "score", "--example", "--metrics", "QA_Clarity", *_judge(judge),
                             "--output-dir", "plain", "--push-to-hub", "tester/first-hour-plain")  # fmt: skip
    assert code == 0, err
    identity = {"instruction": "instruction", "output": "output"}
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["column_mapping"] == identity
    card = Path(hf_hub_download("tester/first-hour-plain", "README.md", repo_type="dataset")).read_text()
    assert "**Columns judged:** `instruction` as `instruction`, `output` as `output`" in card

    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    code, out, err = run_cli(capfd, "score", data, "--metrics", "QA_Clarity", *_judge(judge), "--column",
                             "instruction=question", "--column", "output=answer", "--output-dir", "mapped")  # fmt: skip
    assert code == 0, err
    summary = json.loads((tmp_path / "mapped" / "summary.json").read_text())
    assert summary["column_mapping"] == {"instruction": "question", "output": "answer"}


# -- errors: one line each ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["score", "d.jsonl", "--limit", "0"], "hf-judge score: error: argument -n/--limit: must be 1 or more, got 0"),
        (["score", "d.jsonl", "--temperature", "x"], "argument --temperature: invalid float value: 'x'"),
        (["agreement", "d.jsonl", "--score", "s"], "one of the arguments --label --labels is required"),
        (["score", "d.jsonl", "--concurency", "3"], "did you mean --concurrency"),
        (["sample-for-review", "r", "--score", "s", "-n", "5"], "arguments: -n 5 (did you mean --n for -n?)"),
    ],
)
def test_a_bad_value_is_one_line_not_the_usage(args, message, capfd):
    code, out, err = run_cli(capfd, *args)
    assert code == 2 and message in err
    assert err.count("\n") == 1 and "usage:" not in err, err


# -- agreement: an outlier is one more value, not a scale of thousands; inf is an error ---------------------


def _agree(scores, labels, **kw):
    from datasets import Dataset

    from hf_judge import agreement

    return agreement(Dataset.from_dict({"s": scores, "h": labels}), "s", "h", **kw)


@pytest.mark.parametrize("outlier", [300, 5000, 100_000])
def test_one_outlier_score_adds_one_row_to_the_confusion_matrix(outlier):
    scores, labels = [i % 10 for i in range(200)], [(i * 7) % 10 for i in range(200)]
    scores[3] = outlier
    r = _agree(scores, labels, resamples=20)
    assert r.confusion["labels"] == [*range(10), outlier]
    assert len(r.to_json()) < 20_000
    if outlier == 300:  # the same kappa as over the whole range: it weighs by the values' distance
        from hf_judge.analysis import stats

        whole = stats.cohen_kappa(np.array(labels), np.array(scores), list(range(outlier + 1)), quadratic=True)
        assert r.figures["quadratic_kappa"] == pytest.approx(whole)


def test_a_measurement_is_no_rating_scale_no_matrix_but_correlations():
    r = _agree(list(range(500)), list(range(500)), resamples=0)
    assert r.confusion is None and "quadratic_kappa" not in r.figures and r.figures["spearman"] == 1.0


@pytest.mark.parametrize(
    ("scores", "labels", "column", "shown"),
    [
        ([1.0, 2.0, float("inf"), 4.0], [3, 3, 3, 3], "s", "['inf']"),
        ([1.0, 2.0, float("-inf"), 4.0], [3, 3, 3, 3], "s", "['-inf']"),
        ([1, 2, 3, 4], ["3", "nan", "3", "3"], "h", "['nan']"),  # labels as text: "nan" is no label
    ],
)
def test_a_value_that_is_not_a_finite_number_is_a_clear_error(scores, labels, column, shown, tmp_path, capfd):
    from datasets import Dataset

    path = tmp_path / "d.parquet"
    Dataset.from_dict({"s": scores, "h": labels}).to_parquet(path)
    code, out, err = run_cli(capfd, "agreement", path, "--score", "s", "--label", "h", "--resamples", "0")
    assert code == 2 and f"column {column!r} holds 1 value that is not a finite number ({shown})" in err, err
    assert "Traceback" not in err and "OverflowError" not in err


# -- what a run prints in a log: no bars' carriage returns, no library chatter --------------------------


def test_a_run_logged_to_a_file_prints_plain_lines_and_no_library_noise(judge, hub, tmp_path, capfd, monkeypatch):
    """stderr captured (a file, not a terminal), as in CI or `2> log`: the progress is a few plain lines, and
    neither datasets' nor huggingface_hub's bars or warnings that say nothing to the user show."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capfd, "score", "--example", "--metrics", "QA_Clarity", *_judge(judge),
                             "--push-to-hub", "tester/first-hour-log")  # fmt: skip
    assert code == 0, err
    assert "\r" not in err, err
    assert "num_proc" not in err and "metadata block" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("Scoring train:")]
    assert 1 <= len(lines) <= 2 and lines[-1].startswith(f"Scoring train: {EXAMPLE_ROWS}/{EXAMPLE_ROWS} rows"), err


def test_plain_progress_is_one_line_per_interval_of_the_clock():
    """80 reports 0.5 s apart on an injected clock (40 s): a line at the first, one each LOG_INTERVAL (5 s)
    after the last line, one at the end: 9 lines, not 80 frames."""
    import io

    from hf_judge.progress import LOG_INTERVAL, Progress, ProgressBar

    assert LOG_INTERVAL == 5.0
    now = [0.0]
    log = io.StringIO()
    bar = ProgressBar("train", 80, stream=log, clock=lambda: now[0])
    assert not bar.disabled
    for i in range(1, 81):
        now[0] = i * 0.5
        bar(Progress("train", i - 1, 80, 4, 0, i, now[0]))
    bar.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 9 and "\r" not in log.getvalue()  # at 0.5, 5.5, ..., 35.5 s, and the close
    assert lines[1].startswith("Scoring train: 10/80 rows (12%)") and lines[-1].startswith("Scoring train: 79/80")


def test_a_folder_whose_readme_has_no_metadata_loads_without_a_warning(tmp_path, capfd):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "data.jsonl").write_text(json.dumps({"instruction": "a", "output": "b"}) + "\n")
    (folder / "README.md").write_text("# My data\n\nA README without a YAML block.\n")
    code, out, err = run_cli(capfd, "score", folder, "--metrics", "QA_Clarity", "--model", "m", "--dry-run")
    assert code == 0, err
    assert "metadata block" not in err and "\r" not in err, err
