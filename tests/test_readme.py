"""The README's shell examples run as written, from a folder outside the checkout.

Every ```bash block of README.md is either run (RUN) or listed with the reason it
is not (NOT_RUN): a new block fails test_every_bash_block_is_classified until it is
put in one of them. Blocks run with `bash -euo pipefail`, no API key, the Hub
switched off, and a fresh cache. A leading `pip install ... &&` is the one step not
run: the test environment is that install (`.ci/run` installs `.[test,local,wire]`).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_from_disk
from helpers import EXAMPLE_ROWS, QA_ALL, llama_servers_with, run_cli

from hf_judge.transport.local import BUNDLED_MODEL_FILE

README = Path(__file__).resolve().parent.parent / "README.md"

# key: a piece of the block that names it -> what its output must contain
RUN = {
    "hf-judge score --example --model local": ["saved to example-judged"],
}
# key: a piece of the block -> why the test does not run it (the examples of the docs moved to docs/: every one
# runs in tests/test_docs_examples.py, as do the README's library and CLI examples)
NOT_RUN = {
    'pip install -e ".[test,local,wire]" && python -m pytest -q -n 2': "the test command itself: CI runs it",
    "hf-judge score me/reviews": "tests/test_docs_examples.py runs it against the loopback judge and Hub",
}
# blocks that start the local llama.cpp judge: slow, and they need the `local` extra
REAL_SERVER = {"hf-judge score --example --model local"}


def bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def _key(block: str) -> str:
    keys = [k for k in (*RUN, *NOT_RUN) if k in block]
    assert len(keys) == 1, f"README block matches {len(keys)} keys of RUN/NOT_RUN, not 1: {keys}\n{block}"
    return keys[0]


def test_every_bash_block_is_classified():
    blocks = bash_blocks()
    assert blocks
    unclassified = [b for b in blocks if not any(k in b for k in (*RUN, *NOT_RUN))]
    hint = "add these README blocks to RUN or NOT_RUN in tests/test_readme.py:\n"
    assert not unclassified, hint + "\n".join(unclassified)
    keys = [_key(b) for b in blocks]
    stale = sorted((set(RUN) | set(NOT_RUN)) - set(keys))
    assert not stale, f"no README block matches {stale}: update tests/test_readme.py"


def _install_words(line: str) -> list[str] | None:
    """A line's leading `pip install ...` command (after any `VAR=value` words), split; None where it has none."""
    head = line.partition(" && ")[0]
    words = shlex.split(head)
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words = words[1:]
    return words if words[:2] == ["pip", "install"] else None


def _without_install(block: str) -> str:
    """Drop a leading `[VAR=value ...] pip install ... &&` (each line of the block)."""
    lines = []
    for line in block.splitlines():
        if _install_words(line) is not None:
            head, sep, rest = line.partition(" && ")
            assert sep, f"a `pip install` line with nothing after it: {line}"
            line = rest
        lines.append(line)
    return "\n".join(lines)


