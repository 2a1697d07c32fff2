"""The run summary printed at the end of a run and recorded in the dataset card."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunSummary:
    """What a run did: rows, requests, failures by kind, tokens, time."""

    model: str = ""
    base_url_host: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    capped_waits: int = 0
    cached_splits: list[str] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    failed_attempts: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    structured_output: str = "json_schema"
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["requests_per_s"] = round(self.requests_per_s, 1)
        return d

    def __str__(self) -> str:
        rows = ", ".join(f"{k}: {v:,}" for k, v in self.rows.items()) or "0"
        errs = ", ".join(f"{k}: {v:,}" for k, v in Counter(self.errors).most_common()) or "none"
        lines = [
            f"rows           {rows}",
            f"requests       {self.requests:,} ({self.retries:,} retries, {self.cache_hits:,} served from cache)",
            f"errors         {errs}",
            f"tokens         {self.prompt_tokens:,} in / {self.completion_tokens:,} out",
            f"elapsed        {self.elapsed_s:.1f} s ({self.requests_per_s:,.0f} requests/s)",
            f"output format  {self.structured_output}",
        ]
        if self.capped_waits:
            lines.append(f"capped waits   {self.capped_waits:,} (Retry-After over backoff_max; waited backoff_max)")
        if self.cached_splits:
            lines.append(f"from cache     {', '.join(self.cached_splits)} (no request sent)")
        lines += [f"note           {n}" for n in self.notes]
        return "\n".join(lines)
