"""Public labelled sets by name: the rows a judge is measured on, loaded from the Hub at run time (never shipped).

Each comes with its column mapping (template variable -> column), the kind of its labels, the metric it fits
and, where several people labelled a row, their labels as columns of their own (for the human ceiling,
:func:`hf_judge.analysis.ceiling.human_ceiling`):

* ``judgebench``: ``ScalerLab/JudgeBench``, split ``gpt`` (the 350 GPT-4o response pairs its leaderboard
  ranks on): a question and two responses, one of them correct (``label`` "A>B" or "B>A"), for the
  ``Comparative`` metric; the label column ``correct`` is the correct response's position, "1" or "2".
* ``mt-bench-human``: ``lmsys/mt_bench_human_judgments``, split ``human``: expert votes on pairs of answers to
  the 80 MT-bench questions. The votes on one (question, model pair, turn) become one row, the pair in one
  order (the model names sorted, the winners flipped to match), each vote in a column ``annotator_1``,
  ``annotator_2``, ... ("1", "2" or "tie"; None past a row's own votes); ``majority`` is their mode (None
  when two values tie for it). For ``Comparative``: ``question`` the turn's user message; at turn 1
  ``response1``/``response2`` are each model's reply; at turn 2, as MT-bench's multi-turn judge prompt shows
  them, each model's whole conversation (its own turn-1 reply included), and ``context`` says to judge the
  answer to the turn-2 question.
* ``helpsteer2`` (``nvidia/HelpSteer2``, split ``validation``): a prompt and a response rated 0-4 for
  helpfulness, correctness, coherence, complexity and verbosity; ``helpsteer2`` fits ``QA_Correctness``
  (label ``correctness``), ``helpsteer2-coherence`` ``QA_Coherence``, ``helpsteer2-complexity``
  ``QA_Complexity``. ``label_threshold`` 3: a rating of 3 or 4 counts as positive where the judge gives
  verdicts (``agreement``'s ``label_threshold``).

A set's labels are checked as it loads, before anything is judged: a label the set never holds (a JudgeBench
label other than "A>B" / "B>A", an MT-bench winner other than model_a / model_b / tie, a HelpSteer2 rating that is
null or outside 0-4: a changed or hostile copy on the Hub) is a ConfigError naming the repo, the row and the value.
An MT-bench expert who voted twice on one pair and turn counts once (their later vote).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from datasets import Dataset

from ..errors import ConfigError
from ..redact import register
from .label_rules import preference, rating

BENCHMARKS = {
    "judgebench": "ScalerLab/JudgeBench (gpt split): 350 GPT-4o response pairs, one correct; Comparative",
    "mt-bench-human": "lmsys/mt_bench_human_judgments (human split): expert pairwise votes, several per pair "
    "(the human ceiling); Comparative",
    "helpsteer2": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for correctness; QA_Correctness",
    "helpsteer2-coherence": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for coherence; QA_Coherence",
    "helpsteer2-complexity": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for complexity; QA_Complexity",
}
HELPSTEER_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
_HELPSTEER = {"helpsteer2": "correctness", "helpsteer2-coherence": "coherence", "helpsteer2-complexity": "complexity"}
# an MT-bench vote -> the winner in the pair's own order; "tie (bothbad)" is a tie
_FLIP = {"1": "2", "2": "1", "tie": "tie"}
_JUDGEBENCH = {"A>B": "1", "B>A": "2"}
_HELPSTEER_SCALE = (0, 4)
_SHOWN = 3  # the bad labels a refusal names


@dataclass
class LabelledSet:
    """A labelled set ready to judge: ``dataset`` (a ``datasets.Dataset``), ``columns`` (template variable ->
    column, as ``score --column``), ``metric`` (the metric name it fits), ``kind`` ("binary", "pairwise" or
    "numeric"), ``label`` (the label column, or None), ``annotators`` (the columns of several people's labels,
    for the human ceiling, or ()), ``label_threshold`` (numeric labels read as verdicts: label >= it, or
    None) and ``source`` (the Hub repo and split it came from, ``ScalerLab/JudgeBench:gpt``)."""

    dataset: Dataset
    columns: dict[str, str]
    metric: str
    kind: str
    label: str | None
    annotators: tuple[str, ...] = ()
    label_threshold: float | None = None
    source: str = ""


def load_benchmark(
    name: str, *, limit: int | None = None, token: str | None = None, revision: str | None = None
) -> LabelledSet:
    """Load the public labelled set ``name`` (a key of :data:`BENCHMARKS`) from the Hub with ``datasets``.

    ``limit``: its first rows only; ``token``, ``revision``: as for any Hub dataset (a gated copy, a pinned
    commit).

    Example:
        >>> jb = load_benchmark("judgebench", limit=50)  # doctest: +SKIP
        >>> jb.metric, jb.kind, jb.label, jb.columns["response1"]  # doctest: +SKIP
        ('Comparative', 'pairwise', 'correct', 'response_A')
    """
    key = name.strip().lower()
    if key not in BENCHMARKS:
        listing = "\n".join(f"  {k}: {v}" for k, v in BENCHMARKS.items())
        raise ConfigError(f"no labelled set named {name!r}; the sets by name are:\n{listing}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive number of rows, got {limit}")
    if key == "judgebench":
        return _judgebench(_hub("ScalerLab/JudgeBench", "gpt", token, revision), limit)
    if key == "mt-bench-human":
        return _mt_bench(_hub("lmsys/mt_bench_human_judgments", "human", token, revision), limit)
    return _helpsteer(_hub("nvidia/HelpSteer2", "validation", token, revision), _HELPSTEER[key], limit)


def _hub(repo: str, split: str, token: str | None, revision: str | None) -> tuple[Dataset, str]:
    from datasets import load_dataset

    register(token)
    try:
        ds = load_dataset(repo, split=split, token=token, revision=revision)
    except (FileNotFoundError, ConnectionError, OSError) as e:
        raise ConfigError(
            f"could not load {repo} (split {split}) from the Hub: {e}; check the network (HF_ENDPOINT), a token "
            "for a gated copy (--token), or the revision"
        ) from None
    return ds, f"{repo}:{split}"


def _first(ds: Dataset, limit: int | None) -> Dataset:
    return ds.select(range(min(limit, len(ds)))) if limit is not None else ds


def _needs(ds: Dataset, source: str, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise ConfigError(
            f"{source} has no column {missing[0]!r} (it has: {', '.join(ds.column_names)}): the set changed its "
            "schema; pin a revision that has it (revision=..., --revision)"
        )


def _judgebench(loaded: tuple[Dataset, str], limit: int | None) -> LabelledSet:
    ds, source = loaded
    _needs(ds, source, ("question", "response_A", "response_B", "label"))
    ds = _first(ds, limit)
    correct = [_JUDGEBENCH.get(str(v).strip()) if isinstance(v, str) else None for v in ds["label"]]
    _refuse(source, "label", ds["label"], correct, "A>B or B>A (the correct response)")
    return LabelledSet(
        dataset=ds.add_column("correct", correct),
        columns={"question": "question", "response1": "response_A", "response2": "response_B"},
        metric="Comparative",
        kind="pairwise",
        label="correct",
        source=source,
    )


def _mt_bench(loaded: tuple[Dataset, str], limit: int | None) -> LabelledSet:
    ds, source = loaded
    needed = ("question_id", "model_a", "model_b", "winner", "judge", "conversation_a", "conversation_b", "turn")
    _needs(ds, source, needed)
    winners = ds["winner"]
    read = [preference(w) if isinstance(w, str) else None for w in winners]
    _refuse(source, "winner", winners, read, "model_a, model_b, tie or tie (bothbad)")
    groups: dict[tuple[Any, str, str, int], dict[str, Any]] = {}
    for i, vote in enumerate(ds):
        a, b, winner = vote["model_a"], vote["model_b"], str(read[i])  # every one read: refused above otherwise
        conv_a, conv_b = vote["conversation_a"], vote["conversation_b"]
        if b < a:  # one order per pair: the votes on (b, a) are votes on (a, b), their winners flipped
            a, b, winner, conv_a, conv_b = b, a, _FLIP[winner], conv_b, conv_a
        key = (vote["question_id"], a, b, int(vote["turn"]))
        row = groups.setdefault(key, {"votes": {}, "a": conv_a, "b": conv_b})
        row["votes"][vote["judge"] or i] = winner  # an expert who voted twice counts once: the later vote
    rows = list(groups.items())[:limit] if limit is not None else list(groups.items())
    for _, g in rows:
        g["votes"] = list(g["votes"].values())
    width = max((len(g["votes"]) for _, g in rows), default=0)
    annotators = tuple(f"annotator_{i + 1}" for i in range(width))
    table: dict[str, list[Any]] = {
        k: [] for k in ("question_id", "model_a", "model_b", "turn", "question", "context", "response1", "response2")
    }
    table.update({c: [] for c in (*annotators, "majority")})
    for (qid, a, b, turn), g in rows:
        question, context, first = _turn(g["a"], turn)
        second = _turn(g["b"], turn)[2]
        for k, v in zip(
            ("question_id", "model_a", "model_b", "turn", "question", "context", "response1", "response2"),
            (qid, a, b, turn, question, context, first, second),
            strict=True,
        ):
            table[k].append(v)
        votes = g["votes"] + [None] * (width - len(g["votes"]))
        for c, v in zip(annotators, votes, strict=True):
            table[c].append(v)
        table["majority"].append(_majority(g["votes"]))
    return LabelledSet(
        dataset=Dataset.from_dict(table),
        columns={"question": "question", "context": "context", "response1": "response1", "response2": "response2"},
        metric="Comparative",
        kind="pairwise",
        label="majority",
        annotators=annotators,
        source=source,
    )


def _refuse(source: str, column: str, values: list[Any], read: list[Any], accepted: str) -> None:
    """A ConfigError naming the rows of ``source`` whose ``column`` value read as None (no label the set holds)."""
    bad = [i for i, r in enumerate(read) if r is None]
    if not bad:
        return
    shown = "; ".join(f"row {i}: {values[i]!r}" for i in bad[:_SHOWN])
    more = f"; and {len(bad) - _SHOWN:,} more" if len(bad) > _SHOWN else ""
    raise ConfigError(
        f"{source}: {len(bad):,} {column} value{'s' if len(bad) != 1 else ''} that the set never holds ({shown}{more}):"
        f" a {column} there is {accepted}. The copy on the Hub changed (or is not the published set): pin a "
        "revision that has the published labels (revision=..., --revision)"
    )


def _majority(votes: list[str]) -> str | None:
    counts = Counter(votes).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _turn(conversation: list[dict[str, str]], turn: int) -> tuple[str, str, str]:
    """(the user's message of ``turn`` (1-based), the context, the assistant's part). At turn 1: the reply. At a
    later turn, as MT-bench's own multi-turn judge prompt (FastChat's ``pair-v2-multi-turn``) shows it: the
    assistant's part is its whole conversation up to that turn, its own earlier replies included, and the context
    says which answer to judge."""
    users = [m["content"] for m in conversation if m.get("role") == "user"]
    replies = [m["content"] for m in conversation if m.get("role") == "assistant"]
    if len(users) < turn or len(replies) < turn:
        return (users[-1] if users else "", "", replies[-1] if replies else "")
    if turn == 1:
        return users[0], "", replies[0]
    exchanges = [f"### User:\n{u}\n\n### Assistant:\n{r}" for u, r in zip(users[:turn], replies[:turn], strict=True)]
    context = (
        f"This is turn {turn} of a conversation: each assistant's part below is its whole conversation with the "
        f"user, its own earlier replies included. Judge only its answer to the user's question of turn {turn}."
    )
    return users[turn - 1], context, "\n\n".join(exchanges)


def _helpsteer(loaded: tuple[Dataset, str], attribute: str, limit: int | None) -> LabelledSet:
    ds, source = loaded
    _needs(ds, source, ("prompt", "response", *HELPSTEER_ATTRIBUTES))
    ds = _first(ds, limit)
    lo, hi = _HELPSTEER_SCALE
    ratings = ds[attribute]
    read = [r if (r := rating(v)) is not None and lo <= r <= hi else None for v in ratings]
    _refuse(source, attribute, ratings, read, f"a rating from {lo} to {hi}")
    return LabelledSet(
        dataset=ds,
        columns={"instruction": "prompt", "output": "response"},
        metric=f"QA_{attribute.capitalize()}",
        kind="numeric",
        label=attribute,
        label_threshold=3.0,
        source=source,
    )
