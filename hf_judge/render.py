"""The sandboxed jinja2 environment and how row values become prompt text.

Values are rendered like this: strings as they are (LaTeX braces and all),
numbers with ``str()``, booleans as ``true``/``false``, lists and dicts as
compact JSON. A null value of a required variable is not rendered at all: the
row gets an ``errors`` entry of kind ``null_input`` and no request is sent.
Image variables are not text: see :mod:`hf_judge.images`.
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
import orjson
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateError

_env = ImmutableSandboxedEnvironment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
)


def compile_template(source: str, where: str) -> jinja2.Template:
    """Compile ``source``; a syntax error names ``where`` and the line."""
    try:
        return _env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"{where}: template syntax error on line {e.lineno}: {e.message}") from None


def template_variables(source: str) -> set[str]:
    """The undeclared variables a template reads."""
    return meta.find_undeclared_variables(_env.parse(source))


# Where an image variable's marker (see images.py) comes out of rendering intact:
# on its own in an output, joined with text, or as a truth value in a test.
_KEEPS_MARKER = (nodes.Output, nodes.Concat, nodes.CondExpr, nodes.If, nodes.Test, nodes.Not, nodes.And, nodes.Or)


def marker_misuse(source: str, names: set[str]) -> dict[str, str]:
    """Variables of ``names`` that ``source`` uses where an image cannot be placed -> where.

    Example:
        >>> marker_misuse("{{ image }} {{ image | upper }}", {"image"})
        {'image': 'inside an expression on template line 1'}
    """
    found: dict[str, str] = {}

    def walk(node: nodes.Node, parent: nodes.Node | None) -> None:
        if isinstance(node, nodes.Name) and node.name in names and node.name not in found:
            if not isinstance(parent, _KEEPS_MARKER):
                found[node.name] = f"inside an expression on template line {node.lineno}"
        for child in node.iter_child_nodes():
            walk(child, node)

    walk(_env.parse(source), None)
    return found


def render(template: jinja2.Template, values: dict[str, Any], where: str) -> str:
    try:
        return template.render(values)
    except jinja2.UndefinedError as e:
        raise TemplateError(f"{where}: {e.message}. Map it to a column with columns={{...}} or give it in params.") from None
    except jinja2.exceptions.SecurityError as e:
        raise TemplateError(f"{where}: the template tried something the sandbox forbids ({e}).") from None
    except jinja2.TemplateError as e:
        raise TemplateError(f"{where}: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. {% include %} with no loader: a template error all the same
        raise TemplateError(f"{where}: the template failed: {type(e).__name__}: {e}") from None


def format_value(value: Any) -> Any:
    """A row value as prompt text (see the module docstring)."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    except TypeError:
        return str(value)


_SEED_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SeedTemplate:
    """A seed-004 style ``.txt`` prompt: only ``{name}`` placeholders of known
    variables are replaced; every other brace (LaTeX, JSON examples) stays."""

    def __init__(self, source: str, variables: set[str]):
        self.source = source
        self.variables = variables

    def render(self, values: dict[str, Any]) -> str:
        def sub(m: re.Match) -> str:
            name = m.group(1)
            if name in self.variables:
                return str(values[name])
            return m.group(0)

        return _SEED_PLACEHOLDER.sub(sub, self.source)


def seed_template_variables(source: str, known: set[str]) -> set[str]:
    return {m.group(1) for m in _SEED_PLACEHOLDER.finditer(source) if m.group(1) in known}
