"""A cascade of judges (escalate_model=) against two loopback judges: a cheap one whose confidence is known per
row (the judge server's ``confidence`` rules) and a strong one that counts what reaches it."""

from __future__ import annotations

import json
import re

import pytest
from batch_fixture import *  # noqa: F401,F403 - the batch server fixtures
from batch_fixture import BatchServer
from helpers import qa_dataset, run_cli, score_args
from judge_fixture import JudgeServer

from hf_judge import ConfigError, Judge, Settings, estimate_cost, load_prices, score_dataset
from hf_judge.engine.cascade import audit_shares
from hf_judge.judging.catalogue import load_metric
from hf_judge.results.card import render_section
from hf_judge.settings import resolve_settings

ROWS = 10
# row -> the probability the cheap judge gives the score it writes (always 5): its confidence, exactly
LOW = {1: 0.4, 4: 0.5, 7: 0.59}
HIGH = {8: 0.61}  # just over the cut: stays with the cheap judge
CUT = 0.6
COLUMNS = {"instruction": "question", "output": "answer"}
PRICES = "cheap: {input: 0.1, output: 0.4}\nstrong: {input: 2.0, output: 8.0}\n"


@pytest.fixture(scope="module")
def strong_proc():
    with JudgeServer() as server:
        yield server


@pytest.fixture
def strong(strong_proc):
    strong_proc.reset()
    strong_proc.configure(overrides={"score": 9}, record=True)  # the strong judge gives every answer a 9
    return strong_proc


def _cheap_config() -> dict:
    rules = [{"match": f"row-{r}:", "p": p} for r, p in {**LOW, **HIGH}.items()]
    return {"overrides": {"score": 5}, "confidence": [*rules, {"match": "row-", "p": 0.9}], "record": True}


@pytest.fixture
def cheap(judge):
    judge.configure(**_cheap_config())
    return judge


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    return str(path)


def _rows_sent(server) -> list[int]:
    """The rows whose prompts reached ``server`` (its recorded bodies), sorted."""
    rows = []
    for body in server.stats()["bodies"]:
        text = " ".join(str(m.get("content")) for m in body["messages"])
        rows.append(int(re.search(r"row-(\d+):", text).group(1)))
    return sorted(rows)


def _cascade(ds, cheap_url, strong_url, cache, **kw):
    fast = Settings(model="cheap", backoff_base=0.001, backoff_max=0.01, batch_poll_s=0.01)
    kw = {"logprobs": True, "escalate_when": f"confidence<{CUT}", **kw}
    if "escalate_models" not in kw:  # a stronger panel names its own judges
        kw["escalate_model"] = "strong"
    return score_dataset(
        ds,
        kw.pop("metrics", ["QA_Correctness"]),
        settings=fast,
        base_url=cheap_url,
        api_key="sk-test",
        cache_dir=cache,
        columns=COLUMNS,
        progress=False,
        retries=0,
        escalate_base_url=strong_url,
        **kw,
    )


