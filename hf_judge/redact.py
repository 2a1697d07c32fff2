"""Keeping API keys and Hub tokens out of everything that leaves the process.

Two levels: :func:`scrub` (registered secrets and the shapes of well-known
ones) for error rows, messages and logs; :func:`scrub_registered` (registered
secrets only, about a microsecond per reply) for the replies that are stored
and become columns, where a phrase like "Bearer tokens" must stay.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import urllib.parse

from .errors import ConfigError

_registered: set[str] = set()
# Longest first (a secret may contain another), rebuilt on register. Checked with
# ``in`` per secret: ~0.3 us each on a reply, ten times faster than one regex
# alternation (measured with 3 secrets on 100 and 2,000 characters).
_ordered: tuple[str, ...] = ()
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
    global _ordered
    if not secret or len(secret) < MIN_SECRET_LEN:
        return
    # A server quoting the secret inside a JSON string escapes it there.
    forms = {secret, json.dumps(secret)[1:-1]} - _registered
    if not forms:
        return
    _registered.update(forms)
    _ordered = tuple(sorted(_registered, key=len, reverse=True))


def register_credentials(user: str | None, password: str | None, raw_user: str = "", raw_password: str = "") -> None:
    """Register the ``user:password@`` of a URL: the password, the pair, and the HTTP Basic header made of it.

    ``raw_user``/``raw_password``: the parts as the URL spells them (percent-encoded).
    A judge that quotes the ``Authorization`` header it got echoes the base64 of the
    pair, which holds neither part as text. The user alone is no secret, and is not
    registered: a name like ``research`` would be masked in every stored reply.

    Example:
        >>> register_credentials("gateway-user", "pw/secret-0123", "gateway-user", "pw%2Fsecret-0123")
        >>> scrub("got Basic " + base64.b64encode(b"gateway-user:pw/secret-0123").decode())
        'got ***'
    """
    pair = f"{user or ''}:{password or ''}"
    b64 = base64.b64encode(pair.encode()).decode()
    # Unpadded too (a server may strip it); the padded form is longer, so it is replaced first.
    for secret in (password, pair, raw_password, f"{raw_user}:{raw_password}", b64, b64.rstrip("="), f"Basic {b64}"):
        register(secret)


def scrub_registered(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``; the same object when it holds none."""
    ordered = _ordered
    for secret in ordered:
        if secret in text:
            break
    else:
        return text
    for secret in ordered:
        text = text.replace(secret, "***")
    return text


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


def install_log_filter(hub_login: bool = True) -> None:
    """Scrub hf_judge's logs, and register the keys and Hub tokens the environment holds.

    ``hub_login``: also the token of the saved Hub login (reading it imports huggingface_hub, ~30 ms: the
    CLI skips it for commands that reach no server).
    """
    logger = logging.getLogger("hf_judge")
    if not any(isinstance(f, ScrubFilter) for f in logger.filters):
        logger.addFilter(ScrubFilter())
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "HUGGING_FACE_HUB_TOKEN"):
        register(os.environ.get(name))
    if not hub_login:
        return
    try:  # the token of `hf auth login`, which the Hub calls use when none is given
        from huggingface_hub import get_token

        register(get_token())
    except Exception:  # noqa: BLE001 - an unreadable token file is not ours to report
        pass


def resolve_secret(value: str | None, what: str = "api_key") -> str | None:
    """``env:NAME`` -> the variable's value; anything else as it is (recipes and panels name keys this way).

    Example:
        >>> resolve_secret("sk-inline"), resolve_secret(None)
        ('sk-inline', None)
    """
    if value is None or not value.startswith("env:"):
        return value
    name = value[4:].strip()
    found = os.environ.get(name)
    if not found:
        raise ConfigError(
            f"{what} says env:{name}, but the environment variable {name} is not set. Export it, e.g. export {name}=..."
        )
    return found


# Storage option names whose values are credentials (fsspec's s3fs, gcsfs and adlfs use these words; an HTTP header
# is one too).
_SECRET_OPTION = re.compile(
    r"key|secret|token|password|passwd|credential|sas|connection_string|signature|authorization|cookie", re.I
)
# Fields of a URL's query or a connection string whose values are credentials (Azure's SAS sig= and AccountKey=,
# S3's X-Amz-Signature and X-Amz-Credential, ?key=, ?token=), and where such fields start in a text.
SECRET_NAME = _SECRET_OPTION  # public: a name whose value is a credential (a Job's repr masks it)
_SECRET_FIELD = re.compile(r"key|token|secret|sig|pass|auth|cred", re.I)
_FIELD = re.compile(r"(?:^|[?&;])([^=?&;/\s]+)=")


