"""Saving a result folder without ever destroying a different result.

A folder written here holds the saved ``DatasetDict`` and ``hf_judge.json``, a
small manifest of what it was made from (``source``), what it is (``kind``:
``scored`` or ``filtered``, with the ``filters`` applied) and what it holds
(rows and columns per split).

Writing over an existing folder is allowed when nothing in it would be lost:
the same command again, metrics added, more rows. Anything else (another
dataset, fewer rows or splits, other metrics, other filter thresholds, a folder
hf-judge did not write) is an :class:`~hf_judge.errors.OutputExistsError` unless ``overwrite=True``
(CLI ``--overwrite``). The check runs before the first request, from what the
run will produce, so a mistake costs nothing. The data is written to a hidden
sibling folder that replaces the old one only once complete: a crash while
saving leaves the old result as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict, IterableDatasetDict

from ..errors import OutputExistsError
from ..judging.images import saveable
from ..progress import datasets_bars_off
from ..redact import resolve_storage_options
from .errors_split import ERRORS_SPLIT
from .sink import open_sink
from .summary import SUMMARY_FILE, RunSummary, describe_thresholds

MANIFEST = "hf_judge.json"
# split -> (rows, columns)
Shape = dict[str, tuple[int, list[str]]]


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The manifest of a folder written by hf-judge, or None."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def source_of(spec: str, subset: str | None = None, revision: str | None = None) -> str:
    """What a result is made from: a scored folder's own source, a local file or folder by its content, or a Hub id.

    A local input is named by the sha256 of its bytes, not by where it lies: the example dataset read from
    site-packages and then from a checkout (``pip install -e``), or a file copied elsewhere, is the same input.

    Example:
        >>> source_of("me/data", subset="main")
        'hub:me/data:main'
        >>> from hf_judge.cli.inputs import example_dataset_path
        >>> source_of(str(example_dataset_path())).startswith("example.jsonl sha256:")
        True
    """
    path = Path(spec).expanduser()
    if path.exists():
        earlier = read_manifest(path) if path.is_dir() else None
        if earlier and earlier.get("source"):
            return earlier["source"]  # scoring a result again (adding metrics) keeps its source
        return f"{path.resolve().name} {_SHA256}{content_digest(path)}"
    return "hub:" + spec + (f":{subset}" if subset else "") + (f"@{revision}" if revision else "")


_SHA256 = "sha256:"


def content_digest(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (each one's relative path and bytes, in path order).

    Example:
        >>> content_digest(Path("data.jsonl"))  # doctest: +SKIP
        '9b1c2e...'
    """
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(f.relative_to(path).as_posix().encode() + b"\0")
        with f.open("rb") as data:
            for chunk in iter(lambda: data.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _same_source(old: str, new: str) -> bool:
    """Whether two manifest sources name one input: equal, equal contents, or an older manifest's absolute
    path (written before sources were contents) whose file still holds the content ``new`` names."""
    if old == new:
        return True
    if _SHA256 in old and _SHA256 in new:
        return old.rpartition(_SHA256)[2] == new.rpartition(_SHA256)[2]
    path = Path(old)
    return (
        path.is_absolute() and path.exists() and _SHA256 in new and content_digest(path) == new.rpartition(_SHA256)[2]
    )


def shape_of(dd: DatasetDict) -> Shape:
    return {k: (len(v), list(v.column_names)) for k, v in dd.items()}


def thresholds(
    min: dict,  # noqa: A002 - as filter_by_scores names them
    max: dict,  # noqa: A002
    keep_missing: bool,
    groups: dict | None = None,
) -> dict:
    """The filter a filtered result records in its manifest, in one form however the numbers were written;
    ``groups``: the groups it kept or dropped (``group_filter.group_rule``'s), where any.

    Example:
        >>> thresholds({"QA_Correctness": 8}, {}, False)
        {'min': {'QA_Correctness': 8.0}, 'max': {}, 'keep_missing': False}
    """
    out = {
        "min": {k: float(v) for k, v in sorted(min.items())},
        "max": {k: float(v) for k, v in sorted(max.items())},
        "keep_missing": bool(keep_missing),
    }
    for key, rule in sorted((groups or {}).items()):
        out[key] = {c: sorted(v) for c, v in sorted(rule.items())}
    return out


def check_output(
    folder: str | os.PathLike,
    source: str | None,
    kind: str | None,
    shape: Shape | None,
    overwrite: bool = False,
    filters: dict | None = None,
) -> None:
    """Raise OutputExistsError if writing ``shape`` to ``folder`` would lose something there.

    ``shape`` is None when the rows are not known yet (a filter checks before it
    runs, then again with the rows). ``filters`` (:func:`thresholds`) are a
    filtered result's: the same filter again is a rerun, another one a different
    result, even with more rows. ``source`` and ``kind`` None: not known (a library
    ``save_to_disk``), not compared: the rows and columns decide.
    """
    out = Path(folder)
    if overwrite or not out.exists():
        return
    if out.is_dir() and not any(out.iterdir()):
        return
    lost = _what_would_be_lost(out, source, kind, shape, filters)
    if lost:
        raise OutputExistsError(
            f"{out} already holds {lost}. Pass --overwrite to replace it (library: overwrite=True), "
            "or choose another --output-dir"
        )


def check_replaceable(folder: str | os.PathLike) -> None:
    """Raise OutputExistsError if ``folder`` holds files that are no saved result: a save puts a new folder in its
    place, and would delete them. A folder ``save_to_disk`` or hf-judge wrote (``dataset_dict.json``, the
    manifest) is replaced, as ``datasets`` saves over one.

    Example:
        >>> check_replaceable("a-folder-of-my-files/")  # doctest: +SKIP
        Traceback (most recent call last):
        ...
        hf_judge.errors.OutputExistsError: a-folder-of-my-files holds files that are no saved result ...
    """
    out = Path(folder)
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if out.is_dir() and ((out / "dataset_dict.json").is_file() or read_manifest(out) is not None):
        return
    raise OutputExistsError(
        f"{out} holds files that are no saved result, and a save replaces the whole folder: choose another "
        "folder, or pass overwrite=True to replace it"
    )


def _what_would_be_lost(
    out: Path, source: str | None, kind: str | None, shape: Shape | None, filters: dict | None
) -> str | None:
    manifest = read_manifest(out)
    old_kind: str | None
    if manifest is None:
        if not (out / "dataset_dict.json").is_file():
            return "files that hf-judge did not write"
        old_shape = _saved_shape(out)
        old_kind, old_source = "scored", None
    else:
        old_shape = {k: (v[0], v[1]) for k, v in manifest.get("splits", {}).items()}
        old_kind, old_source = manifest.get("kind"), manifest.get("source")
    if old_source is not None and source is not None and not _same_source(old_source, source):
        return f"the result of {old_source}, not of {source}"
    if kind is not None and old_kind != kind:
        return f"a {old_kind} result, and this one is {kind}"
    old_filters = (manifest or {}).get("filters")  # None: saved before manifests had them; the rows decide
    if filters is not None and old_filters is not None and old_filters != filters:
        old, new = describe_thresholds(old_filters), describe_thresholds(filters)
        return f"the rows that pass {old}, and this result keeps those that pass {new}"
    if shape is None:
        return None
    for split, (rows, columns) in old_shape.items():
        if split == "errors":
            continue  # describes the nulls of this run's result: fewer errors lose nothing
        if split not in shape:
            return f"split {split!r}, which this result does not have"
        new_rows, new_columns = shape[split]
        if new_rows < rows:
            return f"{rows:,} rows of split {split!r}, and this result has {new_rows:,}"
        missing = [c for c in columns if c not in new_columns]
        if missing:
            return f"columns {', '.join(missing)} in split {split!r}, which this result does not have"
    return None


def _saved_shape(out: Path) -> Shape:
    """Rows and columns of a saved DatasetDict without a manifest (written before manifests existed)."""
    from datasets import load_from_disk

    try:
        return shape_of(load_from_disk(str(out)))
    except Exception:  # noqa: BLE001 - unreadable: treated as holding something
        return {"?": (1 << 62, [])}


class FolderSink:
    """A result folder written as a whole or not at all (a :class:`~hf_judge.results.sink.ResultSink`): ``start``
    checks that nothing there would be lost (:func:`check_output`), the splits go to a hidden sibling folder
    (``tmp``), and ``complete`` writes the manifest there and puts it in the folder's place; ``fail`` removes it.
    A stream's sibling (``partial``) has one name and is kept when its save stops: the same command again goes on
    after its last closed shard (``engine.stream_sink``), and ``write`` is not called for it. ``source`` None: not
    known (``ScoredDatasetDict.save_to_disk``): no manifest is written, and only the rows and columns of what is
    there are checked; ``overwrite`` None: a saved result there is replaced, as ``datasets`` saves over one, and
    only a folder of other files is refused (:func:`check_replaceable`). ``save_options``: ``datasets``'
    ``save_to_disk`` arguments (``max_shard_size``, ``num_shards`` as split -> shards, ``num_proc``). A URL folder
    is :class:`UrlFolderSink`'s (:func:`folder_sink`).

    Example:
        >>> sink = FolderSink("out/", source=source_of("data.jsonl"), shape=shape_of(scored))  # doctest: +SKIP
        >>> write_through(sink, scored.items(), None, scored.summary)  # doctest: +SKIP
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        *,
        source: str | None,
        kind: str | None = "scored",
        overwrite: bool | None = False,
        filters: dict | None = None,
        shape: Shape | None = None,
        partial: bool = False,
        save_options: dict[str, Any] | None = None,
    ):
        self.out = Path(folder)
        self.source, self.kind, self.overwrite, self.filters = source, kind, overwrite, filters
        self.shape, self.partial = shape, partial
        self.save_options = dict(save_options or {})
        tag = uuid.uuid4().hex[:8]
        self.tag = tag
        self.tmp = self.out.with_name(f".{self.out.name}.partial" if partial else f".{self.out.name}.tmp-{tag}")
        self.splits: list[str] = []

    def start(self) -> None:
        if self.overwrite is None:
            check_replaceable(self.out)
        else:
            check_output(self.out, self.source, self.kind, self.shape, self.overwrite, self.filters)
        self.out.parent.mkdir(parents=True, exist_ok=True)

    def target(self) -> str:
        """Where the splits are written: the hidden sibling, put in the folder's place by ``complete``."""
        return str(self.tmp)

    def write(self, split: str, data: Dataset) -> None:
        """One split in datasets' own layout (a fresh folder: datasets refuses to save over files it has mapped,
        and the input may be this folder); one shard for an empty one, which datasets would leave without a data
        file and then fail to load."""
        options = dict(self.save_options)
        shards = {split: 1 if len(data) == 0 else None, **(options.pop("num_shards", None) or {})}
        # the empty errors split draws no `0 examples` bar; a path-only image whose file is gone would fail
        # datasets' embedding of it (see images.saveable)
        with datasets_bars_off() if len(data) == 0 else contextlib.nullcontext():
            DatasetDict({split: saveable(data)}).save_to_disk(
                self.target(), num_shards={split: shards.get(split)}, **options
            )
        self.splits.append(split)

    def write_errors(self, errors: Dataset | None) -> None:
        if errors is not None:
            self.write(ERRORS_SPLIT, errors)

    def put(self, name: str, text: str) -> None:
        """A small file of the result (``dataset_dict.json``, ``summary.json``, the manifest) beside the splits."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        (self.tmp / name).write_text(text, encoding="utf-8")

    def complete(self, summary: RunSummary | None, shape: Shape | None = None) -> None:
        """``dataset_dict.json`` (where the splits were written here), ``summary.json`` and the manifest, then the
        folder in ``out``'s place; ``shape``: the rows and columns written, where ``start`` did not know them."""
        if self.splits:
            self.put("dataset_dict.json", json.dumps({"splits": self.splits}))
            if summary is not None:
                self.put(SUMMARY_FILE, json.dumps(summary.to_dict(), indent=1, default=str))
        if self.source is not None:
            shape = shape if shape is not None else self.shape or {}
            splits = {k: [n, c] for k, (n, c) in shape.items()}
            manifest = {"source": self.source, "kind": self.kind, "splits": splits}
            if self.filters is not None:
                manifest["filters"] = self.filters
            self.put(MANIFEST, json.dumps(manifest, indent=1))
        self.tmp.mkdir(parents=True, exist_ok=True)  # a result of no split is a folder still
        out = self.out
        if out.exists():
            old = out.with_name(f".{out.name}.old-{self.tag}")
            os.replace(out, old)
            os.replace(self.tmp, out)
            shutil.rmtree(old, ignore_errors=True)  # mapped files stay readable until unmapped
        else:
            os.replace(self.tmp, out)

    def fail(self, error: BaseException) -> None:  # noqa: ARG002 - ResultSink.fail's
        """The old folder stays as it was; a stream's partial folder stays for the same command to go on from."""
        if self.tmp.exists() and not self.partial:
            shutil.rmtree(self.tmp, ignore_errors=True)


class UrlFolderSink(FolderSink):
    """A saved result's folder on object storage or any fsspec URL (``s3://bucket/judged``, with
    ``storage_options``): the same splits, ``dataset_dict.json`` and ``summary.json`` as :class:`FolderSink`'s, but
    written in place, as ``datasets``' own ``save_to_disk`` writes there: object storage has no rename to put a
    finished folder in an old one's place, so there is nothing to check or undo.

    Example:
        >>> sink = UrlFolderSink("s3://bucket/judged", storage_options={"anon": False})  # doctest: +SKIP
    """

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, **kwargs: Any):
        from fsspec.core import url_to_fs

        super().__init__(Path(url.rstrip("/")).name or "result", source=None, kind=None, **kwargs)
        self.url, self.storage_options = url.rstrip("/"), resolve_storage_options(storage_options)
        self.fs, self.root = url_to_fs(self.url, **self.storage_options)
        self.save_options["storage_options"] = self.storage_options

    def start(self) -> None:
        self.fs.makedirs(self.root, exist_ok=True)

    def target(self) -> str:
        return self.url

    def put(self, name: str, text: str) -> None:
        with self.fs.open(f"{self.root}/{name}", "w", encoding="utf-8") as f:
            f.write(text)

    def complete(self, summary: RunSummary | None, shape: Shape | None = None) -> None:  # noqa: ARG002
        """``dataset_dict.json`` and ``summary.json`` beside the splits written in place."""
        self.put("dataset_dict.json", json.dumps({"splits": self.splits}))
        if summary is not None:
            self.put(SUMMARY_FILE, json.dumps(summary.to_dict(), indent=1, default=str))

    def fail(self, error: BaseException) -> None:  # noqa: ARG002 - ResultSink.fail's
        """What was written stays, as after an interrupted ``datasets`` save there."""


