"""What each engine can do, declared once (as Ray Data's ``Datasink`` declares ``supports_distributed_writes``).

:data:`CAPABILITIES` says, for each engine (:data:`ENGINES`) and each feature a job may ask for
(:data:`FEATURES`), ``YES``, a :class:`Yes` with a note, or a :class:`No` with the words the user sees and the
way out. :func:`check` is the one place an engine refuses a job: every engine calls it before any request, and
it raises the :class:`~hf_judge.errors.ConfigError` of the first feature the engine cannot do. The docs' engine x
feature tables and list of refusals (docs/reference/engines.md) are rendered from the same table
(:func:`engines_markdown`, :func:`refusals_markdown`): ``python docs/generate_reference.py`` writes the page, and
a test fails when it differs; ``python -m hf_judge.engine.capabilities`` prints them.

A new engine (a Spark one, say) is a row of :data:`ENGINES` and a column of cells here, and its refusals follow.

Example:
    >>> from hf_judge import Settings
    >>> check("stream", Settings(model="m", length_control=True))
    Traceback (most recent call last):
    ...
    hf_judge.errors.ConfigError: length_control (--length-control) is not for a stream (streaming=True, ...
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # the CLI checks with it before settings (pydantic) are imported: --help stays fast
    from ..settings import Settings


@dataclass(frozen=True)
class Engine:
    """An engine: ``title`` is its row in the docs' table, ``where`` how a refusal names it, ``matrix``: whether
    ``tests/test_matrix.py`` runs it over every feature."""

    title: str
    where: str
    matrix: bool = True
    table: bool = True
    note: str = ""


@dataclass(frozen=True)
class Yes:
    """A feature the engine does; ``note`` is the table cell's footnote (a key of :data:`NOTES`)."""

    note: str = ""


@dataclass(frozen=True)
class No:
    """A feature the engine refuses: ``message`` is the ConfigError's text (``{where}``: the engine's name,
    ``{columns}``: the columns in the way, ``{url}``: the URL given, ``{provider}``: the judge's API), ``way_out``
    what to do instead, appended to it; ``why`` the docs' reason (default: the message's)."""

    message: str
    way_out: str = ""
    why: str = ""

    def text(self, engine: Engine, **facts: object) -> str:
        """The ConfigError's words for ``engine``."""
        said = self.message.format(where=engine.where, **facts)
        return f"{said}{self.way_out.format(where=engine.where, **facts)}"


YES = Yes()
NA = Yes("n/a")  # the feature means nothing there (a map step writes no folder)

ENGINES: dict[str, Engine] = {
    "dataset": Engine("a `Dataset`, one process", "one process"),
    "stream": Engine("a stream (`streaming=True`)", "a stream (streaming=True, --streaming)"),
    "workers": Engine("`--workers N`", "workers (num_workers, --workers)"),
    "batch": Engine("`--batch`", "batch mode (batch=True, --batch)"),
    "ray": Engine("`--ray`", "Ray (score_dataset_on_ray, --ray)"),
    "map": Engine("`Dataset.map(hf_judge.Judge(...))`", "a map transform (hf_judge.Judge)", note="map"),
    "ray_stage": Engine("`score_ray_dataset` (a Ray Data stage)", "a Ray Data stage (score_ray_dataset)", False),
    "spark": Engine("`score_spark_dataframe` (Spark)", "a Spark DataFrame (score_spark_dataframe)", note="spark"),
    "batch_files": Engine("`batch export` / `batch import`", "batch export/import (hf-judge batch)", False, False),
}

