"""Batch mode (hf_judge/batch.py) against the loopback batch server (tests/batch_server.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from datasets import DatasetDict
from helpers import qa_dataset, rows, run_cli, score_as, until

from hf_judge import (
    BatchesPending,
    ConfigError,
    ModelNotFoundError,
    export_batch,
    import_batch,
)

ROOT = Path(__file__).parents[1]
JOB = Path(__file__).with_name("batch_job.py")
COLUMNS = {"instruction": "question", "output": "answer"}


def run(ds, server, cache, metrics=("QA_Clarity",), **kw):
    return score_as("openai", ds, server.base_url, cache, metrics, settings=("batch_poll_s", "batch_offline"), **kw)


def test_batch_run_equals_online_row_for_row(batch, tmp_path):
    ds = qa_dataset(40)
    online = run(ds, batch, tmp_path / "online", metrics=("QA_All",))
    assert batch.stats()["online"] == 40
    batched = run(ds, batch, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(batched) == rows(online)
    st = batch.stats()
    assert st["online"] == 40 and st["batches"] == 1 and st["uploads"] == 1
    assert sorted(st["paid"].values()) == [1] * 40
    assert st["files"] == 0  # the collected batch's input, output (and error) files are deleted at the provider
    assert batched.summary.batch["collected"] == 40 and batched.summary.batch["batches"] == 1
    assert batched.summary.batch["prompt_tokens"] > 0
    assert "batch mode" in str(batched.summary)
    # everything is in the reply store now: the same call sends nothing, submits nothing
    again = run(ds, batch, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(again) == rows(online) and batch.stats()["batches"] == 1


def test_no_wait_then_rerun_submits_nothing_new_and_collects(batch, tmp_path):
    ds = qa_dataset(12)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(delay=30)  # the server reads its delay when asked: running until set to 0 below, however slow
    with pytest.raises(BatchesPending, match="Run the same command again"):
        run(ds, batch, tmp_path / "b", batch=True, no_wait=True)
    assert batch.stats()["batches"] == 1
    with pytest.raises(BatchesPending):  # still running: looked at, nothing submitted
        run(ds, batch, tmp_path / "b", batch=True, no_wait=True)
    batch.configure(delay=0)
    scored = run(ds, batch, tmp_path / "b", batch=True)
    st = batch.stats()
    assert (st["batches"], st["uploads"]) == (1, 1)
    assert sorted(st["paid"].values()) == [1] * 12
    assert rows(scored) == expected
    assert scored.summary.batch["submitted"] == 0 and scored.summary.batch["collected"] == 12


def test_ctrl_c_while_waiting_then_rerun_collects(batch, tmp_path):
    ds = qa_dataset(6)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(delay=30)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "openai", batch.base_url, str(tmp_path / "b"), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
    )
    until(lambda: batch.stats()["batches"] == 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "the next run collects them" in err
    batch.configure(delay=0)
    assert rows(run(ds, batch, tmp_path / "b", batch=True)) == expected
    st = batch.stats()
    assert (st["batches"], st["uploads"]) == (1, 1) and sorted(st["paid"].values()) == [1] * 6


@pytest.mark.parametrize("created", [False, True], ids=["create-lost", "create-done-id-lost"])
def test_kill_9_between_upload_and_create_pays_nothing_twice(batch, tmp_path, created):
    ds = qa_dataset(8)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(hold_create=True, drop_held=not created)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "openai", batch.base_url, str(tmp_path / "b"), "8"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
    )
    try:
        until(lambda: batch.stats()["creates"] == 1)  # uploaded, and the create is on its way
    finally:
        proc.kill()  # SIGKILL: no clean-up runs
        proc.wait()
    batch.configure(hold_create=False)
    if created:
        until(lambda: batch.stats()["batches"] == 1)
    assert batch.stats()["uploads"] == 1
    assert rows(run(ds, batch, tmp_path / "b", batch=True)) == expected
    st = batch.stats()
    assert st["uploads"] == 1  # the upload the kill hid is found by its name, not made again
    assert st["batches"] == 1  # ... and the batch made from it is adopted, or made once
    assert sorted(st["paid"].values()) == [1] * 8


def test_kill_9_while_uploading_reuses_the_upload(batch, tmp_path):
    ds = qa_dataset(5)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(hold_upload=True)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "openai", batch.base_url, str(tmp_path / "b"), "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
    )
    try:
        until(lambda: batch.stats()["uploads"] == 1)  # stored at the provider; the id never reached the book
    finally:
        proc.kill()
        proc.wait()
    batch.configure(hold_upload=False)
    assert rows(run(ds, batch, tmp_path / "b", batch=True)) == expected
    st = batch.stats()
    assert (st["uploads"], st["batches"]) == (1, 1) and sorted(st["paid"].values()) == [1] * 5


def test_expired_batch_missing_lines_resubmitted_once(batch, tmp_path):
    ds = qa_dataset(10)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(expire=1, expire_done=0.5)
    scored = run(ds, batch, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    st = batch.stats()
    assert st["batches"] == 2
    assert sorted(st["paid"].values()) == [1] * 10  # the 5 done were not sent again, the 5 missing once
    b = scored.summary.batch
    assert (b["submitted"], b["resubmitted"], b["collected"], b["failed"]) == (15, 5, 10, 5)


def test_failed_and_invalid_lines_retried_then_error_rows(batch, tmp_path):
    ds = qa_dataset(12)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(fail_lines=3, invalid_lines=4)  # lines 3, 6, 9, 12 fail; 4, 8 are not JSON (first try)
    assert rows(run(ds, batch, tmp_path / "b", batch=True)) == expected
    assert batch.stats()["batches"] == 2
    batch.reset()
    batch.configure(fail_lines=3, invalid_lines=4)
    scored = run(ds, batch, tmp_path / "c", batch=True, retries=0)
    errors = scored["errors"].to_list()
    kinds = sorted((e["row"], e["kind"], e["attempts"]) for e in errors)
    assert kinds == [
        (2, "http_500", 1),
        (3, "invalid_json", 1),
        (5, "http_500", 1),
        (7, "invalid_json", 1),
        (8, "http_500", 1),
        (11, "http_500", 1),
    ]
    assert errors[0]["message"] and batch.stats()["batches"] == 1
    assert [v is None for v in scored["train"]["QA_Clarity"]] == [i in (2, 3, 5, 7, 8, 11) for i in range(12)]


@pytest.mark.parametrize("fallback", ["batch", "online"])
def test_content_filtered_lines_are_final_errors_never_sent_again(batch, tmp_path, fallback):
    batch.configure(filtered_lines=2)  # lines 2, 4, 6 (rows 1, 3, 5) are withheld by the filter, every time
    scored = run(qa_dataset(6), batch, tmp_path / "b", batch=True, retries=3, batch_fallback=fallback)
    st = batch.stats()
    # one paid line per row: the filter's refusal is not resubmitted (it was, three times: 15 lines for 6 rows)
    assert sum(st["paid"].values()) == 6 and st["batches"] == 1 and st["online"] == 0
    errors = sorted((e["row"], e["kind"], e["attempts"]) for e in scored["errors"].to_list())
    assert errors == [(1, "content_filter", 1), (3, "content_filter", 1), (5, "content_filter", 1)]
    assert [v is None for v in scored["train"]["QA_Clarity"]] == [i in (1, 3, 5) for i in range(6)]
    assert (scored.summary.batch["resubmitted"], scored.summary.batch["failed"]) == (0, 3)


def test_batch_failed_as_a_whole_reports_the_providers_message(batch, tmp_path):
    ds = qa_dataset(4)
    batch.configure(fail_batch="Line 1: the model `judge` does not support the batch API")
    scored = run(ds, batch, tmp_path / "b", batch=True, retries=0)
    errors = scored["errors"].to_list()
    assert [e["kind"] for e in errors] == ["batch_failed"] * 4
    assert "does not support the batch API" in errors[0]["message"]
    batch.configure(fail_batch="bad file")  # once more, then a retry in a new batch goes through
    expected = rows(run(ds, batch, tmp_path / "online"))
    assert rows(run(ds, batch, tmp_path / "c", batch=True, retries=1)) == expected


def test_fallback_online_sends_failed_lines_online(batch, tmp_path):
    ds = qa_dataset(10)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.reset()
    batch.configure(fail_lines=2)
    scored = run(ds, batch, tmp_path / "b", batch=True, batch_fallback="online")
    assert rows(scored) == expected
    st = batch.stats()
    assert st["batches"] == 1 and st["online"] == 5


def test_dataset_over_one_batchs_limits_is_split_and_reassembled_in_order(batch, tmp_path):
    ds = DatasetDict({"train": qa_dataset(23), "test": qa_dataset(9, "t")})
    expected = rows(run(ds, batch, tmp_path / "online"))
    scored = run(ds, batch, tmp_path / "b", batch=True, batch_max_requests=7)
    assert rows(scored) == expected
    assert batch.stats()["batches"] == 4 + 2
    batch.reset()
    size = len(Path(JOB).read_bytes())  # any few kB: a limit in bytes splits as well
    scored = run(ds, batch, tmp_path / "c", batch=True, batch_max_bytes=max(size, 4096))
    assert rows(scored) == expected and batch.stats()["batches"] > 2


def test_export_external_runner_import_equals_online(batch, tmp_path):
    ds = qa_dataset(10)
    expected = rows(run(ds, batch, tmp_path / "online", metrics=("QA_All",)))
    requests = tmp_path / "requests.jsonl"
    cache = tmp_path / "b"
    assert (
        export_batch(ds, ["QA_All"], requests, model="judge", base_url=batch.base_url, cache_dir=cache, columns=COLUMNS)
        == 10
    )
    # the external runner (vllm run-batch plays the judge server's part): one output line per request line
    from batch_server import BatchService

    svc = BatchService()
    svc.config["invalid_lines"] = 5
    out = []
    for i, text in enumerate(requests.read_text().splitlines(), 1):
        req = json.loads(text)
        assert (req["method"], req["url"]) == ("POST", "/v1/chat/completions")
        if i == 7:
            continue  # a line the runner lost
        body = svc.reply(req["body"], invalid=i == 5)
        out.append({"id": f"r{i}", "custom_id": req["custom_id"], "response": {"status_code": 200, "body": body}})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(o) + "\n" for o in out))
    scored = import_batch(
        ds,
        ["QA_All"],
        results,
        model="judge",
        base_url=batch.base_url,
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
    )
    assert batch.stats()["online"] == 10  # the online reference only: import sends nothing
    errors = {e["row"]: e["kind"] for e in scored["errors"].to_list()}
    assert errors == {4: "invalid_json", 6: "batch_missing"}
    got = rows(scored)["train"]
    for i, (g, e) in enumerate(zip(got, expected["train"], strict=True)):
        if i not in errors:
            assert g == e
    # the runner's second pass brings the two back: everything equals the online result
    requests2 = tmp_path / "requests2.jsonl"
    assert (
        export_batch(
            ds, ["QA_All"], requests2, model="judge", base_url=batch.base_url, cache_dir=cache, columns=COLUMNS
        )
        == 2
    )
    out2 = [
        {
            "custom_id": json.loads(t)["custom_id"],
            "response": {"status_code": 200, "body": svc.reply(json.loads(t)["body"])},
        }
        for t in requests2.read_text().splitlines()
    ]
    results.write_text("".join(json.dumps(o) + "\n" for o in out2))
    scored = import_batch(
        ds,
        ["QA_All"],
        results,
        model="judge",
        base_url=batch.base_url,
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
    )
    assert rows(scored) == expected


def test_cli_batch_score_status_cancel_export_import(batch, tmp_path, capfd):
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
        "judge",
        "--base-url",
        batch.base_url,
        "--cache-dir",
        cache,
    ]
    batch.configure(delay=60)
    code, out, err = run_cli(capfd, "score", data, *common, "--batch", "--no-wait", "-o", tmp_path / "out")
    assert code == 1 and "Run the same command again" in err
    code, out, _ = run_cli(capfd, "batch", "status", "--cache-dir", cache)
    assert code == 0 and "batch_" in out and ("in_progress" in out or "validating" in out)
    code, out, _ = run_cli(capfd, "batch", "cancel", "--cache-dir", cache)
    assert code == 0 and batch.stats()["cancels"] == 1
    batch.configure(delay=0)
    # the cancelled batch ran nothing: its lines go in a new batch, and the result is saved
    code, out, err = run_cli(capfd, "score", data, *common, "--batch", "-o", tmp_path / "out")
    assert code == 0, err
    assert "batch mode" in out and batch.stats()["batches"] == 2
    # export, a runner, import
    req = tmp_path / "req.jsonl"
    code, out, _ = run_cli(capfd, "batch", "export", data, *common[:-1], tmp_path / "c2", "-o", req)
    assert code == 0 and "wrote 6 requests" in out
    from batch_server import BatchService

    svc = BatchService()
    lines = [json.loads(t) for t in req.read_text().splitlines()]
    res = tmp_path / "res.jsonl"
    res.write_text(
        "".join(
            json.dumps({"custom_id": x["custom_id"], "response": {"status_code": 200, "body": svc.reply(x["body"])}})
            + "\n"
            for x in lines
        )
    )
    code, out, err = run_cli(capfd, "batch", "import", data, res, *common[:-1], tmp_path / "c2", "-o", tmp_path / "imp")
    assert code == 0, err
    from datasets import load_from_disk

    assert load_from_disk(tmp_path / "imp")["train"].to_list() == load_from_disk(tmp_path / "out")["train"].to_list()


def test_server_without_batch_api_is_a_clear_stop(judge, tmp_path):
    with pytest.raises(ModelNotFoundError, match="has no batch API"):
        run(qa_dataset(2), judge, tmp_path / "c", batch=True)


def test_batch_needs_the_cache_and_no_wait_needs_batch(batch, tmp_path):
    with pytest.raises(ConfigError, match="batch mode keeps its batches"):
        run(qa_dataset(2), batch, tmp_path / "c", batch=True, use_cache=False)
    with pytest.raises(ConfigError, match="needs batch=True"):
        run(qa_dataset(2), batch, tmp_path / "c", no_wait=True)
    with pytest.raises(ConfigError, match="in one process"):
        run(qa_dataset(2), batch, tmp_path / "c", batch=True, num_workers=2)
    with pytest.raises(ConfigError, match="in one process"):
        run(qa_dataset(2).to_iterable_dataset(), batch, tmp_path / "c", batch=True)
    assert batch.stats()["online"] == 0


def test_identical_requests_go_once_even_across_files(batch, tmp_path):
    from datasets import concatenate_datasets

    ds = concatenate_datasets([qa_dataset(5)] * 3)  # each request three times, in files of 4 lines
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.reset()
    scored = run(ds, batch, tmp_path / "b", batch=True, batch_max_requests=4)
    assert rows(scored) == expected
    st = batch.stats()
    assert sorted(st["paid"].values()) == [1] * 5 and st["batches"] == 2


def test_card_and_summary_say_batch_mode_with_the_providers_tokens(batch, tmp_path):
    from hf_judge.results.card import render_section

    scored = run(qa_dataset(3), batch, tmp_path / "b", batch=True)
    b = scored.summary.batch
    assert b["prompt_tokens"] > 0 and b["completion_tokens"] > 0
    card = render_section(scored, scored.summary)
    assert f"{b['prompt_tokens']:,} prompt / {b['completion_tokens']:,} completion tokens as the provider" in card
    assert "Batch mode" in card and "batch mode" in str(scored.summary)
    scored.save_to_disk(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["batch"]["collected"] == 3


def test_replies_of_an_online_run_are_not_submitted(batch, tmp_path):
    ds = qa_dataset(6)
    online = run(ds, batch, tmp_path / "c")  # a cache as online runs (and earlier versions) write it
    scored = run(qa_dataset(8), batch, tmp_path / "c", batch=True)  # two more rows
    assert rows(scored)["train"][:6] == rows(online)["train"]
    st = batch.stats()
    assert st["batches"] == 1 and len(st["paid"]) == 2  # only the two new rows went in the batch


def test_samples_are_lines_of_their_own(batch, tmp_path):
    ds = qa_dataset(4)
    expected = rows(run(ds, batch, tmp_path / "online", samples=3))
    batch.reset()
    scored = run(ds, batch, tmp_path / "b", batch=True, samples=3)
    assert rows(scored) == expected
    assert len(batch.stats()["paid"]) == 12  # 3 samples x 4 rows, each its own custom_id


def test_logprobs_in_batch_mode_equal_online(batch, tmp_path):
    ds = qa_dataset(4)
    expected = rows(run(ds, batch, tmp_path / "online", logprobs=True))
    scored = run(ds, batch, tmp_path / "b", batch=True, logprobs=True)
    assert rows(scored) == expected
    assert set(scored["train"].column_names) == set(expected["train"][0])


def test_replies_under_the_whole_request_key_are_not_submitted(batch, tmp_path):
    """Compatible reuse in batch mode: replies an earlier version (or reuse="strict") stored under the key of
    the whole request, max_tokens included, are found and not submitted again."""
    ds = qa_dataset(4)
    cache = tmp_path / "shared"
    expected = rows(run(ds, batch, cache, reuse="strict", max_tokens=256))
    batch.reset()
    scored = run(ds, batch, cache, batch=True, max_tokens=256)
    assert rows(scored) == expected
    assert not batch.stats()["paid"]
