"""The transport: one aiohttp session to an OpenAI-compatible server (or, with ``provider="anthropic"``, to
Anthropic's Messages API: the body and the reply are :mod:`.anthropic`'s, everything else is the same).

What is retried and what is not is decided once, by :func:`~.policy.classify`
(a table keyed by error kind, and the class of an HTTP status):

* transient, retried with backoff: 429, 408, 409, 5xx, timeouts, connection
  errors, a 200 whose body is not a completion, and invalid replies (bad JSON,
  wrong keys, out of range, truncated, empty). Invalid replies also raise the
  temperature (doubling, capped at 1.0), as seed 004 asks.
* permanent, straight to ``errors``: 400 (context length and the like), 422,
  other 4xx, ``content_filter``.
* fatal, the run stops at once keeping what is finished: 401/403 (key),
  404 (model name or base URL), a 429 that says the quota or billing limit
  is used up, and nothing but 429 for ``max_throttle_s``.

A server cannot stall or swamp a run: a ``Retry-After`` wait is capped at ``backoff_max`` (a negative or NaN one is
ignored for the backoff), a reply body over ``max_reply_bytes`` (compressed or not) is cut off as ``bad_response``,
and a reply of any shape ends as a reply or an error row, never as an exception.

Structured output is negotiated once per client: requests go out with ``response_format={"type": "json_schema",
...}``; if the server rejects that before any such request has succeeded, the client switches to ``{"type":
"json_object", "schema": ...}`` (llama.cpp's form) for good and says so in the summary.

Two seams make the timing testable without waiting: ``clock`` (monotonic time, sleeps, wall time for HTTP dates, the
jitter of backoff; :class:`~.policy.SystemClock` by default) and ``transport`` (``await transport(body) -> (status,
headers, body)``; one aiohttp POST by default). tests/test_client_unit.py drives :meth:`JudgeClient.call` with a
scripted server and a clock that jumps.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import weakref
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from .. import constants
from ..errors import (
    AuthenticationError,
    BudgetExceededError,
    CircuitOpenError,
    ErrorKind,
    JudgeEngineDeadError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitedError,
    RunStopped,
    ServerUnreachableError,
    http_kind,
)
from ..judging import logprobs
from ..judging.images import prompt_tokens_estimate
from ..judging.metrics import Metric
from ..judging.validate import ReplyError, parse_reply
from ..redact import register, scrub, scrub_registered
from ..settings import Settings, resolved_provider
from . import anthropic
from .budget import CostBudget, Meter, reported_tokens, stop_error
from .endpoint import check_api_key, connection_message, parse_endpoint
from .latency import latency_bin
from .limits import AdaptiveLimiter
from .policy import (
    SCHEMA_STATUSES,
    SYSTEM_CLOCK,
    Clock,
    Deadlines,
    Decision,
    classify,
    error_code,
    error_message,
    not_found_hint,
    parse_retry_after,
)
from .prices import no_price_error, price_of
from .reading import ReplyTooLarge, read_limited
from .served import context_refusal, context_refused, engine_dead, served_model, served_price

logger = logging.getLogger("hf_judge")

# ``await transport(body)`` -> (HTTP status, headers (case-insensitive, or lower-case keys), reply body).
# It raises aiohttp.ClientError (connection), asyncio.TimeoutError, or ReplyTooLarge.
Transport = Callable[[bytes], Awaitable[tuple[int, Mapping[str, str], bytes]]]


@dataclass
class Outcome:
    """The end of one request: a validated reply, or an error with its kind."""

    value: dict[str, Any] | None
    raw: str | None
    kind: ErrorKind | str | None = None  # an ErrorKind, or http_<status>
    message: str | None = None
    attempts: int = 0
    cached: bool = False
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens of this reply, where the server reports them
    extra: list[Outcome] | None = None  # a request for n > 1 choices (repeated samples): the reply's other ones
    choices: int = 0  # and how many it held
    logprobs: dict[str, Any] | None = None  # each valid score value's probability; None: the server sent none


@dataclass
class Stats:
    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    shared: int = 0  # requests not sent: an identical request of this run was (its reply is reused)
    capped_waits: int = 0  # Retry-After waits cut to backoff_max
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the server served from its prompt cache (usage.prompt_tokens_details)
    cache_write_tokens: int = 0  # prompt tokens written to the prompt cache (Anthropic's cache_creation_input_tokens)
    failures: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    structured_output: str = "json_schema"
    notes: list[str] = field(default_factory=list)
    no_logprobs: int = 0  # replies without the token log-probabilities that logprobs=True asked for
    unplaced_logprobs: int = 0  # replies with them, but a score's value not found among the tokens
    replayed: int = 0  # of the cache hits, invalid replies an earlier run kept (store/failures.py): no request sent
    latency: Counter = field(default_factory=Counter)  # seconds of each answered request, binned (latency.py)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _text_of(content: Any) -> str | None:
    """``message.content`` given as a list of text parts (``[{"type": "text", "text": ...}]``), joined; else None."""
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type", "text") != "text" or not isinstance(part.get("text"), str):
            return None
        texts.append(part["text"])
    return "".join(texts)


class JudgeClient:
    """Sends chat-completion requests for metrics; bounded, retried, validated.

    ``base_url`` may carry a query string (kept on every request) or
    ``user:password@`` (sent as HTTP Basic auth, when no ``api_key`` is given);
    neither is ever shown: :attr:`base_url` is the URL without them.
    """

    # Whether finished replies are kept (from use_cache): a stop message must not promise a resume it cannot give.
    caching: bool = True
    # The last failure to connect (refused, no such host; not a reset: the server is there), for the message when
    # the server was never reached; and the last connection failure of any kind, for the circuit breaker's.
    _connect_error: str | None = None
    _last_connection_failure: str | None = None
    # Whether the server answers a request for n choices with n (repeated samples; the pipeline finds out)
    n_choices: bool | None = None

    def __init__(
        self,
        settings: Settings,
        *,
        api_key: str | None,
        circuit_window: int = 200,
        circuit_threshold: float = 0.5,
        extra_headers: dict[str, str] | None = None,
        clock: Clock | None = None,
        transport: Transport | None = None,
    ):
        """``clock`` and ``transport`` replace the real time and the aiohttp POST (tests; see the module docstring)."""
        check_api_key(api_key)
        self._clock = clock = clock or SYSTEM_CLOCK
        self._now = clock.now
        self._transport: Transport = transport or self._post
        self._own_transport = transport is None
        self.provider = provider = resolved_provider(settings)
        # the provider's own wire (body, reply), or None: OpenAI's chat completions, inline below
        self.wire = (
            anthropic.AnthropicWire(settings.model, max_tokens=settings.max_tokens) if provider == "anthropic" else None
        )
        if self.wire is not None:
            anthropic.check_settings(settings)
        base_url = settings.base_url or constants.default_base_url(provider)
        # parsed once, not per request
        route = "/chat/completions" if self.wire is None else self.wire.route
        self._url, self.base_url, self.server_id, auth = parse_endpoint(base_url, api_key, route)
        self.url = self.base_url + "/chat/completions" if self.wire is None else str(self._url.with_query(None))
        if provider != "openai":
            # another API answers the same metric and row another way: its replies are keyed apart (the
            # OpenAI-compatible servers' keys stay what they were)
            self.server_id = f"{provider}:{self.server_id}"
        # a vLLM server hf-judge started: its replies are keyed by the model it serves, not by the port it got
        self.served = served_model(self.base_url) if self.wire is None else None
        self.server_id = self.served["identity"] if self.served else self.server_id
        self.settings = settings
        self.model = settings.model.removeprefix("vllm:")  # a vLLM server at a base_url given: its served name
        self.timeout = settings.timeout
        self.retries = settings.retries
        self.top_p = settings.top_p
        self.max_tokens = settings.max_tokens
        # Whether a reply key (see reply_key) differs from the key of the whole body: then a lookup tries both.
        self.strict_fallback = settings.reuse == "compatible" and settings.max_tokens is not None
        self.backoff_base = settings.backoff_base
        self.backoff_max = settings.backoff_max
        self.max_total_tokens = settings.max_total_tokens
        self.budget_peers: list[JudgeClient] = [self]  # the clients whose tokens max_total_tokens counts (a panel)
        self.max_cost = settings.max_cost
        # Of the stats' tokens, those of batch lines (batch.Reader): spent() prices them at the batch price.
        self.batch_tokens = [0, 0]
        # The model's price (None: not in the table): what max_cost and the summary's cost are counted at.
        self.price = price_of(settings.model, settings.prices, self.provider)
        self.price = self.price or served_price(self.served)  # a vLLM judge hf-judge runs: its engine time, not tokens
        if self.max_cost is not None and self.price is None:
            raise no_price_error(settings.model, f"max_cost={self.max_cost:g}")
        # max_cost's account, shared by a panel's judges (judge_panel); None: no budget, nothing on the hot path
        self.budget = None if self.max_cost is None else CostBudget(self.max_cost, self._peers_spent)
        # the reply tokens a server cannot pass: max_tokens, or what the Anthropic wire always sends
        self.meter = Meter(settings.max_tokens if self.wire is None else self.wire.max_tokens)
        self.limiter = AdaptiveLimiter(settings.concurrency, now=clock.now)
        self.stats = Stats()
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            register(api_key)
            self._headers["Authorization"] = f"Bearer {api_key}"
        if self.wire is not None:  # Anthropic: x-api-key and the API version, no Bearer
            self._headers.pop("Authorization", None)
            self._headers.update(anthropic.headers(api_key))
            self.n_choices = False  # no `n`: repeated samples are requests of their own
        if auth is not None:
            self._headers["Authorization"] = auth
        self._headers.update(extra_headers or {})
        self._mode = "json_schema"
        self._schema_ok = False
        # Keyed by the metric object itself, weakly: a key of id(metric) outlived its metric where one client serves
        # many copies of a job (a Ray worker unpickles the Judge per task): a later one at the address got its schema.
        self._rf_cache: weakref.WeakKeyDictionary[Metric, dict[str, dict]] = weakref.WeakKeyDictionary()
        self._recent: deque[bool] = deque(maxlen=circuit_window)
        self._recent_failures = 0
        self._circuit_threshold = circuit_threshold
        self._rpm = self._tpm = None
        rpm, tpm = settings.max_requests_per_minute, settings.max_tokens_per_minute
        if rpm or tpm:
            from aiolimiter import AsyncLimiter

            # per-second buckets: a minute's quota is not spent in one burst
            if rpm:
                self._rpm = AsyncLimiter(max(1.0, rpm / 60), 1)
            if tpm:
                self._tpm = AsyncLimiter(max(1.0, tpm / 60), 1)
        self._key_prefix = hashlib.blake2b(self.server_id.encode() + b"\0", digest_size=16)
        self._session: aiohttp.ClientSession | None = None
        self._deadlines = Deadlines(settings.timeout, clock)
        self.stopped: RunStopped | None = None
        self.max_reply_bytes = settings.max_reply_bytes
        self.max_throttle_s = settings.max_throttle_s
        self._through_at = clock.now()  # when an attempt last ended other than in a 429

    async def open(self) -> None:
        self._deadlines.start()
        self._through_at = self._clock.now()
        if not self._own_transport:
            return
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),  # see Deadlines
            headers=self._headers,
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def close(self) -> None:
        self._deadlines.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- request building ------------------------------------------------
    def response_format(self, metric: Metric, mode: str | None = None) -> dict:
        mode = mode or self._mode
        by_mode = self._rf_cache.get(metric)
        if by_mode is None:
            by_mode = self._rf_cache[metric] = {}
        rf = by_mode.get(mode)
        if rf is None:
            if mode == "json_schema":
                rf = {
                    "type": "json_schema",
                    "json_schema": {"name": metric.schema_name, "schema": metric.json_schema, "strict": True},
                }
            else:
                rf = {"type": "json_object", "schema": metric.json_schema}
            by_mode[mode] = rf
        return rf

    def body(
        self,
        metric: Metric,
        messages: list,
        temperature: float,
        mode: str | None = None,
        n: int = 1,
        *,
        max_tokens: bool = True,
    ) -> bytes:
        """The request body; ``max_tokens=False`` leaves the max_tokens setting out (the body a reply key hashes)."""
        if self.wire is not None:
            return self.wire.body(metric, messages, temperature, mode or self._mode, max_tokens=max_tokens)
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature}
        if self.top_p is not None:
            payload["top_p"] = self.top_p
        if self.max_tokens is not None and max_tokens:
            payload["max_tokens"] = self.max_tokens
        if n > 1:
            payload["n"] = n
        if self.settings.logprobs:  # only then: the default bodies, and so the cache keys, stay what they were
            payload.update(logprobs.request_fields(metric, self.settings.top_logprobs))
        payload["response_format"] = self.response_format(metric, mode)
        return orjson.dumps(payload)

    def request_key(self, body: bytes) -> bytes:
        """A hash of a request body and the server it goes to: the cache key of ``body`` as it is."""
        h = self._key_prefix.copy()
        h.update(body)
        return h.digest()

    def reply_key(self, metric: Metric, messages: list, temperature: float, body: bytes) -> bytes:
        """The reply store's key of a request whose canonical (json_schema) body is ``body``.

        ``reuse="compatible"`` keys a reply on what decides it (model, messages, schema, server,
        temperature, top_p) and leaves max_tokens out, so raising it reuses every cached reply; without
        max_tokens, as in the default run, that is the key of the whole body, as it always was.
        ``reuse="strict"`` keys on the whole body. Replies stored under a whole body's key before
        compatible reuse existed are found too (see :attr:`strict_fallback`).
        """
        if self.strict_fallback:
            return self.request_key(self.body(metric, messages, temperature, "json_schema", max_tokens=False))
        return self.request_key(body)

    def reply_fits(self, usage: tuple[int, int] | None) -> bool:
        """Whether a cached reply of ``usage`` tokens could have come back under this run's max_tokens.

        A reply that took more completion tokens than max_tokens allows would have been cut off, so it is
        asked again; one whose usage the server did not report is taken as it is.
        """
        return usage is None or self.max_tokens is None or usage[1] <= self.max_tokens

    # -- the call ------------------------------------------------------------
    def resume_hint(self) -> str:
        """The next step after a stop, true to whether replies are cached."""
        if self.caching:
            return "run the same command again: finished rows are cached."
        return "run again; with the cache off (use_cache=False, --no-cache) nothing of this run was kept."

    def _unreachable(self) -> None:
        """Stop the run when nothing has ever answered and connections fail: a wrong URL or a server that is down."""
        if not self.stats.statuses and self._connect_error is not None:
            raise ServerUnreachableError(
                f"cannot reach the server: {self._connect_error}. Check the base URL and that the server is running."
            )

    def _record(self, ok: bool) -> None:
        recent = self._recent
        if len(recent) == recent.maxlen and not recent[0]:
            self._recent_failures -= 1
        recent.append(ok)
        if not ok:
            self._recent_failures += 1
            if len(recent) == recent.maxlen and self._recent_failures >= self._circuit_threshold * len(recent):
                self._unreachable()
                failure = self._last_connection_failure
                last = f" The last connection failure: {failure}." if failure else ""
                raise CircuitOpenError(
                    f"{self._recent_failures} of the last {len(recent)} requests failed "
                    f"({', '.join(f'{k}: {n}' for k, n in self.stats.failures.most_common(4))}).{last} "
                    f"Check the server, then {self.resume_hint()}"
                )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to sleep before the next attempt; never more than ``backoff_max``, whatever the server asks."""
        jitter = self._clock.jitter
        if retry_after is None:
            return jitter(0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))
        if retry_after > self.backoff_max:  # Retry-After: 3600, a date hours ahead, inf
            if not self.stats.capped_waits:  # said once, while it happens: the bar alone looks frozen
                logger.warning(
                    "the server asks to wait %g s before retrying (Retry-After); waiting backoff_max=%g s instead",
                    retry_after,
                    self.backoff_max,
                )
            self.stats.capped_waits += 1
            return self.backoff_max
        return min(self.backoff_max, retry_after + jitter(0, min(1.0, retry_after * 0.1 + 0.01)))

    async def call(
        self,
        metric: Metric,
        messages: list,
        temperature: float,
        *,
        have_slot: bool = False,
        body: bytes | None = None,
        n: int = 1,
    ) -> Outcome:
        """One request with its retries: attempts (:meth:`_attempt`) until one succeeds or :func:`classify` says stop.

        ``have_slot``: the caller already holds a limiter slot. ``body``: the
        canonical (json_schema, first-attempt) body, already serialised. ``n`` > 1
        asks for that many choices: the first decides as always, the others come
        back in ``Outcome.extra`` (those of the last attempt).
        """
        if self.served is not None and (refused := await self._refused(messages, have_slot)) is not None:
            return refused
        first_body, first_temperature, attempt = body, temperature, 0
        raw = None  # the last reply received: a later attempt that gets none keeps it in its errors row
        limiter = self.limiter
        stats = self.stats
        task = asyncio.current_task()
        assert task is not None  # call() is a coroutine, so it always runs in a task
        while True:
            if not have_slot:
                await limiter.acquire()
            have_slot = False
            try:
                # Checked before sending, not when a reply comes: the reply that reaches the budget, and those
                # already in flight, are paid for and kept; only what would be sent after them is not.
                self._check_budget()
            except RunStopped:
                limiter.release()
                raise
            attempt += 1
            if self._rpm is not None:
                await self._rpm.acquire()
            mode = self._mode
            if first_body is not None and n == 1 and mode == "json_schema" and temperature == first_temperature:
                body = first_body
            else:
                body = self.body(metric, messages, temperature, mode, n)
            budget, worst = self.budget, 0.0
            if budget is not None:
                worst = self.meter.worst_case(self.price, body, n)
                try:
                    await budget.admit(worst, self._cost_stop)
                except BaseException:
                    limiter.release()
                    raise
            if self._tpm is not None:
                tokens = prompt_tokens_estimate(body) + (self.max_tokens or 256)
                await self._tpm.acquire(min(self._tpm.max_rate, tokens))
            stats.requests += 1
            if attempt > 1:
                stats.retries += 1
            try:
                outcome, status, retry_after = await self._attempt(metric, body, task, n)
            finally:
                if budget is not None:  # its usage is counted now: the rest of its reservation goes back
                    budget.release(worst)
            if outcome.value is not None:
                if mode == "json_schema":
                    self._schema_ok = True
                outcome.attempts = attempt
                self._record(True)
                return outcome
            kind, message = outcome.kind, outcome.message
            assert kind is not None and message is not None  # a failed outcome always has both
            if status in SCHEMA_STATUSES and self._renegotiated(mode, status, message):
                attempt -= 1  # the server refused the request's form, not its content: not an attempt
                continue
            decision = classify(kind) if status in (0, 200) else classify(status)
            if decision is Decision.STOP:
                self._stop(status, message)
            if status:
                raw = outcome.raw
            else:
                outcome.raw = raw
            if status == 429:
                self._check_storm(message)
            stats.failures[str(kind)] += 1  # plain str keys: the summary is serialised by any JSON library
            logger.debug("attempt %d of %s failed: %s: %s", attempt, metric.name, kind, message)
            if status != 429:
                self._record(False)
            if decision is Decision.GIVE_UP or attempt > self.retries:
                if kind == ErrorKind.CONNECTION:
                    self._unreachable()
                outcome.attempts = attempt
                return outcome
            if decision is Decision.RETRY_HOTTER:
                temperature = min(
                    constants.MAX_ESCALATED_TEMPERATURE,
                    max(temperature * 2, constants.ESCALATION_FLOOR),
                )
            await self._clock.sleep(self._backoff(attempt, retry_after))

    async def _refused(self, messages: list, have_slot: bool) -> Outcome | None:
        """A managed vLLM judge's outcome, unsent: ``context_length`` for a prompt too long for it, ``connection``
        from a panel's vLLM judge whose turn is over (engine/vllm_turns.py: nothing listens); else None."""
        assert self.served is not None
        said = self.served.get("stopped")
        kind = ErrorKind.CONNECTION if said else ErrorKind.CONTEXT_LENGTH
        if not said and self._session:
            said = await context_refusal(self._session, self.base_url, self.model, messages, self.served)
        if not said:
            return None
        if have_slot:
            self.limiter.release()
        self.stats.failures[str(kind)] += 1
        return Outcome(None, None, kind, said)

    async def _attempt(
        self, metric: Metric, body: bytes, task: asyncio.Task, n: int = 1
    ) -> tuple[Outcome, int, float | None]:
        """Send ``body`` once, holding a limiter slot that it releases: (the outcome, the HTTP status or 0 when
        no reply came, the server's Retry-After). Raises on a 429 that says the quota is used up."""
        now = self._now
        deadlines = self._deadlines
        sent_at = now()
        deadlines.due[task] = sent_at + self.timeout
        retry_after = None
        try:
            status, headers, data = await self._transport(body)
        except ReplyTooLarge as e:
            if e.status != 200 and e.headers is not None:
                retry_after = parse_retry_after(e.headers, self._clock.wall)
            status, outcome = (
                0,
                Outcome(
                    None,
                    None,
                    ErrorKind.BAD_RESPONSE,
                    (
                        f"the reply (HTTP {e.status}) is larger than max_reply_bytes={self.max_reply_bytes:,} "
                        f"({e}); raise max_reply_bytes (--max-reply-bytes) if the server's replies are that big"
                    ),
                ),
            )
        except asyncio.CancelledError:
            if not deadlines.timed_out(task):
                raise
            status, outcome = 0, Outcome(None, None, ErrorKind.TIMEOUT, f"no reply within {self.timeout:g} s")
        except asyncio.TimeoutError:
            status, outcome = 0, Outcome(None, None, ErrorKind.TIMEOUT, f"no reply within {self.timeout:g} s")
        except aiohttp.ClientError as e:
            self._last_connection_failure = message = connection_message(e, self.url)
            if isinstance(e, aiohttp.ClientConnectorError):  # refused, no such host: never reached
                self._connect_error = message
            status, outcome = 0, Outcome(None, None, ErrorKind.CONNECTION, message)
        finally:
            deadlines.due.pop(task, None)
        if status != 429:
            self._through_at = now()
        if status == 200:
            self.limiter.release(sent_at=sent_at)
            self.stats.statuses[200] += 1
            self.stats.latency[latency_bin(now() - sent_at)] += 1
            outcome = self._handle_ok(metric, data, body, n)
            if n > 1:
                outcome.extra, outcome.choices = self._other_choices(metric, data)
            return outcome, 200, None
        if not status:
            self.limiter.release(sent_at=sent_at)
            return outcome, 0, retry_after
        self.stats.statuses[status] += 1
        self.limiter.release(throttled=status in (429, 529), sent_at=sent_at)  # 529: Anthropic's overloaded_error
        message = error_message(status, data)
        if status in (402, 429):  # 402: Anthropic's billing_error
            self._check_quota(data, message)
        if engine_dead(status, message):  # vLLM's engine is dead: no retry can help
            raise JudgeEngineDeadError(f"the judge's vLLM engine died (HTTP {status} from {self.url}: {message[:200]})")
        kind = ErrorKind.CONTEXT_LENGTH if self.served and context_refused(status, message) else http_kind(status)
        return Outcome(None, None, kind, message), status, parse_retry_after(headers, self._clock.wall)

    async def _post(self, body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """The default transport: one POST on the client's aiohttp session."""
        session = self._session
        assert session is not None, "JudgeClient.open() was not called"
        async with session.post(self._url, data=body) as resp:
            try:
                return resp.status, resp.headers, await read_limited(resp, self.max_reply_bytes)
            except ReplyTooLarge as e:
                resp.close()  # drop the connection rather than drain the rest
                e.status, e.headers = resp.status, resp.headers
                raise

    def _stop(self, status: int, message: str) -> None:
        """Raise the error that stops the run for a fatal status (:data:`FATAL_STATUS`)."""
        if status in (401, 403):
            raise AuthenticationError(
                f"the server at {self.base_url} refused the API key (HTTP {status}: {message}). "
                f"Check --api-key-env / {'ANTHROPIC' if self.wire else 'OPENAI'}_API_KEY and the base URL."
            )
        raise ModelNotFoundError(
            f"HTTP {status} from {self.url}: {message}. {not_found_hint(self.model, self.provider)}"
        )

    def _check_quota(self, data: bytes, message: str) -> None:
        """Stop on a 429 that says the account cannot pay: retrying never helps."""
        code = error_code(data)
        if code is not None:
            raise QuotaExceededError(
                f"the server at {self.base_url} says the account cannot pay for more requests (HTTP 429 {code}: "
                f"{message}). Add credit or raise the limit in the account's billing settings (or use another key), "
                "then run the same command again: finished rows are cached."
            )

    def _check_storm(self, message: str) -> None:
        """Stop when nothing but 429 has come back for ``max_throttle_s``: lowering the rate is the user's call."""
        quiet = self._clock.now() - self._through_at
        if quiet >= self.max_throttle_s:
            raise RateLimitedError(
                f"the server at {self.base_url} answered every request with 429 for {quiet:.0f} s "
                f"(max_throttle_s={self.max_throttle_s:g}): {message}. Lower --concurrency or set --rpm/--tpm under "
                "the account's limits, then run the same command again: finished rows are cached."
            )

    def _renegotiated(self, mode: str, status: int, message: str) -> bool:
        """Whether a request sent in ``mode`` was refused for its json_schema, before any json_schema request
        succeeded: then the client has switched to json_object and the request is to be sent again."""
        return mode == "json_schema" and not self._schema_ok and self._schema_rejected(status, message)

    def _schema_rejected(self, status: int, message: str) -> bool:
        """Switch to json_object + schema, once, when json_schema is refused."""
        text = message.lower()
        words = ("response_format", "json_schema", "schema", "structured", "grammar", "output_config", "output_format")
        if any(w in text for w in words):
            if self._mode == "json_schema":
                self._mode = "json_object"  # Anthropic: a forced tool call whose input schema is the metric's
                self.stats.structured_output = "json_object" if self.wire is None else "tool"
                note = (
                    f"server rejected response_format json_schema (HTTP {status}); "
                    "switched to json_object with the schema"
                    if self.wire is None
                    else f"server rejected output_config json_schema (HTTP {status}); switched to a forced tool call"
                )
                self.stats.notes.append(note)
                logger.warning(note)
            return True
        return False

    def _other_choices(self, metric: Metric, data: bytes) -> tuple[list[Outcome], int]:
        """The choices after the first of a reply to a request for n > 1, each validated (a failed one is an
        Outcome with its kind), and how many choices the reply held (1: the server ignored ``n``)."""
        try:
            choices = orjson.loads(data)["choices"]
            if not isinstance(choices, list):
                return [], 0
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return [], 0
        out = []
        for choice in choices[1:]:
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, str) and content is not None:
                content = _text_of(content)
            if isinstance(content, str):
                content = scrub_registered(content)
            try:
                value = parse_reply(metric, content, choice.get("finish_reason"))
                # each choice is a sample of its own: its own tokens, its own probability-weighted columns
                dists = None
                if self.settings.logprobs and logprobs.targets(metric):
                    dists = logprobs.distributions(metric, value, choice.get("logprobs"))
                out.append(Outcome(value, content, attempts=1, logprobs=dists))
            except ReplyError as e:
                out.append(Outcome(None, content, e.kind, e.message, attempts=1))
            except AttributeError:  # a choice that is not an object
                out.append(Outcome(None, None, ErrorKind.BAD_RESPONSE, "a choice of the reply is not an object"))
        return out, len(choices)

    def _handle_ok(self, metric: Metric, data: bytes, body: bytes | None = None, n: int = 1) -> Outcome:
        """The outcome of a 200 reply ``data`` to the request ``body`` (None: a batch line, whose request is not
        at hand) for ``n`` choices; its usage is counted in the stats."""
        if self.wire is not None:
            return self._handle_message(metric, data, body)
        try:
            doc = orjson.loads(data)
            choice = doc["choices"][0]
            content = choice["message"].get("content")
            finish = choice.get("finish_reason")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            return Outcome(
                None,
                scrub(data[:2000].decode("utf-8", "replace")),
                ErrorKind.BAD_RESPONSE,
                "the server's 200 reply is not a chat completion",
            )
        if not isinstance(content, str) and content is not None:
            content = _text_of(content)
            if content is None:
                return Outcome(
                    None,
                    scrub(data[:2000].decode("utf-8", "replace")),
                    ErrorKind.BAD_RESPONSE,
                    "the reply's message.content is neither a string nor a list of text parts",
                )
        if isinstance(content, str):  # a reply quoting the key must not carry it into the store or the columns
            content = scrub_registered(content)
        usage = doc.get("usage") if isinstance(doc, dict) else None
        tokens = reported_tokens(usage)
        if tokens is None:
            self._count_tokens(body, content, n)
        else:
            self._add_tokens(*tokens)
            details = usage.get("prompt_tokens_details")  # type: ignore[union-attr]  # a dict: it had counts
            if isinstance(details, dict):  # OpenAI, vLLM: the prefix served from the server's prompt cache
                self.stats.cached_tokens += _int(details.get("cached_tokens"))
        try:
            value = parse_reply(metric, content, finish)
        except ReplyError as e:
            return Outcome(None, content, e.kind, e.message)
        dists = None
        if self.settings.logprobs and logprobs.targets(metric):
            dists = logprobs.distributions(metric, value, choice.get("logprobs"))
        return Outcome(value, content, usage=tokens, logprobs=dists)

    def _handle_message(self, metric: Metric, data: bytes, body: bytes | None = None) -> Outcome:
        """:meth:`_handle_ok` of an Anthropic Message (:func:`anthropic.reply`)."""
        parsed = anthropic.reply(data)
        if isinstance(parsed, str):
            return Outcome(None, scrub(data[:2000].decode("utf-8", "replace")), ErrorKind.BAD_RESPONSE, parsed)
        content, finish, tokens = parsed
        if content is not None:
            content = scrub_registered(content)
        usage = None
        if tokens is None:
            self._count_tokens(body, content, 1)
        else:
            usage = tokens[:2]
            self._add_tokens(*usage)
            self.stats.cached_tokens += tokens[2]
            self.stats.cache_write_tokens += tokens[3]
        try:
            value = parse_reply(metric, content, finish)
        except ReplyError as e:
            return Outcome(None, content, e.kind, e.message)
        return Outcome(value, content, usage=usage)

    def _add_tokens(self, prompt: int, completion: int) -> None:
        stats = self.stats
        stats.prompt_tokens += prompt
        stats.completion_tokens += completion
        if completion > self.meter.longest:
            self.meter.longest = completion

    def _count_tokens(self, body: bytes | None, content: str | None, n: int) -> None:
        """A reply whose server did not say what it used (no usage, or counts that are no counts): its tokens
        counted here, so that the cost and max_cost hold all the same (see budget.py)."""
        self._add_tokens(*self.meter.count(body, content, n))
        if self.meter.counted == 1:  # said once, in the log and the summary
            self.stats.notes.append(note := self.meter.counted_note(self.base_url))
            logger.warning(note)

    def reused(self, usage: tuple[int, int] | None, body: bytes, content: str) -> None:
        """A reply the store held, paid by an earlier run: what it cost counts against max_cost (see budget.py)."""
        if self.budget is not None:
            self.budget.reused(self.meter.reused_cost(self.price, usage, body, content))

    def spent(self) -> float | None:
        """USD of this client's replies (see :meth:`budget.Meter.spent`); None: no price."""
        return self.meter.spent(self.price, self.stats, self.batch_tokens)

    def _peers_spent(self) -> float:
        # a panel's judges share the budget, each at its own model's price (__init__ refuses a model without)
        return sum(c.spent() or 0.0 for c in self.budget_peers)

    def _cost_stop(self, worst: float | None = None) -> BaseException:
        assert self.budget is not None and self.price is not None  # a budget needs a price (__init__)
        price = f"{self.model}'s price ({self.price.describe()})"
        return stop_error(self.budget, self._peers_spent(), worst, price, self.resume_hint())

    def _check_budget(self) -> None:
        if self.budget is not None and not self.budget.fits(0.0):  # a NaN or infinite spend stops the run too
            raise self._cost_stop()
        if self.max_total_tokens is not None:
            used = sum(c.stats.prompt_tokens + c.stats.completion_tokens for c in self.budget_peers)
            if used >= self.max_total_tokens:
                raise BudgetExceededError(
                    f"the token budget max_total_tokens={self.max_total_tokens} is used up ({used} tokens). "
                    f"Raise it, then {self.resume_hint()}"
                )


def judge_panel(specs: Sequence[tuple[Settings, str | None]]) -> list[JudgeClient]:
    """One client per judge from its (settings, api key); ``max_total_tokens`` counts the tokens of them all.

    Example:
        >>> a, b = judge_panel([(Settings(model="m1"), None), (Settings(model="m2"), None)])
        >>> a.budget_peers == [a, b]
        True
    """
    clients = [JudgeClient(s, api_key=key) for s, key in specs]
    for c in clients:  # the run's budget, whichever judge spends it
        c.budget_peers = clients
        if c.budget is not None:
            c.budget = clients[0].budget
    return clients
