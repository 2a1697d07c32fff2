"""Seed parity: the seed tool's ``config.yaml``, JSONL layout, id tracking and score merging.

People moving over from the tool that seed 004 describes keep their files:

* ``hf-judge run config.yaml`` (or ``python -m hf_judge --config-path config.yaml``)
  reads the seed's config as written, scores ``input_path`` (JSONL lines with
  ``id``, ``instruction``, ``output``) through the same engine, with caching and
  resume, and writes ``<stem>_scored.jsonl`` and ``<stem>_errors.jsonl`` in
  ``output_path``.
* ``<stem>_scored.jsonl``: one line per fully scored item, in input order:
  ``{"id": ..., "scores": {"Q": {"All": {"Clarity": 8, ...}}, "QA": {"Correctness": {"reason": "...", "score": 7}}}}``.
  The ``id`` is kept exactly as given (the original overwrote it with line numbers).
* ``<stem>_errors.jsonl``: one line per failed (item, metric):
  ``{"id", "item", "mode", "metric", "error": {"kind", "message", "raw", "attempts"}}``.
* With ``id_track_file``, an item counts as done only when every metric
  succeeded (the original marked items done with a metric missing); done ids
  are skipped next time and newly done items are appended to the scored file,
  so an id never appears twice. Without it, both files are rewritten each run
  (and the cache makes that free).
* Ids keep their JSON type everywhere: ``7`` and ``"7"`` are two items. The
  track file holds one id per line as JSON (``"item-3"``, ``7``); a line that
  is not JSON is read as a bare string id, as the seed tool wrote them.
* Every input line must be a JSON object with an ``id``; the first one that is
  not stops the run before any request, naming its line (a :class:`ConfigError`).
* ``All`` and single metrics of one mode can be listed together
  (``QA: ["All", "Meaningness"]``): each lands under its own key of ``scores.QA``.
* ``chunk_size`` is accepted and ignored: rows stream continuously.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..engine.score import score_dataset
from ..errors import ConfigError
from ..judging.catalogue import resolve_metrics
from ..redact import resolve_secret
from ..results.summary import RunSummary
from ..settings import Concurrency, Retries, Temperature, Timeout, TopP, resolve_settings, validated
from .recipes import read_yaml

logger = logging.getLogger("hf_judge")


class _OpenAI(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: str | None = None
    base_url: str | None = None


class _Metrics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    Q: list[str] | None = None
    QA: list[str] | None = None


_MODEL_KEYS = ("model", "concurrency", "timeout", "retry", "chunk_size", "temperature", "top_p")


class SeedConfig(BaseModel):
    """The seed's ``config.yaml``, key for key. Unknown keys are errors.

    Example:
        >>> SeedConfig(model="gpt-4.1-nano", input_path="data.jsonl", metrics={"QA": ["All"]}).retry
        3
    """

    model_config = ConfigDict(extra="forbid")
    openai: _OpenAI = _OpenAI()
    # the seed's own keys and defaults, with the limits of hf_judge.Settings (settings() maps them onto it)
    model: Annotated[str, Field(min_length=1)]
    concurrency: Concurrency = 1024
    timeout: Timeout = 30
    retry: Retries = 3
    chunk_size: Annotated[int, Field(ge=1)] = 2048
    temperature: Temperature | None = None
    top_p: TopP = 1.0
    input_path: str
    output_path: str = "output"
    prompts_dir: str | None = None
    id_track_file: str | None = None
    metrics: _Metrics

    @model_validator(mode="before")
    @classmethod
    def _model_keys_under_openai(cls, data: Any) -> Any:
        """The seed lists ``model`` ... ``top_p`` right after ``openai:``'s keys, under "API and Model
        Configuration", so a config may nest them there: they are read as if at the top level. Given in both
        places with different values, the config is refused naming both."""
        if not isinstance(data, dict) or not isinstance(data.get("openai"), dict):
            return data
        nested = {k: v for k, v in data["openai"].items() if k in _MODEL_KEYS}
        if not nested:
            return data
        clash = [k for k, v in nested.items() if k in data and data[k] != v]
        if clash:
            raise ValueError(
                "given twice with different values: "
                + "; ".join(f"{k!r} is {data[k]!r} at the top level and {nested[k]!r} under 'openai'" for k in clash)
                + "; keep one of them"
            )
        openai = {k: v for k, v in data["openai"].items() if k not in _MODEL_KEYS}
        return {**data, **nested, "openai": openai}

    def settings(self) -> dict[str, Any]:
        """The run's settings in hf_judge's names (``retry`` -> ``retries``, ``openai.base_url`` -> ``base_url``).
        The seed tool evaluates an item that failed again on its next run (only evaluated IDs are tracked): so
        does its config here (``retry_errors``), where hf-judge itself replays a kept invalid reply."""
        keep = ("model", "concurrency", "timeout", "temperature", "top_p")
        return {
            **{k: getattr(self, k) for k in keep},
            "retries": self.retry,
            "base_url": self.openai.base_url,
            "retry_errors": True,
        }

    def metric_names(self) -> list[tuple[str, str, str]]:
        """(mode, seed metric name, hf-judge metric name)."""
        out = []
        for mode in ("Q", "QA"):
            for name in getattr(self.metrics, mode) or []:
                out.append((mode, name, f"{mode}_{name}"))
        return out


def is_seed_config(data: dict) -> bool:
    """True for a seed-004 ``config.yaml`` (as opposed to an hf-judge recipe).

    Example:
        >>> is_seed_config({"input_path": "x.jsonl", "metrics": {"Q": ["All"]}})
        True
    """
    metrics = data.get("metrics")
    return "input_path" in data or "openai" in data or (isinstance(metrics, dict) and bool({"Q", "QA"} & set(metrics)))


def load_seed_config(path: str | os.PathLike) -> SeedConfig:
    """Read and validate a seed config; relative paths resolve against its folder."""
    path = Path(path)
    data = read_yaml(path)
    cfg = validated(SeedConfig, data, f"config {path}")
    base = path.resolve().parent
    for key in ("input_path", "output_path", "prompts_dir", "id_track_file"):
        value = getattr(cfg, key)
        if value is not None and not os.path.isabs(value):
            setattr(cfg, key, str(base / value))
    if not cfg.metric_names():
        raise ConfigError(f"config {path}: metrics.Q and metrics.QA are both empty; list at least one metric")
    return cfg


def _read_ids(path: Path) -> set[str]:
    """The id keys in a track file: JSON per line; a line that is not JSON is a bare string (seed-tool files)."""
    if not path.exists():
        return set()
    keys = set()
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                keys.add(_id_key(json.loads(line)))
            except json.JSONDecodeError:
                keys.add(_id_key(line))
    return keys


def _id_key(value: Any) -> str:
    """One text per id that keeps its JSON type: ``7`` and ``"7"`` are different items."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _json_lines(f, path) -> Iterator[tuple[int, str, Any]]:
    """(line number, line, its JSON value) for each line of ``f`` that is not blank."""
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            # the parser's position is in the one line it was given ("line 1 column 12"): its column only
            where = f"{e.msg.removesuffix(' at')} at column {e.colno}"
            raise ConfigError(f"{path}, line {n}: not valid JSON ({where}); fix or remove that line") from None
        yield n, line, value


