"""Metrics: a prompt file and the declaration of what its reply holds.

One declaration (the ``outputs`` of a prompt file's front matter) gives the
JSON schema sent as structured output, the validator and the output columns.
See CONTRIBUTING.md for the file format. Built-in files live in the package's
``prompts`` folder; files in a user's ``prompts_dir`` work the same way and
take precedence over built-ins of the same name. Installed metric packs (entry
points of group ``hf_judge.metrics``, see :func:`.catalogue.metric_packs`) add names of
their own: a name is looked up in the prompts_dir(s), then the built-ins, then
the packs; a pack never replaces a built-in, and a name two packs define is
refused, so a name never silently means another prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import MissingColumnError, PromptFileError, StrEnum
from . import images as _images
from .render import (
    SeedTemplate,
    compile_template,
    marker_misuse,
    render,
    render_yaml,
    seed_template_variables,
    template_variables,
)

if TYPE_CHECKING:  # datasets takes about a second to import: `hf-judge metrics` never needs it
    from datasets import Value

logger = logging.getLogger("hf_judge")

TEMPLATE_SUFFIXES = (".jinja", ".j2", ".jinja2")
SEED_SUFFIX = ".txt"


class MetricKind(StrEnum):
    """What a metric's reply is read as (front matter ``kind:``); the values are what prompt files write."""

    SCORE = "score"  # a JSON object of the declared outputs
    BINARY = "binary"  # a verdict token (free text allowed), plus a boolean column
    PAIRWISE = "pairwise"  # two scores (free text allowed), a winner column, optionally both orders


class OutputType(StrEnum):
    """The JSON schema type of one output (front matter ``outputs: {key: {type: ...}}``)."""

    INTEGER = "integer"
    NUMBER = "number"
    STRING = "string"
    BOOLEAN = "boolean"


KINDS = tuple(k.value for k in MetricKind)
TYPES = tuple(t.value for t in OutputType)
# The Arrow type of each output type's column.
_DTYPES = {
    OutputType.INTEGER: "int64",
    OutputType.NUMBER: "float64",
    OutputType.STRING: "string",
    OutputType.BOOLEAN: "bool",
}
# The seed spells it "Meaningness"; both names work.
ALIASES = {"Meaningness": "Meaningfulness"}
# The variables the seed's .txt prompt files may use.
SEED_VARIABLES = {"instruction", "output"}
_DIFFICULTY = re.compile(r"difficulty", re.I)
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def builtin_prompts_dir() -> Path:
    """Where the built-in prompt files are: inside the wheel, or the checkout."""
    here = Path(__file__).resolve().parent.parent  # the package: hf_judge/
    packaged = here / "prompts"
    return packaged if packaged.is_dir() else here.parent / "prompts"


@dataclass(frozen=True)
class Output:
    """One key of a metric's reply and the column it fills."""

    key: str
    type: OutputType
    column: str
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple | None = None
    description: str | None = None

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": str(self.type)}  # a plain str: request bodies and cache keys unchanged
        if self.enum is not None:
            s["enum"] = list(self.enum)
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        if self.description:
            s["description"] = self.description
        return s

    @property
    def dtype(self) -> str:
        """The column's Arrow type name (``int64``, ``float64``, ``string``, ``bool``)."""
        return _DTYPES[self.type]

    @property
    def feature(self) -> Value:
        from datasets import Value

        return Value(self.dtype)