# (key, the docs' column): the ways of judging a row (every engine runs them through RowCore), then what a run asks
# around its rows. The order is the order check() looks at them in.
ROW_FEATURES = {
    "plain": "one reply",
    "samples": "`samples`",
    "panel": "a panel (`models`)",
    "logprobs": "`logprobs`",
    "logprobs+samples": "`logprobs` + `samples`",
    "logprobs+panel": "`logprobs` + panel",
    "token_columns": "`token_columns`",
    "comparative": "pairwise, both orders",
    "images": "images",
}
RUN_FEATURES = {
    "no_wait": "`no_wait` (`--no-wait`)",
    "stream": "a streamed input",
    "workers": "`num_workers` > 1",
    "batch": "`batch` / `batch_import`",
    "no_cache": "`use_cache=False`",
    "batch_panel": "a panel's batch file",
    "remote_cache": "`cache_dir` on object storage",
    "fleet_panel": "a panel with `base_urls`",
    "filters": "a recipe's filters",
    "url_output": "`--output-dir s3://...`",
    "cascade": "a cascade (`escalate_model`)",
    "cascade_url": "a cascade to an `--output-dir` URL",
    "length_control": "`length_control`",
    "generator_column": "`generator_column`",
    "if_exists": "scores already there (`if_exists`, renames)",
    "runner_format": "a judge whose API is not OpenAI's, in a batch file",
    "vllm_managed": "a vLLM judge hf-judge starts (`vllm:MODEL`)",
    # asked with vllm_managed, whose refusal (batch, the clusters, a map) comes first: only a stream adds its own
    "vllm_panel": "vLLM judges hf-judge starts in a panel (each in its turn)",
}
FEATURES = {**ROW_FEATURES, **RUN_FEATURES}

NOTES = {
    "batch_panel": "one batch per judge, each at its own server (see Batch mode); `batch export`/`import` take one "
    "judge at a time",
    "ray_panel": 'each judge on its own server (`models=[{"model": ..., "base_url": ...}, ...]`); `base_urls`, a '
    "fleet of replicas of one model, is for a single judge: a panel with `base_urls` is a `ConfigError`",
    "spark": "a `mapInArrow` step over a Spark DataFrame: the same columns, and its errors as the per-row "
    "`judge_errors` column; a retried or speculative task takes its rows' replies from the shared reply store",
    "map": "the map transform (see Judging inside your own pipeline): the same columns, and its errors as a per-row "
    "`judge_errors` column instead of an `errors` split; `batch` and `num_workers` are refused there (a map step is "
    "neither)",
}

