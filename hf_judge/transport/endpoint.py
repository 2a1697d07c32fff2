"""A judge's endpoint: its ``base_url`` parsed once (the URL requested, the form shown, the form in cache keys,
HTTP Basic credentials) and its API key checked, before any request is sent.
"""

from __future__ import annotations

import base64
import re
import socket

import aiohttp
import yarl

from ..errors import ConfigError
from ..redact import register, register_credentials, scrub

# Query parameters whose values are credentials on some gateways (``?key=``, ``?sig=``).
_SECRET_QUERY = re.compile(r"key|token|secret|sig|pass|auth|cred", re.I)


def has_credentials(base_url: str) -> bool:
    """Whether ``base_url`` carries ``user:password@`` (then it is sent as HTTP Basic auth)."""
    try:
        url = yarl.URL(base_url.strip())
    except (TypeError, ValueError):
        return False
    return url.user is not None or url.password is not None


def parse_endpoint(
    base_url: str, api_key: str | None, route: str = "/chat/completions"
) -> tuple[yarl.URL, str, str, str | None]:
    """``base_url`` parsed once: the URL of ``route`` (chat completions; Anthropic's ``/v1/messages``, whose
    ``/v1`` is left out where the base URL ends with it) (its query kept, after the path: Azure-style
    ``?api-version=`` gateways), the form shown in messages, logs and the card (no credentials, no
    query), the form that identifies the server in cache keys, and the HTTP Basic Authorization
    header of a ``user:password@`` in it."""
    try:
        url = yarl.URL(base_url.strip())
    except (TypeError, ValueError) as e:
        raise ConfigError(f"base_url is not a URL ({e}); give one like http://127.0.0.1:8000/v1") from None
    auth = None
    if url.user is not None or url.password is not None:
        register_credentials(url.user, url.password, url.raw_user or "", url.raw_password or "")
        if api_key:
            raise ConfigError(
                "base_url carries credentials (user:password@) and an API key is set as well; a request holds one "
                "Authorization. Keep the credentials in the URL (sent as HTTP Basic auth) and drop the key, or drop "
                "them from the URL and pass the key (api_key=, --api-key-env)."
            )
        auth = "Basic " + base64.b64encode(f"{url.user or ''}:{url.password or ''}".encode()).decode()
        url = url.with_user(None)
    for name, value in url.query.items():
        if _SECRET_QUERY.search(name):
            register(value)
    shown = str(url.with_query(None).with_fragment(None)).rstrip("/")
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"base_url must be an http:// or https:// URL like http://127.0.0.1:8000/v1, got {shown!r}")
    query = f"?{url.raw_query_string}" if url.raw_query_string else ""
    if route.startswith("/v1/") and shown.endswith("/v1"):
        route = route[3:]
    request_url = yarl.URL(shown + route + query, encoded=True)
    # The server's identity in cache keys is the URL requested (less its fixed "/chat/completions"), as yarl
    # writes it: scheme and host in lower case, no default port, no trailing slash, no user:password (sent as a
    # header), so two spellings of one URL share their cache. The usual spelling (http://host:port/v1) reads
    # as it did when its caches were written. A server's root and its /v1 are one server (llama.cpp, vLLM's
    # and Ollama's OpenAI routes): the identity names what answers, not the route, so they share it too.
    identity = (shown + "/v1" if url.path in ("", "/") else shown) + query
    return request_url, shown, identity, auth


def check_api_key(api_key: str | None) -> None:
    if not api_key:
        return
    if any(c < " " or c == "\x7f" for c in api_key) or api_key != api_key.strip():
        raise ConfigError(
            "the API key contains a newline or another control character, or surrounding spaces (as when read "
            "from a file with its line end); strip it, e.g. export OPENAI_API_KEY=$(tr -d '[:space:]' < key.txt)"
        )
    if not api_key.isascii():
        raise ConfigError("the API key contains non-ASCII characters, which an HTTP header cannot carry. Check it.")


def connection_message(e: aiohttp.ClientError, url: str) -> str:
    """``connection refused at <url>``: the cause and the URL, which aiohttp's text hides."""
    cause = getattr(e, "os_error", None)
    if isinstance(cause, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(e, aiohttp.ClientConnectorDNSError) or isinstance(cause, socket.gaierror):
        text = "host not found"
    elif cause is not None:
        text = cause.strerror or type(cause).__name__
    else:
        text = f"{type(e).__name__}: {e}"
    return scrub(f"{text} at {url}")[:300]
