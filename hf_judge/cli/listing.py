"""``hf-judge metrics`` and ``hf-judge recipes``: what there is to score with. Both answer without importing
datasets (tests/test_startup.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError


def add_metrics(sub: Any, settings: bool) -> None:  # noqa: ARG001 - a listing sends no request
    """The ``metrics`` command's parser."""
    p = sub.add_parser(
        "metrics",
        help="list the metrics",
        description="List the built-in metrics, those of installed metric packs (entry points of group "
        "hf_judge.metrics), and yours with --prompts-dir, with where each comes from.",
        epilog="example:\n  hf-judge metrics --prompts-dir my_prompts/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--prompts-dir", action="append", help="also list the prompt files in this folder (repeatable)")
    p.set_defaults(func=cmd_metrics)


def add_recipes(sub: Any, settings: bool) -> None:  # noqa: ARG001 - a listing sends no request
    """The ``recipes`` command's parser."""
    p = sub.add_parser(
        "recipes",
        help="list the built-in recipes",
        description="List the built-in recipes: when to use each and its cost in calls per row.",
        epilog="example:\n  hf-judge recipes\n  hf-judge run quality --dataset data.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=cmd_recipes)


def cmd_metrics(args: argparse.Namespace) -> int:
    """hf-judge metrics: name, mode, variables, default temperature, where it comes from, outputs."""
    from ..judging.catalogue import listed_metrics

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
