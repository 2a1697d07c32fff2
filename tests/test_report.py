"""The report page (``hf-judge view``) in a real browser: headless Chromium through Selenium (Debian's
``chromium`` and ``chromium-driver``; no browser is downloaded). One browser for the module; each test loads the
page from ``file://``, so nothing but the file can be read.

Checked: no console error and no network request; sorting; a threshold's count is ``filter_by_scores``'s and the
command shown keeps those rows; a row's reason and the prompt shown are those the judge server received; labels
marked in the page download in the labels layout. The docs' pictures of the page: docs/screenshots.py.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict, load_dataset, load_from_disk
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge import filter_by_scores, write_report
from hf_judge.cli.inputs import example_dataset_path, load_input

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), "apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _scored_rows():
    """40 rows with LaTeX braces; row 5's answer null (no request), row 3 answered out of range (an error)."""
    ds = qa_dataset(40, "rep")
    return ds.map(lambda r, i: {"answer": None if i == 5 else r["answer"]}, with_indices=True)


@pytest.fixture(scope="module")
def result(judge_server_proc, tmp_path_factory):
    """A result folder scored against the loopback judge, whose request bodies it records, and its page."""
    judge = judge_server_proc
    judge.reset()
    judge.configure(record=True, faults=[{"fault": "out_of_range", "match": "rep-3:"}])
    tmp = tmp_path_factory.mktemp("report")
    scored = score(_scored_rows(), ["QA_All", "QA_Clarity"], judge, tmp, retries=0)
    bodies = judge.stats()["bodies"]
    judge.reset()
    folder = tmp / "judged"
    scored.save_to_disk(folder)
    page = write_report(scored, folder / "report.html", source=str(folder))
    return {"scored": scored, "folder": folder, "page": page, "bodies": bodies}


def _download_labels(browser, downloads: Path, lines: int) -> Path:
    """Click the Labelling tab's download, and wait for the labels file to hold ``lines`` lines."""
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, "tab-labels").click()
    for old in downloads.glob("labels*.jsonl"):
        old.unlink()
    browser.find_element(By.ID, "download-labels").click()
    path = _wait(lambda: next(iter(downloads.glob("labels*.jsonl")), None))
    assert path is not None, "no labels.jsonl downloaded"
    _wait(lambda: path.read_text().count("\n") == lines)
    return path


def _open(browser, page: Path, tab: str | None = None) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page.resolve().as_uri())
    browser.execute_script("localStorage.clear()")
    browser.get(page.resolve().as_uri())
    _wait(lambda: browser.execute_script("return document.body.dataset.ready") == "1")
    if tab:
        browser.find_element(By.ID, f"tab-{tab}").click()


def _wait(check, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > end:
            return got
        time.sleep(0.05)


def _problems(browser) -> list:
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _text(element) -> str:
    return element.get_attribute("textContent")


def _cells(root, rows_css: str = "tbody tr") -> list[list[str]]:
    """The text of every cell of the rows ``rows_css`` finds under ``root`` (the browser or an element)."""
    from selenium.webdriver.common.by import By

    return [
        [_text(td) for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in root.find_elements(By.CSS_SELECTOR, rows_css)
    ]


def test_page_loads_offline_with_no_console_error_and_no_request(browser, result):
    from selenium.webdriver.common.by import By

    html = result["page"].read_text()
    assert "http://" not in html.split("<script type='application/json'")[0]  # no stylesheet or font from elsewhere
    _open(browser, result["page"])
    browser.get_log("browser")  # the clearing load's
    browser.get(result["page"].resolve().as_uri())
    _wait(lambda: browser.execute_script("return document.body.dataset.ready") == "1")
    for tab in ("rows", "errors", "labels", "overview"):
        browser.find_element(By.ID, f"tab-{tab}").click()
    assert _problems(browser) == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    text = browser.find_element(By.ID, "view").text
    assert "QA_Clarity" in text and "out_of_range" in text and "127.0.0.1" in text  # histograms, errors, host


def test_sorting_by_a_score_reorders_the_rows(browser, result):
    from selenium.webdriver.common.by import By

    _open(browser, result["page"], "rows")
    train = result["scored"]["train"]

    def shown() -> list[int]:
        return [int(r.get_attribute("data-row")) for r in browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]

    assert shown() == list(range(40))
    browser.find_element(By.CSS_SELECTOR, "#rows th[data-col='QA_Clarity']").click()
    values = train["QA_Clarity"]
    # ascending, nulls last, ties in row order: as Python sorts them
    key = [(v is None, v or 0, i) for i, v in enumerate(values)]
    assert shown() == [i for *_, i in sorted(key)]
    browser.find_element(By.CSS_SELECTOR, "#rows th[data-col='QA_Clarity']").click()
    desc = shown()
    nulls = [i for i, v in enumerate(values) if v is None]
    assert desc[len(desc) - len(nulls) :] == nulls and [values[i] for i in desc[: -len(nulls) or None]] == sorted(
        (v for v in values if v is not None), reverse=True
    )


def test_a_threshold_counts_what_filter_by_scores_keeps_and_its_command_keeps_them(browser, result, capfd, tmp_path):
    from selenium.webdriver.common.by import By

    _open(browser, result["page"], "rows")
    browser.find_element(By.ID, "min-QA_Clarity").send_keys("6")
    browser.find_element(By.ID, "max-QA_Relevance").send_keys("8")
    count = int(browser.find_element(By.ID, "pass-count").get_attribute("data-pass"))
    kept = filter_by_scores(result["scored"], min={"QA_Clarity": 6}, max={"QA_Relevance": 8})
    assert 0 < count == len(kept["train"]) < 40
    command = _text(browser.find_element(By.ID, "filter-command"))
    args = shlex.split(command)
    assert args[:2] == ["hf-judge", "filter"] and args[2] == str(result["folder"])
    code, out, _ = run_cli(capfd, *args[1:], "--output-dir", tmp_path / "best")
    assert code == 0 and f"train: kept {count} of 40 rows" in out
    # a saved result holds its page: the filtered one too
    page = tmp_path / "best" / "report.html"
    assert f"report         {page}: open" in out and page.is_file()
    browser.find_element(By.ID, "keep-missing").click()  # row 3 and 5 have null scores: kept now
    with_nulls = filter_by_scores(result["scored"], min={"QA_Clarity": 6}, max={"QA_Relevance": 8}, keep_missing=True)
    assert int(browser.find_element(By.ID, "pass-count").get_attribute("data-pass")) == len(with_nulls["train"])
    assert _problems(browser) == []


def _sent(bodies: list[dict], metric: str, marker: str) -> list[dict]:
    [body] = [
        b
        for b in bodies
        if b["response_format"]["json_schema"]["name"] == metric and any(marker in m["content"] for m in b["messages"])
    ]
    return [{"role": m["role"], "content": m["content"]} for m in body["messages"]]


def test_a_row_shows_its_reason_and_the_prompt_the_judge_received(browser, result, capfd):
    from selenium.webdriver.common.by import By

    _open(browser, result["page"], "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='7']").click()
    detail = browser.find_element(By.ID, "detail")
    reason = detail.find_element(By.CSS_SELECTOR, ".metric[data-metric='QA_Clarity'] pre.reason")
    assert _text(reason) == result["scored"]["train"][7]["QA_Clarity_reason"]
    for metric in ("QA_Clarity", "QA_All"):
        shown = [
            {"role": e.get_attribute("data-role"), "content": _text(e)}
            for e in detail.find_elements(By.CSS_SELECTOR, f"details.prompt[data-metric='{metric}'] pre.prompt-message")
        ]
        assert shown == _sent(result["bodies"], metric, "rep-7:")  # the braces of \frac{a}{b} and {x} included
    code, out, _ = run_cli(capfd, "show-prompt", result["folder"], "--row", 7, "--metric", "QA_Clarity", "--json")
    assert code == 0 and json.loads(out) == [_sent(result["bodies"], "QA_Clarity", "rep-7:")]
    # row 5's answer is null: nothing was sent, and the page says so
    browser.find_element(By.ID, "detail-close").click()
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='5']").click()
    none = detail.find_element(By.CSS_SELECTOR, "details.prompt[data-metric='QA_Clarity'] .prompt-none")
    assert "null_input" in _text(none)
    assert _problems(browser) == []


def test_labels_marked_in_the_page_download_in_the_labels_layout(browser, result, downloads):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, result["page"], "labels")
    browser.find_element(By.ID, "reviewer").send_keys("ana")
    browser.find_element(By.ID, "tab-rows").click()
    marks = [(2, "QA_Clarity", "7", "too terse"), (4, "QA_Relevance", False, "")]
    for row, column, label, note in marks:
        browser.find_element(By.CSS_SELECTOR, f"#rows tr[data-row='{row}']").click()
        Select(browser.find_element(By.ID, "label-score")).select_by_value(column)
        if isinstance(label, bool):
            browser.find_element(By.ID, "label-good" if label else "label-bad").click()
        else:
            field = browser.find_element(By.ID, "label-value")
            field.clear()  # labels follow the rows: one made by another test on these rows shows here first
            field.send_keys(label)
        browser.find_element(By.ID, "label-note").send_keys(note)
        browser.find_element(By.ID, "label-save").click()
        browser.find_element(By.ID, "detail-close").click()
    path = _download_labels(browser, downloads, lines=2)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    layout = [{k: r[k] for k in ("split", "row", "score", "label", "note", "reviewer")} for r in rows]
    assert layout == [
        {"split": "train", "row": 2, "score": "QA_Clarity", "label": 7, "note": "too terse", "reviewer": "ana"},
        {"split": "train", "row": 4, "score": "QA_Relevance", "label": False, "note": None, "reviewer": "ana"},
    ]
    train = result["scored"]["train"]
    assert rows[0]["judge_score"] == train[2]["QA_Clarity"] and rows[0]["text"] == train[2]["question"]
    assert _problems(browser) == []


