"""The result of a run: :class:`ScoredDatasetDict`, the scored splits and ``errors`` with the run's summary."""

from __future__ import annotations

import json
import logging
import os
from contextlib import nullcontext

from datasets import DatasetDict

from ..judging.images import saveable
from ..progress import datasets_bars_off
from .hub import push_scored
from .summary import SUMMARY_FILE, RunSummary

logger = logging.getLogger("hf_judge")


class ScoredDatasetDict(DatasetDict):
    """A ``DatasetDict`` of the scored splits plus ``errors``, with the run's ``summary``.

    Example:
        >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> print(scored.summary)  # doctest: +SKIP
    """

    summary: RunSummary | None = None

    def save_to_disk(
        self, dataset_dict_path, max_shard_size=None, num_shards=None, num_proc=None, storage_options=None
    ):
        """``DatasetDict.save_to_disk``, plus the run's ``summary.json`` beside the splits.

        ``hf-judge filter`` and a later push read it back, so the card of a
        result saved here still tells how its scores were made.
        """
        shards = {**shards_for(self), **(num_shards or {})}
        for split, d in self.items():
            # one DatasetDict per split keeps datasets' own layout; the empty errors split draws no `0 examples` bar
            with datasets_bars_off() if len(d) == 0 else nullcontext():
                # a path-only image whose file is gone would fail datasets' embedding of it (see images.saveable)
                DatasetDict({split: saveable(d)}).save_to_disk(
                    dataset_dict_path,
                    max_shard_size=max_shard_size,
                    num_shards={split: shards.get(split)},
                    num_proc=num_proc,
                    storage_options=storage_options,
                )
        from fsspec.core import url_to_fs

        fs, root = url_to_fs(os.fspath(dataset_dict_path), **(storage_options or {}))
        with fs.open(f"{root}/dataset_dict.json", "w", encoding="utf-8") as f:
            json.dump({"splits": list(self)}, f)
        summary = getattr(self, "summary", None)
        if summary is not None:
            with fs.open(f"{root}/{SUMMARY_FILE}", "w", encoding="utf-8") as f:
                json.dump(summary.to_dict(), f, indent=1, default=str)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | None = None,
        revision: str | None = None,
        **kwargs,
    ) -> str:
        """Push as :func:`hf_judge.push_scored` does: the scored splits in the default config,
        ``errors`` in a config of its own (always present, empty when nothing failed), and the card.

        A plain ``DatasetDict.push_to_hub`` cannot: all splits of one config must share features.
        Other keyword arguments (``max_shard_size``, ``commit_message``, ...) go to the data's push.

        Example:
            >>> good = filter_by_scores(scored, min={"QA_Correctness": 8})  # doctest: +SKIP
            >>> good.push_to_hub("me/gsm8k-judged")  # doctest: +SKIP
        """
        return push_scored(
            self, repo_id, private=private, token=token, revision=revision, summary=self.summary, **kwargs
        )


def shards_for(dd: DatasetDict) -> dict[str, int | None]:
    """``num_shards`` for ``save_to_disk``: one shard for an empty split, which
    datasets would otherwise write without a data file and then fail to load."""
    return {k: (1 if len(v) == 0 else None) for k, v in dd.items()}
