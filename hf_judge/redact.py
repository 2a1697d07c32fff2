"""Keeping API keys and Hub tokens out of everything that leaves the process.

Two levels: :func:`scrub` (registered secrets and the shapes of well-known
ones) for error rows, messages and logs; :func:`scrub_registered` (registered
secrets only, nearly free when there is none in the text) for the replies that
are stored and become columns, where a phrase like "Bearer tokens" must stay.
"""

from __future__ import annotations

import json
import logging
import os
import re

_registered: set[str] = set()
# One alternation of every registered secret, longest first, rebuilt on register:
# one regex search per reply instead of one substring search per secret.
_registered_re: re.Pattern | None = None
# Shapes of well-known secrets, scrubbed even when never registered.
_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|Bearer\s+\S+)")


# Shorter values are placeholders that local servers accept ("none", "EMPTY",
# "x"), not secrets; masking them would garble every log line that contains them.
MIN_SECRET_LEN = 8


def register(secret: str | None) -> None:
    """Remember a secret so :func:`scrub` and :func:`scrub_registered` remove it from any text.

    Example:
        >>> register("my-gateway-password-123")
        >>> scrub("refused my-gateway-password-123")
        'refused ***'
    """
    global _registered_re
    if not secret or len(secret) < MIN_SECRET_LEN:
        return
    # A server quoting the secret inside a JSON string escapes it there.
    forms = {secret, json.dumps(secret)[1:-1]} - _registered
    if not forms:
        return
    _registered.update(forms)
    _registered_re = re.compile("|".join(re.escape(s) for s in sorted(_registered, key=len, reverse=True)))


def scrub_registered(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``; the same object when it holds none."""
    pattern = _registered_re
    if pattern is None or pattern.search(text) is None:
        return text
    return pattern.sub("***", text)


def scrub(text: object) -> str:
    """Return ``text`` as a string with every known secret replaced by ``***``.

    Example:
        >>> scrub("HTTP 401: Incorrect API key provided: sk-abcdef0123456789")
        'HTTP 401: Incorrect API key provided: ***'
    """
    s = text if isinstance(text, str) else str(text)
    return _PATTERNS.sub("***", scrub_registered(s))


class ScrubFilter(logging.Filter):
    """A logging filter that scrubs secrets out of every record of hf_judge."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg = record.getMessage()
            record.args = None
        record.msg = scrub(record.msg)
        return True


def install_log_filter() -> None:
    """Scrub hf_judge's logs, and register the keys and Hub tokens the environment holds."""
    logger = logging.getLogger("hf_judge")
    if not any(isinstance(f, ScrubFilter) for f in logger.filters):
        logger.addFilter(ScrubFilter())
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "HUGGING_FACE_HUB_TOKEN"):
        register(os.environ.get(name))
    try:  # the token of `hf auth login`, which the Hub calls use when none is given
        from huggingface_hub import get_token

        register(get_token())
    except Exception:  # noqa: BLE001 - an unreadable token file is not ours to report
        pass
