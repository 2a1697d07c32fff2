"""Fast, exact unit tests of the client's timing: backoff, Retry-After, deadlines, the 429 storm stop,
the AIMD limiter and the RPM/TPM limits, through the client's clock and transport seams.

Nothing sleeps for real: the event loop runs on virtual time that jumps to the next timer whenever
nothing is ready to run (trio's ``autojump_clock``), and a scripted transport plays the server. The
end-to-end behaviour against a real HTTP server is tested in test_reliability.py and
test_hostile_servers.py; these tests pin the numbers.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import selectors

import aiohttp
import orjson
import pyarrow as pa
import pytest
from datasets import Dataset

from hf_judge import constants
from hf_judge.engine.core import combine_pairwise
from hf_judge.errors import (
    AuthenticationError,
    ErrorKind,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitedError,
    ReplyError,
    ServerUnreachableError,
    http_kind,
)
from hf_judge.judging.catalogue import load_metric
from hf_judge.judging.images import prompt_tokens_estimate
from hf_judge.judging.metrics import MetricKind, OutputType
from hf_judge.settings import Settings
from hf_judge.transport.client import JudgeClient, ReplyTooLarge
from hf_judge.transport.limits import AdaptiveLimiter
from hf_judge.transport.policy import RETRY_POLICY, Deadlines, Decision, classify

METRIC = load_metric("QA_Clarity")
MESSAGES = [{"role": "user", "content": "Rate it."}]
VALID = '{"reason": "clear", "score": 7}'


# -- virtual time --------------------------------------------------------------------------------
class _JumpSelector(selectors.DefaultSelector):
    """Polls without waiting; a wait the loop asks for moves its virtual clock instead."""

    def __init__(self, loop: JumpLoop):
        super().__init__()
        self.loop = loop

    def select(self, timeout=None):
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise RuntimeError("deadlock: nothing to run and no timer set")
        self.loop.virtual += timeout
        return []


class JumpLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time starting at 0: when nothing is ready, time jumps to the next timer."""

    def __init__(self):
        self.virtual = 0.0
        super().__init__(_JumpSelector(self))

    def time(self) -> float:
        return self.virtual


class FakeClock:
    """The client's clock on the loop's virtual time; jitter is the top of its range (``max``) or 0 (``min``)."""

    EPOCH = 1_800_000_000.0  # wall time at virtual 0

    def __init__(self, loop: JumpLoop, jitter: str = "max"):
        self.loop = loop
        self.high = jitter == "max"
        self.log: list[tuple[asyncio.Task | None, float]] = []
        self.ignore: set[asyncio.Task] = set()  # tasks whose sleeps are not backoff (the deadline sweeper)

    @property
    def sleeps(self) -> list[float]:
        """The waits between attempts."""
        return [s for t, s in self.log if t not in self.ignore]

    def now(self) -> float:
        return self.loop.time()

    async def sleep(self, seconds: float) -> None:
        self.log.append((asyncio.current_task(), seconds))
        await asyncio.sleep(seconds)

    def wall(self) -> float:
        return self.EPOCH + self.loop.time()

    def jitter(self, low: float, high: float) -> float:
        return high if self.high else low


