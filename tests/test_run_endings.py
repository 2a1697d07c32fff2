"""How a run ends (issue 33): a run that finished but lost something whole (every request, every request to one
judge of a panel, its local judge) exits 3 and says what in its last lines; a run whose local judge died says how
it died and how to fix it; a 404 names the missing ``--provider``; the end-of-run table prints clean.

The local judge here is a real process started through ``--model local``'s own launch path
(``python -m llama_cpp.server``) that dies the way a llama.cpp built for another CPU does (tests/dying_llama.py).
CLI runs are in-process (``run_cli``), against the loopback judge server.
"""

from __future__ import annotations

import os
import re
import socket
from collections import Counter
from pathlib import Path

import pytest
from datasets import load_from_disk
from dying_llama import install
from helpers import EXAMPLE_ROWS, run_cli

from hf_judge.transport.local import PORTABLE_CMAKE_ARGS


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("OPENAI_BASE_URL", "HF_JUDGE_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def _lines(err: str) -> list[str]:
    return err.rstrip("\n").splitlines()


# -- every request failed --------------------------------------------------------------------------------------


def test_a_run_whose_every_request_failed_exits_3_and_says_so_last(judge, capfd, tmp_path):
    """Connections dropped and 503s, nothing answered: the result is saved with its errors, and the exit code and
    the last line say the run lost every request, by kind. The same command once the server is well exits 0."""
    judge.configure(faults=[{"fault": "reset", "rate": 0.5}, {"fault": "status", "status": 503}])
    args = ("score", "--example", "--model", "judge", "--base-url", judge.base_url, "--retries", "0")
    code, out, err = run_cli(capfd, *args)
    assert code == 3, err
    errors = load_from_disk(tmp_path / "example-judged")["errors"]
    kinds = Counter(errors["kind"])
    assert len(errors) == EXAMPLE_ROWS and set(kinds) == {"connection", "http_503"}, kinds
    last = _lines(err)[-1]
    assert last.startswith(f"hf-judge: lost: every request of this run failed ({EXAMPLE_ROWS} of {EXAMPLE_ROWS}; ")
    assert f"connection: {kinds['connection']}" in last and f"http_503: {kinds['http_503']}" in last
    assert "errors         " in out  # the summary printed before it

    judge.configure(faults=[])
    code, out, err = run_cli(capfd, *args)
    assert code == 0 and "lost" not in err, err


def test_connections_reset_after_they_were_made_are_failed_rows_not_an_unreachable_server(judge, capfd, tmp_path):
    """A server that takes the connection and then resets it is there (its next reply may be a 503): the rows
    are filed as connection errors and the run ends as one that lost every request, never "cannot reach the
    server" (which raced with the 503s of the test above: a reset that came first stopped the run, exit 1)."""
    judge.configure(faults=[{"fault": "reset"}])
    args = ("score", "--example", "--model", "judge", "--base-url", judge.base_url, "--retries", "0")
    code, _, err = run_cli(capfd, *args)
    assert code == 3, err
    assert "cannot reach" not in err
    assert Counter(load_from_disk(tmp_path / "example-judged")["errors"]["kind"]) == {"connection": EXAMPLE_ROWS}


# -- a panel that lost a judge ---------------------------------------------------------------------------------


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("how, kind", [("down", "connection"), ("failing", "http_500")])
def test_a_panel_that_lost_a_judge_exits_3_naming_it_and_the_error_kind(judge, capfd, tmp_path, how, kind):
    """Judge c's server is down, or answers 500 to everything: the panel's scores are judge a's alone. The run says
    so in its exit code and its last line, naming judge c and what its requests failed with."""
    dead = _dead_url() if how == "down" else judge.base_url
    judge.configure(faults=[{"fault": "status", "status": 500, "model": "judge-c"}])
    recipe = tmp_path / "panel.yaml"
    recipe.write_text(
        "metrics: [QA_Correctness]\nmodels:\n"
        f"  - {{model: judge-a, name: a, base_url: '{judge.base_url}'}}\n"
        f"  - {{model: judge-c, name: c, base_url: '{dead}'}}\n"
    )
    code, out, err = run_cli(capfd, "score", "--example", "--recipe", recipe, "--retries", "0")
    assert code == 3, err
    train = load_from_disk(tmp_path / "example-judged")["train"]
    assert None not in train["QA_Correctness__a"] and train["QA_Correctness__c"] == [None] * EXAMPLE_ROWS
    last = _lines(err)[-1]
    lost = re.fullmatch(
        rf"hf-judge: lost: judge 'c' lost: every one of its requests failed \((\d+) of (\d+); {kind}: (\d+)\); "
        r"the panel's scores are the other judges' alone",
        last,
    )
    assert lost and len(set(lost.groups())) == 1, last

    if how == "failing":  # the same panel once judge c answers: 0
        judge.configure(faults=[])
        code, out, err = run_cli(capfd, "score", "--example", "--recipe", recipe, "--retries", "0")
        assert code == 0 and "lost" not in err, err


# -- the local judge died --------------------------------------------------------------------------------------


@pytest.fixture
def dying_llama(tmp_path, monkeypatch) -> Path:
    """``--model local:MODEL`` starts tests/dying_llama.py as its llama.cpp server; returns MODEL (any file)."""
    folder = install(tmp_path / "stand-in")
    monkeypatch.syspath_prepend(str(folder))  # what check_local looks for, where the `local` extra is missing
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return model


def test_a_local_judge_that_dies_on_its_first_request_names_the_signal_and_the_rebuild(dying_llama, capfd, monkeypatch):
    """As on a CPU whose AMX the OS does not enable: SIGSEGV on the first request. The run stops (exit 1) saying
    that the judge died, by which signal, where its log is, and the command that rebuilds llama.cpp portably; the
    log itself now says how the server ended."""
    code, out, err = run_cli(capfd, "score", "--example", "--model", f"local:{dying_llama}", "--retries", "0")
    assert code == 1, err
    stopped = next(line for line in _lines(err) if line.startswith("hf-judge: stopped: "))
    assert stopped.startswith(
        "hf-judge: stopped: the local llama.cpp judge died during the run (killed by signal SIGSEGV)"
    )
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in err and "-m pip install --force-reinstall --no-cache-dir" in err
    log = Path(re.search(r"its log: (\S+)\.", stopped).group(1))
    assert (
        _lines(log.read_text())[-1]
        == "hf-judge: the local llama.cpp judge died during the run (killed by signal SIGSEGV)"
    )
    assert "WARNING" not in err  # said once, by the stop


def test_a_local_judge_that_dies_mid_run_exits_3_with_the_fix_last(dying_llama, capfd, tmp_path, monkeypatch):
    """Three replies, then SIGILL: the run goes on to its end with connection errors, saves what it has, and exits
    3; its last lines name the signal and end with the rebuild command."""
    monkeypatch.setenv("DYING_LLAMA_AFTER", "3")
    monkeypatch.setenv("DYING_LLAMA_SIGNAL", "SIGILL")
    code, out, err = run_cli(capfd, "score", "--example", "--model", f"local:{dying_llama}", "--retries", "0")
    assert code == 3, err
    saved = load_from_disk(tmp_path / "example-judged")
    assert len(saved["errors"]) == EXAMPLE_ROWS - 3 and set(saved["errors"]["kind"]) == {"connection"}
    lines = _lines(err)
    assert lines[-2].startswith(
        "hf-judge: lost: the local llama.cpp judge died during the run (killed by signal SIGILL)"
    )
    assert lines[-1].strip().startswith(f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" ')


# -- a 404 from a provider's model asked through OpenAI's API --------------------------------------------------


@pytest.mark.parametrize(
    "model, hint, not_said",
    [
        ("claude-haiku-4-5", "add --provider anthropic", "it usually ends in /v1"),
        ("gemini-2.5-flash", "add --provider gemini", "it usually ends in /v1"),
        ("my-model", "Check the model name ('my-model') and the base URL (it usually ends in /v1)", "--provider"),
    ],
)
def test_a_404_names_the_missing_provider(judge, capfd, model, hint, not_said):
    judge.configure(faults=[{"fault": "status", "status": 404, "message": "Not Found"}])
    code, out, err = run_cli(capfd, "score", "--example", "--model", model, "--base-url", judge.base_url)
    assert code == 1 and hint in err and not_said not in err, err


# -- the end-of-run table ----------------------------------------------------------------------------------------


def test_the_end_of_run_table_prints_without_the_saving_bar(judge, capfd, monkeypatch):
    """In a terminal (the library bars stay on), datasets' "Saving the dataset" bar does not come between the
    scoring and the table."""
    monkeypatch.setattr("hf_judge.progress._interactive", lambda _stream: True)
    code, out, err = run_cli(capfd, "score", "--example", "--model", "judge", "--base-url", judge.base_url)
    assert code == 0, err
    assert "Saving the dataset" not in err and "saved to example-judged" in out


def test_score_help_gives_the_exit_codes(capfd):
    code, out, err = run_cli(capfd, "score", "--help")
    assert code == 0
    codes = out.split("exit codes:", 1)[1]
    assert [line.split()[0] for line in codes.splitlines() if line[:3].strip().isdigit()] == ["0", "1", "2", "3", "130"]
