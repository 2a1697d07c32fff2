"""Every example of the README and the docs site runs (issue 37), with Sybil reading the pages.

Each ```python and ```bash block of README.md and docs/**/*.md runs against the loopback servers, each page in a
fresh temporary folder (one test per page), with the environment a reader has after the set-up step:

- ``OPENAI_BASE_URL``: the loopback judge (any model name gets valid replies), ``OPENAI_API_KEY`` a test key;
  a page with ``<!-- examples: judge=batch -->`` gets the loopback batch server there instead (it answers
  online as the judge does, and runs batches);
- ``HF_ENDPOINT``: the loopback Hub, pre-seeded with ``me/reviews`` (question/answer, 20 rows), ``HF_TOKEN``;
- ``HF_JUDGE_CACHE``: a temporary folder; ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``: the loopback
  Anthropic server, on pages that mention Anthropic;
- ``hf-judge`` on ``PATH`` runs this checkout's code.

Python blocks of one page share a namespace, in order; bash blocks run with ``bash -euo pipefail``. A leading
``pip install ... &&`` is not run (the test environment is that install). A ```text block right after a code
block is that block's expected output: each non-blank line of it must appear in the output (stdout and stderr
together), runs of digits matching any number and runs of spaces any spacing; after ``<!-- output: exact -->``
the output must equal it. ``<!-- skip: the reason -->`` before a block leaves it out (and its output), and
``<!-- invisible-code-block: python -->`` ... ``-->`` runs code the page does not show. At most
``MAX_SKIPPED`` of the blocks may be skipped: ``test_few_blocks_are_skipped``; the run prints the count
(conftest.py's ``pytest_terminal_summary``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from anthropic_fixture import anthropic_server_proc, claude  # noqa: F401  (pages that mention Anthropic)
from batch_fixture import batch, batch_server_proc  # noqa: F401  (pages marked judge=batch)
from docs_data import JUDGEBENCH, REVIEWS
from huggingface_hub import HfApi
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import CodeBlockParser

ROOT = Path(__file__).resolve().parent.parent
MAX_SKIPPED = 0.10
TEST_KEY = "sk-test-docs-examples"
ANTHROPIC_TEST_KEY = "sk-ant-test-docs-examples"
BLOCK_TIMEOUT = 600

SKIP = re.compile(r"^[ \t]*<!--\s*skip:\s*(?P<reason>.*?)\s*-->[ \t]*$", re.M)
# a block another test runs as it is (the README's first command: tests/test_readme.py, against a real model):
# not run here, not counted as skipped, and the test it names must exist (test_run_by_names_a_real_test)
RUN_BY = re.compile(r"^[ \t]*<!--\s*run-by:\s*(?P<reason>\S+?)\s*-->[ \t]*$", re.M)
EXACT = re.compile(r"^[ \t]*<!--\s*output:\s*exact\s*-->[ \t]*$", re.M)
JUDGE = re.compile(r"<!--\s*examples:\s*judge=(?P<server>\w+)\s*-->")
# a page whose examples need an optional extra (the spark page: pyspark, Java): run where it is installed (CI's
# main run), left out where it is not (the lowest-versions run installs the test extra alone)
NEEDS = re.compile(r"<!--\s*examples:\s*needs=(?P<module>[\w.]+)\s*-->")
COMMENT = re.compile(r"<!--.*?-->", re.S)


def rel(path: str | Path) -> str:
    """A page's name as the failures show it: relative to the checkout (the harness's own tests: docs/NAME)."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else f"{path.parent.name}/{path.name}"


