"""--dry-run against a real llama.cpp server (llama-cpp-python, Gemma 3 270M): its own tokenizer counts the tokens.

Only token counts are asked for: no chat request, so it takes a second once the server is up.
"""

from __future__ import annotations

import pytest
from helpers import qa_dataset
from llama_fixture import llama_server  # noqa: F401 - the fixture

from hf_judge import estimate_cost

pytestmark = pytest.mark.real_server


def test_dry_run_counts_with_the_servers_tokenizer(llama_server, tmp_path):  # noqa: F811
    ds = qa_dataset(3)
    kw = dict(model="gemma", base_url=llama_server.base_url, api_key="none", cache_dir=tmp_path / "cache")
    kw["columns"] = {"instruction": "question"}
    est = estimate_cost(ds, ["Q_Clarity"], **kw)
    assert "llama-cpp-python's /extras/tokenize/count" in est.token_counter
    assert est.requests == 3
    # Gemma's tokenizer against the characters / 4 estimate: the same order of magnitude, not the same number.
    # (Measured: 7,012 tokens counted this way for 32 requests of 4 metrics, which the server then reported as
    # 7,268 prompt tokens: its chat template adds about 8 tokens a request.)
    chars = estimate_cost(ds, ["Q_Clarity"], tokenizer="chars", **kw)
    assert est.input_tokens != chars.input_tokens
    assert chars.input_tokens / 2 < est.input_tokens < chars.input_tokens * 2
