"""vLLM judges hf-judge starts, one engine loaded at a time: a panel's in turn, choose-judge's candidates, a
cascade's tiers each in its pass (hf_judge/engine/vllm_turns.py).

vLLM's start takes minutes, so these run a stand-in (tests/fake_vllm/: ``python -m
vllm.entrypoints.openai.api_server`` over the loopback judge server, a real process on a real port, started and
stopped by hf-judge's own vllm_judge); each start and stop is a line of a log, with the requests that server
answered, so the order of the engines is exact. tests/test_vllm.py runs the real vLLM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from datasets import Dataset
from helpers import run_cli

from hf_judge import Settings, score_dataset
from hf_judge.engine.capabilities import check
from hf_judge.errors import ConfigError

HERE = Path(__file__).parent
ROWS = [{"question": f"What is {i} plus {i}?", "answer": f"It is {2 * i}."} for i in range(5)]
COLUMNS = {"instruction": "question", "output": "answer"}


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path) -> Path:
    """The stand-in vLLM for the servers hf-judge starts; returns its log of starts and stops."""
    log = tmp_path / "engines.log"
    log.touch()
    paths = [str(HERE / "fake_vllm"), *sys.path]
    monkeypatch.setenv("PYTHONPATH", ":".join(p for p in paths if p))
    monkeypatch.setenv("HF_JUDGE_VLLM_PYTHON", sys.executable)
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))
    return log


def _engines(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_a_panel_of_vllm_judges_loads_them_one_after_another(fake_vllm, tmp_path):
    """models=[vllm:a, vllm:b]: a starts, scores every row, stops; then b; the panel then sends nothing more (each
    judge's replies come from the store), and a rerun pays for nothing."""
    kw = dict(models=["vllm:org/a", "vllm:org/b"], columns=COLUMNS, cache_dir=tmp_path / "c", progress=False)
    scored = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5", "start org/b", "stop org/b 5"]
    assert list(scored["errors"]) == []
    train = scored["train"]
    judged = [c for c in train.column_names if c.startswith("QA_Clarity__")]
    assert len(judged) == 2 and all(None not in train[c] for c in judged)
    assert None not in train["QA_Clarity"]  # the panel's aggregate of the two
    assert scored.summary.requests == 10  # each turn's requests are the run's (the panel's own: none)
    assert [scored.summary.judge_requests[c.split("__")[1]]["requests"] for c in judged] == [5, 5]  # and its judge's

    _assert_engines_add_up(scored.summary, [c.split("__")[1] for c in judged])

    again = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm)[4:] == []  # every reply stored: no judge is started for nothing
    assert again.summary.requests == 0 and list(again["errors"]) == []
    assert [again["train"][c] for c in judged] == [train[c] for c in judged]


def _assert_engines_add_up(summary, judges: list[str]) -> None:
    """The summary's engine: every vLLM judge's seconds served, added (the stand-in is no CPU build: one GPU
    each), and, where the panel lists each judge, its own."""
    engine = summary.engine
    assert engine["engines"] == 2 and engine["gpus"] == 1
    per_judge = [summary.judge_requests[j] for j in judges]
    assert all(j["served_s"] > 0 and j["gpu_s"] == j["served_s"] for j in per_judge)
    assert engine["served_s"] == pytest.approx(sum(j["served_s"] for j in per_judge), abs=0.11)
    assert engine["gpu_s"] == engine["served_s"]
    assert "by 2 engines, one after another" in str(summary)


