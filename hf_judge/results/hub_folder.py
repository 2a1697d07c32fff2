"""Pushing a streamed result's folder (Parquet shards, ``errors/``, the card, the provenance files) to the Hub."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..progress import LIBRARY_CHATTER, quiet
from ..redact import register
from .calibration_card import calibration_card, merge_calibration_card
from .card import END, FILES_DIR, START, merge_card_text, with_report_link
from .hub import check_repo_id
from .output import MANIFEST
from .report import REPORT_FILE
from .sink import stale_files, with_remote_calibrations
from .stoppable import PushSteps, stoppable_push
from .summary import SUMMARY_FILE, RunSummary

logger = logging.getLogger("hf_judge")

DATA_STEP = "the scored splits, the errors split and the prompt files"
CARD_STEP = "the card (with the report page)"


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    page: bytes | None = None,
) -> str:
    """Push a folder ``ScoredIterableDatasetDict.save_to_disk`` wrote, in one commit; returns the repo URL.
    The repo's card keeps its text around hf_judge's section; an earlier push's data and prompt files go.
    ``page``: the result's report page (``hf-judge view``'s), uploaded with the card as ``hf_judge/report.html``
    and linked from it; a folder's own ``report.html`` is not uploaded as it is (it names the folder).
    Ctrl-C stops the push at once (:class:`~hf_judge.errors.PushInterrupted`, see :mod:`.stoppable`).

    Example:
        >>> push_folder("big-judged/", "me/big-judged")  # doctest: +SKIP
    """
    check_repo_id(repo_id)
    register(token)

    def push(steps: PushSteps) -> str:
        return _push(steps, Path(folder), private, token, revision, commit_message, page)

    return stoppable_push(repo_id, [DATA_STEP, CARD_STEP], push)


def _push(
    steps: PushSteps,
    root: Path,
    private: bool | None,
    token: str | None,
    revision: str | None,
    commit_message: str | None,
    page: bytes | None,
) -> str:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    repo_id = steps.repo_id
    api = HfApi(token=token)
    with quiet(*LIBRARY_CHATTER):
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        files = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
    uploads = _folder_files(root)
    card = (root / "README.md").read_text(encoding="utf-8")
    card = _with_kept_calibrations(root, card, uploads, files, api, repo_id, revision)
    card = _merged_card(api, repo_id, card)
    ops = []
    if page is not None:
        ops.append(CommitOperationAdd(f"{FILES_DIR}/{REPORT_FILE}", page))
        card = with_report_link(card, f"{FILES_DIR}/{REPORT_FILE}")
    new = {*uploads, *(op.path_in_repo for op in ops)}
    # an earlier push's shards, errors and prompt files go, its calibrations stay: the one rule, sink.stale_files
    data_ops: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path, content) for path, content in uploads.items()
    ]
    data_ops += [CommitOperationDelete(f) for f in stale_files(files, new)]
    api.create_commit(
        repo_id,
        data_ops,
        repo_type="dataset",
        revision=revision,
        commit_message=commit_message or "Upload the scored dataset (hf-judge, streaming)",
    )
    steps.done(DATA_STEP)
    api.create_commit(
        repo_id,
        [CommitOperationAdd("README.md", card.encode()), *ops],
        repo_type="dataset",
        revision=revision,
        commit_message="Update dataset card (hf-judge)",
    )
    steps.done(CARD_STEP)
    url = f"{api.endpoint}/datasets/{repo_id}"
    logger.info("pushed to %s", url)
    return url


def _folder_files(root: Path) -> dict[str, Path | bytes]:
    """Repo path -> local file of what a folder pushes: its shards, errors and provenance files. The local
    manifest and summary stay local (the summary goes as hf_judge/summary.json); the card is pushed on its own,
    and a folder's own ``report.html`` names the folder."""
    local = {MANIFEST, SUMMARY_FILE, "README.md", REPORT_FILE}
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).as_posix() not in local
    }


def _with_kept_calibrations(
    root: Path,
    card: str,
    uploads: dict[str, Path | bytes],
    files: list[str],
    api: Any,
    repo_id: str,
    revision: str | None,
) -> str:
    """The card (and, in ``uploads``, ``hf_judge/summary.json``) with the calibrations the repo holds recorded, as
    ``push_scored`` keeps them: an earlier ``calibrate --push-to-hub``'s files stay, and so does its card part."""
    import json

    import pyarrow.parquet as pq

    summary = RunSummary.load(root)
    merged = with_remote_calibrations(summary, files, api, repo_id, revision)
    if merged is None or summary is None or merged.calibration == summary.calibration:
        return card
    uploads[f"{FILES_DIR}/summary.json"] = json.dumps(merged.to_dict(), indent=1, default=str).encode()
    columns = {c for p in uploads if p.startswith("data/") for c in pq.read_schema(root / p).names}
    return merge_calibration_card(card, calibration_card(merged.calibration, columns), END)


def _merged_card(api: Any, repo_id: str, ours: str) -> str:
    """Our card with the text and metadata the repo's card had around hf_judge's section."""
    from huggingface_hub import DatasetCard
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

    try:
        with quiet(*LIBRARY_CHATTER):
            theirs = DatasetCard.load(repo_id, repo_type="dataset", token=api.token)
    except (EntryNotFoundError, RepositoryNotFoundError, FileNotFoundError):
        return ours
    card = DatasetCard(ours)
    section = ours[ours.index(START) : ours.index(END) + len(END)]
    merged = DatasetCard(merge_card_text(str(theirs), section))
    for k, v in card.data.to_dict().items():
        merged.data[k] = v
    merged.data.pop("dataset_info", None)
    return str(merged)
