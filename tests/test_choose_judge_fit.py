"""choose-judge says when no candidate is fit (issue 40): the chance level in the table, no recommendation of a judge
whose interval reaches chance, the rows too few to tell candidates apart (and about how many would), pairwise
figures that count each order, the labels' own longer-wins rate beside each judge's, `agreement` on a candidate's
folder giving the table's figure, costs only where they mean something, and one candidate alone.

The judges are the loopback judge's models: its default replies are a hash of the prompt (a judge answering at
random), `length_scores` makes one prefer the longer response, and fault rules of kind "text" script a judge's
verdict row by row. Every expected figure is computed here from the judges' own folders, numpy and scikit-learn.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter

import numpy as np
import pytest
from datasets import Dataset
from helpers import run_cli
from sklearn.metrics import cohen_kappa_score

from hf_judge import agreement, choose_judge, load_result
from hf_judge.analysis.leaderboard import FILE

FIRST_REPLY = {"score_1": 9, "score_2": 2, "explanation": "the first"}
LONGER = {"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"}  # "agree" prefers the longer response
R = 1000  # the default resamples: intervals as choose-judge shows them


def _pairs(labels_longer: list[bool]) -> Dataset:
    """Pairs whose labelled winner is the longer response where ``labels_longer[i]``; the longer one shown first
    on even rows."""
    q, r1, r2, label = [], [], [], []
    for i, longer_wins in enumerate(labels_longer):
        long, short = "L" * (60 + i), "S" * (20 + i % 7)
        first_long = i % 2 == 0
        q.append(f"question {i}")
        r1.append(long if first_long else short)
        r2.append(short if first_long else long)
        longer = "1" if first_long else "2"
        label.append(longer if longer_wins else {"1": "2", "2": "1"}[longer])
    return Dataset.from_dict({"question": q, "response1": r1, "response2": r2, "human": label})


def _first(model: str = "first") -> dict:
    """A judge that always prefers the response shown first (its every reply scripted)."""
    return {"fault": "text", "model": model, "text": json.dumps(FIRST_REPLY)}


def _verdicts(model: str, verdicts: list[bool]) -> list[dict]:
    """A Binary judge answering ``verdicts[i]`` on row i (whose answer is ``ans{i:03d}.``)."""
    return [
        {"fault": "text", "model": model, "match": f"ans{i:03d}.", "text": json.dumps({"verdict": "1" if v else "0"})}
        for i, v in enumerate(verdicts)
    ]


def _rows(labels: list[bool]) -> Dataset:
    n = len(labels)
    return Dataset.from_dict({"question": [f"q{i}" for i in range(n)], "answer": [f"ans{i:03d}." for i in range(n)],
                              "human": labels})  # fmt: skip


def _run(ds, metric, judges, judge, tmp_path, **kw):
    kw.setdefault("label", "human")
    if metric == "Binary":
        kw["columns"] = {"prediction": "answer"}
    return choose_judge(
        ds, metric, judges, base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False,
        output_dir=tmp_path / "o", retries=0, **kw,
    )  # fmt: skip


def _folder_pairs(tmp_path, name, n):
    """A candidate's folder read by hand: each pair's first-order winner, second-order winner in the labels'
    terms, and the label (the first order's row)."""
    rows = load_result(tmp_path / "o" / name)["train"]
    assert rows["__order__"] == [1] * n + [2] * n
    w = rows["Comparative_winner"]
    back = {"1": "2", "2": "1"}
    return w[:n], [back.get(x, x) for x in w[n:]], rows["__label__"][:n]


def _judgebench(first, second, labels):
    """JudgeBench's rule by hand: +1 / -1 per order, 0 for a tie or nothing; right when the sum is above 0."""

    def vote(w, lab):
        return 0 if w not in ("1", "2") else 1 if w == lab else -1

    votes = [vote(a, lab) + vote(b, lab) for a, b, lab in zip(first, second, labels, strict=True)]
    return np.array([v > 0 for v in votes], dtype=float)


def _interval(hits: np.ndarray, seed: int = 0) -> list[float]:
    """The seeded percentile bootstrap of a rate (1,000 resamples of the rows, 95 %), by hand."""
    idx = np.random.default_rng(seed).integers(0, len(hits), (R, len(hits)))
    return np.quantile(hits[idx].mean(axis=1), [0.025, 0.975]).tolist()


def _kappa(truth, pred) -> float:
    with warnings.catch_warnings():  # a resample of one value: undefined (NaN), left out below
        warnings.simplefilter("ignore")
        return cohen_kappa_score(truth, pred)


def _kappa_interval(truth: list, pred: list, seed: int = 0) -> list[float]:
    """Cohen's kappa on the same resamples (scikit-learn's), a resample where it is undefined left out."""
    t, p = np.array(truth), np.array(pred)
    idx = np.random.default_rng(seed).integers(0, len(t), (R, len(t)))
    got = np.array([_kappa(t[i], p[i]) for i in idx])
    return np.quantile(got[~np.isnan(got)], [0.025, 0.975]).tolist()


def _about(n: int) -> str:
    if n < 100:
        return str(n)
    step = 10 ** (len(str(n)) - 2)
    return f"{-(-n // step) * step:,}"


# -- item 2: the chance level, and no recommendation of a judge that cannot be told from it


def test_no_candidate_is_fit_when_every_interval_reaches_chance(judge, tmp_path):
    """A judge answering at random and one that always picks the response shown first, on 60 labelled pairs: the
    table shows chance (the majority label's share, kappa 0), marks both not beyond chance, and recommends
    nothing (it recommended the random one: 27 % on 281 real pairs)."""
    n = 60
    ds = _pairs([i % 5 != 0 for i in range(n)])
    judge.configure(faults=[_first()])
    choice = _run(ds, "Comparative", ["random", "first"], judge, tmp_path)
    assert choice.recommendation["name"] is None  # it recommended the random one
    labels = ds["human"]
    label, count = Counter(labels).most_common(1)[0]
    chance = count / n
    assert choice.chance["score"] == pytest.approx(chance) and choice.chance["kappa"] == 0.0
    by = {e["judge"]: e for e in choice.entries}
    for name in ("random", "first"):
        correct = _judgebench(*_folder_pairs(tmp_path, name, n))
        assert by[name]["score"] == pytest.approx(correct.mean())
        assert by[name]["interval"] == pytest.approx(_interval(correct))
        assert by[name]["interval"][0] <= chance  # reaches chance: not fit
    assert choice.recommendation["name"] is None and choice.recommendation["fit"] == []
    text = str(choice)
    table = text.splitlines()
    assert table[-len(choice.lines()) - 1].split() == ["chance:", "always", f"'{label}'", f"{chance:.1%}", "0"]
    assert [line.split()[4] for line in table[2:4]] == ["no", "no"]  # the "beyond chance" column
    assert not any(line.startswith("recommended:") for line in table)
    assert "nothing recommended: no candidate is fit, none can be told from chance" in text
    best = max(choice.entries, key=lambda e: e["score"])["judge"]
    assert f"{best}'s figure is at or below chance: more labelled pairs would not make it fit" in text
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    assert saved["recommendation"]["name"] is None and saved["chance"]["score"] == pytest.approx(chance)


def test_six_rows_are_too_few_and_the_table_says_how_many_would_do(judge, tmp_path):
    """On 6 pairs a judge right on 5 (83 %) has an interval down to 50 %, below chance (4 of 6 labels alike): not
    recommended, and the line says about how many pairs would lift its interval above chance if its figures held."""
    longer_wins = [True, True, True, False, True, True]
    ds = _pairs(longer_wins)
    judge.configure(length_scores=LONGER, faults=[_first()])
    choice = _run(ds, "Comparative", ["agree", "first"], judge, tmp_path)
    labels = ds["human"]
    chance = Counter(labels).most_common(1)[0][1] / 6
    first, second, folder_labels = _folder_pairs(tmp_path, "agree", 6)
    assert folder_labels == labels
    correct = _judgebench(first, second, labels)
    score, (lo, hi) = correct.mean(), _interval(correct)
    # kappa of the pair's winner (both orders' votes summed), its interval on the same resamples
    winners = [
        "1" if (a == "1") + (b == "1") > (a == "2") + (b == "2") else "2" for a, b in zip(first, second, strict=True)
    ]
    kappa = _kappa(labels, winners)
    klo, _ = _kappa_interval(labels, winners)
    agree = next(e for e in choice.entries if e["judge"] == "agree")
    assert agree["score"] == pytest.approx(5 / 6) == pytest.approx(score)
    assert agree["interval"] == pytest.approx([lo, hi]) and lo <= chance
    assert agree["kappa"] == pytest.approx(kappa) and agree["kappa_interval"][0] == pytest.approx(klo)
    assert choice.recommendation["name"] is None  # it recommended the best of the two
    # the rows that would lift both intervals above chance: each half-width narrowing as 1/sqrt(rows)
    need = max(math.ceil(round(6 * ((score - lo) / (score - chance)) ** 2, 9)),
               math.ceil(round(6 * ((kappa - klo) / kappa) ** 2, 9)))  # fmt: skip
    assert choice.recommendation["rows_needed"] == need
    assert (
        f"about {_about(need)} labelled pairs would lift agree's interval above chance, if its figures held "
        "(these are 6)" in str(choice)
    )


def test_two_fit_judges_too_close_to_tell_apart_and_cheaper_only_among_the_priced(judge, tmp_path):
    """Two scripted Binary judges right on 36 and 33 of 40 rows: both beyond chance, their intervals overlap. The
    priced one is recommended as the cheapest only of those with a price, and the line says the rows are too few
    to tell them apart, with about how many would (if the figures held)."""
    n = 40
    labels = [i % 2 == 0 for i in range(n)]
    good = [(not v) if i in (1, 6, 11, 16) else v for i, v in enumerate(labels)]  # wrong on 4
    fine = [(not v) if i in (2, 3, 8, 13, 21, 30, 33) else v for i, v in enumerate(labels)]  # wrong on 7
    judge.configure(faults=_verdicts("good", good) + _verdicts("fine", fine))
    prices = tmp_path / "prices.yaml"
    prices.write_text("good: {input: 1, output: 2}\n")
    choice = _run(_rows(labels), "Binary", ["good", "fine"], judge, tmp_path, prices=str(prices))
    by = {e["judge"]: e for e in choice.entries}
    hits = {name: np.array([a == b for a, b in zip(v, labels, strict=True)], dtype=float)
            for name, v in (("good", good), ("fine", fine))}  # fmt: skip
    for name in ("good", "fine"):
        assert by[name]["score"] == pytest.approx(hits[name].mean())
        assert by[name]["interval"] == pytest.approx(_interval(hits[name]))
        assert by[name]["interval"][0] > 0.5 and by[name]["kappa_interval"][0] > 0  # beyond chance
    (glo, ghi), (flo, fhi) = by["good"]["interval"], by["fine"]["interval"]
    assert flo <= ghi and glo <= fhi  # they overlap
    line = next(x for x in choice.lines() if x.startswith("recommended:"))
    assert "and the cheapest of them" not in line  # fine has no price: nothing says good is cheaper than it
    assert "the cheapest of those with a known price (fine has none: --prices FILE)" in line
    r = choice.recommendation
    assert (r["name"], r["by"], r["as_good"], r["unpriced"]) == ("good", "price", ["good", "fine"], ["fine"])
    assert by["fine"]["cost_per_1000"] is None
    gap, width = 36 / 40 - 33 / 40, (36 / 40 - glo) + (fhi - 33 / 40)
    need = math.ceil(round(n * (width / gap) ** 2, 9))
    assert r["rows_needed"] == need
    assert (
        f"too few rows to tell good from fine apart (their intervals overlap): about {_about(need)} labelled rows "
        f"would, if the figures held (these are {n})" in str(choice)
    )


def test_the_recommendation_claims_cheaper_only_where_prices_say_so():
    """Judges as good as each other (both beyond chance): with prices, the cheapest, said so; without any price,
    the best score, and the line says that none is known to be cheaper (it said "and cheaper" of two judges with
    no price)."""
    from hf_judge.analysis.leaderboard import JudgeChoice, recommend

    def entries(price_a, price_b):
        return [
            {"name": "a", "score": 0.80, "interval": [0.7, 0.9], "cost_per_1000": price_a},
            {"name": "b", "score": 0.78, "interval": [0.68, 0.88], "cost_per_1000": price_b},
        ]

    chance = {"kind": "binary", "score": 0.5, "kappa": 0.0, "label": True}
    priced = JudgeChoice("Binary", "binary", 40, "accuracy", entries(2.0, 0.5), chance=chance)
    priced.recommendation = recommend(priced.entries, chance, 40)
    assert priced.recommendation["name"] == "b" and priced.recommendation["by"] == "price"
    assert "recommended: b (as good as a on these labels (intervals overlap) and the cheapest of them;" in str(
        priced.lines()
    )
    unpriced = JudgeChoice("Binary", "binary", 40, "accuracy", entries(None, None), chance=chance)
    unpriced.recommendation = recommend(unpriced.entries, chance, 40)
    assert unpriced.recommendation["name"] == "a" and unpriced.recommendation["by"] == "score"
    line = next(x for x in unpriced.lines() if x.startswith("recommended:"))
    assert "cheaper" not in line.split("without")[0] and "none is known to be cheaper" in line, line


# -- item 3: pairwise figures that count each order; length; the rule; agreement on the same replies


def test_coverage_and_failures_count_each_failed_order(judge, tmp_path):
    """6 pairs, the judge's first order of pairs 1 and 4 refused (400): 2 of 12 order-rows failed, so coverage
    10/12 and failures http_400 2 (the table showed 100 % and none: each pair still had one order)."""
    ds = _pairs([True] * 6)
    refused = [
        {"fault": "status", "status": 400, "model": "faulty", "match": f"[Assistant 1]\n{ds[i]['response1']}\n"}
        for i in (1, 4)
    ]
    judge.configure(length_scores=LONGER, faults=refused)
    choice = _run(ds, "Comparative", ["faulty", "agree"], judge, tmp_path, resamples=100)
    rows = load_result(tmp_path / "o" / "faulty")
    winners = rows["train"]["Comparative_winner"]
    assert [i for i, w in enumerate(winners) if w is None] == [1, 4]  # the first order of pairs 1 and 4
    faulty = next(e for e in choice.entries if e["judge"] == "faulty")
    assert faulty["coverage"] == pytest.approx(10 / 12)
    assert faulty["failures"] == {"http_400": 2} == dict(Counter(rows["errors"]["kind"]))
    assert faulty["pair_coverage"] == 1.0  # every pair has an order decided
    row = next(line for line in str(choice).splitlines() if line.startswith("faulty "))
    assert "83.3%" in row.split() and "http_400 2" in row
    assert "coverage (orders)" in str(choice) and "failures (orders)" in str(choice)


def test_length_bias_per_candidate_beside_the_labels_and_the_rule_in_the_header(judge, tmp_path):
    """P(the judge prefers the longer response) per candidate, over every order it judged, beside the labels' own
    longer-wins rate (a judge built to prefer the longer showed "-"); the header names JudgeBench's rule; the
    missing human ceiling says why."""
    n = 40
    ds = _pairs([i % 5 != 0 for i in range(n)])  # the labels name the longer response on 32 of 40
    judge.configure(length_scores=LONGER, faults=[_first()])
    choice = _run(ds, "Comparative", ["agree", "first"], judge, tmp_path, resamples=100)
    for e in choice.entries:
        rows = load_result(tmp_path / "o" / e["judge"])["train"]
        longer = ["1" if len(a) > len(b) else "2" for a, b in zip(rows["response1"], rows["response2"], strict=True)]
        picked = [w == lng for w, lng in zip(rows["Comparative_winner"], longer, strict=True) if w in ("1", "2")]
        assert e["longer_wins"]["rate"] == pytest.approx(np.mean(picked))
        assert e["longer_wins"]["n"] == len(picked) == 2 * n
    by = {e["judge"]: e for e in choice.entries}
    assert by["agree"]["longer_wins"]["rate"] == 1.0 and by["first"]["longer_wins"]["rate"] == 0.5
    longer = ["1" if len(a) > len(b) else "2" for a, b in zip(ds["response1"], ds["response2"], strict=True)]
    named = [h == g for h, g in zip(ds["human"], longer, strict=True)]
    assert choice.label_longer_wins["rate"] == pytest.approx(np.mean(named))
    assert choice.label_longer_wins["rate"] == 0.8
    lines = str(choice).splitlines()
    assert lines[0].startswith("Judges on 40 labelled pairs (Comparative, pairwise); JudgeBench's rule: a pair is")
    assert "prefers longer (labels 80%)" in lines[1]
    agree_row = next(line for line in lines if line.startswith("agree "))
    assert "100% [100%, 100%]" in agree_row
    assert "human ceiling: none: one label per row" in str(choice)
    md = (tmp_path / "o" / "choose_judge.md").read_text()
    assert "JudgeBench's rule: a pair is right" in md and "| chance: always" in md


def test_agreement_on_a_candidates_folder_gives_the_tables_figure(judge, tmp_path, capfd):
    """`agreement` on a candidate's folder (both orders of each pair as rows) gives the table's figure and
    interval by JudgeBench's rule, and says its other figures count each order as a row (0.463 vs 27.0 % on real
    data). Each row holds the label in its own terms: the judge that prefers the longer response agrees on 80 %
    of rows, as on 80 % of pairs (half its rows disagreed with the label written in the other order's terms)."""
    n = 40
    ds = _pairs([i % 5 != 0 for i in range(n)])
    judge.configure(length_scores=LONGER)
    choice = _run(ds, "Comparative", ["agree", "random"], judge, tmp_path)
    for e in choice.entries:
        report = agreement(load_result(tmp_path / "o" / e["judge"]), "Comparative", "__label__", resamples=R)
        found = report.rules["judgebench"]
        assert (found["pairs"], found["accuracy"]) == (n, pytest.approx(e["score"]))
        assert found["interval"] == pytest.approx(e["interval"])
    agree = load_result(tmp_path / "o" / "agree")["train"]
    hits = [w == lab for w, lab in zip(agree["Comparative_winner"], agree["__label__"], strict=True)]
    assert np.mean(hits) == 0.8
    report = agreement(load_result(tmp_path / "o" / "agree"), "Comparative", "__label__", resamples=0)
    assert report.figures["agreement"] == 0.8
    random = next(e for e in choice.entries if e["judge"] == "random")
    code, out, err = run_cli(
        capfd, "agreement", tmp_path / "o" / "random", "--score", "Comparative", "--label", "__label__"
    )
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("JudgeBench's rule"))
    assert f"(choose-judge's table): accuracy {random['score']:.3f}" in line and f"over {n} pairs" in line
    assert "the other figures count each order of a pair as a row of its own" in line


