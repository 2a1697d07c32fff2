"""Public labelled sets by name (``load_benchmark``), loaded with ``datasets`` from the loopback Hub, where small
samples are written in each set's exact schema and file layout (columns, types, split names, file names)."""

from __future__ import annotations

import gzip
import json

import pytest
from datasets import Dataset, Features, List, Value
from huggingface_hub import HfApi

from hf_judge.analysis.benchmarks import BENCHMARKS, load_benchmark
from hf_judge.analysis.ceiling import human_ceiling
from hf_judge.errors import ConfigError


def _jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _upload(repo, files):
    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    for path, data in files.items():
        api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo, repo_type="dataset")


def _judgebench_rows(model, n):
    return [
        {
            "pair_id": f"{model}-{i}",
            # as on the Hub: an int for mmlu-pro rows, null for the others (the JSON builder infers int64, nullable)
            "original_id": 1000 + i if i % 4 else None,
            "source": "mmlu-pro-math" if i % 4 else "livebench-math",
            "question": f"q{i}",
            "response_model": model,
            "response_A": f"A{i}",
            "response_B": f"B{i}",
            "label": "A>B" if i % 3 else "B>A",
        }
        for i in range(n)
    ]


def test_judgebench_maps_the_pairs_to_comparative_and_the_correct_response_to_a_winner(hub):
    # the repo's layout: data/{split}-00000-of-00001.jsonl, splits gpt (GPT-4o pairs) and claude
    _upload(
        "ScalerLab/JudgeBench",
        {
            "data/gpt-00000-of-00001.jsonl": _jsonl(_judgebench_rows("gpt-4o-2024-05-13", 6)),
            "data/claude-00000-of-00001.jsonl": _jsonl(_judgebench_rows("claude-3-5-sonnet-20240620", 4)),
        },
    )
    s = load_benchmark("judgebench")
    assert (s.metric, s.kind, s.label, s.annotators, s.source) == (
        "Comparative",
        "pairwise",
        "correct",
        (),
        "ScalerLab/JudgeBench:gpt",
    )
    assert s.columns == {"question": "question", "response1": "response_A", "response2": "response_B"}
    assert len(s.dataset) == 6 and set(s.dataset["response_model"]) == {"gpt-4o-2024-05-13"}
    assert s.dataset["correct"] == ["2", "1", "1", "2", "1", "1"]  # A>B: response1 wins
    assert len(load_benchmark("judgebench", limit=2).dataset) == 2


MT_FEATURES = Features(
    {
        "question_id": Value("int64"),
        "model_a": Value("string"),
        "model_b": Value("string"),
        "winner": Value("string"),
        "judge": Value("string"),
        "conversation_a": List({"content": Value("string"), "role": Value("string")}),
        "conversation_b": List({"content": Value("string"), "role": Value("string")}),
        "turn": Value("int64"),
    }
)


def _conversation(model):
    return [
        {"content": "Write a haiku.", "role": "user"},
        {"content": f"{model} haiku", "role": "assistant"},
        {"content": "Now in French.", "role": "user"},
        {"content": f"{model} haiku en français", "role": "assistant"},
    ]


def _vote(qid, a, b, winner, judge, turn):
    return {
        "question_id": qid,
        "model_a": a,
        "model_b": b,
        "winner": winner,
        "judge": judge,
        "conversation_a": _conversation(a),
        "conversation_b": _conversation(b),
        "turn": turn,
    }


