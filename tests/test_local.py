"""The offline first run: `--example` (a dataset shipped in the package) and `--model local`
(a llama.cpp judge hf-judge starts and stops itself).

The tests marked real_server start the real server with Gemma 3 270M (the `local` extra;
CI runs them). The others need no model: the loopback judge, or a missing extra/GGUF.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from datasets import load_from_disk
from helpers import EXAMPLE_ROWS, QA_ALL, llama_servers_with, run_cli

from hf_judge.cli.inputs import example_dataset_path
from hf_judge.transport.local import BUNDLED_MODEL_FILE, local_judge


def _env(tmp_path: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HF_JUDGE_DEBUG")}
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return {**env, "HF_JUDGE_CACHE": str(tmp_path / "cache"), **offline, **extra}


# --- no model needed ---------------------------------------------------------------------------


@pytest.fixture
def run(capfd, monkeypatch, tmp_path):
    """`hf-judge ARGS` in this process (helpers.run_cli), in tmp_path (outside the checkout), with no key set:
    (exit code, stdout, stderr). A real process is kept for what needs one: the server's start and stop."""
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HF_JUDGE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    return lambda *args: run_cli(capfd, *args)


def test_example_dataset_is_in_the_package():
    path = example_dataset_path()
    assert path.is_file() and path.parent.parent.name == "hf_judge"
    lines = path.read_text().splitlines()
    assert len(lines) == EXAMPLE_ROWS and all('"instruction"' in x and '"output"' in x for x in lines)


def test_example_scores_with_any_judge_and_no_other_flag(judge, tmp_path, run):
    code, out, err = run("score", "--example", "--model", "judge", "--base-url", judge.base_url)
    assert code == 0, err
    out = load_from_disk(tmp_path / "example-judged")
    assert len(out["train"]) == EXAMPLE_ROWS and len(out["errors"]) == 0
    assert out["train"].column_names == ["instruction", "output", *QA_ALL]  # QA_All by default, columns mapped by name
    assert judge.stats()["requests"] == EXAMPLE_ROWS


def test_local_without_the_extra_is_a_config_error(tmp_path, run, monkeypatch):
    # as if llama-cpp-python were not installed: find_spec() answers None for a module set to None
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    code, out, err = run("score", "--example", "--model", "local")
    assert code == 2, err
    assert 'pip install "hf-judge[local]"' in err and "llama_cpp" in err
    assert "starting" not in err and not (tmp_path / "cache" / "models").exists()


def test_local_with_a_missing_gguf_is_a_config_error(tmp_path, run):
    missing = tmp_path / "nowhere" / "model.gguf"
    code, out, err = run("score", "--example", "--model", f"local:{missing}")
    assert code == 2, err
    assert f"local model '{missing}': no such file" in err and "starting" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["score", "--model", "judge"], "no dataset: pass a Hub repo id, a folder or a data file, or --example"),
        (["score", "data.jsonl", "--example", "--model", "judge"], "--example scores the bundled example dataset"),
        (["score", "--example", "--model", "local", "--base-url", "http://127.0.0.1:9/v1"], "starts its own server"),
        (["score", "--example", "--model", "local:"], "needs a path after the colon"),
    ],
)
def test_example_and_local_usage_errors(args, message, run):
    code, out, err = run(*args)
    assert code == 2 and message in err, err


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """``--model local:MODEL`` starts tests/dying_llama.py (answering every request) as its llama.cpp server;
    returns MODEL (any file)."""
    from dying_llama import install

    folder = install(tmp_path / "stand-in")
    monkeypatch.syspath_prepend(str(folder))  # what check_local looks for, where the `local` extra is missing
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("DYING_LLAMA_AFTER", "1000")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return model


