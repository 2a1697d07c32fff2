"""Scoring a Spark DataFrame: hf_judge as a ``mapInArrow`` step (``pip install "hf-judge[spark]"``).

:func:`score_spark_dataframe` appends the same score columns as :func:`hf_judge.score_dataset` to a
``pyspark.sql.DataFrame``, and the per-row ``judge_errors`` column of :class:`hf_judge.Judge` (a list of
``{metric, judge, kind, message, raw, attempts}``, empty when every metric scored). The rows travel as Arrow
batches (``mapInArrow``), each scored by the same row core as every other engine. Nothing runs until a Spark action.

Each Python worker of an executor holds one :class:`~hf_judge.engine.transform.Runtime` (event loop, clients,
the reply store opened ``shared=True``), built on its first batch and kept while Spark reuses the worker. Every
batch's replies are committed (and, on object storage, published) before the batch is handed back, and two
workers never send one request: so a task Spark retries, a speculative copy of a slow task and the tasks of a
lost executor find the replies of the attempt before and pay only what it had in flight. The store is local
disk in local mode; on a cluster give ``cache_dir`` as a URL on object storage (``s3://bucket/prefix``), as on
Ray: each executor keeps a local copy (``$HF_JUDGE_LOCAL_CACHE`` on that node, else ``local_cache_dir``).

The API key never travels in Spark's plan: ``api_key`` names an environment variable (``env:NAME``; None:
``$OPENAI_API_KEY``), read by each executor where it sends, from its own environment: in local mode the one
the session started in, on a cluster the platform's secrets (docs/how-to/spark.md, "The API key": not
``spark.executorEnv.NAME=...``, which puts the key on the JVM's command line and in Spark's event log). A key
given as a value is refused, and so is a credential among ``storage_options`` given as one.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from datasets import Dataset

from ..errors import ConfigError
from ..judging.images import image_variables
from ..redact import install_log_filter, plan_secrets
from ..results.bias import warn_self_preference
from ..settings import JobValues, Unpack
from .capabilities import check
from .core import Plan
from .distributed import fleet_urls, stage_features
from .job import Job, JudgeJob, in_flight_values
from .prepare import check_samples, judge_specs, preflight
from .ray_output import ROW_COLUMN
from .transform import ERRORS_COLUMN, Runtime, errors_by_row, shared_runtime

if TYPE_CHECKING:
    import pyspark.sql
    import pyspark.sql.types

__all__ = ["ERRORS_COLUMN", "score_spark_dataframe", "spark_output_schema", "spark_plans"]


def score_spark_dataframe(
    df: pyspark.sql.DataFrame,
    metrics: Any,
    *,
    base_urls: list[str] | None = None,
    in_flight: int | None = None,
    batch_size: int = 1024,
    **values: Unpack[JobValues],
) -> pyspark.sql.DataFrame:
    """``df`` with one column per declared output of ``metrics`` and ``judge_errors``, as a lazy ``mapInArrow`` step.

    The keyword arguments are :func:`hf_judge.ray.score_ray_dataset`'s: ``base_urls`` a fleet of replicas of
    one judge (default: the ``base_url`` setting), ``in_flight`` the requests in flight per Python worker (the
    ``concurrency`` setting), ``batch_size`` the rows scored together (Spark's Arrow batches are cut to it),
    ``cache_dir`` the reply store (a local path in local mode; on a cluster a URL on object storage shared by
    every executor, with ``storage_options=`` and ``local_cache_dir=``); every other keyword is a setting, as
    for :func:`hf_judge.score_dataset`. ``api_key``: ``env:NAME`` (or None for ``$OPENAI_API_KEY``), read on
    the executors. Template errors and missing columns are found on the first row, before any request; the
    output's schema is :func:`spark_output_schema`'s. ``metrics`` may be a :class:`hf_judge.Job` (its
    ``concurrency`` setting is ``in_flight``): ``score_spark_dataframe(df, metrics, in_flight=n, **values)`` is
    ``score_spark_dataframe(df, Job(metrics, concurrency=n, **values))``.

    Example:
        >>> from pyspark.sql import SparkSession  # doctest: +SKIP
        >>> df = SparkSession.builder.getOrCreate().read.parquet("s3://bucket/rows")  # doctest: +SKIP
        >>> scored = score_spark_dataframe(  # doctest: +SKIP
        ...     df, ["QA_All"], model="judge", base_url="http://gpu1:8000/v1", api_key="env:JUDGE_KEY",
        ...     columns={"instruction": "question", "output": "answer"}, cache_dir="s3://bucket/hf-judge-cache",
        ... )
        >>> scored.write.parquet("s3://bucket/scored")  # doctest: +SKIP
    """
    step = _step(df, metrics, base_urls, in_flight, batch_size, values, "score_spark_dataframe")
    warn_self_preference(step.job.settings)
    return df.mapInArrow(step, spark_schema(df, step.new_schema))


def spark_output_schema(
    df: pyspark.sql.DataFrame,
    metrics: Any,
    *,
    base_urls: list[str] | None = None,
    in_flight: int | None = None,
    batch_size: int = 1024,
    **values: Unpack[JobValues],
) -> pyspark.sql.types.StructType:
    """The schema of what :func:`score_spark_dataframe` returns for the same arguments: ``df``'s fields, then the
    score columns and ``judge_errors`` (checked as it checks them; nothing is sent).

    Example:
        >>> schema = spark_output_schema(df, ["QA_Clarity"], model="judge")  # doctest: +SKIP
        >>> schema.fieldNames()[-3:]  # doctest: +SKIP
        ['QA_Clarity_reason', 'QA_Clarity', 'judge_errors']
    """
    step = _step(df, metrics, base_urls, in_flight, batch_size, values, "spark_output_schema")
    return spark_schema(df, step.new_schema)


def _step(
    df: pyspark.sql.DataFrame,
    metrics: Any,
    base_urls: list[str] | None,
    in_flight: int | None,
    batch_size: int,
    values: Mapping[str, Any],
    entry: str,
) -> SparkScorer:
    """The ``mapInArrow`` function of a call to ``entry``: the job resolved and checked, the plans built on the
    first row."""
    install_log_filter()
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    given = Job.of(metrics, in_flight_values(metrics, values, in_flight, entry), entry)
    refuse_secrets_in_the_plan(given.values.get("api_key"), given.values.get("storage_options"))
    job = given.resolved
    refuse_on(df, job, base_urls)
    return spark_step(df, job, base_urls, batch_size)


def refuse_on(df: pyspark.sql.DataFrame, job: JudgeJob, base_urls: list[str] | None) -> None:
    """What a Spark step cannot do of ``job`` over ``df`` (the capability table: the columns it adds must not be
    there already), and no key for OpenAI's API: before anything runs."""
    existing = sorted(set(stage_features(job)) & set(df.columns))
    check("spark", job.settings, base_urls=base_urls, existing=existing)
    check_key(df, job, fleet_urls(job.settings, base_urls)[0])


def spark_step(
    df: pyspark.sql.DataFrame, job: JudgeJob, base_urls: list[str] | None, batch_size: int, reports: Any = None
) -> SparkScorer:
    """The ``mapInArrow`` function of ``job`` over ``df`` (checked by :func:`refuse_on`): the plans built on the
    first row; ``reports``: the accumulator the batches' counters go to (see :class:`SparkScorer`).

    Example:
        >>> step = spark_step(df, job, None, 1024)  # doctest: +SKIP
        >>> scored = df.mapInArrow(step, spark_schema(df, step.new_schema))  # doctest: +SKIP
    """
    names = [c for c in df.columns if c != ROW_COLUMN]
    plans = spark_plans(df, job, names)
    return SparkScorer(
        job, plans, fleet_urls(job.settings, base_urls), stage_features(job).arrow_schema, batch_size, reports
    )


# where the messages send a user whose secret would ride in the plan: the ways that keep it off the JVM's command
# line and out of Spark's event log and UI, which spark.executorEnv.NAME=... does not
KEY_HELP = "docs/how-to/spark.md, 'The API key'"


def refuse_secrets_in_the_plan(api_key: str | None, storage_options: dict[str, Any] | None) -> None:
    """A ConfigError for a secret given as a value, which would travel inside Spark's plan to every executor (and
    into its logs): the API key, or a credential among ``storage_options`` (by its name, or by its value: a URL
    with a password or a signature, an ``Authorization`` header, bytes, a list). Both take ``env:NAME`` instead,
    read on each executor from its environment. The message names where each is, never its value.

    Example:
        >>> refuse_secrets_in_the_plan("env:JUDGE_KEY", {"secret": "env:AWS_SECRET_ACCESS_KEY"})  # nothing to say
    """
    if api_key is not None and (not isinstance(api_key, str) or not api_key.startswith("env:")):
        raise ConfigError(
            "a key given as a value would travel inside Spark's plan to every executor (and into its logs): name "
            "the environment variable that holds it, api_key='env:NAME' (--api-key-env NAME), and give the "
            "executors that variable through their environment, not through Spark's settings (a "
            f"spark.executorEnv.NAME value is on the JVM's command line and in Spark's event log): see {KEY_HELP}"
        )
    if api_key is not None and not api_key[4:].strip():
        raise ConfigError(
            "api_key='env:' names no environment variable: give the name of the one that holds the key, e.g. "
            "api_key='env:JUDGE_KEY' (--api-key-env JUDGE_KEY)"
        )
    if storage_options is not None and not isinstance(storage_options, dict):
        raise ConfigError(f"storage_options must be a dict of fsspec options, got a {type(storage_options).__name__}")
    found = plan_secrets(storage_options)
    if found:
        raise ConfigError(
            f"{'; '.join(found)}: a secret given as a value would travel inside Spark's plan to every executor (and "
            "into its logs). Give each as the name of the environment variable that holds it, as text: "
            "storage_options={'secret': 'env:AWS_SECRET_ACCESS_KEY'} (--storage-option "
            "secret=env:AWS_SECRET_ACCESS_KEY), read on each executor from its own environment (how to set it "
            f"there: {KEY_HELP}); or leave them out and let the executors use their own credentials (an instance "
            "profile, a service principal)"
        )


def check_key(df: pyspark.sql.DataFrame, job: JudgeJob, base_url: str) -> None:
    """No key for OpenAI's API is a ConfigError now, unless Spark's settings give the executors the variable the
    driver lacks (``spark.executorEnv.NAME``); the key read here is not kept."""
    try:
        job.key(needed=True, base_url=base_url)
    except ConfigError as e:
        name = job.api_key[4:].strip() if job.api_key else "OPENAI_API_KEY"
        if df.sparkSession.conf.get(f"spark.executorEnv.{name}", None):
            return
        raise ConfigError(
            f"{e} On Spark, the executors read it from their own environment: in local mode they inherit it from "
            f"the process that starts the session (set it before the session starts); on a cluster see {KEY_HELP}"
        ) from None


def spark_plans(df: pyspark.sql.DataFrame, job: JudgeJob, names: list[str]) -> list[Plan]:
    """Every metric's plan on ``df``'s columns, its images found and its template rendered on the first row
    (the library's step and ``hf-judge score --spark`` build them alike).

    Example:
        >>> plans = spark_plans(df, job, df.columns)  # doctest: +SKIP
    """
    temperature = job.settings.temperature
    plans = [
        Plan(m, m.resolve_columns(job.columns, names), m.temperature if temperature is None else temperature)
        for m in job.metrics
    ]
    needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
    first = Dataset(df.select(*needed).limit(1).toArrow()) if needed else None
    for p in plans:
        p.images = image_variables(p.metric, p.columns, first.features if first is not None else {})
    if first is not None and len(first):
        preflight("train", first, plans)
    check_samples(job.settings, {"train": plans})
    return plans


def spark_schema(df: pyspark.sql.DataFrame, new: pa.Schema) -> pyspark.sql.types.StructType:
    """``df``'s schema with the new columns' fields after it."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    return StructType(list(df.schema.fields) + list(from_arrow_schema(new).fields))


class SparkScorer:
    """The ``mapInArrow`` function: Arrow batches in, the same batches with the new columns out. It pickles its
    configuration only (the job holds the key's variable name, never the key); each Python worker builds one
    :class:`~hf_judge.engine.transform.Runtime` per configuration on its first batch and keeps it. ``reports``: a
    Spark accumulator of lists (``hf-judge score --spark``'s, :mod:`.distributed`) that each batch adds its
    runtime's counters to (``runtime.reporter``, the counting bridge); None: nothing is counted (a step alone)."""

    def __init__(
        self,
        job: JudgeJob,
        plans: list[Plan],
        base_urls: list[str],
        new_schema: pa.Schema,
        batch_size: int,
        reports: Any = None,
    ):
        self.job = job
        self.reports = reports
        self.plans = plans
        self.base_urls = base_urls
        self.new_schema = new_schema
        self.batch_size = batch_size
        self.needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
        self.id = hashlib.sha256(pickle.dumps((job, plans, base_urls, new_schema))).hexdigest()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        runtime: Runtime | None = None
        for whole in batches:
            for start in range(0, whole.num_rows, self.batch_size):
                runtime = runtime or _runtime(self)
                yield self.score(runtime, whole.slice(start, self.batch_size))

    def score(self, runtime: Runtime, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with the score columns and the errors column; its replies committed before it returns."""
        values = {c: batch.column(c).to_pylist() for c in self.needed}
        cols, errors = runtime.score(values, self.plans, self.job.layout, self.job.token_columns)
        cols[ERRORS_COLUMN] = errors_by_row(errors, batch.num_rows)
        if self.reports is not None:  # reaches the driver when the task ends (Spark merges a successful task's)
            self.reports.add([runtime.reporter.report()])
        arrays = list(batch.columns) + [pa.array(cols[f.name], type=f.type) for f in self.new_schema]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(batch.schema) + list(self.new_schema)))


def _runtime(step: SparkScorer) -> Runtime:
    """This Python worker's runtime for ``step``'s configuration (one per worker: Spark reuses a worker for many
    tasks, and each task unpickles its own copy of the step)."""
    return shared_runtime(step.id, lambda: _build_runtime(step))


def _build_runtime(step: SparkScorer) -> Runtime:
    # read here, on the executor: env:NAME (or the provider's variable) from this process's environment
    key = step.job.key(needed=True, base_url=step.base_urls[0])
    specs = judge_specs(step.job.settings, key)
    rt = Runtime(specs, step.job.store_path, None if step.job.layout.panel else step.base_urls, step.job.remote)
    # a retried or speculative task may run on another executor: every batch's replies published first
    rt.publish_at_least = 1
    return rt
