"""A griffe extension for the API reference (mkdocs.yml): hf-judge's docstrings title their doctests
``Example:``, which Google style reads as an admonition of markdown text (``x["a"]`` there is a broken link);
read as ``Examples:`` they render as code."""

from __future__ import annotations

import re
from typing import Any

import griffe


class DoctestExamples(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002 - the hook's signature
        if obj.docstring is not None:
            obj.docstring.value = re.sub(r"^(\s*)Example:$", r"\1Examples:", obj.docstring.value, flags=re.M)
