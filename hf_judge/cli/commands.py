"""The ``hf-judge`` command: a thin twin of the library.

Exit codes: 0 the run finished (errors rows, if any, are saved and counted),
1 the run stopped early (auth, circuit breaker, budget), 2 usage or config
error, 130 interrupted. Set ``HF_JUDGE_DEBUG=1`` for tracebacks and debug logs.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import logging
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, cast

from .. import constants
from ..errors import ConfigError, HfJudgeError, InterruptedRun, RunStopped

logger = logging.getLogger("hf_judge")

SCORE_EXAMPLE = """examples:
  hf-judge score --example --model local      # offline: a bundled dataset and a local llama.cpp judge
  hf-judge score openai/gsm8k --subset main --split test --metrics QA_All \\
      --column instruction=question --column output=answer --push-to-hub me/gsm8k-judged
  hf-judge score data.jsonl --metrics Q_Clarity,QA_Correctness --limit 20 --output-dir out/
  hf-judge score data.jsonl --recipe quality --base-url http://127.0.0.1:8000/v1 --model my-model
  hf-judge score out/ --metrics QA_Clarity --output-dir out/    # add a metric; the scores there are kept
  hf-judge score HuggingFaceFW/fineweb --subset sample-10BT --streaming --metrics Q_Clarity \\
      --column instruction=text --push-to-hub me/fineweb-judged   # read and scored as it streams
  hf-judge score big.parquet --metrics QA_All -m judge --base-url http://gpu1:8000/v1 --workers 4   # 4 processes
  hf-judge score big.parquet --metrics QA_All -m judge --base-url http://gpu1:8000/v1 --ray   # on a Ray cluster
  hf-judge score data.jsonl --metrics QA_All --model gpt-4.1-nano --dry-run   # requests, tokens, cost; none sent
  hf-judge score data.jsonl --metrics QA_Correctness --samples 5 --temperature 0.7   # mean, std, majority of 5
  hf-judge score data.jsonl --metrics QA_Correctness --models gpt-4.1-nano,gpt-4o-mini   # a panel of two judges
"""
FILTER_EXAMPLE = """examples:
  hf-judge filter me/gsm8k-judged --min QA_Correctness=8 --push-to-hub me/gsm8k-best
  hf-judge filter out/ --min Q_Clarity=6 --max Q_Complexity=9 --output-dir best/
"""
RUN_EXAMPLE = """examples:
  hf-judge run quality --dataset data.jsonl --output-dir out/      # a built-in recipe, by name
  hf-judge run my_recipe.yaml --model my-model --base-url http://127.0.0.1:8000/v1 --limit 20
  hf-judge run config.yaml          # a seed-004 config.yaml works unchanged

Flags override the recipe; the recipe overrides the defaults.
"""
BATCH_EXAMPLE = """examples:
  hf-judge score data.jsonl --metrics QA_All -m gpt-4.1-nano --batch            # half the price, within 24 h
  hf-judge score data.jsonl --metrics QA_All -m gpt-4.1-nano --batch --no-wait  # submit and exit; rerun collects
  hf-judge batch status
  hf-judge batch cancel
  hf-judge batch export data.jsonl --metrics QA_All -m Qwen/Qwen3-8B -o requests.jsonl
  vllm run-batch -i requests.jsonl -o results.jsonl --model Qwen/Qwen3-8B
  hf-judge batch import data.jsonl results.jsonl --metrics QA_All -m Qwen/Qwen3-8B -o out/
"""
AGREEMENT_EXAMPLE = """examples:
  hf-judge agreement labelled-judged/ --score QA_Correctness --label human_score --out report.json
  hf-judge agreement me/pairs-judged --score Comparative --label preferred --plots plots/
  hf-judge agreement out/ --score QA_Correctness__judge_a --label QA_Correctness__judge_b   # judge vs judge

Numeric scores: Spearman, Kendall, Pearson, MAE, quadratic kappa, confusion matrix, calibration;
verdicts: accuracy, precision, recall, F1, kappa; pairwise: agreement, tie and position-bias rates.
"""
MERGE_EXAMPLE = """example:
  hf-judge merge --scores output/data_scored.jsonl --data data.jsonl --output data_with_scores.jsonl
"""


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _threshold(text: str) -> tuple[str, float]:
    key, value = _kv(text)
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {value!r} is not a finite number")
    return key, number


def _add_api_key_env(p: Any) -> None:
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )


def _add_cache_dir(p: Any) -> None:
    p.add_argument("--cache-dir", help="cache folder (default: $HF_DATASETS_CACHE/hf_judge)")


def _add_client_options(p: argparse.ArgumentParser) -> None:
    """One flag per public field of :class:`hf_judge.Settings`, its help from the field's description."""
    import typing

    from ..settings import CLI_FLAGS, public_fields

    g = p.add_argument_group("judge server")
    for name, f in public_fields().items():
        kind = _scalar_type(f.annotation)
        literal = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
        if literal is None and kind not in (bool, int, float, str) and not issubclass(kind, enum.Enum):
            kind = str  # a list of judges: `--models a,b,c`, split by Settings
        default = f.default if not f.is_required() else None
        shown = (
            ""
            if default is None
            else f" (default {default})"
            if isinstance(default, str)
            else f" (default {default:,})"
            if kind is int
            else f" (default {default:g})"
            if kind is float
            else f" (default {default})"
        )
        flags = CLI_FLAGS.get(name, ("--" + name.replace("_", "-"),))
        if kind is bool:  # a switch: `--logprobs`, not `--logprobs true`
            g.add_argument(*flags, dest=name, action="store_true", default=None, help=f.description)
            continue
        choices = list(literal) if literal else None
        if literal is not None:
            kind = str
        elif issubclass(kind, enum.Enum):  # `invalid choice: 'avg' (choose from mean, median, ...)`
            choices = [str(m.value) for m in cast("type[enum.Enum]", kind)]
            kind = str
        g.add_argument(*flags, dest=name, type=kind, choices=choices, help=f"{f.description}{shown}")
        if name == "base_url":
            _add_api_key_env(g)
    g.add_argument(
        "--ray",
        action="store_true",
        help='score on a Ray cluster (pip install "hf-judge[ray]"): at --ray-address, else $RAY_ADDRESS, else a '
        "local one; --cache-dir is each node's own (local disk, not a network filesystem)",
    )
    g.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to run on (implies --ray)")
    _add_cache_dir(g)
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument(
        "--token-columns",
        action="store_true",
        default=None,
        help="add per-row judge_prompt_tokens / judge_completion_tokens columns",
    )


