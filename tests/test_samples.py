"""Repeated samples (samples=K) against the loopback judge server: K replies per (row, metric), failed ones missing."""

from __future__ import annotations

import statistics

import pytest
from datasets import List, Value
from helpers import qa_dataset, run_cli, score

from hf_judge import ConfigError, Settings, load_metric
from hf_judge.judging.ensemble import Layout, majority
from hf_judge.settings import resolve_settings

# The n-th request of a prompt gets these integer scores: the samples of a row are 4, 9, 9 in some order.
SCORES = [4, 9, 9]
FAULTS = [
    {"fault": "malformed_json", "match": "row-1:", "attempts": 1},  # one sample of row 1 fails
    {"fault": "malformed_json", "match": "row-2:", "attempts": 2},  # two of row 2 fail
]


def test_k_samples_with_some_failing(judge, tmp_path):
    judge.configure(attempt_scores=SCORES, faults=FAULTS)
    out = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, samples=3, retries=0, temperature=0.7)
    d = out["train"]
    assert d.features["QA_Correctness"] == Value("float64")
    assert d.features["QA_Correctness_majority"] == Value("int64")
    assert d.features["QA_Correctness_samples"] == List(Value("int64"))
    assert d.features["QA_Correctness_reason_samples"] == List(Value("string"))
    rows = d.to_list()
    for r in (0, 3):  # every sample answered
        assert sorted(rows[r]["QA_Correctness_samples"]) == [4, 9, 9]
        assert rows[r]["QA_Correctness"] == pytest.approx(22 / 3)
        assert rows[r]["QA_Correctness_std"] == pytest.approx(statistics.pstdev([4, 9, 9]))
        assert rows[r]["QA_Correctness_majority"] == 9
    # row 1: its first request failed validation: a missing sample, the row stands on the other two (9 and 9)
    assert sorted(rows[1]["QA_Correctness_samples"], key=str) == [9, 9, None]
    assert (rows[1]["QA_Correctness"], rows[1]["QA_Correctness_std"], rows[1]["QA_Correctness_majority"]) == (9, 0, 9)
    assert rows[1]["QA_Correctness_reason_samples"].count(None) == 1
    # row 2: two of three failed, fewer than min_samples (default: a majority, 2): an error row, null columns
    assert all(rows[2][c] is None for c in d.column_names if c.startswith("QA_"))
    errors = out["errors"].to_list()
    assert [(e["row"], e["metric"], e["kind"]) for e in errors] == [(2, "QA_Correctness", "invalid_json")]
    assert errors[0]["message"].startswith("2 of 3 samples failed (min_samples=2); ")
    assert judge.stats()["requests"] == 12  # K requests per row, no retries asked for
    assert out.summary.sampling["samples"] == 3 and out.summary.sampling["min_samples"] == 2
    assert "samples        3 per (row, metric); a row needs 2 that succeed" in str(out.summary)

    # The next run replays the samples that failed (kept in the reply store, store/failures.py); with
    # retry_errors it sends only those, the rest coming from the reply store.
    judge.configure(faults=[])
    kept = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, samples=3, retries=0, temperature=0.7)
    # the same row, but for its attempts: the failed samples' (kept); the good one, from the store, took none
    assert judge.stats()["requests"] == 12 and kept["errors"].to_list() == [{**errors[0], "attempts": 2}]
    again = score(
        qa_dataset(4), ["QA_Correctness"], judge, tmp_path, samples=3, retries=0, temperature=0.7, retry_errors=True
    )
    assert judge.stats()["requests"] == 12 + 3
    assert again.summary.cache_hits == 9 and len(again["errors"]) == 0
    assert again["train"][1]["QA_Correctness_samples"].count(None) == 0


def test_min_samples_keeps_a_row_with_fewer(judge, tmp_path):
    judge.configure(attempt_scores=SCORES, faults=FAULTS)
    out = score(qa_dataset(3), ["QA_Correctness"], judge, tmp_path, samples=3, min_samples=1, retries=0, temperature=1)
    assert len(out["errors"]) == 0
    row = out["train"][2]
    assert row["QA_Correctness_samples"].count(None) == 2 and row["QA_Correctness"] == 9.0  # its third request: 9


