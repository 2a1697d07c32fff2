"""The dataset card: what was scored, how, and what the scores look like.

The card records the source dataset, the column judged as each template
variable, the model, the server's host (never a key), each metric with the full sha256 of its prompt file, the sampling
parameters, the recipe, rows scored, the thresholds of a filter and the rows
it kept, the runs that produced the scores (requests and tokens summed over
them), errors by kind, each score column's distribution (a PNG with the
``plots`` extra, else a text histogram) and agreement reports, if given. The
prompt files, the recipe and ``summary.json`` go to the repo beside the data
(``provenance_files``), so every hash in the card names a file anyone can
read and run again; the pictures go to ``hf_judge/plots/`` (``picture_files``).
Metadata follows the Hub's conventions (``huggingface_hub.DatasetCardData``). hf_judge owns only the part between
its two markers: text and metadata around it survive a second push.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Dataset, DatasetDict, Features
from huggingface_hub import DatasetCardData

from ..analysis import bias
from ..redact import scrub
from .calibration_card import calibration_card
from .columns import SCORE_TYPES, score_columns
from .errors_split import ERRORS_SPLIT
from .groups import groups_markdown
from .overview import overview
from .plots import file_name, histogram_png, panel_pngs, report_pngs, require
from .summary import RunSummary, describe_batches, describe_thresholds, engine_text, panel_judges
from .tally import MAX_INT_BINS, grid_step, value_label

if TYPE_CHECKING:
    from ..analysis.agreement import AgreementReport
    from .overview import RunOverview

START = "<!-- hf-judge:start -->"
END = "<!-- hf-judge:end -->"
_BAR = 30
# the Hub's size_categories buckets, by upper bound
_SIZES = [
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
    (10_000_000_000, "1B<n<10B"),
    (100_000_000_000, "10B<n<100B"),
    (1_000_000_000_000, "100B<n<1T"),
]
FILES_DIR = "hf_judge"  # the repo folder of the provenance files
PLOTS_DIR = f"{FILES_DIR}/plots"  # the card's pictures (the plots extra)
GALLERY_COLUMNS = 3  # thumbnails a row: three of 240 pixels fit the Hub's card
THUMBNAIL_WIDTH = 240


def column_stats(ds: Dataset, column: str) -> dict[str, Any]:
    """Count, nulls, mean, quantiles and a histogram of one score column."""
    arr = ds.with_format("arrow")[column].combine_chunks()  # the rows a select/shuffle kept, in their order
    if pa.types.is_floating(arr.type):  # a NaN score is no score: counted with the nulls, never in a mean
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(None, arr.type), arr)
    valid = pc.drop_null(arr)
    n = len(valid)
    stats: dict[str, Any] = {"count": n, "null": len(arr) - n}
    if n == 0:
        return stats
    if pa.types.is_boolean(valid.type):
        t = pc.sum(valid.cast(pa.int64())).as_py()
        stats.update(mean=t / n, hist={"true": t, "false": n - t})
        return stats
    num = valid.cast(pa.float64())
    q = pc.quantile(num, q=[0.1, 0.5, 0.9]).to_pylist()
    stats.update(
        mean=pc.mean(num).as_py(), min=pc.min(num).as_py(), p10=q[0], p50=q[1], p90=q[2], max=pc.max(num).as_py()
    )
    if pa.types.is_integer(valid.type):
        vc = pc.value_counts(valid).to_pylist()
        stats["hist"] = {int(d["values"]): d["counts"] for d in sorted(vc, key=lambda d: d["values"])}
    else:
        stats["hist"] = _float_hist(num, stats["min"], stats["max"])
    return stats


def _float_hist(num: pa.Array, lo: float, hi: float) -> dict[str, int]:
    """A float column's histogram: one bar per value where the values lie on half points (a pairwise judge's mean
    of two orders: 3.5, 8), else ten equal bins from ``lo`` to ``hi``, each labelled by its low end."""
    counts = {d["values"]: d["counts"] for d in pc.value_counts(pc.round(num, 3)).to_pylist()}
    if grid_step(counts) is not None and len(counts) <= MAX_INT_BINS:
        return {value_label(v): counts[v] for v in sorted(counts)}
    width = (hi - lo) / 10 or 1.0
    hist: dict[str, int] = {}
    for v in num.to_pylist():
        b = min(9, int((v - lo) / width))
        label = f"{lo + b * width:.2f}"
        hist[label] = hist.get(label, 0) + 1
    return dict(sorted(hist.items(), key=lambda kv: float(kv[0])))


def text_histogram(hist: dict) -> str:
    """``hist`` (value -> count) as bars of ``#``, for the card and the terminal.

    Example:
        >>> print(text_histogram({1: 2, 2: 4}))
             1 | ###############                2
             2 | ############################## 4
    """
    if not hist:
        return "     (no values)"
    peak = max(hist.values()) or 1
    return "\n".join(
        f"{str(k):>6} | {'#' * max(1, round(_BAR * c / peak)) if c else '':<{_BAR}} {c}" for k, c in hist.items()
    )


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket for ``n`` rows.

    Example:
        >>> size_category(164), size_category(8_200)
        ('n<1K', '1K<n<10K')
    """
    return next((label for bound, label in _SIZES if n < bound), "n>1T")


