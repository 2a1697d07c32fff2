"""Judging as a map transform: :class:`Judge`, a picklable callable for ``Dataset.map`` and Ray's ``map_batches``.

``Dataset.map(judge, batched=True)``, ``IterableDataset.map(judge, batched=True)`` and Ray Data's
``map_batches(judge)`` take a :class:`Judge` as it is: each batch gets the score columns
:func:`hf_judge.score_dataset` writes (same names, same types) and one errors column, with the reply store,
limits and retries in force. The object holds only its configuration; each process builds its own
:class:`Runtime` (event loop thread, clients, the reply store opened ``shared=True``) on its first call, so
``num_proc`` processes and Ray workers each build theirs and share the replies through the store.

:class:`Runtime` is also what a Ray actor of :func:`hf_judge.ray.score_ray_dataset` holds, and what each Python
worker of a Spark step keeps (:func:`shared_runtime`, the one registry of a process's runtimes: a Judge's copies and
a Spark step's tasks share one per configuration). A runtime over a store on object storage keeps its local copy
where the node says (:func:`node_store`), and counts what it sends for the run's driver (``Runtime.reporter``, the
worker side of the counting bridge, :mod:`.counting`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset, Features, Value

from ..errors import ConfigError
from ..judging.ensemble import Layout
from ..judging.images import image_variables
from ..redact import install_log_filter, register
from ..results.bias import warn_self_preference
from ..settings import JobValues, Settings, Unpack
from ..store.segments import Remote
from ..transport.client import JudgeClient
from .batchscore import score_batch
from .capabilities import check
from .core import Plan, score_features
from .counting import StatsReporter
from .job import Job
from .loop import LoopThread
from .prepare import check_samples, judge_specs, preflight
from .shell import RunResources, open_clients

if TYPE_CHECKING:
    import pyarrow as pa

ERRORS_COLUMN = "judge_errors"
# an error entry's reply is cut to this many characters: enough to see why it failed; the errors split of
# score_dataset keeps it whole
RAW_CHARS = 1000
ERROR_ENTRY = {
    "metric": Value("string"),
    "judge": Value("string"),  # whose request failed, as in the errors split (results/errors_split.py)
    "kind": Value("string"),
    "message": Value("string"),
    "raw": Value("string"),
    "attempts": Value("int64"),
}


class Runtime:
    """What one process holds to judge batches: the loop thread, the clients (a panel's, or one over a
    fleet's ``base_urls``) and the reply store opened ``shared=True``.

    Example:
        >>> rt = Runtime([(Settings(model="judge"), None)], Path("/tmp/replies.sqlite3"))  # doctest: +SKIP
        >>> cols, errors = rt.score({"question": ["2+2?"], "answer": ["4"]}, plans, Layout())  # doctest: +SKIP
        >>> rt.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        specs: Sequence[tuple[Settings, str | None]],
        store_path: Path | None,
        base_urls: Sequence[str] | None = None,
        remote: Remote | None = None,
    ):
        install_log_filter()
        for _, key in specs:
            register(key)
        # one judge: a client over the fleet's replicas; a panel: one client per judge, each on its own server
        self.judges: list[JudgeClient] = open_clients(specs, base_urls)
        self.client = self.judges[0]
        self.settings = specs[0][0]
        # the run shell's resources, the reply store opened shared: this process is one of several
        self.resources = RunResources(self.judges, node_store(store_path, remote), remote, shared=True).open()
        self.store = self.resources.store
        loop = self.resources.loop
        assert loop is not None  # open() started it
        self.loop: LoopThread = loop
        self.pid = os.getpid()
        # a batch that stored fewer replies leaves them to the store's timer (see PUBLISH_AT_LEAST)
        self.publish_at_least = PUBLISH_AT_LEAST
        # what this process sent since it last told the run's driver (a Ray actor's, a Spark worker's batches)
        self.reporter = StatsReporter(self.judges, self.resources)

    def score(
        self, batch: dict[str, Sequence[Any]], plans: Sequence[Plan], layout: Layout | None, token_columns: bool
    ) -> tuple[dict[str, list], list[dict[str, Any]]]:
        """(score columns, error rows) of ``batch``; its replies are committed before it returns, so a retry
        after a crash (Ray's, or a map run again) finds them."""
        cols, errors = self.loop.run(
            score_batch(
                batch,
                plans,
                self.client,
                self.store,
                max_input_chars=self.settings.max_input_chars,
                token_columns=token_columns,
                judges=self.judges,
                layout=layout,
            )
        )
        if self.store is not None:
            self.store.flush()
            # on object storage too before Ray sees the batch done: a retry on another node, or a rerun after
            # the driver died, finds them (a map's pool processes are terminated without any exit handler)
            self.store.publish(at_least=self.publish_at_least)
        return cols, errors

    def close(self) -> None:
        """Close the clients, stop the loop, flush and close the store; best effort (also at exit), once."""
        self.resources.close()


