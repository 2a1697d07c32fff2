"""Recipes: a whole scoring job in one YAML file, validated by pydantic.

Built-in recipes live in the package's ``recipes`` folder; ``--recipe NAME``
finds them by name, ``--recipe path.yaml`` reads any file. Secrets are never
written in a recipe: ``api_key: env:OPENAI_API_KEY`` names the variable that
holds the key.
"""

from __future__ import annotations

import difflib
import os
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..judging.catalogue import resolve_metrics
from ..judging.metrics import MetricKind
from ..settings import SettingsOverrides, config_error, public_fields


def builtin_recipes_dir() -> Path:
    here = Path(__file__).resolve().parent.parent  # the package: hf_judge/
    packaged = here / "recipes"
    return packaged if packaged.is_dir() else here.parent / "recipes"


class DatasetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    subset: str | None = None
    split: list[str] | str | None = None
    revision: str | None = None


class MetricItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    params: dict[str, Any] = {}


class Filters(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # true/false for a true/false score (min: {Binary: true} keeps the true rows), as filter_by_scores reads it
    min: dict[str, bool | float] = {}
    max: dict[str, bool | float] = {}
    keep_missing: bool = False


class PushSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: str
    private: bool | None = None


class Recipe(SettingsOverrides):  # type: ignore[valid-type,misc]  # a model built at import from Settings
    """A scoring job. Unknown keys are errors.

    Its settings (``model``, ``concurrency``, ...) are those of :class:`hf_judge.Settings`,
    each optional, with the same limits; flags override them (:func:`resolve_settings`).

    Example:
        >>> Recipe(metrics=["QA_All"], model="gpt-4.1-nano").metrics
        ['QA_All']
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""  # default: the file's name without .yaml
    description: str = ""
    use_when: str = ""  # what `hf-judge recipes` shows: the job the recipe is for
    dataset: DatasetSpec | None = None
    metrics: list[str | MetricItem]
    columns: dict[str, str] = {}
    api_key: str | None = None
    prompts_dir: str | None = None
    limit: Annotated[int, Field(ge=1)] | None = None
    local_port: Annotated[int, Field(ge=1, le=65535)] | None = None  # --local-port: where `model: local` listens
    token_columns: bool = False
    filters: Filters | None = None
    output_dir: str | None = None
    push_to_hub: PushSpec | None = None

    def public_yaml(self) -> str:
        """The recipe as YAML without secrets or local paths: what the Hub gets beside the scores.

        Example:
            >>> print(Recipe(metrics=["QA_All"], model="m", api_key="sk-123").public_yaml())
            metrics:
            - QA_All
            model: m
            api_key: env:OPENAI_API_KEY
            <BLANKLINE>
        """
        d = self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        d.pop("name", None)
        job = {k: d.pop(k) for k in ("description", "use_when", "dataset", "metrics", "columns") if k in d}
        d = {**job, **d}  # the job first, then its settings
        if "api_key" in d and not str(d["api_key"]).startswith("env:"):
            d["api_key"] = "env:OPENAI_API_KEY"  # a key written in the recipe never leaves the machine
        for server in [d, *(j for j in d.get("models", []) if isinstance(j, dict))]:
            if "base_url" in server:
                scheme, sep, rest = server["base_url"].partition("://")
                server["base_url"] = scheme + sep + rest.rpartition("@")[2] if sep else server["base_url"]
        if "prompts_dir" in d:
            d["prompts_dir"] = "prompts"  # the prompt files are uploaded beside the recipe
        for local in ("output_dir", "local_port"):
            d.pop(local, None)
        return yaml.safe_dump(d, sort_keys=False, allow_unicode=True)

    def calls_per_row(self) -> int:
        """Requests per row: one per metric, two for a pairwise judge that swaps the responses.

        Example:
            >>> load_recipe("pairwise").calls_per_row()
            2
        """
        metrics = resolve_metrics(self.metric_specs(), self.prompts_dir)
        return sum(2 if m.kind == MetricKind.PAIRWISE and m.swap else 1 for m in metrics)

    def metric_specs(self) -> list[Any]:
        return [m if isinstance(m, str) else {"name": m.name, "params": m.params} for m in self.metrics]

    def settings(self) -> dict[str, Any]:
        """The settings this recipe gives (a layer for :func:`hf_judge.settings.resolve_settings`)."""
        return {k: v for k in public_fields() if (v := getattr(self, k)) is not None}


def find_recipe(name_or_path: str | os.PathLike) -> Path:
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return p
    # "quality", or "recipes/quality.yaml" as older docs wrote it, from any folder
    name = p.stem if p.parent.name == "recipes" else str(name_or_path)
    for suffix in ("", ".yaml", ".yml"):
        q = builtin_recipes_dir() / f"{name}{suffix}"
        if q.is_file():
            return q
    names = sorted(x.stem for x in builtin_recipes_dir().glob("*.yaml"))
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise ConfigError(
        f"no recipe file or built-in recipe named {str(name_or_path)!r}{hint} Built-in recipes: {', '.join(names)}"
    )


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a YAML mapping of keys to values")
    return data


def _validated(data: dict[str, Any], where: str) -> Recipe:
    """``Recipe(**data)``, or a ConfigError naming every bad field, with a did-you-mean for a misspelt key."""
    try:
        return Recipe(**data)
    except ValidationError as e:
        error = config_error(e, where)
        hints = [
            f"{'.'.join(str(x) for x in err['loc'])!r} -> {close!r}"
            for err in e.errors()
            if err["type"] == "extra_forbidden" and (close := _close_key(err["loc"]))
        ]
        if hints:
            raise ConfigError(f"{error}. Did you mean: {', '.join(hints)}?") from None
        raise error from None


def _close_key(loc: tuple[Any, ...]) -> str | None:
    """The key closest to an unknown one at ``loc`` (``("dataset", "nmae")`` -> ``"name"``), among the keys
    of the model it is in; None when none is close."""
    models: list[type[BaseModel]] = [Recipe]
    for part in loc[:-1]:
        fields = [m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields]
        if fields:  # a list index or a union member's name keeps the models where they are
            models = [m for f in fields for m in _models_in(f.annotation)]
    keys = [k for m in models for k in m.model_fields]
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    return close[0] if close else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds: ``list[str | MetricItem]`` -> ``[MetricItem]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """Read and validate a recipe by file path or built-in name.

    Example:
        >>> load_recipe("quality").metrics
        ['Q_All', 'QA_All']
    """
    path = find_recipe(name_or_path)
    data = read_yaml(path)
    recipe = _validated(data, f"recipe {path}")
    recipe.name = recipe.name or path.stem
    if recipe.prompts_dir and not os.path.isabs(recipe.prompts_dir):
        recipe.prompts_dir = str((path.parent / recipe.prompts_dir).resolve())
    return recipe


def list_recipes() -> dict[str, Recipe | ConfigError]:
    """Built-in recipe name -> the recipe (or the error that makes it invalid).

    Example:
        >>> list_recipes()["quality"].calls_per_row()
        2
    """
    out: dict[str, Recipe | ConfigError] = {}
    for p in sorted(builtin_recipes_dir().glob("*.yaml")):
        try:
            out[p.stem] = load_recipe(p)
        except ConfigError as e:
            out[p.stem] = e
    return out
