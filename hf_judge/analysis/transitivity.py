"""A check of a pairwise judge that needs no labels: where it compared three models' answers to one prompt pair by
pair (A with B, B with C, A with C), its three verdicts should order them; A over B, B over C and C over A is a
cycle, a violation of transitivity (as MT-bench's pairs hold them: every pair of six models on each question and
turn).

A pair compared more than once on one prompt (both orders, or two rows) counts once, by the sum of its verdicts;
a tie or an undecided pair gives no edge, so a triad with one is not counted either way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from itertools import combinations
from typing import Any


def transitivity(
    items: Sequence[Hashable],
    model_a: Sequence[Any],
    model_b: Sequence[Any],
    winners: Sequence[Any],
) -> dict[str, Any]:
    """Count a judge's intransitive triads: row ``i`` compares ``model_a[i]``'s answer to item ``items[i]`` (a
    prompt, or a prompt and turn) with ``model_b[i]``'s, and ``winners[i]`` is the judge's verdict ("1": model_a's,
    "2": model_b's; "tie" or None: no order). ``triads``: the triples of models on one item whose three pairs
    each have an order; ``violations``: those that form a cycle; ``share``: violations / triads (None without a
    triad); ``items``: the items with a triad.

    Example (a hand-made cycle: on q1 a > b, b > c, c > a; on q2 a > b, b > c, a > c):
        >>> transitivity(["q1", "q1", "q1", "q2", "q2", "q2"], ["a", "b", "a", "a", "b", "a"],
        ...              ["b", "c", "c", "b", "c", "c"], ["1", "1", "2", "1", "1", "1"])
        {'violations': 1, 'triads': 2, 'share': 0.5, 'items': 2}
    """
    if not len(items) == len(model_a) == len(model_b) == len(winners):
        raise ValueError(
            f"items, model_a, model_b and winners must align row by row: {len(items)}, {len(model_a)}, "
            f"{len(model_b)}, {len(winners)}"
        )
    # per item, per (x, y) with x < y: the sum of its verdicts for x (+1) and y (-1)
    score: dict[Hashable, dict[tuple[Any, Any], int]] = defaultdict(lambda: defaultdict(int))
    for item, a, b, w in zip(items, model_a, model_b, winners, strict=True):
        if a is None or b is None or a == b or w not in ("1", "2"):
            continue
        x, y, sign = (a, b, 1) if str(a) < str(b) else (b, a, -1)
        score[item][(x, y)] += sign if w == "1" else -sign
    violations = triads = with_triad = 0
    for pairs in score.values():
        beats = {(x, y) if s > 0 else (y, x) for (x, y), s in pairs.items() if s != 0}
        models = sorted({m for edge in beats for m in edge}, key=str)
        found = 0
        for x, y, z in combinations(models, 3):
            edges = [e for e in beats if set(e) <= {x, y, z}]
            if len(edges) < 3:
                continue
            found += 1
            wins = {m: sum(1 for e in edges if e[0] == m) for m in (x, y, z)}
            violations += sorted(wins.values()) == [1, 1, 1]  # a cycle: each beats one, none beats both
        triads += found
        with_triad += found > 0
    return {
        "violations": violations,
        "triads": triads,
        "share": violations / triads if triads else None,
        "items": with_triad,
    }
