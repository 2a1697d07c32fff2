"""What a run shows at its end (hf_judge.results.overview), the card's settings, glance table and gallery, and
the prompts a result records so that any row's prompt can be rebuilt. Runs go to the loopback judge."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict, load_dataset, load_from_disk
from helpers import QA_ALL, qa_dataset, run_cli, score, score_args

from hf_judge import RunSummary, overview
from hf_judge.judging.metrics import parse_jinja_file
from hf_judge.results.card import render_section
from hf_judge.results.overview import folder_overview
from hf_judge.results.tally import BLOCKS, spark

KEY = "sk-test-overview-0123456789"
BROKEN = "row-3:"  # the rows whose QA_All reply the judge breaks (malformed JSON): nulls and an errors split


def _expected(values: list) -> dict:
    """The figures of one score column, computed here from its values."""
    got = [v for v in values if v is not None]
    return {
        "scored": len(got),
        "nulls": len(values) - len(got),
        "mean": statistics.mean(got),
        "median": statistics.median(got),
        "counts": Counter(got),
    }


def test_the_overview_figures_are_those_of_the_dataset(judge, tmp_path):
    judge.configure(faults=[{"fault": "malformed_json", "match": BROKEN}])
    scored = score(qa_dataset(40, "row"), ["QA_All"], judge, tmp_path, retries=0)
    ov = overview(scored)
    assert [c.column for c in ov.columns] == QA_ALL
    for c in ov.columns:
        want = _expected(scored["train"][c.column])
        assert want["nulls"] == 1  # row-3
        assert (c.split, c.rows, c.scored, c.nulls) == ("train", 40, want["scored"], want["nulls"])
        assert c.mean == pytest.approx(want["mean"]) and c.median == want["median"]
        # the prompt's declared range, 1..10, whatever the values seen
        assert c.bins == [(str(v), want["counts"][v]) for v in range(1, 11)]
        bars = c.histogram().removeprefix("1 ").removesuffix(" 10")
        assert len(bars) == 10 and [b == " " for b in bars] == [want["counts"][v] == 0 for v in range(1, 11)]
        assert bars[max(range(10), key=lambda i: want["counts"][i + 1])] == "█"
    text = str(ov)
    assert f"{'scores':<15}train: 40 rows" in text and "QA_Correctness" in text


def test_booleans_verdicts_and_floats_have_their_own_figures():
    values = [3.25, 7.5, None, 9.0, 1.0, 5.125]
    ds = Dataset.from_dict(
        {
            "Binary": [True, False, None, True, True, False],
            "Comparative_winner": ["1", "2", "tie", "1", None, "1"],
            "QA_Clarity_expected": values,
            "note": ["a", "b", "c", "d", "e", "f"],  # not a score
        }
    )
    by_name = {c.column: c for c in overview(DatasetDict(train=ds)).columns}
    assert set(by_name) == {"Binary", "Comparative_winner", "QA_Clarity_expected"}
    binary, pairwise, floats = by_name["Binary"], by_name["Comparative_winner"], by_name["QA_Clarity_expected"]
    assert (binary.nulls, binary.mean, binary.histogram()) == (1, 3 / 5, "true 3 · false 2")
    assert (pairwise.nulls, pairwise.histogram()) == (1, "1 wins 3 · 2 wins 1 · ties 1")
    plain = overview(DatasetDict(train=ds)).lines(terminal=False)
    assert "Binary 60% true" in plain[0] and "Comparative_winner 1 wins 3 · 2 wins 1 · ties 1" in " ".join(
        " ".join(plain).split()
    )
    want = _expected(values)
    assert floats.mean == pytest.approx(want["mean"]) and floats.median == pytest.approx(want["median"], abs=1e-3)
    assert sum(n for _, n in floats.bins) == 5 and floats.bins[0][0] == "1" and floats.bins[-1][0] == "9"
    assert spark([0, 1, 8]) == f"{BLOCKS[0]}{BLOCKS[1]}{BLOCKS[-1]}"


def _terminal_run(cmd: list[str], cwd: Path) -> tuple[str, str]:
    """``cmd`` with its stdout on a pseudo-terminal, as a person at a terminal runs it: (stdout, stderr)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "OPENAI_API_KEY": KEY, "COLUMNS": "100", "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.PIPE, cwd=cwd, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(60) == 0, err
    return b"".join(chunks).decode().replace("\r\n", "\n"), err


