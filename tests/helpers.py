"""Small helpers shared by the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset

# the example dataset (hf_judge/examples/) and the columns its default metric, QA_All, writes
EXAMPLE_ROWS = 8
QA_ALL = [
    f"QA_{m}"
    for m in ("Relevance", "Clarity", "Coherence", "Completeness", "Complexity", "Correctness", "Meaningfulness")
]


def qa_dataset(n: int, prefix: str = "row") -> Dataset:
    return Dataset.from_dict(
        {
            "question": [f"{prefix}-{i}: what is {i} + {i}? Use $\\frac{{a}}{{b}}$ and {{x}}." for i in range(n)],
            "answer": [f"{prefix}-{i}: it is {2 * i}" for i in range(n)],
        }
    )


def score(ds, metrics, judge, tmp_path, **kw):
    from hf_judge import Settings, score_dataset

    kw.setdefault("columns", {"instruction": "question", "output": "answer"})
    # the knobs only tests turn (fast retries, small windows) go in a Settings object
    knobs = {"backoff_base": 0.001, "backoff_max": 0.01}
    knobs.update({k: kw.pop(k) for k in ("backoff_base", "backoff_max", "window") if k in kw})
    fast = Settings(model="judge", **knobs)
    return score_dataset(
        ds, metrics, settings=fast, base_url=judge.base_url, api_key="sk-test", cache_dir=tmp_path / "cache", **kw
    )


def run_cli(capfd, *args, entry=None) -> tuple[int, str, str]:
    """``hf-judge ARGS`` in this process: (exit code, stdout, stderr), as a subprocess would give them.

    A subprocess costs ~2.5 s of imports; capfd (not capsys) also captures what libraries write to
    the real file descriptors. ``entry``: another ``main`` (``hf_judge.__main__.main``)."""
    if entry is None:
        from hf_judge.cli import main as entry
    capfd.readouterr()
    try:
        code = entry([str(a) for a in args])
    except SystemExit as e:  # argparse: --help, usage errors
        code = e.code if isinstance(e.code, int) else 2
    out, err = capfd.readouterr()
    return code, out, err


def score_args(data, server, *extra, metrics: str = "QA_Clarity", columns=("instruction=question", "output=answer"),
               model: str = "judge") -> list[str]:  # fmt: skip
    """The argv of ``hf-judge score DATA`` against ``server``, then ``extra``: what most CLI tests start from.

    ``server`` is the loopback judge (its ``base_url`` is used) or a URL; ``columns=()`` for data whose
    columns already have the template's names. For example
    ``run_cli(capfd, *score_args(data, judge, "--retries", "0"))`` is
    ``hf-judge score DATA --metrics QA_Clarity --column instruction=question --column output=answer
    --model judge --base-url URL --retries 0``.
    """
    url = server if isinstance(server, str) else server.base_url
    columns_args = [a for c in columns for a in ("--column", c)]
    args = ["score", data, "--metrics", metrics, *columns_args, "--model", model, "--base-url", url, *extra]
    return [str(a) for a in args]


def llama_servers_with(marker: str) -> list[int]:
    """Pids of live (not zombie) llama.cpp servers whose command line holds ``marker`` (a model's path)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "llama_cpp.server" in cmd and marker in cmd and state != "Z":
            pids.append(int(d.name))
    return pids


# the Hub-unreachable run, which conftest starts once the tests are collected (see start_hub_unreachable)
HUB_UNREACHABLE = pytest.StashKey[subprocess.Popen]()
HUB_UNREACHABLE_KEY = "sk-test-SECRETKEY-hub-unreachable-0123456789"


def start_hub_unreachable(folder: Path) -> subprocess.Popen:
    """``python -m hf_judge.cli score someone/data`` in ``folder``, with nothing listening at HF_ENDPOINT.

    huggingface_hub retries a refused connection five times, 1 + 2 + 4 + 8 + 8 s apart, and has no setting
    (environment variable, or argument reachable through datasets) that turns this off: the process sleeps
    ~23 s before it fails. So conftest starts it as soon as the tests are collected, and it sleeps while they
    run; tests/test_cli.py's test_hub_unreachable_is_one_line_at_exit_1 reads its result.
    """
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused, as with no network
    env = {**os.environ, "OPENAI_API_KEY": HUB_UNREACHABLE_KEY, "HF_JUDGE_CACHE": str(folder / "cache")}
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{port}"
    args = score_args("someone/data", "http://127.0.0.1:9/v1", metrics="Q_Clarity", columns=(), model="m")
    return subprocess.Popen([sys.executable, "-m", "hf_judge.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=folder)  # fmt: skip