def test_a_panel_rerun_starts_only_the_vllm_judge_with_replies_missing(fake_vllm, tmp_path):
    """A rerun starts a panel's vLLM judge only for the requests it would send: rows 0-2 stored, then rows 3-4 (row 3
    a 503, retries 0), then row 3 alone, then nothing and no engine at all."""
    kw = dict(models=["vllm:org/a", "vllm:org/b"], columns=COLUMNS, cache_dir=tmp_path / "c", progress=False)
    config = fake_vllm.with_name("config.json")
    config.write_text(json.dumps({"faults": [{"fault": "status", "status": 503, "match": "What is 3 plus"}]}))
    first = score_dataset(Dataset.from_list(ROWS[:3]), ["QA_Clarity"], **kw)  # org/a: rows 0-2
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 3", "start org/b", "stop org/b 3"]
    assert list(first["errors"]) == []
    scored = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], retries=0, **kw)
    assert _engines(fake_vllm)[4:] == ["start org/a", "stop org/a 2", "start org/b", "stop org/b 2"]
    assert [e["row"] for e in scored["errors"]] == [3, 3]  # row 3 failed for both: each judge lacks it
    config.unlink()
    again = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], retries=0, **kw)
    assert _engines(fake_vllm)[8:] == ["start org/a", "stop org/a 1", "start org/b", "stop org/b 1"]
    assert list(again["errors"]) == [] and again.summary.requests == 2
    score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm)[12:] == []


def test_a_panel_judge_that_stored_no_reply_in_its_turn_is_an_errors_row_never_sent(fake_vllm, tmp_path, judge):
    """A row the vLLM judge's turn stored no reply for (here a 503, retries 0) is an errors row of that judge in the
    panel, saying why; nothing is sent to a stopped judge, and the other judge (a server already there) scores it."""
    judge.configure(record=True)
    faults = [{"fault": "status", "status": 503, "match": "What is 3 plus"}]
    fake_vllm.with_name("config.json").write_text(json.dumps({"faults": faults}))
    models = ["vllm:org/a", {"model": "judge", "base_url": judge.base_url, "name": "there"}]
    scored = score_dataset(
        Dataset.from_list(ROWS), ["QA_Clarity"], models=models, columns=COLUMNS, cache_dir=tmp_path / "c",
        retries=0, progress=False,
    )  # fmt: skip
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5"]
    errors = [(e["row"], e["kind"]) for e in scored["errors"]]
    assert errors == [(3, "connection")]
    assert "was stopped after its turn" in scored["errors"][0]["message"]
    assert judge.stats()["requests"] == 5  # the judge already there: every row, once


def test_choose_judge_scores_vllm_candidates_one_after_another(fake_vllm, capfd, tmp_path):
    data = tmp_path / "labelled.jsonl"
    rows = [{"question": f"q{i}", "answer": "a", "prediction": "b", "human": i % 2} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(
        capfd, "choose-judge", data, "--metric", "Binary", "--judges", "vllm:org/a,vllm:org/b", "--label", "human",
        "--cache-dir", tmp_path / "c",
    )  # fmt: skip
    assert code == 0, err
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 6", "start org/b", "stop org/b 6"]
    table = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("vllm_org_") and "%" in line}
    assert sorted(table) == ["vllm_org_a", "vllm_org_b"]  # both ranked, each with every row decided
    assert all(row[6] == "100.0%" for row in table.values())  # coverage: judge, accuracy, [lo, hi], beyond, kappa


def test_a_cascades_vllm_tiers_each_run_in_their_own_pass(fake_vllm, tmp_path):
    """model=vllm:a, escalate_model=vllm:b: a scores every row and stops before b starts for the rows escalated."""
    scored = score_dataset(
        Dataset.from_list(ROWS), ["QA_Clarity"], model="vllm:org/a", escalate_model="vllm:org/b",
        escalate_when="margin:QA_Clarity=5+-10", columns=COLUMNS, cache_dir=tmp_path / "c", progress=False,
    )  # fmt: skip
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5", "start org/b", "stop org/b 5"]
    assert set(scored["train"]["QA_Clarity_judge"]) == {"strong"}
    assert scored.summary.engine["engines"] == 2  # both tiers' engines, added
    assert scored.summary.engine["served_s"] > 0

    again = score_dataset(
        Dataset.from_list(ROWS), ["QA_Clarity"], model="vllm:org/a", escalate_model="vllm:org/b",
        escalate_when="margin:QA_Clarity=5+-10", columns=COLUMNS, cache_dir=tmp_path / "c", progress=False,
    )  # fmt: skip
    assert _engines(fake_vllm)[4:] == []  # both tiers' replies stored: neither is started
    assert again.summary.requests == 0 and again.summary.engine is None
    assert again["train"]["QA_Clarity"] == scored["train"]["QA_Clarity"]


