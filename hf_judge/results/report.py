"""The report page: one self-contained HTML file to read, sort, filter and label a result's judgments.

The page needs no server and no network: its script and style are inline (``report_assets/``, shipped in the
package), the data is JSON in a ``<script type="application/json">``. Tabs: the overview of the run (model, metrics,
prompt hashes, columns, requests, tokens, cost, runs, a histogram per score, every judgment of a run with samples or
a panel counted per value (:mod:`hf_judge.results.pooled`), a pairwise judge's winner in each order where the reply
store is given (:mod:`hf_judge.results.report_orders`), errors by kind, a panel's agreement as a heat map and a
table, and other figures the summary holds), the rows (sortable by any score, a text search, thresholds that count
the rows they keep and give the ``hf-judge filter`` command; a row opens with its text, each metric's values and
reason, and the prompt it was sent), the errors (by kind, with the raw reply) and labelling (a reviewer's labels,
kept in the browser's storage, downloaded as JSON lines in the labels layout).

What is embedded of a large result, and the caps on text, are in :mod:`hf_judge.results.report_data`.
"""

from __future__ import annotations

import datetime
import hashlib
import html
import json
import shlex
import warnings
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from ..constants import VERSION
from ..redact import scrub
from . import report_data as rd
from .errors_split import ERRORS_SPLIT
from .groups import GroupTable, group_by_of, split_groups
from .pooled import pooled_distributions
from .prompts import Prompter
from .report_logprobs import ran_logprobs, split_distributions
from .report_orders import split_orders
from .report_pictures import folder_calibrations, folder_choice, folder_pictures
from .report_summary import bounded_overview, checked_summary
from .summary import RunSummary, panel_judges

REPORT_FILE = "report.html"
# the summary's keys the overview shows as the run's details; any other one that holds something (the judges'
# agreement, and what a newer hf-judge records: bias, calibration) is shown as a figure, as found
DETAILS = {
    "model", "base_url_host", "provider", "rows", "requests", "retries", "cache_hits", "shared", "capped_waits",
    "cached_splits", "errors", "failed_attempts", "prompt_tokens", "completion_tokens", "cached_tokens",
    "cache_write_tokens", "price", "elapsed_s", "structured_output", "notes", "metrics", "columns", "column_mapping",
    "sampling", "source_dataset",
    "source_on_hub", "recipe", "recipe_yaml", "prompts", "filters", "runs", "requests_per_s", "group_by", "stopped",
}  # fmt: skip


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("report_assets").joinpath(name).read_text(encoding="utf-8")


def _overview(summary: RunSummary | None) -> dict[str, Any]:
    """The run as the overview shows it; figures (agreement, and those a newer hf-judge records) as found."""
    if summary is None:
        return {}
    d = summary.to_dict()
    totals = summary.totals()
    cost = summary.cost(totals)
    prompts = {
        m: {k: p.get(k) for k in ("file", "sha256", "params", "pack") if k in p} for m, p in d["prompts"].items()
    }
    out = {
        "model": summary.model,
        "host": summary.base_url_host.rpartition("@")[2],
        "metrics": summary.metrics,
        "prompts": prompts,
        "column_mapping": summary.column_mapping,
        "rows": summary.rows,
        "totals": totals,
        "cost": cost,
        "errors": summary.errors,
        "runs": summary.runs,
        "sampling": summary.sampling,
        "source": summary.source_dataset,
        "recipe": summary.recipe,
        "filters": summary.filters,
        "structured_output": summary.structured_output,
        "notes": summary.notes,
        "stopped": summary.stopped,
        "figures": {k: v for k, v in d.items() if k not in DETAILS and isinstance(v, (dict, list)) and v},
    }
    # one from elsewhere may hold anything: the page keeps what a reader needs, within bounds, and says what it cut
    out, left_out = bounded_overview(out)
    for what in left_out:
        warnings.warn(f"summary.json: the page leaves out {what}", stacklevel=4)
    out["left_out"] = left_out
    # the summary holds no secret; scrubbed all the same, as the card is (a model name comes from the user)
    return json.loads(scrub(json.dumps(out, default=str)))


