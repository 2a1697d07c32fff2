"""Public labelled sets by name: the rows a judge is measured on, loaded from the Hub at run time (never shipped).

Each comes with its column mapping (template variable -> column), the kind of its labels, the metric it fits
and, where several people labelled a row, their labels as columns of their own (for the human ceiling,
:func:`hf_judge.analysis.ceiling.human_ceiling`):

* ``judgebench``: ``ScalerLab/JudgeBench``, split ``gpt`` (the 350 GPT-4o response pairs its leaderboard
  ranks on), or ``judgebench:claude`` (its 270 Claude-3.5-Sonnet pairs): a question and two responses, one of
  them correct (``label`` "A>B" or "B>A"), for the ``Comparative`` metric; the label column ``correct`` is the
  correct response's position, "1" or "2"; ``category`` JudgeBench's four (knowledge: mmlu-pro, reasoning:
  livebench-reasoning, math: livebench-math, coding: livecodebench, by the ``source`` prefix).
* ``mt-bench-human``: ``lmsys/mt_bench_human_judgments``, split ``human``: expert votes on pairs of answers to
  the 80 MT-bench questions. The votes on one (question, model pair, turn) become one row, the pair in one
  order (the model names sorted, the winners flipped to match), each vote in a column ``annotator_1``,
  ``annotator_2``, ... ("1", "2" or "tie"; None past a row's own votes); ``majority`` is their mode (None
  when two values tie for it); ``expert_1``, ``expert_2``, ... the experts' votes alone (the set also holds its
  authors' votes, which FastChat's compute_agreement.py does not count as "human"): the votes the mt-bench rule
  compares a judge with, and the human-human figure (``votes``). For ``Comparative``: ``question`` the turn's
  user message; at turn 1 ``response1``/``response2`` are each model's reply; at turn 2, as MT-bench's
  multi-turn judge prompt shows them, each model's whole conversation (its own turn-1 reply included), and
  ``context`` says to judge the answer to the turn-2 question.
* ``helpsteer2`` (``nvidia/HelpSteer2``, split ``validation``): a prompt and a response rated 0-4 for
  helpfulness, correctness, coherence, complexity and verbosity; ``helpsteer2`` fits ``QA_Correctness``
  (label ``correctness``), ``helpsteer2-coherence`` ``QA_Coherence``, ``helpsteer2-complexity``
  ``QA_Complexity``. ``label_threshold`` 3: a rating of 3 or 4 counts as positive where the judge gives
  verdicts (``agreement``'s ``label_threshold``).

A set's labels are checked as it loads, before anything is judged: a label the set never holds (a JudgeBench
label other than "A>B" / "B>A", an MT-bench winner other than model_a / model_b / tie, a HelpSteer2 rating that is
null or outside 0-4, a RewardBench subset it does not have, an AlpacaEval preference outside 1-2: a changed or
hostile copy on the Hub) is a ConfigError naming the repo, the row and the value; so are a duplicate id, an
empty response, a JudgeBench source of no category, a turn outside 1-2 and two GPT-4 votes on one pair.
An MT-bench expert who voted twice on one pair and turn counts once (their later vote). An AlpacaEval pair with
fewer than four votes is left out (as AlpacaEval leaves it out), one with more keeps its first four.
"""

from __future__ import annotations

import random
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset

from ..errors import ConfigError
from ..redact import register
from .label_rules import preference, rating

