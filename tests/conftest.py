import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hub_fixture import *  # noqa: F401,F403  (first: sets HF_ENDPOINT before datasets is imported)
from judge_fixture import *  # noqa: F401,F403
from llama_fixture import llama_server  # noqa: F401  (session-scoped: one llama.cpp server for every test that asks)

# A shell starts a background job (`pytest ... &` in a script, nohup) with SIGINT ignored, and children inherit
# that: the Ctrl-C tests' processes would never see their SIGINT. A handler, unlike "ignored", is reset to the
# default when a child starts, so the children get Python's KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# --doctest-modules would import every module here; the helpers are not tests, and score_job.py is a
# script whose import switches datasets' progress bars off for the whole session
collect_ignore = [p.name for p in Path(__file__).parent.glob("*.py") if not p.name.startswith(("test_", "conftest"))]


def pytest_collection_modifyitems(config, items):
    """With pytest-xdist (``-n 2``): ``--dist loadgroup`` keeps a test file on one worker, so its module
    fixtures run once (test_cache's reference run), and puts every real-model
    test in one group, so two llama.cpp servers never share the machine's cores."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = "real_server" if item.get_closest_marker("real_server") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session):
    """Start the Hub-unreachable run (helpers.start_hub_unreachable) now, when its test is to run: it sleeps
    ~23 s in huggingface_hub's retries while the other tests run. Not on a pytest-xdist worker: every worker
    collects every test, and the test starts its own run there."""
    if hasattr(session.config, "workerinput"):
        return
    if any(item.name == "test_hub_unreachable_is_one_line_at_exit_1" for item in session.items):
        from helpers import HUB_UNREACHABLE, start_hub_unreachable

        folder = Path(tempfile.mkdtemp(prefix="hfj-hub-unreachable-"))
        session.config.stash[HUB_UNREACHABLE] = start_hub_unreachable(folder)
        session.config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        session.config.add_cleanup(lambda: _stop(session.config.stash[HUB_UNREACHABLE]))


def _stop(proc) -> None:
    if proc.poll() is None:  # its test did not run (-x stopped the session before it)
        proc.kill()
    proc.communicate()
