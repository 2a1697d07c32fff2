"""choose-judge's cost columns: each candidate's cost per 1,000 rows from the tokens its replies used, projected
as ``--dry-run`` does where its replies came from the reply store, and what scoring another dataset with the
pick would cost (``--for``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datasets import Dataset, DatasetDict

from ..analysis.leaderboard import JudgeChoice
from ..settings import Panelist, Settings
from ..transport.prices import Price
from .estimate import estimate_cost


def costs(figures: Mapping[str, Any], rows: int, per_row: int, coverage: float | None) -> dict[str, Any]:
    """Cost per 1,000 rows at list and batch price from the tokens this judge's replies used, and latency. None
    where the judge decided no row (a price of rows it cannot judge says nothing), where it has no price, or where
    its server reported no token counts (then :func:`projected_costs` projects it)."""
    out: dict[str, Any] = {
        "latency_p50_s": figures.get("latency_p50_s"),
        "latency_p95_s": figures.get("latency_p95_s"),
        "cost_per_1000": None,
        "cost_per_1000_batch": None,
    }
    answered, price = figures.get("answered") or 0, figures.get("price")
    if "price" in figures and price is None:  # its client found no price: a projection would find none either
        out["cost_basis"] = None
    used = figures.get("prompt_tokens", 0) + figures.get("completion_tokens", 0)
    if price is None or not answered or not rows or not coverage or not used:
        return out
    p = Price(**price)
    # the tokens of an answered request, times the requests a row takes (cached replies cost nothing this time)
    scale = 1000 * per_row / answered
    tokens = (figures.get("prompt_tokens", 0) * scale, figures.get("completion_tokens", 0) * scale)
    out["cost_per_1000"] = p.cost(*tokens)
    out["cost_per_1000_batch"] = p.cost(*tokens, batch=True)
    return out


def projected_costs(
    choice: JudgeChoice,
    ds: Dataset,
    candidates: Sequence[Panelist],
    columns: dict[str, str] | None,
    prompts_dir: Any,
    metric_params: dict[str, dict[str, Any]] | None,
    settings: Settings | None,
    setting_values: Mapping[str, Any],
) -> None:
    """The cost of a judge whose replies this run took all from the reply store (it paid nothing now): the
    ``--dry-run`` projection of its requests on the labelled rows, per 1,000 rows (``cost_basis`` says which)."""
    by_name = {c.column_name: c for c in candidates}
    for e in choice.entries:
        if e.get("cost_per_1000") is not None:
            e["cost_basis"] = "replies"
            continue
        if not e.get("coverage"):  # it decided nothing: no cost per 1,000 rows it cannot judge
            e["cost_basis"] = None
            continue
        if "cost_basis" in e:  # no price (_costs): projecting its requests (rendering every prompt) would cost 0.1 s
            continue  # per 1,000 rows and find no price either
        judge = by_name[e["judge"]]
        est = _dry_run(ds, e["metric"], judge, (columns, prompts_dir, metric_params, settings), setting_values)
        if est.cost_online is not None and choice.rows:
            e["cost_per_1000"] = est.cost_online / choice.rows * 1000
            e["cost_per_1000_batch"] = (est.cost_batch or 0.0) / choice.rows * 1000
            e["cost_basis"] = "projected"
    idle = [e["name"] for e in choice.entries if not e.get("coverage")]
    if idle:
        choice.notes.append(
            f"{', '.join(idle)} decided no row: no cost is shown (a price per 1,000 rows it cannot judge says nothing)"
        )
    if any(e.get("cost_per_1000") is None and e.get("coverage") for e in choice.entries):
        choice.notes.append("a judge without a price has no cost: give its price with --prices FILE")
    if any(e.get("cost_basis") == "projected" for e in choice.entries):
        choice.notes.append(
            "cost of a judge whose replies this run did not pay for (from the reply store) or whose server reported "
            "no token counts: projected as --dry-run does"
        )


def projection(
    target: Dataset | DatasetDict,
    choice: JudgeChoice,
    candidates: Sequence[Panelist],
    columns: dict[str, str] | None,
    prompts_dir: Any,
    metric_params: dict[str, dict[str, Any]] | None,
    settings: Settings | None,
    setting_values: Mapping[str, Any],
) -> dict[str, Any]:
    """What scoring ``target`` with the recommended judge would send and cost (``--dry-run``'s estimate)."""
    assert choice.recommendation is not None
    pick = next(e for e in choice.entries if e["name"] == choice.recommendation["name"])
    judge = next(c for c in candidates if c.column_name == pick["judge"])
    est = _dry_run(target, pick["metric"], judge, (columns, prompts_dir, metric_params, settings), setting_values)
    return {
        "dataset": getattr(target, "info", None) and target.info.dataset_name or "the dataset",
        "judge": pick["name"],
        "requests": est.requests,
        "cost_online": est.cost_online,
        "cost_batch": est.cost_batch,
    }


def _dry_run(
    ds: Any, metric: str, judge: Panelist, where: tuple[Any, Any, Any, Any], setting_values: Mapping[str, Any]
) -> Any:
    """``--dry-run``'s estimate of ``metric`` on ``ds`` with one candidate alone (its model, server and API)."""
    columns, prompts_dir, metric_params, settings = where
    own = {k: v for k, v in {"base_url": judge.base_url, "provider": judge.provider}.items() if v is not None}
    return estimate_cost(
        ds, [metric], columns=columns, prompts_dir=prompts_dir, metric_params=metric_params,
        use_cache=False, tokenizer="chars", settings=settings,
        **{**setting_values, **own, "model": judge.model, "models": None},
    )  # fmt: skip
