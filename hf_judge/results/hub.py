"""Pushing a scored dataset and its card to the Hub.

Layout: the scored splits form the default config, so
``load_dataset(repo)`` gives them with their score columns; the errors form a
config of their own, ``load_dataset(repo, "errors")``, because all splits of
one config must share features. The errors config is pushed every time, empty
when nothing failed, so that it always exists and never holds the errors of an
earlier push. The prompt files, the recipe and ``summary.json`` that produced
the scores go to ``hf_judge/`` beside them, the card's pictures (the ``plots``
extra) to ``hf_judge/plots/``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from datasets import Dataset, DatasetDict
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

from ..analysis.agreement import AgreementReport
from ..errors import ConfigError
from ..judging.images import saveable
from ..progress import LIBRARY_CHATTER, quiet
from ..redact import register
from .calibrated import with_calibrations
from .calibration_card import calibration_card, merge_calibration_card
from .card import END, FILES_DIR, PLOTS_DIR, picture_files, provenance_files, result_card, shard_scores
from .errors_split import ERRORS_SPLIT, errors_dataset
from .groups import check_group_column, group_by_of
from .output import MANIFEST
from .plots import available, file_name
from .report import REPORT_FILE, report_html
from .sink import (
    CALIBRATION_PREFIX,
    remote_calibrations,
    remote_file,
    stale_files,
    with_remote_calibrations,
    write_through,
)
from .stoppable import PushSteps, stoppable_push
from .summary import SUMMARY_FILE, RunSummary

if TYPE_CHECKING:
    from ..analysis.calibration import Calibration


logger = logging.getLogger("hf_judge")


def check_repo_id(repo_id: str, what: str = "repo_id") -> None:
    """Raise a ConfigError if ``repo_id`` is no Hub dataset id, by huggingface_hub's own rules.

    Called before anything is scored or written: the Hub client checks only at
    the push, once every request of the run is paid for.

    Example:
        >>> check_repo_id("me/gsm8k-judged")
        >>> check_repo_id("me/../../x", "--push-to-hub")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: --push-to-hub 'me/../../x' is not a Hub dataset id: ... e.g. me/gsm8k-judged
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise ConfigError(
            f"{what} {repo_id!r} is not a Hub dataset id: name or namespace/name of letters, digits, '-', '_' and "
            "'.', no '--' or '..', at most 96 characters, e.g. me/gsm8k-judged"
        ) from None


def push_scored(
    scored: DatasetDict,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    summary: RunSummary | None = None,
    revision: str | None = None,
    agreement: AgreementReport | Sequence[AgreementReport] = (),
    plots: bool | None = None,
    report: bool = True,
    by: str | None = None,
    **push_kwargs,
) -> str:
    """Push scored splits, the errors, the provenance files and a dataset card; returns the repo URL.

    ``push_kwargs`` (``max_shard_size``, ``commit_message``, ...) go to the
    scored splits' ``DatasetDict.push_to_hub``. ``scored.push_to_hub(repo)`` on
    the result of ``score_dataset`` or ``filter_by_scores`` does the same.
    ``agreement``: reports of :func:`hf_judge.agreement` to show in the card. ``plots``: push PNG
    pictures of the distributions (and of the reports) to ``hf_judge/plots/`` and show them in the
    card; default: when the ``plots`` extra (matplotlib) is installed. ``report``: push the report page
    (``hf_judge/report.html``, see :func:`hf_judge.write_report`) beside the data, linked from the card. ``by``:
    a column whose groups the card and the page compare ("Scores by subject"; default: the summary's
    ``group_by``, recorded by ``hf-judge score --by``).

    Example:
        >>> push_scored(scored, "me/gsm8k-judged", private=True)  # doctest: +SKIP
        'https://huggingface.co/datasets/me/gsm8k-judged'
        >>> report = agreement(scored["train"], score="QA_Correctness", label="human_score")  # doctest: +SKIP
        >>> push_scored(scored, "me/gsm8k-judged", agreement=report)  # doctest: +SKIP
    """
    if "config_name" in push_kwargs or "data_dir" in push_kwargs:
        raise ConfigError("push_scored chooses the configs: the scored splits go to 'default', the errors to 'errors'")
    summary = summary if summary is not None else getattr(scored, "summary", None)
    reports = [agreement] if isinstance(agreement, AgreementReport) else list(agreement)
    sink = HubSink(
        repo_id,
        private=private,
        token=token,
        revision=revision,
        agreement=reports,
        plots=plots,
        report=report,
        by=by,
        push_kwargs=push_kwargs,
    )
    splits = [(k, v) for k, v in scored.items() if k != ERRORS_SPLIT]
    return write_through(sink, splits, scored.get(ERRORS_SPLIT), summary)


