"""Preparing a run: its settings, key, splits, plans (metric x columns), judges, fingerprint and summary."""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict

from .. import constants
from ..errors import ConfigError, TemplateError
from ..judging import logprobs
from ..judging.catalogue import load_metric
from ..judging.ensemble import Layout
from ..judging.images import ImageValueError, image_urls, image_variables
from ..judging.render import format_value
from ..redact import register, resolve_secret
from ..results.errors_split import ERRORS_SPLIT, current, is_errors_split
from ..results.summary import RunSummary
from ..settings import Settings, check_base_url, public_fields, resolve_settings, resolved_provider
from ..store.replies import ReplyStore
from ..transport.client import JudgeClient, judge_panel
from ..transport.endpoint import has_credentials
from .core import TOKEN_COLUMNS, Plan, score_types
from .pipeline import SplitRun, read_batches

logger = logging.getLogger("hf_judge")


def as_splits(ds: Dataset | DatasetDict) -> tuple[dict[str, Dataset], Dataset | None]:
    """The splits to score, and the ``errors`` split of an earlier run (a scored input), if any."""
    if isinstance(ds, (IterableDataset, IterableDatasetDict)):
        return stream_splits(ds)  # type: ignore[return-value,unused-ignore]  # a stream split stands for a Dataset
    if isinstance(ds, Dataset):
        return {"train": ds}, None
    if isinstance(ds, DatasetDict):
        splits = dict(ds)
        earlier = splits.pop(ERRORS_SPLIT, None)
        if earlier is not None and not is_errors_split(earlier.column_names):
            raise ConfigError(
                f"the input has a split named {ERRORS_SPLIT!r} that is not an hf_judge errors split "
                f"(columns {earlier.column_names}); hf_judge writes its own: rename that split"
            )
        return splits, None if earlier is None else current(earlier)  # an earlier version's: its judge unknown
    raise ConfigError(
        f"score_dataset takes a datasets.Dataset, DatasetDict, IterableDataset or IterableDatasetDict, "
        f"got {type(ds).__name__}. "
        "Load files with datasets.load_dataset('json', data_files=...) first."
    )


def streams_as_one(ds: Any) -> Any:
    """A ``DatasetDict`` whose splits are all ``IterableDataset`` (``DatasetDict({"train": d.to_iterable_dataset()})``)
    as the ``IterableDatasetDict`` it stands for: streamed, as each of its splits is. One that mixes the two kinds
    is refused (a stream and a table are scored by two engines)."""
    if not isinstance(ds, DatasetDict) or not any(isinstance(d, IterableDataset) for d in ds.values()):
        return ds
    kinds = {k: type(d).__name__ for k, d in ds.items()}
    if all(isinstance(d, IterableDataset) for d in ds.values()):
        return IterableDatasetDict(dict(ds))
    raise ConfigError(
        f"the DatasetDict mixes streamed and loaded splits ({', '.join(f'{k}: {v}' for k, v in kinds.items())}): "
        "give all splits as one kind, e.g. IterableDatasetDict({k: d.to_iterable_dataset() ...}) to stream them all"
    )


def results_fingerprint(
    ds: Dataset,
    split: str,
    plans: list[Plan],
    client: JudgeClient,
    max_input_chars: int | None,
    token_columns: bool,
    layout: Layout | None = None,
    judges: list[JudgeClient] | None = None,
) -> str:
    state = {
        "v": constants.CACHE_VERSION,
        # private, but datasets (5.2) has no public getter, and the fingerprint is what names the data's state
        "data": ds._fingerprint,
        "split": split,
        "metrics": [
            # images only where there are some: text-only fingerprints stay what they were, and
            # results of runs from before images were sent as images are not reused
            [p.metric.name, p.metric.prompt_hash, p.metric.json_schema, p.metric.columns, p.columns, p.temperature]
            + ([sorted(p.images)] if p.images else [])
            for p in plans
        ],
        "model": client.model,
        "base_url": client.server_id,
        "top_p": client.top_p,
        "max_tokens": client.max_tokens,
        "max_input_chars": max_input_chars,
        "token_columns": token_columns,
    }
    ensemble = layout.fingerprint() if layout is not None else None
    if ensemble is not None:  # only then: the fingerprints of one-reply runs stay what they were
        state["ensemble"] = {**ensemble, "servers": [[j.model, j.server_id] for j in judges or [client]]}
    if client.settings.logprobs:  # only then: the fingerprints of runs without it stay what they were
        state["logprobs"] = client.settings.top_logprobs
    if client.settings.reuse == "strict":  # only then: the default run's fingerprint stays what it was
        state["reuse"] = "strict"
    providers = sorted({j.provider for j in judges or [client]} - {"openai"})
    if providers:  # only then: another API is another result (the same server and model speaking OpenAI's is not)
        state["providers"] = providers
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:32]


