"""The CLI's layout (issue 25): one module per command over shared option groups, small functions and modules.

A function's size counts its code lines (not blank, comment or docstring lines).
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parent.parent / "hf_judge" / "cli"
MAX_FUNCTION = 80
MAX_MODULE = 800


def _code_lines(source: list[str], node: ast.AST) -> int:
    docstrings: set[int] = set()
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = set(range(node.lineno, (node.end_lineno or node.lineno) + 1)) - docstrings  # type: ignore[attr-defined]
    return sum(1 for i in lines if source[i - 1].strip() and not source[i - 1].strip().startswith("#"))


def test_no_cli_function_or_module_is_too_long():
    too_long = []
    for path in sorted(CLI.glob("*.py")):
        text = path.read_text()
        source = text.splitlines()
        if len(source) > MAX_MODULE:
            too_long.append(f"{path.name}: {len(source)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _code_lines(source, node) > MAX_FUNCTION:
                too_long.append(f"{path.name}:{node.lineno} {node.name}: {_code_lines(source, node)} code lines")
    assert too_long == [], "split it into named steps"


def test_the_code_line_count_leaves_out_docstrings_comments_and_blank_lines():
    text = 'def f():\n    """Doc\n    string."""\n    # why\n\n    a = 1\n    return a\n'
    assert _code_lines(text.splitlines(), ast.parse(text).body[0]) == 3  # def, a = 1, return


def test_score_run_and_the_batch_files_share_one_set_of_job_options():
    """score, run, batch export and batch import take the same dataset, scoring and settings options, from one
    builder (options.add_job_options), so a new option reaches all of them."""
    import argparse

    from hf_judge.cli.parser import build_parser, subcommands

    def options(p: argparse.ArgumentParser) -> set[str]:
        return {o for a in p._actions for o in a.option_strings}

    commands = subcommands(build_parser())
    score, run = options(commands["score"]), options(commands["run"])
    batch = subcommands(commands["batch"])
    export, import_ = options(batch["export"]), options(batch["import"])
    shared = export - {"--output"}
    assert "--concurrency" in shared and "--metrics" in shared and "--split" in shared
    assert shared <= score and shared <= run and shared <= import_
    assert score - run == {"--example", "--streaming", "--recipe"} and run - score == {"--dataset"}
    saved = {"--output-dir", "--push-to-hub", "--private", "--agreement", "--token", "--overwrite", "--by"}
    assert import_ == shared | saved