def completion(content: str | None = VALID, finish: str = "stop") -> tuple[int, dict, bytes]:
    doc = {
        "choices": [{"message": {"content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    return 200, {}, orjson.dumps(doc)


def status(code: int, headers: dict | None = None, body: dict | None = None) -> tuple[int, dict, bytes]:
    body = body or {"error": {"message": f"status {code}"}}
    return code, {k.lower(): v for k, v in (headers or {}).items()}, orjson.dumps(body)


class Server:
    """A scripted transport: each request gets the next reply of ``replies`` (the last one repeats).

    A reply is a (status, headers, body) tuple, an exception to raise, or a number of seconds to hang.
    """

    def __init__(self, clock: FakeClock, replies: list):
        self.clock = clock
        self.replies = list(replies)
        self.sent: list[tuple[float, dict]] = []  # (virtual time, request body)

    @property
    def times(self) -> list[float]:
        return [t for t, _ in self.sent]

    async def __call__(self, body: bytes):
        self.sent.append((self.clock.now(), orjson.loads(body)))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, (int, float)):
            await asyncio.sleep(reply)
            return completion()
        return reply


def run(replies: list, *, calls: int = 1, jitter: str = "max", concurrent: bool = False, **settings):
    """Send ``calls`` requests through a client with a scripted server, in virtual time.

    Returns (outcomes or the exception raised, server, client, clock, virtual end time).
    """
    loop = JumpLoop()
    clock = FakeClock(loop, jitter)
    server = Server(clock, replies)
    settings = {"retries": 3, "backoff_base": 0.5, "backoff_max": 30.0, **settings}
    client = JudgeClient(
        Settings(model="m", base_url="http://judge.test/v1", **settings), api_key=None, clock=clock, transport=server
    )

    async def main():
        await client.open()
        clock.ignore.add(client._deadlines._sweeper)
        try:
            one = [client.call(METRIC, MESSAGES, 0.1) for _ in range(calls)]
            if concurrent:
                return await asyncio.gather(*one)
            return [await c for c in one]
        finally:
            await client.close()

    try:
        result = loop.run_until_complete(main())
    except Exception as e:  # noqa: BLE001 - the tests assert on it
        result = e
    finally:
        loop.close()
    return result, server, client, clock, loop.virtual


# -- the jump loop itself ----------------------------------------------------------------------
def test_jump_loop_sleeps_without_waiting():
    loop = JumpLoop()
    try:
        loop.run_until_complete(asyncio.sleep(3600))
        assert loop.time() == 3600.0
    finally:
        loop.close()


# -- classify: the retry table -----------------------------------------------------------------
def test_every_error_kind_has_a_decision():
    assert set(RETRY_POLICY) == set(ErrorKind)


@pytest.mark.parametrize(
    "failure, decision",
    [
        (408, Decision.RETRY),
        (409, Decision.RETRY),
        (425, Decision.RETRY),
        (429, Decision.RETRY),
        (500, Decision.RETRY),
        (503, Decision.RETRY),
        (599, Decision.RETRY),
        (400, Decision.GIVE_UP),
        (413, Decision.GIVE_UP),
        (422, Decision.GIVE_UP),
        (401, Decision.STOP),
        (403, Decision.STOP),
        (404, Decision.STOP),
        (ErrorKind.SCHEMA, Decision.RETRY_HOTTER),
        ("invalid_json", Decision.RETRY_HOTTER),
        (ErrorKind.TRUNCATED, Decision.RETRY_HOTTER),
        (ErrorKind.UNPARSEABLE, Decision.RETRY_HOTTER),
        (ErrorKind.TIMEOUT, Decision.RETRY),
        (ErrorKind.CONNECTION, Decision.RETRY),
        (ErrorKind.BAD_RESPONSE, Decision.RETRY),
        (ErrorKind.CONTENT_FILTER, Decision.GIVE_UP),
        (ErrorKind.NULL_INPUT, Decision.GIVE_UP),
        ("something_new", Decision.GIVE_UP),
    ],
)
def test_classify(failure, decision):
    assert classify(failure) is decision


# -- backoff -------------------------------------------------------------------------------------
def test_backoff_doubles_from_base_with_full_jitter():
    out, server, client, clock, _ = run([status(503), status(503), status(503), completion()])
    assert out[0].value == {"reason": "clear", "score": 7} and out[0].attempts == 4
    # full jitter: uniform(0, base * 2**(n-1)); the fake clock draws the top
    assert clock.sleeps == [0.5, 1.0, 2.0]
    assert server.times == [0.0, 0.5, 1.5, 3.5]
    assert client.stats.retries == 3 and client.stats.failures == {"http_503": 3}


def test_backoff_is_capped_at_backoff_max():
    out, server, _, clock, _ = run([status(500)], retries=5, backoff_base=1.0, backoff_max=3.0)
    assert clock.sleeps == [1.0, 2.0, 3.0, 3.0, 3.0]
    assert out[0].kind == "http_500" and out[0].attempts == 6 and len(server.sent) == 6


def test_backoff_lower_end_of_jitter_is_zero():
    _, server, _, clock, _ = run([status(502), completion()], jitter="min")
    assert clock.sleeps == [0] and server.times == [0.0, 0.0]


# -- Retry-After -----------------------------------------------------------------------------------
def test_retry_after_seconds_plus_a_tenth_jitter():
    _, server, client, clock, _ = run([status(429, {"Retry-After": "2"}), completion()])
    assert clock.sleeps == [pytest.approx(2 + 0.21, abs=1e-12)]  # + uniform(0, min(1, 10 % + 10 ms))
    assert client.stats.capped_waits == 0


def test_retry_after_ms_wins_over_retry_after():
    _, _, _, clock, _ = run([status(503, {"Retry-After-Ms": "1500", "Retry-After": "9"}), completion()], jitter="min")
    assert clock.sleeps == [1.5]


def test_retry_after_http_date_is_read_against_the_wall_clock():
    when = email.utils.formatdate(FakeClock.EPOCH + 7, usegmt=True)
    _, _, _, clock, _ = run([status(429, {"Retry-After": when}), completion()], jitter="min")
    assert clock.sleeps == [7.0]


@pytest.mark.parametrize(
    "value", ["3600", "inf", "1e999", email.utils.formatdate(FakeClock.EPOCH + 86400, usegmt=True)]
)
def test_retry_after_over_backoff_max_waits_backoff_max_exactly(value):
    out, _, client, clock, end = run([status(503, {"Retry-After": value}), completion()], backoff_max=4.0)
    assert clock.sleeps == [4.0] and end == 4.0 and out[0].attempts == 2
    assert client.stats.capped_waits == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "nan"},
        {"Retry-After": "soon"},
        {"Retry-After": "-5"},
        {"Retry-After": "-1e999"},
        {"Retry-After-Ms": "-1500"},
        {"Retry-After-Ms": "nan"},
        {"Retry-After": email.utils.formatdate(FakeClock.EPOCH - 60, usegmt=True)},  # a date already past
    ],
)
def test_unusable_retry_after_backs_off_as_without_one(headers):
    # a server that answers every attempt with it: the row fails only after the whole exponential backoff
    out, server, client, clock, end = run([status(503, headers)])
    assert clock.sleeps == [0.5, 1.0, 2.0] and server.times == [0.0, 0.5, 1.5, 3.5] and end == 3.5
    assert out[0].kind == "http_503" and out[0].attempts == 4 and client.stats.capped_waits == 0


