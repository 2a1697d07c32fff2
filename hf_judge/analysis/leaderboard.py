"""Candidate judges side by side on labelled rows: the figures of ``choose-judge``'s table, its recommendation,
and :class:`JudgeChoice` (the table, ``choose_judge.json``, a card's markdown).

Every figure counts ALL labelled rows: a row a judge did not decide counts as not agreeing
(:func:`hf_judge.analysis.stats.over_all_rows`, the rule ``agreement`` uses too), so a judge that fails on the hard
rows is not ranked on the easy ones it could decide.

A pairwise judge asked in both orders is scored as JudgeBench scores one (:func:`pair_verdicts`): each order's
verdict is +1 where it agrees with the label, -1 where it picks the other response, 0 for a tie or a reply that
did not parse; the pair is correct when the sum of its two orders' verdicts is above 0.

The recommendation (:func:`recommend`): the best judge is the one with the highest headline figure; every judge
whose interval overlaps the best judge's is as good as the labels can tell, and of those the cheapest (at list
price per 1,000 rows; a judge without a price is never the cheapest) is recommended.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import stats

FILE = "choose_judge.json"


def _vote(winner: Any, label: Any) -> int:
    """One order's verdict against the label: +1 agrees, -1 the other response, 0 a tie or nothing."""
    if winner not in ("1", "2"):
        return 0
    if label not in ("1", "2"):  # a tie label: only a tie agrees, and neither response is "the other"
        return -1
    return 1 if winner == label else -1


