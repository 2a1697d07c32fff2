"""``--by COLUMN`` on choose-judge and agreement: every figure per group equals the command run on that group's
rows alone (exact equality, intervals included: the same seed over the same rows), the JSON's shape, the text's
blocks capped as the scores by group cap theirs, and a missing column refused with a did-you-mean before any
request (the loopback judge server counts them)."""

from __future__ import annotations

import json

import pytest
from datasets import Dataset
from helpers import longer_pairs, run_cli
from judge_fixture import JudgeServer

from hf_judge import agreement, choose_judge, load_result
from hf_judge.analysis.leaderboard import FILE, recommend
from hf_judge.engine.choose_groups import FIGURES
from hf_judge.errors import ConfigError

N = 36
CATEGORIES = ["math"] * 6 + ["code"] * 4 + ["knowledge"] * 2  # 18, 12 and 6 of the 36 pairs, interleaved


@pytest.fixture(scope="module")
def server():
    with JudgeServer() as s:
        yield s


def _pairs() -> Dataset:
    """Pairs whose label is the longer response on 4 of 5 rows, with a category column (unequal groups)."""
    pairs = longer_pairs(N)
    category = [CATEGORIES[i % len(CATEGORIES)] for i in range(N)]
    return pairs.add_column("category", category)


def _judges(server):
    server.reset()
    # agree prefers the longer response; faulty is refused (400, not retried) on about a quarter of its prompts
    server.configure(
        length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"},
        faults=[{"fault": "status", "status": 400, "rate": 0.25, "model": "faulty"}],
    )
    return [{"model": "agree", "base_url": server.base_url}, {"model": "faulty", "base_url": server.base_url}]


def _run(ds, judges, tmp_path, name, **kw):
    return choose_judge(
        ds, "Comparative", judges, label="human", api_key="k", retries=0, cache_dir=tmp_path / name,
        progress=False, resamples=200, seed=3, **kw,
    )  # fmt: skip


def test_choose_judge_by_group_equals_a_run_on_each_group_alone(server, tmp_path):
    judges = _judges(server)
    ds = _pairs()
    choice = _run(ds, judges, tmp_path, "all", by="category", output_dir=tmp_path / "out")
    groups = choice.groups
    assert groups["by"] == "category" and groups["more"] == 0
    assert [(g["name"], g["rows"]) for g in groups["groups"]] == [("math", 18), ("code", 12), ("knowledge", 6)]
    assert any(e["failures"] for g in groups["groups"] for e in g["entries"])  # the error rows are cut per group
    for g in groups["groups"]:
        alone = _run(ds.filter(lambda c, g=g: c == g["name"], input_columns="category"), judges, tmp_path, g["name"])
        assert g["rows"] == alone.rows and g["chance"] == alone.chance
        assert g["label_longer_wins"] == alone.label_longer_wins
        assert g["best"] == recommend(alone.entries, alone.chance, alone.rows)["best"]
        for mine, theirs in zip(g["entries"], alone.entries, strict=True):
            assert mine["judge"] == theirs["judge"] and mine["group"] == g["name"]
            assert {k: mine[k] for k in FIGURES if k in mine} == {k: theirs[k] for k in FIGURES if k in theirs}
            assert {"score", "interval", "kappa", "coverage", "failures", "judgebench"} <= set(mine)
    # the JSON holds the same, each group's entries naming the judge and the group; the overall table is unchanged
    saved = json.loads((tmp_path / "out" / FILE).read_text())
    assert saved["groups"] == json.loads(json.dumps(groups))
    assert [e["score"] for e in saved["entries"]] == [e["score"] for e in _run(ds, judges, tmp_path, "all").entries]
    text = str(choice)
    assert "By category" in text and "category = 'knowledge': 6 pairs; best: " in text
    assert "#### By category" in (tmp_path / "out" / "choose_judge.md").read_text()  # the card's section


def test_agreement_by_group_equals_agreement_on_each_group_alone(server, tmp_path):
    """On a choose-judge candidate's folder (both orders as rows, errors of its own): each group's report, the
    JudgeBench rule's figure and the all-rows figures with their failures included, is agreement's on the
    group's rows alone, its error rows renumbered."""
    judges = _judges(server)
    _run(_pairs(), judges, tmp_path, "c", output_dir=tmp_path / "out")
    result = load_result(tmp_path / "out" / "faulty")
    d, errors = result["train"], result["errors"]
    assert len(errors)
    report = agreement(result, "Comparative", "__label__", by="category", resamples=100, seed=1)
    assert [g["group"] for g in report.groups["groups"]] == ["math", "code", "knowledge"]
    for g in report.groups["groups"]:
        idx = [i for i, c in enumerate(d["category"]) if c == g["group"]]
        where = {r: k for k, r in enumerate(idx)}
        own = [{**e, "row": where[e["row"]]} for e in errors.to_list() if e["row"] in where]
        sub_errors = Dataset.from_list(own, features=errors.features) if own else errors.select([])
        alone = agreement(d.select(idx), "Comparative", "__label__", errors=sub_errors, resamples=100, seed=1)
        alone.split = "train"
        assert {k: v for k, v in g.items() if k not in ("group", "by")} == alone.to_dict()
        assert g["rules"]["judgebench"]["pairs"] == len(idx) // 2
    assert sum(g["all_rows"]["failures"].get("http_400", 0) for g in report.groups["groups"]) == len(errors)
    assert "By category" in str(report) and "By `category`" in report.to_markdown()


