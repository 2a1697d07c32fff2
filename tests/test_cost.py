"""Cost before and during a run: --dry-run (estimate_cost), the price table, max_cost, cached prompt tokens."""

from __future__ import annotations

import pytest
from datasets import Dataset
from helpers import qa_dataset, run_cli, score, score_args

from hf_judge import ConfigError, CostExceededError, Settings, estimate_cost, load_prices
from hf_judge.engine.estimate import declared_output_tokens
from hf_judge.judging.catalogue import load_metric

METRICS = ["QA_Clarity", "Q_All"]
COLUMNS = {"instruction": "question", "output": "answer"}


def _estimate(ds, judge, tmp_path, metrics=METRICS, **kw):
    kw.setdefault("columns", COLUMNS)
    return estimate_cost(
        ds, metrics, model="judge", base_url=judge.base_url, api_key="sk-test", cache_dir=tmp_path / "cache", **kw
    )


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("judge: {input: 1.0, output: 2.0, cached_input: 0.25}\n", encoding="utf-8")
    return str(path)


def test_dry_run_counts_exactly_what_the_run_then_sends_and_sends_nothing(judge, tmp_path, prices):
    ds = qa_dataset(5)
    est = _estimate(ds, judge, tmp_path, prices=prices)
    stats = judge.stats()
    assert stats["requests"] == 0  # nothing reached the chat endpoint
    assert stats["tokenize"] == 10
    assert "the server's tokenizer" in est.token_counter
    assert (est.requests, est.cached) == (10, 0)
    assert [(m.metric, m.requests, m.output_basis) for m in est.metrics] == [
        ("QA_Clarity", 5, "declared outputs"),
        ("Q_All", 5, "declared outputs"),
    ]
    assert est.output_tokens == round(5 * declared_output_tokens(load_metric("QA_Clarity"))) + round(
        5 * declared_output_tokens(load_metric("Q_All"))
    )
    # online at $1 / $2 per 1M tokens; batch at half that
    assert est.cost_online == pytest.approx((est.input_tokens * 1.0 + est.output_tokens * 2.0) / 1e6)
    assert est.cost_batch == pytest.approx(est.cost_online / 2)

    run = score(ds, METRICS, judge, tmp_path)
    assert run.summary.requests == 10
    assert run.summary.prompt_tokens == est.input_tokens  # the server's own count: exact

    again = _estimate(ds, judge, tmp_path, prices=prices)
    assert (again.requests, again.cached, again.input_tokens, again.cost_online) == (0, 10, 0, 0.0)
    assert all(m.output_basis == "mean of 5 cached replies" for m in again.metrics)


def test_dry_run_projects_output_tokens_from_cached_replies(judge, tmp_path):
    ds = qa_dataset(6)
    first = score(ds.select(range(3)), ["QA_Clarity"], judge, tmp_path, token_columns=True)
    per_reply = sum(first["train"]["judge_completion_tokens"]) / 3
    est = _estimate(ds, judge, tmp_path, ["QA_Clarity"])
    (m,) = est.metrics
    assert (m.requests, m.cached, m.output_basis) == (3, 3, "mean of 3 cached replies")
    assert m.output_tokens == round(per_reply * 3)
    capped = _estimate(ds, judge, tmp_path, ["QA_Clarity"], max_tokens=2, reuse="strict")
    assert capped.metrics[0].output_tokens == 2 * 6 and "capped at max_tokens=2" in capped.metrics[0].output_basis


def test_without_a_server_tokenizer_tokens_are_estimated_and_said_so(judge, tmp_path):
    judge.configure(tokenize=False)
    ds = qa_dataset(4)
    est = _estimate(ds, judge, tmp_path, ["Q_Clarity"])
    assert est.requests == 4 and "characters / 4" in est.token_counter
    questions = ds["question"]
    rendered = [load_metric("Q_Clarity").messages({"instruction": q})[0]["content"] for q in questions]
    assert est.input_tokens == sum(round(4 + len(t) / 4) for t in rendered)
    assert judge.stats()["requests"] == 0
    assert est.price is None and "no price for 'judge'" in str(est)


def test_duplicates_and_rows_that_send_nothing_are_not_counted(judge, tmp_path):
    ds = Dataset.from_dict({"question": ["same", "same", None, "other"], "answer": ["a", "a", "b", "c"]})
    est = _estimate(ds, judge, tmp_path, ["Q_Clarity"])
    (m,) = est.metrics
    assert (m.requests, m.duplicates, m.unsent) == (2, 1, 1)
    assert score(ds, ["Q_Clarity"], judge, tmp_path).summary.requests == 2