def test_a_qa_all_run_in_a_terminal_fits_one_screen(judge, tmp_path):
    """A real process on a real (pseudo) terminal: the whole of what it prints on stdout, the summary, seven
    histograms, the errors' command, where the result and the plots went, fits 24 lines of 100 columns; and
    the command it gives lists the errors."""
    judge.configure(faults=[{"fault": "malformed_json", "match": "Australia"}])
    hf_judge = [sys.executable, "-m", "hf_judge.cli"]
    out, _ = _terminal_run(
        [*hf_judge, "score", "--example", "-m", "judge", "--base-url", judge.base_url, "--retries", "0",
         "--cache-dir", str(tmp_path / "cache")],
        tmp_path,
    )  # fmt: skip
    lines = out.strip("\n").splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 100, out
    table = [line for line in lines if line.startswith("  QA_")]
    assert [line.split()[0] for line in table] == QA_ALL
    assert all(re.search(r" 1 [ ▁▂▃▄▅▆▇█]{10} 10$", line) for line in table), out
    assert "saved to example-judged (train: 8 rows)" in out
    assert "plots          7 PNGs in example-judged/plots/ (score distributions)" in out
    assert len(list((tmp_path / "example-judged/plots/train").glob("*.png"))) == 7
    command = lines[lines.index("errors split   1 row, listed by:") + 1].strip()
    listed = subprocess.run(command.replace("python", sys.executable, 1), shell=True, cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "'kind': 'invalid_json'" in listed and "'row': 1," in listed and listed.count("\n") == 1


def test_a_run_in_a_log_ends_with_a_few_plain_lines(judge, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    judge.configure(faults=[{"fault": "malformed_json", "match": "Australia"}])
    code, out, err = run_cli(capfd, "score", "--example", "-m", "judge", "--base-url", judge.base_url, "--retries", 0)
    assert code == 0, err
    end = out[out.index("scores  ") :].splitlines()
    assert end[0].startswith(f"{'scores':<15}train (8 rows), mean: QA_Relevance ")
    assert len(end) <= 8 and max(map(len, end[:-3])) <= 100, out  # scores (2), errors (2), saved, plots, report
    assert not set("".join(BLOCKS[1:])) & set(out) and "histogram" not in out  # no table, no blocks
    assert "errors split   1 row, listed by:" in out and "load_from_disk('example-judged')" in out
    assert f"plots          7 PNGs in {Path('example-judged', 'plots')}/ (score distributions)" in out
    assert len(out.splitlines()) <= 16


def test_a_streamed_run_reads_its_overview_back_from_the_folder(judge, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    judge.configure(faults=[{"fault": "malformed_json", "match": BROKEN}])
    data = tmp_path / "d.jsonl"
    qa_dataset(40).to_json(data)
    # a name of its own: datasets caches a local folder by its name and files' sizes, and another test's "out"
    # of the same sizes would answer
    out_dir = tmp_path / "streamed-overview"
    code, out, err = run_cli(capfd, *score_args(data, judge, "--streaming", "-o", out_dir, "--retries", "0"))
    assert code == 0, err
    saved = load_dataset(str(out_dir), split="train")
    want = _expected(saved["QA_Clarity"])
    assert want["nulls"] == 1 and f"QA_Clarity {want['mean']:.2f}; 1 null score\n" in out
    (col,) = folder_overview(out_dir).columns
    assert (col.scored, col.nulls, col.median) == (want["scored"], want["nulls"], want["median"])
    assert col.bins == [(str(v), want["counts"][v]) for v in range(1, 11)]
    assert f"hf_judge.load_result('{out_dir}')" in out and "plots          " in out


def test_the_card_shows_settings_a_glance_and_a_gallery_no_reprs(judge, tmp_path):
    # two metrics of different default temperatures: the settings a card used to print as a dict
    # and a prompt with parameters (Binary's positive and negative verdicts)
    ds = qa_dataset(12, "card")
    ds = ds.add_column("prediction", ds["answer"])
    scored = score(ds, ["QA_Clarity", "Q_Math_Difficulty", "Binary"], judge, tmp_path)
    pictures = ["hf_judge/plots/train/QA_Clarity.png", "hf_judge/plots/train/Q_Math_Difficulty.png"]
    card = render_section(scored, scored.summary, pictures=pictures)
    words = re.sub(r"<[^>]*>", "", card)  # the text, without the gallery's HTML attributes
    assert not re.search(r"[{}=]|None", words), words
    assert "| temperature | 0.1 (`QA_Clarity`), 1 (`Q_Math_Difficulty`), 0 (`Binary`) |" in card
    assert "| `negative`: 0, `positive`: 1 |" in card
    assert "| max_tokens | the server's default |" in card
    glance = card[card.index("### Scores at a glance") : card.index("### How they were made")]
    want = _expected(scored["train"]["QA_Clarity"])
    row = f"| `QA_Clarity` | {want['scored']} | {want['nulls']} | {want['mean']:.2f} | {want['median']:.2f} | `1 "
    assert row in glance
    gallery = card[card.index("<table>") : card.index("</table>")]
    for p in pictures:  # a thumbnail that links to the full-size picture
        assert f'<a href="{p}"><img src="{p}" ' in gallery and 'width="240"' in gallery
    assert "![" not in card
    assert re.search(r"\| `Binary` \| 12 \| 0 \| [\d.]+ \|  \| `true \d+ · false \d+` \|", glance)


def test_summary_json_keeps_what_rebuilds_any_rows_prompt(judge, tmp_path):
    judge.configure(record=True)
    ds = qa_dataset(5, "rebuild")
    scored = score(ds, ["QA_Clarity"], judge, tmp_path)
    scored.save_to_disk(tmp_path / "out")
    summary = RunSummary.load(tmp_path / "out")
    assert summary is not None and summary.column_mapping == {"instruction": "question", "output": "answer"}
    record = summary.prompts["QA_Clarity"]
    text = Path("prompts/QA_Clarity.jinja").read_text()
    assert record["file"] == "QA_Clarity.jinja" and record["text"] == text
    assert record["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert json.loads((tmp_path / "out/summary.json").read_text())["prompts"] == summary.prompts
    # row 3's prompt, rebuilt from the saved result alone, is what the judge was sent for it
    metric = parse_jinja_file("QA_Clarity", Path(record["file"]), record["text"], record["params"])
    row = load_from_disk(tmp_path / "out")["train"][3]
    rebuilt = metric.messages({var: row[col] for var, col in summary.column_mapping.items()})
    sent = [b["messages"] for b in judge.stats()["bodies"] if "rebuild-3:" in json.dumps(b["messages"])]
    assert sent == [rebuilt]


def test_a_panel_over_qa_all_still_fits_one_screen(judge, tmp_path):
    judge.configure(faults=[{"fault": "malformed_json", "match": BROKEN}])
    scored = score(qa_dataset(8, "row"), ["QA_All"], judge, tmp_path, models="judge,b", retries=0)
    lines = [*str(scored.summary).splitlines(), *overview(scored, saved_to="out").lines()]
    assert len(lines) + 2 <= 24 and max(map(len, lines[:-1])) <= 100, "\n".join(lines)  # + saved to, plots
    assert sum(line.startswith("agreement") for line in lines) == 1 and "agree" in lines[lines.index(
        next(line for line in lines if line.startswith("scores"))) + 1]  # fmt: skip
    assert "  + 14 columns beside them (each judge's): in the data and its plots" in lines
    assert any(
        line.endswith("; agree: judges scored alike; len ρ: score/length rank corr. (!: bias)") for line in lines
    )
    # several judges' columns flagged for length bias: one line names them (summary.json has every judge's)
    flagged = [c for c, f in scored.summary.length_bias.items() if f.get("judge") and f["warning"]]
    judged = [line for line in lines if line.startswith("length bias    judges:")]
    assert len(flagged) > 1 and len(judged) == 1 and all(f"{c} " in judged[0] for c in flagged)


def test_length_bias_shows_where_the_summary_has_it():
    ds = DatasetDict(train=Dataset.from_dict({"QA_Clarity": [3, 5, 8, 9], "QA_Relevance": [7, 7, 6, 8]}))
    summary = RunSummary(columns=["QA_Clarity", "QA_Relevance"])
    assert "len ρ" not in str(overview(ds, summary))  # a summary without the field (older ones)
    bias = {
        "rho": 0.62,
        "low": 0.3,
        "high": 0.8,
        "n": 4,
        "unit": "characters",
        "warning": True,
    }
    summary.length_bias = {"QA_Clarity": bias, "QA_Relevance": {**bias, "rho": -0.05, "warning": False}}  # type: ignore[attr-defined]
    text = str(overview(ds, summary))
    # the flagged column is marked in the table; the summary's own lines say why (str(summary))
    assert "len ρ" in text and "+0.62!" in text and "-0.05 " in text and "-0.05!" not in text
    # issue 33: the header is said in words below the table
    assert text.splitlines()[0].endswith("; len ρ: score/length rank corr. (!: bias)")


def test_a_column_of_many_distinct_values_or_nans_stays_bounded_and_close():
    n = 100_000
    values = [(i * 7919) % n + 0.5 for i in range(n)]  # every value distinct
    ds = Dataset.from_dict({"measure": values, "odd": [float("nan") if i % 4 == 0 else 2.0 for i in range(n)]})
    by_name = {c.column: c for c in overview(DatasetDict(train=ds)).columns}
    wide, odd = by_name["measure"], by_name["odd"]
    assert wide.mean == pytest.approx(statistics.mean(values))
    assert wide.median == pytest.approx(statistics.median(values), rel=5e-3)  # 3 significant digits
    assert sum(c for _, c in wide.bins) == n and len(wide.bins) == 10
    assert (odd.scored, odd.nulls, odd.mean) == (75_000, 25_000, 2.0)  # a NaN is no score


def test_a_pairwise_judges_scores_are_counted_on_their_half_point_scale(judge, tmp_path):
    """A pairwise score is the mean of its two orders' integer scores (3.5, 8): its histograms, at a glance and in
    the card's pictures, have one bin per half point (1, 1.5, ... 10), not ten bins labelled 1, 1.90, 2.80 whose
    edges fall between the values (issue 40)."""
    from hf_judge.results.card import column_stats

    pairs = Dataset.from_dict(
        {
            "question": [f"row-{i}: which is better?" for i in range(30)],
            "response1": [f"first {i} " * (i % 4 + 1) for i in range(30)],
            "response2": [f"second {i}" for i in range(30)],
        }
    )
    cols = {"question": "question", "response1": "response1", "response2": "response2"}
    scored = score(pairs, ["Comparative"], judge, tmp_path, columns=cols)
    by_name = {c.column: c for c in overview(scored).columns}
    grid = [v / 2 for v in range(2, 21)]  # 1, 1.5, ... 10: the declared range in half points
    for column in ("Comparative_score_1", "Comparative_score_2"):
        values = scored["train"][column]
        counts = Counter(values)
        assert any(not float(v).is_integer() for v in counts), "the judge's replies give some half points"
        labels = [str(int(v)) if v.is_integer() else str(v) for v in grid]
        assert by_name[column].bins == [(label, counts[v]) for label, v in zip(labels, grid, strict=True)]
        hist = column_stats(scored["train"], column)["hist"]
        assert hist == {(str(int(v)) if v.is_integer() else str(v)): n for v, n in sorted(counts.items())}


def test_the_columns_left_out_of_the_table_are_counted_in_words_that_agree_with_the_count(judge, tmp_path):
    """One column beside the scores is "1 column", and the words say what it is: a pairwise judge's is the orders'
    disagreement, not "each judge's, spreads" (issue 40: "+ 1 columns"); past TERMINAL_TABLES score columns by a
    group, one more is "1 more score column"."""
    from hf_judge.results.groups import TERMINAL_TABLES, GroupTable, overview_lines

    pairs = Dataset.from_dict({"question": ["row-1: ?", "row-2: ?"], "response1": ["a", "b"], "response2": ["c", "d"]})
    cols = {"question": "question", "response1": "response1", "response2": "response2"}
    scored = score(pairs, ["Comparative"], judge, tmp_path, columns=cols)
    lines = overview(scored).lines(terminal=True)
    assert "  + 1 column beside them (the two orders' disagreement): in the data and its plots" in lines
    tables = [GroupTable("train", "subject", f"S{i}", "number", []) for i in range(TERMINAL_TABLES + 1)]
    assert overview_lines(tables, terminal=True)[-1] == "  + 1 more score column by subject: in the report page"
