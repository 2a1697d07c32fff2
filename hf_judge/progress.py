"""Live progress of a run: one bar that follows the replies as they arrive.

The pipeline reports a ``Progress`` a few times a second from its event loop
(rows finished, requests in flight, errors so far); a callable passed as
``score_dataset(progress=...)`` receives them, and the default draws them as a
tqdm bar that honours the library switch (``datasets.disable_progress_bars()``
or ``HF_DATASETS_DISABLE_PROGRESS_BARS=1``) and shows as a widget in a
notebook. ``Dataset.map``'s own bar, which moves once per map batch, is
switched off meanwhile so that one bar tells the truth.

Outside a terminal (stderr a file or a pipe: a log, CI) a bar's carriage-return
updates would be dozens of lines a row; there the progress is one plain line
every ``LOG_INTERVAL`` seconds and one at the end, and the CLI (``for_logs``)
switches off the bars of datasets and huggingface_hub.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from . import constants

# seconds between two reports: several a second, yet nothing at 8,000 requests/s
INTERVAL = 0.1
# seconds between two progress lines outside a terminal
LOG_INTERVAL = 5.0
# True while for_logs() has switched datasets' bars off: that is not the user's switch, so ours still report
_bars_off_for_logs = False


@dataclass(frozen=True)
class Progress:
    """Where the scoring of one split stands.

    Example:
        >>> seen = []
        >>> score_dataset(ds, ["QA_All"], model="m", progress=seen.append)  # doctest: +SKIP
        >>> seen[-1].rows_done == seen[-1].rows_total  # doctest: +SKIP
        True
    """

    split: str
    rows_done: int
    rows_total: int
    in_flight: int
    errors: int
    requests: int
    elapsed_s: float

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0


ProgressCallback = Callable[[Progress], None]


class ProgressBar:
    """Draws ``Progress`` reports as a tqdm bar (rows), with in flight, errors and requests/s; outside a
    terminal, as a plain line every ``LOG_INTERVAL`` seconds of ``clock`` and one at the end.

    Example:
        >>> now = [0.0]
        >>> bar = ProgressBar("train", 8, stream=sys.stdout, clock=lambda: now[0])
        >>> for done in range(9):
        ...     now[0] = done * 2.0
        ...     bar(Progress("train", done, 8, 8 - done, 0, done, now[0]))
        Scoring train: 0/8 rows (0%), 8 in flight, 0 errors, 0 requests/s, 0 s
        Scoring train: 3/8 rows (38%), 5 in flight, 0 errors, 0.5 requests/s, 6 s
        Scoring train: 6/8 rows (75%), 2 in flight, 0 errors, 0.5 requests/s, 12 s
        Scoring train: 8/8 rows (100%), 0 in flight, 0 errors, 0.5 requests/s, 16 s
        >>> bar.close()
    """

    def __init__(
        self,
        split: str,
        total: int | None,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        # tqdm.auto, off when datasets' progress bars are
        from datasets.utils.tqdm import are_progress_bars_disabled, tqdm

        self.stream = stream if stream is not None else sys.stderr
        self.plain = not _interactive(self.stream)
        self.split, self.total, self.clock = split, total, clock
        self.last_line: float | None = None
        self.latest: Progress | None = None  # the last report, printed or not
        self.shown: Progress | None = None  # the last report printed
        self.bar = None
        if self.plain:
            self._disabled = are_progress_bars_disabled() and not _bars_off_for_logs
        else:
            self.bar = tqdm(
                total=total, desc=f"Scoring {split}", unit=" rows", mininterval=INTERVAL, dynamic_ncols=True
            )
            self._disabled = bool(self.bar.disable)

    @property
    def disabled(self) -> bool:
        return self._disabled

    def __call__(self, p: Progress) -> None:
        if self.bar is None:
            self._line(p)
            return
        self.bar.set_postfix(in_flight=p.in_flight, errors=p.errors, req_s=f"{p.requests_per_s:,.0f}", refresh=False)
        delta = p.rows_done - self.bar.n
        if delta > 0:
            self.bar.update(delta)
        else:
            self.bar.refresh()

    def _line(self, p: Progress) -> None:
        self.latest = p
        now = self.clock()
        finished = self.total is not None and p.rows_done >= self.total
        if self.last_line is not None and now - self.last_line < LOG_INTERVAL and not finished:
            return
        if finished and self.shown is not None and self.shown.rows_done == p.rows_done:
            return  # said already
        self.last_line, self.shown = now, p
        of = f"/{self.total:,} rows ({p.rows_done / self.total:.0%})" if self.total else " rows"
        rate = p.requests_per_s
        print(
            f"Scoring {self.split}: {p.rows_done:,}{of}, {p.in_flight:,} in flight, {p.errors:,} errors, "
            f"{rate:,.{1 if 0 < rate < 10 else 0}f} requests/s, {p.elapsed_s:,.0f} s",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.latest is not None and self.latest is not self.shown:
            self.last_line = None  # the end of the split: its last figures, whenever the last line was
            self._line(self.latest)


def _interactive(stream: TextIO) -> bool:
    """A terminal, or a notebook (whose stderr is no terminal, yet draws tqdm as a widget)."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):  # a closed or odd stream
        return False
    ipython = sys.modules.get("IPython")  # imported only in IPython itself
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def interactive(stream: TextIO) -> bool:
    """Whether ``stream`` reaches a person at a terminal (or a notebook) rather than a log.

    Example:
        >>> import io
        >>> interactive(io.StringIO())
        False
    """
    return _interactive(stream)


