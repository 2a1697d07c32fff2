"""``hf-judge choose-judge``: candidate judges scored on labelled rows, ranked in one table, with a
recommendation (engine/choose.py)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from ..errors import ConfigError
from .agreement import VOTES_HELP
from .options import TOKEN_HELP, add_client_options, add_column_option, add_input_options

CHOOSE_EXAMPLE = """examples:
  hf-judge choose-judge labelled.jsonl --metric Binary --judges gpt-4.1-nano,gpt-4.1-mini,gpt-4.1 --label human
  hf-judge choose-judge pairs.jsonl --metric Comparative --judges a,b --label preferred --column response1=left
  hf-judge choose-judge data.jsonl --metric QA_Correctness,MyCorrectness --prompts-dir my_prompts \\
      --judges a,b --labels labels.jsonl --for me/big-dataset -o choice/     # judge x prompt; the cost of the pick
  hf-judge choose-judge --benchmark judgebench --judges a,b -n 100     # a public labelled set, loaded from the Hub
  hf-judge choose-judge --benchmark judgebench:claude --judges a,b --push-to-hub me/judges   # the table on the Hub
  hf-judge choose-judge --benchmark mt-bench-gpt4 --judges a,b     # GPT-4's recorded verdicts beside them, no request
  hf-judge choose-judge pairs.jsonl --metric Comparative --judges a --label winner --items question_id,model_a,model_b
  hf-judge choose-judge labelled.jsonl --metric Binary --judges-file judges.yaml --label human   # each on its server
  hf-judge choose-judge --benchmark judgebench --judges a,b --by source       # every figure per source too

The table counts ALL labelled rows: a row a judge did not decide counts as not agreeing; coverage and failures
by kind are columns. Verdicts and winners: accuracy and Cohen's kappa; ratings: Spearman and Kendall (on the
rated rows); each with a bootstrap interval. A pairwise metric asked in both orders is scored by JudgeBench's
rule (each order +1 right, -1 wrong, 0 tie or unparsed; a pair is right when the sum is above 0), with the
single-order accuracy and the share of pairs whose orders disagree; coverage and failures count each order.
--rule NAME takes the headline from another paper's rule (llmbar, alpacaeval, mt-bench, rewardbench):
  hf-judge choose-judge pairs.jsonl --metric Comparative --judges a,b --label preferred --rule llmbar
mt-bench compares each judge with each person's vote, alpacaeval with their mode (and a row for the people):
  hf-judge choose-judge pairs.jsonl --metric Comparative --judges a,b --annotators p1,p2,p3 --rule mt-bench
  hf-judge choose-judge pairs.jsonl --metric Comparative --judges a,b --label final --votes p1,p2 --rule alpacaeval
