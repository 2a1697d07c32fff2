"""choose-judge's labels, checked before any request by agreement's rule (hf_judge.analysis.label_rules): what a
label may be per kind (NaN ratings, a verdict that is none, 1.0 / 0.0, pairwise labels beside 1 / 2 / tie, a dict),
a label column named like choose-judge's own column or the metric's, public sets whose labels changed on the Hub,
a reviewer who labels a row twice, a labels file of thousands of reviewers per row; and `hf-judge view` on a
choose_judge.json holding NaN. Each refusal is asserted with the requests the loopback judge server received: 0."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset, load_dataset
from helpers import run_cli
from judge_fixture import JudgeServer
from scipy.stats import spearmanr

from hf_judge import ConfigError, agreement, choose_judge, load_result
from hf_judge.analysis.benchmarks import load_benchmark
from hf_judge.analysis.ceiling import human_ceiling

N = 40
QA = {"instruction": "question", "output": "answer"}
PREDICTION = {"prediction": "answer"}


@pytest.fixture(scope="module")
def judge():
    with JudgeServer() as server:
        yield server


def _judges(judge):
    return [{"model": "a", "base_url": judge.base_url}, {"model": "b", "base_url": judge.base_url}]


def _choose(judge, tmp_path, ds, metric, **kw):
    """choose_judge with two judges on the loopback server, its request counter zeroed first."""
    judge.reset()
    kw = {"api_key": "k", "cache_dir": tmp_path / "c", "progress": False, "resamples": 50, **kw}
    return choose_judge(ds, metric, _judges(judge), **kw)


def _sent(judge) -> int:
    return judge.stats()["requests"]


def _rows(n=N, **columns):
    texts = {"question": [f"q{i}" for i in range(n)], "answer": [f"a{i}" for i in range(n)]}
    return Dataset.from_dict({**texts, **columns})


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@contextlib.contextmanager
def _on_the_hub(repo, files):
    """``files`` (path -> bytes) in the loopback Hub's dataset ``repo`` for the test, and what was there before put
    back after it: the Hub is the session's, and a public set with garbage labels would be refused by the next
    test (or docs page) that loads it."""
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    before = {}
    for path in files:
        try:
            before[path] = Path(hf_hub_download(repo, path, repo_type="dataset")).read_bytes()
        except Exception:  # noqa: BLE001 - not there: removed again after the test
            before[path] = None
    for path, data in files.items():
        api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo, repo_type="dataset")
    try:
        yield
    finally:
        for path, data in before.items():
            if data is None:
                api.delete_file(path, repo_id=repo, repo_type="dataset")
            else:
                api.upload_file(path_or_fileobj=data, path_in_repo=path, repo_id=repo, repo_type="dataset")


# -- ratings: NaN is no label ---------------------------------------------------------------------------------------


def test_nan_ratings_are_unlabelled_rows_not_the_highest_ratings(judge, tmp_path):
    """10 of 40 ratings NaN: the 30 rated rows are scored and ranked (NaN sorted as the highest rating turned rho's
    sign); the 10 are left out before any request, and the table says so."""
    ratings = [float(i % 5) for i in range(N)]
    labels = [math.nan if i % 4 == 0 else r for i, r in enumerate(ratings)]
    choice = _choose(judge, tmp_path, _rows(human=labels), "QA_Correctness", label="human", columns=QA,
                     output_dir=tmp_path / "out")  # fmt: skip
    assert _sent(judge) == 2 * 30 and choice.rows == 30
    assert "10 of 40 rows have no label (null or NaN" in "\n".join(choice.notes)
    real = [r for i, r in enumerate(ratings) if i % 4]
    for e in choice.entries:
        scored = load_result(tmp_path / "out" / e["judge"])["train"]
        assert scored["__label__"] == real and e["rated_rows"] == 30
        assert e["score"] == pytest.approx(spearmanr(scored["QA_Correctness"], real).statistic)


def test_helpsteer2_with_nan_or_null_ratings_is_refused_naming_the_repo_row_and_value(hub, judge, tmp_path, capfd):
    from test_benchmarks import _jsonl as jsonl

    attributes = ["helpfulness", "correctness", "coherence", "complexity", "verbosity"]
    rows = [{"prompt": f"p{i}", "response": f"r{i}", **{a: i % 5 for a in attributes}} for i in range(8)]
    rows[3]["correctness"], rows[5]["correctness"] = math.nan, None  # json.dumps writes NaN, as a changed copy may
    # (the train split too: datasets types both splits' columns alike, from the first file)
    files = {"train.jsonl.gz": gzip.compress(jsonl(rows[2:4])), "validation.jsonl.gz": gzip.compress(jsonl(rows))}
    judge.reset()
    with _on_the_hub("nvidia/HelpSteer2", files):
        code, _, err = run_cli(
            capfd, "choose-judge", "--benchmark", "helpsteer2", "--revision", "main", "--judges", "a,b",
            "--base-url", judge.base_url, "--cache-dir", tmp_path / "c",
        )  # fmt: skip
    assert code == 2, err
    assert (
        "nvidia/HelpSteer2:validation: 2 correctness values that the set never holds (row 3: nan; row 5: None): "
        "a correctness there is a rating from 0 to 4" in err
    )
    assert _sent(judge) == 0


# -- verdicts --------------------------------------------------------------------------------------------------------


def test_a_label_that_is_no_verdict_is_refused_before_any_request_and_1_0_0_0_are_verdicts(judge, tmp_path):
    verdicts = [i % 3 != 0 for i in range(N)]
    words = ["yes" if v else "no" for v in verdicts]
    words[7] = "maybe"
    with pytest.raises(ConfigError) as e:
        _choose(judge, tmp_path, _rows(human=words), "Binary", label="human", columns=PREDICTION)
    assert str(e.value).startswith(
        "the label column 'human' holds 1 value that is not a verdict (['maybe']) at row 7: 'maybe': a verdict is "
        "true/false, 1/0 or yes/no"
    )
    assert _sent(judge) == 0
    # the same in a labels file: its line
    lines = [{"split": "train", "row": i, "label": w} for i, w in enumerate(words)]
    path = _jsonl(tmp_path / "labels.jsonl", [{"split": "train", "row": 0, "label": None}, *lines])
    with pytest.raises(ConfigError, match=rf"at {path}, line 9: 'maybe': a verdict is true/false"):
        _choose(judge, tmp_path, _rows(), "Binary", labels=path, columns=PREDICTION)
    assert _sent(judge) == 0
    # agreement reads the column by the same rule, in the same words
    ds = Dataset.from_dict({"Binary": verdicts, "human": words})
    with pytest.raises(ConfigError, match=r"'human' holds 1 value that is not a verdict \(\['maybe'\]\) at row 7"):
        agreement(ds, "Binary", "human", resamples=0)
    # two words of one's own with positive=: a third is a typo, not a negative verdict
    typo = Dataset.from_dict({"Binary": [True, False, True], "gold": ["good", "bad", "goood"]})
    with pytest.raises(ConfigError, match=r"'gold' holds 3 different values \(\['bad', 'good', 'goood'\]\)"):
        agreement(typo, "Binary", "gold", positive="good", resamples=0)
    with pytest.raises(ConfigError, match=r"holds 3 different values .* row 2: 'goood'"):
        _choose(judge, tmp_path, _rows(3, human=typo["gold"]), "Binary", label="human", positive="good",
                columns=PREDICTION)  # fmt: skip
    assert _sent(judge) == 0
    # 1.0 / 0.0 (a float column) are the verdicts 1 and 0, as agreement reads them: the table of the booleans
    as_bools = _choose(judge, tmp_path, _rows(human=verdicts), "Binary", label="human", columns=PREDICTION)
    floats = _choose(judge, tmp_path, _rows(human=[float(v) for v in verdicts]), "Binary", label="human",
                     columns=PREDICTION)  # fmt: skip
    assert [e["score"] for e in floats.entries] == [e["score"] for e in as_bools.entries]
    assert [e["kappa"] for e in floats.entries] == [e["kappa"] for e in as_bools.entries]


# -- preferences -----------------------------------------------------------------------------------------------------


def _pairs(labels):
    """Pairs whose first response is the longer on even rows; ``labels`` the preferred response of each."""
    long, short = ["L" * (60 + i) for i in range(N)], ["S" * (20 + i % 7) for i in range(N)]
    first = [long[i] if i % 2 == 0 else short[i] for i in range(N)]
    second = [short[i] if i % 2 == 0 else long[i] for i in range(N)]
    return Dataset.from_dict({"question": [f"q{i}" for i in range(N)], "response1": first, "response2": second,
                              "human": labels})  # fmt: skip


def test_pairwise_labels_are_1_2_or_tie_as_agreement_reads_them(judge, tmp_path):
    """A/B and the numbers 1 and 2 are the preferences "1" and "2" (agreement's rule): the same table as "1"/"2";
    "both", "3" and "" are none, refused before any request with their rows, as agreement refuses them."""
    winners = ["1" if i % 5 else "2" for i in range(N)]  # the first response preferred on 4 pairs of 5

    def table(labels):
        choice = _choose(judge, tmp_path, _pairs(labels), "Comparative", label="human")
        return [(e["score"], e["kappa"], e["judgebench"]) for e in choice.entries]

    judge.reset()
    judge.configure(length_scores={"pattern": r"\b[LS]{10,}\b", "step": 10, "model": "a"})
    expected = table(winners)
    assert table([{"1": "A", "2": "B"}[w] for w in winners]) == expected
    assert table([int(w) for w in winners]) == expected
    junk = list(winners)
    junk[4], junk[9], junk[13] = "both", "3", ""
    with pytest.raises(ConfigError) as e:
        _choose(judge, tmp_path, _pairs(junk), "Comparative", label="human")
    assert str(e.value).startswith(
        "the label column 'human' holds 3 values that are not preferences (['', '3', 'both']) at row 4: 'both'; "
        "row 9: '3'; row 13: '': a preference is 1 (the first response is better), 2 or tie"
    )
    assert _sent(judge) == 0
    with pytest.raises(ConfigError, match=r"not preferences \(\['', '3', 'both'\]\) at row 4: 'both'"):
        agreement(Dataset.from_dict({"Comparative_winner": winners, "human": junk}), "Comparative", "human")


def test_a_pair_metric_whose_response_columns_are_not_mapped_is_refused_by_name_before_any_request(judge, tmp_path):
    """A stranger's first try: the responses in columns the metric does not name. Base: a raw ValueError from
    datasets' rename_columns (``Original column names {'response2', 'response1'} not in the dataset``) out of
    the swap of the two orders."""
    rows = _pairs(["1"] * N).rename_columns({"response1": "response_a", "response2": "response_b"})
    with pytest.raises(ConfigError, match=r"metric Comparative needs 'response1', 'response2', but the dataset has"):
        _choose(judge, tmp_path, rows, "Comparative", label="human")
    assert _sent(judge) == 0
    choice = _choose(
        judge,
        tmp_path,
        rows,
        "Comparative",
        label="human",
        columns={"response1": "response_a", "response2": "response_b"},
    )
    assert _sent(judge) == 2 * 2 * N and len(choice.entries) == 2  # two judges, both orders


# -- the label column's name, a dict label ------------------------------------------------------------------------


def test_a_label_column_named_like_choose_judges_own_or_the_metrics_is_read_and_a_dict_label_is_refused(
    judge, tmp_path
):
    verdicts = [i % 3 != 0 for i in range(N)]
    expected = _choose(judge, tmp_path, _rows(human=verdicts), "Binary", label="human", columns=PREDICTION)
    for name in ("__label__", "Binary"):  # choose-judge's own column; the column the metric writes
        choice = _choose(judge, tmp_path, _rows(**{name: verdicts}), "Binary", label=name, columns=PREDICTION)
        assert [e["score"] for e in choice.entries] == [e["score"] for e in expected.entries], name
    lines = [
        {"question": f"q{i}", "answer": f"a{i}", "human": {"x": 1} if i == 3 else v} for i, v in enumerate(verdicts)
    ]
    path = _jsonl(tmp_path / "rows.jsonl", lines)
    rows = load_dataset("json", data_files=str(path), split="train")  # a JSON column of mixed types
    with pytest.raises(ConfigError, match=r"holds 1 value that is not a verdict .* at row 3: \{'x': 1\}: a verdict is"):
        _choose(judge, tmp_path, rows, "Binary", label="human", columns=PREDICTION)
    assert _sent(judge) == 0


# -- public sets -----------------------------------------------------------------------------------------------------


def test_judgebench_with_garbage_or_null_labels_is_refused_naming_the_repo_row_and_value(hub, judge, tmp_path, capfd):
    from test_benchmarks import _jsonl as jsonl
    from test_benchmarks import _judgebench_rows

    rows = _judgebench_rows("gpt-4o-2024-05-13", 6)
    rows[2]["label"], rows[4]["label"] = "A=B?", None
    judge.reset()
    with _on_the_hub("ScalerLab/JudgeBench", {"data/gpt-00000-of-00001.jsonl": jsonl(rows)}):
        code, _, err = run_cli(
            capfd, "choose-judge", "--benchmark", "judgebench", "--revision", "main", "--judges", "a,b",
            "--base-url", judge.base_url, "--cache-dir", tmp_path / "c",
        )  # fmt: skip
    assert code == 2, err
    assert (
        "ScalerLab/JudgeBench:gpt: 2 label values that the set never holds (row 2: 'A=B?'; row 4: None): a label "
        "there is A>B or B>A (the correct response). The copy on the Hub changed" in err
    )
    assert _sent(judge) == 0


def _mt_bench(tmp_path, votes):
    from test_benchmarks import MT_FEATURES

    path = tmp_path / "human.parquet"
    Dataset.from_list(votes, features=MT_FEATURES).to_parquet(path)
    files = {"data/human-00000-of-00001-c0b431264a82ddc0.parquet": path.read_bytes()}
    return _on_the_hub("lmsys/mt_bench_human_judgments", files)


def test_mt_bench_an_unknown_winner_is_named_and_an_expert_who_voted_twice_counts_once(hub, tmp_path):
    from test_benchmarks import _vote

    unknown = [
        _vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 1),
        _vote(82, "llama-13b", "claude-v1", "model_c", "expert_2", 1),  # the names out of order: flipped
    ]
    with _mt_bench(tmp_path, unknown), pytest.raises(ConfigError) as e:
        load_benchmark("mt-bench-human", revision="main")
    assert str(e.value).startswith(
        "lmsys/mt_bench_human_judgments:human: 1 winner value that the set never holds (row 1: 'model_c'): a winner "
        "there is model_a, model_b, tie or tie (bothbad)"
    )
    twice = [
        _vote(81, "gpt-4", "llama-13b", "model_a", "expert_1", 1),
        _vote(81, "llama-13b", "gpt-4", "model_b", "expert_1", 1),  # expert_1 again, the other order: one vote
        _vote(81, "gpt-4", "llama-13b", "model_b", "expert_2", 1),
        _vote(81, "gpt-4", "llama-13b", "model_a", "expert_3", 1),
    ]
    with _mt_bench(tmp_path, twice):
        s = load_benchmark("mt-bench-human", revision="main")
    row = s.dataset.to_list()[0]
    assert s.annotators == ("annotator_1", "annotator_2", "annotator_3")
    assert [row[c] for c in s.annotators] == ["1", "2", "1"] and row["majority"] == "1"
    ceiling = human_ceiling([[row[c] for c in s.annotators]], "pairwise", resamples=0)
    assert (ceiling["comparisons"], ceiling["loo_agreement"]) == (3, pytest.approx((1 / 2 + 0 + 1 / 2) / 3))


# -- labels files: a reviewer twice, thousands of reviewers -----------------------------------------------------------


def test_a_reviewer_who_labels_a_row_twice_counts_once_with_the_later_label(judge, tmp_path):
    n = 12
    first = {p: [(i + k) % 3 != 0 for i in range(n)] for k, p in enumerate(("ann", "bob", "cid"))}
    lines = [{"split": "train", "row": i, "label": first[p][i], "reviewer": p} for p in first for i in range(n)]
    later = {i: not first["ann"][i] for i in range(4)}  # ann changes her mind on rows 0-3
    lines += [{"split": "train", "row": i, "label": v, "reviewer": "ann"} for i, v in later.items()]
    table = [[later.get(i, first["ann"][i]), first["bob"][i], first["cid"][i]] for i in range(n)]
    expected = human_ceiling(table, "binary", resamples=50, seed=0)
    choice = _choose(judge, tmp_path, _rows(n), "Binary", labels=_jsonl(tmp_path / "labels.jsonl", lines),
                     columns=PREDICTION, output_dir=tmp_path / "out")  # fmt: skip
    assert choice.ceiling == expected and expected["annotators"] == 3 and expected["comparisons"] == 3 * n
    majority = [sum(r) >= 2 for r in table]
    assert load_result(tmp_path / "out" / "a")["train"]["__label__"] == majority


def _many(reviewers, shares, bad_last=False):
    """Reviewer by reviewer (as a labelling tool writes them), row r labelled true by ``shares[r]`` of them."""
    lines = []
    for k in range(reviewers):
        for r, share in enumerate(shares):
            lines.append({"split": "train", "row": r, "label": k < share * reviewers, "reviewer": f"rev-{k}"})
    if bad_last:
        lines[-1]["label"] = "maybe"
    return lines


@pytest.mark.timeout(120)  # 7-25 s on the loaded 2-core box; main before issue 40 did not end (O(reviewers^2))
def test_a_labels_file_of_25000_reviewers_per_row_is_counted_and_checked_before_any_request(judge, tmp_path):
    """100,000 lines: 25,000 reviewers of each of 4 rows. The leave-one-out agreement by hand: on a row of 2/3
    true, each true reviewer sees a true majority among the others, each false one does not (2/3 of them agree);
    on an even row no one does; on a unanimous one everyone does. Alpha: the krippendorff package's, from counts."""
    import krippendorff

    reviewers, shares = 25_000, [0.6, 0.5, 1.0, 0.3]
    path = _jsonl(tmp_path / "labels.jsonl", _many(reviewers, shares))
    choice = _choose(judge, tmp_path, _rows(4), "Binary", labels=path, columns=PREDICTION)
    assert _sent(judge) == 2 * 3 and choice.rows == 3  # the even row has no majority: left out
    agree = [0.6, 0.0, 1.0, 0.7]  # the share of a row's reviewers in its majority (none on the even row)
    counts = np.array([[reviewers * (1 - s), reviewers * s] for s in shares])
    c = choice.ceiling
    assert (c["annotators"], c["rows"], c["comparisons"]) == (reviewers, 4, 4 * reviewers)
    assert c["loo_agreement"] == pytest.approx(sum(agree) / 4)
    assert c["alpha"] == pytest.approx(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))
    # the same labels as text beside booleans (mixed JSON types: read line by line): the same figures
    mixed = _many(reviewers, shares)
    for line in mixed[::2]:
        line["label"] = "yes" if line["label"] else "no"
    again = _choose(judge, tmp_path, _rows(4), "Binary", labels=_jsonl(tmp_path / "mixed.jsonl", mixed),
                    columns=PREDICTION)  # fmt: skip
    assert again.ceiling == c and [e["score"] for e in again.entries] == [e["score"] for e in choice.entries]
    # one bad label on the last line: refused, naming it, before any request
    bad = _jsonl(tmp_path / "bad.jsonl", _many(reviewers, shares, bad_last=True))
    with pytest.raises(ConfigError, match=rf"\(\['maybe'\]\) at {bad}, line {4 * reviewers}: 'maybe'"):
        _choose(judge, tmp_path, _rows(4), "Binary", labels=bad, columns=PREDICTION)
    assert _sent(judge) == 0