def test_a_negative_retry_after_ms_leaves_the_retry_after_beside_it():
    _, _, _, clock, _ = run([status(503, {"Retry-After-Ms": "-1", "Retry-After": "2"}), completion()], jitter="min")
    assert clock.sleeps == [2.0]


# -- the 429 storm and the quota ------------------------------------------------------------------
def test_429_storm_stops_at_exactly_max_throttle_s():
    err, server, _, _, end = run([status(429, {"Retry-After": "1"})], jitter="min", retries=100, max_throttle_s=10.0)
    assert isinstance(err, RateLimitedError), err
    assert end == 10.0 and server.times == [float(t) for t in range(11)]
    assert "max_throttle_s=10" in str(err)


def test_a_reply_other_than_429_restarts_the_storm_clock():
    throttled, failed = status(429, {"Retry-After": "4"}), status(503, {"Retry-After": "4"})
    replies = [throttled] * 2 + [failed] + [throttled] * 3
    out, server, _, _, end = run(replies + [completion()], jitter="min", retries=10, max_throttle_s=10.0)
    # 429s at 0 and 4, a 503 at 8 (through: the storm clock restarts), 429s at 12, 16, 20 (quiet 12 >= 10: stop)
    assert isinstance(out, RateLimitedError) and end == 20.0 and len(server.sent) == 6


def test_quota_429_stops_at_once():
    body = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    err, server, _, _, end = run([status(429, body=body)])
    assert isinstance(err, QuotaExceededError) and len(server.sent) == 1 and end == 0.0


@pytest.mark.parametrize(
    "code, error", [(401, AuthenticationError), (403, AuthenticationError), (404, ModelNotFoundError)]
)
def test_fatal_statuses_stop_the_run_after_one_request(code, error):
    err, server, _, _, _ = run([status(code)])
    assert isinstance(err, error) and len(server.sent) == 1