_CASCADE = "escalate_model (a cascade of judges) is not for {where}: "
_LENGTH = No(
    "length_control (--length-control) is not for {where}: <column>_lc comes from a line fitted on every row of the "
    "run, and rows here pass one batch at a time. ",
    "Score a Dataset (not streamed) with score_dataset, --workers, --batch or --ray (the replies of this run serve "
    "it from the cache)",
)
_GENERATOR = No(
    "generator_column is not for {where}: its report (the rows a judge of the writer's family scored) is in a run's "
    "summary, and a map transform has none. ",
    "Score with score_dataset (or --ray), or compare the scored rows against labels afterwards: hf-judge agreement "
    "--generator-column COLUMN",
)
_FLEET = No(
    "base_urls (a fleet of replicas of one model) applies to a single judge; a panel of judges names each judge's "
    "server in models= (e.g. models=[{{'model': 'a', 'base_url': 'http://gpu1:8000/v1'}}, ...]): ",
    "drop base_urls, or score with one judge",
    "`base_urls` are replicas of one model; a panel names each judge's server in `models`",
)
_NO_WAIT = No(
    "no_wait (--no-wait) submits batches and stops: it needs batch=True (--batch)",
    why="it submits batches and stops: it needs `batch=True` (`--batch`)",
)
_BATCH_ONE = No(
    "batch mode scores a whole Dataset in one process: ",
    "drop streaming=True / num_workers (--workers), or score without --batch",
    "a batch is built from a whole split in one process",
)
_BATCH_CACHE = No(
    "batch mode keeps its batches and their replies in the reply cache: ",
    "drop use_cache=False (--no-cache)",
    "the batches are recorded there",
)
_BATCH_REMOTE = No(
    "batch mode keeps its batches and replies in the local store only: ",
    "give it a local cache_dir, not {url!r} (online runs share a cache_dir on object storage)",
    "a batch's book and replies are kept in the local store only",
)
_IMPORT_PANEL = No(
    "batch import reads one runner's output, for one model, and a panel has several (models=): ",
    "import each judge's output with its own --model (and --base-url), then score the panel (--models) with the same "
    "--cache-dir: every reply is in the cache, so nothing is sent",
    "an offline runner's file is one model's: one file per judge, then the panel scored from the cache",
)
_RUNNER_FORMAT = No(
    "batch export/import write and read OpenAI's batch format for offline runners (vllm run-batch), which a judge "
    "with provider={provider} does not speak: ",
    "score with --batch, through its own batch API",
    "the files are OpenAI's batch format, for offline runners that speak it",
)
_URL_OUTPUT = No(
    "--output-dir {url!r} is a URL: only a run with --ray writes to object storage (Ray Data's writer, shard by "
    "shard); ",
    "add --ray, or save to a local folder and copy it",
    "only Ray Data's writer writes there, shard by shard",
)
_WORKERS_MAP = No(
    "num_workers is not for a map transform: ",
    "the map's own processes do it: Dataset.map(num_proc=N) or Ray's concurrency",
    "a map step's processes are Dataset.map(num_proc=N) or Ray's actors",
)
_BATCH_MAP = No(
    "batch is not for a map transform: ",
    "a provider batch takes up to 24 h and a map waits for its batch: use score_dataset(batch=True)",
    "a map step returns its rows, and a batch takes up to 24 h",
)
_EXISTING_MAP = No(
    "the batch already has the columns {columns} that this Judge writes: ",
    "drop them first (ds.remove_columns({columns!r})), or score with score_dataset(if_exists='overwrite')",
    "a map step declares its columns upfront and sees one batch at a time, so it can neither keep nor rename "
    "columns a row has already; drop them first, or use score_dataset / `--ray`",
)
_MAP_CELLS: dict[str, Yes | No] = {
    "workers": _WORKERS_MAP,
    "batch": _BATCH_MAP,
    "no_wait": No(
        "no_wait is not for a map transform: ",
        "a map stage returns its rows: use score_dataset(batch=True, no_wait=True)",
        "a map step returns its rows",
    ),  # fmt: skip
    "no_cache": YES,
    "remote_cache": YES,
    "url_output": NA,
    "filters": NA,
    "fleet_panel": _FLEET,
    "length_control": _LENGTH,
    "generator_column": _GENERATOR,
}
_ONE_PROCESS: dict[str, Yes | No] = {"no_wait": _NO_WAIT, "url_output": _URL_OUTPUT, "fleet_panel": YES}

# engine -> feature -> YES / Yes(note) / No(...). A feature not named is YES.
_VLLM_CLUSTER = No(
    "{where} runs on a cluster's machines, and the vLLM judge hf-judge starts (model='vllm:MODEL' without a "
    "base_url) is this machine's: ",
    "start vLLM where every machine reaches it (vllm serve MODEL, one per GPU node) and give its --base-url with "
    "--model vllm:MODEL (or the name it serves)",
    "the vLLM judge hf-judge starts is this machine's: give the base_url of a vLLM server the cluster reaches",
)
_VLLM_BATCH = No(
    "{where} writes a provider's batch files, and a vLLM judge has no batch API (it batches the requests in flight "
    "itself): ",
    "score without --batch, or run the exported file with vLLM's own `vllm run-batch`",
    "vLLM has no batch API: it batches the requests in flight itself",
)

