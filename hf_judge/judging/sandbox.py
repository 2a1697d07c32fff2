"""The jinja2 sandbox every template renders in, with bounds on what one render may build and how long it may run.

jinja2's sandbox stops a template from reading files or running code, not from asking for memory or time:
``{{ 'x' * 3000000000 }}`` builds 3 GB, two nested ``range`` loops run for minutes. A template that is the user's own
prompt file is trusted; one recorded in a ``summary.json`` that someone else wrote (``hf-judge view`` and
``show-prompt`` on a Hub result) is not. Inside :func:`render_limits`, each render may

- build no value (an operator's result, a filter's, a method's, a value printed) larger than its *character
  budget*: ``chars`` plus four times the characters of the values it was given, so a long document still renders;
- print no more than that budget in all (what ``{% set %}`` blocks and macros capture included);
- run no more than ``loops`` loop iterations and ``seconds`` seconds.

Past a bound the render stops with :class:`RenderLimitError`, which says which bound and why. Outside
:func:`render_limits` (a scoring run) nothing is counted.

Each check is made before the value is built, from its operands' sizes (a list's size counts every item it
refers to, so a list of one long string repeated is as large as its printed form).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any

from jinja2 import nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum

from ..errors import TemplateError

CHARS = 1_000_000  # characters a render may build beyond four times what it was given
SECONDS = 2.0  # per render
LOOPS = 1_000_000  # loop iterations per render
_DIGITS = re.compile(r"\d+")


class RenderLimitError(TemplateError):
    """A render went past a bound of :func:`render_limits`; the message names it."""


@dataclass
class _Budget:
    chars: int
    seconds: float
    deadline: float
    loops: int
    printed: int = 0

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderLimitError(f"the template ran past its time budget of {self.seconds:g} s")

    def fits(self, size: int, what: str) -> None:
        self.tick()
        if size > self.chars:
            raise RenderLimitError(
                f"{what} would build about {size:,} characters, more than the {self.chars:,} a render may "
                "(a recorded prompt renders within bounds: is this summary.json from a source you trust?)"
            )


_limits: ContextVar[tuple[int, float, int] | None] = ContextVar("hf_judge_render_limits", default=None)
_budget: ContextVar[_Budget | None] = ContextVar("hf_judge_render_budget", default=None)


@contextmanager
def render_limits(chars: int = CHARS, seconds: float = SECONDS, loops: int = LOOPS) -> Iterator[None]:
    """Bound every template render inside the block (see the module docstring).

    Example:
        >>> from hf_judge.judging.render import compile_template, render
        >>> with render_limits():
        ...     render(compile_template("{{ 'x' * 3000000000 }}", "t"), {}, "t")
        Traceback (most recent call last):
        ...
        hf_judge.judging.sandbox.RenderLimitError: t: `*` would build about 3,000,000,000 characters, ...
    """
    token = _limits.set((chars, seconds, loops))
    try:
        yield
    finally:
        _limits.reset(token)


@contextmanager
def budget_for(values: Any) -> Iterator[None]:
    """One render's budget, where :func:`render_limits` is in force (``values``: what the template is given)."""
    limits = _limits.get()
    if limits is None:
        yield
        return
    chars, seconds, loops = limits
    given = size_of(values, 10**15)
    token = _budget.set(_Budget(chars + 4 * given, seconds, time.monotonic() + seconds, loops))
    try:
        yield
    finally:
        _budget.reset(token)


def size_of(value: Any, stop: int) -> int:
    """About how many characters ``value`` prints as, every item a container refers to counted each time it is
    referred to; counting stops past ``stop``."""
    total, stack = 0, [value]
    while stack and total <= stop:
        v = stack.pop()
        if isinstance(v, (str, bytes)):
            total += len(v)
        elif v is None or isinstance(v, (bool, float)):
            total += 5
        elif isinstance(v, int):
            total += v.bit_length() // 3 + 1
        elif isinstance(v, dict):
            total += 1
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 1
            stack.extend(v)
        else:  # a namespace, a cycler: what it holds
            total += 1
            stack.extend(getattr(v, "__dict__", {}).values())
    return total


def _int(v: Any, default: int = 0) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _widths(fmt: str, limit: int) -> int:
    """The widths and precisions a format string may pad to (every number in it, which is more)."""
    return sum(min(int(d), limit + 1) if len(d) < 16 else limit + 1 for d in _DIGITS.findall(fmt))


def _binop_size(op: str, left: Any, right: Any, stop: int) -> int:
    ints = [isinstance(x, int) and not isinstance(x, bool) for x in (left, right)]
    if op == "*":
        if all(ints):
            return (left.bit_length() + right.bit_length()) // 3
        if ints[0] != ints[1]:
            n, seq = (left, right) if ints[0] else (right, left)
            if isinstance(seq, (str, list, tuple)):
                return max(n, 0) * size_of(seq, stop)
    elif op == "**" and all(ints) and abs(left) > 1 and right > 0:
        return int(right * math.log2(abs(left)) / 3)
    elif op == "+" and isinstance(left, (str, list, tuple)):
        return size_of(left, stop) + size_of(right, stop)
    elif op == "%" and isinstance(left, str):
        star = re.search(r"%[^a-zA-Z%]*\*", left) is not None
        return len(left) + size_of(right, stop) + _widths(left, stop) + (stop + 1) * star
    return 0


