"""The batch APIs of providers other than OpenAI's, behind one small interface (:class:`BatchApi`).

:class:`~hf_judge.engine.batch.BatchRunner` speaks OpenAI's ``/v1/files`` + ``/v1/batches`` itself (with the
``openai`` SDK); for another provider it hands these steps to a :class:`BatchApi`: create a batch from a
written request file, find one a kill hid, look at one, read its results as OpenAI-shaped output lines,
cancel it. Everything else (the book, the lines' validation, resubmission, ``--no-wait``) is the runner's
and the same for every provider. :func:`batch_api` picks the implementation from the judge's provider.

:class:`AnthropicBatches`: Message Batches (``POST /v1/messages/batches`` with ``requests: [{custom_id,
params}]``, ``GET .../{id}``, the JSONL at ``results_url``, ``POST .../{id}/cancel``), over the standard
library's HTTP client (the request file is streamed, the results are streamed to disk: a 256 MB batch is
never held in memory). Its states are said in OpenAI's words in the book (``in_progress``, ``cancelling``,
and for an ended batch ``completed``, or ``expired``/``cancelled`` where some of its requests were), so
that ``hf-judge batch status|cancel`` read every provider's batches alike.
"""

from __future__ import annotations

import datetime as dt
import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from .. import constants
from ..redact import scrub
from ..transport import anthropic
from ..transport.policy import error_message, parse_retry_after
from .batch_lines import Oversized, bounded_lines

logger = logging.getLogger("hf_judge")

# Anthropic's error types -> the HTTP status a line that failed with one counts as (errors.http_kind)
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


@dataclass
class RemoteBatch:
    """A provider's batch as the runner reads it: its id, state (OpenAI's words), requests run and failed."""

    id: str
    status: str
    done: int = 0
    failed: int = 0
    created: float = 0.0  # seconds since the epoch
    requests: int = 0
    results_url: str | None = None


class BatchApiError(Exception):
    """An HTTP error of a batch API: ``status_code`` and ``message``, as the openai SDK's errors carry them."""

    def __init__(self, status_code: int, message: str):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message


class BatchApiUnreachable(Exception):
    """The batch API could not be reached (connection refused, DNS, a reset)."""


class BatchApi(Protocol):
    """What the runner needs of a provider's batch API (see the module docstring)."""

    provider: str
    max_requests: int  # the provider's limits per batch
    max_bytes: int

    def line(self, key: bytes, body: bytes) -> bytes: ...  # one request line of the file the runner writes
    def create(self, path: Path, requests: int) -> RemoteBatch: ...  # one try, never retried blindly
    def find(self, since: float, requests: int, known: set[str]) -> RemoteBatch | None: ...
    def retrieve(self, batch_id: str) -> RemoteBatch: ...
    def lines(self, batch: RemoteBatch, folder: Path, cap: int) -> Iterator[bytes | Oversized]: ...
    def cancel(self, batch_id: str) -> str: ...


def batch_api(provider: str, base_url: str, api_key: str | None, sleep: Callable[[float], None]) -> BatchApi | None:
    """The batch API of ``provider`` at ``base_url``, or None for OpenAI's (the runner's own)."""
    if provider == "anthropic":
        return AnthropicBatches(base_url, api_key, sleep)
    return None


