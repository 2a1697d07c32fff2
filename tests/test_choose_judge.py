"""choose_judge / hf-judge choose-judge against loopback judges of known behaviour: one that agrees with the
labels on a known share of pairs (it prefers the longer response; the labels name the longer one on 80 % of
pairs), one that always prefers the response shown first, one that fails on about a fifth of its rows, and a
slow, expensive one. Every figure of the table is checked against a hand computation or scikit-learn."""

from __future__ import annotations

import gzip
import json

import numpy as np
import orjson
import pytest
from datasets import Dataset
from helpers import longer_pairs
from judge_fixture import JudgeServer
from sklearn.metrics import cohen_kappa_score

from hf_judge import agreement, choose_judge, load_result
from hf_judge.analysis.leaderboard import FILE, pair_verdicts

N = 40
FIRST_REPLY = {"score_1": 9, "score_2": 2, "explanation": "the first"}


@pytest.fixture(scope="module")
def servers():
    with JudgeServer() as a, JudgeServer() as b, JudgeServer() as c:
        yield a, b, c


def _pairs() -> Dataset:
    """Pairs whose longer response is the label on 80 % of rows (rows 0, 5, 10, ...: the shorter one)."""
    return longer_pairs(N)


def _judges(servers, tmp_path):
    a, b, c = servers
    for s in servers:
        s.reset()
    # agree: the i-th score follows the length of the i-th response (pattern: runs of L or S)
    a.configure(
        length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"},
        faults=[{"fault": "status", "status": 400, "rate": 0.2, "model": "faulty"}],
    )
    b.configure(overrides=FIRST_REPLY)
    c.configure(latency=0.05)
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "agree: {input: 0, output: 1.0}\nfirst: {input: 0, output: 2.0}\n"
        "faulty: {input: 0, output: 1.0}\nslow: {input: 0, output: 100.0}\n"
    )
    return [
        {"model": "agree", "base_url": a.base_url},
        {"model": "first", "base_url": b.base_url},
        {"model": "faulty", "base_url": a.base_url},
        {"model": "slow", "base_url": c.base_url},
    ], str(prices)