def errors_data(errors: Dataset | None, max_text: int = rd.MAX_TEXT) -> dict[str, Any]:
    """The errors split as the page embeds it: the first ``MAX_ERRORS`` rows (their texts cut at ``max_text``),
    the total and the counts by kind.

    Example:
        >>> errors_data(None)
        {'rows': [], 'total': 0, 'by_kind': {}}
    """
    if errors is None or len(errors) == 0:
        return {"rows": [], "total": 0, "by_kind": {}}
    by_kind: dict[str, int] = {}
    for k in errors["kind"]:
        by_kind[k] = by_kind.get(k, 0) + 1
    rows = errors.select(range(min(len(errors), rd.MAX_ERRORS))).to_list()
    for r in rows:
        for k in ("message", "raw"):
            if isinstance(r.get(k), str) and len(r[k]) > max_text:
                r[k] = r[k][:max_text] + f"\n[cut at {max_text:,} characters]"
    return {"rows": rows, "total": len(errors), "by_kind": by_kind}


def _split(
    name: str,
    d: Dataset,
    summary: RunSummary | None,
    errors: dict[str, Any],
    max_rows: int,
    max_text: int,
    cache: tuple[str | Path, str | None] | None = None,
) -> dict[str, Any]:
    """One split as the page embeds it (see report_data)."""
    scores = rd.split_scores(d, summary)
    error_rows = {int(e["row"]) for e in errors["rows"] if e.get("split") == name}
    thresholds = rd.thresholds_of(d, scores, summary)
    judges = panel_judges(summary)
    indices, reasons = rd.select_rows(d, scores, error_rows, thresholds, max_rows, max_text=max_text, judges=judges)
    whole = {
        "rows": len(d),
        "all_scores": rd.all_scores(d, scores),
        "stats": rd.distributions(d, scores),
        "pooled": pooled_distributions(d, judges),
    }
    chosen = rd.capped_rows(d, indices, max_text)  # long values cut while still Arrow: memory stays bounded
    return embed_split(chosen, indices, reasons, thresholds, scores, whole, summary, max_text, cache)


def embed_split(
    chosen: Dataset,
    indices: list[int],
    reasons: dict[str, int],
    thresholds: dict[str, list[float]],
    scores: list[str],
    whole: dict[str, Any],
    summary: RunSummary | None,
    max_text: int,
    cache: tuple[str | Path, str | None] | None = None,
) -> dict[str, Any]:
    """A split as the page embeds it, from the rows chosen to embed (``chosen``: those rows, in order;
    ``indices``: their numbers in the split) and what is known of every row (``whole``: ``rows``, ``all_scores``,
    ``stats``, ``pooled``). A Dataset's (``report_data``) and a stream's (``report_stream``) pages both end here.

    Example:
        >>> embed_split(d.select([0, 7]), [0, 7], {"lowest": 2}, {}, ["S"], whole, summary, 20_000)  # doctest: +SKIP
    """
    d = chosen
    cols, cut, raw_rows = rd.split_rows(d, list(range(len(d))), max_text)
    names = list(summary.metrics) if summary is not None else []
    prompter = Prompter(summary, d.column_names, d.features) if summary is not None else None
    prompts = rd.split_prompts(prompter, names, raw_rows) if prompter is not None else {}
    referenced = {
        p["c"]
        for entry in prompts.values()
        for skel in entry.get("skeletons", {}).values()
        for messages in skel
        for m in messages
        for p in m["parts"]
        if isinstance(p, dict)
    }
    # a column the prompt reads whose page value is not its prompt text (a number, a list): its prompt text too
    ptext = {
        c: [None if r.get(c) is None else rd.format_value(r[c])[:max_text] for r in raw_rows]
        for c in referenced
        if any(v is not None and not isinstance(v, str) for v in cols[c])
    }
    judged = [c for c in (summary.column_mapping.values() if summary is not None else []) if c in cols]
    # the distributions over the score values where logprobs ran: from the reply store, where it is given
    dists = split_distributions(prompter, raw_rows, *cache) if cache and prompter and ran_logprobs(summary) else None
    # a pairwise judge's winner in each order, from the same store: which way its position bias goes
    orders = split_orders(prompter, raw_rows, *cache) if cache and prompter else {}
    return {
        "rows": whole["rows"],
        "indices": indices,
        "reasons": reasons,
        "thresholds": thresholds,
        "columns": cols,
        "cut": cut,
        "scores": scores,
        "judged": list(dict.fromkeys(judged)),
        "metrics": rd.metric_columns(d, prompter, names),
        "all_scores": whole["all_scores"],
        "stats": whole["stats"],
        "pooled": whole["pooled"],
        "prompts": prompts,
        "ptext": ptext,
        "distributions": dists,
        "orders": orders,
    }


