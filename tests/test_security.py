"""Hostile input: prompt files, secrets echoed by a server, credentials in URLs, odd thresholds."""

from __future__ import annotations

import base64
import logging
import re
from pathlib import Path

import pytest
import yaml
from datasets import Dataset
from helpers import qa_dataset

from hf_judge import Settings, filter_by_scores, load_metric, score_dataset
from hf_judge.cli import main
from hf_judge.errors import ConfigError, PromptFileError
from hf_judge.judging.catalogue import available_metrics
from hf_judge.judging.metrics import _parse_outputs
from hf_judge.judging.render import compile_template
from hf_judge.results.card import render_section

KEY = "sk-echo-SECRETKEY-0123456789abcdef"
TOKEN = "hf_EchoedHubToken0123456789abcdef"
EXPLOIT = "{{ cycler.__init__.__globals__.os.system('id > pwned.txt') }}"


def score(ds, metrics, judge, tmp_path, **kw):
    kw.setdefault("columns", {"instruction": "question", "output": "answer"})
    kw.setdefault("base_url", judge.base_url)
    kw.setdefault("api_key", "sk-test")
    kw.update(settings=Settings(model="judge", backoff_base=0.001, backoff_max=0.01), cache_dir=tmp_path / "cache")
    return score_dataset(ds, metrics, **kw)


# -- prompt files -------------------------------------------------------------------