def card_metadata(data: DatasetCardData, scored: DatasetDict, summary: RunSummary | None) -> DatasetCardData:
    """Fill the card's metadata the Hub's way, keeping what the owner set: tags, size, source, annotations."""
    tags = list(data.get("tags") or [])
    data["tags"] = tags + [t for t in ("hf-judge", "llm-as-judge") if t not in tags]
    data.size_categories = size_category(sum(len(d) for k, d in scored.items() if k != "errors"))
    creators = data.get("annotations_creators") or []
    creators = [creators] if isinstance(creators, str) else list(creators)
    if "machine-generated" not in creators:
        data.annotations_creators = [*creators, "machine-generated"]
    if summary is not None and summary.source_on_hub and summary.source_dataset:
        sources = list(data.get("source_datasets") or [])
        if summary.source_dataset not in sources:
            data.source_datasets = [*sources, summary.source_dataset]
    return data


def provenance_files(summary: RunSummary) -> dict[str, bytes]:
    """Repo path -> content of the files that let anyone check and rerun the scoring:
    each metric's prompt file, the recipe (when one was used) and ``summary.json``."""
    files = {f"{FILES_DIR}/prompts/{p['file']}": p["text"].encode() for p in summary.prompts.values() if p.get("text")}
    if summary.recipe_yaml:
        files[f"{FILES_DIR}/recipe.yaml"] = summary.recipe_yaml.encode()
    files[f"{FILES_DIR}/summary.json"] = json.dumps(summary.to_dict(), indent=1, default=str).encode()
    return files


def _host(summary: RunSummary) -> str:
    return summary.base_url_host.rpartition("@")[2]  # never user:password@ of a URL


def _price_source(summary: RunSummary) -> str:
    """`` from genai-prices 0.2.3 (...)``: where the price came from, as the run recorded it."""
    source = (summary.price or {}).get("source")
    return f", from {source}" if source else ""


def _cache_prices(summary: RunSummary, t: dict[str, Any]) -> str:
    """``; prompt-cache reads at $0.1, writes at $1.25 per 1M tokens``: how the cost priced the cache's tokens,
    where the run had any and the price sets them apart from other prompt tokens."""
    p = summary.price or {}
    parts = []
    if t.get("cached_tokens") and p.get("cached_input") not in (None, p.get("input")):
        parts.append(f"reads at ${p['cached_input']:g}")
    if t.get("cache_write_tokens") and p.get("cache_write_input") not in (None, p.get("input")):
        parts.append(f"writes at ${p['cache_write_input']:g}")
    return f"; prompt-cache {', '.join(parts)} per 1M tokens" if parts else ""


def _model_line(summary: RunSummary) -> str:
    """The card's model, its server, and its provider where it is a provider's own API (not OpenAI's)."""
    through = f", through {summary.provider}'s own API (`provider: {summary.provider}`)" if summary.provider else ""
    return f"- **Model:** `{summary.model}` at `{_host(summary)}`{through}"


def _priced(summary: RunSummary) -> str:
    """At whose price the cost is: the model's, or a cascade's tiers' (different prices: each at its own)."""
    return "the model's price" if summary.price is not None else "each cascade tier's model's price"


def _engine(summary: RunSummary) -> list[str]:
    """The judge's own engine (a vLLM judge hf-judge ran): its seconds, GPU-seconds on GPUs."""
    return [f"- **Judge's engine:** {engine_text(summary.engine)}"] if summary.engine else []