def test_local_port_puts_the_local_judge_on_the_port_given_and_a_taken_one_is_refused(stand_in, run, tmp_path):
    """local_port: P (a recipe's key) or --local-port P: the judge `--model local` starts listens on 127.0.0.1:P,
    not on a port of hf-judge's choosing; a port in use is a usage error naming it, before any request (issue 40)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = f"local:{stand_in}"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"metrics: [QA_All]\nmodel: {model}\nlocal_port: {port}\n")
    code, out, err = run("run", recipe, "--dataset", example_dataset_path(), "-o", tmp_path / "a")
    assert code == 0, err
    assert f"ready at http://127.0.0.1:{port}/v1" in err
    assert len(load_from_disk(tmp_path / "a")["train"]) == EXAMPLE_ROWS
    # the flag, at once again (the stopped server's connections still linger): the same base URL, so the
    # replies come from the cache
    code, out, err = run("score", "--example", "--model", model, "--local-port", port, "-o", tmp_path / "a")
    assert code == 0 and f"ready at http://127.0.0.1:{port}/v1" in err, err
    assert "requests       0" in out, out
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the judge's closed connections linger
        taken.bind(("127.0.0.1", port))
        taken.listen()
        code, out, err = run("score", "--example", "--model", model, "--local-port", port, "-o", tmp_path / "b")
    assert code == 2, err
    assert f"port {port} on 127.0.0.1 is in use" in err and "--local-port" in err and "starting" not in err
    code, out, err = run("score", "--example", "--model", "judge", "--base-url", "http://127.0.0.1:9/v1",
                         "--local-port", port)  # fmt: skip
    assert code == 2 and f"--local-port {port} is the port of the judge --model local starts" in err, err


# --- the real server (the `local` extra) ---------------------------------------------------------


def _model_in(cache: Path) -> Path:
    """Put the GGUF the llama fixture assembled (once per machine) where `--cache-dir cache` looks for it."""
    from llama_fixture import ensure_model

    target = cache / "models" / BUNDLED_MODEL_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(ensure_model())
    return target


def _assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the server's process group (its own session): nothing of it is left


class _Run:
    """`hf-judge score --example --model local` in the background, its stderr collected line by line."""

    def __init__(self, tmp_path: Path) -> None:
        self.model = _model_in(tmp_path / "cache")
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hf_judge.cli", "score", "--example", "--model", "local", "--cache-dir", "cache"],
            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def wait_for(self, text: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((x for x in self.lines if text in x), None)
            if hit:
                return hit
            assert self.proc.poll() is None, f"exit {self.proc.returncode} before {text!r}:\n{''.join(self.lines)}"
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} within {timeout} s:\n{''.join(self.lines)}")

    def server_pid(self) -> int:
        line = self.wait_for("(pid ")
        return int(line.rsplit("(pid ", 1)[1].split(")")[0])

    def stop_with(self, sig: int) -> int:
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=120)
        self.reader.join(timeout=60)  # the reader thread drains stderr up to its end
        return rc


# `hf-judge score --example --model local` start to finish, every row checked: the README's first
# example, which tests/test_readme.py runs as written (check_local_example there)


@pytest.mark.real_server
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_while_scoring_stops_the_server(tmp_path, sig):
    run = _Run(tmp_path)
    pid = run.server_pid()
    run.wait_for("Scoring train")  # requests are on their way
    time.sleep(1.0)
    assert run.stop_with(sig) == 130, "".join(run.lines)
    assert "interrupted" in "".join(run.lines)
    _assert_gone(pid)
    assert llama_servers_with(str(run.model)) == []


@pytest.mark.real_server
def test_ctrl_c_while_the_server_starts_stops_it(tmp_path):
    run = _Run(tmp_path)
    run.wait_for("starting a local llama.cpp judge")
    deadline = time.monotonic() + 60
    while not llama_servers_with(str(run.model)) and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = llama_servers_with(str(run.model))
    assert pids, "".join(run.lines)
    assert run.stop_with(signal.SIGINT) == 130, "".join(run.lines)
    for pid in pids:
        _assert_gone(pid)


@pytest.mark.real_server
def test_local_judge_stops_the_server_when_the_block_raises(tmp_path, monkeypatch):
    model = _model_in(tmp_path / "cache")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-never-in-the-server-0123")
    with pytest.raises(RuntimeError, match="boom"), local_judge(models_dir=model.parent) as judge:
        pid = judge.pid
        assert judge.model == "gemma-3-270m-q4_k_m" and judge.base_url == f"http://127.0.0.1:{judge.port}/v1"
        assert llama_servers_with(str(model)) == [pid]
        assert b"SECRET" not in Path(f"/proc/{pid}/environ").read_bytes()  # the server gets no keys
        raise RuntimeError("boom")
    _assert_gone(pid)
    assert not judge.log_path.exists()  # a server that ran fine leaves no log behind