def _items(path: str, stamp: tuple, skip: frozenset):  # noqa: ARG001 - stamp busts the datasets cache when the file changes
    with open(path, encoding="utf-8") as f:
        for n, line, item in _json_lines(f, path):
            if not isinstance(item, dict):
                raise ConfigError(
                    f"{path}, line {n}: not a JSON object; every line is one item like "
                    '{"id": ..., "instruction": ..., "output": ...}'
                )
            if "id" not in item:
                raise ConfigError(f"{path}, line {n}: no 'id' field; every item needs a unique id")
            key = _id_key(item["id"])
            if key in skip:
                continue
            yield {
                "_id": key,
                "_line": line.rstrip("\n"),
                "instruction": item.get("instruction"),
                "output": item.get("output"),
            }


def run_seed_config(path: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None) -> RunSummary:
    """Run a seed-004 ``config.yaml`` and write the seed's output files.

    Example:
        >>> summary = run_seed_config("config.yaml")  # doctest: +SKIP
        >>> print(summary)  # doctest: +SKIP
    """
    from datasets import Dataset, Features, Value
    from datasets.exceptions import DatasetGenerationError

    cfg = load_seed_config(path)
    src = Path(cfg.input_path)
    if not src.is_file():
        raise ConfigError(f"input_path {src} does not exist; point it at your JSONL file")
    api_key = resolve_secret(cfg.openai.api_key, "openai.api_key")
    names = cfg.metric_names()
    # resolved once, here: the seed files need the columns score_dataset writes (QA_All next to QA_Clarity moves)
    metrics = resolve_metrics([n for _, _, n in names], cfg.prompts_dir)
    track = Path(cfg.id_track_file) if cfg.id_track_file else None
    done = frozenset(_read_ids(track)) if track else frozenset()
    st = src.stat()
    out_dir = Path(cfg.output_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    scored_path = out_dir / f"{src.stem}_scored.jsonl"
    errors_path = out_dir / f"{src.stem}_errors.jsonl"
    gen_kwargs: dict[str, Any] = {"path": str(src), "stamp": (st.st_size, st.st_mtime_ns), "skip": done}
    if next(_items(**gen_kwargs), None) is None:
        summary = RunSummary(model=cfg.model, notes=["nothing to score: every item is in the id track file"])
        if not track:
            scored_path.write_text("")
        errors_path.write_text("")
        return summary
    features = Features({k: Value("string") for k in ("_id", "_line", "instruction", "output")})
    try:
        input_cache = str(Path(cache_dir) / "seed-input") if cache_dir else None
        ds = Dataset.from_generator(_items, features=features, gen_kwargs=gen_kwargs, cache_dir=input_cache)
    except DatasetGenerationError as e:
        cause = e.__cause__
        while cause is not None and not isinstance(cause, ConfigError):
            cause = cause.__cause__
        if cause is None:
            raise
        raise cause from None
    result = score_dataset(
        ds,
        metrics,
        api_key=api_key,
        prompts_dir=cfg.prompts_dir,
        cache_dir=cache_dir,
        settings=resolve_settings(cfg.settings(), where=f"config {path}"),
    )
    triples = [(mode, seed_name, m) for (mode, seed_name, _), m in zip(names, metrics, strict=True)]
    _write_seed_files(result, triples, scored_path, errors_path, track, append=track is not None)
    assert result.summary is not None  # score_dataset always sets it
    return result.summary


def _write_seed_files(result, metrics, scored_path: Path, errors_path: Path, track: Path | None, append: bool) -> None:
    train, errors = result["train"], result["errors"]
    failed: dict[int, list[dict]] = {}
    for e in errors:
        failed.setdefault(e["row"], []).append(e)
    columns = ["_id"] + [o.column for _, _, m in metrics for o in m.outputs]
    by_name = {m.name: (mode, seed_name) for mode, seed_name, m in metrics}
    done_ids = []
    with scored_path.open("a" if append else "w", encoding="utf-8") as out:
        for start in range(0, len(train), 1000):
            batch = train.select_columns(columns)[start : start + 1000]
            for i in range(len(batch["_id"])):
                row = start + i
                if row in failed:
                    continue
                scores: dict[str, dict] = {}
                for mode, seed_name, m in metrics:
                    scores.setdefault(mode, {})[seed_name] = {o.key: batch[o.column][i] for o in m.outputs}
                out.write(json.dumps({"id": json.loads(batch["_id"][i]), "scores": scores}, ensure_ascii=False) + "\n")
                done_ids.append(batch["_id"][i])
    with errors_path.open("w", encoding="utf-8") as out:
        lines = train.select_columns(["_id", "_line"])
        for e in errors:
            row = lines[e["row"]]
            mode, seed_name = by_name[e["metric"]]
            out.write(
                json.dumps(
                    {
                        "id": json.loads(row["_id"]),
                        "item": json.loads(row["_line"]),
                        "mode": mode,
                        "metric": seed_name,
                        "error": {
                            "kind": e["kind"],
                            "message": e["message"],
                            "raw": e["raw"],
                            "attempts": e["attempts"],
                        },
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    if track is not None and done_ids:
        track.parent.mkdir(parents=True, exist_ok=True)
        with track.open("a", encoding="utf-8") as f:
            f.write("".join(i + "\n" for i in done_ids))


def merge_scores(
    scores_file: str | os.PathLike, data_file: str | os.PathLike, output_file: str | os.PathLike
) -> dict[str, Any]:
    """Merge a ``*_scored.jsonl`` file into the original data file by ``id``, streaming.

    Each output line is the data line with a ``scores`` field (every metric of
    every mode; ``null`` for an item without scores). Neither file is loaded:
    the id -> byte offset index of the scores file lives in a temporary SQLite
    file, so memory stays flat however large the files grow. Ids match with
    their JSON type (``7`` is not ``"7"``). Ids in the scores file that are not
    in the data are reported, as they are written there.

    Example:
        >>> merge_scores("out/data_scored.jsonl", "data.jsonl", "data_merged.jsonl")  # doctest: +SKIP
        {'items': 1000, 'with_scores': 998, 'without_scores': 2, 'unknown_ids': []}
    """
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hf_judge-merge-") as tmp:
        db = sqlite3.connect(os.path.join(tmp, "index.sqlite3"), isolation_level=None)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE ix (id TEXT PRIMARY KEY, pos INTEGER, seen INTEGER DEFAULT 0) WITHOUT ROWID")
        db.execute("BEGIN")
        with open(scores_file, "rb") as f:
            offset = 0
            rows: list[tuple[str, int]] = []
            for line in f:
                if line.strip():
                    try:
                        ident = json.loads(line)["id"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        raise ConfigError(
                            f"{scores_file}: the line at byte {offset} is not a scores record with an 'id'"
                        ) from None
                    rows.append((_id_key(ident), offset))
                    if len(rows) >= 10_000:
                        db.executemany("INSERT OR REPLACE INTO ix (id, pos) VALUES (?, ?)", rows)
                        rows.clear()
                offset += len(line)
            db.executemany("INSERT OR REPLACE INTO ix (id, pos) VALUES (?, ?)", rows)
        db.execute("COMMIT")
        items = with_scores = 0
        seen: list[tuple[str]] = []
        with (
            open(scores_file, "rb") as scores,
            open(data_file, encoding="utf-8") as data,
            open(output_file, "w", encoding="utf-8") as out,
        ):
            for _, _, item in _json_lines(data, data_file):
                key = _id_key(item.get("id"))
                items += 1
                hit = db.execute("SELECT pos FROM ix WHERE id = ?", (key,)).fetchone()
                if hit is None:
                    item["scores"] = None
                else:
                    scores.seek(hit[0])
                    item["scores"] = json.loads(scores.readline())["scores"]
                    with_scores += 1
                    seen.append((key,))
                    if len(seen) >= 10_000:
                        db.executemany("UPDATE ix SET seen = 1 WHERE id = ?", seen)
                        seen.clear()
                out.write(json.dumps(item, ensure_ascii=False) + "\n")
        db.executemany("UPDATE ix SET seen = 1 WHERE id = ?", seen)
        unknown_count = db.execute("SELECT count(*) FROM ix WHERE seen = 0").fetchone()[0]
        unknown = [json.loads(r[0]) for r in db.execute("SELECT id FROM ix WHERE seen = 0 LIMIT 1000")]
        db.close()
    if unknown_count:
        logger.warning("%d id(s) in %s are not in %s, e.g. %s", unknown_count, scores_file, data_file, unknown[:5])
    return {"items": items, "with_scores": with_scores, "without_scores": items - with_scores, "unknown_ids": unknown}
