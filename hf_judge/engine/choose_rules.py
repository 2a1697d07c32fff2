"""The published rules' figures of each choose-judge candidate (:mod:`hf_judge.analysis.rules`), with what the rules
read beside the labels: each pair's people's votes (``votes=``: alpacaeval's mode, mt-bench's each vote, and the
people's own figure under those) and its subset (``subsets=``: rewardbench's sections, llmbar's Adversarial mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from ..analysis import rules
from ..analysis.label_rules import check_labels
from ..analysis.leaderboard import JudgeChoice
from ..errors import ConfigError
from ..tables import arrow_table


def by_rules(
    choice: JudgeChoice,
    scored: Dataset,
    swapped: bool,
    truth: list[Any],
    rule: str | None,
    resamples: int,
    seed: int,
    people: list[list[Any]] | None = None,
    subsets: list[str] | None = None,
) -> None:
    """A pairwise judge's figures by every published rule that applies (``entry["rules"]``; ``people``: each pair's
    votes, which alpacaeval and mt-bench compare with, and the people's own figure under those, ``choice.humans``;
    ``subsets``: each pair's, which rewardbench weighs into sections and llmbar's Adversarial mean reads),
    and, with ``rule``, that rule's as the table's headline (:mod:`hf_judge.analysis.rules`)."""
    if choice.kind != "pairwise":
        return
    n = len(truth)
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed}
    if people is not None:
        choice.humans = {name: rules.humans(people, name, **kw) for name in ("alpacaeval", "mt-bench")}
    for e in choice.entries:
        winners = arrow_table(scored).column(e["column"]).to_pylist()[: 2 * n if swapped else n]
        e["rules"] = rules.of_winners(winners, truth, swapped, people, subsets=subsets, **kw)
        if rule is not None:
            e.update(rules.headline(e["rules"], rule))
    if rule is not None:
        choice.rule, choice.headline = rule, rule
        _chance_by(choice, rule, n, swapped, truth, people, subsets)


def _chance_by(
    choice: JudgeChoice,
    rule: str,
    n: int,
    swapped: bool,
    truth: list[Any],
    people: list[list[Any]] | None,
    subsets: list[str] | None,
) -> None:
    """The chance row under ``rule``: the figure of a judge that always names the majority label's response (in
    both orders alike), by the rule that scores the judges (under mt-bench, against each vote; rewardbench, per
    section), so that "beyond chance" compares like with like."""
    label = (choice.chance or {}).get("label")
    if choice.chance is None or label is None or not n:
        return
    const = [label] * n
    found = rules.figures(const, const if swapped else None, truth, votes=people, subsets=subsets, resamples=0)
    if rule in found and found[rule].get("score") is not None:
        choice.chance = {**choice.chance, "score": found[rule]["score"], "rule": rule}


def check_votes(
    ds: Dataset, votes: Sequence[str] | None, annotators: Sequence[str] | None, kind: str
) -> list[str] | None:
    """The columns of each pair's people's votes that the alpacaeval and mt-bench rules compare with (``votes``;
    default: the ``annotators`` columns, a pairwise metric's), each column and value checked before any request;
    None where there are none (the rules compare with each pair's label).

    Example:
        >>> from datasets import Dataset
        >>> check_votes(Dataset.from_dict({"a": ["1", None], "b": ["tie", "2"]}), None, ["a", "b"], "pairwise")
        ['a', 'b']
    """
    if votes is None:
        given = [c for c in annotators or () if c in ds.column_names]
        return given if kind == "pairwise" and given else None
    columns = list(votes)
    if kind != "pairwise":
        raise ConfigError(
            f"votes= are people's votes on pairs, which the pairwise rules compare with; this metric is {kind}"
        )
    for c in columns:
        if c not in ds.column_names:
            raise ConfigError(f"votes: no column {c!r} of people's votes; the data has: {', '.join(ds.column_names)}")
        check_labels(list(ds[c]), kind, subject=f"the vote column {c!r}")
    return columns or None


def people_of(ds: Dataset, columns: Sequence[str] | None) -> list[list[Any]] | None:
    """Each row's votes in ``columns`` (checked by :func:`check_votes`), read as the labels are ("1", "2", "tie";
    None: that person did not vote on the row)."""
    return rules.people(ds, columns)


def subsets_of(ds: Dataset, column: str | None) -> list[str] | None:
    """Each row's subset (``column``: its name, as rewardbench weighs subsets into sections and llmbar takes its
    Adversarial mean), checked before any request (:func:`hf_judge.analysis.rules.subsets_in`).

    Example:
        >>> from datasets import Dataset
        >>> subsets_of(Dataset.from_dict({"subset": ["math-prm", "hep-go"]}), "subset")
        ['math-prm', 'hep-go']
    """
    return rules.subsets_in(ds, column)