def test_the_first_command_builds_the_local_judge_as_ci_does():
    """The README's first command builds llama.cpp with the flags .ci/run builds with and the local judge's rebuild
    hint names (no -march=native: a native build dies on a CPU whose AMX the OS does not enable)."""
    from hf_judge.transport.local import PORTABLE_CMAKE_ARGS

    first = bash_blocks()[0].splitlines()[0]
    assert first.startswith(f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install ".[local,plots]" && '), first
    assert _without_install(first) == "hf-judge score --example --model local"
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in ci


def _shown_output() -> str:
    """The ```text block the README shows after its first command: what that command prints."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index("```bash\n" + bash_blocks()[0]) :]
    return re.search(r"^```text\n(.*?)^```", after, flags=re.S | re.M).group(1)


def _pattern(line: str) -> re.Pattern:
    """A shown line as a pattern: its numbers any number, its spaces any spacing."""
    pieces = re.split(r"(\d+(?:[.,]\d+)*|\s+)", line.strip())
    return re.compile("".join(r"\d+(?:[.,]\d+)*" if p[0].isdigit() else r"\s+" if p.isspace() else re.escape(p)
                              for p in pieces if p))  # fmt: skip


def check_saved_lines(output: str) -> None:
    """The README's shown output, from its `saved to` line on (where the result, its pictures and its page went),
    is what ``output`` (the first command's stdout) says there, line for line."""
    shown = _shown_output().splitlines()
    printed = output.splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("saved to"))
    shown = shown[next(i for i, line in enumerate(shown) if line.startswith("saved to")) :]
    assert len(shown) == len(printed[start:]), f"README shows:\n{chr(10).join(shown)}\nprinted:\n{output}"
    for want, got in zip(shown, printed[start:], strict=True):
        assert _pattern(want).fullmatch(got.strip()), f"README shows {want!r}, the command printed {got!r}"


def test_the_readmes_example_output_ends_with_what_its_command_prints(judge, capfd, monkeypatch, tmp_path):
    """The README's first command, with the extras its `pip install` names (no `plots`: no matplotlib) and the
    loopback judge in place of the local one, prints where its result, pictures and page went as the README shows
    it (issue 40: the README showed 7 PNGs that `.[local]` alone does not draw)."""
    first = bash_blocks()[0].splitlines()[0]
    install = _install_words(first)
    extras = re.search(r"\[(.*)\]", next(w for w in install if "[" in w)).group(1).split(",")
    if "plots" not in extras:
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # as without the plots extra: nothing imports it
    args = shlex.split(_without_install(first))
    assert args[:3] == ["hf-judge", "score", "--example"] and args[3:] == ["--model", "local"], args
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, err = run_cli(capfd, *args[1:3], "--model", "judge", "--base-url", judge.base_url)
    assert code == 0, err
    check_saved_lines(out)


def test_ci_runs_the_readmes_test_command():
    """The README's test command (its `pip install ... &&` aside) is a line of .ci/run, word for word."""
    (block,) = [b for b in bash_blocks() if "python -m pytest" in b]
    command = _without_install(block).strip()
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines(), f"{command!r} is not a line of .ci/run"


# How long the test suite and the llama.cpp build take: measured, and said with what they were measured on (issue 40:
# "~4 minutes" was said of a suite that took 6 min 41 s on a quiet machine and 14-27 min on a loaded one).
MEASURED_ON = "measured on 2 quiet cores of an x86-64 VM (AMD EPYC, 2026-11)"
SUITE_TIME = f"6 min 41 s {MEASURED_ON}, 14-27 min when other jobs load them"
BUILD_TIME = f"4-8 min {MEASURED_ON}, 30 min when other jobs load them"
# file -> the measured statements it makes; every other "<n> min" / "<n> minutes" there is a claim nobody measured
TIMED = {
    "README.md": (SUITE_TIME, BUILD_TIME),
    "CONTRIBUTING.md": (SUITE_TIME,),
    "docs/tutorials/first-hour.md": (BUILD_TIME,),
}


def test_the_times_said_are_the_measured_ones_with_what_they_were_measured_on():
    """The README says once how long the tests and the llama.cpp build take, as measured and on what; CONTRIBUTING
    and the first-hour tutorial say the same words, and none of them states another duration in minutes."""
    for name, statements in TIMED.items():
        text = " ".join((README.parent / name).read_text(encoding="utf-8").split())
        for statement in statements:
            assert statement in text, f"{name} does not say {statement!r}"
            assert name != "README.md" or text.count(statement) == 1, f"the README says {statement!r} twice"
        said = [m for st in statements for m in re.finditer(re.escape(st), text)]
        for m in re.finditer(r"~?\d+(?:-\d+)?\s*(?:min|minutes)\b", text):
            inside = any(s.start() <= m.start() < s.end() for s in said)
            assert inside, f"{name}: {text[max(0, m.start() - 60) : m.end() + 20]!r} is a time nobody measured"


def _blocks_to_run():
    for key in RUN:
        marks = [pytest.mark.real_server, pytest.mark.timeout(900)] if key in REAL_SERVER else []
        yield pytest.param(key, marks=marks, id=key.split(" && ")[0])


@pytest.mark.parametrize("key", list(_blocks_to_run()))
def test_readme_block_runs_as_written(key, tmp_path):
    (block,) = [b for b in bash_blocks() if key in b]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HF_TOKEN")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # this environment's hf-judge
        HF_JUDGE_CACHE=str(tmp_path / "cache"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    models = tmp_path / "cache" / "models"
    if key in REAL_SERVER:
        from llama_fixture import ensure_model

        # the GGUF this machine already assembled, so the block does not spend 250 MB on its own copy
        models.mkdir(parents=True)
        (models / BUNDLED_MODEL_FILE).symlink_to(ensure_model())
    work = tmp_path / "work"  # outside the checkout
    work.mkdir()
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", _without_install(block)], cwd=work, env=env,
                       capture_output=True, text=True, timeout=840)  # fmt: skip
    assert p.returncode == 0, f"exit {p.returncode}\n$ {block}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    for text in RUN[key]:
        assert text in p.stdout, f"{text!r} not in the output of\n$ {block}\n{p.stdout}"
    if key in REAL_SERVER:
        check_local_example(p, work / "example-judged", models / BUNDLED_MODEL_FILE)


def check_local_example(p: subprocess.CompletedProcess, folder: Path, model: Path) -> None:
    """`hf-judge score --example --model local` started its judge, scored every row, and left no server behind.

    The one run of the local judge from start to finish (the README's first example); tests/test_local.py
    interrupts it."""
    assert "local judge gemma-3-270m-q4_k_m ready at http://127.0.0.1:" in p.stderr
    assert "Real scores need a real judge" in p.stderr
    out = load_from_disk(folder)
    train, errors = out["train"], out["errors"]
    assert len(train) == EXAMPLE_ROWS and train.column_names == ["instruction", "output", *QA_ALL]
    failed = set(errors["row"])
    for col in QA_ALL:  # every row scored in range, or in errors with its kind
        for row, v in enumerate(train[col]):
            assert (v is None) if row in failed else (1 <= v <= 10), (col, row, v, errors.to_list())
    assert f"rows           train: {EXAMPLE_ROWS}" in p.stdout
    check_saved_lines(p.stdout)
    assert llama_servers_with(str(model)) == []