def test_exactly_the_rows_under_the_cut_reach_the_strong_judge_and_a_rerun_sends_nothing(
    cheap, strong, tmp_path, prices
):
    ds = qa_dataset(ROWS)
    out = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "cache", prices=prices)
    assert _rows_sent(strong) == sorted(LOW), "exactly the rows under the cut, each once"
    assert cheap.stats()["requests"] == ROWS
    d = out["train"]
    conf = d["QA_Correctness_confidence__cheap"]
    assert [round(c, 6) if c is not None else None for c in conf] == [LOW.get(r) for r in range(ROWS)]
    assert list(d["QA_Correctness"]) == [9 if r in LOW else 5 for r in range(ROWS)]
    assert list(d["QA_Correctness_judge"]) == ["strong" if r in LOW else "cheap" for r in range(ROWS)]
    assert list(d["QA_Correctness__cheap"]) == [5 if r in LOW else None for r in range(ROWS)]
    assert list(d["QA_Correctness__strong"]) == [9 if r in LOW else None for r in range(ROWS)]
    assert len(out["errors"]) == 0

    c = out.summary.cascade
    assert (c["pairs"], c["escalated"], c["rate"], c["reasons"]) == (ROWS, 3, 0.3, {"confidence": 3})
    tiers = c["tiers"]
    assert (tiers["cheap"]["requests"], tiers["strong"]["requests"]) == (ROWS, 3)
    assert out.summary.requests == ROWS + 3, "the run's counters are both tiers'"
    table = load_prices(prices)
    for name in ("cheap", "strong"):
        t = tiers[name]
        assert t["cost"] == pytest.approx(table[name].cost(t["prompt_tokens"], t["completion_tokens"]), abs=1e-6)
    assert c["cost"] == pytest.approx(tiers["cheap"]["cost"] + tiers["strong"]["cost"], abs=1e-6)
    # the run's own cost is both tiers', each at its price (the summary has no one price for two models)
    assert out.summary.price is None and out.summary.cost() == pytest.approx(c["cost"], abs=1e-6)
    assert f"cost           ${c['cost']:,.4f}, both tiers of the cascade" in str(out.summary)
    assert f"**Cost:** ${c['cost']:,.4f} at each cascade tier's model's price" in render_section(out, out.summary)
    # strong-only: the strong judge's own cost, and the other rows projected as estimate_cost projects them
    rest = [r for r in range(ROWS) if r not in LOW]
    est = estimate_cost(ds.select(rest), ["QA_Correctness"], model="strong", base_url=strong.base_url,
                        api_key="sk-test", columns=COLUMNS, use_cache=False, logprobs=True, prices=prices)  # fmt: skip
    out_per_row = tiers["strong"]["completion_tokens"] / 3
    projected = table["strong"].cost(est.input_tokens, out_per_row * len(rest))
    assert c["strong_only_cost"] == pytest.approx(tiers["strong"]["cost"] + projected, abs=1e-6)
    assert c["saved"] == pytest.approx(c["strong_only_cost"] - c["cost"], abs=1e-6) and c["saved"] > 0
    text = str(out.summary)
    assert "3 of 10 (row, metric)s escalated (30.0%) to strong" in text and "cost saved" in text
    card = render_section(out, out.summary)
    assert "**Cascade:** `cheap` scored every row; 3 of 10 (row, metric)s (30.0%) went to `strong`" in card
    assert f"${c['saved']:,.4f} saved" in card

    before = (cheap.stats()["requests"], strong.stats()["requests"])
    again = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "cache", prices=prices)
    assert (cheap.stats()["requests"], strong.stats()["requests"]) == before, "a rerun pays neither tier"
    assert again["train"].to_dict() == d.to_dict()
    assert again.summary.cascade["tiers"]["strong"]["requests"] == 0
    assert again.summary.cost() == 0 and again.summary.cost(again.summary.totals()) == pytest.approx(c["cost"])
    assert again.summary.cascade["strong_only_cost"] == pytest.approx(c["strong_only_cost"], abs=1e-6)


def test_the_audit_sends_a_stable_share_of_the_other_rows_and_reports_agreement(cheap, strong, tmp_path):
    ds = qa_dataset(40)
    out = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "cache", escalate_audit=0.25)
    shares = audit_shares(ds, load_metric("QA_Correctness"), COLUMNS)
    audited = [r for r in range(40) if r not in LOW and shares[r] < 0.25]
    assert 3 <= len(audited) <= 17  # a quarter of 37, give or take what a hash gives
    assert _rows_sent(strong) == sorted([*LOW, *audited])
    d = out["train"]
    # an audited row keeps the cheap judge's score: the cascade decided it
    assert [d["QA_Correctness_judge"][r] for r in audited] == ["cheap"] * len(audited)
    assert [d["QA_Correctness"][r] for r in audited] == [5] * len(audited)
    assert [d["QA_Correctness__strong"][r] for r in audited] == [9] * len(audited)
    a = out.summary.cascade["audit"]
    assert a["rows"] == len(audited) and a["failed"] == 0
    assert a["agreement"]["QA_Correctness"] == {"rows": len(audited), "exact": 0.0, "mean_abs_diff": 4.0}
    # the same rows on a rerun with a fresh cache: chosen by content, not by chance
    strong.reset()
    strong.configure(overrides={"score": 9}, record=True)
    _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "cache2", escalate_audit=0.25)
    assert _rows_sent(strong) == sorted([*LOW, *audited])


