"""Builds the "Calibrate against a labelled sample" example of docs/tutorials/trusting-a-judge.md, with a real
run against the loopback judge.

The data has HumanEval's shape (164 tasks, ``task_id``/``prompt``/``entry_point``, three completions each:
492 rows); the judge is ``tests/judge_server.py``, whose scores are a fixed function of the prompt; the
reviewer is simulated: a completion rated ``s`` by the judge passes its tests with probability
``P_PASS(s)``, a known curve, so the calibration it finds can be checked against the truth.

    python docs/calibration_example.py     # prints each command and what it printed

tests/test_calibration_cli.py runs the same steps and checks the README's figures against them.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent
TASKS = 164
COMPLETIONS = 3
SEED = 27


def p_pass(score: float) -> float:
    """The simulated truth: P(a completion passes | the judge scored it ``score``), a logistic curve."""
    return 1 / (1 + math.exp(-1.1 * (score - 6.5)))


def humaneval_like(path: Path) -> Path:
    """HumanEval's shape, made up: a function to write and three completions of it, some wrong."""
    rng = random.Random(SEED)
    ops = [("add", "+"), ("subtract", "-"), ("multiply", "*"), ("max_of", "max"), ("min_of", "min")]
    rows = []
    for t in range(TASKS):
        name, op = ops[t % len(ops)]
        fn = f"{name}_{t}"
        prompt = (
            f"def {fn}(a: int, b: int) -> int:\n"
            f'    """Return the {name.replace("_", " ")} of a and b.\n    >>> {fn}(3, {t % 7 + 1})\n    """\n'
        )
        for c in range(COMPLETIONS):
            body = f"{op}(a, b)" if op in ("max", "min") else f"a {op} b"
            if rng.random() < 0.4:  # a wrong completion: another operation
                body = rng.choice(["a + b + 1", "a - b", "b", "abs(a - b)", "a * b - 1"])
            style = [f"    return {body}\n", f"    return ({body})\n", f"    result = {body}\n    return result\n"][c]
            rows.append({"task_id": f"HumanEval/{t}", "prompt": prompt, "completion": style, "entry_point": fn})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def review(to_label: Path, labels: Path) -> int:
    """The simulated reviewer: fills each row's label (passes its tests?) from ``p_pass`` of the judge's score."""
    rng = random.Random(SEED)
    out = []
    for line in to_label.read_text().splitlines():
        row = json.loads(line)
        row["label"] = rng.random() < p_pass(row["QA_Correctness"])
        row["reviewer"] = "sim"
        out.append(json.dumps(row))
    labels.write_text("\n".join(out) + "\n")
    return len(out)


def truth(kept: Path) -> str:
    """What the simulation knows and a real run would not: the share of the kept rows that pass their tests."""
    from datasets import load_from_disk

    scores = load_from_disk(str(kept))["train"]["QA_Correctness"]
    expected = sum(p_pass(s) for s in scores) / len(scores)
    return f"simulated truth: {expected:.1%} of the {len(scores)} kept rows pass their tests\n"


def steps(base_url: str, min_prob: float | None = None) -> list[list[str]]:
    """The commands of the example, in order (``hf-judge`` left out), run in the example's folder; the last
    uses the threshold the calibration chose (``min_prob``)."""
    out = "humaneval-judged"
    return [
        ["score", "humaneval-like.jsonl", "--metrics", "QA_Correctness", "--column", "instruction=prompt"]
        + ["--column", "output=completion", "--model", "judge", "--base-url", base_url, "-o", out],
        ["sample-for-review", out, "--score", "QA_Correctness", "--n", "200", "--by", "stratified"]
        + ["-o", "to-label.jsonl"],
        ["calibrate", out, "--score", "QA_Correctness", "--labels", "labels.jsonl", "--target-precision", "0.9"],
        ["filter", out, "--min-prob", f"QA_Correctness={min_prob}", "--calibration", f"{out}/calibration.json"]
        + ["-o", "humaneval-best"],
    ]


def run(folder: Path, base_url: str, main) -> dict[str, str]:
    """Run the example in ``folder`` with ``main`` (hf_judge.cli.main), capturing what each command printed."""
    import contextlib
    import io
    import os

    here = Path.cwd()
    os.chdir(folder)
    try:
        humaneval_like(Path("humaneval-like.jsonl"))
        printed: dict[str, str] = {}
        for i in range(4):
            threshold = None
            if i == 3:
                threshold = json.loads(Path("humaneval-judged/calibration.json").read_text())["threshold"]
            args = steps(base_url, threshold and round(threshold["probability"], 3))[i]
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                code = main(args)
            assert code == 0, (args, buf.getvalue())
            printed[args[0]] = buf.getvalue()
            if args[0] == "sample-for-review":
                review(Path("to-label.jsonl"), Path("labels.jsonl"))
        printed["truth"] = truth(Path("humaneval-best"))
    finally:
        os.chdir(here)
    return printed


if __name__ == "__main__":
    import os
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from judge_fixture import JudgeServer

    from hf_judge.cli import main

    with JudgeServer() as server, tempfile.TemporaryDirectory() as tmp:
        os.environ["HF_JUDGE_CACHE"] = str(Path(tmp, "cache"))  # a fresh reply store, not yours
        printed = run(Path(tmp), server.base_url, main)
        picture = Path(tmp, "humaneval-judged", "QA_Correctness_reliability.png")  # with the plots extra
        if picture.exists():
            (HERE / "calibration-reliability.png").write_bytes(picture.read_bytes())
    print("\n".join(f"$ hf-judge {name} ...\n{out}" for name, out in printed.items()))
