"""Batch files line by line: packing requests into a provider's JSONL input, and reading its output and
error files back (each line parsed once, bounded by ``max_reply_bytes``, settled for its own request)."""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ..errors import (
    ConfigError,
    ErrorKind,
    http_kind,
)
from ..judging.metrics import Metric
from ..redact import scrub, scrub_registered
from ..store.sqlite import encode_meta
from ..transport import anthropic
from ..transport.budget import reported_tokens
from ..transport.client import JudgeClient
from .batch_book import CHUNK, ENDPOINT, BatchBook, BatchReport

logger = logging.getLogger("hf_judge")


def line(key: bytes, body: bytes) -> bytes:
    """One request line of a batch file, in OpenAI's format: the body as the online run would send it.

    Example:
        >>> line(bytes([1, 2]), b'{"model":"m"}')
        b'{"custom_id":"0102","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}\\n'
    """
    return b'{"custom_id":"%s","method":"POST","url":"%s","body":%s}\n' % (key.hex().encode(), ENDPOINT.encode(), body)


class Packer:
    """Writes request lines into files of at most ``max_requests`` lines and ``max_bytes`` bytes."""

    def __init__(
        self,
        folder: Path,
        max_requests: int,
        max_bytes: int,
        on_file: Callable[[Path, list], None],
        line: Callable[[bytes, bytes], bytes] = line,
    ):
        self.folder = folder
        self.line = line  # the provider's request line (OpenAI's by default; batch_api.BatchApi.line)
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.on_file = on_file
        self.keys: list[tuple[bytes, str]] = []
        self.seen: set[bytes] = set()  # the keys of the file being written (a custom_id is unique per file)
        self.files = 0
        self.size = 0
        self._f: Any = None
        self._path: Path | None = None

    def add(self, key: bytes, metric: str, body: bytes) -> None:
        data = self.line(key, body)
        if len(data) > self.max_bytes:
            raise ConfigError(
                f"one request of metric {metric} takes {len(data):,} bytes, over batch_max_bytes={self.max_bytes:,}; "
                "raise --batch-max-bytes, or score without --batch"
            )
        if self._f is not None and (len(self.keys) >= self.max_requests or self.size + len(data) > self.max_bytes):
            self.flush()
        if self._f is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path = self.folder / f"hf_judge-{uuid.uuid4().hex[:16]}.jsonl"
            self._f = open(self._path, "wb")  # noqa: SIM115 - closed in flush
        self._f.write(data)
        self.size += len(data)
        self.keys.append((key, metric))
        self.seen.add(key)

    def flush(self) -> None:
        if self._f is None:
            return
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        path, keys = self._path, self.keys
        self._f, self._path, self.keys, self.size, self.seen = None, None, [], 0, set()
        assert path is not None
        self.on_file(path, keys)
        self.files += 1


def line_tokens(usage: Any) -> tuple[int, int]:
    if not isinstance(usage, dict):
        return 0, 0
    if "input_tokens" in usage:  # an Anthropic Message's
        return anthropic.usage_tokens(usage)[:2]
    # counts that are no counts ("12", 7.9, -5) are not taken: the client counts such a reply's tokens itself
    return reported_tokens(usage) or (0, 0)