def test_mt_bench_human_groups_the_votes_per_pair_and_turn_into_annotator_columns(hub, tmp_path):
    votes = [
        _vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 1),
        _vote(81, "llama-13b", "gpt-4", "model_b", "expert_7", 1),  # the same pair the other way round
        _vote(81, "gpt-4", "llama-13b", "tie (bothbad)", "author_2", 1),
        _vote(81, "gpt-4", "llama-13b", "model_b", "expert_1", 2),
        _vote(81, "gpt-4", "llama-13b", "tie", "expert_3", 2),
        _vote(82, "claude-v1", "alpaca-13b", "model_a", "expert_4", 1),
    ]
    gpt4 = [_vote(81, "gpt-4", "llama-13b", "model_a", "gpt4_pair", 1)]
    files = {}
    for split, rows in (("human", votes), ("gpt4_pair", gpt4)):
        path = tmp_path / f"{split}.parquet"
        Dataset.from_list(rows, features=MT_FEATURES).to_parquet(path)
        files[f"data/{split}-00000-of-00001-c0b431264a82ddc0.parquet"] = path.read_bytes()
    _upload("lmsys/mt_bench_human_judgments", files)
    s = load_benchmark("mt-bench-human")
    assert (s.metric, s.kind, s.label, s.annotators) == (
        "Comparative",
        "pairwise",
        "majority",
        ("annotator_1", "annotator_2", "annotator_3"),
    )
    rows = s.dataset.to_list()
    assert [(r["question_id"], r["model_a"], r["model_b"], r["turn"]) for r in rows] == [
        (81, "gpt-4", "llama-13b", 1),
        (81, "gpt-4", "llama-13b", 2),
        (82, "alpaca-13b", "claude-v1", 1),  # one order per pair: the names sorted, the vote flipped
    ]
    assert [[r[c] for c in s.annotators] for r in rows] == [["1", "1", "tie"], ["2", "tie", None], ["2", None, None]]
    assert [r["majority"] for r in rows] == ["1", None, "2"]  # two values tied for the mode: no majority
    # turn 2 as MT-bench's multi-turn judge sees it: each model's own conversation, its turn-1 reply included
    assert rows[1]["question"] == "Now in French." and "turn 2" in rows[1]["context"]
    for column, model in (("response1", "gpt-4"), ("response2", "llama-13b")):
        assert rows[1][column] == (
            f"### User:\nWrite a haiku.\n\n### Assistant:\n{model} haiku\n\n"
            f"### User:\nNow in French.\n\n### Assistant:\n{model} haiku en français"
        )
    assert rows[0]["context"] == "" and rows[0]["response1"] == "gpt-4 haiku"
    assert (rows[2]["response1"], rows[2]["response2"]) == ("alpaca-13b haiku", "claude-v1 haiku")
    assert set(s.columns) == {"question", "context", "response1", "response2"}
    ceiling = human_ceiling([[r[c] for c in s.annotators] for r in rows], s.kind, resamples=0)
    assert ceiling["rows"] == 2 and ceiling["loo_agreement"] == pytest.approx((1 / 2 + 1 / 2 + 0 + 0 + 0) / 5)


HELPSTEER = ["helpfulness", "correctness", "coherence", "complexity", "verbosity"]


def test_helpsteer2_reads_the_validation_split_with_its_ratings_and_a_label_threshold(hub):
    rows = [
        {"prompt": f"p{i}", "response": f"r{i}", **{a: (i + k) % 5 for k, a in enumerate(HELPSTEER)}} for i in range(7)
    ]
    _upload(
        "nvidia/HelpSteer2",
        {
            "train.jsonl.gz": gzip.compress(_jsonl(rows[:2])),
            "validation.jsonl.gz": gzip.compress(_jsonl(rows[2:])),
        },
    )
    s = load_benchmark("helpsteer2", limit=4)
    assert (s.metric, s.kind, s.label, s.label_threshold, s.source) == (
        "QA_Correctness",
        "numeric",
        "correctness",
        3.0,
        "nvidia/HelpSteer2:validation",
    )
    assert s.columns == {"instruction": "prompt", "output": "response"}
    assert s.dataset["prompt"] == ["p2", "p3", "p4", "p5"] and s.dataset["correctness"] == [3, 4, 0, 1]
    c = load_benchmark("helpsteer2-coherence")
    assert (c.metric, c.label, len(c.dataset)) == ("QA_Coherence", "coherence", 5)


def test_an_unknown_name_lists_the_sets_and_a_changed_schema_names_the_column(hub):
    with pytest.raises(ConfigError, match="no labelled set named 'judgebenc'") as e:
        load_benchmark("judgebenc")
    assert all(name in str(e.value) for name in BENCHMARKS)
    old = _jsonl([{"question": "q", "label": "A>B"}])  # a schema without the responses
    _upload("ScalerLab/JudgeBench", {f"data/{s}-00000-of-00001.jsonl": old for s in ("gpt", "claude")})
    with pytest.raises(ConfigError, match="no column 'response_A'"):
        load_benchmark("judgebench", revision="main")