def test_permanent_status_and_content_filter_are_not_retried():
    out, server, client, _, _ = run([status(400), completion(None, "content_filter")], calls=2)
    assert [o.kind for o in out] == ["http_400", "content_filter"] and [o.attempts for o in out] == [1, 1]
    assert len(server.sent) == 2 and client.stats.retries == 0


# -- temperature escalation, schema negotiation -------------------------------------------------------
def test_invalid_replies_raise_the_temperature():
    out, server, _, _, _ = run([completion("not json")] * 4 + [completion()], retries=4)
    temps = [body["temperature"] for _, body in server.sent]
    assert temps == [0.1, 0.2, 0.4, 0.8, constants.MAX_ESCALATED_TEMPERATURE]
    assert out[0].attempts == 5


def test_schema_rejection_switches_to_json_object_without_costing_an_attempt():
    rejected = status(400, body={"error": {"message": "response_format json_schema is not supported"}})
    out, server, client, clock, _ = run([rejected, completion()], calls=2)
    kinds = [body["response_format"]["type"] for _, body in server.sent]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert [o.attempts for o in out] == [1, 1] and clock.sleeps == []
    assert client.stats.structured_output == "json_object" and not client.stats.failures


# -- deadlines, transport failures --------------------------------------------------------------
def test_a_request_times_out_on_the_sweep_at_its_deadline():
    out, server, client, _, end = run([100.0], timeout=10.0, retries=0)
    # the sweeper wakes every 0.5 s (timeout/4, at most 0.5 s); the request is due at 10.0 and cancelled then
    assert out[0].kind == "timeout" and out[0].message == "no reply within 10 s"
    assert end == 10.0 and client.stats.failures == {"timeout": 1}


def test_a_timeout_is_retried_after_backoff():
    out, server, _, clock, _ = run([100.0, completion()], timeout=2.0, retries=1)
    assert server.times == [0.0, 2.5] and clock.sleeps[-1] == 0.5 and out[0].value is not None


def _refused() -> aiohttp.ClientConnectorError:
    """aiohttp's error for a connection refused (its connection key only names the host in the text)."""
    from types import SimpleNamespace

    key = SimpleNamespace(host="judge.test", port=80, ssl=True)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]


def test_connection_errors_before_any_reply_stop_the_run():
    err, server, _, clock, _ = run([_refused()], retries=2)
    assert isinstance(err, ServerUnreachableError) and len(server.sent) == 3
    assert "cannot reach the server: connection refused at http://judge.test/v1/chat/completions" in str(err)


def test_connections_reset_before_any_reply_are_errors_rows_not_an_unreachable_server():
    """A connection made, then reset: the server is there, so the row is filed and the run goes on."""
    out, server, _, _, _ = run([aiohttp.ServerDisconnectedError()], retries=2)
    assert out[0].kind == "connection" and out[0].attempts == 3 and len(server.sent) == 3


def test_connection_error_after_a_reply_is_an_errors_row_that_keeps_the_last_reply():
    out, _, _, _, _ = run([completion("not json"), aiohttp.ClientConnectionError("reset")], retries=1)
    assert out[0].kind == "connection" and out[0].raw == "not json" and out[0].attempts == 2


def test_a_reply_over_max_reply_bytes_is_bad_response():
    too_big = ReplyTooLarge("Content-Length 99")
    too_big.status = 200
    out, _, _, _, _ = run([too_big], retries=0, max_reply_bytes=2048)
    assert out[0].kind == "bad_response" and "(HTTP 200) is larger than max_reply_bytes=2,048" in out[0].message


def test_deadlines_sweep_cancels_only_overdue_tasks():
    loop = JumpLoop()
    clock = FakeClock(loop)
    deadlines = Deadlines(1.0, clock)
    assert deadlines.period == 0.25  # timeout / 4, at most 0.5 s

    async def main():
        deadlines.start()
        ended = {}

        async def request(name, start, length):
            await asyncio.sleep(start)
            task = asyncio.current_task()
            deadlines.due[task] = clock.now() + deadlines.timeout
            try:
                await asyncio.sleep(length)
                ended[name] = ("ok", clock.now())
            except asyncio.CancelledError:
                assert deadlines.timed_out(task)
                ended[name] = ("timeout", clock.now())
            finally:
                deadlines.due.pop(task, None)

        await asyncio.gather(request("fast", 0, 0.9), request("slow", 0, 20), request("late", 0.1, 20))
        deadlines.stop()
        return ended

    try:
        ended = loop.run_until_complete(main())
    finally:
        loop.close()
    # due at 1.0 (swept at 1.0) and 1.1 (swept at 1.25: at most one period late)
    assert ended == {"fast": ("ok", 0.9), "slow": ("timeout", 1.0), "late": ("timeout", 1.25)}
    assert not deadlines.expired and not deadlines.due


