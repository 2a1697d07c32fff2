"""Metric packs: prompt files a package ships and registers under the entry-point group ``hf_judge.metrics``.

Each test lays its packs out in a temporary folder on ``sys.path`` the way pip installs a wheel (the package,
and a ``.dist-info`` folder with ``METADATA`` and ``entry_points.txt``), so ``importlib.metadata`` finds them
exactly as it finds an installed distribution: no pip, no network, nothing patched.
tests/packs/hf_judge_demo_pack is a real pack (``pip install ./tests/packs/hf_judge_demo_pack`` installs it);
the others are written by the tests. Distribution names differ from test to test: hf-judge says each warning
once per process.
"""

from __future__ import annotations

import logging
import pickle
import shutil
import sys
from pathlib import Path

import pytest
from helpers import qa_dataset, run_cli, score

from hf_judge import available_metrics, load_metric
from hf_judge.errors import PromptFileError, UnknownMetricError
from hf_judge.judging.metrics import builtin_prompts_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

DEMO = Path(__file__).parent / "packs" / "hf_judge_demo_pack"
DEMO_PACK = {"name": "hf-judge-demo-pack", "version": "0.1.0", "entry_point": "demo"}
SCORE = """---
description: {description}
outputs:
  reason: {{type: string}}
  score: {{type: integer, minimum: 1, maximum: 10}}
---
Question: {{{{ instruction }}}}
{description} Reply as {{"reason": ..., "score": ...}}.
"""


