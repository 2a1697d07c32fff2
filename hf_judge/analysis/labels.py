"""Human labels of scored rows, in one layout: reading, writing and joining them with a result.

A labels file is JSONL (or CSV with the same columns), one object per labelled row::

    {"split": "train", "row": 17, "score": "QA_Clarity", "label": 7, "note": "too terse", "reviewer": "ana"}

``split`` and ``row`` (the row's index in that split of the scored result) are the join key; ``score`` names
the score column the label is about (optional when the file labels one); ``label`` is a number (a human
score), a bool (a verdict: true = positive) or, for a pairwise metric, "A" / "B" / "tie"; null = not
labelled yet (``hf-judge sample-for-review`` writes null, readers skip it). ``note`` and ``reviewer`` are
optional strings; any other key (context for the reviewer: the judged text, the judge's score) is ignored.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from ..redact import scrub
from .labels_hub import HF_PREFIX, fetch_hub_labels, hub_labels

LAYOUT = ("split", "row", "score", "label", "note", "reviewer")
FIX = 'each line an object like {"split": "train", "row": 17, "score": "QA_Clarity", "label": 7}'
# the largest integer a float holds exactly: a label is compared as a float, and 10**400 is none
_LARGEST_LABEL = 2**53
# the words a pairwise label may be beside numbers (1, 2 and "tie" in one file)
_PREFERENCE_WORDS = {"a", "b", "tie", "draw", "model_a", "model_b"}
_CSV_TRUE = {"true", "yes"}
_CSV_FALSE = {"false", "no"}


def read_labels(path: str | Path, context: bool = False, *, token: str | None = None) -> list[dict[str, Any]]:
    """The labels of a JSONL or CSV file (by its extension: ``.csv`` is CSV, anything else JSONL), unlabelled
    rows (``label`` null or empty) left out. Each dict has the layout's keys (``score``, ``note`` and
    ``reviewer`` None where absent); a bad line is a ConfigError naming the file, the line and the fix.
    ``context``: keep the other keys too (the judge's score that ``sample-for-review`` wrote beside it).

    ``path`` may name labels on the Hub where no local file has that name: a dataset id (``me/to-label``,
    every JSONL/CSV/Parquet file of it, as ``sample-for-review --push-to-hub`` wrote them) or one file of
    one (``hf://datasets/me/to-label/labels.jsonl``, ``@REVISION`` after the name); ``token``: the Hub token
    to read it with (None: ``HF_TOKEN`` or the login).

    Example:
        >>> _ = Path("labels.jsonl").write_text('{"split": "train", "row": 3, "label": 8}\\n')  # doctest: +SKIP
        >>> read_labels("labels.jsonl")  # doctest: +SKIP
        [{'split': 'train', 'row': 3, 'score': None, 'label': 8, 'note': None, 'reviewer': None}]
        >>> read_labels("me/to-label", token="hf_...")  # doctest: +SKIP
    """
    out: list[dict[str, Any]] = []
    for name, unit, records in _sources(path, token):
        out += _kept(records, name, context, unit)
    return out


def label_entries(path: str | Path, *, token: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each labelled entry of a labels file (as :func:`read_labels` reads it: local, or on the Hub) with where
    it is (``labels.jsonl, line 18``), unlabelled lines left out; a local file is read line by line, so a file
    of millions of lines is never held as objects. A bad line is a ConfigError naming it, as in read_labels.

    Example:
        >>> for where, entry in label_entries("labels.jsonl"):  # doctest: +SKIP
        ...     print(where, entry["row"], entry["label"])
        labels.jsonl, line 1 3 8
    """
    for name, unit, records in _sources(path, token):
        for line, obj in records:
            where = f"{name}, {unit} {line}"
            entry = check_entry(obj, where)
            if entry is not None:
                yield where, entry


def _sources(path: str | Path, token: str | None) -> Iterator[tuple[str, str, Iterable[tuple[int, dict]]]]:
    """Each file of the labels: its name, what its records are counted in (line, or a Parquet file's row), and
    its records, read lazily from a local file."""
    p = Path(path)
    if p.is_dir():  # a folder here is what the user means, never a Hub dataset of the same name
        found = sorted(str(f) for f in p.iterdir() if f.suffix in (".jsonl", ".json", ".csv"))[:3]
        hint = f" ({', '.join(found)}{', ...' if len(found) == 3 else ''})" if found else ""
        raise ConfigError(f"cannot read labels {p}: it is a folder; give one labels file in it{hint}; {FIX}")
    if not p.is_file():
        where = hub_labels(str(path))
        if where is None:
            raise ConfigError(
                f"cannot read labels {p}: no such file here, and not a Hub dataset (me/to-label, or "
                f"hf://datasets/me/to-label/labels.jsonl); give a JSONL or CSV file or a Hub dataset; {FIX}"
            )
        try:
            files = fetch_hub_labels(where, token)
        except ConfigError as e:
            local = "" if str(path).startswith(HF_PREFIX) else "no such file here, and "
            raise ConfigError(f"cannot read labels {path}: {local}{e}") from None
        for name, content in files:
            yield name, "row" if isinstance(content, list) else "line", _records(content, name)  # Parquet: rows
        return
    if p.suffix.lower() == ".csv":
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read labels {p} ({_why(e)}): give a JSONL or CSV file; {FIX}") from None
        yield str(p), "line", _records(text, str(p))
        return
    yield str(p), "line", _jsonl_records(_lines(p), str(p))


def _lines(p: Path) -> Iterator[str]:
    """A local file's lines, one at a time."""
    try:
        with p.open(encoding="utf-8") as f:
            yield from f
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read labels {p} ({_why(e)}): give a JSONL or CSV file; {FIX}") from None


def _why(e: OSError | UnicodeDecodeError) -> str:
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 at byte {e.start}: {e.reason}"
    return str(e.strerror or e)


def label_source_name(source: str | Path) -> str:
    """How a labels source is named in a report, a calibration or a card: a local file by its name (no folder
    of the user's machine goes public), labels on the Hub as :func:`read_labels` was given them.

    Example:
        >>> label_source_name("/home/ana/labels.jsonl"), label_source_name("me/to-label")
        ('labels.jsonl', 'me/to-label')
    """
    p = Path(source)
    if p.is_file():
        return p.name
    where = hub_labels(str(source))
    return scrub(where.name) if where is not None else p.name


def _records(content: str | list[dict[str, Any]], name: str) -> Iterable[tuple[int, dict]]:
    """A file's objects with their line (JSONL, CSV) or row number (Parquet rows, counted from 1)."""
    if isinstance(content, list):
        return enumerate(content, 1)
    return _csv_records(content) if name.lower().endswith(".csv") else _jsonl_records(content.splitlines(), name)


def _kept(records: Iterable[tuple[int, dict]], name: str, context: bool, unit: str = "line") -> list[dict[str, Any]]:
    out = []
    number: tuple[int, Any] | None = None  # the first numeric label, and its line
    word: tuple[int, Any] | None = None  # the first label that is text and no number, preference or verdict
    for line, obj in records:
        label = check_entry(obj, f"{name}, {unit} {line}")
        if label is None:
            continue
        value = label["label"]
        if number is None and isinstance(value, (int, float)) and not isinstance(value, bool):
            number = (line, value)
        if word is None and isinstance(value, str) and not _label_word(value):
            word = (line, value)
        out.append({**{k: v for k, v in obj.items() if k not in label}, **label} if context else label)
    if number is not None and word is not None:  # ratings with a typo: said where, not as "a string column"
        raise ConfigError(
            f"labels {name}, {unit} {word[0]}: label {word[1]!r} is not a number, but the labels are numbers "
            f"({unit} {number[0]}: {number[1]!r}); write a number there (or null: not labelled yet)"
        )
    return out


def _label_word(v: str) -> bool:
    """True for text a label may be beside numbers: a number written as text, a preference, a verdict."""
    low = v.strip().lower()
    if low in _PREFERENCE_WORDS or low.startswith("tie") or low in _CSV_TRUE | _CSV_FALSE:
        return True
    try:
        return math.isfinite(float(low))
    except ValueError:
        return False


def _jsonl_records(lines: Iterable[str], p: str) -> Iterable[tuple[int, dict]]:
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = _lenient(raw, p, i)
        if not isinstance(obj, dict):
            raise ConfigError(f"labels {p}, line {i}: a {type(obj).__name__}, not an object; {FIX}")
        yield i, obj


def _lenient(raw: str, p: str, line: int) -> Any:
    """A line orjson refuses, read as Python's json reads it (NaN, a 400-digit number: check_entry then names what
    is wrong with the value), or a ConfigError where it is no JSON at all."""
    try:
        return json.loads(raw.rstrip("\r\n"))
    except json.JSONDecodeError as e:  # its position is in the one line it was given: its column only
        raise ConfigError(
            f"labels {p}, line {line}: not JSON ({e.msg.removesuffix(' at')} at column {e.colno}); {FIX}"
        ) from None


def _csv_records(text: str) -> Iterable[tuple[int, dict]]:
    reader = csv.DictReader(text.splitlines())
    for obj in reader:
        row = {k: (None if v == "" else v) for k, v in obj.items() if k is not None}
        cell = row.get("label")
        if isinstance(cell, str):
            row["label"] = _csv_value(cell)
        yield reader.line_num, row


def _csv_value(v: str) -> Any:
    """A CSV cell as the JSON value it stands for: ``7`` -> 7, ``6.5`` -> 6.5, ``true`` -> True, ``A`` -> "A"."""
    low = v.strip().lower()
    if low in _CSV_TRUE | _CSV_FALSE:
        return low in _CSV_TRUE
    if low in ("null", "none"):
        return None
    try:
        return int(low)
    except ValueError:
        pass
    try:
        return float(low)
    except ValueError:
        return v.strip()


def check_entry(obj: dict, where: str) -> dict[str, Any] | None:
    """One labels file object in the layout (split, row, score, label, note, reviewer), checked: None where its
    label is null (not labelled yet); a ConfigError naming ``where`` (a file's line) for a bad row or label.

    Example:
        >>> check_entry({"split": "train", "row": 3, "label": 8, "reviewer": "ana"}, "labels.jsonl, line 1")
        {'split': 'train', 'row': 3, 'score': None, 'label': 8, 'note': None, 'reviewer': 'ana'}
    """
    missing = [k for k in ("split", "row") if obj.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: no {' and no '.join(missing)}; {FIX}")
    if isinstance(obj["row"], bool):  # int(True) is 1: a true would label row 1
        raise ConfigError(f"{where}: row {json.dumps(obj['row'])} is true/false, not a row number; {FIX}")
    try:
        row = int(obj["row"])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: row {obj['row']!r} is not a row number; {FIX}") from None
    if row < 0 or (isinstance(obj["row"], float) and not float(obj["row"]).is_integer()):
        raise ConfigError(f"{where}: row {obj['row']!r} is not a row number (0 or more); {FIX}")
    label = obj.get("label")
    if label is None:
        return None  # not labelled yet
    if isinstance(label, float) and not math.isfinite(label):
        raise ConfigError(f"{where}: label {label!r} is not a finite number; write a number, true/false or A/B/tie")
    if isinstance(label, int) and not isinstance(label, bool) and abs(label) > _LARGEST_LABEL:
        digits = len(str(abs(label)))
        raise ConfigError(
            f"{where}: label {str(label)[:12]}... ({digits} digits) is too large to be a score or rating; "
            "write a number, true/false or A/B/tie"
        )
    if not isinstance(label, (bool, int, float, str)):
        raise ConfigError(
            f"{where}: label {label!r} is a {type(label).__name__}; write a number, true/false or A/B/tie"
        )
    out = {"split": str(obj["split"]), "row": row, "score": obj.get("score"), "label": label}
    for k in ("note", "reviewer"):
        out[k] = None if obj.get(k) is None else str(obj[k])
    if out["score"] is not None:
        out["score"] = str(out["score"])
    return out


def write_labels(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write rows in the labels layout (the layout's keys first, then any context key) as JSONL, or as CSV
    when ``path`` ends in ``.csv`` (context values that are lists or dicts as JSON text).

    Example:
        >>> write_labels([{"split": "train", "row": 3, "label": None}], "x.jsonl")  # doctest: +SKIP
        PosixPath('x.jsonl')
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    keys = list(LAYOUT) + [k for k in dict.fromkeys(k for r in rows for k in r) if k not in LAYOUT]
    if p.suffix.lower() == ".csv":
        with p.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            for r in rows:
                w.writerow({k: _cell(r.get(k)) for k in keys})
    else:
        with p.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({k: r.get(k) for k in keys}, ensure_ascii=False, default=str) + "\n")
    return p


def _cell(v: Any) -> Any:
    if isinstance(v, (list, dict)):
        return json.dumps(v, ensure_ascii=False, default=str)
    return "" if v is None else v


@dataclass
class Joined:
    """Labels joined with a result's column: ``keys[i]`` = (split, row), ``scores[i]`` its value in the column
    (None where the judge failed), ``labels[i]`` the label (several labels of one row combined: the mean of
    numbers, else the most common, ties to the first); ``raters``: per (split, row), reviewer -> label, for
    Krippendorff's alpha among the reviewers."""

    score: str
    column: str
    keys: list[tuple[str, int]] = field(default_factory=list)
    scores: list[Any] = field(default_factory=list)
    labels: list[Any] = field(default_factory=list)
    raters: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @property
    def reviewers(self) -> list[str]:
        return sorted({r for by in self.raters.values() for r in by})


def labels_for(
    labels: Sequence[dict[str, Any]], score: str, columns: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The labels about ``score``: those naming it, and those naming none when no label names another column.
    ``columns``: the result's, to tell a file that misspells a score (did you mean ...?) from one about another.

    Example:
        >>> labels_for([{"split": "t", "row": 0, "score": None, "label": 1}], "QA_Clarity")[0]["row"]
        0
    """
    named = {lab["score"] for lab in labels if lab.get("score")}
    if named and score not in named and all(lab.get("score") for lab in labels):
        typos = sorted(n for n in named if columns is not None and n not in columns)
        close = difflib.get_close_matches(typos[0], [score, *(columns or [])], n=1) if typos else []
        if close:  # the file misspells a column: the fix is in the file, not in --score
            raise ConfigError(
                f"the labels name score {typos[0]!r}, which is no column of the result: did you mean "
                f'{close[0]!r}? Fix the labels file\'s "score" (or leave it out where the file labels one score)'
            )
        raise ConfigError(
            f"the labels are about {', '.join(sorted(named))}, not {score!r}: pass --score {sorted(named)[0]}"
        )
    return [lab for lab in labels if lab.get("score") in (score, None)]


def join_labels(
    result: Dataset | DatasetDict, labels: Sequence[dict[str, Any]], score: str, column: str | None = None
) -> Joined:
    """Align ``labels`` (as :func:`read_labels` gives them) with the result's ``score`` column (or ``column``,
    e.g. ``QA_Correctness_expected``) by (split, row): one entry per labelled row, in (split, row) order.
    A label whose split or row the result lacks is a ConfigError (the labels belong to another result).

    Example:
        >>> ds = Dataset.from_dict({"QA_Clarity": [7, 3, 9]})
        >>> j = join_labels(ds, [{"split": "train", "row": 2, "label": 8}], "QA_Clarity")
        >>> j.keys, j.scores, j.labels
        ([('train', 2)], [9], [8])
    """
    dd = result if isinstance(result, DatasetDict) else DatasetDict({"train": result})
    column = column or score
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    columns = list(dict.fromkeys(c for k, d in dd.items() if k != "errors" for c in d.column_names))
    for lab in labels_for(labels, score, columns):
        grouped[(lab["split"], lab["row"])].append(lab)
    out = Joined(score=score, column=column)
    for split in sorted({k[0] for k in grouped}):
        if split not in dd or split == "errors":
            have = ", ".join(k for k in dd if k != "errors")
            raise ConfigError(f"the labels name split {split!r}; the result has: {have} (labels of another result?)")
        d = dd[split]
        if column not in d.column_names:
            raise ConfigError(f"no column {column!r} in split {split!r}; it has: {', '.join(d.column_names)}")
        rows = sorted(r for s, r in grouped if s == split)
        if rows[-1] >= len(d):
            raise ConfigError(
                f"the labels name row {rows[-1]} of split {split!r}, which has {len(d):,} rows "
                "(row is the 0-based index in the scored result: labels of another result?)"
            )
        values = d.select(rows)[column]
        for r, v in zip(rows, values, strict=True):
            group = grouped[(split, r)]
            out.keys.append((split, r))
            out.scores.append(v)
            out.labels.append(combine([g["label"] for g in group]))
            named = {g["reviewer"]: g["label"] for g in group if g.get("reviewer")}
            if named:
                out.raters[(split, r)] = named
    return out


def combine(values: Sequence[Any]) -> Any:
    """One label from several of a row: the mean of numbers, else the most common (ties to the first).

    Example:
        >>> combine([7, 8]), combine([True, False, True]), combine(["A", "tie"])
        (7.5, True, 'A')
    """
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sum(values) / len(values)
    return Counter(values).most_common(1)[0][0]


def labelled_split(result: Dataset | DatasetDict, joined: Joined, name: str) -> Dataset:
    """The labelled rows of the one split the labels name, in row order, with the labels added as column
    ``name`` (bool, numbers, or text for preferences A/B/tie): what :func:`hf_judge.agreement` reads.

    Example:
        >>> ds = Dataset.from_dict({"QA_Clarity": [7, 3, 9]})
        >>> j = join_labels(ds, [{"split": "train", "row": 2, "label": 8}], "QA_Clarity")
        >>> labelled_split(ds, j, "human").to_dict()
        {'QA_Clarity': [9], 'human': [8]}
    """
    dd = result if isinstance(result, DatasetDict) else DatasetDict({"train": result})
    splits = sorted({s for s, _ in joined.keys})
    if len(splits) != 1:
        raise ConfigError(
            f"the labels name splits {', '.join(splits) or '(none)'}: compare one at a time (--split NAME)"
            if splits
            else "no labelled row: every label is null (label some rows, or check the file's score names)"
        )
    labels = joined.labels
    if all(isinstance(v, bool) for v in labels) or all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels
    ):
        typed: list[Any] = labels
    else:
        typed = [str(v).lower() if isinstance(v, bool) else str(v) for v in labels]
    d = dd[splits[0]].select([r for _, r in joined.keys])
    if name in d.column_names:
        d = d.remove_columns(name)
    return d.add_column(name, typed)
