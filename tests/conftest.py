import signal
from pathlib import Path

from azure_fixture import azure, azure_server  # noqa: F401  (Azurite on loopback: started by the first test that asks)
from gcs_fixture import gcs, gcs_server  # noqa: F401  (a GCS emulator on loopback: likewise)
from hub_fixture import *  # noqa: F401,F403  (before any fixture that imports datasets: sets HF_ENDPOINT)
from judge_fixture import *  # noqa: F401,F403
from llama_fixture import llama_server  # noqa: F401  (session-scoped: one llama.cpp server for every test that asks)
from object_store_fixture import object_store  # noqa: F401  (each of the three in turn)
from s3_fixture import s3, s3_server  # noqa: F401  (a loopback S3 server: moto, started by the first test that asks)
from vllm_fixture import tiny_model, vllm_server  # noqa: F401  (session-scoped: one vLLM server of a tiny model)

# A shell starts a background job (`pytest ... &` in a script, nohup) with SIGINT ignored, and children inherit
# that: the Ctrl-C tests' processes would never see their SIGINT. A handler, unlike "ignored", is reset to the
# default when a child starts, so the children get Python's KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# --doctest-modules would import every module here; the helpers are not tests, and score_job.py is a
# script whose import switches datasets' progress bars off for the whole session
collect_ignore = [p.name for p in Path(__file__).parent.glob("*.py") if not p.name.startswith(("test_", "conftest"))]
# packs/: metric packs the tests install in a temporary folder (tests/test_metric_packs.py); importing one from
# here would make its package importable from the wrong folder for the whole session
collect_ignore.append("packs")
# counter_probe/: a script and a sitecustomize.py that patches the client (tests/test_counters.py starts them in a
# process of their own); imported here they would switch progress bars off and add the probe counter session-wide
collect_ignore.append("counter_probe")
# fake_vllm/: a stand-in `vllm` package for the processes tests start (tests/test_vllm_turns.py)
collect_ignore.append("fake_vllm")


def pytest_terminal_summary(terminalreporter):
    """After a run that ran the docs' examples (tests/test_docs_examples.py), how many of their blocks ran."""
    ran = [
        r
        for key in ("passed", "failed", "skipped", "error")
        for r in terminalreporter.stats.get(key, [])
        if "test_docs_examples.py::test_page" in getattr(r, "nodeid", "")
    ]
    if not ran:
        return
    from test_docs_examples import count

    c = count()
    terminalreporter.write_line(
        f"docs examples: {c.blocks - len(c.skipped)} of {c.blocks} python/bash blocks of README.md and docs/ run, "
        f"{len(c.skipped)} skipped (marked `<!-- skip: reason -->`)"
    )
