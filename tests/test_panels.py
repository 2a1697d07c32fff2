"""Judge panels (models=[...]) against loopback judge servers: one server per judge, one of them down."""

from __future__ import annotations

import socket

import pytest
from datasets import Value
from helpers import qa_dataset, run_cli, score
from judge_fixture import JudgeServer

from hf_judge import Aggregator, ConfigError, ServerUnreachableError, load_metric
from hf_judge.cli.recipes import Recipe
from hf_judge.judging.ensemble import Layout
from hf_judge.settings import resolve_settings, validated

KEY_B = "sk-judge-b-SECRET-0123456789"


@pytest.fixture(scope="module")
def second_server():
    with JudgeServer() as server:
        yield server


@pytest.fixture
def judge_b(second_server):
    second_server.reset()
    second_server.configure(overrides={"score": 3}, record=True)  # judge b gives every answer a 3
    return second_server


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    return f"http://127.0.0.1:{port}/v1"


def _panel(a, b, dead: str) -> list:
    return [
        {"model": "judge-a", "base_url": a.base_url},
        {"model": "judge-b", "base_url": b.base_url, "api_key": "env:JUDGE_B_KEY"},
        {"model": "judge-c", "name": "c", "base_url": dead},
    ]


def test_panel_of_three_with_one_judge_down(judge, judge_b, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_B_KEY", KEY_B)
    judge.configure(record=True)
    models = _panel(judge, judge_b, _dead_url())
    out = score(qa_dataset(6), ["QA_Correctness"], judge, tmp_path, models=models, retries=0)
    d = out["train"]
    assert [c for c in d.column_names if c.startswith("QA_")] == [
        "QA_Correctness_reason",
        "QA_Correctness",
        "QA_Correctness_reason__judge_a",
        "QA_Correctness__judge_a",
        "QA_Correctness_reason__judge_b",
        "QA_Correctness__judge_b",
        "QA_Correctness_reason__c",
        "QA_Correctness__c",
    ]
    assert d.features["QA_Correctness"] == Value("float64") and d.features["QA_Correctness__judge_a"] == Value("int64")
    a, b = d["QA_Correctness__judge_a"], d["QA_Correctness__judge_b"]
    assert b == [3] * 6 and None not in a and d["QA_Correctness__c"] == [None] * 6
    # the panel's mean over the judges that answered
    assert d["QA_Correctness"] == [(x + 3) / 2 for x in a]
    # each judge is asked under its own model name, on its own server, with its own key
    assert {body["model"] for body in judge.stats()["bodies"]} == {"judge-a"}
    assert {body["model"] for body in judge_b.stats()["bodies"]} == {"judge-b"}
    assert set(judge.stats()["auth"]) == {"Bearer sk-test"} and set(judge_b.stats()["auth"]) == {f"Bearer {KEY_B}"}
    assert judge.stats()["requests"] == 6 and judge_b.stats()["requests"] == 6
    # the judge that is down: an error row per row that names it, and the run went on
    errors = out["errors"].to_list()
    assert [(e["row"], e["metric"], e["kind"]) for e in errors] == [
        (r, "QA_Correctness", "connection") for r in range(6)
    ]
    assert all(e["message"].startswith("judge 'c': ") and "connection refused" in e["message"] for e in errors)
    summary = out.summary
    assert [j["name"] for j in summary.sampling["judges"]] == ["judge_a", "judge_b", "c"]
    pairs = summary.agreement["train"]["QA_Correctness"]["QA_Correctness"]["pairs"]
    assert pairs["judge_a~judge_b"]["rows"] == 6
    assert pairs["judge_a~judge_b"]["exact"] == round(a.count(3) / 6, 4)
    assert pairs["judge_a~judge_b"]["mean_abs_diff"] == round(sum(abs(x - 3) for x in a) / 6, 4)
    assert pairs["judge_a~c"] == {"rows": 0, "exact": None}
    # Krippendorff's alpha of the three judges (c answered nothing: missing ratings), as the package gives it
    import krippendorff

    entry = summary.agreement["train"]["QA_Correctness"]["QA_Correctness"]
    want = krippendorff.alpha(reliability_data=[a, [3] * 6, [float("nan")] * 6], level_of_measurement="interval")
    assert entry["alpha_level"] == "interval" and entry["alpha"] == pytest.approx(want)
    assert f"Krippendorff's alpha {want:.2f} (interval)" in str(summary)
    assert "agreement      train QA_Correctness: " in str(summary)
    assert KEY_B not in str(summary.to_dict()) + str(errors)
    # the card names every judge; each judge's score column gets its own statistics
    from hf_judge.results.card import render_section

    card = render_section(out, summary)
    assert "- **Judges:** `judge_a`: `judge-a` at `127.0.0.1:" in card and "`c`: `judge-c` at" in card
    assert "QA_Correctness__judge_b" in card and KEY_B not in card

    # Resume per judge: the judges that answered are served from the reply store; only judge c is asked again.
    again = score(qa_dataset(6), ["QA_Correctness"], judge, tmp_path, models=models, retries=0)
    assert judge.stats()["requests"] == 6 and judge_b.stats()["requests"] == 6
    assert again.summary.cache_hits == 12 and again["train"]["QA_Correctness"] == d["QA_Correctness"]


def test_every_judge_down_stops_the_run(judge, tmp_path):
    models = [{"model": "x", "base_url": _dead_url()}, {"model": "y", "base_url": _dead_url()}]
    with pytest.raises(ServerUnreachableError, match="cannot reach the server"):
        score(qa_dataset(3), ["QA_Correctness"], judge, tmp_path, models=models, retries=0)


def test_panel_on_one_server_and_a_binary_majority(judge, tmp_path):
    """Three model names on the one base URL: the verdicts' majority, the bool column with it."""
    judge.configure(
        faults=[
            {"fault": "text", "text": "0", "model": "m2"},
            {"fault": "text", "text": "0", "model": "m3", "match": "row-0:"},
            {"fault": "text", "text": "1"},
        ]
    )
    ds = qa_dataset(2).rename_columns({"answer": "prediction"}).add_column("answer", ["x", "y"])
    out = score(ds, ["Binary"], judge, tmp_path, models="m1,m2,m3", columns={}, retries=0)
    d = out["train"]
    assert [[d[r][f"Binary_verdict__m{i}"] for i in (1, 2, 3)] for r in range(2)] == [["1", "0", "0"], ["1", "0", "1"]]
    assert d["Binary_verdict"] == ["0", "1"] and d["Binary"] == [False, True]
    assert d["Binary__m2"] == [False, False]
    assert judge.stats()["requests"] == 6


def test_aggregators():
    m = load_metric("QA_Correctness")
    judges = [{"QA_Correctness": 9}, {"QA_Correctness": 3}, None, {"QA_Correctness": 3}]
    expected = {"mean": 5.0, "median": 3.0, "majority": 3, "min": 3, "max": 9}
    for agg, value in expected.items():
        layout = Layout(judges=("a", "b", "c", "d"), aggregator=Aggregator(agg))
        got = layout.combine_judges(m, judges)
        assert got["QA_Correctness"] == value and got["QA_Correctness__b"] == 3 and "QA_Correctness__c" not in got
    assert Layout(judges=("a", "b"), aggregator=Aggregator.MAX).column_types(m)["QA_Correctness"] == "int64"
    # a results cache is per layout: another aggregator, judge or K is another result
    prints = [
        Layout(judges=("a", "b")),
        Layout(judges=("a", "b"), aggregator=Aggregator.MEDIAN),
        Layout(judges=("a", "c")),
        Layout(samples=3, min_samples=2, judges=("a", "b")),
        Layout(samples=3, min_samples=3, judges=("a", "b")),
    ]
    assert len({str(p.fingerprint()) for p in prints}) == len(prints) and Layout().fingerprint() is None
    binary = load_metric("Binary")
    votes = [{"Binary": True}, {"Binary": False}, {"Binary": True}]
    assert Layout(judges=("a", "b", "c")).combine_judges(binary, votes)["Binary"] is True
    assert Layout(judges=("a", "b", "c"), aggregator=Aggregator.MIN).combine_judges(binary, votes)["Binary"] is False


def test_panel_settings_are_checked():
    s = resolve_settings({"models": "gpt-4.1-nano, meta-llama/Llama-3.1-8B"})
    assert s.model == "gpt-4.1-nano" and [j.column_name for j in s.judges] == [
        "gpt_4_1_nano",
        "meta_llama_Llama_3_1_8B",
    ]
    with pytest.raises(ConfigError, match="same columns"):
        resolve_settings({"models": ["a", {"model": "a", "base_url": "http://h/v1"}]})
    # a key written into the settings is refused, and the message does not repeat it
    with pytest.raises(ConfigError, match="env:JUDGE_B_KEY") as e:
        resolve_settings({"models": ["a", {"model": "b", "api_key": "sk-literal-123"}]})
    assert "sk-literal-123" not in str(e.value)
    with pytest.raises(ConfigError, match="unknown key 'key'"):
        resolve_settings({"models": ["a", {"model": "b", "key": "x"}]})


def test_recipe_panel_keeps_secrets_home():
    recipe = validated(
        Recipe,
        {
            "metrics": ["QA_All"],
            "models": [{"model": "a", "base_url": "http://user:pw-123@127.0.0.1:1/v1", "api_key": "env:A_KEY"}, "b"],
            "samples": 3,
        },
        "recipe",
    )
    text = recipe.public_yaml()
    assert "pw-123" not in text and "http://127.0.0.1:1/v1" in text and "env:A_KEY" in text
    assert resolve_settings(recipe.settings()).samples == 3


def test_cli_models(capfd, judge, tmp_path, monkeypatch):
    judge.configure(faults=[{"fault": "text", "model": "two", "text": '{"reason": "r", "score": 1}'}])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"instruction": "q{i}", "output": "a{i}"}}\n' for i in range(3)))
    code, out, err = run_cli(
        capfd,
        *("score", data, "--metrics", "QA_Correctness", "--models", "one,two", "--base-url", judge.base_url),
        *("--aggregator", "max", "-o", tmp_path / "out"),
    )
    assert code == 0, err
    assert "judges         one, two at 127.0.0.1" in out and "the panel's max in the usual columns" in out
    from datasets import load_from_disk

    d = load_from_disk(str(tmp_path / "out"))["train"]
    assert d["QA_Correctness__two"] == [1, 1, 1] and d["QA_Correctness"] == d["QA_Correctness__one"]


