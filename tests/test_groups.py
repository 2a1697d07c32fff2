"""Scores by group (``--by subject``, hf_judge.results.groups): the figures per group against pandas' groupby, their
order and cap, the same from a streamed run's Parquet folder, the card's section, ``filter --keep-group`` /
``--drop-group``, and a group column that is missing (refused before any request). Runs go to the loopback judge."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, load_from_disk
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge import ConfigError, RunSummary, filter_by_scores, overview
from hf_judge.results import groups
from hf_judge.results.card import render_section
from hf_judge.results.overview import folder_overview

SUBJECTS = ["algebra", "geometry", "calculus", "logic", "probability"]
SCORES = ["QA_Correctness", "QA_Clarity"]


def _mixed(n: int) -> Dataset:
    """``n`` question/answer rows from five subjects of different sizes, a few without a subject."""
    ds = qa_dataset(n, "row")
    subject = [None if i % 17 == 5 else SUBJECTS[[0, 1, 0, 2, 1, 3, 0, 4, 2][i % 9]] for i in range(n)]
    return ds.add_column("subject", subject)


def _expected(df: pd.DataFrame, column: str) -> list[dict]:
    """A score's figures per subject as pandas computes them, sorted as the tables are: lowest mean first, then
    most rows, then name; a group without a scored row last."""
    key = df["subject"].fillna("(null)")
    out = []
    for name, g in df.groupby(key)[column]:
        values = g.dropna()
        mean = values.mean() if len(values) else None
        out.append(
            {
                "name": name,
                "rows": len(g),
                "nulls": int(g.isna().sum()),
                "mean": mean,
                "median": values.median() if len(values) else None,
                "counts": values.astype(int).value_counts().to_dict(),
            }
        )
    return sorted(out, key=lambda e: (e["mean"] is None, e["mean"] or 0.0, -e["rows"], e["name"]))


def _check_table(table: groups.GroupTable, df: pd.DataFrame) -> None:
    want = _expected(df, table.column)
    assert [g.name for g in table.groups] == [w["name"] for w in want]
    for g, w in zip(table.groups, want, strict=True):
        f = g.figures
        assert (f.rows, f.nulls) == (w["rows"], w["nulls"]), g.name
        assert f.mean == pytest.approx(w["mean"]) and f.median == w["median"], g.name
        # the histogram spans the prompt's declared range, 1..10, in every group alike
        assert f.bins == [(str(v), w["counts"].get(v, 0)) for v in range(1, 11)], g.name


def test_the_figures_per_group_are_those_of_a_pandas_groupby(judge, tmp_path):
    judge.configure(faults=[{"fault": "malformed_json", "rate": 0.15}])  # some nulls (by the prompt's hash)
    scored = score(_mixed(60), ["QA_Correctness", "QA_Clarity"], judge, tmp_path, retries=0)
    df = scored["train"].to_pandas()
    assert df[SCORES].isna().any().all() and df["subject"].isna().any()  # nulls in the scores and in the groups
    ov = overview(scored, by="subject")
    assert [(t.split, t.by, t.column) for t in ov.groups] == [("train", "subject", c) for c in SCORES]
    for table in ov.groups:
        _check_table(table, df)
        assert table.more == 0 and table.more_text() == ""
    means = [g.figures.mean for g in ov.groups[0].groups]
    assert means == sorted(means)  # the worst first, for a score where higher is better
    lines = ov.lines()
    head = lines.index(f"{'by subject':<15}QA_Correctness, lowest mean first")
    worst = ov.groups[0].groups[0]
    assert lines[head + 2].split()[:4] == [
        worst.name,
        str(worst.figures.rows),
        str(worst.figures.nulls),
        f"{worst.figures.mean:.2f}",
    ]
    # in a log: one line per score, the means lowest first
    plain = " ".join(" ".join(ov.lines(terminal=False)).split())
    assert f"QA_Correctness, mean, lowest first: {worst.name} {worst.figures.mean:.2f}," in plain


def test_many_groups_are_capped_and_summed_up_and_values_past_the_tracked_ones_are_counted(monkeypatch):
    ds = Dataset.from_dict(
        {"source": [f"s{i % 30:02d}" for i in range(300)], "QA_Clarity": [i % 7 + 1 for i in range(300)]}
    )
    (table,) = groups.split_groups(ds, "train", "source", max_groups=5)
    assert len(table.groups) == 5 and table.more == 25 and table.more_rows == 250
    assert table.more_text() == "25 more groups (250 rows)"
    shown = table.to_markdown().splitlines()
    assert len(shown) == 2 + 5 + 1 and shown[-1].startswith("| *25 more groups (250 rows)* |")
    # a column of ids: past TRACKED_GROUPS values, rows are counted, not compared, and the table says so
    monkeypatch.setattr(groups, "TRACKED_GROUPS", 10)
    (table,) = groups.split_groups(ds, "train", "source", max_groups=5)
    assert (len(table.groups), table.more, table.untracked, table.more_rows) == (5, 25, 20, 200 + 50)
    assert "past the first 10 values of source, not compared" in table.more_text()


def test_group_names_number_boolean_classlabel_and_null():
    ds = Dataset.from_dict(
        {"level": [1, 2, 2, None], "ok": [True, False, True, None], "lab": [0, 1, 1, 0], "s": [4, 6, 8, 3]}
    ).cast_column("lab", ClassLabel(names=["easy", "hard"]))
    names = {}
    for by in ("level", "ok", "lab"):
        (table,) = [t for t in groups.split_groups(ds, "train", by) if t.column == "s"]
        names[by] = [(g.name, g.figures.mean) for g in table.groups]
    # lowest mean of s first; a tie (6.0) goes to the group of more rows
    assert names == {
        "level": [("(null)", 3), ("1", 4), ("2", 7)],
        "ok": [("(null)", 3), ("true", 6), ("false", 6)],
        "lab": [("easy", 3.5), ("hard", 7)],
    }
    with pytest.raises(ConfigError, match=r"no column 'levl' to group by in split 'train'; did you mean 'level'\?"):
        groups.split_groups(ds, "train", "levl")


def test_a_streamed_run_groups_from_its_parquet_folder_as_a_dataset_does(judge, tmp_path, capfd, monkeypatch):
    data = tmp_path / "mix.jsonl"
    _mixed(50).to_json(data)
    code, out, err = run_cli(
        capfd,
        *score_args(data, judge, "--streaming", "--by", "subject", "-o", tmp_path / "out", metrics="QA_Correctness"),
    )
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["group_by"] == "subject"
    assert "### Scores by subject" in (tmp_path / "out" / "README.md").read_text()  # the folder's card
    assert f"{'by subject':<15}QA_Correctness, mean, lowest first: " in out  # a log's form: no terminal here
    # the shards are read a batch at a time: batches smaller than a shard
    import pyarrow.parquet as pq

    batches, sizes = pq.ParquetFile.iter_batches, []

    def small(self, *a, **kw):
        for b in batches(self, *a, **{**kw, "batch_size": 7}):
            sizes.append(b.num_rows)
            yield b

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", small)
    (table,) = folder_overview(tmp_path / "out").groups  # by the summary's group_by
    assert max(sizes) == 7
    df = pd.read_parquet(tmp_path / "out" / "data")
    _check_table(table, df)


def test_score_by_records_the_column_the_page_and_card_show_it_and_a_missing_one_sends_nothing(judge, tmp_path, capfd):
    data = tmp_path / "mix.jsonl"
    _mixed(40).to_json(data)
    judge.reset()
    code, _, err = run_cli(capfd, *score_args(data, judge, "--by", "subjet", "-o", tmp_path / "no"))
    assert code != 0 and "no column 'subjet' to group by in split 'train' (--by); did you mean 'subject'?" in err
    assert judge.stats()["requests"] == 0 and not (tmp_path / "no").exists()
    code, out, err = run_cli(capfd, *score_args(data, judge, "--by", "subject", "-o", tmp_path / "out"))
    assert code == 0, err
    summary = RunSummary.load(tmp_path / "out")
    assert summary is not None and summary.group_by == "subject"
    # the page written at the end of the run: its overview holds the tables, from the summary's group_by
    page = (tmp_path / "out" / "report.html").read_text()
    blob = page.split("id='hf-judge-data'>", 1)[1].split("</script>", 1)[0]
    tables = json.loads(blob)["overview"]["groups"]
    df = load_from_disk(str(tmp_path / "out"))["train"].to_pandas()
    want = _expected(df, "QA_Clarity")
    assert [g["name"] for g in tables[0]["groups"]] == [w["name"] for w in want]
    assert [g["rows"] for g in tables[0]["groups"]] == [w["rows"] for w in want]
    # the card's section, by the summary's group_by too
    result = DatasetDict({"train": load_from_disk(str(tmp_path / "out"))["train"]})
    card = render_section(result, summary)
    section = card.split("### Scores by subject", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| subject | rows | nulls | mean | median | histogram |")
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows[1:]] == [w["name"] for w in want]
    w = want[0]
    assert rows[1].startswith(
        f"| {w['name']} | {w['rows']:,} | {w['nulls']:,} | {w['mean']:.2f} | {w['median']:.2f} | `"
    )


def test_the_card_escapes_group_names():
    ds = Dataset.from_dict({"src": ["a|b", "<img src=x onerror=alert(1)>", "a|b"], "QA_Clarity": [3, 5, 7]})
    card = render_section(DatasetDict(train=ds), None, by="src")
    assert "<img" not in card and "| a\\|b | 2 | 0 | 5.00 | 5.00 |" in card and "&lt;img src=x" in card


def test_filter_keeps_or_drops_groups_and_names_a_typo(judge, tmp_path, capfd):
    data = tmp_path / "mix.jsonl"
    _mixed(40).to_json(data)
    code, _, err = run_cli(capfd, *score_args(data, judge, "--by", "subject", "-o", tmp_path / "out"))
    assert code == 0, err
    df = load_from_disk(str(tmp_path / "out"))["train"].to_pandas()
    code, out, err = run_cli(
        capfd, "filter", tmp_path / "out", "--keep-group", "subject=algebra,geometry", "-o", tmp_path / "kept"
    )
    assert code == 0, err
    kept = load_from_disk(str(tmp_path / "kept"))["train"].to_pandas()
    assert list(kept["question"]) == list(df[df["subject"].isin(["algebra", "geometry"])]["question"])
    summary = RunSummary.load(tmp_path / "kept")
    assert summary is not None and summary.filters["keep_groups"] == {"subject": ["algebra", "geometry"]}
    assert f"train: kept {len(kept)} of 40 rows" in out
    assert f"filtered       subject in {{algebra, geometry}}; kept train: {len(kept)} of 40" in str(summary)
    code, _, err = run_cli(capfd, "filter", tmp_path / "out", "--drop-group", "subject=geometri", "-o", tmp_path / "x")
    assert code != 0 and "no group 'geometri' in column 'subject'; did you mean 'geometry'?" in err
    assert not (tmp_path / "x").exists()
    # the library: both at once, with a threshold; the nulls of the group column are the "(null)" group
    ds = load_from_disk(str(tmp_path / "out"))
    got = filter_by_scores(ds, min={"QA_Clarity": 1}, drop_groups={"subject": ["logic", "(null)"]})["train"]
    want = df[~df["subject"].isin(["logic"]) & df["subject"].notna() & df["QA_Clarity"].notna()]
    assert list(got["question"]) == list(want["question"])
    with pytest.raises(ConfigError, match="no column 'sbject' to group by"):
        filter_by_scores(ds, keep_groups={"sbject": ["logic"]})


def test_a_stream_s_page_counts_the_groups_as_its_rows_pass():
    """A streamed push with no folder builds its page as the rows pass (results/report_stream.py): its tables are
    those of the whole split, however the rows came in batches."""
    import pyarrow as pa
    from datasets import Features, Value

    from hf_judge.results.errors_split import ErrorFiles
    from hf_judge.results.report_stream import StreamPage

    summary = RunSummary(group_by="src", columns=["S"])
    page = StreamPage(source="me/x")
    page.start("train", Features({"src": Value("string"), "S": Value("int64")}), summary)
    page.add("train", pa.table({"src": ["a", "b", "a"], "S": [1, 5, 3]}))
    page.add("train", pa.table({"src": ["b", "c"], "S": [None, 2]}))
    html = page.html(summary, ErrorFiles()).decode()
    (table,) = json.loads(html.split("id='hf-judge-data'>", 1)[1].split("</script>", 1)[0])["overview"]["groups"]
    assert [(g["name"], g["rows"], g["nulls"], g["mean"]) for g in table["groups"]] == [
        ("a", 2, 0, 2.0),
        ("c", 1, 0, 2.0),
        ("b", 2, 1, 5.0),
    ]


def test_a_filtered_result_s_error_rows_are_those_of_its_rows_renumbered(judge, tmp_path, capfd):
    """Base: the errors split passed through whole, with the numbers of the rows before the filter: a row dropped
    kept its error row, and a kept row's error pointed at another row (agreement and the page charged it there)."""
    data = tmp_path / "mix.jsonl"
    _mixed(40).to_json(data)
    failing = [1, 3, 13, 22]  # geometry, calculus, geometry, no subject: two kept, two dropped
    judge.configure(faults=[{"fault": "status", "status": 400, "match": f"row-{i}:"} for i in failing])
    code, _, err = run_cli(capfd, *score_args(data, judge, "-o", tmp_path / "out", "--cache-dir", tmp_path / "c"))
    assert code == 0, err  # rows failed: the errors split has them
    before = load_from_disk(str(tmp_path / "out"))
    assert sorted(set(before["errors"]["row"])) == failing
    code, _, err = run_cli(
        capfd, "filter", tmp_path / "out", "--keep-group", "subject=algebra,geometry", "--keep-missing",
        "-o", tmp_path / "kept",
    )  # fmt: skip
    assert code == 0, err
    kept = load_from_disk(str(tmp_path / "kept"))
    questions = kept["train"]["question"]
    # each error row names the kept row of the failed question, and only kept rows have one
    want = sorted(
        (questions.index(before["train"][r]["question"]), m)
        for r, m in zip(before["errors"]["row"], before["errors"]["metric"], strict=True)
        if before["train"][r]["question"] in questions
    )
    assert sorted(zip(kept["errors"]["row"], kept["errors"]["metric"], strict=True)) == want
    assert 0 < len(kept["errors"]) < len(before["errors"])  # some failed rows kept, some dropped
    for r, m in zip(kept["errors"]["row"], kept["errors"]["metric"], strict=True):
        assert kept["train"][r][m] is None  # the row it names is the one that failed
    summary = RunSummary.load(tmp_path / "kept")
    assert summary.filters["error_rows"] == {"before": len(before["errors"]), "kept": len(kept["errors"])}
    card = render_section(kept, summary)
    assert f"- **Error rows kept:** {len(kept['errors'])} of {len(before['errors'])} (those of the rows kept)" in card
    # the library, on a Dataset of its own: rows renumbered too; a threshold drops the failed rows and their errors
    got = filter_by_scores(before, min={"QA_Clarity": 1})
    assert len(got["errors"]) == 0 and len(got["train"]) == 40 - len(failing)
    assert "__hf_judge_row__" not in got["train"].column_names