def test_labels_downloaded_from_the_page_feed_agreement_with_the_figures_on_those_rows(
    browser, result, downloads, capfd, tmp_path
):
    """The review loop closed: labels marked in the page, downloaded, read by ``hf-judge agreement --labels``
    give the figures that :func:`hf_judge.agreement` gives on the same rows with the labels as a column."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from hf_judge import agreement
    from hf_judge.cli.agreement import judged_columns
    from hf_judge.results.summary import RunSummary

    _open(browser, result["page"], "rows")
    marks = {0: 8, 1: 3, 2: 7, 4: 9, 6: 2, 7: 6, 9: 5}  # row -> a reviewer's 1-10 label
    for row, label in marks.items():
        browser.find_element(By.CSS_SELECTOR, f"#rows tr[data-row='{row}']").click()
        Select(browser.find_element(By.ID, "label-score")).select_by_value("QA_Clarity")
        field = browser.find_element(By.ID, "label-value")
        field.clear()  # labels follow the rows: another test's label of this row on these rows shows here first
        field.send_keys(str(label))
        browser.find_element(By.ID, "label-save").click()
        browser.find_element(By.ID, "detail-close").click()
    path = _download_labels(browser, downloads, lines=len(marks))
    out_json = tmp_path / "agreement.json"
    code, out, err = run_cli(
        capfd, "agreement", result["folder"], "--labels", path, "--score", "QA_Clarity", "--out", out_json,
        "--resamples", 200,
    )  # fmt: skip
    assert code == 0, err
    got = json.loads(out_json.read_text())
    train = result["scored"]["train"]
    rows = sorted(marks)
    labelled = train.select(rows).add_column(path.name, [marks[r] for r in rows])
    judged = judged_columns(RunSummary.load(result["folder"]), "QA_Clarity")  # as the command finds them
    want = agreement(
        DatasetDict({"train": labelled}), "QA_Clarity", path.name, split="train", length_of=judged, resamples=200
    )
    assert got["pairs"] == want.pairs == sum(train[r]["QA_Clarity"] is not None for r in rows) >= 5
    assert got["figures"]["spearman"] is not None and got["figures"]["length_rho"] is not None
    assert got == json.loads(want.to_json())
    assert _problems(browser) == []


def test_the_example_dataset_page_from_hf_judge_view(browser, judge, tmp_path, capfd, monkeypatch):
    """The example dataset scored by the loopback judge, viewed with `hf-judge view`, a row open."""
    from selenium.webdriver.common.by import By

    monkeypatch.chdir(tmp_path)
    ds = load_input(str(example_dataset_path()))
    scored = score(ds, ["QA_All"], judge, tmp_path, columns=None)
    scored.save_to_disk("example-judged")
    code, out, _ = run_cli(capfd, "view", "example-judged")
    page = tmp_path / "example-judged" / "report.html"
    assert code == 0 and "report written to example-judged/report.html" in out and page.as_uri() in out
    _open(browser, page, "rows")
    browser.find_element(By.ID, "min-QA_Correctness").send_keys("7")
    browser.find_element(By.CSS_SELECTOR, "#rows th[data-col='QA_Correctness']").click()
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='1']").click()
    assert _problems(browser) == []


def test_a_panel_with_samples_and_logprobs_shows_each_judge_and_sample(browser, judge, tmp_path):
    from selenium.webdriver.common.by import By

    judge.configure(record=True)
    scored = score(
        qa_dataset(6, "pan"), ["QA_Clarity"], judge, tmp_path, models="j1,j2", samples=2, temperature=0.7, logprobs=True
    )
    page = write_report(scored, tmp_path / "panel.html", source="panel", cache_dir=tmp_path / "cache")
    found = _embedded(page)["splits"]["train"]["distributions"]
    assert found["found"] == found["looked"] == 12  # each (row, judge): both its samples, from the store
    for p, entries in found["by_metric"]["QA_Clarity"].items():
        row = scored["train"][_embedded(page)["splits"]["train"]["indices"][int(p)]]
        for e in entries:
            # the mean of the judge's two samples' distributions: its _expected column is that one's expectation
            dist = e["outputs"]["QA_Clarity"]
            assert e["samples"] == 2 and sum(dist.values()) == pytest.approx(1)
            expected = sum(int(v) * q for v, q in dist.items())
            assert expected == pytest.approx(row[f"QA_Clarity_expected__{e['judge']}"])
    _open(browser, page, "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='4']").click()
    box = browser.find_element(By.CSS_SELECTOR, "#detail .metric[data-metric='QA_Clarity']")
    text, row = box.text, scored["train"][4]
    for column in ("QA_Clarity__j2", "QA_Clarity_samples__j1", "QA_Clarity_expected", "QA_Clarity_std__j1"):
        assert column in text and column in row
    shown = [_text(e) for e in box.find_elements(By.CSS_SELECTOR, "details.prompt pre.prompt-message")]
    sent = {  # every judge and sample of the row was sent the same messages
        tuple(m["content"] for m in b["messages"])
        for b in judge.stats()["bodies"]
        if any("pan-4:" in m["content"] for m in b["messages"])
    }
    assert len(sent) == 1 and shown == list(sent.pop())
    judges = [d.get_attribute("data-judge") for d in box.find_elements(By.CSS_SELECTOR, ".dist[data-col='QA_Clarity']")]
    assert judges == ["j1", "j2"]
    _open(browser, page, "overview")  # each judge's length bias, a row of its own beside the aggregate's
    bias = browser.find_element(By.XPATH, "//h2[.='Length bias']/following-sibling::table[1]").text
    assert all(k in bias for k in ("QA_Clarity__j1", "QA_Clarity__j2", "judge", "panel_column", "rho"))
    assert _problems(browser) == []


def test_a_panel_with_samples_and_both_orders_draws_every_judgment_and_the_judges_agreement(browser, judge, tmp_path):
    """Issue 26: with samples, a panel and a pairwise judge in both orders, the overview counts every sample of
    every judge per value (the counts drawn are those of the result's ``_samples`` columns), says how often a
    row's samples agree and in how many judgments the two orders chose different winners, and draws the panel's
    agreement as a heat map whose cells are the figures of the agreement table (the summary's)."""
    from panel_run import counts_of, panel_run
    from selenium.webdriver.common.by import By

    scored = panel_run(judge, tmp_path)
    rows, agreement = scored["train"].to_list(), scored.summary.agreement["train"]
    page = write_report(scored, tmp_path / "panel.html", source="panel", cache_dir=tmp_path / "cache")
    _open(browser, page)
    header = browser.find_element(By.CSS_SELECTOR, "#app > h1 + div.small").text
    assert header.startswith("judged by j1, j2, j3 · "), header  # every judge's model, not the first one's
    drawn: dict[tuple[str, str], dict[str, int]] = {}
    for bar in browser.find_elements(By.CSS_SELECTOR, "svg.pooled rect"):
        col, who, value, count = (bar.get_attribute(a) for a in ("data-col", "data-judge", "data-value", "data-count"))
        if int(count):
            drawn.setdefault((col, who), {})[value] = int(count)
    outputs = ["QA_Clarity", "Comparative_score_1", "Comparative_score_2", "Comparative_winner", "Comparative_disagree"]
    assert {c for c, _ in drawn} == set(outputs)
    for col in outputs:
        for who in ("j1", "j2", "j3"):
            assert drawn[col, who] == counts_of(rows, [f"{col}_samples__{who}"]), (col, who)
    # every row got 3, 8, 5, 3, 8, 5 from its six judgments (the server's attempt scores), whoever gave which
    pooled = {}
    for (col, _), hist in drawn.items():
        if col == "QA_Clarity":
            for v, n in hist.items():
                pooled[v] = pooled.get(v, 0) + n
    assert pooled == {"3": 16, "5": 16, "8": 16}
    cards = {c.get_attribute("data-pooled"): _text(c) for c in browser.find_elements(By.CSS_SELECTOR, "[data-pooled]")}
    same = sum(len(set(r[f"QA_Clarity_samples__{j}"])) == 1 for r in rows for j in ("j1", "j2", "j3"))
    assert f"samples agree on {same} of 24 rows x judges" in cards["QA_Clarity"]
    # j2 prefers whichever response is shown first: its two orders disagree in each of its 16 judgments
    flips = counts_of(rows, [f"Comparative_disagree_samples__{j}" for j in ("j1", "j2", "j3")])
    assert flips == {"true": 16, "false": 32}
    assert "chose different winners (position bias) in 16 of 48" in cards["Comparative_disagree"]

    # each order's winner, read from the reply store: j2's flips are the response shown first winning both times,
    # and every judge's flips are the judgments its result marks _disagree
    for who, want in {"j1": ("1", "1"), "j2": ("1", "2"), "j3": ("1", "1")}.items():
        card = browser.find_element(By.CSS_SELECTOR, f".orders[data-metric='Comparative'][data-judge='{who}']")
        counts = {
            (td.get_attribute("data-written"), td.get_attribute("data-swapped")): int(td.get_attribute("data-count"))
            for td in card.find_elements(By.CSS_SELECTOR, "td[data-count]")
        }
        assert {k: n for k, n in counts.items() if n} == {want: 16}
        flipped = sum(n for (a, b), n in counts.items() if a != b)
        assert flipped == counts_of(rows, [f"Comparative_disagree_samples__{who}"]).get("true", 0)
        first = 16 if who == "j2" else 0
        assert f"the response shown first won both in {first}, the one shown second in 0" in _text(card)

    cells = {
        (r.get_attribute("data-col"), r.get_attribute("data-pair")): r.get_attribute("data-value")
        for r in browser.find_elements(By.CSS_SELECTOR, ".heatmap[data-split='train'] svg.heat rect")
    }
    table = {
        (c, pair): e["exact"] for by in agreement.values() for c, a in by.items() for pair, e in a["pairs"].items()
    }
    assert {k: float(v) for k, v in cells.items()} == table and len(table) == 5 * 3
    assert table["Comparative_winner", "j1~j3"] == 1.0 and table["Comparative_winner", "j1~j2"] == 0.0
    # each cell's label and tip: the same figures (the share, the rows, a number column's mean difference), and
    # each row's name Krippendorff's alpha (which of the judges got which attempt score varies from run to run)
    shown = _text(browser.find_element(By.CSS_SELECTOR, ".heatmap"))
    for c, a in (item for by in agreement.values() for item in by.items()):
        assert f"{c} (α {a['alpha']:.2f})" in shown
        for pair, e in a["pairs"].items():
            rect = browser.find_element(By.CSS_SELECTOR, f".heatmap rect[data-col='{c}'][data-pair='{pair}']")
            tip = _text(rect)
            assert f"{100 * e['exact']:.1f}% same value over {e['rows']} rows" in tip
            if "mean_abs_diff" in e:  # the page writes 3 decimals
                assert float(tip.rpartition("mean |difference| ")[2]) == pytest.approx(e["mean_abs_diff"], abs=1e-3)
    assert _problems(browser) == []


def test_a_pairwise_judge_s_distributions_are_shown_per_order(browser, judge, tmp_path):
    """A pairwise judge asked in both orders with logprobs: the row shows each order's distribution, the swapped
    order's under the response it scored, so their mean's expectation is the row's ``_expected`` column."""
    from panel_run import COLUMNS, panel_dataset
    from selenium.webdriver.common.by import By

    scored = score(panel_dataset("lpp"), ["Comparative"], judge, tmp_path, logprobs=True, columns=COLUMNS)
    page = write_report(scored, tmp_path / "pairs.html", source="pairs", cache_dir=tmp_path / "cache")
    split = _embedded(page)["splits"]["train"]
    found = split["distributions"]["by_metric"]["Comparative"]
    assert split["distributions"]["found"] == 8 and len(found) == 8
    for p, entries in found.items():
        row = scored["train"][split["indices"][int(p)]]
        assert [e["order"] for e in entries] == [0, 1]
        for col in ("Comparative_score_1", "Comparative_score_2"):
            means = []
            for e in entries:
                dist = e["outputs"][col]
                means.append(sum(int(v) * q for v, q in dist.items()) / sum(dist.values()))
            assert sum(means) / 2 == pytest.approx(row[f"{col}_expected"])
    _open(browser, page, "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='2']").click()
    boxes = browser.find_elements(By.CSS_SELECTOR, "#detail .dist[data-col='Comparative_score_1']")
    assert [b.get_attribute("data-order") for b in boxes] == ["0", "1"]
    assert "responses swapped" in boxes[1].text and "order as written" in boxes[0].text
    assert _problems(browser) == []


def test_a_pairwise_score_s_histogram_has_a_bar_per_half_point_in_order(browser, judge, tmp_path):
    """A pairwise score (the mean of two orders' integer scores) is drawn a bar per value, in the order of the
    values (3, 3.5, 4, ...), not ten bins whose edges fall between them (issue 40)."""
    from collections import Counter

    from panel_run import COLUMNS, panel_dataset
    from selenium.webdriver.common.by import By

    scored = score(panel_dataset("half"), ["Comparative"], judge, tmp_path, columns=COLUMNS)
    page = write_report(scored, tmp_path / "pairs.html", source="pairs", cache_dir=tmp_path / "cache")
    _open(browser, page)
    for col in ("Comparative_score_1", "Comparative_score_2"):
        svg = browser.find_element(By.CSS_SELECTOR, f"svg.hist[aria-label='distribution of {col}']")
        bars = [t.get_attribute("textContent") for t in svg.find_elements(By.CSS_SELECTOR, "rect title")]
        counts = Counter(scored["train"][col])
        assert bars == [f"{v:g}: {n}" for v, n in sorted(counts.items())], col
    assert _problems(browser) == []


def test_the_overview_shows_the_calibration_its_picture_and_the_length_bias(browser, result, capfd, tmp_path):
    """The folder's calibration.json and reliability PNG (``hf-judge calibrate`` with the plots extra) and the
    summary's length bias: in the overview, the PNG inline (a data: URI the page's policy lets it draw)."""
    import base64

    from selenium.webdriver.common.by import By

    from hf_judge.results.summary import RunSummary

    folder = tmp_path / "calibrated"
    load_from_disk(str(result["folder"])).save_to_disk(folder)
    summary = RunSummary.load(result["folder"])
    assert summary.length_bias, "the run measured the length bias of its scores"
    summary.save(folder)
    train = result["scored"]["train"]
    labels = tmp_path / "labels.jsonl"
    with labels.open("w") as f:
        for score in ("QA_Clarity", "QA_Correctness"):  # two scores: the folder keeps a calibration of each
            for i, v in enumerate(train[score]):
                if v is not None:
                    f.write(json.dumps({"split": "train", "row": i, "score": score, "label": v >= 6}) + "\n")
    code, out, err = run_cli(capfd, "calibrate", folder, "--score", "QA_Clarity", "--labels", labels, "--folds", 2)
    png = folder / "QA_Clarity_reliability.png"
    assert code == 0 and png.is_file(), err
    code, out, err = run_cli(capfd, "calibrate", folder, "--score", "QA_Correctness", "--labels", labels, "--folds", 2)
    assert code == 0 and (folder / "calibration_QA_Correctness.json").is_file(), err
    code, out, err = run_cli(capfd, "view", folder)
    assert code == 0, err
    page = folder / "report.html"
    pictures = _embedded(page)["overview"]["pictures"]["items"]
    assert [p["name"] for p in pictures] == ["QA_Clarity_reliability.png", "QA_Correctness_reliability.png"]
    assert base64.b64decode(pictures[0]["src"].removeprefix("data:image/png;base64,")) == png.read_bytes()
    _open(browser, page, "overview")
    img = browser.find_element(By.CSS_SELECTOR, f".pictures figure[data-name='{png.name}'] img")
    assert _wait(lambda: browser.execute_script("return arguments[0].naturalWidth", img)) > 100  # drawn
    text = browser.find_element(By.ID, "app").text
    assert text.count("Calibration") >= 1
    for file in ("calibration.json", "calibration_QA_Correctness.json"):  # each score's calibration is shown
        calibration = json.loads((folder / file).read_text())
        assert calibration["score"] in text
        assert "judge " + re.sub(r"\.?0+$", "", f"{calibration['ece']['judge']:.3f}") in text
    assert "Length bias" in text
    bias = browser.find_element(By.XPATH, "//h2[.='Length bias']/following-sibling::table[1]")
    column = next(iter(summary.length_bias))
    assert column in bias.text and all(k in bias.text for k in summary.length_bias[column])
    assert _problems(browser) == []


def test_a_logprobs_run_shows_each_score_s_distribution_read_back_from_the_reply_store(browser, judge, tmp_path, capfd):
    """``view --cache-dir``: each row's probability of each score value, as the reply store holds it (the table
    the row's ``_expected`` and ``_confidence`` were computed from), drawn as bars; without it, the page says how."""
    import sqlite3

    from selenium.webdriver.common.by import By

    from hf_judge.judging.logprobs import row_values
    from hf_judge.results.prompts import rebuild_metric
    from hf_judge.store.sqlite import decode_meta

    judge.configure(overrides={"Clarity": 10})
    scored = score(qa_dataset(6, "lp"), ["QA_Clarity"], judge, tmp_path, logprobs=True)
    folder = tmp_path / "lp-judged"
    scored.save_to_disk(folder)
    code, _, err = run_cli(capfd, "view", folder, "--cache-dir", tmp_path / "cache", "-o", tmp_path / "lp.html")
    assert code == 0, err
    data = _embedded(tmp_path / "lp.html")
    train = data["splits"]["train"]
    found = train["distributions"]["by_metric"]["QA_Clarity"]
    assert train["distributions"]["found"] == 6 and sorted(found, key=int) == [str(p) for p in range(6)]
    with sqlite3.connect(tmp_path / "cache" / "replies.sqlite3") as db:
        tables = [decode_meta(usage)[1] for (usage,) in db.execute("SELECT usage FROM replies")]
    metric = rebuild_metric("QA_Clarity", scored.summary)
    for p, entries in found.items():
        (entry,) = entries
        dist = entry["outputs"]["QA_Clarity"]
        assert {"version": 1, "outputs": {"score": dist}} in tables  # the store's table, as it is
        row = scored["train"][train["indices"][int(p)]]
        want = {k: row[k] for k in ("QA_Clarity_expected", "QA_Clarity_confidence")}
        assert row_values(metric, {"score": row["QA_Clarity"]}, {"version": 1, "outputs": {"score": dist}}) == want
    _open(browser, tmp_path / "lp.html", "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='2']").click()
    bars = browser.find_elements(By.CSS_SELECTOR, "#detail .dist[data-col='QA_Clarity'] .bar-row")
    p = str(train["indices"].index(2))
    assert [b.get_attribute("data-value") for b in bars] == sorted(found[p][0]["outputs"]["QA_Clarity"], key=int)
    assert all(b.find_element(By.CSS_SELECTOR, ".bar").size["width"] > 0 for b in bars) and len(bars) >= 2
    assert _problems(browser) == []

    code, _, err = run_cli(capfd, "view", folder, "-o", tmp_path / "hint.html")
    assert code == 0 and _embedded(tmp_path / "hint.html")["logprobs"] == {"ran": True, "read": False}
    _open(browser, tmp_path / "hint.html", "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='2']").click()
    hint = browser.find_element(By.CSS_SELECTOR, "#detail .metric[data-metric='QA_Clarity'] .dist-hint")
    assert "--cache-dir" in hint.text and _problems(browser) == []


def test_a_verdict_or_a_value_is_saved_as_it_is_given_without_pressing_save(browser, result, downloads):
    """Issue 33: a verdict's click looked saved and was not (row 9's verdict missing from labels.jsonl). Now a
    verdict, a value typed and a note are saved as they are given: closing the row keeps them."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, result["page"], "rows")
    for row, column, act in ((9, "QA_Clarity", "good"), (4, "QA_Relevance", "bad"), (6, "QA_Clarity", "7")):
        browser.find_element(By.CSS_SELECTOR, f"#rows tr[data-row='{row}']").click()
        Select(browser.find_element(By.ID, "label-score")).select_by_value(column)
        if act in ("good", "bad"):
            browser.find_element(By.ID, f"label-{act}").click()
        else:
            browser.find_element(By.ID, "label-value").send_keys(act)
            browser.find_element(By.ID, "label-note").send_keys("terse")
        browser.find_element(By.ID, "detail-close").click()  # no "save label"
    path = _download_labels(browser, downloads, lines=3)
    got = [{k: r[k] for k in ("row", "score", "label", "note")} for r in map(json.loads, path.read_text().splitlines())]
    assert got == [
        {"row": 4, "score": "QA_Relevance", "label": False, "note": None},
        {"row": 6, "score": "QA_Clarity", "label": 7, "note": "terse"},
        {"row": 9, "score": "QA_Clarity", "label": True, "note": None},
    ]
    # the row opened again shows its saved verdict
    browser.find_element(By.ID, "tab-rows").click()
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='9']").click()
    Select(browser.find_element(By.ID, "label-score")).select_by_value("QA_Clarity")
    assert "on" in browser.find_element(By.ID, "label-good").get_attribute("class").split()
    assert browser.find_element(By.ID, "label-status").get_attribute("data-saved") == "1"
    assert _problems(browser) == []


def test_labels_stay_with_the_rows_they_were_made_on(browser, tmp_path):
    """Issue 33: two different 8-row results viewed as ``out/`` shared their labels. A label made in one page is
    not in the other's (written at the same path, same title, rows and metrics), and is there again when the first
    result's page is written again."""
    from selenium.webdriver.common.by import By

    def page(prefix: str) -> Path:
        d = Dataset.from_dict({"question": [f"{prefix}{i}" for i in range(8)], "S": [i % 5 for i in range(8)]})
        return write_report(DatasetDict(train=d), tmp_path / "out" / "report.html", source="out/")

    def labels(expected: int) -> int:
        """The labels the page, loaded again, finds under its key: read until ``expected`` or 5 s have passed.
        Chrome hands localStorage writes to its storage service asynchronously, so a load a few milliseconds
        after the save could still read the state before it (1 run in 8 here)."""
        end = time.monotonic() + 5
        while True:
            browser.get(page_path.resolve().as_uri())
            _wait(lambda: browser.execute_script("return document.body.dataset.ready") == "1")
            found = browser.execute_script(
                "return Object.keys(JSON.parse(localStorage.getItem('hf-judge-labels:' + "
                "JSON.parse(document.getElementById('hf-judge-data').textContent).key) || '{}')).length"
            )
            if found == expected or time.monotonic() > end:
                return found
            time.sleep(0.1)

    page_path = page("a")
    _open(browser, page_path, "rows")
    browser.find_element(By.CSS_SELECTOR, "#rows tr[data-row='1']").click()
    browser.find_element(By.ID, "label-good").click()
    browser.find_element(By.ID, "label-save").click()
    # read in the page that saved it: a reload at once raced Chrome's hand-over of the write to its storage service
    # (a CI run read 0 for 5 s of reloads); the reloads below come after another page is written, by then it is in
    stored = "return Object.keys(JSON.parse(localStorage.getItem(STORE_KEY) || '{}')).length"
    key = "'hf-judge-labels:' + JSON.parse(document.getElementById('hf-judge-data').textContent).key"
    assert browser.execute_script(stored.replace("STORE_KEY", key)) == 1
    page("b")
    assert labels(0) == 0  # another result at the same place: none of the first one's labels (stored: read above)
    page("a")
    assert labels(1) == 1
    assert _problems(browser) == []


def test_the_filter_command_quotes_every_argument_and_runs_nothing_when_pasted(browser, tmp_path):
    """Issue 33: a column named ``q;touch${IFS}pwned;#`` gave a command that, pasted in bash, created the file.
    The command the page shows, run by a real bash (``hf-judge`` a function that prints its arguments), creates
    no file and passes each name whole."""
    import subprocess

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    column, split = "q;touch${IFS}pwned;#", "b$(touch pwned2)"
    d = Dataset.from_dict({"question": ["x", "y", "z"], column: [1, 5, 9]})
    page = write_report(DatasetDict({"train": d, split: d}), tmp_path / "page.html", source="out dir/")
    _open(browser, page, "rows")
    Select(browser.find_element(By.ID, "split")).select_by_value(split)
    box = browser.execute_script(
        "return [...document.querySelectorAll('input[data-col]')].find((e) => e.dataset.col === arguments[0] "
        "&& e.id.startsWith('min-'))",
        column,
    )
    box.send_keys("5")
    command = _text(browser.find_element(By.ID, "filter-command"))
    shell = tmp_path / "shell"
    shell.mkdir()
    assert subprocess.run(["bash", "-n", "-c", command], cwd=shell).returncode == 0
    ran = subprocess.run(
        ["bash", "-c", 'hf-judge() { printf "%s\\n" "$@"; }\n' + command],
        cwd=shell, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert list(shell.iterdir()) == []  # nothing created
    assert ran.stdout.splitlines() == ["filter", "out dir/", "--min", f"{column}=5", "--split", split]
    assert shlex.split(command)[1:] == ran.stdout.splitlines()
    assert _problems(browser) == []


def test_a_page_whose_every_row_failed_says_so_first(browser, judge, tmp_path, result):
    """Issue 33: every row failed, and the overview showed empty cards and no word of it. A banner says so and
    leads to the errors; a page with some scores has none."""
    from selenium.webdriver.common.by import By

    judge.configure(faults=[{"fault": "out_of_range", "match": "dead-"}])
    scored = score(qa_dataset(4, "dead"), ["QA_Clarity"], judge, tmp_path, retries=0)
    judge.reset()
    page = write_report(scored, tmp_path / "dead.html", source="dead")
    _open(browser, page)
    banner = browser.find_element(By.ID, "all-failed")
    assert "Every row failed in train" in banner.text and "4 error rows (out_of_range 4)" in banner.text
    browser.find_element(By.ID, "all-failed-errors").click()
    assert browser.find_element(By.ID, "view").get_attribute("data-tab") == "errors"
    _open(browser, result["page"])
    assert browser.find_elements(By.ID, "all-failed") == []
    assert _problems(browser) == []


def test_the_errors_table_names_the_judge_of_each_failed_request(browser, judge, tmp_path):
    """A panel whose judge b failed a row: the errors tab's table has a judge column, b in b's row and nothing in
    the row's own error (a null answer: no judge was asked)."""
    from selenium.webdriver.common.by import By

    judge.configure(faults=[{"fault": "out_of_range", "model": "b", "match": "pan-1:"}])
    ds = qa_dataset(3, "pan").map(lambda r, i: {"answer": None if i == 2 else r["answer"]}, with_indices=True)
    scored = score(ds, ["QA_Clarity"], judge, tmp_path, models="a,b", retries=0)
    judge.reset()
    _open(browser, write_report(scored, tmp_path / "panel.html", source="panel"), "errors")
    table = browser.find_element(By.ID, "errors")
    heads = [_text(th) for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert heads[:5] == ["split", "row", "metric", "judge", "kind"]
    cells = [r[:5] for r in _cells(table)]
    assert sorted(cells) == [
        ["train", "1", "QA_Clarity", "b", "out_of_range"],
        ["train", "2", "QA_Clarity", "", "null_input"],
    ]
    assert _problems(browser) == []


def test_an_incomplete_result_says_so_first_and_its_notes_are_listed(browser, tmp_path):
    """A run its budget stopped: a banner says the result is incomplete (its nulls are requests never sent); the
    run's notes are listed (they were embedded and never shown), with what the page cut of them."""
    from datasets import Dataset, DatasetDict
    from selenium.webdriver.common.by import By

    from hf_judge.results.summary import RunSummary

    stopped = "INCOMPLETE: the run stopped at its budget (max_cost=$0.1): 1 (row, metric) not sent"
    summary = RunSummary(model="m", metrics={"S": "h"}, stopped=stopped, notes=["a note", "y" * 5_000])
    d = DatasetDict(train=Dataset.from_dict({"q": ["a", "b"], "S": [3, None]}))
    with pytest.warns(UserWarning, match="the page leaves out a note of 5,000 characters"):
        page = write_report(d, tmp_path / "stopped.html", summary=summary)
    _open(browser, page)
    banner = browser.find_element(By.ID, "stopped").text
    assert banner.startswith("This result is incomplete. the run stopped at its budget (max_cost=$0.1)"), banner
    notes = [_text(li) for li in browser.find_elements(By.CSS_SELECTOR, "ul.notes li")]
    assert notes == [
        "a note",
        "y" * 2_000 + " [cut at 2,000 characters]",
        "left out of this page: a note of 5,000 characters (cut at 2,000) (summary.json holds it)",
    ]
    assert _problems(browser) == []
    page = write_report(d, tmp_path / "done.html", summary=RunSummary(model="m", metrics={"S": "h"}))
    _open(browser, page)
    assert browser.find_elements(By.ID, "stopped") == [] and browser.find_elements(By.CSS_SELECTOR, "ul.notes") == []


# -- without a browser ---------------------------------------------------------------------------


def test_a_large_result_embeds_a_bounded_selection(tmp_path):
    from hf_judge.results.report import report_data

    n = 20_000
    scores = [(i * 7919) % 10 + 1 for i in range(n)]
    ds = Dataset.from_dict({"text": [f"row {i}" for i in range(n)], "S": scores, "S__a": scores, "S__b": [1] * n})
    errors = Dataset.from_dict(
        {
            "split": ["train"],
            "row": [123],
            "metric": ["S"],
            "kind": ["x"],
            "message": ["m"],
            "raw": [None],
            "attempts": [1],
        }
    )
    from datasets import DatasetDict

    from hf_judge.results.summary import RunSummary

    panel = RunSummary(sampling={"judges": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}]})
    data = report_data(DatasetDict({"train": ds, "errors": errors}), summary=panel, max_rows=1_000)
    split = data["splits"]["train"]
    assert split["rows"] == n and len(split["indices"]) == 1_000 == sum(split["reasons"].values())
    assert {"lowest", "highest", "near a threshold", "judges or samples disagree", "errors", "uniform sample"} <= set(
        split["reasons"]
    )
    assert 123 in split["indices"] and split["indices"] == sorted(split["indices"])
    assert len(split["all_scores"]["S"]) == n  # exact threshold counts over every row
    # long texts: the rows embedded stop at the character budget, whatever the row cap
    from hf_judge.results.report_data import select_rows

    long = Dataset.from_dict({"text": ["x" * 100] * 50, "S": list(range(50))})
    rows, reasons = select_rows(long, ["S"], set(), {"S": [25.0]}, max_rows=1_000, max_chars=1_050)
    assert len(rows) == 10 and "all" not in reasons
    size = len(json.dumps(data))
    path = write_report(ds, tmp_path / "r.html", max_rows=1_000)
    assert path.stat().st_size < size + 200_000 < 2_000_000


def _embedded(page: Path) -> dict:
    """The data a page embeds (the JSON in its ``hf-judge-data`` script)."""
    text = page.read_text(encoding="utf-8")
    start = text.index(">", text.index("id='hf-judge-data'")) + 1
    return json.loads(text[start : text.index("</script>", start)])


def test_a_streamed_run_saves_its_page_built_from_the_saved_folder(judge, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    judge.configure(faults=[{"fault": "out_of_range", "match": "str-3:"}])
    data = tmp_path / "d.jsonl"
    qa_dataset(12, "str").to_json(data)
    out_dir = tmp_path / "streamed-report"  # a name of its own: datasets caches a local folder by name and sizes
    code, out, err = run_cli(capfd, *score_args(data, judge, "--streaming", "-o", out_dir, "--retries", "0"))
    assert code == 0, err
    page = out_dir / "report.html"
    assert f"{'report':<15}{page}: open it in a browser" in out and page.is_file()
    saved = load_dataset(str(out_dir), split="train")
    embedded = _embedded(page)
    train = embedded["splits"]["train"]
    assert train["rows"] == len(saved) == 12 and train["indices"] == list(range(12))
    assert train["columns"]["QA_Clarity"] == saved["QA_Clarity"] and saved["QA_Clarity"][3] is None
    assert train["columns"]["question"] == saved["question"]
    assert embedded["errors"]["total"] == 1 and list(embedded["overview"]["metrics"]) == ["QA_Clarity"]
    assert train["prompts"], "the summary's prompts: each row's prompt rebuilt"


def test_a_logprobs_run_s_page_embeds_the_distributions_of_its_reply_store(judge, tmp_path, capfd):
    data, out_dir = tmp_path / "d.jsonl", tmp_path / "lp-cli"
    qa_dataset(5, "lpc").to_json(data)
    args = score_args(data, judge, "--logprobs", "-o", out_dir, "--cache-dir", tmp_path / "c", "--retries", "0")
    code, out, err = run_cli(capfd, *args)
    assert code == 0, err
    train = _embedded(out_dir / "report.html")["splits"]["train"]
    assert train["distributions"]["found"] == train["distributions"]["looked"] == 5
    saved = load_from_disk(str(out_dir))["train"]
    for p, (entry,) in train["distributions"]["by_metric"]["QA_Clarity"].items():
        dist = entry["outputs"]["QA_Clarity"]
        assert str(saved[train["indices"][int(p)]]["QA_Clarity"]) in dist  # the value written has its probability


def test_a_prompt_that_cannot_be_rebuilt_says_why(result, tmp_path, capfd):
    from hf_judge.results.summary import RunSummary

    folder = tmp_path / "edited"
    saved = load_from_disk(str(result["folder"]))
    saved.save_to_disk(folder)
    summary = RunSummary.load(result["folder"])
    summary.prompts["QA_Clarity"]["text"] += "\nedited"
    summary.save(folder)
    code, _, err = run_cli(capfd, "show-prompt", folder, "--row", 7, "--metric", "QA_Clarity")
    assert code == 2 and "does not match its sha256" in err
    code, _, err = run_cli(capfd, "show-prompt", folder, "--row", 7, "--metric", "QA_Nope")
    assert code == 2 and "no metric 'QA_Nope'" in err
    code, _, err = run_cli(capfd, "show-prompt", folder, "--row", 99, "--metric", "QA_All")
    assert code == 2 and "rows 0 to 39" in err
    code, out, _ = run_cli(capfd, "view", folder, "-o", tmp_path / "p.html")
    html = (tmp_path / "p.html").read_text()
    assert code == 0 and "does not match its sha256" in html


def test_push_to_hub_uploads_the_report_and_the_card_links_it(result, hub, capfd, tmp_path):
    from huggingface_hub import DatasetCard, HfApi, hf_hub_download

    result["scored"].push_to_hub("tester/report-pushed")
    files = set(HfApi().list_repo_files("tester/report-pushed", repo_type="dataset"))
    assert "hf_judge/report.html" in files
    page = Path(hf_hub_download("tester/report-pushed", "hf_judge/report.html", repo_type="dataset")).read_text()
    assert "tester/report-pushed" in page and "rep-7:" in page
    card = str(DatasetCard.load("tester/report-pushed", repo_type="dataset"))
    assert "[Report page](hf_judge/report.html)" in card
    # view on the Hub repo: its errors config read too
    code, out, _ = run_cli(capfd, "view", "tester/report-pushed", "-o", tmp_path / "hub.html")
    html = (tmp_path / "hub.html").read_text()
    assert code == 0 and "rep-7:" in html and f'"total":{len(result["scored"]["errors"])}' in html


def test_view_by_a_column_shows_each_score_per_group_lowest_mean_first(browser, judge, tmp_path, capfd):
    """``hf-judge view --by source``: the overview's table per score, its groups in the order and with the figures
    of a pandas groupby over every row, a group's name shown as text, never as markup."""
    from selenium.webdriver.common.by import By

    sources = ["forum", "<b>wiki</b>", "book"]
    ds = qa_dataset(30, "grp").add_column("source", [sources[i % 7 % 3] for i in range(30)])
    folder = tmp_path / "judged"
    score(ds, ["QA_Clarity"], judge, tmp_path).save_to_disk(folder)
    code, _, err = run_cli(capfd, "view", folder, "--by", "source")
    assert code == 0, err
    df = ds.to_pandas().assign(QA_Clarity=load_from_disk(str(folder))["train"]["QA_Clarity"])
    want = df.groupby("source")["QA_Clarity"].agg(["size", "mean", "median"]).reset_index()
    want = want.assign(neg=-want["size"]).sort_values(["mean", "neg", "source"])
    _open(browser, folder / "report.html", "overview")
    card = browser.find_element(By.CSS_SELECTOR, ".groups[data-column='QA_Clarity']")
    assert browser.find_element(By.XPATH, "//h3[.='Scores by source']") and not card.find_elements(By.TAG_NAME, "b")
    cells = _cells(card)
    assert [c[:5] for c in cells] == [
        [r.source, str(r.size), "0", f"{r.mean:.2f}", f"{r.median:.2f}"] for r in want.itertuples()
    ]
    assert all(c[5].startswith("1 ") and c[5].endswith(" 10") for c in cells)  # the declared range, 1..10
    assert _problems(browser) == []


def test_a_choose_judge_folder_shows_a_bar_per_judge_with_its_interval(browser, judge_server_proc, tmp_path, capfd):
    """`hf-judge view DIR` on a choose-judge output: the recommended judge's rows, and above them a bar per judge
    with its headline figure and interval as choose_judge.json holds them, the recommended one marked."""
    from selenium.webdriver.common.by import By

    from hf_judge import choose_judge

    judge = judge_server_proc
    judge.reset()
    n = 30
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(n)],
            "answer": [f"a{i}" for i in range(n)],
            "human": [i % 3 != 0 for i in range(n)],
        }
    )
    # steady answers the label on all rows but two (beyond chance: it is recommended), shaky at random, a third
    # of its requests refused
    steady = [
        {"fault": "text", "model": "steady", "match": f"\na{i}\n", "text": json.dumps({"verdict": "1" if v else "0"})}
        for i, v in enumerate(h != (i in (4, 7)) for i, h in enumerate(ds["human"]))
    ]
    judge.configure(faults=[*steady, {"fault": "status", "status": 400, "rate": 0.3, "model": "shaky"}])
    choice = choose_judge(
        ds, "Binary", ["steady", "shaky"], label="human", base_url=judge.base_url, api_key="k", retries=0,
        cache_dir=tmp_path / "c", progress=False, resamples=100, columns={"prediction": "answer"},
        output_dir=tmp_path / "choice",
    )  # fmt: skip
    judge.reset()
    code, out, err = run_cli(capfd, "view", tmp_path / "choice")
    assert code == 0, err
    page = tmp_path / "choice" / "report.html"
    _open(browser, page)
    assert _problems(browser) == []
    bars = browser.find_elements(By.CSS_SELECTOR, "#choice .choice-bar")
    shown = {b.get_attribute("data-judge"): b for b in bars}
    assert sorted(shown) == sorted(e["name"] for e in choice.entries)
    for e in choice.entries:
        bar = shown[e["name"]]
        assert float(bar.get_attribute("data-score")) == pytest.approx(e["score"])
        lo, hi = (float(bar.get_attribute(f"data-{k}")) for k in ("lo", "hi"))
        assert [lo, hi] == pytest.approx(e["interval"])
        assert len(bar.find_elements(By.CSS_SELECTOR, "line.whisker")) == 3  # the interval and its two caps
        # the whisker spans the interval on the bar's scale: its ends where the bar of a score lo / hi would end
        rect = bar.find_element(By.TAG_NAME, "rect")
        line = bar.find_elements(By.CSS_SELECTOR, "line.whisker")[0]
        x0, width = float(rect.get_attribute("x")), float(rect.get_attribute("width"))
        per = width / e["score"]
        assert float(line.get_attribute("x1")) == pytest.approx(x0 + per * lo)
        assert float(line.get_attribute("x2")) == pytest.approx(x0 + per * hi)
    pick = choice.recommendation["name"]
    assert pick == "steady"
    assert [b.get_attribute("data-judge") for b in bars if "recommended" in b.get_attribute("class")] == [pick]
    # the rows are the recommended judge's own folder's, its column under its own name
    assert "Binary" in browser.find_element(By.ID, "view").text
    assert load_from_disk(str(tmp_path / "choice" / pick))["train"].num_rows == n