def test_the_table_of_four_judges_of_known_behaviour(servers, tmp_path):
    judges, prices = _judges(servers, tmp_path)
    ds = _pairs()
    choice = choose_judge(
        ds,
        "Comparative",
        judges,
        label="human",
        api_key="k",
        cache_dir=tmp_path / "c",
        prices=prices,
        progress=False,
        output_dir=tmp_path / "out",
        resamples=200,
    )
    by = {e["judge"]: e for e in choice.entries}
    labels = ds["human"]
    # agree: prefers the longer response in both orders, the labels name the longer one on 80 % of pairs
    assert by["agree"]["score"] == pytest.approx(0.8) and by["agree"]["coverage"] == 1.0
    assert by["agree"]["judgebench"]["orders_disagree"]["share"] == 0.0
    lo, hi = by["agree"]["interval"]
    assert lo < 0.8 < hi
    # first: each order picks the response shown first: the votes cancel (0), never correct by JudgeBench's rule
    assert by["first"]["score"] == 0.0
    assert by["first"]["judgebench"]["single_order_accuracy"] == pytest.approx(labels.count("1") / N)
    disagree = by["first"]["judgebench"]["orders_disagree"]
    assert disagree == {"share": 1.0, "first_position": N, "second_position": 0, "other": 0, "pairs": N}
    # faulty: a fifth of its requests refused (400: not retried); a pair with both orders refused is undecided
    scored = load_result(tmp_path / "out" / "faulty")  # the candidate's own folder: its columns under their names
    assert scored["train"]["__order__"] == [1] * N + [2] * N
    winners = scored["train"]["Comparative_winner"]
    first, second = winners[:N], [{"1": "2", "2": "1"}.get(w, w) for w in winners[N:]]
    undecided = sum(1 for a, b in zip(first, second, strict=True) if a is None and b is None)
    failed = sum(w is None for w in winners)  # coverage and failures count each order, a request of its own
    assert by["faulty"]["coverage"] == pytest.approx((2 * N - failed) / (2 * N))
    assert by["faulty"]["pair_coverage"] == pytest.approx((N - undecided) / N)
    assert 0 < failed < 2 * N * 0.4
    expected = pair_verdicts(first, second, labels, resamples=0)
    assert by["faulty"]["score"] == expected["accuracy"]
    # Cohen's kappa over all pairs, an undecided pair one more value (scikit-learn)
    combined = []
    for a, b in zip(first, second, strict=True):
        s = sum({"1": 1, "2": -1}.get(w, 0) for w in (a, b) if w is not None)
        combined.append("undecided" if a is None and b is None else "1" if s > 0 else "2" if s < 0 else "tie")
    assert by["faulty"]["kappa"] == pytest.approx(cohen_kappa_score(labels, combined))
    assert by["faulty"]["failures"] == {"http_400": failed}
    # cost per 1,000 rows: every reply of 'first' is the same JSON (completion tokens = len // 4), two per row
    n_out = max(1, len(orjson.dumps(FIRST_REPLY)) // 4)
    assert by["first"]["cost_per_1000"] == pytest.approx(1000 * 2 * n_out * 2.0 / 1e6)
    assert by["first"]["cost_per_1000_batch"] == pytest.approx(by["first"]["cost_per_1000"] / 2)
    # latency: the slow server waits 50 ms before each reply (the histogram's bins are 9 % wide); an upper bound
    # would test the machine's load, not the figure
    assert by["slow"]["latency_p50_s"] > 0.045 and by["slow"]["latency_p95_s"] >= by["slow"]["latency_p50_s"]
    assert all(by[j]["latency_p50_s"] is not None for j in by)
    # the recommendation: the best, 'agree' (no other interval reaches it), whatever the price
    assert choice.recommendation["name"] == "agree" and choice.recommendation["best"] == "agree"
    saved = json.loads((tmp_path / "out" / FILE).read_text())
    assert saved["recommendation"]["name"] == "agree" and len(saved["entries"]) == 4
    # the picture (plots extra): a bar per judge with its interval, drawn from what choose_judge.json holds
    from hf_judge.results.plots import choice_png

    assert (tmp_path / "out" / "plots" / "choose_judge.png").read_bytes() == choice_png(saved)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [FILE, "choose_judge.md", "plots", "agree", "first", "faulty", "slow"]
    )
    text = str(choice)
    assert "recommended: agree" in text and "orders disagree" in text


def test_agreement_all_rows_figure_equals_the_table_for_one_judge(servers, tmp_path):
    """The shared rule: a binary judge's accuracy over all labelled rows, by `agreement` and by the table."""
    judges, prices = _judges(servers, tmp_path)
    rng = np.random.default_rng(0)
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(N)],
            "answer": [f"a{i}" for i in range(N)],
            "human": [bool(v) for v in rng.integers(0, 2, N)],
        }
    )
    columns = {"prediction": "answer"}
    choice = choose_judge(
        ds,
        "Binary",
        judges[2:],
        label="human",
        api_key="k",
        cache_dir=tmp_path / "c",
        prices=prices,
        progress=False,
        output_dir=tmp_path / "out",
        resamples=100,
        columns=columns,
    )
    scored = load_result(tmp_path / "out" / "faulty")  # the candidate's own result: its rows, errors and summary
    entry = next(e for e in choice.entries if e["judge"] == "faulty")
    assert scored.summary.model == "faulty" and scored.summary.errors == entry["failures"]
    report = agreement(scored["train"], "Binary", "__label__", errors=scored["errors"], resamples=100)
    assert entry["score"] == report.all_rows["figures"]["accuracy"]
    assert entry["coverage"] == report.all_rows["coverage"] < 1.0
    assert entry["failures"] == report.all_rows["failures"]
    # and by hand: decided and equal to the label, over all rows
    verdicts = scored["train"]["Binary"]
    hits = sum(v is not None and v == h for v, h in zip(verdicts, ds["human"], strict=True))
    assert entry["score"] == pytest.approx(hits / N)