def _provenance(summary: RunSummary) -> list[str]:
    t = summary.totals()
    cost = summary.cost(t)
    batched = t.get("batch_prompt_tokens", 0) + t.get("batch_completion_tokens", 0)
    price = ""
    if batched:  # tokens that went through a batch API cost the batch price
        whole = batched == t["prompt_tokens"] + t["completion_tokens"]
        price = " (the batch price" + ("" if whole else " for the tokens sent in batches, online for the rest") + ")"
    price += _cache_prices(summary, t) + _price_source(summary)
    runs = summary.runs
    n_runs = len({r.get("id") for r in runs}) or 1
    source = summary.source_dataset or "unknown"
    if summary.source_on_hub and summary.source_dataset:
        source = f"[{source}](https://huggingface.co/datasets/{source})"
    out = [f"- **Source dataset:** {source}", *_judged_columns(summary), _model_line(summary), *_engine(summary)]
    if summary.batch:
        b = summary.batch
        out.append(
            f"- **Batch mode:** sent through the provider's batch API: {describe_batches(b)}, "
            f"{b.get('collected', 0):,} replies collected, {b.get('prompt_tokens', 0):,} prompt / "
            f"{b.get('completion_tokens', 0):,} completion tokens as the provider reported them"
        )
    if summary.sampling.get("judges"):  # a panel: each judge's columns end in __<name>
        judges = [
            f"`{j['name']}`: `{j['model']}` at `{j['base_url_host']}`"
            + (f" (`provider: {j['provider']}`)" if j.get("provider") else "")
            for j in summary.sampling["judges"]
        ]
        out.append(f"- **Judges:** {', '.join(judges)}")
    out += cascade_card(summary.cascade)
    if summary.recipe:
        out.append(f"- **Recipe:** `{summary.recipe}` ([`{FILES_DIR}/recipe.yaml`]({FILES_DIR}/recipe.yaml))")
    out.append(f"- **Rows scored:** {', '.join(f'{k}: {v:,}' for k, v in summary.rows.items())}")
    if summary.filters:
        f = summary.filters
        before = f.get("rows_before", {})
        kept = ", ".join(f"{k}: {v:,} of {before.get(k, v):,}" for k, v in f.get("rows_kept", {}).items())
        out += [f"- **Filtered:** {describe_thresholds(f)} (inclusive)", f"- **Rows kept:** {kept}"]
        if f.get("error_rows"):
            e = f["error_rows"]
            out.append(f"- **Error rows kept:** {e['kept']:,} of {e['before']:,} (those of the rows kept)")
    out += [
        f"- **Requests:** {t['requests']:,} ({t['retries']:,} retries) over {n_runs} run{'s' if n_runs != 1 else ''}",
        f"- **Tokens:** {t['prompt_tokens']:,} prompt / {t['completion_tokens']:,} completion"
        + (f" ({t['cached_tokens']:,} prompt tokens from the server's prompt cache)" if t.get("cached_tokens") else "")
        + (f" ({t['cache_write_tokens']:,} written to its prompt cache)" if t.get("cache_write_tokens") else ""),
        *([f"- **Cost:** ${cost:,.4f} at {_priced(summary)}{price}"] if cost is not None else []),
        f"- **Errors:** {', '.join(f'{k}: {v:,}' for k, v in summary.errors.items()) or 'none'}"
        + (" (see the `errors` config)" if summary.errors else ""),
        "",
        "| metric | prompt file | sha256 of the file | params |",
        "| --- | --- | --- | --- |",
    ]
    for m, h in summary.metrics.items():
        p = summary.prompts.get(m)
        if p:
            path = f"{FILES_DIR}/prompts/{p['file']}"
            params = _param_text(p.get("params") or {})
            pack = p.get("pack")
            origin = f" from the metric pack `{pack.get('name')}` {pack.get('version')}" if pack else ""
            out.append(f"| `{m}` | [`{path}`]({path}){origin} | `{p['sha256']}` | {params} |")
        else:
            out.append(f"| `{m}` |  | `{h}` |  |")
    out += ["", "Request settings:", "", *settings_table(summary), ""]
    if runs:
        out += [
            "Runs that produced these scores:",
            "",
            "| run | started (UTC) | split | requests | retries | from cache | prompt tokens | completion tokens "
            "| seconds |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *[
                f"| `{r.get('id', '')}` | {r.get('started', '')} | {r.get('split', '')} | {r.get('requests', 0):,} | "
                f"{r.get('retries', 0):,} | {r.get('cache_hits', 0):,} | {r.get('prompt_tokens', 0):,} | "
                f"{r.get('completion_tokens', 0):,} | {r.get('elapsed_s', 0):.1f} |"
                for r in runs
            ],
            "",
        ]
    return out