def test_the_token_budget_is_the_panels(judge, tmp_path):
    """max_total_tokens counts the tokens of every judge: a panel of two stops at the budget, not at twice it."""
    from hf_judge import BudgetExceededError

    judge.configure(record=True)
    with pytest.raises(BudgetExceededError, match="max_total_tokens"):
        score(qa_dataset(500), ["QA_Clarity"], judge, tmp_path, models="a,b", max_total_tokens=2000, concurrency=2)
    bodies = judge.stats()["bodies"]
    # 190-193 tokens a reply: the 11th spends the budget (checked before each request), and 2 x 2 more may be in
    # flight; a budget per judge took 24
    assert {b["model"] for b in bodies} == {"a", "b"} and 11 <= len(bodies) <= 16


def test_recipe_panel_runs(capfd, judge, judge_b, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("JUDGE_B_KEY", KEY_B)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    judge.configure(record=True)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"instruction": "q{i}", "output": "a{i}"}}\n' for i in range(3)))
    recipe = tmp_path / "panel.yaml"
    recipe.write_text(
        "metrics: [QA_Correctness]\n"
        "models:\n"
        f"  - {{model: judge-a, name: a, base_url: '{judge.base_url}'}}\n"
        f"  - {{model: judge-b, name: b, base_url: '{judge_b.base_url}', api_key: 'env:JUDGE_B_KEY'}}\n"
        "aggregator: min\n"
    )
    code, out, err = run_cli(capfd, "run", recipe, "--dataset", data, "-o", tmp_path / "out")
    assert code == 0, err
    from datasets import load_from_disk

    d = load_from_disk(str(tmp_path / "out"))["train"]
    assert d["QA_Correctness__b"] == [3, 3, 3]
    assert d["QA_Correctness"] == [min(x, 3) for x in d["QA_Correctness__a"]]
    assert set(judge_b.stats()["auth"]) == {f"Bearer {KEY_B}"} and set(judge.stats()["auth"]) == {"Bearer sk-test"}
    assert KEY_B not in out + err


