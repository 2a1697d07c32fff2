"""Every failed request names its judge in the errors split's ``judge`` column (a panel judge's name, the model of
a run's one judge, null for a row's own error), and the readers pick a judge's rows by that column, never by the
``judge 'x': `` prefix of the message (which is for people): ``agreement``'s failure kinds per panel judge,
choose-judge's failures per candidate and the candidate folders it writes. An errors split an earlier version
wrote, without the column, still loads and is still taken as a scored input's. The engines' errors splits (one
process, a stream, workers, batch, the map transform, Ray, Spark) are compared row by row, ``judge`` included, in
tests/test_matrix.py (feature ``panel_judge_fails``)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, DatasetDict, Features, load_from_disk
from helpers import QA_COLUMNS, qa_dataset, score

from hf_judge import Judge, Panelist, Settings, agreement, choose_judge, load_result, score_dataset
from hf_judge.engine.choose_output import candidate_result
from hf_judge.results.errors_split import ERROR_FEATURES

ROWS = 6
# row 1: both judges of the panel fail it, each its own way; row 3: only b
PANEL_FAULTS = [
    {"fault": "status", "status": 400, "model": "a", "match": "row-1:"},
    {"fault": "out_of_range", "model": "b", "match": "row-1:"},
    {"fault": "out_of_range", "model": "b", "match": "row-3:"},
]


def _data(n: int = ROWS) -> Dataset:
    """qa_dataset's rows with row 2's answer null (its own error: no request is made for it) and a rating."""
    ds = qa_dataset(n)
    return ds.map(
        lambda r, i: {"answer": None if i == 2 else r["answer"], "human": float(i % 10 + 1)}, with_indices=True
    )


def _failed(errors) -> set[tuple]:
    return {(e["row"], e["metric"], e.get("judge"), e["kind"]) for e in errors}  # get: none on the base


@pytest.fixture
def panel(judge, tmp_path):
    """A panel of a and b over ``_data()``, scored in one process with PANEL_FAULTS."""
    judge.configure(faults=PANEL_FAULTS)
    return score(_data(), ["QA_Clarity"], judge, tmp_path, models="a,b", retries=0, progress=False)


def test_a_panel_names_the_judge_of_each_failed_request(panel):
    errors = panel["errors"]
    assert errors.column_names == list(ERROR_FEATURES)
    assert _failed(errors) == {
        (1, "QA_Clarity", "a", "http_400"),
        (1, "QA_Clarity", "b", "out_of_range"),
        (3, "QA_Clarity", "b", "out_of_range"),
        (2, "QA_Clarity", None, "null_input"),  # the row's own: no judge was asked
    }
    for e in errors:  # the message still says it, for people
        assert (e["judge"] is None) or e["message"].startswith(f"judge '{e['judge']}': ")


def test_agreement_counts_each_panel_judges_own_failures(panel):
    """Row 1 failed for both judges, each its own way: a's column counts a's kind there, b's b's (on the base
    the row's last error row, b's, was counted for a too)."""
    got = {j: agreement(panel, f"QA_Clarity__{j}", "human", resamples=0).all_rows for j in ("a", "b")}
    assert got["a"]["failures"] == {"http_400": 1, "null_input": 1}
    assert got["b"]["failures"] == {"out_of_range": 2, "null_input": 1}
    assert (got["a"]["decided"], got["b"]["decided"]) == (ROWS - 2, ROWS - 3)


def _without_prefix(result: DatasetDict) -> DatasetDict:
    """The result with every message's ``judge 'x': `` prefix cut: what a reader must not depend on."""
    cut = result["errors"].map(lambda e: {"message": e["message"].split("': ", 1)[-1]})
    assert not any(m.startswith("judge '") for m in cut["message"])
    out = type(result)({**result, "errors": cut})
    out.summary = result.summary
    return out


def test_choose_judge_counts_each_candidates_failures_from_the_judge_column(judge, tmp_path):
    judge.configure(faults=PANEL_FAULTS)
    ds = _data()
    choice = choose_judge(
        ds, "QA_Clarity", ["a", "b"], label="human", columns=QA_COLUMNS, base_url=judge.base_url,
        api_key="sk-test", cache_dir=tmp_path / "cache", retries=0, progress=False, resamples=0,
        output_dir=tmp_path / "chosen",
    )  # fmt: skip
    by = {e["judge"]: e for e in choice.entries}
    assert by["a"]["failures"] == {"http_400": 1, "null_input": 1}
    assert by["b"]["failures"] == {"out_of_range": 2, "null_input": 1}
    for name, rows in (("a", {1, 2}), ("b", {1, 2, 3})):  # each candidate's folder: its own error rows
        saved = load_result(tmp_path / "chosen" / name)["errors"]
        assert set(saved["row"]) == rows and set(saved["judge"]) <= {name, None}


def test_a_candidates_error_rows_come_from_the_column_not_the_message(panel):
    """Messages without the ``judge 'x': `` prefix: each candidate still gets exactly its own error rows (on the
    base, a message without the prefix was taken for every judge's)."""
    cut = _without_prefix(panel)
    want = {
        "a": ({(1, "QA_Clarity", "a", "http_400")}, {"http_400": 1}),
        "b": ({(r, "QA_Clarity", "b", "out_of_range") for r in (1, 3)}, {"out_of_range": 2}),
    }
    for name, (rows, kinds) in want.items():
        mine = candidate_result(cut, Panelist(model=name))
        assert _failed(mine["errors"]) == rows | {(2, "QA_Clarity", None, "null_input")}
        assert mine.summary.errors == {**kinds, "null_input": 1}
    got = agreement(cut, "QA_Clarity__a", "human", resamples=0).all_rows
    assert got["failures"] == {"http_400": 1, "null_input": 1}