def test_agreement_cli_by_writes_the_groups_in_its_json(server, tmp_path, capfd):
    judges = _judges(server)
    _run(_pairs(), judges, tmp_path, "c", output_dir=tmp_path / "out")
    out = tmp_path / "r.json"
    code, text, err = run_cli(
        capfd, "agreement", tmp_path / "out" / "agree", "--score", "Comparative", "--label", "__label__",
        "--by", "category", "--resamples", "50", "--out", out,
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads(out.read_text())
    assert saved["groups"]["by"] == "category"
    assert [(g["group"], g["rows"]) for g in saved["groups"]["groups"]] == [
        ("math", 36),
        ("code", 24),
        ("knowledge", 12),
    ]
    assert all(g["intervals"]["agreement"] for g in saved["groups"]["groups"])
    assert "category = 'math': rows 36" in text


def test_agreement_cli_rule_by_gives_each_group_choose_judge_s_figure_under_the_rule(server, tmp_path, capfd):
    """``agreement --rule llmbar --by category`` on a candidate's folder: each group's block, its card row and its
    JSON carry the group's figure under the rule, with its interval, equal to choose-judge's ``--rule llmbar
    --by category`` for that group (the groups printed JudgeBench's figure alone)."""
    judges = _judges(server)
    choice = _run(_pairs(), judges, tmp_path, "c", output_dir=tmp_path / "out", rule="llmbar", by="category")
    out = tmp_path / "r.json"
    code, text, err = run_cli(
        capfd, "agreement", tmp_path / "out" / "agree", "--score", "Comparative", "--label", "__label__",
        "--rule", "llmbar", "--by", "category", "--resamples", "200", "--seed", "3", "--out", out,
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads(out.read_text())["groups"]["groups"]
    mine = {g["name"]: next(e for e in g["entries"] if e["judge"] == "agree") for g in choice.groups["groups"]}
    assert [g["group"] for g in saved] == list(mine) == ["math", "code", "knowledge"]
    for g in saved:
        found, theirs = g["rules"]["llmbar"], mine[g["group"]]
        assert (found["score"], found["interval"]) == (theirs["score"], theirs["interval"])
        lo, hi = found["interval"]
        assert f"  llmbar: {found['score']:.3f} ({lo:.3f} .. {hi:.3f}) over {found['pairs']:,} pairs" in text


def test_a_missing_by_column_is_refused_before_any_request(server, tmp_path, capfd):
    judges = _judges(server)
    with pytest.raises(ConfigError, match="no column 'categroy' to group by.*did you mean 'category'"):
        _run(_pairs(), judges, tmp_path, "c", by="categroy")
    assert server.stats()["requests"] == 0
    data = tmp_path / "pairs.jsonl"
    _pairs().to_json(data)
    code, out, err = run_cli(
        capfd, "choose-judge", data, "--metric", "Comparative", "--judges", "agree", "--label", "human",
        "--base-url", server.base_url, "--cache-dir", tmp_path / "c2", "--by", "categry",
    )  # fmt: skip
    assert code != 0 and "did you mean 'category'" in err
    assert "__label__" not in err  # the columns listed are the data's, not the one choose-judge adds
    assert server.stats()["requests"] == 0
    with pytest.raises(ConfigError, match="did you mean 'category'"):
        agreement(_pairs(), "human", "human", by="Category")


def test_the_cli_caps_the_groups_as_the_scores_by_group_do(server, tmp_path, capfd):
    """12 groups: the terminal shows 10 blocks and sums up the rest; the JSON holds all 12 (at most 20)."""
    _judges(server)
    ds = _pairs().map(lambda _, i: {"source": f"s{i % 12:02d}"}, with_indices=True)
    data = tmp_path / "pairs.jsonl"
    ds.to_json(data)
    code, out, err = run_cli(
        capfd, "choose-judge", data, "--metric", "Comparative", "--judges", "agree", "--label", "human",
        "--base-url", server.base_url, "--cache-dir", tmp_path / "c", "--by", "source",
        "--resamples", "20", "-o", tmp_path / "o",
    )  # fmt: skip
    assert code == 0, err
    assert out.count("source = 's") == 10 and "+ 2 more groups (6 pairs)" in out
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    assert len(saved["groups"]["groups"]) == 12 and saved["groups"]["more"] == 0
    assert all(
        e["group"] == g["name"] and e["judge"] == "agree" for g in saved["groups"]["groups"] for e in g["entries"]
    )


def test_agreement_cli_on_a_binary_candidates_folder_counts_a_column_two_variables_read_once(server, tmp_path, capfd):
    """Binary reads ``prediction`` (mapped to ``answer``) and ``answer``: the length bias measured ``answer`` twice
    and failed ('Field "answer" exists 2 times in schema'); it reads it once."""
    server.reset()
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(12)],
            "answer": [f"a{i}" for i in range(12)],
            "ok": [i % 3 > 0 for i in range(12)],
        }
    )
    choose_judge(
        ds, "Binary", ["a", "b"], label="ok", columns={"prediction": "answer"}, base_url=server.base_url,
        api_key="k", progress=False, cache_dir=tmp_path / "c", output_dir=tmp_path / "o", resamples=0,
    )  # fmt: skip
    code, out, err = run_cli(capfd, "agreement", tmp_path / "o" / "a", "--score", "Binary", "--label", "__label__")
    assert code == 0, err
    assert "length in characters" in out or "length in tokens" in out