def pages() -> list[Path]:
    """The pages whose examples run: the README and every page of the site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# -- reading a page (Sybil) ------------------------------------------------------------------------------------


def _marker(pattern: re.Pattern, kind: str):
    """A Sybil parser for an HTML comment that marks the next block (``skip``, ``exact``)."""

    def parse(document: Document):
        for m in pattern.finditer(document.text):
            parsed = (kind, m.groupdict().get("reason", ""))
            yield Region(m.start(), m.end(), parsed=parsed, evaluator=lambda ex: ex.namespace["page"].mark(ex))

    return parse


def _block(language: str) -> CodeBlockParser:
    return CodeBlockParser(language=language, evaluator=lambda ex: ex.namespace["page"].block(ex, language))


SYBIL = Sybil(
    parsers=[
        _block("python"),
        _block("bash"),
        _block("text"),
        _marker(SKIP, "skip"),
        _marker(RUN_BY, "run-by"),
        _marker(EXACT, "exact"),
    ]
)


def parse(path: Path) -> Document:
    return SYBIL.parse(path)


@dataclass
class Count:
    blocks: int = 0
    skipped: list[str] = field(default_factory=list)  # "page:line: reason"
    run_by: list[str] = field(default_factory=list)  # the tests that run a block elsewhere ("path::name")


def count(paths: list[Path] | None = None) -> Count:
    """The code blocks of the pages and those marked skip, without running anything."""
    c = Count()
    for path in paths or pages():
        skip = None
        for ex in parse(path).examples():
            kind = _kind(ex)
            if kind == "skip":
                skip = ex.parsed[1]
            elif kind == "run-by":
                c.run_by.append(ex.parsed[1])
            elif kind in ("python", "bash"):
                c.blocks += 1
                if skip is not None:
                    c.skipped.append(f"{rel(path)}:{ex.line}: {skip}")
                skip = None
    return c


def _kind(ex: Example) -> str:
    """``python``, ``bash``, ``text`` (a code block) or ``skip``, ``exact`` (a mark)."""
    return ex.parsed[0] if isinstance(ex.parsed, tuple) else ex.region.lexemes["arguments"]


# -- running a page --------------------------------------------------------------------------------------------


def number_pattern(line: str) -> re.Pattern:
    """A text block's line as a pattern: digits match any number, spaces any spacing, the rest itself."""
    out = []
    for piece in re.split(r"(\d+(?:[.,]\d+)*|\s+)", line.strip()):
        if not piece:
            continue
        if piece[0].isdigit():
            out.append(r"-?\d+(?:[.,]\d+)*")
        elif piece.isspace():
            out.append(r"\s+")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out))


def check_output(expected: str, output: str, exact: bool) -> str | None:
    """None where ``output`` shows ``expected``; else what is missing."""
    if exact:
        return None if output.strip() == expected.strip() else "the output differs"
    missing = [line for line in expected.splitlines() if line.strip() and not number_pattern(line).search(output)]
    return None if not missing else "these lines are not in the output:\n" + "\n".join(missing)


def without_install(source: str) -> str:
    """A block without its ``[VAR=value ...] pip install ...`` steps: the test environment is that install."""
    lines = []
    for line in source.splitlines():
        head, sep, rest = line.partition(" && ")
        try:
            words = shlex.split(head)
        except ValueError:
            words = []
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words = words[1:]
        if words[:2] == ["pip", "install"]:
            line = rest if sep else ""
        lines.append(line)
    return "\n".join(lines)