# the request settings a summary records (``sampling``), in the order a reader looks for them
_SETTING_NAMES = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "top_logprobs": "top_logprobs (logprobs)",
    "samples": "samples per (row, metric)",
    "min_samples": "samples that must succeed",
    "aggregator": "panel aggregator",
}


def settings_table(summary: RunSummary) -> list[str]:
    """The run's request settings as a Markdown table of name | value; one left to the server says so.

    Example:
        >>> s = RunSummary(sampling={"temperature": {"QA_All": 0.1, "Q_Math_Difficulty": 1.0}, "max_tokens": None})
        >>> print("\\n".join(settings_table(s)))
        | setting | value |
        | --- | --- |
        | output format | json_schema |
        | temperature | 0.1 (`QA_All`), 1 (`Q_Math_Difficulty`) |
        | max_tokens | the server's default |
    """
    rows = [("output format", summary.structured_output)] if summary.structured_output else []
    sampling = summary.sampling
    for key, name in _SETTING_NAMES.items():
        if key in sampling:
            rows.append((name, _setting_value(sampling[key])))
    rows += [(k, _setting_value(v)) for k, v in sampling.items() if k not in _SETTING_NAMES and k != "judges"]
    return ["| setting | value |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows)]


def _setting_value(v: Any) -> str:
    """A setting as a reader writes it: per-metric values grouped by value, None as the server's default."""
    if v is None:
        return "the server's default"
    if isinstance(v, dict):
        by_value: dict[str, list[str]] = {}
        for metric, value in v.items():
            by_value.setdefault(_setting_value(value), []).append(f"`{metric}`")
        if len(by_value) == 1:
            return next(iter(by_value))
        return ", ".join(f"{value} ({', '.join(metrics)})" for value, metrics in by_value.items())
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_setting_value(x) for x in v)
    return str(v).replace("|", "\\|")


def _param_text(v: Any) -> str:
    """A prompt's parameters as words: ``positive``: yes, ``negative``: no (a list joined, a mapping nested).

    Example:
        >>> _param_text({"positive": "yes", "scale": [1, 5]})
        '`positive`: yes, `scale`: 1, 5'
    """
    if isinstance(v, dict):
        return ", ".join(f"`{k}`: {_param_text(x)}" for k, x in sorted(v.items()))
    if isinstance(v, (list, tuple)):
        return ", ".join(_param_text(x) for x in v)
    return _setting_value(v)


def cascade_card(c: dict[str, Any]) -> list[str]:
    """The card lines of a cascade of judges (``summary.cascade``): the rule, the escalation rate, each tier's
    requests, tokens and cost, the cost against the strong judge on every row, the audit; none without one.

    Example:
        >>> cascade_card({})
        []
    """
    if not c:
        return []
    rate = "n/a" if c.get("rate") is None else f"{c['rate']:.1%}"
    out = [
        f"- **Cascade:** `{c['tiers']['cheap']['model']}` scored every row; {c['escalated']:,} of {c['pairs']:,} "
        f"(row, metric)s ({rate}) went to `{c['strong_model']}` (`escalate_when: {c.get('when')}`); "
        "`<metric>_judge` says which tier decided, `<column>__cheap` / `<column>__strong` hold both where both ran"
    ]
    for name, t in c["tiers"].items():
        cost = "" if t.get("total_cost") is None else f", ${t['total_cost']:,.4f}"
        out.append(
            f"  - {name} tier `{t['model']}`: {t['pairs']:,} (row, metric)s, {t['scored_prompt_tokens']:,} "
            f"prompt / {t['scored_completion_tokens']:,} completion tokens{cost}"
        )
    if c.get("cost") is not None and c.get("strong_only_cost") is not None:
        out.append(
            f"  - cost ${c['cost']:,.4f}, against ${c['strong_only_cost']:,.4f} for `{c['strong_model']}` on every "
            f"row (projected for the rows it did not score): ${c['saved']:,.4f} saved"
        )
    audit = c.get("audit")
    if audit:
        agree = ", ".join(
            f"`{col}` {a['exact']:.0%} same" + (f" (kappa {a['kappa']:g})" if a.get("kappa") is not None else "")
            for col, a in audit["agreement"].items()
            if a["exact"] is not None
        )
        out.append(
            f"  - audit: {audit['rows']:,} other rows ({audit['share']:.0%}) checked by the strong judge: {agree}"
        )
    return out


