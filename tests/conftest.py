from judge_fixture import *  # noqa: F401,F403