def test_a_choose_judge_folder_where_no_judge_is_fit_says_so(browser, judge_server_proc, tmp_path, capfd):
    """Two judges answering at random: nothing is recommended, no bar is marked, and the page says why (it read
    "Recommended: null")."""
    from selenium.webdriver.common.by import By

    from hf_judge import choose_judge

    judge = judge_server_proc
    judge.reset()
    ds = Dataset.from_dict({"question": [f"q{i}" for i in range(12)], "answer": [f"a{i}" for i in range(12)],
                            "human": [i % 3 != 0 for i in range(12)]})  # fmt: skip
    choice = choose_judge(
        ds, "Binary", ["coin_a", "coin_b"], label="human", base_url=judge.base_url, api_key="k",
        cache_dir=tmp_path / "c", progress=False, resamples=100, columns={"prediction": "answer"},
        output_dir=tmp_path / "choice",
    )  # fmt: skip
    assert choice.recommendation["name"] is None
    code, out, err = run_cli(capfd, "view", tmp_path / "choice")
    assert code == 0, err
    _open(browser, tmp_path / "choice" / "report.html")
    assert _problems(browser) == []
    said = browser.find_element(By.ID, "choice").find_element(By.XPATH, "preceding-sibling::p[1]").text
    assert "Nothing recommended: no candidate is fit" in said and "null" not in said
    assert browser.find_elements(By.CSS_SELECTOR, "#choice .choice-bar.recommended") == []


