"""Exceptions raised by hf_judge.

```
HfJudgeError
├── ConfigError              bad input, found before any request is sent (CLI exit 2)
│   ├── UnknownMetricError   no prompt file of that name
│   ├── PromptFileError      a prompt file whose front matter or outputs are malformed
│   ├── TemplateError        a template that fails to compile or render (undefined variable, sandbox)
│   ├── MissingColumnError   a template variable with no column to read it from
│   └── OutputExistsError    the output folder holds a different result (CLI: --overwrite)
├── HubUnreachableError      no connection to the Hub to load the input; also a ConnectionError (CLI exit 1)
├── ReplyError               a judge reply that cannot be accepted; ``kind`` names why (an ErrorKind)
└── RunStopped               the run stopped early; every finished reply is kept (CLI exit 1)
    ├── AuthenticationError  the server refused the key (401/403)
    ├── ModelNotFoundError   the model or the endpoint does not exist (404)
    ├── CircuitOpenError     most recent requests failed
    ├── BudgetExceededError  ``max_total_tokens`` reached (``result``: what was paid, as a result)
    │   └── CostExceededError  ``max_cost`` reached
    ├── ServerUnreachableError  no connection to the server before any reply
    ├── QuotaExceededError   the account's quota or billing limit is used up (429 insufficient_quota)
    ├── RateLimitedError     nothing but 429 for ``max_throttle_s``
    ├── BatchesPending       batches are still running at the provider (--no-wait); run again to collect
    ├── CacheError           the cache cannot be opened or written; it is left as it is
    │   ├── CacheLockedError another process holds the reply store's write lock
    │   └── DiskFullError    no space left where the cache is written
    ├── WorkerDiedError      a worker process of ``num_workers`` died (kill -9, out of memory)
    └── InterruptedRun       Ctrl-C or SIGTERM
        └── PushInterrupted  Ctrl-C stopped a push to the Hub; the message says what reached the repo
```

Every message names the problem and the next step. None of them ever holds a
secret: keys are scrubbed by :func:`hf_judge.redact.scrub` before a message is
built from a server's reply.

:class:`ErrorKind` is the vocabulary of the ``kind`` column of the ``errors``
split; an HTTP failure's kind is ``http_<status>`` (:func:`http_kind`).
"""

from __future__ import annotations

import enum
import sys
from typing import Any

if sys.version_info >= (3, 11):
    StrEnum = enum.StrEnum
else:  # pragma: no cover - Python 3.10: the same behaviour, spelled out

    class StrEnum(str, enum.Enum):
        """A str whose members print and format as their value (``enum.StrEnum`` of Python 3.11)."""

        def __str__(self) -> str:
            return str.__str__(self)


class ErrorKind(StrEnum):
    """Why a request ended without a score: the ``kind`` of an ``errors`` row.

    A ``str`` enum: a member is equal to, hashes like, and is written to Arrow
    and JSON as its value, so the errors split reads ``"schema"`` as it always did.
    """

    # the reply came but cannot be accepted (validate.py)
    INVALID_JSON = "invalid_json"  # the reply is not valid JSON
    SCHEMA = "schema"  # not exactly the declared keys, or a value of the wrong type (7.9 for an integer)
    OUT_OF_RANGE = "out_of_range"  # a value outside its declared range or choices
    TRUNCATED = "truncated"  # the reply was cut off (finish_reason `length`)
    EMPTY = "empty"  # the reply has no content
    UNPARSEABLE = "unparseable"  # a free-text judge's reply holds no verdict or scores in its form
    CONTENT_FILTER = "content_filter"  # the provider withheld the reply (finish_reason `content_filter`)
    # the exchange failed (client.py)
    BAD_RESPONSE = "bad_response"  # the server's answer is not a chat completion (or a batch line is unreadable)
    TIMEOUT = "timeout"  # every attempt ran past the request timeout
    CONNECTION = "connection"  # the server could not be reached, on every attempt
    # nothing was sent for the row (pipeline.py)
    NULL_INPUT = "null_input"  # a column the prompt needs is null in the row
    BAD_IMAGE = "bad_image"  # an image column's value could not be read as an image
    INPUT_TOO_LONG = "input_too_long"  # the row's input is longer than max_input_chars
    CONTEXT_LENGTH = "context_length"  # the prompt, in the model's tokens, leaves no room in its context (vLLM)
    TEMPLATE = "template"  # the prompt template failed to render for the row
    # a batch did not bring the reply back (batch.py)
    BATCH_FAILED = "batch_failed"  # the line failed inside the batch, or the whole batch failed validation
    BATCH_EXPIRED = "batch_expired"  # the batch's completion window ended before the line ran
    BATCH_CANCELLED = "batch_cancelled"  # the batch was cancelled before the line ran
    BATCH_MISSING = "batch_missing"  # an imported output file holds no line for the request
    # the run stopped at its budget (pipeline.py)
    BUDGET = "budget"  # max_cost or max_total_tokens was used up before the request was sent: a rerun sends it


