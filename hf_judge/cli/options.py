"""The option groups several commands share, built once: the request settings (one flag per field of
:class:`hf_judge.Settings`), the dataset, the Hub, the scoring and the output options, and the value types
that check a flag's text when it is parsed (before any work).

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser()
    >>> add_input_options(p)
    >>> p.parse_args(["--split", "test", "-n", "5"]).limit
    5
"""

from __future__ import annotations

import argparse
import enum
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError

# the Hub options' help, the same in every command that has them
SUBSET_HELP = "dataset config name on the Hub (load_dataset's `name`)"
REVISION_HELP = "Hub revision (branch, tag or commit)"
TOKEN_HELP = "Hub token (default: $HF_TOKEN or the saved login)"


def kv(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> ``(NAME, VALUE)``: ``--column instruction=question``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value.strip()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 1..65535 (``--local-port``)."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, got {value}")
    return value


def threshold(text: str) -> tuple[str, float]:
    """``COLUMN=V`` with a finite number: ``--min QA_Correctness=8``."""
    key, value = kv(text)
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {value!r} is not a finite number")
    return key, number


def group_values(text: str) -> tuple[str, list[str]]:
    """``COLUMN=V1,V2`` -> ``(COLUMN, [V1, V2])``: ``--keep-group subject=algebra,geometry``."""
    key, value = kv(text)
    values = [v.strip() for v in value.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} names no group: COLUMN=VALUE[,VALUE...], e.g. subject=algebra")
    return key, values


BY_HELP = (
    "show each score by group of this column (rows, nulls, mean, median and histogram per value, the lowest mean "
    "first) in the overview, the report page and the card; recorded in summary.json, so a later view or push "
    "shows them too (e.g. --by subject)"
)


def agreement_report(path: str):
    """A saved agreement report, read when the flags are parsed: a wrong path fails before any request."""
    import json

    from ..analysis.agreement import AgreementReport

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise argparse.ArgumentTypeError(
            f"cannot read {path} ({e.strerror or e}): give the file that hf-judge agreement ... --out FILE saved"
        ) from None
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"{path} is not an agreement report: save one with hf-judge agreement --out")
    try:
        return AgreementReport.from_dict(data)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(f"{path}: {e}") from None


class _NoKeyOnTheCommandLine(argparse.Action):
    """``--api-key VALUE``: refused with the fix, never echoing VALUE (argparse would otherwise take it as an
    abbreviation of ``--api-key-env`` and call the key a variable name)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:  # noqa: ARG002 - argparse's signature
        parser.error(
            f"{option_string}: hf-judge takes no key on the command line (it would stay in the shell's history and "
            "show in the process list). Put it in an environment variable and name that: export JUDGE_KEY=... then "
            "--api-key-env JUDGE_KEY (without the flag, OPENAI_API_KEY is read; ANTHROPIC_API_KEY for Claude)"
        )


def add_api_key_env(p: Any) -> None:
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY; Anthropic judges: ANTHROPIC_API_KEY)",
    )
    p.add_argument("--api-key", action=_NoKeyOnTheCommandLine, help=argparse.SUPPRESS)


def key_variable(name: str) -> str:
    """``--api-key-env NAME`` checked: a variable's name that is set; the key itself given there is refused
    without being repeated.

    Example:
        >>> os.environ["DOC_JUDGE_KEY"] = "sk-doc"; key_variable("DOC_JUDGE_KEY")
        'DOC_JUDGE_KEY'
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(
            "--api-key-env takes the name of the environment variable that holds the key, not the key: "
            "export JUDGE_KEY=... then --api-key-env JUDGE_KEY"
        )
    if not os.environ.get(name):
        raise ConfigError(f"--api-key-env {name}: that environment variable is not set; export {name}=...")
    return name


def add_cache_dir(p: Any) -> None:
    p.add_argument(
        "--cache-dir",
        help="cache folder (default: $HF_DATASETS_CACHE/hf_judge), or a URL on object storage shared by every "
        "machine (s3://bucket/prefix, gs://, az://, file://)",
    )


