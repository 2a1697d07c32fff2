"""The CLI's layout (issue 25): one module per command over shared option groups. The sizes of its functions and
modules are checked with every module's, by tests/test_architecture.py."""

from __future__ import annotations

from pathlib import Path

CLI = Path(__file__).resolve().parent.parent / "hf_judge" / "cli"


def test_score_run_and_the_batch_files_share_one_set_of_job_options():
    """score, run, batch export and batch import take the same dataset, scoring and settings options, from one
    builder (options.add_job_options), so a new option reaches all of them."""
    import argparse

    from hf_judge.cli.parser import build_parser, subcommands

    def options(p: argparse.ArgumentParser) -> set[str]:
        return {o for a in p._actions for o in a.option_strings}

    commands = subcommands(build_parser())
    score, run = options(commands["score"]), options(commands["run"])
    batch = subcommands(commands["batch"])
    export, import_ = options(batch["export"]), options(batch["import"])
    shared = export - {"--output"}
    assert "--concurrency" in shared and "--metrics" in shared and "--split" in shared
    assert shared <= score and shared <= run and shared <= import_
    assert score - run == {"--example", "--recipe"} and run - score == {"--dataset"}
    saved = {"--output-dir", "--push-to-hub", "--private", "--agreement", "--token", "--overwrite", "--by"}
    assert import_ == shared | saved


def test_score_help_groups_its_options_by_task_each_group_naming_its_docs_page():
    """`hf-judge score --help` lists its options in the groups the docs' how-to guides follow, the options most
    runs need first; every option (and every Settings field's flag) has its group, and each group's help names
    pages of the site's nav (issue 37)."""
    import re

    from hf_judge.cli.parser import build_parser, subcommands
    from hf_judge.settings import public_fields

    commands = subcommands(build_parser())
    score = commands["score"]
    groups = {g.title: g for g in score._action_groups if g._group_actions}
    assert list(groups) == [
        "options",  # -h alone
        "input and columns",
        "the judge and its server",
        "samples, panels and logprobs",
        "the cascade",
        "bias checks",
        "cost and budget",
        "engines",
        "cache",
        "output and Hub",
    ]
    flags = {
        t: [a.option_strings[-1] if a.option_strings else a.dest for a in g._group_actions] for t, g in groups.items()
    }
    assert flags["options"] == ["--help"]
    assert flags["input and columns"][:4] == ["dataset", "--example", "--metrics", "--column"]
    assert flags["the judge and its server"][:3] == ["--model", "--base-url", "--api-key-env"]
    assert {"--samples", "--models", "--logprobs"} <= set(flags["samples, panels and logprobs"])
    assert all(f.startswith("--escalate-") for f in flags["the cascade"]) and len(flags["the cascade"]) == 8
    assert {"--dry-run", "--max-cost", "--prices", "--max-total-tokens"} <= set(flags["cost and budget"])
    assert {"--workers", "--batch", "--no-wait", "--ray", "--ray-address", "--streaming"} <= set(flags["engines"])
    assert {"--cache-dir", "--no-cache", "--reuse"} <= set(flags["cache"])
    assert flags["output and Hub"][:2] == ["--output-dir", "--push-to-hub"] and "--by" in flags["output and Hub"]
    grouped = {a.dest for t, g in groups.items() if t != "options" for a in g._group_actions}
    assert set(public_fields()) <= grouped  # every setting's flag has its group
    # each group's help ends with the docs pages of its task, pages of the site's nav
    nav = set(re.findall(r":\s+(\S+\.md)\s*$", (CLI.parent.parent / "mkdocs.yml").read_text(), re.M))
    for title, g in groups.items():
        if title == "options":
            continue
        assert g.description and g.description.splitlines()[-1].startswith("docs: "), title
        pages = g.description.splitlines()[-1].removeprefix("docs: ").split(", ")
        assert pages and all(p.startswith("docs/") and p.removeprefix("docs/") in nav for p in pages), (title, pages)
    # run has the same groups, its own options first in "input and columns"
    run = {g.title: g._group_actions for g in commands["run"]._action_groups if g._group_actions}
    assert list(run) == list(groups) and [a.dest for a in run["input and columns"][:2]] == ["file", "dataset"]