def _prompt(folder: Path, name: str, front: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.jinja"
    path.write_text(f"---\n{front}\n---\nRate {{{{ instruction }}}}.\n")
    return path


@pytest.mark.parametrize(
    "front",
    [
        f'description: "{EXPLOIT}"\noutputs:\n  score: {{type: integer, minimum: 1, maximum: 10}}',
        f"params: {{x: 1}}\noutputs:\n  score: {{type: integer, minimum: {EXPLOIT}, maximum: 10}}",
    ],
)
def test_front_matter_runs_in_the_sandbox(tmp_path, monkeypatch, front):
    monkeypatch.chdir(tmp_path)
    path = _prompt(tmp_path / "prompts", "Q_Evil", front)
    with pytest.raises(ConfigError) as e:
        load_metric("Q_Evil", prompts_dir=tmp_path / "prompts")
    assert str(path) in str(e.value) and "sandbox" in str(e.value)
    assert not (tmp_path / "pwned.txt").exists()


def test_front_matter_sandbox_via_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _prompt(tmp_path / "prompts", "Q_Evil", f'description: "{EXPLOIT}"\noutputs:\n  score: {{type: integer}}')
    assert main(["metrics", "--prompts-dir", str(tmp_path / "prompts")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "sandbox" in err
    assert not (tmp_path / "pwned.txt").exists()


def _old_front_matter(name: str, **params) -> dict:
    """What main computed before the fix: the front matter rendered as text, then parsed."""
    path = available_metrics()[name]
    raw = re.split(r"^---[ \t]*$\n?", path.read_text(), maxsplit=2, flags=re.M)[1]
    defaults = yaml.safe_load(re.sub(r"\{\{.*?\}\}", "null", raw)).get("params") or {}
    return yaml.safe_load(compile_template(raw, name).render({**defaults, **params}))


@pytest.mark.parametrize("name", sorted(n for n, p in available_metrics().items() if p.suffix == ".jinja"))
def test_builtin_metrics_send_the_same_requests(name):
    """Cache keys hash the request body: the schema and the description must not move."""
    m = load_metric(name)
    old = _old_front_matter(name)
    outputs = _parse_outputs(name, old["outputs"], name)
    assert m.json_schema["properties"] == {o.key: o.schema() for o in outputs}
    assert m.description == str(old.get("description", "")).strip()
    assert m.temperature == float(old.get("temperature", 0.1))


def test_builtin_metrics_with_plain_params_unchanged():
    b = load_metric("Binary", positive="yes", negative="no")
    old = _parse_outputs("Binary", _old_front_matter("Binary", positive="yes", negative="no")["outputs"], "")
    assert b.json_schema["properties"] == {o.key: o.schema() for o in old}
    assert b.json_schema["properties"]["verdict"] == {
        "type": "string",
        "enum": ["yes", "no"],
        "description": "yes if fully correct, else no",
    }
    c = load_metric("Comparative", min_score=0, max_score=5)
    old = _parse_outputs("Comparative", _old_front_matter("Comparative", min_score=0, max_score=5)["outputs"], "")
    assert c.json_schema["properties"] == {o.key: o.schema() for o in old}
    assert c.json_schema["properties"]["score_1"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 5,
        "description": "overall score of Assistant 1",
    }


def test_param_values_cannot_break_the_front_matter():
    m = load_metric("Binary", positive='say "yes"', negative="no: never # \\n")
    assert m.json_schema["properties"]["verdict"] == {
        "type": "string",
        "enum": ['say "yes"', "no: never # \\n"],
        "description": 'say "yes" if fully correct, else no: never # \\n',
    }
    prompt = m.messages({"question": "q", "answer": "a", "prediction": "p"})[0]["content"]
    assert 'Reply say "yes" for a fully correct prediction' in prompt


def test_a_param_that_does_not_fit_names_the_parameter():
    with pytest.raises(PromptFileError) as e:
        load_metric("Comparative", min_score="low")
    msg = str(e.value)
    assert "min_score='low'" in msg and "minimum must be a number" in msg
    assert not msg.startswith(str(available_metrics()["Comparative"]))  # the user's value is at fault, not the file


# -- secrets ------------------------------------------------------------------------


def test_echoed_secrets_never_leave_the_process(judge, tmp_path, monkeypatch, caplog):
    """A server that echoes the key and the Hub token, in invalid and in valid replies."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    judge.configure(
        overrides={"reason": f"you sent {KEY} and {TOKEN}"},
        faults=[
            {"fault": "text", "match": "row-1:", "text": f"not json: Authorization: Bearer {KEY} token={TOKEN}"},
            {"fault": "status", "status": 400, "match": "row-2:", "message": f"bad key {KEY} {TOKEN}"},
        ],
    )
    caplog.set_level(logging.DEBUG, logger="hf_judge")
    out = score(qa_dataset(4), ["QA_Clarity"], judge, tmp_path, api_key=KEY, retries=1)
    errors = out["errors"].to_list()
    assert sorted((e["row"], e["kind"]) for e in errors) == [(1, "invalid_json"), (2, "http_400")]
    assert "***" in errors[0]["raw"] and "***" in errors[1]["message"]
    reasons = out["train"]["QA_Clarity_reason"]
    assert reasons[0] == "you sent *** and ***" and reasons[3] == "you sent *** and ***"
    texts = [str(errors), str(out.summary), caplog.text, render_section(out, out.summary), str(out["train"].to_list())]
    blobs = [f.read_bytes() for f in (tmp_path / "cache").rglob("*") if f.is_file()]
    for secret in (KEY, TOKEN):
        for t in texts:
            assert secret not in t
        for b in blobs:
            assert secret.encode() not in b


def test_a_cached_reply_holds_no_secret(judge, tmp_path, monkeypatch):
    """The second run is served from the reply store: the secret was never written there."""
    judge.configure(overrides={"reason": f"echo {KEY}"})
    first = score(qa_dataset(2), ["QA_Clarity"], judge, tmp_path, api_key=KEY)
    store = next((tmp_path / "cache").rglob("replies.sqlite3*")).read_bytes()
    assert KEY.encode() not in store and b"echo ***" in store
    assert first["train"]["QA_Clarity_reason"] == ["echo ***", "echo ***"]


# -- base_url -------------------------------------------------------------------------


def test_base_url_query_is_kept_after_the_path(judge, tmp_path):
    judge.configure(record=True)
    out = score(
        qa_dataset(2),
        ["Q_Clarity"],
        judge,
        tmp_path,
        base_url=judge.base_url + "/?api-version=2024-06-01",
        columns={"instruction": "question"},
    )
    assert len(out["errors"]) == 0
    assert judge.stats()["paths"] == ["/v1/chat/completions?api-version=2024-06-01"] * 2
    assert out.summary.base_url_host == f"127.0.0.1:{judge.port}"
    assert "api-version" not in render_section(out, out.summary)


def test_base_url_userinfo_is_basic_auth_and_never_shown(judge, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the URL's credentials win over the environment's key
    judge.configure(record=True)
    caplog.set_level(logging.DEBUG, logger="hf_judge")
    url = f"http://alice:pw-secret-0123456789@127.0.0.1:{judge.port}/v1"
    out = score(
        qa_dataset(2), ["Q_Clarity"], judge, tmp_path, base_url=url, api_key=None, columns={"instruction": "question"}
    )
    basic = "Basic " + base64.b64encode(b"alice:pw-secret-0123456789").decode()
    assert judge.stats()["auth"] == [basic, basic]
    assert out.summary.base_url_host == f"127.0.0.1:{judge.port}"
    for text in (str(out.summary), render_section(out, out.summary), caplog.text):
        assert "alice" not in text and "pw-secret" not in text


def test_base_url_userinfo_and_an_api_key_is_a_config_error(judge, tmp_path):
    url = f"http://alice:pw-secret-0123456789@127.0.0.1:{judge.port}/v1"
    with pytest.raises(ConfigError) as e:
        score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, base_url=url, api_key=KEY)
    assert "user:password@" in str(e.value) and "pw-secret" not in str(e.value) and KEY not in str(e.value)
    assert judge.stats()["requests"] == 0


@pytest.mark.parametrize("bad", ["ftp://host/v1", "localhost:8000/v1", "http:///v1"])
def test_base_url_that_is_not_http_is_a_config_error(judge, tmp_path, bad):
    with pytest.raises(ConfigError, match="base_url"):
        score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, base_url=bad)


@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\t", "\x00"])
def test_api_key_with_a_control_character_is_a_config_error(judge, tmp_path, suffix):
    with pytest.raises(ConfigError) as e:
        score(qa_dataset(1), ["QA_Clarity"], judge, tmp_path, api_key=KEY + suffix)
    assert "control character" in str(e.value) and "strip" in str(e.value) and KEY not in str(e.value)
    assert judge.stats()["requests"] == 0


# -- thresholds -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_thresholds_must_be_finite(value):
    ds = Dataset.from_dict({"QA_Correctness": [9, 3]})
    with pytest.raises(ConfigError, match="finite"):
        filter_by_scores(ds, min={"QA_Correctness": value})
    with pytest.raises(ConfigError, match="finite"):
        filter_by_scores(ds, max={"QA_Correctness": value})


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity"])
def test_cli_thresholds_must_be_finite(tmp_path, capsys, text):
    Dataset.from_dict({"QA_Correctness": [9, 3]}).to_json(tmp_path / "d.jsonl")
    with pytest.raises(SystemExit) as e:
        main(["filter", str(tmp_path / "d.jsonl"), "--min", f"QA_Correctness={text}", "--output-dir", str(tmp_path)])
    assert e.value.code == 2 and "finite" in capsys.readouterr().err
    assert not (tmp_path / "dataset_dict.json").exists()
