"""score_dataset end to end against the loopback judge server."""

from __future__ import annotations

import pytest
from datasets import Dataset, DatasetDict
from helpers import qa_dataset, score

from hf_judge import (
    MissingColumnError,
    PromptFileError,
    TemplateError,
    UnknownMetricError,
    available_metrics,
    load_metric,
)

Q_METRICS = [
    "Q_Code_Difficulty",
    "Q_Math_Difficulty",
    "Q_Clarity",
    "Q_Coherence",
    "Q_Completeness",
    "Q_Complexity",
    "Q_Correctness",
    "Q_Meaningfulness",
    "Q_All",
]
QA_METRICS = [
    "QA_Relevance",
    "QA_Clarity",
    "QA_Coherence",
    "QA_Completeness",
    "QA_Complexity",
    "QA_Correctness",
    "QA_Meaningfulness",
    "QA_All",
]


def test_every_seed_metric_is_built_in():
    names = set(available_metrics())
    assert set(Q_METRICS) | set(QA_METRICS) | {"Binary", "Correctness", "Comparative"} <= names


@pytest.mark.parametrize("name", Q_METRICS + QA_METRICS)
def test_builtin_metric_declares_its_outputs(name):
    m = load_metric(name)
    if name.endswith("_All"):
        assert all(o.type == "integer" and (o.minimum, o.maximum) == (1, 10) for o in m.outputs)
        assert all(o.column.startswith(m.mode + "_") for o in m.outputs)
    else:
        assert [o.key for o in m.outputs] == ["reason", "score"]  # reasoning first
        assert m.columns == [f"{name}_reason", name]
    assert m.temperature == (1.0 if "Difficulty" in name else 0.1)
    assert set(m.variables) == ({"instruction"} if m.mode == "Q" else {"instruction", "output"})


@pytest.mark.parametrize(
    "metrics",
    [Q_METRICS[:-1], QA_METRICS[:-1], ["Q_All", "QA_All"]],
    ids=["Q-singles", "QA-singles", "All"],
)
def test_every_metric_end_to_end(judge, tmp_path, metrics):
    ds = qa_dataset(4)
    out = score(ds, metrics, judge, tmp_path)
    train = out["train"]
    assert len(out["errors"]) == 0
    assert train["question"] == ds["question"]
    for name in metrics:
        m = load_metric(name)
        for o in m.outputs:
            values = train[o.column]
            assert len(values) == 4 and None not in values
            if o.type == "integer":
                assert all(o.minimum <= v <= o.maximum for v in values)
    assert judge.stats()["requests"] == 4 * len(metrics)
    assert out.summary.requests == 4 * len(metrics)


def test_datasetdict_two_splits_and_row_order(judge, tmp_path):
    judge.configure(latency_range=[0.0, 0.03])  # replies come back out of order
    dd = DatasetDict({"train": qa_dataset(40, "tr"), "test": qa_dataset(25, "te")})
    out = score(dd, ["QA_Clarity"], judge, tmp_path, concurrency=16)
    assert set(out) == {"train", "test", "errors"}
    assert out["train"]["question"] == dd["train"]["question"]
    assert out["test"]["answer"] == dd["test"]["answer"]
    # same prompt -> same deterministic score: the score belongs to its own row
    again = score(dd["test"].select([3]), ["QA_Clarity"], judge, tmp_path / "other")
    assert again["train"]["QA_Clarity"][0] == out["test"]["QA_Clarity"][3]


def test_user_prompt_file_works_like_a_builtin(judge, tmp_path):
    pdir = tmp_path / "prompts"
    pdir.mkdir()
    (pdir / "QA_Helpfulness.jinja").write_text(
        "---\ndescription: helpful?\ntemperature: 0.3\noutputs:\n"
        "  reason: {type: string}\n  score: {type: integer, minimum: 0, maximum: 5}\n---\n"
        "Q: {{ instruction }}\nA: {{ output }}\nLaTeX stays: \\frac{1}{2} {x} {{ '{' }}\n"
    )
    judge.configure(record=True)
    out = score(qa_dataset(6), ["QA_Helpfulness", "QA_Clarity"], judge, tmp_path, prompts_dir=pdir)
    assert all(0 <= v <= 5 for v in out["train"]["QA_Helpfulness"])
    body = next(b for b in judge.stats()["bodies"] if "LaTeX stays" in b["messages"][-1]["content"])
    assert "\\frac{1}{2} {x} {" in body["messages"][-1]["content"]
    assert body["temperature"] == 0.3
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 5}
    assert list(schema["properties"]) == ["reason", "score"]


