"""Metrics: a prompt file and the declaration of what its reply holds.

One declaration (the ``outputs`` of a prompt file's front matter) gives the
JSON schema sent as structured output, the validator and the output columns.
See CONTRIBUTING.md for the file format. Built-in files live in the package's
``prompts`` folder; files in a user's ``prompts_dir`` work the same way and
take precedence over built-ins of the same name. Installed metric packs (entry
points of group ``hf_judge.metrics``, see :func:`metric_packs`) add names of
their own: a name is looked up in the prompts_dir(s), then the built-ins, then
the packs; a pack never replaces a built-in, and a name two packs define is
refused, so a name never silently means another prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from ..errors import MissingColumnError, PromptFileError, StrEnum, UnknownMetricError
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
    from importlib.metadata import EntryPoint

    from datasets import Value

logger = logging.getLogger("hf_judge")

TEMPLATE_SUFFIXES = (".jinja", ".j2", ".jinja2")
SEED_SUFFIX = ".txt"
# The entry-point group a metric pack registers its prompt files under (the convention of `llm`'s plugins).
ENTRY_POINT_GROUP = "hf_judge.metrics"


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
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


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
                f"Available columns: {', '.join(available) or '(none)'}. "
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
        if not isinstance(key, str) or not _NAME.match(key):
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


def _parse_jinja_file(name: str, path: Path, text: str, overrides: dict[str, Any]) -> Metric:
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


def _parse_seed_file(name: str, path: Path, text: str, overrides: dict[str, Any]) -> Metric:
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
    parse = _parse_seed_file if seed_style else _parse_jinja_file
    return replace(parse(name, where, text, dict(params)), swap=swap, outputs=outputs, pack=pack)


def canonical_name(name: str) -> str:
    """Apply the seed's aliases: ``QA_Meaningness`` -> ``QA_Meaningfulness``."""
    head, _, tail = name.rpartition("_")
    tail = ALIASES.get(tail, tail)
    return f"{head}_{tail}" if head else tail


def _search_dirs(prompts_dir: str | os.PathLike | Iterable | None) -> list[Path]:
    dirs: list[Path] = []
    if prompts_dir is not None:
        items = [prompts_dir] if isinstance(prompts_dir, (str, os.PathLike)) else list(prompts_dir)
        for d in items:
            p = Path(d).expanduser()
            if not p.is_dir():
                raise PromptFileError(
                    f"prompts_dir {str(p)!r} is not a folder. Pass the folder that holds your Mode_Metric.jinja files."
                )
            dirs.append(p)
    dirs.append(builtin_prompts_dir())
    return dirs


def _dir_files(folder: Path) -> dict[str, Path]:
    """Metric name -> prompt file, for the files of one folder (``X.j2`` before ``X.jinja``: sorted order)."""
    found: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.suffix in TEMPLATE_SUFFIXES + (SEED_SUFFIX,) and p.stem not in found and _NAME.match(p.stem):
            found[p.stem] = p
    return found


@dataclass(frozen=True)
class MetricPack:
    """An installed metric pack: one entry point of group ``hf_judge.metrics`` and the prompt files it points at.

    ``dist``/``version``: the distribution that declares it; ``files``: metric name -> prompt file, without
    the names of built-in metrics (a pack cannot replace one).

    Example:
        >>> all(isinstance(pack, MetricPack) and pack.label for pack in metric_packs())
        True
    """

    dist: str
    version: str
    entry_point: str
    folder: Path
    files: dict[str, Path] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        """``name version``, as `hf-judge metrics` and the warnings show it."""
        return f"{self.dist} {self.version}"

    def record(self) -> dict[str, str]:
        """What the run's summary and card keep of the pack a metric came from."""
        return {"name": self.dist, "version": self.version, "entry_point": self.entry_point}


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    # Packs are looked up on every metric load (a run loads its metrics more than once): say each thing once.
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning("%s", message)


def _package_prompts(module: str, locations: Iterable[str] | None) -> Path:
    if not locations:
        raise PromptFileError(
            f"{module} is a module, not a package: point the entry point at a package with a prompts/ folder"
        )
    folder = Path(next(iter(locations))) / "prompts"
    if not folder.is_dir():
        raise PromptFileError(f"the package {module} has no prompts/ folder ({folder}) for its Mode_Metric.jinja files")
    return folder