def test_audit_agreement_of_verdicts_is_cohens_kappa():
    from hf_judge.engine.cascade_report import agreement

    cascade = [True, True, False, False, True, False, True, True]
    strong = [True, False, False, False, True, True, True, True]
    got = agreement([(a, b, "bool") for a, b in zip(cascade, strong, strict=True)])
    assert got["rows"] == 8 and got["exact"] == 0.75
    # by hand: observed 6/8; both say True 5/8 of the time: expected (5/8)^2 + (3/8)^2 = 34/64
    assert got["kappa"] == pytest.approx((0.75 - 34 / 64) / (1 - 34 / 64), abs=1e-4)


@pytest.fixture(scope="module")
def strong_batch():
    server = BatchServer()
    yield server
    server.stop()


@pytest.mark.parametrize("engine", ["workers", "batch"])
def test_workers_and_batch_give_the_in_process_cascade(engine, cheap, strong, batch, strong_batch, tmp_path):
    ds = qa_dataset(ROWS)
    ref = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "ref")
    if engine == "workers":
        strong.reset()
        strong.configure(overrides={"score": 9}, record=True)
        out = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "w", num_workers=2)
        assert _rows_sent(strong) == sorted(LOW)
    else:
        batch.configure(**_cheap_config())
        strong_batch.reset()
        strong_batch.configure(overrides={"score": 9})
        out = _cascade(ds, batch.base_url, strong_batch.base_url, tmp_path / "b", batch=True)
        assert strong_batch.stats()["batches"] == 1 and batch.stats()["batches"] == 1, "one batch per tier"
        assert sum(strong_batch.stats()["paid"].values()) == len(LOW)
    assert out["train"].to_dict() == ref["train"].to_dict()
    for k in ("pairs", "escalated", "reasons", "metrics"):
        assert out.summary.cascade[k] == ref.summary.cascade[k]
    for tier in ("cheap", "strong"):
        for k in ("requests", "prompt_tokens", "completion_tokens", "pairs", "scored_completion_tokens"):
            assert out.summary.cascade["tiers"][tier][k] == ref.summary.cascade["tiers"][tier][k], (tier, k)


def test_margin_and_disagreement(judge, strong, tmp_path):
    ds = qa_dataset(ROWS)
    # margin: the rows whose cheap score lies within 1 of 7 (the judge server's scores vary by prompt)
    out = _cascade(ds, judge.base_url, strong.base_url, tmp_path / "m", logprobs=False,
                   escalate_when="margin:QA_Correctness=7+-1", metrics=["QA_Correctness", "QA_Clarity"])  # fmt: skip
    assert out.summary.cascade["metrics"]["QA_Clarity"]["escalated"] == 0, "a margin decides its own metric's rows"
    assert set(out["train"]["QA_Clarity_judge"]) == {"cheap"}
    near = [r for r, v in enumerate(out["train"]["QA_Correctness__cheap"]) if v is not None]
    cheap_scores = out["train"]["QA_Correctness"]
    assert near and _rows_sent(strong) == near
    assert all(abs(out["train"]["QA_Correctness__cheap"][r] - 7) <= 1 for r in near)
    assert all(cheap_scores[r] == 9 for r in near)
    # disagreement: a panel of two cheap judges whose second gives row 2 a 1
    strong.reset()
    strong.configure(overrides={"score": 9}, record=True)
    judge.configure(overrides={"score": 5}, faults=[{"match": "row-2:", "model": "b", "fault": "text",
                                                    "text": '{"reason": "no", "score": 1}'}])  # fmt: skip
    out = _cascade(ds, judge.base_url, strong.base_url, tmp_path / "d", logprobs=False, models="a,b",
                   escalate_when="disagreement")  # fmt: skip
    assert _rows_sent(strong) == [2]
    assert out["train"]["QA_Correctness"][2] == 9 and out["train"]["QA_Correctness__a"][2] == 5
    assert out.summary.cascade["reasons"] == {"disagreement": 1}
    # each cheap judge of the panel keeps its own column, and with it its own length bias
    judged = {c: f["judge"] for c, f in out.summary.length_bias.items() if f.get("judge")}
    assert judged == {"QA_Correctness__a": "a", "QA_Correctness__b": "b"}
    # disagreement: three samples, of which row 5's first says 1
    strong.reset()
    strong.configure(overrides={"score": 9}, record=True)
    judge.reset()  # its count of each prompt's attempts starts again
    judge.configure(
        overrides={"score": 5},
        faults=[{"match": "row-5:", "attempts": 1, "fault": "text", "text": '{"reason": "no", "score": 1}'}],
    )
    out = _cascade(ds, judge.base_url, strong.base_url, tmp_path / "k", logprobs=False, samples=3, temperature=0.7,
                   escalate_when="disagreement")  # fmt: skip
    assert out["train"]["QA_Correctness_samples"][5] == [1, 5, 5]
    assert _rows_sent(strong) == [5]
    assert out["train"]["QA_Correctness"][5] == 9 and out["train"]["QA_Correctness__cheap"][5] == pytest.approx(11 / 3)


