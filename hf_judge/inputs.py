"""Reading the CLI's DATASET argument: a Hub repo id, a folder, or one data file."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

from .errors import ConfigError

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def load_input(
    spec: str,
    *,
    subset: str | None = None,
    splits: list[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    limit: int | None = None,
) -> DatasetDict:
    """Load ``spec`` as a DatasetDict, keeping ``splits`` and the first ``limit`` rows of each.

    Example:
        >>> load_input("data/train.jsonl", limit=100)  # doctest: +SKIP
        DatasetDict({train: Dataset({features: [...], num_rows: 100})})
    """
    path = Path(spec).expanduser()
    if path.is_file():
        builder = _FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise ConfigError(f"{spec}: unsupported file type {path.suffix!r}; use .jsonl, .json, .parquet or .csv")
        dd = load_dataset(builder, data_files={"train": str(path)})
    elif path.is_dir():
        if (path / "dataset_dict.json").exists() or (path / "state.json").exists():
            loaded = load_from_disk(str(path))
            dd = loaded if isinstance(loaded, DatasetDict) else DatasetDict({"train": loaded})
        else:
            dd = load_dataset(str(path))
    elif spec.count("/") <= 1 and not spec.startswith((".", "/", "~")):
        try:
            dd = load_dataset(spec, subset, revision=revision, token=token)
        except FileNotFoundError as e:
            raise ConfigError(f"dataset {spec!r} was not found on the Hub or on disk ({e}). Check the name, --subset and --token.") from None
        except ValueError as e:
            raise ConfigError(f"cannot load {spec!r}: {e}") from None
    else:
        raise ConfigError(f"{spec}: no such file or folder")
    if isinstance(dd, Dataset):
        dd = DatasetDict({"train": dd})
    if splits:
        unknown = [s for s in splits if s not in dd]
        if unknown:
            raise ConfigError(f"no split {unknown[0]!r} in {spec}; it has: {', '.join(dd)}")
        dd = DatasetDict({s: dd[s] for s in splits})
    if limit is not None:
        dd = DatasetDict({s: d.select(range(min(limit, len(d)))) for s, d in dd.items()})
    return dd


def example_dataset_path() -> Path:
    """The small example dataset shipped in the package: JSON lines with ``instruction`` and ``output``.

    Example:
        >>> example_dataset_path().name
        'example.jsonl'
    """
    return Path(__file__).resolve().parent / "examples" / "example.jsonl"
