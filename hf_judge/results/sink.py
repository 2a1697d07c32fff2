"""Where a scored result goes, one way for every engine: a result sink, and the one rule of a push over an earlier one.

A result is written to one of four places: a folder (``save_result``: the saved ``DatasetDict``), a folder of
Parquet shards (a streamed run's ``save_to_disk``), a Ray run's ``output_dir`` and a Hub repo (``push_scored``,
``push_folder``). Each goes through the same five steps, :class:`ResultSink`'s, opened by :func:`open_sink`:
``start`` (checks that cost nothing and make the place ready: a run that would lose something is refused
before its first request), ``write`` (a split's rows), ``write_errors`` (the errors split), ``complete`` (the
summary, the card, the provenance files; what was written becomes the result) and ``fail`` (what is left of an
unfinished write, and what the user is told).

A push over a repo that holds an earlier push keeps what belongs to the data rather than to one run's scores
(:func:`stale_files`, the one rule both pushes follow):

- the calibrations ``hf_judge/calibration*.json`` (and their pictures) that ``hf-judge calibrate --push-to-hub``
  fitted on labels, and the card's calibration part (:func:`with_remote_calibrations` records them in the new
  summary, so the card and ``hf_judge/summary.json`` still show them);
- every file outside ``data/``, ``errors/`` and ``hf_judge/``: the card's own text around hf-judge's section, a
  labels file, the repo's ``.gitattributes``;

and replaces the rest of hf-judge's files: the shards of the splits, the prompts, the recipe, the pictures and
the report page (``hf_judge/report.html``) describe this result only, so an earlier one's that this push does not
write again go.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ..analysis.calibration import Calibration
from ..progress import LIBRARY_CHATTER, quiet
from .calibrated import with_calibrations
from .card import FILES_DIR
from .summary import RunSummary

if TYPE_CHECKING:
    from huggingface_hub import HfApi

logger = logging.getLogger("hf_judge")

# files a push of scores leaves alone: a calibration fitted on labels belongs to the data, not to one run's scores
CALIBRATION_PREFIX = f"{FILES_DIR}/calibration"
# the repo folders a pushed result owns: its splits' shards, its errors split, its provenance files and pictures
RESULT_DIRS = ("data/", "errors/", f"{FILES_DIR}/")
# written first into a Ray run's output_dir: a rerun after a kill finds its own partial output, not a stranger's
RAY_MARKER = ".hf_judge_output"


class ResultSink(Protocol):
    """The steps every place a result goes through (a folder: :class:`~hf_judge.results.output.FolderSink`;
    Parquet shards: ``engine.stream_sink.StreamSink``; a Ray ``output_dir``: ``engine.ray_output.RayOutput``; a Hub
    repo: :class:`~hf_judge.results.hub.HubSink`). An engine opens it (:func:`open_sink`: ``start`` before its
    first request, ``fail`` when the run stops before the end), ``write`` each split as its rows come,
    ``write_errors`` once every split is written, and ``complete`` with the summary.

    Example:
        >>> with open_sink(sink):  # doctest: +SKIP
        ...     sink.write("train", rows); sink.write_errors(errors); sink.complete(summary)
    """

    def start(self) -> None:
        """Check the place (nothing there would be lost) and make it ready."""

    def write(self, split: str, data: Any) -> Any:
        """Write one split's rows (a ``Dataset``, an iterator of Arrow tables, a Ray Data stage)."""

    def write_errors(self, errors: Any) -> None:
        """Write the errors split (a ``Dataset`` of error rows; the sink's own where it wrote them as they came)."""

    def complete(self, summary: RunSummary | None) -> Any:
        """Write the summary, the card and the provenance files: what was written becomes the result."""

    def fail(self, error: BaseException) -> BaseException | None:
        """Leave the place as a later run can take it up (or as it was), once ``error`` stopped the write; the
        error to raise instead of ``error`` (one that says what is kept), or None."""


@contextlib.contextmanager
def open_sink(sink: ResultSink) -> Iterator[ResultSink]:
    """``sink`` started, and failed (``fail``) when the block raises: the one way every engine opens the place its
    result goes. The error ``fail`` returns is raised instead of the block's.

    Example:
        >>> with open_sink(FolderSink("out/", source="data.jsonl")) as sink:  # doctest: +SKIP
        ...     sink.write("train", scored["train"]); sink.write_errors(scored["errors"]); sink.complete(summary)
    """
    sink.start()
    try:
        yield sink
    except BaseException as e:
        instead = sink.fail(e)
        if instead is not None and instead is not e:
            raise instead from None
        raise


