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


QA_COLUMNS = {"instruction": "question", "output": "answer"}
# each provider's judge as the loopback servers answer it (tests/batch_server.py, anthropic_server.py,
# gemini_server.py): its settings and its key
JUDGES = {
    "openai": ({"model": "judge"}, "sk-test"),
    "anthropic": ({"model": "claude-haiku-4-5", "provider": "anthropic"}, "sk-ant-test"),
    "gemini": ({"model": "gemini-2.5-flash", "provider": "gemini"}, "gm-test"),
}
FAST = {"backoff_base": 0.001, "backoff_max": 0.01, "batch_poll_s": 0.01}  # retries and batch polls at once


def score_as(provider, ds, base_url, cache, metrics=("QA_Clarity",), settings=(), **kw):
    """``ds`` (qa_dataset's columns) scored by ``provider``'s judge (``JUDGES``) at ``base_url``, with ``FAST``
    knobs; the keyword arguments named in ``settings`` go in the Settings object, the others to score_dataset.

        score_as("anthropic", qa_dataset(4), claude.url, tmp_path / "c", batch=True)
    """
    from hf_judge import Settings, score_dataset

    values, api_key = JUDGES[provider]
    knobs = {**FAST, **{k: kw.pop(k) for k in settings if k in kw}}
    return score_dataset(
        ds,
        list(metrics),
        settings=Settings(**values, **knobs),
        base_url=base_url,
        api_key=api_key,
        cache_dir=cache,
        columns=QA_COLUMNS,
        progress=False,
        **kw,
    )


def rows(scored) -> dict[str, list[dict]]:
    """A scored DatasetDict's rows, split by split: what two runs that should agree are compared by."""
    return {k: v.to_list() for k, v in scored.items()}


def until(cond, timeout: float = 240.0) -> None:
    """Wait for ``cond()`` to be true (a server's counters, a file), polling; an AssertionError after ``timeout`` s.

    The bound is against a hang, not a measure: under load a process of the tests took over 60 s to start and
    reach its first upload (pytest-timeout's 300 s per test stays the outer bound)."""
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def history_of(cache) -> list[dict]:
    """Every entry of the run history a cache folder holds (each split's, each run's), as a run leaves it."""
    import contextlib
    import json
    from pathlib import Path

    out: list[dict] = []
    for f in (Path(cache) / "results").glob("*.runs.json"):
        with contextlib.suppress(OSError, ValueError):  # replaced under the reader by the next checkpoint
            out += json.loads(f.read_text(encoding="utf-8"))
    return out


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


def scored_result(capfd, judge, tmp_path, rows: int, *extra, metrics: str = "QA_Correctness", name: str = "judged"):
    """``rows`` rows of :func:`qa_dataset` scored by ``hf-judge score`` against the loopback ``judge`` into
    ``tmp_path / name`` (the reply store in ``tmp_path / "cache"``; ``extra``: more options, such as
    ``--streaming`` or ``--logprobs``): the result folder the post-run tools (calibrate, agreement, ...) read."""
    data = tmp_path / "data.jsonl"
    qa_dataset(rows).to_json(data)
    out = tmp_path / name
    args = score_args(data, judge, "-o", out, "--cache-dir", tmp_path / "cache", *extra, metrics=metrics)
    code, _, err = run_cli(capfd, *args)
    assert code == 0, err
    return out


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


def longer_pairs(n: int) -> Dataset:
    """``n`` pairs (question, response1, response2) whose label ``human`` is the longer response on 4 of 5 rows
    (rows 0, 5, 10, ...: the shorter one), the longer one first on even rows: for judges that prefer the longer."""
    q, r1, r2, label = [], [], [], []
    for i in range(n):
        long, short = "L" * (60 + i), "S" * (20 + i % 7)
        first_long = i % 2 == 0
        q.append(f"question {i}")
        r1.append(long if first_long else short)
        r2.append(short if first_long else long)
        longer = "1" if first_long else "2"
        label.append(longer if i % 5 else {"1": "2", "2": "1"}[longer])
    return Dataset.from_dict({"question": q, "response1": r1, "response2": r2, "human": label})