def _str_method_size(obj: str, name: str, args: tuple, kwargs: dict, stop: int) -> int:
    """What a str method called from a template builds, where it can build more than it is given."""
    n = len(obj)
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(n, _int(args[0] if args else kwargs.get("width")))
    if name == "expandtabs":
        return n + obj.count("\t") * max(_int(args[0] if args else kwargs.get("tabsize"), 8), 0)
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        hits = obj.count(args[0]) if args[0] else n + 1
        return n + hits * len(args[1])
    if name == "join" and args:
        items = args[0] if isinstance(args[0], (list, tuple)) else ()
        return n * len(items) + size_of(args[0], stop)
    if name in ("format", "format_map"):
        return n + _widths(obj, stop) + size_of([args, kwargs], stop)
    return n + size_of([args, kwargs], stop)


def _call_size(obj: Any, args: tuple, kwargs: dict, stop: int) -> int:
    target = getattr(obj, "__wrapped__", obj)  # the sandbox's wrapper of str.format
    owner = getattr(target, "__self__", None)
    if isinstance(owner, str):
        return _str_method_size(owner, getattr(target, "__name__", ""), args, kwargs, stop)
    if target is generate_lorem_ipsum:
        return _int(args[0] if args else kwargs.get("n"), 5) * _int(kwargs.get("max"), 100) * 12
    return size_of([args, kwargs], stop)


def _filter_size(name: str, args: tuple, kwargs: dict, stop: int) -> int:
    """What a filter builds, where it can build more than it is given (``args``: the value first)."""
    value = args[0] if args else None
    text = value if isinstance(value, str) else ""
    rest = args[1:]
    given = size_of([args, kwargs], stop)
    if name == "center":
        return max(given, _int(rest[0] if rest else kwargs.get("width"), 80))
    if name == "indent":
        width = rest[0] if rest else kwargs.get("width", 4)
        return given + (text.count("\n") + 1) * (len(width) if isinstance(width, str) else max(_int(width), 0))
    if name == "replace" and len(rest) >= 2 and isinstance(rest[0], str):
        hits = text.count(rest[0]) if rest[0] else len(text) + 1
        return given + hits * size_of(rest[1], stop)
    if name == "join":
        sep = rest[0] if rest else kwargs.get("d", "")
        count = len(value) if isinstance(value, (list, tuple, dict, set)) else 1
        return given + count * size_of(sep, stop)
    if name == "format":
        return given + _widths(text, stop)
    if name == "wordwrap":
        wrap = rest[3] if len(rest) > 3 else kwargs.get("wrapstring") or "\n"
        return given + len(text) * size_of(wrap, stop)
    return given


def _guard_filter(name: str, f: Callable) -> Callable:
    """``f``, checked against the render's budget before it runs. It takes the context (as ``pass_context``),
    which also keeps jinja2 from running it while it compiles a template (constant folding), outside any budget."""
    wants = getattr(getattr(f, "jinja_pass_arg", None), "name", None)

    @pass_context
    @wraps(f)
    def guarded(context: Context, *args: Any, **kwargs: Any) -> Any:
        b = _budget.get()
        if b is not None:
            b.fits(_filter_size(name, args, kwargs, b.chars), f"the filter `{name}`")
        if wants == "context":
            return f(context, *args, **kwargs)
        if wants == "eval_context":
            return f(context.eval_ctx, *args, **kwargs)
        if wants == "environment":
            return f(context.environment, *args, **kwargs)
        return f(*args, **kwargs)

    return guarded


def _loop(iterable: Any) -> Any:
    """A ``for`` loop's iterable, counted against the render's budget."""
    b = _budget.get()
    if b is None:
        return iterable

    def counted() -> Iterator[Any]:
        for item in iterable:
            b.loops -= 1
            if b.loops < 0:
                raise RenderLimitError("the template's loops ran more times than a render may")
            if b.loops % 1024 == 0:
                b.tick()
            yield item

    return counted()


class _BoundedCode(CodeGenerator):
    """The code jinja2 compiles a template to, with the budget's checks at each loop, ``~`` and printed value."""

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        loop = nodes.EnvironmentAttribute("hfj_loop", lineno=node.lineno)
        if not (isinstance(node.iter, nodes.Call) and node.iter.node == loop):
            node.iter = nodes.Call(loop, [node.iter], [], None, None, lineno=node.lineno)
        super().visit_For(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.hfj_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _output_const_repr(self, group: Any) -> str:
        return f"environment.hfj_printed({super()._output_const_repr(group)})"

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        self.write("environment.hfj_printed(")
        super()._output_child_pre(node, frame, finalize)
        self.write("environment.hfj_value(")

    def _output_child_post(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        self.write(")")
        super()._output_child_post(node, frame, finalize)
        self.write(")")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox whose renders keep to :func:`render_limits` where it is in force."""

    code_generator_class = _BoundedCode
    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        b = _budget.get()
        if b is not None:
            b.fits(_binop_size(operator, left, right, b.chars), f"`{operator}`")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja2's own
        b = _budget.get()
        if b is not None:
            name = getattr(__obj, "__name__", type(__obj).__name__)
            b.fits(_call_size(__obj, args, kwargs, b.chars), f"calling `{name}`")
        return super().call(__context, __obj, *args, **kwargs)

    hfj_loop = staticmethod(_loop)

    @staticmethod
    def hfj_value(value: Any) -> Any:
        """A value about to be printed: a container's printed form is checked before it is built."""
        b = _budget.get()
        if b is not None and not isinstance(value, str):
            b.fits(size_of(value, b.chars), "printing a value")
        return value

    @staticmethod
    def hfj_printed(text: str) -> str:
        """What a render prints, counted (a ``{% set %}`` block's and a macro's too)."""
        b = _budget.get()
        if b is not None:
            b.printed += len(text)
            if b.printed > b.chars:
                b.fits(b.printed, "what the template prints")
        return text

    @staticmethod
    def hfj_join(items: tuple) -> str:
        """``a ~ b``."""
        b = _budget.get()
        if b is not None:
            b.fits(size_of(items, b.chars), "`~`")
        return "".join(map(str, items))
