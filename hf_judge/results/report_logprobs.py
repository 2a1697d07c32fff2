"""The probability distribution over a score's values where ``logprobs`` ran, read back for the report page.

A logprobs run keeps, beside each reply in the reply store, the small table of the probability of each valid
value (:func:`hf_judge.judging.logprobs.distributions`); the scored result holds only what it gives
(``_expected``, ``_confidence``, ``_p_positive``), so no engine's columns change. The page reads the tables back
from the store: each embedded row's request is rebuilt (the messages by :class:`hf_judge.results.prompts.Prompter`,
the body and key by the judge's own client, from the settings ``summary.json`` records) and looked up with
:meth:`hf_judge.store.replies.ReplyStore.get_many`. A key is a hash of the server and the body: a hit is the
reply that row was given, never a guess; a miss (another cache, an unrecorded setting) shows nothing.

The summary records the server's host, not its URL: the base URLs tried are ``--base-url`` where given, else
``http(s)://HOST/v1`` (a server's root and its ``/v1`` share their keys). Shown: each judge's first sample, the
request in the order the prompt file writes (a pairwise judge's swapped order is not shown).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..judging import logprobs
from .prompts import Prompter, PromptUnavailable
from .summary import RunSummary

logger = logging.getLogger("hf_judge")
STORE_FILE = "replies.sqlite3"  # the reply store's file in a cache folder (hf_judge.engine.job.STORE_FILE)


def ran_logprobs(summary: RunSummary | None) -> bool:
    """Whether the run asked for log-probabilities (its summary records ``top_logprobs`` only then)."""
    return summary is not None and "top_logprobs" in (summary.sampling or {})


def _judges(summary: RunSummary) -> list[tuple[str, str, str]]:
    """(name, model, host) of each judge: the panel's, else the run's one judge (name "")."""
    panel = (summary.sampling or {}).get("judges") or []
    if panel:
        return [(str(j.get("name", "")), str(j.get("model", "")), str(j.get("base_url_host", ""))) for j in panel]
    return [("", summary.model, summary.base_url_host)]


def _clients(summary: RunSummary, base_url: str | None) -> list[tuple[str, list[Any]]]:
    """Per judge, its name and the clients that build its keys, one per base URL tried."""
    from ..settings import Settings
    from ..transport.client import JudgeClient

    s = summary.sampling or {}
    out = []
    for name, model, host in _judges(summary):
        urls = [base_url] if base_url else [f"http://{host}/v1", f"https://{host}/v1"]
        clients = []
        for url in urls:
            settings = Settings(
                model=model,
                base_url=url,
                logprobs=True,
                top_logprobs=s.get("top_logprobs", 20),
                top_p=s.get("top_p"),
                max_tokens=s.get("max_tokens"),
            )
            clients.append(JudgeClient(settings, api_key=None))
        out.append((name, clients))
    return out


def _temperature(summary: RunSummary, metric: Any) -> float:
    t = (summary.sampling or {}).get("temperature")
    if isinstance(t, Mapping):
        t = t.get(metric.name)
    return metric.temperature if t is None else float(t)


def split_distributions(
    prompter: Prompter, rows: Sequence[Mapping[str, Any]], cache_dir: str | Path, base_url: str | None = None
) -> dict[str, Any]:
    """For the page's rows (``rows``, in page order): ``{metric: {position: [{"judge": name, "outputs":
    {column: {value: probability}}}]}}``, the rows whose replies the store holds with a table; and ``found`` /
    ``looked`` counts. ``cache_dir``: the run's cache folder (``--cache-dir``; ``HF_JUDGE_CACHE``).

    Example:
        >>> split_distributions(Prompter(summary, ds.column_names), ds.select(range(5)), "cache/")  # doctest: +SKIP
        {'by_metric': {'QA_Clarity': {'0': [{'judge': '', 'outputs': {'QA_Clarity': {'7': 0.8, '8': 0.2}}}]}}, ...}
    """
    from ..store.replies import ReplyStore

    path = Path(cache_dir) / STORE_FILE
    if not path.is_file():
        raise ConfigError(f"no reply store in {cache_dir} (no {STORE_FILE}): give the run's --cache-dir")
    summary = prompter.summary
    judges = _clients(summary, base_url)
    wanted: dict[bytes, list[tuple[str, int, str, Any]]] = {}
    for name in summary.metrics:
        try:
            metric = prompter.check(name)
        except PromptUnavailable:
            continue
        if not logprobs.targets(metric):
            continue
        temperature = _temperature(summary, metric)
        for p, row in enumerate(rows):
            try:
                messages = prompter.messages(name, row)[0]
            except PromptUnavailable:
                continue
            for judge, clients in judges:
                for client in clients:
                    body = client.body(metric, messages, temperature, "json_schema")
                    for key in {client.reply_key(metric, messages, temperature, body), client.request_key(body)}:
                        wanted.setdefault(key, []).append((name, p, judge, metric))
    store = ReplyStore(path)
    try:
        found = store.get_many(list(wanted), with_logprobs=True)
    finally:
        store.close()
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    done: set[tuple[str, int, str]] = set()
    for key, (_content, _usage, table) in found.items():
        dists = logprobs_outputs(table)
        for name, p, judge, metric in wanted[key]:
            if not dists or (name, p, judge) in done:
                continue
            done.add((name, p, judge))
            columns = {o.key: o.column for o in logprobs.targets(metric)}
            entry = {"judge": judge, "outputs": {columns.get(k, k): d for k, d in dists.items()}}
            out.setdefault(name, {}).setdefault(str(p), []).append(entry)
    order = {judge: i for i, (judge, _) in enumerate(judges)}  # the panel's order, not the store's
    for by_row in out.values():
        for entries in by_row.values():
            entries.sort(key=lambda e: order.get(e["judge"], len(order)))
    looked = len({(n, p, j) for v in wanted.values() for n, p, j, _ in v})
    if looked and not done:
        logger.warning(
            "no probability distribution found in the reply store %s for the %d requests looked up: another run's "
            "cache, or the judge's base URL is not http(s)://HOST/v1 (pass --base-url)",
            path,
            looked,
        )
    return {"by_metric": out, "found": len(done), "looked": looked}


def logprobs_outputs(table: Any) -> dict[str, dict[str, float]]:
    """A store table's distributions (output key -> value -> probability) as the store holds them; {} for a table
    of another shape (a damaged entry, a later version's).

    Example:
        >>> logprobs_outputs({"version": 1, "outputs": {"score": {"8": 0.75, "9": 0.25}}})
        {'score': {'8': 0.75, '9': 0.25}}
    """
    outputs = table.get("outputs") if isinstance(table, Mapping) and table.get("version") == logprobs.VERSION else None
    if not isinstance(outputs, dict):
        return {}
    return {
        str(k): {str(v): float(p) for v, p in d.items()}
        for k, d in outputs.items()
        if isinstance(d, dict) and d and all(type(p) in (int, float) and p >= 0 for p in d.values())
    }
