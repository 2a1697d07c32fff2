"""Pushing a streamed result's folder (Parquet shards, ``errors/``, the provenance files) to the Hub: the same
push as a Dataset's (:class:`~hf_judge.results.hub.HubSink`, given the folder), one card and one rule of what a
re-push keeps."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .hub import HubSink
from .sink import write_through
from .summary import RunSummary

if TYPE_CHECKING:
    from ..analysis.agreement import AgreementReport


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    page: bytes | None = None,
    agreement: Sequence[AgreementReport] = (),
) -> str:
    """Push a folder ``ScoredIterableDatasetDict.save_to_disk`` wrote, through :class:`~hf_judge.results.hub.HubSink`
    (as ``push_scored`` pushes a Dataset); returns the repo URL. The data and errors go in one commit, the card and
    the provenance files in a second. The card is rendered over the repo's own (its text around hf_judge's section
    kept) from the folder's score columns; an earlier push's data and prompt files go, its calibrations stay.
    ``page``: the result's report page (``hf-judge view``'s), uploaded with the card as ``hf_judge/report.html``
    and linked from it; a folder's own ``report.html`` is not uploaded as it is (it names the folder).
    ``agreement``: reports of :func:`hf_judge.agreement` to show in the card. Ctrl-C stops the push at once
    (:class:`~hf_judge.errors.PushInterrupted`, see :mod:`.stoppable`).

    Example:
        >>> push_folder("big-judged/", "me/big-judged")  # doctest: +SKIP
    """
    sink = HubSink(
        repo_id,
        private=private,
        token=token,
        revision=revision,
        agreement=agreement,
        push_kwargs={"commit_message": commit_message} if commit_message else None,
        folder=folder,
        page=page,
    )
    return write_through(sink, [], None, RunSummary.load(folder))
