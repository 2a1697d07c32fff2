"""The retry policy: what a failed attempt leads to, read from the server's reply.

:func:`classify` is the one table (an error kind, or the class of an HTTP status -> a :class:`Decision`);
``Retry-After`` and OpenAI-style error bodies are read here, and request deadlines kept by one sweeping task
(:class:`Deadlines`). Time comes from a :class:`Clock`, so that tests can make it jump. The client that applies
the policy is :class:`~hf_judge.transport.client.JudgeClient`.
"""

from __future__ import annotations

import asyncio
import email.utils
import enum
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import orjson

from ..errors import ErrorKind
from ..redact import scrub

# 429 codes (OpenAI's; Anthropic's 402 billing_error) that mean the account cannot pay: retrying never helps.
QUOTA_CODES = {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "billing_error"}
# Statuses with which a server may refuse response_format json_schema (see _schema_rejected).
SCHEMA_STATUSES = frozenset({400, 422, 500, 501})


class Decision(enum.Enum):
    """What a failed attempt leads to."""

    RETRY = "retry"  # transient: wait, then send it again
    RETRY_HOTTER = "retry_hotter"  # an invalid reply: send it again at a higher temperature (seed 004)
    GIVE_UP = "give_up"  # permanent: the row gets an errors entry
    STOP = "stop"  # fatal: the run stops, keeping what is finished


# The decision for each error kind that is not an HTTP status (those go by class: see classify).
RETRY_POLICY: dict[str, Decision] = {
    ErrorKind.INVALID_JSON: Decision.RETRY_HOTTER,
    ErrorKind.SCHEMA: Decision.RETRY_HOTTER,
    ErrorKind.OUT_OF_RANGE: Decision.RETRY_HOTTER,
    ErrorKind.TRUNCATED: Decision.RETRY_HOTTER,
    ErrorKind.EMPTY: Decision.RETRY_HOTTER,
    ErrorKind.UNPARSEABLE: Decision.RETRY_HOTTER,
    ErrorKind.CONTENT_FILTER: Decision.GIVE_UP,
    ErrorKind.BAD_RESPONSE: Decision.RETRY,
    ErrorKind.TIMEOUT: Decision.RETRY,
    ErrorKind.CONNECTION: Decision.RETRY,
    # never sent: nothing a retry could change
    ErrorKind.NULL_INPUT: Decision.GIVE_UP,
    ErrorKind.BAD_IMAGE: Decision.GIVE_UP,
    ErrorKind.INPUT_TOO_LONG: Decision.GIVE_UP,
    ErrorKind.CONTEXT_LENGTH: Decision.GIVE_UP,
    ErrorKind.TEMPLATE: Decision.GIVE_UP,
    # batch mode resubmits these itself (batch.py), up to ``retries``; an online attempt never ends with one
    ErrorKind.BATCH_FAILED: Decision.RETRY,
    ErrorKind.BATCH_EXPIRED: Decision.RETRY,
    ErrorKind.BATCH_CANCELLED: Decision.RETRY,
    ErrorKind.BATCH_MISSING: Decision.GIVE_UP,
    # the run's budget was used up before it was sent: a later run with a higher budget sends it
    ErrorKind.BUDGET: Decision.GIVE_UP,
}
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})  # and every 5xx
FATAL_STATUS = frozenset({401, 403, 404})  # the key, the model name or the base URL is wrong


def classify(failure: int | str) -> Decision:
    """The decision for a failed attempt: its HTTP status (an int), or its error kind.

    Example:
        >>> [classify(f).name for f in (503, 400, 401, "schema", "content_filter")]
        ['RETRY', 'GIVE_UP', 'STOP', 'RETRY_HOTTER', 'GIVE_UP']
    """
    if isinstance(failure, int):
        if failure in FATAL_STATUS:
            return Decision.STOP
        if failure in TRANSIENT_STATUS or failure >= 500:
            return Decision.RETRY
        return Decision.GIVE_UP
    return RETRY_POLICY.get(failure, Decision.GIVE_UP)


class Clock(Protocol):
    """Where the client reads time, sleeps and draws jitter (see :class:`SystemClock`)."""

    def now(self) -> float: ...  # monotonic seconds
    async def sleep(self, seconds: float) -> None: ...
    def wall(self) -> float: ...  # seconds since the epoch, for Retry-After dates
    def jitter(self, low: float, high: float) -> float: ...  # a uniform draw


class SystemClock:
    """The real clock: ``time.monotonic``, ``asyncio.sleep``, ``time.time``, ``random.uniform``."""

    now = staticmethod(time.monotonic)
    sleep = staticmethod(asyncio.sleep)
    wall = staticmethod(time.time)
    jitter = staticmethod(random.uniform)


SYSTEM_CLOCK = SystemClock()


