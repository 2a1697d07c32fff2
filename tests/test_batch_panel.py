"""Batch mode with a panel of judges (models=[...], --batch --models): one batch per judge, at its own server,
with its own model and key, against two loopback batch servers (tests/batch_server.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from batch_fixture import BatchServer
from helpers import qa_dataset, rows, run_cli, until

from hf_judge import BatchesPending, ConfigError, Settings, score_dataset

ROOT = Path(__file__).parents[1]
JOB = Path(__file__).with_name("batch_job.py")
COLUMNS = {"instruction": "question", "output": "answer"}
KEY_B = "sk-judge-b-SECRET-0123456789"


@pytest.fixture(scope="module")
def second_batch_server():
    with BatchServer() as server:
        yield server


@pytest.fixture
def batch_b(second_batch_server, monkeypatch):
    second_batch_server.reset()
    second_batch_server.configure(overrides={"score": 3})  # judge b gives every answer a 3, online and in batches
    monkeypatch.setenv("JUDGE_B_KEY", KEY_B)
    return second_batch_server


def panel(a, b) -> list[dict]:
    """Judges a and c: two models on server a; judge b on server b, with a key of its own."""
    return [
        {"model": "judge-a", "base_url": a.base_url},
        {"model": "judge-b", "base_url": b.base_url, "api_key": "env:JUDGE_B_KEY"},
        {"model": "judge-c", "base_url": a.base_url},
    ]


def run(ds, models, cache, **kw):
    knobs = {"backoff_base": 0.001, "backoff_max": 0.01, "batch_poll_s": 0.01, "retries": kw.pop("retries", 0)}
    return score_dataset(
        ds,
        ["QA_Correctness"],
        settings=Settings(models=models, **knobs),
        api_key="sk-test",
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
        **kw,
    )


def paid(*servers) -> list[int]:
    return sorted(n for s in servers for n in s.stats()["paid"].values())


def test_a_batch_panel_equals_the_online_panel(batch, batch_b, tmp_path, capfd):
    ds = qa_dataset(6)
    models = panel(batch, batch_b)
    online = run(ds, models, tmp_path / "online")
    batch.reset()
    batch_b.reset()
    batch_b.configure(overrides={"score": 3})
    scored = run(ds, models, tmp_path / "b", batch=True)
    assert rows(scored) == rows(online)
    assert scored["train"]["QA_Correctness__judge_b"] == [3] * 6
    assert scored.summary.agreement == online.summary.agreement
    a, b = batch.stats(), batch_b.stats()
    # one batch per judge, each at its judge's server with its key; nothing online
    assert (a["batches"], b["batches"], a["online"], b["online"]) == (2, 1, 0, 0)
    assert a["auth"] == ["Bearer sk-test"] and b["auth"] == [f"Bearer {KEY_B}"]
    assert paid(batch, batch_b) == [1] * 18
    assert scored.summary.batch["submitted"] == 18 and scored.summary.batch["collected"] == 18
    # `hf-judge batch status` lists every judge's batch
    code, out, _ = run_cli(capfd, "batch", "status", "--cache-dir", tmp_path / "b")
    assert code == 0 and out.count("collected") == 3
    assert out.count(batch.base_url) == 2 and out.count(batch_b.base_url) == 1 and KEY_B not in out


def test_samples_of_a_batch_panel_are_lines_of_their_own(batch, tmp_path):
    ds = qa_dataset(3)
    models = ["judge-a", "judge-c"]  # two models on one server
    kw = {"base_url": batch.base_url, "samples": 2, "temperature": 0.7}
    expected = rows(run(ds, models, tmp_path / "online", **kw))
    batch.reset()
    assert rows(run(ds, models, tmp_path / "b", batch=True, **kw)) == expected
    st = batch.stats()
    assert st["batches"] == 2 and len(st["paid"]) == 12 and st["online"] == 0  # 3 rows x 2 samples x 2 judges


def test_no_wait_with_a_panel_submits_each_judge_once(batch, batch_b, tmp_path):
    ds = qa_dataset(5)
    models = panel(batch, batch_b)
    expected = rows(run(ds, models, tmp_path / "online"))
    batch.reset()
    batch_b.reset()
    batch_b.configure(overrides={"score": 3})
    batch.configure(delay=600)
    batch_b.configure(delay=600)
    for _ in range(2):  # submitted, then found in flight: nothing submitted again
        with pytest.raises(BatchesPending, match="3 batch"):
            run(ds, models, tmp_path / "b", batch=True, no_wait=True)
    assert (batch.stats()["batches"], batch_b.stats()["batches"]) == (2, 1)
    # each judge's runner follows its own batches, judges a and c sharing a server included
    from hf_judge.engine.batch_book import BatchBook

    book = BatchBook(tmp_path / "b" / "replies.sqlite3", "", "judge-c")
    try:
        jobs = book.conn.execute("SELECT model, server, requests FROM batch_jobs ORDER BY model").fetchall()
        assert [(m, n) for m, _, n in jobs] == [("judge-a", 5), ("judge-b", 5), ("judge-c", 5)]
        assert jobs[0][1] == jobs[2][1]  # judges a and c: one server
        book.server = jobs[2][1]
        assert len(book.jobs()) == 1 and len(book.jobs(every_server=True)) == 3
    finally:
        book.close()
    batch.configure(delay=0)
    batch_b.configure(delay=0)
    scored = run(ds, models, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    assert (batch.stats()["batches"], batch_b.stats()["batches"]) == (2, 1)
    assert paid(batch, batch_b) == [1] * 15
    assert scored.summary.batch["submitted"] == 0 and scored.summary.batch["collected"] == 15


def test_kill_9_in_a_panel_run_pays_nothing_twice(batch, batch_b, tmp_path):
    """Killed while judge b's batch is being created (judge a's is submitted, judge c's file not written): the
    next run adopts the batch the kill hid from judge b's book and submits judge c's while judge a's is still
    running (--no-wait); the one after collects all three, and nothing is paid twice."""
    ds = qa_dataset(4)
    models = panel(batch, batch_b)
    expected = rows(run(ds, models, tmp_path / "online"))
    batch.reset()
    batch_b.reset()
    batch_b.configure(overrides={"score": 3}, hold_create=True, drop_held=False)
    batch.configure(delay=600)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    args = [sys.executable, str(JOB), "panel", json.dumps(models), str(tmp_path / "b"), "4"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        until(lambda: batch_b.stats()["creates"] == 1)  # judge b's create is on its way
    finally:
        proc.kill()  # SIGKILL: no clean-up runs
        proc.wait()
    batch_b.configure(hold_create=False)
    until(lambda: batch_b.stats()["batches"] == 1)  # made, but its id never reached the book
    assert batch.stats()["batches"] == 1  # judge a's; judge c's file came after judge b's
    with pytest.raises(BatchesPending, match="2 batch"):  # judge b's has ended: collected; a's and c's run
        run(ds, models, tmp_path / "b", batch=True, no_wait=True)
    assert (batch.stats()["batches"], batch_b.stats()["batches"]) == (2, 1)  # judge a's did not hold up c's
    batch.configure(delay=0)
    assert rows(run(ds, models, tmp_path / "b", batch=True)) == expected
    a, b = batch.stats(), batch_b.stats()
    assert (a["batches"], b["batches"], b["uploads"]) == (2, 1, 1)
    assert paid(batch, batch_b) == [1] * 12


@pytest.mark.parametrize("fallback", ["batch", "online"])
def test_one_judges_batch_failing_as_a_whole(batch, batch_b, tmp_path, fallback):
    """Judge b's batch fails at the provider: its requests are error rows (or, with batch_fallback='online',
    sent online to judge b's server); judges a and c keep their scores."""
    ds = qa_dataset(4)
    models = panel(batch, batch_b)
    online = rows(run(ds, models, tmp_path / "online"))
    batch.reset()
    batch_b.reset()
    batch_b.configure(overrides={"score": 3}, fail_batch="the input file has an error")
    scored = run(ds, models, tmp_path / "b", batch=True, batch_fallback=fallback)
    a = scored["train"]
    if fallback == "online":
        assert rows(scored) == online
        assert (batch.stats()["online"], batch_b.stats()["online"]) == (0, 4)
        return
    assert a["QA_Correctness__judge_b"] == [None] * 4
    expected = [r["QA_Correctness__judge_a"] for r in online["train"]]
    assert a["QA_Correctness__judge_a"] == expected
    assert a["QA_Correctness__judge_c"] == [r["QA_Correctness__judge_c"] for r in online["train"]]
    assert a["QA_Correctness"] == [(x + y) / 2 for x, y in zip(expected, a["QA_Correctness__judge_c"], strict=True)]
    errors = scored["errors"].to_list()
    assert [(e["row"], e["kind"]) for e in errors] == [(r, "batch_failed") for r in range(4)]
    assert all(
        e["message"].startswith("judge 'judge_b': ") and "input file has an error" in e["message"] for e in errors
    )