def http_kind(status: int) -> str:
    """The errors-split kind of a request that ended with HTTP ``status``.

    Example:
        >>> http_kind(503)
        'http_503'
    """
    return f"http_{status}"


class HfJudgeError(Exception):
    """Base class of every error hf_judge raises on purpose."""


class ConfigError(HfJudgeError, ValueError):
    """Bad input found before any request was sent."""


class UnknownMetricError(ConfigError):
    """No built-in or user prompt file has that name."""


class PromptFileError(ConfigError):
    """A prompt file's front matter or output declaration is malformed."""


class TemplateError(ConfigError):
    """A template failed to compile or render."""


class MissingColumnError(ConfigError):
    """A template variable has no column to read it from."""


class OutputExistsError(ConfigError):
    """The output folder already holds a result that this one would not contain (CLI: ``--overwrite``)."""


class HubUnreachableError(HfJudgeError, ConnectionError):
    """The input is a Hub dataset and the Hub cannot be reached (no network, ``HF_HUB_OFFLINE``); nothing was sent."""


class ReplyError(HfJudgeError, ValueError):
    """A judge reply that cannot be accepted; ``kind`` is its errors-split kind (an :class:`ErrorKind`).

    Raised by :func:`hf_judge.parse_binary_verdict` and :func:`hf_judge.parse_pair_scores`.
    """

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class RunStopped(HfJudgeError):
    """The run stopped before the end. Everything finished is cached: run the same call again to resume."""


class JudgeEngineDeadError(RunStopped):
    """The judge's inference engine died (vLLM's 500 ``EngineCore encountered an issue``): nothing more can be
    judged there, so the run stops rather than file every row as an error."""


class AuthenticationError(RunStopped):
    """The server answered 401 or 403."""


class ModelNotFoundError(RunStopped):
    """The server answered 404: wrong model name or base URL."""


class CircuitOpenError(RunStopped):
    """Most of the recent requests failed."""


class BudgetExceededError(RunStopped):
    """The ``max_total_tokens`` budget was reached (in batch mode: a batch's projected tokens would pass it).

    ``result``: where the run went on to the end without sending (``score_dataset`` on a ``Dataset``, in one process,
    workers or batch mode), the result it paid for: the rows scored, the others null, each (row, metric) not sent an
    ``errors`` row of kind ``budget``, its summary's ``stopped`` saying why. The CLI saves it; the same call with a
    higher budget completes it, paying only for what was not paid. None where the run kept nothing of its own.
    """

    result: Any = None


class CostExceededError(BudgetExceededError):
    """The ``max_cost`` budget was reached: the run's reported usage costs that much at the model's price (or,
    in batch mode, a batch's projected cost would take the run past it: the batch is not submitted)."""


class ServerUnreachableError(RunStopped):
    """Every attempt of the first requests failed to connect (refused, unknown host), before any reply."""


class QuotaExceededError(RunStopped):
    """The server answered 429 with a quota or billing code (``insufficient_quota``): retrying cannot help."""


class RateLimitedError(RunStopped):
    """Every request was answered 429 for ``max_throttle_s`` seconds."""


class BatchesPending(RunStopped):
    """Batch mode left batches running at the provider (``no_wait``, or stopped while waiting).

    Their ids are in the reply store: run the same call again to collect them; nothing is submitted twice.
    """


class CacheError(RunStopped):
    """The cache (reply store or results folder) could not be opened or written; it is left as it is."""


class CacheLockedError(CacheError):
    """Another process held the reply store's write lock for longer than the wait allowed."""


class DiskFullError(CacheError):
    """No space was left on the disk that holds the cache. The message names the path and the space needed."""


class WorkerDiedError(RunStopped):
    """A worker process of ``num_workers`` died; what the workers received is saved for the next run."""


class InterruptedRun(RunStopped, KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped the run."""


class PushInterrupted(InterruptedRun):
    """Ctrl-C (or SIGTERM) stopped a push to the Hub: the message says which of its steps reached the repo and
    which did not. Nothing is sent to the Hub after it (see ``hf_judge.results.stoppable``)."""
