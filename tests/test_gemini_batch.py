"""Gemini batch mode (engine/batch_gemini.py) against the loopback Gemini API server (tests/gemini_server.py),
whose shapes google-genai's own client is checked to speak."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from gemini_fixture import *  # noqa: F401,F403 - the Gemini server fixtures
from helpers import qa_dataset, rows, run_cli, score_as, until

from hf_judge import BatchesPending, Settings, score_dataset
from hf_judge.transport.gemini import to_chat_completion, to_gemini_request

ROOT = Path(__file__).parents[1]
JOB = Path(__file__).with_name("batch_job.py")
COLUMNS = {"instruction": "question", "output": "answer"}
MODEL = "gemini-2.5-flash"


def run(ds, server, cache, metrics=("QA_Clarity",), **kw):
    return score_as("gemini", ds, server.base_url, cache, metrics, **kw)


def test_google_genai_sdk_speaks_the_servers_shapes(gemini, tmp_path):
    """google-genai's own client uploads, creates, gets, lists and cancels against the loopback server: its
    shapes are the SDK's (file input with a responses file, and inlined requests with inlined responses)."""
    # the `wire` extra (the main CI run installs it; not the run on the lowest versions: google-genai needs a
    # newer pydantic than the floor), so the check runs once per CI run
    genai = pytest.importorskip("google.genai", reason='pip install ".[wire]": the check against google-genai')
    client = genai.Client(api_key="gm-test", http_options={"base_url": gemini.api_root, "api_version": "v1beta"})
    request = {"contents": [{"role": "user", "parts": [{"text": "Rate: 2+2=4"}]}]}
    path = tmp_path / "requests.jsonl"
    path.write_bytes(orjson.dumps({"key": "k1", "request": request}) + b"\n")
    uploaded = client.files.upload(file=path, config={"mime_type": "application/jsonl", "display_name": "mine"})
    assert uploaded.name.startswith("files/") and uploaded.display_name == "mine"
    job = client.batches.create(model=MODEL, src=uploaded.name, config={"display_name": "sdk"})
    assert job.name.startswith("batches/") and job.display_name == "sdk"
    got = client.batches.get(name=job.name)
    assert got.state.name == "JOB_STATE_SUCCEEDED" and got.dest.file_name.startswith("files/")
    (line,) = client.files.download(file=got.dest.file_name).splitlines()
    out = orjson.loads(line)
    assert out["key"] == "k1"
    assert genai.types.GenerateContentResponse.model_validate(out["response"]).text  # as the SDK reads it
    inline = client.batches.create(
        model=MODEL, src=[{"contents": request["contents"], "metadata": {"key": "k2"}}], config={"display_name": "in"}
    )
    done = client.batches.get(name=inline.name)
    (resp,) = done.dest.inlined_responses
    assert resp.metadata == {"key": "k2"} and resp.response.text
    assert {j.name for j in client.batches.list()} >= {job.name, inline.name}
    gemini.configure(delay=30)
    slow = client.batches.create(model=MODEL, src=uploaded.name)
    client.batches.cancel(name=slow.name)
    assert client.batches.get(name=slow.name).state.name == "JOB_STATE_CANCELLED"
    assert gemini.stats()["keys"] == ["gm-test"]  # x-goog-api-key, as the SDK sends it