def _scalar_type(annotation: Any) -> Any:
    """``int`` for ``Optional[Annotated[int, ...]]``: the type argparse converts a flag's text to (a ``Literal``
    stays one: its values are the flag's choices)."""
    import typing

    while typing.get_origin(annotation) not in (None, typing.Literal):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def _add_output_options(p: argparse.ArgumentParser, default: str) -> None:
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
        type=_agreement_report,
        default=[],
        metavar="REPORT.json",
        help="show this report of `hf-judge agreement --out` in the pushed card (repeatable)",
    )
    g.add_argument("--token", help="Hub token (default: $HF_TOKEN or the saved login)")
    g.add_argument("--overwrite", action="store_true", help="replace an output folder that holds a different result")


def _agreement_report(path: str):
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


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subset", help="dataset config name on the Hub (load_dataset's `name`)")
    p.add_argument("--split", action="append", dest="splits", help="split to use (repeatable; default: all)")
    p.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    p.add_argument("-n", "--limit", type=_positive_int, help="only the first N rows of each split (a cheap trial)")


def _add_scoring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", action="append", help="metric names (repeatable or comma list); see `hf-judge metrics`")
    p.add_argument(
        "--column",
        action="append",
        type=_kv,
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
        "one) and, for a model in the price table (--prices), the cost online and in batch mode",
    )


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line as every other error of hf-judge's (not the 30 lines of a
    command's usage before them); subcommands' parsers are of this class too (``add_subparsers``' default)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser(commands: set[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``commands``, the server options (built from :class:`hf_judge.Settings`,
    which imports pydantic: ~0.1 s) only for those, so `--help`, `metrics` and `recipes` start fast."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="hf-judge", description="Score Hugging Face datasets with LLM-as-judge metrics.")
    parser.add_argument("--version", action="version", version=f"hf-judge {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "score",
        help="score a dataset",
        description="Score DATASET (a Hub repo id, a folder, or a .jsonl/.json/.parquet/.csv/.arrow file).",
        epilog=SCORE_EXAMPLE,
        formatter_class=fmt,
    )
    p.add_argument("dataset", nargs="?", help="Hub repo id, local folder, or data file")
    p.add_argument(
        "--example",
        action="store_true",
        help="score the small example dataset shipped with hf-judge "
        "(instruction/output columns; default metrics QA_All) instead of DATASET",
    )
    _add_input_options(p)
    p.add_argument(
        "--streaming",
        action="store_true",
        help="read a Hub dataset as it is scored (load_dataset(..., streaming=True)): nothing is downloaded "
        "ahead, memory stays bounded by the rows in flight (max(4096, 64 x --concurrency)), and the output is "
        "written as Parquet shards as rows arrive",
    )
    _add_scoring_options(p)
    p.add_argument("--recipe", help="a recipe name or YAML file supplying defaults; flags override it")
    if commands is None or "score" in commands:
        _add_client_options(p)
    _add_output_options(p, "<name>-judged; a recipe's filters also save <dir>-filtered")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "filter",
        help="keep rows whose scores pass thresholds",
        description="Filter DATASET by score thresholds (inclusive); the card keeps how the scores were made.",
        epilog=FILTER_EXAMPLE,
        formatter_class=fmt,
    )
    p.add_argument("dataset", help="a scored Hub repo id or the folder hf-judge score saved")
    _add_input_options(p)
    p.add_argument(
        "--min", action="append", type=_threshold, default=[], metavar="COLUMN=V", help="keep COLUMN >= V (repeatable)"
    )
    p.add_argument(
        "--max", action="append", type=_threshold, default=[], metavar="COLUMN=V", help="keep COLUMN <= V (repeatable)"
    )
    p.add_argument("--keep-missing", action="store_true", help="keep rows whose score is null")
    _add_output_options(p, "<name>-filtered")
    p.set_defaults(func=cmd_filter)

    p = sub.add_parser(
        "metrics",
        help="list the metrics",
        description="List the built-in metrics, those of installed metric packs (entry points of group "
        "hf_judge.metrics), and yours with --prompts-dir, with where each comes from.",
        epilog="example:\n  hf-judge metrics --prompts-dir my_prompts/",
        formatter_class=fmt,
    )
    p.add_argument("--prompts-dir", action="append", help="also list the prompt files in this folder (repeatable)")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser(
        "recipes",
        help="list the built-in recipes",
        description="List the built-in recipes: when to use each and its cost in calls per row.",
        epilog="example:\n  hf-judge recipes\n  hf-judge run quality --dataset data.jsonl",
        formatter_class=fmt,
    )
    p.set_defaults(func=cmd_recipes)

    p = sub.add_parser(
        "run",
        help="run a whole job from a recipe or a seed config.yaml",
        description="Run the job a YAML file describes.",
        epilog=RUN_EXAMPLE,
        formatter_class=fmt,
    )
    p.add_argument("file", help="recipe name, recipe YAML, or seed-004 config.yaml")
    p.add_argument("--dataset", help="override the recipe's dataset")
    _add_input_options(p)
    _add_scoring_options(p)
    if commands is None or "run" in commands:
        _add_client_options(p)
    _add_output_options(p, "<name>-judged; a recipe's filters also save <dir>-filtered")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "batch",
        help="batch API files and batches: export, import, status, cancel",
        description="Batch mode's tools. Scoring through a batch API is `hf-judge score ... --batch`.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    bsub = p.add_subparsers(dest="batch_command", metavar="ACTION", required=True, help="what to do")
    full = commands is None or "batch" in commands
    b = bsub.add_parser(
        "export",
        help="write the batch JSONL of a run for an offline runner (vllm run-batch)",
        description="Write the requests `hf-judge score` would send as one OpenAI batch JSONL file (custom_id: the "
        "request's cache key), less those the cache holds. Import the runner's output with the same dataset, "
        "metrics, --model, --base-url and --cache-dir.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    b.add_argument("dataset", help="Hub repo id, local folder, or data file")
    b.add_argument("--output", "-o", required=True, help="the JSONL file to write")
    _add_input_options(b)
    _add_scoring_options(b)
    if full:
        _add_client_options(b)
    b.set_defaults(func=cmd_batch_export)
    b = bsub.add_parser(
        "import",
        help="read a batch runner's output JSONL and save the scored dataset",
        description="Read RESULTS (the output JSONL of a batch runner) into the cache and build the scored dataset "
        "from it, with the same validation and errors split as `hf-judge score`. Nothing is sent.",
        epilog=BATCH_EXAMPLE,
        formatter_class=fmt,
    )
    b.add_argument("dataset", help="the dataset the requests were exported from")
    b.add_argument("results", help="the runner's output JSONL")
    _add_input_options(b)
    _add_scoring_options(b)
    if full:
        _add_client_options(b)
    _add_output_options(b, "<name>-judged")
    b.set_defaults(func=cmd_batch_import)
    b = bsub.add_parser(
        "status",
        help="list the batches of a cache with their states and counts",
        description="List the batches recorded in the reply cache, as last seen (a --batch run refreshes them).",
        epilog="example:\n  hf-judge batch status --cache-dir ~/.cache/hf_judge",
        formatter_class=fmt,
    )
    _add_cache_dir(b)
    b.set_defaults(func=cmd_batch_status)
    b = bsub.add_parser(
        "cancel",
        help="cancel the batches of a cache that are still running",
        description="Cancel batches in flight (all of them, or those named). Lines already run are kept: the "
        "next --batch run collects them and submits the rest again.",
        epilog="example:\n  hf-judge batch cancel\n  hf-judge batch cancel batch_abc123",
        formatter_class=fmt,
    )
    b.add_argument("ids", nargs="*", metavar="BATCH_ID", help="batch ids to cancel (default: every one in flight)")
    _add_cache_dir(b)
    _add_api_key_env(b)
    b.set_defaults(func=cmd_batch_cancel)

    p = sub.add_parser(
        "agreement",
        help="check a judge's scores against labels (or another judge)",
        description="Compare a score column of DATASET with a label column: a table, JSON and pictures.",
        epilog=AGREEMENT_EXAMPLE,
        formatter_class=fmt,
    )
    p.add_argument("dataset", help="Hub repo id, local folder, or data file holding both columns")
    p.add_argument(
        "--score",
        required=True,
        help="the judge's column (a pairwise metric's name reads <name>_winner, Comparative__judge_a a panel judge's)",
    )
    p.add_argument("--label", required=True, help="the column of trusted labels, or a second judge's column")
    p.add_argument("--split", help="the split to compare (needed when the dataset has several)")
    p.add_argument("--subset", help="dataset config name on the Hub (load_dataset's `name`)")
    p.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    p.add_argument("--token", help="Hub token (default: $HF_TOKEN or the saved login)")
    p.add_argument("--kind", choices=["numeric", "binary", "pairwise"], help="default: from the columns' types")
    p.add_argument("--positive", help="the label value counted as positive, for verdicts not true/false, 1/0, yes/no")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples, 0: none (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed: same seed, same intervals (default 0)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' confidence level (default 0.95)")
    p.add_argument(
        "--out", metavar="FILE", help="save the report as JSON here (pictures beside it with the plots extra)"
    )
    p.add_argument("--plots", metavar="DIR", help='save the PNG pictures here (needs pip install "hf-judge[plots]")')
    p.set_defaults(func=cmd_agreement)

    p = sub.add_parser(
        "merge",
        help="merge a seed-style scores file into the data file by id",
        description="Merge a seed-004 <name>_scored.jsonl into the original data file, matching rows by id.",
        epilog=MERGE_EXAMPLE,
        formatter_class=fmt,
    )
    p.add_argument("--scores", required=True, help="the <name>_scored.jsonl file")
    p.add_argument("--data", required=True, help="the original JSONL data file")
    p.add_argument("--output", required=True, help="where to write the merged JSONL")
    p.set_defaults(func=cmd_merge)
    return parser


def _version() -> str:
    return constants.VERSION


def _client_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (a flag not given is None)."""
    from ..settings import public_fields

    return {k: getattr(args, k) for k in public_fields() if getattr(args, k, None) is not None}


def resolve_api_key(args: argparse.Namespace, recipe_key: str | None = None, base_url: str | None = None) -> str | None:
    from urllib.parse import urlparse

    from ..redact import resolve_secret

    if args.api_key_env:
        value = os.environ.get(args.api_key_env)
        if not value:
            raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
        return value
    if recipe_key:
        try:
            return resolve_secret(recipe_key)
        except ConfigError:
            # a recipe written for OpenAI, run against a local server (--base-url): that one usually
            # needs no key, and one that does answers 401, which stops the run with its own message
            if urlparse(base_url or constants.default_base_url()).hostname == "api.openai.com":
                raise
            return None
    return None  # score_dataset reads OPENAI_API_KEY, unless the base URL carries its own credentials


@dataclass
class Job:
    """One scoring job, as :func:`resolve_job` assembles it."""

    dataset: str | None = None
    subset: str | None = None
    splits: list[str] | None = None
    revision: str | None = None
    limit: int | None = None
    metrics: Any = None
    columns: dict[str, str] = field(default_factory=dict)
    prompts_dir: Any = None
    client: dict[str, Any] = field(default_factory=dict)
    recipe_api_key: str | None = None
    token_columns: bool = False
    filters: Any = None
    output_dir: str | None = None
    push_to_hub: str | None = None
    private: bool | None = None
    recipe: Any = None


def resolve_job(args: argparse.Namespace, recipe=None, dataset: str | None = None) -> Job:
    """The job to run: the defaults, overridden by the recipe, overridden by the flags.

    This is the one place that precedence is applied, for ``score --recipe``
    and ``run`` alike. ``--column`` adds to the recipe's columns (a flag wins
    for its variable). A dataset given on the command line replaces the
    recipe's dataset together with its subset, splits and revision. The
    settings are merged as :func:`hf_judge.settings.resolve_settings` does.
    """
    from ..settings import merge_layers

    job = Job(recipe=recipe)
    if recipe is not None:
        if recipe.dataset is not None and dataset is None:
            split = recipe.dataset.split
            job.dataset, job.subset, job.revision = recipe.dataset.name, recipe.dataset.subset, recipe.dataset.revision
            job.splits = [split] if isinstance(split, str) else split
        job.limit = recipe.limit
        job.metrics = recipe.metric_specs()
        job.columns = dict(recipe.columns)
        job.prompts_dir = recipe.prompts_dir
        job.client = recipe.settings()
        job.recipe_api_key = recipe.api_key
        job.token_columns = recipe.token_columns
        job.filters = recipe.filters
        job.output_dir = recipe.output_dir
        if recipe.push_to_hub is not None:
            job.push_to_hub, job.private = recipe.push_to_hub.repo, recipe.push_to_hub.private
    if dataset is not None:
        job.dataset = dataset
    for name in ("subset", "revision", "limit", "output_dir", "push_to_hub", "private", "token_columns", "prompts_dir"):
        if getattr(args, name, None) is not None:
            setattr(job, name, getattr(args, name))
    if args.splits:
        job.splits = args.splits
    if args.metrics:
        job.metrics = [m.strip() for item in args.metrics for m in item.split(",") if m.strip()]
    job.columns.update(dict(args.column or []))
    job.client = merge_layers(job.client, _client_kwargs(args))
    return job


def _default_output_dir(dataset: str, suffix: str = "judged") -> str:
    """``data.jsonl`` (or ``data.jsonl.gz``) -> ``data-judged``; ``data-judged`` -> ``data-filtered`` (not
    ``data-judged-filtered``)."""
    from .inputs import file_stem

    stem = file_stem(Path(dataset.rstrip("/"))) if Path(dataset).exists() else dataset.replace("/", "__")
    if suffix != "judged" and stem.endswith("-judged"):
        stem = stem[: -len("-judged")]
    return f"{stem}-{suffix}"


def _rows(dd) -> str:
    from ..engine.stream import ScoredIterableDatasetDict

    if isinstance(dd, ScoredIterableDatasetDict):  # rows known once read
        return ", ".join(f"{k}: {n:,} rows" for k, (n, _) in dd.rows_and_columns().items() if k != "errors")
    return ", ".join(f"{k}: {len(v):,} rows" for k, v in dd.items() if k != "errors")


def _write(
    result,
    args: argparse.Namespace,
    out: str | None,
    repo: str | None,
    *,
    source: str,
    kind: str,
    summary=None,
    filters: dict | None = None,
) -> list[str]:
    """Push to ``repo`` and/or save to ``out`` (never over a different result, see output.py).

    Returns the lines to print once every progress bar is done.
    """
    from ..engine.stream import ScoredIterableDatasetDict, push_folder
    from ..results.hub import push_scored
    from ..results.output import save_result
    from ..results.scored import ScoredDatasetDict

    summary = summary if summary is not None else getattr(result, "summary", None)
    done = []
    if isinstance(result, ScoredIterableDatasetDict):  # --streaming: each split is read (scored) once, by the save
        result.agreement = list(getattr(args, "agreement", None) or [])
        if out:
            save_result(result, out, source=source, kind=kind, overwrite=args.overwrite, filters=filters)
            done.append(f"saved to {out} ({_rows(result)})")
        if repo:
            if out:  # the folder just written, not a second reading of the input
                url = push_folder(out, repo, private=args.private, token=args.token)
            else:
                url = result.push_to_hub(repo, private=args.private, token=args.token)
            done.append(f"pushed to {url} ({_rows(result)})")
        return done
    if out:
        # ScoredDatasetDict's save: summary.json beside the data (what a later filter or push puts in the card),
        # and no `0 examples` bar for an empty errors split
        saved = ScoredDatasetDict(result)
        saved.summary = summary
        save_result(saved, out, source=source, kind=kind, overwrite=args.overwrite, filters=filters)
        _save_pictures(result, out, summary)
        done.append(f"saved to {out} ({_rows(result)})")
    if repo:
        url = push_scored(
            result, repo, private=args.private, token=args.token, summary=summary, agreement=args.agreement
        )
        done.append(f"pushed to {url} ({_rows(result)})")
    return done


def _save_pictures(result, out: str, summary) -> None:
    """Each score column's distribution as a PNG in ``out/plots/<split>/``, when the plots extra is installed."""
    from ..results import plots
    from ..results.card import PLOTS_DIR, picture_files

    if plots.available():
        for path, png in picture_files(result, summary).items():
            target = Path(out, "plots", path.removeprefix(f"{PLOTS_DIR}/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(png)


def _filtered_name(target: str) -> str:
    return target.rstrip("/") + "-filtered"


def _check_repo(repo: str, filtered: bool = False) -> None:
    """--push-to-hub REPO (and REPO-filtered, where a recipe's filters push there too), checked before any work."""
    from ..results.hub import check_repo_id

    check_repo_id(repo, "--push-to-hub")
    if filtered:
        check_repo_id(_filtered_name(repo), "--push-to-hub (its filtered copy)")


def _check_filters(job: Job, ds, metric_columns: list[str]) -> None:
    """The recipe's filter columns must be columns this run writes or score columns the data already has."""
    from ..results.columns import score_columns
    from ..results.filter import check_threshold_columns

    names = sorted({*job.filters.min, *job.filters.max})
    for split, d in ds.items():
        if split != "errors":
            have = list(dict.fromkeys([*metric_columns, *score_columns(d)]))
            check_threshold_columns(names, have, f"the recipe's filters (split {split!r})")


def _score_on_ray(args: argparse.Namespace, job: Job, ds: Any, api_key: str | None, client: dict[str, Any]) -> Any:
    """``--ray``: the same result as ``score_dataset``, scored by actors of a Ray cluster (hf_judge.ray)."""
    try:
        from ..engine.ray import score_dataset_on_ray
    except ImportError as e:  # pragma: no cover - the ray extra is missing
        raise ConfigError(f'--ray needs Ray: pip install "hf-judge[ray]" ({e})') from None
    if args.overwrite_scores:
        raise ConfigError("--overwrite-scores is not supported with --ray: score the columns again without --ray")
    if not os.environ.get("HF_JUDGE_DEBUG"):
        import ray.data  # noqa: F401 - configures Ray Data's loggers, which the next line then turns down

        # Ray Data logs each dataset's plan, start and end, and its progress every few seconds, at INFO on
        # stderr: the run's summary says what they say, and warnings still show
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    return score_dataset_on_ray(
        ds,
        job.metrics,
        address=args.ray_address,
        columns=job.columns,
        prompts_dir=job.prompts_dir,
        api_key=api_key,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        token_columns=job.token_columns,
        **client,
    )


def _score(args: argparse.Namespace, job: Job, batch_import: str | None = None) -> int:
    """Everything is checked before the first request; the full result is saved before any filter runs."""
    assert job.dataset is not None  # cmd_score and cmd_run refuse a job without one
    from ..engine.pipeline import score_types
    from ..engine.score import score_dataset
    from ..judging.ensemble import Layout
    from ..judging.metrics import resolve_metrics
    from ..results.columns import SCORE_TYPES
    from ..results.filter import filter_by_scores
    from ..results.output import check_output, source_of, thresholds
    from ..settings import resolve_settings
    from .inputs import load_input

    if not job.metrics:
        raise ConfigError("no metrics: pass --metrics QA_All (see `hf-judge metrics`) or --recipe quality")
    if "model" not in job.client and not job.client.get("models"):
        raise ConfigError("no model: pass --model NAME (the model name your server serves), or --model local")
    if job.push_to_hub:
        _check_repo(job.push_to_hub, job.filters is not None)
    from ..transport.local import parse_local_model

    local = _local_judge(job.client, args.cache_dir)
    is_local = parse_local_model(job.client.get("model"))[0]
    api_key = None if is_local else resolve_api_key(args, job.recipe_api_key, job.client.get("base_url"))
    streaming = bool(getattr(args, "streaming", False))
    if streaming and job.filters is not None:
        raise ConfigError(
            "--streaming does not apply a recipe's filters: score with --streaming --output-dir OUT, "
            "then run `hf-judge filter OUT --min ...`"
        )
    ds = load_input(
        job.dataset,
        subset=job.subset,
        splits=job.splits,
        revision=job.revision,
        token=args.token,
        limit=job.limit,
        streaming=streaming,
    )
    loaded = resolve_metrics(job.metrics, job.prompts_dir)
    settings = resolve_settings(job.client)
    layout = Layout.from_settings(settings)  # samples and panels add columns
    produced = list(score_types(loaded, layout, settings.logprobs, job.token_columns))
    if job.filters is not None:
        features = [(c, f) for m in loaded for c, f in layout.features(m).items()]
        numeric = [c for c, f in features if getattr(f, "dtype", None) in SCORE_TYPES]
        _check_filters(job, ds, numeric)
    if args.dry_run:
        return _dry_run(args, job, ds, api_key)
    out = job.output_dir or (None if job.push_to_hub else _default_output_dir(job.dataset))
    # a local input is named by the hash of its bytes (output.source_of): read only for a folder to write
    source = source_of(job.dataset, job.subset, job.revision) if out else ""
    if out:
        shape = (
            None  # a stream's rows are known once read
            if streaming
            else {
                k: (len(d), list(dict.fromkeys([*d.column_names, *produced]))) for k, d in ds.items() if k != "errors"
            }
        )
        check_output(out, source, "scored", shape, args.overwrite)
        if job.filters is not None:
            applied = thresholds(job.filters.min, job.filters.max, job.filters.keep_missing)
            check_output(_filtered_name(out), source, "filtered", None, args.overwrite, applied)
    with local as judge:
        client = dict(job.client)
        if judge is not None:
            client.update(model=judge.model, base_url=judge.base_url)
        if getattr(args, "ray", False) or getattr(args, "ray_address", None):  # batch import has no --ray
            scored = _score_on_ray(args, job, ds, api_key, client)
        else:
            scored = score_dataset(
                ds,
                job.metrics,
                columns=job.columns,
                prompts_dir=job.prompts_dir,
                api_key=api_key,
                cache_dir=args.cache_dir,
                use_cache=not args.no_cache,
                token_columns=job.token_columns,
                if_exists="overwrite" if args.overwrite_scores else "keep",
                **_import_settings(client, batch_import),
            )
    summary = scored.summary
    assert summary is not None  # score_dataset always sets it
    summary.source_dataset, summary.source_on_hub = _source(job.dataset)
    earlier = _earlier_summary(job, args.token)
    if earlier is not None:  # metrics added to a scored result: the card keeps how its other scores were made
        summary.include(earlier)
    if job.recipe is not None:
        recipe = job.recipe
        summary.recipe = recipe.name
        ran = type(recipe)(
            **{**recipe.model_dump(exclude={"metrics"}), "metrics": job.metrics, "columns": job.columns, **job.client}
        )
        summary.recipe_yaml = ran.public_yaml()  # as it ran: flags override the file
    done: list[str] = []
    try:
        done += _write(scored, args, out, job.push_to_hub, source=source, kind="scored", summary=summary)
        if job.filters is not None:
            f = job.filters
            good = filter_by_scores(scored, min=f.min, max=f.max, keep_missing=f.keep_missing)
            rule = ", ".join(
                [*(f"{k} >= {v:g}" for k, v in f.min.items()), *(f"{k} <= {v:g}" for k, v in f.max.items())]
            )
            kept = ", ".join(f"{k}: {len(good[k]):,} of {len(v):,} rows" for k, v in scored.items() if k != "errors")
            done.append(f"filtered       {kept} pass the recipe's filters ({rule})")
            filtered = summary.with_filter(
                f.min, f.max, f.keep_missing, summary.rows, {k: len(v) for k, v in good.items() if k != "errors"}
            )
            done += _write(
                good,
                args,
                out and _filtered_name(out),
                job.push_to_hub and _filtered_name(job.push_to_hub),
                source=source,
                kind="filtered",
                summary=filtered,
                filters=thresholds(f.min, f.max, f.keep_missing),
            )
    finally:
        # after every progress bar (scoring, saving, pushing), not in between them
        sys.stderr.flush()
        print(summary, *done, sep="\n", flush=True)
    return 0


def _dry_run(args: argparse.Namespace, job: Job, ds, api_key: str | None) -> int:
    """``--dry-run``: the run's requests, tokens and cost, printed; nothing sent to the chat endpoint."""
    from ..engine.estimate import estimate_cost
    from ..transport.local import parse_local_model

    client = dict(job.client)
    if parse_local_model(client["model"])[0]:  # no judge is started for a dry run: characters / 4, no price
        client["model"] = "local"
    estimate = estimate_cost(
        ds,
        job.metrics,
        columns=job.columns,
        prompts_dir=job.prompts_dir,
        api_key=api_key,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        if_exists="overwrite" if args.overwrite_scores else "keep",
        **client,
    )
    print(estimate, flush=True)
    return 0


def _earlier_summary(job: Job, token: str | None):
    """The ``summary.json`` of a scored input (a folder or Hub repo hf-judge wrote), or None."""
    from .inputs import input_summary

    assert job.dataset is not None  # only called from _score, which has one
    try:
        return input_summary(job.dataset, revision=job.revision, token=token)
    except Exception:  # noqa: BLE001 - no summary (offline, not ours, unreadable) only means no earlier provenance
        return None


def _source(dataset: str) -> tuple[str, bool]:
    """The source dataset for the card: a Hub repo id, or only the name of a local file or folder."""
    path = Path(dataset).expanduser()
    return (path.name, False) if path.exists() else (dataset, True)


def _local_judge(kwargs: dict[str, Any], cache_dir: str | None):
    """``--model local[:PATH]``: a context manager that runs a llama.cpp judge; otherwise one that does nothing."""
    import functools

    from ..transport.local import BUNDLED_MODEL_NAME, check_local, local_judge, parse_local_model

    is_local, model_path = parse_local_model(kwargs.get("model"))
    if not is_local:
        return contextlib.nullcontext()
    if kwargs.get("base_url"):
        raise ConfigError(f"--model {kwargs['model']} starts its own server: drop --base-url {kwargs['base_url']}")
    check_local(model_path)  # before the dataset is loaded
    # llama.cpp's server answers one request at a time: two in flight keep it busy, more would only wait.
    kwargs.setdefault("concurrency", 2)
    kwargs.setdefault("timeout", 300.0)

    @contextlib.contextmanager
    def run():
        from .. import constants

        models_dir = Path(cache_dir).expanduser() / "models" if cache_dir else constants.default_cache_dir() / "models"
        started = time.perf_counter()
        say = functools.partial(print, file=sys.stderr, flush=True)
        say(f"hf-judge: starting a local llama.cpp judge ({model_path or BUNDLED_MODEL_NAME})")
        with local_judge(model_path, models_dir=models_dir) as judge:
            elapsed = time.perf_counter() - started
            say(f"hf-judge: local judge {judge.model} ready at {judge.base_url} in {elapsed:.1f} s (pid {judge.pid})")
            if model_path is None:
                say("hf-judge: Gemma 3 270M shows the mechanics; its scores mean little. Real scores need a real judge")
            yield judge

    return run()


def cmd_score(args: argparse.Namespace) -> int:
    """hf-judge score DATASET ... (see SCORE_EXAMPLE)."""
    recipe = None
    if args.recipe:
        from .recipes import load_recipe

        recipe = load_recipe(args.recipe)
    dataset = args.dataset
    if args.example:
        if dataset:
            raise ConfigError(f"--example scores the bundled example dataset: drop {dataset!r}, or drop --example")
        from .inputs import example_dataset_path

        dataset = str(example_dataset_path())
        if not args.metrics and recipe is None:
            args.metrics = ["QA_All"]
    elif not dataset:
        raise ConfigError("no dataset: pass a Hub repo id, a folder or a data file, or --example for the bundled one")
    return _score(args, resolve_job(args, recipe, dataset=dataset))


def cmd_run(args: argparse.Namespace) -> int:
    """hf-judge run FILE: a recipe (by name or path), or a seed-004 config.yaml."""
    from .recipes import find_recipe, load_recipe, read_yaml
    from .seed import is_seed_config, run_seed_config

    path = find_recipe(args.file)
    if is_seed_config(read_yaml(path)):
        if args.dry_run:
            raise ConfigError(f"--dry-run works with recipes; {path} is a seed config.yaml")
        summary = run_seed_config(path, cache_dir=args.cache_dir)
        print(summary)
        return 0
    job = resolve_job(args, load_recipe(path), dataset=args.dataset)
    if job.dataset is None:
        raise ConfigError(f"{path} names no dataset: pass --dataset data.jsonl or add `dataset: {{name: ...}}` to it")
    return _score(args, job)


def _import_settings(client: dict[str, Any], batch_import: str | None) -> dict[str, Any]:
    """``score_dataset``'s settings keywords; for ``batch import``, with the output file to read first."""
    if batch_import is None:
        return client
    from ..settings import Settings, validated

    path = Path(batch_import)
    if not path.is_file():
        raise ConfigError(f"no batch output file {path}: give the JSONL the batch runner wrote (-o of vllm run-batch)")
    return {**client, "settings": validated(Settings, {**client, "batch_import": str(path.resolve())}, "settings")}


# `score`'s flags that export and import share but cannot honour (they send nothing): refused, not ignored
_NOT_FOR_BATCH_FILES = {
    "dry_run": "--dry-run",
    "no_cache": "--no-cache",
    "batch": "--batch",
    "no_wait": "--no-wait",
    "num_workers": "--workers",
    "ray": "--ray",
    "ray_address": "--ray-address",
    "max_cost": "--max-cost",
    "max_total_tokens": "--max-total-tokens",
}


def _batch_job(args: argparse.Namespace) -> Job:
    given = [
        flag
        for name, flag in _NOT_FOR_BATCH_FILES.items()
        if getattr(args, name, None) not in (None, False) and not (name == "num_workers" and args.num_workers == 1)
    ]
    if given:
        what = "writes requests for a runner" if args.batch_command == "export" else "reads a runner's output"
        raise ConfigError(
            f"{', '.join(given)} cannot apply to `hf-judge batch {args.batch_command}`, which {what} and sends "
            f"nothing (the cache is where export and import meet): drop {'it' if len(given) == 1 else 'them'}, or "
            "use `hf-judge score`"
        )
    job = resolve_job(args, None, dataset=args.dataset)
    if not job.metrics:
        raise ConfigError("no metrics: pass --metrics QA_All (see `hf-judge metrics`)")
    if "model" not in job.client:
        raise ConfigError("no model: pass --model NAME, the model name the runner serves")
    return job


def cmd_batch_export(args: argparse.Namespace) -> int:
    """hf-judge batch export DATASET -o requests.jsonl ... (see BATCH_EXAMPLE)."""
    from ..engine.batch_files import export_batch
    from .inputs import load_input

    job = _batch_job(args)
    assert job.dataset is not None
    ds = load_input(
        job.dataset, subset=job.subset, splits=job.splits, revision=job.revision, token=None, limit=job.limit
    )
    n = export_batch(
        ds,
        job.metrics,
        args.output,
        columns=job.columns,
        prompts_dir=job.prompts_dir,
        cache_dir=args.cache_dir,
        **job.client,
    )
    model = job.client["model"]
    print(
        f"wrote {n:,} requests to {args.output}\n"
        f"next: vllm run-batch -i {args.output} -o results.jsonl --model {model}\n"
        f"then: hf-judge batch import {job.dataset} results.jsonl (with this export's dataset options, --metrics, "
        "--model, --base-url and --cache-dir: they make the requests' keys)"
    )
    return 0


def cmd_batch_import(args: argparse.Namespace) -> int:
    """hf-judge batch import DATASET RESULTS.jsonl ... (see BATCH_EXAMPLE)."""
    return _score(args, _batch_job(args), batch_import=args.results)


def _book(cache_dir: str | None):
    import sqlite3

    from ..engine.batch import BatchBook

    path = (Path(cache_dir).expanduser() if cache_dir else constants.default_cache_dir()) / "replies.sqlite3"
    if not path.is_file():
        raise ConfigError(f"no reply cache at {path}: pass the --cache-dir the batch run used")
    try:
        return BatchBook(path, server="")
    except sqlite3.Error as e:
        raise ConfigError(f"cannot read the reply cache {path}: {e}") from None


def cmd_batch_status(args: argparse.Namespace) -> int:
    """hf-judge batch status: the batches of a cache."""
    book = _book(args.cache_dir)
    try:
        jobs = book.jobs(every_server=True)
    finally:
        book.close()
    if not jobs:
        print("no batches in this cache")
        return 0
    print(f"{'batch':34} {'state':11} {'requests':>9} {'done':>9} {'failed':>7} {'tokens in/out':>19}  server")
    for j in jobs:
        tokens = f"{j.prompt_tokens:,}/{j.completion_tokens:,}"
        print(
            f"{j.batch_id or j.name:34} {j.state:11} {j.requests:>9,} {j.done:>9,} {j.failed:>7,} {tokens:>19}  "
            f"{j.base_url or ''}"
        )
    return 0


def cmd_batch_cancel(args: argparse.Namespace) -> int:
    """hf-judge batch cancel [BATCH_ID ...]: cancel batches in flight."""
    from openai import OpenAI

    from ..engine.batch import DONE

    key = resolve_api_key(args) or constants.default_api_key() or "none"
    book = _book(args.cache_dir)
    try:
        live = [j for j in book.jobs(every_server=True) if j.batch_id and j.state not in DONE | {"collected"}]
        if args.ids:
            unknown = set(args.ids) - {j.batch_id for j in live}
            if unknown:
                raise ConfigError(
                    f"no batch in flight with id {', '.join(sorted(unknown))} (see `hf-judge batch status`)"
                )
            live = [j for j in live if j.batch_id in args.ids]
        for j in live:
            with OpenAI(base_url=j.base_url, api_key=key) as api:
                state = api.batches.cancel(j.batch_id).status
            book.update(j.name, state=state)
            print(f"{j.batch_id}: {state}")
    finally:
        book.close()
    if not live:
        print("no batch in flight")
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    """hf-judge filter DATASET --min COLUMN=V ..."""
    from ..results.filter import filter_by_scores
    from ..results.output import check_output, source_of, thresholds
    from .inputs import input_summary, load_input

    if args.push_to_hub:
        _check_repo(args.push_to_hub)
    source = source_of(args.dataset, args.subset, args.revision)
    rule = thresholds(dict(args.min), dict(args.max), args.keep_missing)
    out = args.output_dir or (None if args.push_to_hub else _default_output_dir(args.dataset, "filtered"))
    if out:
        check_output(out, source, "filtered", None, args.overwrite, rule)
    ds = load_input(
        args.dataset, subset=args.subset, splits=args.splits, revision=args.revision, token=args.token, limit=args.limit
    )
    if "errors" not in ds and not args.splits and not Path(args.dataset).exists():
        try:
            errors = load_input(args.dataset, subset="errors", revision=args.revision, token=args.token)
            ds["errors"] = errors["errors"]
        except Exception:  # noqa: BLE001 - a repo without an errors config is fine
            pass
    before = {k: len(v) for k, v in ds.items() if k != "errors"}
    out_ds = filter_by_scores(ds, min=dict(args.min), max=dict(args.max), keep_missing=args.keep_missing)
    kept = {k: len(out_ds[k]) for k in before}
    stored = input_summary(args.dataset, revision=args.revision, token=args.token)
    summary = stored.with_filter(dict(args.min), dict(args.max), args.keep_missing, before, kept) if stored else None
    done = _write(out_ds, args, out, args.push_to_hub, source=source, kind="filtered", summary=summary, filters=rule)
    sys.stderr.flush()
    for k, n in before.items():
        print(f"{k}: kept {kept[k]:,} of {n:,} rows")
    print(*done, sep="\n", flush=True)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    """hf-judge metrics: name, mode, variables, default temperature, where it comes from, outputs."""
    from ..judging.metrics import listed_metrics

    rows = []
    for m, source in listed_metrics(args.prompts_dir):
        outs = ", ".join(
            f"{o.key}:{o.type}"
            + (f"[{o.minimum:g}-{o.maximum:g}]" if o.minimum is not None and o.maximum is not None else "")
            for o in m.outputs
        )
        rows.append(
            (
                m.name,
                m.mode or m.kind,
                ", ".join(m.variables + tuple(f"{v}?" for v in m.optional)),
                f"{m.temperature:g}",
                source,
                outs,
            )
        )
    header = ("metric", "mode", "variables", "temp", "source", "outputs")
    widths = [max(len(r[i]) for r in [*rows, header]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:  # noqa: ARG001 - every command takes its parsed arguments
    """hf-judge recipes: each built-in recipe, when to use it, and its cost in calls per row."""
    from .recipes import list_recipes

    for name, r in list_recipes().items():
        if isinstance(r, ConfigError):
            print(f"{name}\n  (invalid: {r})\n")
            continue
        calls = r.calls_per_row()
        metrics = ", ".join(m if isinstance(m, str) else m.name for m in r.metrics)
        print(f"{name}  ({calls} call{'s' if calls != 1 else ''} per row: {metrics})")
        print(f"  {r.description}")
        if r.use_when:
            print(f"  use it to {r.use_when}")
        print(f"  hf-judge run {name} --dataset DATA --model MODEL\n")
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    """hf-judge agreement DATASET --score COL --label COL [--out report.json] [--plots DIR]."""
    from ..analysis.agreement import agreement
    from ..results import plots
    from ..results.card import text_histogram
    from .inputs import load_input

    if args.plots:
        plots.require()  # before the work: the user asked for pictures
    ds = load_input(
        args.dataset,
        subset=args.subset,
        splits=[args.split] if args.split else None,
        revision=args.revision,
        token=args.token,
    )
    report = agreement(
        ds,
        args.score,
        args.label,
        split=args.split,
        kind=args.kind,
        positive=args.positive,
        resamples=args.resamples,
        seed=args.seed,
        confidence=args.confidence,
    )
    print(report)
    done = []
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report.to_json())
        done.append(f"saved to {out}")
    folder = Path(args.plots) if args.plots else Path(args.out).parent if args.out and plots.available() else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        pictures = plots.report_pngs(report)
        for name, png in pictures.items():
            (folder / name).write_bytes(png)
        done.append(f"pictures ({len(pictures)} PNG) in {folder}{os.sep}")
    else:  # no pictures: the distributions as text
        for column, hist in report.histograms.items():
            print(f"\n{column}\n{text_histogram(hist)}")
        if not plots.available():
            print(f"\n(for PNG pictures: {plots.INSTALL_HINT}, then --plots DIR)")
    if done:
        print("", *done, sep="\n")
    if not report.pairs:  # an empty report is no result: a script must notice (exit 1), and learn what to pass
        print(
            f"hf-judge: error: nothing to compare: no row has both a {report.score} and a {report.label} value; "
            "pass a --label column that holds labels (and a --score column the judge filled), or another --split",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """hf-judge merge --scores F --data F --output F."""
    from .seed import merge_scores

    report = merge_scores(args.scores, args.data, args.output)
    print(", ".join(f"{k}: {v}" for k, v in report.items() if not isinstance(v, list)))
    return 0


def _setup_logging(hub_login: bool = True) -> None:
    from ..redact import install_log_filter

    install_log_filter(hub_login=hub_login)
    level = logging.DEBUG if constants.debug_enabled() else logging.WARNING
    root = logging.getLogger("hf_judge")
    # one handler, on the current stderr, however often main() runs in one process (tests call it in-process)
    for old in [h for h in root.handlers if getattr(h, "_hf_judge_cli", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler._hf_judge_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.setLevel(level)
    root.addHandler(handler)


def _unrecognized(extra: list[str], parser: argparse.ArgumentParser, command: str | None) -> str:
    """argparse's "unrecognized arguments" message, with the closest option of the command for each misspelt one
    (Python 3.14's argparse suggests on its own; 3.11 does not)."""
    import difflib

    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # no public getter
    known = [o for a in sub.choices[command]._actions for o in a.option_strings] if sub and command else []
    hints = []
    for word in (w.split("=", 1)[0] for w in extra if w.startswith("--")):
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
        if close:
            hints.append(f"did you mean {close[0]} for {word}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else "")


def _sigterm(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hf-judge`` console script."""
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser({command} if command else set())
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # no getter
        command = getattr(args, "command", None)
        # the command's own parser names it: `hf-judge score --help` lists the options that exist
        (sub.choices[command] if sub and command else parser).error(_unrecognized(extra, parser, command))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(hub_login=args.command in ("score", "run", "filter"))
    previous = signal.signal(signal.SIGTERM, _sigterm)
    from ..progress import for_logs
    from ..redact import scrub

    try:
        # stderr a log: plain progress lines, no library bars (the listing commands import no datasets)
        with for_logs() if args.command not in ("metrics", "recipes") else contextlib.nullcontext():
            return args.func(args)
    except InterruptedRun as e:
        print(f"hf-judge: {scrub(e)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        if getattr(args, "no_cache", False):
            hint = "The cache is off (--no-cache): nothing of this run was kept."
        else:
            hint = "Run the same command again to resume: finished replies are cached."
        print(f"hf-judge: interrupted. {hint}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `hf-judge ... | head`: the reader has gone, which is no error of the run (whatever it saved is
        # saved). Point stdout at /dev/null so that the interpreter's last flush does not complain again.
        out = sys.__stdout__
        if out is not None and sys.stdout is out:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 141  # 128 + SIGPIPE, as a shell pipeline reports a writer whose reader closed
    except ConfigError as e:
        _maybe_traceback()
        print(f"hf-judge: error: {scrub(e)}", file=sys.stderr)
        return 2
    except RunStopped as e:
        _maybe_traceback()
        print(f"hf-judge: stopped: {scrub(e)}", file=sys.stderr)
        return 1
    except HfJudgeError as e:
        _maybe_traceback()
        print(f"hf-judge: error: {scrub(e)}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one line unless debugging
        _maybe_traceback()
        print(
            f"hf-judge: error: {type(e).__name__}: {scrub(e)} (set HF_JUDGE_DEBUG=1 for the traceback)", file=sys.stderr
        )
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def _maybe_traceback() -> None:
    if constants.debug_enabled():
        import traceback

        print(traceback.format_exc(), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
