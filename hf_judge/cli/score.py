"""``hf-judge score`` and ``hf-judge run``: one scoring job (:func:`score_job`), from flags, a recipe, or both.

Everything is checked before the first request (the job, the judge, the dataset, the metrics, the output
folders); the full result is saved before a recipe's filters run.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from .. import constants
from ..engine.capabilities import check, refusal
from ..errors import BudgetExceededError, ConfigError, InterruptedRun, RunStopped
from ..progress import datasets_bars_off, interactive
from .job import Job, resolve_api_key, resolve_job
from .options import add_job_options
from .save import check_repo, default_output_dir, filtered_name, show_overview, write_result
from .spark import on_spark, spark_job

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
  hf-judge score me/rows --metrics QA_All -m judge --base-url http://gpu1:8000/v1 --spark -o s3://bucket/scored \\
      --spark-master spark://head:7077 --cache-dir s3://bucket/cache   # on Spark, the reply store shared
  hf-judge score data.jsonl --metrics QA_All --model gpt-4.1-nano --dry-run   # requests, tokens, cost; none sent
  hf-judge score data.jsonl --metrics QA_Correctness --samples 5 --temperature 0.7   # mean, std, majority of 5
  hf-judge score data.jsonl --metrics QA_Correctness --models gpt-4.1-nano,gpt-4o-mini   # a panel of two judges
  hf-judge score mix.jsonl --metrics QA_Correctness --by source   # each score per source, the lowest mean first
"""
RUN_EXAMPLE = """examples:
  hf-judge run quality --dataset data.jsonl --output-dir out/      # a built-in recipe, by name
  hf-judge run my_recipe.yaml --model my-model --base-url http://127.0.0.1:8000/v1 --limit 20
  hf-judge run pairwise --dataset me/pairs --streaming -o pairs-judged   # read and scored as it streams
  hf-judge run config.yaml          # a seed-004 config.yaml works unchanged

Flags override the recipe; the recipe overrides the defaults.
"""
JUDGED = "<name>-judged; a recipe's filters also save <dir>-filtered"
# the run finished and its result is saved, but it lost something whole (see summary.losses): a script must notice
LOST = 3
EXIT_CODES = f"""
exit codes:
  0    the run finished (rows that failed are saved in the errors split and counted)
  1    the run stopped early (key refused, server unreachable, circuit breaker, budget, the local judge died
       while nothing could be scored): what finished is cached, run the same command again to resume; a
       budget stop also saves what it paid for to the output folder, marked incomplete (not pushed)
  2    usage or config error, found before any request
  {LOST}    the run finished and its result is saved, but it lost something whole: every request failed, every
       request to one judge of a panel failed, or the local judge died; the last lines say what and why
  130  interrupted (Ctrl-C, SIGTERM)
"""