def _pairs(n: int):
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "question": [f"row-{i}: which is better?" for i in range(n)],
            "response1": [f"resp-A-{i}" for i in range(n)],
            "response2": [f"resp-B-{i}" for i in range(n)],
        }
    )


def _pair_reply(s1: int, s2: int, shown_first: str) -> dict:
    """A Comparative reply of ``s1``-``s2`` to the prompts whose first response (Assistant 1) is ``shown_first``."""
    text = json.dumps({"score_1": s1, "score_2": s2, "explanation": f"{s1}-{s2}"})
    return {"fault": "text", "text": text, "match": f"[Assistant 1]\n{shown_first}"}


def test_disagreement_escalates_the_pairs_whose_two_orders_disagree(judge, strong, tmp_path):
    """A pairwise judge's two orders are two replies of one (row, metric): escalate_when="disagreement" needs no
    samples or panel there, and the strong judge gets the rows whose orders chose different winners (issue 40)."""
    # the cheap judge prefers response A in both orders, except in row 2, where it prefers whichever is shown first
    judge.configure(
        faults=[_pair_reply(8, 3, "resp-A-"), _pair_reply(8, 3, "resp-B-2"), _pair_reply(3, 8, "resp-B-")],
        record=True,
    )
    strong.configure(faults=[_pair_reply(2, 9, "resp-A-"), _pair_reply(9, 2, "resp-B-")], record=True)
    out = score_dataset(
        _pairs(ROWS),
        ["Comparative"],
        settings=Settings(model="cheap", backoff_base=0.001, backoff_max=0.01),
        base_url=judge.base_url,
        api_key="sk-test",
        cache_dir=tmp_path / "c",
        progress=False,
        escalate_model="strong",
        escalate_base_url=strong.base_url,
        escalate_when="disagreement",
    )
    assert judge.stats()["requests"] == 2 * ROWS and _rows_sent(strong) == [2, 2]  # both orders of row 2
    train = out["train"]
    assert train["Comparative_disagree__cheap"][2] is True and train["Comparative_winner__cheap"][2] == "tie"
    assert train["Comparative_winner"] == ["1", "1", "2", *["1"] * (ROWS - 3)]
    assert train["Comparative_judge"] == ["cheap", "cheap", "strong", *["cheap"] * (ROWS - 3)]
    assert out.summary.cascade["reasons"] == {"disagreement": 1} and len(out["errors"]) == 0


def test_a_cheap_failure_escalates_and_the_strong_judge_decides(judge, strong, tmp_path):
    judge.configure(overrides={"score": 5}, faults=[{"match": "row-3:", "fault": "malformed_json"}])
    out = _cascade(qa_dataset(ROWS), judge.base_url, strong.base_url, tmp_path / "c")
    assert _rows_sent(strong) == [3]
    assert out["train"]["QA_Correctness"][3] == 9, out["errors"].to_list()
    assert len(out["errors"]) == 0, out["errors"].to_list()
    assert out.summary.cascade["reasons"] == {"failed": 1}


