"""What ``choose_judge(..., output_dir=DIR)`` writes: ``DIR/choose_judge.json`` (the table, the recommendation),
``DIR/choose_judge.md`` (the markdown for a card), and beside them a folder per candidate judge, ``DIR/<judge>/``,
each a scored result of its own (``hf_judge.load_result``, ``hf-judge view``, ``agreement``, ``filter`` read it),
saved through the result sink (:func:`~hf_judge.results.output.save_result`); with the plots extra,
``DIR/plots/choose_judge.png`` (a bar per judge with its interval).

Why a folder per candidate and not the panel run's one folder with every judge's columns: a candidate's folder is
what that judge alone would have written (its columns under their own names, its errors, its requests, tokens,
price and latency in its summary), so the judge the table recommends can be taken on as it is (filtered, pushed,
calibrated on the same labels), and comparing two judges is comparing two results, as for any two runs.

A pairwise metric asked in both orders is scored as two rows per pair: a candidate's folder holds both, the
column ``__order__`` saying which (1: the responses as given, 2: swapped), and the label in each row's own terms
(a swapped row's "1" is the response it shows first), so that its rows read alike and ``agreement`` on the folder
gives the table's figure (it pairs the orders by ``__order__``). Every folder also holds the label the table
compared with, in the column ``__label__``. One candidate alone runs as a plain run (no panel): its folder is that
run's result.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset

from ..analysis.leaderboard import FILE, ORDER, JudgeChoice, flip
from ..errors import ConfigError
from ..judging.ensemble import JUDGE_SEP
from ..results import plots
from ..results.errors_split import ERRORS_SPLIT, judge_errors
from ..results.output import save_result
from ..results.scored import ScoredDatasetDict
from ..results.summary import RunSummary
from ..settings import Panelist

MARKDOWN = "choose_judge.md"
PLOT = "plots/choose_judge.png"


def check_output_dir(folder: str | os.PathLike) -> None:
    """Refuse, before the first request, a folder that holds something other than an earlier choose-judge output:
    the candidates' folders replace what is there.

    Example:
        >>> check_output_dir("a-new-folder/")
    """
    out = Path(folder)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / FILE).is_file())):
        raise ConfigError(
            f"{out} holds files that are not a choose-judge output (no {FILE}): choose another --output-dir "
            "(the candidates' folders would replace what is there)"
        )


def own(mapping: Mapping[str, Any], judge: str) -> dict[str, Any]:
    """The entries of a per-column mapping that are ``judge``'s (``<column>__<judge>``), under the column's own
    name; a panel's aggregate columns and the other judges' left out.

    Example:
        >>> own({"Binary": 1, "Binary__a": 2, "Binary__b": 3, "X__a__b": 4}, "a")
        {'Binary': 2}
    """
    suffix = f"{JUDGE_SEP}{judge}"
    return {
        k[: -len(suffix)]: v for k, v in mapping.items() if k.endswith(suffix) and JUDGE_SEP not in k[: -len(suffix)]
    }


def candidate_result(
    result: ScoredDatasetDict,
    judge: Panelist,
    order_rows: int | None = None,
    labels: tuple[str, Sequence[Any]] | None = None,
) -> ScoredDatasetDict:
    """One candidate's result out of the panel run's: the data's columns, the judge's columns under their own
    names, its error rows (and the run's own), and a summary as its own run would have written it (one candidate
    alone: the run's own result). ``order_rows``: the pairs of a metric asked in both orders (the first
    ``order_rows`` rows as given, the rest swapped); ``labels``: the label column and the pairs' labels ("1", "2",
    "tie"), written in each order's own terms."""
    summary = result.summary
    assert summary is not None  # score_dataset always sets it
    name = judge.column_name
    scored = result["train"]
    judges = [j.get("name") for j in summary.sampling.get("judges") or []]
    if judges:
        mine = own({c: c for c in scored.column_names}, name)
        others = {c for j in judges if j for c in own({c: c for c in scored.column_names}, j).values()}
        added = set(summary.columns) | others
        data = [c for c in scored.column_names if c not in added]
        rows = scored.select_columns(data + list(mine.values())).rename_columns({v: k for k, v in mine.items()})
    else:  # one judge alone: its columns are the run's own
        mine, rows = {c: c for c in summary.columns if c in scored.column_names}, scored
    if order_rows is not None:
        rows = rows.add_column(ORDER, [1 if i < order_rows else 2 for i in range(len(rows))])
    if order_rows is not None and labels is not None:
        column, given = labels
        rows = rows.remove_columns(column).add_column(column, [*given, *(flip(v) for v in given)])
    # a panel judge's error rows by the errors split's judge column (and the rows' own); one judge alone: all
    errors = judge_errors(result[ERRORS_SPLIT], name) if judges else result[ERRORS_SPLIT]
    out = ScoredDatasetDict({"train": rows, ERRORS_SPLIT: errors})
    out.summary = _summary_of(summary, judge, list(mine), errors) if judges else summary
    return out


def _summary_of(summary: RunSummary, judge: Panelist, columns: list[str], errors: Dataset) -> RunSummary:
    name = judge.column_name
    asked = summary.judge_requests.get(name, {})
    spec: dict[str, Any] = next((j for j in summary.sampling.get("judges") or [] if j.get("name") == name), {})
    sampling = {k: v for k, v in summary.sampling.items() if k not in ("judges", "aggregator")}
    return dataclasses.replace(
        summary,
        model=judge.model,
        base_url_host=spec.get("base_url_host", summary.base_url_host),
        provider=judge.provider or "",
        requests=asked.get("requests", 0),
        failed_attempts=dict(asked.get("failed_attempts") or {}),
        prompt_tokens=asked.get("prompt_tokens", 0),
        completion_tokens=asked.get("completion_tokens", 0),
        cached_tokens=asked.get("cached_tokens", 0),
        price=asked.get("price"),
        errors=dict(Counter(errors["kind"])),
        columns=columns,
        sampling=sampling,
        agreement={},
        judge_requests={name: asked} if asked else {},
        length_bias=own(summary.length_bias, name),
        longer_wins=own(summary.longer_wins, name),
        runs=[],
        notes=[*summary.notes, f"one judge of a choose-judge run ({FILE} beside this folder)"],
    )


def write_output(
    folder: str | os.PathLike,
    result: ScoredDatasetDict,
    choice: JudgeChoice,
    candidates: Sequence[Panelist],
    order_rows: int | None,
    labels: tuple[str, Sequence[Any]] | None = None,
) -> None:
    """``choose_judge.json``, its markdown, a folder per candidate (through the result sink) and, with the plots
    extra, the picture of the table. ``labels``: see :func:`candidate_result`."""
    out = Path(folder)
    for judge in candidates:
        part = candidate_result(result, judge, order_rows, labels)
        save_result(part, out / judge.column_name, source=f"choose-judge {judge.column_name}", overwrite=True)
    choice.save(out)
    (out / MARKDOWN).write_text(choice.to_markdown(), encoding="utf-8")
    if plots.available():  # the plots extra: without it, the table, the markdown and the page show the same
        (out / PLOT).parent.mkdir(parents=True, exist_ok=True)
        (out / PLOT).write_bytes(plots.choice_png(choice.to_dict()))
