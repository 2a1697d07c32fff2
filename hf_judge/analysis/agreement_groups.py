"""``agreement(..., by=COLUMN)``: the report per group of a column, each group's report the one ``agreement``
gives on that group's rows alone (its rows in their order, its error rows renumbered as its own, the same seed):
``report.groups``, and a block per group after the report's table.

The comparison itself is passed in (``compare``): this module cuts the groups, :mod:`hf_judge.analysis.agreement`
compares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from datasets import Dataset

from ..tables import arrow_table, rows_renumbered
from .by_group import TERMINAL_GROUPS, group_rows, more_text

# compare(rows of the group, their error rows, their row indices in the result or None) -> an AgreementReport
Compare = Callable[[Dataset, Dataset | None, Sequence[int] | None], Any]
SHOWN = ("figures", "intervals", "all_rows", "rules")  # what a group's block prints


def agreement_groups(
    d: Dataset,
    by: str | None,
    split: str | None,
    errors: Dataset | None,
    rows: Sequence[int] | None,
    compare: Compare,
) -> dict[str, Any] | None:
    """``{"by", "groups": [{"group", "by", **report.to_dict()}], "more", "more_rows"}`` (None without ``by``):
    ``compare`` on each
    group's rows (the most rows first, at most MAX_GROUPS). ``rows``: the result's row index of each row of ``d``
    where it is a selection (then the error rows keep their numbers); else the error rows of ``split`` are
    renumbered as the group's own."""
    if by is None:
        return None
    found = group_rows(d, by, f"split {split!r}" if split else "the dataset")
    out: dict[str, Any] = {"by": by, "groups": [], "more": found.more, "more_rows": found.more_rows}
    for name, idx in found.groups:
        sub = d.select(idx)
        if rows is not None:
            report = compare(sub, errors, [rows[i] for i in idx])
        else:
            report = compare(sub, _errors_of(errors, split, idx, len(d)), None)
        report.split = split
        out["groups"].append({"group": name, "by": by, **report.to_dict()})
    return out


def _errors_of(errors: Dataset | None, split: str | None, idx: Sequence[int], n: int) -> Dataset | None:
    """The error rows of ``split``'s rows ``idx``, their ``row`` renumbered as the group's own (0, 1, ...)."""
    if errors is None or not len(errors):
        return errors
    return Dataset(rows_renumbered(arrow_table(errors), {split: idx}, {split: n}), split=errors.split)


def group_lines(groups: Mapping[str, Any] | None, num: Callable[[Any], str]) -> list[str]:
    """A block per group after the report's table: its rows compared, its figures with their intervals, the
    all-rows line's figures; the groups past TERMINAL_GROUPS summed up as "N more groups"."""
    if not groups:
        return []
    out = ["", f"By {groups['by']} (each group's figures are agreement on its rows alone):"]
    shown = groups["groups"][:TERMINAL_GROUPS]
    for g in shown:
        out += ["", f"{groups['by']} = {g['group']!r}: rows {g['rows']:,}, compared {g['pairs']:,}"]
        for name, v in g["figures"].items():
            ci = (g.get("intervals") or {}).get(name)
            out.append(f"  {name:<24} {num(v):>8}  {f'{num(ci[0])} .. {num(ci[1])}' if ci else ''}".rstrip())
        out += _all_rows_lines(g, num)
    rest = groups["groups"][len(shown) :]
    more = more_text(groups["more"] + len(rest), groups["more_rows"] + sum(g["rows"] for g in rest))
    return out + (["", f"+ {more}"] if more else [])


def _all_rows_lines(g: Mapping[str, Any], num: Callable[[Any], str]) -> list[str]:
    a = g.get("all_rows") or {}
    parts = [f"{k} {num(v)}" for k, v in (a.get("figures") or {}).items()]
    if a.get("coverage") is not None:
        parts.append(f"coverage {a['coverage']:.1%}")
    jb = (g.get("rules") or {}).get("judgebench")
    if jb and jb.get("accuracy") is not None:
        parts.append(f"JudgeBench's rule {num(jb['accuracy'])} over {jb['pairs']:,} pairs")
    out = [f"  over all {a.get('rows', 0):,} labelled rows: " + "; ".join(parts)] if parts else []
    rule = _rule_figure(g)
    if rule is not None:  # --rule NAME: the group's figure under it, choose-judge --by's for that group
        name, found = rule
        ci = found.get("interval")
        out.append(
            f"  {name}: {num(found['score'])}" + (f" ({num(ci[0])} .. {num(ci[1])})" if ci else "")
            + f" over {found.get('pairs', 0):,} pairs (choose-judge --rule {name})"
        )  # fmt: skip
    return out


def _rule_figure(g: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The group's figure under the rule asked for (``agreement --rule``), where it has one."""
    rule = g.get("rule")
    found = (g.get("rules") or {}).get(rule) if isinstance(rule, str) else None
    return (str(rule), found) if found and found.get("score") is not None else None


def group_markdown(groups: Mapping[str, Any] | None, num: Callable[[Any], str]) -> list[str]:
    """The card's table per group: a row per group, a column per figure (the interval beside it)."""
    if not groups or not groups["groups"]:
        return []
    names = list(groups["groups"][0]["figures"])
    rule = next((r[0] for g in groups["groups"] if (r := _rule_figure(g))), None)  # --rule NAME: a column first
    out = [f"By `{groups['by']}` (each group's figures are agreement on its rows alone):", ""]
    head = ([rule] if rule else []) + names
    out += ["| group | compared | " + " | ".join(head) + " |", "|" + " --- |" * (len(head) + 2)]
    for g in groups["groups"]:
        cells = []
        figures = [((g.get("rules") or {}).get(rule) or {})] if rule else []
        figures += [{"score": g["figures"].get(n), "interval": (g.get("intervals") or {}).get(n)} for n in names]
        for f in figures:
            v, ci = f.get("score"), f.get("interval")
            cells.append(num(v) + (f" ({num(ci[0])} .. {num(ci[1])})" if ci else ""))
        out.append(f"| {g['group']} | {g['pairs']:,} | " + " | ".join(cells) + " |")
    more = more_text(groups["more"], groups["more_rows"])
    return out + (["", f"_{more}_"] if more else []) + [""]
