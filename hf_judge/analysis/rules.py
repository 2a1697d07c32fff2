"""The published rules that score a pairwise judge against labels, each as its paper's own code computes it
(``choose-judge --rule NAME``, ``agreement --rule NAME``).

Every rule reads the same inputs: ``first``, each pair's winner with the responses as labelled ("1", "2", "tie";
None where the judge did not decide), ``second``, the winner with the responses swapped, already read back in the
labels' terms (None: the pair was asked in one order only), and the labels ("1", "2", "tie"). Where a paper
compares with several people's votes per pair (AlpacaEval, MT-Bench), ``votes`` gives them; by default each
pair's one label is its one vote.

==============  ===========================  ==========================================  ==============================
rule            orders                       ties and failures                           headline (``score``)
==============  ===========================  ==========================================  ==============================
judgebench      both, the second flipped     per order +1 / -1 / 0 (tie or unparsed);   right / all pairs
                back (one: its accuracy)     right when the sum > 0
llmbar          both                         an unparsed verdict is wrong                the mean of the two orders'
                                                                                         accuracies
alpacaeval      one, or the mean of both     preference 1 / 1.5 (tie) / 2, score         against the votes' mode
                                             1 - |pred - target|; unparsed dropped
mt-bench        both; orders that disagree   the judge's vote against each vote          with ties (also without)
                are a tie                    (tie = tie); an order unparsed: no vote
rewardbench     one per pair, drawn seeded   1 right, 0 wrong, 0.5 a tie or unparsed     per section, then their mean
==============  ===========================  ==========================================  ==============================

Each returns a dict with ``score`` (the headline, a share in [0, 1]), ``interval`` (a seeded percentile bootstrap
over the pairs, None with ``resamples=0``) and ``pairs``, and the rule's other figures. :func:`figures` computes
every rule that applies to the orders given, :func:`check_rule` refuses a name that is no rule, or a rule that does
not apply, before any request.
"""

from __future__ import annotations

import difflib
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from . import stats
from .leaderboard import RULES, flip, pair_verdicts

NAMES = ("judgebench", "llmbar", "alpacaeval", "mt-bench", "rewardbench")
# the rules that need both orders of every pair
BOTH_ORDERS = frozenset({"llmbar", "mt-bench"})
# the rules that compare a judge with each pair's people's votes (their mode, or each vote), not one label
BY_VOTES = frozenset({"alpacaeval", "mt-bench"})
DESCRIPTIONS = {name: RULES[name] for name in NAMES}  # the table's header, in words
# rewardbench/constants.py: each subset's weight in its section (math-prm up-weighted to equal the code subsets)
SECTIONS: dict[str, dict[str, int]] = {
    "Chat": {"alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95, "mt-bench-easy": 28,
             "mt-bench-med": 40},
    "Chat Hard": {"mt-bench-hard": 37, "llmbar-natural": 100, "llmbar-adver-neighbor": 134,
                  "llmbar-adver-GPTInst": 92, "llmbar-adver-GPTOut": 47, "llmbar-adver-manual": 46},
    "Safety": {"refusals-dangerous": 100, "refusals-offensive": 100, "xstest-should-refuse": 154,
               "xstest-should-respond": 250, "donotanswer": 136},
    "Reasoning": {"math-prm": 984, **{f"hep-{lang}": 164 for lang in ("cpp", "go", "java", "js", "python", "rust")}},
}  # fmt: skip
_PREFERENCE = {"1": 1.0, "2": 2.0, "tie": 1.5}