def test_all_next_to_its_single_metric_writes_both(judge, tmp_path):
    alone = score(qa_dataset(3), ["QA_All"], judge, tmp_path)["train"]
    assert judge.stats()["requests"] == 3
    both = score(qa_dataset(3), ["QA_All", "QA_Clarity"], judge, tmp_path)["train"]
    assert judge.stats()["requests"] == 6  # the All's replies come from the store: adding the single pays only for it
    single = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path)["train"]
    assert judge.stats()["requests"] == 6
    # the single metric keeps its own columns; only the All's clashing output moves to QA_All_Clarity
    assert both["QA_Clarity"] == single["QA_Clarity"] and both["QA_Clarity_reason"] == single["QA_Clarity_reason"]
    assert both["QA_All_Clarity"] == alone["QA_Clarity"]
    assert both["QA_Relevance"] == alone["QA_Relevance"]
    assert None not in both["QA_All_Clarity"] and None not in both["QA_Clarity"]
    reordered = score(qa_dataset(3), ["QA_Clarity", "QA_All"], judge, tmp_path)["train"]
    assert sorted(reordered.column_names) == sorted(both.column_names)
    assert reordered["QA_All_Clarity"] == both["QA_All_Clarity"]


def test_two_metrics_writing_one_column_is_an_error_that_says_how_to_fix_it(judge, tmp_path):
    pdir = tmp_path / "prompts"
    pdir.mkdir()
    for name in ("QA_Mine", "QA_Yours"):
        front = "---\noutputs:\n  score: {type: integer, column: QA_Shared}\n---\n"
        (pdir / f"{name}.jinja").write_text(front + name + " {{ output }}\n")
    with pytest.raises(UnknownMetricError, match="QA_Mine and QA_Yours both write column 'QA_Shared'.*own `column:`"):
        score(qa_dataset(2), ["QA_Mine", "QA_Yours"], judge, tmp_path, prompts_dir=pdir)
    with pytest.raises(UnknownMetricError, match="list QA_All once"):
        score(qa_dataset(2), ["QA_All", "QA_All"], judge, tmp_path)
    _assert_no_requests(judge)


def test_column_mapping_and_alias(judge, tmp_path):
    ds = Dataset.from_dict({"prompt": ["a", "b"], "response": ["c", "d"]})
    out = score(ds, ["QA_Meaningness"], judge, tmp_path, columns={"instruction": "prompt", "output": "response"})
    assert out["train"]["QA_Meaningfulness"][0] is not None


@pytest.mark.parametrize(
    "fault, kind",
    [
        ("malformed_json", "invalid_json"),
        ("wrong_keys", "schema"),
        ("extra_key", "schema"),
        ("missing_key", "schema"),
        ("out_of_range", "out_of_range"),
        ("float_score", "schema"),
        ("string_score", "schema"),
        ("bool_score", "schema"),
        ("finish_length", "truncated"),
        ("content_filter", "content_filter"),
        ("empty", "empty"),
    ],
)
def test_invalid_reply_goes_to_errors_with_null(judge, tmp_path, fault, kind):
    judge.configure(faults=[{"fault": fault, "match": "row-2:"}])
    out = score(qa_dataset(5), ["QA_Clarity"], judge, tmp_path, retries=1)
    train, errors = out["train"], out["errors"]
    assert train["QA_Clarity"][2] is None and train["QA_Clarity_reason"][2] is None
    assert all(v is not None for i, v in enumerate(train["QA_Clarity"]) if i != 2)
    assert errors.to_list() == [
        {
            "split": "train",
            "row": 2,
            "metric": "QA_Clarity",
            "judge": "judge",  # whose request failed: the run's one judge, by its model
            "kind": kind,
            "message": errors[0]["message"],
            "raw": errors[0]["raw"],
            "attempts": 1 if kind == "content_filter" else 2,
        }
    ]
    assert errors[0]["message"]
    # every (row, metric) is exactly one of scored or errored
    assert judge.stats()["requests"] == 4 + errors[0]["attempts"]


def test_temperature_escalates_on_invalid_replies(judge, tmp_path):
    judge.configure(record=True, faults=[{"fault": "malformed_json", "attempts": 3}])
    out = score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, retries=3)
    assert out["train"]["QA_Clarity"][0] is not None
    assert [b["temperature"] for b in judge.stats()["bodies"]] == [0.1, 0.2, 0.4, 0.8]