def test_a_choose_judge_json_holding_nan_shows_a_dash_for_the_judge_without_a_figure(browser, tmp_path, capfd):
    """A hand-edited or foreign choose_judge.json with NaN: the page is written (no raw ValueError), the judge with
    no finite figure has no bar and "-" in the table, the other is drawn as before."""
    from selenium.webdriver.common.by import By

    folder = tmp_path / "choice"
    DatasetDict(train=Dataset.from_dict({"question": ["q0", "q1"], "Binary": [True, False]})).save_to_disk(folder / "a")
    entries = [
        {"name": "a", "judge": "a", "score": float("nan"), "interval": [float("nan"), 0.9], "coverage": float("nan")},
        {"name": "b", "judge": "b", "score": 0.7, "interval": [0.6, 0.8], "coverage": 1.0},
    ]
    choice = {"metric": "Binary", "kind": "binary", "rows": 2, "headline": "accuracy", "entries": entries}
    (folder / "choose_judge.json").write_text(json.dumps(choice))  # NaN as json.dumps writes it
    code, _, err = run_cli(capfd, "view", folder)
    assert code == 0, err
    _open(browser, folder / "report.html")
    assert _problems(browser) == []
    assert [b.get_attribute("data-judge") for b in browser.find_elements(By.CSS_SELECTOR, "#choice .choice-bar")] == [
        "b"
    ]
    rows = _cells(browser, ".choice-table tbody tr")
    assert [r[:4] for r in rows] == [["a", "-", "", "-"], ["b", "70.0%", "60.0% to 80.0%", "100.0%"]]