def test_export_and_import_with_a_panel_are_refused_with_the_way_round(batch, tmp_path):
    """One file is one model's: the refusal says to go judge by judge, then score the panel from the cache, and
    that way round sends nothing (a panel judge's requests have the keys of a run with that --model alone)."""
    from hf_judge import export_batch, import_batch

    out = tmp_path / "results.jsonl"
    out.write_text("")
    with pytest.raises(ConfigError, match="--models\\) with the same --cache-dir"):
        import_batch(qa_dataset(2), ["QA_Correctness"], out, models=["a", "b"], columns=COLUMNS, cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="export one file per judge"):
        export_batch(qa_dataset(2), ["QA_Correctness"], tmp_path / "r.jsonl", models=["a", "b"], columns=COLUMNS)
    ds = qa_dataset(3)
    for model in ("judge-a", "judge-c"):  # one batch run per judge, as an import per judge would fill the cache
        score_dataset(
            ds,
            ["QA_Correctness"],
            settings=Settings(model=model, batch_poll_s=0.01),
            base_url=batch.base_url,
            api_key="sk-test",
            cache_dir=tmp_path / "c",
            columns=COLUMNS,
            progress=False,
            batch=True,
        )
    before = batch.stats()
    scored = run(ds, ["judge-a", "judge-c"], tmp_path / "c", base_url=batch.base_url)
    assert batch.stats()["online"] == before["online"] == 0 and scored.summary.cache_hits == 6
    assert not scored["errors"].num_rows


