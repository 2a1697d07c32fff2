"""The report page (``hf-judge view``) and ``show-prompt`` on results someone else wrote: a hostile or broken
``summary.json`` (a recorded prompt that asks for gigabytes or minutes, NaN, a lone surrogate, wrong types), cells of
100 MB, a user's own ``a__b`` columns, ``-o`` pointed at the result's own files; and the key the page's labels are
kept under. What the page looks like in a browser is tests/test_report.py's.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict, load_from_disk
from helpers import run_cli

from hf_judge import write_report
from hf_judge.results.summary import RunSummary

ROOT = Path(__file__).resolve().parent.parent
CLARITY = (ROOT / "prompts" / "Q_Clarity.jinja").read_text()


def _embedded(page: Path) -> dict:
    text = page.read_text()
    start = text.index("id='hf-judge-data'>") + len("id='hf-judge-data'>")
    return json.loads(text[start : text.index("</script>", start)])


def _result(folder: Path, summary: dict | None, rows: int = 3, **columns) -> Path:
    """A saved result: ``rows`` questions (and ``columns``), with ``summary`` as its summary.json."""
    data = {"question": [f"q{i}?" for i in range(rows)], "Q_Clarity": list(range(rows)), **columns}
    DatasetDict(train=Dataset.from_dict(data)).save_to_disk(folder)
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


def _recorded(text: str) -> dict:
    """A summary recording ``text`` as the prompt file of Q_Clarity (its hash as recorded: the text is not edited)."""
    sha = hashlib.sha256(text.encode()).hexdigest()
    return {
        "model": "judge",
        "metrics": {"Q_Clarity": ""},
        "columns": ["Q_Clarity"],
        "column_mapping": {"instruction": "question"},
        "prompts": {"Q_Clarity": {"file": "Q_Clarity.jinja", "sha256": sha, "text": text, "params": {}}},
    }


# in a process of its own whose address space is capped at 2 GB: what a render may allocate is what is measured
_PEAK_MB = """
def _peak_mb():  # this process's own high-water mark: ru_maxrss would count the test process it was forked from
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) // 1024
"""
_CAPPED = (
    _PEAK_MB
    + """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from hf_judge.cli import main