def test_what_a_cascade_refuses(judge, tmp_path, monkeypatch):
    kw = {"escalate_model": "strong", "escalate_when": "confidence<0.6", "logprobs": True}
    ds = qa_dataset(3)
    with pytest.raises(ConfigError, match="not for a stream"):
        _cascade(ds.to_iterable_dataset(), judge.base_url, judge.base_url, tmp_path / "s")
    with pytest.raises(ConfigError, match="not for a map transform"):
        Judge(["QA_Correctness"], model="cheap", base_url=judge.base_url, api_key="k", columns=COLUMNS, **kw)
    from hf_judge.ray import score_ray_dataset

    # a Ray Data stage: refused before it reads the dataset (score_dataset_on_ray runs a cascade: tests/test_matrix.py)
    with pytest.raises(ConfigError, match="not for a Ray Data stage"):
        score_ray_dataset(None, ["QA_Correctness"], model="cheap", base_url=judge.base_url, api_key="k", **kw)
    with pytest.raises(ConfigError, match="needs logprobs"):
        resolve_settings({"model": "m", **kw, "logprobs": False})
    # one reply per (row, metric): refused where the metrics are known, before the cheap tier sends
    with pytest.raises(ConfigError, match="gets one for QA_Correctness: add samples=3"):
        _cascade(ds, judge.base_url, judge.base_url, tmp_path / "d", logprobs=False, escalate_when="disagreement")
    with pytest.raises(ConfigError, match="is the run's own judge"):
        resolve_settings({"model": "m", **kw, "escalate_model": "m"})
    with pytest.raises(ConfigError, match="would write the columns <column>__cheap"):
        resolve_settings({"model": "a", **kw, "models": ["a", "cheap"]})
    with pytest.raises(ConfigError, match="^invalid settings: escalate_model needs escalate_when"):
        resolve_settings({"model": "m", "escalate_model": "s"})
    with pytest.raises(ConfigError, match=r"both escalate_model='x' and a stronger panel .*add 'x' to escalate_models"):
        resolve_settings({"model": "m", **kw, "escalate_model": "x", "escalate_models": "a,b"})
    with pytest.raises(ConfigError, match=r"escalate_models is empty.*--escalate-models a,b"):
        resolve_settings({"model": "m", **kw, "escalate_models": ""})
    with pytest.raises(ConfigError, match="^invalid settings: escalate_models needs escalate_when"):
        resolve_settings({"model": "m", "escalate_models": ["s", "t"]})  # the option the user gave is named
    with pytest.raises(ConfigError, match="cannot read 'confidence<2'"):
        resolve_settings({"model": "m", **kw, "escalate_when": "confidence<2"})
    with pytest.raises(ConfigError, match="env:JUDGE_B_KEY"):
        resolve_settings({"model": "m", **kw, "escalate_api_key": "sk-SECRET-123"})
    with pytest.raises(ConfigError, match="names no score column"):
        _cascade(ds, judge.base_url, judge.base_url, tmp_path / "m", escalate_when="margin:QA_Nope=7+-1")
    assert judge.stats()["requests"] == 0


EXAMPLE_PRICES = "small-judge: {input: 0.10, output: 0.40}\nlarge-judge: {input: 2.00, output: 8.00}\n"


def _docs_example(cheap, strong, tmp_path, capfd) -> str:
    """The docs' cascade example (docs/how-to/cascade.md), run against the loopback judges: 200 rows; the small
    judge gives every answer a 5, unsure of it (probability 0.5 or 0.55) in the rows whose number ends in 3 or 7,
    sure (0.9) in the others; the large judge's scores vary by prompt."""
    cheap.configure(
        overrides={"score": 5},
        confidence=[{"match": "7 + ", "p": 0.5}, {"match": "3 + ", "p": 0.55}, {"match": "", "p": 0.9}],
    )
    data, prices = tmp_path / "data.jsonl", tmp_path / "prices.yaml"
    qa_dataset(200).to_json(data)
    prices.write_text(EXAMPLE_PRICES)
    cascade = ["--logprobs", "--escalate-model", "large-judge", "--escalate-base-url", strong.base_url,
               "--escalate-api-key", "env:LARGE_KEY", "--escalate-when", "confidence<0.6", "--escalate-audit", "0.05",
               "--prices", prices]  # fmt: skip
    args = score_args(data, cheap, *cascade, "-o", tmp_path / "out", metrics="QA_Correctness", model="small-judge")
    code, out, err = run_cli(capfd, *args)
    assert code == 0, err
    return out + err


