"""The declared engine capabilities: every engine refuses through the one table, and the docs' engine tables
and refusals (docs/reference/engines.md) are the table's (tests/test_matrix.py runs every engine x feature cell it
declares)."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets import Dataset
from helpers import qa_dataset, run_cli

from hf_judge import ConfigError, Judge, Settings, export_batch, score_dataset
from hf_judge.engine import capabilities
from hf_judge.engine.capabilities import No, refusal

ENGINES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "engines.md"
COLUMNS = {"instruction": "question", "output": "answer"}
JUDGE = {"model": "judge", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-test"}  # nothing is sent


def test_the_docs_tables_and_refusals_are_rendered_from_the_capabilities(capsys):
    text = ENGINES_PAGE.read_text(encoding="utf-8")
    hint = "run `python docs/generate_reference.py`"
    assert capabilities.engines_markdown() in text, f"the docs' engine tables differ from the capabilities: {hint}"
    assert capabilities.refusals_markdown() in text, f"the docs' refusals differ from the capabilities: {hint}"
    # `python -m hf_judge.engine.capabilities` prints what the page shows
    assert capabilities.main([]) == 0 and capsys.readouterr().out.strip() in text


def test_the_refusals_list_every_no_cell():
    """Each "no" cell of the table is in the refusals the docs show."""
    listed = capabilities.refusals_markdown()
    for engine, cells in capabilities.CAPABILITIES.items():
        for feature, c in cells.items():
            if isinstance(c, No):
                assert capabilities.ENGINES[engine].title in listed and capabilities.FEATURES[feature] in listed
                assert refusal(engine, feature, url="s3://b/x", columns=["c"]), (engine, feature)
    with pytest.raises(ValueError, match="no engine 'flink'"):
        capabilities.cell("flink", "cascade")


def _ray(**kw):
    pytest.importorskip("ray")
    from hf_judge.ray import score_dataset_on_ray

    return score_dataset_on_ray(qa_dataset(1), ["QA_Clarity"], columns=COLUMNS, **JUDGE, **kw)


# (what is run, the engine and feature whose refusal it must raise, word for word) over the public entry points
CASES = {
    "stream+workers": (
        lambda tmp: score_dataset(
            qa_dataset(2).to_iterable_dataset(), ["QA_Clarity"], columns=COLUMNS, num_workers=2, cache_dir=tmp, **JUDGE
        ),  # fmt: skip
        ("stream", "workers"),
    ),
    "batch+no_cache": (
        lambda _: score_dataset(
            qa_dataset(2), ["QA_Clarity"], columns=COLUMNS, batch=True, use_cache=False, **JUDGE
        ),  # fmt: skip
        ("batch", "no_cache"),
    ),
    "no_wait": (
        lambda tmp: score_dataset(qa_dataset(2), ["QA_Clarity"], columns=COLUMNS, no_wait=True, cache_dir=tmp, **JUDGE),
        ("dataset", "no_wait"),
    ),
    "map+batch": (lambda _: Judge(["QA_Clarity"], batch=True, **JUDGE), ("map", "batch")),
    "map+generator_column": (
        lambda _: Judge(["QA_Clarity"], generator_column="g", **JUDGE),
        ("map", "generator_column"),
    ),
    "map+existing": (
        lambda tmp: Dataset.from_dict({"question": ["q"], "answer": ["a"], "QA_Clarity": [3]}).map(
            Judge(["QA_Clarity"], columns=COLUMNS, cache_dir=tmp, **JUDGE), batched=True
        ),
        ("map", "if_exists"),
    ),
    "export+panel": (
        lambda tmp: export_batch(qa_dataset(1), ["QA_Clarity"], tmp / "r.jsonl", models="a,b", cache_dir=tmp),
        ("batch_files", "batch_panel"),
    ),
    "ray+workers": (lambda tmp: _ray(num_workers=2, cache_dir=tmp), ("ray", "workers")),
    # batch mode on Ray was not refused: the actors sent every request online, at the online price
    "ray+batch": (lambda tmp: _ray(batch=True, cache_dir=tmp), ("ray", "batch")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_engine_refuses_with_the_words_of_the_table(case, tmp_path):
    run, (engine, feature) = CASES[case]
    with pytest.raises(ConfigError) as raised:
        run(tmp_path)
    assert str(raised.value) == refusal(engine, feature, columns=["QA_Clarity"])


def test_the_cli_refuses_a_url_output_without_ray_through_the_table(tmp_path, capfd):
    data = tmp_path / "d.jsonl"
    qa_dataset(1).to_json(data)
    args = ["--column", "instruction=question", "--column", "output=answer", "--output-dir", "s3://b/out"]
    code, _, err = run_cli(capfd, "score", data, "--metrics", "QA_Clarity", "--model", "judge", *args)
    assert code != 0
    assert refusal("dataset", "url_output", url="s3://b/out") in err.replace("\n", " ")


def test_check_looks_only_at_what_it_is_asked():
    s = Settings(model="m", length_control=True, escalate_model="strong", escalate_when="disagreement", samples=2)
    capabilities.check("stream", s, only=("workers",))  # the stream's other refusals are checked where they apply
    with pytest.raises(ConfigError, match="escalate_model"):
        capabilities.check("stream", s)
    assert capabilities.asked(s, stream=True) == ["stream", "cascade", "length_control"]