class HubSink:
    """A Hub dataset repo as the place a result goes (a :class:`~hf_judge.results.sink.ResultSink`): ``start``
    checks the repo id before anything is scored or sent, ``write`` and ``write_errors`` take the splits, and
    ``complete`` is the push (the data, the errors config, then the card with the provenance files, pictures and
    report page in one commit), stoppable by Ctrl-C (:mod:`.stoppable`). ``push_scored`` drives it; its
    arguments are push_scored's. ``folder``: a streamed run's folder of Parquet shards (``push_folder`` drives
    it), whose ``data/`` and ``errors/`` go as they are in the first commit; ``write`` is not called for it.
    ``page``: the report page made already (a folder's, ``hf-judge view``'s), in place of one built here. Either
    way the card is :func:`~hf_judge.results.card.result_card` over the repo's own, with the calibrations the repo
    holds kept (:func:`~hf_judge.results.sink.with_remote_calibrations`), and an earlier push's files go by
    :func:`~hf_judge.results.sink.stale_files`.

    Example:
        >>> write_through(HubSink("me/x"), scored.items(), scored["errors"], scored.summary)  # doctest: +SKIP
    """

    def __init__(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | None = None,
        revision: str | None = None,
        agreement: Sequence[AgreementReport] = (),
        plots: bool | None = None,
        report: bool = True,
        by: str | None = None,
        push_kwargs: dict | None = None,
        folder: str | os.PathLike | None = None,
        page: bytes | None = None,
    ):
        self.repo_id, self.private, self.token, self.revision = repo_id, private, token, revision
        self.reports, self.plots, self.report, self.by = list(agreement), plots, report, by
        self.push_kwargs = push_kwargs or {}
        self.folder, self.page = (Path(folder) if folder is not None else None), page
        self.data = DatasetDict()
        self.errors: Dataset | None = None

    def start(self) -> None:
        check_repo_id(self.repo_id)
        register(self.token)

    def write(self, split: str, data: Dataset) -> None:
        # saveable: a path-only image whose file is gone would fail the push's embedding of it
        self.data[split] = saveable(data)

    def write_errors(self, errors: Dataset | None) -> None:
        self.errors = errors if errors is not None else errors_dataset([])

    def complete(self, summary: RunSummary | None) -> str:
        """The push; the repo URL."""
        if self.folder is not None:
            root = self.folder
            return stoppable_push(
                self.repo_id, [FOLDER_STEP, CARD_STEP], lambda s: _push_folder(s, root, summary, self)
            )
        group_by = group_by_of(self.by, summary)
        for split, d in self.data.items() if group_by else ():  # before anything is pushed: the card groups by it
            check_group_column(d.column_names, group_by, f"split {split!r}")
        if self.errors is None:
            self.write_errors(None)
        assert self.errors is not None
        errors, draw = self.errors, available() if self.plots is None else self.plots

        def push(steps: PushSteps) -> str:
            pictures = picture_files(self.data, summary, self.reports) if draw else {}
            return _push(steps, self.data, errors, summary, pictures, self, self.push_kwargs)

        return stoppable_push(self.repo_id, [DATA_STEP, ERRORS_STEP, CARD_STEP], push)

    def fail(self, error: BaseException) -> None:  # noqa: ARG002 - ResultSink.fail's
        """Nothing to undo here: a push stopped part way says what reached the repo (:mod:`.stoppable`)."""