code = main(sys.argv[1:])
print("PEAK_MB", _peak_mb())
sys.exit(code)
"""
)


def _capped(where: Path, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """``hf-judge ARGS`` in a process of its own, run in ``where`` (not the checkout: its hf_judge is PYTHONPATH's)."""
    return subprocess.run(
        [sys.executable, "-c", _CAPPED, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=where
    )


@pytest.mark.parametrize(
    "body, said",
    [
        ("{{ 'x' * 3000000000 }}", "`\\*` would build about 3,000,000,000 characters"),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
            # which bound it meets first (10^6 iterations, 2 s, what it prints) depends on the machine's speed
            "the template's loops ran more times than a render may|the template ran past its time budget of 2 s"
            "|what the template prints would build about",
        ),
    ],
    ids=["string-times-3e9", "nested-range-loops"],
)
def test_a_hostile_recorded_prompt_is_refused_within_bounds_by_show_prompt_and_view(tmp_path, body, said):
    """A recorded prompt asking for 3 GB or 10^10 loop iterations: ``show-prompt`` says which bound it passed
    (exit 2) and ``view`` writes the page, whose prompt says why it is not shown; neither grows past the 2 GB
    its process may have, nor runs for minutes."""
    folder = _result(tmp_path / "hostile", _recorded(CLARITY + "\n" + body))
    shown = _capped(tmp_path, "show-prompt", folder, "--row", 1, "--metric", "Q_Clarity")
    assert shown.returncode == 2 and re.search(said, shown.stderr), shown.stderr[-2000:]
    assert "MemoryError" not in shown.stderr and "Traceback" not in shown.stderr
    viewed = _capped(tmp_path, "view", folder)
    assert viewed.returncode == 0, viewed.stderr[-2000:]
    peak = int(re.search(r"PEAK_MB (\d+)", viewed.stdout)[1])
    assert peak < 600, peak  # what importing hf-judge and datasets takes, and no more
    prompts = _embedded(folder / "report.html")["splits"]["train"]["prompts"]["Q_Clarity"]
    assert re.search(said, prompts["none"]) and "cannot be shown" in prompts["none"]


def test_a_bounded_render_still_renders_a_long_document_and_a_normal_prompt(tmp_path, capfd):
    """The bounds grow with what a row holds: a 3-million-character question (past the 1-million budget of its
    own) renders whole, as sent."""
    long = "why " * 750_000
    folder = _result(tmp_path / "long", _recorded(CLARITY + "{% for i in range(3) %}[{{ i }}]{% endfor %}"), rows=1)
    Dataset.from_dict({"question": [long], "Q_Clarity": [1]}).save_to_disk(folder / "train")
    code, out, err = run_cli(capfd, "show-prompt", folder, "--row", 0, "--metric", "Q_Clarity", "--json")
    assert code == 0, err
    [[message]] = json.loads(out)
    assert long in message["content"] and message["content"].endswith("[0][1][2]")


def test_view_degrades_on_a_summary_with_nan_a_lone_surrogate_and_wrong_types(tmp_path, capfd):
    folder = _result(tmp_path / "odd", None)
    summary = {
        **_recorded(CLARITY),
        "model": "judge\udc80x",
        "elapsed_s": float("nan"),
        "rows": "many",
        "runs": "none",
        "sampling": {"judges": "a,b"},
        "filters": {"min": {"Q_Clarity": "high"}},
        "price": {"input": "free"},
    }
    # json.dumps writes the surrogate as \\udc80 and the NaN as NaN, as a hand-edited or foreign file may hold them
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    code, out, err = run_cli(capfd, "view", folder)
    assert code == 0, err
    for named in ("NaN", "lone surrogate", "`rows` is str", "`runs` is str", "`sampling.judges`", "`filters.min`"):
        assert named in out, named
    page = folder / "report.html"
    data = _embedded(page)  # a whole page: its JSON parses
    assert data["overview"]["model"] == "judge\ufffdx" and data["overview"]["rows"] == {}
    assert data["splits"]["train"]["prompts"]["Q_Clarity"]["rows"]  # the prompts are still rebuilt
    # not JSON at all: the page is written without the run's details; what it reads from the data and the folder
    # (pictures, calibrations, the scores by group: none without --by) is still there
    (folder / "summary.json").write_text("{nope", encoding="utf-8")
    code, out, err = run_cli(capfd, "view", folder)
    assert (
        code == 0
        and "summary.json cannot be read" in out
        and _embedded(page)["overview"]
        == {
            "pictures": _embedded(page)["overview"]["pictures"],
            "calibrations": [],
            "groups": [],
            "choice": None,  # no choose_judge.json beside it
        }
    )


def test_view_refuses_to_write_over_a_file_of_the_result(tmp_path, capfd):
    folder = _result(tmp_path / "mine", _recorded(CLARITY))
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    for target in (folder / "summary.json", folder / "train" / "state.json", folder / "dataset_dict.json"):
        code, _, err = run_cli(capfd, "view", folder, "-o", target)
        assert code != 0 and f"-o {target} is a file of the result" in err, err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    code, _, err = run_cli(capfd, "view", folder, "-o", folder / "report.html")  # its own page: again, fine
    assert code == 0, err
    code, _, err = run_cli(capfd, "view", folder, "-o", tmp_path / "elsewhere.html")
    assert code == 0 and (tmp_path / "elsewhere.html").stat().st_size > 0


def test_only_the_panel_the_summary_declares_is_drawn_as_one(tmp_path):
    """A user's own ``a__b`` columns are no judge panel; a run's panel (its judges in summary.sampling) is."""
    d = Dataset.from_dict({"q": ["x", "y", "z"], "size__small": [1, 2, 3], "size__large": [3, 2, 9]})
    page = write_report(DatasetDict(train=d), tmp_path / "own.html", summary=RunSummary(model="m"))
    split = _embedded(page)["splits"]["train"]
    assert split["pooled"] == {} and split["scores"] == ["size__small", "size__large"]
    panel = RunSummary(
        model="m", sampling={"judges": [{"name": "small", "model": "a"}, {"name": "large", "model": "b"}]}
    )
    page = write_report(DatasetDict(train=d), tmp_path / "panel.html", summary=panel)
    assert set(_embedded(page)["splits"]["train"]["pooled"]["size"]["judges"]) == {"small", "large"}


_PEAK = (
    _PEAK_MB
    + """
import sys
from hf_judge.cli import main
code = main(["view", sys.argv[1], "-o", sys.argv[2]])
print("PEAK_MB", _peak_mb())
sys.exit(code)
"""
)


def test_long_cells_are_cut_before_they_are_read_so_view_s_memory_stays_bounded(tmp_path):
    """12 cells of 25 MB (300 MB of text): ``view``'s peak RSS is within 60 MB of a 12-row result of short cells
    (it was 2 x the text and more: 12 cells of 100 MB took 2.5 GB), and the page shows each cut, marked."""
    peaks = {}
    for name, size in (("short", 0), ("long", 25_000_000)):
        question = [f"q{i} " + "x" * size for i in range(12)]
        _result(tmp_path / name, None, rows=12, question=question)
        run = subprocess.run(
            [sys.executable, "-c", _PEAK, str(tmp_path / name), str(tmp_path / f"{name}.html")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        peaks[name] = int(re.search(r"PEAK_MB (\d+)", run.stdout)[1])
    assert peaks["long"] - peaks["short"] < 60, peaks
    split = _embedded(tmp_path / "long.html")["splits"]["train"]
    cap = _embedded(tmp_path / "long.html")["caps"]["text"]
    assert [len(v) for v in split["columns"]["question"]] == [cap] * 12 and split["cut"]["question"] == list(range(12))
    assert split["columns"]["question"][3] == ("q3 " + "x" * cap)[:cap]


def test_labels_are_kept_under_the_rows_identity_not_the_result_s_name(tmp_path):
    """Two different 8-row results viewed as ``out/`` get two keys; one result's page written from memory, from
    its folder and again gets one."""
    one = DatasetDict(train=Dataset.from_dict({"question": [f"a{i}" for i in range(8)], "S": list(range(8))}))
    two = DatasetDict(train=Dataset.from_dict({"question": [f"b{i}" for i in range(8)], "S": list(range(8))}))
    summary = RunSummary(model="m", metrics={"S": "h"}, rows={"train": 8})

    def key(result) -> str:
        return _embedded(write_report(result, tmp_path / "out" / "report.html", summary=summary, source="out/"))["key"]

    assert key(one) != key(two)
    one.save_to_disk(tmp_path / "saved")
    assert key(one) == key(load_from_disk(tmp_path / "saved")) == key(one)


def test_a_priced_summary_is_checked_without_a_warning():
    """A run priced from genai-prices records where its prices came from (``source``): a text beside the numbers,
    which the page's check must not read as a broken price (every priced run warned "price holds something
    other than numbers")."""
    from hf_judge import RunSummary
    from hf_judge.results.report_summary import checked_summary
    from hf_judge.transport.prices import load_prices

    price = load_prices()["gpt-4.1-nano"].model_dump()
    assert isinstance(price["source"], str)
    checked, problems = checked_summary(RunSummary(price=price, prompt_tokens=1000, completion_tokens=10))
    assert problems == [] and checked is not None and checked.price == price
    _, problems = checked_summary(RunSummary(price={**price, "input": "cheap"}))
    assert problems == ["summary.json: `price` holds something other than numbers: ignored"]


def _noted(folder: Path, notes: int, size: int = 1_000) -> Path:
    """A result whose summary.json holds ``notes`` notes of ``size`` characters, written as it is read: bit by bit."""
    _result(folder, None)
    with (folder / "summary.json").open("w", encoding="utf-8") as f:
        f.write(json.dumps(_recorded(CLARITY))[:-1] + ', "notes": [')
        f.writelines(("," if i else "") + json.dumps(f"note {i} " + "x" * size) for i in range(notes))
        f.write("]}")
    return folder


def test_the_page_stays_within_a_fixed_size_whatever_the_summary_s_notes(tmp_path, capfd):
    """The page of a summary holding 1 MB or 12 MB of notes (300 MB gave a 287 MB page and 1.66 GB of RSS) is the
    same small page: 100 notes of at most 2,000 characters (``report_summary.MAX_NOTES``, ``MAX_NOTE``), and a
    line saying what it left out; the run's details and prompts are still there."""
    sizes, notes = {}, {}
    for n in (1_000, 12_000):
        folder = _noted(tmp_path / f"n{n}", n)
        code, out, err = run_cli(capfd, "view", folder)
        assert code == 0, err
        sizes[n] = (folder / "report.html").stat().st_size
        data = _embedded(folder / "report.html")
        notes[n] = data["overview"]["notes"]
        assert data["overview"]["model"] == "judge" and data["splits"]["train"]["prompts"]["Q_Clarity"]["rows"]
        assert f"warning: summary.json: the page leaves out {n - 100:,} of the {n:,} notes" in out
        assert data["overview"]["left_out"] == [f"{n - 100:,} of the {n:,} notes"]
    # the same page but for the counts in its lines (and the folder's name)
    assert abs(sizes[1_000] - sizes[12_000]) < 50 and sizes[12_000] < 400_000, sizes
    assert notes[1_000] == notes[12_000] == [f"note {i} " + "x" * 1_000 for i in range(100)]
    # the library's page too, from a summary in memory: a note of 5 MB is cut, 3 MB of figures left out
    big = RunSummary(model="m", notes=["y" * 5_000_000], agreement={"x": ["z" * 15_000] * 200})
    with pytest.warns(UserWarning, match="the page leaves out") as said:
        page = write_report(DatasetDict(train=Dataset.from_dict({"q": ["a"]})), tmp_path / "lib.html", summary=big)
    assert [str(w.message) for w in said] == [
        "summary.json: the page leaves out a note of 5,000,000 characters (cut at 2,000)",
        "summary.json: the page leaves out the figure `agreement` (3,000,807 characters)",
    ]
    overview = _embedded(page)["overview"]
    assert overview["notes"] == ["y" * 2_000 + " [cut at 2,000 characters]"] and "agreement" not in overview["figures"]
    assert page.stat().st_size < 400_000


def test_a_summary_over_the_size_cap_is_not_read(tmp_path, capfd):
    """300 MB of summary.json (sparse: what is in it is never read) is left out with one line that names it and
    its size; the page is written, without the run's details."""
    folder = _result(tmp_path / "huge", _recorded(CLARITY))
    with (folder / "summary.json").open("r+b") as f:
        f.truncate(300_000_000)
    code, out, err = run_cli(capfd, "view", folder)
    assert code == 0, err
    assert f"warning: {folder / 'summary.json'} is 300.0 MB, over the 16.0 MB a summary.json may be" in out, out
    assert "model" not in _embedded(folder / "report.html")["overview"]


@pytest.mark.parametrize("depth", [900, 100_000])
def test_a_deeply_nested_summary_is_cut_or_left_out_with_a_message(tmp_path, capfd, depth):
    """A value nested 900 levels (which JSON reads: the page's own walk was a raw RecursionError) is cut at 32
    levels, naming its field; 100,000 levels (past Python's JSON reader) leave the file out, naming it."""
    folder = _result(tmp_path / "deep", None)
    nested = '{"a":' * depth + "1" + "}" * depth
    (folder / "summary.json").write_text('{"model": "judge", "agreement": ' + nested + "}", encoding="utf-8")
    code, out, err = run_cli(capfd, "view", folder)
    assert code == 0 and "RecursionError" not in err + out, err
    if depth == 900:
        assert "warning: summary.json: `agreement` nests deeper than 32 levels: what is deeper is left out" in out
        assert _embedded(folder / "report.html")["overview"]["model"] == "judge"
    else:
        assert f"warning: {folder / 'summary.json'} nests deeper than Python's JSON reader goes: it is not read" in out