def preflight(split: str, ds: Dataset, plans: list[Plan]) -> None:
    """Render every metric on the split's first row, so template errors surface before any request."""
    needed = sorted({c for p in plans for c in p.columns.values() if c})
    if isinstance(ds, IterableDataset):  # a stream: its first row, read now (nothing more)
        row = first_row(ds, needed) if plans else None
        if row is None:
            return
        first = row
    elif len(ds) == 0:
        return
    else:
        raw_images = any(p.images for p in plans)
        first = (
            {c: v[0] for c, v in next(read_batches(ds.select_columns(needed), 1, raw_images)).items()} if needed else {}
        )

    for p in plans:
        values = {v: format_value(first[c]) if c and v not in p.images else None for v, c in p.columns.items()}
        values = {k: ("" if v is None and k not in p.metric.optional else v) for k, v in values.items()}
        for var in p.images:
            col = p.columns[var]
            if not col:  # an optional image variable left unmapped: sent as nothing, like a text one
                continue
            try:
                values[var] = image_urls(first[col]) if first[col] is not None else None
            except ImageValueError as e:
                if isinstance(first[col], str):  # a text column that does not hold URLs
                    raise ConfigError(
                        f"metric {p.metric.name} sends {var!r} as an image, but column {col!r} holds text: "
                        f"row 0 of split {split!r}: {e}. "
                        f"Map {var!r} to a datasets.Image column or a column of http(s) URLs."
                    ) from None
                values[var] = ["data:,"]  # a bad image is that row's error, found when it is sent
        try:
            p.metric.messages(values, p.images)
        except TemplateError as e:
            raise TemplateError(f"{e} (split {split!r}, row 0)") from None


def plan_requests(
    split: str,
    d: Dataset,
    plans: list[Plan],
    client: JudgeClient,
    layout: Layout | None = None,
    store: ReplyStore | None = None,
):
    # large read batches: nothing waits on the renderer here, unlike in the online feeder.
    # K samples are K lines with the same body (their keys differ): a batch asks for no `n`.
    # The store: replies cached under an older key (compatible reuse) are left out of the batches.
    return SplitRun(split, d, plans, client, store, window=1024, read_batch=1024, layout=layout).requests()


def settings_doc() -> str:
    """The keyword arguments' list in the docstring, from the fields of :class:`Settings`."""
    import textwrap

    lines = []
    for name, f in public_fields().items():
        default = " (required)" if f.is_required() else "" if f.default is None else f" (default {f.default!r})"
        item = f"* ``{name}``{default}: {f.description}"
        lines.append(textwrap.fill(item, 100, subsequent_indent="  ", break_on_hyphens=False))
    return textwrap.indent("\n".join(lines), "    ").lstrip()


def run_settings(settings: Settings | None, values: Mapping[str, Any]) -> Settings:
    """``settings`` overridden by the keyword arguments, which must name public settings."""
    unknown = sorted(set(values) - set(public_fields()))
    if unknown:
        internal = [k for k in unknown if k in Settings.model_fields]
        how = f"; set {', '.join(internal)} through settings=Settings(...)" if internal else ""
        close = [(k, difflib.get_close_matches(k, list(public_fields()), n=1)) for k in unknown]
        how += "".join(f"; did you mean {m[0]!r} for {k!r}?" for k, m in close if m and k not in internal)
        raise TypeError(
            f"score_dataset() got unexpected keyword argument(s) {', '.join(unknown)}{how}. "
            f"Its settings are: {', '.join(public_fields())}"
        )
    return resolve_settings(settings, values)