@dataclass(frozen=True, eq=False)
class Metric:
    """A metric loaded from a prompt file. Build one with :func:`load_metric`.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> m = load_metric("QA_Clarity")
        >>> [o.column for o in m.outputs]
        ['QA_Clarity_reason', 'QA_Clarity']
    """

    name: str
    description: str
    kind: MetricKind
    temperature: float
    outputs: tuple[Output, ...]
    params: dict[str, Any]
    variables: tuple[str, ...]
    optional: tuple[str, ...]
    swap: tuple[str, str] | None
    text: str
    path: Path | None = None
    seed_style: bool = False
    system_source: str | None = None
    # Variables declared as images (front matter ``images:``); variables bound to
    # a datasets.Image column are images too (see images.image_variables).
    images: tuple[str, ...] = ()
    # variable -> where the template uses it so that an image could not be placed there
    image_misuse: dict[str, str] = field(default_factory=dict, repr=False)
    # the metric pack the prompt file comes from ({"name", "version", "entry_point"}), for the summary and card
    pack: dict[str, str] | None = None
    _template: Any = field(default=None, repr=False)
    _system: Any = field(default=None, repr=False)

    def __reduce__(self) -> tuple[Any, tuple]:
        # A compiled template does not pickle: a worker process (--workers, Ray) compiles the same
        # text again. The text travels, not the path, so a node without the file gets the same metric.
        fields = (self.name, self.path, self.text, self.seed_style, self.params, self.swap, self.outputs, self.pack)
        return _rebuild_metric, fields

    @property
    def mode(self) -> str | None:
        head = self.name.split("_", 1)[0]
        return head if head in ("Q", "QA") else None

    @cached_property
    def prompt_hash(self) -> str:
        """sha256 of the prompt file's text and the parameters it was loaded with."""
        h = hashlib.sha256(self.text.encode())
        h.update(json.dumps([self.params, self.swap], sort_keys=True, default=str).encode())
        return h.hexdigest()

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {o.key: o.schema() for o in self.outputs},
            "required": [o.key for o in self.outputs],
            "additionalProperties": False,
        }

    @cached_property
    def schema_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "_", self.name)[:64]

    @cached_property
    def column_types(self) -> dict[str, str]:
        """Output column name -> Arrow type name, in column order (no datasets import: `hf-judge metrics` is fast)."""
        cols: dict[str, str] = {}
        if self.kind == MetricKind.BINARY:
            cols[self.name] = "bool"
            cols.update({o.column: o.dtype for o in self.outputs})
        elif self.kind == MetricKind.PAIRWISE:
            score_type = "float64" if self.swap else "int64"
            for o in self.outputs:
                cols[o.column] = score_type if o.type == OutputType.INTEGER else o.dtype
            cols[f"{self.name}_winner"] = "string"
            if self.swap:
                for o in self.outputs:
                    if o.type == OutputType.STRING:
                        cols[f"{o.column}_swapped"] = "string"
                cols[f"{self.name}_disagree"] = "bool"
        else:
            cols.update({o.column: o.dtype for o in self.outputs})
        return cols

    @cached_property
    def features(self) -> dict[str, Value]:
        """Output column name -> datasets feature, in column order."""
        from datasets import Value

        return {c: Value(t) for c, t in self.column_types.items()}

    @property
    def columns(self) -> list[str]:
        return list(self.column_types)

    def messages(self, values: dict[str, Any], images: Iterable[str] = ()) -> list[dict[str, Any]]:
        """The chat messages for one row's variable values.

        ``images``: the variables whose values are lists of image URLs (see
        :mod:`hf_judge.judging.images`). The user message then becomes content parts,
        text and images in the order the template places them; without images
        it is a plain string.

        Example:
            >>> from hf_judge.judging.catalogue import load_metric
            >>> m = load_metric("Q_Clarity")
            >>> m.messages({"instruction": "Why is the sky blue?"})[0]["role"]
            'user'
        """
        marks: list[str] = []
        if images:
            values = dict(values)
            for var in images:
                urls = values.get(var)
                values[var] = _images.mark(urls, marks) if urls else ""
        if self.seed_style:
            user = self._template.render(values)
        else:
            user = render(self._template, {**self.params, **values}, f"prompt {self.name}")
        content: Any = _images.split_parts(user, marks, f"prompt {self.name}") if images else user
        msgs = [{"role": "user", "content": content}]
        if self._system is not None:
            msgs.insert(
                0,
                {
                    "role": "system",
                    "content": render(self._system, {**self.params, **values}, f"system prompt of {self.name}"),
                },
            )
        return msgs

    def resolve_columns(self, mapping: dict[str, str], available: Sequence[str]) -> dict[str, str | None]:
        """Variable -> dataset column for this metric, or a clear error."""
        resolved: dict[str, str | None] = {}
        missing = []
        for var in self.variables:
            col = mapping.get(var, var)
            if col not in available:
                missing.append((var, col))
            resolved[var] = col
        for var in self.optional:
            col = mapping.get(var, var)
            resolved[var] = col if col in available else None
        if missing:
            what = ", ".join(f"{v!r}" + (f" (mapped to column {c!r})" if c != v else "") for v, c in missing)
            raise MissingColumnError(
                f"metric {self.name} needs {what}, but the dataset has no such column. "
                f"Available columns: {', '.join(c for c in available if not _internal(c)) or '(none)'}. "
                f"Map variables to columns with columns={{'{missing[0][0]}': '<column>'}} "
                f"(CLI: --column {missing[0][0]}=<column>)."
            )
        return resolved


