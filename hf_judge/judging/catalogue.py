"""The catalogue of metrics: where a name's prompt file is, and loading it.

A name is looked up in the prompts_dir(s), then the built-ins, then the installed metric packs (entry points of
group ``hf_judge.metrics``, see :func:`metric_packs`); a pack never replaces a built-in, and a name two packs define
is refused, so a name never silently means another prompt. :func:`resolve_metrics` turns a run's ``metrics``
argument into loaded metrics with a column each. What a prompt file holds, and parsing it, is metrics.py's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import PromptFileError, UnknownMetricError
from .metrics import (
    NAME_RE,
    SEED_SUFFIX,
    TEMPLATE_SUFFIXES,
    Metric,
    builtin_prompts_dir,
    canonical_name,
    parse_jinja_file,
    parse_seed_file,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

logger = logging.getLogger("hf_judge")

# The entry-point group a metric pack registers its prompt files under (the convention of `llm`'s plugins).
ENTRY_POINT_GROUP = "hf_judge.metrics"


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
        if p.suffix in TEMPLATE_SUFFIXES + (SEED_SUFFIX,) and p.stem not in found and NAME_RE.match(p.stem):
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
        parse = parse_seed_file if path.suffix == SEED_SUFFIX else parse_jinja_file
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
