"""The report page at scale: its size, the time to write it, and its time to interactive in headless Chromium,
for a synthetic scored result (QA_All's seven scores and QA_Clarity with its reason, 1% error rows) of 1,000 and
100,000 rows. Time to interactive: from the navigation to the page drawn (``data-ready``), then the Rows tab drawn
and a sort by a score (each a click and the redraw).

python bench/bench_report.py                    # 1,000 and 100,000 rows
python bench/bench_report.py --rows 1000 1000000
python bench/bench_report.py --panel --rows 1000  # 3 judges x 3 samples: every judgment counted, the heat map

Measured 2026-11-25 on the shared 2-core box (busy), Debian's Chromium 156 (copied into the README, "Look at your
scores"):
      1,000 rows: 0.92 MB, written in 0.14 s; interactive in 0.32 s; Rows tab 0.16 s; sort + threshold 0.24 s
    100,000 rows: 6.07 MB, written in 4.03 s; interactive in 0.27 s; Rows tab 0.29 s; sort + threshold 0.43 s
                  (5,000 rows embedded, every row's 8 scores for the threshold counts)
With --panel (3 judges x 3 samples, 80 score columns), the same box:
      1,000 rows: 2.88 MB, written in 0.41 s; interactive in 0.20 s; Rows tab 0.23 s; sort + threshold 0.44 s
    100,000 rows: 9.59 MB, written in 11.76 s; interactive in 0.39 s; Rows tab 0.27 s; sort + threshold 0.50 s
                  (80 x 100,000 scores are past the 2,000,000 cap: threshold counts over the embedded rows;
                  every judgment counted in 0.18 s, 8 KB of the page)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]


def synthetic(n: int, panel: bool = False):
    """A scored result as score_dataset returns it, without a server: the columns and summary of a real run."""
    from datasets import Dataset, DatasetDict

    from hf_judge.engine.prepare import prompt_record
    from hf_judge.judging.catalogue import resolve_metrics
    from hf_judge.results.scored import ScoredDatasetDict
    from hf_judge.results.summary import RunSummary

    rng = random.Random(0)
    metrics = resolve_metrics(["QA_All", "QA_Clarity"])
    words = [
        "the",
        "a",
        "model",
        "answer",
        "question",
        "score",
        "data",
        "clear",
        "wrong",
        "right",
        "because",
        "therefore",
        "list",
        "value",
    ]
    text = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
    cols: dict[str, list] = {
        "question": [f"q{i}: {text(30)}" for i in range(n)],
        "answer": [text(80) for _ in range(n)],
    }
    for m in metrics:
        for c, t in m.column_types.items():
            cols[c] = [text(25) for _ in range(n)] if t == "string" else [rng.randint(1, 10) for _ in range(n)]
    failed = rng.sample(range(n), n // 100)
    for i in failed:
        cols["QA_Clarity"][i] = cols["QA_Clarity_reason"][i] = None
    errors = Dataset.from_dict(
        {
            "split": ["train"] * len(failed),
            "row": failed,
            "metric": ["QA_Clarity"] * len(failed),
            "kind": ["invalid_json"] * len(failed),
            "message": ["the reply is not JSON"] * len(failed),
            "raw": ["{not json" for _ in failed],
            "attempts": [3] * len(failed),
        }
    )
    agreement = _panel(cols, metrics, rng, n) if panel else {}
    result = ScoredDatasetDict(DatasetDict({"train": Dataset.from_dict(cols), "errors": errors}))
    result.summary = RunSummary(
        model="gpt-4.1-nano",
        rows={"train": n},
        metrics={m.name: m.prompt_hash for m in metrics},
        prompts={m.name: prompt_record(m) for m in metrics},
        columns=[c for c in cols if c not in ("question", "answer")],
        column_mapping={"instruction": "question", "output": "answer"},
        errors={"invalid_json": len(failed)},
        agreement={"train": agreement} if agreement else {},
    )
    return result


def _panel(cols: dict[str, list], metrics, rng: random.Random, n: int) -> dict:
    """--panel: three judges with three samples each, the columns a panel run writes (every sample, each judge's
    mean, spread and majority, the panel's mean) and its agreement figures (as summary.agreement holds them)."""
    import statistics
    from itertools import combinations

    judges = ("j1", "j2", "j3")
    agreement: dict = {}
    for m in metrics:
        for c, t in m.column_types.items():
            if t == "string":
                continue
            means = {}
            for j in judges:
                samples = [
                    None if v is None else [min(10, max(1, v + rng.choice((-1, 0, 0, 1)))) for _ in range(3)]
                    for v in cols[c]
                ]
                cols[f"{c}_samples__{j}"] = samples
                means[j] = cols[f"{c}__{j}"] = [None if x is None else statistics.fmean(x) for x in samples]
                cols[f"{c}_std__{j}"] = [None if x is None else statistics.pstdev(x) for x in samples]
                cols[f"{c}_majority__{j}"] = [None if x is None else statistics.mode(x) for x in samples]
            cols[c] = [None if None in v else statistics.fmean(v) for v in zip(*means.values(), strict=True)]
            pairs = {
                f"{a}~{b}": {
                    "rows": n,
                    "exact": sum(x == y for x, y in zip(means[a], means[b], strict=True) if x is not None) / n,
                }
                for a, b in combinations(judges, 2)
            }
            agreement.setdefault(m.name, {})[c] = {"pairs": pairs}
    return agreement


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait(driver, script: str) -> None:
    while not driver.execute_script(script):
        time.sleep(0.005)


def measure(n: int, driver, folder: Path, panel: bool = False) -> dict:
    from selenium.webdriver.common.by import By

    from hf_judge import write_report

    result = synthetic(n, panel)
    t = time.perf_counter()
    page = write_report(result, folder / f"report-{n}.html", source="me/bench-judged")
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    driver.get(page.as_uri())
    wait(driver, "return document.body.dataset.ready === '1'")
    ready_s = time.perf_counter() - t
    t = time.perf_counter()
    driver.find_element(By.ID, "tab-rows").click()
    wait(driver, "return !!document.querySelector('#rows tbody tr')")
    rows_s = time.perf_counter() - t
    t = time.perf_counter()
    driver.find_element(By.CSS_SELECTOR, "#rows th[data-col='QA_Clarity']").click()
    box = driver.find_element(By.ID, "min-QA_Correctness")
    # past 12 score columns (a panel's) the thresholds start folded: open them, as a reader would
    driver.execute_script("arguments[0].closest('details').open = true; arguments[0].scrollIntoView()", box)
    box.send_keys("7")
    count = driver.find_element(By.ID, "pass-count").text
    sort_s = time.perf_counter() - t
    embedded = driver.execute_script("return document.querySelectorAll('#embedded')[0].textContent")
    return {
        "rows": n,
        "mb": page.stat().st_size / 1e6,
        "write_s": write_s,
        "ready_s": ready_s,
        "rows_tab_s": rows_s,
        "sort_and_threshold_s": sort_s,
        "count": count,
        "embedded": embedded[:90],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--panel", action="store_true", help="three judges with three samples each (every judgment)")
    args = parser.parse_args()
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.rows:
                r = measure(n, driver, Path(tmp), args.panel)
                print(
                    f"{r['rows']:>9,} rows: {r['mb']:.2f} MB, written in {r['write_s']:.2f} s; interactive in "
                    f"{r['ready_s']:.2f} s; Rows tab {r['rows_tab_s']:.2f} s; sort + threshold "
                    f"{r['sort_and_threshold_s']:.2f} s ({r['count']})\n           {r['embedded']}...",
                    flush=True,
                )
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