def test_a_choose_judge_by_folder_shows_each_groups_figures_and_best_judge(browser, judge_server_proc, tmp_path, capfd):
    """choose-judge --by: the page's table of judges by group holds each group's rows, best judge and each judge's
    figure with its interval, as choose_judge.json has them."""
    from selenium.webdriver.common.by import By

    from hf_judge import choose_judge

    judge = judge_server_proc
    judge.reset()
    n = 24
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(n)],
            "answer": [f"a{i}" for i in range(n)],
            "human": [i % 3 != 0 for i in range(n)],
            "source": [f"s{i % 3}" for i in range(n)],
        }
    )
    steady = [
        {"fault": "text", "model": "steady", "match": f"\na{i}\n", "text": json.dumps({"verdict": "1" if h else "0"})}
        for i, h in enumerate(ds["human"])
    ]
    judge.configure(faults=steady)
    choice = choose_judge(
        ds, "Binary", ["steady", "coin"], label="human", base_url=judge.base_url, api_key="k", by="source",
        cache_dir=tmp_path / "c", progress=False, resamples=100, columns={"prediction": "answer"},
        output_dir=tmp_path / "choice",
    )  # fmt: skip
    code, out, err = run_cli(capfd, "view", tmp_path / "choice")
    assert code == 0, err
    _open(browser, tmp_path / "choice" / "report.html")
    assert _problems(browser) == []
    head = [_text(th) for th in browser.find_elements(By.CSS_SELECTOR, ".choice-groups thead th")]
    assert head == ["source", "rows", "best", "chance", "steady", "coin"]  # no people's votes: no humans column
    rows = _cells(browser, ".choice-groups tbody tr")
    said = {
        g["name"]: "steady" + ("" if "steady" in g["fit"] else " (not beyond chance)") for g in choice.groups["groups"]
    }
    assert [r[:3] for r in rows] == [[g["name"], str(g["rows"]), said[g["name"]]] for g in choice.groups["groups"]]
    assert all(g["best"] == "steady" for g in choice.groups["groups"])
    for r, g in zip(rows, choice.groups["groups"], strict=True):
        assert r[3] == f"{100 * g['chance']['score']:.1f}%"  # the group's own chance level: its majority label
        e = g["entries"][0]
        lo, hi = e["interval"]
        assert r[4] == f"{100 * e['score']:.1f}% ({100 * lo:.1f}% to {100 * hi:.1f}%)"