def pair_verdicts(
    first: Sequence[Any], second: Sequence[Any], labels: Sequence[Any], *, resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """JudgeBench's accuracy of a pairwise judge asked in both orders, with the orders' own figures.

    ``first``: each pair's winner with the responses as labelled ("1", "2", "tie"; None where the judge did not
    decide); ``second``: the winner with the responses swapped, in the labels' own terms ("1" is still the
    labels' response 1); ``labels``: "1" or "2" (or "tie"). A pair's verdict is the sum of its orders' votes
    (+1 agrees with the label, -1 picks the other response, 0 a tie or an undecided order), correct when above
    0. ``accuracy`` (with ``interval``, a seeded bootstrap over the pairs) is the share of correct pairs of ALL
    pairs; ``single_order_accuracy`` the first order's alone; ``orders_disagree`` the share of pairs with both
    orders decided whose winners differ, split by which way (``first_position``: each order picked the response
    shown first; ``second_position``: the one shown second; ``other``: a tie in one order).

    Example (the hand-worked example of the docs):
        >>> r = pair_verdicts(["1", "1", "2", None, "tie"], ["1", "2", "2", "2", "1"], ["1", "1", "1", "2", "1"],
        ...                   resamples=0)
        >>> r["votes"], r["correct"], r["accuracy"]
        ([2, 0, -2, 1, 1], [True, False, False, True, True], 0.6)
        >>> r["single_order_accuracy"], r["orders_disagree"]
        (0.4, {'share': 0.5, 'first_position': 1, 'second_position': 0, 'other': 1, 'pairs': 4})
    """
    if not len(first) == len(second) == len(labels):
        raise ValueError(
            f"first, second and labels must align pair by pair: {len(first)}, {len(second)}, {len(labels)}"
        )
    votes = [_vote(a, lab) + _vote(b, lab) for a, b, lab in zip(first, second, labels, strict=True)]
    tie_label = [lab not in ("1", "2") for lab in labels]
    correct = [
        (a == "tie" and b == "tie") if tie else v > 0
        for v, tie, a, b in zip(votes, tie_label, first, second, strict=True)
    ]
    single = [a is not None and a == lab for a, lab in zip(first, labels, strict=True)]
    both = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    # the response shown first is the labels' "1" in the first order and their "2" in the second
    first_position = sum(1 for a, b in both if a == "1" and b == "2")
    second_position = sum(1 for a, b in both if a == "2" and b == "1")
    other = sum(1 for a, b in both if a != b) - first_position - second_position
    n = len(votes)
    hits = np.array(correct, dtype=np.float64)
    ci = stats.bootstrap_mean(hits, resamples=resamples, seed=seed, confidence=0.95) if resamples and n else None
    return {
        "pairs": n,
        "votes": votes,
        "correct": correct,
        "accuracy": float(hits.mean()) if n else None,
        "interval": list(ci) if ci else None,
        "single_order_accuracy": float(np.mean(single)) if n else None,
        "orders_disagree": {
            "share": (first_position + second_position + other) / len(both) if both else None,
            "first_position": first_position,
            "second_position": second_position,
            "other": other,
            "pairs": len(both),
        },
    }


def combined_winner(first: Any, second: Any) -> str | None:
    """The winner of a pair from its two orders (``second`` in the labels' terms) by the sum of their votes for
    response 1 (+1) and response 2 (-1); None where neither order decided.

    Example:
        >>> [combined_winner(a, b) for a, b in (("1", "tie"), ("1", "2"), (None, "2"), (None, None))]
        ['1', 'tie', '2', None]
    """
    if first is None and second is None:
        return None
    s = sum({"1": 1, "2": -1}.get(w, 0) for w in (first, second) if w is not None)
    return "1" if s > 0 else "2" if s < 0 else "tie"


def overlaps(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    """Whether two intervals [lo, hi] overlap (an interval that is unknown overlaps nothing)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def recommend(entries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The rule of the recommendation: the best entry (highest ``score``), then, of the entries whose
    ``interval`` overlaps the best one's, the cheapest by ``cost_per_1000`` (an entry without a price is never
    the cheapest; with no price at all, the best). None without any score.

    Example:
        >>> recommend([{"name": "big", "score": 0.9, "interval": [0.85, 0.95], "cost_per_1000": 5.0},
        ...            {"name": "small", "score": 0.86, "interval": [0.8, 0.9], "cost_per_1000": 0.5},
        ...            {"name": "bad", "score": 0.6, "interval": [0.5, 0.7], "cost_per_1000": 0.1}])["name"]
        'small'
    """
    scored = [e for e in entries if e.get("score") is not None]
    if not scored:
        return None
    best = max(scored, key=lambda e: e["score"])
    tied = [e for e in scored if e is best or overlaps(e.get("interval"), best.get("interval"))]
    priced = [e for e in tied if e.get("cost_per_1000") is not None]
    pick = min(priced, key=lambda e: (e["cost_per_1000"], -e["score"])) if priced else best
    return {
        "name": pick["name"],
        "best": best["name"],
        "as_good": [e["name"] for e in tied],
        "by": "price" if priced else "score",  # without a price among them, the best: none is known to be cheaper
        "rule": "the cheapest judge whose interval overlaps the best judge's",
    }


@dataclass
class JudgeChoice:
    """What :func:`hf_judge.choose_judge` found: one entry per candidate (judge, or judge x prompt), the human
    ceiling where several people labelled the rows, the recommendation and, for ``for_dataset``, what scoring it
    with the recommended judge would cost. ``str()`` is the table ``choose-judge`` prints.

    Example:
        >>> choice = choose_judge(ds, "Binary", ["judge-a", "judge-b"], label="human")  # doctest: +SKIP
        >>> print(choice)  # doctest: +SKIP
        >>> choice.recommendation["name"]  # doctest: +SKIP
        'judge-b'
    """

    metric: str
    kind: str
    rows: int
    headline: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None
    ceiling: dict[str, Any] | None = None
    projection: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeChoice:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, folder: str | Path) -> Path:
        """Write ``choose_judge.json`` into ``folder``; returns its path."""
        path = Path(folder) / FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path

    def table(self) -> list[list[str]]:
        """The table's rows, a header first (what ``str()`` and the markdown print)."""
        pairwise = any(e.get("judgebench") for e in self.entries)
        head = ["judge", self.headline, "interval", "kappa", "coverage", "failures"]
        if self.kind == "numeric":
            head[3] = "kendall"
        if pairwise:
            head += ["one order", "orders disagree"]
        head += ["length rho", "self-pref", "$/1k list", "$/1k batch", "p50 s", "p95 s"]
        out = [head]
        for e in self.entries:
            row = [
                e["name"],
                _pct(e.get("score")) if self.kind != "numeric" else _num(e.get("score")),
                _interval(e.get("interval"), self.kind != "numeric"),
                _num(e.get("kendall") if self.kind == "numeric" else e.get("kappa")),
                _pct(e.get("coverage")),
                ", ".join(f"{k} {n}" for k, n in (e.get("failures") or {}).items()) or "-",
            ]
            if pairwise:
                jb = e.get("judgebench") or {}
                disagree = jb.get("orders_disagree") or {}
                way = "first" if disagree.get("first_position", 0) > disagree.get("second_position", 0) else "second"
                share = disagree.get("share")
                row += [
                    _pct(jb.get("single_order_accuracy")),
                    "-" if share is None else f"{share:.0%}" + (f" ({way} shown)" if share else ""),
                ]
            length = e.get("length_bias") or {}
            pref = e.get("self_preference") or {}
            row += [
                _num(length.get("rho"))
                + (" " + _interval([length["low"], length["high"]], False) if length.get("low") is not None else ""),
                "-" if pref.get("own_error") is None else f"{pref['own_error']:.0%} vs {_pct(pref.get('other_error'))}",
                _money(e.get("cost_per_1000")),
                _money(e.get("cost_per_1000_batch")),
                _num(e.get("latency_p50_s")),
                _num(e.get("latency_p95_s")),
            ]
            out.append(row)
        return out

    def lines(self) -> list[str]:
        """The recommendation, the ceiling and the projection, one line each."""
        out = []
        if self.ceiling:
            c = self.ceiling
            out.append(
                "human ceiling: one annotator agrees with the majority of the others on "
                f"{_pct(c.get('loo_agreement'))} "
                f"{_interval(c.get('interval'), True)} of rows ({c.get('annotators')} annotators, "
                f"{c.get('rows')} rows); Krippendorff's alpha {_num(c.get('alpha'))}"
            )
        r = self.recommendation
        if r:
            others = [n for n in r["as_good"] if n != r["name"]]
            if not others:
                why = "the best"
            elif r.get("by", "price") == "price":
                why = f"as good as {', '.join(others)} on these labels (intervals overlap) and the cheapest of them"
            else:
                why = (
                    f"the best score; as good as {', '.join(others)} on these labels (intervals overlap), and without "
                    "their prices (--prices FILE) none is known to be cheaper"
                )
            out.append(f"recommended: {r['name']} ({why}; rule: {r['rule']})")
        if self.projection:
            p = self.projection
            out.append(
                f"scoring {p['dataset']} with it: {p['requests']:,} requests, about {_money(p.get('cost_online'))} "
                f"online, {_money(p.get('cost_batch'))} in batch mode"
            )
        return out + self.notes

    def __str__(self) -> str:
        rows = self.table()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        text = [f"Judges on {self.rows:,} labelled rows ({self.metric}, {self.kind}; undecided rows count as wrong)"]
        text += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        return "\n".join(text + self.lines())

    def to_markdown(self) -> str:
        """The table and the lines under it, as markdown for a dataset card."""
        rows = self.table()
        md = [
            f"### Choosing the judge ({self.metric}, {self.rows:,} labelled rows)",
            "",
            "| " + " | ".join(rows[0]) + " |",
            "|" + " --- |" * len(rows[0]),
            *("| " + " | ".join(r) + " |" for r in rows[1:]),
            "",
            *(f"- {line}" for line in self.lines()),
        ]
        return "\n".join(md) + "\n"


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.1%}"


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


def _money(v: Any) -> str:
    return "-" if v is None else f"${v:,.4g}"


def _interval(ci: Any, pct: bool) -> str:
    if not ci or ci[0] is None:
        return "-"
    f = _pct if pct else _num
    return f"[{f(ci[0])}, {f(ci[1])}]"
