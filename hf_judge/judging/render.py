"""The sandboxed jinja2 environment and how row values become prompt text.

Values are rendered like this: strings as they are (LaTeX braces and all),
numbers with ``str()``, booleans as ``true``/``false``, lists and dicts as
compact JSON. A null value of a required variable is not rendered at all: the
row gets an ``errors`` entry of kind ``null_input`` and no request is sent.

Every template hf_judge renders, a prompt file's YAML front matter included,
goes through the one sandboxed environment below (:func:`render_yaml` for the
front matter).
Image variables are not text: see :mod:`hf_judge.judging.images`.
"""

from __future__ import annotations

import re
import secrets
from contextvars import ContextVar
from typing import Any

import jinja2
import orjson
import yaml
from jinja2 import meta, nodes

from ..errors import TemplateError
from .sandbox import BoundedSandbox, RenderLimitError, budget_for

# bounded where a caller asks (a recorded prompt someone else wrote: see sandbox.py); otherwise jinja2's sandbox
_env = BoundedSandbox(
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
        if (
            isinstance(node, nodes.Name)
            and node.name in names
            and node.name not in found
            and not isinstance(parent, _KEEPS_MARKER)
        ):
            found[node.name] = f"inside an expression on template line {node.lineno}"
        for child in node.iter_child_nodes():
            walk(child, node)

    walk(_env.parse(source), None)
    return found


def render(template: jinja2.Template, values: dict[str, Any], where: str) -> str:
    """Render ``template``; an undefined variable or a sandbox violation is a
    :class:`TemplateError` that names ``where``."""
    try:
        with budget_for(values):
            return template.render(values)
    except RenderLimitError as e:
        raise RenderLimitError(f"{where}: {e}") from None
    except jinja2.UndefinedError as e:
        raise TemplateError(
            f"{where}: {e.message}. Map it to a column with columns={{...}} or give it in params."
        ) from None
    except jinja2.exceptions.SecurityError as e:
        raise TemplateError(f"{where}: the template tried something the sandbox forbids ({e}).") from None
    except jinja2.TemplateError as e:
        raise TemplateError(f"{where}: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. {% include %} with no loader: a template error all the same
        raise TemplateError(f"{where}: the template failed: {type(e).__name__}: {e}") from None


# -- YAML documents (a prompt file's front matter) --------------------------------
#
# A value substituted into YAML as text could change the document's structure
# (``positive='say "yes"'`` closes a quoted string early). So each ``{{ ... }}``
# renders as an opaque slot token; the YAML is parsed with the tokens in place,
# and only then does each token take its text: a token that is a whole plain
# scalar is read as a YAML value of its own (``{{ max_score }}`` -> 10,
# ``{{ x|tojson }}`` -> the string), one inside a longer or a quoted scalar is
# inserted as literal text. A value that would have parsed before parses to the
# same thing now; one that would have broken the document stays one string.

_slots: ContextVar[tuple[str, list[str]] | None] = ContextVar("hf_judge_yaml_slots", default=None)


def _to_slot(value: Any) -> Any:
    slots = _slots.get()
    if slots is None:
        return value
    prefix, texts = slots
    if not isinstance(value, str):
        BoundedSandbox.hfj_value(value)
    texts.append(str(value))  # a strict undefined raises here, as it would when printed
    return f"{prefix}{len(texts) - 1}x"


@jinja2.pass_eval_context
def _tojson_lenient(eval_ctx: Any, value: Any, indent: int | None = None) -> str:
    return "null" if isinstance(value, jinja2.Undefined) else _env.filters["tojson"](eval_ctx, value, indent)


_yaml_env = _env.overlay(finalize=_to_slot)
# For reading a file's default ``params`` before they are known: what uses them renders empty.
_yaml_lenient_env = _env.overlay(finalize=_to_slot, undefined=jinja2.Undefined)
_yaml_lenient_env.filters = {**_env.filters, "tojson": _tojson_lenient}  # a copy: overlays share the dict
# The tags a substituted value may take on its own (no !!python/..., no !!binary).
# libyaml's parser where PyYAML has it: front matter is parsed ~3x faster (hf-judge metrics loads every file)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_VALUE_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp", "seq", "map")}


def render_yaml(source: str, values: dict[str, Any], where: str, *, lenient: bool = False) -> Any:
    """Render a YAML document template in the sandbox and parse it; no value can change its structure.

    ``lenient``: undefined variables render as nothing instead of raising.
    Raises :class:`TemplateError` (naming ``where``) or ``yaml.YAMLError``.

    Example:
        >>> render_yaml('{enum: [{{ p|tojson }}], note: "{{ p }} or not"}', {"p": 'say "yes"'}, "x")
        {'enum': ['say "yes"'], 'note': 'say "yes" or not'}
    """
    env = _yaml_lenient_env if lenient else _yaml_env
    try:
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"{where}: template syntax error on line {e.lineno}: {e.message}") from None
    # A fresh random token each time: the file's own text cannot forge one.
    prefix = f"hfjslot{secrets.token_hex(8)}n"
    texts: list[str] = []
    reset = _slots.set((prefix, texts))
    try:
        text = render(template, values, where)
    finally:
        _slots.reset(reset)
    if not texts:
        return yaml.load(text, Loader=_YAML_LOADER)
    node = yaml.compose(
        text, Loader=yaml.SafeLoader
    )  # _Filler reads plain-scalar styles as the Python loader sets them
    if node is None:
        return None
    filler = _Filler(re.compile(re.escape(prefix) + r"(\d+)x"), texts)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(filler.fill(node))
    finally:
        loader.dispose()


class _Filler:
    """Puts each slot's text into the composed YAML node graph (see above)."""

    def __init__(self, token: re.Pattern, texts: list[str]):
        self.token = token
        self.texts = texts
        self.resolver = yaml.resolver.Resolver()
        self.done: dict[int, yaml.Node] = {}  # anchors and aliases share nodes

    def fill(self, node: yaml.Node) -> yaml.Node:
        key = id(node)
        if key not in self.done:
            self.done[key] = node
            if isinstance(node, yaml.MappingNode):
                node.value = [(self.fill(k), self.fill(v)) for k, v in node.value]
            elif isinstance(node, yaml.SequenceNode):
                node.value = [self.fill(v) for v in node.value]
            elif isinstance(node, yaml.ScalarNode) and self.token.search(node.value):
                self.done[key] = self._scalar(node)
        return self.done[key]

    def _scalar(self, node: yaml.ScalarNode) -> yaml.Node:
        whole = self.token.fullmatch(node.value)
        if whole and node.style is None:
            text = self.texts[int(whole.group(1))]
            try:
                own = yaml.compose(text, Loader=yaml.SafeLoader)
            except yaml.YAMLError:
                own = None
            else:
                if own is None:  # an empty value: null, as ``key:`` with nothing after it
                    return yaml.ScalarNode("tag:yaml.org,2002:null", "", node.start_mark, node.end_mark)
            if (
                own is not None
                and own.tag in _VALUE_TAGS
                and (isinstance(own, yaml.ScalarNode) or text.lstrip()[:1] in ("[", "{"))
            ):
                return own
            return yaml.ScalarNode("tag:yaml.org,2002:str", text, node.start_mark, node.end_mark, style='"')
        value = self.token.sub(lambda m: self.texts[int(m.group(1))], node.value)
        tag = self.resolver.resolve(yaml.ScalarNode, value, (True, False)) if node.style is None else node.tag
        return yaml.ScalarNode(tag, value, node.start_mark, node.end_mark, style=node.style)


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