CAPABILITIES: dict[str, dict[str, Yes | No]] = {
    "dataset": {**_ONE_PROCESS},
    "stream": {
        **_ONE_PROCESS,
        "workers": No(
            "num_workers (--workers) shards a Dataset on local disk; a stream (streaming=True, --streaming) is scored "
            "by one process: ",
            "leave num_workers at 1, or load the dataset without streaming to use workers",
            "workers shard a `Dataset` on local disk",
        ),
        "filters": No(
            "--streaming does not apply a recipe's filters: ",
            "score with --streaming --output-dir OUT, then run `hf-judge filter OUT --min ...`",
            "the filtered copy is made from a saved folder",
        ),
        "cascade": No(
            _CASCADE,
            "the strong tier's rows are known once the cheap tier has scored the split, and a stream is read once. "
            "Load the dataset without streaming",
            "the strong tier's rows are known once the cheap tier has scored the split",
        ),
        "length_control": _LENGTH,
        "vllm_panel": No(
            "a panel's vLLM judges that hf-judge starts take turns, one engine loaded at a time, each reading every "
            "row, and {where} is read once: ",
            "load the dataset without streaming, or give each vLLM judge the base_url of a server you start "
            "(models=[{{'model': 'vllm:M', 'base_url': ...}}])",
            "its vLLM judges take turns, each reading every row, and a stream is read once",
        ),
    },
    "workers": {**_ONE_PROCESS},
    "batch": {
        **_ONE_PROCESS,
        "stream": _BATCH_ONE,
        "workers": _BATCH_ONE,
        "no_cache": _BATCH_CACHE,
        "batch_panel": _IMPORT_PANEL,
        "no_wait": _NO_WAIT,  # batch_import with no_wait: nothing is submitted
        "remote_cache": _BATCH_REMOTE,
        "logprobs+panel": Yes("batch_panel"),
        "panel": Yes("batch_panel"),
        "runner_format": _RUNNER_FORMAT,  # batch_import
        "vllm_managed": _VLLM_BATCH,
    },
    "ray": {
        "stream": No(
            "scoring on Ray takes a Dataset on local disk, not a stream (streaming=True, --streaming): ",
            "drop --streaming, or read the data in Ray itself with hf_judge.ray.score_ray_dataset("
            "ray.data.read_parquet(...)) (see the docs: how-to/clusters)",
            "Ray reads its own data: load the dataset without streaming, or read it in Ray itself",
        ),
        "workers": No("num_workers (--workers) does not apply on Ray: its actors are the workers; ", "drop --workers"),
        "batch": No(
            "batch mode (--batch) does not apply on Ray: a provider's batch is built from a whole split in one "
            "process; ",
            "score without --ray",
            "a provider's batch is built from a whole split in one process",
        ),
        "fleet_panel": _FLEET,
        "filters": No(
            "--output-dir {url!r} is a URL: a recipe's filters are applied to a local folder; ",
            "score with --ray --output-dir URL, then filter a local copy with `hf-judge filter`",
            "a recipe's filters are applied to a local folder",
        ),
        "cascade_url": No(
            "escalate_model (--escalate-model) on Ray writes no output_dir URL: the strong tier rescores rows the "
            "cheap tier wrote; ",
            "save to a local folder, or write the result yourself",
        ),
        "panel": Yes("ray_panel"),
        "logprobs+panel": Yes("ray_panel"),
        "vllm_managed": _VLLM_CLUSTER,
    },
    "map": {
        **_MAP_CELLS,
        "cascade": No(
            _CASCADE,
            "a batch's strong requests would wait on replies of rows in later batches' order; score the dataset with "
            "score_dataset(..., escalate_model=...) instead",
            "the strong tier's rows are known once the cheap tier has scored the split",
        ),
        "if_exists": _EXISTING_MAP,
        "vllm_managed": No(
            "a map transform (hf_judge.Judge) has no run around it to start and stop a vLLM judge in: ",
            "start one for the block with hf_judge.transport.vllm.vllm_judge(MODEL) and give Judge its model and "
            "base_url",
            "a map step has no run to start and stop vLLM around",
        ),
    },
    "ray_stage": {
        **_MAP_CELLS,
        "vllm_managed": _VLLM_CLUSTER,
        "cascade": No(
            _CASCADE,
            "the stage scores each batch where it lands, and the strong tier's rows are known once the cheap tier has "
            "scored them all; score a Dataset with hf_judge.ray.score_dataset_on_ray(..., escalate_model=...) (or "
            "hf-judge score --ray), which runs the two tiers one after the other",
            "the strong tier's rows are known once the cheap tier has scored the split",
        ),
        "if_exists": No(
            "the dataset already has the columns {columns} that these metrics write; ",
            "drop them first (ds.drop_columns({columns!r})), or score a Dataset with score_dataset_on_ray",
            _EXISTING_MAP.why,
        ),
    },
    "spark": {
        **_MAP_CELLS,
        "vllm_managed": _VLLM_CLUSTER,
        "stream": No(
            "--spark reads a Hub dataset shard by shard on the executors already: ",
            "drop --streaming",
            "`--spark` reads a Hub dataset shard by shard on its executors",
        ),
        "filters": No(
            "--spark writes the scored splits with Spark's writer and does not apply a recipe's filters: ",
            "run `hf-judge filter OUTPUT_DIR --min ...` on its output afterwards, or drop --spark",
            "the filtered copy is made from a saved folder",
        ),
        "workers": No(
            "num_workers (--workers) does not apply to {where}: Spark's tasks are the workers; ",
            "drop num_workers, and give the DataFrame more partitions (df.repartition(n)) to score more at once",
            "Spark's tasks are the workers",
        ),
        "batch": No(
            "batch mode (batch=True, --batch) does not apply to {where}: a provider's batch is built from a whole "
            "split in one process and takes up to 24 h; ",
            "score the rows with score_dataset(batch=True), or without batch mode on Spark",
            "a provider's batch is built from a whole split in one process",
        ),
        "no_wait": No(
            "no_wait (--no-wait) is not for {where}: a Spark step returns its rows; ",
            "use score_dataset(batch=True, no_wait=True)",
            "a Spark step returns its rows",
        ),
        "cascade": No(
            _CASCADE,
            "the step scores each partition where it runs, and the strong tier's rows are known once the cheap tier "
            "has scored them all; score the cheap tier, then call score_spark_dataframe again with the strong judge "
            "on the rows you pick (df.filter(...))",
            "the strong tier's rows are known once the cheap tier has scored the split",
        ),
        "if_exists": No(
            "the DataFrame already has the columns {columns} that these metrics write; ",
            "drop them first (df.drop(*{columns!r}))",
            "a Spark step declares its output schema upfront, so it can neither keep nor rename columns a row has "
            "already; drop them first",
        ),
    },
    "batch_files": {
        "batch_panel": No(
            "a batch file is one model's (an offline runner such as vllm run-batch serves one), and a panel has "
            "several (models=, --models): ",
            "export one file per judge with its own --model (and --base-url), run and import each the same way, then "
            "score the panel with the same --cache-dir: every reply is in the cache, so nothing is sent",
            _IMPORT_PANEL.why,
        ),
        "remote_cache": No(
            "batch files are exported and imported against a local reply store: ",
            "give a local cache_dir (--cache-dir), not {url!r}; online runs share a cache_dir on object storage",
            _BATCH_REMOTE.why,
        ),
        "stream": _BATCH_ONE,
        "workers": _BATCH_ONE,
        "no_cache": _BATCH_CACHE,
        "no_wait": _NO_WAIT,
        "runner_format": _RUNNER_FORMAT,
        "vllm_managed": _VLLM_BATCH,
    },
}

