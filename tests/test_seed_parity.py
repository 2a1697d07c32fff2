"""Seed parity: the seed tool's config.yaml, JSONL layout, id tracking and merge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_cli

from hf_judge.__main__ import main as seed_main
from hf_judge.cli.seed import merge_scores, run_seed_config
from hf_judge.errors import ConfigError

SEED_CONFIG = """\
# API and Model Configuration
openai:
  api_key: "env:OPENAI_API_KEY" # or use "env:OPENAI_API_KEY" to read from environment variables
  base_url: "{base_url}" # or your custom base url
model: "gpt-4.1-nano"
concurrency: 1024 # Number of concurrent requests to the API, 128 ~ 1024 is recommended
timeout: 30 # Timeout for each API request in seconds
retry: 3 # Number of retries for failed API calls
chunk_size: 2048 # Number of items to read from the input file at once
temperature: 0.1 # The sampling temperature, between 0 and 2
top_p: 1.0 # The nucleus sampling probability
# Directory Configuration
input_path: "data/example_input_add_key.jsonl"
output_path: "output"
prompts_dir: "{prompts_dir}"
id_track_file: "output/scored_ids.txt" # Add this line to enable ID tracking
metrics:
  Q: # Metrics for Question-only evaluation
    - "All"
    # - "Clarity"
  QA: # Metrics for Question-Answer evaluation
    - "All"
    # - "Meaningness"
"""


def _write_items(path: Path, ids) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for i in ids:
            f.write(
                json.dumps(
                    {
                        "id": i,
                        "instruction": f"seed question {i}: \\frac{{1}}{{2}}?",
                        "output": f"answer {i}",
                        "extra": i,
                    }
                )
                + "\n"
            )


@pytest.fixture
def project(tmp_path, judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    ids = [f"item-{i}" for i in range(15)] + list(range(100, 105))  # string and integer ids, kept as they are
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ids)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (tmp_path / "config.yaml").write_text(SEED_CONFIG.format(base_url=judge.base_url, prompts_dir="prompts"))
    return tmp_path, ids


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_seed_config_runs_unchanged(project, judge):
    root, ids = project
    run_seed_config(root / "config.yaml", cache_dir=root / "cache")
    scored = _read(root / "output" / "example_input_add_key_scored.jsonl")
    assert [r["id"] for r in scored] == ids  # input order, ids as given
    first = scored[0]["scores"]
    assert set(first) == {"Q", "QA"}
    assert set(first["Q"]["All"]) == {
        "Clarity",
        "Coherence",
        "Completeness",
        "Complexity",
        "Correctness",
        "Meaningfulness",
    }
    assert "Relevance" in first["QA"]["All"]
    assert _read(root / "output" / "example_input_add_key_errors.jsonl") == []
    # one JSON id per line: "7" is not 7
    assert (root / "output" / "scored_ids.txt").read_text().split() == [json.dumps(i) for i in ids]
    assert judge.stats()["requests"] == 40
    run_seed_config(root / "config.yaml", cache_dir=root / "cache2")  # fresh cache: only id tracking can save us
    assert judge.stats()["requests"] == 40
    _write_items(root / "data" / "example_input_add_key.jsonl", [f"new-{i}" for i in range(10)])
    run_seed_config(root / "config.yaml", cache_dir=root / "cache3")
    assert judge.stats()["requests"] == 60  # only the 10 new items x 2 metrics
    scored = _read(root / "output" / "example_input_add_key_scored.jsonl")
    assert len(scored) == 30 and len({json.dumps(r["id"]) for r in scored}) == 30


def test_failed_metric_is_not_tracked_and_is_retried(project, judge):
    root, ids = project
    config = root / "config.yaml"
    config.write_text(config.read_text().replace("retry: 3 ", "retry: 0 "))  # fails at once, not after 3 backoffs
    judge.configure(faults=[{"fault": "out_of_range", "match": "seed question item-3:"}])
    run_seed_config(root / "config.yaml", cache_dir=root / "cache")
    errors = _read(root / "output" / "example_input_add_key_errors.jsonl")
    assert {(e["id"], e["mode"], e["metric"]) for e in errors} == {("item-3", "Q", "All"), ("item-3", "QA", "All")}
    assert errors[0]["item"]["extra"] == "item-3" and errors[0]["error"]["kind"] == "out_of_range"
    assert "item-3" not in (root / "output" / "scored_ids.txt").read_text().split()
    judge.reset()
    run_seed_config(root / "config.yaml", cache_dir=root / "cache")
    assert judge.stats()["requests"] == 2
    scored = _read(root / "output" / "example_input_add_key_scored.jsonl")
    assert [r["id"] for r in scored].count("item-3") == 1
    assert _read(root / "output" / "example_input_add_key_errors.jsonl") == []


def test_seed_style_prompt_file_with_latex(tmp_path, judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["a", "b"])
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "QA_Correctness.txt").write_text(
        "Judge the answer. Formulas like \\frac{a}{b} and sets {x | x > 0} stay as they are.\n"
        "Question: {instruction}\nAnswer: {output}\n"
        'Reply as JSON: {"reason": "why", "score": 7}\n'
    )
    cfg = SEED_CONFIG.format(base_url=judge.base_url, prompts_dir="prompts").replace(
        '    - "All"\n    # - "Meaningness"', '    - "Correctness"'
    )
    cfg = cfg.replace('  Q: # Metrics for Question-only evaluation\n    - "All"\n', "  Q: []\n")
    (tmp_path / "config.yaml").write_text(cfg)
    judge.configure(record=True)
    run_seed_config(tmp_path / "config.yaml", cache_dir=tmp_path / "cache")
    # both items are in flight at once: the server may receive b's request first
    texts = sorted(b["messages"][-1]["content"] for b in judge.stats()["bodies"])
    assert len(texts) == 2 and all("\\frac{a}{b} and sets {x | x > 0}" in t for t in texts)
    assert "Question: seed question a: \\frac{1}{2}?" in texts[0]
    assert "Question: seed question b: \\frac{1}{2}?" in texts[1]
    scored = _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")
    assert set(scored[0]["scores"]["QA"]["Correctness"]) == {"reason", "score"}


def test_config_errors(tmp_path, judge, monkeypatch):
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["a"])
    (tmp_path / "prompts").mkdir()
    cfg = SEED_CONFIG.format(base_url=judge.base_url, prompts_dir="prompts")
    (tmp_path / "config.yaml").write_text(cfg + "colour: blue\n")
    with pytest.raises(ConfigError, match="colour"):
        run_seed_config(tmp_path / "config.yaml")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "config.yaml").write_text(cfg)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        run_seed_config(tmp_path / "config.yaml")
    assert judge.stats()["requests"] == 0


def _nested_under_openai(cfg: str) -> str:
    """The seed's config with its model keys (``model`` ... ``top_p``) indented under ``openai:``."""
    keys = ("model:", "concurrency:", "timeout:", "retry:", "chunk_size:", "temperature:", "top_p:")
    return "\n".join("  " + line if line.startswith(keys) else line for line in cfg.splitlines()) + "\n"


