"""A push to the Hub that Ctrl-C stops.

huggingface_hub uploads a commit's LFS files on a pool of threads, with no timeout on a request: a Ctrl-C that
reaches the main thread while it waits for them is held until every upload in flight has ended (the pool's ``with``
block joins its threads, and so does the interpreter at exit), and the commit then goes ahead: a push to the wrong
repo could not be stopped. :func:`stoppable_push` runs the push in a thread of its own while the calling thread
waits in a way a signal interrupts. At Ctrl-C, a hook on huggingface_hub's HTTP client refuses every request the
push would send next (the files not uploaded yet, the commit: nothing reaches the repo after it), and the caller
gets a :class:`~hf_judge.errors.PushInterrupted` that says which steps of the push reached the repo. A request in
flight cannot be aborted from Python: it ends on its own, in the background (``hf-judge`` does not wait for it,
see ``cli/entry.py``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import PushInterrupted

T = TypeVar("T")

# how often the waiting thread wakes; a signal interrupts the wait anyway
_POLL_S = 0.1
# the threads of pushes stopped by Ctrl-C (the push's own, and those it started: huggingface_hub's uploading
# threads), which end once their requests in flight have
_STOPPED: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


class PushCancelled(RuntimeError):
    """A request of a push that Ctrl-C stopped, refused before it was sent."""


class PushSteps:
    """The steps of one push (each a commit, or the commits of one part), and how far it went. The push calls
    :meth:`done` after each step; a Ctrl-C :meth:`cancel`\\ s it.

    Example:
        >>> steps = PushSteps("me/x", ["the scored splits", "the card"])
        >>> steps.done("the scored splits")
        >>> steps.message()
        'the push to me/x was interrupted: the scored splits reached the repo; the card did not'
    """

    def __init__(self, repo_id: str, steps: Sequence[str]):
        self.repo_id = repo_id
        self.steps = list(steps)
        self.finished: list[str] = []
        self.committing = False  # a commit of the current step was sent: it may land whatever happens here
        self.cancelled = threading.Event()

    def done(self, step: str) -> None:
        """``step`` reached the repo. Called by the push, in its own thread."""
        self.finished.append(step)
        self.committing = False

    def cancel(self) -> None:
        self.cancelled.set()

    def on_request(self, request: Any) -> None:
        """huggingface_hub's HTTP client calls this before each request of the process (an ``httpx`` hook)."""
        if self.cancelled.is_set():
            raise PushCancelled(f"the push to {self.repo_id} was interrupted (Ctrl-C)")
        if "/commit/" in str(getattr(request, "url", "")):
            self.committing = True

    def message(self) -> str:
        """What reached the repo and what did not."""
        left = [s for s in self.steps if s not in self.finished]
        if not self.finished and not self.committing:
            return (
                f"the push to {self.repo_id} was interrupted before its first commit: the repo is as it was (the files "
                "uploaded so far belong to no commit)"
            )
        text = f"the push to {self.repo_id} was interrupted: "
        if self.finished:
            text += f"{_listed(self.finished)} reached the repo; {_listed(left) if left else 'nothing'} did not"
        else:
            text += f"{_listed(left)} did not reach the repo"
        if self.committing:
            text += " (a commit was on its way: it may have landed; see the repo's history)"
        return text


def stopped_push_in_flight() -> bool:
    """Whether a push stopped by Ctrl-C still has a request in flight: a thread it started is alive."""
    return any(t.is_alive() for t in _STOPPED)


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def stoppable_push(repo_id: str, steps: Sequence[str], push: Callable[[PushSteps], T]) -> T:
    """Run ``push`` (given its :class:`PushSteps`, on which it marks each step done) so that Ctrl-C stops it:
    :class:`~hf_judge.errors.PushInterrupted` is raised at once, naming what reached ``repo_id``, and the push sends
    no request after it. Returns what ``push`` returns; raises what it raises.

    Example:
        >>> url = stoppable_push("me/x", ["the data", "the card"], lambda steps: upload(steps))  # doctest: +SKIP
    """
    state = PushSteps(repo_id, steps)
    unhook = _hook_requests(state.on_request)
    outcome: dict[str, Any] = {}
    ended = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = push(state)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = e
        finally:  # the hook goes once the push (and any upload it left in flight) has ended
            unhook()
            ended.set()

    before = set(threading.enumerate())
    thread = threading.Thread(target=run, name=f"hf_judge push to {repo_id}", daemon=True)
    thread.start()
    try:
        # an Event, not thread.join(): a join interrupted by Ctrl-C marks the thread stopped while it runs
        # (Python 3.11's fix of bpo-45274)
        while not ended.wait(_POLL_S):
            pass
    except KeyboardInterrupt:
        state.cancel()
        _STOPPED.update(set(threading.enumerate()) - before)
        raise PushInterrupted(state.message()) from None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _hook_requests(hook: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``hook`` before every request huggingface_hub sends (from any thread); returns what removes it.

    huggingface_hub 1.x sends through one ``httpx`` client (its ``event_hooks``); before 1.0, through a ``requests``
    session per thread made by the backend factory (``configure_http_backend``), whose ``send`` is wrapped."""
    from huggingface_hub.utils import get_session

    client = get_session()  # 1.x: the one client every huggingface_hub request of the process goes through
    if hasattr(client, "event_hooks"):
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "request": [*hooks.get("request", []), hook]}

        def unhook() -> None:
            now = client.event_hooks
            client.event_hooks = {**now, "request": [h for h in now.get("request", []) if h != hook]}

        return unhook
    from huggingface_hub import configure_http_backend  # type: ignore[attr-defined,unused-ignore]
    from huggingface_hub.utils import _http

    previous = getattr(_http, "_GLOBAL_BACKEND_FACTORY", None) or _http._default_backend_factory  # type: ignore[attr-defined,unused-ignore]

    def factory() -> Any:
        session = previous()
        send = session.send

        def hooked(request: Any, **kwargs: Any) -> Any:
            hook(request)
            return send(request, **kwargs)

        session.send = hooked
        return session

    configure_http_backend(factory)  # it also drops the sessions made so far: each thread makes a hooked one
    return lambda: configure_http_backend(previous)
