"""One clear message per bad input, naming the file, the line where there is one, and the fix: a malformed JSON
line, a latin-1 file, a corrupt Parquet file (local or on the Hub), a recipe or recipe key misspelt, a labels file
that misspells its score, labels a row as `true`, holds a word among numbers or a 400-digit number, and a 1-10
score compared with true/false labels."""

from __future__ import annotations

import json
import logging
import re

import pytest
from datasets import Dataset, DatasetDict
from helpers import run_cli

from hf_judge import agreement, read_labels
from hf_judge.cli.inputs import load_input
from hf_judge.cli.recipes import load_recipe
from hf_judge.errors import ConfigError

NOWHERE = ["--metrics", "Q_Clarity", "--column", "instruction=q", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]


def _errors(err: str) -> list[str]:
    """The lines of stderr that report a problem (hf-judge's and any library's)."""
    return [line for line in err.splitlines() if line.strip() and "Saving the dataset" not in line]


# -- item 8: messages -------------------------------------------------------------------------------------------
@pytest.fixture
def library_errors(caplog):
    """What datasets logs at ERROR: its handler took the stderr of the test session when it was imported,
    which capfd does not see, so its records are caught where they go (datasets' logger does not propagate)."""
    root = logging.getLogger("datasets")
    root.addHandler(caplog.handler)
    yield lambda: [r.getMessage() for r in caplog.records if r.name.startswith("datasets") and r.levelno >= 40]
    root.removeHandler(caplog.handler)


def test_a_malformed_json_line_gets_one_message_naming_its_line(tmp_path, capfd, library_errors):
    path = tmp_path / "data.jsonl"
    path.write_text('{"q": "a"}\n{"q": "b"}\n{"q": "c"}\n{"q": "d", oops}\n{"q": "e"}\n')
    code, _, err = run_cli(capfd, "score", path, *NOWHERE)
    assert code == 2
    lines = _errors(err)
    assert len(lines) == 1, err
    # one line number, the file's: not also the JSON parser's "line 1" of the one line it was given (issue 40)
    assert lines[0] == (
        f"hf-judge: error: {path}, line 4: not valid JSON (Expecting property name enclosed in double quotes at "
        "column 12). Each line must be one JSON object."
    )
    assert library_errors() == []  # datasets' own "Failed to load JSON ... in row 3" is not printed beside it


def test_a_malformed_labels_line_names_one_line_the_files(tmp_path):
    """A labels file's bad line: the file's line number, once, and the column in it (issue 40: the parser's own
    "line 1" was quoted beside the file's)."""
    path = tmp_path / "labels.jsonl"
    first = {"split": "train", "row": 0, "score": "QA_Clarity", "label": 1}
    path.write_text(json.dumps(first) + '\n{"split": "train", "row": 1, "score": "QA_Clarity", "label": 2\n')
    with pytest.raises(ConfigError) as e:
        read_labels(path)
    assert str(e.value).startswith(f"labels {path}, line 2: not JSON (Expecting ',' delimiter at column 63); ")
    assert "line 1" not in str(e.value)


def test_a_misspelt_recipe_name_or_key_gets_a_did_you_mean(tmp_path):
    with pytest.raises(ConfigError, match=r"named 'qualty'; did you mean 'quality'\? Built-in recipes: "):
        load_recipe("qualty")
    path = tmp_path / "r.yaml"
    path.write_text("metrics: [QA_All, {name: QA_Clarity, parmas: {}}]\nmodle: m\ndataset: {nmae: x, split: t}\n")
    with pytest.raises(ConfigError) as e:
        load_recipe(path)
    message = str(e.value)
    assert "unknown key 'modle'" in message
    assert message.endswith(
        "Did you mean: 'dataset.nmae' -> 'name', 'metrics.1.MetricItem.parmas' -> 'params', 'modle' -> 'model'?"
    )


