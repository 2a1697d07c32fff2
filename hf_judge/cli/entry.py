"""The ``hf-judge`` console script's entry point: :func:`main` parses, runs the command and turns every error
into one line and an exit code.

Exit codes: 0 the run finished (errors rows, if any, are saved and counted),
1 the run stopped early (auth, circuit breaker, budget), 2 usage or config
error, 3 the run finished and saved its result but lost something whole (every
request, a panel's judge, the local judge: ``cli.score.LOST``, said in its last
lines), 130 interrupted. Set ``HF_JUDGE_DEBUG=1`` for tracebacks and debug logs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys

from .. import constants
from ..errors import ConfigError, HfJudgeError, InterruptedRun, RunStopped
from ..progress import for_logs
from ..redact import install_log_filter, scrub
from .parser import build_parser, subcommands


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hf-judge`` console script.

    Example (what the console script runs; the exit code is 0, 1, 2, 3 or 130 as above):
        >>> sys.exit(main(["score", "data.jsonl", "--metrics", "QA_All", "--model", "judge"]))  # doctest: +SKIP
    """
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser({command} if command else set())
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command", None)
        # the command's own parser names it: `hf-judge score --help` lists the options that exist
        (subcommands(parser).get(command or "") or parser).error(_unrecognized(extra, parser, command))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(hub_login=args.command in ("score", "run", "filter"))
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        code = _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code == 130 and argv is None:  # the console script, which owns its process
        _exit_unheld(code)
    return code


def _run(args: argparse.Namespace) -> int:
    """The command, its errors one line each (a traceback with HF_JUDGE_DEBUG=1), and its exit code."""
    try:
        # stderr a log: plain progress lines, no library bars (the listing commands import no datasets)
        with for_logs() if args.command not in ("metrics", "recipes") else contextlib.nullcontext():
            return args.func(args)
    except InterruptedRun as e:
        print(f"hf-judge: {scrub(e)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        if getattr(args, "no_cache", False):
            hint = "The cache is off (--no-cache): nothing of this run was kept."
        else:
            hint = "Run the same command again to resume: finished replies are cached."
        print(f"hf-judge: interrupted. {hint}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `hf-judge ... | head`: the reader has gone, which is no error of the run (whatever it saved is
        # saved). Point stdout at /dev/null so that the interpreter's last flush does not complain again.
        out = sys.__stdout__
        if out is not None and sys.stdout is out:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 141  # 128 + SIGPIPE, as a shell pipeline reports a writer whose reader closed
    except ConfigError as e:
        _maybe_traceback()
        print(f"hf-judge: error: {scrub(e)}", file=sys.stderr)
        return 2
    except RunStopped as e:
        _maybe_traceback()
        print(f"hf-judge: stopped: {scrub(e)}", file=sys.stderr)
        return 1
    except HfJudgeError as e:
        _maybe_traceback()
        print(f"hf-judge: error: {scrub(e)}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one line unless debugging
        _maybe_traceback()
        print(
            f"hf-judge: error: {type(e).__name__}: {scrub(e)} (set HF_JUDGE_DEBUG=1 for the traceback)", file=sys.stderr
        )
        return 1


def _setup_logging(hub_login: bool = True) -> None:
    install_log_filter(hub_login=hub_login)
    level = logging.DEBUG if constants.debug_enabled() else logging.WARNING
    root = logging.getLogger("hf_judge")
    # one handler, on the current stderr, however often main() runs in one process (tests call it in-process)
    for old in [h for h in root.handlers if getattr(h, "_hf_judge_cli", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler._hf_judge_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.setLevel(level)
    root.addHandler(handler)


def _unrecognized(extra: list[str], parser: argparse.ArgumentParser, command: str | None) -> str:
    """argparse's "unrecognized arguments" message, with the closest option of the command for each misspelt one
    (Python 3.14's argparse suggests on its own; 3.11 does not)."""
    import difflib

    own = subcommands(parser).get(command or "")
    known = [o for a in own._actions for o in a.option_strings] if own else []
    hints = []
    for word in (w.split("=", 1)[0] for w in extra if w.startswith("-") and len(w) > 1):
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
        if close:
            hints.append(f"did you mean {close[0]} for {word}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else "")


def _exit_unheld(code: int) -> None:
    """End the process now where a push stopped by Ctrl-C still has uploads in flight (results/stoppable.py): they
    cannot be aborted (huggingface_hub's requests have no timeout) and nothing more is sent after the Ctrl-C, but
    the interpreter would wait for their threads at exit, as long as they take (the Ctrl-C that did nothing). The
    exit functions (temporary folders, logs) run; only that wait is skipped."""
    import atexit

    from ..results.stoppable import stopped_push_in_flight

    if not stopped_push_in_flight():
        return
    atexit._run_exitfuncs()  # noqa: SLF001 - what a normal exit runs, without its join of the uploading threads
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _sigterm(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def _maybe_traceback() -> None:
    if constants.debug_enabled():
        import traceback

        print(traceback.format_exc(), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
