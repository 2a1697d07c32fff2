"""A panel of three judges with two samples each, scoring a 1-10 metric and a pairwise one in both orders, against
the loopback judge: what the report page and the run's pictures of samples and judges are checked on.

The judge server gives the n-th request of a prompt the n-th of ``ATTEMPT_SCORES``, so a row's six judgments
(3 judges x 2 samples) of QA_Clarity are 3, 8, 5, 3, 8, 5 in some order: samples that differ, judges that differ.
Comparative: judges j1 and j3 prefer response A in both orders (the orders agree); j2 always prefers the response
shown first (position bias: its orders disagree on every row)."""

from __future__ import annotations

import json

from datasets import Dataset
from helpers import qa_dataset, score

ROWS = 8
ATTEMPT_SCORES = [3, 8, 5]
COLUMNS = {"instruction": "question", "output": "answer", "question": "question", "response1": "a", "response2": "b"}


def _reply(s1: int, s2: int, match: str, model: str) -> dict:
    text = json.dumps({"score_1": s1, "score_2": s2, "explanation": f"{model} {s1}-{s2}"})
    return {"fault": "text", "text": text, "match": match, "model": model}


def panel_dataset(prefix: str = "pp") -> Dataset:
    ds = qa_dataset(ROWS, prefix)
    return ds.add_column("a", [f"resp-A-{i}" for i in range(ROWS)]).add_column(
        "b", [f"resp-B-{i}" for i in range(ROWS)]
    )


def configure(judge) -> None:
    """The loopback judge's replies described in the module docstring."""
    first, swapped = "[Assistant 1]\nresp-A-", "[Assistant 1]\nresp-B-"
    judge.configure(
        attempt_scores=ATTEMPT_SCORES,
        faults=[
            _reply(8, 3, first, "j1"),
            _reply(4, 8, swapped, "j1"),  # B shown first gets 4, A 8: A wins again
            _reply(8, 3, first, "j2"),
            _reply(8, 3, swapped, "j2"),  # the response shown first wins, whichever it is
            _reply(9, 2, first, "j3"),
            _reply(2, 9, swapped, "j3"),
        ],
    )


def panel_run(judge, tmp_path):
    """The scored DatasetDict (its summary holds the panel's agreement)."""
    configure(judge)
    return score(
        panel_dataset(),
        ["QA_Clarity", "Comparative"],
        judge,
        tmp_path,
        models="j1,j2,j3",
        samples=2,
        temperature=0.7,
        columns=COLUMNS,
    )


def _key(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def counts_of(rows: list[dict], columns: list[str]) -> dict[str, int]:
    """Each value's count over every sample (list columns) or value of ``columns`` in ``rows``, keys as the
    page writes them ("7", "2.5", "true")."""
    out: dict[str, int] = {}
    for r in rows:
        for c in columns:
            values = r[c] if isinstance(r[c], list) else [r[c]]
            for v in values:
                if v is None:
                    continue
                out[_key(v)] = out.get(_key(v), 0) + 1
    return out
