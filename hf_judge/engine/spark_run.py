"""A whole scoring run on Spark (``hf-judge score --spark``): the session, the input as DataFrames, the output.

:func:`spark_session` is the session a run uses: the active one where there is one (a notebook's, a job's),
else one at ``master`` (default ``local[*]``) whose Python workers run on this interpreter, so that a virtual
environment works as it is. :func:`hub_frames` reads a Hub dataset with Hugging Face's Spark data source
(``spark.read.format("huggingface")``, the ``pyspark-huggingface`` package); :func:`arrow_frames` hands the splits
of any input ``hf_judge`` reads (files, folders, a scored result) to Spark as Arrow.

:func:`score_frames_on_spark` scores each split with :func:`hf_judge.spark.score_spark_dataframe`'s step and writes
it with Spark's own Parquet writer to ``<output_dir>/<split>/`` (a local folder or a URL on object storage), then
``errors/`` and ``summary.json``: the layout of a Ray run's ``output_dir`` (:mod:`hf_judge.engine.ray_output`),
so :func:`hf_judge.load_result`, ``hf-judge view`` and the other commands read it back the same way.

:func:`spark_interrupts` makes a Ctrl-C of such a run cancel its Spark jobs and end it with the run's one
interrupted line (:func:`~hf_judge.engine.shell.interrupted`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from datasets import Dataset, DatasetDict

from .. import constants
from ..errors import ConfigError, InterruptedRun
from ..results.scored import ScoredDatasetDict
from ..settings import JobValues, Unpack
from .capabilities import check
from .distributed import DistributedRun, ReportList, merging, new_items
from .job import Job, JudgeJob
from .prepare import as_splits
from .ray_output import ROW_COLUMN, RayOutput
from .shell import interrupted
from .spark import refuse_on, refuse_secrets_in_the_plan, spark_schema, spark_step
from .transform import ERRORS_COLUMN

if TYPE_CHECKING:
    import pyspark.sql

logger = logging.getLogger("hf_judge")

# monotonically_increasing_id's layout: the partition in the upper bits, the row within it in the lower 33
PARTITION_SHIFT = 33
# the sessions spark_session started (not a notebook's or a job's): a Ctrl-C stops them (spark_interrupts)
STARTED: weakref.WeakSet[Any] = weakref.WeakSet()
INSTALL = 'pip install "hf-judge[spark]" (pyspark 4 and pyspark-huggingface; Spark 4 needs Java 17)'


def spark_session(master: str | None = None) -> pyspark.sql.SparkSession:
    """The session a run uses: the active one (a notebook's, a job's: ``master`` must then be None or its own),
    else a new one at ``master`` (default ``local[*]``) whose Python workers run this interpreter
    (``$PYSPARK_PYTHON`` where it is set: on a cluster, the executors' own Python).

    Example:
        >>> spark = spark_session("local[4]")  # doctest: +SKIP
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise ConfigError(f"--spark needs Spark: {INSTALL} ({e})") from None
    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if master and master != running:
            raise ConfigError(
                f"--spark-master {master}: this process runs a Spark session at {running} already; drop "
                "--spark-master to score on it"
            )
        return active
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise ConfigError(
            "--spark needs Java 17 (Spark 4 runs on it): install it (Debian/Ubuntu: apt-get install "
            "openjdk-17-jre-headless) or set JAVA_HOME"
        )
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    # PySpark takes its workers' Python from this variable only (SparkContext reads it; the spark.pyspark.python
    # setting is spark-submit's): unset, the workers run the first `python3` on the PATH, which is not the
    # virtual environment hf-judge is installed in, and cannot import it
    os.environ["PYSPARK_PYTHON"] = python
    master = master or "local[*]"
    builder = (
        SparkSession.builder.master(master)
        .appName("hf-judge")
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.ui.showConsoleProgress", "false")  # the run's summary says what the bars say
    )
    if master.startswith("local") and os.environ.get("PYTHONPATH"):
        # a checkout run with PYTHONPATH: its workers import the same hf_judge
        builder = builder.config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    # pyspark's own note on pandas 3, printed twice per run, says nothing about this run
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    session = builder.getOrCreate()
    STARTED.add(session)
    # a failed task's log lines repeat its whole Python and Java tracebacks; the run's own error says what failed
    # (HF_JUDGE_DEBUG=1 keeps Spark's warnings)
    session.sparkContext.setLogLevel("WARN" if constants.debug_enabled() else "FATAL")
    return session


class SparkInterrupts:
    """The SIGINT handler of a Spark run: a Ctrl-C that lands while this process waits on the JVM cancels the jobs
    from a thread of its own and lets the call return (with the cancelled job's error); one in Python's own code,
    or a second one, is Python's KeyboardInterrupt. pyspark's handler calls the JVM from inside the call the signal
    interrupted: py4j's "reentrant call" and KeyboardInterrupt tracebacks, the JVM's, and jobs that went on."""

    def __init__(self, spark_context: Any):
        self.spark_context = spark_context
        self.requested = False

    def handle(self, signum: int, frame: FrameType | None) -> None:  # noqa: ARG002 - a signal handler's signature
        if self.requested or not _in_py4j(frame):
            raise KeyboardInterrupt
        self.requested = True
        threading.Thread(target=self._cancel, name="hf-judge-spark-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self.spark_context.cancelAllJobs()  # this thread's own connection to the JVM
        except Exception as e:  # noqa: BLE001 - a session already stopping: nothing left to cancel
            logger.debug("cancelling the Spark jobs after a Ctrl-C: %s", e)

    def check(self) -> None:
        """A KeyboardInterrupt where a Ctrl-C came between two Spark jobs: the next one is not started."""
        if self.requested:
            raise KeyboardInterrupt

    def filter(self, record: logging.LogRecord) -> bool:
        """py4j's log lines of a call a Ctrl-C ended (with their tracebacks): the run's own line says it."""
        return not (self.requested and str(record.msg).endswith("while sending command."))


def _in_py4j(frame: FrameType | None) -> bool:
    """Whether the main thread was inside a call into the JVM (py4j's code) when the signal came."""
    while frame is not None:
        if "py4j" in frame.f_code.co_filename.split(os.sep):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def spark_interrupts(spark: pyspark.sql.SparkSession, use_cache: bool = True) -> Iterator[SparkInterrupts]:
    """While the block runs, a Ctrl-C cancels the Spark jobs (:class:`SparkInterrupts`) and the block ends with the
    run's one-line :class:`~hf_judge.InterruptedRun`: the replies the executors stored are in the cache (``use_cache``),
    and the same command resumes. A session :func:`spark_session` started is stopped first (its tasks stop
    sending). Nested blocks share the outer one's handler; off the main thread it changes nothing but the
    message.

    Example:
        >>> with spark_interrupts(spark) as stop:  # doctest: +SKIP
        ...     stop.check()
        ...     df.write.parquet("out")
    """
    previous = signal.getsignal(signal.SIGINT)
    outer = getattr(previous, "__self__", None)
    if isinstance(outer, SparkInterrupts):
        yield outer
        return
    stop = SparkInterrupts(spark.sparkContext)
    main = threading.current_thread() is threading.main_thread()
    root = logging.getLogger()  # py4j logs through the root logger
    if main:
        signal.signal(signal.SIGINT, stop.handle)
        root.addFilter(stop)
    try:
        yield stop
    except InterruptedRun:
        raise
    except BaseException as e:
        if not (stop.requested or isinstance(e, KeyboardInterrupt)):
            raise
        if spark in STARTED:
            _stop_quietly(spark)
        raise interrupted(use_cache) from None
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
            root.removeFilter(stop)


def _stop_quietly(spark: pyspark.sql.SparkSession) -> None:
    """Stop a session hf-judge started, after a Ctrl-C: its tasks stop sending now, not when the JVM exits. Its JVM
    then prints nothing more (HF_JUDGE_DEBUG=1 keeps it): a task cancelled mid-batch leaves futures whose pools the
    stop shuts down, each a RejectedExecutionException's stack trace on stderr, after the run's own line."""
    with contextlib.suppress(Exception):  # a session stopping already: the process ends anyway
        if not constants.debug_enabled():
            jvm: Any = spark.sparkContext._jvm  # this process's own JVM (spark_session started it)
            jvm.System.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
        spark.stop()


def hub_frames(
    spark: pyspark.sql.SparkSession,
    repo_id: str,
    *,
    subset: str | None = None,
    splits: list[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
    limit: int | None = None,
) -> dict[str, pyspark.sql.DataFrame]:
    """A Hub dataset's splits (``splits``, default all) read by Hugging Face's Spark data source
    (``spark.read.format("huggingface")``, from ``pyspark-huggingface``): each executor streams its shards from
    the Hub, nothing passes through this process.

    Example:
        >>> frames = hub_frames(spark, "openai/gsm8k", subset="main", splits=["test"])  # doctest: +SKIP
    """
    from datasets import get_dataset_split_names

    try:
        from pyspark_huggingface.huggingface import HuggingFaceDatasets  # type: ignore[import-untyped]
    except ImportError as e:
        raise ConfigError(f"--spark reads Hub datasets with pyspark-huggingface: {INSTALL} ({e})") from None
    # Spark 4 finds installed pyspark_* data sources only where its session started with them importable (not
    # in every notebook's): registered by name, for this session
    spark.dataSource.register(HuggingFaceDatasets)
    names = get_dataset_split_names(repo_id, subset, revision=revision, token=token)
    unknown = sorted(set(splits or ()) - set(names))
    if unknown:
        raise ConfigError(f"{repo_id} has no split {', '.join(unknown)}: its splits are {', '.join(names)}")
    frames = {}
    for split in splits or names:
        reader = spark.read.format("huggingface").option("split", split)
        for key, value in (("config", subset), ("revision", revision), ("token", token)):
            if value:
                reader = reader.option(key, value)
        df = reader.load(repo_id)
        frames[split] = df.limit(limit) if limit else df
    return frames


def arrow_frames(spark: pyspark.sql.SparkSession, ds: Any) -> dict[str, pyspark.sql.DataFrame]:
    """Each split of ``ds`` (a ``DatasetDict`` as :func:`hf_judge.cli.inputs.load_input` reads any input) as a
    DataFrame, handed to Spark as Arrow; an ``errors`` split of a scored input stays out."""
    splits, _ = as_splits(ds)
    return {s: spark.createDataFrame(d.with_format("arrow")[:]) for s, d in splits.items()}


class SparkOutput(RayOutput):
    """Where a Spark run writes: ``<url>/<split>/`` by Spark's Parquet writer (``url``: a local folder or what the
    cluster's Spark reads as a URL: ``s3://`` on Databricks and EMR, ``s3a://`` on open-source Spark), then
    ``errors/`` and ``summary.json`` as :class:`~hf_judge.engine.ray_output.RayOutput` writes them.

    Example:
        >>> with open_sink(SparkOutput("s3://bucket/scored")) as output:  # doctest: +SKIP
        ...     train, errors, moved = output.write("train", scored)
    """

    def spark_url(self, split: str) -> str:
        """The URL Spark's writer is given for ``split`` (a local folder as a ``file://`` URL)."""
        if "://" in self.url:
            return f"{self.url}/{split}"
        return f"file://{os.path.abspath(self.root)}/{split}"

    def write(  # type: ignore[override]  # a DataFrame, not a Ray Data stage
        self, split: str, data: pyspark.sql.DataFrame
    ) -> tuple[Dataset, list[dict[str, Any]]]:
        """Score ``data`` (rows numbered by ``monotonically_increasing_id`` in ``ROW_COLUMN``) into
        ``<url>/<split>/``, once: kept on the executors' disks while the errors are taken off it. Returns the split
        as written and its error rows (numbered by their place in it)."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        data = data.persist(StorageLevel.DISK_ONLY)  # a lost block is scored again from the reply store: no cost
        try:
            writer = data.drop(ROW_COLUMN, ERRORS_COLUMN).write.mode("overwrite")
            # no _SUCCESS file beside the Parquet (this write's Hadoop setting, not the session's): the parquet
            # builder of `datasets` reads every file of a folder, and an empty one is not Parquet
            writer.option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false").parquet(self.spark_url(split))
            part = F.shiftright(F.col(ROW_COLUMN), PARTITION_SHIFT).alias("part")
            counts = {r["part"]: r["count"] for r in data.groupBy(part).count().collect()}
            marked = data.where(F.size(ERRORS_COLUMN) > 0)
            found = marked.select(ROW_COLUMN, ERRORS_COLUMN).orderBy(ROW_COLUMN).collect()
        finally:
            data.unpersist()
        offsets, total = {}, 0
        for p in sorted(counts):  # the writer's files are in partition order: a row's place counts those before
            offsets[p], total = total, total + counts[p]
        mask = (1 << PARTITION_SHIFT) - 1
        errors = []
        for r in found:
            row = offsets[r[ROW_COLUMN] >> PARTITION_SHIFT] + (r[ROW_COLUMN] & mask)
            errors += [{"split": split, "row": row, **item.asDict()} for item in r[ERRORS_COLUMN]]
        return Dataset(self.read_split(split)), errors


class SparkEngine:
    """Spark as an engine of :class:`~.distributed.DistributedRun`: each split a DataFrame, its rows numbered by
    ``monotonically_increasing_id``, scored by ``mapInArrow`` (:func:`~.spark.spark_step`) and written by the sink's
    Parquet writer (:class:`SparkOutput`); the executors' counters come back through an accumulator, merged while
    the split is written. The key is read on the executors (``env:NAME``): the driver holds none."""

    name = "spark"

    def __init__(self, frames: dict[str, pyspark.sql.DataFrame], base_urls: list[str] | None, batch_size: int):
        self.frames, self.base_urls, self.batch_size = frames, base_urls, batch_size

    def refuse(self, job: JudgeJob) -> None:
        """What Spark cannot do of ``job`` on these frames, and no key: before anything runs."""
        for df in self.frames.values():
            refuse_on(df, job, self.base_urls)

    def key(self, job: JudgeJob, needed: bool) -> None:  # noqa: ARG002 - DistributedRun's hook
        return None  # each executor reads its own (env:NAME); the driver sends nothing

    def inputs(self, frames: dict[str, pyspark.sql.DataFrame]) -> DatasetDict:
        """Each frame's columns as an empty split (what the run's preparation reads): no Spark job runs."""
        from pyspark.sql.pandas.types import to_arrow_schema

        return DatasetDict(
            {s: Dataset(pa.Table.from_batches([], to_arrow_schema(df.schema))) for s, df in frames.items()}
        )

    def data(self, frames: dict[str, pyspark.sql.DataFrame], run: DistributedRun) -> dict[str, Any]:  # noqa: ARG002
        return frames

    def rows(self, data: pyspark.sql.DataFrame) -> None:  # noqa: ARG002 - counted by the job that writes it
        return None

    def history(self, run: DistributedRun, split: str) -> Path | None:
        """The split's run history, beside the results cache, under the output's split and the judging's identity."""
        if not run.use_cache:
            return None
        sink = cast(SparkOutput, run.sink)
        job = run.job
        ident = [sink.url, split, [m.name for m in job.metrics], job.columns, run.summary.model, job.layout.judges]
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]
        return job.cache_root / "results" / f"spark-{digest}.arrow"

    def note(self) -> str:
        sessions = {str(df.sparkSession.sparkContext.master) for df in self.frames.values()}
        return f"scored on Spark ({', '.join(sorted(sessions))})"

    def score_split(
        self, run: DistributedRun, split: str, df: pyspark.sql.DataFrame
    ) -> tuple[Dataset, list[dict[str, Any]]]:
        from pyspark.sql import functions as F

        reports: Any = df.sparkSession.sparkContext.accumulator([], cast(Any, ReportList()))
        numbered = df.withColumn(ROW_COLUMN, F.monotonically_increasing_id())
        step = spark_step(numbered, run.job, self.base_urls, self.batch_size, reports)
        scored = numbered.mapInArrow(step, spark_schema(numbered, step.new_schema))
        with spark_interrupts(df.sparkSession, run.use_cache) as stop:
            stop.check()
            with merging(new_items(lambda: reports.value), run.tally.merge):
                return cast(SparkOutput, run.sink).write(split, scored)


def score_frames_on_spark(
    frames: dict[str, pyspark.sql.DataFrame],
    metrics: Any,
    *,
    output_dir: str,
    output_overwrite: bool = False,
    base_urls: list[str] | None = None,
    batch_size: int = 1024,
    **values: Unpack[JobValues],
) -> ScoredDatasetDict:
    """Each split of ``frames`` scored on Spark and written to ``output_dir`` (see the module docstring): the
    result read back with its ``errors`` split and summary, as :func:`hf_judge.score_dataset_on_ray` gives it.
    ``api_key``: ``env:NAME`` or None (``$OPENAI_API_KEY``), read on the executors; the other keywords are
    :func:`hf_judge.spark.score_spark_dataframe`'s (``metrics`` may be a :class:`hf_judge.Job`).

    Example:
        >>> spark = spark_session()  # doctest: +SKIP
        >>> scored = score_frames_on_spark(  # doctest: +SKIP
        ...     hub_frames(spark, "me/rows"), ["QA_All"], model="judge", output_dir="s3://bucket/scored",
        ...     cache_dir="s3://bucket/cache", api_key="env:JUDGE_KEY",
        ... )
    """
    given = Job.of(metrics, values, "score_frames_on_spark")
    storage_options = given.values.get("storage_options")
    refuse_secrets_in_the_plan(given.values.get("api_key"), storage_options)
    check("spark", given.settings, base_urls=base_urls)
    job = given.resolved
    engine = SparkEngine(frames, base_urls, batch_size)
    engine.refuse(job)
    output = SparkOutput(output_dir, storage_options, output_overwrite)
    return DistributedRun(job, engine, sink=output).score_splits(frames)
