"""The probability distribution over a score's values where ``logprobs`` ran, read back for the report page.

A logprobs run keeps, beside each reply in the reply store, the small table of the probability of each valid
value (:func:`hf_judge.judging.logprobs.distributions`); the scored result holds only what it gives
(``_expected``, ``_confidence``, ``_p_positive``), so no engine's columns change. The page reads the tables back
from the store: each embedded row's request is rebuilt (the messages by :class:`hf_judge.results.prompts.Prompter`,
the body and key by the judge's own client, from the settings ``summary.json`` records) and looked up with
:meth:`hf_judge.store.replies.ReplyStore.get_many`. A key is a hash of the server and the body: a hit is the
reply that row was given, never a guess; a miss (another cache, an unrecorded setting) shows nothing.

The summary records the server's host, not its URL: the base URLs tried are ``--base-url`` where given, else
``http(s)://HOST/v1`` (a server's root and its ``/v1`` share their keys).

Shown: per judge, the mean of its samples' distributions, each normalised first (one sample's as the store holds
it): the distribution whose expectation is the judge's ``_expected`` column, as
:meth:`hf_judge.judging.ensemble.Layout.combine_sample_logprobs` says. A pairwise judge asked in both orders gets one
per order, each response's score under its own column: where they differ, the judge's reading moved with the
position (position bias).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..judging import logprobs
from ..judging.ensemble import sample_key
from ..settings import Settings
from ..store.replies import ReplyStore
from ..transport.client import JudgeClient
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


def clients(summary: RunSummary, base_url: str | None, logprobs: bool = True) -> list[tuple[str, list[Any]]]:
    """Per judge, its name and the clients that build its keys, one per base URL tried (``logprobs``: whether the
    run asked for log-probabilities, which its request bodies say)."""
    s = summary.sampling or {}
    out = []
    for name, model, host in _judges(summary):
        urls = [base_url] if base_url else [f"http://{host}/v1", f"https://{host}/v1"]
        clients = []
        for url in urls:
            settings = Settings(
                model=model,
                base_url=url,
                logprobs=logprobs,
                top_logprobs=s.get("top_logprobs", 20),
                top_p=s.get("top_p"),
                max_tokens=s.get("max_tokens"),
            )
            clients.append(JudgeClient(settings, api_key=None))
        out.append((name, clients))
    return out


def temperature_of(summary: RunSummary, metric: Any) -> float:
    """The temperature the run sent ``metric`` with (a per-metric setting, else the metric's own)."""
    t = (summary.sampling or {}).get("temperature")
    if isinstance(t, Mapping):
        t = t.get(metric.name)
    return metric.temperature if t is None else float(t)


def split_distributions(
    prompter: Prompter, rows: Sequence[Mapping[str, Any]], cache_dir: str | Path, base_url: str | None = None
) -> dict[str, Any]:
    """For the page's rows (``rows``, in page order): ``{metric: {position: [{"judge": name, "order": 0 or 1
    (responses swapped), "samples": how many found, "outputs": {column: {value: probability}}}]}}``, per judge and
    order the mean of its samples' distributions, for the rows whose replies the store holds with a table; and
    ``found`` / ``looked``: the (metric, row, judge)s with at least one table, and those looked up. ``cache_dir``:
    the run's cache folder (``--cache-dir``; ``HF_JUDGE_CACHE``).

    Example:
        >>> split_distributions(Prompter(summary, ds.column_names), ds.select(range(5)), "cache/")  # doctest: +SKIP
        {'by_metric': {'QA_Clarity': {'0': [{'judge': '', 'order': 0, 'samples': 1, 'outputs': {...}}]}}, ...}
    """
    path = Path(cache_dir) / STORE_FILE
    if not path.is_file():
        raise ConfigError(f"no reply store in {cache_dir} (no {STORE_FILE}): give the run's --cache-dir")
    summary = prompter.summary
    judges = clients(summary, base_url)
    wanted = _wanted(prompter, rows, judges, int((summary.sampling or {}).get("samples") or 1))
    store = ReplyStore(path)
    try:
        found = store.get_many(list(wanted), with_logprobs=True)
    finally:
        store.close()
    # (metric, row, judge, order) -> sample -> output column -> its distribution
    tables: dict[tuple[str, int, str, int], dict[int, dict[str, dict[str, float]]]] = {}
    for key, (_content, _usage, table) in found.items():
        dists = logprobs_outputs(table)
        for name, p, judge, order, sample, columns in wanted[key] if dists else []:
            tables.setdefault((name, p, judge, order), {}).setdefault(
                sample, {columns.get(k, k): d for k, d in dists.items()}
            )
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    rank = {judge: i for i, (judge, _) in enumerate(judges)}  # the panel's order, not the store's
    for (name, p, judge, order), by_sample in sorted(tables.items(), key=lambda kv: (rank.get(kv[0][2], 0), kv[0][3])):
        entry = {"judge": judge, "order": order, "samples": len(by_sample), "outputs": _mean(list(by_sample.values()))}
        out.setdefault(name, {}).setdefault(str(p), []).append(entry)
    done = {(n, p, j) for n, p, j, _ in tables}
    looked = len({(n, p, j) for v in wanted.values() for n, p, j, *_ in v})
    if looked and not done:
        logger.warning(
            "no probability distribution found in the reply store %s for the %d requests looked up: another run's "
            "cache, or the judge's base URL is not http(s)://HOST/v1 (pass --base-url)",
            path,
            looked,
        )
    return {"by_metric": out, "found": len(done), "looked": looked}


def _wanted(
    prompter: Prompter, rows: Sequence[Mapping[str, Any]], judges: list[tuple[str, list[Any]]], samples: int
) -> dict[bytes, list[tuple[str, int, str, int, int, dict[str, str]]]]:
    """Store key -> the (metric, row position, judge, order, sample, output key -> column) it answers: every
    sample of every judge, both orders of a pairwise judge (the second's outputs under the response they scored)."""
    wanted: dict[bytes, list[tuple[str, int, str, int, int, dict[str, str]]]] = {}
    for name in prompter.summary.metrics:
        try:
            metric = prompter.check(name)
        except PromptUnavailable:
            continue
        targets = logprobs.targets(metric)
        if not targets:
            continue
        temperature = temperature_of(prompter.summary, metric)
        straight = {o.key: o.column for o in targets}
        swapped = {a.key: b.column for a, b in zip(targets, targets[::-1], strict=True)} if len(targets) == 2 else {}
        for p, row in enumerate(rows):
            try:
                requests = prompter.messages(name, row)
            except PromptUnavailable:
                continue
            for order, messages in enumerate(requests):
                columns = swapped if order else straight
                for judge, clients in judges:
                    for client in clients:
                        body = client.body(metric, messages, temperature, "json_schema")
                        for key in {client.reply_key(metric, messages, temperature, body), client.request_key(body)}:
                            for sample in range(samples):
                                entry = (name, p, judge, order, sample, columns)
                                wanted.setdefault(sample_key(key, sample), []).append(entry)
    return wanted


def _normalised(dist: dict[str, float]) -> dict[str, float]:
    total = sum(dist.values())
    return {v: p / total for v, p in dist.items()} if total > 0 else dist


def _mean(samples: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each output's distribution averaged over the samples that have one, each normalised first (each weighs
    the same); one sample's as the store holds it (the page shows each value's share of the total)."""
    if len(samples) == 1:
        return samples[0]
    samples = [{c: _normalised(d) for c, d in s.items()} for s in samples]
    out: dict[str, dict[str, float]] = {}
    for column in dict.fromkeys(c for s in samples for c in s):
        have = [s[column] for s in samples if column in s]
        values = dict.fromkeys(v for d in have for v in d)
        out[column] = {v: sum(d.get(v, 0.0) for d in have) / len(have) for v in values}
    return out


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