def _render_front_matter(raw: str, params: dict[str, Any], where: str, *, lenient: bool = False) -> dict[str, Any]:
    try:
        data = render_yaml(raw, params, f"{where}: front matter", lenient=lenient)
    except yaml.YAMLError as e:
        raise PromptFileError(f"{where}: front matter is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PromptFileError(f"{where}: front matter must be a YAML mapping")
    return data


def _default_params(raw: str, where: str) -> dict[str, Any]:
    """Read ``params`` from front matter that may itself use the params."""
    params = _render_front_matter(raw, {}, where, lenient=True).get("params")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise PromptFileError(f"{where}: 'params' must be a mapping of name: default")
    return params


def _parse_outputs(name: str, decl: Any, where: str) -> tuple[Output, ...]:
    if not isinstance(decl, dict) or not decl:
        raise PromptFileError(f"{where}: 'outputs' must be a non-empty mapping of reply key -> {{type: ...}}")
    outs = []
    for key, spec in decl.items():
        if not isinstance(key, str) or not NAME_RE.match(key):
            raise PromptFileError(f"{where}: output key {key!r} must be an identifier")
        if not isinstance(spec, dict):
            raise PromptFileError(
                f"{where}: output {key!r} must be a mapping like {{type: integer, minimum: 1, maximum: 10}}"
            )
        unknown = set(spec) - {"type", "minimum", "maximum", "enum", "column", "description"}
        if unknown:
            raise PromptFileError(
                f"{where}: output {key!r} has unknown field(s) {sorted(unknown)}; "
                "allowed: type, minimum, maximum, enum, column, description"
            )
        typ = spec.get("type")
        if typ not in TYPES:
            raise PromptFileError(f"{where}: output {key!r} has type {typ!r}; use one of {', '.join(TYPES)}")
        lo, hi = spec.get("minimum"), spec.get("maximum")
        for bound, label in ((lo, "minimum"), (hi, "maximum")):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
                raise PromptFileError(f"{where}: output {key!r}: {label} must be a number, got {bound!r}")
            if bound is not None and typ not in (OutputType.INTEGER, OutputType.NUMBER):
                raise PromptFileError(f"{where}: output {key!r}: {label} only applies to integer or number outputs")
        if lo is not None and hi is not None and lo > hi:
            raise PromptFileError(f"{where}: output {key!r}: minimum {lo} is above maximum {hi}")
        enum = spec.get("enum")
        if enum is not None and (not isinstance(enum, list) or not enum):
            raise PromptFileError(f"{where}: output {key!r}: enum must be a non-empty list")
        column = spec.get("column") or (name if key == "score" else f"{name}_{key}")
        if not isinstance(column, str) or not column:
            raise PromptFileError(f"{where}: output {key!r}: column must be a string")
        outs.append(
            Output(key, OutputType(typ), column, lo, hi, tuple(enum) if enum else None, spec.get("description"))
        )
    columns = [o.column for o in outs]
    if len(set(columns)) != len(columns):
        raise PromptFileError(f"{where}: two outputs write the same column")
    return tuple(outs)


def parse_jinja_file(name: str, path: Path, text: str, overrides: dict[str, Any]) -> Metric:
    where = str(path)
    if not text.startswith("---"):
        raise PromptFileError(
            f"{where}: a prompt file starts with YAML front matter between '---' lines (see CONTRIBUTING.md)"
        )
    parts = re.split(r"^---[ \t]*$\n?", text, maxsplit=2, flags=re.M)
    if len(parts) < 3:
        raise PromptFileError(f"{where}: front matter is not closed by a '---' line")
    raw_front, body = parts[1], parts[2]
    defaults = _default_params(raw_front, where)
    overrides = dict(overrides)
    swap_override = overrides.pop("swap", None)
    unknown = set(overrides) - set(defaults)
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise PromptFileError(f"{where}: unknown parameter(s) {sorted(unknown)} for metric {name}; it takes: {known}")
    params = {**defaults, **overrides}
    try:
        return _build_jinja_metric(name, path, text, raw_front, body, params, swap_override)
    except PromptFileError as e:
        if not overrides and swap_override is None:
            raise
        try:  # the file itself is fine with its defaults: then the values given are at fault
            _build_jinja_metric(name, path, text, raw_front, body, defaults, None)
        except PromptFileError:
            raise e from None
        given = {**overrides, **({"swap": swap_override} if swap_override is not None else {})}
        values = ", ".join(f"{k}={v!r}" for k, v in given.items())
        reason = str(e).removeprefix(f"{where}: ")
        raise PromptFileError(
            f"metric {name}: the parameter(s) {values} do not fit it: {reason}. "
            f"Default: {', '.join(f'{k}={defaults[k]!r}' for k in given if k in defaults) or 'none'}."
        ) from None


def _build_jinja_metric(
    name: str, path: Path, text: str, raw_front: str, body: str, params: dict[str, Any], swap_override: Any
) -> Metric:
    where = str(path)
    front = _render_front_matter(raw_front, params, where)
    allowed = {"description", "temperature", "system", "kind", "params", "outputs", "optional", "swap", "images"}
    extra = set(front) - allowed
    if extra:
        raise PromptFileError(
            f"{where}: unknown front matter key(s) {sorted(extra)}; allowed: {', '.join(sorted(allowed))}"
        )
    kind = front.get("kind", MetricKind.SCORE.value)
    if kind not in KINDS:
        raise PromptFileError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    kind = MetricKind(kind)
    outputs = _parse_outputs(name, front.get("outputs"), where)
    temperature = front.get("temperature", 0.1)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise PromptFileError(f"{where}: temperature must be a number between 0 and 2")
    optional = tuple(front.get("optional") or ())
    swap = front.get("swap")
    if swap_override is not None:
        if kind != MetricKind.PAIRWISE or not swap:
            raise PromptFileError(
                f"{where}: swap= applies only to pairwise metrics that declare their two response variables"
            )
        swap = swap if swap_override else None
    if kind == MetricKind.BINARY:
        verdicts = [o for o in outputs if o.enum]
        if len(verdicts) != 1 or "positive" not in params or "negative" not in params:
            raise PromptFileError(f"{where}: a binary metric declares one enum output and params positive/negative")
    if kind == MetricKind.PAIRWISE:
        if swap is not None and (not isinstance(swap, list) or len(swap) != 2):
            raise PromptFileError(f"{where}: swap must name the two response variables, e.g. [response1, response2]")
        ints = [o for o in outputs if o.type == OutputType.INTEGER]
        if len(ints) != 2:
            raise PromptFileError(f"{where}: a pairwise metric declares two integer score outputs")
    template = compile_template(body.strip("\n"), where)
    system_source = front.get("system")
    system = compile_template(system_source, where + " (system)") if system_source else None
    used = template_variables(body) | (template_variables(system_source) if system_source else set())
    variables = tuple(sorted(used - set(params) - set(optional)))
    images = front.get("images") or []
    if not isinstance(images, list) or not all(isinstance(v, str) for v in images):
        raise PromptFileError(f"{where}: 'images' must be a list of variable names, e.g. images: [image]")
    for var in images:
        if var not in variables and var not in optional:
            raise PromptFileError(
                f"{where}: images names {var!r}, which is not a variable of the template; "
                f"write {{{{ {var} }}}} where it goes"
            )
    inputs = set(variables) | set(optional)
    misuse = marker_misuse(body, inputs)
    if system_source:
        in_system = template_variables(system_source) & inputs
        misuse.update({v: "in the system prompt (images go in the user message)" for v in in_system})
    for var in images:
        if var in misuse:
            raise PromptFileError(
                f"{where}: image variable {var!r} is used {misuse[var]}; "
                f"write {{{{ {var} }}}} alone where the image goes"
            )
    return Metric(
        name=name,
        description=str(front.get("description", "")).strip(),
        kind=kind,
        temperature=float(temperature),
        outputs=outputs,
        params=params,
        variables=variables,
        optional=optional,
        swap=tuple(swap) if swap else None,
        text=text,
        path=path,
        system_source=system_source,
        images=tuple(images),
        image_misuse=misuse,
        _template=template,
        _system=system,
    )


def _find_json_objects(text: str) -> list[dict]:
    dec = json.JSONDecoder()
    found = []
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and obj:
            found.append(obj)
    return found


def parse_seed_file(name: str, path: Path, text: str, overrides: dict[str, Any]) -> Metric:
    """A seed-004 prompt: ``{instruction}``/``{output}`` placeholders and a JSON example reply."""
    where = str(path)
    if overrides:
        raise PromptFileError(f"{where}: seed-style .txt prompts take no parameters")
    examples = _find_json_objects(text)
    if not examples:
        raise PromptFileError(
            f'{where}: a seed-style prompt must show the reply as a JSON example, e.g. {{"score": 8}}'
        )
    example = examples[-1]
    mode = name.split("_", 1)[0]
    decl: dict[str, dict[str, Any]] = {}
    for key, value in example.items():
        if key == "score":
            column = name
        elif mode in ("Q", "QA") and name.endswith("_All"):
            column = f"{mode}_{ALIASES.get(key, key)}"
        else:
            column = f"{name}_{key}"
        if isinstance(value, bool):
            decl[key] = {"type": "boolean", "column": column}
        elif isinstance(value, (int, float)):
            decl[key] = {"type": "integer", "minimum": 1, "maximum": 10, "column": column}
        else:
            decl[key] = {"type": "string", "column": column}
    outputs = _parse_outputs(name, decl, where)
    variables = seed_template_variables(text, SEED_VARIABLES)
    return Metric(
        name=name,
        description=f"seed-style prompt {path.name}",
        kind=MetricKind.SCORE,
        temperature=1.0 if _DIFFICULTY.search(name) else 0.1,
        outputs=outputs,
        params={},
        variables=tuple(sorted(variables)),
        optional=(),
        swap=None,
        text=text,
        path=path,
        seed_style=True,
        _template=SeedTemplate(text, variables),
    )


def _rebuild_metric(
    name: str,
    path: Path | None,
    text: str,
    seed_style: bool,
    params: dict,
    swap: Any,
    outputs: tuple,
    pack: dict[str, str] | None = None,
) -> Metric:
    """A pickled :class:`Metric` again: parsed from its text, with the columns its run settled on."""
    where = path if path is not None else Path(f"{name}.jinja")
    parse = parse_seed_file if seed_style else parse_jinja_file
    return replace(parse(name, where, text, dict(params)), swap=swap, outputs=outputs, pack=pack)


def canonical_name(name: str) -> str:
    """Apply the seed's aliases: ``QA_Meaningness`` -> ``QA_Meaningfulness``."""
    head, _, tail = name.rpartition("_")
    tail = ALIASES.get(tail, tail)
    return f"{head}_{tail}" if head else tail


def _internal(column: str) -> bool:
    """A column no user named: hf-judge's own (``__label__``) or pandas' index (``__index_level_0__``)."""
    return column.startswith("__") and column.endswith("__")