# a batch that stored fewer replies leaves them to the store's timer (batched=False would publish a segment a row)
PUBLISH_AT_LEAST = 64


def node_store(store_path: Path | None, remote: Remote | None) -> Path | None:
    """Where this process opens the reply store: ``store_path``, or, for a store shared on object storage
    (``remote``), the local copy in ``$HF_JUDGE_LOCAL_CACHE`` where this node sets it (a Ray node's, a Spark
    executor's disk: the driver's path may not exist there).

    Example:
        >>> node_store(Path("/tmp/c/replies.sqlite3"), None)
        PosixPath('/tmp/c/replies.sqlite3')
    """
    local = os.environ.get("HF_JUDGE_LOCAL_CACHE")
    if store_path is None or remote is None or not local:
        return store_path
    return Path(local).expanduser().absolute() / store_path.name


# this process's runtimes, by the configuration that built them: every copy of one Judge (each Ray task unpickles
# its own) and every task of one Spark step (Spark reuses a Python worker for many tasks) share one loop, session
# and store per process
RUNTIMES: dict[str, Runtime] = {}
RUNTIMES_LOCK = threading.Lock()


def shared_runtime(key: str, build: Callable[[], Runtime]) -> Runtime:
    """This process's runtime for the configuration ``key``, built by ``build`` on first use (after a fork: again).

    Example:
        >>> rt = shared_runtime(step_id, lambda: Runtime(specs, store))  # doctest: +SKIP
    """
    with RUNTIMES_LOCK:
        rt = RUNTIMES.get(key)
        if rt is None or rt.pid != os.getpid():
            rt = RUNTIMES[key] = build()
        return rt


def drop_runtime(key: str) -> None:
    """Close this process's runtime for ``key``, if it built one (the next :func:`shared_runtime` builds anew)."""
    with RUNTIMES_LOCK:
        rt = RUNTIMES.pop(key, None)
    if rt is not None and rt.pid == os.getpid():
        rt.close()


@atexit.register
def _close_runtimes() -> None:
    for rt in list(RUNTIMES.values()):
        if rt.pid == os.getpid():  # a forked child's copies belong to its parent
            rt.close()
    RUNTIMES.clear()


# what a Judge pickles
_CONFIG = ("job", "base_urls", "errors_column", "_id")


def errors_feature() -> list:
    """The per-row errors column's feature (``Judge`` and ``score_ray_dataset`` write it alike): a list of
    ``{metric, judge, kind, message, raw, attempts}``, one per metric of the row that failed (and per judge of a
    panel that failed it; ``judge`` as in the errors split: a panel judge's name, the model of one judge, null for
    the row's own error).

    Example:
        >>> [sorted(entry) for entry in errors_feature()]
        [['attempts', 'judge', 'kind', 'message', 'metric', 'raw']]
    """
    return [dict(ERROR_ENTRY)]


def errors_by_row(errors: Sequence[Mapping[str, Any]], n: int, raw_chars: int | None = RAW_CHARS) -> list[list[dict]]:
    """The per-row errors column of a batch of ``n`` rows from its error rows (``row`` within the batch): each
    row's ``{metric, judge, kind, message, raw, attempts}``, ``[]`` for a row every metric scored; ``raw`` (the
    reply) cut to ``raw_chars`` characters (None: whole).

    Example:
        >>> errors_by_row([{"row": 1, "metric": "Q", "kind": "null_input", "message": "m", "raw": None}], 2)
        [[], [{'metric': 'Q', 'judge': None, 'kind': 'null_input', 'message': 'm', 'raw': None, 'attempts': None}]]
    """
    per_row: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for e in errors:
        raw = e.get("raw")
        entry = {k: e.get(k) for k in ERROR_ENTRY}
        entry["raw"] = raw[:raw_chars] if isinstance(raw, str) and raw_chars is not None else raw
        per_row[e["row"]].append(entry)
    return per_row