def test_the_first_sample_is_the_one_reply_run(judge, tmp_path):
    """samples=1 keeps its request keys; a later samples=3 run reuses those replies as its first sample."""
    one = score(qa_dataset(5), ["QA_Correctness"], judge, tmp_path, temperature=0.7)
    assert one["train"].features["QA_Correctness"] == Value("int64") and judge.stats()["requests"] == 5
    three = score(qa_dataset(5), ["QA_Correctness"], judge, tmp_path, samples=3, temperature=0.7)
    assert three.summary.cache_hits == 5 and judge.stats()["requests"] == 5 + 10
    # the loopback server answers a prompt the same way every time: the K samples agree with the one reply
    assert three["train"]["QA_Correctness_majority"] == one["train"]["QA_Correctness"]


def test_verdicts_take_the_majority(judge, tmp_path):
    judge.configure(faults=[{"fault": "text", "text": "0", "attempts": 1}, {"fault": "text", "text": "1"}])
    ds = qa_dataset(2).rename_columns({"answer": "prediction"}).add_column("answer", ["x", "y"])
    out = score(ds, ["Binary"], judge, tmp_path, samples=3, temperature=0.5, columns={})
    for row in out["train"]:
        assert sorted(row["Binary_verdict_samples"]) == ["0", "1", "1"]
        assert row["Binary_verdict"] == "1" and row["Binary"] is True
        assert sorted(row["Binary_samples"]) == [False, True, True]


def test_samples_at_temperature_zero_are_refused(judge, tmp_path):
    ds = qa_dataset(2).rename_columns({"answer": "prediction"}).add_column("answer", ["x", "y"])
    with pytest.raises(ConfigError, match=r"samples=3 at temperature 0 \(Binary\).*temperature=0.7"):
        score(ds, ["Binary"], judge, tmp_path, samples=3, columns={})
    assert judge.stats()["requests"] == 0


def test_min_samples_over_samples_is_refused():
    with pytest.raises(ConfigError, match="min_samples=4 is more than samples=3"):
        resolve_settings({"model": "m", "samples": 3, "min_samples": 4})
    assert Settings(model="m", samples=4).required_samples == 3
    assert Settings(model="m").required_samples == 1


def test_layout_columns_and_aggregates():
    m = load_metric("QA_Correctness")
    layout = Layout(samples=3, min_samples=2)
    assert layout.columns(m) == [
        "QA_Correctness_reason",
        "QA_Correctness_reason_samples",
        "QA_Correctness",
        "QA_Correctness_std",
        "QA_Correctness_majority",
        "QA_Correctness_samples",
    ]
    got = layout.combine_samples(m, [{"QA_Correctness": 7, "QA_Correctness_reason": "a"}, None, {"QA_Correctness": 8}])
    assert got["QA_Correctness"] == 7.5 and got["QA_Correctness_std"] == 0.5
    assert got["QA_Correctness_samples"] == [7, None, 8] and got["QA_Correctness_majority"] == 7  # a tie: first seen
    assert got["QA_Correctness_reason"] == "a" and got["QA_Correctness_reason_samples"] == ["a", None, None]
    assert majority([True, False, False]) is False and majority([]) is None
    assert Layout().fingerprint() is None  # a one-reply run's results cache is the one it always had


def test_cli_samples(capfd, judge, tmp_path, monkeypatch):
    from datasets import load_from_disk

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"instruction": "q{i}", "output": "a{i}"}}\n' for i in range(3)))
    code, out, err = run_cli(
        capfd,
        *("score", data, "--metrics", "QA_Correctness", "--model", "judge", "--base-url", judge.base_url),
        *("--samples", "3", "--temperature", "0.7", "-o", tmp_path / "out"),
    )
    assert code == 0, err
    d = load_from_disk(str(tmp_path / "out"))["train"]
    assert len(d[0]["QA_Correctness_samples"]) == 3 and judge.stats()["requests"] == 9


def test_a_server_that_honours_n_answers_k_samples_in_one_request(judge, tmp_path):
    judge.configure(n="honour", attempt_scores=SCORES, faults=FAULTS[:1], record=True)
    out = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, samples=3, retries=0, temperature=0.7)
    assert judge.stats()["requests"] == 4 and {b["n"] for b in judge.stats()["bodies"]} == {3}
    d = out["train"]
    assert d["QA_Correctness_samples"] == [[4, 9, 9], [None, 9, 9], [4, 9, 9], [4, 9, 9]]
    assert d["QA_Correctness"][1] == 9.0 and len(out["errors"]) == 0
    assert not any("ignores n" in note for note in out.summary.notes)


