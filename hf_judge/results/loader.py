"""Reading a result folder back, whichever engine wrote it: :func:`load_result`.

Three layouts exist, one per way a result is written (results/sink.py):

- a saved folder (``ScoredDatasetDict.save_to_disk``, ``hf-judge score -o``): ``dataset_dict.json`` and one
  folder of Arrow files per split, errors included; ``datasets.load_from_disk`` reads it too;
- a streamed run's folder (``ScoredIterableDatasetDict.save_to_disk``, ``hf-judge score --streaming -o``):
  Parquet shards ``data/<split>-NNNNN.parquet`` and ``errors/``, the layout of a Hub repo. ``load_from_disk``
  cannot read it (it reads only Arrow files with their ``state.json``, which Parquet shards written as the rows
  come cannot have) and ``load_dataset(folder)`` gives the splits without the errors (a config of their own)
  and copies every row into an Arrow cache under ``HF_DATASETS_CACHE``;
- a Ray run's ``output_dir`` (``score_dataset_on_ray(..., output_dir=...)``, ``hf-judge score --ray
  --output-dir``), local or on object storage: ``<split>/*.parquet`` as Ray's writer named them, ``errors/`` and
  the ``.hf_judge_output`` marker.

Each comes back the same: a :class:`~hf_judge.ScoredDatasetDict` of the scored splits and ``errors``, with the
run's ``summary`` (``summary.json``). Every command that reads a result (``view``, ``filter``, ``agreement``,
``calibrate``, ``sample-for-review``, ``show-prompt``, ``score`` on a result) reads a folder this way.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from ..redact import resolve_storage_options
from .errors_split import ERRORS_SPLIT, current, errors_dataset
from .output import read_manifest
from .report_stream import stream_folder
from .scored import ScoredDatasetDict
from .sink import RAY_MARKER
from .summary import SUMMARY_FILE, RunSummary


def load_result(path: str | os.PathLike, *, storage_options: dict[str, Any] | None = None) -> ScoredDatasetDict:
    """A result folder read back, whichever engine wrote it: its scored splits and ``errors`` as a
    :class:`~hf_judge.ScoredDatasetDict`, with the run's ``summary`` (None where the folder has no
    ``summary.json``).

    ``path``: a folder that ``score_dataset(...).save_to_disk``, a streamed run's ``save_to_disk`` (Parquet
    shards: ``datasets.load_from_disk`` cannot read these) or a Ray run's ``output_dir`` wrote; a URL
    (``s3://...``, with ``storage_options``) for a Ray output on object storage. A saved folder's Arrow files are
    memory-mapped; Parquet shards are read into memory, and nothing is written to ``HF_DATASETS_CACHE``. For a
    streamed result larger than memory, ``load_dataset(path, streaming=True)`` reads its splits row by row.

    Example:
        >>> from hf_judge import load_result
        >>> scored = load_result("big-judged/")  # doctest: +SKIP
        >>> scored["train"], scored["errors"], scored.summary.model  # doctest: +SKIP
        (Dataset({features: [...], num_rows: 1000000}), Dataset({...}), 'gpt-4.1-nano')
    """
    from fsspec.core import url_to_fs

    url = os.fspath(path)
    fs, root = url_to_fs(url, **resolve_storage_options(storage_options))
    root = root.rstrip("/")
    if fs.exists(f"{root}/dataset_dict.json"):
        from datasets import load_from_disk

        loaded = load_from_disk(url, storage_options=storage_options)
        out = ScoredDatasetDict(loaded if isinstance(loaded, DatasetDict) else {"train": loaded})
    elif "://" not in url and (shards := stream_folder(url)) is not None:
        order = list((read_manifest(url) or {}).get("splits", {}))
        splits = sorted(shards, key=lambda s: (order.index(s) if s in order else len(order), s))
        out = ScoredDatasetDict({s: Dataset(_read(fs, shards[s])) for s in splits})
        out[ERRORS_SPLIT] = _errors(fs, f"{root}/{ERRORS_SPLIT}")
    elif fs.exists(f"{root}/{RAY_MARKER}"):
        out = _ray_output(fs, root)
    else:
        raise ConfigError(
            f"{url} is no result folder hf-judge wrote: it has neither dataset_dict.json (a saved result), "
            f"data/<split>-NNNNN.parquet beside errors/ (a streamed one) nor {RAY_MARKER} (a Ray output_dir)"
        )
    if ERRORS_SPLIT in out:  # one an earlier version wrote has no judge column: read as one whose judge is unknown
        out[ERRORS_SPLIT] = current(out[ERRORS_SPLIT])
    out.summary = _summary(fs, root)
    return out


def _read(fs: Any, paths: list) -> pa.Table:
    """Parquet files as one table, in order (features from their schema's metadata, as datasets wrote them)."""
    tables = []
    for p in paths:
        with fs.open(os.fspath(p), "rb") as f:
            tables.append(pq.read_table(f))
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _errors(fs: Any, folder: str) -> Dataset:
    files = sorted(p for p in fs.find(folder) if p.endswith(".parquet")) if fs.exists(folder) else []
    return Dataset(_read(fs, files)) if files else errors_dataset([])


def _ray_output(fs: Any, root: str) -> ScoredDatasetDict:
    """A Ray run's output_dir: each split's folder of Ray's Parquet shards (named in its tasks' order, the
    input's), in the order the summary counts the splits."""
    summary = _summary(fs, root)
    found = [
        p.rstrip("/").rpartition("/")[2]
        for p in fs.ls(root, detail=False)
        if fs.isdir(p) and p.rstrip("/").rpartition("/")[2] != ERRORS_SPLIT
    ]
    order = list(summary.rows) if summary is not None else []
    splits = sorted(found, key=lambda s: (order.index(s) if s in order else len(order), s))
    out = ScoredDatasetDict()
    for split in splits:
        files = sorted(p for p in fs.find(f"{root}/{split}") if p.endswith(".parquet"))
        if files:
            out[split] = Dataset(_read(fs, files))
    out[ERRORS_SPLIT] = _errors(fs, f"{root}/{ERRORS_SPLIT}")
    return out


def _summary(fs: Any, root: str) -> RunSummary | None:
    path = f"{root}/{SUMMARY_FILE}"
    if not fs.exists(path):
        return None
    with fs.open(path, "r", encoding="utf-8") as f:
        return RunSummary.from_dict(json.load(f))