def bars_wanted() -> bool:
    """Whether hf-judge reports progress and batch news: datasets' bars are on, or off only for a log."""
    from datasets.utils.tqdm import are_progress_bars_disabled

    return not are_progress_bars_disabled() or _bars_off_for_logs


@contextlib.contextmanager
def for_logs(stream: TextIO | None = None) -> Iterator[None]:
    """Outside a terminal, for the block: datasets' and huggingface_hub's bars off (their carriage-return
    updates, "Generating train split", "Saving the dataset", fill a log), hf-judge's progress as plain lines.
    In a terminal, or where the user turned the bars on or off (their switches, their variables), nothing changes.
    """
    global _bars_off_for_logs
    from datasets import config
    from datasets.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from huggingface_hub import constants as hub_constants
    from huggingface_hub.utils import are_progress_bars_disabled as hub_bars_disabled
    from huggingface_hub.utils import disable_progress_bars as hub_bars_off
    from huggingface_hub.utils import enable_progress_bars as hub_bars_on

    stream = stream if stream is not None else sys.stderr
    ours = (
        not _interactive(stream)
        and not are_progress_bars_disabled()
        and config.HF_DATASETS_DISABLE_PROGRESS_BARS is None
    )
    hub = ours and not hub_bars_disabled() and hub_constants.HF_HUB_DISABLE_PROGRESS_BARS is None
    if not ours:
        yield
        return
    disable_progress_bars()
    if hub:
        hub_bars_off()
    _bars_off_for_logs = True
    try:
        yield
    finally:
        _bars_off_for_logs = False
        enable_progress_bars()
        if hub:
            hub_bars_on()


# the loggers of the warnings a push prints that say nothing to the user: "Setting num_proc from 1 back to 1
# for the train split" (datasets, for every split of one shard), "Repo card metadata block was not found"
# (huggingface_hub, reading a card without metadata)
LIBRARY_CHATTER = ("datasets.arrow_dataset", "datasets.iterable_dataset", "huggingface_hub.repocard")


@contextlib.contextmanager
def quiet(*loggers: str) -> Iterator[None]:
    """Only errors from these libraries' loggers for the block: warnings that tell the user nothing they
    can act on ("Setting num_proc from 1 back to 1", "Repo card metadata block was not found").
    ``HF_JUDGE_DEBUG=1`` keeps them.

    Example:
        >>> with quiet("datasets.arrow_dataset"):
        ...     logging.getLogger("datasets.arrow_dataset").warning("Setting num_proc from 1 back to 1")
    """
    if constants.debug_enabled():
        yield
        return
    found = [logging.getLogger(name) for name in loggers]
    before = [log.level for log in found]
    for log in found:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for log, level in zip(found, before, strict=True):
            log.setLevel(level)


@contextlib.contextmanager
def datasets_bars_off():
    """Switch off ``datasets``' own progress bars for the duration (``Dataset.map``'s, an empty split's save)."""
    from datasets import config
    from datasets.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    if are_progress_bars_disabled() or config.HF_DATASETS_DISABLE_PROGRESS_BARS is False:
        # already off, or the user forced them on with HF_DATASETS_DISABLE_PROGRESS_BARS=0
        yield
        return
    disable_progress_bars()
    try:
        yield
    finally:
        enable_progress_bars()