def test_cli_choose_judge_prints_the_table_and_writes_its_files(servers, tmp_path, capfd):
    from helpers import run_cli

    judges, prices = _judges(servers, tmp_path)
    data = tmp_path / "pairs.jsonl"
    _pairs().to_json(str(data))
    spec = tmp_path / "judges.yaml"
    spec.write_text("".join(f"- {{model: {j['model']}, base_url: '{j['base_url']}'}}\n" for j in judges[1:]))
    code, out, err = run_cli(
        capfd,
        "choose-judge",
        str(data),
        "--metric",
        "Comparative",
        "--judges",
        "agree",
        "--base-url",
        judges[0]["base_url"],
        "--judges-file",
        str(spec),
        "--label",
        "human",
        "--prices",
        prices,
        "--cache-dir",
        str(tmp_path / "c"),
        "-o",
        str(tmp_path / "out"),
        "--resamples",
        "50",
        "--for",
        str(data),
    )
    assert code == 0, err
    assert "recommended: agree" in out and "scoring" in out and "requests" in out
    saved = json.loads((tmp_path / "out" / FILE).read_text())
    assert [e["judge"] for e in saved["entries"]] == ["agree", "first", "faulty", "slow"]
    assert saved["projection"]["requests"] == 2 * N  # both orders of each pair, by the recommended judge
    assert "| agree |" in (tmp_path / "out" / "choose_judge.md").read_text()


def test_a_second_run_pays_nothing_and_projects_the_cost(servers, tmp_path):
    judges, prices = _judges(servers, tmp_path)
    ds = Dataset.from_dict({"question": ["q"] * 4, "answer": ["a", "b", "c", "d"], "human": [True, False] * 2})
    kw = dict(label="human", api_key="k", cache_dir=tmp_path / "c", prices=prices, progress=False, resamples=0)
    kw["columns"] = {"prediction": "answer"}
    first = choose_judge(ds, "Binary", judges[:2], **kw)
    sent = servers[0].stats()["requests"] + servers[1].stats()["requests"]
    again = choose_judge(ds, "Binary", judges[:2], **kw)
    assert servers[0].stats()["requests"] + servers[1].stats()["requests"] == sent  # all from the reply store
    assert [e["cost_basis"] for e in first.entries] == ["replies", "replies"]
    assert [e["cost_basis"] for e in again.entries] == ["projected", "projected"]
    assert all(e["cost_per_1000"] > 0 for e in again.entries)
    assert [e["score"] for e in again.entries] == [e["score"] for e in first.entries]


# -- the paths beside the table: a public set by name, the human ceiling, ratings, self-preference


def _cli(capfd, tmp_path, *args):
    from helpers import run_cli

    code, out, err = run_cli(
        capfd, "choose-judge", *args, "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o")
    )
    assert code == 0, err
    return json.loads((tmp_path / "o" / FILE).read_text()), out


def _spec(tmp_path, judges):
    spec = tmp_path / "judges.yaml"
    spec.write_text("".join(f"- {{model: {j['model']}, base_url: '{j['base_url']}'}}\n" for j in judges))
    return str(spec)


def test_benchmark_judgebench_from_the_hub_ranks_by_judgebench_rule(hub, servers, tmp_path, capfd):
    """--benchmark judgebench: ScalerLab/JudgeBench's pairs (its exact layout, on the loopback Hub) judged in both
    orders; the correct response is the longer one on 16 of 20 pairs."""
    from test_benchmarks import _jsonl, _judgebench_rows, _upload

    judges, prices = _judges(servers, tmp_path)
    rows = _judgebench_rows("gpt-4o-2024-05-13", 20)
    for i, r in enumerate(rows):
        long, short = "L" * (60 + i), "S" * (20 + i % 7)
        a_long = i % 2 == 0
        r["response_A"], r["response_B"] = (long, short) if a_long else (short, long)
        r["label"] = "A>B" if a_long == (i % 5 != 0) else "B>A"
    other = _jsonl(_judgebench_rows("claude-3-5-sonnet-20240620", 3))
    _upload(
        "ScalerLab/JudgeBench",
        {"data/gpt-00000-of-00001.jsonl": _jsonl(rows), "data/claude-00000-of-00001.jsonl": other},
    )
    saved, out = _cli(
        capfd, tmp_path, "--benchmark", "judgebench", "--revision", "main", "--judges", "agree",
        "--base-url", judges[0]["base_url"], "--judges-file", _spec(tmp_path, judges[1:2]),
        "--prices", prices, "--resamples", "50",
    )  # fmt: skip
    assert (saved["metric"], saved["kind"], saved["rows"]) == ("Comparative", "pairwise", 20)
    by = {e["judge"]: e for e in saved["entries"]}
    assert by["agree"]["score"] == pytest.approx(16 / 20) and by["first"]["score"] == 0.0
    a_right = sum(r["label"] == "A>B" for r in rows)
    assert by["first"]["judgebench"]["single_order_accuracy"] == pytest.approx(a_right / 20)
    assert by["first"]["judgebench"]["orders_disagree"]["first_position"] == 20
    assert "recommended: agree" in out
    agree = load_result(tmp_path / "o" / "agree")["train"]  # the pairs in the set's own columns, both orders
    assert agree["response_A"][:20] == [r["response_A"] for r in rows] and len(agree) == 40


