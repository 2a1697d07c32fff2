"""``choose_judge(..., push_to_hub=REPO)``: the leaderboard to a Hub dataset repo, in one commit: ``choose_judge.json``,
the card's markdown as the repo's ``README.md`` (and as ``choose_judge.md``), and a folder per candidate (what
``output_dir`` holds: :mod:`hf_judge.engine.choose_output`). The repo name and a token are checked before the
first request (:func:`check_push`), so that a run is never paid for and then not pushed for want of them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, HfApi

from ..analysis.leaderboard import JudgeChoice
from ..errors import ConfigError
from ..progress import LIBRARY_CHATTER, quiet
from ..redact import register
from ..results.hub import check_repo_id
from ..results.scored import ScoredDatasetDict
from ..settings import Panelist
from .choose_output import MARKDOWN, write_output

CARD = "README.md"


def check_push(repo_id: str, token: str | None) -> None:
    """Refuse, before any request, a repo name the Hub would refuse, or no token to push with (``token``,
    ``HF_TOKEN`` or the saved login of ``hf auth login``).

    Example:
        >>> check_push("me/judges", "hf_xxx")
    """
    check_repo_id(repo_id, "push_to_hub")
    if token is None:
        from huggingface_hub import get_token

        token = get_token()
    if not token:
        raise ConfigError(
            f"push_to_hub {repo_id!r}: no Hub token to push with: give --token (token=...), set HF_TOKEN, or run "
            "`hf auth login`; nothing was sent"
        )


def push_choice(
    repo_id: str,
    token: str | None,
    output_dir: str | os.PathLike | None,
    result: ScoredDatasetDict,
    choice: JudgeChoice,
    candidates: Sequence[Panelist],
    order_rows: int | None,
    labels: tuple[str, Sequence[Any]] | None,
) -> str:
    """Upload the leaderboard (``output_dir``'s files, written to a temporary folder first when there is none) to
    the dataset repo ``repo_id``; returns the repo's URL."""
    register(token)
    with tempfile.TemporaryDirectory(prefix="hfj-choose-") as tmp:
        folder = Path(output_dir) if output_dir is not None else Path(tmp)
        if output_dir is None:
            write_output(folder, result, choice, candidates, order_rows, labels)
        card = f"# Choosing the judge\n\nWritten by `hf-judge choose-judge`.\n\n{(folder / MARKDOWN).read_text()}"
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not _left_out(p.relative_to(folder)))
        ops = [CommitOperationAdd(p.relative_to(folder).as_posix(), str(p)) for p in files]
        ops.append(CommitOperationAdd(CARD, card.encode()))
        api = HfApi(token=token)
        with quiet(*LIBRARY_CHATTER):
            api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
            api.create_commit(
                repo_id,
                ops,
                repo_type="dataset",
                commit_message=f"choose-judge: {len(choice.entries)} judges on {choice.rows:,} labelled rows",
            )
    return f"{api.endpoint}/datasets/{repo_id}"


def _left_out(path: Path) -> bool:
    """A file that is no part of the leaderboard: a store, a lock, a card of the folder's own (the card pushed is
    the leaderboard's)."""
    return path.as_posix() == CARD or path.suffix == ".lock" or any(part.startswith(".") for part in path.parts)
