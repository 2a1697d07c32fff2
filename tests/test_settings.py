"""One settings model: byte-compatible caches, one precedence, limits declared once."""

from __future__ import annotations

import hashlib

import orjson
from helpers import qa_dataset, score

from hf_judge import Settings
from hf_judge.client import JudgeClient
from hf_judge.metrics import resolve_metrics
from hf_judge.pipeline import Plan
from hf_judge.score import _fingerprint

COLUMNS = {"instruction": "question", "output": "answer"}
# Computed on main before the settings model (commit c46d975): a change to any of these makes every
# cache written before it useless (every reply paid again), so they are literals, not recomputed.
BODY_SHA256 = {
    "QA_Clarity": "d1a1402ff31f8e0fa87854026aefa6ff49f10d2e20fbb84bb3bc5798db15ab2b",
    "Q_All": "f2529984f2364342074bbbb1690ad4a472f10e283d512c3882728eb992092044",
}
REQUEST_KEY = {"QA_Clarity": "c37c30af78cee0b2f60dea17f430bbdd", "Q_All": "96fcda32a1261d4f15aa5ce3d8d22389"}
FINGERPRINT = "f2df5b3bab499a7959e4e5c8a3bbdd02"
FINGERPRINT_CAPPED_TOKENS = "226d604514b5a4406f5fb2f9a65ecbd7"  # max_input_chars=500, token_columns=True


def _client(base_url: str) -> JudgeClient:
    return JudgeClient(Settings(model="judge", base_url=base_url), api_key=None)


def _plans(ds):
    metrics = resolve_metrics(["QA_Clarity", "Q_All"], None, None)
    return [Plan(m, m.resolve_columns(COLUMNS, ds.column_names), m.temperature) for m in metrics]


def test_request_bodies_keys_and_fingerprints_are_those_of_before():
    ds = qa_dataset(3)
    assert ds._fingerprint == "0248eeb4265b50c2"  # the input itself: else the pins below say nothing
    client = _client("http://127.0.0.1:9/v1")
    plans = _plans(ds)
    row = ds[1]
    for p in plans:
        body = client.body(p.metric, p.metric.messages({v: row[c] for v, c in p.columns.items()}, frozenset()), p.temperature)
        assert hashlib.sha256(body).hexdigest() == BODY_SHA256[p.metric.name]
        assert client.request_key(body).hex() == REQUEST_KEY[p.metric.name]
    assert _fingerprint(ds, "train", plans, client, None, False) == FINGERPRINT
    assert _fingerprint(ds, "train", plans, client, 500, True) == FINGERPRINT_CAPPED_TOKENS


def test_a_run_sends_the_pinned_bodies_and_writes_the_pinned_cache(judge, tmp_path):
    """The pinned computations are the ones a run uses: its bodies, reply keys and results file."""
    import sqlite3

    judge.configure(record=True)
    ds = qa_dataset(3)
    score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path)
    sent = {hashlib.sha256(orjson.dumps(b)).hexdigest() for b in judge.stats()["bodies"]}
    assert set(BODY_SHA256.values()) <= sent and len(sent) == 6
    client = _client(judge.base_url)
    db = sqlite3.connect(tmp_path / "cache" / "replies.sqlite3")
    keys = {bytes(k) for (k,) in db.execute("SELECT key FROM replies UNION SELECT key FROM pending")}
    db.close()
    assert keys == {client.request_key(orjson.dumps(b)) for b in judge.stats()["bodies"]}
    results = tmp_path / "cache" / "results" / f"{_fingerprint(ds, 'train', _plans(ds), client, None, False)}.arrow"
    assert results.is_file()
    assert score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path).summary.requests == 0
