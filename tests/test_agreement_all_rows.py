"""``agreement`` counts failures too: beside the figures on the compared rows, the agreement over ALL labelled
rows, where a row the judge did not decide (a null score, an errors-split row) counts as not agreeing, with its
bootstrap interval, the coverage and the failures by error kind (``stats.over_all_rows``, the leaderboard's rule)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import Dataset, DatasetDict
from helpers import run_cli
from sklearn import metrics

from hf_judge.analysis.agreement import AgreementReport, agreement
from hf_judge.analysis.stats import over_all_rows
from hf_judge.results.errors_split import errors_dataset

# 10 labelled rows (+1 unlabelled): the judge decides 7, fails 3 (2 http_500, 1 invalid_json); of the 7 it
# gets 6 right, so: compared 6/7, over all rows 6/10
WINNERS = ["1", "2", "1", None, "2", "tie", None, "1", None, "2", "1"]
LABELS = ["1", "2", "1", "2", "2", "tie", "1", "2", "1", "2", None]
FAILED = {3: "http_500", 6: "http_500", 8: "invalid_json", 10: "http_500"}


def _result():
    errors = [
        {"split": "train", "row": r, "metric": "Comparative", "kind": k, "message": "m", "raw": None, "attempts": 3}
        for r, k in FAILED.items()
    ]
    train = {"Comparative_winner": WINNERS, "preferred": LABELS, "row_id": list(range(len(WINNERS)))}
    return DatasetDict({"train": Dataset.from_dict(train), "errors": errors_dataset(errors)})


def test_a_row_the_judge_did_not_decide_counts_as_not_agreeing_over_all_labelled_rows():
    r = agreement(_result(), "Comparative", "preferred", resamples=500, seed=1)
    assert r.pairs == 7 and r.figures["agreement"] == pytest.approx(6 / 7)  # today's figure, compared rows
    a = r.all_rows
    assert (a["rows"], a["decided"], a["coverage"]) == (10, 7, 0.7)
    assert a["figures"]["agreement"] == pytest.approx(6 / 10)
    assert a["failures"] == {"http_500": 2, "invalid_json": 1}  # row 10 is unlabelled: not counted
    # kappa: "undecided" is one more value of the judge's, which no label has
    truth = [v for v in LABELS if v is not None]
    pred = [w if w is not None else "undecided" for w, lab in zip(WINNERS, LABELS, strict=True) if lab is not None]
    assert a["figures"]["cohen_kappa"] == pytest.approx(metrics.cohen_kappa_score(truth, pred))
    # the interval: the bootstrap of the 0/1 agreement over the 10 rows, as stats.resample_rows draws them
    agree = np.array([t == p for t, p in zip(truth, pred, strict=True)], dtype=float)
    idx = np.random.default_rng(1).integers(0, 10, (500, 10))
    assert a["intervals"]["agreement"] == pytest.approx(list(np.quantile(agree[idx].mean(1), [0.025, 0.975])))
    # one rule: the leaderboard calls over_all_rows with the same rows and gets the same figures
    same = over_all_rows(truth, [None if p == "undecided" else p for p in pred], "pairwise", resamples=500, seed=1)
    assert same["figures"] == a["figures"] and same["intervals"] == a["intervals"]
    text = str(r)
    assert "over all 10 labelled rows" in text and "agreement 0.600" in text and "coverage 70.0%" in text
    assert "http_500 2, invalid_json 1" in text and "coverage 70.0%" in r.to_markdown()
    back = AgreementReport.from_dict(json.loads(r.to_json()))
    assert back.all_rows == json.loads(json.dumps(a))


def test_over_all_rows_binary_by_hand_and_ratings_give_coverage_only():
    truth = [True, True, False, False, True, False]
    pred = [True, None, False, True, float("nan"), False]
    r = over_all_rows(truth, pred, "binary", failures=[None, "timeout", None, None, None, None], resamples=0)
    assert r["figures"]["accuracy"] == pytest.approx(3 / 6) and r["coverage"] == pytest.approx(4 / 6)
    assert r["failures"] == {"timeout": 1, "undecided": 1}  # no error row: undecided
    as_text = ["True", "undecided", "False", "True", "undecided", "False"]
    assert r["figures"]["cohen_kappa"] == pytest.approx(metrics.cohen_kappa_score([str(t) for t in truth], as_text))
    n = over_all_rows([4, 2, 5], [8, None, 9], "numeric", resamples=100)
    assert n["figures"] == {} and n["coverage"] == pytest.approx(2 / 3) and n["failures"] == {"undecided": 1}


def test_the_cli_shows_the_all_rows_figures_with_a_labels_file(tmp_path, capfd):
    folder = tmp_path / "judged"
    _result().remove_columns([]).save_to_disk(str(folder))
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"split": "train", "row": i, "label": lab}) + "\n" for i, lab in enumerate(LABELS) if lab)
    )
    code, out, err = run_cli(
        capfd, "agreement", folder, "--score", "Comparative", "--labels", labels, "--out", tmp_path / "r.json"
    )
    assert code == 0, err
    assert "over all 10 labelled rows" in out and "coverage 70.0%" in out and "http_500 2, invalid_json 1" in out
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["all_rows"]["figures"]["agreement"] == pytest.approx(0.6) and saved["pairs"] == 7
