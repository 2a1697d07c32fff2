"""The human ceiling (leave-one-out agreement, its interval, Krippendorff's alpha) on a labels file with three
annotators, against a hand computation and the ``krippendorff`` package."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest

from hf_judge.analysis.ceiling import human_ceiling
from hf_judge.analysis.labels import read_labels
from hf_judge.errors import ConfigError

# rows x (ann, bob, cid): pairwise preferences, None where that person did not label the row
VOTES = [
    ["1", "1", "1"],  # all agree: 3 of 3
    ["1", "1", "2"],  # ann: others {1, 2} tie -> 1/2; bob: 1/2; cid: others {1, 1} -> 0
    ["2", "tie", "2"],  # ann: others {tie, 2} -> 1/2; bob: others {2, 2} -> 0; cid: 1/2
    ["2", None, "2"],  # two labels: 1 + 1
    ["tie", "1", "2"],  # every one alone, each others' pair tied and without it: 0 + 0 + 0
    ["1", None, None],  # one label: nothing to compare, left out
]
HAND = (3 + 1 + 1 + 2 + 0) / (3 + 3 + 3 + 2 + 3)  # 7 / 14


@pytest.fixture
def labels_file(tmp_path):
    path = tmp_path / "labels.jsonl"
    lines = [
        {"split": "train", "row": r, "label": v, "reviewer": who}
        for r, row in enumerate(VOTES)
        for who, v in zip(("ann", "bob", "cid"), row, strict=True)
        if v is not None
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _table(records):
    who = sorted({r["reviewer"] for r in records})
    rows = sorted({r["row"] for r in records})
    by = {(r["row"], r["reviewer"]): r["label"] for r in records}
    return [[by.get((row, w)) for w in who] for row in rows]


def test_leave_one_out_agreement_on_a_labels_file_matches_the_hand_computation(labels_file):
    table = _table(read_labels(labels_file))
    c = human_ceiling(table, "pairwise", resamples=2000, seed=3)
    assert c["loo_agreement"] == pytest.approx(HAND)
    assert (c["annotators"], c["rows"], c["comparisons"]) == (3, 5, 14)
    # the interval: a bootstrap over rows of (agreeing, compared), resampled as stats.resample_rows draws them
    sums, counts = np.array([3, 1, 1, 2, 0.0]), np.array([3, 3, 3, 2, 3])
    idx = np.random.default_rng(3).integers(0, 5, (2000, 5))
    lo, hi = np.quantile(sums[idx].sum(1) / counts[idx].sum(1), [0.025, 0.975])
    assert c["interval"] == pytest.approx([lo, hi])
    assert c["interval"][0] < HAND < c["interval"][1]
    assert human_ceiling(table, "pairwise", resamples=2000, seed=3) == c  # seeded: the same interval


def test_alpha_matches_the_krippendorff_package_nominal_and_ordinal(labels_file):
    table = _table(read_labels(labels_file))
    codes = {"1": 1.0, "2": 2.0, "tie": 3.0}
    data = np.array([[np.nan if v is None else codes[v] for v in row] for row in table]).T
    c = human_ceiling(table, "pairwise", resamples=0)
    assert c["alpha_level"] == "nominal" and c["interval"] is None
    assert c["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    ratings = [[4, 4, 3], [2, 1, 2], [0, None, 1], [3, 3, 3], [1, 2, 4]]
    r = human_ceiling(ratings, "numeric", resamples=0)
    data = np.array([[np.nan if v is None else v for v in row] for row in ratings], dtype=float).T
    assert r["alpha_level"] == "ordinal"
    assert r["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))
    # ratings agree when equal: (4,4,3): 1/2 + 1/2 + 0; (2,1,2): 1/2 + 0 + 1/2; (0,-,1): 0 + 0; (3,3,3): 3;
    # (1,2,4): 0 + 0 + 0
    assert r["loo_agreement"] == pytest.approx((1 + 1 + 0 + 3 + 0) / (3 + 3 + 2 + 3 + 3))


def test_a_table_of_uneven_rows_or_an_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match="rows x annotators"):
        human_ceiling([["1", "2"], ["1"]], "pairwise")
    with pytest.raises(ConfigError, match="kind must be one of"):
        human_ceiling([["1", "2"]], "ratings")