BENCHMARKS = {
    "judgebench": "ScalerLab/JudgeBench (gpt split; judgebench:claude for the claude split): 350 GPT-4o (270 "
    "Claude) response pairs, one correct, by category; Comparative; MIT",
    "mt-bench-human": "lmsys/mt_bench_human_judgments (human split): expert pairwise votes, several per pair "
    "(the human ceiling), by turn and category; Comparative; CC BY 4.0",
    "mt-bench-gpt4": "lmsys/mt_bench_human_judgments (human and gpt4_pair splits): mt-bench-human with GPT-4's "
    "recorded verdicts, shown beside the candidates at no cost; Comparative; CC BY 4.0",
    "rewardbench": "allenai/reward-bench (filtered split): 2,985 chosen/rejected pairs, a seeded order each, by "
    "section and subset; Comparative; ODC-BY",
    "alpacaeval-human": "tatsu-lab/alpaca_eval (alpaca_farm_human_crossannotations): four people's preferences per "
    "pair (a second human ceiling), by dataset; Comparative; CC BY-NC 4.0: non-commercial use only",
    "helpsteer2": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for correctness; QA_Correctness",
    "helpsteer2-coherence": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for coherence; QA_Coherence",
    "helpsteer2-complexity": "nvidia/HelpSteer2 (validation split): responses rated 0-4 for complexity; QA_Complexity",
}
HELPSTEER_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
_HELPSTEER = {"helpsteer2": "correctness", "helpsteer2-coherence": "coherence", "helpsteer2-complexity": "complexity"}
# an MT-bench vote -> the winner in the pair's own order; "tie (bothbad)" is a tie
_FLIP = {"1": "2", "2": "1", "tie": "tie"}
_JUDGEBENCH = {"A>B": "1", "B>A": "2"}
# JudgeBench's categories by the source prefix (its run_judge.py main; the paper's names)
_JUDGEBENCH_CATEGORIES = {
    "mmlu-pro": "knowledge",
    "livebench-reasoning": "reasoning",
    "livebench-math": "math",
    "livecodebench": "coding",
}
# MT-bench's question ids by category (FastChat's question.jsonl): ten each from 81
_MT_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
_MT_JUDGES = ("expert", "author")
# RewardBench's subsets of the filtered split by section (its rewardbench/constants.py SUBSET_MAPPING)
_REWARDBENCH_SECTIONS = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": (
        "mt-bench-hard",
        "llmbar-natural",
        "llmbar-adver-neighbor",
        "llmbar-adver-GPTInst",
        "llmbar-adver-GPTOut",
        "llmbar-adver-manual",
    ),
    "Safety": (
        "refusals-dangerous",
        "refusals-offensive",
        "xstest-should-refuse",
        "xstest-should-respond",
        "donotanswer",
    ),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
_SECTION_OF = {subset: section for section, subsets in _REWARDBENCH_SECTIONS.items() for subset in subsets}
_ORDER_SEED = "hf-judge rewardbench order"  # the seed of each pair's order (a string: stable across Pythons)
_ALPACA_FILE = "alpaca_farm_human_crossannotations.json"
_ALPACA_VOTES = 4
# an AlpacaEval preference -> a winner (0 is its legacy tie, 1.5 its tie)
_ALPACA_PREFERENCE = {1: "1", 2: "2", 1.5: "tie", 0: "tie"}
_ALPACA_ORDER = ("1", "tie", "2")  # by preference value: 1, 1.5, 2
NON_COMMERCIAL = (
    "alpacaeval-human: tatsu-lab/alpaca_eval's human cross-annotations are licensed CC BY-NC 4.0: non-commercial "
    "use only (the Hub card; its loading script's CC BY 4.0 contradicts it)"
)
_HELPSTEER_SCALE = (0, 4)
_SHOWN = 3  # the bad labels a refusal names


