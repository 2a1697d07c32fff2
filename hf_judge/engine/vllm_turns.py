"""The vLLM judges hf-judge starts (``vllm:MODEL`` without a ``base_url``), one engine loaded at a time.

One judge: its server runs around the run (:func:`vllm_served`). A cascade's tiers run one pass after the other
(engine/cascade.py), so each tier's vLLM judge is started for its own pass and stopped before the next starts. A
panel (``models=[...]``, and so choose-judge's candidates) asks each of its judges for every row at once; its vLLM
judges instead take turns (:func:`judges_in_turn`): each is started, scores the rows alone (its replies go to the
reply store, keyed by the model's identity, not its port), and is stopped before the next one loads; then the
panel runs with each of them answered from the store. Nothing is sent to a stopped judge: a row whose reply its
turn did not store (a prompt too long for it, a connection lost) is an errors row that says so, and a rerun with
the same ``cache_dir`` pays only for those. A judge (a panel's, a cascade tier's) whose every request has a reply in
the store is not started at all: its requests are counted first, as the estimate counts them, keyed by the model's
identity (:func:`~hf_judge.transport.vllm.model_identity`), which needs no server.

Example:
    >>> from hf_judge import Settings
    >>> [j.model for j in managed_judges(Settings(models=["vllm:org/a", "gpt-x", "vllm:b"]))]
    ['vllm:org/a', 'vllm:b']
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import InterruptedRun, RunStopped
from ..settings import Panelist, Settings
from ..transport.local import LocalJudgeDiedError, died_message
from ..transport.vllm import (
    engine_args,
    judge_concurrency,
    list_servers,
    model_identity,
    parse_vllm_model,
    served_name,
    vllm_judge,
)

__all__ = ["judges_in_turn", "managed", "managed_judges", "vllm_served"]

# where a panel finds a vLLM judge whose turn is over: nothing listens there (port 9, and the client sends nothing
# to a judge listed as stopped); a path of its own per judge, as the listing is keyed by base URL
_STOPPED_URL = "http://127.0.0.1:9/hf-judge-stopped-vllm-{i}/v1"


def managed(model: str | None, base_url: str | None) -> bool:
    """Whether ``model`` is a vLLM judge hf-judge starts: ``vllm:MODEL`` with no server given.

    Example:
        >>> managed("vllm:org/m", None), managed("vllm:org/m", "http://gpu1:8000/v1"), managed("gpt-x", None)
        (True, False, False)
    """
    return str(model or "").startswith("vllm:") and not base_url


def managed_judges(settings: Any) -> list[Panelist]:
    """The judges of a panel (``models``) that hf-judge starts: a judge's own ``base_url``, else the run's, is a
    server already there."""
    run_url = getattr(settings, "base_url", None)
    return [j for j in getattr(settings, "models", None) or [] if managed(j.model, j.base_url or run_url)]


def _stopped(model: str, name: str, settings: Settings, i: int, why: str) -> tuple[str, dict[str, Any]]:
    """The base URL and the facts a judge not running is listed under: keyed by the model's identity, which needs no
    server, so its stored replies are found; asked nothing."""
    facts = {
        "identity": model_identity(name, engine_args(settings.vllm_args)),
        "max_model_len": None,
        "stopped": f"{model} {why}, and no reply to this request is stored; rerun with the same cache_dir to ask it",
    }
    return _STOPPED_URL.format(i=i), facts


def _idle(settings: Settings, url: str, facts: dict[str, Any], to_send: Callable[[Settings], int] | None) -> bool:
    """Whether ``to_send`` counts no request for the judge of ``settings`` listed at ``url`` (not started)."""
    if to_send is None:
        return False
    with list_servers({url: facts}):
        return to_send(settings) == 0


@contextlib.contextmanager
def vllm_served(
    settings: Settings, to_send: Callable[[Settings], int] | None = None, say: Callable[[str], None] | None = None
) -> Iterator[tuple[Settings, Any]]:
    """``model="vllm:MODEL"``: the settings of the vLLM judge started for the block (its name and base URL), or, with
    a ``base_url``, of the vLLM server already there (the model's name without ``vllm:``); any other model: the
    settings as they are; with the judge started, or None. ``to_send``: as :func:`judges_in_turn`'s; with no request
    to send (a rerun: every reply stored), the judge is not started and answers from the store. ``say``: where its
    start and stop are told (the CLI's stderr).

    Example:
        >>> with vllm_served(Settings(model="vllm:m", base_url="http://gpu1:8000/v1")) as (s, judge):
        ...     s.model, judge
        ('m', None)
    """
    name = parse_vllm_model(settings.model)
    if name is None:
        yield settings, None
    elif settings.base_url:
        yield settings.model_copy(update={"model": name}), None
    else:
        why = "was not started (every reply of its run was stored)"
        url, facts = _stopped(settings.model or name, name, settings, 0, why)
        idle = settings.model_copy(update={"model": served_name(name), "base_url": url})
        if _idle(idle, url, facts, to_send):
            if say is not None:
                say(f"vLLM judge {name} not started: every reply of this run is stored")
            with list_servers({url: facts}):
                yield idle, None
            return
        with _started(name, settings, say) as judge:
            yield vllm_settings(settings, judge), judge


@contextlib.contextmanager
def _started(name: str, settings: Settings, say: Callable[[str], None] | None) -> Iterator[Any]:
    """The vLLM judge ``name`` started for the block, its start and readiness told to ``say``."""
    started = time.perf_counter()
    if say is not None:
        say(f"starting a vLLM judge ({name})")
    with vllm_judge(name, vllm_args=settings.vllm_args, python=settings.vllm_python) as judge:
        if say is not None:
            ready = time.perf_counter() - started
            say(f"vLLM judge {judge.model} ready at {judge.base_url} in {ready:.1f} s (pid {judge.pid})")
        try:
            yield judge
        except RunStopped as e:  # stopped because the server died: how it died and the fix, not "check the URL"
            died = None if isinstance(e, InterruptedRun) or judge.process is None else _died(judge)
            if died is None:
                raise
            raise LocalJudgeDiedError(f"{died}\n(the run stopped: {e})") from e


def _died(judge: Any) -> str | None:
    """How the judge's server died (its exit and log), or None where it runs (after 2 s: its connections close
    before its exit is seen)."""
    try:
        return died_message(judge.process.wait(timeout=2.0), judge.log_path, judge.what)
    except subprocess.TimeoutExpired:
        return None


def vllm_settings(settings: Settings, judge: Any, update: dict[str, Any] | None = None) -> Settings:
    """The settings of a run against the vLLM judge started for it: its name and base URL (with ``update``), and,
    unless the user set ``concurrency``, enough requests in flight to fill the server's ``max_num_seqs`` (shared by
    the workers): vLLM batches only what it has been sent, and ``LLM.chat``, the offline baseline, hands it every
    prompt at once.

    Example:
        >>> from pathlib import Path
        >>> from hf_judge.transport.local import LocalJudge
        >>> judge = LocalJudge("http://127.0.0.1:8000/v1", "m", Path("m"), 8000, 1, Path("log"),
        ...                    engine={"max_num_seqs": 1024})
        >>> vllm_settings(Settings(model="vllm:m"), judge).concurrency
        1024
    """
    new: dict[str, Any] = {"model": judge.model, "base_url": judge.base_url, **(update or {})}
    fill = judge_concurrency(judge, settings.num_workers)
    if fill and "concurrency" not in settings.model_fields_set:
        new["concurrency"] = fill
    return settings.model_copy(update=new)


@contextlib.contextmanager
def judges_in_turn(
    settings: Settings,
    score_alone: Callable[[Settings, str, Any], Any],
    to_send: Callable[[Settings], int] | None = None,
    say: Callable[[str], None] | None = None,
) -> Iterator[Settings]:
    """A panel's vLLM judges, each in its turn (``say``: where each start is told):
    started, ``score_alone`` called with the settings of that judge
    alone, its name in the panel and the judge started (its replies fill the store), stopped; then the block runs
    with the panel's settings, each such judge listed as stopped (its replies come from the store; a row it has none
    for is an errors row, never sent).

    ``to_send``: the requests a judge's turn would send, counted before its server starts from the settings of that
    judge alone (listed as stopped, keyed by the model's identity, which needs no server); a judge with none (every
    reply stored: a rerun) is not started at all, as loading a model takes minutes on a GPU.

    Example:
        >>> fill = lambda one, name, judge: score_job(ds, replace(job, settings=one).with_settings())  # doctest: +SKIP
        >>> with judges_in_turn(job.settings, fill) as panel:  # doctest: +SKIP
        ...     result = score_job(ds, replace(job, settings=panel).with_settings())
    """
    models: list[Panelist] = list(settings.models or [])
    stopped: dict[str, dict[str, Any]] = {}
    started = managed_judges(settings)
    for i, j in enumerate(models):
        if j not in started:
            continue
        name = parse_vllm_model(j.model)
        assert name is not None  # managed: vllm:MODEL
        why = "was stopped after its turn (a panel's vLLM judges run one at a time)"
        url, facts = _stopped(j.model, name, settings, i, why)
        stopped[url] = facts
        alone = {"models": None, "model": served_name(name), "base_url": url}
        if not _idle(settings.model_copy(update=alone), url, facts, to_send):
            with _started(name, settings, say) as judge:
                score_alone(vllm_settings(settings, judge, {"models": None}), j.column_name, judge)
        models[i] = j.model_copy(update={"model": served_name(name), "base_url": url, "name": j.column_name})
    update: dict[str, Any] = {"models": models, "model": models[0].model}
    with list_servers(stopped):
        yield settings.model_copy(update=update)