# Refused by the provider's API, not by an engine (checked where the request is built), listed for the docs
PROVIDER_REFUSALS = (
    "an Anthropic judge with `--logprobs`, `--temperature` or `--top-p` (the Messages API takes none of them)",
)


def cell(engine: str, feature: str) -> Yes | No:
    """What ``engine`` says to ``feature``: ``YES``, a :class:`Yes` with a note, or the :class:`No` it refuses with.

    Example:
        >>> cell("map", "cascade").why
        "the strong tier's rows are known once the cheap tier has scored the split"
        >>> cell("dataset", "cascade")
        Yes(note='')
    """
    if engine not in ENGINES:
        raise ValueError(f"no engine {engine!r}: one of {', '.join(ENGINES)}")
    if feature not in FEATURES:
        raise ValueError(f"no feature {feature!r}: one of {', '.join(FEATURES)}")
    return CAPABILITIES[engine].get(feature, YES)


def refusal(engine: str, feature: str, **facts: object) -> str | None:
    """The ConfigError's words when ``engine`` is asked for ``feature``, or None where it does it.

    Example:
        >>> refusal("ray", "workers")
        'num_workers (--workers) does not apply on Ray: its actors are the workers; drop --workers'
    """
    c = cell(engine, feature)
    return c.text(ENGINES[engine], **facts) if isinstance(c, No) else None


