"""The docs' pictures of the report page, made, not drawn: a real run of ``hf-judge score`` against the loopback
judge (tests/judge_server.py) on the docs' ``me/reviews`` rows with a ``subject`` column, ``hf-judge view``, and
the page rendered in headless Chromium (Selenium with Debian's ``chromium`` and ``chromium-driver``, as
tests/test_report.py drives it). Writes, in docs/images/:

- ``report.png``: the overview (the run, each score's distribution, the scores by subject);
- ``report-row.png``: the rows table with a row open: its scores and the prompt it was sent;
- ``report-groups.png``: one score's table by subject (``--by subject``).

Run it after a change to the report page (needs the test extra and ``apt-get install chromium chromium-driver``)::

    python docs/screenshots.py          # --out DIR to write elsewhere

It takes about half a minute; the pictures are committed. Nothing is sent beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1400, 1000
SUBJECTS = [  # the subject of each of the docs' me/reviews questions (tests/docs_data.py REVIEWS)
    "geography", "science", "arithmetic", "science", "science", "literature", "science", "arithmetic",
    "geography", "science", "geography", "geography", "history", "science", "geography", "arithmetic",
    "arithmetic", "science", "science", "computing",
]  # fmt: skip


def write_dataset(folder: Path) -> Path:
    """``reviews.jsonl``: the docs' ``me/reviews`` rows (question, answer), each with its subject."""
    sys.path.insert(0, str(ROOT / "tests"))
    from docs_data import REVIEWS

    assert len(REVIEWS) == len(SUBJECTS), "give each of REVIEWS' questions its subject in SUBJECTS"
    path = folder / "reviews.jsonl"
    lines = [
        json.dumps({"question": q, "answer": a, "subject": s}) for (q, a), s in zip(REVIEWS, SUBJECTS, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def judge_server() -> Iterator[str]:
    """The loopback judge in a subprocess, as the tests start it (tests/judge_fixture.py); yields its base URL."""
    sys.path.insert(0, str(ROOT / "tests"))
    from judge_fixture import JudgeServer

    with JudgeServer() as server:
        yield server.base_url


def hf_judge(*args: str, cwd: Path, env: dict[str, str]) -> str:
    """Run this checkout's ``hf-judge`` (``python -m hf_judge.cli``); its output, or an error with it."""
    done = subprocess.run(
        [sys.executable, "-m", "hf_judge.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"hf-judge {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def make_page(work: Path) -> Path:
    """Score the reviews against the loopback judge and write the report page; its path."""
    data = write_dataset(work)
    with judge_server() as base_url:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "sk-test",
            "HF_JUDGE_CACHE": str(work / "cache"),
            "HF_HUB_OFFLINE": "1",
        }
        hf_judge(
            "score", data.name, "--metrics", "QA_All", "--column", "instruction=question", "--column",
            "output=answer", "--model", "gpt-4.1-nano", "--by", "subject", "-o", "reviews-judged",
            cwd=work, env=env,
        )  # fmt: skip
        hf_judge("view", "reviews-judged", cwd=work, env=env)
    return work / "reviews-judged" / "report.html"


def browser():
    """Headless Chromium through Selenium, Debian's browser and driver (nothing is downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        raise SystemExit("no Chromium: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, checked at the end
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # the page's own size, not the window's (less the browser's frame): the same pictures on every machine
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    return driver


def open_page(driver, page: Path, tab: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(page.resolve().as_uri())
    end = time.monotonic() + 20
    while driver.execute_script("return document.body.dataset.ready") != "1":
        if time.monotonic() > end:
            raise SystemExit(f"the report page {page} did not get ready")
        time.sleep(0.1)
    driver.find_element(By.ID, f"tab-{tab}").click()


def take_pictures(page: Path, out: Path) -> list[Path]:
    """The overview, a row open with its prompt, and one score's table by subject."""
    from selenium.webdriver.common.by import By

    out.mkdir(parents=True, exist_ok=True)
    driver = browser()
    try:
        open_page(driver, page, "overview")
        driver.save_screenshot(str(out / "report.png"))
        table = driver.find_element(By.CSS_SELECTOR, ".card.groups[data-column='QA_Correctness']")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", table)
        table.screenshot(str(out / "report-groups.png"))
        open_page(driver, page, "rows")  # a threshold (its count and filter command), a row open with its prompt
        driver.find_element(By.ID, "min-QA_Correctness").send_keys("6")
        driver.find_element(By.CSS_SELECTOR, "#rows tr[data-row='11']").click()  # the longest river in Africa
        driver.execute_script("document.getElementById('table').scrollLeft = 0")
        driver.save_screenshot(str(out / "report-row.png"))
        problems = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        if problems:
            raise SystemExit(f"the report page logged problems: {problems}")
    finally:
        driver.quit()
    return [out / n for n in ("report.png", "report-row.png", "report-groups.png")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=IMAGES, help=f"folder for the PNGs (default: {IMAGES})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hf-judge-screenshots-") as tmp:
        for path in take_pictures(make_page(Path(tmp)), args.out):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
