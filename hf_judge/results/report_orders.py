"""A pairwise judge asked in both orders, order by order, read back from the reply store for the report page.

The result holds each judgment's two orders combined (the mean of each response's two scores, the winner of
those, ``_disagree`` where the orders chose different winners); which way a disagreement went (the response shown
first won both times, or the one shown second) is in the replies. The page rebuilds each embedded row's two
requests, as :mod:`hf_judge.results.report_logprobs` does, reads both replies of every judge and sample from the
store, and counts per judge the pairs (winner as written, winner with the responses swapped), in the responses'
own labels: ``1`` then ``2`` is the response shown first winning both times (a first-position bias), ``2`` then
``1`` the one shown second. A reply the store does not hold (another cache) is not counted; the page says how
many judgments were found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import HfJudgeError
from ..judging.ensemble import sample_key
from ..judging.metrics import MetricKind, OutputType
from ..judging.validate import parse_reply
from ..store.replies import ReplyStore
from .prompts import Prompter, PromptUnavailable
from .report_logprobs import STORE_FILE, clients, ran_logprobs, temperature_of

WINNERS = ("1", "2", "tie")


def _winner(first: Any, second: Any) -> str:
    return "1" if first > second else "2" if second > first else "tie"


def _keys(prompter: Prompter, rows: Sequence[Mapping[str, Any]], judges: list, samples: int) -> dict[bytes, list]:
    """Store key -> the (metric, row position, judge, sample, order) it answers, for each swapped pairwise metric."""
    wanted: dict[bytes, list] = {}
    for name in prompter.summary.metrics:
        try:
            metric = prompter.check(name)
        except PromptUnavailable:
            continue
        if metric.kind != MetricKind.PAIRWISE or not metric.swap:
            continue
        temperature = temperature_of(prompter.summary, metric)
        for p, row in enumerate(rows):
            try:
                requests = prompter.messages(name, row)
            except PromptUnavailable:
                continue
            for order, messages in enumerate(requests[:2]):
                for judge, judge_clients in judges:
                    for client in judge_clients:
                        body = client.body(metric, messages, temperature, "json_schema")
                        for key in {client.reply_key(metric, messages, temperature, body), client.request_key(body)}:
                            for sample in range(samples):
                                wanted.setdefault(sample_key(key, sample), []).append((name, p, judge, sample, order))
    return wanted


def split_orders(
    prompter: Prompter, rows: Sequence[Mapping[str, Any]], cache_dir: str | Path, base_url: str | None = None
) -> dict[str, Any]:
    """Per swapped pairwise metric and judge, over the page's rows (``rows``): ``{metric: {judge: {"pairs":
    {"1": {"2": n, ...}, ...}, "judgments": n, "first_shown": n, "second_shown": n}}}`` (``pairs[w1][w2]``: the
    judgments whose winner as written was ``w1`` and with the responses swapped ``w2``, both in the responses'
    own labels); {} where the run has no such metric or the store holds none of its replies.

    Example:
        >>> split_orders(Prompter(summary, ds.column_names), ds.to_list(), "cache/")  # doctest: +SKIP
        {'Comparative': {'': {'pairs': {'1': {'1': 5, '2': 3}}, 'judgments': 8, 'first_shown': 3, 'second_shown': 0}}}
    """
    path = Path(cache_dir) / STORE_FILE
    summary = prompter.summary
    if not path.is_file():
        return {}
    judges = clients(summary, base_url, logprobs=ran_logprobs(summary))
    wanted = _keys(prompter, rows, judges, int((summary.sampling or {}).get("samples") or 1))
    if not wanted:
        return {}
    store = ReplyStore(path)
    try:
        found = store.get_many(list(wanted))
    finally:
        store.close()
    replies: dict[tuple[str, int, str, int], dict[int, dict[str, Any]]] = {}
    for key, (content, *_rest) in found.items():
        for name, p, judge, sample, order in wanted[key]:
            try:
                values = parse_reply(prompter.metrics[name], content, None)
            except HfJudgeError:
                continue
            replies.setdefault((name, p, judge, sample), {})[order] = values
    out: dict[str, dict[str, Any]] = {}
    for (name, _p, judge, _sample), orders in replies.items():
        if len(orders) < 2:
            continue
        k1, k2 = (o.key for o in prompter.metrics[name].outputs if o.type == OutputType.INTEGER)
        written = _winner(orders[0][k1], orders[0][k2])
        swapped = _winner(orders[1][k2], orders[1][k1])  # the second order shows response 2 first
        entry = out.setdefault(name, {}).setdefault(
            judge, {"pairs": {}, "judgments": 0, "first_shown": 0, "second_shown": 0}
        )
        row = entry["pairs"].setdefault(written, {})
        row[swapped] = row.get(swapped, 0) + 1
        entry["judgments"] += 1
        entry["first_shown"] += (written, swapped) == ("1", "2")
        entry["second_shown"] += (written, swapped) == ("2", "1")
    rank = {judge: i for i, (judge, _) in enumerate(judges)}
    return {m: dict(sorted(by.items(), key=lambda kv: rank.get(kv[0], 0))) for m, by in out.items()}
