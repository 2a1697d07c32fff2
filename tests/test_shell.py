"""The run shell (hf_judge/engine/shell.py): what every engine does around the row core, done once.

A stream's summary carries a panel's judge-vs-judge agreement as a Dataset's run does (it was ``{}``), a stream
writes the run history's checkpoints as one process does (it wrote none), and the one merge of counters keeps
every engine's figures alike (Ray's included: each judge's requests, so that a lost judge shows).
"""

from __future__ import annotations

import json
import threading
import time

from helpers import qa_dataset

from hf_judge import Settings, score_dataset
from hf_judge.engine.counting import merge_stats, stats_delta, total_stats
from hf_judge.engine.shell import interrupted
from hf_judge.transport.client import Stats

COLUMNS = {"instruction": "question", "output": "answer", "prediction": "answer"}


def _panel(ds, judge, cache):
    return score_dataset(
        ds,
        ["QA_Clarity", "Binary"],
        settings=Settings(model="judge", base_url=judge.base_url, retries=0),
        models="a,b",
        api_key="sk-test",
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
    )


def test_a_streamed_panel_has_the_agreement_of_a_dataset_run(judge, tmp_path):
    """Divergence 1 of issue 34: a stream's summary.agreement was {} (Streams.tables never computed it)."""
    expected = _panel(qa_dataset(8), judge, tmp_path / "a").summary.agreement
    assert expected["train"]["QA_Clarity"]["QA_Clarity"]["pairs"]["a~b"]["rows"] == 8
    streamed = _panel(qa_dataset(8).to_iterable_dataset(num_shards=2), judge, tmp_path / "b")
    list(streamed["train"])
    assert streamed.summary.agreement == expected


def test_a_stream_writes_checkpoints_that_its_final_entry_replaces(judge, tmp_path):
    """While a stream's last reply is held, the run history beside the results cache holds this run's checkpoint;
    once read, the final entry takes its place. Before, a stream wrote no history."""
    judge.configure(faults=[{"fault": "delay", "seconds": 1.0, "match": "row-11:"}])
    seen: list[list[dict]] = []
    results = tmp_path / "cache" / "results"
    reading = threading.Event()

    def look() -> None:  # what the history holds while the stream is read
        while not reading.is_set():
            for f in results.glob("stream-*-train.runs.json"):
                seen.append(json.loads(f.read_text()))
            time.sleep(0.05)

    out = score_dataset(
        qa_dataset(12).to_iterable_dataset(num_shards=2),
        ["QA_Clarity"],
        settings=Settings(model="judge", base_url=judge.base_url, history_every_s=0.2),
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns={"instruction": "question", "output": "answer"},
        progress=False,
    )
    watcher = threading.Thread(target=look)
    watcher.start()
    try:
        rows = list(out["train"])
    finally:
        reading.set()
        watcher.join()
    assert len(rows) == 12
    run_id = out.summary.runs[-1]["id"]
    checkpoints = [runs[0] for runs in seen if runs]
    assert checkpoints and {r["id"] for r in checkpoints} == {run_id}
    (final,) = json.loads(next(results.glob("stream-*-train.runs.json")).read_text())
    assert final["id"] == run_id and final["requests"] == 12 == out.summary.requests
    # written while the last reply was held (it comes 1 s late): a kill -9 then keeps what was paid for
    assert min(r["elapsed_s"] for r in checkpoints) <= final["elapsed_s"] - 0.5
    # a rerun of the same stream (a new run) lists the first beside its own, as a Dataset's does
    judge.configure(faults=[])
    again = score_dataset(
        qa_dataset(12).to_iterable_dataset(num_shards=2),
        ["QA_Clarity"],
        settings=Settings(model="judge", base_url=judge.base_url),
        api_key="sk-test",
        cache_dir=tmp_path / "cache",
        columns=COLUMNS,
        progress=False,
    )
    list(again["train"])
    assert [r["id"] for r in again.summary.runs] == [run_id, again.summary.runs[-1]["id"]]
    assert again.summary.runs[-1]["requests"] == 0 and again.summary.cache_hits == 12


def test_one_merge_of_counters_for_every_engine():
    """Workers' and Ray's parts of one judge: counters, failures and statuses add up, the fallback mode wins; a
    panel's judges: each judge's mode listed once."""
    a = Stats(requests=2, prompt_tokens=10, structured_output="json_object")
    a.failures.update({"timeout": 1})
    a.statuses.update({200: 2})
    b = Stats(requests=3, prompt_tokens=5)  # sent with the schema, or nothing: says the default
    b.statuses.update({200: 3, 500: 1})
    one = merge_stats(merge_stats(Stats(), a), json.loads(json.dumps(stats_delta(b, None))))
    assert (one.requests, one.prompt_tokens, dict(one.failures)) == (5, 15, {"timeout": 1})
    assert dict(one.statuses) == {200: 5, 500: 1}
    assert one.structured_output == "json_object"
    panel = total_stats([Stats(requests=1), Stats(requests=2, structured_output="json_object")])
    assert panel.requests == 3 and panel.structured_output == "json_schema, json_object"


def test_one_interruption_text():
    assert str(interrupted(True, 3)).startswith("interrupted. 3 replies of this run are saved in the cache; run the")
    assert "The replies the workers received are saved" in str(interrupted(True, None))
    assert "nothing of this run was kept" in str(interrupted(False, 3))
    assert "The batches submitted are recorded" in str(interrupted(True, 0, batch=True))
