"""The install the docs tell a newcomer to run is one that works: hf-judge is not on PyPI (issue 40: the docs
home said `pip install hf-judge`)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NAME = re.search(r'^name = "(.+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M).group(1)


def _installs(text: str) -> list[list[str]]:
    """The requirements of each `pip install` command in ``text`` (its code blocks and inline code)."""
    out = []
    for match in re.finditer(r"pip install ([^`\n&|;#]*)", text):
        try:
            words = shlex.split(match.group(1))
        except ValueError:  # a quote the inline code opens and a later one closes: not one command
            words = match.group(1).split()
        out.append([w for w in words if not w.startswith("-")])
    return out


def test_no_page_installs_hf_judge_from_pypi():
    """A `pip install` of hf-judge itself installs a folder (`.`, `".[local]"`); `"hf-judge[extra]"` only adds an
    extra to the hf-judge already installed (pip finds it installed and fetches the extra's packages)."""
    for page in PAGES:
        for words in _installs(page.read_text(encoding="utf-8")):
            bare = [w for w in words if re.fullmatch(rf"{re.escape(NAME)}(\s*[=<>~!].*)?", w)]
            assert not bare, f"{page.relative_to(ROOT)}: `pip install {' '.join(words)}`: {NAME} is not on PyPI"


def test_the_docs_home_installs_from_a_clone_and_says_so():
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    install = home[home.index("## Install") :]
    block = re.search(r"```bash\n(.*?)```", install, flags=re.S).group(1)
    assert block.startswith("pip install . && "), block
    assert "not on PyPI" in install[: install.index("```bash")] and "clone" in install[: install.index("```bash")]
