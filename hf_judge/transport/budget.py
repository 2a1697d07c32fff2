"""The cost budget (``max_cost``): what a job's replies cost, and the admission of each request against it.

``max_cost`` bounds the total paid for one job's replies in one reply store, earlier runs included: what this
run's replies cost (the usage the server reported, at the model's price), plus what earlier runs paid for the
replies this run reuses from the store (their stored usage, at the online price), plus the worst case of every
request in flight. A request is sent only when that total, with its own worst case, stays within the budget
(:meth:`CostBudget.admit`); one that does not fit waits while others are in flight (their unused reservations
come back when their replies do), and the run stops (``CostExceededError``) when nothing is in flight and the
next request still does not fit. Requests are admitted in the order they ask, so the replies a budget paid for
are the first ones of the job, and a rerun under the same budget finds them in the store and stops where the
first run stopped.

A request's worst case is its prompt tokens estimated from its body (4 bytes a token, the estimate the TPM limit
uses) and its reply at ``max_tokens`` (times the ``n`` choices asked for); without ``max_tokens``, at the longest
of :data:`REPLY_TOKENS` and the longest reply of this run. The total passes the budget only by what replies
cost beyond their reservations: nothing where ``max_tokens`` is set and the server counts no more prompt tokens
than 4 bytes each of the body.

A reply whose usage is missing or unusable (counts that are strings, fractions, negative or booleans) is not
trusted: its tokens are counted here (:func:`counted_tokens`) so that the budget and the cost still hold.

Example:
    >>> reported_tokens({"prompt_tokens": 12, "completion_tokens": 5})
    (12, 5)
    >>> reported_tokens({"prompt_tokens": "12", "completion_tokens": 5.0}) is None
    True
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import CostExceededError
from ..judging.images import prompt_tokens_estimate

# A reply's tokens in a request's worst case when max_tokens is not set (and no longer reply came yet).
REPLY_TOKENS = 1024
# What the docs and the stop message say about the bound.
BOUND = (
    "the total can pass it only by what replies in flight cost beyond their reservation (each request reserves "
    "its prompt at 4 bytes a token of its body and its reply at --max-tokens, or without it at the longest of "
    f"{REPLY_TOKENS:,} tokens and this run's longest reply)"
)


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def reported_tokens(usage: Any, prompt: str = "prompt_tokens", completion: str = "completion_tokens") -> Any:
    """(prompt, completion) tokens of a reply's ``usage`` when both are counts (ints, 0 or more; not a bool,
    a string or a fraction); else None: then the tokens are counted (:func:`counted_tokens`)."""
    if not isinstance(usage, dict):
        return None
    p, c = usage.get(prompt), usage.get(completion)
    return (p, c) if _count(p) and _count(c) else None


def counted_tokens(prompt_estimate: float, content: str | None, cap: int | None) -> tuple[int, int]:
    """The tokens of a reply whose server did not say: the prompt as estimated, the reply at 4 bytes a token
    of its text (at most ``cap``, the max_tokens a server cannot pass), each rounded up.

    Example:
        >>> counted_tokens(103.5, "x" * 41, None), counted_tokens(10, "x" * 400, 50)
        ((104, 11), (10, 50))
    """
    reply = math.ceil(len(content.encode("utf-8", "replace")) / 4) if content else 0
    if cap is not None:
        reply = min(reply, cap)
    return math.ceil(prompt_estimate), reply


class Meter:
    """One client's side of the cost: a request's worst case, and the tokens of replies whose server did not
    count them; ``reply_cap``: the reply tokens a server cannot pass. ``price``: the model's (a client's attribute).

    Example:
        >>> from hf_judge.transport.prices import Price
        >>> m = Meter(reply_cap=100)
        >>> m.worst_case(Price(input=1.0, output=2.0), b"x" * 400) == (100 * 1.0 + 100 * 2.0) / 1e6
        True
    """

    def __init__(self, reply_cap: int | None):
        self.reply_cap = reply_cap
        self.longest = 0  # the longest reply of this run (completion tokens): the worst case without a cap
        self.written = [0.0, 0]  # prompt tokens estimated, requests: of those written to batch files
        self.counted = 0  # replies whose tokens were counted here

    def worst_case(self, price: Any, body: bytes, n: int = 1) -> float:
        """USD a request for ``n`` choices can cost at most, as max_cost reserves it."""
        reply = self.reply_cap or max(REPLY_TOKENS, self.longest)
        return float(price.cost(prompt_tokens_estimate(body), reply * n))

    def count(self, body: bytes | None, content: str | None, n: int = 1) -> tuple[int, int]:
        """The tokens of a reply to ``body`` (None: a batch line, whose request is not at hand: the mean of
        those written) with ``n`` choices (the others as long as ``content``, roughly)."""
        if body is not None:
            estimate = prompt_tokens_estimate(body)
        else:
            estimate = self.written[0] / self.written[1] if self.written[1] else 0.0
        p, c = counted_tokens(estimate, content, self.reply_cap)
        self.counted += 1
        return p, c * n

    @staticmethod
    def counted_note(where: str) -> str:
        return (
            f"replies from {where} came without usable token counts (usage): hf-judge counted their tokens itself "
            "(4 bytes a token of the request and of the reply) for the cost and max_cost"
        )

    def spent(self, price: Any, stats: Any, batch_tokens: list[int]) -> float | None:
        """USD of the usage in ``stats`` (a client's), at the model's price (None: no price): the tokens of
        batch lines (``batch_tokens``) at the batch price, the rest online, as the run's summary prices them."""
        if price is None:
            return None
        s = stats
        bp, bc = batch_tokens
        p, c = s.prompt_tokens - bp, s.completion_tokens - bc
        cached = min(s.cached_tokens, p)
        written = min(s.cache_write_tokens, p - cached)  # as the summary splits them: online first
        online = price.cost(p, c, cached, written)
        return float(online + price.cost(bp, bc, s.cached_tokens - cached, s.cache_write_tokens - written, batch=True))

    def note_written(self, body: bytes) -> None:
        """A request written to a batch file: its prompt estimate is what a line without usage counts."""
        self.written[0] += prompt_tokens_estimate(body)
        self.written[1] += 1

    def reused_cost(self, price: Any, usage: tuple[int, int] | None, body: bytes, content: str) -> float:
        """What an earlier run paid for a stored reply to ``body``: its stored usage (else counted), online."""
        tokens = usage or counted_tokens(prompt_tokens_estimate(body), content, self.reply_cap)
        return float(price.cost(*tokens))


def limit_text(stop: BaseException, max_cost: float | None, max_total_tokens: int | None) -> str:
    """The budget that ``stop`` (a CostExceededError, else the token budget's) says is used up, as a setting.

    Example:
        >>> limit_text(CostExceededError("x"), 0.5, None), limit_text(RuntimeError("x"), None, 2000)
        ('max_cost=$0.5', 'max_total_tokens=2,000')
    """
    if isinstance(stop, CostExceededError):
        return f"max_cost=${max_cost:g}"
    return f"max_total_tokens={max_total_tokens or 0:,}"


def unsent_message(limit: str) -> str:
    """The message of the error row of a (row, metric) a budget stop left unsent (kind ``budget``)."""
    return (
        f"not sent: the run stopped at its budget ({limit}); the same command with a higher budget (or none) "
        "sends it, paying only for what is not paid yet"
    )


def stop_error(budget: CostBudget, spent: float, worst: float | None, price: str, hint: str) -> Exception:
    """The error that stops a run at its cost budget: what the job paid, the bound, and the next step."""
    earlier = budget.earlier
    before = f" (${earlier:.4f} of it paid by earlier runs for the replies reused from the store)" if earlier else ""
    nxt = f", and the next request could cost up to ${worst:.4f}" if worst else ""
    return CostExceededError(
        f"the cost budget max_cost=${budget.limit:g} is used up: this job's replies cost ${earlier + spent:.4f}"
        f"{before} at {price}{nxt}. max_cost bounds the total paid for the job's replies in this store, earlier "
        f"runs included; {BOUND}. Raise it, then {hint}"
    )


class CostBudget:
    """A run's ``max_cost``, shared by the clients of a panel (see the module docstring).

    ``spent``: what this run's replies cost so far (every judge's, each at its own price).

    Example:
        >>> b = CostBudget(1.0, lambda: 0.25)
        >>> b.reused(0.5)
        >>> round(b.paid(), 2), b.fits(0.25), b.fits(0.3)
        (0.75, True, False)
    """

    def __init__(self, limit: float, spent: Callable[[], float]):
        self.limit = limit
        self.spent = spent
        self.earlier = 0.0  # what earlier runs paid for the replies this run reuses
        self.reserved = 0.0  # the worst cases of the requests in flight
        self.in_flight = 0
        self._queue: deque[object] = deque()  # the requests waiting to be admitted, first come first served
        self._changed: asyncio.Future | None = None

    def paid(self) -> float:
        """This job's replies: what earlier runs paid for those reused, and this run's."""
        return self.earlier + self.spent()

    def reused(self, cost: float) -> None:
        """A reply of the store, paid by an earlier run, is this job's too."""
        self.earlier += cost

    def fits(self, worst: float) -> bool:
        # not `>`: a NaN total is no proof of room left
        return self.paid() + self.reserved + worst <= self.limit

    async def admit(self, worst: float, stop: Callable[[float], BaseException]) -> None:
        """Reserve ``worst`` USD for a request about to be sent: at once where it fits and nobody waits, else
        after the requests before it, as replies bring reservations back. Raises ``stop()`` when nothing is in
        flight and it still does not fit (``stop(worst)``). Every admitted request is :meth:`release`\\ d once."""
        if not self._queue and self.fits(worst):
            self._take(worst)
            return
        me = object()
        self._queue.append(me)
        try:
            while True:
                if self._queue[0] is me:
                    if self.fits(worst):
                        self._take(worst)
                        return
                    if not self.in_flight:
                        raise stop(worst)
                if self._changed is None or self._changed.done():
                    self._changed = asyncio.get_running_loop().create_future()
                await asyncio.shield(self._changed)
        finally:
            self._queue.remove(me)
            self._signal()

    def release(self, worst: float) -> None:
        """A request's reply (or failure) came: its reservation goes back, its usage is in ``spent`` now."""
        self.in_flight -= 1
        self.reserved = self.reserved - worst if self.in_flight else 0.0  # no float residue once all are back
        self._signal()

    def _take(self, worst: float) -> None:
        self.in_flight += 1
        self.reserved += worst

    def _signal(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