def _judged_columns(summary: RunSummary) -> list[str]:
    """The card line naming the column judged as each template variable (none for a summary without them).

    Example:
        >>> _judged_columns(RunSummary(column_mapping={"instruction": "question", "output": "output"}))
        ['- **Columns judged:** `question` as `instruction`, `output` as `output`']
    """
    if not summary.column_mapping:
        return []
    pairs = ", ".join(f"`{c}` as `{v}`" for v, c in summary.column_mapping.items())
    return [f"- **Columns judged:** {pairs}"]


def _card_columns(d: Dataset, summary: RunSummary | None) -> list[str]:
    return [c for c in score_columns(d) if summary is None or not summary.columns or c in summary.columns]


def distribution_path(split: str, column: str) -> str:
    """The repo path of a score column's distribution picture.

    Example:
        >>> distribution_path("train", "QA_Clarity")
        'hf_judge/plots/train/QA_Clarity.png'
    """
    return f"{PLOTS_DIR}/{file_name(split)}/{file_name(column)}.png"


def _panel_pictures(split: str, pictures: Collection[str]) -> dict[str, str]:
    """Title -> repo path of a split's pictures of samples and judges (:func:`hf_judge.results.plots.panel_pngs`)."""
    folder = f"{PLOTS_DIR}/{file_name(split)}/"
    found = sorted(p for p in pictures if p.startswith((folder + "all_judgments/", folder + "agreement/")))
    return {
        ("judges' agreement" if "/agreement/" in p else p.rpartition("/")[2].removesuffix(".png") + ", every judgment")
        + f" ({split})": p
        for p in found
    }


def _report_pictures(index: int, report: AgreementReport) -> dict[str, bytes]:
    return {f"{PLOTS_DIR}/agreement/{index}_{name}": png for name, png in report_pngs(report).items()}


def picture_files(
    scored: DatasetDict, summary: RunSummary | None, reports: Sequence[AgreementReport] = ()
) -> dict[str, bytes]:
    """Repo path -> PNG for the card: each score column's distribution per split, and the pictures of each
    agreement report (needs the ``plots`` extra).

    Example:
        >>> sorted(picture_files(scored, scored.summary))  # doctest: +SKIP
        ['hf_judge/plots/train/QA_Clarity.png']
    """
    require()
    files = {}
    for split, d in scored.items():
        if split == "errors":
            continue
        for c in _card_columns(d, summary):
            hist = column_stats(d, c).get("hist")
            if hist:
                files[distribution_path(split, c)] = histogram_png(hist, f"{c} ({split})")
        # every sample of every judge counted, and the panel's agreement as a heat map (a run with samples or judges)
        agreement = (summary.agreement or {}).get(split) if summary is not None else None
        judges = panel_judges(summary)  # only the declared panel's columns are a judge's (not a user's a__b)
        pngs = panel_pngs(split, d, agreement, judges)
        files.update({f"{PLOTS_DIR}/{file_name(split)}/{n}": png for n, png in pngs.items()})
    for i, r in enumerate(reports):
        files.update(_report_pictures(i, r))
    return files


def _report_link(report: str) -> list[str]:
    return [
        f"**[Report page]({report})** (`{report}`): the scores, reasons and prompts of the rows, to sort, filter "
        "and label; download it and open it in a browser (one file, no server, no network).",
        "",
    ]