def add_object_store(p: Any) -> None:
    """The flags of a --cache-dir on object storage."""
    p.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="an fsspec storage option of a --cache-dir URL, repeatable (e.g. --storage-option "
        "client_kwargs.endpoint_url=http://minio:9000); credentials are best left to the usual environment variables, "
        "or named as one: secret=env:AWS_SECRET_ACCESS_KEY (read where the store opens, never shown)",
    )
    p.add_argument(
        "--local-cache-dir",
        metavar="DIR",
        help="this machine's copy of a --cache-dir URL (default: $HF_JUDGE_LOCAL_CACHE, else a folder of the user "
        "cache named after the URL)",
    )


@dataclass(frozen=True)
class Group:
    """One group of a scoring job's options in ``--help``: its title, what it is for, and the docs page of
    its task (the site's how-to guides are grouped the same way)."""

    title: str
    about: str
    pages: tuple[str, ...]

    @property
    def description(self) -> str:
        """The group's help text: what it is for, then its docs pages (wrapped by hand: `score --help` keeps its
        text as written)."""
        return f"{self.about}\ndocs: {', '.join(self.pages)}"


# The option groups of `hf-judge score`, `run` and `batch export`/`import`, in the order their help lists them: the
# options most runs need first. Each group's pages are paths of the docs site (mkdocs.yml's nav; a test checks).
# A new engine's options (Spark, say) go in "engines": its page joins ENGINE_PAGES and its flags
# _add_engine_options, after Ray's.
ENGINE_PAGES = (
    "docs/how-to/workers.md",
    "docs/how-to/batch.md",
    "docs/how-to/clusters.md",
    "docs/how-to/spark.md",
    "docs/how-to/streaming.md",
)
JOB_GROUPS = {
    "input": Group(
        "input and columns",
        "What to score: the dataset, which of its rows, the metrics and the columns their prompts read.",
        ("docs/how-to/metrics.md",),
    ),
    "judge": Group(
        "the judge and its server",
        "Which model judges, where it is served and with which key, how it samples, how hard it is pressed.",
        ("docs/how-to/providers.md", "docs/guarantees.md"),
    ),
    "ensembles": Group(
        "samples, panels and logprobs",
        "More than one reply per row: repeated samples, a panel of judges, the score's probabilities.",
        ("docs/how-to/ensembles.md",),
    ),
    "cascade": Group(
        "the cascade",
        "A stronger judge for the rows the first one is unsure of (each option needs --escalate-model(s)).",
        ("docs/how-to/cascade.md",),
    ),
    "bias": Group(
        "bias checks",
        "Length-controlled scores, and a warning where the judge is of the family that wrote the text.",
        ("docs/concepts/bias.md",),
    ),
    "cost": Group(
        "cost and budget",
        "What a run will cost before it runs, and the limits that stop it cleanly.",
        ("docs/how-to/cost.md",),
    ),
    "engines": Group(
        "engines",
        "Where the requests go from: worker processes, a provider's batch API, a Ray cluster, a stream.",
        ENGINE_PAGES,
    ),
    "cache": Group(
        "cache",
        "The reply store that makes a run resumable and never pays twice for a reply.",
        ("docs/how-to/resume.md", "docs/concepts/reply-store.md"),
    ),
    "output": Group(
        "output and Hub",
        "Where the scored dataset goes: a folder, a Hub repo with its card, the report page's groups.",
        ("docs/how-to/report-page.md", "docs/how-to/groups.md"),
    ),
}


class _Settings:
    """Adds the flags of named :class:`hf_judge.Settings` fields to a group, each once; ``on=False``: adds none
    (a command that is not being run skips building them, which imports pydantic)."""

    def __init__(self, on: bool) -> None:
        self.left: dict[str, Any] = {}
        if on:
            from ..settings import public_fields

            self.left = dict(public_fields())

    def __call__(self, g: Any, *names: str) -> None:
        for name in names:
            if name in self.left:
                _add_setting(g, name, self.left.pop(name))

    def check_placed(self) -> None:
        """Every public setting has its place in a group (else it would have no flag)."""
        if self.left:
            raise RuntimeError(
                f"Settings field(s) {', '.join(self.left)} have no option group: add each to one in "
                "hf_judge/cli/options.py (add_job_options)"
            )