def test_a_vllm_panel_is_refused_where_its_judges_cannot_take_turns():
    panel = Settings(models=["gpt-x", "vllm:org/a"])
    with pytest.raises(ConfigError, match="take turns, one engine loaded at a time"):
        check("stream", panel, stream=True)
    with pytest.raises(ConfigError, match="this machine's"):
        check("ray", panel)  # the second judge is hf-judge's to start, though the first is not
    check("dataset", panel)
    check("workers", Settings(models=["vllm:org/b", "vllm:org/a"], num_workers=2))
    # each at a server already there: nothing to start, nothing refused
    check("stream", Settings(models=["gpt-x", "vllm:org/a"], base_url="http://gpu1:8000/v1"), stream=True)


@pytest.mark.parametrize(
    "judges",
    [
        ["--models", "vllm:org/a,vllm:org/b"],
        ["--model", "vllm:org/a", "--escalate-model", "vllm:org/b", "--escalate-when", "margin:QA_Clarity=5+-10"],
    ],
    ids=["panel", "cascade"],
)
def test_cli_starts_a_panels_or_a_cascades_vllm_judges_one_after_another(fake_vllm, capfd, tmp_path, judges):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    columns = ["--column", "instruction=question", "--column", "output=answer"]
    code, out, err = run_cli(
        capfd, "score", data, "--metrics", "QA_Clarity", *columns, *judges, "--cache-dir", tmp_path / "c",
        "-o", tmp_path / "out",
    )  # fmt: skip
    assert code == 0, err
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5", "start org/b", "stop org/b 5"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["errors"] == {}  # by kind: none
    assert summary["engine"]["engines"] == 2  # both engines' seconds, the panel's judges' or the tiers'
    assert "2 engines, one after another" in out + err  # the summary printed
    code, _, err = run_cli(
        capfd, "score", data, "--metrics", "QA_Clarity", *columns, *judges, "--cache-dir", tmp_path / "c",
        "-o", tmp_path / "again",
    )  # fmt: skip
    assert code == 0, err
    assert _engines(fake_vllm)[4:] == []  # the same command again: every reply stored, no engine started
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["requests"] == 0


def test_one_vllm_judge_with_every_reply_stored_is_not_started(fake_vllm, tmp_path):
    kw = dict(model="vllm:org/a", columns=COLUMNS, cache_dir=tmp_path / "c", progress=False)
    first = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5"]
    again = score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], if_exists="overwrite", **kw)
    assert _engines(fake_vllm)[2:] == []
    assert again["train"]["QA_Clarity"] == first["train"]["QA_Clarity"] and again.summary.requests == 0
    more = score_dataset(Dataset.from_list(ROWS + [{"question": "Why?", "answer": "No."}]), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm)[2:] == ["start org/a", "stop org/a 1"]  # a row not stored: started, for it alone
    assert more.summary.requests == 1