_NO_SETTINGS = SimpleNamespace(
    models=None,
    judges=[],
    no_wait=False,
    batch=False,
    batch_import=None,
    num_workers=1,
    escalate_model=None,
    length_control=False,
    generator_column=None,
)


def asked(
    settings: Settings | None,
    *,
    files: bool = False,
    stream: bool = False,
    use_cache: bool = True,
    remote: bool = False,
    base_urls: Sequence[str] | None = None,
    url_output: bool = False,
    filters: bool = False,
    existing: Sequence[str] = (),
    provider: str = "",
) -> list[str]:
    """The run features a job asks for, from its settings and what else a run is given (``provider``: the API
    the judge speaks, ``settings.resolved_provider``'s; "": not known here)."""
    # None: a check before the settings are resolved (the CLI's output checks): the facts alone
    s: Any = settings if settings is not None else _NO_SETTINGS
    panel = bool(s.models) and len(s.judges) > 1
    vllm = _vllm_panelists(s)
    wants = {
        "no_wait": s.no_wait and not s.batch,
        "stream": stream,
        "workers": s.num_workers > 1,
        "batch": s.batch or s.batch_import is not None,
        "no_cache": not use_cache,
        "batch_panel": bool(s.models) and (files or s.batch_import is not None),
        "remote_cache": remote,
        "fleet_panel": panel and bool(base_urls),
        "filters": filters,
        "url_output": url_output,
        "cascade": s.escalate_model is not None,
        "cascade_url": s.escalate_model is not None and url_output,
        "length_control": s.length_control,
        "generator_column": s.generator_column is not None,
        "if_exists": bool(existing),
        "runner_format": provider not in ("", "openai") and (files or s.batch_import is not None),
        "vllm_managed": bool(vllm) or vllm is None,
        "vllm_panel": bool(vllm),
    }
    return [f for f in RUN_FEATURES if wants[f]]


def _vllm_panelists(s: Any) -> list[str] | None:
    """The panels' judges hf-judge starts (``vllm:MODEL`` with no server: its own base_url, else its tier's, else
    the run's); None where one judge (the run's or the cascade's stronger) is such a judge and no panel has any."""

    def started(model: Any, url: Any) -> bool:
        return str(model or "").startswith("vllm:") and not url

    run_url = getattr(s, "base_url", None)
    strong_url = getattr(s, "escalate_base_url", None) or run_url
    panels = [(j, run_url) for j in getattr(s, "models", None) or []]
    panels += [(j, strong_url) for j in getattr(s, "escalate_models", None) or []]
    found = [j.model for j, url in panels if started(j.model, j.base_url or url)]
    one = started(getattr(s, "model", None), run_url) or started(getattr(s, "escalate_model", None), strong_url)
    return found or (None if one else [])


