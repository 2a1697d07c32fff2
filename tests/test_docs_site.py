"""The docs site's own markdown (mkdocs.yml), as `mkdocs build` renders a page: what the examples' test and the
reference pages' test do not see (the site is built in .ci/run; its pages' code blocks run in test_docs_examples)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _render(page: str) -> str:
    """``docs/<page>`` in HTML, through the markdown extensions and their settings in mkdocs.yml."""
    config = pytest.importorskip("mkdocs.config", reason='the docs extra (pip install -e ".[docs]") builds the site')
    import markdown

    cfg = config.load_config(str(ROOT / "mkdocs.yml"))
    md = markdown.Markdown(extensions=cfg["markdown_extensions"], extension_configs=cfg["mdx_configs"])
    return md.convert((ROOT / "docs" / page).read_text(encoding="utf-8"))


def test_the_engines_page_draws_the_flow_of_a_run_as_a_mermaid_diagram():
    html = _render("concepts/engines.md")
    # mkdocs-material draws a <pre class="mermaid"> in the browser; a code block it would show as text
    diagrams = re.findall(r'<pre class="mermaid"><code>(.*?)</code></pre>', html, re.S)
    assert len(diagrams) == 1, "the engines page's ```mermaid block is not rendered as a diagram (mkdocs.yml)"
    flow = diagrams[0]
    assert flow.startswith("flowchart TD")
    for step in ("the capability table", "sink: start", "the engine's dispatch", "the counting bridge", "sink: fail"):
        assert step in flow, step
