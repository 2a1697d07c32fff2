"""The result of a run: :class:`ScoredDatasetDict`, the scored splits and ``errors`` with the run's summary."""

from __future__ import annotations

import logging

from datasets import DatasetDict

from .hub import push_scored
from .output import folder_sink, shape_of
from .sink import open_sink
from .summary import RunSummary

logger = logging.getLogger("hf_judge")


class ScoredDatasetDict(DatasetDict):
    """A ``DatasetDict`` of the scored splits plus ``errors``, with the run's ``summary``.

    Example:
        >>> scored = score_dataset(ds, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> print(scored.summary)  # doctest: +SKIP
    """

    summary: RunSummary | None = None

    def save_to_disk(
        self,
        dataset_dict_path,
        max_shard_size=None,
        num_shards=None,
        num_proc=None,
        storage_options=None,
        *,
        overwrite: bool | None = None,
    ):
        """``DatasetDict.save_to_disk``, plus the run's ``summary.json`` beside the splits, through the result
        folder's sink (:func:`~hf_judge.results.output.folder_sink`), as ``hf-judge score -o`` saves.

        ``hf-judge filter`` and a later push read it back, so the card of a
        result saved here still tells how its scores were made. A local folder is
        written beside and put in place once complete (a failed save leaves the old
        one as it was; the folder the result was read from can be saved over), and
        a folder of files that are no saved result is refused with
        :class:`~hf_judge.errors.OutputExistsError` (the save would delete them) unless
        ``overwrite=True``; a saved result there is replaced, as ``datasets`` saves over
        one (``overwrite=False``: refused too where this result would lose its rows or
        columns, ``hf-judge score -o``'s rule). A URL (``s3://...``, with
        ``storage_options``) is written in place.

        Example:
            >>> scored.save_to_disk("gsm8k-judged/")  # doctest: +SKIP
            >>> scored.save_to_disk("s3://bucket/gsm8k-judged", storage_options={"profile": "me"})  # doctest: +SKIP
        """
        options = {"max_shard_size": max_shard_size, "num_shards": num_shards, "num_proc": num_proc}
        sink = folder_sink(
            dataset_dict_path,
            storage_options=storage_options,
            overwrite=overwrite,
            save_options={k: v for k, v in options.items() if v is not None},
            shape=shape_of(self),
        )
        with open_sink(sink):
            for split, d in self.items():
                sink.write(split, d)
            sink.complete(getattr(self, "summary", None))

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
