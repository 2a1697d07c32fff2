"""Streaming input: scoring an ``IterableDataset`` as it is read.

``score_batches`` is the core: it scores an iterator of Arrow batches through
one client and reply store on a running event loop, and yields each batch with
its score columns and error rows, in input order, holding at most ``window``
rows beyond the last batch it yielded. Nothing is read ahead of that, so
memory is bounded by the window, not by the dataset. The rows are scored by the
same pipeline as a ``Dataset`` (``pipeline.SplitRun``), so requests, cache keys,
validation and error rows are those of the non-streaming path: a streaming run
reuses the replies of a non-streaming one and the other way round.

``score_dataset`` on an ``IterableDataset(Dict)`` returns a
:class:`ScoredIterableDatasetDict`: each split scores its rows as they are
iterated (every iteration is a run; replies already in the reply store cost
nothing), and ``errors`` holds the error rows once the splits have been read.
``save_to_disk`` writes Parquet shards as the rows arrive; ``push_to_hub``
uploads that layout, the errors config, the card and the report page kept as the
rows passed (results/report_stream.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import tempfile
import uuid
import weakref
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from datasets import Features, IterableDataset, IterableDatasetDict

from ..errors import BudgetExceededError
from ..progress import ProgressCallback
from ..results.bias import BiasChecks, StreamSample
from ..results.errors_split import ERROR_FEATURES, ERRORS_SPLIT, ErrorFiles, ErrorWriter
from ..results.hub import check_repo_id
from ..results.hub_folder import push_folder
from ..results.report_stream import StreamPage
from ..results.sink import write_through
from ..store.replies import ReplyStore
from .core import Plan
from .loop import LoopThread, sparse_gc
from .pipeline import SplitRun
from .prepare import first_row
from .shell import judge_columns
from .stream_sink import ERRORS_STEM, StreamSink

if TYPE_CHECKING:
    from ..analysis.agreement import AgreementReport
    from ..judging.ensemble import Layout
    from ..results.report_stream import StreamPage
    from ..results.summary import RunSummary
    from ..transport.client import JudgeClient
    from .driver import Run

logger = logging.getLogger("hf_judge")

# Rows read from the input per step (at most the window): large enough that reading costs little per row,
# small beside the default window of 4,096 rows.
STREAM_BATCH = 1024
# A new Parquet shard of a saved split once this many bytes of Arrow data went into the current one.
SHARD_BYTES = 256 << 20


class StreamRun(SplitRun):
    """A ``SplitRun`` whose rows are handed over by another thread (``put``) instead of read from a Dataset."""

    def __init__(self, split: str, plans: Sequence[Plan], client: JudgeClient, store: ReplyStore | None, **kwargs):
        super().__init__(split, None, plans, client, store, **kwargs)
        self._batches: asyncio.Queue[tuple[int, dict[str, list]] | None] = asyncio.Queue()
        self.errors_taken = 0  # error rows handed out by take_errors, no longer held here

    def take_errors(self) -> list[dict[str, Any]]:
        """The error rows made since the last call, handed over: a stream holds none it has handed out, so its
        memory does not grow with its error rows."""
        n = len(self.errors)  # the loop thread only appends: the first n are these
        taken = self.errors[:n]
        del self.errors[:n]
        self.errors_taken += n
        return taken

    def error_count(self) -> int:
        return self.errors_taken + len(self.errors)

    def put(self, loop: LoopThread, rows: int, batch: dict[str, list] | None) -> None:
        """Hand ``rows`` rows (the columns the plans read) to the feeder; ``None``: the input has ended."""
        self.total += rows
        loop.loop.call_soon_threadsafe(self._batches.put_nowait, None if batch is None else (rows, batch))

    async def _read(self) -> AsyncIterator[tuple[int, dict[str, list]]]:
        step = self.read_batch
        while (item := await self._batches.get()) is not None:
            rows, batch = item
            for s in range(0, rows, step):  # the feeder's small steps keep rendering from holding up replies
                yield min(step, rows - s), {c: v[s : s + step] for c, v in batch.items()}


def score_batches(
    batches: Iterable[pa.Table],
    plans: Sequence[Plan],
    *,
    split: str,
    client: JudgeClient,
    store: ReplyStore | None,
    loop: LoopThread,
    window: int,
    first_row: int = 0,
    max_input_chars: int | None = None,
    token_columns: bool = False,
    on_progress: ProgressCallback | None = None,
    judges: Sequence[JudgeClient] = (),
    layout: Layout | None = None,
    on_budget: Callable[[BudgetExceededError], None] | None = None,
) -> Iterator[tuple[pa.Table, dict[str, list], list[dict[str, Any]]]]:
    """Score ``batches`` of input rows; yield ``(batch, scores, errors)`` per batch, in input order.

    ``scores`` maps each score column to the batch's values (null where a
    metric failed); ``errors`` are the batch's error rows (as in the ``errors``
    split), their ``row`` counted from ``first_row``. The client (every one of a
    panel's ``judges``, of which it is the first) must be open on ``loop``;
    ``layout``: samples and judges per row, as ``SplitRun`` takes it. A batch
    holds at most ``window`` rows. At most ``window`` rows are
    read beyond the last batch yielded, so memory does not grow with the input. ``on_budget``: a budget stop
    (``max_cost``, ``max_total_tokens``) ends the requests not sent as ``budget`` error rows and the rows go on
    (``pipeline.SplitRun``'s ``partial``); it is handed the stop once the last batch is out. Without it, the stop
    is raised.

    Example:
        >>> for batch, scores, errors in score_batches(  # doctest: +SKIP
        ...     ds.with_format("arrow").iter(1024), plans, split="train", client=client, store=store,
        ...     loop=loop, window=4096):
        ...     write(batch, scores, errors)
    """
    run = StreamRun(
        split,
        plans,
        client,
        store,
        window=window,
        max_input_chars=max_input_chars,
        token_columns=token_columns,
        on_progress=on_progress,
        judges=judges,
        layout=layout,
        partial=on_budget is not None,
    )
    needed = sorted({c for p in plans for c in p.columns.values() if c})
    feeder = loop.submit(run.feed())
    pending: deque[tuple[int, pa.Table]] = deque()
    later: list[dict[str, Any]] = []  # error rows of rows past the batch handed out: at most the window's

    def finished(start: int, table: pa.Table) -> tuple[pa.Table, dict[str, list], list[dict[str, Any]]]:
        nonlocal later
        stop = start + table.num_rows
        scores = run.consume(list(range(start, stop)))  # waits for the rows of this batch only
        new = run.take_errors()  # every row below `stop` has finished
        mine = [e for e in later + new if e["row"] < stop]
        later = [e for e in later + new if e["row"] >= stop]
        mine = run.in_order(mine)
        if first_row:
            mine = [{**e, "row": e["row"] + first_row} for e in mine]
        return table, scores, mine

    read = 0
    try:
        for table in batches:
            if table.num_rows == 0:
                continue
            if table.num_rows > window:
                raise ValueError(f"a batch of {table.num_rows} rows is larger than the window ({window})")
            run.put(loop, table.num_rows, table.select(needed).to_pydict() if needed else {})
            pending.append((read, table))
            read += table.num_rows
            while read - run.consumed > window:
                yield finished(*pending.popleft())
        run.put(loop, 0, None)
        while pending:
            yield finished(*pending.popleft())
        feeder.result()  # the feeder has nothing left to do; its failure, if any, was raised by consume
        if run.stopped is not None and on_budget is not None:
            on_budget(run.stopped)
    finally:
        if not feeder.done():
            loop.run(run.cancel())
            feeder.cancel()


class StreamReadings:
    """A stream's engine on the run driver (:mod:`.driver`): its ``name``, its row of the capability table, which
    the driver checks the job against. Its splits are scored when they are read, each reading through the run's
    resources and per-split scope (:meth:`Streams.tables`), so the driver's eager loop dispatches nothing to it.

    Example:
        >>> StreamReadings().name
        'stream'
    """

    name = "stream"


class Streams:
    """What the splits of one streaming result share: the run (prepared by the driver) and each split's features."""

    def __init__(self, run: Run, features: dict[str, Features]):
        self.run = run  # prepared: its splits, plans, clients, summary, bias checks and earlier error rows
        splits: dict[str, IterableDataset] = run.splits  # a stream's
        self.splits = splits
        # the bias checks read a uniform sample of each split's rows as they pass (results/bias.py)
        self.checks: BiasChecks | None = run.checks
        self.samples: dict[str, StreamSample] = {}
        # the report page of a push with no folder, kept as the rows pass (results/report_stream.py); None: none
        self.page: StreamPage | None = None
        self.warned: set[str] = set()
        self.plans: dict[str, list[Plan]] = run.plans
        self.features = features
        self.store_path = run.job.store_path
        # the error rows are written to Parquet as they come, never held: in a folder of the result's own while it
        # is iterated (its splits' errors: scored["errors"]), in the saved folder's errors/ while it is saved
        self.spill: Path | None = None  # made with the first error row (spill_paths)
        self.numbers = itertools.count(1)
        self.errors: dict[str, ErrorFiles] = {}  # split -> error rows of its last complete reading
        self.kinds: dict[str, Counter[str]] = {}  # split -> the count of each kind of error of that reading
        self.earlier = _write_errors(run.errors, self.spill_paths(itertools.count()))
        self._job_key: str | None = None
        self.key = uuid.uuid4().hex
        _LIVE[self.key] = self

    def __reduce__(self):
        # IterableDataset.from_generator hashes its generator (a bound method of this object) with dill:
        # its name stands for it, and finds it again in this process while it lives
        return (_live, (self.key,))

    def tables(
        self, split: str, resume: dict[str, Any] | None = None
    ) -> Iterator[tuple[pa.Table, list[dict[str, Any]], dict[str, Any]]]:
        """The split's scored rows, as Arrow tables of the output features, with their error rows and the input's
        ``state_dict()`` after them. ``resume`` (``rows``, ``state``, ``kinds``: the count of each kind of error
        so far): go on after that many rows. The caller keeps the error rows (:meth:`reading` writes them to
        Parquet). One reading is a part of the run (:meth:`_scored`); the summary is the run's once it ends."""
        run, plans = self.run, self.plans[split]
        d = self.splits[split].with_format("arrow")
        first, kinds = 0, Counter[str]()
        if resume is not None:
            d.load_state_dict(resume["state"])
            first, kinds = resume["rows"], Counter(resume["kinds"])
        rows = first
        states: deque[dict[str, Any]] = deque()  # the input's state after each table read and not yet handed out

        def inputs() -> Iterator[pa.Table]:
            for table in d.iter(batch_size=min(STREAM_BATCH, run.window)):
                if table.num_rows:
                    states.append(d.state_dict())
                    yield table

        try:
            if not plans:  # every metric's columns were kept: nothing is sent
                with run.ctrl_c():
                    for table in inputs():
                        rows += table.num_rows
                        yield table.cast(self.features[split].arrow_schema), [], states.popleft()
            else:
                with contextlib.closing(self._scored(split, inputs(), first, kinds)) as scored:
                    for table, errs in scored:
                        rows += table.num_rows
                        yield table, errs, states.popleft()
            self.kinds[split] = kinds
        finally:
            run.summary.rows[split] = rows
            self._reading_ended(split)

    def _scored(
        self, split: str, inputs: Iterator[pa.Table], first: int, kinds: Counter[str]
    ) -> Generator[tuple[pa.Table, list[dict[str, Any]]], None, None]:
        """The scored tables of a reading and their error rows (each kind counted in ``kinds``), sent through the
        run driver: its resources while the reading lasts, and its per-split scope (progress, the run history's
        checkpoints and entry, the Ctrl-C line). A sample of the rows is kept for the summary's figures."""
        run, plans, schema = self.run, self.plans[split], self.features[split].arrow_schema
        sample = self._sample(plans, schema)
        known = _known_rows(self.splits[split])
        total = known - first if known > first else None
        try:
            with sparse_gc(), run.hold() as res, run.split(split, self.history(split), total) as scope:
                res.open()
                assert res.loop is not None  # open() started it
                for table, scores, errs in score_batches(
                    inputs,
                    plans,
                    split=split,
                    client=run.client,
                    store=res.store,
                    loop=res.loop,
                    window=run.window,
                    max_input_chars=run.max_input_chars,
                    token_columns=run.token_columns,
                    on_progress=scope.on_progress,
                    first_row=first,
                    judges=run.clients,
                    layout=run.layout,
                    on_budget=self._stopped,
                ):
                    kinds.update(e["kind"] for e in errs)
                    out = _with_scores(table, scores, schema)
                    if sample is not None:
                        sample.add(out)
                    yield out, errs
        finally:
            if sample is not None and sample.rows:
                self.samples[split] = sample

    def _sample(self, plans: list[Plan], schema: pa.Schema) -> StreamSample | None:
        """A uniform sample of a reading's rows, of the columns the bias checks and a panel's agreement read (all
        the rows up to its size): memory stays bounded, and a split of at most ``STREAM_SAMPLE_ROWS`` rows gets
        the figures of a Dataset's run. None where nothing reads one."""
        judged = judge_columns(self.run.layout, plans, schema.names)
        if not plans or (self.checks is None and not judged):
            return None
        needed = self.checks.needed() if self.checks is not None else []
        return StreamSample(list(dict.fromkeys([*needed, *judged])))

    def _reading_ended(self, split: str) -> None:
        """The run's summary once a reading of ``split`` ended (or stopped): the driver's (:meth:`Run.reading_ended`),
        its figures from the samples of the splits read so far."""
        samples = {s: smp.dataset() for s, smp in self.samples.items()}
        self.run.reading_ended(self.error_kinds(), samples, self.warned)
        if split in self.samples:
            self._note_sample(split, self.samples[split])

    def history(self, split: str) -> Path | None:
        """Where the run history of a split is kept, as a Dataset's: beside the results cache, under the job's key;
        None without the cache, or for a split that sends nothing."""
        if not self.run.use_cache or not self.plans[split]:
            return None
        history = self.run.job.cache_root / "results" / f"stream-{self.job_key()}-{split}.arrow"
        history.parent.mkdir(parents=True, exist_ok=True)
        return history

    def _stopped(self, stop: BudgetExceededError) -> None:
        """A split's budget stop: the run's (the first), which the splits read after it keep sending none."""
        if self.run.stopped is None:
            self.run.stopped = stop

    def _note_sample(self, split: str, sample: StreamSample) -> None:
        """A panel's agreement past the sample's size is that of a uniform sample of the split: a note says so."""
        if (
            self.run.layout.panel
            and sample.seen > sample.size
            and not any(split in n and "agreement" in n for n in self.run.summary.notes)
        ):
            self.run.summary.notes.append(
                f"the agreement of {split!r} is that of a uniform sample of {sample.size:,} of its {sample.seen:,} rows"
            )

    def spill_paths(self, numbers: Iterator[int]) -> Iterator[Path]:
        """Files for error rows in the result's own temporary folder, made when the first is asked for."""
        for k in numbers:
            if self.spill is None:
                self.spill = Path(tempfile.mkdtemp(prefix="hf_judge-errors-"))
                weakref.finalize(self, shutil.rmtree, self.spill, True)
            yield self.spill / f"{ERRORS_STEM}-{k:05d}.parquet"

    def reading(self, split: str) -> Iterator[pa.Table]:
        """The split's scored rows (as ``tables``), their error rows written to the result's own folder."""
        writer = ErrorWriter(self.spill_paths(self.numbers))
        try:
            for table, errs, _ in self.tables(split):
                yield table
                writer.add(errs)
        except BaseException:  # a reading left before its end (or failed) leaves no error rows behind
            for f in writer.close().files:
                f.unlink(missing_ok=True)
            raise
        old, self.errors[split] = self.errors.get(split), writer.close()
        for f in old.files if old is not None else ():  # an earlier reading's
            f.unlink(missing_ok=True)

    def rows(self, split: str) -> Iterator[dict[str, Any]]:
        for table in self.reading(split):
            yield from table.to_pylist()

    def finished(self, split: str, rows: int, errors: ErrorFiles) -> None:
        """Record a split an earlier, interrupted save finished writing (see ``write_result``)."""
        self.errors[split], self.kinds[split] = errors, errors.kinds
        self.run.summary.rows[split] = rows

    def job_key(self) -> str:
        """What a save's progress file belongs to: the inputs (names, files, features, first row) and what is
        asked of them. A folder left by another job is not resumed from; the history of its runs is kept under it."""
        import hashlib

        if self._job_key is not None:
            return self._job_key

        run = self.run
        state: dict[str, Any] = {
            # the progress file's format: 2, error rows in files of their own; 3, with their judge column (a save
            # an earlier version left is written again: its error files have no such column)
            "progress": 3,
            "model": run.client.model,
            "server": run.client.server_id,
            "max_input_chars": run.max_input_chars,
            "token_columns": run.token_columns,
        }
        for split, d in self.splits.items():
            source = getattr(getattr(d, "_ex_iterable", None), "kwargs", None)  # data files, where datasets has them
            state[split] = [
                d.info.dataset_name,
                d.info.config_name,
                d.n_shards,
                source,
                self.features[split].to_dict(),
                first_row(d, list(d.column_names or [])),
                [[p.metric.name, p.metric.prompt_hash, p.columns, p.temperature] for p in self.plans[split]],
            ]
        self._job_key = hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:32]
        return self._job_key

    def all_errors(self) -> ErrorFiles:
        """The errors split of the splits read so far, on disk: the input's own error rows first."""
        out = self.earlier
        for split in self.splits:
            if split in self.errors:
                out = out + self.errors[split]
        return out

    def error_kinds(self) -> Counter[str]:
        """The count of each kind of error of the splits read so far (the input's own error rows included)."""
        return sum((self.kinds[s] for s in self.splits if s in self.kinds), Counter(self.earlier.kinds))

    def error_rows(self) -> Iterator[dict[str, Any]]:
        for split in self.splits:
            if split not in self.errors:  # read it once: its errors are known only then
                for _ in self.reading(split):
                    pass
        yield from self.all_errors()


def _write_errors(rows: list[dict[str, Any]], paths: Iterator[Path]) -> ErrorFiles:
    """Error rows in one file (none for no row)."""
    writer = ErrorWriter(paths)
    writer.add(rows)
    return writer.close()


_LIVE: weakref.WeakValueDictionary[str, Streams] = weakref.WeakValueDictionary()


def _live(key: str) -> Streams:
    return _LIVE[key]


def _known_rows(d: IterableDataset) -> int:
    """The split's size where its metadata tells it (a progress bar's total), else 0."""
    try:
        info = d.info.splits[str(d.split)] if d.info.splits and d.split is not None else None
    except KeyError:
        info = None
    return int(info.num_examples) if info is not None and info.num_examples else 0


def _with_scores(table: pa.Table, scores: dict[str, list], schema: pa.Schema) -> pa.Table:
    columns = [
        table.column(name) if name in table.column_names else pa.array(scores[name], type=schema.field(name).type)
        for name in schema.names
    ]
    return pa.Table.from_arrays(columns, schema=schema)


class ScoredIterableDatasetDict(IterableDatasetDict):
    """The result of ``score_dataset`` on an ``IterableDataset(Dict)``: splits scored as they are read.

    Each split is an ``IterableDataset`` of the input's columns and the score
    columns; reading it scores it (a repeated reading sends no request for a
    reply in the reply store). ``errors`` yields one row per failed (split,
    row, metric) once every split has been read (it reads those not yet read).
    ``save_to_disk`` writes Parquet shards as rows arrive, ``push_to_hub``
    pushes them with the errors config and the card; ``summary`` is the run's.

    Example:
        >>> stream = load_dataset("me/big", streaming=True)  # doctest: +SKIP
        >>> scored = score_dataset(stream, ["QA_All"], model="gpt-4.1-nano")  # doctest: +SKIP
        >>> scored.save_to_disk("big-judged/")  # doctest: +SKIP
        >>> scored.push_to_hub("me/big-judged")  # doctest: +SKIP
    """

    summary: RunSummary | None = None
    # reports of hf_judge.agreement to show in the card that save_to_disk and push_to_hub write
    agreement: Sequence[AgreementReport] = ()
    _streams: Streams

    @property
    def stopped(self) -> BudgetExceededError | None:
        """The budget stop of the splits read so far (None: none): the rows read after it went on without a
        request, each (row, metric) not sent a ``budget`` error row, and ``summary.stopped`` says the result is
        incomplete (``push_to_hub`` then pushes nothing and raises it)."""
        return self._streams.run.stopped

    @classmethod
    def _of(cls, streams: Streams) -> ScoredIterableDatasetDict:
        out = cls(
            {
                split: IterableDataset.from_generator(
                    streams.rows, features=streams.features[split], gen_kwargs={"split": split}
                )
                for split in streams.splits
            }
        )
        out[ERRORS_SPLIT] = IterableDataset.from_generator(streams.error_rows, features=ERROR_FEATURES)
        out._streams = streams
        out.summary = streams.run.summary
        return out

    def save_to_disk(self, path: str | os.PathLike, max_shard_size: int | str | None = None) -> None:
        """Write the result as Parquet shards (``data/<split>-NNNNN.parquet``, ``errors/errors-00000.parquet``),
        each split read once, its rows written as they arrive; then the card (``README.md``, which tells
        ``load_dataset`` the two configs), ``summary.json`` and the prompt files. Memory stays bounded by the
        window; a shard is closed after ``max_shard_size`` bytes of Arrow data (default 256 MB).

        Example:
            >>> scored.save_to_disk("big-judged/")  # doctest: +SKIP
            >>> load_dataset("big-judged/")["train"], load_dataset("big-judged/", "errors")["errors"]  # doctest: +SKIP
        """
        from datasets.utils.py_utils import convert_file_size_to_int

        limit = convert_file_size_to_int(max_shard_size) if max_shard_size is not None else SHARD_BYTES
        write_result(self._streams, Path(path), limit, self.agreement)

    def rows_and_columns(self) -> dict[str, tuple[int, list[str]]]:
        """Rows and columns per split (``errors`` included), as far as the splits have been read."""
        streams = self._streams
        out = {s: (streams.run.summary.rows.get(s, 0), list(streams.features[s])) for s in streams.splits}
        out[ERRORS_SPLIT] = (len(streams.all_errors()), list(self[ERRORS_SPLIT].column_names or []))
        return out

    def push_to_hub(  # type: ignore[override,unused-ignore]
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | None = None,
        revision: str | None = None,
        max_shard_size: int | str | None = None,
        commit_message: str | None = None,
        report: bool = True,
    ) -> str:
        """Push as ``ScoredDatasetDict.push_to_hub`` does (the scored splits in the default config, ``errors`` in
        a config of its own, the card and provenance files), writing the Parquet shards to a temporary folder
        first (disk, not memory: it holds the output once). Returns the repo URL. ``report``: the report page
        (``hf_judge/report.html``, linked from the card), built from the rows as they pass into the push, in
        bounded memory (:mod:`hf_judge.results.report_stream` says what it keeps).

        Example:
            >>> scored.push_to_hub("me/big-judged", private=True)  # doctest: +SKIP
        """
        check_repo_id(repo_id)  # before the save, which scores the stream: no request is paid for a push that fails
        # the page, kept as the rows pass into the save, goes with the data as hf_judge/report.html (if report)
        self._streams.page = StreamPage(source=repo_id) if report else None
        try:
            with tempfile.TemporaryDirectory(prefix="hf_judge-push-") as tmp:
                self.save_to_disk(tmp, max_shard_size=max_shard_size)
                if self.stopped is not None:  # an incomplete result is not published; the cache has what was paid
                    raise self.stopped
                return push_folder(
                    tmp,
                    repo_id,
                    private=private,
                    token=token,
                    revision=revision,
                    commit_message=commit_message,
                    agreement=self.agreement,
                )
        finally:
            self._streams.page = None


def write_result(streams: Streams, root: Path, shard_bytes: int, reports: Sequence[AgreementReport] = ()) -> None:
    """The layout ``save_to_disk`` writes (see there), through the stream's sink (:class:`StreamSink`). A save of
    the same job that was interrupted is taken up after its last closed shard (the input resumes from its
    ``state_dict()``); other files in ``data/`` and ``errors/`` go. The progress file goes once the save is
    complete."""
    sink = StreamSink(streams, root, shard_bytes, reports)
    with streams.run.ctrl_c():  # one that came between two batches (writing a shard, the progress file)
        write_through(sink, [(split, None) for split in streams.splits], None, streams.run.summary)
