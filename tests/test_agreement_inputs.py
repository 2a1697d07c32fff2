"""The agreement report on the label files people write by hand: JSONL with mixed types, numbers written as text,
empty columns, boolean labels next to 1-10 scores; and the CLI on them (exit codes, no crash)."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset, load_dataset
from helpers import run_cli

from hf_judge import ConfigError, agreement

WINNERS = ["1", "2", "tie", "1", "2", "1"]
PREFERRED = [1, 2, "tie", 2, 2, 1]  # as a person writes them in JSONL: numbers, and one string


def _jsonl(tmp_path, rows: list[dict]) -> str:
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_pairwise_labels_of_mixed_json_types(tmp_path):
    """1, 2 and "tie" in one JSONL column load as a Json feature, stored as JSON text ('"tie"')."""
    path = _jsonl(
        tmp_path, [{"Comparative_winner": w, "preferred": p} for w, p in zip(WINNERS, PREFERRED, strict=True)]
    )
    ds = load_dataset("json", data_files=path, split="train")
    r = agreement(ds, score="Comparative", label="preferred", resamples=0)
    assert r.kind == "pairwise" and r.pairs == 6
    assert r.figures["agreement"] == pytest.approx(5 / 6) and r.figures["label_tie_rate"] == pytest.approx(1 / 6)


def test_numbers_written_as_text_are_numbers():
    ds = Dataset.from_dict({"QA_Correctness": [3, 7, 9, 5], "human": ["2", " 7", "10", None]})
    r = agreement(ds, score="QA_Correctness", label="human", resamples=0)
    assert r.pairs == 3 and r.figures["mae"] == pytest.approx(2 / 3) and r.figures["spearman"] == pytest.approx(1)


def test_text_labels_next_to_scores_name_the_fix():
    ds = Dataset.from_dict({"QA_Correctness": [3, 7], "human": ["bad", "good"]})
    bad = r"'human' holds 2 values that are not finite numbers \(\['bad', 'good'\]\).*write the labels"
    with pytest.raises(ConfigError, match=bad):
        agreement(ds, score="QA_Correctness", label="human")


def test_boolean_labels_next_to_integer_scores_get_no_kappa_or_matrix():
    """An 11 x 11 "confusion matrix" of 1-10 scores against 0/1 labels, and its kappa, would be noise."""
    ds = Dataset.from_dict({"QA_Correctness": [2, 9, 8, 3, 7], "gold": [False, True, True, False, False]})
    r = agreement(ds, score="QA_Correctness", label="gold", resamples=0)
    assert r.kind == "numeric" and r.confusion is None and "quadratic_kappa" not in r.figures
    assert [(b["score"], b["label_mean"]) for b in r.calibration] == [(2, 0), (3, 0), (7, 0), (8, 1), (9, 1)]


def test_an_empty_label_column_is_an_empty_report(tmp_path, capfd):
    """A label column with no value at all (a JSONL of nulls has no type) compares nothing, and says so."""
    ds = Dataset.from_dict({"QA_Correctness": [3, 7, 9], "human": [None, None, None]})
    r = agreement(ds, score="QA_Correctness", label="human")
    assert r.pairs == 0 and r.missing == {"score": 0, "label": 3, "both": 0} and "nothing to compare" in str(r)
    # the CLI prints the empty report and the text histograms (an empty one included) instead of crashing,
    # and exits 1 (a script must notice), saying what to pass
    path = _jsonl(tmp_path, [{"QA_Correctness": v, "human": None} for v in (3, 7, 9)])
    code, out, err = run_cli(capfd, "agreement", path, "--score", "QA_Correctness", "--label", "human")
    assert code == 1, err
    assert "nothing to compare" in out and "(no values)" in out
    last = err.splitlines()[-1]
    assert last.startswith("hf-judge: error: nothing to compare") and "pass a --label column" in last


def test_pairwise_judges_of_a_panel_by_their_metric_name():
    """`--score Comparative__judge_a` reads that judge's winner, its position bias from its own disagree column;
    a winner column whose values all look like verdicts ("1") is still a winner."""
    ds = Dataset.from_dict(
        {
            "Comparative_winner__judge_a": ["1", "1", "1", "1"],
            "Comparative_disagree__judge_a": [True, False, False, False],
            "Comparative_winner__judge_b": ["1", "2", "1", "tie"],
        }
    )
    r = agreement(ds, score="Comparative__judge_a", label="Comparative__judge_b", resamples=0)
    assert (r.score, r.label, r.kind) == ("Comparative_winner__judge_a", "Comparative_winner__judge_b", "pairwise")
    assert r.figures["agreement"] == 0.5 and r.figures["position_bias_rate"] == 0.25


def test_no_resamples_no_interval_column():
    r = agreement(Dataset.from_dict({"s": [1, 2, 3], "h": [1, 3, 2]}), score="s", label="h", resamples=0)
    assert "interval" not in str(r) and str(r).splitlines()[3].rstrip() == "figure           value"


def test_kind_binary_on_a_score_column_does_not_suggest_positive():
    ds = Dataset.from_dict({"QA_Correctness": [3, 7, 9], "gold": [False, True, True]})
    with pytest.raises(ConfigError, match=r"not a judge's verdicts.*leave out kind=binary") as e:
        agreement(ds, score="QA_Correctness", label="gold", kind="binary")
    assert "positive" not in str(e.value)


def test_score_agreement_flag_with_a_missing_file_says_where_reports_come_from(capfd, tmp_path):
    code, _, err = run_cli(capfd, "score", "--example", "--model", "m", "--agreement", tmp_path / "nope.json")
    assert code == 2 and "nope.json (No such file or directory)" in err and "hf-judge agreement ... --out FILE" in err