# -- item 4: costs only where prices mean something


def test_a_judge_that_decided_no_row_shows_no_cost(judge, tmp_path):
    """A priced judge whose every reply is no JSON ($0 per 1,000 rows, which read as the cheapest) and one whose
    every request is refused (a projected cost): both show no cost, and the note says why."""
    labels = [i % 2 == 0 for i in range(12)]
    judge.configure(
        faults=[
            *_verdicts("ok", labels),
            {"fault": "invalid_body", "model": "garbled"},
            {"fault": "status", "status": 400, "model": "refused"},
        ]
    )
    prices = tmp_path / "prices.yaml"
    prices.write_text("ok: {input: 1, output: 2}\ngarbled: {input: 1, output: 2}\nrefused: {input: 1, output: 2}\n")
    choice = _run(_rows(labels), "Binary", ["ok", "garbled", "refused"], judge, tmp_path, prices=str(prices))
    by = {e["judge"]: e for e in choice.entries}
    assert by["ok"]["cost_per_1000"] > 0 and by["ok"]["coverage"] == 1.0
    for name in ("garbled", "refused"):
        assert by[name]["coverage"] == 0.0
        assert by[name]["cost_per_1000"] is None and by[name]["cost_per_1000_batch"] is None
        row = next(line for line in str(choice).splitlines() if line.startswith(f"{name} "))
        assert "$" not in row
    assert "garbled, refused decided no row: no cost is shown" in str(choice)
    assert choice.recommendation["name"] == "ok"