def _pack_folder(ep: EntryPoint) -> Path:
    """The folder an entry point of a metric pack names.

    ``name = "package"`` (the usual form): the package's ``prompts/`` folder, found without importing it.
    ``name = "module:attr"``: a folder (a path or an ``importlib.resources`` traversable on disk), a package
    (its ``prompts/`` folder), or a function of no arguments that returns one of these.
    """
    if ep.attr is None:
        import importlib.util

        spec = importlib.util.find_spec(ep.module)
        if spec is None:
            raise PromptFileError(f"no module {ep.module!r} is installed")
        folder = _package_prompts(ep.module, spec.submodule_search_locations)
    else:
        obj = ep.load()
        if callable(obj):
            obj = obj()
        if isinstance(obj, ModuleType):
            folder = _package_prompts(obj.__name__, getattr(obj, "__path__", None))
        elif isinstance(obj, (str, os.PathLike)):
            folder = Path(obj)
        else:
            raise PromptFileError(
                f"{ep.value} is a {type(obj).__name__}, not a folder on disk: give a pathlib.Path, a package, "
                "or a function returning one (a zipped install has no folder: install the pack unzipped)"
            )
    if not folder.is_dir():
        raise PromptFileError(f"{folder} is not a folder: the pack's prompt files go in a folder on disk")
    return folder


def _load_pack(ep: EntryPoint, builtins: dict[str, Path]) -> MetricPack | None:
    dist = ep.dist
    name, version = (dist.name, dist.version) if dist is not None else ("(unknown distribution)", "?")
    where = f"metric pack {name} {version} (entry point {ep.name} = {ep.value!r} in group {ENTRY_POINT_GROUP})"
    try:
        folder = _pack_folder(ep)
        files = _dir_files(folder)
    except Exception as e:  # noqa: BLE001 - a broken pack must not break the built-ins, other packs or the listing
        why = str(e) if isinstance(e, PromptFileError) else f"{type(e).__name__}: {e}"
        _warn_once(f"{where} is skipped: {why}. Fix the pack, or uninstall it (pip uninstall {name}).")
        return None
    if not files:
        _warn_once(f"{where} has no prompt files (Mode_Metric.jinja) in {folder}.")
    for taken in sorted(set(files) & set(builtins)):
        _warn_once(
            f"{where} defines {taken} ({files.pop(taken)}), the name of a built-in metric: {taken} is the "
            "built-in one. The pack should rename it; to use its prompt in place of the built-in, copy the file "
            "into a prompts_dir (prompts_dir= / --prompts-dir), which comes first."
        )
    return MetricPack(name, version, ep.name, folder, files)


def metric_packs() -> list[MetricPack]:
    """The installed metric packs: the entry points of group ``hf_judge.metrics``, by distribution name.

    A pack that cannot be used (its module is missing or fails to import, it names no folder) is left
    out with a warning naming it; the built-ins and the other packs stay usable. Entry points are read
    on every call, so a pack installed while Python runs is found. A pack's own declaration, in its
    ``pyproject.toml``: ``[project.entry-points."hf_judge.metrics"]`` ``my_pack = "my_pack"`` (the
    package ``my_pack`` holds ``prompts/Mode_Metric.jinja``).

    Example:
        >>> [pack.label for pack in metric_packs()]  # doctest: +SKIP
        ['hf-judge-demo-pack 0.1.0']
    """
    from importlib.metadata import entry_points

    builtins = _dir_files(builtin_prompts_dir())
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.dist.name if e.dist else "", e.name))
    packs = [pack for ep in found if (pack := _load_pack(ep, builtins)) is not None]
    for name, owners in _pack_clashes(packs).items():
        _warn_once(_clash_message(name, owners))
    return packs


def _pack_clashes(packs: Iterable[MetricPack]) -> dict[str, list[MetricPack]]:
    owners: dict[str, list[MetricPack]] = {}
    for pack in packs:
        for name in pack.files:
            owners.setdefault(name, []).append(pack)
    return {name: found for name, found in owners.items() if len(found) > 1}


