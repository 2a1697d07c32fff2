"""What ``choose_judge`` shows beside the candidates at no cost: a judge's recorded verdicts (``recorded=``: a column
of the labelled rows, as ``mt-bench-gpt4`` holds GPT-4's; ranked on the same rows by the same rule, no request
sent), and the check that needs no labels, transitivity (``items=``: the columns that name a prompt and the two
models compared; :func:`hf_judge.analysis.transitivity.transitivity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datasets import Dataset

from ..analysis import rules
from ..analysis.label_rules import check_labels
from ..analysis.leaderboard import JudgeChoice, combined_winner, flip
from ..analysis.stats import headline_figures, over_all_rows
from ..analysis.transitivity import transitivity
from ..errors import ConfigError

Items = tuple[str | Sequence[str], str, str]


def check_recorded(ds: Dataset, recorded: Mapping[str, str] | None, kind: str, label_column: str) -> dict[str, list]:
    """Each recorded judge's verdicts (name -> values as the labels read: "1"/"2"/"tie" or True/False; None
    undecided), every column and value checked before any request.

    Example:
        >>> from datasets import Dataset
        >>> check_recorded(Dataset.from_dict({"gpt4": ["1", "tie", None]}), {"gpt-4": "gpt4"}, "pairwise", "label")
        {'gpt-4': ['1', 'tie', None]}
    """
    out: dict[str, list] = {}
    for name, column in (recorded or {}).items():
        if column not in ds.column_names or column == label_column:
            raise ConfigError(
                f"recorded judge {name!r}: no column {column!r} of its verdicts beside the labels; the data has: "
                f"{', '.join(c for c in ds.column_names if c != label_column)}"
            )
        if kind == "numeric":
            raise ConfigError(f"recorded judge {name!r}: recorded verdicts are winners or verdicts, not ratings")
        out[name] = check_labels(list(ds[column]), kind, subject=f"the recorded judge {name!r}'s column {column!r}")
    return out


def check_items(ds: Dataset, items: Items | None) -> tuple[list[str], str, str] | None:
    """``items`` as columns of ``ds`` (the prompt's columns, model_a's, model_b's), checked before any request."""
    if items is None:
        return None
    if len(items) != 3:
        raise ConfigError(
            f"items must be (the prompt's column or columns, model_a's column, model_b's column), got {items!r}: "
            "e.g. items=(['question_id', 'turn'], 'model_a', 'model_b'), --items question_id+turn,model_a,model_b"
        )
    prompt, a, b = items
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    missing = [c for c in (*prompts, a, b) if c not in ds.column_names]
    if missing:
        raise ConfigError(f"items: no column {missing[0]!r}; the data has: {', '.join(ds.column_names)}")
    return prompts, a, b


def add_recorded(
    choice: JudgeChoice,
    verdicts: Mapping[str, list],
    truth: Sequence[Any],
    resamples: int,
    seed: int,
    by: tuple[str | None, Any, Any] = (None, None, None),
) -> None:
    """An entry per recorded judge, its figures on the same rows by the all-rows rule, no cost, no latency. A
    pairwise one also gets every published rule's figures, and with ``by``'s rule (``(rule, people's votes,
    subsets)``, as the candidates') that rule's headline, its one verdict per pair read as both orders' (a
    recorded verdict is the judge's final one: MT-bench's GPT-4 pair verdicts already count orders that disagree
    as a tie), so that it is compared as the candidates are (under mt-bench, with each expert's vote)."""
    rule, people, subsets = by
    for name, pred in verdicts.items():
        found = over_all_rows(truth, pred, choice.kind, resamples=resamples, seed=seed)
        entry: dict[str, Any] = {
            "name": name,
            "judge": name,
            "model": None,
            "metric": choice.metric,
            "column": None,
            "rule": choice.rule,
            "recorded": True,
            **headline_figures(found),
            "cost_per_1000": None,
            "cost_per_1000_batch": None,
            "cost_basis": "recorded",
            "latency_p50_s": None,
            "latency_p95_s": None,
        }
        if choice.kind == "pairwise":
            entry["rules"] = rules.figures(
                pred, pred, truth, votes=people, subsets=subsets, resamples=resamples, seed=seed
            )
            if rule is not None:
                entry.update(rules.headline(entry["rules"], rule))
        choice.entries.append(entry)
    if verdicts:
        choice.notes.append(
            f"{', '.join(verdicts)}: recorded verdicts of the set, shown for comparison (no request, no cost; not "
            "recommended: it is not a judge this run can call)"
        )


def add_transitivity(
    choice: JudgeChoice,
    ds: Dataset,
    scored: Dataset,
    items: tuple[list[str], str, str],
    swapped: bool,
    recorded: Mapping[str, list],
) -> None:
    """Each pairwise entry's intransitive triads on the rows' items (``entry["transitivity"]``): a candidate's
    winner per pair from its orders combined (:func:`~hf_judge.analysis.leaderboard.combined_winner`)."""
    if choice.kind != "pairwise":
        return
    prompts, a, b = items
    n = len(ds)
    keys = list(zip(*(ds[c] for c in prompts), strict=True))
    for e in choice.entries:
        if e.get("recorded"):
            winners = list(recorded[e["name"]])
        elif swapped:
            both = scored[e["column"]][: 2 * n]
            winners = [combined_winner(x, flip(y)) for x, y in zip(both[:n], both[n:], strict=True)]
        else:
            winners = scored[e["column"]][:n]
        e["transitivity"] = transitivity(keys, ds[a], ds[b], winners)
