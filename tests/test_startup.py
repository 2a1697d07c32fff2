"""Start-up: importing hf_judge and the quick CLI commands load nothing heavy.

`hf-judge --help`, `--version`, `metrics` and `recipes` must answer without
importing datasets, pyarrow, pandas or aiohttp (about a second together);
bench/bench_startup.py measures the time itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HEAVY = ("datasets", "pyarrow", "pandas", "aiohttp")


def _modules_after(code: str) -> dict:
    """Run `code` in a fresh interpreter; return the heavy modules it imported and what it printed."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print("MODULES=" + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
    """)
    env = {k: v for k, v in os.environ.items() if k != "HF_JUDGE_DEBUG"}
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES="))
    return {"heavy": json.loads(line.removeprefix("MODULES=")), "stdout": p.stdout}


def test_import_hf_judge_is_light():
    r = _modules_after("import hf_judge, hf_judge.cli")
    assert r["heavy"] == []


def test_quick_commands_import_nothing_heavy():
    r = _modules_after("""
        from hf_judge.cli import main
        for argv in (["--help"], ["--version"]):
            try:
                main(argv)
            except SystemExit as e:
                assert e.code == 0, (argv, e.code)
        assert main(["metrics"]) == 0
        assert main(["recipes"]) == 0
    """)
    assert r["heavy"] == []
    # the commands did their work: the metric table and the recipe list were printed
    assert "QA_Correctness" in r["stdout"] and "quality" in r["stdout"] and "hf-judge" in r["stdout"]


def test_lazy_public_api():
    r = _modules_after("""
        import hf_judge
        assert sorted(hf_judge._ATTR_TO_SUBMODULE) == hf_judge.__all__  # a new public name needs both
        assert sorted(dir(hf_judge)) == dir(hf_judge) and set(hf_judge.__all__) <= set(dir(hf_judge))
        try:
            hf_judge.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e)
        else:
            raise AssertionError("no AttributeError")
        from hf_judge import ConfigError, load_metric
        assert issubclass(ConfigError, ValueError) and load_metric("QA_Clarity").name == "QA_Clarity"
    """)
    assert r["heavy"] == []  # errors and metrics need none of them
    r = _modules_after("""
        from hf_judge import score_dataset, filter_by_scores
        import hf_judge
        assert hf_judge.score_dataset is score_dataset and callable(filter_by_scores)
    """)
    assert "datasets" in r["heavy"]


def test_imports_under_python_OO_where_docstrings_are_gone():
    """``python -OO`` strips docstrings: score.py formats score_dataset's docstring at import and must not fail."""
    code = "import hf_judge.engine.score, hf_judge.cli.parser; hf_judge.cli.parser.build_parser(); "
    code += "print(hf_judge.engine.score.score_dataset.__doc__)"
    p = subprocess.run([sys.executable, "-OO", "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == "None\n", p.stderr


def test_no_public_name_is_shadowed_by_a_submodule_of_the_same_name():
    """Importing a submodule sets the package's attribute of its name: were ``hf_judge.agreement`` both a
    function and a module, ``from hf_judge import agreement`` would give the module once anything had
    imported it (the card does). So no name of ``__all__`` may be a submodule's name."""
    import pkgutil

    import hf_judge

    modules = {m.name for m in pkgutil.iter_modules(hf_judge.__path__)}
    clashes = sorted(set(hf_judge.__all__) & modules)
    assert not clashes, f"public names that are also submodules: {clashes}"
    import hf_judge.results.card  # noqa: F401 - imports the agreement module, as a push does
    from hf_judge import agreement

    assert callable(agreement) and agreement.__name__ == "agreement"
