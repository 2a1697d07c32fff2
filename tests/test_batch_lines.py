"""A provider's (or a runner's) output file as it may come: lines that are no output lines, lines for requests
the batch was not sent, duplicates, a line too long to hold. Collected (``--batch``) and imported alike."""

from __future__ import annotations

import io
import json
import sqlite3
import tracemalloc

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from helpers import qa_dataset, rows, score_as

from hf_judge import BatchesPending, export_batch, import_batch

COLUMNS = {"instruction": "question", "output": "answer"}
# lines that are no output line: not JSON, not an object, no custom_id that is a key in hex
NOT_LINES = ["[1,2,3]", '"str"', "null", '{"custom_id": 5}', '{"response": "x"}', "not json", '{"custom_id": "xyz"}']
# a line of a request the batch was sent, with a body that is no chat completion: a failed line, not a crash
LIST_BODY = '{"custom_id": "$CID", "response": {"status_code": 200, "body": [1]}}'


def run(ds, server, cache, **kw):
    return score_as("openai", ds, server.base_url, cache, settings=("max_reply_bytes",), **kw)


def export(ds, server, cache, path):
    """Export ``ds``'s requests into ``cache``; returns the request lines."""
    export_batch(ds, ["QA_Clarity"], path, model="judge", base_url=server.base_url, cache_dir=cache, columns=COLUMNS)
    return [json.loads(t) for t in path.read_text().splitlines()]


def answer(req, body=None, status=200):
    """The runner's output line for request line ``req``: the judge's reply to ``body`` (default: its own)."""
    from batch_server import BatchService

    if status != 200:
        return {"custom_id": req["custom_id"], "response": {"status_code": status, "body": {"error": {"message": "x"}}}}
    reply = BatchService().reply(body if body is not None else req["body"])
    return {"custom_id": req["custom_id"], "response": {"status_code": 200, "body": reply}}


def write(path, lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))


def do_import(ds, server, cache, results, **kw):
    return import_batch(
        ds, ["QA_Clarity"], results, model="judge", base_url=server.base_url, cache_dir=cache, columns=COLUMNS,
        progress=False, **kw,
    )  # fmt: skip


# -- lines that are no output lines -----------------------------------------------------------------------


def test_collected_output_with_lines_that_are_no_output_lines_keeps_every_good_line(batch, tmp_path, caplog):
    ds = qa_dataset(6)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(extra_lines=[*NOT_LINES, LIST_BODY])
    with caplog.at_level("WARNING", logger="hf_judge"):
        scored = run(ds, batch, tmp_path / "b", batch=True)
    assert rows(scored) == expected
    st = batch.stats()
    assert sorted(st["paid"].values()) == [1] * 6  # every paid reply stored: nothing submitted again
    assert scored.summary.batch["collected"] == 6
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"skipped {len(NOT_LINES)} line(s) of batch batch_" in said and "no batch output line" in said


def test_import_with_lines_that_are_no_output_lines_keeps_every_good_line(batch, tmp_path, caplog):
    ds = qa_dataset(5)
    expected = rows(run(ds, batch, tmp_path / "online"))
    reqs = export(ds, batch, tmp_path / "a", tmp_path / "requests.jsonl")
    results = tmp_path / "results.jsonl"
    cid = reqs[0]["custom_id"]
    write(results, [NOT_LINES[0], LIST_BODY.replace("$CID", cid), *[answer(r) for r in reqs], *NOT_LINES[1:]])
    with caplog.at_level("WARNING", logger="hf_judge"):
        scored = do_import(ds, batch, tmp_path / "a", results)
    assert rows(scored) == expected
    assert (scored.summary.batch["collected"], scored.summary.batch["failed"]) == (5, 0)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"skipped {len(NOT_LINES)} line(s) of results.jsonl" in said and "the first at line 1" in said


# -- lines for requests the batch was not sent ------------------------------------------------------------


def test_a_batch_cannot_answer_the_requests_of_another_batch(batch, tmp_path, caplog):
    ds = qa_dataset(6)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.configure(cross_lines=True)  # each output also answers the first request of the other two batches
    with caplog.at_level("WARNING", logger="hf_judge"):
        scored = run(ds, batch, tmp_path / "b", batch=True, batch_max_requests=2)
    assert rows(scored) == expected  # each request holds the reply paid for in its own batch
    st = batch.stats()
    assert st["batches"] == 3 and sorted(st["paid"].values()) == [1] * 6
    assert scored.summary.batch["collected"] == 6
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "answer requests it was not sent" in said


