"""``choose_judge(..., by=COLUMN)``: the table's figures per group of the labelled rows (JudgeBench's categories,
a user's subset or source column), each group's figures those of ``choose_judge`` run on that group's rows alone.

A group's rows are cut out of the one run's result (its rows, both orders of a pair, and its error rows, their
``row`` renumbered as the group's own), and ranked by the same function as the whole table: the same figures,
intervals (the same seed over the group's rows in their order) and chance level as a run on the filtered rows.
Cost and latency stay the table's (a judge's price per row does not depend on the group); the recommendation
stays overall, and each group names its best judge (:func:`~hf_judge.analysis.leaderboard.recommend`'s best).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from datasets import Dataset
from datasets.fingerprint import generate_random_fingerprint

from ..analysis.by_group import check_by, group_rows
from ..analysis.leaderboard import JudgeChoice, recommend
from ..results.errors_split import ERRORS_SPLIT
from ..results.scored import ScoredDatasetDict
from ..tables import arrow_table, rows_renumbered

# the figures of an entry that are the group's own; the rest (cost, latency, the run's length bias) the table's
FIGURES = (
    "score", "interval", "kappa", "kappa_interval", "kendall", "rated_rows", "coverage", "failures",
    "pair_coverage", "judgebench", "longer_wins", "self_preference",
)  # fmt: skip
Rank = Callable[[ScoredDatasetDict, Dataset, list[Any]], JudgeChoice]


def by_group(result: ScoredDatasetDict, ds: Dataset, by: str, swapped: bool, truth: list[Any], rank: Rank) -> dict:
    """``{"by", "groups": [{"name", "rows", "chance", "label_longer_wins", "best", "fit", "entries"}], "more",
    "more_rows"}``: ``rank(sub_result, sub_ds, sub_truth)`` (choose_judge's ranking) on each group's rows; each
    entry names its judge, its candidate (``name``) and its group."""
    found = group_rows(ds, by, "the labelled rows")
    out: dict[str, Any] = {"by": by, "groups": [], "more": found.more, "more_rows": found.more_rows}
    tables = (arrow_table(result["train"]), arrow_table(ds))  # read once, taken per group
    for name, rows in found.groups:
        sub = _sub_result(result, tables[0], rows, len(ds), swapped)
        choice = rank(sub, _taken(ds, tables[1], rows), [truth[i] for i in rows])
        picked = recommend(choice.entries, choice.chance, choice.rows) or {}
        out["groups"].append(
            {
                "name": name,
                "rows": choice.rows,
                "chance": choice.chance,
                "label_longer_wins": choice.label_longer_wins,
                "humans": choice.humans,
                "best": picked.get("best"),
                "fit": picked.get("fit", []),
                "entries": [_entry(e, name) for e in choice.entries],
            }
        )
    return out


def check_by_column(ds: Dataset, by: str | None, label: str) -> None:
    """Refuse a ``by`` column the labelled rows lack, before any request (with a did-you-mean among the data's
    columns: not ``label``, the column choose-judge added for the labels)."""
    if by is not None:
        check_by([c for c in ds.column_names if c != label], by, "the labelled rows")


def _entry(e: dict[str, Any], group: str) -> dict[str, Any]:
    keep = {k: e[k] for k in FIGURES if k in e}
    return {"name": e["name"], "judge": e["judge"], "metric": e["metric"], "group": group, **keep}


def _taken(like: Dataset, table: pa.Table, rows: list[int]) -> Dataset:
    """``like.select(rows)`` as a Dataset of its own (no indices mapping, no hashing: reading it costs less)."""
    return Dataset(table.take(rows), info=like.info, split=like.split, fingerprint=generate_random_fingerprint())


def _sub_result(
    result: ScoredDatasetDict, table: pa.Table, rows: list[int], n: int, swapped: bool
) -> ScoredDatasetDict:
    """The result a run on ``rows`` (of ``n`` labelled rows) alone would have given: the rows (and, for pairs in
    both orders, their second orders at ``n + row``), and the error rows of those, renumbered."""
    picked = rows + [n + i for i in rows] if swapped else rows
    mine = rows_renumbered(arrow_table(result[ERRORS_SPLIT]), {None: picked}, {None: 2 * n if swapped else n})
    sub = ScoredDatasetDict(
        {
            "train": _taken(result["train"], table, picked),
            ERRORS_SPLIT: Dataset(mine, split=result[ERRORS_SPLIT].split, fingerprint=generate_random_fingerprint()),
        }
    )
    sub.summary = result.summary
    return sub