def test_a_panel_of_vllm_judges_takes_turns_with_workers(fake_vllm, tmp_path):
    """num_workers=2: each vLLM judge's turn is scored by the workers (processes that find the judge's server in the
    environment), the panel then answered from the store; a rerun starts nothing."""
    kw = dict(
        models=["vllm:org/a", "vllm:org/b"], columns=COLUMNS, cache_dir=tmp_path / "c", progress=False, num_workers=2
    )
    rows = ROWS * 2  # 10 distinct rows: the workers' shards each get some
    rows = [{**r, "question": f"{r['question']} ({i})"} for i, r in enumerate(rows)]
    scored = score_dataset(Dataset.from_list(rows), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 10", "start org/b", "stop org/b 10"]
    assert list(scored["errors"]) == []
    judged = [c for c in scored["train"].column_names if c.startswith("QA_Clarity__")]
    assert len(judged) == 2 and all(None not in scored["train"][c] for c in judged)
    assert scored.summary.requests == 20
    _assert_engines_add_up(scored.summary, [c.split("__")[1] for c in judged])
    score_dataset(Dataset.from_list(rows), ["QA_Clarity"], **kw)
    assert _engines(fake_vllm)[4:] == []


def test_cli_the_same_command_twice_starts_one_vllm_judge_once_and_says_so(fake_vllm, capfd, tmp_path):
    """``hf-judge score DATA --model vllm:MODEL`` twice: the second run finds every reply stored and starts no
    engine (base: the CLI started the judge itself around any run, so a rerun that sent nothing loaded the model
    again: minutes on a GPU). The start and the skip are told on stderr."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    argv = ["score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column",
            "output=answer", "--model", "vllm:org/a", "--cache-dir", tmp_path / "c"]  # fmt: skip
    code, _, err = run_cli(capfd, *argv, "-o", tmp_path / "out")
    assert code == 0, err
    assert _engines(fake_vllm) == ["start org/a", "stop org/a 5"]
    assert "hf-judge: starting a vLLM judge (org/a)" in err and "ready at http://127.0.0.1:" in err and "(pid " in err
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["engine"]["served_s"] >= 0  # its seconds
    code, _, err = run_cli(capfd, *argv, "-o", tmp_path / "again")
    assert code == 0, err
    assert _engines(fake_vllm)[2:] == []
    assert "vLLM judge org/a not started: every reply of this run is stored" in err
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["requests"] == 0


@pytest.mark.parametrize(
    "given",
    [
        {"model": "vllm:./no-such-folder"},
        {"models": ["vllm:org/a", "vllm:~/no-such-folder"]},
        {"model": "vllm:org/a", "escalate_model": "vllm:/no/such/folder", "escalate_when": "margin:QA_Clarity=5+-10"},
    ],
    ids=["one", "panel", "cascade"],
)
def test_a_vllm_model_that_is_no_folder_nor_hub_id_is_refused_before_any_engine_starts(fake_vllm, tmp_path, given):
    """Base: vLLM was started for ``./no-such-folder`` and died a minute later (transformers: "Repo id must use
    alphanumeric chars"); a panel's or cascade's second model only after the first had run."""
    from hf_judge import ConfigError

    with pytest.raises(ConfigError, match=r"--model vllm:\S*no[-/]such.folder: no such folder .*give a model folder"):
        score_dataset(Dataset.from_list(ROWS), ["QA_Clarity"], columns=COLUMNS, cache_dir=tmp_path, **given)
    assert _engines(fake_vllm) == []


def test_cli_refuses_a_missing_model_folder_and_a_vllm_arg_without_key_before_reading_the_data(
    fake_vllm, capfd, tmp_path
):
    """Base: ``--model vllm:./nope`` started vLLM, which died 30 s later with a traceback of transformers';
    ``--vllm-arg =3`` was a ``ValueError:`` line with a debug hint, as an internal error is."""
    argv = ["score", tmp_path / "not-read.jsonl", "--metrics", "QA_Clarity", "--model"]
    code, _, err = run_cli(capfd, *argv, "vllm:./nope")
    assert code == 2 and "--model vllm:./nope: no such folder" in err and "give a model folder" in err, err
    code, _, err = run_cli(capfd, *argv, "vllm:org/a", "--vllm-arg", "=3")
    assert code == 2 and "hf-judge: error: --vllm-arg: vLLM argument '=3' has no KEY: write KEY=VALUE" in err, err
    assert "ValueError" not in err and _engines(fake_vllm) == []