def render_section(
    scored: DatasetDict,
    summary: RunSummary | None,
    reports: Sequence[AgreementReport] = (),
    pictures: Collection[str] = (),
    report: str | None = None,
    *,
    by: str | None = None,
) -> str:
    """The markdown hf_judge owns in the card: provenance (with the filter, if any), score distributions
    and agreement reports. ``pictures``: the repo paths of the PNGs pushed beside the card
    (:func:`picture_files`); a distribution with a picture shows it in place of its text histogram. ``report``:
    the repo path of the report page pushed beside the card, which the card links. ``by``: a column to show
    the scores by group of ("Scores by subject", :mod:`hf_judge.results.groups`; default: the one the
    summary records, ``summary.group_by``).

    Example:
        >>> print(render_section(scored, scored.summary))  # doctest: +SKIP
    """
    ov = _at_a_glance(scored, summary, by)
    glance = ov.to_markdown() if ov.columns else ""
    splits = []
    for split, d in scored.items():
        cols = _card_columns(d, summary) if split != "errors" else []
        if not cols:
            continue
        stats = {c: column_stats(d, c) for c in cols}
        shown = {f"{c} ({split})": distribution_path(split, c) for c in cols}
        shown = {title: path for title, path in shown.items() if path in pictures}
        shown = {**_panel_pictures(split, pictures), **shown}  # first: the columns hold means of these
        histograms = [
            f"`{c}`\n```\n{text_histogram(s['hist'])}\n```"
            for c, s in stats.items()
            if distribution_path(split, c) not in pictures and s.get("hist")
        ]
        columns = [{"name": c, "count": s["count"], "null": s["null"], **_quantiles(s)} for c, s in stats.items()]
        splits.append(
            {"name": split, "columns": columns, "gallery": gallery(shown) if shown else "", "histograms": histograms}
        )
    values = {
        "start": START,
        "end": END,
        "glance": glance,
        "stopped": summary.stopped.removeprefix("INCOMPLETE: ") if summary is not None else "",
        "groups": groups_markdown(ov.groups) if ov.groups else "",
        "groups_by": ov.groups[0].by if ov.groups else "",
        "report": report,
        "report_link": _report_link(report)[0] if report else "",
        "provenance": _provenance(summary) if summary is not None else [],
        "splits": splits,
        "bias": bias.markdown(summary.length_bias, summary.longer_wins, summary.self_preference) if summary else [],
        "calibration": _calibration_lines(scored, summary),
        "reports": [_agreement_entry(i, r, pictures) for i, r in enumerate(reports)],
    }
    # the model name and the rest come from the user's settings: no secret goes public
    return scrub(_card_template().render(values))


def result_card(
    existing: str,
    scored: DatasetDict,
    summary: RunSummary | None,
    reports: Sequence[AgreementReport] = (),
    pictures: Collection[str] = (),
    report: str | None = None,
    *,
    by: str | None = None,
    shards_of: Sequence[str] | None = None,
) -> str:
    """The card of a result, one way for every push: ``existing`` (a repo's card, ``"---\\n---\\n"`` for none) with
    hf_judge's section rendered from the template (:func:`render_section`) and its metadata (:func:`card_metadata`).
    ``shards_of``: the splits of a folder of Parquet shards (a streamed run's ``data/<split>-*`` beside
    ``errors/``), whose ``configs`` the card declares so that ``load_dataset`` reads it, and whose sizes and
    features an earlier ``dataset_info`` would misstate; None for a push whose configs ``datasets`` writes.

    Example:
        >>> print(result_card("---\\n---\\n", scored, scored.summary, shards_of=["train"]))  # doctest: +SKIP
    """
    from huggingface_hub import DatasetCard

    card = DatasetCard(merge_card_text(existing, render_section(scored, summary, reports, pictures, report, by=by)))
    card_metadata(card.data, scored, summary)  # type: ignore[arg-type]  # a DatasetCard's data is a DatasetCardData
    if shards_of is not None:
        card.data["configs"] = [
            {"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*"} for s in shards_of]},
            {"config_name": ERRORS_SPLIT, "data_files": [{"split": ERRORS_SPLIT, "path": f"{ERRORS_SPLIT}/*"}]},
        ]
        card.data.pop("dataset_info", None)  # an earlier push's sizes and features would not match these files
    return str(card)


def shard_scores(files: Mapping[str, Sequence[Path]], summary: RunSummary | None) -> DatasetDict:
    """What the card of a folder of Parquet shards (split -> its ``data/<split>-*.parquet``) shows, read back from
    the shards: each split's judged numeric and boolean score columns (and a judgment's samples, which the pictures
    count), and the column the scores are grouped by; reasons are left out, they would grow with the data. A
    streamed save's card and the push of its folder render from the same columns.

    Example:
        >>> shards = {"train": sorted(Path("out/data").glob("train-*.parquet"))}  # doctest: +SKIP
        >>> scores = shard_scores(shards, summary)  # doctest: +SKIP
    """
    wanted = set(summary.columns) if summary is not None else set()
    by = summary.group_by if summary is not None else ""
    scores = DatasetDict()
    for split, paths in files.items():
        features = Features.from_arrow_schema(pq.read_schema(paths[0])) if paths else Features()
        names = [n for n, f in features.items() if n in wanted and _card_score(n, f)]
        names += [by] if by and by in features and by not in names else []
        scores[split] = Dataset(pq.ParquetDataset(list(paths)).read(columns=names)) if paths else Dataset.from_dict({})
    return scores


