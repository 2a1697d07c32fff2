"""A streamed run's folder of Parquet shards as the place its result goes: :class:`StreamSink`.

``ScoredIterableDatasetDict.save_to_disk`` (and so ``save_result`` and a streamed push, which saves to a
temporary folder first) writes through it: ``data/<split>-NNNNN.parquet`` as the rows arrive, each split read
once, ``errors/errors-NNNNN.parquet`` beside them, then the card (``README.md``, which tells ``load_dataset`` the
two configs), ``summary.json`` and the provenance files. Its progress (``hf_judge_progress.json``: each closed
shard with the input's ``state_dict()`` after it) lets a save of the same job that was stopped (Ctrl-C, a kill)
go on after its last closed shard; ``complete`` removes it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..results import plots
from ..results.card import FILES_DIR, picture_files, provenance_files, result_card, shard_scores
from ..results.errors_split import ERROR_FEATURES, ErrorFiles, ErrorWriter
from ..results.report import REPORT_FILE
from ..results.summary import SUMMARY_FILE

if TYPE_CHECKING:
    from ..analysis.agreement import AgreementReport
    from ..results.summary import RunSummary

logger = logging.getLogger("hf_judge")

# A save's progress beside its shards: the splits written, and where to go on after the last closed shard.
PROGRESS = "hf_judge_progress.json"
ERRORS_STEM = "errors"  # error files are errors-NNNNN.parquet, numbered in the order the rows were written


class StreamSink:
    """The Parquet shards of a stream's result in ``root`` (a :class:`~hf_judge.results.sink.ResultSink`).
    ``streams``: the result's ``engine.stream.Streams`` (its splits' scored tables, features, summary, error rows
    and page), read through its public methods; ``shard_bytes``: a shard is closed after this many bytes of Arrow
    data; ``reports``: agreement reports for the card.

    Example:
        >>> sink = StreamSink(streams, Path("out"), 256 << 20)  # doctest: +SKIP
        >>> write_through(sink, [("train", None)], None, summary)  # doctest: +SKIP
    """

    def __init__(self, streams: Any, root: Path, shard_bytes: int, reports: Sequence[AgreementReport] = ()):
        self.streams, self.root, self.shard_bytes, self.reports = streams, root, shard_bytes, reports
        self.progress: dict[str, Any] = {}
        self.files: dict[str, list[Path]] = {}
        self.error_paths: Iterator[Path] = iter(())

    def start(self) -> None:
        """The folder made; an earlier save of the same job taken up (its closed shards kept, its runs counted),
        any other file in ``data/`` and ``errors/`` removed (a shard open when a run was killed has no footer)."""
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        self.progress = read_progress(root / PROGRESS, self.streams.job_key())
        kept = {
            sub: {name for entry in self.progress["splits"].values() for name in entry[key]}
            for sub, key in (("data", "shards"), ("errors", "errors"))
        }
        for sub, names in kept.items():
            (root / sub).mkdir(exist_ok=True)
            for old in (root / sub).glob("*.parquet"):
                if old.name not in names:
                    old.unlink()
        self.streams.run.summary.add_runs(self.progress["runs"])
        last = max((int(Path(n).stem.rsplit("-", 1)[1]) for n in kept["errors"]), default=0)
        # errors-00000 is the input's own error rows (write_errors), then each split's
        self.error_paths = (root / "errors" / f"{ERRORS_STEM}-{k:05d}.parquet" for k in itertools.count(1 + last))

    def write(self, split: str, data: Any = None) -> list[Path]:  # noqa: ARG002 - ResultSink.write's
        """Write one split's shards as ``streams`` scores it (``data``: unused, the stream reads its own input),
        recording in the progress each closed shard with the input's state after it, and its error rows to
        files of their own, each closed with the data shard whose rows they are."""
        self.files[split] = _write_split(
            self.streams, split, self.root, self.shard_bytes, self.progress, self.error_paths
        )
        return self.files[split]

    def write_errors(self, errors: Any = None) -> None:  # noqa: ARG002 - ResultSink.write_errors's
        """The input's own error rows (``errors/errors-00000.parquet``); the splits' were written with their
        shards. A folder without error rows still gets a file, so that the errors config loads as 0 rows."""
        first = self.root / "errors" / f"{ERRORS_STEM}-00000.parquet"
        if self.streams.earlier.files:
            shutil.copyfile(self.streams.earlier.files[0], first)
        if not any((self.root / "errors").glob("*.parquet")):
            write_table(ERROR_FEATURES.arrow_schema.empty_table(), first)

    def complete(self, summary: RunSummary | None) -> None:
        """The report page (where the stream kept one), the card, the provenance files and ``summary.json``;
        the progress file goes: the save is complete."""
        root = self.root
        page = _page_file(self.streams, root)
        card, pictures = card_text(self.streams, self.files, self.reports, page)
        for name, content in {**(provenance_files(summary) if summary is not None else {}), **pictures}.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
        text = json.dumps(summary.to_dict() if summary is not None else {}, indent=1, default=str)
        (root / SUMMARY_FILE).write_text(text, encoding="utf-8")
        (root / "README.md").write_text(card, encoding="utf-8")
        (root / PROGRESS).unlink(missing_ok=True)

    def fail(self, error: BaseException) -> None:  # noqa: ARG002 - ResultSink.fail's
        """The closed shards and the progress stay (``_write_split`` closes the open one and records it): the same
        save again goes on after them."""


def write_table(table: pa.Table, path: Path) -> None:
    """``pq.write_table``, but 0 rows make a file of no row group: datasets' Parquet reader takes a batch size
    from the first row group's rows and fails on a row group of 0 ("BatchSize must be greater than 0")."""
    if table.num_rows:
        pq.write_table(table, path)
    else:
        pq.ParquetWriter(path, table.schema).close()


