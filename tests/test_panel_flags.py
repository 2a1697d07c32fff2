"""One judge or a panel: `model` and `models` given together, across layers (recipe < flags), or empty; what a
panel's judges on one server report."""

from __future__ import annotations

import pytest
from helpers import qa_dataset, run_cli, score

from hf_judge import AuthenticationError, ConfigError, Settings
from hf_judge.settings import resolve_settings


def test_a_model_outside_the_panel_in_one_layer_is_refused():
    with pytest.raises(ConfigError, match=r"both model='x' and a panel.*Drop model \(--model\), or add 'x'"):
        resolve_settings({"model": "x", "models": ["a", "b"]})
    with pytest.raises(ConfigError, match="both model='x'"):
        resolve_settings({"model": "x", "models": "a, b"})
    with pytest.raises(ValueError, match="both model='x'"):  # pydantic's ValidationError, built directly
        Settings(model="x", models=["a"])
    # the model named among the judges is no conflict
    assert [j.model for j in resolve_settings({"model": "b", "models": [{"model": "a"}, "b"]}).judges] == ["a", "b"]


def test_the_later_layer_chooses_one_judge_or_a_panel():
    panel = resolve_settings({"model": "gpt-4.1-nano"}, {"models": "a,b"})  # a recipe's model, --models
    assert [j.model for j in panel.judges] == ["a", "b"] and panel.model == "a"
    one = resolve_settings({"models": ["a", "b"]}, {"model": "x"})  # a recipe's panel, --model
    assert one.models is None and [j.model for j in one.judges] == ["x"]


def test_an_empty_panel_says_so():
    with pytest.raises(ConfigError, match=r"models is empty.*--models a,b"):
        resolve_settings({"models": " , "})


def test_cli_refuses_model_and_models_and_an_empty_panel(capfd, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    common = [data, "--metrics", "QA_Correctness", "--base-url", "http://127.0.0.1:9/v1", "-o", tmp_path / "out"]
    code, _, err = run_cli(capfd, "score", *common, "--model", "judge-b", "--models", "judge-a")
    assert code == 2 and "both model='judge-b' and a panel" in err
    code, _, err = run_cli(capfd, "score", *common, "--models", ",")
    assert code == 2 and "models is empty" in err


def test_two_judges_on_one_server_say_its_note_once(judge, tmp_path):
    judge.configure(n="ignore")
    out = score(qa_dataset(2), ["QA_Correctness"], judge, tmp_path, models="m1,m2", samples=3, temperature=0.7)
    assert len(out["errors"]) == 0 and judge.stats()["requests"] == 12
    assert len([n for n in out.summary.notes if "ignores n" in n]) == 1


def test_a_judge_that_refuses_its_key_stops_the_run_naming_it(judge, tmp_path):
    from judge_fixture import JudgeServer

    with JudgeServer() as other:
        other.configure(require_key="sk-other")
        models = [{"model": "judge-a", "base_url": judge.base_url}, {"model": "judge-b", "base_url": other.base_url}]
        with pytest.raises(AuthenticationError, match=r"^judge 'judge_b': .*refused the API key"):
            score(qa_dataset(2), ["QA_Correctness"], judge, tmp_path, models=models, retries=0)