# -- RPM / TPM pacing -----------------------------------------------------------------------------
def test_requests_per_minute_pace_one_per_second_bucket():
    _, server, _, _, _ = run([completion()], calls=5, max_requests_per_minute=60)
    assert server.times == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0], abs=1e-6)


def test_requests_per_minute_allow_a_seconds_worth_at_once():
    _, server, _, _, _ = run([completion()], calls=6, concurrent=True, max_requests_per_minute=180)
    assert server.times == pytest.approx([0.0, 0.0, 0.0, 1 / 3, 2 / 3, 1.0], abs=1e-6)


def test_tokens_per_minute_pace_by_estimated_tokens():
    # a request counts its estimated prompt tokens + max_tokens (256 when unset); a bucket of two requests' worth
    body = JudgeClient(Settings(model="m", base_url="http://judge.test/v1"), api_key=None).body(METRIC, MESSAGES, 0.1)
    tokens = prompt_tokens_estimate(body) + 256
    _, server, _, _, _ = run([completion()], calls=4, max_tokens_per_minute=60 * 2 * tokens)
    # two fit at once; then each waits for one request's worth to leak out, at two per second
    assert server.times == pytest.approx([0.0, 0.0, 0.5, 1.0], abs=1e-6)


# -- AdaptiveLimiter ------------------------------------------------------------------------------
def _limiter(maximum: int = 10):
    now = [0.0]
    lim = AdaptiveLimiter(maximum, now=lambda: now[0])
    return lim, now


def _settle(lim: AdaptiveLimiter, *throttled: bool, sent_at: float = 0.0) -> None:
    """Replies (429 or not) to requests sent at ``sent_at``, one by one: each holds a slot, then gives it back."""
    for t in throttled:
        lim.in_flight += 1
        lim.release(throttled=t, sent_at=sent_at)


def test_limiter_halves_on_a_burst_of_429s():
    lim, now = _limiter(10)
    now[0] = 5.0
    _settle(lim, *[False] * 8, True, True)  # 2 of the last 10 (20 %): a burst
    assert lim.limit == 5.0 and lim.cuts == 1


def test_limiter_ignores_the_odd_429():
    lim, _ = _limiter(10)
    _settle(lim, *([False] * 9 + [True]) * 5)  # 10 %
    assert lim.limit == 10.0 and lim.cuts == 0


def test_limiter_cuts_at_most_once_per_round_trip_and_grows_back_additively():
    lim, now = _limiter(10)
    now[0] = 5.0
    _settle(lim, *[True] * 10, sent_at=1.0)
    assert lim.limit == 5.0 and lim.cuts == 1
    _settle(lim, *[True] * 20, sent_at=4.0)  # sent before the cut (at 5.0): already answered by it
    assert lim.limit == 5.0 and lim.cuts == 1
    _settle(lim, False, sent_at=6.0)
    assert lim.limit == pytest.approx(5.2)  # + 1/limit per success
    _settle(lim, *[False] * 200, sent_at=6.0)
    assert lim.limit == 10.0  # never above concurrency


def test_limiter_grows_at_least_2_percent_when_large():
    lim, _ = _limiter(1000)
    lim.limit = 500.0
    _settle(lim, False)
    assert lim.limit == pytest.approx(500.02)


def test_limiter_never_goes_below_one():
    lim, now = _limiter(2)
    for i in range(10):
        now[0] = float(i + 1)
        _settle(lim, *[True] * 10, sent_at=float(i + 1))
    assert lim.limit == 1.0 and lim.cuts == 10