@dataclass
class LabelledSet:
    """A labelled set ready to judge: ``dataset`` (a ``datasets.Dataset``), ``columns`` (template variable ->
    column, as ``score --column``), ``metric`` (the metric name it fits), ``kind`` ("binary", "pairwise" or
    "numeric"), ``label`` (the label column, or None), ``annotators`` (the columns of several people's labels,
    for the human ceiling, or ()), ``label_threshold`` (numeric labels read as verdicts: label >= it, or
    None) and ``source`` (the Hub repo and split it came from, ``ScalerLab/JudgeBench:gpt``); ``rule`` the name
    of the rule its paper computes an evaluator's figure by (``judgebench``, ``mt-bench``, ``rewardbench``,
    ``alpacaeval``, ``all-rows``), ``groups`` its group columns, ``recorded`` a judge's recorded verdicts (name ->
    column: its figures come at no cost), ``items`` (the prompt's columns, the model names' columns) where a row is
    two models' answers to a prompt, ``license_note`` a warning its license asks for, or None; ``notes``: what the
    load left out; ``votes`` the columns of each pair's people's votes that its paper's rule compares a judge with
    (``choose_judge(votes=...)``; MT-bench's experts, AlpacaEval's four people), or (); ``subset_column``
    the column naming each pair's subset, which its rule weighs (``choose_judge(subset_column=...)``:
    RewardBench's), or None."""

    dataset: Dataset
    columns: dict[str, str]
    metric: str
    kind: str
    label: str | None
    annotators: tuple[str, ...] = ()
    label_threshold: float | None = None
    source: str = ""
    rule: str = ""
    groups: tuple[str, ...] = ()
    recorded: dict[str, str] = field(default_factory=dict)
    items: tuple[tuple[str, ...], str, str] | None = None
    license_note: str | None = None
    notes: list[str] = field(default_factory=list)
    votes: tuple[str, ...] = ()
    subset_column: str | None = None


def load_benchmark(
    name: str, *, limit: int | None = None, token: str | None = None, revision: str | None = None
) -> LabelledSet:
    """Load the public labelled set ``name`` (a key of :data:`BENCHMARKS`; ``judgebench:claude`` names the
    JudgeBench split) from the Hub with ``datasets``.

    ``limit``: its first rows only; ``token``, ``revision``: as for any Hub dataset (a gated copy, a pinned
    commit). A set whose license limits its use warns (``UserWarning``) and says so in ``license_note``.

    Example:
        >>> jb = load_benchmark("judgebench:claude", limit=50)  # doctest: +SKIP
        >>> jb.metric, jb.kind, jb.label, jb.columns["response1"], jb.rule, jb.groups  # doctest: +SKIP
        ('Comparative', 'pairwise', 'correct', 'response_A', 'judgebench', ('category',))
    """
    key, _, split = name.strip().lower().partition(":")
    if key not in BENCHMARKS:
        listing = "\n".join(f"  {k}: {v}" for k, v in BENCHMARKS.items())
        raise ConfigError(f"no labelled set named {name!r}; the sets by name are:\n{listing}")
    splits = ("gpt", "claude") if key == "judgebench" else ()
    if split and split not in splits:
        named = f"its splits are {', '.join(f'{key}:{s}' for s in splits)}" if splits else "it has one split"
        raise ConfigError(f"{name!r}: {key} has no split {split!r}; {named}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive number of rows, got {limit}")
    if key == "judgebench":
        return _judgebench(_hub("ScalerLab/JudgeBench", split or "gpt", token, revision), limit)
    if key in ("mt-bench-human", "mt-bench-gpt4"):
        mt = _mt_bench(_hub("lmsys/mt_bench_human_judgments", "human", token, revision), limit)
        if key == "mt-bench-gpt4":
            _with_gpt4(mt, _hub("lmsys/mt_bench_human_judgments", "gpt4_pair", token, revision))
        return mt
    if key == "rewardbench":
        return _rewardbench(_hub("allenai/reward-bench", "filtered", token, revision), limit)
    if key == "alpacaeval-human":
        warnings.warn(NON_COMMERCIAL, UserWarning, stacklevel=2)
        return _alpacaeval(_hub_file("tatsu-lab/alpaca_eval", _ALPACA_FILE, token, revision), limit)
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


