"""Streaming input: score_dataset on an IterableDataset(Dict), against the loopback Hub and judge server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import Dataset, load_dataset, load_from_disk
from helpers import qa_dataset, run_cli, score, until

from hf_judge import RunSummary, ScoredIterableDatasetDict

METRICS = ["QA_Clarity", "QA_Correctness"]


def _faults(judge):
    # two rows fail for good (one metric each way), so the errors split has rows to compare
    judge.configure(
        faults=[{"fault": "status", "status": 400, "match": "row-3:"}, {"fault": "malformed_json", "match": "row-7:"}]
    )


def test_a_stream_is_scored_like_the_dataset_row_for_row(judge, tmp_path):
    ds = qa_dataset(50)
    _faults(judge)
    want = score(ds, METRICS, judge, tmp_path / "a")
    sent = judge.stats()["requests"]
    judge.reset()
    _faults(judge)
    got = score(ds.to_iterable_dataset(num_shards=3), METRICS, judge, tmp_path / "b", window=64)
    assert isinstance(got, ScoredIterableDatasetDict)
    assert judge.stats()["requests"] == 0  # nothing is read before the rows are iterated
    rows = list(got["train"])
    assert rows == want["train"].to_list()
    assert list(got["errors"]) == want["errors"].to_list()
    assert len(want["errors"]) > 0
    assert judge.stats()["requests"] == sent
    assert got.summary.rows == {"train": 50}
    assert got.summary.errors == want.summary.errors
    # datasets' own operations work on a scored split; a reading stopped early closes its run
    assert list(got["train"].take(3)) == want["train"].to_list()[:3]
    assert [r["n"] for r in got["train"].map(lambda r: {"n": r["QA_Clarity"] or 0})] == [
        r["QA_Clarity"] or 0 for r in rows
    ]


def test_a_stream_push_to_an_invalid_repo_id_is_refused_before_any_request(judge, hub, tmp_path):
    """A stream is scored by its push: an invalid repo id was found by the Hub client after every request."""
    from hf_judge import ConfigError, push_scored

    got = score(qa_dataset(3).to_iterable_dataset(), METRICS, judge, tmp_path)
    with pytest.raises(ConfigError, match=r"'me/\.\./\.\./x' is not a Hub dataset id"):
        got.push_to_hub("me/../../x")
    assert judge.stats()["requests"] == 0
    with pytest.raises(ConfigError, match="is not a Hub dataset id"):
        push_scored(score(qa_dataset(1), METRICS, judge, tmp_path), "a/b/c")


def test_a_hub_dataset_in_shards_streamed_scored_pushed_and_loaded_equals_the_non_streaming_result(
    judge, hub, tmp_path
):
    qa_dataset(120).push_to_hub("tester/stream-src", num_shards=3)
    _faults(judge)
    plain = score(load_dataset("tester/stream-src"), METRICS, judge, tmp_path / "a")
    plain.push_to_hub("tester/stream-plain")
    sent = judge.stats()["requests"]
    judge.reset()
    _faults(judge)
    source = load_dataset("tester/stream-src", streaming=True)
    assert source["train"].n_shards == 3
    streamed = score(source, METRICS, judge, tmp_path / "b", window=32)
    streamed.push_to_hub("tester/stream-judged")
    assert judge.stats()["requests"] == sent  # each request once: the push read every split once

    got, want = load_dataset("tester/stream-judged"), load_dataset("tester/stream-plain")
    assert list(got) == ["train"]
    assert got["train"].features == want["train"].features
    assert got["train"].to_list() == want["train"].to_list()
    got_errors = load_dataset("tester/stream-judged", "errors")["errors"]
    want_errors = load_dataset("tester/stream-plain", "errors")["errors"]
    assert len(want_errors) == 4
    assert got_errors.to_list() == want_errors.to_list()
    from huggingface_hub import DatasetCard, HfApi

    card = str(DatasetCard.load("tester/stream-judged", repo_type="dataset"))
    assert "## Scored with hf-judge" in card and "- **Rows scored:** train: 120" in card
    assert "| `QA_Clarity` | 118 | 2 |" in card
    plain_card = str(DatasetCard.load("tester/stream-plain", repo_type="dataset"))
    assert card.partition("### Score distributions")[2] == plain_card.partition("### Score distributions")[2]
    files = HfApi().list_repo_files("tester/stream-judged", repo_type="dataset")
    assert "hf_judge/summary.json" in files and "hf_judge/prompts/QA_Clarity.jinja" in files


HERE = Path(__file__).parent
N = 2000
# The last row's request is held 60 s, so the interrupted run cannot finish before the signal lands.
HOLD_LAST_ROW = [{"fault": "delay", "seconds": 60, "match": f"row-{N - 1}:"}]


def _job(judge, cache, out, *extra):
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, str(HERE / "stream_job.py"), judge.base_url, str(cache), str(N), "64", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture(scope="module")
def want(judge_server_proc, tmp_path_factory) -> list[dict]:
    """The rows of the jobs' data scored without streaming: one reference run for the tests of this module."""
    judge_server_proc.reset()
    return score(qa_dataset(N), ["QA_Clarity"], judge_server_proc, tmp_path_factory.mktemp("ref"))["train"].to_list()


