"""Rebuilding the prompt a row was sent, from what a result records: each metric's prompt file (text, sha256,
params) and the column judged as each template variable (``summary.json``).

The messages come from :mod:`hf_judge.judging.prompt`, the code the row core sends with, so a prompt shown here is
the one sent. Where it cannot be rebuilt exactly (no record of the prompt file and the installed one differs, a
column gone), :class:`PromptUnavailable` says why; nothing is guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, TemplateError
from ..judging.catalogue import load_metric
from ..judging.images import image_variables
from ..judging.metrics import SEED_SUFFIX, Metric, parse_jinja_file, parse_seed_file
from ..judging.prompt import NoRequest, prompt_values, request_messages
from ..judging.sandbox import RenderLimitError, render_limits
from .summary import RunSummary


class PromptUnavailable(ConfigError):
    """A row's prompt cannot be rebuilt exactly; the message says why."""


def rebuild_metric(name: str, summary: RunSummary) -> Metric:
    """The metric ``name`` as the run that wrote ``summary`` loaded it: from the prompt file's text recorded in
    the summary (checked against its sha256), else the installed file of that name if its hash is the recorded
    one. Raises :class:`PromptUnavailable`.

    Example:
        >>> from hf_judge.judging.catalogue import load_metric
        >>> m = load_metric("QA_Clarity")
        >>> rebuild_metric("QA_Clarity", RunSummary(metrics={"QA_Clarity": m.prompt_hash})).prompt_hash == m.prompt_hash
        True
    """
    record = summary.prompts.get(name) or {}
    recorded = summary.metrics.get(name)
    text = record.get("text")
    if text:
        if record.get("sha256") and hashlib.sha256(text.encode()).hexdigest() != record["sha256"]:
            raise PromptUnavailable(f"{name}: the recorded prompt text does not match its sha256; it was edited")
        file = str(record.get("file") or f"{name}.jinja")
        parse = parse_seed_file if file.endswith(SEED_SUFFIX) else parse_jinja_file
        try:
            metric = parse(name, Path(file), text, dict(record.get("params") or {}))
        except ConfigError as e:
            raise PromptUnavailable(f"{name}: the recorded prompt file does not load: {e}") from None
    else:
        try:
            metric = load_metric(name, **(record.get("params") or {}))
        except ConfigError as e:
            raise PromptUnavailable(f"{name}: no prompt text recorded, and it cannot be loaded here: {e}") from None
    if recorded and metric.prompt_hash != recorded:
        where = "the recorded prompt file" if text else f"the installed prompt file {metric.path}"
        raise PromptUnavailable(
            f"{name}: {where} with its params is not the one the run used (prompt hash {metric.prompt_hash[:12]}, "
            f"recorded {recorded[:12]}); pass the run's prompts_dir, or score again"
        )
    return metric


class Prompter:
    """Rebuilds the prompts of one split's rows: the metrics of ``summary`` over ``column_names`` (and
    ``features``, which tell image columns), with the summary's column mapping.

    Example:
        >>> p = Prompter(summary, ds.column_names, ds.features)  # doctest: +SKIP
        >>> p.messages("QA_Clarity", ds[17])  # doctest: +SKIP
        [[{'role': 'user', 'content': '...'}]]
    """

    def __init__(self, summary: RunSummary, column_names: Sequence[str], features: Mapping[str, Any] | None = None):
        self.summary = summary
        self.column_names = list(column_names)
        self.features = dict(features or {})
        self.metrics: dict[str, Metric] = {}
        self.problems: dict[str, str] = {}
        self.columns: dict[str, dict[str, str | None]] = {}
        self.images: dict[str, frozenset[str]] = {}
        for name in summary.metrics:
            try:
                with render_limits():  # a recorded prompt file's front matter renders too: within bounds
                    metric = rebuild_metric(name, summary)
                columns = metric.resolve_columns(summary.column_mapping, self.column_names)
                self.images[name] = image_variables(metric, columns, self.features)
            except ConfigError as e:
                self.problems[name] = str(e)
                continue
            self.metrics[name], self.columns[name] = metric, columns

    def check(self, name: str) -> Metric:
        """The metric ``name``; a PromptUnavailable that says why where it cannot be rebuilt."""
        if name in self.problems:
            raise PromptUnavailable(self.problems[name])
        if name not in self.metrics:
            known = ", ".join(self.summary.metrics) or "(none recorded)"
            raise PromptUnavailable(f"no metric {name!r} in this result; its metrics: {known}")
        return self.metrics[name]

    def messages(self, name: str, row: Mapping[str, Any]) -> list[list[dict]]:
        """The messages of each request metric ``name`` sent for ``row`` (column -> value): one list, two for a
        pairwise judge asked in both orders. Raises :class:`PromptUnavailable` (a row that sent nothing too)."""
        metric = self.check(name)
        batch = {c: [row.get(c)] for c in self.columns[name].values() if c is not None}
        try:
            values = prompt_values(metric, self.columns[name], batch, 0, self.images[name])
            with render_limits():
                return request_messages(metric, values, self.images[name])
        except RenderLimitError as e:
            # past a bound once, it is not tried again for the next rows (a page renders thousands)
            self.problems[name] = f"{name}: the recorded prompt cannot be shown: {e}"
            raise PromptUnavailable(self.problems[name]) from None
        except NoRequest as e:
            raise PromptUnavailable(f"{name}: no request was sent for this row ({e.kind}: {e.message})") from None
        except TemplateError as e:
            raise PromptUnavailable(f"{name}: the template fails on this row, so nothing was sent: {e}") from None


def format_messages(requests: list[list[dict]]) -> str:
    """Messages as a person reads them: each request's messages under ``--- role ---`` headers.

    Example:
        >>> print(format_messages([[{"role": "user", "content": "Rate this."}]]))
        --- user ---
        Rate this.
    """
    out = []
    for n, messages in enumerate(requests):
        if len(requests) > 1:
            out.append(f"=== request {n + 1} of {len(requests)} (answers in the {'other' if n else 'given'} order) ===")
        for m in messages:
            content = m["content"]
            if not isinstance(content, str):  # content parts: text and images
                content = "\n".join(
                    p.get("text", "") if p.get("type") == "text" else f"[image: {str(p)[:80]}...]" for p in content
                )
            out += [f"--- {m['role']} ---", content]
    return "\n".join(out)