def test_judgebench_claude_split_by_name_with_its_categories_rule_and_groups(hub):
    _upload(
        "ScalerLab/JudgeBench",
        {
            "data/gpt-00000-of-00001.jsonl": _jsonl(_judgebench_rows("gpt-4o-2024-05-13", 6)),
            "data/claude-00000-of-00001.jsonl": _jsonl(_judgebench_rows("claude-3-5-sonnet-20240620", 5)),
        },
    )
    s = load_benchmark("judgebench:claude", revision="main")
    assert (s.source, s.rule, s.groups, s.label) == (
        "ScalerLab/JudgeBench:claude",
        "judgebench",
        ("category",),
        "correct",
    )
    assert len(s.dataset) == 5 and set(s.dataset["response_model"]) == {"claude-3-5-sonnet-20240620"}
    assert s.dataset["original_id"] == [None, 1001, 1002, 1003, None]  # the Hub's nullable int64
    assert s.dataset["category"] == ["math", "knowledge", "knowledge", "knowledge", "math"]
    assert load_benchmark("judgebench:gpt", revision="main").source == "ScalerLab/JudgeBench:gpt"
    with pytest.raises(
        ConfigError, match=r"judgebench has no split 'llama'; its splits are judgebench:gpt, judgebench:claude"
    ):
        load_benchmark("judgebench:llama")
    with pytest.raises(ConfigError, match="mt-bench-human has no split 'gpt'; it has one split"):
        load_benchmark("mt-bench-human:gpt")


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"source": "arena-hard"}, r"1 source value that the set never holds \(row 2: 'arena-hard'\)"),
        ({"pair_id": "gpt-1"}, r"row 2: pair_id 'gpt-1' again \(first at row 1\)"),
        ({"response_B": ""}, r"1 response_B value that the set never holds \(row 2: ''\)"),
        ({"label": "A=B"}, r"1 label value that the set never holds \(row 2: 'A=B'\)"),
    ],
)
def test_judgebench_refuses_a_source_of_no_category_a_duplicate_pair_an_empty_response(hub, change, refusal):
    rows = _judgebench_rows("gpt", 4)
    rows[2].update(change)
    _upload("ScalerLab/JudgeBench", {f"data/{s}-00000-of-00001.jsonl": _jsonl(rows) for s in ("gpt", "claude")})
    with pytest.raises(ConfigError, match=refusal):
        load_benchmark("judgebench", revision="main")


def _mt_upload(tmp_path, human, gpt4):
    files = {}
    for split, rows in (("human", human), ("gpt4_pair", gpt4)):
        path = tmp_path / f"{split}.parquet"
        Dataset.from_list(rows, features=MT_FEATURES).to_parquet(path)
        files[f"data/{split}-00000-of-00001-c0b431264a82ddc0.parquet"] = path.read_bytes()
    _upload("lmsys/mt_bench_human_judgments", files)


def test_mt_bench_gpt4_puts_gpt4s_recorded_verdict_beside_each_pair_in_the_rows_order(hub, tmp_path):
    human = [
        _vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 1),
        _vote(81, "gpt-4", "llama-13b", "model_b", "expert_1", 2),
        _vote(112, "claude-v1", "alpaca-13b", "model_a", "expert_4", 1),  # sorted: alpaca-13b vs claude-v1, "2"
        _vote(155, "alpaca-13b", "gpt-4", "tie", "expert_2", 1),
    ]
    gpt4 = [
        _vote(81, "llama-13b", "gpt-4", "model_b", "gpt4_pair", 1),  # the other way round: gpt-4 wins, "1"
        _vote(81, "gpt-4", "llama-13b", "tie", "gpt4_pair", 2),
        _vote(112, "alpaca-13b", "claude-v1", "model_a", "gpt4_pair", 1),
        _vote(99, "alpaca-13b", "gpt-4", "model_a", "gpt4_pair", 1),  # no human vote on it: not a row
    ]
    _mt_upload(tmp_path, human, gpt4)
    s = load_benchmark("mt-bench-gpt4", revision="main")
    rows = s.dataset.to_list()
    assert [(r["question_id"], r["turn"], r["majority"], r["gpt4_pair"]) for r in rows] == [
        (81, 1, "1", "1"),
        (81, 2, "2", "tie"),
        (112, 1, "2", "1"),
        (155, 1, "tie", None),  # GPT-4 has no vote on it
    ]
    assert [r["category"] for r in rows] == ["writing", "writing", "math", "humanities"]
    assert s.recorded == {"gpt-4 (recorded)": "gpt4_pair"} and s.rule == "mt-bench"
    assert s.groups == ("turn", "category") and s.items == (("question_id", "turn"), "model_a", "model_b")
    assert "gpt4_pair" not in load_benchmark("mt-bench-human", revision="main").dataset.column_names
    _mt_upload(tmp_path, human, [*gpt4, _vote(81, "gpt-4", "llama-13b", "model_a", "gpt4_pair", 1)])
    with pytest.raises(ConfigError, match="row 4: a second GPT-4 vote on question 81, gpt-4 vs llama-13b, turn 1"):
        load_benchmark("mt-bench-gpt4", revision="main")


