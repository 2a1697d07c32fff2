"""The one-process engine: a split's rows through ``Dataset.map`` over a :class:`~.pipeline.SplitRun`, its requests
on the run's event loop. Everything around it is the run driver's (:mod:`.driver`); :func:`map_scores`, the feed,
the map and the cancel, is also what each ``num_workers`` process runs on its shard (:mod:`.workers`)."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset, Features

from ..errors import DiskFullError
from ..pages import release
from ..progress import datasets_bars_off
from ..store.sqlite import is_disk_full
from .batch_book import in_flight, server_tag
from .driver import SplitResult, results_disk_full
from .pipeline import SplitRun

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..transport.client import JudgeClient, Outcome
    from .driver import Run, SplitScope, SplitWork
    from .loop import LoopThread

logger = logging.getLogger("hf_judge")


class OneProcess:
    """Splits scored in this process, one after the other (``score_dataset`` on a Dataset). ``unsent``: how a
    request the store lacks ends instead of being sent (batch mode's, see :class:`~.batch_mode.BatchMode`).

    Example:
        >>> scored = Run(job, OneProcess(), progress=False).score(ds)  # doctest: +SKIP
    """

    name = "dataset"
    unsent: Callable[[bytes], Outcome | None] | None = None

    def before_splits(self, run: Run, works: list[SplitWork]) -> None:
        """An online run does not collect batches: requests in them that it needs are sent and paid for again."""
        if run.use_cache and any(w.plans for w in works):
            warn_batches_in_flight(run.job.store_file, run.client)

    def dispatch(self, run: Run, work: SplitWork, scope: SplitScope) -> SplitResult:
        res = run.resources
        assert res is not None  # the driver holds them while it dispatches
        res.open()
        assert res.loop is not None  # open() started it
        d = work.data
        split = res.active = SplitRun(
            work.name,
            d,
            work.plans,
            run.client,
            res.store,
            window=run.window,
            max_input_chars=run.max_input_chars,
            token_columns=run.token_columns,
            on_progress=scope.on_progress,
            unsent=self.unsent,
            judges=run.clients,
            layout=run.layout,
            partial=True,
        )
        out = scope.out if run.use_cache else None
        try:
            scores = map_scores(res.loop, split, d, work.features, work.fingerprint, out, settle=scope.bar is not None)
        except OSError as e:
            if not is_disk_full(e):
                raise
            folder = out.parent if out is not None else None
            _close_left_open(e, folder)
            if isinstance(split.failure, DiskFullError):
                raise split.failure from None
            raise results_disk_full(work.cache_file.parent, e, _results_needed(folder, split, len(d))) from None
        release(split.input_files)  # read again only where used
        res.active = None
        return SplitResult(scores, split.in_order(split.errors), split.stopped)


def map_scores(
    loop: LoopThread,
    run: SplitRun,
    data: Dataset,
    features: Features,
    fingerprint: str,
    out: Path | None,
    *,
    settle: bool = False,
) -> Dataset:
    """The score columns of ``data``: ``run`` fed on ``loop`` while ``Dataset.map`` takes the rows' values in order,
    written to ``out`` (an Arrow file; None: kept in memory); the feeder cancelled however the map ends.
    ``settle``: wait (at most 30 s) for the feeder's last progress report, as a bar closed after it wants."""
    kwargs: dict[str, Any] = {"cache_file_name": str(out)} if out is not None else {"keep_in_memory": True}
    feeder = loop.submit(run.feed())
    try:
        with datasets_bars_off():  # the map's bar moves per batch; ours follows the replies
            return data.map(
                lambda idx: run.consume(idx),
                batched=True,
                with_indices=True,
                input_columns=[],
                remove_columns=data.column_names,
                features=features,
                new_fingerprint=fingerprint,
                desc=f"Scoring {run.split}",
                load_from_cache_file=False,
                **kwargs,
            )
    finally:
        if not feeder.done():
            loop.run(run.cancel())
            feeder.cancel()
        if settle:
            try:
                feeder.result(30)  # its last report reaches the bar before the bar closes
            except BaseException:  # noqa: BLE001 - the map has raised it already
                pass


def warn_batches_in_flight(store_path: Path, client: JudgeClient) -> None:
    """An online run does not collect batches: requests in them that it needs are sent and paid for again."""
    batches, requests = in_flight(store_path, server_tag(client))
    if batches:
        logger.warning(
            "%s of %s requests %s in flight at this server (see `hf-judge batch status`); this online run sends "
            "those it needs again and pays for them twice. To collect them instead, stop and add --batch "
            "(batch=True); to drop them, `hf-judge batch cancel` first",
            f"{batches:,} batch" + ("es" if batches != 1 else ""),
            f"{requests:,}",
            "is" if batches == 1 else "are",
        )


def _close_left_open(error: BaseException, folder: Path | None) -> None:
    """Close the files in ``folder`` that a map stopped by a full disk left open.

    When the disk is full, finalizing the map's writer fails again, and datasets
    then leaves its temporary file (and the writer's stream) open: their last
    flush, at garbage collection, would print an ignored-exception traceback.
    """
    if folder is None:
        return
    prefix = str(folder)
    for frame, _ in traceback.walk_tb(error.__traceback__):
        for v in list(frame.f_locals.values()):
            for f in (v, getattr(v, "stream", None)):
                if f is None:
                    continue
                name = getattr(f, "name", None) or getattr(f, "path", None)
                if isinstance(name, str) and name.startswith(prefix) and callable(getattr(f, "close", None)):
                    try:
                        f.close()
                    except (OSError, ValueError):
                        pass


def _results_needed(folder: Path | None, run: SplitRun, rows: int) -> int | None:
    """About the space the rest of a split's scores take, judged by what the map had written."""
    if folder is None or not run.consumed:
        return None
    written = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    return int(written / run.consumed * (rows - run.consumed) * 1.2) if written else None