def test_the_docs_example_prints_what_the_docs_show(judge, strong_proc, tmp_path, capfd, monkeypatch):
    """The CLI's cascade: the strong judge's key read from its variable (and never shown), the lines the docs'
    cascade page shows printed, the report in summary.json."""
    from pathlib import Path

    monkeypatch.setenv("LARGE_KEY", "sk-large-SECRET-0123")
    strong_proc.reset()
    strong_proc.configure(require_key="sk-large-SECRET-0123")
    text = _docs_example(judge, strong_proc, tmp_path, capfd)
    assert strong_proc.stats()["by_status"] == {"200": 45} and "sk-large-SECRET" not in text
    page = (Path(__file__).parent.parent / "docs" / "how-to" / "cascade.md").read_text(encoding="utf-8")
    section = page[page.index("## Cost, resume and engines") :]
    shown = re.search(r"^```text\n(cascade .*?)^```", section, flags=re.S | re.M)
    assert shown, "no example output under 'Cost, resume and engines'"
    for line in shown.group(1).splitlines():
        assert line in text.splitlines(), f"docs line not printed by the example: {line!r}"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["cascade"]["escalated"], summary["cascade"]["tiers"]["strong"]["requests"]) == (40, 45)


def test_a_dry_run_projects_the_cheap_tier_and_the_strong_one_on_every_row(cheap, strong, tmp_path, prices):
    ds = qa_dataset(ROWS)
    kw = {"columns": COLUMNS, "api_key": "sk-test", "use_cache": False, "logprobs": True, "prices": prices}
    est = estimate_cost(ds, ["QA_Correctness"], model="cheap", base_url=cheap.base_url, escalate_model="strong",
                        escalate_base_url=strong.base_url, escalate_when="confidence<0.6", **kw)  # fmt: skip
    alone = estimate_cost(ds, ["QA_Correctness"], model="strong", base_url=strong.base_url, **kw)
    assert est.requests == ROWS and est.strong is not None
    assert est.strong.to_dict() == alone.to_dict()
    assert f"on every row: {ROWS:,} requests" in str(est) and f"${alone.cost_online:,.4f} online" in str(est)
    assert cheap.stats()["requests"] == 0 and strong.stats()["requests"] == 0
    # a stronger panel: each of its judges on every row, as a dry run of that panel alone projects it
    kw["escalate_models"], kw["models"] = "big-a,big-b", None
    est = estimate_cost(ds, ["QA_Correctness"], model="cheap", base_url=cheap.base_url,
                        escalate_base_url=strong.base_url, escalate_when="confidence<0.6",
                        **{k: v for k, v in kw.items() if k != "models"})  # fmt: skip
    panel = estimate_cost(ds, ["QA_Correctness"], models="big-a,big-b", base_url=strong.base_url,
                          **{k: v for k, v in kw.items() if k not in ("models", "escalate_models")})  # fmt: skip
    assert est.strong is not None and est.strong.to_dict() == panel.to_dict() and panel.requests == 2 * ROWS


def test_the_bias_checks_read_the_scores_that_decided(cheap, strong, tmp_path):
    """Length bias and ``_lc`` are the combined result's: the cheap judge's 5s where it decided, the strong 9s where
    it did (each tier's own checks would read scores the result does not hold)."""
    from scipy.stats import spearmanr

    ds = qa_dataset(ROWS)
    out = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "cache", length_control=True)
    d = out["train"]
    scores = list(d["QA_Correctness"])
    assert scores == [9 if r in LOW else 5 for r in range(ROWS)]
    lengths = [len(a) for a in ds["answer"]]
    found = out.summary.length_bias["QA_Correctness"]
    assert found["n"] == ROWS and found["rho"] == pytest.approx(spearmanr(scores, lengths).statistic)
    assert d.column_names.count("QA_Correctness_lc") == 1
    lc = [v for v in d["QA_Correctness_lc"]]
    assert sum(lc) / ROWS == pytest.approx(sum(scores) / ROWS)  # the mean score is kept


