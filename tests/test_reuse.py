"""Compatible reuse: a cached reply serves every request that differs from its own only in settings that
cannot change an accepted reply (max_tokens, timeout, concurrency, ...); caches of earlier versions still count."""

from __future__ import annotations

import hashlib
import sqlite3

import orjson
from helpers import qa_dataset, score

METRICS = ["QA_Clarity", "Q_All"]


def _main_request_key(base_url: str, body: dict) -> bytes:
    """client.request_key as main (277966d) computed it for every request: blake2b-128 of the base URL,
    a NUL and the whole request body, max_tokens included."""
    h = hashlib.blake2b(base_url.encode() + b"\0", digest_size=16)
    h.update(orjson.dumps(body))
    return h.digest()


def _store_keys(cache) -> set[bytes]:
    db = sqlite3.connect(cache / "replies.sqlite3")
    try:
        return {bytes(k) for (k,) in db.execute("SELECT key FROM replies UNION SELECT key FROM pending")}
    finally:
        db.close()


def test_raising_max_tokens_or_changing_limits_reuses_every_cached_reply(judge, tmp_path):
    ds = qa_dataset(6)
    first = score(ds, METRICS, judge, tmp_path)
    assert first.summary.requests == 12
    again = score(ds, METRICS, judge, tmp_path, max_tokens=4096, timeout=5, concurrency=3, retries=1)
    assert again.summary.requests == 0 and again.summary.cache_hits == 12
    for split in ("train",):
        assert again[split].to_list() == first[split].to_list()
    # a smaller cap still fits these short replies (the loopback server's are under 60 tokens)
    assert score(ds, METRICS, judge, tmp_path, max_tokens=512).summary.requests == 0


def test_strict_reuse_keys_on_the_whole_request_as_before(judge, tmp_path):
    judge.configure(record=True)
    ds = qa_dataset(4)
    assert score(ds, METRICS, judge, tmp_path, max_tokens=300).summary.requests == 8
    strict = score(ds, METRICS, judge, tmp_path, max_tokens=4096, reuse="strict")
    assert strict.summary.requests == 8  # max_tokens is part of the key
    sent = judge.stats()["bodies"]
    assert {b["max_tokens"] for b in sent} == {300, 4096}
    # strict stores each reply under the key of its whole body, as main did
    strict_keys = {_main_request_key(judge.base_url, b) for b in sent if b["max_tokens"] == 4096}
    assert strict_keys <= _store_keys(tmp_path / "cache")
    assert score(ds, METRICS, judge, tmp_path, max_tokens=4096, reuse="strict").summary.requests == 0


def test_a_store_written_with_mains_keys_is_reused(judge, tmp_path):
    """A cache of main (277966d) with max_tokens set holds replies under the whole body's key: the same
    settings find them (0 requests), and once found they serve another max_tokens too."""
    from hf_judge.store.replies import ReplyStore

    judge.configure(record=True)
    ds = qa_dataset(5)
    # Replies as main stored them: the loopback server's replies, under main's key of each body it was sent.
    donor = score(ds, METRICS, judge, tmp_path / "donor", max_tokens=256, reuse="strict")
    assert donor.summary.requests == 10
    bodies = judge.stats()["bodies"]
    db = sqlite3.connect(tmp_path / "donor" / "cache" / "replies.sqlite3")
    rows = {
        bytes(k): (c, u)
        for k, c, u in db.execute(
            "SELECT key, content, usage FROM replies UNION ALL SELECT key, content, usage FROM pending"
        )
    }
    db.close()
    main_keys = {_main_request_key(judge.base_url, b) for b in bodies}
    assert set(rows) == main_keys
    store = ReplyStore(tmp_path / "cache" / "replies.sqlite3")
    for key, (content, usage) in rows.items():
        p, c = usage.split()
        store.put(key, content, (int(p), int(c)))
    store.flush()
    store.close()

    same = score(ds, METRICS, judge, tmp_path, max_tokens=256)
    assert same.summary.requests == 0 and same.summary.cache_hits == 10
    assert same["train"].to_list() == donor["train"].to_list()
    raised = score(ds, METRICS, judge, tmp_path, max_tokens=1024)
    assert raised.summary.requests == 0  # copied forward under the reply key by the run before
    assert score(ds, METRICS, judge, tmp_path).summary.requests == 0


def test_a_cached_reply_longer_than_the_new_max_tokens_is_asked_again(judge, tmp_path):
    ds = qa_dataset(3)
    first = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert first.summary.completion_tokens > 3 * 2  # every reply took more than 2 tokens
    capped = score(ds, ["QA_Clarity"], judge, tmp_path, max_tokens=2)
    assert capped.summary.requests == 3 and capped.summary.cache_hits == 0


def test_samples_and_a_panel_stored_under_whole_request_keys_are_found_each_under_its_own(judge, tmp_path):
    """The fallback to a whole request's key (replies of earlier versions or of reuse="strict") is per judge and
    per sample: sample k of judge j finds its own reply, never sample 0's or another judge's."""
    ds = qa_dataset(4)
    judge.configure(attempt_scores=[3, 6, 9])  # each sample of a prompt gets another score
    for extra in ({"samples": 3, "temperature": 0.7}, {"models": "m1,m2"}):
        cache = tmp_path / next(iter(extra))
        first = score(ds, ["QA_Clarity"], judge, cache, reuse="strict", max_tokens=256, **extra)
        assert first.summary.requests > 0 and len(first["errors"]) == 0
        if "samples" in extra:
            assert all(sorted(v) == [3, 6, 9] for v in first["train"]["QA_Clarity_samples"])
        again = score(ds, ["QA_Clarity"], judge, cache, max_tokens=256, **extra)
        assert again.summary.requests == 0, extra
        assert again["train"].to_list() == first["train"].to_list(), extra