class Page:
    """One page's run: its namespace, environment, folder, and the last block's output for a text block."""

    def __init__(self, document: Document, workdir: Path, env: dict[str, str]) -> None:
        self.document = document
        self.workdir = workdir
        self.env = env
        self.namespace: dict = {"__name__": "__docs__"}
        self.pending: dict[str, str] = {}  # the marks for the next block
        self.last: tuple[int, str, bool] | None = None  # the last block's end, output, whether it was skipped
        self.ran = 0
        self.skipped = 0

    def where(self, ex: Example) -> str:
        return f"{rel(self.document.path)}:{ex.line}"

    def mark(self, ex: Example) -> None:
        kind, reason = ex.parsed
        self.pending[kind] = reason

    def block(self, ex: Example, language: str) -> None:
        marks, self.pending = self.pending, {}
        source = str(ex.parsed)
        if language == "text":
            self.expect(ex, source, "exact" in marks)
            return
        if "skip" in marks or "run-by" in marks:
            self.skipped += "skip" in marks
            self.last = (ex.end, "", True)
            return
        output = self.python(ex, source) if language == "python" else self.bash(ex, source)
        self.ran += 1
        self.last = (ex.end, output, False)

    def expect(self, ex: Example, expected: str, exact: bool) -> None:
        if self.last is None:
            return
        end, output, skipped = self.last
        between = COMMENT.sub("", self.document.text[end : ex.start])
        if between.strip() or skipped:  # not the output of a block, or of one that did not run
            return
        problem = check_output(expected, output, exact)
        if problem:
            raise AssertionError(f"{self.where(ex)}: {problem}\n--- the output was:\n{output}")

    def python(self, ex: Example, source: str) -> str:
        code = compile("\n" * (ex.line - 1 + ex.parsed.line_offset) + source, str(self.document.path), "exec")
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                exec(code, self.namespace)  # noqa: S102 - running the page's example is the point
        except BaseException as e:  # noqa: BLE001 - a SystemExit from a CLI call fails the example too
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            raise AssertionError(f"{self.where(ex)}: the python block failed\n{source}\n{buf.getvalue()}\n{tb}") from e
        return buf.getvalue()

    def bash(self, ex: Example, source: str) -> str:
        argv = ["bash", "-euo", "pipefail", "-c", without_install(source)]
        p = subprocess.run(argv, cwd=self.workdir, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=BLOCK_TIMEOUT)  # fmt: skip
        if p.returncode:
            raise AssertionError(f"{self.where(ex)}: exit {p.returncode}\n$ {source}\n{p.stdout}")
        return p.stdout


# -- the environment -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def reviews_on_hub(hub):
    """The loopback Hub with ``me/reviews``: what the pages' examples score."""
    from datasets import Dataset

    Dataset.from_dict({"question": [q for q, _ in REVIEWS], "answer": [a for _, a in REVIEWS]}).push_to_hub(
        "me/reviews"
    )
    # `--benchmark judgebench` (docs/how-to/choose-judge.md): a few pairs in the set's own layout
    api = HfApi()
    api.create_repo("ScalerLab/JudgeBench", repo_type="dataset", exist_ok=True)
    for split in ("gpt", "claude"):  # `--benchmark judgebench:claude`: the same pairs as the other split
        lines = "".join(json.dumps(r) + "\n" for r in JUDGEBENCH).encode()
        api.upload_file(path_or_fileobj=lines, path_in_repo=f"data/{split}-00000-of-00001.jsonl",
                        repo_id="ScalerLab/JudgeBench", repo_type="dataset")  # fmt: skip
    return hub


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory) -> Path:
    """A folder with ``hf-judge`` running this checkout's code (not whichever copy is installed)."""
    d = tmp_path_factory.mktemp("bin")
    script = d / "hf-judge"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hf_judge.cli "$@"\n')
    script.chmod(0o755)
    return d


def page_env(request, text: str, tmp: Path, bin_dir: Path) -> dict[str, str]:
    judge = request.getfixturevalue("judge")
    m = JUDGE.search(text)
    server = request.getfixturevalue(m.group("server")) if m else judge
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY=TEST_KEY,
        HF_JUDGE_CACHE=str(tmp / "cache"),
        PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    if "anthropic" in text.lower():
        claude = request.getfixturevalue("claude")
        env.update(ANTHROPIC_BASE_URL=claude.url, ANTHROPIC_API_KEY=ANTHROPIC_TEST_KEY)
    return env


def pages_with_examples() -> list[Path]:
    """The pages that hold a python or bash block (a reference page holds none: nothing to run, nothing skipped)."""
    return [p for p in pages() if count([p]).blocks]