def _add_judge_options(g: Any, setting: _Settings) -> None:
    setting(g, "model", "base_url")
    add_api_key_env(g)
    setting(g, "provider", "temperature", "max_tokens", "top_p", "concurrency")
    setting(g, "max_requests_per_minute", "max_tokens_per_minute", "timeout", "retries")
    setting(g, "max_throttle_s", "max_reply_bytes", "vllm_args", "vllm_python")


def _add_cost_options(g: Any, setting: _Settings) -> None:
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="send nothing to the chat endpoint: print the requests, tokens (the server's /tokenize where it has "
        "one) and, for a model with a price (genai-prices, or --prices FILE), the cost online and in batch mode",
    )
    setting(g, "max_cost", "prices", "max_total_tokens", "max_input_chars")
    g.add_argument(
        "--token-columns",
        action="store_true",
        default=None,
        help="add per-row judge_prompt_tokens / judge_completion_tokens columns",
    )


def _add_engine_options(g: Any, setting: _Settings, streaming: bool) -> None:
    """The engines' options, one engine after another (docs: ENGINE_PAGES, in the same order)."""
    setting(g, "num_workers")
    setting(g, "batch", "batch_max_requests", "batch_max_bytes", "batch_fallback", "no_wait")
    g.add_argument(
        "--ray",
        action="store_true",
        help='score on a Ray cluster (pip install "hf-judge[ray]"): at --ray-address, else $RAY_ADDRESS, else a '
        "Ray of the run's own on this machine (never one already running here); --cache-dir is each node's own "
        "local disk, or a URL on object storage that every node shares (s3://bucket/prefix)",
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="the Ray cluster to run on (implies --ray): HOST:PORT, ray://HOST:10001, or auto (the one `ray start` "
        "left running on this machine)",
    )
    add_spark_options(g)
    if streaming:
        g.add_argument(
            "--streaming",
            action="store_true",
            help="read a Hub dataset as it is scored (load_dataset(..., streaming=True)): nothing is downloaded "
            "ahead, memory stays bounded by the rows in flight (max(4096, 64 x --concurrency)), and the output is "
            "written as Parquet shards as rows arrive",
        )


def _add_cache_options(g: Any, setting: _Settings) -> None:
    add_cache_dir(g)
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    setting(g, "reuse", "retry_errors")
    add_object_store(g)


def _add_setting(g: Any, name: str, f: Any) -> None:
    """The flag of one setting: its type, choices and shown default from the field's annotation."""
    import typing

    from ..settings import CLI_FLAGS

    kind = _scalar_type(f.annotation)
    if "dict[" in str(f.annotation):  # `--vllm-arg KEY=VALUE`, repeatable: Settings makes the mapping
        flags = CLI_FLAGS.get(name, ("--" + name.replace("_", "-"),))
        g.add_argument(*flags, dest=name, action="append", metavar="KEY=VALUE", help=f.description)
        return
    literal = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
    if literal is None and kind not in (bool, int, float, str) and not issubclass(kind, enum.Enum):
        kind = str  # a list of judges: `--models a,b,c`, split by Settings
    default = f.default if not f.is_required() else None
    flags = CLI_FLAGS.get(name, ("--" + name.replace("_", "-"),))
    if kind is bool:  # a switch: `--logprobs`, not `--logprobs true`
        g.add_argument(*flags, dest=name, action="store_true", default=None, help=f.description)
        return
    choices = list(literal) if literal else None
    if literal is not None:
        kind = str
    elif issubclass(kind, enum.Enum):  # `invalid choice: 'avg' (choose from mean, median, ...)`
        choices = [str(m.value) for m in cast("type[enum.Enum]", kind)]
        kind = str
    g.add_argument(*flags, dest=name, type=kind, choices=choices, help=f"{f.description}{_shown(default, kind)}")


