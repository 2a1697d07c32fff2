"""docs/screenshots.py makes the docs' pictures of the report page from a real run (loopback judge, hf-judge score
and view, headless Chromium): it runs, and each picture is the page it names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "screenshots.py"


def test_the_screenshots_script_renders_the_report_page_of_a_real_run(tmp_path):
    from PIL import Image

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = ["report.png", "report-row.png", "report-groups.png"]
    assert done.stdout.split() == [w for n in names for w in ("wrote", str(tmp_path / n))]
    pictures = {n: Image.open(tmp_path / n).convert("L") for n in names}
    assert pictures["report.png"].size == pictures["report-row.png"].size == (1400, 1000)
    # the table of one score by subject: six subjects under its header, a picture of that table only
    width, height = pictures["report-groups.png"].size
    assert 200 < width < 1400 and 150 < height < 400
    for picture in pictures.values():  # a page, not a blank or an error: dark text on a light ground
        histogram = picture.histogram()
        assert sum(histogram[:100]) > 0.005 * sum(histogram) and sum(histogram[200:]) > 0.5 * sum(histogram)
    # the committed pictures are made by this script: the same sizes
    committed = SCRIPT.parent / "images"
    assert {n: Image.open(committed / n).size for n in names} == {n: p.size for n, p in pictures.items()}
