"""A counter added to the code, the way a new one is (tests/test_counters.py): a field ``probe`` of ``Stats`` and of
the run summary, in the counters tuple (``counting.SUMMED``), counted by the client once per reply whose tokens it
counts. Python imports this file at start-up in every process whose ``PYTHONPATH`` holds this folder: the run's own,
and those it starts (``num_workers``' forkserver and workers; Ray's actors and Spark's Python workers inherit the
variable too), so that each sends and reports with the counter, as code with a new counter would."""

from hf_judge.engine import counting
from hf_judge.results.summary import RunSummary
from hf_judge.transport.client import JudgeClient, Stats

Stats.probe = 0  # type: ignore[attr-defined]
RunSummary.probe = 0  # type: ignore[attr-defined]
counting.SUMMED = (*counting.SUMMED, "probe")
_add_tokens = JudgeClient._add_tokens


def _counting_replies(self: JudgeClient, prompt: int, completion: int) -> None:
    self.stats.probe += 1  # type: ignore[attr-defined]
    _add_tokens(self, prompt, completion)


JudgeClient._add_tokens = _counting_replies  # type: ignore[method-assign]