def _clash_message(name: str, owners: list[MetricPack]) -> str:
    which = " and ".join(f"{p.label} ({p.files[name]})" for p in owners)
    return (
        f"metric {name} is defined by more than one installed metric pack: {which}; hf-judge will not pick "
        f"one. Uninstall one of them (pip uninstall {owners[-1].dist}), or copy the file you mean into a "
        "prompts_dir (prompts_dir= / --prompts-dir), which comes before the packs."
    )


class _Entry(NamedTuple):
    path: Path
    pack: MetricPack | None = None
    builtin: bool = False


def _catalogue(prompts_dir: Any, packs: Iterable[MetricPack]) -> tuple[dict[str, _Entry], dict[str, list]]:
    """Name -> where its prompt file is, in lookup order (prompts_dir(s), built-ins, packs), and the
    names that two packs define (not loadable)."""
    dirs = _search_dirs(prompts_dir)
    found: dict[str, _Entry] = {}
    for d in dirs:
        for name, path in _dir_files(d).items():
            found.setdefault(name, _Entry(path, builtin=d is dirs[-1]))
    packs = list(packs)
    clashes = {n: owners for n, owners in _pack_clashes(packs).items() if n not in found}
    for pack in packs:
        for name, path in pack.files.items():
            if name not in clashes:
                found.setdefault(name, _Entry(path, pack))
    return found, clashes


def available_metrics(prompts_dir: str | os.PathLike | Iterable | None = None) -> dict[str, Path]:
    """Every metric name that can be loaded -> its prompt file: a prompts_dir's first, then the
    built-ins, then those of installed metric packs (:func:`metric_packs`).

    Example:
        >>> "QA_All" in available_metrics()
        True
    """
    return {name: entry.path for name, entry in _catalogue(prompts_dir, metric_packs())[0].items()}


def load_metric(name: str, *, prompts_dir: str | os.PathLike | Iterable | None = None, **params: Any) -> Metric:
    """Load a metric by name, with optional parameters.

    Example:
        >>> judge = load_metric("Binary", positive="yes", negative="no")
        >>> judge.params["positive"]
        'yes'
    """
    if isinstance(name, Metric):
        return name
    return _load(canonical_name(str(name)), prompts_dir, params, metric_packs())