A pairwise judge's P(it prefers the longer response) beside the labels' own rate. Cost per 1,000 rows at list
and batch price (none for a judge that decided no row, or without a price), p50 and p95 latency.
The last row is chance: always answering the majority label (kappa 0; rho 0 for ratings). Recommended: of the
judges whose interval lies above chance, the cheapest whose interval overlaps the best one's; none when no judge
is beyond chance, said so, with about how many labelled rows would settle it. One judge alone gets the same
table (nothing is compared). --by COLUMN: a table per group after it (the figures of a run on that group's rows
alone, the best judge of each group; the recommendation stays overall), in choose_judge.json and the card too.
"""


def add_choose(sub: Any, settings: bool) -> None:
    """The ``choose-judge`` command's parser."""
    p = sub.add_parser(
        "choose-judge",
        help="rank candidate judges on labelled rows: agreement, biases, cost, speed",
        description="Score the labelled rows of DATASET with each candidate judge and rank them in one table.",
        epilog=CHOOSE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", nargs="?", help="Hub repo id, local folder or data file with the labelled rows")
    p.add_argument(
        "--benchmark",
        metavar="NAME",
        help="a public labelled set instead of DATASET (judgebench, judgebench:claude, mt-bench-human, "
        "mt-bench-gpt4, rewardbench, alpacaeval-human, helpsteer2, ...), loaded from the Hub at run time; its paper's "
        "rule and groups are the defaults of --rule and --by",
    )
    p.add_argument(
        "--items",
        metavar="PROMPT,MODEL_A,MODEL_B",
        help="the columns naming a prompt (several joined by +: question_id+turn) and the two models compared: "
        "each judge's intransitive triads (A over B, B over C, C over A), a check that needs no labels",
    )
    p.add_argument(
        "--push-to-hub",
        metavar="REPO",
        help="push the leaderboard (choose_judge.json, the card as README.md, the candidates' folders) to this "
        "Hub dataset repo",
    )
    p.add_argument("--metric", help="the metric judged, or several prompt files of one kind (a,b: judge x prompt)")
    p.add_argument("--judges", metavar="A,B", help="the candidate judges, comma-separated (one or more)")
    p.add_argument(
        "--judges-file",
        metavar="FILE",
        help="YAML list of judges as a recipe's models: [{model, base_url, api_key: env:VAR, provider, name}] "
        "(alone, or added to --judges)",
    )
    given = p.add_mutually_exclusive_group()
    given.add_argument("--label", metavar="COLUMN", help="the column of trusted labels")
    given.add_argument(
        "--labels", metavar="FILE", help="a labels file (split, row, label[, reviewer]) as agreement reads it"
    )
    given.add_argument("--annotators", metavar="A,B,C", help="several people's label columns (the human ceiling)")
    p.add_argument("--votes", metavar="A,B,C", help=VOTES_HELP)
    p.add_argument("--label-threshold", type=float, metavar="T", help="ratings as verdicts: label >= T is positive")
    p.add_argument("--positive", help="the label value counted as positive, for verdicts not true/false, yes/no")
    p.add_argument("--for", dest="for_dataset", metavar="DATASET", help="what scoring it with the pick would cost")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument(
        "--rule",
        metavar="NAME",
        help="the published rule of the headline, for a pairwise metric: judgebench (default; a --benchmark set's "
        "own), llmbar, alpacaeval, mt-bench, rewardbench (choose_judge.json has every rule's figures)",
    )
    p.add_argument(
        "--subset-column",
        metavar="COLUMN",
        help="the column naming each pair's subset: --rule rewardbench per section (RewardBench's weights), "
        "llmbar's Adversarial mean (default for --benchmark rewardbench: subset)",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="every figure per group of this column too (e.g. category, subset, source), with its interval "
        "(default for a --benchmark set: its first group, e.g. JudgeBench's category)",
    )
    add_column_option(p)
    p.add_argument("--prompts-dir", action="append", help="folder of your own prompt files (repeatable)")
    p.add_argument("-o", "--output-dir", help="write choose_judge.json, the card's markdown and the scored rows here")
    p.add_argument("--token", help=TOKEN_HELP)
    add_input_options(p)
    if settings:
        add_client_options(p, settings)
    p.set_defaults(func=cmd_choose)


def cmd_choose(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..analysis import rules
    from ..engine.choose import choose_judge
    from .inputs import load_input
    from .job import resolve_api_key, resolve_job

    if (args.dataset is None) == (args.benchmark is None):
        raise ConfigError("give DATASET or --benchmark NAME (one of them)")
    if getattr(args, "model", None) or getattr(args, "models", None):
        raise ConfigError("choose-judge takes its judges from --judges a,b or --judges-file, not --model / --models")
    cluster = [flag for flag in ("ray", "ray_address", "spark", "spark_master") if getattr(args, flag, None)]
    if cluster:  # a labelled sample is small: one process (or --workers, --batch) scores it
        raise ConfigError(
            f"choose-judge runs in this process (--workers and --batch apply), not with "
            f"--{cluster[0].replace('_', '-')}: choose the judge on the labelled rows here, then score the dataset "
            "with it on the cluster"
        )
    if args.rule:  # a misspelt name before anything is read from the Hub (what it applies to: once the metric is known)
        rules.check_rule(args.rule, "pairwise", True)
    args.metrics = [args.metric] if args.metric else None
    job = resolve_job(args, None, args.dataset)
    judges = _judges(args)
    labelled: dict[str, Any] = {"label": args.label, "labels": args.labels}
    extra: dict[str, Any] = {"items": _items(args.items), "push_to_hub": args.push_to_hub, "token": args.token}
    extra["subset_column"] = args.subset_column
    if args.votes:
        extra["votes"] = [c.strip() for c in args.votes.split(",") if c.strip()]
    if args.annotators:
        labelled["annotators"] = [c.strip() for c in args.annotators.split(",")]
    if args.benchmark:
        data: Any = _benchmark(args, job, labelled, extra)
    else:
        assert job.dataset is not None  # DATASET or --benchmark, checked above
        data = load_input(
            job.dataset, subset=job.subset, splits=job.splits, revision=job.revision, token=args.token, limit=job.limit
        )
    if not job.metrics:
        raise ConfigError("give the metric judged: --metric NAME (or --benchmark NAME, which names its own)")
    target = load_input(args.for_dataset, token=args.token) if args.for_dataset else None
    kwargs = job.library_args(args, resolve_api_key(args, None, job.client.get("base_url")))
    kwargs.pop("model", None)
    kwargs.pop("models", None)
    threshold = labelled.pop("label_threshold", None) or args.label_threshold
    labelled = {k: v for k, v in labelled.items() if v is not None}
    choice = choose_judge(
        data,
        job.metrics,
        judges,
        **labelled,
        label_threshold=threshold,
        positive=args.positive,
        for_dataset=target,
        output_dir=args.output_dir,
        resamples=args.resamples,
        seed=args.seed,
        rule=args.rule,
        **extra,
        by=args.by,
        **kwargs,
    )
    if choice.projection is not None:  # the dataset as the user named it
        choice.projection["dataset"] = args.for_dataset
        if args.output_dir:
            choice.save(Path(args.output_dir))
    if args.output_dir:
        (Path(args.output_dir) / "choose_judge.md").write_text(choice.to_markdown(), encoding="utf-8")
    sys.stderr.flush()
    print(choice, flush=True)
    return 0


def _benchmark(args: argparse.Namespace, job: Any, labelled: dict[str, Any], extra: dict[str, Any]) -> Any:
    """``--benchmark NAME``: the public set's rows, read from the Hub; its columns, metric, labels, recorded judges,
    items, rule and groups filled in where the command line left them (``job``, ``labelled``, ``extra``, ``args``)."""
    from ..analysis.benchmarks import load_benchmark

    with warnings.catch_warnings(record=True) as said:  # a license's warning: one line, not Python's form
        warnings.simplefilter("always")
        bench = load_benchmark(args.benchmark, limit=job.limit, token=args.token, revision=job.revision)
    for w in said:
        if str(w.message) == bench.license_note:
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    job.columns = {**bench.columns, **job.columns}
    job.metrics = job.metrics or [bench.metric]
    if not (args.label or args.labels or args.annotators):
        # several people's labels: their majority is the label (a set's own majority column is the same), and
        # the human ceiling is shown
        labelled.clear()  # the caller's dict, filled in place
        labelled.update({"annotators": list(bench.annotators)} if bench.annotators else {"label": bench.label})
    labelled.setdefault("label_threshold", bench.label_threshold)
    extra["recorded"] = bench.recorded or None
    # the people's votes its rule compares with (experts only), unless --votes names others
    extra["votes"] = extra.get("votes") or list(bench.votes) or None
    extra["subset_column"] = extra.get("subset_column") or bench.subset_column
    # the set's own rule and groups, as its paper reports it (JudgeBench per category, RewardBench per section)
    args.rule = args.rule or bench.rule or None
    args.by = args.by or (bench.groups[0] if bench.groups else None)
    extra["items"] = extra["items"] or bench.items
    for note in bench.notes:
        print(f"note: {note}", file=sys.stderr)
    return bench.dataset


def _items(given: str | None) -> tuple[list[str], str, str] | None:
    """``--items PROMPT,MODEL_A,MODEL_B`` (PROMPT: columns joined by +) as choose_judge's ``items``."""
    if not given:
        return None
    parts = [p.strip() for p in given.split(",")]
    if len(parts) != 3 or not all(parts):
        raise ConfigError(
            f"--items {given!r}: give three columns, PROMPT,MODEL_A,MODEL_B (the prompt's columns joined by +), "
            "e.g. --items question_id+turn,model_a,model_b"
        )
    return [c.strip() for c in parts[0].split("+")], parts[1], parts[2]


def _judges(args: argparse.Namespace) -> list[Any]:
    """The candidates: ``--judges`` (names), then ``--judges-file`` (a YAML list); either alone is enough."""
    from pathlib import Path

    import yaml

    judges: list[Any] = [j.strip() for j in (args.judges or "").split(",") if j.strip()]
    if args.judges_file:
        try:
            listed = yaml.safe_load(Path(args.judges_file).read_text(encoding="utf-8")) or []
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"--judges-file {args.judges_file} cannot be read: {err}") from None
        if not isinstance(listed, list):
            raise ConfigError(
                f"--judges-file {args.judges_file} holds a {type(listed).__name__}, not a list of judges: write "
                "one line per judge, e.g. '- {model: gpt-4.1-nano}' or '- {model: m, base_url: http://...}'"
            )
        judges += listed
    if not judges:
        raise ConfigError(
            "give the candidate judges: --judges a,b (model names), --judges-file FILE (a YAML list, each judge on "
            "its own server), or both"
        )
    return judges
