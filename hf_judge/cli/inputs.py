"""Reading the CLI's DATASET argument: a Hub repo id, a folder, or one data file."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import logging
import lzma
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, cast

import pyarrow as pa
from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict, load_dataset, load_from_disk
from datasets import config as datasets_config
from datasets.data_files import EmptyDatasetError
from datasets.exceptions import DataFilesNotFoundError, DatasetGenerationError

from .. import constants, pages
from ..errors import ConfigError, HubUnreachableError
from ..progress import LIBRARY_CHATTER, quiet
from ..redact import register, scrub
from ..results.loader import load_result
from ..results.report_stream import stream_folder
from ..results.sink import RAY_MARKER
from ..results.summary import SUMMARY_FILE, RunSummary

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
# compressed text files datasets' own extractors read (HumanEval ships as .jsonl.gz); .zst needs `zstandard`.
# Parquet and Arrow compress inside the file: a compressed one is no format datasets reads.
_COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": None}
_TEXT_FORMATS = (".jsonl", ".json", ".csv")
_FILE_TYPES = ".jsonl, .json, .parquet, .csv or .arrow (.jsonl, .json and .csv may end in .gz, .bz2, .xz or .zst)"
# what a folder to score must hold, for the message when it holds nothing loadable
_FOLDER_CONTENTS = (
    "data files (.jsonl, .json, .parquet, .csv, .arrow), or be a folder saved by hf-judge or Dataset.save_to_disk"
)


# datasets' readers log an error naming the file before raising: kept for our one message, not printed
_READER_LOGGERS = tuple(
    f"datasets.packaged_modules.{name}.{name}" for name in ("json", "parquet", "csv", "arrow", "text")
)
_NAMED_FILE = re.compile(r"(?:from file|from|file) '([^']+)'")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _reader_errors() -> Iterator[list[str]]:
    """The error lines datasets' file readers log in the block, kept (not printed: the ConfigError that follows
    says it once, with the right line and the fix); printed as well under ``HF_JUDGE_DEBUG=1``."""
    found = [logging.getLogger(name) for name in _READER_LOGGERS]
    handler, before = _Collect(), [log.propagate for log in found]
    for log in found:
        log.addHandler(handler)
        log.propagate = constants.debug_enabled()
    try:
        yield handler.messages
    finally:
        for log, propagate in zip(found, before, strict=True):
            log.removeHandler(handler)
            log.propagate = propagate


def _unreadable(spec: str, logged: list[str], e: BaseException) -> ConfigError:
    """A reader's failure as a ConfigError naming the file (as the Hub repo names it) and the fix."""
    cause = e.__cause__ or e
    named = next((m.group(1) for line in logged if (m := _NAMED_FILE.search(line))), None)
    where = _repo_path(named) if named else None
    what = f"{spec}: cannot read {where}" if where else f"{spec}: cannot read a data file"
    parquet = "parquet" in str(cause).lower() or (where or "").endswith(".parquet")
    return ConfigError(f"{what} ({type(cause).__name__}: {str(cause)[:300]}); {_PARQUET_FIX if parquet else _FIX}")


_PARQUET_FIX = "the file is damaged or not Parquet: write it again (e.g. pyarrow.parquet.write_table), or remove it"
_FIX = "fix that file, or remove it"


def _repo_path(file: str) -> str:
    """A data file as the user knows it: its path in the Hub repo, not in the local cache
    (``.../datasets--me--x/snapshots/<sha>/data/train.parquet`` -> ``data/train.parquet``)."""
    file = file.removeprefix("file://")
    head, sep, tail = file.partition("/snapshots/")
    if sep and "/" in tail:
        return tail.partition("/")[2]
    rest = re.sub(r"^hf://datasets/[^@/]+/[^@/]+(@[^/]+)?/", "", file)
    return rest


