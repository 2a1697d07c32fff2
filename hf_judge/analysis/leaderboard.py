"""Candidate judges side by side on labelled rows: the figures of ``choose-judge``'s table, its recommendation,
and :class:`JudgeChoice` (the table, ``choose_judge.json``, a card's markdown).

Every figure counts ALL labelled rows: a row a judge did not decide counts as not agreeing
(:func:`hf_judge.analysis.stats.over_all_rows`, the rule ``agreement`` uses too), so a judge that fails on the hard
rows is not ranked on the easy ones it could decide.

A pairwise judge asked in both orders is scored as JudgeBench scores one (:func:`pair_verdicts`): each order's
verdict is +1 where it agrees with the label, -1 where it picks the other response, 0 for a tie or a reply that
did not parse; the pair is correct when the sum of its two orders' verdicts is above 0.

Each figure is computed by a named rule (:data:`RULES`), which the table's header names: ``judgebench`` for a
pairwise judge asked in both orders, ``all-rows`` for verdicts and winners asked once, ``rated-rows`` for ratings.
``agreement`` computes the same rule on a candidate's folder (its rows are both orders of each pair, ``ORDER``
says which) and says where its own figures count otherwise.

The recommendation (:func:`recommend`): only a judge beyond chance is fit (:mod:`hf_judge.analysis.chance`: its
interval wholly above what always answering the majority label scores, its kappa's above 0); of the fit judges,
the best is the one with the highest headline figure; every fit judge whose interval overlaps the best judge's is
as good as the labels can tell, and of those the cheapest (at list price per 1,000 rows; a judge without a price
is never the cheapest) is recommended. No judge fit: nothing is recommended, and the table says why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import stats
from .chance import about, beyond_chance, rows_beyond_chance, rows_to_separate, why_not

FILE = "choose_judge.json"
ORDER = "__order__"  # a candidate's folder, pairs asked in both orders: 1 the responses as given, 2 swapped
# the rules a table's figures are computed by (its header names the one it used)
RULES = {
    "judgebench": "JudgeBench's rule: a pair is right when its two orders' votes (+1 right, -1 wrong, 0 a tie or "
    "undecided) sum above 0, over all labelled pairs",
    "all-rows": "agreement's all-rows rule: a row is right when the judge decided it and matches the label; an "
    "undecided row counts as wrong",
    "rated-rows": "Spearman's rho of the judge's ratings and the labels, on the rows it rated",
    # the other published rules of a pairwise judge (hf_judge.analysis.rules: choose-judge --rule NAME)
    "llmbar": "LLMBar's rule (LLMEvaluator/evaluate.py): the mean of the two orders' accuracies, an undecided "
    "verdict wrong",
    "alpacaeval": "AlpacaEval's rule (analyze.py): 1 - |preference - label| (a tie 1.5 earns 0.5, an undecided "
    "verdict left out), the mean of the orders",
    "mt-bench": "MT-Bench's rule (FastChat compute_agreement.py): the pair's vote (orders that disagree are a tie) "
    "against each label, ties counted",
    "rewardbench": "RewardBench's rule (scripts/run_generative.py): one order per pair, drawn with the seed; 1 right, "
    "0 wrong, 0.5 a tie or undecided; per section, then their mean",
}
RECOMMEND_RULE = "of the judges beyond chance, the cheapest whose interval overlaps the best one's"
_FLIP = {"1": "2", "2": "1", "tie": "tie"}


def rule_of(kind: str, both_orders: bool) -> str:
    """The name of the rule (:data:`RULES`) a table of ``kind`` computes its figures by.

    Example:
        >>> rule_of("pairwise", True), rule_of("binary", False), rule_of("numeric", False)
        ('judgebench', 'all-rows', 'rated-rows')
    """
    if kind == "numeric":
        return "rated-rows"
    return "judgebench" if kind == "pairwise" and both_orders else "all-rows"


def flip(winner: Any) -> Any:
    """A winner of the swapped order in the terms of the order as given ("1" <-> "2"; a tie, None as they are).

    Example:
        >>> [flip(w) for w in ("1", "2", "tie", None)]
        ['2', '1', 'tie', None]
    """
    return _FLIP.get(winner, winner) if winner is not None else None


def _vote(winner: Any, label: Any) -> int:
    """One order's verdict against the label: +1 agrees, -1 the other response, 0 a tie or nothing."""
    if winner not in ("1", "2"):
        return 0
    if label not in ("1", "2"):  # a tie label: only a tie agrees, and neither response is "the other"
        return -1
    return 1 if winner == label else -1


