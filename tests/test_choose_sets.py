"""choose-judge with the public sets' extras: a judge's recorded verdicts beside the candidates at no cost
(``mt-bench-gpt4``), transitivity (a check that needs no labels), and the leaderboard pushed to the loopback Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import Dataset
from huggingface_hub import HfApi
from judge_fixture import JudgeServer

from hf_judge import choose_judge
from hf_judge.analysis.benchmarks import load_benchmark
from hf_judge.analysis.leaderboard import FILE
from hf_judge.analysis.transitivity import transitivity
from hf_judge.errors import ConfigError

# reply lengths: the judge that prefers the longer reply orders gpt-4 > alpaca-13b > llama-13b (no cycle)
LENGTH = {"gpt-4": 90, "alpaca-13b": 70, "llama-13b": 50}


@pytest.fixture(scope="module")
def judge():
    with JudgeServer() as s:
        yield s


def test_a_hand_made_cycle_is_one_violation_and_an_order_none():
    # q1: a > b, b > c, c > a (the last row as model_a c vs a: "1", c wins); q2: a > b, b > c, a > c; q3: a tie
    items = ["q1", "q1", "q1", "q2", "q2", "q2", "q3", "q3", "q3"]
    a = ["a", "b", "c", "a", "b", "a", "a", "b", "a"]
    b = ["b", "c", "a", "b", "c", "c", "b", "c", "c"]
    w = ["1", "1", "1", "1", "1", "1", "1", "1", "tie"]
    assert transitivity(items, a, b, w) == {"violations": 1, "triads": 2, "share": 0.5, "items": 2}
    # a pair judged twice on one prompt counts once, by the sum of its verdicts: here b over a (2 against 1)
    twice = transitivity(["q"] * 5, ["a", "b", "b", "b", "a"], ["b", "a", "a", "c", "c"], ["1", "1", "1", "1", "2"])
    assert twice == {"violations": 0, "triads": 1, "share": 0.0, "items": 1}
    assert transitivity(["q"] * 2, ["a", "b"], ["b", "c"], ["1", "1"])["triads"] == 0  # a pair short of a triad


def _conversation(model):
    return [
        {"content": "Write a haiku.", "role": "user"},
        {"content": "L" * LENGTH[model], "role": "assistant"},
        {"content": "Now in French.", "role": "user"},
        {"content": "S" * LENGTH[model], "role": "assistant"},
    ]


def _vote(a, b, winner, judge):
    return {
        "question_id": 81,
        "model_a": a,
        "model_b": b,
        "winner": winner,
        "judge": judge,
        "conversation_a": _conversation(a),
        "conversation_b": _conversation(b),
        "turn": 1,
    }


def _mt_bench(tmp_path):
    from test_benchmarks import MT_FEATURES, _upload

    # the experts prefer the longer reply; GPT-4's recorded verdicts form a cycle: gpt-4 > llama-13b,
    # llama-13b > alpaca-13b, alpaca-13b > gpt-4 (rows sorted: alpaca vs gpt-4 "1", alpaca vs llama "2", gpt-4 vs
    # llama "1"), so it agrees with the experts (gpt-4 > alpaca-13b > llama-13b) on 1 of 3 pairs: gpt-4 vs llama
    human = [
        _vote("gpt-4", "llama-13b", "model_a", "expert_1"),
        _vote("llama-13b", "gpt-4", "model_b", "expert_5"),  # a second expert on that pair: the human ceiling
        _vote("alpaca-13b", "llama-13b", "model_a", "expert_2"),
        _vote("gpt-4", "alpaca-13b", "model_a", "expert_3"),
    ]
    gpt4 = [
        _vote("llama-13b", "gpt-4", "model_b", "gpt4_pair"),
        _vote("llama-13b", "alpaca-13b", "model_a", "gpt4_pair"),
        _vote("alpaca-13b", "gpt-4", "model_a", "gpt4_pair"),
    ]
    files = {}
    for split, rows in (("human", human), ("gpt4_pair", gpt4)):
        path = tmp_path / f"{split}.parquet"
        Dataset.from_list(rows, features=MT_FEATURES).to_parquet(path)
        files[f"data/{split}-00000-of-00001-c0b431264a82ddc0.parquet"] = path.read_bytes()
    _upload("lmsys/mt_bench_human_judgments", files)


def test_mt_bench_gpt4_shows_gpt4s_recorded_figures_and_each_judges_cycles_without_a_request(
    hub, judge, tmp_path, capfd
):
    from helpers import run_cli

    judge.reset()
    judge.configure(length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"})
    _mt_bench(tmp_path)
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "mt-bench-gpt4", "--revision", "main", "--judges", "agree",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"),
        "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    by = {e["name"]: e for e in saved["entries"]}
    assert list(by) == ["agree", "gpt-4 (recorded)"]
    assert judge.stats()["requests"] == 3 * 2  # the candidate's two orders of 3 pairs; nothing for GPT-4
    gpt4 = by["gpt-4 (recorded)"]
    assert gpt4["recorded"] is True and gpt4["cost_per_1000"] is None
    # the set's rule, mt-bench: GPT-4's verdict against each expert's vote, as the candidate's (base: the all-rows
    # rule, 1 of 3 pairs, beside candidates compared with each vote): it agrees with both experts on gpt-4 vs
    # llama-13b and with neither single expert on the other two pairs, 2 of 4 votes
    assert saved["rule"] == "mt-bench" and gpt4["rule"] == "mt-bench" and gpt4["score"] == pytest.approx(2 / 4)
    assert gpt4["rules"]["judgebench"]["score"] == pytest.approx(1 / 3)  # one verdict per pair: right on 1 of 3
    assert gpt4["transitivity"] == {"violations": 1, "triads": 1, "share": 1.0, "items": 1}
    assert by["agree"]["score"] == 1.0 and by["agree"]["transitivity"]["violations"] == 0
    assert by["agree"]["transitivity"]["triads"] == 1
    assert saved["recommendation"]["compared"] == 1  # the recorded judge is shown, never a candidate
    header = next(line for line in out.splitlines() if line.startswith("judge "))
    assert header.index("orders disagree") < header.index("intransitive")
    assert "human ceiling: one annotator agrees with the majority of the others on 100.0%" in out
    assert "(2 annotators, 1 rows)" in out
    assert "1 of 1 triads" in next(line for line in out.splitlines() if line.startswith("gpt-4 (recorded)"))
    assert "0 of 1 triads" in next(line for line in out.splitlines() if line.startswith("agree "))


def test_items_and_recorded_columns_are_checked_before_any_request(judge, tmp_path):
    judge.reset()
    ds = Dataset.from_dict(
        {"question": ["q"], "response1": ["a"], "response2": ["b"], "human": ["1"], "old": ["maybe"], "m": ["x"]}
    )
    kw = dict(label="human", base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False)
    with pytest.raises(ConfigError, match="items: no column 'model_a'"):
        choose_judge(ds, "Comparative", ["agree"], items=("question", "model_a", "m"), **kw)
    with pytest.raises(ConfigError, match="recorded judge 'old-judge': no column 'nope'"):
        choose_judge(ds, "Comparative", ["agree"], recorded={"old-judge": "nope"}, **kw)
    with pytest.raises(ConfigError, match="the recorded judge 'old-judge'.s column 'old'"):
        choose_judge(ds, "Comparative", ["agree"], recorded={"old-judge": "old"}, **kw)
    assert judge.stats()["requests"] == 0


def _pairs():
    return Dataset.from_dict(
        {
            "question": [f"q{i}" for i in range(4)],
            "response1": ["L" * (60 + i) for i in range(4)],
            "response2": ["S" * 20 for _ in range(4)],
            "human": ["1", "1", "1", "2"],
        }
    )


def test_push_to_hub_sends_the_leaderboard_card_and_folders_and_no_secret(hub, judge, tmp_path):
    judge.reset()
    judge.configure(length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"})
    secret = "sk-choose-push-SECRET-42"
    choice = choose_judge(
        _pairs(), "Comparative", [{"model": "agree", "base_url": judge.base_url}, "first"], label="human",
        base_url=judge.base_url, api_key=secret, cache_dir=tmp_path / "c", progress=False, resamples=0,
        push_to_hub="me/judges-pushed",
    )  # fmt: skip
    files = set(HfApi().list_repo_files("me/judges-pushed", repo_type="dataset"))
    assert {FILE, "README.md", "choose_judge.md"} <= files
    for name in ("agree", "first"):  # the candidates' folders, each a result load_result reads
        assert {f"{name}/dataset_dict.json", f"{name}/hf_judge.json"} <= files
        assert any(f.startswith(f"{name}/train/") and f.endswith(".arrow") for f in files), sorted(files)
    card = HfApi().hf_hub_download("me/judges-pushed", "README.md", repo_type="dataset")
    text = Path(card).read_text(encoding="utf-8")
    assert "### Choosing the judge (Comparative, 4 labelled pairs)" in text and "| agree |" in text
    pushed = json.loads(Path(HfApi().hf_hub_download("me/judges-pushed", FILE, repo_type="dataset")).read_text())
    assert pushed["entries"][0]["score"] == choice.entries[0]["score"]
    for blob in hub.uploaded_files():
        data = blob.read_bytes()
        assert secret.encode() not in data and b"hf_test_token_hfjudge_SECRET" not in data, blob


def test_push_to_hub_is_refused_before_any_request_without_a_token_or_with_a_bad_repo(
    hub, judge, tmp_path, monkeypatch
):
    judge.reset()
    asked = len(hub.requests())
    kw = dict(label="human", base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False)
    with pytest.raises(ConfigError, match="push_to_hub 'me/../x' is not a Hub dataset id"):
        choose_judge(_pairs(), "Comparative", ["agree"], push_to_hub="me/../x", **kw)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-login"))
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-login" / "token"))
    with pytest.raises(ConfigError, match="no Hub token to push with: give --token"):
        choose_judge(_pairs(), "Comparative", ["agree"], push_to_hub="me/judges", **kw)
    assert judge.stats()["requests"] == 0 and len(hub.requests()) == asked  # neither the judge nor the Hub asked


def test_alpacaeval_human_from_the_cli_warns_of_its_license_once_and_shows_the_human_ceiling(
    hub, judge, tmp_path, capfd
):
    from helpers import run_cli
    from test_benchmarks import _alpaca_upload, _alpaca_votes

    judge.reset()
    _alpaca_upload(
        [*_alpaca_votes("tips", [1, 1, 1, 2]), *_alpaca_votes("poem", [2, 2, 1, 2]), *_alpaca_votes("x", [1])]
    )
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "alpacaeval-human", "--revision", "main", "--judges", "a",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"),
    )  # fmt: skip
    assert code == 0, err
    assert err.count("non-commercial use only") == 1 and "warning: alpacaeval-human: " in err
    assert "note: 1 of 3 pairs have fewer than 4 votes: left out" in err
    assert "human ceiling: one annotator agrees with the majority of the others on" in out
    assert "(4 annotators, 2 rows)" in out and judge.stats()["requests"] == 2 * 2


def test_items_from_the_cli_must_name_three_columns(capfd):
    from helpers import run_cli

    code, _, err = run_cli(capfd, "choose-judge", "x.jsonl", "--metric", "Comparative", "--judges", "a", "--label",
                           "l", "--items", "question_id,model_a")  # fmt: skip
    assert code != 0 and "--items 'question_id,model_a': give three columns, PROMPT,MODEL_A,MODEL_B" in err


def test_rewardbench_from_the_cli_a_judge_that_picks_the_first_shown_is_not_handed_the_chosen_one(
    hub, judge, tmp_path, capfd
):
    """RewardBench's chosen response is always the right one: shown as given, a judge that always picks the
    response shown first would be right on every pair. In the set's seeded order it is right where the chosen one
    happens to come first."""
    from helpers import run_cli
    from test_benchmarks import _rb_rows, _rb_upload

    judge.reset()
    judge.configure(overrides={"score_1": 9, "score_2": 2, "explanation": "the first"})
    _rb_upload(tmp_path, _rb_rows(12))
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "rewardbench", "--revision", "main", "--judges", "first",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    (entry,) = saved["entries"]
    first = load_benchmark("rewardbench", revision="main").dataset["correct"].count("1")
    assert 0 < first < 12 and entry["judgebench"]["single_order_accuracy"] == pytest.approx(first / 12)
    assert judge.stats()["requests"] == 12 * 2
    # JudgeBench's rule: each pair's orders disagree, a tie, never right
    assert entry["rules"]["judgebench"]["score"] == 0.0
    # the set's own rule is the headline (RewardBench's: one seeded order per pair, right where it shows the
    # chosen response first), and the table's header says so
    assert saved["rule"] == "rewardbench" and entry["score"] == entry["rules"]["rewardbench"]["score"]
    assert 0 < entry["score"] < 1 and "rewardbench" in out


def _mt_vote(a, b, winner, judge):
    return {**_vote(a, b, winner, judge), "question_id": 82}


def test_mt_bench_compares_the_judge_with_each_expert_vote_and_shows_the_human_human_figure(
    hub, judge, tmp_path, capfd
):
    """FastChat fastchat/llm_judge/compute_agreement.py, get_mt_bench_agreement: GPT-4's vote against EACH
    "human" vote (get_judge_name: expert_* only; author_* votes are not compared), tie = tie; human vs human over
    every two votes on a key. Hand-worked on three keys (the judge prefers the longer reply: alpaca-13b vs gpt-4
    "2", alpaca-13b vs llama-13b "1", gpt-4 vs llama-13b "1"):

    - (alpaca-13b, gpt-4): experts "2", "2" (one raw the other way round, reverted); an author's "1" ignored: 2/2
    - (alpaca-13b, llama-13b): experts "1", "2" (no majority: still compared): 1/2
    - (gpt-4, llama-13b): experts "1", "tie", "tie (bothbad)": 1/3; without ties 1/1
    With ties 4/7, without 4/5. Humans: (2,2) yes; (1,2) no; (1,tie) (1,tie) (tie,tie): 2/5; without ties 1/2.
    The majority label would give 1/2 (one key has none; the author tips the first)."""
    from helpers import run_cli
    from test_benchmarks import MT_FEATURES, _upload

    judge.reset()
    judge.configure(length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "agree"})
    human = [
        _mt_vote("alpaca-13b", "gpt-4", "model_b", "expert_1"),
        _mt_vote("gpt-4", "alpaca-13b", "model_a", "expert_2"),
        _mt_vote("alpaca-13b", "gpt-4", "model_a", "author_1"),
        _mt_vote("alpaca-13b", "llama-13b", "model_a", "expert_1"),
        _mt_vote("alpaca-13b", "llama-13b", "model_b", "expert_3"),
        _mt_vote("gpt-4", "llama-13b", "model_a", "expert_2"),
        _mt_vote("gpt-4", "llama-13b", "tie", "expert_3"),
        _mt_vote("llama-13b", "gpt-4", "tie (bothbad)", "expert_4"),
    ]
    path = tmp_path / "human.parquet"
    Dataset.from_list(human, features=MT_FEATURES).to_parquet(path)
    _upload("lmsys/mt_bench_human_judgments", {"data/human-00000-of-00001-c0b431264a82ddc0.parquet": path.read_bytes()})
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "mt-bench-human", "--revision", "main", "--judges", "agree",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    assert judge.stats()["requests"] == 3 * 2  # every key judged, the split one too
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    (entry,) = saved["entries"]
    mt = entry["rules"]["mt-bench"]
    assert saved["rule"] == "mt-bench" and (mt["agree"], mt["total"]) == (4, 7) and entry["score"] == 4 / 7
    assert (mt["without_ties"]["agree"], mt["without_ties"]["total"]) == (4, 5)
    # chance by the same rule: always the majority label ("2": labels 2, 2 by the tie-break, tie) against each
    # vote: 2/2 + 1/2 + 0/3 = 3/7 (base: the majority label's share of the labels, 2/3, beside a figure over votes)
    assert saved["chance"]["rule"] == "mt-bench" and saved["chance"]["score"] == pytest.approx(3 / 7)
    people = saved["humans"]["mt-bench"]
    assert (people["agree"], people["total"], people["score"]) == (2, 5, 0.4)
    assert (people["without_ties"]["agree"], people["without_ties"]["total"]) == (1, 2)
    humans_row = next(line for line in out.splitlines() if line.startswith("humans: every two votes"))
    assert "40.0%" in humans_row
    assert "every two votes on a pair agree 2/5 = 40.0%" in out and "without ties 1/2 = 50.0%" in out
    assert "1 rows whose people split evenly are kept" in err + out
    # agreement --rule mt-bench --votes on the candidate's folder: the same figure from the same replies
    code, said, err = run_cli(
        capfd, "agreement", str(tmp_path / "o" / "agree"), "--score", "Comparative", "--label", "__label__",
        "--rule", "mt-bench", "--votes", "expert_1,expert_2,expert_3", "--resamples", "0",
        "--out", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["rules"]["mt-bench"]["score"] == entry["score"]
    assert report["rules"]["humans"]["score"] == people["score"]


def test_choose_judge_cli_votes_names_the_people_s_columns_as_the_library_s_votes(judge, tmp_path, capfd):
    """``--votes A,B`` beside ``--label``: the CLI compares with those people's votes under mt-bench and shows
    their own figure, as ``choose_judge(votes=[...])`` does on the same rows; a column it lacks is refused before
    any request."""
    from helpers import run_cli

    judge.reset()
    rows = [
        {"question": f"q{i}", "response1": f"a{i}", "response2": f"b{i}", "final": "1" if i % 3 else "2",
         "p1": "1" if i % 3 else "2", "p2": "1" if i % 2 else "tie"}
        for i in range(12)
    ]  # fmt: skip
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["--metric", "Comparative", "--judges", "agree", "--label", "final", "--rule", "mt-bench"]
    common += ["--base-url", judge.base_url, "--cache-dir", str(tmp_path / "c"), "--resamples", "0"]
    code, _, err = run_cli(capfd, "choose-judge", str(data), *common, "--votes", "p1,p3")
    assert code == 2 and "votes: no column 'p3' of people's votes" in err, err
    assert judge.stats()["requests"] == 0
    code, out, err = run_cli(capfd, "choose-judge", str(data), *common, "--votes", "p1,p2", "-o", tmp_path / "o")
    assert code == 0, err
    saved = json.loads((tmp_path / "o" / "choose_judge.json").read_text())
    choice = choose_judge(
        Dataset.from_list(rows), "Comparative", ["agree"], label="final", votes=["p1", "p2"], rule="mt-bench",
        base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False, resamples=0,
    )  # fmt: skip
    assert saved["humans"]["mt-bench"]["score"] == choice.humans["mt-bench"]["score"] is not None
    assert saved["entries"][0]["score"] == choice.entries[0]["score"]
    assert "humans: every two votes" in out


def test_votes_columns_and_values_are_checked_before_any_request(judge, tmp_path):
    judge.reset()
    ds = Dataset.from_dict(
        {"question": ["q"], "response1": ["a"], "response2": ["b"], "human": ["1"], "e1": ["1"], "e2": ["maybe"]}
    )
    kw = dict(label="human", base_url=judge.base_url, api_key="k", cache_dir=tmp_path / "c", progress=False)
    with pytest.raises(ConfigError, match="votes: no column 'e3' of people's votes; the data has: question"):
        choose_judge(ds, "Comparative", ["agree"], votes=["e1", "e3"], rule="mt-bench", **kw)
    with pytest.raises(ConfigError, match="the vote column 'e2'"):
        choose_judge(ds, "Comparative", ["agree"], votes=["e1", "e2"], **kw)
    with pytest.raises(ConfigError, match="votes= are people's votes on pairs.*this metric is binary"):
        choose_judge(ds.rename_column("response1", "response"), "Binary", ["agree"], votes=["e1"], label="human",
                     **{k: v for k, v in kw.items() if k != "label"})  # fmt: skip
    assert judge.stats()["requests"] == 0


def _alpaca_pair(name, first, second, prefs):
    return [
        {"instruction": f"pair {name}", "output_1": "L" * first, "output_2": "L" * second, "preference": p,
         "annotator_index": k, "dataset": "oasst", "datasplit": "eval"}
        for k, p in enumerate(prefs)
    ]  # fmt: skip


def test_alpacaeval_human_shows_the_humans_leave_one_out_beside_the_judge_against_the_mode(hub, judge, tmp_path, capfd):
    """tatsu-lab/alpaca_eval src/alpaca_eval/analyze.py, Analyzer.agreement_of_annotations: the judge against the
    mode of all four people (_random_mode: a 2-2 split goes to the larger preference, 2), a tie earning 0.5; the
    humans' row (get_metrics_evaluator on the gold cross-annotations) each person against the mode of the other
    three. Hand-worked, the judge preferring the longer output (the same in both orders):

    - P1 people 1,1,1,2 (mode 1), judge 1: 0 off; people leave-one-out 3 of 4
    - P2 people 2,2,1,1 (mode 2), judge 1: 1 off; 0 of 4 (each leave-out mode is the other vote)
    - P3 people 2,2,2,2 (mode 2), judge tie: 0.5 off; 4 of 4
    - P4 people 1,2,2,2 (mode 2), judge 2: 0 off; 3 of 4
    - P5 people 1,2,1,2 (mode 2), judge 2: 0 off; 0 of 4
    The judge 1 - 1.5/5 = 70.0%; the humans 10/20 = 50.0%. A majority label would leave P2 and P5 out (83.3%)."""
    from helpers import run_cli
    from test_benchmarks import _alpaca_upload

    judge.reset()
    judge.configure(length_scores={"pattern": r"\bL{10,}\b", "step": 20, "model": "longer"})
    _alpaca_upload(
        [*_alpaca_pair("1", 100, 40, [1, 1, 1, 2]), *_alpaca_pair("2", 100, 40, [2, 2, 1, 1]),
         *_alpaca_pair("3", 60, 70, [2, 2, 2, 2]), *_alpaca_pair("4", 40, 100, [1, 2, 2, 2]),
         *_alpaca_pair("5", 40, 100, [1, 2, 1, 2])]
    )  # fmt: skip
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "alpacaeval-human", "--revision", "main", "--judges", "longer",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    assert judge.stats()["requests"] == 5 * 2
    saved = json.loads((tmp_path / "o" / FILE).read_text())
    (entry,) = saved["entries"]
    assert saved["rule"] == "alpacaeval" and entry["score"] == pytest.approx(0.7)
    people = saved["humans"]["alpacaeval"]
    assert (people["agree"], people["total"], people["pairs"]) == (10, 20, 5) and people["score"] == 0.5
    row = next(line for line in out.splitlines() if line.startswith("humans: leave-one-out"))
    assert row.split()[2] == "50.0%"
    assert "humans under alpacaeval: each person against the mode of the others 50.0%" in out
    code, _, err = run_cli(
        capfd, "agreement", str(tmp_path / "o" / "longer"), "--score", "Comparative", "--label", "__label__",
        "--rule", "alpacaeval", "--votes", "annotator_1,annotator_2,annotator_3,annotator_4", "--resamples", "0",
        "--out", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["rules"]["alpacaeval"]["score"] == pytest.approx(entry["score"])
    assert report["rules"]["humans"]["score"] == 0.5


# FINDINGS' RewardBench pairs: their subsets, and whether the judge (preferring the longer) picks the chosen one
RB_EXAMPLE = [
    ("alpacaeval-easy", 1), ("alpacaeval-easy", 0), ("mt-bench-easy", 0.5), ("llmbar-natural", 1),
    ("llmbar-adver-neighbor", 0.5), ("refusals-dangerous", 1), ("math-prm", 1), ("hep-python", 0),
]  # fmt: skip
# chosen vs rejected lengths: the longer one wins (scores 1 + length // 20); 60 vs 70: a tie (4 and 4)
RB_LENGTHS = {1: (100, 40), 0: (40, 100), 0.5: (60, 70)}


def test_rewardbench_prints_each_section_and_their_weighted_mean(hub, judge, tmp_path, capfd):
    """allenai/reward-bench scripts/run_generative.py (1 / 0 / 0.5 per pair, per subset) and rewardbench/utils.py
    calculate_scores_per_section (constants.EXAMPLE_COUNTS), then analysis/get_benchmark_results.py
    get_average_over_rewardbench (Prior Sets absent): the notes' 8 pairs, end to end in the set's schema, give Chat
    50.0%, Chat Hard 167/234 = 71.4%, Safety 100.0%, Reasoning 6/7 = 85.7%, their mean 76.8% (pooled 62.5%). The
    judge prefers the longer response in both orders, so the seeded order drawn does not change a pair's result."""
    from helpers import run_cli
    from test_benchmarks import _rb_upload

    judge.reset()
    judge.configure(length_scores={"pattern": r"\bL{10,}\b", "step": 20, "model": "longer"})
    rows = [
        {"prompt": f"p{i}", "chosen": "L" * RB_LENGTHS[r][0], "chosen_model": "GPT4-Turbo",
         "rejected": "L" * RB_LENGTHS[r][1], "rejected_model": "alpaca-7b", "subset": subset, "id": 30 + i}
        for i, (subset, r) in enumerate(RB_EXAMPLE)
    ]  # fmt: skip
    _rb_upload(tmp_path, rows)
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "rewardbench", "--revision", "main", "--judges", "longer",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    (entry,) = json.loads((tmp_path / "o" / FILE).read_text())["entries"]
    found = entry["rules"]["rewardbench"]
    assert found["sections"] == pytest.approx({"Chat": 0.5, "Chat Hard": 167 / 234, "Safety": 1.0, "Reasoning": 6 / 7})
    assert entry["score"] == found["score"] == pytest.approx(0.7677045, abs=1e-7)
    assert found["subsets"]["hep-python"] == 0.0 and found["subsets"]["mt-bench-easy"] == 0.5
    assert (
        "longer by section (RewardBench's weights): Chat 50.0%, Chat Hard 71.4%, Safety 100.0%, Reasoning 85.7%; "
        "their mean 76.8%" in out
    )
    # agreement --rule rewardbench --subset-column on the candidate's folder: the same figures from the same replies
    code, _, err = run_cli(
        capfd, "agreement", str(tmp_path / "o" / "longer"), "--score", "Comparative", "--label", "__label__",
        "--rule", "rewardbench", "--subset-column", "subset", "--resamples", "0", "--out", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert code == 0, err
    said = json.loads((tmp_path / "a.json").read_text())["rules"]["rewardbench"]
    assert said["score"] == entry["score"] and said["sections"] == found["sections"]
    # LLMBar's Adversarial mean from the same set's llmbar subsets: llmbar-adver-neighbor a tie (wrong), 0 of 1
    code, out, err = run_cli(
        capfd, "choose-judge", "--benchmark", "rewardbench", "--revision", "main", "--judges", "longer",
        "--base-url", judge.base_url, "--resamples", "0", "--cache-dir", str(tmp_path / "c"), "--rule", "llmbar",
    )  # fmt: skip
    assert code == 0, err
    assert "longer: LLMBar Adversarial 0.0% (the mean of its 1 adversarial subsets, not pooled)" in out


def test_llmbar_with_a_subset_column_gives_the_adversarial_mean(judge, tmp_path, capfd):
    """LLMBar's Adversarial column (the unweighted mean of its adversarial subsets' figures, as in
    tests/test_rules.py's hand-worked example): Natural 2/2, Adversarial/Neighbor 1/3, Adversarial/GPTOut 1/2 give
    5/12 = 41.7% (pooled 40.0%); the headline over all pairs 4/7 = 57.1%."""
    from helpers import run_cli

    judge.reset()
    judge.configure(length_scores={"pattern": r"\bL{10,}\b", "step": 20, "model": "longer"})
    right = [1, 1, 1, 0, 0, 1, 0]  # whether the label is the longer response
    subsets = ["Natural"] * 2 + ["Adversarial/Neighbor"] * 3 + ["Adversarial/GPTOut"] * 2
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(
        json.dumps({"question": f"q{i}", "response1": "L" * 100, "response2": "L" * (40 + i), "subset": s,
                    "preferred": "1" if r else "2"}) + "\n"
        for i, (r, s) in enumerate(zip(right, subsets, strict=True))
    ))  # fmt: skip
    code, out, err = run_cli(
        capfd, "choose-judge", str(path), "--metric", "Comparative", "--judges", "longer", "--label", "preferred",
        "--rule", "llmbar", "--subset-column", "subset", "--base-url", judge.base_url, "--resamples", "0",
        "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert code == 0, err
    (entry,) = json.loads((tmp_path / "o" / FILE).read_text())["entries"]
    assert entry["score"] == pytest.approx(4 / 7) and entry["rules"]["llmbar"]["adversarial"] == pytest.approx(5 / 12)
    assert "longer: LLMBar Adversarial 41.7% (the mean of its 2 adversarial subsets, not pooled); by subset: " in out
    assert "Adversarial/Neighbor 33.3%" in out
    code, _, err = run_cli(
        capfd, "agreement", str(tmp_path / "o" / "longer"), "--score", "Comparative", "--label", "__label__",
        "--rule", "llmbar", "--subset-column", "subset", "--resamples", "0", "--out", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((tmp_path / "a.json").read_text())["rules"]["llmbar"]["adversarial"] == pytest.approx(5 / 12)
    code, _, err = run_cli(
        capfd, "choose-judge", str(path), "--metric", "Comparative", "--judges", "longer", "--label", "preferred",
        "--rule", "llmbar", "--subset-column", "subsett", "--base-url", judge.base_url,
        "--cache-dir", str(tmp_path / "c"),
    )  # fmt: skip
    assert code != 0 and "--subset-column: no column 'subsett' naming each pair's subset" in err
    assert judge.stats()["requests"] == 7 * 2  # the refused run sent nothing