def _resume(judge, cache, out, *extra) -> RunSummary:
    """The job of :func:`_job` run again, in this process: a rerun after the kill."""
    from stream_job import run

    return run(judge.base_url, str(cache), N, 64, str(out), *extra)


def _stored(cache) -> int:
    from hf_judge.store.replies import ReplyStore

    store = ReplyStore(cache / "replies.sqlite3")
    try:
        return len(store)
    finally:
        store.close()


@pytest.mark.parametrize("signum", [signal.SIGKILL])  # Ctrl-C: the test after this one
def test_an_interrupted_stream_resumes_without_paying_twice_for_a_stored_reply(judge, tmp_path, signum, want):
    judge.configure(latency=0.02, faults=HOLD_LAST_ROW)
    p = _job(judge, tmp_path / "cache", tmp_path / f"out-{signum}")
    assert p.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while judge.stats()["ok"] < 0.45 * N and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(p.pid, signum)
    t = time.monotonic()
    rc = p.wait(60)
    print("stopped after", time.monotonic() - t)
    assert rc != 0
    if signum == signal.SIGINT:
        assert "stored replies are not sent again" in p.stderr.read()
    stored = _stored(tmp_path / "cache")
    assert 0.4 * N < stored < N
    judge.reset()
    _resume(judge, tmp_path / "cache", tmp_path / f"out-{signum}")  # in this process: no state of the first run
    assert judge.stats()["requests"] == N - stored  # exactly the replies the store lacked: none paid twice
    got = load_dataset(str(tmp_path / f"out-{signum}"))
    assert got["train"].to_list() == want
    # datasets 5.2 cannot load a config of 0 rows ("corresponds to no data"): read the file itself
    assert pq.read_table(tmp_path / f"out-{signum}" / "errors" / "errors-00000.parquet").num_rows == 0


def test_cli_streaming_scores_a_hub_dataset_into_parquet_shards_then_pushes_the_folder(
    judge, hub, tmp_path, capfd, monkeypatch
):
    qa_dataset(90, "cli").push_to_hub("tester/stream-cli-src", num_shards=3)
    args = ["score", "tester/stream-cli-src", "--streaming", "--metrics", "QA_Clarity", "-m", "judge"]
    args += ["--base-url", judge.base_url, "--column", "instruction=question", "--column", "output=answer"]
    args += ["--cache-dir", tmp_path / "cache", "--api-key-env", "STREAM_KEY"]
    monkeypatch.setenv("STREAM_KEY", "sk-test")
    # a name of its own: datasets 5.2 caches a local folder whose README lists configs by the folder's name
    out = tmp_path / "cli-out"
    code, stdout, stderr = run_cli(capfd, *args, "-o", out, "--push-to-hub", "tester/stream-cli-judged")
    assert code == 0, stderr
    assert "saved to" in stdout and "train: 90 rows" in stdout and "pushed to" in stdout
    assert judge.stats()["requests"] == 90  # the push uploads the folder: the input is read once
    assert sorted(p.name for p in (out / "data").iterdir()) == ["train-00000.parquet"]
    local = load_dataset(str(out))["train"]
    pushed = load_dataset("tester/stream-cli-judged")["train"]
    plain = score(qa_dataset(90, "cli"), ["QA_Clarity"], judge, tmp_path / "plain")["train"]
    assert local.to_list() == pushed.to_list() == plain.to_list()
    assert RunSummary.load(out).rows == {"train": 90}
    # the same command again: nothing is sent, and the folder (hf-judge's, same source) is replaced
    judge.reset()
    code, stdout, stderr = run_cli(capfd, *args, "-o", out)
    assert code == 0, stderr
    assert judge.stats()["requests"] == 0