def test_a_panel_of_own_servers_needs_no_openai_key(judge, judge_b, tmp_path, monkeypatch):
    from hf_judge import Settings, score_dataset

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fast = Settings(model="unused", backoff_base=0.001, backoff_max=0.01)
    own = [{"model": "a", "base_url": judge.base_url}, {"model": "b", "base_url": judge_b.base_url}]
    kw = dict(columns={"instruction": "question", "output": "answer"}, cache_dir=tmp_path / "c", settings=fast)
    out = score_dataset(qa_dataset(2), ["QA_Correctness"], models=own, **kw)
    assert out["train"]["QA_Correctness__b"] == [3, 3] and set(judge_b.stats()["auth"]) == {""}
    # a judge left on the default server (OpenAI) without a key is refused before any request
    with pytest.raises(ConfigError, match="no API key for https://api.openai.com/v1"):
        score_dataset(qa_dataset(2), ["QA_Correctness"], models=[own[0], {"model": "gpt-4.1-nano"}], **kw)


def test_cli_refuses_an_unknown_aggregator(capfd):
    code, _, err = run_cli(capfd, "score", "d.jsonl", "--metrics", "QA_All", "--models", "a,b", "--aggregator", "avg")
    assert code == 2 and "invalid choice: 'avg' (choose from 'mean', 'median', 'majority', 'min', 'max')" in err