def test_max_cost_holds_every_judges_batch_at_its_own_price(batch, tmp_path):
    """The projection a budget is checked against is the sum of the judges' batches, each at its model's
    batch price: a budget that one judge's batch fits in, but not both, refuses before anything is sent."""
    from hf_judge import CostExceededError, estimate_cost

    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "judge-a: {input: 2.0, output: 8.0, batch_input: 1.0, batch_output: 4.0}\n"
        "judge-c: {input: 4.0, output: 16.0, batch_input: 2.0, batch_output: 8.0}\n",
        encoding="utf-8",
    )
    ds, models = qa_dataset(4), ["judge-a", "judge-c"]
    kw = {"base_url": batch.base_url, "prices": str(prices)}
    ests = [
        estimate_cost(ds, ["QA_Correctness"], model=m, columns=COLUMNS, cache_dir=tmp_path / "c", batch=True, **kw)
        for m in models
    ]
    total = sum(e.cost_batch for e in ests)
    assert 0.9 * total > max(e.cost_batch for e in ests)
    with pytest.raises(CostExceededError) as e:
        run(ds, models, tmp_path / "c", batch=True, max_cost=0.9 * total, **kw)
    message = str(e.value)
    assert "the batches of the 2 judges this run would submit (8 requests" in message
    assert f"would cost ${total:.4f} at the judges' batch prices: ${ests[0].cost_batch:.4f} at judge-a's" in message
    assert "`--dry-run --batch` shows the projection" in message
    panel = estimate_cost(
        ds, ["QA_Correctness"], models=models, columns=COLUMNS, cache_dir=tmp_path / "c", batch=True, **kw
    )
    assert panel.cost_batch == pytest.approx(total)  # what the budget check counted, judge by judge
    st = batch.stats()
    assert (st["uploads"], st["creates"], st["online"]) == (0, 0, 0)
    scored = run(ds, models, tmp_path / "c", batch=True, max_cost=1.01 * total, **kw)
    assert scored.summary.batch["collected"] == 8 and not scored["errors"].num_rows