def test_cli_dry_run_prints_the_estimate_and_writes_nothing(judge, tmp_path, capfd, prices):
    data = tmp_path / "data.jsonl"
    qa_dataset(3).to_json(data)
    code, out, err = run_cli(
        capfd,
        "score", data, "--metrics", "QA_Clarity", "--column", "instruction=question", "--column", "output=answer",
        "--model", "judge", "--base-url", judge.base_url, "--cache-dir", tmp_path / "cache", "--prices", prices,
        "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    assert "nothing was sent to the chat endpoint" in out and "cost online" in out and "cost batch" in out
    assert judge.stats()["requests"] == 0
    assert not (tmp_path / "data-judged").exists() and not list(tmp_path.glob("*judged*"))


# -- the price table -----------------------------------------------------------------------------------------------


def test_price_table_defaults_and_extension(tmp_path, monkeypatch):
    table = load_prices()
    nano = table["gpt-4.1-nano"]
    assert (nano.batch_input, nano.batch_output) == (nano.input / 2, nano.output / 2)
    mine = tmp_path / "mine.yaml"
    mine.write_text("gpt-4.1-nano: {input: 1, output: 1, batch_input: 0.9}\nmy-judge: {input: 0, output: 0}\n")
    monkeypatch.setenv("HF_JUDGE_PRICES", str(mine))
    table = load_prices()
    assert table["gpt-4.1-nano"].batch_input == 0.9 and table["gpt-4.1-nano"].batch_output == 0.5
    assert "my-judge" in table and "gpt-4.1" in table
    bad = tmp_path / "bad.yaml"
    bad.write_text("m: {input: -1, output: 1}\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_prices(str(bad))
    with pytest.raises(ConfigError, match="cannot read the prices file"):
        load_prices(str(tmp_path / "missing.yaml"))


# -- max_cost --------------------------------------------------------------------------------------------------------


def test_max_cost_stops_the_run_cleanly_at_the_spend(judge, tmp_path):
    """A request is sent when what was paid and its worst case (its reply at max_tokens: replies only are priced
    here) fit in the budget: the 3rd fits, the 4th would not."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("judge: {input: 0, output: 2.0}\n", encoding="utf-8")
    ds = qa_dataset(8)
    ref = score(ds, ["QA_Clarity"], judge, tmp_path / "ref", token_columns=True)
    rows = ref["train"].to_list()
    cost = [r["judge_completion_tokens"] * 2.0 / 1e6 for r in rows]
    longest = max(r["judge_completion_tokens"] for r in rows)
    worst = longest * 2.0 / 1e6
    limit = sum(cost[:2]) + worst + cost[2] / 2  # >= paid before the 3rd + its worst; < before the 4th + its worst
    judge.reset()
    with pytest.raises(CostExceededError, match=r"max_cost=\$"):
        score(
            ds, ["QA_Clarity"], judge, tmp_path, prices=str(prices), max_cost=limit, concurrency=1, max_tokens=longest
        )
    assert judge.stats()["requests"] == 3
    # the replies paid for are kept: a rerun with more budget sends only the rest
    rest = score(ds, ["QA_Clarity"], judge, tmp_path, prices=str(prices), max_cost=1.0)
    assert (rest.summary.requests, rest.summary.cache_hits) == (5, 3)
    assert rest.summary.cost() == pytest.approx(sum(cost[3:]))
    assert "cost           $" in str(rest.summary)


def test_a_budget_stop_keeps_the_replies_in_flight(judge, tmp_path, prices):
    """They are paid for: the stop sends nothing new, awaits them and keeps their replies."""
    judge.configure(latency=0.05)
    ds = qa_dataset(40)
    with pytest.raises(CostExceededError):
        score(ds, ["QA_Clarity"], judge, tmp_path, prices=prices, max_cost=0.004, concurrency=8, max_tokens=100)
    paid = judge.stats()["requests"]
    assert 2 < paid < 40
    judge.reset()
    rest = score(ds, ["QA_Clarity"], judge, tmp_path)
    assert (rest.summary.requests, rest.summary.cache_hits) == (40 - paid, paid)


def test_max_cost_needs_a_price(judge, tmp_path, capfd):
    with pytest.raises(ConfigError, match="--prices"):
        score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, max_cost=1.0)
    assert judge.stats()["requests"] == 0
    data = tmp_path / "data.jsonl"
    qa_dataset(2).to_json(data)
    code, _, err = run_cli(
        capfd, "score", data, "--metrics", "Q_Clarity", "--column", "instruction=question", "--model", "judge",
        "--base-url", judge.base_url, "--max-cost", "1", "--cache-dir", tmp_path / "cache",
    )  # fmt: skip
    assert code == 2 and "price" in err


@pytest.mark.parametrize("bad", [".inf", "1e400", '"1e400"', "true"])
def test_a_price_must_be_a_finite_number_or_the_run_sends_nothing(judge, tmp_path, bad, capfd):
    """An infinite price made every cost NaN, which never reached max_cost: the run sent everything."""
    path = tmp_path / "prices.yaml"
    path.write_text(f"judge: {{input: {bad}, output: 1}}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        score(qa_dataset(4), ["QA_Clarity"], judge, tmp_path, prices=str(path), max_cost=0.01)
    message = str(e.value)
    assert str(path) in message and "'judge'" in message and "input:" in message
    assert "a finite number of USD per 1M tokens, 0 or more: fix it in that file" in message
    data = tmp_path / "data.jsonl"
    qa_dataset(4).to_json(data)
    code, _, err = run_cli(capfd, *score_args(data, judge, "--prices", path, "--max-cost", "0.01",
                                              "--cache-dir", tmp_path / "cache"))  # fmt: skip
    assert code == 2 and "fix it in that file" in err, err
    assert judge.stats()["requests"] == 0


def test_max_cost_must_be_a_finite_number(judge, tmp_path, capfd):
    for bad in (float("inf"), float("nan"), "1e400", True, -1.0):
        with pytest.raises(ConfigError, match=r"max_cost \(--max-cost\)"):
            score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, max_cost=bad)
    data = tmp_path / "data.jsonl"
    qa_dataset(2).to_json(data)
    code, _, err = run_cli(capfd, *score_args(data, judge, "--max-cost", "inf", "--cache-dir", tmp_path / "cache"))
    assert code == 2 and "--max-cost" in err and "finite" in err, err
    assert judge.stats()["requests"] == 0


def test_a_cost_that_is_not_a_number_stops_the_run(prices):
    """Whatever makes the spend NaN or infinite, the budget check reads it as used up, not as room left."""
    from hf_judge.transport.client import JudgeClient
    from hf_judge.transport.prices import Price

    client = JudgeClient(Settings(model="judge", prices=prices, max_cost=0.01), api_key="sk-test")
    client.stats.prompt_tokens = 10
    nan = float("nan")
    client.price = Price.model_construct(input=nan, output=nan, cached_input=nan, batch_input=nan, batch_output=nan)
    with pytest.raises(CostExceededError, match="max_cost"):
        client._check_budget()
    client.price = Price.model_construct(input=1.0, output=1.0, cached_input=1.0, batch_input=1.0, batch_output=1.0)
    client._check_budget()  # $0.00001 of $0.01: room left


def test_the_spend_prices_batch_lines_at_the_batch_price(tmp_path):
    """The budget of a batch run's online fallback counts what the batch lines cost, as the summary does."""
    from hf_judge.results.summary import RunSummary
    from hf_judge.transport.client import JudgeClient

    path = tmp_path / "prices.yaml"
    path.write_text("judge: {input: 2.0, output: 8.0, batch_input: 1.0, batch_output: 4.0}\n", encoding="utf-8")
    client = JudgeClient(Settings(model="judge", prices=str(path), max_cost=100), api_key="sk-test")
    client.stats.prompt_tokens, client.stats.completion_tokens = 3_000_000, 1_000_000
    client.batch_tokens = [2_000_000, 1_000_000]
    summary = RunSummary(prompt_tokens=3_000_000, completion_tokens=1_000_000, price=client.price.model_dump(),
                         batch={"prompt_tokens": 2_000_000, "completion_tokens": 1_000_000})  # fmt: skip
    assert client.spent() == pytest.approx(2.0 + 2.0 + 4.0) == summary.cost()


# -- cached prompt tokens --------------------------------------------------------------------------------------------


def test_cached_prompt_tokens_are_summed_in_the_summary_and_the_card(judge, tmp_path, prices):
    from hf_judge.results.card import render_section

    judge.configure(prefix_cache=True)
    plain = score(qa_dataset(4), ["QA_Clarity"], judge, tmp_path / "a", concurrency=1)
    # the loopback server's prefix cache: the fixed instructions before the first row's data are cached from
    # the second request on
    assert plain.summary.cached_tokens > 0
    assert f"({plain.summary.cached_tokens:,} in from the server's prompt cache)" in str(plain.summary)
    assert "from the server's prompt cache" in render_section(plain, plain.summary)
    priced = score(qa_dataset(4, "other"), ["QA_Clarity"], judge, tmp_path / "b", prices=prices, concurrency=1)
    s = priced.summary
    assert s.cost() == pytest.approx(((s.prompt_tokens - s.cached_tokens) * 1.0 + s.cached_tokens * 0.25 +
                                      s.completion_tokens * 2.0) / 1e6)  # fmt: skip
    assert "**Cost:** $" in render_section(priced, s)


def test_settings_reject_a_bad_reuse_value():
    with pytest.raises(ValueError, match="reuse"):
        Settings(model="m", reuse="sometimes")


# -- prefix caching: fixed instructions first -------------------------------------------------------------------------


def test_every_built_in_prompt_puts_the_rows_data_last():
    """Servers cache identical prompt prefixes: everything before the first row value is the same for every row,
    so after it comes only data (values, and the short headings that label them)."""
    from hf_judge import available_metrics

    for name in available_metrics():
        m = load_metric(name)
        values = {v: f"<<{v}>>" for v in (*m.variables, *m.optional)}
        text = "\n".join(msg["content"] for msg in m.messages(values))
        first = min(text.index(f"<<{v}>>") for v in m.variables)
        rest = text[text.rfind("\n", 0, first) + 1 :]
        for line in rest.splitlines():
            assert line.startswith("<<") or len(line) <= 40, (name, line)


@pytest.fixture
def llama_cpp_like():
    """A loopback server with llama.cpp's token endpoints only: /apply-template and /tokenize {"content"}."""
    import asyncio
    import threading

    from aiohttp import web

    async def apply_template(request):
        body = await request.json()
        return web.json_response({"prompt": "<turn>" + "<turn>".join(m["content"] for m in body["messages"])})

    async def tokenize(request):
        body = await request.json()
        return web.json_response({"tokens": list(range(len(body.get("content", "")) // 3))})

    app = web.Application()
    app.router.add_post("/apply-template", apply_template)
    app.router.add_post("/tokenize", tokenize)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_llama_cpp_servers_count_with_their_chat_template(llama_cpp_like, tmp_path):
    ds = qa_dataset(3)
    est = estimate_cost(ds, ["Q_Clarity"], model="m", base_url=llama_cpp_like, columns=COLUMNS, cache_dir=tmp_path)
    assert "llama.cpp's /apply-template" in est.token_counter
    texts = [load_metric("Q_Clarity").messages({"instruction": q})[0]["content"] for q in ds["question"]]
    assert est.input_tokens == sum(len("<turn>" + t) // 3 for t in texts)


def test_tiktoken_counts_where_installed(judge, tmp_path, monkeypatch):
    import sys
    import types

    class Encoding:
        name = "o200k_base"

        @staticmethod
        def encode(text):
            return text.split()

    def encoding_for_model(model):
        raise KeyError(model)

    fake = types.ModuleType("tiktoken")  # datasets' pickler looks for tiktoken.Encoding once tiktoken is imported
    fake.Encoding, fake.encoding_for_model, fake.get_encoding = Encoding, encoding_for_model, lambda _name: Encoding()
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    judge.configure(tokenize=False)
    ds = qa_dataset(2)
    est = _estimate(ds, judge, tmp_path, ["Q_Clarity"])
    assert est.token_counter.startswith("tiktoken o200k_base")
    texts = [load_metric("Q_Clarity").messages({"instruction": q})[0]["content"] for q in ds["question"]]
    assert est.input_tokens == sum(3 + 3 + len(t.split()) + 1 for t in texts)


def test_a_panels_estimate_is_every_judges_each_at_its_price(judge, tmp_path, capfd):
    """A panel of 2 costs the sum of its judges estimated alone (requests, tokens, cost at each model's price),
    online and with --batch, and --dry-run shows each judge's table."""
    path = tmp_path / "prices.yaml"
    path.write_text("judge: {input: 1.0, output: 2.0}\nother: {input: 10.0, output: 20.0}\n", encoding="utf-8")
    ds = qa_dataset(3)

    def estimate(**kw):
        cache = tmp_path / "cache"
        kw.update(base_url=judge.base_url, api_key="sk-test", cache_dir=cache, prices=str(path), columns=COLUMNS)
        return estimate_cost(ds, METRICS, **kw)

    for batch in (False, True):
        alone = [estimate(model=m, batch=batch) for m in ("judge", "other")]
        est = estimate(models=["judge", "other"], batch=batch)
        assert est.requests == sum(a.requests for a in alone) == 2 * 6
        assert est.input_tokens == sum(a.input_tokens for a in alone)
        assert est.output_tokens == sum(a.output_tokens for a in alone)
        assert est.cost_online == pytest.approx(sum(a.cost_online for a in alone))
        assert est.cost_batch == pytest.approx(sum(a.cost_batch for a in alone))
        assert [j.model for j in est.judges] == ["judge", "other"]
    data = tmp_path / "data.jsonl"
    ds.to_json(data)
    code, out, err = run_cli(
        capfd,
        *score_args(data, judge, "--models", "judge,other", "--prices", path, "--dry-run", metrics=",".join(METRICS)),
    )
    assert code == 0, err
    assert "a panel of 2 judges" in out and "judge judge (model judge)" in out and "judge other (model other)" in out
    assert "panel total    12 requests" in out and f"cost online    ${sum(a.cost_online for a in alone):,.4f}" in out
    assert judge.stats()["requests"] == 0
