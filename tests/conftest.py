from hub_fixture import *  # noqa: F401,F403  (first: sets HF_ENDPOINT before datasets is imported)
from judge_fixture import *  # noqa: F401,F403