class Judge:
    """A picklable map transform that judges rows: ``ds.map(Judge(metrics, model=...), batched=True)``.

    Each batch (a dict of columns) gets the score columns :func:`hf_judge.score_dataset` writes, named and
    typed alike (samples, panels, ``logprobs`` and ``token_columns`` included), and ``errors_column``
    (default ``judge_errors``): per row, a list of ``{metric, judge, kind, message, raw, attempts}``, empty when
    every metric scored (``raw``, the reply, cut to 1,000 characters). A (row, metric) that fails has nulls
    in its columns, as in ``score_dataset``. Replies go through the reply store under ``cache_dir``: a row
    judged before, by any engine or process, costs no request. Arguments are those of ``score_dataset``
    (``model=`` and every other setting as keyword arguments); ``base_urls``: replicas of one model, each
    request to the least busy.

    The key: ``api_key=None`` reads ``$OPENAI_API_KEY`` and ``api_key="env:NAME"`` reads ``$NAME``, in each
    process when it first judges: the object, and so its pickle, holds only the variable's name. A key
    given as a string is held, and pickled, as it is (a ``num_proc`` process or a Ray worker needs it):
    name a variable instead wherever pickles travel. It is registered as a secret, so logs show it redacted.

    Rows: with ``batched=True`` a batch's requests are in flight together (up to ``concurrency``); with
    ``batched=False`` each row waits for its own. Ray's ``map_batches`` gets the whole batch back (its
    columns and the new ones), in the format it sent. ``close()`` (or ``with Judge(...) as judge:``) closes
    this process's connections and store; replies are committed after every batch in any case.

    ``metrics`` may be a :class:`hf_judge.Job` instead: ``Judge(metrics, **values)`` is
    ``Judge(Job(metrics, **values))``; ``base_urls`` and ``errors_column`` are the transform's own.

    Example:
        >>> from datasets import Dataset
        >>> ds = Dataset.from_dict({"question": ["2+2?"], "answer": ["4"]})
        >>> judge = Judge(
        ...     ["QA_Clarity"], model="judge", base_url="http://127.0.0.1:8000/v1", columns={"instruction": "question"}
        ... )
        >>> scored = ds.map(judge, batched=True, features=judge.features(ds.features))  # doctest: +SKIP
        >>> scored[0]["QA_Clarity"], scored[0]["judge_errors"]  # doctest: +SKIP
        (9, [])
    """

    def __init__(
        self,
        metrics: Any = None,
        *,
        base_urls: Sequence[str] | None = None,
        errors_column: str = ERRORS_COLUMN,
        **values: Unpack[JobValues],
    ):
        if metrics is None:
            raise TypeError(
                "Judge() needs the metrics to judge with, e.g. Judge(['QA_All'], model='gpt-4.1-nano'). A panel "
                "member (model, name, base_url, api_key in models=[...]) is hf_judge.Panelist now"
            )
        install_log_filter()
        # the prompts travel with the pickle; the key only as given (a variable's name is read in each process)
        self.job = Job.of(metrics, values, "Judge").resolved
        settings = self.job.settings
        check("map", settings, base_urls=base_urls)
        warn_self_preference(settings)
        temperature = settings.temperature
        check_samples(
            settings, {"": [Plan(m, {}, m.temperature if temperature is None else temperature) for m in self.metrics]}
        )
        self.base_urls = list(base_urls) if base_urls else None
        self.errors_column = errors_column
        self.job.key(needed=True, base_url=self.base_urls[0] if self.base_urls else None)  # no key: a ConfigError now
        self._id = hashlib.sha256(pickle.dumps(self.__getstate__())).hexdigest()
        self._plans: dict[tuple[str, ...], list[Plan]] = {}

    @property
    def settings(self) -> Settings:
        return self.job.settings

    @property
    def layout(self) -> Layout:
        return self.job.layout

    @property
    def metrics(self) -> list:
        return self.job.metrics

    @property
    def columns(self) -> dict[str, str]:
        return self.job.columns

    @property
    def token_columns(self) -> bool:
        return self.job.token_columns

    @property
    def store_path(self) -> Path | None:
        return self.job.store_path

    def features(self, input_features: Features | None = None) -> Features:
        """The features of what the map returns: ``input_features`` (the dataset's), then the new columns.

        Example:
            >>> judge = Judge(["QA_Clarity"], model="m", base_url="http://127.0.0.1:8000/v1")
            >>> list(judge.features())
            ['QA_Clarity_reason', 'QA_Clarity', 'judge_errors']
        """
        new = score_features(self.metrics, self.layout, self.settings.logprobs, self.token_columns)
        new[self.errors_column] = errors_feature()
        return Features({**(input_features or {}), **new})

    def __call__(self, batch: Any, *_: Any) -> Any:
        """The score columns and the errors column of ``batch`` (a dict of columns, a pyarrow Table or a
        pandas DataFrame; a single row's dict with ``batched=False``)."""
        columns, one_row, n = _as_columns(batch)
        plans = self._plans_for(columns)
        rt = self._runtime()
        needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
        cols, errors = rt.score({c: columns[c] for c in needed}, plans, self.layout, self.token_columns)
        cols[self.errors_column] = errors_by_row(errors, n)
        if one_row:
            return {c: v[0] for c, v in cols.items()}
        return _with_batch(batch, cols, self.features())

    def _plans_for(self, columns: Mapping[str, Sequence[Any]]) -> list[Plan]:
        """The metrics' plans on a batch with these columns, built (and rendered on its first row) once."""
        names = tuple(columns)
        plans = self._plans.get(names)
        if plans is not None:
            return plans

        # a map step declares its columns upfront and sees a batch at a time: no if_exists, no renames
        check("map", self.settings, only=("if_exists",), existing=sorted(set(self.features()) & set(names)))
        temperature = self.settings.temperature
        plans = [
            Plan(m, m.resolve_columns(self.columns, names), m.temperature if temperature is None else temperature)
            for m in self.metrics
        ]
        needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
        # each column's first value that is not null: what its type (an image?) is read from
        first = Dataset.from_dict({c: [next((v for v in columns[c] if v is not None), None)] for c in needed})
        for p in plans:
            p.images = image_variables(p.metric, p.columns, first.features)
        preflight("map", first, plans)  # a template error now, not as every row's error
        self._plans[names] = plans
        return plans

    def _runtime(self) -> Runtime:
        """This process's runtime for this configuration, built on its first call (after a fork: again)."""
        return shared_runtime(self._id, self._build_runtime)

    def _build_runtime(self) -> Runtime:
        key = self.job.key(needed=True, base_url=self.base_urls[0] if self.base_urls else None)
        return Runtime(judge_specs(self.settings, key), self.store_path, self.base_urls, self.job.remote)

    def close(self) -> None:
        """Close this process's connections and reply store for this Judge (the next call opens them again)."""
        drop_runtime(self._id)

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # the configuration only (not what a subclass adds, as Ray's actor wrapper does): plans are rebuilt
        # from the batch's columns, the runtime per process
        return {k: self.__dict__[k] for k in _CONFIG if k in self.__dict__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plans = {}
        key = self.job.api_key
        if key is not None and not key.startswith("env:"):
            register(key)  # in the process that unpickled it too

    def __repr__(self) -> str:
        return (
            f"Judge({[m.name for m in self.metrics]!r}, model={self.settings.model!r}, columns={self.columns!r}, "
            f"cache={str(self.store_path) if self.store_path else None!r})"
        )


def _as_columns(batch: Any) -> tuple[dict[str, Sequence[Any]], bool, int]:
    """(columns as lists, whether ``batch`` was one row, rows) of a dict of columns, a row, a Table or a
    DataFrame."""
    if hasattr(batch, "column_names") and hasattr(batch, "to_pydict"):  # pyarrow
        columns: dict[str, Sequence[Any]] = batch.to_pydict()
        return columns, False, batch.num_rows
    if hasattr(batch, "to_dict") and hasattr(batch, "columns") and not isinstance(batch, Mapping):  # pandas
        import pyarrow as pa

        # through Arrow: a null (None, NaN, pd.NA) is None, as in every other format
        return pa.Table.from_pandas(batch, preserve_index=False).to_pydict(), False, len(batch)
    values = dict(batch.items())
    if values and all(_is_column(v) for v in values.values()):
        n = {len(v) for v in values.values()}
        if len(n) > 1:
            raise ConfigError(f"a batch's columns have different lengths {sorted(n)}: not a batch of rows")
        return {c: list(v) for c, v in values.items()}, False, n.pop()
    return {c: [v] for c, v in values.items()}, True, 1  # batched=False: one row


def _is_column(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray"


def _with_batch(batch: Any, cols: dict[str, list], features: Features) -> Any:
    """What the map gives back: ``datasets`` merges the new columns into its batch; Ray's ``map_batches``
    takes its batch whole, in the format it sent (a Table, a DataFrame, or a dict of numpy arrays)."""
    import pyarrow as pa

    types = features.arrow_schema
    if isinstance(batch, pa.Table):
        for name, values in cols.items():
            batch = batch.append_column(types.field(name), pa.array(values, type=types.field(name).type))
        return batch
    if hasattr(batch, "to_dict") and hasattr(batch, "columns") and not isinstance(batch, Mapping):  # pandas
        import pandas as pd

        # Arrow-backed: an integer score column with a null stays integers, not floats with NaN
        typed = {c: pa.array(v, type=types.field(c).type) for c, v in cols.items()}
        return batch.assign(
            **{c: pd.Series(a, dtype=pd.ArrowDtype(a.type), index=batch.index) for c, a in typed.items()}
        )
    if type(batch) is dict and "ray" in sys.modules and any(type(v).__name__ == "ndarray" for v in batch.values()):
        # Ray's default batch (numpy): the whole block back, the new columns with score_dataset's types
        from ray.data.block import BlockAccessor

        table: pa.Table = BlockAccessor.batch_to_block(batch)
        return _with_batch(table, cols, features)
    return cols