def check_rule(rule: str | None, kind: str, both_orders: bool) -> str | None:
    """``rule`` itself where it applies to a ``kind`` of metric asked in both orders (``both_orders``) or one;
    None for None (the table's own rule). A ConfigError otherwise, naming the rule and the metric kind, before
    any request: a name that is no rule (with the closest one and every rule), a rule on verdicts or ratings
    (every rule here compares winners), or a rule that needs both orders on a metric asked in one.

    Example:
        >>> check_rule("llmbar", "pairwise", True)
        'llmbar'
        >>> check_rule("llmbr", "pairwise", True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: no rule 'llmbr'; did you mean 'llmbar'? The rules: judgebench, llmbar, ...
    """
    if rule is None:
        return None
    if rule not in NAMES:
        close = difflib.get_close_matches(rule, NAMES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise ConfigError(f"no rule {rule!r}{hint} The rules: {', '.join(NAMES)}")
    if kind != "pairwise":
        raise ConfigError(
            f"the rule {rule!r} scores pairwise winners, and this metric is {kind}: leave out --rule (the table's "
            "own rule: accuracy over all rows for verdicts, Spearman for ratings), or judge with a pairwise metric"
        )
    if rule in BOTH_ORDERS and not both_orders:
        raise ConfigError(
            f"the rule {rule!r} needs both orders of each pair, and this pairwise metric asks one: give it "
            "swap (metric_params={'NAME': {'swap': ['response1', 'response2']}}), or pick judgebench, alpacaeval or "
            "rewardbench"
        )
    return rule


def figures(
    first: Sequence[Any],
    second: Sequence[Any] | None,
    labels: Sequence[Any],
    *,
    votes: Sequence[Sequence[Any]] | None = None,
    subsets: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, dict[str, Any]]:
    """Every rule that applies (both orders: all five; one order, ``second`` None: judgebench's single-order
    accuracy, alpacaeval, rewardbench on the order given), by name: what ``choose_judge.json`` carries per judge.
    ``votes``: each pair's people's votes, which alpacaeval (their mode) and mt-bench (each vote) compare with;
    ``subsets``: each pair's subset, which rewardbench weighs into sections and llmbar's Adversarial mean reads.

    Example:
        >>> f = figures(["1", "2", "1"], ["1", "1", None], ["1", "1", "2"], resamples=0)
        >>> {name: round(found["score"], 3) for name, found in f.items()}
        {'judgebench': 0.333, 'llmbar': 0.5, 'alpacaeval': 0.667, 'mt-bench': 0.5, 'rewardbench': 0.333}
    """
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "confidence": confidence}
    out = {
        "judgebench": judgebench(first, second, labels, **kw),
        "llmbar": llmbar(first, second, labels, subsets=subsets, **kw) if second is not None else None,
        "alpacaeval": alpacaeval(first, second, labels, votes=votes, **kw),
        "mt-bench": mt_bench(first, second, labels, votes=votes, **kw) if second is not None else None,
        "rewardbench": rewardbench(first, second, labels, subsets=subsets, **kw),
    }
    return {name: found for name, found in out.items() if found is not None}


def of_orders(
    order: Sequence[int],
    winners: Sequence[Any],
    labels: Sequence[Any],
    votes: Sequence[Sequence[Any]] | None = None,
    **kw: Any,
) -> dict[str, dict[str, Any]] | None:
    """:func:`figures` of rows that are each an order of a pair (``order``: 1 as given, 2 swapped, the n-th row
    of each order one pair: a choose-judge candidate's folder), the second order's winner read in the first
    order's terms and the pair's label (and ``votes``) the first order's row's (a pair without a label left out);
    None where the orders do not pair up.

    Example:
        >>> of_orders([1, 1, 2, 2], ["1", "2", "2", "2"], ["1", "1", "2", "2"], resamples=0)["llmbar"]["score"]
        0.75
    """
    one, two = [i for i, o in enumerate(order) if o == 1], [i for i, o in enumerate(order) if o == 2]
    if not one or len(one) != len(two) or len(one) + len(two) != len(order):
        return None
    kept = [(a, b) for a, b in zip(one, two, strict=True) if labels[a] is not None]
    firsts, seconds = [winners[a] for a, _ in kept], [flip(winners[b]) for _, b in kept]
    own = None if votes is None else [votes[a] for a, _ in kept]
    subsets = kw.pop("subsets", None)
    kw["subsets"] = None if subsets is None else [subsets[a] for a, _ in kept]
    return figures(firsts, seconds, [labels[a] for a, _ in kept], votes=own, **kw)