def build_plans(
    splits: dict[str, Dataset],
    loaded: list,
    columns: dict[str, str] | None,
    temperature: float | None,
    if_exists: str,
    token_columns: bool,
    layout: Layout | None = None,
) -> tuple[dict[str, list[Plan]], dict[str, list[str]], dict[str, dict[str, str]]]:
    """Per split, the metrics to score and how each reads its variables (checked on the first row), the
    names of the metrics whose columns are kept, and the columns renamed to make room for a single metric
    (see free_single_metric_columns). Drops the columns ``if_exists='overwrite'`` replaces."""
    columns = dict(columns or {})
    for var, col in columns.items():
        if not isinstance(var, str) or not isinstance(col, str):
            raise ConfigError(f"columns maps template variables to column names (strings), got {var!r}: {col!r}")
    plans_by_split: dict[str, list[Plan]] = {}
    kept: dict[str, list[str]] = {}
    renamed: dict[str, dict[str, str]] = {}
    for split in list(splits):
        renamed[split] = free_single_metric_columns(splits[split], loaded)
        if renamed[split]:
            splits[split] = splits[split].rename_columns(renamed[split])
        todo, kept[split], drop = existing_columns(
            split, splits[split], loaded, if_exists, token_columns, layout or Layout()
        )
        if drop:
            splits[split] = splits[split].remove_columns(drop)
        d = splits[split]
        plans = [
            Plan(m, m.resolve_columns(columns, d.column_names), m.temperature if temperature is None else temperature)
            for m in todo
        ]
        for p in plans:
            p.images = image_variables(p.metric, p.columns, d.features)
        used = {v for m in loaded for v in (*m.variables, *m.optional)}
        unused = sorted(set(columns) - used)
        if unused:
            logger.warning(
                "columns maps %s, which no chosen metric uses (they use: %s)", unused, ", ".join(sorted(used))
            )
        preflight(split, d, plans)
        plans_by_split[split] = plans
    return plans_by_split, kept, renamed


def check_samples(settings: Settings, plans_by_split: dict[str, list[Plan]]) -> None:
    """K samples at temperature 0 are the same reply K times, each paid for: refuse them."""
    if settings.samples == 1:
        return
    cold = sorted({p.metric.name for plans in plans_by_split.values() for p in plans if p.temperature == 0})
    if cold:
        raise ConfigError(
            f"samples={settings.samples} at temperature 0 ({', '.join(cold)}): the {settings.samples} replies would "
            "be the same reply paid for each time. Sample at a temperature above 0: temperature=0.7 (--temperature 0.7)"
        )


def judge_clients(settings: Settings, api_key: str | None) -> list[JudgeClient]:
    """One client per judge (one for a run without a panel): its model, its server, its key."""
    return judge_panel(judge_specs(settings, api_key))


def judge_specs(settings: Settings, api_key: str | None) -> list[tuple[Settings, str | None]]:
    """Each judge's settings and key, resolved here (picklable: what a worker process or a Ray actor builds
    the panel's clients from, with :func:`hf_judge.transport.client.judge_panel`)."""
    if not settings.models:
        return [(settings, api_key)]
    specs: list[tuple[Settings, str | None]] = []
    for judge in settings.judges:
        own = judge_settings(judge, settings)
        specs.append((own, judge_key(judge, settings, api_key)))
    return specs


def judge_settings(judge: Any, settings: Settings) -> Settings:
    """A panel judge's own settings: the run's, with its model, server and provider."""
    update = {"model": judge.model, "base_url": judge.base_url or settings.base_url}
    return settings.model_copy(update={**update, "provider": judge.provider or settings.provider})


def judge_key(judge: Any, settings: Settings, api_key: str | None) -> str | None:
    """A panel judge's key: its own (``api_key: env:VAR``), else the run's, unless its URL carries credentials."""
    key = resolve_secret(judge.api_key, f"the api_key of judge {judge.column_name!r}")
    register(key)
    own = judge_settings(judge, settings)
    provider = resolved_provider(own)
    base = own.base_url or constants.default_base_url(provider)
    if key is None and not has_credentials(base):
        # a panel of Claude and GPT judges: each reads its own provider's key, unless the run was given one
        key = api_key if provider == resolved_provider(settings) else constants.provider_api_key(provider)
        register(key)
    return key


def resolve_api_key(settings: Settings, api_key: str | None, needed: bool) -> str | None:
    """The key to send: given, else ``OPENAI_API_KEY`` (``ANTHROPIC_API_KEY`` for an Anthropic judge), unless the
    base URL carries its own credentials.
    In a panel, the key of every judge that names none of its own (``api_key: env:VAR``)."""
    provider = resolved_provider(settings)
    base = settings.base_url or check_base_url(constants.default_base_url(provider))
    bases = [j.base_url or base for j in settings.judges if not j.api_key] if settings.models else [base]
    if api_key is None and any(not has_credentials(b) for b in bases):  # user:password@ is a URL's own auth
        api_key = constants.provider_api_key(provider)
    variable = {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}.get(provider, "OPENAI_API_KEY")
    for base in bases:
        host = urlparse(base).hostname
        if needed and not api_key and not has_credentials(base) and host in ("api.openai.com", "api.anthropic.com"):
            raise ConfigError(
                f"no API key for {base}: set {variable} (library: api_key=; CLI: --api-key-env NAME), "
                "or point base_url (--base-url) at your own server"
            )
    register(api_key)
    return api_key