DATA_STEP, ERRORS_STEP = "the scored splits", "the errors split"
FOLDER_STEP = "the scored splits and the errors split"
CARD_STEP = "the card (with the prompts, pictures and report page)"


def _push(
    steps: PushSteps,
    data: DatasetDict,
    errors: Dataset,
    summary: RunSummary | None,
    pictures: dict[str, bytes],
    to: HubSink,
    push_kwargs: dict,
) -> str:
    """push_scored's uploads and commits, each step marked done on ``steps`` as it reaches the repo."""
    repo_id, token, revision, private, by = steps.repo_id, to.token, to.revision, to.private, to.by
    with quiet(*LIBRARY_CHATTER):
        data.push_to_hub(repo_id, private=private, token=token, revision=revision, **push_kwargs)
        steps.done(DATA_STEP)
        api = HfApi(token=token)
        files = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
        # One shard even when empty: datasets writes one parquet file for it, so the config loads as 0 rows.
        DatasetDict({ERRORS_SPLIT: errors}).push_to_hub(
            repo_id,
            config_name=ERRORS_SPLIT,
            token=token,
            revision=revision,
            num_shards={ERRORS_SPLIT: 1} if len(errors) == 0 else None,
        )
        steps.done(ERRORS_STEP)
    summary = with_remote_calibrations(summary, files, api, repo_id, revision)
    page = _report_page(data, errors, summary, repo_id, by) if to.report else None
    return _push_card(steps, api, files, data, summary, pictures, page, to)


def _push_folder(steps: PushSteps, root: Path, summary: RunSummary | None, to: HubSink) -> str:
    """A streamed run's folder pushed: its ``data/`` and ``errors/`` shards as they are (and any file of its own
    outside ``hf_judge/``) in one commit, an earlier push's shards that it does not hold again deleted; then the
    card step, as a Dataset's push makes it (:func:`_push_card`), with the folder's pictures and report page."""
    repo_id, revision = steps.repo_id, to.revision
    api = HfApi(token=to.token)
    with quiet(*LIBRARY_CHATTER):
        api.create_repo(repo_id, repo_type="dataset", private=to.private, exist_ok=True)
        files = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
    mine = folder_files(root)
    shards = {path: local for path, local in mine.items() if not path.startswith(f"{FILES_DIR}/")}
    ops: list[CommitOperationAdd | CommitOperationDelete] = [CommitOperationAdd(p, f) for p, f in shards.items()]
    ops += [CommitOperationDelete(f) for f in stale_files(files, shards, ("data/", f"{ERRORS_SPLIT}/"))]
    api.create_commit(
        repo_id,
        ops,
        repo_type="dataset",
        revision=revision,
        commit_message=to.push_kwargs.get("commit_message") or "Upload the scored dataset (hf-judge, streaming)",
    )
    steps.done(FOLDER_STEP)
    summary = with_remote_calibrations(summary, files, api, repo_id, revision)
    splits = folder_splits(root, [p for p in shards if p.startswith("data/")])
    scores = shard_scores({s: [Path(root, p) for p in paths] for s, paths in splits.items()}, summary)
    own = {p: Path(root, p).read_bytes() for p in mine if p.startswith(f"{FILES_DIR}/")}
    pictures = {p: content for p, content in own.items() if p.startswith(f"{PLOTS_DIR}/")}
    page = to.page if to.page is not None else own.pop(f"{FILES_DIR}/{REPORT_FILE}", None)
    return _push_card(steps, api, files, scores, summary, pictures, page, to, own=own, shards_of=list(splits))