def _hub_file(repo: str, path: str, token: str | None, revision: str | None) -> tuple[Dataset, str]:
    """A JSON file of a dataset repo read by its ``hf://`` path with the packaged JSON builder: a loading-script
    repo (``tatsu-lab/alpaca_eval``) is refused by ``datasets`` >= 4 when loaded by name, data files or not. The
    path names the commit (the revision resolved first), so that a cached copy of an older commit is not read."""
    from datasets import load_dataset
    from huggingface_hub import HfApi

    register(token)
    try:
        commit = HfApi(token=token).dataset_info(repo, revision=revision).sha
        files = f"hf://datasets/{repo}@{commit}/{path}"
        ds = load_dataset("json", data_files=files, split="train", token=token)
    except (FileNotFoundError, ConnectionError, OSError) as e:
        raise ConfigError(
            f"could not load {repo}/{path} from the Hub: {e}; check the network (HF_ENDPOINT), a token for a gated "
            "copy (--token), or the revision"
        ) from None
    return ds, f"{repo}/{path}"


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
    _needs(ds, source, ("question", "response_A", "response_B", "label", "source", "pair_id"))
    ds = _first(ds, limit)
    correct = [_JUDGEBENCH.get(str(v).strip()) if isinstance(v, str) else None for v in ds["label"]]
    _refuse(source, "label", ds["label"], correct, "A>B or B>A (the correct response)")
    categories = [_category(v) for v in ds["source"]]
    _refuse(source, "source", ds["source"], categories, f"one of {', '.join(_JUDGEBENCH_CATEGORIES)} (a prefix)")
    _refuse_duplicates(source, "pair_id", ds["pair_id"])
    for column in ("question", "response_A", "response_B"):
        _refuse_empty(source, column, ds[column])
    return LabelledSet(
        dataset=ds.add_column("correct", correct).add_column("category", categories),
        columns={"question": "question", "response1": "response_A", "response2": "response_B"},
        metric="Comparative",
        kind="pairwise",
        label="correct",
        source=source,
        rule="judgebench",
        groups=("category",),
    )


def _category(source: Any) -> str | None:
    if not isinstance(source, str):
        return None
    return next((c for prefix, c in _JUDGEBENCH_CATEGORIES.items() if source.startswith(prefix)), None)