def _provider(client: JudgeClient) -> dict[str, str]:
    """``{"provider": ...}`` for a judge that speaks a provider's own API, ``{}`` for OpenAI's (the default)."""
    return {} if client.provider == "openai" else {"provider": client.provider}


def new_summary(
    settings: Settings,
    client: JudgeClient,
    loaded: list,
    splits: dict[str, Dataset],
    kept: dict[str, list[str]],
    renamed: dict[str, dict[str, str]],
    layout: Layout | None = None,
    clients: list[JudgeClient] | None = None,
) -> RunSummary:
    layout = layout or Layout()
    sampling: dict[str, Any] = {
        "temperature": settings.temperature
        if settings.temperature is not None
        else {m.name: m.temperature for m in loaded},
        "top_p": settings.top_p,
        "max_tokens": settings.max_tokens,
    }
    if settings.logprobs:  # only when on: the summaries and cards of runs without logprobs stay as they were
        sampling["top_logprobs"] = settings.top_logprobs
    if layout.samples > 1:
        sampling.update(samples=layout.samples, min_samples=layout.min_samples)
    if layout.panel:
        sampling["aggregator"] = str(layout.aggregator)
        sampling["judges"] = [
            # a judge's provider only where it is not OpenAI's API: the entries of OpenAI-compatible panels stay
            {"name": name, "model": c.model, "base_url_host": _host(c), **_provider(c)}
            for name, c in zip(layout.judges, clients or [], strict=True)
        ]
    summary = RunSummary(
        model=settings.model,
        base_url_host=_host(client),
        provider=_provider(client).get("provider", ""),
        metrics={m.name: m.prompt_hash for m in loaded},
        columns=list(score_types(loaded, layout, settings.logprobs)),
        sampling=sampling,
        source_dataset=source_name(splits),
        prompts={m.name: prompt_record(m) for m in loaded},
    )
    summary.notes += [
        f"kept the existing columns of {', '.join(names)} in {split} (not scored again; if_exists='overwrite', "
        "CLI --overwrite-scores, scores them again)"
        for split, names in kept.items()
        if names
    ]
    summary.notes += [
        f"renamed {', '.join(f'{a} to {b}' for a, b in names.items())} in {split}: the score an All metric wrote, "
        "beside the single metric's own columns"
        for split, names in renamed.items()
        if names
    ]
    return summary


def _host(client: JudgeClient) -> str:
    return urlparse(client.base_url).netloc.rpartition("@")[2]  # never user:password@


def feature_kind(feature: Any) -> str | None:
    dtype = getattr(feature, "dtype", None)
    if dtype is None:
        return None
    return "bool" if dtype == "bool" else "number" if dtype.startswith(("int", "uint", "float")) else dtype


def column_mapping(loaded: list, columns: dict[str, str] | None, splits: dict[str, Any]) -> dict[str, str]:
    """Template variable -> the column judged as it, the identity mapping included, over every metric (an
    optional variable no split has a column for is left out): a summary and a card say what was judged as what.

    Example:
        >>> from hf_judge.judging.catalogue import resolve_metrics
        >>> column_mapping(resolve_metrics(["QA_Clarity"]), {"output": "answer"}, {})
        {'instruction': 'instruction', 'output': 'answer'}
    """
    columns = columns or {}
    present = {c for d in splits.values() for c in (d.column_names or ())}
    mapping = {v: columns.get(v, v) for m in loaded for v in m.variables}
    mapping.update({v: columns.get(v, v) for m in loaded for v in m.optional if columns.get(v, v) in present})
    return mapping


def source_name(splits: dict[str, Dataset]) -> str:
    """The dataset's name as ``datasets`` knows it (the CLI passes the exact Hub id instead)."""
    for d in splits.values():
        name = getattr(d.info, "dataset_name", None) or getattr(d.info, "builder_name", None)
        if name and name not in ("json", "csv", "parquet", "text", "arrow", "generator", "dataset"):
            return str(name)
    return ""


def prompt_record(metric) -> dict[str, Any]:
    """The prompt file a metric was loaded from: name, full sha256 of its text, params, text (for the Hub),
    and the metric pack that ships it, if one does (name, version, entry point)."""
    return {
        "file": metric.path.name if metric.path is not None else f"{metric.name}.jinja",
        "sha256": hashlib.sha256(metric.text.encode()).hexdigest(),
        "params": metric.params,
        "text": metric.text,
        **({"pack": metric.pack} if metric.pack else {}),
    }