def plan_secrets(value: object, path: str = "storage_options", named: bool = False) -> list[str]:
    """Where ``value`` (storage options, at any depth) holds a secret that a plan shipped to other processes would
    carry as it is: each entry's path and what it holds, never the secret. Under a credential's name (``key``,
    ``token``, an ``Authorization`` header; ``named``) only ``env:NAME`` text, None or a bool pass (the text is
    read where it is used: :func:`resolve_storage_options`); anywhere, a URL with a password or a signature.

    Example:
        >>> plan_secrets({"secret": "env:AWS_SECRET", "anon": False, "endpoint_url": "https://u:pw@minio:9000"})
        ["storage_options['endpoint_url'] holds a URL with a password (user:password@)"]
    """
    if isinstance(value, str):
        return _text_secrets(value, path, named)
    if isinstance(value, dict):
        out: list[str] = []
        for name, item in value.items():
            out += plan_secrets(item, f"{path}[{name!r}]", named or bool(_SECRET_OPTION.search(str(name))))
        return out
    if isinstance(value, list | tuple):
        if named:
            return [f"{path} holds a list"]
        if len(value) == 2 and isinstance(value[0], str) and _SECRET_OPTION.search(value[0]):
            return plan_secrets(value[1], f"{path}[1]", True)  # a (name, value) pair: a header
        return [found for i, item in enumerate(value) for found in plan_secrets(item, f"{path}[{i}]", named)]
    if named and value is not None and not isinstance(value, bool):
        return [f"{path} holds {'bytes' if isinstance(value, bytes | bytearray) else type(value).__name__}"]
    return []


def masked(value: object, named: bool = False) -> object:
    """``value`` (at any depth) with what a repr must not show masked: under a credential's name (``named``, or a
    key matching :data:`SECRET_NAME`) any text but ``env:NAME``, anywhere a URL's password. Panelists are shown as
    their fields.

    Example:
        >>> masked({"key": "AKIA-secret", "secret": "env:AWS_SECRET", "endpoint_url": "http://u:pw@minio:9000"})
        {'key': '***', 'secret': 'env:AWS_SECRET', 'endpoint_url': 'http://u:***@minio:9000'}
    """
    if hasattr(value, "model_dump"):  # a Panelist
        value = {k: v for k, v in value.model_dump().items() if v is not None}
    if isinstance(value, dict):
        return {k: masked(v, named or bool(SECRET_NAME.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(masked(v, named) for v in value)
    if isinstance(value, str):
        if named and not value.startswith("env:"):
            return "***"
        if "://" in value and (password := urllib.parse.urlsplit(value).password):
            return value.replace(f":{password}@", ":***@", 1)
    return value


def _text_secrets(text: str, path: str, named: bool) -> list[str]:
    if text.startswith("env:"):
        return [] if text[4:].strip() else [f"{path} is env: with no variable's name"]
    if named:
        return [f"{path} holds a credential as text"]
    if "://" in text and urllib.parse.urlsplit(text).password is not None:
        return [f"{path} holds a URL with a password (user:password@)"]
    if any(_SECRET_FIELD.search(field) for field in _FIELD.findall(text)):
        return [f"{path} holds a signature or key in its text (?sig=, AccountKey=)"]
    return []


def resolve_storage_options(options: dict | None, prefix: str = "") -> dict:
    """``storage_options`` as fsspec takes them: each ``env:NAME`` text (at any depth) replaced by that variable's
    value, read here, in the process that opens the filesystem, so that a plan that Spark or Ray ships, a recipe
    or a process list holds only the name. Credentials, given either way, are registered for scrubbing.

    Example:
        >>> os.environ["DOC_SECRET"] = "s3cr3t-value"
        >>> resolve_storage_options({"secret": "env:DOC_SECRET", "client_kwargs": {"region_name": "eu-west-1"}})
        {'secret': 's3cr3t-value', 'client_kwargs': {'region_name': 'eu-west-1'}}
    """
    out: dict = {}
    for name, value in (options or {}).items():
        if isinstance(value, dict):
            out[name] = resolve_storage_options(value, f"{prefix}{name}.")
            continue
        if isinstance(value, str) and value.startswith("env:"):
            value = resolve_secret(value, f"storage_options[{prefix}{name!s}]")
            register(value)
        elif isinstance(value, str) and _SECRET_OPTION.search(str(name)):
            register(value)
        out[name] = value
    return out