def test_a_choose_judge_by_folder_with_votes_shows_each_groups_people_beside_its_judges(
    browser, judge_server_proc, tmp_path, capfd
):
    """choose-judge --by with people's votes under mt-bench: the page's table of groups has the people's own figure
    (every two votes on a pair, FastChat's human-human) per group beside the judges', as choose_judge.json has it,
    and each group's chance level under the rule."""
    from selenium.webdriver.common.by import By

    from hf_judge import choose_judge

    judge = judge_server_proc
    judge.reset()
    n = 12
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(n)],
            "response1": [f"a{i}" for i in range(n)],
            "response2": [f"b{i}" for i in range(n)],
            "human": ["1" if i % 3 else "2" for i in range(n)],
            "e1": ["1" if i % 3 else "2" for i in range(n)],
            "e2": ["1" if i % 2 else "tie" for i in range(n)],
            "source": [f"s{i % 2}" for i in range(n)],
        }
    )
    choice = choose_judge(
        ds, "Comparative", ["agree", "other"], label="human", votes=["e1", "e2"], rule="mt-bench", by="source",
        base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False, resamples=50,
        output_dir=tmp_path / "choice",
    )  # fmt: skip
    code, _, err = run_cli(capfd, "view", tmp_path / "choice")
    assert code == 0, err
    _open(browser, tmp_path / "choice" / "report.html")
    assert _problems(browser) == []
    head = [_text(th) for th in browser.find_elements(By.CSS_SELECTOR, ".choice-groups thead th")]
    assert head == ["source", "rows", "best", "chance", "humans", "agree", "other"]
    rows = _cells(browser, ".choice-groups tbody tr")
    groups = choice.groups["groups"]
    assert [r[0] for r in rows] == [g["name"] for g in groups] == ["s0", "s1"]
    for r, g in zip(rows, groups, strict=True):
        people = g["humans"]["mt-bench"]
        assert people["score"] is not None
        lo, hi = people["interval"]
        assert r[3] == f"{100 * g['chance']['score']:.1f}%"
        assert r[4] == f"{100 * people['score']:.1f}% ({100 * lo:.1f}% to {100 * hi:.1f}%)"