def report_data(
    result: DatasetDict | Dataset,
    *,
    summary: RunSummary | None = None,
    source: str = "",
    splits: Sequence[str] | None = None,
    max_rows: int = rd.MAX_ROWS,
    max_text: int = rd.MAX_TEXT,
    folder: str | Path | None = None,
    cache_dir: str | Path | None = None,
    base_url: str | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """What the page embeds, as a JSON-able dict (see :func:`write_report`)."""
    if isinstance(result, Dataset):
        result = DatasetDict({"train": result})
    summary = summary if summary is not None else getattr(result, "summary", None)
    summary, problems = checked_summary(summary)  # one from elsewhere (a Hub repo) may hold what the page cannot use
    for problem in problems:
        warnings.warn(problem, stacklevel=3)
    by = group_by_of(by, summary)
    chosen = [s for s in result if s != ERRORS_SPLIT and (not splits or s in splits)]
    # every row counted, not only those embedded: before the page's rows are chosen (a missing column fails first)
    groups = [t for s in chosen for t in split_groups(result[s], s, by, summary)] if by else []
    errors = errors_data(result.get(ERRORS_SPLIT), max_text)
    cache = (cache_dir, base_url) if cache_dir is not None else None
    embedded = {s: _split(s, result[s], summary, errors, max_rows, max_text, cache) for s in chosen}
    return page_data(
        embedded,
        errors,
        summary=summary,
        source=source,
        max_rows=max_rows,
        max_text=max_text,
        folder=folder,
        read_store=cache is not None,
        groups=groups,
    )


def page_data(
    embedded: dict[str, dict[str, Any]],
    errors: dict[str, Any],
    *,
    summary: RunSummary | None,
    source: str = "",
    max_rows: int = rd.MAX_ROWS,
    max_text: int = rd.MAX_TEXT,
    folder: str | Path | None = None,
    read_store: bool = False,
    groups: Sequence[GroupTable] = (),
) -> dict[str, Any]:
    """The page's data from its splits as embedded (:func:`embed_split`) and its errors (:func:`errors_data`);
    ``groups``: the scores by group (:mod:`hf_judge.results.groups`), counted over every row.

    Example:
        >>> data = page_data({"train": split}, errors_data(None), summary=summary, source="me/x")  # doctest: +SKIP
    """
    command_source = shlex.quote(source) if source else "RESULT"
    data: dict[str, Any] = {
        "version": VERSION,
        "title": source or (summary.source_dataset if summary is not None else "") or "scored dataset",
        "source": command_source,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "overview": _overview(summary),
        "caps": {
            "rows": max_rows,
            "text": max_text,
            "chars": rd.MAX_CHARS,
            "errors": rd.MAX_ERRORS,
            "scores": rd.MAX_SCORE_VALUES,
        },
        "splits": embedded,
        "errors": errors,
    }
    # the pictures and calibration the result's folder holds (``folder``, else ``source`` where it is a folder)
    where = folder if folder is not None else (source if source and Path(source).is_dir() else None)
    data["overview"]["pictures"] = folder_pictures(where)
    data["overview"]["calibrations"] = folder_calibrations(where)
    # choose-judge's table, where the folder is its output or a candidate's folder in it (scrubbed: judge names)
    data["overview"]["choice"] = json.loads(scrub(json.dumps(folder_choice(where), default=str)))
    # group names are the data's: scrubbed as the rest of the overview is
    data["overview"]["groups"] = json.loads(scrub(json.dumps([t.to_dict() for t in groups], default=str)))
    # where logprobs ran and no store was read, the page says where the distributions are and how to show them
    data["logprobs"] = {"ran": ran_logprobs(summary), "read": read_store}
    data["key"] = labels_key(embedded)
    return data


def labels_key(embedded: dict[str, dict[str, Any]]) -> str:
    """The page's key for its labels in the browser's storage: a hash of the rows it holds (each split's name, row
    count, embedded row numbers and values, every row's scores), so a label stays with the rows it was made on:
    two results viewed under one name (``out/``) do not share labels, and the same result's page written again
    (from memory, from its folder, from the Hub) finds them.

    Example:
        >>> labels_key({"train": {"rows": 1, "indices": [0], "columns": {"q": ["hi"]}}})
        'db2cf19ad0d7f4fc8d26'
    """
    h = hashlib.sha256()
    for name in sorted(embedded):
        split = embedded[name]
        h.update(json.dumps([name, split.get("rows"), split.get("indices")], default=str).encode())
        for column in sorted(split.get("columns") or {}):  # one column at a time: no second copy of the page
            h.update(json.dumps([column, split["columns"][column]], ensure_ascii=False, default=str).encode())
        h.update(json.dumps(split.get("all_scores"), default=str, sort_keys=True).encode())
    return h.hexdigest()[:20]


def for_source(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The page's data (:func:`report_data`'s) naming the result ``source`` (its title and ``hf-judge filter``
    commands): a folder's page, pushed beside the data to the Hub repo ``source``.

    Example:
        >>> for_source({"title": "out", "source": "out"}, "me/gsm8k-judged")
        {'title': 'me/gsm8k-judged', 'source': 'me/gsm8k-judged'}
    """
    return {**data, "title": source, "source": shlex.quote(source)}


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON safe inside ``<script>``: no ``</script>`` or ``<!--`` can end it early."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def report_html(result: DatasetDict | Dataset, **kwargs: Any) -> str:
    """The page as one HTML string; the keyword arguments are :func:`write_report`'s (``path`` aside).

    Example:
        >>> page = report_html(scored, source="out/")  # doctest: +SKIP
    """
    return render_page(report_data(result, **kwargs))


def render_page(data: dict[str, Any]) -> str:
    """The page (one HTML string) of :func:`report_data`'s (or :func:`page_data`'s) data.

    Example:
        >>> Path("report.html").write_text(render_page(report_data(scored, source="out/")))  # doctest: +SKIP
    """
    title = html.escape(f"hf-judge report: {data['title']}")
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        # nothing may load from elsewhere: the page works offline and leaks nothing of the data when opened
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data: blob:\">"
        f"<title>{title}</title><style>{_asset('report.css')}</style></head>"
        f"<body><div id='app'><p class='loading'>Loading the report...</p></div>"
        f"<script type='application/json' id='hf-judge-data'>{_json_for_script(data)}</script>"
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def write_report(
    result: DatasetDict | Dataset,
    path: str | Path,
    *,
    summary: RunSummary | None = None,
    source: str = "",
    splits: Sequence[str] | None = None,
    max_rows: int = rd.MAX_ROWS,
    max_text: int = rd.MAX_TEXT,
    folder: str | Path | None = None,
    cache_dir: str | Path | None = None,
    base_url: str | None = None,
    by: str | None = None,
) -> Path:
    """Write the report page of a scored result to ``path`` (one HTML file, no server, no network); returns it.

    ``result``: a scored ``DatasetDict`` (its ``errors`` split included) or one split; ``summary``: the run's
    (default: ``result.summary``), for the overview and the prompts; ``source``: how the page's ``hf-judge
    filter`` commands name the result (a folder, a Hub id); ``splits``: those to show (default: all). A split of
    more than ``max_rows`` rows embeds a selection (the extremes and threshold neighbourhoods per score,
    disagreements, error rows, a uniform sample); texts are cut at ``max_text`` characters. ``folder``: the result's
    folder (default: ``source`` where it is one), whose pictures (``calibrate``'s reliability PNG, agreement PNGs)
    and ``calibration.json`` the overview shows. ``cache_dir``: the run's cache folder, where a ``logprobs`` run's
    probability distributions over the score values are read back for the embedded rows (``base_url``: the
    judge's, where the default ``http(s)://HOST/v1`` of the host the summary records is not it). ``by``: a column
    whose groups the overview compares (each score's rows, nulls, mean, median and histogram per value, the lowest
    mean first; default: the summary's ``group_by``, recorded by ``hf-judge score --by``).

    Example:
        >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> write_report(scored, "report.html", source="out/")  # doctest: +SKIP
        PosixPath('report.html')
    """
    page = report_html(
        result,
        summary=summary,
        source=source,
        splits=splits,
        max_rows=max_rows,
        max_text=max_text,
        folder=folder,
        cache_dir=cache_dir,
        base_url=base_url,
        by=by,
    )
    data = page.encode("utf-8")  # before the file is opened: a page that cannot be written leaves no empty file
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