def read_progress(path: Path, job: str) -> dict[str, Any]:
    """The progress of an earlier save of ``job`` in the folder, or a fresh one."""
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(progress, dict) and progress.get("job") == job:
            return progress
        logger.info("%s belongs to another job: writing the result from the start", path)
    except (OSError, ValueError):
        pass
    return {"job": job, "splits": {}, "runs": []}


def save_progress(path: Path, progress: dict[str, Any]) -> None:
    """The progress written whole or not at all (a kill while it is written leaves the earlier one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(progress, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _write_split(
    streams: Any, split: str, root: Path, shard_bytes: int, progress: dict[str, Any], error_paths: Iterator[Path]
) -> list[Path]:
    """Write one split's shards, recording in ``progress`` each closed shard with the input's state after it, and
    its error rows to files of ``error_paths``, each closed with the data shard whose rows they are."""
    schema = streams.features[split].arrow_schema
    new = {"shards": [], "rows": 0, "state": None, "errors": [], "kinds": {}, "done": False}
    entry = progress["splits"].setdefault(split, new)
    paths = [root / "data" / name for name in entry["shards"]]
    done = ErrorFiles([root / "errors" / name for name in entry["errors"]], entry["kinds"])
    if streams.page is not None:  # a push's save, into a new folder: never one resumed
        streams.page.start(split, streams.features[split], streams.run.summary)
    if entry["done"]:
        streams.finished(split, entry["rows"], done)
        return paths
    rows, state = entry["rows"], entry["state"]
    errors = ErrorWriter(error_paths, done)
    writer: pq.ParquetWriter | None = None
    size = 0

    def record(done: bool = False) -> None:
        errors.close_file()  # the error rows of the rows written so far, and no others
        names = [f.name for f in errors.done.files]
        entry.update(shards=[p.name for p in paths], rows=rows, state=state, errors=names, done=done)
        entry["kinds"] = dict(errors.done.kinds)
        progress["runs"] = streams.run.summary.runs
        save_progress(root / PROGRESS, progress)

    resume = entry if entry["rows"] else None
    try:
        # closed as an error leaves: the reading's store closes and its count is final before the message is made
        with contextlib.closing(streams.tables(split, resume)) as tables:
            for table, errs, after in tables:
                if writer is None or size >= shard_bytes:
                    if writer is not None:
                        writer.close()
                        record()
                    paths.append(root / "data" / f"{split}-{len(paths):05d}.parquet")
                    writer, size = pq.ParquetWriter(paths[-1], schema), 0
                writer.write_table(table)
                if streams.page is not None:
                    streams.page.add(split, table, errs)
                size += table.nbytes
                rows, state = rows + table.num_rows, after
                errors.add(errs)
        if not paths:  # an empty split still gets a file, so that its config loads as 0 rows
            paths.append(root / "data" / f"{split}-00000.parquet")
            write_table(schema.empty_table(), paths[-1])
    except BaseException:
        if writer is not None:  # its rows are complete: keep them for the next save
            writer.close()
            writer = None
            record()
        raise
    finally:
        if writer is not None:
            writer.close()
    record(done=True)
    streams.errors[split] = errors.done
    return paths


def _page_file(streams: Any, root: Path) -> str | None:
    """Write the page the stream kept (``streams.page``) to ``hf_judge/report.html``; its repo path, or None (no
    page kept, or one that could not be made: a warning, the result goes on without it, as a Dataset's push)."""
    if streams.page is None:
        return None
    try:
        page = streams.page.html(streams.run.summary, streams.all_errors())
    except Exception as e:  # noqa: BLE001 - the data is written: a page is not worth failing the result for
        logger.warning("the report page could not be made (%s: %s); `hf-judge view` makes it", type(e).__name__, e)
        return None
    path = f"{FILES_DIR}/{REPORT_FILE}"
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(page)
    return path


def card_text(
    streams: Any, files: dict[str, list[Path]], reports: Sequence[AgreementReport], page: str | None = None
) -> tuple[str, dict[str, bytes]]:
    """The card (:func:`~hf_judge.results.card.result_card`, as a Dataset's push makes it, with the ``configs``
    that make ``load_dataset`` read ``data/`` as the splits and ``errors/`` as ``errors``), its score distributions
    read back from the shards' score columns only (:func:`~hf_judge.results.card.shard_scores`, as the push of the
    folder reads them); with the pictures of the distributions (repo path -> PNG) where the ``plots`` extra is
    installed."""
    summary = streams.run.summary
    scores = shard_scores(files, summary)
    pictures = picture_files(scores, summary, reports) if plots.available() else {}
    return result_card("---\n---\n", scores, summary, reports, list(pictures), page, shards_of=list(files)), pictures