def test_a_choose_judge_page_shows_intransitive_triads_beside_orders_disagree(
    browser, judge_server_proc, tmp_path, capfd
):
    """choose-judge with items (a prompt, two models): the page's table has each judge's intransitive triads in the
    column after "orders disagree", as the terminal's table does. A judge preferring the longer reply orders
    gpt-4 > alpaca-13b > llama-13b (0 of 1 triads, its orders never disagree); a recorded judge's verdicts make a
    cycle (alpaca-13b over gpt-4, llama-13b over alpaca-13b, gpt-4 over llama-13b: 1 of 1), and it has no orders."""
    from selenium.webdriver.common.by import By

    from hf_judge import choose_judge

    judge = judge_server_proc
    judge.reset()
    judge.configure(length_scores={"pattern": r"\bL{10,}\b", "step": 10, "model": "longer"})
    size = {"gpt-4": 90, "alpaca-13b": 70, "llama-13b": 50}
    pairs = [("alpaca-13b", "gpt-4"), ("alpaca-13b", "llama-13b"), ("gpt-4", "llama-13b")]
    ds = Dataset.from_dict(
        {
            "question_id": [81] * 3,
            "model_a": [a for a, _ in pairs],
            "model_b": [b for _, b in pairs],
            "question": ["Write a haiku."] * 3,
            "response1": ["L" * size[a] for a, _ in pairs],
            "response2": ["L" * size[b] for _, b in pairs],
            "human": ["2", "1", "1"],
            "old": ["1", "2", "1"],
        }
    )
    choice = choose_judge(
        ds, "Comparative", ["longer"], label="human", base_url=judge.base_url, api_key="k", resamples=0,
        cache_dir=tmp_path / "c", progress=False, output_dir=tmp_path / "choice", recorded={"old judge": "old"},
        items=(["question_id"], "model_a", "model_b"),
    )  # fmt: skip
    code, _, err = run_cli(capfd, "view", tmp_path / "choice")
    assert code == 0, err
    _open(browser, tmp_path / "choice" / "report.html")
    assert _problems(browser) == []
    head = [_text(th) for th in browser.find_elements(By.CSS_SELECTOR, ".choice-table thead th")]
    assert head[3:6] == ["coverage", "orders disagree", "intransitive"]
    rows = {r[0]: r[4:6] for r in _cells(browser, ".choice-table tbody tr")}
    assert rows == {"longer": ["0%", "0 of 1 triads"], "old judge": ["-", "1 of 1 triads"]}
    by = {e["name"]: e for e in choice.entries}
    assert by["longer"]["judgebench"]["orders_disagree"]["share"] == 0
    assert (by["old judge"]["transitivity"]["violations"], by["longer"]["transitivity"]["violations"]) == (1, 0)