def test_the_strong_tier_takes_its_own_samples_and_their_mean_decides(cheap, strong, tmp_path):
    """escalate_samples=3: the strong server gives a prompt's 1st, 2nd and 3rd reply the scores 4, 9 and 9; the
    escalated rows get their mean, and the strong tier's own columns (std, majority, the samples) with __strong."""
    import statistics

    strong.configure(overrides={}, attempt_scores=[4, 9, 9], record=True)
    ds = qa_dataset(ROWS)
    out = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "c", escalate_samples=3,
                   escalate_temperature=0.7)  # fmt: skip
    assert _rows_sent(strong) == sorted(r for r in LOW for _ in range(3)), "three replies per escalated row"
    temps = {b.get("temperature") for b in strong.stats()["bodies"]}
    assert temps == {0.7}, "the strong tier's own temperature"
    d = out["train"]
    for r in range(ROWS):
        samples = d["QA_Correctness_samples__strong"][r]
        if r not in LOW:
            assert samples is None and d["QA_Correctness"][r] == 5 and d["QA_Correctness__strong"][r] is None
            continue
        assert sorted(samples) == [4, 9, 9]
        # the in-process computation of the same replies: mean, population std, majority
        assert d["QA_Correctness"][r] == d["QA_Correctness__strong"][r] == statistics.fmean(samples) == 22 / 3
        assert d["QA_Correctness_std__strong"][r] == statistics.pstdev(samples)
        assert d["QA_Correctness_majority__strong"][r] == 9
        assert d["QA_Correctness__cheap"][r] == 5 and d["QA_Correctness_judge"][r] == "strong"
    assert d.features["QA_Correctness"].dtype == "float64", "a cheap 5 and a strong mean in one column"
    unsure = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "n", escalate_samples=3,
                      escalate_temperature=0.7, escalate_when="confidence<0.3")  # fmt: skip
    assert unsure.summary.cascade["escalated"] == 0, "no row under 0.3"
    assert unsure["train"].features["QA_Correctness"].dtype == "float64", "the same type, whatever escalated"
    assert out.summary.cascade["strong_samples"] == 3
    assert "escalated (30.0%) to strong (3 samples each) (confidence 3)" in str(out.summary)
    assert out.summary.cascade["tiers"]["strong"]["requests"] == 3 * len(LOW)
    # the same as the strong judge alone with three samples on those rows
    alone = score_dataset(ds.select(sorted(LOW)), ["QA_Correctness"], model="strong", base_url=strong.base_url,
                          api_key="sk-test", columns=COLUMNS, progress=False, samples=3, temperature=0.7,
                          logprobs=True, cache_dir=tmp_path / "alone")  # fmt: skip
    for j, r in enumerate(sorted(LOW)):
        for c in ("QA_Correctness", "QA_Correctness_std", "QA_Correctness_majority"):
            assert d[f"{c}__strong"][r] == alone["train"][c][j], c
    before = strong.stats()["requests"]
    again = _cascade(ds, cheap.base_url, strong.base_url, tmp_path / "c", escalate_samples=3,
                     escalate_temperature=0.7)  # fmt: skip
    assert strong.stats()["requests"] == before and again["train"].to_dict() == d.to_dict()


def test_a_strong_panel_decides_by_its_aggregate_and_keeps_each_judges_columns(cheap, strong, tmp_path):
    """escalate_models=big-a,big-b on the strong server, which answers big-b with a 2 and big-a with a 9."""
    from hf_judge.judging.ensemble import Layout
    from hf_judge.settings import Aggregator

    strong.configure(faults=[{"model": "big-b", "fault": "text", "text": '{"reason": "b", "score": 2}'}])
    out = _cascade(qa_dataset(ROWS), cheap.base_url, strong.base_url, tmp_path / "p", escalate_models="big-a,big-b",
                   logprobs=True)  # fmt: skip
    sent = strong.stats()["bodies"]
    assert sorted(b["model"] for b in sent) == ["big-a"] * len(LOW) + ["big-b"] * len(LOW)
    d = out["train"]
    metric = load_metric("QA_Correctness")
    for r in LOW:
        a, b = d["QA_Correctness__big_a__strong"][r], d["QA_Correctness__big_b__strong"][r]
        assert (a, b) == (9, 2)
        judges = [{"QA_Correctness": v, "QA_Correctness_reason": "r"} for v in (a, b)]
        want = Layout(judges=("big_a", "big_b"), aggregator=Aggregator.MEAN).combine_judges(metric, judges)
        assert d["QA_Correctness"][r] == d["QA_Correctness__strong"][r] == want["QA_Correctness"] == 5.5
        assert d["QA_Correctness_reason__big_b__strong"][r] == "b"
    assert all(d["QA_Correctness__big_a__strong"][r] is None for r in range(ROWS) if r not in LOW)
    c = out.summary.cascade
    assert c["strong_model"] == "big-a, big-b" and c["tiers"]["strong"]["requests"] == 2 * len(LOW)
    # each strong judge's figures are the run's too, merged by the driver's one rule (before, the cascade's summary
    # dropped judge_requests: a lost strong judge could not show)
    figures = out.summary.judge_requests
    assert {j: (f["requests"], f["answered"]) for j, f in figures.items()} == {
        "big_a": (len(LOW), len(LOW)),
        "big_b": (len(LOW), len(LOW)),
    }
    assert "escalated (30.0%) to big-a, big-b" in str(out.summary)
    with pytest.raises(ConfigError, match="Drop escalate_model"):
        resolve_settings({"model": "m", "escalate_model": "x", "escalate_models": "a,b", "samples": 2,
                          "escalate_when": "disagreement"})  # fmt: skip
    with pytest.raises(ConfigError, match="escalate_temperature=0.7"):
        resolve_settings({"model": "m", "escalate_model": "x", "escalate_samples": 3, "temperature": 0,
                          "escalate_when": "margin:Q=1+-1"})  # fmt: skip
    with pytest.raises(ConfigError, match="escalate_samples configures a cascade's stronger judge"):
        resolve_settings({"model": "m", "escalate_samples": 3})