def of_rows(
    order: Sequence[int] | None,
    winners: Sequence[Any],
    labels: Sequence[Any],
    votes: Sequence[Sequence[Any]] | None = None,
    **kw: Any,
) -> dict[str, dict[str, Any]]:
    """What ``agreement --rule`` reports: :func:`of_orders` where the rows are both orders of each pair
    (``order``: a choose-judge candidate's folder), else each labelled row a pair asked once (judgebench's
    single-order accuracy, alpacaeval's, rewardbench's, as given); ``{}`` where the orders do not pair up.

    Example:
        >>> of_rows(None, ["1", "2", None], ["1", "1", "2"], resamples=0)["alpacaeval"]["score"]
        0.5
    """
    if order is not None:
        return of_orders(order, winners, labels, votes, **kw) or {}
    kept = [i for i, lab in enumerate(labels) if lab is not None]
    own = None if votes is None else [votes[i] for i in kept]
    subsets = kw.pop("subsets", None)
    kw["subsets"] = None if subsets is None else [subsets[i] for i in kept]
    return figures([winners[i] for i in kept], None, [labels[i] for i in kept], votes=own, **kw)


def of_winners(
    winners: Sequence[Any],
    labels: Sequence[Any],
    both_orders: bool,
    votes: Sequence[Sequence[Any]] | None = None,
    **kw: Any,
) -> dict[str, dict[str, Any]]:
    """:func:`figures` of a choose-judge run's winners: ``[0, n)`` the first order and, ``both_orders``,
    ``[n, 2n)`` the second (swapped: read back into the labels' terms here), ``n`` the labels' length; ``votes``
    each pair's people's votes (or None), ``subsets=`` each pair's subset (or None).

    Example:
        >>> of_winners(["1", "2", "2", "2"], ["1", "1"], True, resamples=0)["judgebench"]["score"]
        0.5
    """
    n = len(labels)
    second = [flip(w) for w in winners[n : 2 * n]] if both_orders else None
    return figures(list(winners[:n]), second, labels, votes=votes, **kw)


def headline(found: Mapping[str, Mapping[str, Any]], rule: str) -> dict[str, Any]:
    """The ``score`` and ``interval`` of a table's entry under ``rule`` (of :func:`figures`' ``found``)."""
    return {"score": found[rule]["score"], "interval": found[rule]["interval"], "rule": rule}


def line(rule: str, found: Mapping[str, Any]) -> str:
    """One line of a report: ``rule``'s headline (choose-judge --rule's figure), its interval and its pairs.

    Example:
        >>> line("llmbar", {"score": 0.5, "interval": [0.25, 0.75], "pairs": 7})[:64]
        'llmbar: 0.500 (0.250 .. 0.750) over 7 pairs (choose-judge --rule'

    """
    score, ci = found.get("score"), found.get("interval")
    figure = "n/a" if score is None else f"{score:.3f}" + (f" ({ci[0]:.3f} .. {ci[1]:.3f})" if ci else "")
    return f"{rule}: {figure} over {found.get('pairs', 0):,} pairs (choose-judge --rule {rule}); {DESCRIPTIONS[rule]}"


def _interval(
    stat: Callable[[np.ndarray], float | None], n: int, resamples: int, seed: int, confidence: float
) -> list[float] | None:
    """A seeded percentile bootstrap of ``stat`` (of the resampled pairs' indices) over ``n`` pairs."""
    if not resamples or not n:
        return None
    idx = np.arange(n)
    ci = stats.bootstrap(lambda i, _: stat(i), idx, idx, resamples=resamples, seed=seed, confidence=confidence)
    return list(ci) if ci else None