@pytest.mark.parametrize("path", pages_with_examples(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(path, request, reviews_on_hub, bin_dir, tmp_path, monkeypatch):
    document = parse(path)
    for needed in NEEDS.finditer(document.text):
        pytest.importorskip(needed.group("module"))
    env = page_env(request, document.text, tmp_path, bin_dir)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    page = Page(document, work, env)
    document.namespace["page"] = page
    for ex in document.examples():
        ex.evaluate()


def test_run_by_names_a_real_test():
    """A ``run-by`` mark names a test that exists (``tests/FILE.py::test_name``), so the block is run somewhere."""
    c = count()
    for target in c.run_by:
        file, _, name = target.partition("::")
        assert name and re.search(rf"^def {re.escape(name)}\(", (ROOT / file).read_text(), re.M), target


def test_few_blocks_are_skipped():
    c = count()
    assert c.blocks, "no example found in README.md and docs/"
    share = len(c.skipped) / c.blocks
    assert share <= MAX_SKIPPED, (
        f"{len(c.skipped)} of {c.blocks} blocks are skipped ({share:.0%} > {MAX_SKIPPED:.0%}):\n" + "\n".join(c.skipped)
    )


# -- the harness itself ----------------------------------------------------------------------------------------


def test_loose_output_matches_other_numbers_and_spacing():
    assert (
        check_output(
            "rows scored: 20   mean 7.5\n\nsaved to x-judged", "rows scored: 8 mean 6.25\nsaved to x-judged", False
        )
        is None
    )
    assert check_output("mean 7.5", "median 7.5", False) is not None
    assert check_output("a\nb", "a\nb\n", True) is None and check_output("a", "a b", True) is not None


def _run_page(text: str, request, bin_dir, tmp_path, monkeypatch) -> Page:
    (tmp_path / "docs").mkdir(exist_ok=True)
    md = tmp_path / "docs" / "page.md"
    md.write_text(text)
    document = SYBIL.parse(md)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    page = document.namespace["page"] = Page(document, work, page_env(request, document.text, tmp_path, bin_dir))
    for ex in document.examples():
        ex.evaluate()
    return page


def test_a_page_runs_in_order_with_skips_and_outputs(request, bin_dir, tmp_path, monkeypatch):
    text = (
        "```python\nx = 40 + 2\nprint('x is', x)\n```\n\n```text\nx is 7\n```\n\n"
        "<!-- skip: needs a paid key -->\n```bash\nexit 3\n```\n\n```text\nnot checked\n```\n\n"
        "<!-- invisible-code-block: python\nopen('d.txt', 'w').write(str(x))\n-->\n\n"
        "```bash\ncat d.txt; echo; echo \"$OPENAI_BASE_URL\"\npython -c 'import hf_judge; print(hf_judge.__file__)'\n"
        "hf-judge metrics | grep -c QA_All\n```\n\n"
        "<!-- output: exact -->\n```text\n42\n"
        + request.getfixturevalue("judge").base_url
        + "\n"
        + str(ROOT / "hf_judge" / "__init__.py")
        + "\n1\n```\n"
    )
    page = _run_page(text, request, bin_dir, tmp_path, monkeypatch)
    assert (page.ran, page.skipped) == (3, 1)
    assert count([tmp_path / "docs" / "page.md"]).blocks == 4


def test_a_wrong_output_fails_naming_the_line(request, bin_dir, tmp_path, monkeypatch):
    text = "Intro.\n\n```bash\necho 'scored 20 rows'\n```\n\n```text\nsaved 20 rows\n```\n"
    with pytest.raises(AssertionError, match=r"docs/page.md:7: these lines are not in the output:\nsaved 20 rows"):
        _run_page(text, request, bin_dir, tmp_path, monkeypatch)


def test_a_failing_block_fails_the_page(request, bin_dir, tmp_path, monkeypatch):
    with pytest.raises(AssertionError, match=r"docs/page.md:1: exit 2"):
        _run_page("```bash\nhf-judge score --no-such-option\n```\n", request, bin_dir, tmp_path, monkeypatch)
