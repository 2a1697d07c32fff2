"""`batch import` with settings other than the export's: said, not silently turned into error rows."""

from __future__ import annotations

import json

import pytest
from helpers import qa_dataset

from hf_judge import ConfigError, export_batch, import_batch

COLUMNS = {"instruction": "question", "output": "answer"}
URL = "http://127.0.0.1:9/v1"  # import sends nothing: the URL only makes the requests' keys


def _export_and_run(tmp_path, n=4):
    """Export n requests into cache `a`, then play the runner: one reply per line."""
    from batch_server import BatchService

    ds = qa_dataset(n)
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    export_batch(ds, ["QA_Clarity"], requests, model="judge", base_url=URL, cache_dir=tmp_path / "a", columns=COLUMNS)
    svc = BatchService()
    lines = [json.loads(t) for t in requests.read_text().splitlines()]
    out = [{"custom_id": r["custom_id"], "response": {"status_code": 200, "body": svc.reply(r["body"])}} for r in lines]
    results.write_text("".join(json.dumps(o) + "\n" for o in out))
    return ds, results


def _import(ds, results, cache, model="judge"):
    return import_batch(
        ds, ["QA_Clarity"], results, model=model, base_url=URL, cache_dir=cache, columns=COLUMNS, progress=False
    )


def test_import_into_another_cache_than_the_exports_is_refused(tmp_path):
    ds, results = _export_and_run(tmp_path)
    with pytest.raises(ConfigError, match=r"none of the 4 lines of results\.jsonl .*--cache-dir"):
        _import(ds, results, tmp_path / "other")
    assert len(_import(ds, results, tmp_path / "a")["errors"]) == 0  # the export's cache takes them


def test_import_with_another_model_than_the_exports_says_so_in_its_error_rows(tmp_path):
    ds, results = _export_and_run(tmp_path)
    errors = _import(ds, results, tmp_path / "a", model="other-model")["errors"].to_list()
    assert [e["kind"] for e in errors] == ["batch_missing"] * 4
    message = errors[0]["message"]
    assert "run the same command again to submit it" not in message  # an import submits nothing
    assert "not among the requests exported to this cache" in message and "--model" in message


def test_importing_the_requests_file_instead_of_the_results_is_refused(tmp_path):
    ds, _ = _export_and_run(tmp_path)
    with pytest.raises(ConfigError, match=r"requests\.jsonl holds requests .*not a runner's output"):
        _import(ds, tmp_path / "requests.jsonl", tmp_path / "a")
