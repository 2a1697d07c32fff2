"""Which provider's API each model of a cache was last judged through (``providers.json`` beside the reply
store), so that a run switching provider says why nothing of the cache is reused.

A reply's key names the provider (see ``JudgeClient.server_id``): the same metric and row sent to Anthropic's
or Gemini's own API is another request than through an OpenAI-compatible server, and gets another reply. A
run that switches is right to send everything again; the note in its summary says so.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ..transport.client import JudgeClient

logger = logging.getLogger("hf_judge")

FILE = "providers.json"


def provider_notes(cache_root: Path, clients: Sequence[JudgeClient]) -> list[str]:
    """The notes of a run whose models this cache last saw through another provider; records this run's.

    Example:
        >>> provider_notes(Path("cache"), [JudgeClient(Settings(model="gemini-2.5-flash"))])  # doctest: +SKIP
        ["gemini-2.5-flash was judged through provider openai in this cache; this run asks gemini: ..."]
    """
    path = cache_root / FILE
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    notes = []
    for c in clients:
        before = seen.get(c.model)
        if isinstance(before, str) and before != c.provider:
            notes.append(
                f"{c.model} was judged through provider {before} in this cache; this run asks {c.provider}: the "
                f"same metric and row sent to another provider is another request, so the replies {before} gave "
                "are not reused (sent again, and paid again)"
            )
        seen[c.model] = c.provider
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(seen, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only or full disk: the note is a nicety, the run goes on
        logger.debug("could not record the providers of %s: %s", cache_root, e)
    return notes