HELPSTEER = ["helpfulness", "correctness", "coherence", "complexity", "verbosity"]


def test_benchmark_helpsteer2_ratings_spearman_kendall_and_interval_as_scipy(hub, servers, tmp_path, capfd):
    """A numeric metric end to end: nvidia/HelpSteer2's 0-4 correctness ratings (its exact layout, on the loopback
    Hub) against QA_Correctness's scores; Spearman, Kendall's tau-b and the bootstrap interval as scipy gives them
    on the same resamples."""
    from scipy.stats import kendalltau, spearmanr
    from test_benchmarks import _jsonl, _upload

    a, b, _ = servers
    for s in servers:
        s.reset()
    a.configure(length_scores={"pattern": r"\bR{5,}\b", "step": 10, "noise": 1, "model": "rater"})
    rows = []
    for i in range(30):
        rating = min(4, (i % 8) // 2 + (i % 7 == 0))
        ratings = {k: (i + n) % 5 for n, k in enumerate(HELPSTEER)} | {"correctness": rating}
        rows.append({"prompt": f"p{i}", "response": "R" * (10 * (1 + i % 8)), **ratings})
    _upload(
        "nvidia/HelpSteer2",
        {"train.jsonl.gz": gzip.compress(_jsonl(rows[:3])), "validation.jsonl.gz": gzip.compress(_jsonl(rows))},
    )
    judges = [{"model": "rater", "base_url": a.base_url}, {"model": "plain", "base_url": b.base_url}]
    saved, out = _cli(
        capfd, tmp_path, "--benchmark", "helpsteer2", "--revision", "main", "--judges", "rater",
        "--base-url", a.base_url, "--judges-file", _spec(tmp_path, judges[1:]), "--resamples", "200", "--seed", "3",
    )  # fmt: skip
    assert (saved["metric"], saved["kind"], saved["headline"], saved["rows"]) == (
        "QA_Correctness", "numeric", "spearman", 30,
    )  # fmt: skip
    for e in saved["entries"]:
        scored = load_result(tmp_path / "o" / e["judge"])["train"]
        x = np.array(scored["QA_Correctness"], dtype=float)
        y = np.array(scored["correctness"], dtype=float)
        assert y.tolist() == [r["correctness"] for r in rows] and e["rated_rows"] == 30
        assert e["score"] == pytest.approx(spearmanr(x, y).statistic)
        assert e["kendall"] == pytest.approx(kendalltau(x, y).statistic)
        resampled = [spearmanr(x[r], y[r]).statistic for r in np.random.default_rng(3).integers(0, 30, (200, 30))]
        finite = np.array([v for v in resampled if np.isfinite(v)])
        assert e["interval"] == pytest.approx(np.quantile(finite, [0.025, 0.975]).tolist())
    by = {e["judge"]: e for e in saved["entries"]}
    assert by["rater"]["score"] > 0.8 > abs(by["plain"]["score"])  # the length judge follows the ratings
    assert "spearman" in out and "kendall" in out


def _annotated(n=30):
    """A Binary set with three people's verdicts (the third person skipped every seventh row)."""
    return Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(n)],
            "answer": [f"a{i}" for i in range(n)],
            "p1": [i % 2 == 0 for i in range(n)],
            "p2": [i % 3 != 0 for i in range(n)],
            "p3": [None if i % 7 == 0 else i % 5 != 0 for i in range(n)],
        }
    )