def _dist_info(site: Path, dist: str, version: str, entry_points: dict[str, str]) -> None:
    """What pip writes for an installed wheel, as far as importlib.metadata reads it."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "[hf_judge.metrics]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    (info / "RECORD").write_text("")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """``site(name)``: a fresh folder on sys.path (first), to install packs into before it is put there."""

    def make(name: str = "site", *, prepare=None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        if prepare is not None:
            prepare(folder)
        monkeypatch.syspath_prepend(str(folder))  # also clears importlib's caches of folder listings
        return folder

    return make


def install_demo(folder: Path, *, version: str | None = None, prompt: str | None = None) -> None:
    """tests/packs/hf_judge_demo_pack, installed from its pyproject.toml (``version``/``prompt``: an upgrade)."""
    project = tomllib.loads((DEMO / "pyproject.toml").read_text())
    for package in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        shutil.copytree(DEMO / package, folder / package)
    if prompt is not None:
        (folder / "hf_judge_demo_pack" / "prompts" / "Q_Demo.jinja").write_text(prompt)
    meta = project["project"]
    _dist_info(folder, meta["name"], version or meta["version"], meta["entry-points"]["hf_judge.metrics"])


def write_pack(folder: Path, dist: str, module: str, prompts: dict[str, str], *, init: str = "", entry=None) -> None:
    """A pack ``dist`` 1.0 whose package ``module`` holds ``prompts/<file>`` for each of ``prompts``."""
    (folder / module).mkdir()
    (folder / module / "__init__.py").write_text(init)
    if prompts:
        (folder / module / "prompts").mkdir()
    for file, text in prompts.items():
        (folder / module / "prompts" / file).write_text(text)
    _dist_info(folder, dist, "1.0", {"pack": entry or module})


def _rows(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    start = lines[0].index("source")
    return {ln.split()[0]: [*ln.split()[:4], ln[start:].split("  ")[0].strip()] for ln in lines[1:]}


def test_an_installed_pack_is_listed_by_hf_judge_metrics_with_its_name_and_version(site, capfd):
    folder = site(prepare=install_demo)
    code, out, err = run_cli(capfd, "metrics")
    assert code == 0 and err == "", err
    rows = _rows(out)
    assert rows["Q_Demo"] == ["Q_Demo", "Q", "instruction", "0.1", "hf-judge-demo-pack 0.1.0"]
    assert rows["QA_Clarity"][-1] == "built-in" and "Q_Math_Difficulty" in rows
    assert available_metrics()["Q_Demo"] == folder / "hf_judge_demo_pack" / "prompts" / "Q_Demo.jinja"
    # the usual entry point names the package, and hf-judge finds its prompts/ folder without importing it
    assert "hf_judge_demo_pack" not in sys.modules


def test_a_pack_metric_is_scored_by_name_and_its_pack_is_in_the_provenance(site, judge, tmp_path):
    from hf_judge.results.card import render_section

    first = site("v1", prepare=install_demo)
    ds, cols = qa_dataset(4), {"instruction": "question"}
    scored = score(ds, ["Q_Demo", "Q_Clarity"], judge, tmp_path, columns=cols)
    assert judge.stats()["requests"] == 8 and scored["errors"].num_rows == 0
    assert all(1 <= s <= 10 for s in scored["train"]["Q_Demo"]) and "Q_Demo_reason" in scored["train"].column_names
    prompts = scored.summary.prompts
    assert prompts["Q_Demo"]["pack"] == DEMO_PACK and "pack" not in prompts["Q_Clarity"]
    card = render_section(scored, scored.summary)
    assert "Q_Demo.jinja) from the metric pack `hf-judge-demo-pack` 0.1.0 |" in card
    metric = load_metric("Q_Demo")
    assert pickle.loads(pickle.dumps(metric)).pack == DEMO_PACK  # a worker process keeps the provenance

    # a new version of the pack with the same prompt file: the replies are reused, nothing is paid twice
    sys.path.remove(str(first))
    site("v2", prepare=lambda f: install_demo(f, version="0.2.0"))
    judge.reset()
    again = score(ds, ["Q_Demo", "Q_Clarity"], judge, tmp_path, columns=cols)
    assert judge.stats()["requests"] == 0 and again["train"].to_list() == scored["train"].to_list()
    assert again.summary.prompts["Q_Demo"]["pack"]["version"] == "0.2.0"

    # a version whose prompt changed: its content hash is a new identity, so Q_Demo is asked again
    sys.path.remove(str(tmp_path / "v2"))
    changed = (DEMO / "hf_judge_demo_pack" / "prompts" / "Q_Demo.jinja").read_text() + "Be strict.\n"
    site("v3", prepare=lambda f: install_demo(f, version="0.3.0", prompt=changed))
    judge.reset()
    third = score(ds, ["Q_Demo", "Q_Clarity"], judge, tmp_path, columns=cols)
    assert judge.stats()["requests"] == 4
    assert third.summary.metrics["Q_Demo"] != scored.summary.metrics["Q_Demo"]
    assert third.summary.metrics["Q_Clarity"] == scored.summary.metrics["Q_Clarity"]


def test_a_name_two_packs_define_is_refused_naming_both_and_the_fix(site, capfd, tmp_path):
    def prepare(folder):
        write_pack(folder, "hf-judge-clash-a", "clash_a", {"Q_Same.jinja": SCORE.format(description="A's.")})
        write_pack(
            folder,
            "hf-judge-clash-b",
            "clash_b",
            {"Q_Same.jinja": SCORE.format(description="B's."), "Q_OnlyB.jinja": SCORE.format(description="B.")},
        )

    site(prepare=prepare)
    code, out, err = run_cli(capfd, "metrics")
    assert code == 0 and "Q_OnlyB" in out
    same = [ln for ln in out.splitlines() if ln.startswith("Q_Same ")]
    assert len(same) == 2 and "hf-judge-clash-a 1.0 (clash)" in same[0] and "hf-judge-clash-b 1.0 (clash)" in same[1]
    assert "Q_Same is defined by more than one installed metric pack" in err

    with pytest.raises(UnknownMetricError) as e:
        load_metric("Q_Same")
    msg = str(e.value)
    assert "hf-judge-clash-a 1.0" in msg and "hf-judge-clash-b 1.0" in msg
    assert "pip uninstall hf-judge-clash-b" in msg and "prompts_dir" in msg
    assert load_metric("Q_OnlyB").pack["name"] == "hf-judge-clash-b"  # the packs' other metrics are fine
    assert "Q_Same" not in available_metrics()

    # the user's own file comes first, as it does before a built-in: a deliberate choice
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "Q_Same.jinja").write_text(SCORE.format(description="Mine."))
    chosen = load_metric("Q_Same", prompts_dir=mine)
    assert chosen.path == mine / "Q_Same.jinja" and chosen.pack is None


def test_a_pack_cannot_replace_a_built_in_metric(site, caplog):
    def prepare(folder):
        mine, own = SCORE.format(description="Not the built-in."), SCORE.format(description="Its own.")
        write_pack(folder, "hf-judge-shadow", "shadow_pack", {"Q_Clarity.jinja": mine, "Q_Own.jinja": own})

    site(prepare=prepare)
    with caplog.at_level(logging.WARNING, logger="hf_judge"):
        clarity = load_metric("Q_Clarity")
    assert clarity.path == builtin_prompts_dir() / "Q_Clarity.jinja" and clarity.pack is None
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "metric pack hf-judge-shadow 1.0" in warned and "defines Q_Clarity" in warned and "prompts_dir" in warned
    assert load_metric("Q_Own").pack["name"] == "hf-judge-shadow"
    assert available_metrics()["Q_Clarity"] == builtin_prompts_dir() / "Q_Clarity.jinja"


def test_a_broken_pack_is_named_in_a_warning_and_breaks_nothing_else(site, capfd):
    def prepare(folder):
        _dist_info(folder, "hf-judge-broken-missing", "1.0", {"gone": "no_such_pack_module"})
        boom = "raise RuntimeError('boom')\n"
        write_pack(folder, "hf-judge-broken-raises", "raising_pack", {}, init=boom, entry="raising_pack:folder")
        write_pack(folder, "hf-judge-broken-nofolder", "nofolder_pack", {})
        good, bad = SCORE.format(description="Fine."), "no front matter here {{ instruction }}\n"
        write_pack(folder, "hf-judge-broken-file", "badfile_pack", {"Q_Good.jinja": good, "Q_Bad.jinja": bad})

    site(prepare=prepare)
    code, out, err = run_cli(capfd, "metrics")
    assert code == 0, err
    assert "QA_All" in out and "Q_Good" in out and "Q_Bad" not in out
    assert "metric pack hf-judge-broken-missing 1.0" in err and "no_such_pack_module" in err
    assert "metric pack hf-judge-broken-raises 1.0" in err and "RuntimeError: boom" in err
    assert "metric pack hf-judge-broken-nofolder 1.0" in err and "has no prompts/ folder" in err
    assert "metric pack hf-judge-broken-file 1.0" in err and "Q_Bad" in err and "front matter" in err
    assert "pip uninstall hf-judge-broken-missing" in err and "Traceback" not in err

    assert load_metric("QA_Clarity").pack is None and load_metric("Q_Good").pack["name"] == "hf-judge-broken-file"
    with pytest.raises(PromptFileError, match=r"^metric pack hf-judge-broken-file 1\.0: .*Q_Bad\.jinja"):
        load_metric("Q_Bad")


def test_an_entry_point_may_name_a_folder_or_a_function_that_returns_one(site):
    def prepare(folder):
        path_code = "from pathlib import Path\n\nFOLDER = Path(__file__).parent / 'judges'\n"
        write_pack(folder, "hf-judge-form-path", "form_path", {}, init=path_code, entry="form_path:FOLDER")
        func_code = "from importlib.resources import files\n\ndef prompts():\n    return files(__name__) / 'judges'\n"
        write_pack(folder, "hf-judge-form-func", "form_func", {}, init=func_code, entry="form_func:prompts")
        for module, name in (("form_path", "Q_ByPath"), ("form_func", "QA_ByFunc")):
            (folder / module / "judges").mkdir()
            (folder / module / "judges" / f"{name}.jinja").write_text(SCORE.format(description=name))

    site(prepare=prepare)
    assert load_metric("Q_ByPath").pack == {"name": "hf-judge-form-path", "version": "1.0", "entry_point": "pack"}
    assert load_metric("QA_ByFunc").pack["name"] == "hf-judge-form-func"
