"""provider="anthropic" in batch mode: Message Batches against the loopback server (tests/anthropic_server.py),
the same cases as the OpenAI batch tests (tests/test_batch.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from anthropic_fixture import *  # noqa: F401,F403 - the Anthropic server fixtures
from batch_fixture import *  # noqa: F401,F403 - the OpenAI batch server fixtures (a panel's other judge)
from helpers import qa_dataset, rows, run_cli, score_as, until

from hf_judge import BatchesPending, ConfigError, Settings, export_batch, score_dataset

ROOT = Path(__file__).parents[1]
JOB = Path(__file__).with_name("batch_job.py")
COLUMNS = {"instruction": "question", "output": "answer"}
MODEL = "claude-haiku-4-5"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


def run(ds, server, cache, metrics=("QA_Clarity",), **kw):
    return score_as("anthropic", ds, server.url, cache, metrics, **kw)


def paid(server) -> list[int]:
    return sorted(server.stats()["paid"].values())


def test_batch_run_equals_online_row_for_row(claude, tmp_path):
    ds = qa_dataset(30)
    claude.configure(require_key="sk-ant-test")
    online = run(ds, claude, tmp_path / "online", metrics=("QA_All", "QA_Clarity"))
    assert claude.stats()["requests"] == 60
    batched = run(ds, claude, tmp_path / "batch", metrics=("QA_All", "QA_Clarity"), batch=True)
    assert rows(batched) == rows(online)
    st = claude.stats()
    assert st["requests"] == 60 and st["batches"] == 1 and paid(claude) == [1] * 60
    b = batched.summary.batch
    assert (b["batches"], b["submitted"], b["collected"], b["failed"]) == (1, 60, 60, 0)
    assert b["prompt_tokens"] > 0 and batched.summary.prompt_tokens == b["prompt_tokens"]
    # custom_id: the request key in hex, within Anthropic's 64 characters
    assert all(len(cid) == 32 for cid in st["paid"])
    again = run(ds, claude, tmp_path / "batch", metrics=("QA_All", "QA_Clarity"), batch=True)
    assert rows(again) == rows(online) and claude.stats()["batches"] == 1


def test_no_wait_then_rerun_submits_nothing_new_and_collects(claude, tmp_path):
    ds = qa_dataset(12)
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(delay=30)
    with pytest.raises(BatchesPending, match="Run the same command again"):
        run(ds, claude, tmp_path / "b", batch=True, no_wait=True)
    with pytest.raises(BatchesPending):  # still running: looked at, nothing submitted
        run(ds, claude, tmp_path / "b", batch=True, no_wait=True)
    assert claude.stats()["batches"] == 1
    claude.configure(delay=0)
    scored = run(ds, claude, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    assert claude.stats()["batches"] == 1 and paid(claude) == [1] * 12
    assert scored.summary.batch["submitted"] == 0 and scored.summary.batch["collected"] == 12


def test_ctrl_c_while_waiting_then_rerun_collects(claude, tmp_path):
    ds = qa_dataset(6)
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(delay=30)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "anthropic", claude.url, str(tmp_path / "b"), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    until(lambda: claude.stats()["batches"] == 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "the next run collects them" in err
    claude.configure(delay=0)
    assert rows(run(ds, claude, tmp_path / "b", batch=True)) == expected
    assert claude.stats()["batches"] == 1 and paid(claude) == [1] * 6


@pytest.mark.parametrize("created", [False, True], ids=["create-lost", "create-done-id-lost"])
def test_kill_9_during_create_pays_nothing_twice(claude, tmp_path, created):
    ds = qa_dataset(8)
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(hold_create=True, drop_held=not created)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "anthropic", claude.url, str(tmp_path / "b"), "8"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        until(lambda: claude.stats()["creates"] == 1)  # "submitting" is recorded, the create is on its way
    finally:
        proc.kill()  # SIGKILL: no clean-up runs
        proc.wait()
    claude.configure(hold_create=False)
    if created:
        until(lambda: claude.stats()["batches"] == 1)
    assert rows(run(ds, claude, tmp_path / "b", batch=True)) == expected
    st = claude.stats()
    assert st["batches"] == 1  # the batch the kill hid is found and adopted, or made once
    assert paid(claude) == [1] * 8


@pytest.mark.parametrize("made", [False, True], ids=["overloaded", "reply-lost"])
def test_a_failed_create_is_retried_only_when_no_batch_was_made(claude, tmp_path, made):
    ds = qa_dataset(5)
    expected = rows(run(ds, claude, tmp_path / "online"))
    if made:  # the batch is made, but its create is answered 529 (a reply lost on the way)
        claude.configure(hold_create=True, drop_held=False)
        import threading

        threading.Timer(0.3, lambda: claude.configure(hold_create=False)).start()
    else:
        claude.configure(overload_create=1)
    assert rows(run(ds, claude, tmp_path / "b", batch=True)) == expected
    st = claude.stats()
    assert st["creates"] == (1 if made else 2) and st["batches"] == 1 and paid(claude) == [1] * 5


def test_expired_part_is_resubmitted_once(claude, tmp_path):
    ds = qa_dataset(10)
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(expire=1, expire_done=0.5)
    scored = run(ds, claude, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    assert claude.stats()["batches"] == 2 and paid(claude) == [1] * 10
    b = scored.summary.batch
    assert (b["submitted"], b["resubmitted"], b["collected"], b["failed"]) == (15, 5, 10, 5)


def test_errored_and_invalid_lines_retried_then_error_rows(claude, tmp_path):
    ds = qa_dataset(12)
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(fail_lines=3, invalid_lines=4)  # lines 3, 6, 9, 12 error; 4, 8 are not JSON (first try)
    assert rows(run(ds, claude, tmp_path / "b", batch=True)) == expected
    assert claude.stats()["batches"] == 2
    claude.reset()
    claude.configure(fail_lines=3, invalid_lines=4)
    scored = run(ds, claude, tmp_path / "c", batch=True, retries=0)
    errors = scored["errors"].to_list()
    kinds = sorted((e["row"], e["kind"]) for e in errors)
    assert kinds == [
        (2, "http_500"),
        (3, "invalid_json"),
        (5, "http_500"),
        (7, "invalid_json"),
        (8, "http_500"),
        (11, "http_500"),
    ]
    assert "api_error" in next(e["message"] for e in errors if e["kind"] == "http_500")


def test_cancelled_batch_is_resubmitted_and_status_shows_it(claude, tmp_path, capfd):
    data = tmp_path / "data.jsonl"
    qa_dataset(6).to_json(data)
    cache = tmp_path / "cache"
    common = [
        "--metrics",
        "QA_Clarity",
        "--column",
        "instruction=question",
        "--column",
        "output=answer",
        "-m",
        MODEL,
        "--provider",
        "anthropic",
        "--base-url",
        claude.url,
        "--cache-dir",
        cache,
    ]
    claude.configure(delay=60, require_key="sk-ant-env")
    env = {"ANTHROPIC_API_KEY": "sk-ant-env"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        code, out, err = run_cli(capfd, "score", data, *common, "--batch", "--no-wait", "-o", tmp_path / "out")
        assert code == 1 and "Run the same command again" in err
        code, out, _ = run_cli(capfd, "batch", "status", "--cache-dir", cache)
        assert code == 0 and "msgbatch_" in out and "in_progress" in out
        code, out, _ = run_cli(capfd, "batch", "cancel", "--cache-dir", cache)
        assert code == 0 and "cancelling" in out and claude.stats()["cancels"] == 1
        claude.configure(delay=0)
        # the cancelled batch ran nothing: its requests go in a new batch, and the result is saved
        code, out, err = run_cli(capfd, "score", data, *common, "--batch", "-o", tmp_path / "out")
        assert code == 0, err
        assert "batch mode" in out and claude.stats()["batches"] == 2 and paid(claude) == [1] * 6
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_export_for_an_offline_runner_is_refused(claude, tmp_path):
    with pytest.raises(ConfigError, match="provider=anthropic"):
        export_batch(
            qa_dataset(2),
            ["QA_Clarity"],
            tmp_path / "r.jsonl",
            model=MODEL,
            provider="anthropic",
            base_url=claude.url,
            cache_dir=tmp_path / "c",
            columns=COLUMNS,
        )


def test_a_panel_of_claude_and_an_openai_judge_online_and_in_batches(claude, batch, tmp_path, monkeypatch):
    """Each judge speaks its own provider with its own key: online, and in batch mode one batch per judge at
    its own batch API (Message Batches, OpenAI's files + batches), with the online panel's result."""
    monkeypatch.setenv("CLAUDE_KEY", "sk-ant-panel")
    claude.configure(require_key="sk-ant-panel")
    ds = qa_dataset(6)
    gpt = batch
    models = [
        {
            "model": MODEL,
            "name": "claude",
            "base_url": claude.url,
            "provider": "anthropic",
            "api_key": "env:CLAUDE_KEY",
        },
        {"model": "judge", "name": "gpt", "base_url": gpt.base_url},
    ]

    def panel(cache, **kw):
        return score_dataset(
            ds, ["QA_Clarity"], models=models, api_key="sk-test", cache_dir=cache, columns=COLUMNS,
            progress=False, settings=Settings(models=models, backoff_base=0.001, batch_poll_s=0.01), **kw,
        )  # fmt: skip

    online = panel(tmp_path / "online")
    assert {"QA_Clarity__claude", "QA_Clarity__gpt", "QA_Clarity"} <= set(online["train"].column_names)
    batched = panel(tmp_path / "batch", batch=True)
    assert rows(batched) == rows(online)
    assert claude.stats()["batches"] == 1 and gpt.stats()["batches"] == 1
    assert paid(claude) == [1] * 6 and sorted(gpt.stats()["paid"].values()) == [1] * 6
    assert gpt.stats()["auth"] == ["Bearer sk-test"]


def test_a_batch_refused_as_a_whole_reports_the_providers_message_then_is_retried(claude, tmp_path):
    ds = qa_dataset(4)
    claude.configure(fail_batch="requests.2.params.max_tokens: must be at most 64000")
    scored = run(ds, claude, tmp_path / "b", retries=0, batch=True)
    errors = scored["errors"].to_list()
    assert [e["kind"] for e in errors] == ["batch_failed"] * 4
    assert "must be at most 64000" in errors[0]["message"] and "HTTP 400" in errors[0]["message"]
    assert scored.summary.batch["failed"] == 4 and claude.stats()["batches"] == 0
    expected = rows(run(ds, claude, tmp_path / "online"))
    claude.configure(fail_batch="refused once")  # then its requests' next try, in a new batch, goes through
    assert rows(run(ds, claude, tmp_path / "c", retries=1, batch=True)) == expected
    assert claude.stats()["batches"] == 1