def test_requests_in_geminis_shape():
    body = {
        "model": MODEL,
        "temperature": 0.3,
        "top_p": 1.0,
        "max_tokens": 50,
        "n": 2,
        "logprobs": True,
        "top_logprobs": 5,
        "messages": [
            {"role": "system", "content": "Be strict."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                ],
            },
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}},
    }
    r = to_gemini_request(body)
    assert r["systemInstruction"] == {"parts": [{"text": "Be strict."}]}
    assert r["contents"] == [
        {"role": "user", "parts": [{"text": "Look:"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]}
    ]
    assert r["generationConfig"] == {
        "temperature": 0.3,
        "topP": 1.0,
        "maxOutputTokens": 50,
        "candidateCount": 2,
        "responseLogprobs": True,
        "logprobs": 5,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
    }
    cut = to_chat_completion({"candidates": [{"content": {"parts": [{"text": "{"}]}, "finishReason": "MAX_TOKENS"}]})
    assert cut["choices"][0]["finish_reason"] == "length"  # the same validation: a cut reply is an error
    blocked = to_chat_completion({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked["choices"][0]["finish_reason"] == "content_filter"


def test_gemini_batch_run_equals_online_row_for_row(gemini, tmp_path):
    ds = qa_dataset(20)
    online = run(ds, gemini, tmp_path / "online", metrics=("QA_All",))
    assert gemini.stats()["online"] == 20  # online Gemini: the OpenAI-compatible endpoint
    batched = run(ds, gemini, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(batched) == rows(online)
    st = gemini.stats()
    assert st["online"] == 20 and st["batches"] == 1 and st["uploads"] == 1
    assert sorted(st["paid"].values()) == [1] * 20
    assert st["inputs"] == 0 and st["files"] == 0  # the collected batch's files are deleted at the provider
    assert batched.summary.batch["collected"] == 20 and batched.summary.batch["prompt_tokens"] > 0
    assert st["keys"] == ["gm-test"]
    again = run(ds, gemini, tmp_path / "batch", metrics=("QA_All",), batch=True)
    assert rows(again) == rows(online) and gemini.stats()["batches"] == 1


def test_no_wait_then_rerun_submits_nothing_new_and_collects(gemini, tmp_path):
    ds = qa_dataset(8)
    expected = rows(run(ds, gemini, tmp_path / "online"))
    gemini.configure(delay=30)
    with pytest.raises(BatchesPending, match="Run the same command again"):
        run(ds, gemini, tmp_path / "b", batch=True, no_wait=True)
    with pytest.raises(BatchesPending):
        run(ds, gemini, tmp_path / "b", batch=True, no_wait=True)
    assert gemini.stats()["batches"] == 1
    gemini.configure(delay=0)
    scored = run(ds, gemini, tmp_path / "b", batch=True)
    st = gemini.stats()
    assert (st["batches"], st["uploads"]) == (1, 1) and sorted(st["paid"].values()) == [1] * 8
    assert rows(scored) == expected and scored.summary.batch["submitted"] == 0


@pytest.mark.parametrize("step", ["upload", "create"], ids=["upload-id-lost", "create-done-id-lost"])
def test_kill_9_between_steps_pays_nothing_twice(gemini, tmp_path, step):
    """Killed while an upload's reply, or a create's, is on its way: the next run finds the upload by its
    display name and the batch by its input file, and submits nothing twice. (A real process: kill -9.)"""
    ds = qa_dataset(6)
    expected = rows(run(ds, gemini, tmp_path / "online"))
    gemini.configure(**({"hold_upload": True} if step == "upload" else {"hold_create": True, "drop_held": False}))
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "gemini", gemini.base_url, str(tmp_path / "b"), "6"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
    )
    try:  # stored at the provider, its reply (the id) on its way back
        until(lambda: gemini.stats()["uploads" if step == "upload" else "creates"] == 1)
    finally:
        proc.kill()  # SIGKILL: no clean-up runs
        proc.wait()
    gemini.configure(hold_upload=False, hold_create=False)
    if step == "create":
        until(lambda: gemini.stats()["batches"] == 1)
    assert rows(run(ds, gemini, tmp_path / "b", batch=True)) == expected
    st = gemini.stats()
    assert st["uploads"] == 1  # the upload the kill hid is found by its display name
    assert st["batches"] == 1  # ... and the batch made from it is adopted, or made once
    assert sorted(st["paid"].values()) == [1] * 6


def test_expired_failed_and_invalid_lines_are_resubmitted_then_collected(gemini, tmp_path):
    ds = qa_dataset(10)
    expected = rows(run(ds, gemini, tmp_path / "online"))
    gemini.configure(expire=1, expire_done=0.5, fail_lines=3, invalid_lines=4)
    scored = run(ds, gemini, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    st = gemini.stats()
    # the expired batch ran 5 of its 10 lines (2 of them failed or invalid); what it left undone or failed went
    # again, each failing line once more, until all were collected: no line ran more than twice
    resubmitted = scored.summary.batch["resubmitted"]
    assert st["batches"] >= 2 and resubmitted >= 7
    assert sum(st["paid"].values()) == 5 + resubmitted and max(st["paid"].values()) == 2


def test_lines_that_fail_every_try_are_error_rows(gemini, tmp_path):
    gemini.configure(fail_lines=1)  # every line fails on its first try...
    scored = run(qa_dataset(3), gemini, tmp_path / "b", batch=True, retries=0)  # ...and there is no second
    errors = scored["errors"].to_list()
    assert len(errors) == 3 and {e["kind"] for e in errors} == {"batch_failed"}
    assert "INTERNAL: Internal error encountered." in errors[0]["message"]
    assert scored["train"]["QA_Clarity"] == [None] * 3


def test_safety_blocked_lines_are_final_errors_never_resubmitted(gemini, tmp_path):
    gemini.configure(filtered_lines=2)  # lines 2, 4, 6 (rows 1, 3, 5): finishReason SAFETY, every time
    scored = run(qa_dataset(6), gemini, tmp_path / "b", batch=True, retries=3)
    st = gemini.stats()
    assert sum(st["paid"].values()) == 6 and st["batches"] == 1  # one line per row, none resubmitted
    errors = sorted((e["row"], e["kind"], e["attempts"]) for e in scored["errors"].to_list())
    assert errors == [(1, "content_filter", 1), (3, "content_filter", 1), (5, "content_filter", 1)]
    assert scored.summary.batch["resubmitted"] == 0


def test_batch_failed_as_a_whole_reports_geminis_message(gemini, tmp_path):
    gemini.configure(fail_batch="Request payload size exceeds the limit")
    scored = run(qa_dataset(3), gemini, tmp_path / "b", batch=True, retries=0)
    errors = scored["errors"].to_list()
    assert [e["kind"] for e in errors] == ["batch_failed"] * 3
    assert "the whole batch failed: INVALID_ARGUMENT: Request payload size exceeds the limit" in errors[0]["message"]


def test_cli_gemini_batch_status_and_cancel(gemini, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gm-env")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "data.jsonl"
    qa_dataset(4).to_json(data)
    gemini.configure(delay=30)
    args = [
        "score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column", "output=answer",
        "--model", MODEL, "--provider", "gemini", "--base-url", gemini.base_url, "--cache-dir", tmp_path / "cache",
        "--batch", "--no-wait",
    ]  # fmt: skip
    code, _, err = run_cli(capfd, *args)
    assert code == 1 and "Run the same command again" in err
    code, out, _ = run_cli(capfd, "batch", "status", "--cache-dir", tmp_path / "cache")
    assert code == 0 and "batches/" in out and "validating" in out
    code, out, err = run_cli(capfd, "batch", "cancel", "--cache-dir", tmp_path / "cache")
    assert code == 0, err
    assert "batches/" in out and "cancel" in out and gemini.stats()["cancels"] == 1
    assert gemini.stats()["keys"] == ["gm-env"]  # GEMINI_API_KEY, not OPENAI_API_KEY


def test_the_same_row_sent_to_another_provider_is_another_request_and_the_summary_says_so(gemini, tmp_path):
    ds = qa_dataset(3)
    kw = {"base_url": gemini.base_url, "api_key": "gm-test", "cache_dir": tmp_path / "c", "columns": COLUMNS}
    first = score_dataset(ds, ["QA_Clarity"], model=MODEL, progress=False, **kw)  # a gateway: provider openai
    assert gemini.stats()["online"] == 3 and not first.summary.notes
    second = score_dataset(ds, ["QA_Clarity"], model=MODEL, provider="gemini", progress=False, **kw)
    assert gemini.stats()["online"] == 6  # keyed apart: nothing of the first run is reused
    (note,) = second.summary.notes
    assert f"{MODEL} was judged through provider openai in this cache; this run asks gemini" in note
    assert "note           " + note in str(second.summary)
    third = score_dataset(ds, ["QA_Clarity"], model=MODEL, provider="gemini", progress=False, **kw)
    assert gemini.stats()["online"] == 6 and not third.summary.notes  # the same provider: all cached, no note


def test_a_gemini_judge_of_a_panel_sends_geminis_key_never_openais(judge, monkeypatch):
    from hf_judge.engine.prepare import judge_specs, resolve_api_key

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-env")
    settings = Settings(models=[{"model": "judge", "base_url": judge.base_url}, {"model": MODEL}])
    key = resolve_api_key(settings, None, needed=True)
    (_, openai_key), (_, gemini_key) = judge_specs(settings, key)
    assert (openai_key, gemini_key) == ("sk-openai", "gm-env")
    monkeypatch.delenv("GEMINI_API_KEY")
    assert judge_specs(settings, resolve_api_key(settings, None, needed=True))[1][1] is None
