"""The published rules of a pairwise judge (hf_judge.analysis.rules; choose-judge --rule, agreement --rule).

Each rule against a hand-worked example taken from its paper's own code (the examples and their upstream runs:
the research notes of issue 43, FINDINGS.md), then end to end: choose-judge on the loopback judge server under
each rule, and agreement --rule on a candidate's folder equal to choose-judge's figure."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import Dataset
from helpers import longer_pairs
from judge_fixture import JudgeServer

from hf_judge import agreement, load_result
from hf_judge.analysis import rules
from hf_judge.analysis.leaderboard import FILE
from hf_judge.errors import ConfigError

# -- each rule against its paper's code


def test_judgebench_as_compute_final_metrics():
    """ScalerLab/JudgeBench utils/metrics.py, compute_final_metrics (reverse_order=True; and single_game): 8
    pairs, the second order already flipped back (flip_judgment). Overall 62.5; by category (run_judge.py main's
    source prefixes) mmlu-pro 100, livebench-reasoning 50, livebench-math 50, livecodebench 50; single game 37.5."""
    source = ["mmlu-pro", "mmlu-pro", "reasoning", "reasoning", "math", "math", "code", "code"]
    first = ["1", "1", "tie", "1", None, None, "2", "2"]
    second = ["1", "tie", "2", "2", "1", None, "2", "2"]
    labels = ["1", "1", "2", "2", "1", "2", "1", "2"]
    r = rules.judgebench(first, second, labels, resamples=0)
    assert r["score"] == 0.625
    assert (r["correct"], r["incorrect"], r["tie"], r["inconsistent"]) == (5, 1, 2, 4)
    by = {}
    for s in dict.fromkeys(source):
        i = [k for k, x in enumerate(source) if x == s]
        by[s] = rules.judgebench(*([v[k] for k in i] for v in (first, second, labels)), resamples=0)["score"]
    assert by == {"mmlu-pro": 1.0, "reasoning": 0.5, "math": 0.5, "code": 0.5}
    assert rules.judgebench(first, None, labels, resamples=0)["score"] == 0.375


def test_llmbar_as_its_statistics_block():
    """princeton-nlp/LLMBar LLMEvaluator/evaluate.py, the statistics block of __main__ (statistics.json): 7
    pairs give correct_False 3/7, correct_True 4/7, correct_average 50.0%, correct_both 2/7, equal 4/7 (two
    unparsed verdicts count as equal)."""
    r = rules.llmbar(
        ["1", "1", None, None, "2", "2", "1"], ["1", "2", "1", None, "2", "2", "2"],
        ["1", "2", "1", "2", "2", "1", "1"], resamples=0,
    )  # fmt: skip
    assert r["score"] == 0.5
    assert (r["correct_first"], r["correct_second"], r["correct_both"], r["equal"]) == (3, 4, 2, 4)
    assert r["orders_agree"] == pytest.approx(4 / 7)


HUMANS = [["1", "1", "1", "2"], ["2", "2", "1", "1"], ["2"] * 4, ["1", "2", "2", "2"], ["1", "1", "2", "1"],
          ["1", "2", "1", "2"]]  # fmt: skip


def test_alpacaeval_as_agreement_of_annotations():
    """tatsu-lab/alpaca_eval src/alpaca_eval/analyze.py, Analyzer.agreement_of_annotations (n_majority_vote_1=1,
    against the 4 gold cross-annotations; scoring rule "absolute", metrics/helpers.py AbsoluteScoringRule._score,
    the target _random_mode): 6 pairs, 4 people each; a 2-2 split goes to the larger preference; the judge's tie
    earns 0.5 and its unparsed verdict is dropped: 0.70, 5 parsed, Proba. prefer 1 0.5. Both orders as two runs
    (the second flipped back: P1 1, P2 2, P3 1, P4 2, P5 1, P6 unparsed): the mean of the runs, 0.75."""
    judge = ["1", "1", "tie", "2", None, "2"]
    r = rules.alpacaeval(judge, None, [None] * 6, votes=HUMANS, resamples=0)
    assert r["score"] == pytest.approx(0.70) and r["parsed"] == 5 and r["prefers_first"] == pytest.approx(0.5)
    both = rules.alpacaeval(judge, ["1", "2", "1", "2", "1", None], [None] * 6, votes=HUMANS, resamples=0)
    assert both["score"] == pytest.approx(0.75) and both["parsed"] == 10
    # _random_mode: Series.mode() (sorted), then .sample(1, random_state=123)
    assert [rules.mode(v) for v in ([1, 2], [1, 1.5], [1.5, 2], [1, 1.5, 2], [2, 1, 1.5])] == [2, 1.5, 2, 1, 1]


def test_mt_bench_as_get_mt_bench_agreement():
    """lm-sys/FastChat fastchat/llm_judge/compute_agreement.py, get_mt_bench_agreement (gpt4-pair vs human, turn
    1) on the pair's vote from both orders (show_result.py display_result_pairwise: orders that disagree are a
    tie): keys 81-86 of the notes give 5/9 with ties and 4/5 without; key 85 (an order unparsed) has no vote."""
    r = rules.mt_bench(
        ["2", "1", "1", "2", "2", "1"], ["2", "2", "1", "2", None, "1"], [None] * 6,
        votes=[["2", "2"], ["1", "tie"], ["1", "2", "tie"], ["tie"], [], ["1"]], resamples=0,
    )  # fmt: skip
    assert (r["agree"], r["total"], r["score"]) == (5, 9, pytest.approx(5 / 9))
    assert (r["without_ties"]["agree"], r["without_ties"]["total"], r["without_ties"]["score"]) == (4, 5, 0.8)
    assert r["no_vote"] == 1


def test_mt_bench_human_human_as_get_mt_bench_agreement():
    """lm-sys/FastChat fastchat/llm_judge/compute_agreement.py, get_mt_bench_agreement with judge1 = judge2 =
    "human" (every two expert votes i < j on a key; a banned tie on either side skips the two): keys 81-86 of the
    notes, experts only (key 81's author vote is not "human", get_judge_name): 1/5 with ties, 1/2 without."""
    experts = [["2", "2"], ["1", "tie"], ["1", "2", "tie"], ["tie"], [], ["1"]]
    r = rules.mt_bench_humans(experts, resamples=0)
    assert (r["agree"], r["total"], r["score"]) == (1, 5, 0.2)
    assert (r["without_ties"]["agree"], r["without_ties"]["total"], r["without_ties"]["score"]) == (1, 2, 0.5)
    assert r["pairs"] == 3  # keys with two votes or more
    with_author = rules.mt_bench_humans([["2", "2", "1"], *experts[1:]], resamples=0)
    assert (with_author["agree"], with_author["total"]) == (1, 7)  # what counting the author would give
    assert rules.humans(experts, "mt-bench", resamples=0) == r and rules.humans(experts, "llmbar") is None
    lo, hi = rules.mt_bench_humans(experts * 5, resamples=200)["interval"]
    assert lo <= 0.2 <= hi


def test_alpacaeval_humans_leave_one_out_as_agreement_of_annotations():
    """tatsu-lab/alpaca_eval src/alpaca_eval/analyze.py, Analyzer.agreement_of_annotations on the gold
    cross-annotations against themselves (get_metrics_evaluator's humans: n_majority_vote_1=1, the other three's
    _random_mode as target, overlapping index sets skipped): the notes' 6 pairs give 13/24 = 0.5416667 (a 2-2 pair
    scores 0: each leave-out mode is the opposite vote)."""
    r = rules.alpacaeval_humans(HUMANS, resamples=0)
    assert (r["agree"], r["total"], r["pairs"]) == (13, 24, 6) and r["score"] == pytest.approx(13 / 24)
    # a tie vote (1.5) earns 0.5 against a mode of 1 or 2; a pair with one vote is not compared
    tie = rules.alpacaeval_humans([["1", "1", "1", "tie"], ["2"]], resamples=0)
    assert (tie["agree"], tie["total"], tie["pairs"]) == (3.5, 4, 1)


def test_llmbar_adversarial_is_the_mean_of_its_subsets_not_pooled():
    """princeton-nlp/LLMBar: LLMEvaluator/evaluate.py's statistics block runs per Dataset/LLMBar subset
    (statistics.json's correct_average each), and the paper's Adversarial column is the unweighted mean of the four
    adversarial subsets' figures (GPT-4: 85.4 / 89.7 / 72.3 / 83.7 -> 82.8; pooled it would be 84.5). Hand-worked,
    a judge right in both orders or in neither: Natural 2/2; Adversarial/Neighbor 1/3; Adversarial/GPTOut 1/2:
    Adversarial (1/3 + 1/2) / 2 = 5/12 (pooled 2/5); the headline over all pairs 4/7. RewardBench's names
    (llmbar-adver-*) are adversarial too."""
    subsets = ["Natural"] * 2 + ["Adversarial/Neighbor"] * 3 + ["Adversarial/GPTOut"] * 2
    verdicts = ["1", "1", "1", "2", "2", "1", "2"]
    r = rules.llmbar(verdicts, verdicts, ["1"] * 7, subsets=subsets, resamples=0)
    assert r["score"] == pytest.approx(4 / 7)
    assert r["subsets"] == pytest.approx({"Natural": 1.0, "Adversarial/Neighbor": 1 / 3, "Adversarial/GPTOut": 0.5})
    assert r["adversarial"] == pytest.approx(5 / 12) and r["adversarial_subsets"] == 2
    named = ["llmbar-natural"] * 2 + ["llmbar-adver-neighbor"] * 3 + ["llmbar-adver-GPTOut"] * 2
    assert rules.llmbar(verdicts, verdicts, ["1"] * 7, subsets=named, resamples=0)["adversarial"] == r["adversarial"]
    assert "adversarial" not in rules.llmbar(verdicts, verdicts, ["1"] * 7, resamples=0)
    both = rules.figures(verdicts, verdicts, ["1"] * 7, subsets=subsets, resamples=0)
    assert both["llmbar"]["adversarial"] == r["adversarial"] and "subsets" in both["rewardbench"]


RB_SUBSETS = ["alpacaeval-easy", "alpacaeval-easy", "mt-bench-easy", "llmbar-natural", "llmbar-adver-neighbor",
              "refusals-dangerous", "math-prm", "hep-python"]  # fmt: skip


def test_rewardbench_as_calculate_scores_per_section():
    """allenai/reward-bench scripts/run_generative.py (1 / 0 / 0.5 per pair, results_grouped per subset) and
    rewardbench/utils.py calculate_scores_per_section with constants.EXAMPLE_COUNTS, then
    analysis/get_benchmark_results.py get_average_over_rewardbench (Prior Sets absent): Chat 0.5, Chat Hard
    167/234, Safety 1.0, Reasoning 6/7, overall 0.7677045 (the pooled mean would be 0.625)."""
    shown = ["1", "2", "tie", "1", None, "1", "1", "2"]  # the order already drawn; every label "1"
    r = rules.rewardbench(shown, None, ["1"] * 8, subsets=RB_SUBSETS, resamples=0)
    assert r["sections"] == pytest.approx({"Chat": 0.5, "Chat Hard": 167 / 234, "Safety": 1.0, "Reasoning": 6 / 7})
    assert r["score"] == pytest.approx(0.7677045, abs=1e-7)
    lo, hi = rules.rewardbench(shown, None, ["1"] * 8, subsets=RB_SUBSETS, resamples=200)["interval"]
    assert lo <= r["score"] <= hi


def test_rewardbench_draws_one_order_per_pair_with_the_seed():
    """Upstream draws np.random.rand() > 0.5 per pair, unseeded; here the seed's draw: the same seed the same
    orders, each pair scored by exactly one of its orders."""
    first, second, labels = ["1"] * 200, ["2"] * 200, ["1"] * 200  # right as given, wrong swapped
    a = rules.rewardbench(first, second, labels, resamples=0, seed=3)
    assert a["score"] == rules.rewardbench(first, second, labels, resamples=0, seed=3)["score"]
    drawn = np.random.default_rng(3).random(200) > 0.5
    assert a["score"] == pytest.approx(1 - drawn.mean()) and 0.35 < a["score"] < 0.65


def test_a_bad_rule_name_and_a_rule_that_does_not_apply_are_refused():
    with pytest.raises(ConfigError, match=r"no rule 'mtbench'; did you mean 'mt-bench'\? The rules: judgebench, "):
        rules.check_rule("mtbench", "pairwise", True)
    with pytest.raises(ConfigError, match=r"the rule 'llmbar' scores pairwise winners, and this metric is numeric"):
        rules.check_rule("llmbar", "numeric", False)
    with pytest.raises(ConfigError, match=r"the rule 'mt-bench' needs both orders"):
        rules.check_rule("mt-bench", "pairwise", False)
    assert rules.check_rule("alpacaeval", "pairwise", False) == "alpacaeval"


# -- end to end: choose-judge on the loopback judge under each rule; agreement --rule equal to it

N = 30


@pytest.fixture(scope="module")
def server():
    with JudgeServer() as s:
        yield s


def _pairs() -> Dataset:
    """The label is the longer response on 80 % of pairs (rows 0, 5, 10, ...: the shorter one)."""
    return longer_pairs(N)


def _setup(server, tmp_path):
    server.reset()
    server.configure(
        length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"},
        model_overrides={"first": {"score_1": 9, "score_2": 2}},
    )  # noisy: the server's hash scores per prompt (ties, orders that disagree)
    data = tmp_path / "pairs.jsonl"
    _pairs().to_json(str(data))
    return str(data), ["agree", "first", "noisy"]


def _choose(capfd, server, tmp_path, data, judges, *extra):
    from helpers import run_cli

    return run_cli(
        capfd, "choose-judge", data, "--metric", "Comparative", "--judges", ",".join(judges), "--base-url",
        server.base_url, "--label", "human", "--cache-dir", str(tmp_path / "c"),
        "--resamples", "50", *extra,
    )  # fmt: skip


def test_choose_judge_under_each_rule_and_agreement_rule_equal_to_it(server, tmp_path, capfd):
    from helpers import run_cli

    data, judges = _setup(server, tmp_path)
    sent = None
    for rule in rules.NAMES:
        out_dir = tmp_path / rule
        code, out, err = _choose(capfd, server, tmp_path, data, judges, "--rule", rule, "-o", out_dir)
        assert code == 0, err
        requests = server.stats()["requests"]
        assert requests == (sent if sent is not None else 2 * N * len(judges))  # the rule changes no request
        sent = requests
        assert f"labelled pairs (Comparative, pairwise); {rules.DESCRIPTIONS[rule]}" in out  # the header names it
        saved = json.loads((out_dir / FILE).read_text())
        assert saved["rule"] == rule and saved["headline"] == rule
        by = {e["judge"]: e for e in saved["entries"]}
        truth = _pairs()["human"]
        for judge, e in by.items():
            assert sorted(e["rules"]) == sorted(rules.NAMES)  # every rule's figures, whichever is the headline
            assert (e["score"], e["interval"]) == (e["rules"][rule]["score"], e["rules"][rule]["interval"])
            # the candidate's folder holds both orders as rows: the rule's figures are computed from them
            folder = load_result(out_dir / judge)["train"]
            winners = folder["Comparative_winner"]
            assert e["rules"][rule]["score"] == rules.of_winners(winners, truth, True, resamples=0)[rule]["score"]
            # agreement --rule on the same replies gives the same figure and interval
            report = agreement(folder, "Comparative", "__label__", rule=rule, resamples=50)
            assert (report.rules[rule]["score"], report.rules[rule]["interval"]) == (e["score"], e["interval"])
        # agree prefers the longer response in both orders: every rule gives 0.8; first always picks the response
        # shown first: its orders cancel (judgebench 0), exactly one order is right (llmbar, alpacaeval 0.5), its
        # orders always disagree (mt-bench: a tie, never a label)
        assert by["agree"]["score"] == pytest.approx(0.8)
        assert by["first"]["score"] == pytest.approx(
            {"judgebench": 0.0, "llmbar": 0.5, "alpacaeval": 0.5, "mt-bench": 0.0}.get(rule, by["first"]["score"])
        )
        assert saved["recommendation"]["best"] == max(by.values(), key=lambda e: e["score"])["judge"]
    # the CLI of agreement prints the rule's line, with choose-judge's figure
    code, out, err = run_cli(
        capfd, "agreement", str(tmp_path / "llmbar" / "noisy"), "--score", "Comparative", "--label", "__label__",
        "--rule", "llmbar", "--resamples", "50",
    )  # fmt: skip
    assert code == 0, err
    noisy = next(e for e in json.loads((tmp_path / "llmbar" / FILE).read_text())["entries"] if e["judge"] == "noisy")
    assert f"llmbar: {noisy['score']:.3f} ({noisy['interval'][0]:.3f} .. {noisy['interval'][1]:.3f})" in out


def test_the_default_rule_is_judgebench_and_json_carries_every_rule(server, tmp_path, capfd):
    data, judges = _setup(server, tmp_path)
    code, out, err = _choose(capfd, server, tmp_path, data, judges[:1], "-o", tmp_path / "o")
    assert code == 0, err
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    assert saved["rule"] == "judgebench" and saved["headline"] == "agreement"
    assert sorted(saved["entries"][0]["rules"]) == sorted(rules.NAMES)
    assert saved["entries"][0]["score"] == saved["entries"][0]["rules"]["judgebench"]["score"]


def test_a_bad_rule_is_refused_before_any_request(server, tmp_path, capfd):
    from helpers import run_cli

    data, judges = _setup(server, tmp_path)
    code, out, err = _choose(capfd, server, tmp_path, data, judges, "--rule", "llmbr")
    assert code == 2 and "no rule 'llmbr'; did you mean 'llmbar'?" in err
    assert "judgebench, llmbar, alpacaeval, mt-bench, rewardbench" in err
    # a rule that does not apply: verdicts, not winners
    code, out, err = run_cli(
        capfd, "choose-judge", data, "--metric", "Binary", "--judges", "agree", "--base-url", server.base_url,
        "--label", "human", "--column", "prediction=response1", "--rule", "llmbar",
        "--cache-dir", str(tmp_path / "c"),
    )  # fmt: skip
    assert code == 2 and "the rule 'llmbar' scores pairwise winners, and this metric is binary" in err
    assert server.stats()["requests"] == 0
    with pytest.raises(ConfigError, match="the rule 'rewardbench' scores pairwise winners, and this metric is numeric"):
        agreement(Dataset.from_dict({"s": [1, 2, 3], "h": [1, 3, 2]}), "s", "h", rule="rewardbench")


def test_judgebench_from_the_loopback_hub_under_each_rule(hub, server, tmp_path, capfd):
    """--benchmark judgebench (ScalerLab/JudgeBench's exact layout, on the loopback Hub) under each rule: the
    judge that prefers the longer response is right on 16 of 20 pairs by every rule; the one that always picks the
    response shown first scores as each rule counts orders that cancel."""
    from helpers import run_cli
    from test_benchmarks import _jsonl, _judgebench_rows, _upload

    _setup(server, tmp_path)
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
    expected_first = {"judgebench": 0.0, "llmbar": 0.5, "alpacaeval": 0.5, "mt-bench": 0.0}
    for rule in rules.NAMES:
        code, out, err = run_cli(
            capfd, "choose-judge", "--benchmark", "judgebench", "--revision", "main", "--judges", "agree,first",
            "--base-url", server.base_url, "--resamples", "20", "--rule", rule, "--cache-dir", str(tmp_path / "c"),
            "-o", str(tmp_path / rule),
        )  # fmt: skip
        assert code == 0, err
        assert rules.DESCRIPTIONS[rule] in out.splitlines()[0]
        by = {e["judge"]: e for e in json.loads((tmp_path / rule / FILE).read_text())["entries"]}
        assert by["agree"]["score"] == pytest.approx(16 / 20)
        if rule in expected_first:
            assert by["first"]["score"] == pytest.approx(expected_first[rule])
    assert server.stats()["requests"] == 2 * 20 * 2  # each rule from the same replies


def test_a_misspelt_rule_with_a_benchmark_is_refused_before_the_hub_is_asked(hub, server, tmp_path, capfd):
    """--benchmark reads a public set from the Hub: a misspelt --rule is refused first (exit 2, the did-you-mean),
    with no request to the Hub nor to the judge."""
    from helpers import run_cli

    asked, sent = len(hub.requests()), server.stats()["requests"]
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "judgebench", "--judges", "a", "--base-url", server.base_url,
        "--rule", "judgebnech", "--cache-dir", str(tmp_path / "c"),
    )  # fmt: skip
    assert code == 2 and "no rule 'judgebnech'; did you mean 'judgebench'?" in err
    assert len(hub.requests()) == asked and server.stats()["requests"] == sent