def check(
    engine: str,
    settings: Settings | None,
    *,
    only: Sequence[str] | None = None,
    url: str = "",
    existing: Sequence[str] = (),
    provider: str = "",
    **facts: object,
) -> None:
    """Refuse what ``engine`` cannot do of the job ``settings`` (and ``facts``: see :func:`asked`) asks: the
    ConfigError of the first such feature, in the order of :data:`RUN_FEATURES`. ``only``: look at these features
    alone (an engine that learns of some later, e.g. a batch's columns).

    Example:
        >>> from hf_judge import Settings
        >>> check("dataset", Settings(model="m", length_control=True))  # one process fits the line: nothing to say
        >>> check("ray", Settings(model="m", num_workers=2))
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: num_workers (--workers) does not apply on Ray: its actors are the workers; ...
    """
    features = asked(settings, existing=existing, provider=provider, **facts)  # type: ignore[arg-type]
    for feature in features:
        if only is not None and feature not in only:
            continue
        said = refusal(engine, feature, url=url, columns=sorted(existing), provider=provider)
        if said is not None:
            raise ConfigError(said)


# ---- the docs: rendered from the table, independent of where they are written


def _mark(c: Yes | No, notes: dict[str, int]) -> str:
    if isinstance(c, No):
        return "no"
    if not c.note:
        return "yes"
    if c.note == NA.note:
        return "n/a"
    notes.setdefault(c.note, len(notes) + 1)
    return f"yes ({notes[c.note]})"


def _table(features: dict[str, str], notes: dict[str, int]) -> list[str]:
    lines = ["| engine | " + " | ".join(features.values()) + " |", "| --- " * (len(features) + 1) + "|"]
    for key, engine in ENGINES.items():
        if not engine.table:
            continue
        marks = [_mark(cell(key, f), notes) for f in features]
        title = engine.title
        if engine.note:
            title += " " + _mark(Yes(engine.note), notes).removeprefix("yes ")
        lines.append(f"| {title} | " + " | ".join(marks) + " |")
    return lines


# the run features the second table shows (an engine with another one is in the refusals' list)
_AROUND = ("if_exists", "cascade", "length_control", "generator_column", "no_cache", "remote_cache", "url_output")


def engines_markdown() -> str:
    """The engine x feature tables (the ways of judging a row; what a run asks around them) and their notes, as
    markdown: the docs' (docs/reference/engines.md).

    Example:
        >>> print(engines_markdown().splitlines()[0])
        | engine | one reply | `samples` | ...
    """
    notes: dict[str, int] = {}
    around = {k: RUN_FEATURES[k] for k in _AROUND}
    lines = _table(ROW_FEATURES, notes) + [""] + _table(around, notes) + [""]
    lines += [f"({n}) {NOTES[key]}." for key, n in notes.items()]
    lines.append('Each "no" is a `ConfigError` that says why and what to do instead (see the refusals below).')
    return "\n".join(lines)


def refusals_markdown() -> str:
    """Every refusal of the table, grouped by reason, and the providers', as a markdown list.

    Example:
        >>> "a stream" in refusals_markdown()
        True
    """
    grouped: dict[tuple[str, str], list[str]] = {}
    for key, engine in ENGINES.items():
        for feature, c in CAPABILITIES[key].items():
            if isinstance(c, No):
                why = c.why or _reason(c)
                grouped.setdefault((FEATURES[feature], why), []).append(engine.title)
    lines = ["Refused by nature, each a `ConfigError` that says why and what to do instead:", ""]
    for (feature, why), engines in grouped.items():
        lines.append(f"- {feature} with {', '.join(dict.fromkeys(engines))}: {why}")
    lines += [f"- {p}" for p in PROVIDER_REFUSALS]
    return "\n".join(lines)


def _reason(c: No) -> str:
    """A refusal's own reason, where it has none of its own: its message after the first colon, placeholders out."""
    text = c.message.split(": ", 1)[-1].rstrip(" :;.,")
    return re.sub(r"\{\w+!?\w*\}", "...", text)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hf_judge.engine.capabilities``: the engines' tables and refusals on stdout, as the docs show them
    (docs/reference/engines.md, written by ``python docs/generate_reference.py``)."""
    parser = argparse.ArgumentParser(prog="python -m hf_judge.engine.capabilities", description=main.__doc__)
    parser.parse_args(argv)
    print(engines_markdown(), refusals_markdown(), sep="\n\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    sys.exit(main())