def test_limiter_waiters_are_served_in_order_within_the_limit():
    lim, _ = _limiter(2)
    order = []

    async def main():
        assert lim.try_acquire() and lim.try_acquire() and not lim.try_acquire()

        async def waiter(n):
            await lim.acquire()
            order.append(n)

        tasks = [asyncio.ensure_future(waiter(n)) for n in range(3)]
        await asyncio.sleep(0)
        assert order == [] and lim.in_flight == 2
        lim.release()
        await asyncio.sleep(0)
        assert order == [0] and lim.in_flight == 2
        lim.release()
        lim.release()
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2] and lim.in_flight == 2 and lim.peak == 2

    asyncio.run(main())


# -- combine_pairwise -----------------------------------------------------------------------------
PAIR = load_metric("Comparative")
PAIR_ONE = load_metric("Comparative", swap=False)


def test_combine_pairwise_one_order():
    k1, k2 = [o for o in PAIR_ONE.outputs if o.type == OutputType.INTEGER]
    text = next(o for o in PAIR_ONE.outputs if o.type == OutputType.STRING)
    out = combine_pairwise(PAIR_ONE, [{k1.key: 8, k2.key: 7, text.key: "why"}])
    assert out == {k1.column: 8, k2.column: 7, f"{PAIR_ONE.name}_winner": "1", text.column: "why"}
    assert set(out) == set(PAIR_ONE.columns)


def test_combine_pairwise_both_orders_average_and_flag_disagreement():
    k1, k2 = [o for o in PAIR.outputs if o.type == OutputType.INTEGER]
    text = next(o for o in PAIR.outputs if o.type == OutputType.STRING)
    first = {k1.key: 8, k2.key: 7, text.key: "a"}
    swapped = {k1.key: 9, k2.key: 6, text.key: "b"}  # swapped: response 2 got 9, response 1 got 6
    out = combine_pairwise(PAIR, [first, swapped])
    assert out == {
        k1.column: 7.0,
        k2.column: 8.0,
        f"{PAIR.name}_winner": "2",
        text.column: "a",
        f"{text.column}_swapped": "b",
        f"{PAIR.name}_disagree": True,
    }
    assert set(out) == set(PAIR.columns)
    agree = combine_pairwise(PAIR, [first, {k1.key: 6, k2.key: 6, text.key: "c"}])
    assert agree[f"{PAIR.name}_winner"] == "1" and agree[k1.column] == 7.0 and agree[f"{PAIR.name}_disagree"] is True
    tie = combine_pairwise(PAIR, [{k1.key: 5, k2.key: 5, text.key: ""}, {k1.key: 5, k2.key: 5, text.key: ""}])
    assert tie[f"{PAIR.name}_winner"] == "tie" and tie[f"{PAIR.name}_disagree"] is False


# -- the enums write what the strings wrote ---------------------------------------------------------
def test_error_kinds_serialise_to_the_same_bytes_as_strings():
    kinds = list(ErrorKind) + [http_kind(503)]
    plain = [str(k.value) if isinstance(k, ErrorKind) else k for k in kinds]
    assert all(type(p) is str for p in plain)
    assert pa.array(kinds).equals(pa.array(plain)) and pa.array(kinds).type == pa.string()
    assert orjson.dumps(kinds) == orjson.dumps(plain)
    assert json.dumps(kinds) == json.dumps(plain)
    rows = [{"kind": k, "message": "m"} for k in kinds]
    plain_rows = [{"kind": k, "message": "m"} for k in plain]
    a, b = Dataset.from_list(rows), Dataset.from_list(plain_rows)
    assert a.data.table.equals(b.data.table)
    assert [f"{k}" for k in kinds] == plain and [str(k) for k in kinds] == plain


def test_output_types_and_metric_kinds_keep_request_bodies_and_values():
    assert [o.type for o in METRIC.outputs] == ["string", "integer"]
    assert METRIC.kind == "score" and METRIC.kind is MetricKind.SCORE
    assert all(type(s["type"]) is str for s in METRIC.json_schema["properties"].values())
    client = JudgeClient(Settings(model="m", base_url="http://judge.test/v1"), api_key=None)
    body = client.body(METRIC, MESSAGES, 0.1)
    schema = {
        "type": "object",
        "properties": {"reason": {"type": "string"}, "score": {"type": "integer", "minimum": 1, "maximum": 10}},
        "required": ["reason", "score"],
        "additionalProperties": False,
    }
    props = orjson.loads(body)["response_format"]["json_schema"]["schema"]["properties"]
    assert {k: v["type"] for k, v in props.items()} == {k: v["type"] for k, v in schema["properties"].items()}
    assert b'"type":"integer"' in body and b'"type":"string"' in body