@pytest.mark.parametrize(
    ("vote", "refusal"),
    [
        (_vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 3), r"1 turn value .* \(row 1: 3\)"),
        (_vote(81, "gpt-4", "gpt-4", "model_a", "expert_1", 1), r"row 1: 'gpt-4 vs gpt-4'"),
        (_vote(81, "gpt-4", "llama-13b", "model_a", "turker_9", 1), r"1 judge value .* \(row 1: 'turker_9'\)"),
        (_vote(7, "gpt-4", "llama-13b", "model_a", "expert_1", 1), r"1 question_id value .* \(row 1: 7\)"),
    ],
)
def test_mt_bench_refuses_a_turn_a_model_against_itself_an_unknown_judge_kind(hub, tmp_path, vote, refusal):
    gpt4 = [_vote(81, "gpt-4", "llama-13b", "model_a", "gpt4_pair", 1)]
    _mt_upload(tmp_path, [_vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 1), vote], gpt4)
    with pytest.raises(ConfigError, match=refusal):
        load_benchmark("mt-bench-human", revision="main")


RB_FEATURES = Features(
    {
        "prompt": Value("string"),
        "chosen": Value("string"),
        "chosen_model": Value("string"),
        "rejected": Value("string"),
        "rejected_model": Value("string"),
        "subset": Value("string"),
        "id": Value("int64"),
    }
)
RB_SUBSETS = ["alpacaeval-easy", "llmbar-natural", "refusals-dangerous", "hep-python", "math-prm", "mt-bench-med"]


def _rb_rows(n):
    return [
        {
            "prompt": f"p{i}",
            "chosen": f"good {i}",
            "chosen_model": "GPT4-Turbo",
            "rejected": f"bad {i}",
            "rejected_model": "alpaca-7b",
            "subset": RB_SUBSETS[i % len(RB_SUBSETS)],
            "id": 30 + i,
        }
        for i in range(n)
    ]


def _rb_upload(tmp_path, rows):
    path = tmp_path / "filtered.parquet"
    Dataset.from_list(rows, features=RB_FEATURES).to_parquet(path)
    raw = tmp_path / "raw.parquet"
    Dataset.from_list(_rb_rows(2), features=RB_FEATURES).to_parquet(raw)
    _upload(
        "allenai/reward-bench",
        {
            "data/filtered-00000-of-00001.parquet": path.read_bytes(),
            "data/raw-00000-of-00001.parquet": raw.read_bytes(),
        },
    )