def test_n_resume_sends_only_the_missing_sample(judge, tmp_path):
    judge.configure(n="honour", attempt_scores=SCORES, faults=FAULTS[:1], record=True)
    kw = dict(samples=3, min_samples=3, retries=0, temperature=0.7)
    out = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, **kw)
    assert [e["row"] for e in out["errors"]] == [1]  # its first choice failed validation: 2 of 3, min_samples=3
    judge.configure(faults=[])
    again = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, retry_errors=True, **kw)  # sent again
    assert judge.stats()["requests"] == 5 and "n" not in judge.stats()["bodies"][-1]  # that sample alone
    assert again.summary.cache_hits == 11 and len(again["errors"]) == 0
    assert None not in again["train"][1]["QA_Correctness_samples"]


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
def test_a_server_that_ignores_or_refuses_n_gets_k_requests(judge, tmp_path, mode):
    judge.configure(n=mode, attempt_scores=SCORES)
    out = score(qa_dataset(4), ["QA_Correctness"], judge, tmp_path, samples=3, retries=0, temperature=0.7)
    assert [sorted(s) for s in out["train"]["QA_Correctness_samples"]] == [[4, 9, 9]] * 4
    assert len(out["errors"]) == 0
    assert judge.stats()["by_status"]["200"] == 12  # K replies per row
    assert [n for n in out.summary.notes if "ignores n" in n]  # said once, in the summary
    assert len([n for n in out.summary.notes if "ignores n" in n]) == 1


def test_a_sample_another_process_claimed_is_not_asked_for_as_an_extra_choice(judge, tmp_path):
    """With n choices per request, the samples asked for as extra choices must be this process's: a sample
    another process on the cache has claimed (it is paying for it) is waited for, not bought again in n. (A
    process holds some samples of a row alone when, e.g., its first sample failed and was released while the
    others, sent one by one to a server that ignores n, were still in flight.)"""
    import sqlite3
    import threading
    import time

    from datasets import concatenate_datasets

    from hf_judge.judging.ensemble import sample_key
    from hf_judge.store.replies import ReplyStore

    judge.configure(n="honour", record=True)
    # one prompt twice: each of 2 worker processes holds it (a store of the test's own process is no company)
    ds, kw = concatenate_datasets([qa_dataset(1)] * 2), dict(samples=3, temperature=0.7, progress=False)
    probe = score(ds, ["QA_Clarity"], judge, tmp_path / "probe", **kw)  # the 3 sample keys and their replies
    stored = ReplyStore(tmp_path / "probe" / "cache" / "replies.sqlite3")  # its open merges the appended replies
    with sqlite3.connect(stored.path) as conn:
        keys = [k for (k,) in conn.execute("SELECT key FROM replies")]
    (first,) = [k for k in keys if sample_key(k, 1) in keys]
    second = sample_key(first, 1)
    reply = stored.get_many([second])[second]
    stored.close()
    cache = tmp_path / "c" / "cache"
    cache.mkdir(parents=True)
    other = ReplyStore(cache / "replies.sqlite3", shared=True)  # another process's run on the same cache
    try:
        assert other.claim([second]) == ({}, [second])  # it is sending sample 1 of the row
        before = len(judge.stats()["bodies"])

        def pay_once_the_run_has_asked() -> None:  # the other process's reply lands after the run's request
            deadline = time.monotonic() + 60
            while len(judge.stats()["bodies"]) == before and time.monotonic() < deadline:
                time.sleep(0.01)
            other.put(second, *reply)
            other.flush()

        paid = threading.Thread(target=pay_once_the_run_has_asked)
        paid.start()
        out = score(ds, ["QA_Clarity"], judge, tmp_path / "c", num_workers=2, **kw)
        paid.join()
    finally:
        other.close()
    asked = judge.stats()["bodies"][before:]
    assert [b.get("n", 1) for b in asked] == [2]  # samples 0 and 2; sample 1 came from the other process
    assert out["train"].to_dict() == probe["train"].to_dict()  # sample 1 is the other process's reply
    assert not out["errors"].num_rows