def test_the_human_ceiling_from_a_labels_file_of_three_reviewers_and_from_annotator_columns(servers, tmp_path, capfd):
    from hf_judge.analysis.ceiling import human_ceiling

    _, b, _ = servers
    b.reset()
    ds = _annotated()
    data = tmp_path / "rows.jsonl"
    ds.to_json(str(data))
    labels = tmp_path / "labels.jsonl"
    lines = [
        {"split": "train", "row": i, "label": r[p], "reviewer": p}
        for i, r in enumerate(ds.to_list())
        for p in ("p1", "p2", "p3")
        if r[p] is not None
    ]
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines))
    table = [[r["p1"], r["p2"], r["p3"]] for r in ds.to_list()]
    expected = human_ceiling(table, "binary", resamples=100, seed=0)
    saved, out = _cli(
        capfd, tmp_path, str(data), "--metric", "Binary", "--judges", "x,y", "--base-url", b.base_url,
        "--labels", str(labels), "--column", "prediction=answer", "--resamples", "100",
    )  # fmt: skip
    assert saved["ceiling"] == expected and expected["annotators"] == 3 and expected["rows"] == 30
    assert "human ceiling" in out and "Krippendorff" in out
    # the label each judge is ranked against: the three people's majority (2 of 3, or both of 2 that agree)
    majority = [None if (s := sum(v for v in r if v is not None)) * 2 == len([v for v in r if v is not None])
                else s * 2 > len([v for v in r if v is not None]) for r in table]  # fmt: skip
    scored = load_result(tmp_path / "o" / "x")["train"]
    decided = [i for i, m in enumerate(majority) if m is not None]
    assert scored["__label__"] == [majority[i] for i in decided]
    verdicts = scored["Binary"]
    hits = sum(v == majority[i] for v, i in zip(verdicts, decided, strict=True))
    assert saved["entries"][0]["score"] == pytest.approx(hits / len(decided))
    # the same people's labels as columns of the data: the same ceiling
    choice = choose_judge(
        ds, "Binary", ["x", "y"], annotators=["p1", "p2", "p3"], base_url=b.base_url, api_key="k",
        cache_dir=tmp_path / "c", progress=False, resamples=100, columns={"prediction": "answer"},
    )  # fmt: skip
    assert choice.ceiling == expected


def test_self_preference_with_a_generator_column(servers, tmp_path, capfd):
    """--generator-column: each judge's error on its own family's texts against the others', by hand."""
    _, b, _ = servers
    b.reset()
    rng = np.random.default_rng(1)
    writers = ["gpt-4o-mini" if i % 2 else "claude-3-haiku" for i in range(N)]
    ds = Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(N)],
            "answer": [f"a{i}" for i in range(N)],
            "writer": writers,
            "human": [bool(v) for v in rng.integers(0, 2, N)],
        }
    )
    data = tmp_path / "rows.jsonl"
    ds.to_json(str(data))
    saved, out = _cli(
        capfd, tmp_path, str(data), "--metric", "Binary", "--judges", "gpt-4o,claude-3-5-sonnet",
        "--base-url", b.base_url, "--label", "human", "--column", "prediction=answer", "--resamples", "0",
        "--generator-column", "writer",
    )  # fmt: skip
    for e, family in zip(saved["entries"], ("gpt", "claude"), strict=True):
        scored = load_result(tmp_path / "o" / e["judge"])["train"]
        wrong = np.array([v != h for v, h in zip(scored["Binary"], ds["human"], strict=True)])
        mine = np.array([w.startswith(family) for w in writers])
        pref = e["self_preference"]
        assert pref["own_rows"] == int(mine.sum()) == N // 2
        assert pref["own_error"] == pytest.approx(wrong[mine].mean())
        assert pref["other_error"] == pytest.approx(wrong[~mine].mean())
    assert "self-pref" in out and " vs " in out
