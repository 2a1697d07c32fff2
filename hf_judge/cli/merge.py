"""``hf-judge merge``: a seed-004 ``<name>_scored.jsonl`` merged into the original data file by id."""

from __future__ import annotations

import argparse
from typing import Any

MERGE_EXAMPLE = """example:
  hf-judge merge --scores output/data_scored.jsonl --data data.jsonl --output data_with_scores.jsonl
"""


def add_merge(sub: Any, settings: bool) -> None:  # noqa: ARG001 - merge sends no request
    """The ``merge`` command's parser."""
    p = sub.add_parser(
        "merge",
        help="merge a seed-style scores file into the data file by id",
        description="Merge a seed-004 <name>_scored.jsonl into the original data file, matching rows by id.",
        epilog=MERGE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scores", required=True, help="the <name>_scored.jsonl file")
    p.add_argument("--data", required=True, help="the original JSONL data file")
    p.add_argument("--output", required=True, help="where to write the merged JSONL")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    """hf-judge merge --scores F --data F --output F."""
    from .seed import merge_scores

    report = merge_scores(args.scores, args.data, args.output)
    print(", ".join(f"{k}: {v}" for k, v in report.items() if not isinstance(v, list)))
    return 0