# -- item 5: one candidate; --judges-file alone


def test_one_candidate_is_measured_and_nothing_is_compared(judge, tmp_path):
    n = 30
    labels = [i % 3 != 0 for i in range(n)]
    verdicts = [(not v) if i in (4, 9) else v for i, v in enumerate(labels)]
    judge.configure(faults=_verdicts("solo", verdicts))
    choice = _run(_rows(labels), "Binary", ["solo"], judge, tmp_path)
    (entry,) = choice.entries
    hits = np.array([a == b for a, b in zip(verdicts, labels, strict=True)], dtype=float)
    assert entry["score"] == pytest.approx(28 / 30) == pytest.approx(hits.mean())
    assert entry["interval"] == pytest.approx(_interval(hits))
    assert entry["kappa"] == pytest.approx(cohen_kappa_score(labels, verdicts))
    assert choice.recommendation["name"] == "solo" and choice.recommendation["compared"] == 1
    assert "recommended: solo (the only candidate, so nothing was compared; beyond chance" in str(choice)
    rows = load_result(tmp_path / "o" / "solo")["train"]
    assert rows["Binary"] == verdicts  # its folder holds its verdicts, under their own names


def test_cli_judges_file_alone_is_enough(judge, tmp_path, capfd):
    n = 12
    labels = [i % 2 == 0 for i in range(n)]
    judge.configure(faults=_verdicts("a", labels) + _verdicts("b", labels[::-1]))
    data = tmp_path / "rows.jsonl"
    _rows(labels).to_json(str(data))
    spec = tmp_path / "judges.yaml"
    spec.write_text(f"- {{model: a, base_url: '{judge.base_url}'}}\n- {{model: b, base_url: '{judge.base_url}'}}\n")
    common = [data, "--metric", "Binary", "--label", "human", "--column", "prediction=answer",
              "--cache-dir", tmp_path / "c"]  # fmt: skip
    code, out, err = run_cli(capfd, "choose-judge", *common, "--judges-file", spec, "-o", tmp_path / "o")
    assert code == 0, err
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    assert [e["judge"] for e in saved["entries"]] == ["a", "b"]
    assert saved["entries"][0]["score"] == 1.0 and saved["recommendation"]["name"] == "a"
    sent = judge.stats()["requests"]
    assert sent == 2 * n
    code, out, err = run_cli(capfd, "choose-judge", *common, "--judges", "", "--base-url", judge.base_url)
    assert code != 0 and "--judges-file" in err and "give the candidate judges" in err
    assert judge.stats()["requests"] == sent  # refused before any request