def _push_card(
    steps: PushSteps,
    api: HfApi,
    files: list[str],
    scores: DatasetDict,
    summary: RunSummary | None,
    pictures: dict[str, bytes],
    page: bytes | None,
    to: HubSink,
    *,
    own: dict[str, bytes] | None = None,
    shards_of: list[str] | None = None,
) -> str:
    """The card step of every push: the card (:func:`~hf_judge.results.card.result_card` over the repo's own),
    the provenance files, pictures and report page in one commit, an earlier run's files of ``hf_judge/`` that
    this one does not write again deleted but for its calibrations (:func:`~hf_judge.results.sink.stale_files`).
    ``summary``: with the repo's calibrations recorded already. ``own``: a folder's files of ``hf_judge/``."""
    repo_id, revision = steps.repo_id, to.revision
    with quiet(*LIBRARY_CHATTER):
        try:
            text = str(DatasetCard.load(repo_id, repo_type="dataset", token=to.token))
        except (EntryNotFoundError, RepositoryNotFoundError, FileNotFoundError):
            text = "---\n---\n"
    page_path = f"{FILES_DIR}/{REPORT_FILE}" if page is not None else None
    card = result_card(text, scores, summary, to.reports, pictures, page_path, by=to.by, shards_of=shards_of)
    new = {**(own or {}), **(provenance_files(summary) if summary is not None else {}), **pictures}
    if page is not None:
        new[f"{FILES_DIR}/{REPORT_FILE}"] = page
    # The card goes in the same commit as the files it shows. Not DatasetCard.push_to_hub: before
    # huggingface_hub 1.x its validation posts to huggingface.co whatever HF_ENDPOINT says (a private
    # Hub's card would be sent to the public one), and it would be a second commit.
    ops: list[CommitOperationAdd | CommitOperationDelete] = [CommitOperationAdd("README.md", card.encode())]
    ops += [CommitOperationAdd(path, content) for path, content in new.items()]
    if summary is not None or pictures or own:
        # an earlier run's prompts and pictures that these scores did not use (the one rule: sink.stale_files)
        ours = f"{FILES_DIR}/" if summary is not None or own else f"{PLOTS_DIR}/"
        ops += [CommitOperationDelete(f) for f in stale_files(files, new, (ours,))]
    api.create_commit(
        repo_id,
        ops,
        repo_type="dataset",
        revision=revision,
        commit_message="Update the dataset card, prompts, recipe and pictures of the scores (hf-judge)",
    )
    steps.done(CARD_STEP)
    url = f"{api.endpoint}/datasets/{repo_id}"
    logger.info("pushed to %s", url)
    return url


def folder_files(root: Path) -> dict[str, Path]:
    """Repo path -> local file of what a streamed run's folder pushes: its shards, errors, provenance files and
    pictures. The local manifest, summary and progress stay local (the summary goes as hf_judge/summary.json); the
    card is made by the push, and a folder's own ``report.html`` names the folder.

    Example:
        >>> sorted(folder_files(Path("big-judged")))[:2]  # doctest: +SKIP
        ['data/train-00000.parquet', 'errors/errors-00000.parquet']
    """
    local = {MANIFEST, SUMMARY_FILE, "README.md", REPORT_FILE}
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).as_posix() not in local
    }


def push_calibration(
    calibration: Calibration,
    repo_id: str,
    *,
    token: str | None = None,
    revision: str | None = None,
    png: bytes | None = None,
) -> str:
    """Upload ``calibration.json`` (and its reliability picture) to ``hf_judge/`` of the dataset repo
    ``repo_id``, beside the data; a later push of scores leaves them there. Returns the file's URL.

    Example:
        >>> cal = hf_judge.calibrate(scored, "QA_Correctness", "human_ok")  # doctest: +SKIP
        >>> push_calibration(cal, "me/gsm8k-judged")  # doctest: +SKIP
        'https://huggingface.co/datasets/me/gsm8k-judged/blob/main/hf_judge/calibration.json'
    """
    import json

    check_repo_id(repo_id)
    register(token)
    api = HfApi(token=token)
    with quiet(*LIBRARY_CHATTER):
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
        files = set(api.list_repo_files(repo_id, repo_type="dataset", revision=revision))
        held = remote_calibrations(sorted(files), api, repo_id, revision)
        path = _calibration_path(calibration.score, held, files)
        ops = [CommitOperationAdd(path, json.dumps(calibration.to_dict(), indent=1).encode())]
        if png is not None:
            ops.append(CommitOperationAdd(f"{CALIBRATION_PREFIX}_{calibration.score}_reliability.png", png))
        ops += _card_with_calibration(api, repo_id, revision, calibration, files, path)
        api.create_commit(
            repo_id,
            ops,
            repo_type="dataset",
            revision=revision,
            commit_message=f"Calibration of {calibration.score} against {calibration.label} (hf-judge)",
        )
    return f"{api.endpoint}/datasets/{repo_id}/blob/{revision or 'main'}/{path}"