class Reader:
    """Turns the lines of a batch output or error file into accepted replies and failed tries."""

    def __init__(self, book: BatchBook, client: JudgeClient, metrics: dict[str, Metric], report: BatchReport):
        self.book = book
        self.client = client
        self.metrics = metrics
        self.report = report
        self.unknown = 0  # lines of the last read whose custom_id is no request the batch (or an export) was sent
        self.malformed = 0  # lines of the last read that are no output line at all

    def read(self, lines: Iterable[bytes | Oversized], job: str | None, source: str) -> tuple[int, int, int, int]:
        """(accepted, failed, prompt tokens, completion tokens) of the lines of one batch's output, ``job``'s
        (None: an import's, whose lines answer the requests of this cache's exports); ``source`` names it.

        A request is settled by its lines in their order in the file: its first valid reply is kept (the lines
        after it are duplicates, skipped), and its failed lines count one failed try (a valid line after them is
        still kept). Skipped too, and counted: a line for a request the batch was not sent (``unknown``: another
        batch's answer would overwrite the one paid for), and one that is no output line (``malformed``: not a
        JSON object with a custom_id in hex), with one warning. A line over ``max_reply_bytes`` is a failed try
        of its request.
        """
        self.unknown = self.malformed = 0
        first_bad = 0
        legacy = self.book.legacy(job)
        totals = [0, 0, 0, 0]
        chunk: list[tuple[bytes, dict | Oversized]] = []
        for n, raw in enumerate(lines, 1):
            if isinstance(raw, bytes) and not raw.strip():
                continue
            parsed = parse_line(raw)
            if parsed is None:
                self.malformed += 1
                first_bad = first_bad or n
            else:
                chunk.append(parsed)
            if len(chunk) >= CHUNK:
                totals = [a + b for a, b in zip(totals, self._read_chunk(chunk, job, legacy), strict=True)]
                chunk = []
        totals = [a + b for a, b in zip(totals, self._read_chunk(chunk, job, legacy), strict=True)]
        if self.malformed:
            logger.warning(
                "skipped %d line(s) of %s that are no batch output line (a JSON object with the request's custom_id "
                "in hex), the first at line %d",
                self.malformed,
                source,
                first_bad,
            )
        return totals[0], totals[1], totals[2], totals[3]

    def _read_chunk(
        self, lines: list[tuple[bytes, dict | Oversized]], job: str | None, legacy: bool
    ) -> tuple[int, int, int, int]:
        sent = self.book.members([k for k, _ in lines], job, legacy)
        good: dict[bytes, tuple[bytes, str, str | None]] = {}
        bad: dict[bytes, tuple[bytes, str, str, str | None]] = {}
        p_tok = c_tok = 0
        for key, doc in lines:
            if key not in sent:  # not a request this batch was sent (another batch's, another cache's)
                self.unknown += 1
                continue
            name = sent[key]
            if name is None or key in good:  # settled by an earlier line (or run): the first valid reply stays
                continue
            kept, failure, p, c = self._line(key, name, doc)
            if kept is not None:
                good[key] = kept
                bad.pop(key, None)
            elif key in bad:
                continue  # the same request failed again in this output: one try
            else:
                bad[key] = failure
                if not self.book.importing:  # a failed try of a batch's request, counted as a failed attempt online
                    self.client.stats.failures[str(failure[1])] += 1
            p_tok, c_tok = p_tok + p, c_tok + c
        self.book.accept(list(good.values()))
        failed = self.book.reject(list(bad.values()), job)
        return len(good), failed, p_tok, c_tok

    def _line(self, key: bytes, name: str, doc: dict | Oversized) -> tuple[Any, Any, int, int]:
        """(accepted row or None, failure row or None, prompt tokens, completion tokens) of one line."""
        if isinstance(doc, Oversized):
            cap = self.client.settings.max_reply_bytes
            message = (
                f"the batch line takes over {doc.size:,} bytes, more than max_reply_bytes={cap:,}; raise "
                "max_reply_bytes (--max-reply-bytes) if the replies are that big"
            )
            return None, (key, ErrorKind.BAD_RESPONSE, message, None), 0, 0
        response = doc.get("response") if isinstance(doc.get("response"), dict) else None
        error = doc.get("error")
        status = response.get("status_code") if response else None
        body = response.get("body") if response else None
        if isinstance(status, int) and not self.book.importing:  # a batch's line (a request of the batch API) is
            # counted as an online reply is: a judge's answered requests are its 200s
            self.client.stats.statuses[status] += 1
        if error or status != 200 or not isinstance(body, dict):
            return None, (key, *line_failure(status, body, error), None), 0, 0
        p, c = line_tokens(body.get("usage"))
        metric = self.metrics.get(name)
        if metric is None:  # a request of another run's metric: keep the paid reply, that run validates it
            content = stop_content(body)
            if content is None:
                return None, (key, ErrorKind.BATCH_FAILED, "the batch line holds no finished reply", None), p, c
            return (key, content, f"{p} {c}"), None, p, c
        stats, tokens = self.client.stats, self.client.batch_tokens
        before = (stats.prompt_tokens, stats.completion_tokens)
        outcome = self.client._handle_ok(metric, orjson.dumps(body))
        # the usage it counted, as the client counts it, was paid at the batch price (the budget's spent())
        p, c = stats.prompt_tokens - before[0], stats.completion_tokens - before[1]  # reported, or counted
        tokens[0] += p
        tokens[1] += c
        if outcome.value is None:
            return None, (key, str(outcome.kind), outcome.message or "", outcome.raw), p, c
        assert outcome.raw is not None
        # the store's own format of the usage column (with the score's probabilities, logprobs=True)
        return (key, outcome.raw, encode_meta(outcome.usage, outcome.logprobs)), None, p, c