def folder_sink(
    path: str | os.PathLike,
    *,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool | None = None,
    save_options: dict[str, Any] | None = None,
    shape: Shape | None = None,
) -> FolderSink:
    """The sink of a library ``save_to_disk`` to ``path``: a local folder's :class:`FolderSink` (written whole or
    not at all; ``overwrite``: None replaces a saved result there, False refuses one this result would lose
    something of, True replaces whatever is there; ``shape``: the rows and columns to save, :func:`shape_of`), a
    URL's :class:`UrlFolderSink`.

    Example:
        >>> type(folder_sink("out/")).__name__, type(folder_sink("memory://judged")).__name__
        ('FolderSink', 'UrlFolderSink')
    """
    from fsspec.core import url_to_fs
    from fsspec.implementations.local import LocalFileSystem

    fs, root = url_to_fs(os.fspath(path), **resolve_storage_options(storage_options))
    if isinstance(fs, LocalFileSystem):
        return FolderSink(root, source=None, kind=None, overwrite=overwrite, save_options=save_options, shape=shape)
    return UrlFolderSink(os.fspath(path), storage_options=storage_options, save_options=save_options)


def save_result(
    dd: DatasetDict,
    folder: str | os.PathLike,
    *,
    source: str,
    kind: str = "scored",
    overwrite: bool = False,
    filters: dict | None = None,
) -> None:
    """``dd`` saved into ``folder`` with its manifest and summary through a :class:`FolderSink`, replacing the old
    folder only once complete. ``filters`` (:func:`thresholds`) are recorded for a filtered result.

    Example:
        >>> save_result(scored, "out/", source=source_of("data.jsonl"))  # doctest: +SKIP
    """
    streamed = isinstance(dd, IterableDatasetDict)  # a ScoredIterableDatasetDict: its rows are known once written
    summary = getattr(dd, "summary", None)
    sink = FolderSink(
        folder,
        source=source,
        kind=kind,
        overwrite=overwrite,
        filters=filters,
        shape=None if streamed else shape_of(dd),
        partial=streamed,
    )
    with open_sink(sink):
        if streamed:
            dd.save_to_disk(str(sink.tmp))  # Parquet shards, written as the rows are scored (a sink of its own)
            sink.complete(summary, dd.rows_and_columns())
        else:
            for split, d in dd.items():
                if split != ERRORS_SPLIT:
                    sink.write(split, d)
            sink.write_errors(dd.get(ERRORS_SPLIT))
            sink.complete(summary)