# -- the view of a choose_judge.json holding NaN ------------------------------------------------------------------


def test_view_of_a_choose_judge_json_holding_nan_shows_no_figure_for_it(tmp_path, capfd):
    from test_report_inputs import _embedded, _result

    folder = tmp_path / "choice"
    _result(folder / "a", None)
    entries = [
        {"name": "a", "judge": "a", "score": math.nan, "interval": [math.nan, 0.9], "coverage": math.inf,
         "kappa": -math.inf, "cost_per_1000": math.nan},
        {"name": "b", "judge": "b", "score": 0.7, "interval": [0.6, 0.8], "coverage": 1.0, "kappa": 0.4},
    ]  # fmt: skip
    choice = {"metric": "Binary", "kind": "binary", "rows": 10, "headline": "accuracy", "entries": entries,
              "recommendation": {"name": "a"}, "ceiling": {"loo_agreement": math.nan}}  # fmt: skip
    (folder / "choose_judge.json").write_text(json.dumps(choice))  # NaN, Infinity: as json.dumps writes them
    code, _, err = run_cli(capfd, "view", folder)
    assert code == 0, err
    shown = _embedded(folder / "report.html")["overview"]["choice"]
    a, b = shown["entries"]
    assert (a["score"], a["interval"], a["coverage"], a["kappa"], a["cost_per_1000"]) == (None,) * 5
    assert (b["score"], b["interval"], b["coverage"]) == (0.7, [0.6, 0.8], 1.0)
    assert shown["ceiling"] == {"loo_agreement": None}