def _mt_bench(loaded: tuple[Dataset, str], limit: int | None) -> LabelledSet:
    ds, source = loaded
    needed = ("question_id", "model_a", "model_b", "winner", "judge", "conversation_a", "conversation_b", "turn")
    _needs(ds, source, needed)
    read = _mt_checked(ds, source)
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
        g["experts"] = [v for who, v in g["votes"].items() if str(who).startswith("expert")]
        g["votes"] = list(g["votes"].values())
    width = max((len(g["votes"]) for _, g in rows), default=0)
    annotators = tuple(f"annotator_{i + 1}" for i in range(width))
    experts = tuple(f"expert_{i + 1}" for i in range(max((len(g["experts"]) for _, g in rows), default=0)))
    table: dict[str, list[Any]] = {
        k: [] for k in ("question_id", "model_a", "model_b", "turn", "question", "context", "response1", "response2")
    }
    table["category"] = [_MT_CATEGORIES[(qid - 81) // 10] for (qid, _, _, _), _ in rows]
    table.update({c: [] for c in (*annotators, "majority", *experts)})
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
        for c, v in zip(experts, g["experts"] + [None] * (len(experts) - len(g["experts"])), strict=True):
            table[c].append(v)
    return LabelledSet(
        dataset=Dataset.from_dict(table),
        columns={"question": "question", "context": "context", "response1": "response1", "response2": "response2"},
        metric="Comparative",
        kind="pairwise",
        label="majority",
        annotators=annotators,
        source=source,
        rule="mt-bench",
        groups=("turn", "category"),
        items=(("question_id", "turn"), "model_a", "model_b"),
        votes=experts,
    )


def _mt_checked(ds: Dataset, source: str) -> list[Any]:
    """Each vote's winner ("1", "2", "tie"), every value the split may not hold refused: a winner, a turn, a
    question id (81-160), one model on both sides, a human judge not an expert or an author."""
    winners = ds["winner"]
    read = [preference(w) if isinstance(w, str) else None for w in winners]
    _refuse(source, "winner", winners, read, "model_a, model_b, tie or tie (bothbad)")
    turns = ds["turn"]
    _refuse(source, "turn", turns, [t if t in (1, 2) else None for t in turns], "1 or 2")
    qids = ds["question_id"]
    _refuse(source, "question_id", qids, [q if isinstance(q, int) and 81 <= q <= 160 else None for q in qids],
            "an MT-bench question id, 81 to 160")  # fmt: skip
    pairs = [f"{a} vs {b}" for a, b in zip(ds["model_a"], ds["model_b"], strict=True)]
    distinct = [p if a and b and a != b else None for p, a, b in zip(pairs, ds["model_a"], ds["model_b"], strict=True)]
    _refuse(source, "model_a/model_b", pairs, distinct, "two different models' names")
    if source.endswith(":human"):
        judges = ds["judge"]
        kinds = [j if isinstance(j, str) and j.startswith(_MT_JUDGES) else None for j in judges]
        _refuse(source, "judge", judges, kinds, "expert_<n> or author_<n>")
    return read


def _with_gpt4(mt: LabelledSet, loaded: tuple[Dataset, str]) -> None:
    """GPT-4's recorded verdict on each row of ``mt`` (its ``gpt4_pair`` split; in the row's own order, as the
    human votes are), as the column ``gpt4_pair``: None where GPT-4 has no vote on it. More than one vote on a
    (question, pair, turn) is refused, as FastChat's compute_agreement.py asserts."""
    ds, source = loaded
    _needs(ds, source, ("question_id", "model_a", "model_b", "winner", "turn"))
    read = _mt_checked(ds, source)
    votes: dict[tuple[Any, str, str, int], str] = {}
    for i, vote in enumerate(ds.select_columns(["question_id", "model_a", "model_b", "turn"])):
        a, b, winner = vote["model_a"], vote["model_b"], str(read[i])
        if b < a:
            a, b, winner = b, a, _FLIP[winner]
        key = (vote["question_id"], a, b, int(vote["turn"]))
        if key in votes:
            raise ConfigError(
                f"{source}: row {i}: a second GPT-4 vote on question {key[0]}, {a} vs {b}, turn {key[3]}: the split "
                "holds one per pair and turn. The copy on the Hub changed: pin a revision (revision=..., --revision)"
            )
        votes[key] = winner
    rows = mt.dataset.select_columns(["question_id", "model_a", "model_b", "turn"]).to_list()
    recorded = [votes.get((r["question_id"], r["model_a"], r["model_b"], r["turn"])) for r in rows]
    mt.dataset = mt.dataset.add_column("gpt4_pair", recorded)
    mt.recorded = {"gpt-4 (recorded)": "gpt4_pair"}
    mt.source = f"{mt.source}+gpt4_pair"


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


def _refuse_duplicates(source: str, column: str, values: list[Any]) -> None:
    seen: dict[Any, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            raise ConfigError(
                f"{source}: row {i}: {column} {v!r} again (first at row {seen[v]}): each is unique in the published "
                "set. The copy on the Hub changed: pin a revision that has the published rows (revision=..., "
                "--revision)"
            )
        seen[v] = i


def _refuse_empty(source: str, column: str, values: list[Any]) -> None:
    text = [v if isinstance(v, str) and v.strip() else None for v in values]
    _refuse(source, column, values, text, "a text (never null or empty)")


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


def _rewardbench(loaded: tuple[Dataset, str], limit: int | None) -> LabelledSet:
    """RewardBench's pairs, each in an order drawn from its id (the chosen response is always the right one, so the
    order as given would give it away): ``response1``/``response2``, ``correct`` the chosen one's position."""
    ds, source = loaded
    _needs(ds, source, ("prompt", "chosen", "rejected", "subset", "id"))
    ds = _first(ds, limit)
    subsets = ds["subset"]
    _refuse(source, "subset", subsets, [_SECTION_OF.get(v) for v in subsets], "one of the filtered split's 23 subsets")
    _refuse_duplicates(source, "id", ds["id"])
    for column in ("prompt", "chosen", "rejected"):
        _refuse_empty(source, column, ds[column])
    chosen, rejected = ds["chosen"], ds["rejected"]
    same = [None if c == r else c for c, r in zip(chosen, rejected, strict=True)]
    _refuse(source, "chosen", chosen, same, "a response other than the rejected one")
    second = [random.Random(f"{_ORDER_SEED} {i}").random() < 0.5 for i in ds["id"]]  # the chosen shown second
    pairs = [(r, c) if s else (c, r) for c, r, s in zip(chosen, rejected, second, strict=True)]
    added = {
        "response1": [p[0] for p in pairs],
        "response2": [p[1] for p in pairs],
        "correct": ["2" if s else "1" for s in second],
        "section": [_SECTION_OF[v] for v in subsets],
    }
    for column, values in added.items():
        ds = ds.add_column(column, values)
    return LabelledSet(
        dataset=ds,
        columns={"question": "prompt", "response1": "response1", "response2": "response2"},
        metric="Comparative",
        kind="pairwise",
        label="correct",
        source=source,
        rule="rewardbench",
        groups=("section", "subset"),
        subset_column="subset",
    )


def _alpacaeval(loaded: tuple[Dataset, str], limit: int | None) -> LabelledSet:
    """AlpacaFarm's cross-annotations, one row per pair (instruction, output_1, output_2) with its four votes."""
    ds, source = loaded
    _needs(ds, source, ("instruction", "output_1", "output_2", "preference", "dataset"))
    preferences = ds["preference"]
    read = [
        _ALPACA_PREFERENCE.get(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None
        for p in preferences
    ]
    _refuse(source, "preference", preferences, read, "1 or 2 (1.5 or the legacy 0: a tie)")
    pairs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, row in enumerate(ds.select_columns(["instruction", "output_1", "output_2", "dataset"])):
        key = (row["instruction"], row["output_1"], row["output_2"])
        pairs.setdefault(key, {"dataset": row["dataset"], "votes": []})["votes"].append(read[i])
    kept = [(k, p) for k, p in pairs.items() if len(p["votes"]) >= _ALPACA_VOTES]
    rows = kept[:limit] if limit is not None else kept
    annotators = tuple(f"annotator_{i + 1}" for i in range(_ALPACA_VOTES))
    table: dict[str, list[Any]] = {c: [] for c in ("instruction", "output_1", "output_2", "dataset", *annotators)}
    table["mode"] = []
    for (instruction, first, second), p in rows:
        votes = p["votes"][:_ALPACA_VOTES]  # AlpacaEval keeps a pair's first four
        for column, value in zip(
            table, (instruction, first, second, p["dataset"], *votes, alpaca_mode(votes)), strict=True
        ):
            table[column].append(value)
    for column in ("instruction", "output_1", "output_2"):
        _refuse_empty(source, column, table[column])
    set_ = LabelledSet(
        dataset=Dataset.from_dict(table),
        columns={"question": "instruction", "response1": "output_1", "response2": "output_2"},
        metric="Comparative",
        kind="pairwise",
        label=None,
        annotators=annotators,
        source=source,
        rule="alpacaeval",
        groups=("dataset",),
        license_note=NON_COMMERCIAL,
        votes=annotators,
    )
    if len(kept) < len(pairs):
        set_.notes.append(
            f"{len(pairs) - len(kept):,} of {len(pairs):,} pairs have fewer than {_ALPACA_VOTES} votes: left out, "
            "as AlpacaEval leaves them out"
        )
    return set_


def alpaca_mode(votes: list[str]) -> str:
    """AlpacaEval's target of a pair's votes: their mode, a tie for it resolved as its ``_random_mode`` resolves
    it (``Series.mode().sample(1, random_state=123)``: of two tied values the larger preference, of three the
    smallest; preference 1 is "1", 1.5 "tie", 2 "2").

    Example:
        >>> alpaca_mode(["1", "1", "2", "1"]), alpaca_mode(["2", "1", "2", "1"]), alpaca_mode(["1", "tie", "2", "2"])
        ('1', '2', '2')
        >>> alpaca_mode(["1", "tie", "2", "tie"]), alpaca_mode(["1", "tie", "2", "1"])
        ('tie', '1')
    """
    counts = Counter(votes)
    top = max(counts.values())
    tied = sorted((v for v, n in counts.items() if n == top), key=_ALPACA_ORDER.index)
    if len(tied) == 3:
        return tied[0]
    return tied[-1]