def test_cli_batch_panel_and_cancel_reach_every_judge(batch, batch_b, tmp_path, capfd):
    """`--batch --models a,b` from the command line; `hf-judge batch cancel` cancels each judge's batch at its
    judge's server (with the one key it is given: see docs/how-to/ensembles.md for judges with keys of their own)."""
    data = tmp_path / "data.jsonl"
    qa_dataset(3).to_json(data)
    common = ["--metrics", "QA_Correctness", "--column", "instruction=question", "--column", "output=answer"]
    common += ["--base-url", batch.base_url, "--cache-dir", tmp_path / "c", "--retries", "0"]
    code, out, err = run_cli(
        capfd, "score", data, *common, "--models", "judge-a,judge-c", "--batch", "-o", tmp_path / "o"
    )
    assert code == 0, err
    assert batch.stats()["batches"] == 2 and batch.stats()["online"] == 0
    batch.configure(delay=600)
    batch_b.configure(delay=600)
    with pytest.raises(BatchesPending):
        run(qa_dataset(2, prefix="new"), panel(batch, batch_b), tmp_path / "c", batch=True, no_wait=True)
    code, out, err = run_cli(capfd, "batch", "cancel", "--cache-dir", tmp_path / "c")
    assert code == 0, err
    assert out.count(": cancelling") == 3
    assert (batch.stats()["cancels"], batch_b.stats()["cancels"]) == (2, 1)


def test_a_judge_without_a_batch_api_stops_the_run_naming_it(batch, judge, tmp_path, capfd):
    """Judge b's server has no batch API: the run stops with its name (as an online panel stops on a judge's
    404); judge a's batch, submitted first, is kept in the book for the next run."""
    from hf_judge import ModelNotFoundError

    models = [{"model": "judge-a", "base_url": batch.base_url}, {"model": "judge-b", "base_url": judge.base_url}]
    with pytest.raises(ModelNotFoundError, match=f"^judge 'judge_b': {judge.base_url} has no batch API"):
        run(qa_dataset(2), models, tmp_path / "c", batch=True)
    assert batch.stats()["batches"] == 1
    code, out, _ = run_cli(capfd, "batch", "status", "--cache-dir", tmp_path / "c")
    assert code == 0 and batch.base_url in out


def test_batches_in_flight_in_a_cache_from_before_the_book_knew_models_are_collected(batch, tmp_path):
    """A cache whose batch book has no model column (written before panels ran in batch mode), with a batch in
    flight: a panel run on its server adopts it and pays nothing twice."""
    import sqlite3

    ds, models = qa_dataset(3), ["judge-a", "judge-c"]
    expected = rows(run(ds, models, tmp_path / "online", base_url=batch.base_url))
    batch.reset()
    batch.configure(delay=600)
    with pytest.raises(BatchesPending):
        run(ds, models, tmp_path / "b", batch=True, no_wait=True, base_url=batch.base_url)
    with sqlite3.connect(tmp_path / "b" / "replies.sqlite3") as conn:
        conn.execute("ALTER TABLE batch_jobs DROP COLUMN model")
    batch.configure(delay=0)
    assert rows(run(ds, models, tmp_path / "b", batch=True, base_url=batch.base_url)) == expected
    assert batch.stats()["batches"] == 2 and paid(batch) == [1] * 6