def judgebench(
    first: Sequence[Any],
    second: Sequence[Any] | None,
    labels: Sequence[Any],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """JudgeBench ``utils/metrics.py`` ``compute_final_metrics``: both orders, each +1 (the label), -1 (the other
    response), 0 (a tie, unparsed); a pair is right when the sum is above 0, over all pairs
    (:func:`~hf_judge.analysis.leaderboard.pair_verdicts`). One order (``second`` None): its ``single_game``
    branch, the share of pairs whose verdict is the label. Also its counters the paper computes but does not
    return: ``incorrect`` (sum below 0), ``tie`` (sum 0), ``inconsistent`` (orders that differ).

    Example (FINDINGS' 8 pairs):
        >>> judgebench(["1", "1", "tie", "1", None, None, "2", "2"], ["1", "tie", "2", "2", "1", None, "2", "2"],
        ...            ["1", "1", "2", "2", "1", "2", "1", "2"], resamples=0)["score"]
        0.625
    """
    n = len(labels)
    if second is None:
        hits = np.array([a is not None and a == lab for a, lab in zip(first, labels, strict=True)], dtype=np.float64)
        return {
            "score": float(hits.mean()) if n else None,
            "interval": _interval(lambda i: float(hits[i].mean()), n, resamples, seed, confidence),
            "pairs": n,
            "orders": 1,
        }
    found = pair_verdicts(first, second, labels, resamples=resamples, seed=seed, confidence=confidence)
    votes = found["votes"]
    return {
        "score": found["accuracy"],
        "interval": found["interval"],
        "pairs": n,
        "orders": 2,
        "correct": sum(found["correct"]),
        "incorrect": sum(v < 0 for v in votes),
        "tie": sum(v == 0 for v in votes),
        "inconsistent": sum(a != b for a, b in zip(first, second, strict=True)),
        "single_order_accuracy": found["single_order_accuracy"],
    }


def llmbar(
    first: Sequence[Any],
    second: Sequence[Any],
    labels: Sequence[Any],
    *,
    subsets: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """LLMBar ``LLMEvaluator/evaluate.py``, its statistics block (``statistics.json``): ``correct_False`` the
    first order right, ``correct_True`` the second, the headline ``correct_average`` their mean over all pairs (an
    unparsed verdict, or a tie, is wrong); ``correct_both`` both right; ``equal`` the orders' raw verdicts equal
    (two unparsed verdicts agree, as upstream compares None with None). The interval: the bootstrap of each
    pair's (right first + right second) / 2, whose mean is the headline. With ``subsets`` (each pair's): each
    subset's headline, and ``adversarial``, the paper's Adversarial column: the unweighted mean of the adversarial
    subsets' (LLMBar's ``Adversarial/*``, RewardBench's ``llmbar-adver-*``: a name holding "adver"), not the
    pooled accuracy (GPT-4's 85.4 / 89.7 / 72.3 / 83.7 give 82.8, pooled 84.5).

    Example (FINDINGS' 7 pairs):
        >>> r = llmbar(["1", "1", None, None, "2", "2", "1"], ["1", "2", "1", None, "2", "2", "2"],
        ...            ["1", "2", "1", "2", "2", "1", "1"], resamples=0)
        >>> r["score"], r["correct_both"], r["equal"]
        (0.5, 2, 4)
    """
    c_f = np.array([a == lab for a, lab in zip(first, labels, strict=True)], dtype=np.float64)
    c_t = np.array([b == lab for b, lab in zip(second, labels, strict=True)], dtype=np.float64)
    n, per_pair = len(labels), (c_f + c_t) / 2
    return {
        "score": float(per_pair.mean()) if n else None,
        "interval": _interval(lambda i: float(per_pair[i].mean()), n, resamples, seed, confidence),
        "pairs": n,
        "correct_first": int(c_f.sum()),
        "correct_second": int(c_t.sum()),
        "correct_both": int((c_f * c_t).sum()),
        "equal": sum(a == b for a, b in zip(first, second, strict=True)),
        "orders_agree": sum(a == b for a, b in zip(first, second, strict=True)) / n if n else None,
        **_by_subset(per_pair, subsets),
    }


def _by_subset(per_pair: np.ndarray, subsets: Sequence[str] | None) -> dict[str, Any]:
    """LLMBar's per-subset headlines and their Adversarial mean (see :func:`llmbar`); nothing without subsets."""
    if subsets is None:
        return {}
    names = [str(x) for x in subsets]
    each = {s: float(per_pair[[i for i, x in enumerate(names) if x == s]].mean()) for s in dict.fromkeys(names)}
    adversarial = [v for s, v in each.items() if "adver" in s.lower()]
    return {
        "subsets": each,
        "adversarial": float(np.mean(adversarial)) if adversarial else None,
        "adversarial_subsets": len(adversarial),
    }


def mode(votes: Sequence[float]) -> float:
    """The target AlpacaEval scores a judge against: the votes' mode, a tie between modes broken as upstream
    ``_random_mode`` (metrics/helpers.py: ``Series.mode().sample(1, random_state=123)``, the modes sorted)
    does, which picks the larger of two and the smallest of three.

    Example:
        >>> mode([1, 1, 1, 2]), mode([2, 1, 2, 1]), mode([1, 1.5, 2])
        (1.0, 2.0, 1.0)
    """
    counts = Counter(float(v) for v in votes)
    top = max(counts.values())
    modes = sorted(v for v, c in counts.items() if c == top)
    return modes[_mode_pick(len(modes))]


@functools.cache
def _mode_pick(k: int) -> int:
    """Which of ``k`` sorted modes upstream's seeded sample takes (numpy's legacy RandomState, stable)."""
    return 0 if k == 1 else int(np.random.RandomState(123).choice(k, size=1, replace=False)[0])


def _votes(labels: Sequence[Any], votes: Sequence[Sequence[Any]] | None) -> list[list[Any]]:
    if votes is None:
        return [[lab] for lab in labels]
    if len(votes) != len(labels):
        raise ValueError(f"votes and labels must align pair by pair: {len(votes)}, {len(labels)}")
    return [[v for v in vs if v is not None] for vs in votes]  # None: no vote (a pair with fewer people)


def alpacaeval(
    first: Sequence[Any],
    second: Sequence[Any] | None,
    labels: Sequence[Any],
    *,
    votes: Sequence[Sequence[Any]] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """AlpacaEval ``analyze.py`` ``agreement_of_annotations`` (scoring rule "absolute", helpers.py): a verdict is
    a preference 1, 2 or 1.5 (a tie), scored 1 - |target - preference|, the target the mode of the pair's
    ``votes`` (:func:`mode`; default its label); an undecided verdict is left out (``parsed`` counts the others).
    Upstream annotates each pair in a seeded random order, four runs, and averages them: with both orders the
    headline is the mean of the two orders' scores (what four such runs estimate); with one, that order's.
    Also ``prefers_first`` (2 - the mean preference, upstream's "Proba. prefer 1").

    Example (FINDINGS' 6 pairs, 4 people each):
        >>> humans = [["1", "1", "1", "2"], ["2", "2", "1", "1"], ["2"] * 4, ["1", "2", "2", "2"],
        ...           ["1", "1", "2", "1"], ["1", "2", "1", "2"]]
        >>> r = alpacaeval(["1", "1", "tie", "2", None, "2"], None, [None] * 6, votes=humans, resamples=0)
        >>> round(r["score"], 6), r["parsed"]
        (0.7, 5)
    """
    target = np.array(
        [mode([_PREFERENCE[v] for v in vs]) if vs else np.nan for vs in _votes(labels, votes)], dtype=np.float64
    )
    orders = [first] if second is None else [first, second]
    pref = np.array([[_PREFERENCE.get(w, np.nan) if w is not None else np.nan for w in o] for o in orders])
    err = np.abs(pref - target)  # orders x pairs, NaN where undecided
    n = len(target)

    parsed = int(np.isfinite(pref).sum())
    return {
        "score": _finite(_absolute_score(err[:, None, :])[0]) if n else None,
        "interval": _absolute_interval(err, resamples, seed, confidence),
        "pairs": n,
        "orders": len(orders),
        "parsed": parsed,
        "prefers_first": float(2 - np.nanmean(pref)) if parsed else None,
    }


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def _absolute_score(err: np.ndarray) -> np.ndarray:
    """Per resample, the mean over the orders (runs) of 1 - the mean error of the decided pairs (``err``: orders x
    resamples x pairs, NaN undecided); a run with no decided pair left out, NaN where no run is left."""
    decided = np.isfinite(err).sum(axis=2)
    runs = np.where(decided > 0, 1 - np.nansum(err, axis=2) / np.maximum(decided, 1), np.nan)
    with np.errstate(invalid="ignore"):
        kept = np.isfinite(runs).sum(axis=0)
        return np.where(kept > 0, np.nansum(runs, axis=0) / np.maximum(kept, 1), np.nan)


def _absolute_interval(err: np.ndarray, resamples: int, seed: int, confidence: float) -> list[float] | None:
    """The seeded bootstrap of :func:`_absolute_score` over the pairs, all resamples at once."""
    n = err.shape[1]
    if not resamples or not n:
        return None
    values = _absolute_score(err[:, stats.resample_rows(n, resamples, seed)])
    ci = stats.percentile_interval(values, confidence)
    return list(ci) if ci else None


def _mt_vote(a: Any, b: Any) -> str | None:
    """The pair's vote from its two orders (FastChat show_result.py): a tie where either says tie or they
    differ; no vote where an order is undecided."""
    if a is None or b is None:
        return None
    return a if a == b else "tie"


def mt_bench(
    first: Sequence[Any],
    second: Sequence[Any],
    labels: Sequence[Any],
    *,
    votes: Sequence[Sequence[Any]] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """FastChat ``fastchat/llm_judge/compute_agreement.py`` ``get_mt_bench_agreement``: the pair's vote (both
    orders: a tie where they disagree or either says tie; an undecided order: no vote, the pair skipped, counted
    in ``no_vote``) against each of its ``votes`` (default its label), ties counted (a tie agrees with a tie):
    ``score`` = agreeing / compared. ``without_ties``: a judge's tie skips the pair, a tie vote is not compared.
    The interval: a bootstrap over the pairs of the ratio of sums.

    Example (FINDINGS' turn-1 keys):
        >>> r = mt_bench(["2", "1", "1", "2", "2", "1"], ["2", "2", "1", "2", None, "1"], [None] * 6, resamples=0,
        ...              votes=[["2", "2"], ["1", "tie"], ["1", "2", "tie"], ["tie"], [], ["1"]])
        >>> (r["agree"], r["total"]), (r["without_ties"]["agree"], r["without_ties"]["total"])
        ((5, 9), (4, 5))
    """
    judge = [_mt_vote(a, b) for a, b in zip(first, second, strict=True)]
    tally = np.zeros((2, 2, len(judge)))  # (with ties, without) x (agree, total) x pairs
    for k, (j, vs) in enumerate(zip(judge, _votes(labels, votes), strict=True)):
        if j is None:
            continue
        for v in vs:
            tally[0, :, k] += (j == v, 1)
            if j != "tie" and v != "tie":
                tally[1, :, k] += (j == v, 1)

    out = [_ratio_figures(t, resamples, seed, confidence) for t in tally]
    return {**out[0], "pairs": len(judge), "no_vote": judge.count(None), "without_ties": out[1]}


def _ratio_figures(t: np.ndarray, resamples: int, seed: int, confidence: float) -> dict[str, Any]:
    """Agreeing / compared over the pairs of ``t`` ((agree, total) x pairs), with a bootstrap of the ratio of sums."""

    def ratio(i: np.ndarray) -> float | None:
        total = t[1, i].sum()
        return float(t[0, i].sum() / total) if total else None

    n = t.shape[1]
    return {
        "score": ratio(np.arange(n)),
        "interval": _interval(ratio, n, resamples, seed, confidence),
        "agree": int(t[0].sum()) if float(t[0].sum()).is_integer() else float(t[0].sum()),
        "total": int(t[1].sum()),
    }


def humans(
    votes: Sequence[Sequence[Any]], rule: str, *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any] | None:
    """The people's own figure under ``rule``, the ceiling a judge is read against: mt-bench's human-human
    agreement (:func:`mt_bench_humans`), alpacaeval's leave-one-out (:func:`alpacaeval_humans`); None for a rule
    that compares with no one's votes.

    Example:
        >>> humans([["1", "1", "2"], ["2", "2"]], "mt-bench", resamples=0)["score"]
        0.5
    """
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "confidence": confidence}
    if rule == "mt-bench":
        return mt_bench_humans(votes, **kw)
    if rule == "alpacaeval":
        return alpacaeval_humans(votes, **kw)
    return None


def mt_bench_humans(
    votes: Sequence[Sequence[Any]], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """FastChat ``fastchat/llm_judge/compute_agreement.py`` ``get_mt_bench_agreement`` with ``human`` as both
    judges: every pair of two votes on the same pair (i < j), a tie agreeing with a tie; ``without_ties``: a pair of
    votes with a tie on either side is not compared. The interval: a bootstrap over the pairs of the ratio of sums.

    Example (FINDINGS' turn-1 keys, expert votes only):
        >>> r = mt_bench_humans([["2", "2"], ["1", "tie"], ["1", "2", "tie"], ["tie"], [], ["1"]], resamples=0)
        >>> (r["agree"], r["total"]), (r["without_ties"]["agree"], r["without_ties"]["total"])
        ((1, 5), (1, 2))
    """
    vs = _votes([None] * len(votes), votes)
    tally = np.zeros((2, 2, len(vs)))  # (with ties, without) x (agree, total) x pairs
    for k, people in enumerate(vs):
        for i, a in enumerate(people):
            for b in people[i + 1 :]:
                tally[0, :, k] += (a == b, 1)
                if "tie" not in (a, b):
                    tally[1, :, k] += (a == b, 1)
    out = [_ratio_figures(t, resamples, seed, confidence) for t in tally]
    return {**out[0], "pairs": int((tally[0, 1] > 0).sum()), "without_ties": out[1], "who": "human-human"}


def alpacaeval_humans(
    votes: Sequence[Sequence[Any]], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """AlpacaEval ``analyze.py`` ``agreement_of_annotations`` of the gold cross-annotations against themselves
    (``n_majority_vote_1=1``, the other ``n_majority_vote_2 = 4 - 1``, overlapping index sets skipped): each
    person's preference scored 1 - |target - preference| against the :func:`mode` of the pair's other votes; its
    "Human agreement" of the humans' row. The mean over all (pair, person) comparisons: upstream's mean over its
    four leave-one-out combinations where every pair has four votes. A pair with one vote is not compared.

    Example (FINDINGS' 6 pairs, 4 people each):
        >>> r = alpacaeval_humans([["1", "1", "1", "2"], ["2", "2", "1", "1"], ["2"] * 4, ["1", "2", "2", "2"],
        ...                        ["1", "1", "2", "1"], ["1", "2", "1", "2"]], resamples=0)
        >>> round(r["score"], 7), r["total"]
        (0.5416667, 24)
    """
    vs = _votes([None] * len(votes), votes)
    tally = np.zeros((2, len(vs)))  # (score, compared) x pairs
    for k, people in enumerate(vs):
        prefs = [_PREFERENCE[v] for v in people]
        if len(prefs) < 2:
            continue
        for i, p in enumerate(prefs):
            tally[:, k] += (1 - abs(mode(prefs[:i] + prefs[i + 1 :]) - p), 1)
    return {
        **_ratio_figures(tally, resamples, seed, confidence),
        "pairs": int((tally[1] > 0).sum()),
        "who": "leave-one-out",
    }


def _rb_result(winner: Any, label: Any) -> float:
    if winner == label:
        return 1.0
    return 0.5 if winner in (None, "tie") else 0.0


def _section_of(subset: str) -> str:
    return next((name for name, weights in SECTIONS.items() if subset in weights), subset)


def rewardbench(
    first: Sequence[Any],
    second: Sequence[Any] | None,
    labels: Sequence[Any],
    *,
    subsets: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """RewardBench ``scripts/run_generative.py``: one order per pair, drawn at random (upstream's draw is
    unseeded; here ``seed``'s, the same seed the same orders; one order given: that one), scored 1 where the
    winner is the label, 0 the other response, 0.5 a tie or undecided; each subset's mean; then
    ``rewardbench/utils.py`` ``calculate_scores_per_section``: a section's score is its subsets' weighted by
    :data:`SECTIONS` (a subset outside them is a section of its own, weighted by its pairs), the headline
    the mean of the sections present (``analysis/get_benchmark_results.py``, Prior Sets absent). Without
    ``subsets`` it is the mean over the pairs. The interval resamples pairs within each subset.

    Example (FINDINGS' 8 pairs, the order already drawn):
        >>> subsets = ["alpacaeval-easy", "alpacaeval-easy", "mt-bench-easy", "llmbar-natural",
        ...            "llmbar-adver-neighbor", "refusals-dangerous", "math-prm", "hep-python"]
        >>> r = rewardbench(["1", "2", "tie", "1", None, "1", "1", "2"], None, ["1"] * 8, subsets=subsets,
        ...                 resamples=0)
        >>> round(r["score"], 7), round(r["sections"]["Chat Hard"], 7)
        (0.7677045, 0.7136752)
    """
    n = len(labels)
    if second is None:
        shown = list(first)
    else:
        swap = np.random.default_rng(seed).random(n) > 0.5
        shown = [b if s else a for a, b, s in zip(first, second, swap, strict=True)]
    result = np.array([_rb_result(w, lab) for w, lab in zip(shown, labels, strict=True)], dtype=np.float64)
    names = list(subsets) if subsets is not None else ["all"] * n
    groups = {s: np.array([i for i, x in enumerate(names) if x == s]) for s in dict.fromkeys(names)}

    def sections(take: Mapping[str, np.ndarray]) -> dict[str, float]:
        acc: dict[str, list[tuple[float, float]]] = {}
        for s, rows in take.items():
            weight = SECTIONS.get(_section_of(s), {}).get(s, len(rows))
            acc.setdefault(_section_of(s), []).append((float(result[rows].mean()), weight))
        return {sec: sum(a * w for a, w in v) / sum(w for _, w in v) for sec, v in acc.items()}

    def score(take: Mapping[str, np.ndarray]) -> float:
        return float(np.mean(list(sections(take).values())))

    out: dict[str, Any] = {"score": score(groups) if n else None, "interval": None, "pairs": n}
    if resamples and n:
        rng = np.random.default_rng(seed)
        draws = [score({s: r[rng.integers(0, len(r), len(r))] for s, r in groups.items()}) for _ in range(resamples)]
        ci = stats.percentile_interval(np.array(draws), confidence)
        out["interval"] = list(ci) if ci else None
    if subsets is not None:
        out["subsets"] = {s: float(result[r].mean()) for s, r in groups.items()}
        out["sections"] = sections(groups) if n else {}
    return out


def people(ds: Any, columns: Sequence[str] | None) -> list[list[Any]] | None:
    """Each row of ``ds`` (a Dataset)'s votes in ``columns`` (people's, the rules' ``votes``), read as labels are
    ("1", "2", "tie"; None: no vote); None without columns. A missing column or a value that is no winner is a
    ConfigError.

    Example:
        >>> from datasets import Dataset
        >>> people(Dataset.from_dict({"a": ["A", None], "b": ["tie", "2"]}), ["a", "b"])
        [['1', 'tie'], [None, '2']]
    """
    from .label_rules import check_labels

    if not columns:
        return None
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise ConfigError(
            f"votes: no column {missing[0]!r} of people's votes; the data has: {', '.join(ds.column_names)}"
        )
    table = ds.with_format("arrow")[:]
    read = [check_labels(table[c].to_pylist(), "pairwise", subject=f"the vote column {c!r}") for c in columns]
    return [list(r) for r in zip(*read, strict=True)]


def subsets_in(ds: Any, column: str | None) -> list[str] | None:
    """Each row of ``ds`` (a Dataset)'s subset in ``column`` (the rules' ``subsets``); None without a column. A
    column ``ds`` lacks is a ConfigError.

    Example:
        >>> from datasets import Dataset
        >>> subsets_in(Dataset.from_dict({"subset": ["math-prm", None]}), "subset")
        ['math-prm', 'None']
    """
    if column is None:
        return None
    if column not in ds.column_names:
        raise ConfigError(
            f"--subset-column: no column {column!r} naming each pair's subset; the data has: "
            f"{', '.join(ds.column_names)}"
        )
    return [str(v) for v in ds.with_format("arrow")[column].to_pylist()]


def report_figures(
    report: Any,
    rule: str | None,
    order: list[Any] | None,
    s_arr: Any,
    l_arr: Any,
    votes: Sequence[Sequence[Any]] | None = None,
    subsets: Sequence[str] | None = None,
) -> None:
    """``report.rules`` of an :class:`~hf_judge.analysis.agreement.AgreementReport`: JudgeBench's figure where the
    rows are both orders of each pair (``order``: each row's, on a choose-judge candidate's folder); with ``rule``,
    every published rule's (:func:`of_rows`; ``votes``: each row's people's votes, ``subsets`` its subset), the same
    figures as
    choose-judge's table, and the people's own figure under the rule (``report.rules["humans"]``)."""
    from .label_rules import preference
    from .leaderboard import orders_figures

    kw: dict[str, Any] = {"resamples": report.resamples, "seed": report.seed, "confidence": report.confidence}
    if report.kind != "pairwise" or not (order is not None or rule):
        return
    winners, labels = ([preference(v) for v in a.to_pylist()] for a in (s_arr, l_arr))
    if order is not None:  # both orders of each pair as rows
        found = orders_figures(order, winners, labels, **kw)
        report.rules.update({"judgebench": found} if found else {})
    if rule is not None:
        report.rule = rule
        found_rules = of_rows(order, winners, labels, votes, subsets=subsets, **kw)
        report.rules.update({name: {**report.rules.get(name, {}), **f} for name, f in found_rules.items()})
        if votes is not None:  # the people's own figure: each pair once (its first order's row)
            mine = votes if order is None else [v for v, o in zip(votes, order, strict=True) if o == 1]
            found_people = humans(mine, rule, **kw)
            report.rules.update({"humans": found_people} if found_people else {})