def test_a_batch_cannot_answer_an_exported_request(batch, tmp_path):
    """A request pending in an export is answered by the runner's output only, not by an online batch."""
    ds = qa_dataset(8)
    first, rest = ds.select(range(4)), ds.select(range(4, 8))
    expected = rows(run(first, batch, tmp_path / "online"))
    cache = tmp_path / "a"
    reqs = export(first, batch, cache, tmp_path / "requests.jsonl")
    impostor = answer(reqs[0], body=reqs[1]["body"])  # valid, but the reply to another request
    batch.configure(extra_lines=[json.dumps(impostor)])
    run(rest, batch, cache, batch=True)  # its batch's output holds a line for an exported request
    results = tmp_path / "results.jsonl"
    write(results, [answer(r) for r in reqs])
    assert rows(do_import(first, batch, cache, results)) == expected


def test_an_import_cannot_answer_a_request_pending_in_a_batch(batch, tmp_path, caplog):
    ds = qa_dataset(8)
    first, rest = ds.select(range(4)), ds.select(range(4, 8))
    expected = rows(run(rest, batch, tmp_path / "online"))
    cache = tmp_path / "a"
    reqs = export(first, batch, cache, tmp_path / "requests.jsonl")
    batch.configure(delay=30)
    with pytest.raises(BatchesPending):
        run(rest, batch, cache, batch=True, no_wait=True)
    pending = export(rest, batch, tmp_path / "scratch", tmp_path / "pending.jsonl")  # the batch's requests
    results = tmp_path / "results.jsonl"
    write(results, [*[answer(r) for r in reqs], answer(pending[0], body=reqs[0]["body"])])
    with caplog.at_level("WARNING", logger="hf_judge"):
        imported = do_import(first, batch, cache, results)
    assert imported.summary.batch["collected"] == 4 and len(imported["errors"]) == 0
    assert "skipped 1 lines of results.jsonl that answer no request exported" in caplog.text
    batch.configure(delay=0)
    assert rows(run(rest, batch, cache, batch=True)) == expected  # the batch's own reply, not the import's


def test_an_older_cache_without_batch_members_still_collects_and_imports(batch, tmp_path):
    """Batches and exports an earlier version recorded (no batch_members) are matched by the requests' batch."""
    ds = qa_dataset(8)
    first, rest = ds.select(range(4)), ds.select(range(4, 8))
    expected = {"first": rows(run(first, batch, tmp_path / "o1")), "rest": rows(run(rest, batch, tmp_path / "o2"))}
    cache = tmp_path / "a"
    reqs = export(first, batch, cache, tmp_path / "requests.jsonl")
    batch.configure(delay=30)
    with pytest.raises(BatchesPending):
        run(rest, batch, cache, batch=True, no_wait=True)
    with sqlite3.connect(cache / "replies.sqlite3") as conn:
        conn.execute("DROP TABLE IF EXISTS batch_members")
    batch.configure(delay=0)
    assert rows(run(rest, batch, cache, batch=True)) == expected["rest"]
    assert sorted(batch.stats()["paid"].values()) == [1] * 4  # the batch's lines taken, none sent again
    results = tmp_path / "results.jsonl"
    write(results, [answer(r) for r in reqs])
    assert rows(do_import(first, batch, cache, results)) == expected["first"]


# -- duplicates -------------------------------------------------------------------------------------------


def test_duplicate_lines_in_a_collected_output_count_once_and_keep_the_first(batch, tmp_path):
    ds = qa_dataset(4)
    reference = run(ds, batch, tmp_path / "plain", batch=True)
    batch.reset()
    batch.configure(duplicate_lines=1)  # each line twice: the second a valid reply to another prompt
    scored = run(ds, batch, tmp_path / "b", batch=True)
    assert rows(scored) == rows(reference)  # the first line of each request is kept, as it comes in the file
    b, ref = scored.summary.batch, reference.summary.batch
    assert b["collected"] == 4
    assert (b["prompt_tokens"], b["completion_tokens"]) == (ref["prompt_tokens"], ref["completion_tokens"])


def test_duplicate_failed_lines_in_a_collected_output_count_one_try(batch, tmp_path):
    batch.configure(fail_lines=2, duplicate_lines=4)  # lines 2 and 4 fail, five times each
    scored = run(qa_dataset(4), batch, tmp_path / "b", batch=True, retries=0)
    assert sorted((e["row"], e["kind"], e["attempts"]) for e in scored["errors"].to_list()) == [
        (1, "http_500", 1),
        (3, "http_500", 1),
    ]
    assert (scored.summary.batch["collected"], scored.summary.batch["failed"]) == (2, 2)