def parse_retry_after(headers: Mapping[str, str], wall: Callable[[], float] = time.time) -> float | None:
    """Seconds the server asks us to wait, uncapped (``inf`` stays ``inf``); None when absent or unusable.

    ``wall``: the current time since the epoch, for a Retry-After that is an HTTP date. A negative or NaN delay,
    or a date already past, says nothing we can act on (a retry at once would fail the row within a second of a
    broken server's replies): it is None, and the client backs off as it would without one.

    >>> parse_retry_after({"retry-after": "2"}), parse_retry_after({"retry-after": "-5"})
    (2.0, None)
    """
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms) / 1000
        except ValueError:
            v = math.nan
        if v >= 0:  # False for NaN and negatives: fall through to Retry-After, then to the backoff
            return v
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        v = float(ra)
    except ValueError:
        try:
            v = email.utils.parsedate_to_datetime(ra).timestamp() - wall()
        except (TypeError, ValueError, OverflowError):
            return None
    return v if v >= 0 else None


def error_code(raw: bytes) -> str | None:
    """The quota/billing code of an OpenAI-style error body (``error.code`` or ``error.type``), if any."""
    try:
        err = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    e = err.get("error", err) if isinstance(err, dict) else None
    if not isinstance(e, dict):
        return None
    for key in ("code", "type"):
        if isinstance(e.get(key), str) and e[key] in QUOTA_CODES:
            return e[key]
    return None


def error_message(status: int, raw: bytes) -> str:
    try:
        err = orjson.loads(raw)
        if isinstance(err, dict):
            e = err.get("error", err)
            msg = e.get("message") if isinstance(e, dict) else e
            if msg:
                return scrub(str(msg))[:500]
    except orjson.JSONDecodeError:
        pass
    return scrub(raw[:300].decode("utf-8", "replace")) or f"HTTP {status}"


class Deadlines:
    """Request timeouts, enforced by one sweeping task instead of a timer per request.

    aiohttp's own total timeout arms a timer and builds two helper objects for
    every request: about a tenth of the client's CPU at thousands of requests a
    second (bench/, scenario c). Here a request enters its deadline in an
    insertion-ordered dict (every request has the same timeout, so insertion
    order is deadline order) and one task, waking four times per timeout,
    cancels the overdue ones. A request overruns its timeout by at most a
    quarter of it, and by at most 0.5 s. Deadlines are ``clock.now()`` times.
    """

    def __init__(self, timeout: float, clock: Clock = SYSTEM_CLOCK):
        self.timeout = timeout
        self.period = min(0.5, timeout / 4)
        self.due: dict[asyncio.Task, float] = {}
        self.expired: set[asyncio.Task] = set()
        self._sweeper: asyncio.Task | None = None
        self.clock = clock
        self.now = clock.now

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweep(self) -> None:
        due = self.due
        sleep = self.clock.sleep
        while True:
            await sleep(self.period)
            now = self.now()
            late = []
            for task, when in due.items():
                if when > now:
                    break
                late.append(task)
            for task in late:
                del due[task]
                self.expired.add(task)
                task.cancel()

    def timed_out(self, task: asyncio.Task) -> bool:
        """After a CancelledError: whether it was this task's deadline (then the cancel is undone)."""
        if task not in self.expired:
            return False
        self.expired.discard(task)
        # Python 3.11+: undo our cancel; if the run cancelled the task as well
        # (stopping), that one stands and the CancelledError goes on.
        return not hasattr(task, "uncancel") or task.uncancel() == 0


def not_found_hint(model: str, provider: str) -> str:
    """The next step after a 404: a Claude or Gemini model asked through OpenAI's API (at a base URL, where no
    provider is inferred) needs its provider; anything else, the model name or the base URL.

    Example:
        >>> print(not_found_hint("claude-haiku-4-5", "openai").split(": ")[1])
        add --provider anthropic (Anthropic's Messages API; provider="anthropic" in Python), or drop --base-url ...
    """
    name = model.lower()
    if provider == "openai" and name.startswith("claude"):
        return (
            f"{model!r} is an Anthropic model, asked here through OpenAI's chat completions API: add --provider "
            'anthropic (Anthropic\'s Messages API; provider="anthropic" in Python), or drop --base-url for '
            "Anthropic's own server."
        )
    if provider == "openai" and name.startswith("gemini"):
        return (
            f"{model!r} is a Gemini model, asked here at a base URL that is not Google's: add --provider gemini and "
            'drop --base-url for Google\'s endpoint (provider="gemini" in Python), or give a base URL that serves '
            "Gemini through OpenAI's API (Google's ends in /v1beta/openai)."
        )
    return f"Check the model name ({model!r}) and the base URL (it usually ends in /v1)."
