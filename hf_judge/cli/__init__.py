"""The ``hf-judge`` command: a thin twin of the library. ``main`` (entry.py) runs the parser (parser.py, built
from the shared option groups of options.py) and one module per command: score.py (``score``, ``run``),
filter.py, listing.py (``metrics``, ``recipes``), batch.py, agreement.py, merge.py; besides them, the job a
scoring command runs (job.py), where its result goes (save.py), its inputs (a Hub id, a folder or a file),
recipes, and the seed tool's config format."""

from .entry import main

__all__ = ["main"]
