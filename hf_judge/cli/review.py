"""``hf-judge sample-for-review``: the rows of a scored result worth a person's label, written in the labels
layout with an empty label (JSONL or CSV, or a Hub dataset)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import OutputExistsError
from ..progress import LIBRARY_CHATTER, quiet
from .calibrate import add_source_options, load_result
from .options import positive_int

STRATEGIES = ("uncertainty", "disagreement", "threshold", "stratified", "random")
REVIEW_EXAMPLE = """examples:
  hf-judge sample-for-review out/ --score QA_Correctness --n 200 --by uncertainty -o to-label.jsonl
  hf-judge sample-for-review out/ --score QA_Correctness --n 100 --by threshold --threshold 7 -o near-7.csv
  hf-judge sample-for-review out/ --score QA_Correctness --n 200 --by disagreement --push-to-hub me/to-label

Fill in each row's "label" (a number, true/false, or A/B/tie; "reviewer" and "note" optional), then
hf-judge calibrate out/ --score QA_Correctness --labels to-label.jsonl
"""


def add_review(sub: Any, settings: bool) -> None:  # noqa: ARG001 - sends no request
    """The ``sample-for-review`` command's parser."""
    p = sub.add_parser(
        "sample-for-review",
        help="pick the rows worth labelling (labels layout, label empty)",
        description="Write the N rows of a scored result most worth a person's label, in the labels layout "
        "(split, row, score, label: null) with the row's text and the judge's score and reason.",
        epilog=REVIEW_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(p)
    p.add_argument("--score", help="the score column to review (needed when the result has several)")
    p.add_argument("--n", type=positive_int, default=200, help="how many rows (default 200)")
    p.add_argument(
        "--by",
        choices=STRATEGIES,  # analysis.review.STRATEGIES (not imported: numpy and datasets would slow --help)
        default="uncertainty",
        help="uncertainty: lowest _confidence (else nearest the middle of the scale); disagreement: a panel's or "
        "samples' spread; threshold: nearest --threshold; stratified: equal counts per score; random",
    )
    p.add_argument("--threshold", type=float, help="the cut --by threshold samples around")
    p.add_argument("--seed", type=int, default=0, help="the seed of ties and random picks (default 0)")
    p.add_argument("--context", action="append", metavar="COLUMN", help="a column to show (repeatable; default: text)")
    p.add_argument("-o", "--out", metavar="FILE", help="FILE.jsonl or FILE.csv (default: <name>-review.jsonl here)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE (it may hold labels already written)")
    p.add_argument("--push-to-hub", metavar="REPO", help="also push the rows as a Hub dataset")
    p.set_defaults(func=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    """hf-judge sample-for-review RESULT --n 200 --by uncertainty [-o FILE]."""
    from ..analysis.labels import write_labels
    from ..analysis.review import sample_for_review
    from ..results.hub import check_repo_id

    if args.push_to_hub:
        check_repo_id(args.push_to_hub, "--push-to-hub")
    name = Path(args.dataset.rstrip("/\\")).name.removesuffix(".jsonl") or "result"
    out = Path(args.out) if args.out else Path(f"{name}-review.jsonl")
    if out.exists() and not args.overwrite:  # a labels file being filled in is hours of someone's work
        raise OutputExistsError(f"{out} exists (labels in progress?): choose another -o FILE, or pass --overwrite")
    rows = sample_for_review(
        load_result(args),
        args.n,
        by=args.by,
        score=args.score,
        split=args.split,
        threshold=args.threshold,
        seed=args.seed,
        context=args.context,
    )
    write_labels(rows, out)
    print(f"{len(rows):,} rows to label (--by {args.by}) saved to {out}")
    if len(rows) < args.n:
        print(f"(the result has only {len(rows):,} rows with a {rows[0]['score'] if rows else 'score'} to pick from)")
    if args.push_to_hub:
        from datasets import Dataset

        with quiet(*LIBRARY_CHATTER):
            Dataset.from_list(rows).push_to_hub(args.push_to_hub, token=args.token)
        print(f"pushed to {args.push_to_hub}")
    return 0
