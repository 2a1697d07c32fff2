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
            "original_id": str(1000 + i),
            "source": "mmlu-pro-math",
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