@pytest.fixture
def result(tmp_path):
    """A saved result: a 1-10 score, a verdict column, 8 rows."""
    path = tmp_path / "result"
    ds = Dataset.from_dict({"QA_Correctness": [1, 5, 9, 3, 7, 8, 2, 10], "Binary": [False, True] * 4})
    DatasetDict({"train": ds}).save_to_disk(str(path))
    return path


def _labels(tmp_path, rows: list[dict], name: str = "labels.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_labels_file_that_misspells_the_score_is_told_the_real_column(result, tmp_path, capfd):
    path = _labels(tmp_path, [{"split": "train", "row": i, "score": "QA_Corectness", "label": i} for i in range(4)])
    for command in ("agreement", "calibrate"):
        code, _, err = run_cli(capfd, command, result, "--score", "QA_Correctness", "--labels", path)
        assert code == 2
        assert "the labels name score 'QA_Corectness', which is no column of the result: did you mean " in err
        assert "'QA_Correctness'? Fix the labels file's \"score\"" in err and "pass --score QA_Corectness" not in err
    # labels about another real column still say which --score they are about
    other = _labels(tmp_path, [{"split": "train", "row": 0, "score": "Binary", "label": True}], "other.jsonl")
    code, _, err = run_cli(capfd, "agreement", result, "--score", "QA_Correctness", "--labels", other)
    assert code == 2 and "the labels are about Binary, not 'QA_Correctness': pass --score Binary" in err


def test_a_word_among_numeric_labels_is_named_with_its_file_and_line(result, tmp_path, capfd):
    rows = [{"split": "train", "row": 0, "label": 2}, {"split": "train", "row": 1, "label": 5}]
    path = _labels(tmp_path, [*rows, {"split": "train", "row": 2, "label": "nine"}])
    code, _, err = run_cli(capfd, "agreement", result, "--score", "QA_Correctness", "--labels", path)
    assert code == 2
    assert (
        f"hf-judge: error: labels {path}, line 3: label 'nine' is not a number, but the labels are numbers "
        "(line 1: 2); write a number there"
    ) in err
    # preferences beside numbers (1, 2 and "tie"), and numbers written as text, are no such mistake
    ok = _labels(
        tmp_path, [*rows, {"split": "train", "row": 2, "label": "tie"}, {"split": "t", "row": 3, "label": "7"}]
    )
    assert [r["label"] for r in read_labels(ok)] == [2, 5, "tie", "7"]


def test_a_rating_against_true_false_labels_is_no_numeric_pair(tmp_path, capfd):
    ds = Dataset.from_dict({"QA_Correctness": [2, 9, 8, 3, 7, 10], "gold": [False, True, True, False, False, True]})
    r = agreement(ds, "QA_Correctness", "gold", resamples=0)
    assert "mae" not in r.figures and r.note is not None
    text = str(r)
    assert "Agreement of QA_Correctness with gold (a rating against true/false labels)" in text
    assert "QA_Correctness is a rating (2-10) and gold holds true/false labels: they share no scale, so no MAE" in text
    assert "--score-threshold 6" in text
    # the cut it points to: the rating read as verdicts
    cut = agreement(ds, "QA_Correctness", "gold", resamples=0, score_threshold=7)
    assert cut.kind == "binary" and cut.score == "QA_Correctness >= 7" and cut.figures["accuracy"] == 5 / 6
    # a probability against the same labels stays a calibration, MAE (Brier-like) and all
    p = Dataset.from_dict({"S_p_positive": [0.1, 0.9, 0.8, 0.3, 0.6, 0.95], "gold": ds["gold"]})
    assert agreement(p, "S_p_positive", "gold", resamples=0).figures["mae"] is not None
    path = tmp_path / "d.jsonl"
    ds.to_json(path)
    code, out, err = run_cli(
        capfd, "agreement", path, "--score", "QA_Correctness", "--label", "gold", "--resamples", "0"
    )
    assert code == 0, err
    assert "note: QA_Correctness is a rating" in out and "\nmae" not in out
    code, out, err = run_cli(
        capfd, "agreement", path, "--score", "QA_Correctness", "--label", "gold", "--score-threshold", "7"
    )
    assert code == 0, err
    assert "Agreement of QA_Correctness >= 7 with gold (binary, split train)" in out
    assert re.search(r"^accuracy\s+0\.833\b", out, flags=re.M)


def test_true_false_verdicts_against_ratings_point_to_label_threshold():
    ds = Dataset.from_dict({"Binary": [True, False, True], "rating": [5, 1, 4]})
    with pytest.raises(ConfigError, match=r"ratings against a judge's verdicts need a cut: label_threshold= "):
        agreement(ds, "Binary", "rating", resamples=0)


# -- item 23: raw exceptions become messages ----------------------------------------------------------------------
def test_a_labels_row_of_true_is_no_row_number(tmp_path):
    path = _labels(tmp_path, [{"split": "train", "row": True, "label": 2}])
    with pytest.raises(ConfigError, match=rf"^{path}, line 1: row true is true/false, not a row number; "):
        read_labels(path)


def test_a_400_digit_label_is_refused_naming_its_line(result, tmp_path, capfd):
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"split": "train", "row": 0, "label": 3}\n{"split": "train", "row": 1, "label": ' + "9" * 400 + "}\n"
    )
    code, _, err = run_cli(capfd, "agreement", result, "--score", "QA_Correctness", "--labels", path)
    assert code == 2
    assert f"hf-judge: error: {path}, line 2: label 999999999999... (400 digits) is too large" in err