def _shown(default: Any, kind: Any) -> str:
    """`` (default 1,000)``: a setting's default as its help shows it."""
    if default is None:
        return ""
    if isinstance(default, str):
        return f" (default {default})"
    if kind is int:
        return f" (default {default:,})"
    if kind is float:
        return f" (default {default:g})"
    return f" (default {default})"


def _scalar_type(annotation: Any) -> Any:
    """``int`` for ``Optional[Annotated[int, ...]]``: the type argparse converts a flag's text to (a ``Literal``
    stays one: its values are the flag's choices)."""
    import typing

    while typing.get_origin(annotation) not in (None, typing.Literal):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def add_output_options(p: Any, default: str) -> None:
    """``default``: where the command saves without ``--output-dir``, as its help shows it; ``p``: a parser (the
    options go in a group "output") or a group."""
    g = p.add_argument_group("output") if isinstance(p, argparse.ArgumentParser) else p
    g.add_argument("-o", "--output-dir", help=f"save_to_disk the result and its summary.json here (default: {default})")
    g.add_argument(
        "--push-to-hub", metavar="REPO", help="push the result (and a dataset card) to this Hub dataset repo"
    )
    g.add_argument("--private", action="store_true", default=None, help="create the Hub repo private")
    g.add_argument("--token", help=TOKEN_HELP)
    g.add_argument("--overwrite", action="store_true", help="replace an output folder that holds a different result")
    g.add_argument(
        "--agreement",
        action="append",
        type=agreement_report,
        default=[],
        metavar="REPORT.json",
        help="show this report of `hf-judge agreement --out` in the pushed card (repeatable)",
    )


def add_input_options(p: Any) -> None:
    """Which part of the dataset: a row limit, its splits, config and revision."""
    p.add_argument("-n", "--limit", type=positive_int, help="only the first N rows of each split (a cheap trial)")
    p.add_argument("--split", action="append", dest="splits", help="split to use (repeatable; default: all)")
    p.add_argument("--subset", help=SUBSET_HELP)
    p.add_argument("--revision", help=REVISION_HELP)


def add_scoring_options(p: Any) -> None:
    """What to score: the metrics and the columns their variables read (the prompt folders: add_job_options)."""
    p.add_argument("--metrics", action="append", help="metric names (repeatable or comma list); see `hf-judge metrics`")
    add_column_option(p)


def add_column_option(p: Any) -> None:
    """``--column VAR=COLUMN``, repeatable: which column a template variable reads."""
    p.add_argument(
        "--column",
        action="append",
        type=kv,
        default=[],
        metavar="VAR=COLUMN",
        help="map a template variable to a column (repeatable)",
    )


def add_job_options(
    p: argparse.ArgumentParser,
    *,
    settings: bool,
    output: str | None,
    streaming: bool = False,
    recipe: bool = False,
    local: bool = False,
    first: Callable[[Any], None] | None = None,
) -> None:
    """The options of a scoring job, shared by ``score``, ``run`` and ``batch export``/``import``, in the groups
    of :data:`JOB_GROUPS` (the command's own ones, added by ``first``, lead "input and columns"); with
    ``streaming``: ``--streaming``, with ``recipe``: ``--recipe``, with ``local``: ``--local-port``. ``settings``:
    the request settings' flags (only for the command being run, as building them imports pydantic); ``output``:
    the default output folder its help names (None: no output options)."""
    groups = {key: p.add_argument_group(g.title, g.description) for key, g in JOB_GROUPS.items()}
    setting = _Settings(settings)
    g = groups["input"]
    if first is not None:
        first(g)
    add_scoring_options(g)
    add_input_options(g)
    g.add_argument("--prompts-dir", action="append", help="folder of your own prompt files (repeatable)")
    if recipe:
        g.add_argument("--recipe", help="a recipe name or YAML file supplying defaults; flags override it")
    g.add_argument(
        "--overwrite-scores",
        action="store_true",
        help="score metrics whose columns the dataset already has again, replacing them (default: keep them)",
    )
    _add_request_options(groups, setting, streaming)
    if local:
        groups["judge"].add_argument(
            "--local-port",
            type=port_number,
            metavar="PORT",
            help="the port on 127.0.0.1 that --model local starts its llama.cpp judge on (default: one derived from "
            "the model file's path, else a free one); a port in use is refused before any request",
        )
    if output is not None:
        add_output_options(groups["output"], output)
        groups["output"].add_argument("--by", metavar="COLUMN", help=BY_HELP)
    setting.check_placed()


