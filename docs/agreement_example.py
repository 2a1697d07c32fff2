"""Builds the agreement example of docs/tutorials/trusting-a-judge.md: a simulated labelled sample, its report
and pictures.

The sample is simulated (a judge that is the human score plus noise, lenient on poor answers, with a few
failed and unlabelled rows) so that the example runs offline; your report comes from your labels.

    python docs/agreement_example.py    # writes docs/agreement-example.jsonl and docs/agreement-calibration.png
"""

from pathlib import Path

import numpy as np
from datasets import Dataset

from hf_judge import agreement
from hf_judge.plots import report_pngs

HERE = Path(__file__).parent
rng = np.random.default_rng(19)
human = rng.integers(1, 11, 300)
judge = np.clip(human + rng.integers(-2, 3, 300) + (human <= 3) * 2, 1, 10)  # too kind to poor answers
judge_col = [int(v) for v in judge]
human_col = [int(v) for v in human]
for i in rng.choice(300, 6, replace=False):
    judge_col[i] = None  # the metric failed on these rows (see the errors split)
for i in rng.choice(300, 4, replace=False):
    human_col[i] = None  # not labelled yet
ds = Dataset.from_dict({"QA_Correctness": judge_col, "human_score": human_col})
ds.to_json(HERE / "agreement-example.jsonl")
report = agreement(ds, score="QA_Correctness", label="human_score", seed=0)
print(report)
pictures = report_pngs(report)
(HERE / "agreement-calibration.png").write_bytes(pictures["QA_Correctness_vs_human_score_calibration.png"])