def test_import_keeps_the_first_valid_line_of_a_request(batch, tmp_path):
    ds = qa_dataset(4)
    expected = rows(run(ds, batch, tmp_path / "online"))
    reqs = export(ds, batch, tmp_path / "a", tmp_path / "requests.jsonl")
    results = tmp_path / "results.jsonl"
    # request 0: a failed line, its reply, then a reply to another request's prompt
    write(results, [answer(reqs[0], status=500), *[answer(r) for r in reqs], answer(reqs[0], body=reqs[3]["body"])])
    scored = do_import(ds, batch, tmp_path / "a", results)
    assert rows(scored) == expected
    assert (scored.summary.batch["collected"], scored.summary.batch["failed"]) == (4, 0)


def test_import_of_repeated_error_lines_counts_one_try_and_batch_mode_resubmits(batch, tmp_path):
    ds = qa_dataset(4)
    expected = rows(run(ds, batch, tmp_path / "online"))
    cache = tmp_path / "a"
    reqs = export(ds, batch, cache, tmp_path / "requests.jsonl")
    results = tmp_path / "results.jsonl"
    write(results, [*[answer(r) for r in reqs[1:]], *[answer(reqs[0], status=500)] * 5])
    scored = do_import(ds, batch, cache, results, retries=2)
    assert [(e["row"], e["kind"], e["attempts"]) for e in scored["errors"].to_list()] == [(0, "http_500", 1)]
    assert scored.summary.batch["failed"] == 1
    batch.reset()
    assert rows(run(ds, batch, cache, batch=True, retries=2)) == expected  # one try spent of three: sent again
    assert list(batch.stats()["paid"].values()) == [1]


# -- a line too long to hold ------------------------------------------------------------------------------

CAP = 4096  # the smallest max_reply_bytes; the test's replies take some hundred bytes


def test_a_collected_line_over_max_reply_bytes_is_a_failed_line_and_resubmitted(batch, tmp_path, caplog):
    ds = qa_dataset(5)
    expected = rows(run(ds, batch, tmp_path / "online"))
    batch.reset()
    batch.configure(huge_line=3 * CAP)  # the first line of the first batch, a valid reply padded to 12 kB
    scored = run(ds, batch, tmp_path / "b", batch=True, max_reply_bytes=CAP)
    assert rows(scored) == expected
    st = batch.stats()
    assert st["batches"] == 2 and sorted(st["paid"].values()) == [1, 1, 1, 1, 2]  # the line's request, again
    b = scored.summary.batch
    assert (b["collected"], b["failed"], b["resubmitted"]) == (5, 1, 1)
    batch.reset()
    batch.configure(huge_line=3 * CAP)
    scored = run(ds, batch, tmp_path / "c", batch=True, max_reply_bytes=CAP, retries=0)
    [error] = scored["errors"].to_list()
    assert error["kind"] == "bad_response" and f"max_reply_bytes={CAP:,}" in error["message"]


def test_an_imported_line_over_max_reply_bytes_is_an_error_row(batch, tmp_path):
    ds = qa_dataset(4)
    expected = rows(run(ds, batch, tmp_path / "online"))
    reqs = export(ds, batch, tmp_path / "a", tmp_path / "requests.jsonl")
    huge = answer(reqs[2])
    huge["response"]["body"]["system_fingerprint"] = "x" * (3 * CAP)
    results = tmp_path / "results.jsonl"
    write(results, [answer(r) if i != 2 else huge for i, r in enumerate(reqs)])
    scored = do_import(ds, batch, tmp_path / "a", results, max_reply_bytes=CAP)
    [error] = scored["errors"].to_list()
    assert (error["row"], error["kind"]) == (2, "bad_response") and "max_reply_bytes" in error["message"]
    got = rows(scored)["train"]
    assert [g for i, g in enumerate(got) if i != 2] == [e for i, e in enumerate(expected["train"]) if i != 2]


def test_a_huge_line_is_read_in_pieces_of_the_cap():
    from hf_judge.engine.batch_lines import bounded_lines

    cap = 1 << 18
    huge = b'{"custom_id": "ab", "pad": "' + b"x" * (32 * cap) + b'"}\n'
    data = io.BytesIO(huge + b'{"custom_id": "cd"}\n')
    tracemalloc.start()
    try:
        got = list(bounded_lines(data, cap))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * cap  # the 8 MiB line is never held whole
    assert got[0].size == len(huge) and got[0].prefix.startswith(b'{"custom_id": "ab"')
    assert got[1:] == [b'{"custom_id": "cd"}\n']