def _epoch(stamp: Any) -> float:
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class AnthropicBatches:
    """Anthropic's Message Batches (see the module docstring).

    Example:
        >>> api = AnthropicBatches("https://api.anthropic.com", "sk-ant-x", print)
        >>> api.url
        'https://api.anthropic.com/v1/messages/batches'
        >>> api.line(bytes([1, 2]), b'{"model":"claude-haiku-4-5"}')
        b'{"custom_id":"0102","params":{"model":"claude-haiku-4-5"}}\\n'
    """

    provider = "anthropic"
    max_requests = constants.ANTHROPIC_BATCH_MAX_REQUESTS
    max_bytes = constants.ANTHROPIC_BATCH_MAX_BYTES

    def __init__(self, base_url: str, api_key: str | None, sleep: Callable[[float], None], tries: int = 6):
        base = base_url.rstrip("/")
        self.url = base + (anthropic.BATCHES_ROUTE[3:] if base.endswith("/v1") else anthropic.BATCHES_ROUTE)
        self.headers = {**anthropic.headers(api_key), "content-type": "application/json"}
        self.sleep = sleep
        self.tries = tries

    @staticmethod
    def line(key: bytes, body: bytes) -> bytes:
        """One request of the batch: the custom_id (the request key in hex, 32 characters of Anthropic's 64)
        and the Messages body the online run would send."""
        return b'{"custom_id":"%s","params":%s}\n' % (key.hex().encode(), body)

    # -- HTTP ---------------------------------------------------------------------------
    def _open(self, method: str, url: str, data: Any = None, size: int | None = None, retry: bool = True) -> Any:
        """The response of one call, retried (when ``retry``) on 429, 5xx, 529 and connection errors, after
        the server's ``retry-after`` where it gives one; a refusal as :class:`BatchApiError`."""
        headers = dict(self.headers)
        if size is not None:
            headers["content-length"] = str(size)
        for attempt in range(self.tries if retry else 1):
            wait = min(30.0, 0.5 * 2**attempt)
            try:
                body = data() if callable(data) else data
                return urllib.request.urlopen(urllib.request.Request(url, body, headers, method=method), timeout=600)  # noqa: S310 - an http(s) base URL, checked
            except urllib.error.HTTPError as e:
                raw = e.read(64 * 1024)
                status = e.code
                if not retry or attempt == self.tries - 1 or not (status == 429 or status >= 500):
                    raise BatchApiError(status, error_message(status, raw)) from None
                after = parse_retry_after({k.lower(): v for k, v in e.headers.items()})
                wait = wait if after is None else min(60.0, after)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if not retry or attempt == self.tries - 1:
                    raise BatchApiUnreachable(scrub(str(getattr(e, "reason", e)))) from None
            self.sleep(wait)
        raise AssertionError("unreachable")

    def _json(self, method: str, url: str) -> Any:
        with self._open(method, url) as r:
            return orjson.loads(r.read())

    @staticmethod
    def _batch(doc: dict) -> RemoteBatch:
        counts = doc.get("request_counts") or {}
        total = sum(v for v in counts.values() if isinstance(v, int))
        state = str(doc.get("processing_status"))
        status = {"in_progress": "in_progress", "canceling": "cancelling"}.get(state, "")
        if state == "ended":
            # an ended batch in OpenAI's words: what became of the requests it did not run
            status = "cancelled" if counts.get("canceled") else "expired" if counts.get("expired") else "completed"
        return RemoteBatch(
            id=doc["id"],
            status=status or state,
            done=int(counts.get("succeeded", 0)),
            failed=int(counts.get("errored", 0)),
            created=_epoch(doc.get("created_at")),
            requests=total,
            results_url=doc.get("results_url"),
        )

    # -- the interface ------------------------------------------------------------------
    def create(self, path: Path, requests: int) -> RemoteBatch:
        """Submit the request lines of ``path`` as one batch: ``{"requests": [line, ...]}``, streamed."""
        size = path.stat().st_size
        length = len(b'{"requests":[]}') + size - requests + max(0, requests - 1)  # each line's \n becomes a comma

        def body() -> Iterator[bytes]:
            yield b'{"requests":['
            with open(path, "rb") as f:
                for i, raw in enumerate(f):
                    yield (b"," if i else b"") + raw.rstrip(b"\n")
            yield b"]}"

        with self._open("POST", self.url, body, size=length, retry=False) as r:
            return self._batch(orjson.loads(r.read()))

    def find(self, since: float, requests: int, known: set[str]) -> RemoteBatch | None:
        """The batch a kill hid (its create sent, its id never recorded): Message Batches carry no metadata, so
        it is the oldest batch created since ``since`` (less a minute of clock skew) with as many requests, that
        no job of the book holds (``known``)."""
        found = None
        url = self.url + "?limit=100"
        while True:
            page = self._json("GET", url)
            for doc in page.get("data") or []:
                b = self._batch(doc)
                if b.created and b.created < since - 60:
                    return found  # newest first: the rest are older still
                if b.id not in known and b.requests == requests:
                    found = b
            if not page.get("has_more") or not page.get("last_id"):
                return found
            url = f"{self.url}?limit=100&after_id={page['last_id']}"

    def retrieve(self, batch_id: str) -> RemoteBatch:
        return self._batch(self._json("GET", f"{self.url}/{batch_id}"))

    def cancel(self, batch_id: str) -> str:
        return self._batch(self._json("POST", f"{self.url}/{batch_id}/cancel")).status

    def lines(self, batch: RemoteBatch, folder: Path, cap: int) -> Iterator[bytes | Oversized]:
        """The batch's results as OpenAI output lines (``custom_id``, ``response: {status_code, body}``): a
        succeeded request's Message as a 200's body, an errored one's error at its type's status. Canceled and
        expired requests have no line (the runner closes them with the batch's state). Streamed through a local
        copy, each line bounded by ``cap``."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"download-{batch.id}-{uuid.uuid4().hex[:8]}.jsonl"
        try:
            with self._open("GET", batch.results_url or f"{self.url}/{batch.id}/results") as r, open(path, "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
            with open(path, "rb") as f:
                for raw in bounded_lines(f, cap):
                    out = raw if isinstance(raw, Oversized) else _output_line(raw)
                    if out is not None:
                        yield out
        finally:
            path.unlink(missing_ok=True)


def _output_line(raw: bytes) -> bytes | None:
    """An Anthropic result line as an OpenAI output line; None for a request that did not run. A line that is
    no result at all is passed on as it is (the reader counts it as malformed)."""
    try:
        doc = orjson.loads(raw)
        cid, result = doc["custom_id"], doc["result"]
        kind = result["type"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return raw
    if kind == "succeeded":
        response = {"status_code": 200, "body": result.get("message")}
    elif kind == "errored":
        err = (result.get("error") or {}).get("error") or {}
        status = _ERROR_STATUS.get(str(err.get("type")), 500)
        response = {"status_code": status, "body": {"error": {"message": f"{err.get('type')}: {err.get('message')}"}}}
    else:  # canceled, expired
        return None
    return orjson.dumps({"custom_id": cid, "response": response}) + b"\n"