def test_the_model_keys_nested_under_openai_are_read_as_at_the_top_level(tmp_path, judge, monkeypatch):
    """The seed lists model .. top_p right under ``openai:``'s keys, so a config may nest them there: it runs with
    those values (retry 0: the fault fails at once), and one that also gives a key at the top level with another
    value is refused naming both, before any request."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["a", "b"])
    (tmp_path / "prompts").mkdir()
    cfg = _nested_under_openai(
        SEED_CONFIG.format(base_url=judge.base_url, prompts_dir="prompts").replace("retry: 3 ", "retry: 0 ")
    )
    assert "\n  model: " in cfg and "\nmodel:" not in cfg
    (tmp_path / "config.yaml").write_text(cfg)
    judge.configure(record=True, faults=[{"fault": "out_of_range", "match": "seed question a:", "times": 1}])
    run_seed_config(tmp_path / "config.yaml", cache_dir=tmp_path / "cache")
    bodies = judge.stats()["bodies"]
    assert {b["model"] for b in bodies} == {"gpt-4.1-nano"} and {b["temperature"] for b in bodies} == {0.1}
    errors = _read(tmp_path / "output" / "example_input_add_key_errors.jsonl")
    assert {(e["id"], e["error"]["attempts"]) for e in errors} == {("a", 1)}  # retry: 0 from under openai:
    assert judge.stats()["requests"] == 4
    (tmp_path / "config.yaml").write_text(cfg + 'model: "other-judge"\n')
    clash = "'model' is 'other-judge' at the top level and 'gpt-4.1-nano' under 'openai'"
    with pytest.raises(ConfigError, match=clash):
        run_seed_config(tmp_path / "config.yaml", cache_dir=tmp_path / "cache")
    assert judge.stats()["requests"] == 4


def test_merge(tmp_path):
    scores = tmp_path / "s.jsonl"
    data = tmp_path / "d.jsonl"
    scores.write_text(
        "\n".join(
            json.dumps(
                {"id": i, "scores": {"QA": {"Clarity": {"reason": "r", "score": i}}, "Q": {"All": {"Clarity": 5}}}}
            )
            for i in (1, 3, 99)
        )
        + "\n"
    )
    data.write_text("\n".join(json.dumps({"id": i, "text": f"t{i}"}) for i in (1, 2, 3)) + "\n")
    report = merge_scores(scores, data, tmp_path / "out.jsonl")
    out = _read(tmp_path / "out.jsonl")
    assert [r["id"] for r in out] == [1, 2, 3] and out[1]["scores"] is None
    assert out[0]["scores"]["QA"]["Clarity"]["score"] == 1 and out[2]["scores"]["Q"]["All"]["Clarity"] == 5
    assert out[0]["text"] == "t1"
    assert report == {"items": 3, "with_scores": 2, "without_scores": 1, "unknown_ids": [99]}


def test_python_m_hf_judge_and_merge_cli(project, judge, capfd, monkeypatch):
    root, ids = project
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    monkeypatch.chdir(root)
    code, out, err = run_cli(capfd, "--config-path", root / "config.yaml", "--cache-dir", root / "c", entry=seed_main)
    assert code == 0, err
    assert "requests       40" in out
    code, out, err = run_cli(
        capfd,
        "merge",
        "--scores",
        root / "output" / "example_input_add_key_scored.jsonl",
        "--data",
        root / "data" / "example_input_add_key.jsonl",
        "--output",
        root / "merged.jsonl",
    )
    assert code == 0, err
    merged = _read(root / "merged.jsonl")
    assert len(merged) == 20 and all(r["scores"]["QA"]["All"] for r in merged)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


def _seed_project(root: Path, judge, metrics: str) -> Path:
    (root / "prompts").mkdir(exist_ok=True)
    cfg = SEED_CONFIG.format(base_url=judge.base_url, prompts_dir="prompts")
    cfg = cfg[: cfg.index("metrics:")] + metrics
    (root / "config.yaml").write_text(cfg)
    return root / "config.yaml"


def test_all_and_a_single_metric_of_one_mode_both_run(tmp_path, judge, monkeypatch):
    # the seed README's config with one single metric uncommented
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["a", "b", 3])
    metrics = 'metrics:\n  Q:\n    - "All"\n    - "Clarity"\n  QA:\n    - "All"\n    - "Meaningness"\n'
    config = _seed_project(tmp_path, judge, metrics)
    run_seed_config(config, cache_dir=tmp_path / "cache")
    assert judge.stats()["requests"] == 12
    scored = _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")
    assert [r["id"] for r in scored] == ["a", "b", 3]
    for r in scored:
        qa, q = r["scores"]["QA"], r["scores"]["Q"]
        # a single metric is keyed by the config's own spelling, as before
        assert set(qa) == {"All", "Meaningness"} and set(q) == {"All", "Clarity"}
        assert set(qa["All"]) == {
            "Relevance",
            "Clarity",
            "Coherence",
            "Completeness",
            "Complexity",
            "Correctness",
            "Meaningfulness",
        }
        assert set(qa["Meaningness"]) == {"reason", "score"} and set(q["Clarity"]) == {"reason", "score"}
        assert all(isinstance(v, int) and 1 <= v <= 10 for v in [*qa["All"].values(), *q["All"].values()])
        assert isinstance(qa["Meaningness"]["score"], int) and isinstance(qa["Meaningness"]["reason"], str)
    assert _read(tmp_path / "output" / "example_input_add_key_errors.jsonl") == []
    # the All's Meaningfulness is the All call's own answer, not the single metric's
    alone = tmp_path / "alone"
    _write_items(alone / "data" / "example_input_add_key.jsonl", ["a", "b", 3])
    run_seed_config(_seed_project(alone, judge, 'metrics:\n  QA:\n    - "All"\n'), cache_dir=tmp_path / "cache")
    assert judge.stats()["requests"] == 12  # same requests: all from the reply store
    alone_scored = _read(alone / "output" / "example_input_add_key_scored.jsonl")
    by_id = {json.dumps(r["id"]): r["scores"]["QA"]["All"] for r in alone_scored}
    assert all(r["scores"]["QA"]["All"] == by_id[json.dumps(r["id"])] for r in scored)


def test_string_and_integer_ids_are_two_items(tmp_path, judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_lines(
        tmp_path / "data" / "example_input_add_key.jsonl",
        [
            json.dumps({"id": 7, "instruction": "integer seven", "output": "x"}),
            json.dumps({"id": "7", "instruction": "string seven", "output": "y"}),
        ],
    )
    config = _seed_project(tmp_path, judge, 'metrics:\n  QA:\n    - "All"\n')
    judge.configure(faults=[{"fault": "out_of_range", "match": "integer seven"}])
    run_seed_config(config, cache_dir=tmp_path / "cache")
    assert [r["id"] for r in _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")] == ["7"]
    assert [e["id"] for e in _read(tmp_path / "output" / "example_input_add_key_errors.jsonl")] == [7]
    judge.reset()
    run_seed_config(config, cache_dir=tmp_path / "cache")  # the integer 7 failed: it is scored now, not skipped as "7"
    assert judge.stats()["requests"] == 1
    scored = _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")
    assert [r["id"] for r in scored] == ["7", 7] and [type(r["id"]) for r in scored] == [str, int]
    assert (tmp_path / "output" / "scored_ids.txt").read_text() == '"7"\n7\n'
    run_seed_config(config, cache_dir=tmp_path / "cache2")  # a fresh cache: only the track file skips them
    assert judge.stats()["requests"] == 1
    assert len(_read(tmp_path / "output" / "example_input_add_key_scored.jsonl")) == 2


def test_track_file_written_by_the_seed_tool_is_read(tmp_path, judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["item-1", "item-2", 3])
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "scored_ids.txt").write_text("item-1\n3\n")  # bare strings, as the seed wrote them
    run_seed_config(_seed_project(tmp_path, judge, 'metrics:\n  QA:\n    - "All"\n'), cache_dir=tmp_path / "cache")
    assert judge.stats()["requests"] == 1
    assert [r["id"] for r in _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")] == ["item-2"]


@pytest.mark.parametrize(
    "bad, message",
    [
        ('{"instruction": "no id here", "output": "x"}', "line 3: no 'id' field"),
        # one line number, the file's (not also the parser's "line 1")
        ('{"id": 3, "instruction": "cut', "line 3: not valid JSON (Invalid control character at column 30);"),
        ('[3, "not an object"]', "line 3: not a JSON object"),
    ],
)
def test_bad_input_line_is_a_config_error_naming_it(tmp_path, judge, monkeypatch, capfd, bad, message):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    data = tmp_path / "data" / "example_input_add_key.jsonl"
    _write_lines(data, [json.dumps({"id": i, "instruction": f"q{i}", "output": "a"}) for i in (1, 2)] + [bad])
    config = _seed_project(tmp_path, judge, 'metrics:\n  QA:\n    - "All"\n')
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        run_seed_config(config, cache_dir=tmp_path / "cache")
    assert str(data) in str(e.value)
    for entry, argv in ((seed_main, ["--config-path", config]), (None, ["run", config])):
        code, _, err = run_cli(capfd, *argv, "--cache-dir", tmp_path / "c", entry=entry)
        assert code == 2, err
        assert message in err and "Traceback" not in err and "DatasetGenerationError" not in err
    assert judge.stats()["requests"] == 0


def test_merge_keeps_id_types(tmp_path):
    scores, data = tmp_path / "s.jsonl", tmp_path / "d.jsonl"
    _write_lines(
        scores,
        [json.dumps({"id": "7", "scores": {"QA": {"All": {"Clarity": 2}}}}), json.dumps({"id": 8, "scores": {}})],
    )
    _write_lines(data, [json.dumps({"id": 7}), json.dumps({"id": "7"})])
    report = merge_scores(scores, data, tmp_path / "out.jsonl")
    assert [r["scores"] for r in _read(tmp_path / "out.jsonl")] == [None, {"QA": {"All": {"Clarity": 2}}}]
    assert report["unknown_ids"] == [8]


def test_own_seed_style_metric_is_written(tmp_path, judge, monkeypatch):
    # the seed files are written with the metrics the run scored, from prompts_dir, not re-read from the built-ins
    monkeypatch.setenv("OPENAI_API_KEY", "sk-seed-test")
    _write_items(tmp_path / "data" / "example_input_add_key.jsonl", ["a", 2])
    config = _seed_project(tmp_path, judge, 'metrics:\n  QA:\n    - "Depth"\n')
    (tmp_path / "prompts" / "QA_Depth.txt").write_text(
        'How deep is {output}? Reply as JSON: {"why": "...", "score": 7}\n'
    )
    run_seed_config(config, cache_dir=tmp_path / "cache")
    scored = _read(tmp_path / "output" / "example_input_add_key_scored.jsonl")
    assert [r["id"] for r in scored] == ["a", 2]
    assert all(set(r["scores"]["QA"]["Depth"]) == {"why", "score"} for r in scored)