def test_reply_error_is_in_the_tree_and_exported():
    import hf_judge
    from hf_judge.errors import HfJudgeError
    from hf_judge.judging.validate import ReplyError as FromValidate

    assert hf_judge.ReplyError is ReplyError is FromValidate and issubclass(ReplyError, HfJudgeError)
    with pytest.raises(hf_judge.ReplyError) as e:
        hf_judge.parse_pair_scores("8/10 7/10", 1, 10)
    assert e.value.kind == ErrorKind.UNPARSEABLE and e.value.kind == "unparseable"


def test_card_stats_of_a_selected_dataset_count_only_its_rows():
    from hf_judge.results.card import column_stats

    ds = Dataset.from_dict({"s": [1, 2, 3, 4, None, 10]})
    picked = ds.select([5, 0, 4])  # an indices mapping, read through the public arrow format
    assert column_stats(picked, "s") == column_stats(picked.flatten_indices(), "s")
    assert column_stats(picked, "s")["count"] == 2 and column_stats(picked, "s")["hist"] == {1: 1, 10: 1}


def test_failure_counts_are_keyed_by_plain_strings():
    _, _, client, _, _ = run([completion("not json"), status(503), completion()])
    assert client.stats.failures == {"invalid_json": 1, "http_503": 1}
    assert all(type(k) is str for k in client.stats.failures)
    assert orjson.loads(orjson.dumps(dict(client.stats.failures))) == {"invalid_json": 1, "http_503": 1}


def test_errors_rows_and_summary_hold_plain_strings(judge, tmp_path):
    from helpers import qa_dataset, score

    judge.configure(faults=[{"fault": "malformed_json", "match": "row-1:"}])
    out = score(qa_dataset(3), ["QA_Clarity"], judge, tmp_path, retries=1)
    assert out["errors"]["kind"] == ["invalid_json"]
    summary = out.summary.to_dict()
    assert summary["errors"] == {"invalid_json": 1} and summary["failed_attempts"] == {"invalid_json": 2}
    orjson.dumps(summary)  # raised "Dict key must be str" on enum keys


def test_a_metric_at_a_freed_metrics_address_gets_its_own_schema():
    """One client serves many copies of a job in a process (a Ray worker unpickles the Judge once per task):
    a metric built where a freed one lived is sent its own schema and prefix, not the freed one's. (Keyed by
    id(metric), a Binary metric was sent QA_Clarity's schema and its replies failed the schema check.)"""
    import pickle

    from hf_judge.judging.metrics import Metric
    from hf_judge.transport.anthropic import AnthropicWire

    client = JudgeClient(Settings(model="m", base_url="http://judge.test/v1"), api_key=None)
    wire = AnthropicWire("claude-haiku-4-5", max_tokens=None)
    clarity, binary = pickle.dumps(load_metric("QA_Clarity")), pickle.loads(pickle.dumps(load_metric("Binary")))
    for _ in range(500):
        first = pickle.loads(clarity)  # a copy of its own, as a Ray task unpickles it (load_metric's are kept)
        assert client.response_format(first)["json_schema"]["name"] == "QA_Clarity"
        assert wire.structured(first, "tool")["tool_choice"]["name"] == "QA_Clarity"
        wire.body(first, [{"role": "user", "content": "x"}], 0.0, "tool")
        freed = id(first)
        del first
        other = object.__new__(Metric)  # allocated straight after the free: CPython often hands out that block
        if id(other) == freed:
            other.__dict__.update(binary.__dict__)
            break
    else:
        pytest.fail("CPython gave no new metric the freed metric's address in 500 tries")
    assert client.response_format(other)["json_schema"] == {
        "name": "Binary", "schema": binary.json_schema, "strict": True,
    }  # fmt: skip
    assert wire.structured(other, "tool")["tool_choice"]["name"] == "Binary"
    body = json.loads(wire.body(other, [{"role": "user", "content": "x"}], 0.0, "tool"))
    assert body["tools"][0]["input_schema"] == binary.json_schema
