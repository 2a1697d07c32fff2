"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

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
