"""Keeping API keys and Hub tokens out of everything that leaves the process."""

from __future__ import annotations

import logging
import os
import re

_registered: set[str] = set()
# Shapes of well-known secrets, scrubbed even when never registered.
_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|Bearer\s+\S+)")


# Shorter values are placeholders that local servers accept ("none", "EMPTY",
# "x"), not secrets; masking them would garble every log line that contains them.
MIN_SECRET_LEN = 8


def register(secret: str | None) -> None:
    """Remember a secret so :func:`scrub` removes it from any text."""
    if secret and len(secret) >= MIN_SECRET_LEN:
        _registered.add(secret)


def scrub(text: object) -> str:
    """Return ``text`` as a string with every known secret replaced by ``***``."""
    s = text if isinstance(text, str) else str(text)
    for secret in _registered:
        if secret in s:
            s = s.replace(secret, "***")
    return _PATTERNS.sub("***", s)


class ScrubFilter(logging.Filter):
    """A logging filter that scrubs secrets out of every record of hf_judge."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg = record.getMessage()
            record.args = None
        record.msg = scrub(record.msg)
        return True


def install_log_filter() -> None:
    logger = logging.getLogger("hf_judge")
    if not any(isinstance(f, ScrubFilter) for f in logger.filters):
        logger.addFilter(ScrubFilter())
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "HUGGING_FACE_HUB_TOKEN"):
        register(os.environ.get(name))
