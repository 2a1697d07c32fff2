from pathlib import Path

from hub_fixture import *  # noqa: F401,F403  (first: sets HF_ENDPOINT before datasets is imported)
from judge_fixture import *  # noqa: F401,F403
from llama_fixture import llama_server  # noqa: F401  (session-scoped: one llama.cpp server for every test that asks)

# --doctest-modules would import every module here; the helpers are not tests, and score_job.py is a
# script whose import switches datasets' progress bars off for the whole session
collect_ignore = [p.name for p in Path(__file__).parent.glob("*.py") if not p.name.startswith(("test_", "conftest"))]