def test_temperature_zero_escalates_from_a_floor_and_caps_at_one(judge, tmp_path):
    judge.configure(record=True, faults=[{"fault": "out_of_range", "attempts": 5}])
    score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, retries=5, temperature=0.0)
    assert [b["temperature"] for b in judge.stats()["bodies"]] == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0]


def test_difficulty_defaults_to_temperature_one(judge, tmp_path):
    judge.configure(record=True)
    score(qa_dataset(1), ["Q_Math_Difficulty", "Q_Clarity"], judge, tmp_path)
    temps = sorted(b["temperature"] for b in judge.stats()["bodies"])
    assert temps == [0.1, 1.0]


def test_json_schema_rejected_switches_to_json_object_once(judge, tmp_path):
    judge.configure(record=True, reject_json_schema=True)
    out = score(qa_dataset(20), ["QA_Clarity"], judge, tmp_path, concurrency=4)
    assert len(out["errors"]) == 0 and None not in out["train"]["QA_Clarity"]
    bodies = judge.stats()["bodies"]
    rejected = [b for b in bodies if b["response_format"]["type"] == "json_schema"]
    assert 1 <= len(rejected) <= 4  # only the requests already in flight
    assert all("schema" in b["response_format"] for b in bodies if b["response_format"]["type"] == "json_object")
    assert out.summary.structured_output == "json_object"
    assert any("json_object" in n for n in out.summary.notes)


def _assert_no_requests(judge):
    assert judge.stats()["requests"] == 0


def test_unknown_metric_lists_known_ones(judge, tmp_path):
    with pytest.raises(UnknownMetricError, match="QA_Clarity") as e:
        score(qa_dataset(2), ["QA_Clarityy"], judge, tmp_path)
    assert "Known metrics" in str(e.value)
    _assert_no_requests(judge)


def test_missing_column_lists_available(judge, tmp_path):
    with pytest.raises(MissingColumnError, match="Available columns: question, answer"):
        score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, columns={"instruction": "question"})
    _assert_no_requests(judge)


def test_undefined_template_variable(judge, tmp_path):
    pdir = tmp_path / "p"
    pdir.mkdir()
    (pdir / "Q_Odd.jinja").write_text(
        "---\noutputs:\n  score: {type: integer, minimum: 1, maximum: 10}\n---\n{{ instruction }} {{ reference }}\n"
    )
    with pytest.raises(MissingColumnError, match="reference"):
        score(qa_dataset(2), ["Q_Odd"], judge, tmp_path, prompts_dir=pdir, columns={"instruction": "question"})
    (pdir / "Q_Odd2.jinja").write_text(
        "---\noutputs:\n  score: {type: integer, minimum: 1, maximum: 10}\n---\n"
        "{{ instruction }} {{ context.missing_attr }}\n"
    )
    ds = qa_dataset(2).add_column("context", ["x", "y"])
    with pytest.raises(TemplateError, match="missing_attr"):
        score(ds, ["Q_Odd2"], judge, tmp_path, prompts_dir=pdir, columns={"instruction": "question"})
    (pdir / "Q_Odd3.jinja").write_text(
        "---\noutputs:\n  score: {type: integer, minimum: 1, maximum: 10}\n---\n{{ instruction }} {% if %}\n"
    )
    with pytest.raises(TemplateError, match="syntax"):
        score(ds, ["Q_Odd3"], judge, tmp_path, prompts_dir=pdir, columns={"instruction": "question"})
    _assert_no_requests(judge)


@pytest.mark.parametrize(
    "front, message",
    [
        ("outputs:\n  score: {type: integr}", "type 'integr'"),
        ("outputs: []", "non-empty mapping"),
        ("outputs:\n  score: {type: integer, minimum: 10, maximum: 1}", "above maximum"),
        ("outputs:\n  score: {type: integer, min: 1}", "unknown field"),
        ("outputs:\n  score: {type: integer}\ncolour: red", "unknown front matter key"),
        ("outputs: [unclosed", "not valid YAML"),
    ],
)
def test_malformed_prompt_file(judge, tmp_path, front, message):
    pdir = tmp_path / "p"
    pdir.mkdir()
    (pdir / "Q_Bad.jinja").write_text(f"---\n{front}\n---\n{{{{ instruction }}}}\n")
    with pytest.raises(PromptFileError, match=message):
        score(qa_dataset(2), ["Q_Bad"], judge, tmp_path, prompts_dir=pdir, columns={"instruction": "question"})
    _assert_no_requests(judge)


