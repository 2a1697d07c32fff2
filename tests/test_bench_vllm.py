"""bench/bench_vllm.py without vLLM: it answers --help, refuses a bad engine argument before loading anything, and
the prompts its offline side sends vLLM are exactly the requests hf-judge sends (so the ratio compares like with
like). The measurement itself needs vLLM: docs/performance.md records it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_vllm.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_vllm

        yield bench_vllm
    finally:
        sys.path.remove(str(BENCH.parent))


def test_help_runs_and_names_both_paths():
    p = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for word in ("LLM.chat", "--model-path", "--vllm-python", "--vllm-arg", "--rows", "0.95"):
        assert word in p.stdout, word


def test_a_bad_engine_argument_is_refused_before_any_load(tmp_path):
    p = subprocess.run(
        [sys.executable, str(BENCH), "--model-path", str(tmp_path / "absent"), "--vllm-arg", "=float32"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2
    assert "--vllm-arg takes KEY=VALUE (or a bare KEY: a switch), got '=float32'" in p.stderr
    assert not (tmp_path / "absent").exists()  # nothing was built


def test_engine_arguments_reach_the_offline_engine_typed(bench):
    """`--vllm-arg` text becomes what `vllm.LLM(...)` takes; the server side gets the same text as its flags."""
    assert [bench.engine_value(v) for v in ("2", "0.85", "true", "float32", '{"backend": "guidance"}')] == [
        2, 0.85, True, "float32", {"backend": "guidance"},
    ]  # fmt: skip


def test_offline_prompts_are_the_requests_hf_judge_sends(bench, judge, tmp_path):
    """The messages and schema the bench gives `LLM.chat` equal the bodies score_dataset sends, row for row."""
    from hf_judge import score_dataset

    judge.configure(record=True)
    ds = bench.dataset(12)
    messages, schema = bench.rendered("QA_Correctness", ds)
    score_dataset(
        ds, ["QA_Correctness"], model="judge", base_url=judge.base_url, api_key="x", columns=bench.COLUMNS,
        temperature=0.0, max_tokens=64, retries=0, use_cache=False, progress=False,
    )  # fmt: skip
    bodies = [json.loads(b) if isinstance(b, (str, bytes)) else b for b in judge.stats()["bodies"]]
    assert len(bodies) == len(messages) == 12
    sent = sorted(json.dumps(b["messages"]) for b in bodies)
    assert sent == sorted(json.dumps(m) for m in messages)
    assert {json.dumps(b["response_format"]["json_schema"]["schema"], sort_keys=True) for b in bodies} == {
        json.dumps(schema, sort_keys=True)
    }
    assert {(b["temperature"], b["max_tokens"]) for b in bodies} == {(0.0, 64)}
    assert len(set(sent)) == 12  # every row's prompt differs (no accidental prefix-cache-only benchmark)