def pair_verdicts(
    first: Sequence[Any],
    second: Sequence[Any],
    labels: Sequence[Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """JudgeBench's accuracy of a pairwise judge asked in both orders, with the orders' own figures.

    ``first``: each pair's winner with the responses as labelled ("1", "2", "tie"; None where the judge did not
    decide); ``second``: the winner with the responses swapped, in the labels' own terms ("1" is still the
    labels' response 1); ``labels``: "1" or "2" (or "tie"). A pair's verdict is the sum of its orders' votes
    (+1 agrees with the label, -1 picks the other response, 0 a tie or an undecided order), correct when above
    0. ``accuracy`` (with ``interval``, a seeded bootstrap over the pairs at ``confidence``) is the share of
    correct pairs of ALL pairs; ``single_order_accuracy`` the first order's alone; ``orders_disagree`` the share
    of pairs with both orders decided whose winners differ, split by which way (``first_position``: each order
    picked the response shown first; ``second_position``: the one shown second; ``other``: a tie in one order).

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
    ci = stats.bootstrap_mean(hits, resamples=resamples, seed=seed, confidence=confidence) if resamples and n else None
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


def orders_figures(
    order: Sequence[int],
    winners: Sequence[str | None],
    labels: Sequence[str | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any] | None:
    """:func:`pair_verdicts` of rows that are each an order of a pair (``order``: 1 as given, 2 swapped, the n-th
    row of each order one pair, as a choose-judge candidate's folder holds them: :data:`ORDER`), as choose-judge's
    table computes it: the second order's winner read in the first order's terms, the pair's label the first
    order's row's (a pair without one left out). ``pairs``, ``accuracy``, ``interval``, ``single_order_accuracy``,
    ``orders_disagree``; None where the orders do not pair up.

    Example:
        >>> orders_figures([1, 1, 2, 2], ["1", "2", "2", "2"], ["1", "1", "2", "2"], resamples=0)["accuracy"]
        0.5
    """
    one, two = [i for i, o in enumerate(order) if o == 1], [i for i, o in enumerate(order) if o == 2]
    if not one or len(one) != len(two) or len(one) + len(two) != len(order):
        return None
    pairs = [(winners[a], flip(winners[b]), labels[a]) for a, b in zip(one, two, strict=True) if labels[a] is not None]
    found = pair_verdicts(
        *([p[k] for p in pairs] for k in range(3)), resamples=resamples, seed=seed, confidence=confidence
    )
    return {k: found[k] for k in ("pairs", "accuracy", "interval", "single_order_accuracy", "orders_disagree")}


def orders_line(found: Mapping[str, Any]) -> str:
    """The line of ``agreement``'s report that gives :func:`orders_figures`' figure (choose-judge's table's) and
    says why its other figures differ."""
    ci = found.get("interval")
    interval = f" ({ci[0]:.3f} .. {ci[1]:.3f})" if ci else ""
    accuracy = "n/a" if found.get("accuracy") is None else f"{found['accuracy']:.3f}"
    return (
        f"{RULES['judgebench']} (choose-judge's table): accuracy {accuracy}{interval} over {found['pairs']:,} "
        "pairs; the other figures count each order of a pair as a row of its own"
    )


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


def recommend(
    entries: Sequence[dict[str, Any]], chance: Mapping[str, Any] | None, rows: int | None = None
) -> dict[str, Any] | None:
    """The rule of the recommendation (:data:`RECOMMEND_RULE`): of the entries beyond ``chance``
    (:func:`~hf_judge.analysis.chance.beyond_chance`: the interval wholly above it), the best (highest ``score``),
    then, of the fit entries whose ``interval`` overlaps the best one's, the cheapest by ``cost_per_1000`` (an entry
    without a price is never the cheapest; with no price at all, the best). ``name`` is None when no entry is
    fit (``unfit`` says why, per entry). ``overlapping``: every entry, fit or not, whose interval overlaps the
    best one's (the rows are too few to tell them apart), and ``rows_needed`` about how many labelled rows would
    separate them, or, with none fit, lift the best entry above chance, if the figures held (``rows``: the rows
    the figures are on). None without any score.

    Example:
        >>> chance = {"kind": "binary", "score": 0.5, "kappa": 0.0}
        >>> r = recommend([{"name": "big", "score": 0.9, "interval": [0.85, 0.95], "cost_per_1000": 5.0},
        ...                {"name": "small", "score": 0.86, "interval": [0.8, 0.9], "cost_per_1000": 0.5},
        ...                {"name": "coin", "score": 0.52, "interval": [0.4, 0.6], "cost_per_1000": 0.1}], chance, 200)
        >>> r["name"], r["as_good"], r["unfit"], r["rows_needed"]
        ('small', ['big', 'small'], {'coin': 'its interval [40.0%, 60.0%] reaches chance (50.0%)'}, 1013)
    """
    scored = [e for e in entries if e.get("score") is not None]
    if not scored:
        return None
    fit = [e for e in scored if beyond_chance(e, chance)]
    fit_names = {e["name"] for e in fit}
    out: dict[str, Any] = {
        "name": None,
        "best": None,
        "as_good": [],
        "by": None,
        "rule": RECOMMEND_RULE,
        "compared": len(scored),
        "fit": [e["name"] for e in fit],
        "unfit": {e["name"]: why_not(e, chance) for e in scored if e["name"] not in fit_names},
        "overlapping": [],
        "rows_needed": None,
        "unpriced": [],
    }
    if not fit:  # nothing to recommend: how far the best of them is from being told apart from chance
        top = max(scored, key=lambda e: e["score"])
        out["best"] = top["name"]
        out["rows_needed"] = rows_beyond_chance(top, chance, rows) if chance is not None and rows else None
        return out
    best = max(fit, key=lambda e: e["score"])
    overlapping = [e for e in scored if e is not best and overlaps(e.get("interval"), best.get("interval"))]
    tied = [best, *(e for e in overlapping if e["name"] in fit_names)]
    priced = [e for e in tied if e.get("cost_per_1000") is not None]
    pick = min(priced, key=lambda e: (e["cost_per_1000"], -e["score"])) if priced else best
    out.update(
        name=pick["name"],
        best=best["name"],
        as_good=[e["name"] for e in tied],
        # without a price among them, the best: none is known to be cheaper; with some, the cheapest of those
        by="price" if priced else "score",
        unpriced=[e["name"] for e in tied if e.get("cost_per_1000") is None] if priced else [],
        overlapping=[e["name"] for e in overlapping],
    )
    if overlapping and rows:
        needed = [rows_to_separate(best, e, rows) for e in overlapping]
        out["rows_needed"] = None if None in needed else max(n for n in needed if n is not None)
    return out


@dataclass
class JudgeChoice:
    """What :func:`hf_judge.choose_judge` found: one entry per candidate (judge, or judge x prompt), the rule its
    figures are computed by (``rule``, a key of :data:`RULES`), the chance level (``chance``:
    :func:`~hf_judge.analysis.chance.chance_level`), the labels' own longer-wins rate for pairs
    (``label_longer_wins``), the human ceiling where several people labelled the rows (else ``ceiling_missing``
    says why there is none), the recommendation and, for ``for_dataset``, what scoring it with the recommended
    judge would cost. ``str()`` is the table ``choose-judge`` prints.

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
    rule: str = ""
    chance: dict[str, Any] | None = None
    label_longer_wins: dict[str, Any] | None = None
    ceiling_missing: str | None = None
    # by=COLUMN: the figures per group (hf_judge.engine.choose_groups.by_group); None without it
    groups: dict[str, Any] | None = None
    # votes=: the people's own figure under each rule that compares with their votes (rules.humans), by rule name
    humans: dict[str, Any] | None = None

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

    @property
    def rule_text(self) -> str:
        """The rule the figures are computed by, in words (the table's header)."""
        pairwise = any(e.get("judgebench") for e in self.entries)
        return RULES[self.rule or rule_of(self.kind, pairwise)]

    @property
    def _noun(self) -> str:
        return "rows" if (self.rule or rule_of(self.kind, False)) in ("all-rows", "rated-rows") else "pairs"

    def table(self) -> list[list[str]]:
        """The table's rows, a header first, the chance level last (what ``str()`` and the markdown print)."""
        return _table(self)

    def lines(self) -> list[str]:
        """The human ceiling (or why there is none), the recommendation (or why nothing is), whether the rows
        are enough to tell the candidates apart, and the projection, a line each; then the notes."""
        out = [*self._ceiling_lines(), *_subset_lines(self), *_recommendation_lines(self)]
        if self.projection:
            p = self.projection
            out.append(
                f"scoring {p['dataset']} with it: {p['requests']:,} requests, about {_money(p.get('cost_online'))} "
                f"online, {_money(p.get('cost_batch'))} in batch mode"
            )
        return out + self.notes

    def _ceiling_lines(self) -> list[str]:
        return self._humans_lines() + self._loo_lines()

    def _humans_lines(self) -> list[str]:
        """The people's own figure under the table's rule (``humans``), as the paper prints it."""
        h = (self.humans or {}).get(self.rule)
        if not h or h.get("score") is None:
            return []
        if h["who"] == "human-human":
            w = h["without_ties"]
            return [
                f"humans under mt-bench: every two votes on a pair agree {h['agree']}/{h['total']} = "
                f"{_pct(h['score'])} {_interval(h.get('interval'), True)}; without ties {w['agree']}/{w['total']} = "
                f"{_pct(w['score'])} (FastChat compute_agreement.py, human vs human; the judges: each vote)"
            ]
        return [
            f"humans under alpacaeval: each person against the mode of the others {_pct(h['score'])} "
            f"{_interval(h.get('interval'), True)} over {h['pairs']:,} pairs (AlpacaEval analyze.py, leave-one-out; "
            "the judges: against the mode of all)"
        ]

    def _loo_lines(self) -> list[str]:
        c = self.ceiling
        if c and c.get("loo_agreement") is not None:
            return [
                "human ceiling: one annotator agrees with the majority of the others on "
                f"{_pct(c.get('loo_agreement'))} "
                f"{_interval(c.get('interval'), True)} of rows ({c.get('annotators')} annotators, "
                f"{c.get('rows')} rows); Krippendorff's alpha {_num(c.get('alpha'))}"
            ]
        if c:
            return [f"human ceiling: none: no row has two people's labels ({c.get('annotators')} annotators)"]
        return [f"human ceiling: none: {self.ceiling_missing}"] if self.ceiling_missing else []

    def __str__(self) -> str:
        rows = self.table()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        text = [f"Judges on {self.rows:,} labelled {self._noun} ({self.metric}, {self.kind}); {self.rule_text}"]
        text += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        return "\n".join(text + self.lines() + group_lines(self))

    def to_markdown(self) -> str:
        """The table and the lines under it, as markdown for a dataset card."""
        rows = self.table()
        md = [
            f"### Choosing the judge ({self.metric}, {self.rows:,} labelled {self._noun})",
            "",
            f"{self.rule_text[0].upper()}{self.rule_text[1:]}.",
            "",
            "| " + " | ".join(rows[0]) + " |",
            "|" + " --- |" * len(rows[0]),
            *("| " + " | ".join(r) + " |" for r in rows[1:]),
            "",
            *(f"- {line}" for line in self.lines()),
            *group_markdown(self),
        ]
        return "\n".join(md) + "\n"


def _table(choice: JudgeChoice) -> list[list[str]]:
    """The table of ``choice``: a header, a row per entry, and the chance level's row."""
    pairwise = any(e.get("judgebench") for e in choice.entries)
    numeric = choice.kind == "numeric"
    orders = " (orders)" if pairwise else ""
    head = ["judge", choice.headline, "interval", "beyond chance", "kendall" if numeric else "kappa"]
    head += [f"coverage{orders}", f"failures{orders}"]
    if pairwise:
        head += ["one order", "orders disagree"]
    cycles = any(e.get("transitivity") for e in choice.entries)
    head += ["intransitive"] if cycles else []
    longer = choice.kind == "pairwise"
    labels = (choice.label_longer_wins or {}).get("rate")
    head += ["prefers longer" + (f" (labels {labels:.0%})" if labels is not None else "") if longer else "length rho"]
    head += ["self-pref", "$/1k list", "$/1k batch", "p50 s", "p95 s"]
    out = [head]
    for e in choice.entries:
        row = [
            e["name"],
            _num(e.get("score")) if numeric else _pct(e.get("score")),
            _interval(e.get("interval"), not numeric),
            {True: "yes", False: "no", None: "?"}[beyond_chance(e, choice.chance)] if choice.chance else "-",
            _num(e.get("kendall") if numeric else e.get("kappa")),
            _pct(e.get("coverage")),
            ", ".join(f"{k} {n}" for k, n in (e.get("failures") or {}).items()) or "-",
        ]
        if pairwise:
            row += _orders_cells(e)
        row += [_cycles_cell(e.get("transitivity"))] if cycles else []
        pref = e.get("self_preference") or {}
        row += [
            _longer_cell(e.get("longer_wins")) if longer else _rho_cell(e.get("length_bias")),
            "-" if pref.get("own_error") is None else f"{pref['own_error']:.0%} vs {_pct(pref.get('other_error'))}",
            _money(e.get("cost_per_1000")),
            _money(e.get("cost_per_1000_batch")),
            _num(e.get("latency_p50_s")),
            _num(e.get("latency_p95_s")),
        ]
        out.append(row)
    people = (choice.humans or {}).get(choice.rule)
    if people and people.get("score") is not None:  # the ceiling under this rule, read as the judges are
        name = {"human-human": "humans: every two votes", "leave-one-out": "humans: leave-one-out"}[people["who"]]
        out.append([name, _pct(people["score"]), _interval(people.get("interval"), True), *[""] * (len(head) - 3)])
    if choice.chance is not None:
        c = choice.chance
        name = "chance: no relation" if numeric else f"chance: always {_label(c.get('label'))}"
        out.append([name, _num(c["score"]) if numeric else _pct(c["score"]), "", "", "0", *[""] * (len(head) - 5)])
    return out


GROUP_COLUMNS = 4  # the table's last columns (cost, latency) are the run's, not a group's: a group's table drops them


def group_choice(choice: JudgeChoice, group: Mapping[str, Any]) -> JudgeChoice:
    """One group of ``choice.groups`` as a table of its own (its rows, entries and chance level)."""
    return JudgeChoice(
        metric=choice.metric, kind=choice.kind, rows=group["rows"], headline=choice.headline,
        entries=list(group["entries"]), rule=choice.rule, chance=group.get("chance"),
        label_longer_wins=group.get("label_longer_wins"), humans=group.get("humans"),
    )  # fmt: skip


def group_best(group: Mapping[str, Any]) -> str:
    """Which judge is best in a group, in words (the recommendation stays overall)."""
    best = group.get("best")
    if best is None:
        return "no judge scored a row"
    if best in (group.get("fit") or []):
        return f"best: {best} (beyond chance)"
    return f"best: {best}, but no judge is beyond chance in this group"


def _group_heads(choice: JudgeChoice) -> list[tuple[str, list[list[str]]]]:
    """Each group's heading and table rows (cost and latency left out), at most TERMINAL_GROUPS of them."""
    g = choice.groups or {}
    out = []
    for group in g.get("groups", []):
        sub = group_choice(choice, group)
        head = f"{g['by']} = {group['name']!r}: {sub.rows:,} {choice._noun}; {group_best(group)}"
        out.append((head, [r[:-GROUP_COLUMNS] for r in _table(sub)]))
    return out


def _group_more(choice: JudgeChoice, shown: int) -> str:
    g = choice.groups or {}
    rest = g.get("groups", [])[shown:]
    more, rows = g.get("more", 0) + len(rest), g.get("more_rows", 0) + sum(r["rows"] for r in rest)
    if not more:
        return ""
    return f"{more:,} more group{'s' if more != 1 else ''} ({rows:,} {choice._noun})"


def group_lines(choice: JudgeChoice, max_groups: int = 10) -> list[str]:
    """The terminal's block per group (``by=``), after the overall table; the groups past ``max_groups`` summed
    up as "N more groups"."""
    if not choice.groups:
        return []
    out = ["", f"By {choice.groups['by']} (each group's figures are those of its rows alone; the recommendation "
               "is overall):"]  # fmt: skip
    heads = _group_heads(choice)[:max_groups]
    for head, rows in heads:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out += [
            "",
            head,
            *("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
        ]
    more = _group_more(choice, len(heads))
    return out + (["", f"+ {more}"] if more else [])


def group_markdown(choice: JudgeChoice, max_groups: int = 20) -> list[str]:
    """The card's section per group (``by=``), as markdown lines."""
    if not choice.groups:
        return []
    out = ["", f"#### By {choice.groups['by']}", "", "Each group's figures are those of its rows alone; the "
           "recommendation is overall.", ""]  # fmt: skip
    heads = _group_heads(choice)[:max_groups]
    for head, rows in heads:
        out += [f"**{head}**", "", "| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
        out += ["| " + " | ".join(r) + " |" for r in rows[1:]] + [""]
    more = _group_more(choice, len(heads))
    return out + ([f"_{more}_", ""] if more else [])


def _orders_cells(e: Mapping[str, Any]) -> list[str]:
    jb = e.get("judgebench") or {}
    disagree = jb.get("orders_disagree") or {}
    way = "first" if disagree.get("first_position", 0) > disagree.get("second_position", 0) else "second"
    share = disagree.get("share")
    return [
        _pct(jb.get("single_order_accuracy")),
        "-" if share is None else f"{share:.0%}" + (f" ({way} shown)" if share else ""),
    ]


def _cycles_cell(found: Mapping[str, Any] | None) -> str:
    """A judge's intransitive triads (A over B, B over C, C over A on one prompt) of those it ordered."""
    if not found or not found.get("triads"):
        return "-"
    return f"{found['violations']} of {found['triads']} triads"


def _longer_cell(found: Mapping[str, Any] | None) -> str:
    """P(the judge prefers the longer response), with its interval."""
    if not found or found.get("rate") is None:
        return "-"
    ci = [found["low"], found["high"]] if found.get("low") is not None else None
    return f"{found['rate']:.0%}" + (f" [{found['low']:.0%}, {found['high']:.0%}]" if ci else "")


def _rho_cell(length: Mapping[str, Any] | None) -> str:
    length = length or {}
    interval = _interval([length["low"], length["high"]], False) if length.get("low") is not None else ""
    return _num(length.get("rho")) + (" " + interval if interval else "")


def _label(value: Any) -> str:
    return f"'{str(value).lower()}'" if isinstance(value, bool) else f"'{value}'"


def _chance_words(choice: JudgeChoice) -> str:
    c = choice.chance or {}
    if choice.kind == "numeric":
        return "chance is rho 0"
    return f"chance is {_pct(c.get('score'))}, always answering {_label(c.get('label'))}, the majority label; kappa 0"


def _subset_lines(choice: JudgeChoice) -> list[str]:
    """Under rewardbench, each judge's sections (its headline their mean); under llmbar, its Adversarial mean: the
    figures those papers print, where the pairs' subsets are known (``choose_judge(subsets=...)``)."""
    out = []
    for e in choice.entries:
        found = (e.get("rules") or {}).get(choice.rule) or {}
        if choice.rule == "rewardbench" and found.get("sections"):
            parts = ", ".join(f"{name} {_pct(v)}" for name, v in found["sections"].items())
            out.append(f"{e['name']} by section (RewardBench's weights): {parts}; their mean {_pct(found['score'])}")
        if choice.rule == "llmbar" and found.get("adversarial") is not None:
            parts = ", ".join(f"{name} {_pct(v)}" for name, v in found["subsets"].items())
            out.append(
                f"{e['name']}: LLMBar Adversarial {_pct(found['adversarial'])} (the mean of its "
                f"{found['adversarial_subsets']} adversarial subsets, not pooled); by subset: {parts}"
            )
    return out


def _recommendation_lines(choice: JudgeChoice) -> list[str]:
    """The recommendation, or why nothing is recommended; whether the rows tell the candidates apart."""
    r = choice.recommendation
    if not r:
        return []
    unfit = "; ".join(f"{name}: {why}" for name, why in r["unfit"].items())
    if r["compared"] == 1 and r["name"]:
        out = [
            f"recommended: {r['name']} (the only candidate, so nothing was compared; beyond chance, which "
            f"{_chance_words(choice).removeprefix('chance ')})"
        ]
    elif r["compared"] == 1:
        why = next(iter(r["unfit"].values()))
        out = [f"nothing recommended: the only candidate, {r['best']}, is not fit: {why}; nothing was compared"]
    elif r["name"] is None:
        out = [
            f"nothing recommended: no candidate is fit, none can be told from chance on these labels "
            f"({_chance_words(choice)}): {unfit}"
        ]
    else:
        out = [f"recommended: {r['name']} ({_why(r)}; rule: {r['rule']})"]
        out += [f"not fit: {unfit}"] if unfit else []
    return out + _rows_lines(choice, r)


def _why(r: Mapping[str, Any]) -> str:
    others = [n for n in r["as_good"] if n != r["name"]]
    if not others:
        return "the best beyond chance"
    tied = f"as good as {', '.join(others)} on these labels (intervals overlap)"
    if r.get("by", "price") != "price":
        return f"the best score; {tied}, and without their prices (--prices FILE) none is known to be cheaper"
    unpriced = r.get("unpriced") or []
    if not unpriced:
        return f"{tied} and the cheapest of them"
    verb = "has" if len(unpriced) == 1 else "have"
    return f"{tied}; the cheapest of those with a known price ({', '.join(unpriced)} {verb} none: --prices FILE)"


def _rows_lines(choice: JudgeChoice, r: Mapping[str, Any]) -> list[str]:
    """Whether more labelled rows would settle it, and about how many (if the figures held)."""
    noun, n, now = choice._noun, r.get("rows_needed"), f"these are {choice.rows:,}"
    if r["name"] is None:
        best = r["best"]
        if "no interval" in r["unfit"].get(best, ""):
            return ["give --resamples (e.g. 1000) for intervals: without them no judge can be told from chance"]
        if n is None:
            return [f"{best}'s figure is at or below chance: more labelled {noun} would not make it fit"]
        return [
            f"about {about(n)} labelled {noun} would lift {best}'s interval above chance, if its figures held ({now})"
        ]
    if not r.get("overlapping"):
        return []
    tell = f"too few {noun} to tell {r['best']} from {', '.join(r['overlapping'])} apart (their intervals overlap)"
    if n is None:
        return [f"{tell}, and their figures are equal: more labelled {noun} may never tell them apart"]
    return [f"{tell}: about {about(n)} labelled {noun} would, if the figures held ({now})"]


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