def _load(name: str, prompts_dir: Any, params: dict[str, Any], packs: list[MetricPack]) -> Metric:
    files, clashes = _catalogue(prompts_dir, packs)
    if name in clashes:
        raise UnknownMetricError(_clash_message(name, clashes[name]))
    entry = files.get(name)
    if entry is None:
        import difflib

        known = ", ".join(sorted(files))
        close = difflib.get_close_matches(name, files, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownMetricError(
            f"unknown metric {name!r}.{hint} Known metrics: {known}. Add your own as {name}.jinja in a prompts_dir."
        )
    return _load_file(name, entry, params)


def _load_file(name: str, entry: _Entry, params: dict[str, Any]) -> Metric:
    path, pack = entry.path, entry.pack
    try:
        text = path.read_text(encoding="utf-8")
        parse = _parse_seed_file if path.suffix == SEED_SUFFIX else _parse_jinja_file
        metric = parse(name, path, text, params)
    except (OSError, UnicodeDecodeError) as e:
        where = f"metric pack {pack.label}: " if pack is not None else ""
        raise PromptFileError(f"{where}{path}: cannot read the prompt file: {e}") from None
    except PromptFileError as e:
        if pack is None:
            raise
        raise PromptFileError(f"metric pack {pack.label}: {e}") from None
    return replace(metric, pack=pack.record()) if pack is not None else metric


def listed_metrics(prompts_dir: str | os.PathLike | Iterable | None = None) -> list[tuple[Metric, str]]:
    """What `hf-judge metrics` shows: each loadable metric and where it comes from (``prompts_dir``,
    ``built-in``, or a pack's ``name version``). A pack's file that does not load is left out with a
    warning naming the pack; a name two packs define is listed for each, marked ``(clash)``.

    Example:
        >>> [(m.name, source) for m, source in listed_metrics() if m.name == "QA_Clarity"]
        [('QA_Clarity', 'built-in')]
    """
    files, clashes = _catalogue(prompts_dir, metric_packs())
    entries = [
        (name, e, "built-in" if e.builtin else "prompts_dir" if e.pack is None else e.pack.label)
        for name, e in files.items()
    ]
    for name, owners in clashes.items():  # listed for each pack; the warning says what to do
        entries += [(name, _Entry(p.files[name], p), f"{p.label} (clash)") for p in owners]
    rows = []
    for name, entry, source in entries:
        try:
            rows.append((_load_file(name, entry, {}), source))
        except PromptFileError as e:
            if entry.pack is None:
                raise  # the user's own file: they asked for that folder
            _warn_once(f"{e} ({name} is left out)")
    return rows


def resolve_metrics(
    metrics: Any, prompts_dir: Any = None, metric_params: dict[str, dict] | None = None
) -> list[Metric]:
    """Turn the user's ``metrics`` argument into loaded metrics, checking for clashes.

    Accepts a name, a :class:`Metric`, a dict ``{"name": ..., "params": {...}}``,
    or a list of these. ``Mode_All`` next to a single metric of its mode is
    allowed: the single metric keeps its columns and the All's clashing ones
    become ``<Mode>_All_<Metric>``.

    Example:
        >>> [m.columns for m in resolve_metrics(["QA_Meaningfulness", "QA_All"])][0]
        ['QA_Meaningfulness_reason', 'QA_Meaningfulness']
        >>> resolve_metrics("QA_All,QA_Meaningfulness")[0].columns[-1]
        'QA_All_Meaningfulness'
    """
    if isinstance(metrics, (str, Metric, dict)):
        metrics = [metrics]
    if not metrics:
        raise UnknownMetricError("no metrics given. Pass metrics=['QA_All'] or see `hf-judge metrics` for the list.")
    metric_params = metric_params or {}
    loaded: list[Metric] = []
    packs: list[MetricPack] | None = None  # looked up once, and only when a name is asked for
    for spec in metrics:
        if isinstance(spec, Metric):
            loaded.append(spec)
            continue
        if isinstance(spec, dict):
            spec = dict(spec)
            name = spec.pop("name", None)
            params = spec.pop("params", None) or {}
            if name is None or spec:
                raise UnknownMetricError(
                    f"a metric given as a mapping needs 'name' and optional 'params', got {sorted(spec) or 'no name'}"
                )
        else:
            name, params = spec, {}
        for n in str(name).split(","):
            n = n.strip()
            if n:
                packs = metric_packs() if packs is None else packs
                n = canonical_name(n)
                loaded.append(_load(n, prompts_dir, {**metric_params.get(n, {}), **params}, packs))
    return _settle_columns(loaded)


def _is_all(metric: Metric) -> bool:
    return metric.mode is not None and metric.name == f"{metric.mode}_All"


def _settle_columns(loaded: list[Metric]) -> list[Metric]:
    """Give every output its own column, or say how to get there.

    ``Mode_All`` writes the columns of the single metrics of its mode
    (``QA_Meaningfulness``), so asking for both is a clash by construction.
    The single metric keeps its columns whatever else is asked (a filter on
    ``QA_Meaningfulness`` means the dedicated judge's score), and only the
    All's clashing outputs move to ``<Mode>_All_<Metric>`` (``QA_All_Meaningfulness``).
    The request (prompt, schema keys) is unchanged, so no reply is paid for twice.
    """
    singles = {c for m in loaded if not _is_all(m) for c in m.columns}
    settled = []
    for m in loaded:
        if _is_all(m) and singles.intersection(m.columns):
            outputs = tuple(
                replace(o, column=f"{m.name}_{o.column.removeprefix(f'{m.mode}_')}") if o.column in singles else o
                for o in m.outputs
            )
            m = replace(m, outputs=outputs)
        settled.append(m)
    seen: dict[str, str] = {}
    for m in settled:
        for col in m.columns:
            if col in seen:
                fix = (
                    f"list {m.name} once"
                    if seen[col] == m.name
                    else "keep one of them, score them in separate runs, or copy one's prompt file into your "
                    "prompts_dir and give that output its own `column:`"
                )
                raise UnknownMetricError(f"metrics {seen[col]} and {m.name} both write column {col!r}: {fix}.")
            seen[col] = m.name
    return settled