def _add_request_options(groups: dict[str, Any], setting: _Settings, streaming: bool) -> None:
    """How requests are sent, in their groups: the judge, ensembles, the cascade, bias checks, cost, engines, cache."""
    _add_judge_options(groups["judge"], setting)
    setting(groups["ensembles"], "samples", "min_samples", "models", "aggregator", "logprobs", "top_logprobs")
    setting(groups["cascade"], "escalate_model", "escalate_when", "escalate_base_url", "escalate_api_key")
    setting(groups["cascade"], "escalate_models", "escalate_samples", "escalate_temperature", "escalate_audit")
    setting(groups["bias"], "length_control", "generator_column", "generator_model")
    _add_cost_options(groups["cost"], setting)
    _add_engine_options(groups["engines"], setting, streaming)
    _add_cache_options(groups["cache"], setting)


def add_client_options(p: argparse.ArgumentParser, settings: bool = True) -> None:
    """How a command that scores rows of its own choosing (``choose-judge``) sends its requests: the groups of
    :func:`add_job_options` less the input and output ones, which such a command has its own of."""
    shown = (key for key in JOB_GROUPS if key not in ("input", "output"))
    groups = {key: p.add_argument_group(JOB_GROUPS[key].title, JOB_GROUPS[key].description) for key in shown}
    setting = _Settings(settings)
    _add_request_options(groups, setting, False)
    setting.check_placed()


def add_spark_options(g: Any) -> None:
    """The Spark engine's flags (``--spark``, ``--spark-master``), after Ray's."""
    g.add_argument(
        "--spark",
        action="store_true",
        help='score on Spark (pip install "hf-judge[spark]", Java 17): the active Spark session where there is one '
        "(a notebook's), else one at --spark-master, else local[*]; a Hub dataset is read by Hugging Face's Spark "
        "data source, and the result is written as Parquet by Spark (--output-dir, local or s3://...). "
        "On a cluster give --cache-dir s3://bucket/prefix, the reply store every executor shares "
        "(e.g. --spark --spark-master spark://head:7077 --cache-dir s3://bucket/cache -o s3://bucket/scored)",
    )
    g.add_argument(
        "--spark-master",
        metavar="URL",
        help="the Spark master to run on (implies --spark): local[4], spark://host:7077, yarn, k8s://...",
    )


def score_from_labels(args: Any) -> None:
    """``--score`` left out: the one score a ``--labels`` file's rows name (``sample-for-review`` writes it in
    each row), else a ConfigError saying what to pass.

    Example:
        >>> args = argparse.Namespace(score="QA_Clarity", labels=None, label="human"); score_from_labels(args)
        >>> args.score
        'QA_Clarity'
    """
    if args.score is not None:
        return
    if not args.labels:
        raise ConfigError("--score is needed with --label: the judge's column to compare with the labels")
    from ..analysis.labels import read_labels

    named = sorted({str(r["score"]) for r in read_labels(args.labels, token=getattr(args, "token", None))} - {"None"})
    if len(named) != 1:
        which = f"it names {', '.join(named)}" if named else "its rows name no score"
        raise ConfigError(f"--score is needed: {which}; give the judge's column, e.g. --score QA_Correctness")
    args.score = named[0]
    print(f"scores compared: {args.score} (the score the labels file names)", file=sys.stderr)
