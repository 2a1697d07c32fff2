"""The declared engine capabilities: every engine refuses through the one table, and the docs' engine tables
and refusals (docs/reference/engines.md) are the table's (tests/test_matrix.py runs every engine x feature cell it
declares)."""

from __future__ import annotations

from pathlib import Path

import pytest
from datasets import Dataset
from helpers import qa_dataset, run_cli

from hf_judge import ConfigError, Judge, Settings, export_batch, import_batch, score_dataset
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
                assert refusal(engine, feature, url="s3://b/x", columns=["c"], provider="gemini"), (engine, feature)
    with pytest.raises(ValueError, match="no engine 'flink'"):
        capabilities.cell("flink", "cascade")


def _file(path: Path) -> Path:
    path.write_text("")
    return path


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
    # a batch file is OpenAI's format: before, batch_api refused it by a check of its own, outside the table
    "export+anthropic": (
        lambda tmp: export_batch(
            qa_dataset(1), ["QA_Clarity"], tmp / "r.jsonl", model="claude-sonnet-4-5", cache_dir=tmp
        ),
        ("batch_files", "runner_format"),
    ),
    "import+anthropic": (
        lambda tmp: import_batch(
            qa_dataset(1),
            ["QA_Clarity"],
            _file(tmp / "out.jsonl"),
            columns=COLUMNS,
            cache_dir=tmp,
            **{**JUDGE, "provider": "anthropic"},
        ),  # fmt: skip
        ("batch", "runner_format"),
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
    provider = "anthropic" if feature == "runner_format" else ""
    assert str(raised.value) == refusal(engine, feature, columns=["QA_Clarity"], provider=provider)


def test_the_cli_refuses_a_url_output_without_ray_through_the_table(tmp_path, capfd):
    data = tmp_path / "d.jsonl"
    qa_dataset(1).to_json(data)
    args = ["--column", "instruction=question", "--column", "output=answer", "--output-dir", "s3://b/out"]
    code, _, err = run_cli(capfd, "score", data, "--metrics", "QA_Clarity", "--model", "judge", *args)
    assert code != 0
    assert refusal("dataset", "url_output", url="s3://b/out") in err.replace("\n", " ")


@pytest.mark.parametrize(("flag", "feature"), [("--streaming", "stream"), ("--recipe", "filters")])
def test_the_cli_refuses_what_spark_cannot_do_through_the_table(flag, feature, tmp_path, capfd):
    """Before, --spark's refusals of --streaming and a recipe's filters were two checks of the command line's
    own, outside the table (and so outside the docs' list of refusals)."""
    data = tmp_path / "d.jsonl"
    qa_dataset(1).to_json(data)
    args = ["--column", "instruction=question", "--column", "output=answer", "--spark"]
    if flag == "--recipe":
        recipe = tmp_path / "r.yaml"
        recipe.write_text("metrics: [QA_Clarity]\nfilters: {min: {QA_Clarity: 5}}\n")
        args += ["--recipe", recipe]
    else:
        args += ["--streaming", "--metrics", "QA_Clarity"]
    code, _, err = run_cli(capfd, "score", data, "--model", "judge", "--base-url", JUDGE["base_url"], *args)
    assert code == 2
    assert refusal("spark", feature) in err.replace("\n", " ")


def test_check_looks_only_at_what_it_is_asked():
    s = Settings(model="m", length_control=True, escalate_model="strong", escalate_when="disagreement", samples=2)
    capabilities.check("stream", s, only=("workers",))  # the stream's other refusals are checked where they apply
    with pytest.raises(ConfigError, match="escalate_model"):
        capabilities.check("stream", s)
    assert capabilities.asked(s, stream=True) == ["stream", "cascade", "length_control"]


# Every ConfigError an engine module raises outside capabilities.check, by the function that raises it: each a check
# of the input's values (a missing column or file, a bad value, a secret given as a value, a missing dependency),
# never a refusal of what an engine cannot do, which is a cell of the table (issue 41's audit: 49 raises in 15
# modules; the one refusal among them, batch_api's of a batch file for a judge not in OpenAI's format, and the
# command line's two for --spark, are the table's now).
BAD_INPUT = {
    "batch": {"read_output": "a runner's output that answers no exported request"},
    "batch_files": {"import_batch": "no such output file"},
    "batch_lines": {"add": "one request over batch_max_bytes", "refuse_requests_file": "a requests file given"},
    "cascade": {
        "check_disagreement": "escalate_when=disagreement with one reply a row",
        "check_margins": "a margin on no score column",
        "check_strong_samples": "escalate_samples at temperature 0",
    },
    "choose": {
        "_candidates": "no candidate judge",
        "_from_file": "labels of other data",
        "_kept": "no labelled row",
        "_kind_of": "metrics of different kinds",
        "_labelled": "labels given twice, a missing column",
        "_one_split": "several splits",
        "choose_judge": "model= given",
    },
    "choose_checks": {
        "check_items": "item columns the data lacks",
        "check_recorded": "a recorded judge's column missing or of other values",
    },
    "choose_rules": {"check_votes": "vote columns the data lacks, or votes on a metric not pairwise"},
    "choose_output": {"check_output_dir": "an output folder of other files"},
    "choose_push": {"check_push": "no token, a bad repo name"},
    "job": {"cache_location": "storage options or a local copy without a URL"},
    "prepare": {
        "as_splits": "not a dataset, a foreign errors split",
        "build_plans": "a column map that is not names",
        "check_samples": "samples at temperature 0",
        "existing_columns": "score columns already there",
        "preflight": "text where an image goes",
        "resolve_api_key": "no API key",
        "stream_splits": "a foreign errors split",
        "streams_as_one": "a DatasetDict mixing streamed and loaded splits",
    },
    "ray": {"_check_address": "no Ray cluster there", "score_dataset_on_ray": "Ray not installed"},
    "ray_output": {"__init__": "a bad output URL", "check": "an output URL of other files"},
    "score": {"score_checked": "a bad if_exists"},
    "spark": {
        "check_key": "the key's variable unset",
        "_step": "a bad batch_size",
        "refuse_secrets_in_the_plan": "a secret given as a value (it would travel in Spark's plan)",
    },
    "spark_run": {"hub_frames": "no such split, no reader", "spark_session": "no Spark, no Java, another session"},
    "transform": {"_as_columns": "a batch of uneven columns"},
}


def _config_errors(path: Path) -> set[str]:
    """The functions of a module that raise a ConfigError themselves."""
    import ast

    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            call = child.exc if isinstance(child, ast.Raise) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "ConfigError":
                found.add(function)
            named = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, child.name if named else function)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_an_engine_refuses_a_feature_only_through_the_table():
    """The engines' ConfigErrors outside capabilities.check are the input checks listed in BAD_INPUT: a new one is
    either a cell of the table (an engine that cannot do a feature: its words are the docs' list of refusals) or
    an input check added to the list, with what it checks."""
    engine_dir = Path(capabilities.__file__).parent
    raised = {p.stem: _config_errors(p) for p in sorted(engine_dir.glob("*.py")) if p.stem != "capabilities"}
    raised = {m: fs for m, fs in raised.items() if fs}
    assert raised == {m: set(fs) for m, fs in BAD_INPUT.items()}
    assert _config_errors(engine_dir / "capabilities.py") == {"check"}