def _prompt_tokens(server) -> dict[int, int]:
    """Row -> the prompt tokens the judge server reported for the requests about it (its rule: a quarter of the
    messages' characters), summed over its recorded bodies."""
    out: dict[int, int] = {}
    for body in server.stats()["bodies"]:
        text = "".join(str(m.get("content")) for m in body["messages"])
        row = int(re.search(r"row-(\d+):", text).group(1))
        out[row] = out.get(row, 0) + max(1, len(text) // 4)
    return out


@pytest.mark.parametrize("strong_kw", [{}, {"escalate_models": "big-a,big-b"}])
def test_token_columns_count_both_tiers_on_the_rows_the_strong_tier_judged(cheap, strong, tmp_path, strong_kw):
    out = _cascade(qa_dataset(ROWS), cheap.base_url, strong.base_url, tmp_path / "t", token_columns=True,
                   escalate_audit=0.3, **strong_kw)  # fmt: skip
    d = out["train"]
    cheap_in, strong_in = _prompt_tokens(cheap), _prompt_tokens(strong)
    assert set(strong_in) > set(LOW), "escalated rows and audited ones"
    assert list(d["judge_prompt_tokens"]) == [cheap_in[r] + strong_in.get(r, 0) for r in range(ROWS)]
    tiers = out.summary.cascade["tiers"]
    both = tiers["cheap"]["completion_tokens"] + tiers["strong"]["completion_tokens"]
    assert sum(d["judge_completion_tokens"]) == both
    assert sum(d["judge_prompt_tokens"]) == out.summary.prompt_tokens
    assert sum(d["judge_completion_tokens"]) == out.summary.completion_tokens


def test_each_judge_of_a_strong_panel_has_its_own_server_and_key(cheap, strong, tmp_path, monkeypatch):
    """big-a on the strong server with its own key (read from its variable), big-b on the cheap server with the
    run's key: each request reaches its judge's server with its judge's key, and the key is in no output."""
    monkeypatch.setenv("BIG_A_KEY", "sk-big-a-SECRET-42")
    strong.configure(require_key="sk-big-a-SECRET-42")
    panel = [{"model": "big-a", "base_url": strong.base_url, "api_key": "env:BIG_A_KEY"},
             {"model": "big-b", "base_url": cheap.base_url}]  # fmt: skip
    out = _cascade(qa_dataset(ROWS), cheap.base_url, strong.base_url, tmp_path / "k", escalate_models=panel)
    assert strong.stats()["by_status"] == {"200": len(LOW)}
    assert {b["model"] for b in strong.stats()["bodies"]} == {"big-a"}
    to_cheap = [b["model"] for b in cheap.stats()["bodies"]]
    assert to_cheap.count("big-b") == len(LOW) and to_cheap.count("cheap") == ROWS
    assert set(strong.stats()["auth"]) == {"Bearer sk-big-a-SECRET-42"}
    assert "sk-big-a-SECRET" not in json.dumps(out.summary.to_dict(), default=str) + str(out.summary)
    d = out["train"]
    assert [d["QA_Correctness__big_b__strong"][r] for r in sorted(LOW)] == [5] * len(LOW)  # the cheap server's 5
    assert [d["QA_Correctness__big_a__strong"][r] for r in sorted(LOW)] == [9] * len(LOW)
    assert [d["QA_Correctness"][r] for r in sorted(LOW)] == [7.0] * len(LOW)