def _calibration_path(score: str, held: dict[str, tuple[str, Calibration]], files: set[str]) -> str:
    """Where a calibration of ``score`` goes in the repo: one file per score, as in a result folder
    (``calibration.json``, then ``calibration_<score>.json``), so a second score keeps the first's."""
    if score in held:
        return held[score][0]
    first = f"{CALIBRATION_PREFIX}.json"
    return first if first not in files else f"{CALIBRATION_PREFIX}_{file_name(score)}.json"


def _card_with_calibration(
    api: HfApi, repo_id: str, revision: str | None, calibration: Calibration, files: set[str], path: str
) -> list[CommitOperationAdd]:
    """The repo's ``summary.json`` and card with the calibration recorded (those it has: a repo of labels
    alone has neither), so the card says which labels the scores were calibrated on and how well."""
    import json

    summary_path = f"{FILES_DIR}/summary.json"
    if summary_path in files:
        stored = RunSummary.from_dict(json.loads(remote_file(api, repo_id, summary_path, revision)))
    else:
        stored = RunSummary()
    summary = with_calibrations(stored, [calibration], path)
    assert summary is not None
    ops = []
    if summary_path in files:
        ops.append(CommitOperationAdd(summary_path, json.dumps(summary.to_dict(), indent=1, default=str).encode()))
    if "README.md" in files:
        text = remote_file(api, repo_id, "README.md", revision).decode("utf-8")
        card = merge_calibration_card(text, calibration_card(summary.calibration), END)
        ops.append(CommitOperationAdd("README.md", card.encode()))
    return ops


def _report_page(
    data: DatasetDict, errors: Dataset, summary: RunSummary | None, repo_id: str, by: str | None = None
) -> bytes | None:
    """The report page of a pushed result; None, with a warning, where it cannot be made (the data is pushed
    already: a page is not worth failing the push for, and ``hf-judge view REPO`` makes it later)."""
    try:
        return report_html(DatasetDict({**data, "errors": errors}), summary=summary, source=repo_id, by=by).encode()
    except Exception as e:  # noqa: BLE001 - any failure of the page leaves the push as it is
        logger.warning(
            "the report page could not be made (%s: %s); `hf-judge view %s` makes it", type(e).__name__, e, repo_id
        )
        return None


def folder_splits(root: Path, shards: list[str]) -> dict[str, list[str]]:
    """Split -> its shards (``data/<split>-NNNNN.parquet``) of a streamed run's folder, in the order its card
    declares the splits (the order they were scored in; a folder without that card: by name)."""
    by_split: dict[str, list[str]] = {}
    for path in sorted(shards):
        by_split.setdefault(path.removeprefix("data/").rsplit("-", 1)[0], []).append(path)
    try:
        configs = DatasetCard.load(root / "README.md").data.get("configs") or []
        declared = [f["split"] for c in configs if c.get("config_name") == "default" for f in c["data_files"]]
    except (OSError, ValueError, KeyError, TypeError):
        declared = []
    order = [s for s in declared if s in by_split] + sorted(s for s in by_split if s not in declared)
    return {s: by_split[s] for s in order}
