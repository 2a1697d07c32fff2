"""The ``hf-judge`` command: a thin twin of the library (``main``), its inputs (a Hub id, a folder or a file),
recipes, and the seed tool's config format."""

from .commands import main

__all__ = ["main"]