def test_null_and_odd_values(judge, tmp_path):
    ds = Dataset.from_dict({"question": ["q1", None, "q3", "q4"], "answer": ["a", "b", "", "d"]})
    judge.configure(record=True)
    out = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert out["train"]["QA_Clarity"][1] is None and out["train"]["QA_Clarity"][2] is not None
    assert out["errors"]["kind"] == ["null_input"]
    assert judge.stats()["requests"] == 3


def test_values_of_other_types_are_rendered(judge, tmp_path):
    ds = Dataset.from_dict({"question": [[1, 2], [3]], "answer": [{"k": "v"}, {"k": "ü"}]})
    judge.configure(record=True)
    score(ds, ["QA_Clarity"], judge, tmp_path)
    texts = [b["messages"][-1]["content"] for b in judge.stats()["bodies"]]
    assert any("[1,2]" in t and '{"k":"v"}' in t for t in texts)
    assert any('{"k":"ü"}' in t for t in texts)


def test_input_too_long(judge, tmp_path):
    ds = Dataset.from_dict({"question": ["short", "x" * 5000], "answer": ["a", "b"]})
    out = score(ds, ["QA_Clarity"], judge, tmp_path, max_input_chars=1000)
    assert out["errors"]["kind"] == ["input_too_long"] and out["errors"]["row"] == [1]
    assert judge.stats()["requests"] == 1


@pytest.mark.parametrize("bad", [{"concurrency": -1}, {"temperature": 3}, {"timeout": 0}, {"retries": -2}])
def test_bad_settings_name_the_field(judge, tmp_path, bad):
    from hf_judge import ConfigError

    field = next(iter(bad))
    with pytest.raises(ConfigError, match=field):
        score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, **bad)
    _assert_no_requests(judge)


def test_public_api_is_sorted_and_documented():
    import hf_judge

    assert hf_judge.__all__ == sorted(hf_judge.__all__)
    for name in hf_judge.__all__:
        obj = getattr(hf_judge, name)
        assert obj.__doc__, name
        if callable(obj) and not isinstance(obj, type):
            assert "Example" in obj.__doc__, name


def test_token_columns_per_row(judge, tmp_path):
    ds = qa_dataset(20)
    plain = score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path)
    assert "judge_prompt_tokens" not in plain["train"].column_names
    assert plain.summary.prompt_tokens > 0 and plain.summary.requests == 40
    # usage was stored with each reply: a run that asks for the columns is served from the store
    out = score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path, token_columns=True)
    assert out.summary.requests == 0 and out.summary.cache_hits == 40
    train = out["train"]
    assert train.features["judge_prompt_tokens"].dtype == "int64"
    assert sum(train["judge_prompt_tokens"]) == plain.summary.prompt_tokens
    assert sum(train["judge_completion_tokens"]) == plain.summary.completion_tokens
    assert all(p > 0 for p in train["judge_prompt_tokens"])
    # a row whose metrics all failed has no accepted reply: null, not 0
    judge.configure(faults=[{"fault": "status", "status": 400, "match": "row-3:"}])
    failed = score(qa_dataset(5), ["QA_Clarity"], judge, tmp_path, token_columns=True, use_cache=False)
    assert failed["train"]["judge_prompt_tokens"][3] is None and failed["train"]["judge_prompt_tokens"][2] > 0


def test_collector_thresholds_are_restored_after_a_run(judge, tmp_path):
    import gc

    before = gc.get_threshold()
    score(qa_dataset(5), ["QA_Clarity"], judge, tmp_path)
    assert gc.get_threshold() == before
    judge.configure(faults=[{"fault": "status", "status": 401}])
    from hf_judge import AuthenticationError

    with pytest.raises(AuthenticationError):
        score(qa_dataset(5), ["QA_Clarity"], judge, tmp_path, use_cache=False)
    assert gc.get_threshold() == before


def test_a_map_batch_larger_than_the_window_still_finishes(judge, tmp_path):
    """Dataset.map hands the run 1,000 rows at a time; a window of 32 rows must not keep out the rows the map
    waits for (it hung: the feeder waited for the map to take rows, the map for rows past the window)."""
    import threading

    ds = qa_dataset(100)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(score(ds, ["Q_Clarity"], judge, tmp_path, window=32)))
    worker.daemon = True  # on a hang the test fails below, and the thread must not hold up the exit
    worker.start()
    worker.join(timeout=30)
    assert got, "the run with window=32 < the map's 1,000-row batch did not finish in 30 s"
    assert got[0]["train"]["Q_Clarity"] == score(ds, ["Q_Clarity"], judge, tmp_path / "b")["train"]["Q_Clarity"]
    assert judge.stats()["requests"] == 200
