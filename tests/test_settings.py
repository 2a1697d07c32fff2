"""One settings model: byte-compatible caches, one precedence, limits declared once."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import orjson
from helpers import qa_dataset, score

from hf_judge import Settings
from hf_judge.engine.core import Plan
from hf_judge.engine.prepare import results_fingerprint
from hf_judge.judging.catalogue import resolve_metrics
from hf_judge.transport.client import JudgeClient

COLUMNS = {"instruction": "question", "output": "answer"}
# The two prompt files as they were when the pins were taken: issue 18 moved the row's data of every built-in
# prompt last (prefix caching), on purpose; the pins check that nothing else moves a body, key or fingerprint.
PROMPTS = Path(__file__).parent / "prompts_277966d"
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
    metrics = resolve_metrics(["QA_Clarity", "Q_All"], PROMPTS, None)
    return [Plan(m, m.resolve_columns(COLUMNS, ds.column_names), m.temperature) for m in metrics]


def test_request_bodies_keys_and_fingerprints_are_those_of_before():
    ds = qa_dataset(3)
    # The input's own fingerprint, as datasets 5 hashes these rows (4.0 hashes them otherwise): set, so that the
    # pins below are of hf-judge's fingerprint over it whatever datasets is installed.
    ds._fingerprint = "0248eeb4265b50c2"
    client = _client("http://127.0.0.1:9/v1")
    plans = _plans(ds)
    row = ds[1]
    for p in plans:
        messages = p.metric.messages({v: row[c] for v, c in p.columns.items()}, frozenset())
        body = client.body(p.metric, messages, p.temperature)
        assert hashlib.sha256(body).hexdigest() == BODY_SHA256[p.metric.name]
        assert client.request_key(body).hex() == REQUEST_KEY[p.metric.name]
    assert results_fingerprint(ds, "train", plans, client, None, False) == FINGERPRINT
    assert results_fingerprint(ds, "train", plans, client, 500, True) == FINGERPRINT_CAPPED_TOKENS


def test_a_run_sends_the_pinned_bodies_and_writes_the_pinned_cache(judge, tmp_path):
    """The pinned computations are the ones a run uses: its bodies, reply keys and results file."""
    import sqlite3

    judge.configure(record=True)
    ds = qa_dataset(3)
    score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path, prompts_dir=PROMPTS)
    sent = {hashlib.sha256(orjson.dumps(b)).hexdigest() for b in judge.stats()["bodies"]}
    assert set(BODY_SHA256.values()) <= sent and len(sent) == 6
    client = _client(judge.base_url)
    db = sqlite3.connect(tmp_path / "cache" / "replies.sqlite3")
    keys = {bytes(k) for (k,) in db.execute("SELECT key FROM replies UNION SELECT key FROM pending")}
    db.close()
    assert keys == {client.request_key(orjson.dumps(b)) for b in judge.stats()["bodies"]}
    results = (
        tmp_path / "cache" / "results" / f"{results_fingerprint(ds, 'train', _plans(ds), client, None, False)}.arrow"
    )
    assert results.is_file()
    assert score(ds, ["QA_Clarity", "Q_All"], judge, tmp_path, prompts_dir=PROMPTS).summary.requests == 0


# -- one model, one precedence ---------------------------------------------------------------------------------


def test_precedence_defaults_then_recipe_then_flags():
    from hf_judge.cli.job import resolve_job
    from hf_judge.cli.parser import build_parser
    from hf_judge.cli.recipes import Recipe
    from hf_judge.settings import resolve_settings

    recipe = Recipe(metrics=["QA_All"], model="from-recipe", concurrency=8, timeout=5, max_reply_bytes=4096)
    args = build_parser().parse_args(["score", "data.jsonl", "--concurrency", "2", "--tpm", "9000"])
    job = resolve_job(args, recipe, dataset="data.jsonl")
    assert job.client == {
        "model": "from-recipe",
        "concurrency": 2,
        "timeout": 5.0,
        "max_reply_bytes": 4096,
        "max_tokens_per_minute": 9000.0,
    }
    s = resolve_settings(job.client)
    assert (s.concurrency, s.timeout, s.retries, s.max_tokens_per_minute) == (2, 5.0, 3, 9000.0)  # retries: the default
    # a keyword argument counts even when None (top_p=None sends no top_p); a Settings layer only what it was given
    assert resolve_settings(Settings(model="m", top_p=0.5), {"top_p": None}).top_p is None
    assert resolve_settings(Settings(model="m", top_p=0.5), Settings(model="n")).top_p == 0.5


def test_limits_are_declared_once():
    """Settings, recipes, seed configs and flags refuse the same values (recipes took retries: 1000 before)."""
    import pytest

    from hf_judge import ConfigError, Recipe
    from hf_judge.cli.seed import SeedConfig
    from hf_judge.settings import resolve_settings

    seed = {"model": "m", "input_path": "x.jsonl", "metrics": {"Q": ["All"]}}
    for key, bad in [("concurrency", 0), ("concurrency", 100_001), ("retries", 101), ("timeout", 0), ("top_p", 0)]:
        with pytest.raises(ConfigError, match=key):
            resolve_settings({"model": "m", key: bad})
        with pytest.raises(ValueError, match=key):
            Recipe(metrics=["QA_All"], **{key: bad})
        with pytest.raises(ValueError, match={"retries": "retry"}.get(key, key)):
            SeedConfig(**seed, **{{"retries": "retry"}.get(key, key): bad})


def test_every_public_setting_is_a_flag_a_recipe_key_and_a_keyword(judge, tmp_path):
    """A new field of Settings is all it takes: the CLI flag, the recipe key and the keyword follow."""
    from hf_judge.cli.job import _client_kwargs
    from hf_judge.cli.parser import build_parser
    from hf_judge.cli.recipes import Recipe
    from hf_judge.settings import public_fields

    names = list(public_fields())
    assert {"model", "concurrency", "max_reply_bytes", "max_throttle_s"} <= set(names)
    assert not {"backoff_base", "backoff_max", "window"} & set(names)  # test knobs: only through a Settings object
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for command in ("score", "run"):
        assert set(names) <= {a.dest for a in commands[command]._actions}
    args = parser.parse_args(
        ["score", "x", "--max-throttle-s", "12", "--max-reply-bytes", "4096", "-m", "j", "--rpm", "6"]
    )
    given = {"model": "j", "max_throttle_s": 12.0, "max_reply_bytes": 4096, "max_requests_per_minute": 6.0}
    assert _client_kwargs(args) == given
    assert set(names) <= set(Recipe.model_fields)
    out = score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, max_throttle_s=12.0, max_reply_bytes=4096, top_p=None)
    assert out.summary.sampling["top_p"] is None


def test_score_dataset_names_its_settings_on_a_wrong_keyword(tmp_path):
    import pytest

    from hf_judge import score_dataset

    match = (
        r"concurency; did you mean .concurrency. for .concurency.\?.*Its settings are: model, base_url, provider, conc"
    )
    with pytest.raises(TypeError, match=match):
        score_dataset(qa_dataset(1), ["QA_Clarity"], model="m", concurency=4)
    with pytest.raises(TypeError, match=r"set backoff_base through settings=Settings\(\.\.\.\)"):
        score_dataset(qa_dataset(1), ["QA_Clarity"], model="m", backoff_base=0.1)


def test_seed_config_maps_its_keys_onto_the_settings():
    from hf_judge.cli.seed import SeedConfig
    from hf_judge.settings import resolve_settings

    cfg = SeedConfig(model="m", input_path="x", metrics={"QA": ["All"]}, retry=7, openai={"base_url": "http://h:1/v1"})
    s = resolve_settings(cfg.settings())
    assert (s.retries, s.base_url, s.concurrency, s.timeout, s.top_p) == (7, "http://h:1/v1", 1024, 30.0, 1.0)


def test_a_base_url_from_the_environment_is_checked_like_one_given(monkeypatch):
    import pytest

    from hf_judge import ConfigError, score_dataset

    monkeypatch.setenv("OPENAI_BASE_URL", "127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="write it with its scheme, e.g. 'http://127.0.0.1:8000/v1'"):
        score_dataset(qa_dataset(1), ["QA_Clarity"], model="m", columns=COLUMNS)