def load_input(
    spec: str,
    *,
    subset: str | None = None,
    splits: list[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    limit: int | None = None,
    streaming: bool = False,
) -> DatasetDict | IterableDatasetDict:
    """Load ``spec`` as a DatasetDict, keeping ``splits`` and the first ``limit`` rows of each.

    ``streaming=True`` gives an ``IterableDatasetDict``: a Hub dataset is read as it is
    iterated (``load_dataset(..., streaming=True)``: nothing downloaded ahead); a local file
    or folder is loaded as usual and then iterated.

    Example:
        >>> load_input("data/train.jsonl", limit=100)  # doctest: +SKIP
        DatasetDict({train: Dataset({features: [...], num_rows: 100})})
        >>> load_input("HuggingFaceFW/fineweb", subset="sample-10BT", streaming=True)  # doctest: +SKIP
        IterableDatasetDict({train: IterableDataset({features: [...], num_shards: 14})})
    """
    register(token)  # before scoring: a judge reply quoting it must not keep it
    with quiet(*LIBRARY_CHATTER), _reader_errors() as failed:  # a README without metadata: no news to the user
        try:
            dd = _load(spec, subset, revision, token, streaming)
        except (DatasetGenerationError, pa.ArrowException) as e:  # a data file a reader refused (corrupt Parquet)
            raise _unreadable(spec, failed, e) from None
    if isinstance(dd, Dataset):
        dd = DatasetDict({"train": dd})
    if streaming and isinstance(dd, DatasetDict):  # already local: iterated as it is
        dd = IterableDatasetDict({k: _iterable(d) for k, d in dd.items()})
    if splits:
        unknown = [s for s in splits if s not in dd]
        if unknown:
            raise ConfigError(f"no split {unknown[0]!r} in {spec}; it has: {', '.join(dd)}")
        dd = type(dd)({s: dd[s] for s in splits})
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive number of rows, got {limit}")
    if limit is not None and isinstance(dd, IterableDatasetDict):
        dd = IterableDatasetDict({s: d.take(limit) for s, d in dd.items()})
    elif limit is not None:
        dd = DatasetDict({s: d.select(range(min(limit, len(d)))) for s, d in dd.items()})
    return dd


def _load(
    spec: str, subset: str | None, revision: str | None, token: str | None, streaming: bool
) -> DatasetDict | IterableDatasetDict | Dataset:
    """``spec`` as a file, a folder or a Hub repo id."""
    path = Path(spec).expanduser()
    if path.is_file():
        dd = _load_file(path, _builder(spec, path))
    elif path.is_dir():
        dd = _load_folder(spec, path)
    elif spec.endswith(("/", os.sep)):
        raise ConfigError(f"{spec}: no such folder (a trailing slash names a local folder, never a Hub dataset)")
    elif looks_like_path(spec):
        raise ConfigError(f"{spec}: no such file or folder")
    else:
        dd = _load_hub(spec, subset, revision, token, streaming)
    return dd


def _iterable(d: Dataset) -> IterableDataset:
    """``d`` read as a stream; an empty split too (``to_iterable_dataset`` refuses to make 1 shard of 0 rows)."""
    if len(d):
        return d.to_iterable_dataset()
    return IterableDataset.from_generator(_no_rows, features=d.features)


def _no_rows() -> Iterator[dict]:
    yield from ()


def looks_like_path(spec: str) -> bool:
    """True for a spec that can only be a local path, never a Hub repo id.

    A data-file suffix (compressed too), a leading ``./``, ``../``, ``/`` or
    ``~``, a trailing slash, or more than one slash (a Hub id is ``name`` or
    ``owner/name``): a mistyped file name fails at once instead of being
    looked up on the Hub.

    Example:
        >>> looks_like_path("nonexist.jsonl.gz"), looks_like_path("data/x/y"), looks_like_path("openai/gsm8k")
        (True, True, False)
        >>> looks_like_path("openai/gsm8k/")
        True
    """
    return (
        _data_suffix(Path(spec)) in _FILE_BUILDERS
        or spec.startswith((".", "/", "~"))
        or spec.endswith(("/", os.sep))
        or spec.count("/") > 1
    )


def file_stem(path: Path) -> str:
    """The name of a data file without its format's suffix, a compression's included.

    Example:
        >>> file_stem(Path("HumanEval.jsonl.gz")), file_stem(Path("data.csv")), file_stem(Path("folder"))
        ('HumanEval', 'data', 'folder')
    """
    return (path.with_suffix("") if path.suffix.lower() in _COMPRESSED else path).stem


def _data_suffix(path: Path) -> str:
    """The suffix that names the format: ``.jsonl`` for ``x.jsonl.gz`` as for ``x.jsonl``."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix in _COMPRESSED else suffix


def _builder(spec: str, path: Path) -> str:
    """The datasets builder that reads the file ``path``; a ConfigError for a type it does not read."""
    suffix, compressed = _data_suffix(path), path.suffix.lower() in _COMPRESSED
    builder = _FILE_BUILDERS.get(suffix)
    if builder is None or (compressed and suffix not in _TEXT_FORMATS):
        kind = "".join(path.suffixes[-2:]) if compressed else path.suffix
        raise ConfigError(f"{spec}: unsupported file type {kind!r}; use {_FILE_TYPES}")
    if path.suffix.lower() == ".zst" and not datasets_config.ZSTANDARD_AVAILABLE:
        raise ConfigError(f"{spec}: reading .zst needs the zstandard package: pip install zstandard")
    return builder


def _open_text(path: Path) -> IO[str]:
    """``path`` as text, decompressed: for the checks that read a file datasets could not load."""
    opener = _COMPRESSED.get(path.suffix.lower(), open)
    if opener is None:  # .zst: zstandard, whose presence _builder checked
        import zstandard  # type: ignore[import-not-found,unused-ignore]  # optional, as in datasets

        return io.TextIOWrapper(zstandard.open(path, "rb"), encoding="utf-8", errors="replace")
    return opener(path, "rt", encoding="utf-8", errors="replace")


def _load_folder(spec: str, path: Path) -> DatasetDict | Dataset:
    """A folder saved by ``save_to_disk``, or one that ``load_dataset`` reads (data files, images)."""
    if (path / "dataset_dict.json").exists() or (path / "state.json").exists():
        loaded = load_from_disk(str(path))
        return loaded if isinstance(loaded, DatasetDict) else DatasetDict({"train": loaded})
    if stream_folder(path) is not None or (path / RAY_MARKER).is_file():
        # a streamed run's Parquet shards or a Ray output_dir: read back as a saved result is, errors included
        return DatasetDict(load_result(path))
    try:
        return _utf8_checked(load_dataset(str(path)), sorted(f for f in path.rglob("*") if _is_text_data(f)))
    except (EmptyDatasetError, DataFilesNotFoundError):
        if not any(path.iterdir()):
            raise ConfigError(f"{spec}: the folder is empty; it should hold {_FOLDER_CONTENTS}") from None
        raise ConfigError(f"{spec}: no data files in this folder; it should hold {_FOLDER_CONTENTS}") from None


# how long the Hub has to answer one request before hf-judge takes it as unreachable
HUB_PROBE_TIMEOUT = 10.0
HUB_PROBE_TTL = 30.0  # seconds an answer is kept: one CLI run asks once, a long-lived process again later
_hub_checked: dict[str, tuple[float, str | None]] = {}  # endpoint -> (when, why it could not be reached or None)


def hub_unreachable() -> str | None:
    """Why the Hub (``HF_ENDPOINT``) cannot be reached now, or None when it answers.

    One request without retries: on a refused connection huggingface_hub retries for ~23 s (1 + 2 + 4 + 8 + 8 s
    apart) before it fails, with no setting to shorten that. Any HTTP answer, even an error status, counts as
    reachable. The answer is kept for ``HUB_PROBE_TTL`` seconds; never asked under ``HF_HUB_OFFLINE``.

    Example:
        >>> hub_unreachable()  # doctest: +SKIP
        'ConnectionRefusedError: [Errno 111] Connection refused'
    """
    from huggingface_hub import constants, get_session

    if datasets_config.HF_HUB_OFFLINE:
        return None
    endpoint, now = constants.ENDPOINT, time.monotonic()
    if endpoint in _hub_checked and now - _hub_checked[endpoint][0] < HUB_PROBE_TTL:
        return _hub_checked[endpoint][1]
    why = None
    try:
        # the root: any answer will do, and it costs the Hub nothing (/api/datasets would list datasets)
        # no redirects followed, in requests (before huggingface_hub 1.x) and httpx alike
        get_session().head(f"{endpoint}/", timeout=HUB_PROBE_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - refused, DNS, timeout, proxy, TLS: each means "cannot reach it"
        why = _why(e)
    _hub_checked[endpoint] = (now, why)
    return why


def _why(e: BaseException) -> str:
    """``e`` in one short line: where it wraps a system error (``[Errno 111] Connection refused``, a DNS
    failure) that error, not its wrappers (requests' ``MaxRetryError(...)`` runs to 300 characters).

    Example:
        >>> _why(ValueError("bad")), _why(RuntimeError("x", ConnectionRefusedError(111, "Connection refused")))
        ('ValueError: bad', 'ConnectionRefusedError: [Errno 111] Connection refused')
    """
    seen: set[int] = set()
    todo: list[object] = [e]
    while todo:
        x = todo.pop(0)
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, OSError) and x.errno is not None:
            return f"{type(x).__name__}: [Errno {x.errno}] {x.strerror}"
        # requests wraps urllib3's MaxRetryError (its .reason) in args; httpx and urllib3 chain with `from`
        todo += [*x.args, getattr(x, "reason", None), x.__cause__, x.__context__]
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


@contextmanager
def _offline() -> Iterator[None]:
    """datasets' and huggingface_hub's offline mode for the block: their local caches are used at once.

    Both read ``HF_HUB_OFFLINE`` once, at import, into a module attribute that every call checks (datasets'
    own tests switch it the same way); the environment variable alone would come too late.
    """
    from huggingface_hub import constants

    before = datasets_config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets_config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets_config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = before


def _load_hub(
    spec: str, subset: str | None, revision: str | None, token: str | None, streaming: bool = False
) -> DatasetDict | IterableDatasetDict:
    """``load_dataset`` from the Hub; a missing repo is a ConfigError, no connection a HubUnreachableError.

    When the Hub cannot be reached (:func:`hub_unreachable`), the copy in datasets' local cache is loaded at
    once, as datasets does after its retries; without one the error comes at once too.
    """
    from huggingface_hub import constants

    why = hub_unreachable()
    if why:
        try:
            with _offline():
                dd = load_dataset(spec, subset, revision=revision, token=token, streaming=streaming)
        except (ConnectionError, FileNotFoundError, ValueError):
            raise HubUnreachableError(
                f"cannot reach the Hub at {constants.ENDPOINT} to load {spec!r} ({scrub(why)[:200]}), and it is "
                "not in the local cache; check the network (or HF_ENDPOINT), or use a local file or folder"
            ) from None
        print(f"hf-judge: cannot reach the Hub ({scrub(why)[:200]}); using the cached copy of {spec!r}",
              file=sys.stderr, flush=True)  # fmt: skip
        return dd
    try:
        return load_dataset(spec, subset, revision=revision, token=token, streaming=streaming)
    except (DatasetGenerationError, pa.ArrowException):
        raise  # a data file that cannot be read: load_input names it
    except ConnectionError as e:  # datasets' own: "Couldn't reach 'x' on the Hub (<cause>)", after its retries
        cause = str(e).rpartition("(")[2].rstrip(")") or type(e).__name__
        if cause == "OfflineModeIsEnabled" or datasets_config.HF_HUB_OFFLINE:
            raise HubUnreachableError(
                f"cannot load {spec!r}: HF_HUB_OFFLINE is set and it is not in the local cache; "
                "unset HF_HUB_OFFLINE, or use a local file or folder"
            ) from None
        raise HubUnreachableError(
            f"cannot reach the Hub to load {spec!r} ({cause}); check the network, or use a local file or folder"
        ) from None
    except FileNotFoundError as e:
        raise ConfigError(
            f"dataset {spec!r} was not found on the Hub or on disk ({e}). Check the name, --subset and --token."
        ) from None
    except ValueError as e:
        raise ConfigError(f"cannot load {spec!r}: {e}") from None


def input_summary(spec: str, *, revision: str | None = None, token: str | None = None) -> RunSummary | None:
    """The ``summary.json`` hf-judge saved with ``spec`` (a folder, or ``hf_judge/summary.json`` in a Hub repo).

    None for a dataset hf-judge did not save.

    Example:
        >>> input_summary("out/").model  # doctest: +SKIP
        'gpt-4.1-nano'
    """
    path = summary_file(spec, revision=revision, token=token)
    return None if path is None else RunSummary.load(path.parent)


def summary_file(spec: str, *, revision: str | None = None, token: str | None = None) -> Path | None:
    """Where the ``summary.json`` of ``spec`` is on disk (a folder's own; a Hub repo's ``hf_judge/summary.json``,
    downloaded), without reading it; None where there is none.

    Example:
        >>> summary_file("me/gsm8k-judged")  # doctest: +SKIP
        PosixPath('/root/.cache/huggingface/hub/datasets--me--gsm8k-judged/snapshots/.../hf_judge/summary.json')
    """
    path = Path(spec).expanduser()
    if path.exists():
        return path / SUMMARY_FILE if path.is_dir() and (path / SUMMARY_FILE).is_file() else None
    if looks_like_path(spec):  # a local path that is not there: nothing to ask the Hub
        return None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        with _offline() if hub_unreachable() else nullcontext():  # the cached copy, or none, at once
            local = hf_hub_download(
                spec, f"hf_judge/{SUMMARY_FILE}", repo_type="dataset", revision=revision, token=token
            )
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError, LocalEntryNotFoundError):
        return None
    return Path(local)


def _load_file(path: Path, builder: str) -> DatasetDict:
    """One data file as a ``train`` split; an empty or malformed file is a ConfigError naming it."""
    if _no_text(path):
        raise ConfigError(f"{path} is empty: no rows to score")
    try:
        dd = load_dataset(builder, data_files={"train": str(path)})
    except (DatasetGenerationError, ValueError) as e:  # ValueError: datasets' own, from reading the first rows
        cause = e.__cause__ or e
        if builder in ("json", "csv"):
            _check_utf8(path)
        if builder == "json":
            _check_json_lines(path)
        fix = f"; {_PARQUET_FIX}" if builder == "parquet" else ""
        raise ConfigError(f"{path}: cannot read it ({type(cause).__name__}: {cause}){fix}") from None
    return _utf8_checked(dd, [path] if builder == "json" else [])


def _is_text_data(path: Path) -> bool:
    return path.is_file() and _data_suffix(path) in _TEXT_FORMATS


def _utf8_checked(dd: DatasetDict, files: list[Path]) -> DatasetDict:
    """``dd``, once its text is known to be UTF-8. Arrow's JSON reader stores the bytes of a latin-1 file as
    they are, and reading such a row later fails (UnicodeDecodeError); Arrow's check of the table runs at
    gigabytes a second, and the pages it reads are released after it."""
    if not files or not isinstance(dd, DatasetDict):
        return dd
    for d in dd.values():
        try:
            d.data.table.validate(full=True)
        except pa.ArrowInvalid:
            for f in files:
                _check_utf8(f)
            raise ConfigError(
                f"{files[0] if len(files) == 1 else files[0].parent}: text that is not UTF-8; re-encode the "
                "data files as UTF-8 (iconv -f latin1 -t utf-8 FILE > NEW_FILE, naming the encoding they were "
                "written in after -f)"
            ) from None
        finally:
            pages.release(pages.file_paths(d.cache_files))
    return dd


def _check_utf8(path: Path) -> None:
    """A ConfigError naming the first line of ``path`` (decompressed) that is not UTF-8, with the command that
    re-encodes the file; nothing when every line is."""
    with _open_bytes(path) as f:
        for n, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                byte = line[e.start]
                plain = path.with_name(file_stem(path) + _data_suffix(path))
                fixed = plain.with_name(f"{plain.stem}.utf8{plain.suffix}")
                read = f"{_DECOMPRESS[path.suffix.lower()]} {path} | " if path.suffix.lower() in _COMPRESSED else ""
                source = "" if read else f" {path}"
                raise ConfigError(
                    f"{path}, line {n}: not UTF-8 (byte 0x{byte:02x} at column {e.start + 1}; {bytes([byte])!r} "
                    f"is {bytes([byte]).decode('latin-1')!r} in latin-1). Re-encode the file as UTF-8: "
                    f"{read}iconv -f latin1 -t utf-8{source} > {fixed} (if it was written in another encoding, "
                    "name it after -f, e.g. cp1252)"
                ) from None


_DECOMPRESS = {".gz": "gzip -dc", ".bz2": "bzip2 -dc", ".xz": "xz -dc", ".zst": "zstd -dc"}


def _open_bytes(path: Path) -> IO[bytes]:
    """``path``'s bytes, decompressed."""
    opener = _COMPRESSED.get(path.suffix.lower(), open)
    if opener is None:  # .zst: zstandard, whose presence _builder checked
        import zstandard  # type: ignore[import-not-found,unused-ignore]  # optional, as in datasets

        return zstandard.open(path, "rb")
    return cast(IO[bytes], opener(path, "rb"))  # gzip/bz2/lzma files and open(): each a binary file


def _no_text(path: Path) -> bool:
    """True for a file that holds nothing but white space (once decompressed)."""
    if path.suffix.lower() in _COMPRESSED:
        with _open_text(path) as f:
            return not any(line.strip() for line in f)
    return path.stat().st_size < 4096 and not path.read_bytes().strip()


def _check_json_lines(path: Path) -> None:
    """A ConfigError naming the first line of a JSON-lines file datasets cannot read, if a line explains it:
    one that is no JSON object, or one where a column's JSON type differs from its first one's (datasets
    reads such a column as JSON text, but not from a file with blank lines: "Expected object or value").
    Read only after loading failed; a ``.json`` file holding one JSON document passes."""
    first: dict[str, tuple[str, int]] = {}  # column -> (its JSON type, the line that had it first)
    document = _data_suffix(path) == ".json"
    with _open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                if document and n == 1:
                    return  # one JSON document over several lines
                # the parser's own position is in the one line it was given ("line 1 column 12"): its column only
                raise ConfigError(
                    f"{path}, line {n}: not valid JSON ({e.msg.removesuffix(' at')} at column {e.colno}). {_ONE_OBJECT}"
                ) from None
            if not isinstance(value, dict):
                if document:
                    return
                raise ConfigError(f"{path}, line {n}: a JSON {type(value).__name__}, not an object. {_ONE_OBJECT}")
            for column, v in value.items():
                kind = _json_type(v)
                seen = first.setdefault(column, (kind, n)) if kind else None
                if seen and seen[0] != kind:
                    raise ConfigError(
                        f"{path}, line {n}: column {column!r} is {kind}, but {seen[0]} on line {seen[1]}. "
                        f"Make {column!r} one type on every line (e.g. a JSON string), or remove the blank lines"
                    )


_ONE_OBJECT = "Each line must be one JSON object."


def _json_type(value: object) -> str | None:
    """The JSON type of a decoded value, as Arrow tells them apart (an integer and a float are both numbers)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else "an array" if isinstance(value, list) else "an object"


def example_dataset_path() -> Path:
    """The small example dataset shipped in the package: JSON lines with ``instruction`` and ``output``.

    Example:
        >>> example_dataset_path().name
        'example.jsonl'
    """
    return Path(__file__).resolve().parent.parent / "examples" / "example.jsonl"  # hf_judge/examples/