def test_cli_streaming_refuses_a_recipe_with_filters(judge, tmp_path, capfd):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("metrics: [QA_Clarity]\nfilters: {min: {QA_Clarity: 5}}\n")
    code, _, stderr = run_cli(
        capfd, "score", "tester/none", "--streaming", "--recipe", recipe, "-m", "judge", "--base-url", judge.base_url
    )
    assert code == 2 and "--streaming does not apply a recipe's filters" in stderr


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT])
def test_an_interrupted_save_goes_on_after_its_last_closed_shard(judge, tmp_path, signum, want):
    judge.configure(latency=0.02, faults=HOLD_LAST_ROW)
    out = tmp_path / f"shards-{signum}"
    p = _job(judge, tmp_path / "cache", out, "8KB")
    assert p.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while judge.stats()["ok"] < 0.45 * N and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(p.pid, signum)
    assert p.wait(60) != 0
    if signum == signal.SIGINT:
        assert "stored replies are not sent again" in p.stderr.read()
    progress = json.loads((out / "hf_judge_progress.json").read_text())["splits"]["train"]
    resumed = progress["rows"]
    assert 0 < resumed < N and len(progress["shards"]) > 1 and progress["state"] is not None
    kept = {name: (out / "data" / name).stat().st_mtime_ns for name in progress["shards"]}
    stored = _stored(tmp_path / "cache")
    judge.reset()
    summary = _resume(judge, tmp_path / "cache", out, "8KB")
    requests, cache_hits = summary.requests, summary.cache_hits
    assert requests == judge.stats()["requests"] <= N - stored  # nothing stored is paid again
    assert requests + cache_hits == N - resumed  # the rows of the closed shards were not read again
    assert {name: (out / "data" / name).stat().st_mtime_ns for name in kept} == kept  # nor written again
    assert not (out / "hf_judge_progress.json").exists()
    assert load_dataset(str(out))["train"].to_list() == want


