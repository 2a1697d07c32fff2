"""``hf-judge agreement``: a judge's score column against labels (or another judge's column): a table, JSON and
pictures."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .options import REVISION_HELP, SUBSET_HELP, TOKEN_HELP, score_from_labels

AGREEMENT_EXAMPLE = """examples:
  hf-judge agreement labelled-judged/ --score QA_Correctness --label human_score --out report.json
  hf-judge agreement me/pairs-judged --score Comparative --label preferred --plots plots/
  hf-judge agreement out/ --score QA_Correctness__judge_a --label QA_Correctness__judge_b   # judge vs judge
  hf-judge agreement out/ --score QA_Clarity --labels labels.jsonl   # labels written apart (sample-for-review)
  hf-judge agreement out/ --score QA_Correctness --labels ok.jsonl --score-threshold 8   # 1-10 vs true/false
  hf-judge agreement choice/judge_a --score Comparative --label __label__ --rule llmbar   # choose-judge --rule's
  hf-judge agreement choice/judge_a --score Comparative --label __label__ --rule mt-bench --votes expert_1,expert_2
  hf-judge agreement out/ --score QA_Correctness --label human_score --by source   # every figure per source too

Numeric scores: Spearman, Kendall, Pearson, MAE, quadratic kappa, confusion matrix, calibration;
verdicts: accuracy, precision, recall, F1, kappa; pairwise: agreement, tie and position-bias rates.
Verdicts and winners over ALL labelled rows too: a row the judge failed on (a null score, an errors-split row)
counts as not agreeing; with its coverage (share decided) and failures by error kind.
Length bias (the judge's and the labels'), and with --generator-column the judge's error on its own family's rows.
"""

VOTES_HELP = (
    "columns of each pair's people's votes, which --rule mt-bench (each vote) and alpacaeval (their mode) compare "
    "with, and the people's own figure (choose-judge's; mt-bench-human: expert_1,expert_2,...)"
)

SUBSETS_HELP = "the column naming each pair's subset: --rule rewardbench per section, llmbar's Adversarial mean"


def add_agreement(sub: Any, settings: bool) -> None:  # noqa: ARG001 - agreement sends no request
    """The ``agreement`` command's parser."""
    p = sub.add_parser(
        "agreement",
        help="check a judge's scores against labels (or another judge)",
        description="Compare a score column of DATASET with a label column: a table, JSON and pictures.",
        epilog=AGREEMENT_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", help="Hub repo id, local folder, or data file holding both columns")
    p.add_argument(
        "--score",
        help="the judge's column (a pairwise metric's name reads <name>_winner, Comparative__judge_a a panel judge's; "
        "default with --labels: the score the file's rows name)",
    )
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--label", help="the column of trusted labels, or a second judge's column")
    given.add_argument(
        "--labels",
        metavar="FILE",
        help="a labels file (JSONL or CSV: split, row, label), joined with the result by (split, row), or labels on "
        "the Hub: a dataset id (sample-for-review --push-to-hub, labels filled in) or hf://datasets/OWNER/NAME/FILE",
    )
    p.add_argument("--split", help="the split to compare (needed when the dataset has several)")
    p.add_argument("--subset", help=SUBSET_HELP)
    p.add_argument("--revision", help=REVISION_HELP)
    p.add_argument("--token", help=TOKEN_HELP)
    p.add_argument("--kind", choices=["numeric", "binary", "pairwise"], help="default: from the columns' types")
    p.add_argument("--positive", help="the label value counted as positive, for verdicts not true/false, 1/0, yes/no")
    p.add_argument(
        "--label-threshold",
        type=float,
        metavar="T",
        help="numeric labels (e.g. 1-5 ratings) as verdicts: label >= T is positive (a Binary judge against them)",
    )
    p.add_argument(
        "--score-threshold",
        type=float,
        metavar="T",
        help="the judge's numeric score as verdicts: score >= T is positive (a 1-10 score against true/false labels)",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="every figure per group of this column too (a category, subset or source): each group's figures are "
        "those of its rows alone, with their intervals (in --out's JSON: groups)",
    )
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples, 0: none (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed: same seed, same intervals (default 0)")
    p.add_argument("--confidence", type=float, default=0.95, help="the intervals' confidence level (default 0.95)")
    p.add_argument(
        "--rule",
        metavar="NAME",
        help="a published rule of a pairwise judge: judgebench, llmbar, alpacaeval, mt-bench, rewardbench (on a "
        "choose-judge candidate's folder: choose-judge --rule NAME's figure)",
    )
    p.add_argument("--votes", metavar="A,B,C", help=VOTES_HELP)
    p.add_argument("--subset-column", metavar="COLUMN", help=SUBSETS_HELP)
    p.add_argument(
        "--out", metavar="FILE", help="save the report as JSON here (pictures beside it with the plots extra)"
    )
    p.add_argument("--plots", metavar="DIR", help='save the PNG pictures here (needs pip install "hf-judge[plots]")')
    p.add_argument(
        "--length-of",
        metavar="COL",
        action="append",
        help="the column of the text the judge scored (a pairwise judge: give both responses' columns), for the "
        "length bias of the judge and of the labels (default: from the result's summary.json, where there is one)",
    )
    p.add_argument(
        "--generator-column",
        metavar="COL",
        help="the column naming the model that wrote each text: the judge's error on its own family's rows vs the rest",
    )
    p.add_argument(
        "--judge-model",
        metavar="NAME",
        help="the judge's model, for its family and for counting length in its tokens (tiktoken), as the run's "
        "length bias does (default: the summary's)",
    )
    p.set_defaults(func=cmd_agreement)


def cmd_agreement(args: argparse.Namespace) -> int:
    """hf-judge agreement DATASET --score COL --label COL [--out report.json] [--plots DIR]."""
    from ..analysis.agreement import agreement
    from ..results import plots
    from .inputs import input_summary, load_input

    if args.plots:
        plots.require()  # before the work: the user asked for pictures
    score_from_labels(args)
    ds = load_input(
        args.dataset,
        subset=args.subset,
        splits=[args.split] if args.split else None,
        revision=args.revision,
        token=args.token,
    )
    label, reviewers, split, rows = args.label, None, args.split, None
    errors = ds.get("errors")  # its rows count as not agreeing, over all labelled rows
    if args.labels:
        ds, label, reviewers, split, rows = _labelled(ds, args)
    length_of, judge_model = args.length_of, args.judge_model
    # the judge's model: its family, and its tokenizer, which measures length as the run's length bias did
    if length_of is None or judge_model is None:
        summary = input_summary(args.dataset, revision=args.revision, token=args.token)
        if summary is not None:
            length_of = length_of or judged_columns(summary, args.score)
            judge_model = judge_model or summary.model or None
    report = agreement(
        ds,
        args.score,
        label,
        split=split,
        kind=args.kind,
        positive=args.positive,
        resamples=args.resamples,
        seed=args.seed,
        confidence=args.confidence,
        length_of=length_of,
        generator_column=args.generator_column,
        judge_model=judge_model,
        label_threshold=args.label_threshold,
        score_threshold=args.score_threshold,
        errors=errors,
        rule=args.rule,
        rows=rows,
        by=args.by,
        votes=[c.strip() for c in args.votes.split(",") if c.strip()] if args.votes else None,
        subset_column=args.subset_column,
    )
    if reviewers is not None:
        report.figures.update(reviewers)
    print(report)
    done = _save_report(args, report)
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


def _labelled(ds, args: argparse.Namespace):
    """The labelled rows of the result with the labels file's labels as a column (named after the file), their
    row indices in the result, and Krippendorff's alpha among the file's reviewers when several labelled the
    same rows."""
    from ..analysis.alpha import krippendorff_alpha
    from ..analysis.labels import join_labels, label_source_name, labelled_split, read_labels

    records = read_labels(args.labels, token=args.token)
    if args.split:
        records = [r for r in records if r["split"] == args.split]
    first = next(iter(ds.values()))
    base, sep, judge = args.score.partition("__")
    winner = f"{base}_winner{sep}{judge}"  # a pairwise metric's name reads its winner column, as agreement does
    column = winner if args.score not in first.column_names and winner in first.column_names else args.score
    joined = join_labels(ds, records, base if column == winner else args.score, column)
    name = label_source_name(args.labels)
    d = labelled_split(ds, joined, name)
    split = joined.keys[0][0]
    rows = [r for _, r in joined.keys]
    reviewers = joined.reviewers
    if len(reviewers) < 2:
        return d, name, None, split, rows
    ratings = [[joined.raters.get(k, {}).get(r) for k in joined.keys] for r in reviewers]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in joined.labels)
    level = "interval" if numeric else "nominal"
    figures = {f"reviewers_alpha_{level}": krippendorff_alpha(ratings, level)}
    given = [v for by in joined.raters.values() for v in by.values()]
    if numeric and all(isinstance(v, int) and not isinstance(v, bool) for v in given):
        # ratings on a scale (1-5): ordinal alpha counts a 1-vs-2 disagreement as less than 1-vs-5 by rank alone
        figures["reviewers_alpha_ordinal"] = krippendorff_alpha(ratings, "ordinal")
    return d, name, figures, split, rows


def _save_report(args: argparse.Namespace, report) -> list[str]:
    """The report's JSON (``--out``) and pictures (``--plots``, or beside the JSON with the plots extra), else
    the distributions as text; returns the lines that say where they went."""
    from ..results import plots
    from ..results.card import text_histogram

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
    return done


def judged_columns(summary: Any, score: str) -> list[str] | None:
    """The dataset columns whose text the metric behind ``score`` judged, from a result's summary (its prompts
    and column mapping): the responses of a pairwise metric, the judged text of a score; None if not found.

    Example:
        >>> judged_columns(RunSummary.load("out/"), "QA_Clarity")  # doctest: +SKIP
        ['answer']
    """
    from ..judging.ensemble import JUDGE_SEP
    from ..judging.metrics import MetricKind, parse_jinja_file, parse_seed_file
    from ..results.bias import judged_variables, pair_variables

    base = score.partition(JUDGE_SEP)[0]
    mapping = summary.column_mapping
    for name, p in summary.prompts.items():
        if not p.get("text"):
            continue
        parse = parse_seed_file if str(p.get("file", "")).endswith(".txt") else parse_jinja_file
        try:
            metric = parse(name, Path(p.get("file") or name), p["text"], dict(p.get("params") or {}))
        except Exception:  # noqa: BLE001 - a prompt this version cannot read: no default, as without a summary
            continue
        if metric.kind == MetricKind.PAIRWISE and base in (name, f"{name}_winner"):
            pair = pair_variables(metric)
            return [mapping.get(v, v) for v in pair] if pair else None
        if base in metric.columns or any(base.startswith(f"{c}_") for c in metric.columns):
            # two variables may read one column (Binary: prediction=answer beside answer): its length once
            return list(dict.fromkeys(mapping.get(v, v) for v in judged_variables(metric))) or None
    return None