def _card_score(name: str, feature: Any) -> bool:
    """Whether a judged column is one the card counts: a numeric or boolean score, or a judgment's samples (a short
    list of numbers; a pairwise winner's, its "1"/"2"/"tie"); never a reason or an explanation."""
    if "_reason" in name or "_explanation" in name:
        return False
    if getattr(feature, "dtype", None) in SCORE_TYPES:
        return True
    return "_samples" in name and getattr(getattr(feature, "feature", None), "dtype", None) in (*SCORE_TYPES, "string")


def _quantiles(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s.get(k) for k in ("mean", "p10", "p50", "p90")}


def _calibration_lines(scored: DatasetDict, summary: RunSummary | None) -> list[str]:
    if summary is None or not summary.calibration:
        return []
    return calibration_card(summary.calibration, {c for d in scored.values() for c in d.column_names})


def _agreement_entry(index: int, report: AgreementReport, pictures: Collection[str]) -> dict[str, str]:
    """An agreement report's markdown and its pictures' gallery, for the card's "Agreement with labels"."""
    prefix = f"{PLOTS_DIR}/agreement/{index}_"
    images = {p.removeprefix(prefix).removesuffix(".png"): p for p in sorted(pictures) if p.startswith(prefix)}
    return {"markdown": report.to_markdown(), "gallery": gallery(images) if images else ""}


# the card's template, beside this module in the wheel (hatch ships every file of the hf_judge package)
CARD_TEMPLATE = "card.md.j2"


@functools.lru_cache(maxsize=1)
def _card_template() -> jinja2.Template:
    """The card's jinja2 template (``templates/card.md.j2``), as huggingface_hub renders its dataset card
    template: markdown, so nothing is HTML-escaped; a line holding only a tag leaves no line."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hf_judge.results", "templates"),
        autoescape=False,  # a markdown card: its HTML (the galleries) is escaped where it is built
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.filters["number"] = _fmt
    return env.get_template(CARD_TEMPLATE)


def _at_a_glance(scored: DatasetDict, summary: RunSummary | None, by: str | None) -> RunOverview:
    """The overview (:mod:`hf_judge.results.overview`, what the terminal shows at the end of a run): its table,
    and its scores by group where a column to group by is named."""
    return overview(DatasetDict({k: d for k, d in scored.items() if k != "errors"}), summary, by=by)


def gallery(images: dict[str, str], per_row: int = GALLERY_COLUMNS) -> str:
    """Pictures as a table of thumbnails (title -> repo path), each linking to its full-size image: the Hub
    renders the HTML in a card, and a row of small pictures reads faster than full-size ones one under another.

    Example:
        >>> print(gallery({"QA_Clarity (train)": "hf_judge/plots/train/QA_Clarity.png"}))
        <table>
        <tr><td align="center"><a href="hf_judge/plots/train/QA_Clarity.png"><img src="hf_judge/plots/train/QA_Clarity.png" alt="QA_Clarity (train)" width="240"></a><br><sub>QA_Clarity (train)</sub></td></tr>
        </table>
    """  # noqa: E501 - one table row
    cells = [
        f'<td align="center"><a href="{escape(path)}"><img src="{escape(path)}" alt="{escape(title)}" '
        f'width="{THUMBNAIL_WIDTH}"></a><br><sub>{escape(title)}</sub></td>'
        for title, path in images.items()
    ]
    rows = ["<tr>" + "".join(cells[i : i + per_row]) + "</tr>" for i in range(0, len(cells), per_row)]
    return "\n".join(["<table>", *rows, "</table>"])


def merge_card_text(existing: str, section: str) -> str:
    """Replace hf_judge's section in ``existing`` card text, keeping everything else."""
    if START in existing and END in existing:
        head, _, rest = existing.partition(START)
        _, _, tail = rest.partition(END)
        return head + section + tail
    return existing.rstrip() + "\n\n" + section + "\n"
