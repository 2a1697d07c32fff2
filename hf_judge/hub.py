"""Pushing a scored dataset and its card to the Hub.

Layout: the scored splits form the default config, so
``load_dataset(repo)`` gives them with their score columns; the errors form a
config of their own, ``load_dataset(repo, "errors")``, because all splits of
one config must share features. The prompt files, the recipe and
``summary.json`` that produced the scores go to ``hf_judge/`` beside them.
"""

from __future__ import annotations

import logging

from datasets import DatasetDict
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError

from .card import FILES_DIR, card_metadata, merge_card_text, provenance_files, render_section
from .redact import register
from .summary import RunSummary

logger = logging.getLogger("hf_judge")


def push_scored(
    scored: DatasetDict,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    summary: RunSummary | None = None,
    revision: str | None = None,
) -> str:
    """Push scored splits, the errors, the provenance files and a dataset card; returns the repo URL.

    Example:
        >>> push_scored(scored, "me/gsm8k-judged", private=True)  # doctest: +SKIP
        'https://huggingface.co/datasets/me/gsm8k-judged'
    """
    register(token)
    summary = summary if summary is not None else getattr(scored, "summary", None)
    data = DatasetDict({k: v for k, v in scored.items() if k != "errors"})
    errors = scored.get("errors")
    data.push_to_hub(repo_id, private=private, token=token, revision=revision)
    api = HfApi(token=token)
    stale_errors = False
    files = api.list_repo_files(repo_id, repo_type="dataset", revision=revision)
    if errors is not None and len(errors):
        DatasetDict({"errors": errors}).push_to_hub(repo_id, config_name="errors", token=token, revision=revision)
    else:
        # no errors this time: drop those of an earlier push rather than leave them standing
        if any(f.startswith("errors/") for f in files):
            api.delete_folder("errors", repo_id=repo_id, repo_type="dataset", revision=revision, commit_message="Remove stale errors (hf-judge)")
        stale_errors = True
    try:
        card = DatasetCard.load(repo_id, repo_type="dataset", token=token)
        text = str(card)
    except (EntryNotFoundError, RepositoryNotFoundError, FileNotFoundError):
        text = "---\n---\n"
    card = DatasetCard(merge_card_text(text, render_section(data, summary)))
    if stale_errors:
        for key in ("configs", "dataset_info"):
            items = card.data.get(key)
            if isinstance(items, list):
                card.data[key] = [c for c in items if not (isinstance(c, dict) and c.get("config_name") == "errors")]
    card_metadata(card.data, data, summary)
    if summary is not None:
        new = provenance_files(summary)
        ops = [CommitOperationAdd(path, content) for path, content in new.items()]
        # an earlier run's prompts that these scores did not use
        ops += [CommitOperationDelete(f) for f in files if f.startswith(f"{FILES_DIR}/") and f not in new]
        api.create_commit(
            repo_id, ops, repo_type="dataset", revision=revision,
            commit_message="Add the prompts and recipe that produced the scores (hf-judge)",
        )
    card.push_to_hub(repo_id, repo_type="dataset", token=token, revision=revision, commit_message="Update dataset card (hf-judge)")
    url = f"{api.endpoint}/datasets/{repo_id}"
    logger.info("pushed to %s", url)
    return url
