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


def add_api_key_env(p: Any) -> None:
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY; Anthropic judges: ANTHROPIC_API_KEY)",
    )


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
        "client_kwargs.endpoint_url=http://minio:9000); credentials are best left to the usual environment variables",
    )
    p.add_argument(
        "--local-cache-dir",
        metavar="DIR",
        help="this machine's copy of a --cache-dir URL (default: $HF_JUDGE_LOCAL_CACHE, else a folder of the user "
        "cache named after the URL)",
    )


def add_client_options(p: argparse.ArgumentParser) -> None:
    """One flag per public field of :class:`hf_judge.Settings`, its help from the field's description; then
    where the run goes (Ray) and its cache."""
    from ..settings import public_fields

    g = p.add_argument_group("judge server")
    for name, f in public_fields().items():
        _add_setting(g, name, f)
        if name == "base_url":
            add_api_key_env(g)
    g.add_argument(
        "--ray",
        action="store_true",
        help='score on a Ray cluster (pip install "hf-judge[ray]"): at --ray-address, else $RAY_ADDRESS, else a '
        "local one; --cache-dir is each node's own local disk, or a URL on object storage that every node shares "
        "(s3://bucket/prefix)",
    )
    g.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to run on (implies --ray)")
    add_spark_options(g)
    add_cache_dir(g)
    add_object_store(g)
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument(
        "--token-columns",
        action="store_true",
        default=None,
        help="add per-row judge_prompt_tokens / judge_completion_tokens columns",
    )


def _add_setting(g: Any, name: str, f: Any) -> None:
    """The flag of one setting: its type, choices and shown default from the field's annotation."""
    import typing

    from ..settings import CLI_FLAGS

    kind = _scalar_type(f.annotation)
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


def add_output_options(p: argparse.ArgumentParser, default: str) -> None:
    """``default``: where the command saves without ``--output-dir``, as its help shows it."""
    g = p.add_argument_group("output")
    g.add_argument("-o", "--output-dir", help=f"save_to_disk the result and its summary.json here (default: {default})")
    g.add_argument(
        "--push-to-hub", metavar="REPO", help="push the result (and a dataset card) to this Hub dataset repo"
    )
    g.add_argument("--private", action="store_true", default=None, help="create the Hub repo private")
    g.add_argument(
        "--agreement",
        action="append",
        type=agreement_report,
        default=[],
        metavar="REPORT.json",
        help="show this report of `hf-judge agreement --out` in the pushed card (repeatable)",
    )
    g.add_argument("--token", help=TOKEN_HELP)
    g.add_argument("--overwrite", action="store_true", help="replace an output folder that holds a different result")


def add_input_options(p: argparse.ArgumentParser) -> None:
    """Which part of the dataset: its config, splits, revision and a row limit."""
    p.add_argument("--subset", help=SUBSET_HELP)
    p.add_argument("--split", action="append", dest="splits", help="split to use (repeatable; default: all)")
    p.add_argument("--revision", help=REVISION_HELP)
    p.add_argument("-n", "--limit", type=positive_int, help="only the first N rows of each split (a cheap trial)")


def add_scoring_options(p: argparse.ArgumentParser) -> None:
    """What to score: the metrics, the columns their variables read, the prompt folders."""
    p.add_argument("--metrics", action="append", help="metric names (repeatable or comma list); see `hf-judge metrics`")
    p.add_argument(
        "--column",
        action="append",
        type=kv,
        default=[],
        metavar="VAR=COLUMN",
        help="map a template variable to a column (repeatable)",
    )
    p.add_argument("--prompts-dir", action="append", help="folder of your own prompt files (repeatable)")
    p.add_argument(
        "--overwrite-scores",
        action="store_true",
        help="score metrics whose columns the dataset already has again, replacing them (default: keep them)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="send nothing to the chat endpoint: print the requests, tokens (the server's /tokenize where it has "
        "one) and, for a model with a price (genai-prices, or --prices FILE), the cost online and in batch mode",
    )


def add_job_options(
    p: argparse.ArgumentParser,
    *,
    settings: bool,
    output: str | None,
    streaming: bool = False,
    recipe: bool = False,
) -> None:
    """The options of a scoring job, shared by ``score``, ``run`` and ``batch export``/``import``, in the order
    their help lists them: the dataset, (``--streaming``), the scoring, (``--recipe``), the request settings
    (``settings``: only for the command being run, as building them imports pydantic) and the output (``output``:
    the default output folder its help names; None: no output options)."""
    add_input_options(p)
    if streaming:
        p.add_argument(
            "--streaming",
            action="store_true",
            help="read a Hub dataset as it is scored (load_dataset(..., streaming=True)): nothing is downloaded "
            "ahead, memory stays bounded by the rows in flight (max(4096, 64 x --concurrency)), and the output is "
            "written as Parquet shards as rows arrive",
        )
    add_scoring_options(p)
    if recipe:
        p.add_argument("--recipe", help="a recipe name or YAML file supplying defaults; flags override it")
    if settings:
        add_client_options(p)
    if output is not None:
        add_output_options(p, output)
        p.add_argument("--by", metavar="COLUMN", help=BY_HELP)


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