def write_through(sink: ResultSink, splits: Iterable[tuple[str, Any]], errors: Any, summary: RunSummary | None) -> Any:
    """A whole result through ``sink``'s steps: start, each split, the errors, complete (fail on the way out of
    an error); what ``complete`` returns (a pushed repo's URL).

    Example:
        >>> write_through(HubSink("me/x"), [("train", d)], errors, summary)  # doctest: +SKIP
        'https://huggingface.co/datasets/me/x'
    """
    with open_sink(sink):
        for split, data in splits:
            sink.write(split, data)
        sink.write_errors(errors)
        return sink.complete(summary)


def kept_on_repush(path: str) -> bool:
    """Whether a push of scores keeps ``path`` of the repo although it does not write it: a calibration.

    Example:
        >>> kept_on_repush("hf_judge/calibration_QA_Correctness.json"), kept_on_repush("hf_judge/report.html")
        (True, False)
    """
    return path.startswith(CALIBRATION_PREFIX)


def stale_files(files: Iterable[str], new: Iterable[str], owned: tuple[str, ...] = RESULT_DIRS) -> list[str]:
    """The files of the repo (``files``) a push deletes: those under the folders it ``owned`` that it does not
    write again (``new``), except those :func:`kept_on_repush` keeps. ``push_scored`` leaves ``data/`` and
    ``errors/`` to ``datasets``' own push (which replaces the shards of the splits it pushes).

    Example:
        >>> files = ["README.md", "labels.jsonl", "data/train-00000.parquet", "hf_judge/prompts/old.jinja",
        ...          "hf_judge/calibration.json", "hf_judge/report.html"]
        >>> stale_files(files, ["data/train-00001.parquet"])
        ['data/train-00000.parquet', 'hf_judge/prompts/old.jinja', 'hf_judge/report.html']
    """
    keep = set(new)
    return [f for f in files if f.startswith(owned) and f not in keep and not kept_on_repush(f)]


def remote_file(api: HfApi, repo_id: str, path: str, revision: str | None) -> bytes:
    """The bytes of ``path`` in the dataset repo ``repo_id``."""
    from huggingface_hub import hf_hub_download

    local = hf_hub_download(repo_id, path, repo_type="dataset", revision=revision, token=api.token)
    with open(local, "rb") as f:
        return f.read()


def remote_calibrations(
    files: list[str], api: HfApi, repo_id: str, revision: str | None
) -> dict[str, tuple[str, Calibration]]:
    """Score -> (path, calibration) of the repo's ``hf_judge/calibration*.json`` files; one this hf-judge cannot
    read is left out with a warning."""
    out: dict[str, tuple[str, Calibration]] = {}
    for path in files:
        name = path.removeprefix(f"{FILES_DIR}/")
        if not path.startswith(CALIBRATION_PREFIX) or not path.endswith(".json") or "/" in name:
            continue
        if name != "calibration.json" and not name.startswith("calibration_"):
            continue
        try:
            with quiet(*LIBRARY_CHATTER):
                cal = Calibration(**json.loads(remote_file(api, repo_id, path, revision)))
        except (TypeError, ValueError):  # another hf-judge's format: the card goes without it, the push goes on
            logger.warning("%s in %s is not a calibration this hf-judge reads: the card leaves it out", path, repo_id)
            continue
        out.setdefault(cal.score, (path, cal))
    return out


def with_remote_calibrations(
    summary: RunSummary | None, files: list[str], api: HfApi, repo_id: str, revision: str | None
) -> RunSummary | None:
    """The summary with the repo's own calibrations (``calibration.json``, ``calibration_<score>.json``)
    recorded where it does not say them already: a later push of the scores keeps them in the card, as it keeps
    the files (:func:`kept_on_repush`). The same object where the repo holds none.

    Example:
        >>> summary = with_remote_calibrations(summary, files, HfApi(), "me/x", None)  # doctest: +SKIP
    """
    if summary is None:
        return summary
    held = remote_calibrations(files, api, repo_id, revision)
    new = [(path, cal) for score, (path, cal) in held.items() if score not in summary.calibration]
    for path, cal in new:
        summary = with_calibrations(summary, [cal], path) or summary
    return summary
