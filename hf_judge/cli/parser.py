"""The ``hf-judge`` parser: one subparser per command, each built by its command's module from the shared
option groups (options.py).

Example:
    >>> args = build_parser({"score"}).parse_args(["score", "data.jsonl", "--metrics", "QA_All", "-m", "judge"])
    >>> args.command, args.metrics, args.model
    ('score', ['QA_All'], 'judge')
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from .. import constants
from .agreement import add_agreement
from .batch import add_batch
from .cache import add_cache
from .calibrate import add_calibrate
from .choose import add_choose
from .filter import add_filter
from .listing import add_metrics, add_recipes
from .merge import add_merge
from .review import add_review
from .score import add_run, add_score
from .view import add_show_prompt, add_view

# the commands in the order `hf-judge --help` lists them; each adds its parser to the subparsers
COMMANDS = {
    "score": add_score,
    "filter": add_filter,
    "metrics": add_metrics,
    "recipes": add_recipes,
    "run": add_run,
    "batch": add_batch,
    "agreement": add_agreement,
    "choose-judge": add_choose,
    "merge": add_merge,
    "calibrate": add_calibrate,
    "sample-for-review": add_review,
    "view": add_view,
    "show-prompt": add_show_prompt,
    "cache": add_cache,
}


class Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line as every other error of hf-judge's (not the 30 lines of a
    command's usage before them); subcommands' parsers are of this class too (``add_subparsers``' default)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser(commands: set[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``commands``, the server options (built from :class:`hf_judge.Settings`,
    which imports pydantic: ~0.1 s) only for those, so `--help`, `metrics` and `recipes` start fast."""
    parser = Parser(prog="hf-judge", description="Score Hugging Face datasets with LLM-as-judge metrics.")
    parser.add_argument("--version", action="version", version=f"hf-judge {constants.VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add in COMMANDS.items():
        add(sub, commands is None or name in commands)
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each command, by name (argparse has no public getter)."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(sub.choices) if sub else {}