class Oversized:
    """A line longer than the cap, never held whole: its first bytes (where its custom_id is) and its size."""

    __slots__ = ("prefix", "size")

    def __init__(self, prefix: bytes, size: int):
        self.prefix = prefix
        self.size = size


_CUSTOM_ID = re.compile(r"(?:[0-9a-fA-F]{2})+")


# the custom_id of a line too long to parse: a key of the line's top object, before any nested one
_PREFIX_ID = re.compile(rb'\s*\{[^{}\[\]]*?"custom_id"\s*:\s*"((?:[0-9a-fA-F]{2})+)"')


_PREFIX = 4096


def bounded_lines(f: Any, cap: int) -> Iterator[bytes | Oversized]:
    """The lines of a binary file, each read in pieces of at most ``cap`` bytes: a longer line comes as an
    ``Oversized`` (its first bytes and its size), so that a 400 MB line never takes 400 MB of memory.

    Example:
        >>> import io
        >>> [x if isinstance(x, bytes) else x.size for x in bounded_lines(io.BytesIO(b"ab\\n" + b"c" * 9 + b"\\n"), 4)]
        [b'ab\\n', 10]
    """
    while raw := f.readline(cap + 1):
        if len(raw) <= cap or raw.endswith(b"\n"):
            yield raw
            continue
        prefix, size = raw[:_PREFIX], len(raw)
        while not raw.endswith(b"\n") and (raw := f.readline(cap + 1)):
            size += len(raw)
        yield Oversized(prefix, size)


def parse_line(raw: bytes | Oversized) -> tuple[bytes, dict | Oversized] | None:
    """(request key, the line's object) of an output line; None for one that is none (not JSON, not an object,
    no custom_id that is a key in hex). A line too long to parse is kept (a failed try) if its custom_id shows."""
    if isinstance(raw, Oversized):
        m = _PREFIX_ID.match(raw.prefix)
        return (bytes.fromhex(m[1].decode()), raw) if m else None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    cid = doc.get("custom_id") if isinstance(doc, dict) else None
    if not isinstance(cid, str) or not _CUSTOM_ID.fullmatch(cid):
        return None
    return bytes.fromhex(cid), doc


def refuse_requests_file(f: Any, path: Path, cap: int) -> None:
    """A ConfigError where the file's first line is a request (the export's file given in place of the output):
    read as output, each of its lines would count as a failed try of its request."""
    first = next((raw for raw in bounded_lines(f, cap) if not isinstance(raw, bytes) or raw.strip()), b"")
    f.seek(0)
    if not isinstance(first, bytes):
        return
    try:
        doc = orjson.loads(first)
    except orjson.JSONDecodeError:
        return
    if isinstance(doc, dict) and "body" in doc and "method" in doc and "response" not in doc:
        raise ConfigError(
            f"{path.name} holds requests (custom_id, method, url, body), not a runner's output: give the JSONL the "
            "runner wrote (-o of vllm run-batch), whose lines carry a `response`"
        )


def stop_content(body: dict) -> str | None:
    if "choices" not in body and "content" in body:  # an Anthropic Message
        parsed = anthropic.reply(body)
        if isinstance(parsed, str) or parsed[1] != "stop" or parsed[0] is None:
            return None
        return scrub_registered(parsed[0])
    try:
        choice = body["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    ok = isinstance(content, str) and choice.get("finish_reason") == "stop"
    return scrub_registered(content) if ok else None


def line_failure(status: Any, body: Any, error: Any) -> tuple[str, str]:
    """(kind, message) of a line that failed inside a batch."""
    if isinstance(error, dict):
        return ErrorKind.BATCH_FAILED, scrub(f"the batch line failed: {error.get('code')}: {error.get('message')}")
    msg = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        msg = str(body["error"].get("message", ""))
    if isinstance(status, int) and status != 200:
        return http_kind(status), scrub(f"the batch line got HTTP {status}: {msg}".rstrip(": "))
    return ErrorKind.BATCH_FAILED, "the batch line holds no chat completion"