def test_one_judge_names_its_model_in_one_process_the_map_transform_and_a_saved_stream(judge, tmp_path):
    judge.configure(faults=[{"fault": "out_of_range", "match": "row-4:"}])
    want = {(4, "QA_Clarity", "judge", "out_of_range"), (2, "QA_Clarity", None, "null_input")}
    one = score(_data(), ["QA_Clarity"], judge, tmp_path / "one", retries=0, progress=False)
    assert _failed(one["errors"]) == want
    fast = Settings(model="judge", backoff_base=0.001, backoff_max=0.01)
    with Judge(["QA_Clarity"], settings=fast, base_url=judge.base_url, api_key="sk-test", columns=QA_COLUMNS,
               cache_dir=tmp_path / "map", retries=0) as judging:  # fmt: skip
        out = _data().map(judging, batched=True, features=judging.features(_data().features))
    entries = {(r, e["metric"], e["judge"], e["kind"]) for r, found in enumerate(out["judge_errors"]) for e in found}
    assert entries == want
    stream = score(
        _data().to_iterable_dataset(num_shards=2), ["QA_Clarity"], judge, tmp_path / "stream", retries=0,
        progress=False,
    )  # fmt: skip
    stream.save_to_disk(tmp_path / "streamed")  # its error rows written as they come (ErrorWriter), then read back
    assert _failed(load_result(tmp_path / "streamed")["errors"]) == want
    # the same folder as a version before the column wrote it: it loads, each row's judge unknown
    before = Features({k: v for k, v in ERROR_FEATURES.items() if k != "judge"})
    for f in (tmp_path / "streamed" / "errors").glob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns("judge").cast(before.arrow_schema), f)
    old = load_result(tmp_path / "streamed")["errors"]
    assert old.column_names == list(ERROR_FEATURES) and _failed(old) == {(r, m, None, k) for r, m, _, k in want}


def _as_earlier_version(folder) -> None:
    """Rewrite a saved result's errors split as a version before the ``judge`` column wrote it."""
    errors = load_from_disk(str(folder / "errors")).remove_columns("judge")
    errors.save_to_disk(str(folder / "errors.old"))
    (folder / "errors").rename(folder / "errors.gone")
    (folder / "errors.old").rename(folder / "errors")


def test_an_earlier_versions_errors_split_loads_and_is_taken_as_input(panel, judge, tmp_path):
    folder = tmp_path / "judged"
    panel.save_to_disk(folder)
    _as_earlier_version(folder)
    assert "judge" not in load_from_disk(str(folder / "errors")).column_names
    back = load_result(folder)
    assert back["errors"].column_names == list(ERROR_FEATURES)
    assert set(back["errors"]["judge"]) == {None} and len(back["errors"]) == 4  # whose, unknown: every judge's
    # read as every judge's: row 1's rows both count for a (the last one's kind), as before the column
    assert agreement(back, "QA_Clarity__a", "human", resamples=0).all_rows["failures"] == {
        "out_of_range": 1,
        "null_input": 1,
    }
    # a scored result with such a split scored again (another metric): its rows carried over, judge null
    judge.configure(faults=[])
    again = score_dataset(
        DatasetDict({"train": back["train"], "errors": back["errors"].remove_columns("judge")}), ["QA_Relevance"],
        settings=Settings(model="judge"), base_url=judge.base_url, api_key="sk-test", columns=QA_COLUMNS,
        cache_dir=tmp_path / "again", retries=0, progress=False,
    )  # fmt: skip
    assert again["errors"].column_names == list(ERROR_FEATURES)
    carried = [e for e in again["errors"] if e["metric"] == "QA_Clarity"]
    assert len(carried) == 4 and {e["judge"] for e in carried} == {None}
    assert {(e["row"], e["judge"], e["kind"]) for e in again["errors"] if e["metric"] == "QA_Relevance"} == {
        (2, None, "null_input")
    }


def test_a_cascades_error_rows_name_the_tier_that_failed(judge, tmp_path):
    """Row 0 (the cheap judge unsure) goes to the strong judge, which fails it; row 2, which the cheap judge
    failed, goes up too and the strong one scores it: the one error row left is the strong judge's."""
    judge.configure(
        overrides={"score": 5},
        confidence=[{"match": "row-0:", "p": 0.3}, {"match": "row-", "p": 0.9}],
        faults=[
            {"fault": "out_of_range", "model": "strong", "match": "row-0:"},
            {"fault": "status", "status": 400, "model": "cheap", "match": "row-2:"},
        ],
    )
    out = score_dataset(
        qa_dataset(4), ["QA_Correctness"], settings=Settings(model="cheap", backoff_base=0.001),
        base_url=judge.base_url, escalate_base_url=judge.base_url, api_key="sk-test", cache_dir=tmp_path / "cache",
        columns=QA_COLUMNS, progress=False, retries=0, logprobs=True, escalate_when="confidence<0.6",
        escalate_model="strong",
    )  # fmt: skip
    assert _failed(out["errors"]) == {(0, "QA_Correctness", "strong", "out_of_range")}
    assert out["train"]["QA_Correctness_judge"][2] == "strong"