def test_a_streamed_image_column_sends_the_same_requests_as_the_dataset(judge, tmp_path):
    from test_images import VQA, image_dataset, prompt

    pdir = prompt(tmp_path, "VQA", VQA)
    ds = image_dataset()
    want = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["image_parts"] == 3
    judge.reset()
    got = score(ds.to_iterable_dataset(), ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    streamed = list(got["train"].with_format("arrow").iter(batch_size=10))[0].to_pylist()
    assert streamed == want["train"].with_format("arrow")[:].to_pylist()  # the image bytes as they came in
    assert judge.stats()["requests"] == 0  # the same request keys: every reply comes from the store


def test_a_stream_scored_with_samples_equals_the_dataset_result(judge, tmp_path):
    ds = qa_dataset(20)
    kw = dict(samples=3, retries=0, temperature=0.7)
    want = score(ds, ["QA_Correctness"], judge, tmp_path / "a", **kw)
    sent = judge.stats()["requests"]
    got = score(ds.to_iterable_dataset(num_shards=2), ["QA_Correctness"], judge, tmp_path / "b", **kw)
    assert list(got["train"]) == want["train"].to_list()
    assert got["train"].features == want["train"].features
    assert judge.stats()["requests"] == 2 * sent  # a cache of its own: the same K requests per row again


def test_a_saved_stream_card_shows_agreement_reports(judge, tmp_path):
    from hf_judge import agreement

    ds = qa_dataset(30).add_column("human", [i % 10 + 1 for i in range(30)])
    scored = score(ds.to_iterable_dataset(), ["QA_Correctness"], judge, tmp_path)
    report = agreement(Dataset.from_list(list(scored["train"])), score="QA_Correctness", label="human")
    scored.agreement = [report]
    scored.save_to_disk(tmp_path / "agree-out")
    card = (tmp_path / "agree-out" / "README.md").read_text()
    assert "### Agreement with labels" in card and "`QA_Correctness`" in card


def test_a_ctrl_c_between_two_batches_of_a_save_is_the_interrupted_message_and_the_save_resumes(
    judge, tmp_path, monkeypatch
):
    """A Ctrl-C can land outside the scoring generator too: while a shard or the progress file is written. It was
    a KeyboardInterrupt traceback there (2 of 8 SIGINT runs of the save test); it is InterruptedRun everywhere."""
    import hf_judge.engine.stream_sink as stream
    from hf_judge import InterruptedRun

    ds = qa_dataset(300)
    want = score(ds, ["QA_Clarity"], judge, tmp_path / "want")["train"].to_list()
    real, calls = stream.save_progress, []

    def interrupted_on_the_second_save(path, progress):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a SIGINT landing in the write
        real(path, progress)

    monkeypatch.setattr(stream, "save_progress", interrupted_on_the_second_save)
    scored = score(ds.to_iterable_dataset(num_shards=3), ["QA_Clarity"], judge, tmp_path / "s", window=32)
    with pytest.raises(InterruptedRun, match="stored replies are not sent again"):
        scored.save_to_disk(tmp_path / "out", max_shard_size="4KB")
    monkeypatch.setattr(stream, "save_progress", real)
    again = score(ds.to_iterable_dataset(num_shards=3), ["QA_Clarity"], judge, tmp_path / "s", window=32)
    again.save_to_disk(tmp_path / "out", max_shard_size="4KB")
    assert load_dataset(str(tmp_path / "out"))["train"].to_list() == want


def test_a_saved_stream_with_samples_draws_every_judgment_as_the_dataset_result_does(judge, tmp_path):
    """The card of a saved stream reads back each judgment's samples (a list column) beside the score columns:
    its picture of every judgment is the one a Dataset result draws."""
    pytest.importorskip("matplotlib")
    from hf_judge.results.card import picture_files

    kw = dict(samples=2, retries=0, temperature=0.7)
    want = score(qa_dataset(10), ["QA_Correctness"], judge, tmp_path / "a", **kw)
    got = score(qa_dataset(10).to_iterable_dataset(), ["QA_Correctness"], judge, tmp_path / "b", **kw)
    got.save_to_disk(tmp_path / "out")
    path = "hf_judge/plots/train/all_judgments/QA_Correctness.png"
    assert (tmp_path / "out" / path).read_bytes() == picture_files(want, want.summary)[path]
    assert path in (tmp_path / "out" / "README.md").read_text()


def test_cli_run_pairwise_streaming_judges_both_orders_as_the_run_without_streaming(
    judge, tmp_path, capfd, monkeypatch
):
    """`hf-judge run pairwise --streaming`: a recipe is streamed as `score --streaming` is, both orders of each row
    judged (2 requests a row) and the same rows saved as without --streaming (issue 40, item 13)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "pairs.jsonl"
    data.write_text(
        "".join(
            json.dumps({"question": f"q {i}", "response1": f"r1 {i}", "response2": f"r2 {i}"}) + "\n" for i in range(6)
        )
    )
    args = ["run", "pairwise", "--dataset", data, "-m", "judge", "--base-url", judge.base_url]
    code, stdout, stderr = run_cli(capfd, *args, "--cache-dir", tmp_path / "c1", "--streaming", "-o", tmp_path / "s")
    assert code == 0, stderr
    assert judge.stats()["requests"] == 12  # 6 rows, both orders
    code, _, stderr = run_cli(capfd, *args, "--cache-dir", tmp_path / "c2", "-o", tmp_path / "plain")
    assert code == 0, stderr
    streamed = load_dataset(str(tmp_path / "s"), split="train").to_list()
    plain = load_from_disk(str(tmp_path / "plain"))["train"].to_list()
    assert streamed == plain and {"Comparative_winner", "Comparative_disagree"} <= set(streamed[0])


def test_ctrl_c_of_a_streamed_cli_run_says_how_many_replies_it_saved(judge, tmp_path):
    """A real process (Ctrl-C): `python -m hf_judge.cli score FOLDER --streaming`, SIGINT in its second split. The
    message counts every reply this run saved, both splits' (it said 0: the count was taken only when a table of
    rows was handed on, and a second split's replaced the first's: 33 where the store held 109)."""
    data, first, second = tmp_path / "data", 40, 400
    data.mkdir()
    for split, n in (("train", first), ("test", second)):
        rows = [{"question": f"{split}-row-{i}: q", "answer": f"a{i}"} for i in range(n)]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the second split's last row is held: the run cannot end before the signal lands
    judge.configure(latency=0.02, faults=[{"fault": "delay", "seconds": 60, "match": f"test-row-{second - 1}:"}])
    args = ["score", str(data), "--streaming", "--metrics", "QA_Clarity", "-m", "judge", "--base-url", judge.base_url]
    args += ["--column", "instruction=question", "--column", "output=answer", "--api-key-env", "STREAM_KEY"]
    args += ["--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "out"), "--concurrency", "16"]
    env = {**os.environ, "STREAM_KEY": "sk-test"}
    p = subprocess.Popen([sys.executable, "-m", "hf_judge.cli", *args], env=env, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: p.poll() is not None or judge.stats()["ok"] >= first + 60)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, stderr
    stored = _stored(tmp_path / "cache")
    assert first + 60 <= stored < first + second
    said = [line for line in stderr.splitlines() if line.startswith("hf-judge:")]
    assert said == [
        f"hf-judge: interrupted. {stored:,} replies of this run are saved in the cache; run the same command again to "
        "resume where it stopped (a stream: read it again); stored replies are not sent again."
    ], stderr
    assert "Traceback" not in stderr


def test_a_datasetdict_of_streamed_splits_is_a_stream_and_a_mixed_one_is_refused(judge, tmp_path):
    """``DatasetDict({"train": ds.to_iterable_dataset()})`` is what a user builds by hand from streamed splits.
    Base: AttributeError: 'IterableDataset' object has no attribute '_fingerprint' (a traceback, no fix named)."""
    from datasets import DatasetDict

    from hf_judge import ConfigError

    ds = qa_dataset(6)
    got = score(DatasetDict({"train": ds.to_iterable_dataset()}), METRICS, judge, tmp_path / "a")
    assert isinstance(got, ScoredIterableDatasetDict)
    assert len(list(got["train"])) == 6 and judge.stats()["requests"] == 12
    judge.reset()
    with pytest.raises(ConfigError, match=r"mixes streamed and loaded splits \(train: IterableDataset, test: Dataset"):
        score(DatasetDict({"train": ds.to_iterable_dataset(), "test": ds}), METRICS, judge, tmp_path / "b")
    assert judge.stats()["requests"] == 0


def test_two_splits_of_a_stream_read_at_once_share_one_run_and_close_its_sessions(judge, tmp_path):
    """``zip(out["train"], out["test"])``: two readings of one run at the same time. Base: each reading opened the
    run's clients on a loop of its own, so the first session was left open (aiohttp's "Unclosed client session"
    at exit)."""
    import gc
    from itertools import zip_longest

    import aiohttp
    from datasets import IterableDatasetDict

    def open_sessions() -> list:
        gc.collect()
        # type(), not isinstance(): a lazy proxy (openai's module client) builds its object when asked its __class__
        return [s for s in gc.get_objects() if type(s) is aiohttp.ClientSession and not s.closed]

    before = {id(s) for s in open_sessions()}  # other tests' in this process are not this one's
    train, test = qa_dataset(30), qa_dataset(20, prefix="test")
    want = score(train, METRICS, judge, tmp_path / "a")["train"].to_list()
    want += score(test, METRICS, judge, tmp_path / "b")["train"].to_list()
    judge.reset()
    streams = IterableDatasetDict({"train": train.to_iterable_dataset(), "test": test.to_iterable_dataset()})
    got = score(streams, METRICS, judge, tmp_path / "c", window=8)
    pairs = list(zip_longest(got["train"], got["test"]))  # test ends first, train goes on alone
    assert [a for a, _ in pairs] + [b for _, b in pairs if b is not None] == want
    assert judge.stats()["requests"] == 2 * 50  # each row and metric sent once
    assert [s for s in open_sessions() if id(s) not in before] == []
