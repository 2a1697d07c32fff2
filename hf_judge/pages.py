"""Keep the pages of memory-mapped Arrow files out of the resident set.

``datasets`` memory-maps its Arrow files. Rendering the prompts of a split
reads every row, and a page of a mapping, once read, stays in the process's
resident set (RSS) until the mapping is closed: a run over a 1,000,000-row
split ended with its whole input file resident (+70 MB), although the run
only ever needs a window of rows. Those pages are clean copies of the file in
the OS page cache, so telling the kernel we no longer need them
(``madvise(MADV_DONTNEED)``) takes them out of RSS and loses nothing: a later
read maps them again from the page cache, or from the file.

Only read-only mappings of the given files are released (for a writable
private mapping the call would discard changes). Linux only; elsewhere a
no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Iterable

logger = logging.getLogger("hf_judge")

_MADV_DONTNEED = 4
_libc = None


def _madvise():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.madvise.restype = ctypes.c_int
    return _libc.madvise


def file_paths(files: Iterable[dict]) -> frozenset[str]:
    """The real paths of a dataset's ``cache_files`` (as ``/proc/self/maps`` shows them)."""
    return frozenset(os.path.realpath(f["filename"]) for f in files if f.get("filename"))


def release(paths: frozenset[str]) -> int:
    """Drop this process's mapped pages of these files; returns the bytes of mappings released."""
    if not paths or not sys.platform.startswith("linux"):
        return 0
    released = 0
    try:
        madvise = _madvise()
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or fields[5].rstrip("\n") not in paths or "w" in fields[1]:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if madvise(start, end - start, _MADV_DONTNEED) == 0:
                    released += end - start
    except OSError as e:  # memory use only: never worth failing a run
        logger.debug("could not release mapped pages: %s", e)
    return released