@pytest.mark.parametrize(("name", "content", "line", "column"), [
    ("latin.jsonl", b'{"q": "ok"}\n{"q": "caf\xe9 cr\xe8me"}\n', 2, 11),
    ("latin.csv", b"q\nok\ncaf\xe9\n", 3, 4),
])  # fmt: skip
def test_a_latin1_file_is_named_with_its_line_and_the_iconv_command(
    tmp_path, capfd, library_errors, name, content, line, column
):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run_cli(capfd, "score", path, *NOWHERE)
    assert code == 2
    lines = _errors(err)
    assert len(lines) == 1 and library_errors() == [], err
    stem, suffix = name.split(".")
    assert lines[0] == (
        f"hf-judge: error: {path}, line {line}: not UTF-8 (byte 0xe9 at column {column}; b'\\xe9' is 'é' in "
        f"latin-1). Re-encode the file as UTF-8: iconv -f latin1 -t utf-8 {path} > {tmp_path / stem}.utf8.{suffix} "
        "(if it was written in another encoding, name it after -f, e.g. cp1252)"
    )


def test_a_corrupt_parquet_file_in_a_folder_is_named(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ConfigError) as e:
        load_input(str(folder))
    assert str(e.value).startswith(f"{folder}: cannot read {folder / 'train.parquet'} (ArrowInvalid: ")
    assert str(e.value).endswith(
        "the file is damaged or not Parquet: write it again (e.g. pyarrow.parquet.write_table), or remove it"
    )


def test_a_corrupt_parquet_file_on_the_hub_is_named_by_its_path_in_the_repo(hub, capfd, library_errors):
    import huggingface_hub

    api = huggingface_hub.HfApi()
    api.create_repo("tester/corrupt-parquet", repo_type="dataset", exist_ok=True)
    api.upload_file(
        path_or_fileobj=b"PAR1 this is not a parquet file",
        path_in_repo="data/train-00000.parquet",
        repo_id="tester/corrupt-parquet",
        repo_type="dataset",
    )
    code, _, err = run_cli(capfd, "score", "tester/corrupt-parquet", *NOWHERE)
    assert code == 2
    lines = _errors(err)
    assert len(lines) == 1 and library_errors() == [], err
    assert lines[0].startswith(
        "hf-judge: error: tester/corrupt-parquet: cannot read data/train-00000.parquet (ArrowInvalid: "
    )
    assert "the file is damaged or not Parquet" in lines[0]