def free_single_metric_columns(d: Dataset, loaded: list) -> dict[str, str]:
    """Columns of an earlier ``<Mode>_All`` run that a single metric asked for now needs: old -> new name.

    ``QA_All`` wrote ``QA_Clarity``; scoring ``QA_Clarity`` later needs that name for its own score. The All's
    score moves to ``QA_All_Clarity``, the name it gets when both run together (see metrics.resolve_metrics),
    so adding a single metric to a scored dataset keeps every score. Only when the dataset holds every column
    of the All metric and none of the single metric's other columns: anything else is a real conflict.
    """
    names = set(d.column_names)
    renames: dict[str, str] = {}
    for m in loaded:
        if m.mode is None or m.name.endswith("_All") or m.name not in names:
            continue
        others = [c for c in m.columns if c != m.name]
        if not others or any(c in names for c in others):
            continue
        try:
            all_columns = load_metric(f"{m.mode}_All").columns
        except ConfigError:
            continue
        target = f"{m.mode}_All_{m.name.removeprefix(m.mode + '_')}"
        if m.name in all_columns and names.issuperset(all_columns) and target not in names:
            renames[m.name] = target
    return renames


def existing_columns(
    split: str, d: Dataset, loaded: list, if_exists: str, token_columns: bool, layout: Layout
) -> tuple[list, list[str], list[str]]:
    """(metrics to score, names of metrics kept, columns to drop first) for one split."""
    todo, kept, drop, conflicts = [], [], [], []
    for m in loaded:
        features = layout.features(m)
        present = [c for c in features if c in d.column_names]
        if not present:
            todo.append(m)
        elif if_exists == "overwrite":
            todo.append(m)
            # with them the probability-weighted columns of the scores replaced: never beside newer scores
            weighted = {*logprobs.columns(m), *layout.logprob_types(m)}
            drop += present + [c for c in d.column_names if c in weighted]
        elif if_exists == "error":
            conflicts.append(f"{m.name} ({', '.join(present)})")
        elif len(present) < len(features):
            missing = [c for c in features if c not in present]
            conflicts.append(f"{m.name} (has {', '.join(present)} but not {', '.join(missing)})")
        else:
            odd = [c for c in present if feature_kind(d.features[c]) != feature_kind(features[c])]
            if odd:
                conflicts.append(f"{m.name} ({odd[0]} is {d.features[odd[0]]}, {m.name} writes {features[odd[0]]})")
            else:
                kept.append(m.name)
    tokens = [c for c in TOKEN_COLUMNS if token_columns and c in d.column_names]
    if tokens and if_exists == "overwrite":
        drop += tokens
    elif tokens and todo:
        conflicts.append(f"token columns ({', '.join(tokens)}) that this run's token_columns would replace")
    if conflicts:
        raise ConfigError(
            f"split {split!r} already has columns of {'; '.join(conflicts)}. "
            "Score them again and replace those columns "
            "with --overwrite-scores (library: if_exists='overwrite')"
        )
    return todo, kept, drop


def stream_splits(
    ds: IterableDataset | IterableDatasetDict,
) -> tuple[dict[str, IterableDataset], IterableDataset | None]:
    """The splits of a streamed input (a bare ``IterableDataset`` becomes ``train``) and its ``errors`` split."""
    splits = {"train": ds} if isinstance(ds, IterableDataset) else dict(ds)
    for name, d in splits.items():
        if d.features is None:  # streamed JSON/CSV without declared features: datasets infers them from rows
            splits[name] = d._resolve_features()
    earlier = splits.pop(ERRORS_SPLIT, None)
    if earlier is not None and not is_errors_split(earlier.column_names or []):
        raise ConfigError(
            f"the input has a split named {ERRORS_SPLIT!r} that is not an hf_judge errors split "
            f"(columns {earlier.column_names}); hf_judge writes its own: rename that split"
        )
    return splits, earlier


def first_row(d: IterableDataset, columns: list[str]) -> dict[str, Any] | None:
    """The first row of a streamed split (only ``columns``, as Arrow gives them), or None when it is empty."""
    table = next(iter(d.select_columns(columns).with_format("arrow").iter(batch_size=1)), None)
    return None if table is None or table.num_rows == 0 else {c: v[0] for c, v in table.to_pydict().items()}