def add_score(sub: Any, settings: bool) -> None:
    """The ``score`` command's parser; ``settings``: with the request settings' flags."""
    p = sub.add_parser(
        "score",
        help="score a dataset",
        usage="%(prog)s [DATASET | --example] --metrics METRICS --model MODEL [options]",
        description="Score DATASET (a Hub repo id, a folder, or a .jsonl/.json/.parquet/.csv/.arrow file).",
        epilog=SCORE_EXAMPLE + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_job_options(p, settings=settings, output=JUDGED, streaming=True, recipe=True, local=True, first=_score_input)
    p.set_defaults(func=cmd_score)


def add_run(sub: Any, settings: bool) -> None:
    """The ``run`` command's parser; ``settings``: with the request settings' flags."""
    p = sub.add_parser(
        "run",
        help="run a whole job from a recipe or a seed config.yaml",
        usage="%(prog)s FILE [--dataset DATASET] [options]",
        description="Run the job a YAML file describes.",
        epilog=RUN_EXAMPLE + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_job_options(p, settings=settings, output=JUDGED, streaming=True, local=True, first=_run_input)
    p.set_defaults(func=cmd_run)


def _score_input(g: Any) -> None:
    """``score``'s own options, first of its "input and columns" group."""
    g.add_argument("dataset", nargs="?", help="Hub repo id, local folder, or data file")
    g.add_argument(
        "--example",
        action="store_true",
        help="score the small example dataset shipped with hf-judge "
        "(instruction/output columns; default metrics QA_All) instead of DATASET",
    )


def _run_input(g: Any) -> None:
    """``run``'s own options, first of its "input and columns" group."""
    g.add_argument("file", help="recipe name, recipe YAML, or seed-004 config.yaml")
    g.add_argument("--dataset", help="override the recipe's dataset")


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
    return score_job(args, resolve_job(args, recipe, dataset=dataset))


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
    return score_job(args, job)


def score_job(args: argparse.Namespace, job: Job, batch_import: str | None = None) -> int:
    """Run ``job`` (``score``, ``run``, and ``batch import`` with ``batch_import``, the runner's output file):
    check it, load the dataset, score it (or estimate it: ``--dry-run``), save and push the result and, with a
    recipe's filters, its filtered copy; print the summary."""
    assert job.dataset is not None  # cmd_score and cmd_run refuse a job without one
    from ..transport.local import parse_local_model
    from ..transport.vllm import engine_record
    from .inputs import load_input

    _check_job(job)
    _check_vllm_engine(args, job, batch_import)
    local = _local_judge(job.client, args.cache_dir, job.local_port)
    is_local = parse_local_model(job.client.get("model"))[0] or judge_started(job.client)
    api_key = None if is_local else resolve_api_key(args, job.recipe_api_key, job.client.get("base_url"))
    if on_spark(args) and not args.dry_run:  # a dry run reads the input here: its estimate is any engine's
        with local as judge:
            client = {**job.client, **({"model": judge.model, "base_url": judge.base_url} if judge else {})}
            scored, out = spark_job(args, job, client)
        return _finish_spark(args, job, scored, out)
    streaming = bool(getattr(args, "streaming", False))
    if streaming:
        check("stream", None, only=("filters",), filters=job.filters is not None)
    ds = load_input(
        job.dataset,
        subset=job.subset,
        splits=job.splits,
        revision=job.revision,
        token=args.token,
        limit=job.limit,
        streaming=streaming,
    )
    produced = _produced_columns(job, ds)
    _check_group_by(getattr(args, "by", None), ds)
    if args.dry_run:
        return _dry_run(args, job, ds, api_key)
    out, source = _check_outputs(args, job, ds, produced, streaming)
    with local as judge:
        client = dict(job.client)
        if judge is not None:
            client.update(model=judge.model, base_url=judge.base_url)
        stopped: BudgetExceededError | None = None
        try:
            scored = _run_scoring(args, job, ds, api_key, client, batch_import)
        except BudgetExceededError as e:
            if e.result is None:  # an engine that kept nothing of its own (Ray, a cascade): the cache has it all
                raise
            scored, stopped = e.result, e  # what was paid for: saved below as an incomplete result
        except RunStopped as e:
            if not isinstance(e, InterruptedRun):
                _raise_if_died(judge, e)
            raise
        summary = scored.summary
        assert summary is not None  # score_dataset always sets it
        # a run that lost every request gives a dying server a moment to be reaped (its connections close first)
        died = _died_message(judge, wait=2.0 if summary.losses() else 0.0)
        summary.engine = engine_record(judge) or summary.engine
    _add_provenance(summary, job, args.token)
    if getattr(args, "by", None):  # the overview, page and card show the scores by it, now and on a later view
        summary.group_by = args.by
    done: list[str] = _saved_on_ray(args, job, scored)
    # an incomplete result is kept where it is this machine's, never published, nor filtered as a finished one
    repo = job.push_to_hub if stopped is None else None
    try:
        # datasets' "Saving the dataset" bar says nothing the lines printed after it do not ("saved to ...")
        with datasets_bars_off():
            done += write_result(scored, args, out, repo, source=source, kind="scored", summary=summary)
            done = show_overview(scored, summary, out, repo, terminal=interactive(sys.stdout)) + done
            if stopped is not None or getattr(scored, "stopped", None) is not None:
                done += _incomplete_lines(job, out, pushed=stopped is None)
            elif job.filters is not None:
                done += _filter_and_write(args, job, scored, summary, out, source)
    finally:
        # after every progress bar (scoring, saving, pushing), not in between them
        sys.stderr.flush()
        print(summary, *done, sep="\n", flush=True)
    stopped = stopped or getattr(scored, "stopped", None)  # a stream's, known once the save has read it
    if stopped is not None:
        raise stopped  # exit 1, its message last: the run stopped early
    return _lost(summary, died)


def _incomplete_lines(job: Job, out: str | None, pushed: bool) -> list[str]:
    """What a budget stop's result is not: pushed, filtered (it is saved in ``out`` as incomplete); ``pushed``:
    the save said whether it pushed (a stream's, whose stop is known once it is read)."""
    lines = []
    if out:
        lines.append(f"{'incomplete':<15}{out} holds the rows paid for; the same command completes it")
    if job.push_to_hub and not pushed:
        lines.append(f"{'not pushed':<15}{job.push_to_hub}: an incomplete result is not published")
    if job.filters is not None:
        lines.append(f"{'not filtered':<15}the recipe's filters run on the complete result")
    return lines


def _finish_spark(args: argparse.Namespace, job: Job, scored, out: str) -> int:
    """``--spark``: the output Spark wrote (``out``) completed with the provenance and the report page, pushed
    where ``--push-to-hub`` says, and the overview and summary printed."""
    from ..engine.ray_output import RayOutput
    from ..results.report import REPORT_FILE, write_report

    summary = scored.summary
    _add_provenance(summary, job, args.token)
    if getattr(args, "by", None):
        summary.group_by = args.by
    output = RayOutput(out, job.library_args(args).get("storage_options"))
    output.complete(summary)  # the summary again, now with the provenance
    rows = ", ".join(f"{k}: {len(v):,} rows" for k, v in scored.items() if k != "errors")
    done = [f"saved to {out.rstrip('/')}/ ({rows}; Parquet by split, errors/, summary.json)"]
    page = f"{output.root}/{REPORT_FILE}"
    if "://" not in out:  # on object storage the page is the pushed repo's, or `hf-judge view`'s
        write_report(scored, page, source=out, summary=summary)
        done.append(f"{'report':<15}{page}: open it in a browser (one file, no server)")
    try:
        with datasets_bars_off():
            done += write_result(scored, args, None, job.push_to_hub, source="", kind="scored", summary=summary)
            shown = show_overview(scored, summary, out, job.push_to_hub, terminal=interactive(sys.stdout), parquet=True)
            done = shown + done
    finally:
        sys.stderr.flush()
        print(summary, *done, sep="\n", flush=True)
    return _lost(summary, None)


def _check_vllm_engine(args: argparse.Namespace, job: Job, batch_import: str | None) -> None:
    """The capability table's refusal of a vLLM judge hf-judge starts, for the engine the flags pick, said before
    it starts (the engine's own check sees the server's name only)."""
    if not judge_started(job.client):
        return
    if on_spark(args):
        engine = "spark"
    elif getattr(args, "ray", False) or getattr(args, "ray_address", None):
        engine = "ray"
    elif job.client.get("batch") or batch_import:
        engine = "batch"
    else:
        return
    said = refusal(engine, "vllm_managed")
    if said is not None:
        raise ConfigError(said)


def judge_started(client: dict[str, Any]) -> bool:
    """Whether hf-judge starts the run's judge itself: no API key to look for."""
    model = str(client.get("model") or "")
    return model.startswith("vllm:") and not client.get("base_url")


def _lost(summary, died: str | None) -> int:
    """The exit code of a run that finished: :data:`LOST` where it lost something whole (every request, a panel's
    judge, its local judge), said in its last lines; else 0."""
    lines = [*summary.losses(), *([died] if died else [])]
    for line in lines:
        print(f"hf-judge: lost: {line}", file=sys.stderr, flush=True)
    return LOST if lines else 0


def _died_message(judge, wait: float) -> str | None:
    """How the local judge died and the fix (``transport.local.died_message``); None where it runs (waited for up
    to ``wait`` s: a server's connections close before its exit is seen) or there is none."""
    import subprocess

    from ..transport.local import died_message

    proc = judge.process if judge is not None else None
    if proc is None:
        return None
    try:
        return died_message(proc.wait(timeout=wait), judge.log_path, judge.what)
    except subprocess.TimeoutExpired:
        return None


def _raise_if_died(judge, stopped: RunStopped) -> None:
    """A run stopped because its local judge died: say how it died and how to fix it, not "check the base URL"."""
    died = _died_message(judge, wait=2.0)
    if died is not None:
        from ..transport.local import LocalJudgeDiedError

        raise LocalJudgeDiedError(f"{died}\n(the run stopped: {stopped})") from stopped


def _check_job(job: Job) -> None:
    """A job has metrics and a judge; its Hub repos are valid names (checked before the dataset is loaded)."""
    if not job.metrics:
        raise ConfigError("no metrics: pass --metrics QA_All (see `hf-judge metrics`) or --recipe quality")
    if "model" not in job.client and not job.client.get("models"):
        raise ConfigError("no model: pass --model NAME (the model name your server serves), or --model local")
    if job.push_to_hub:
        check_repo(job.push_to_hub, job.filters is not None)


def _check_group_by(by: str | None, ds) -> None:
    """``--by COLUMN`` names a column of every split, checked before any request (a stream whose columns are
    known only once read: by its first row)."""
    from ..results.groups import check_group_column

    if not by:
        return
    for split, d in ds.items():
        if split == "errors":
            continue
        names = d.column_names
        if names is None:
            names = list(next(iter(d.take(1)), {}))
        check_group_column(names, by, f"split {split!r} (--by)")


def _produced_columns(job: Job, ds) -> list[str]:
    """The columns the run writes (samples and panels add some); a recipe's filters must name score columns."""
    from ..engine.core import score_types
    from ..judging.catalogue import resolve_metrics
    from ..judging.ensemble import Layout
    from ..results.columns import SCORE_TYPES
    from ..settings import resolve_settings

    loaded = resolve_metrics(job.metrics, job.prompts_dir)
    settings = resolve_settings(job.client)
    layout = Layout.from_settings(settings)  # samples and panels add columns
    produced = list(score_types(loaded, layout, settings.logprobs, job.token_columns))
    if job.filters is not None:
        features = [(c, f) for m in loaded for c, f in layout.features(m).items()]
        numeric = [c for c, f in features if getattr(f, "dtype", None) in SCORE_TYPES]
        _check_filters(job, ds, numeric)
    return produced


def _check_filters(job: Job, ds, metric_columns: list[str]) -> None:
    """The recipe's filter columns must be columns this run writes or score columns the data already has."""
    from ..results.columns import score_columns
    from ..results.filter import check_threshold_columns

    names = sorted({*job.filters.min, *job.filters.max})
    for split, d in ds.items():
        if split != "errors":
            have = list(dict.fromkeys([*metric_columns, *score_columns(d)]))
            check_threshold_columns(names, have, f"the recipe's filters (split {split!r})")


def _check_outputs(args: argparse.Namespace, job: Job, ds, produced: list[str], streaming: bool):
    """The folder to save in (and its filtered copy), refused before any request where it holds a different
    result; returns it (None: push only) and the source the result is named by."""
    from ..results.output import check_output, source_of, thresholds
    from ..store.segments import is_url

    assert job.dataset is not None
    out = job.output_dir or (None if job.push_to_hub else default_output_dir(job.dataset))
    if out is not None and is_url(out):
        _check_url_output(args, job, out)
        return None, ""  # the engine writes it (hf_judge.engine.ray_output) and checks what the URL holds
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
            check_output(filtered_name(out), source, "filtered", None, args.overwrite, applied)
    return out, source


def _saved_on_ray(args: argparse.Namespace, job: Job, scored) -> list[str]:
    """An ``--output-dir`` URL that the Ray run wrote: its ``summary.json`` again, now with the provenance."""
    from ..engine.ray_output import RayOutput
    from ..store.segments import is_url

    if not is_url(job.output_dir):
        return []
    assert job.output_dir is not None
    options = job.library_args(args).get("storage_options")
    RayOutput(job.output_dir, options).complete(scored.summary)  # the summary again, now with the provenance
    rows = ", ".join(f"{k}: {len(v):,} rows" for k, v in scored.items() if k != "errors")
    return [f"saved to {job.output_dir.rstrip('/')}/ ({rows}; Parquet by split, errors/, summary.json)"]


def _check_url_output(args: argparse.Namespace, job: Job, out: str) -> None:
    """An ``--output-dir`` URL is written by Ray Data's writer, shard by shard: ``--ray`` only, without filters."""
    engine = "ray" if getattr(args, "ray", False) or getattr(args, "ray_address", None) else "dataset"
    check(engine, None, only=("url_output", "filters"), url_output=True, filters=job.filters is not None, url=out)


def _run_scoring(
    args: argparse.Namespace, job: Job, ds, api_key: str | None, client: dict[str, Any], batch_import: str | None
):
    """The scored dataset: by ``score_dataset`` in this process (or its workers, or a batch), or on Ray."""
    from ..engine.score import score_dataset

    if getattr(args, "ray", False) or getattr(args, "ray_address", None):  # batch import has no --ray
        return _score_on_ray(args, job, ds, api_key, client)
    return score_dataset(
        ds,
        job.metrics,
        token_columns=job.token_columns,
        if_exists="overwrite" if args.overwrite_scores else "keep",
        **{**job.library_args(args, api_key), **_import_settings(client, batch_import)},
    )


def _score_on_ray(args: argparse.Namespace, job: Job, ds: Any, api_key: str | None, client: dict[str, Any]) -> Any:
    """``--ray``: the same result as ``score_dataset``, scored by actors of a Ray cluster (hf_judge.ray)."""
    try:
        from ..engine.ray import score_dataset_on_ray
    except ImportError as e:  # pragma: no cover - the ray extra is missing
        raise ConfigError(f'--ray needs Ray: pip install "hf-judge[ray]" ({e})') from None
    if not os.environ.get("HF_JUDGE_DEBUG"):
        import ray.data  # noqa: F401 - configures Ray Data's loggers, which the next line then turns down

        # Ray Data logs each dataset's plan, start and end, and its progress every few seconds, at INFO on
        # stderr: the run's summary says what they say, and warnings still show
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    from ..store.segments import is_url

    url = job.output_dir if is_url(job.output_dir) else None
    return score_dataset_on_ray(
        ds,
        job.metrics,
        address=args.ray_address,
        output_dir=url,
        output_overwrite=bool(args.overwrite),
        if_exists="overwrite" if args.overwrite_scores else "keep",
        token_columns=job.token_columns,
        **{**job.library_args(args, api_key), **client},
    )


def _import_settings(client: dict[str, Any], batch_import: str | None) -> dict[str, Any]:
    """``score_dataset``'s settings keywords; for ``batch import``, with the output file to read first."""
    if batch_import is None:
        return client
    from ..settings import Settings, validated

    path = Path(batch_import)
    if not path.is_file():
        raise ConfigError(f"no batch output file {path}: give the JSONL the batch runner wrote (-o of vllm run-batch)")
    return {**client, "settings": validated(Settings, {**client, "batch_import": str(path.resolve())}, "settings")}


def _add_provenance(summary, job: Job, token: str | None) -> None:
    """What the card says of where the scores come from: the source dataset, the summary of an input hf-judge
    scored before (its other scores' provenance), and the recipe as it ran (flags override the file)."""
    assert job.dataset is not None
    summary.source_dataset, summary.source_on_hub = _source(job.dataset)
    earlier = _earlier_summary(job, token)
    if earlier is not None:  # metrics added to a scored result: the card keeps how its other scores were made
        summary.include(earlier)
    if job.recipe is not None:
        recipe = job.recipe
        summary.recipe = recipe.name
        ran = type(recipe)(
            **{**recipe.model_dump(exclude={"metrics"}), "metrics": job.metrics, "columns": job.columns, **job.client}
        )
        summary.recipe_yaml = ran.public_yaml()  # as it ran: flags override the file


def _filter_and_write(args: argparse.Namespace, job: Job, scored, summary, out: str | None, source: str) -> list[str]:
    """A recipe's filters over the saved result, written beside it (``<out>-filtered``, ``<repo>-filtered``)."""
    from ..results.filter import filter_by_scores
    from ..results.output import thresholds

    f = job.filters
    good = filter_by_scores(scored, min=f.min, max=f.max, keep_missing=f.keep_missing)
    rule = ", ".join([*(f"{k} >= {v:g}" for k, v in f.min.items()), *(f"{k} <= {v:g}" for k, v in f.max.items())])
    kept = ", ".join(f"{k}: {len(good[k]):,} of {len(v):,} rows" for k, v in scored.items() if k != "errors")
    done = [f"filtered       {kept} pass the recipe's filters ({rule})"]
    filtered = summary.with_filter(
        f.min, f.max, f.keep_missing, summary.rows, {k: len(v) for k, v in good.items() if k != "errors"}
    )
    done += write_result(
        good,
        args,
        out and filtered_name(out),
        job.push_to_hub and filtered_name(job.push_to_hub),
        source=source,
        kind="filtered",
        summary=filtered,
        filters=thresholds(f.min, f.max, f.keep_missing),
    )
    return done


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
        if_exists="overwrite" if args.overwrite_scores else "keep",
        **{**job.library_args(args, api_key), **client},
    )
    print(estimate, flush=True)
    return 0


def _earlier_summary(job: Job, token: str | None):
    """The ``summary.json`` of a scored input (a folder or Hub repo hf-judge wrote), or None."""
    from .inputs import input_summary

    assert job.dataset is not None  # only called from score_job, which has one
    try:
        return input_summary(job.dataset, revision=job.revision, token=token)
    except Exception:  # noqa: BLE001 - no summary (offline, not ours, unreadable) only means no earlier provenance
        return None


def _source(dataset: str) -> tuple[str, bool]:
    """The source dataset for the card: a Hub repo id, or only the name of a local file or folder."""
    path = Path(dataset).expanduser()
    return (path.name, False) if path.exists() else (dataset, True)


def _local_judge(kwargs: dict[str, Any], cache_dir: str | None, port: int | None = None):
    """``--model local[:PATH]``: a context manager that runs a llama.cpp judge (on ``port``, ``--local-port``, where
    given); otherwise one that does nothing."""
    import functools

    from ..transport.local import BUNDLED_MODEL_NAME, check_local, check_port, local_judge, parse_local_model
    from ..transport.vllm import parse_vllm_model

    is_local, model_path = parse_local_model(kwargs.get("model"))
    vllm_model = parse_vllm_model(kwargs.get("model"))
    if vllm_model is not None:
        return _vllm_judge(kwargs, vllm_model, port)
    if not is_local:
        if port is not None:
            raise ConfigError(
                f"--local-port {port} is the port of the judge --model local starts; --model {kwargs.get('model')} "
                "is served at its --base-url: drop --local-port, or use --model local"
            )
        return contextlib.nullcontext()
    if kwargs.get("base_url"):
        raise ConfigError(f"--model {kwargs['model']} starts its own server: drop --base-url {kwargs['base_url']}")
    check_local(model_path)  # before the dataset is loaded
    if port is not None:
        check_port(port)
    # llama.cpp's server answers one request at a time: two in flight keep it busy, more would only wait.
    kwargs.setdefault("concurrency", 2)
    kwargs.setdefault("timeout", 300.0)

    @contextlib.contextmanager
    def run():
        models_dir = Path(cache_dir).expanduser() / "models" if cache_dir else constants.default_cache_dir() / "models"
        started = time.perf_counter()
        say = functools.partial(print, file=sys.stderr, flush=True)
        say(f"hf-judge: starting a local llama.cpp judge ({model_path or BUNDLED_MODEL_NAME})")
        # a judge that dies is reported by score_job (exit code, message), not by a warning as well
        with local_judge(model_path, models_dir=models_dir, warn_if_died=False, port=port) as judge:
            elapsed = time.perf_counter() - started
            say(f"hf-judge: local judge {judge.model} ready at {judge.base_url} in {elapsed:.1f} s (pid {judge.pid})")
            if model_path is None:
                say("hf-judge: Gemma 3 270M shows the mechanics; its scores mean little. Real scores need a real judge")
            yield judge

    return run()


def _vllm_judge(kwargs: dict[str, Any], name: str, port: int | None):
    """``--model vllm:MODEL``: a context manager that runs vLLM's server for the run (checked now: the interpreter
    imports vLLM); with ``--base-url``, the vLLM server already there serves MODEL, and nothing is started."""
    from ..transport.vllm import check_vllm, check_vllm_model
    from ..vllm_args import parse_vllm_args

    if port is not None:
        raise ConfigError(f"--local-port {port} is for --model local; --model vllm:{name} gets a free port itself")
    if kwargs.get("base_url"):
        kwargs["model"] = name
        return contextlib.nullcontext()
    check_vllm(kwargs.get("vllm_python"))  # before the dataset is loaded
    check_vllm_model(name)  # a folder that is not there, before the dataset is loaded (the engine checks a panel's)
    try:
        parse_vllm_args(kwargs.get("vllm_args"))
    except ValueError as e:  # what Settings would say, before the dataset is loaded, as the bad input it is
        raise ConfigError(f"--vllm-arg: {e}") from None
    kwargs.setdefault("timeout", 600.0)
    # the engine starts each vLLM judge for the pass that needs it (a panel's in turn, a cascade's per tier), and
    # none whose replies are all stored (the same command again starts nothing); it says so on stderr
    return contextlib.nullcontext()