def test_rewardbench_shows_each_pair_in_a_seeded_order_with_the_chosen_response_as_label(hub, tmp_path):
    _rb_upload(tmp_path, _rb_rows(12))
    s = load_benchmark("rewardbench", revision="main")
    assert (s.source, s.metric, s.kind, s.label, s.rule, s.groups) == (
        "allenai/reward-bench:filtered", "Comparative", "pairwise", "correct", "rewardbench", ("section", "subset"),
    )  # fmt: skip
    assert s.columns == {"question": "prompt", "response1": "response1", "response2": "response2"}
    rows = s.dataset.to_list()
    for r in rows:  # the label names the chosen response, wherever it is shown
        assert r[f"response{r['correct']}"] == r["chosen"] and {r["response1"], r["response2"]} == {
            r["chosen"],
            r["rejected"],
        }
    assert {"1", "2"} == set(s.dataset["correct"])  # not always first: the order is drawn per pair
    assert [r["section"] for r in rows[:6]] == ["Chat", "Chat Hard", "Safety", "Reasoning", "Reasoning", "Chat"]
    again = load_benchmark("rewardbench", revision="main", limit=5)
    assert again.dataset["correct"] == s.dataset["correct"][:5]  # seeded: the same order every load


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"subset": "anthropic_helpful"}, r"1 subset value that the set never holds \(row 3: 'anthropic_helpful'\)"),
        ({"rejected": "good 3"}, r"1 chosen value .* \(row 3: 'good 3'\)"),
        ({"id": 31}, r"row 3: id 31 again \(first at row 1\)"),
        ({"prompt": None}, r"1 prompt value .* \(row 3: None\)"),
    ],
)
def test_rewardbench_refuses_an_unknown_subset_a_pair_of_one_response_a_duplicate_id(hub, tmp_path, change, refusal):
    rows = _rb_rows(5)
    rows[3].update(change)
    _rb_upload(tmp_path, rows)
    with pytest.raises(ConfigError, match=refusal):
        load_benchmark("rewardbench", revision="main")


def _alpaca_votes(instruction, prefs, dataset="helpful_base"):
    return [
        {
            "instruction": instruction,
            "output_1": f"{instruction} one",
            "output_2": f"{instruction} two",
            "preference": p,
            "annotator_index": k,
            "dataset": dataset,
            "datasplit": "eval",
        }
        for k, p in enumerate(prefs)
    ]


def _alpaca_upload(rows):
    # the repo as on the Hub: a loading script (which datasets >= 4 refuses) beside the JSON array
    _upload(
        "tatsu-lab/alpaca_eval",
        {
            "alpaca_eval.py": b"import datasets\nraise RuntimeError('a loading script must not run')\n",
            "alpaca_farm_human_crossannotations.json": json.dumps(rows).encode(),
        },
    )


def test_alpacaeval_human_reads_the_json_by_path_four_votes_a_pair_and_warns_of_its_license(hub):
    rows = [
        *_alpaca_votes("tips", [1, 1, 1, 2]),
        *_alpaca_votes("poem", [2, 1, 2, 1], "koala"),  # a 2-2 split: AlpacaEval's mode is 2
        *_alpaca_votes("joke", [1.5, 2, 2, 1, 1], "oasst"),  # a fifth vote: the first four kept
        *_alpaca_votes("half", [1, 2, 2]),  # three votes: left out, as AlpacaEval leaves it
    ]
    _alpaca_upload(rows)
    with pytest.warns(UserWarning, match="CC BY-NC 4.0: non-commercial use only"):
        s = load_benchmark("alpacaeval-human", revision="main")
    assert (s.source, s.kind, s.label, s.rule, s.groups) == (
        "tatsu-lab/alpaca_eval/alpaca_farm_human_crossannotations.json", "pairwise", None, "alpacaeval", ("dataset",),
    )  # fmt: skip
    assert s.annotators == ("annotator_1", "annotator_2", "annotator_3", "annotator_4")
    assert s.columns == {"question": "instruction", "response1": "output_1", "response2": "output_2"}
    got = s.dataset.to_list()
    assert [[r[c] for c in s.annotators] for r in got] == [
        ["1", "1", "1", "2"],
        ["2", "1", "2", "1"],
        ["tie", "2", "2", "1"],
    ]
    assert [r["mode"] for r in got] == ["1", "2", "2"] and [r["dataset"] for r in got] == [
        "helpful_base",
        "koala",
        "oasst",
    ]
    assert s.notes == ["1 of 4 pairs have fewer than 4 votes: left out, as AlpacaEval leaves them out"]
    assert "non-commercial" in (s.license_note or "")
    ceiling = human_ceiling([[r[c] for c in s.annotators] for r in got], s.kind, resamples=0)
    assert ceiling["rows"] == 3


def test_alpacaeval_human_refuses_a_preference_outside_one_to_two(hub):
    _alpaca_upload([*_alpaca_votes("tips", [1, 1, 1, 2]), *_alpaca_votes("poem", [2, 3, 2, None])])
    with (
        pytest.warns(UserWarning),
        pytest.raises(ConfigError, match=r"2 preference values .* \(row 5: 3; row 7: None\)"),
    ):
        load_benchmark("alpacaeval-human", revision="main")
