"""Live progress of a run: one bar that follows the replies as they arrive.

The pipeline reports a ``Progress`` a few times a second from its event loop
(rows finished, requests in flight, errors so far); a callable passed as
``score_dataset(progress=...)`` receives them, and the default draws them as a
tqdm bar that honours the library switch (``datasets.disable_progress_bars()``
or ``HF_DATASETS_DISABLE_PROGRESS_BARS=1``) and shows as a widget in a
notebook. ``Dataset.map``'s own bar, which moves once per map batch, is
switched off meanwhile so that one bar tells the truth.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

# seconds between two reports: several a second, yet nothing at 8,000 requests/s
INTERVAL = 0.1


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
    """Draws ``Progress`` reports as a tqdm bar (rows), with in flight, errors and requests/s."""

    def __init__(self, split: str, total: int | None):
        from datasets.utils.tqdm import tqdm  # tqdm.auto, off when datasets' progress bars are

        self.bar = tqdm(total=total, desc=f"Scoring {split}", unit=" rows", mininterval=INTERVAL, dynamic_ncols=True)

    @property
    def disabled(self) -> bool:
        return bool(self.bar.disable)

    def __call__(self, p: Progress) -> None:
        self.bar.set_postfix(in_flight=p.in_flight, errors=p.errors, req_s=f"{p.requests_per_s:,.0f}", refresh=False)
        delta = p.rows_done - self.bar.n
        if delta > 0:
            self.bar.update(delta)
        else:
            self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


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
