"""Scoring a Ray Data dataset: hf_judge as a ``map_batches`` stage (``pip install "hf-judge[ray]"``).

:func:`score_ray_dataset` appends the same score columns as :func:`hf_judge.score_dataset`
to a ``ray.data.Dataset``, with the same metrics, column mapping and reply
validation. Each of ``concurrency`` actors (a callable class, Ray's convention
for stateful stages) holds one event loop, one connection pool over the judge
fleet's ``base_urls`` (each request to the replica with the fewest in flight,
see :mod:`hf_judge.transport.fleet`) and the reply store opened ``shared=True``: no
request is sent twice by two actors of one host, a repeated run sends
nothing, and the batch Ray retries after an actor died sends only what the
dead actor had in flight. Replies are committed before a batch is returned.
SQLite's WAL does not work over a network filesystem: on a cluster of several
machines, give ``cache_dir`` as a URL on object storage (``s3://bucket/prefix``):
each node keeps a local copy (``$HF_JUDGE_LOCAL_CACHE`` on that node, else
``local_cache_dir``) and publishes its replies there as segments that every
other node reads (:mod:`hf_judge.store.segments`); a local path is each node's
own (its actors share replies among themselves only).

A (row, metric) that fails gets nulls in its columns and an entry in the
row's ``judge_errors`` column (a list of ``{metric, judge, kind, message,
raw, attempts}``, empty when every metric scored; ``raw`` cut to 1,000
characters), the row-level form of the ``errors`` split: the column
:class:`hf_judge.Judge` writes, with its name and type.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from datasets import Dataset, DatasetDict, Features

from ..errors import ConfigError
from ..judging.images import image_variables
from ..redact import install_log_filter
from ..results.bias import warn_self_preference
from .capabilities import check
from .cascade import score_cascade
from .core import Plan
from .distributed import DistributedRun, Merge, fleet_urls, merge_column, stage_features, with_report
from .job import Job, JudgeJob, in_flight_values
from .prepare import check_samples, judge_specs, preflight
from .ray_output import ROW_COLUMN, RayOutput
from .transform import ERRORS_COLUMN, RAW_CHARS, Runtime, errors_by_row

if TYPE_CHECKING:
    import ray.data

    from ..judging.ensemble import Layout
    from ..results.scored import ScoredDatasetDict
    from ..settings import JobValues, RayJobValues, Settings, Unpack
    from ..store.segments import Remote

logger = logging.getLogger("hf_judge")


def score_ray_dataset(
    ds: ray.data.Dataset,
    metrics: Any,
    *,
    base_urls: list[str] | None = None,
    concurrency: int | tuple[int, int] = 1,
    in_flight: int | None = None,
    batch_size: int = 1024,
    num_cpus: float = 1.0,
    map_batches_kwargs: dict[str, Any] | None = None,
    **values: Unpack[RayJobValues],
) -> ray.data.Dataset:
    """``ds`` with one column per declared output of ``metrics`` and ``judge_errors``, as a lazy Ray Data stage.

    ``base_urls``: the judge fleet (replicas of one model); default: the
    ``base_url`` setting. A panel (``models``) sends each judge's requests to
    its own ``base_url`` instead (with ``base_urls`` it is a ConfigError).
    Samples, panels and ``logprobs`` add the columns they add in
    :func:`hf_judge.score_dataset`. ``concurrency``: actors, as ``map_batches`` means it
    (an int, or ``(min, max)`` to autoscale); ``in_flight``: requests in flight
    per actor (the ``concurrency`` setting of :func:`hf_judge.score_dataset`).
    ``cache_dir``: the reply store, a local path of each node (not a network
    filesystem), or a URL on object storage shared by every node (``s3://...``, with
    ``storage_options=`` and ``local_cache_dir=`` as in :func:`hf_judge.score_dataset`;
    see the module docstring). Other keyword arguments are settings, as for
    :func:`hf_judge.score_dataset`. ``map_batches_kwargs`` go to
    ``map_batches`` (``memory=``, ``resources=``, ``runtime_env=``, ...).
    Template errors and missing columns are found on the first row, before
    any request. ``metrics`` may be a :class:`hf_judge.Job` (its ``concurrency``
    setting is ``in_flight``): ``score_ray_dataset(ds, metrics, in_flight=n,
    **values)`` is ``score_ray_dataset(ds, Job(metrics, concurrency=n, **values))``.

    Example:
        >>> import ray  # doctest: +SKIP
        >>> ds = ray.data.read_parquet("/shared/data")  # doctest: +SKIP
        >>> scored = score_ray_dataset(  # doctest: +SKIP
        ...     ds, ["QA_All"], model="judge", columns={"instruction": "question", "output": "answer"},
        ...     base_urls=["http://gpu1:8000/v1", "http://gpu2:8000/v1"], cache_dir="/local/hf_judge",
        ...     concurrency=4, in_flight=256,
        ... )
        >>> scored.write_parquet("/shared/scored")  # doctest: +SKIP
    """
    install_log_filter()
    given = in_flight_values(metrics, values, in_flight, "score_ray_dataset")  # the keyword form's setting
    job = Job.of(metrics, given, "score_ray_dataset").resolved
    check("ray_stage", job.settings, base_urls=base_urls)
    warn_self_preference(job.settings)
    return ray_stage(ds, job, base_urls, concurrency, batch_size, num_cpus, map_batches_kwargs)


def ray_stage(
    ds: ray.data.Dataset,
    job: JudgeJob,
    base_urls: list[str] | None = None,
    concurrency: int | tuple[int, int] = 1,
    batch_size: int = 1024,
    num_cpus: float = 1.0,
    map_batches_kwargs: dict[str, Any] | None = None,
    batch_stats: bool = False,
    plans: list[Plan] | None = None,
) -> ray.data.Dataset:
    """:func:`score_ray_dataset` of a job resolved already: its ``map_batches`` stage over ``ds``. ``plans``: built
    by ``prepare.build_plans`` on the whole split (:func:`score_dataset_on_ray`), else here, from the first row."""
    settings, layout = job.settings, job.layout
    names = ds.schema().names
    if plans is None:
        plans = _stage_plans(ds, job, names)
    features = stage_features(job, [p.metric for p in plans])
    # a stage sees the rows a batch at a time: the columns it adds may not be there already
    check("ray_stage", settings, only=("if_exists",), existing=sorted(set(features) & set(names)))
    urls = fleet_urls(settings, base_urls)
    key = job.key(needed=True, base_url=urls[0])
    # a panel: each judge's settings and key, resolved here; each actor builds one client per judge from them
    judges = judge_specs(settings, key) if layout.panel else []
    import ray.data

    # Ray 2.51 deprecated map_batches(concurrency=): an actor pool says the same
    pool = (
        ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
        if isinstance(concurrency, tuple)
        else ray.data.ActorPoolStrategy(size=concurrency)
    )
    return ds.map_batches(
        _Scorer,
        fn_constructor_kwargs={
            "plans": plans,
            "settings": settings,
            "base_urls": urls,
            "api_key": key,
            "store_path": str(job.store_path) if job.store_path is not None else None,
            "schema": features.arrow_schema,
            "token_columns": job.token_columns,
            "batch_stats": batch_stats,
            "judges": judges,
            "layout": layout,
            "remote": job.remote,
        },
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=pool,
        num_cpus=num_cpus,
        **(map_batches_kwargs or {}),
    )


def _check_address(address: str) -> None:
    """A cluster address nothing listens at is a ConfigError now, not minutes of Ray retrying to connect."""
    if address in ("auto", "local") or ":" not in address:
        return  # Ray resolves these itself, and says so when there is none
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"no Ray cluster answers at {address!r} ({e}): check --ray-address / $RAY_ADDRESS (the head node's "
            "host:port, e.g. 10.0.0.1:6379, or ray://host:10001), or leave both unset to start a local cluster"
        ) from None


def _stage_plans(ds: ray.data.Dataset, job: JudgeJob, names: list[str]) -> list[Plan]:
    """The plans of a Ray Data stage over a dataset it sees a batch at a time: every metric, checked on the first
    row."""
    temperature = job.settings.temperature
    plans = [
        Plan(m, m.resolve_columns(job.columns, names), m.temperature if temperature is None else temperature)
        for m in job.metrics
    ]
    first = ds.take(1)
    sample = Dataset.from_list(first) if first else None
    for p in plans:
        p.images = image_variables(p.metric, p.columns, sample.features if sample is not None else Features())
    if sample is not None:
        preflight("train", sample, plans)
    check_samples(job.settings, {"train": plans})
    return plans


class _Scorer:
    """The stage's callable class: one per actor, holding the loop, the fleet client and the shared store."""

    def __init__(
        self,
        plans: list[Plan],
        settings: Settings,
        base_urls: list[str],
        api_key: str | None,
        store_path: str | None,
        schema: pa.Schema,
        token_columns: bool,
        batch_stats: bool = False,
        judges: list[tuple[Settings, str | None]] | None = None,
        layout: Layout | None = None,
        remote: Remote | None = None,
    ):
        self.plans = plans
        self.schema = schema
        self.token_columns = token_columns
        self.layout = layout
        # one judge: a client over the fleet's replicas; a panel: one client per judge, each on its own server
        store = Path(store_path) if store_path is not None else None
        self.runtime = Runtime(judges or [(settings, api_key)], store, None if judges else base_urls, remote)
        # every batch's replies published before Ray sees it done, however few: Ray ends a pool's actors with
        # ray.kill (no exit handler runs), and a retry or a rerun may land on another node
        self.runtime.publish_at_least = 1
        self.needed = sorted({c for p in plans for c in p.columns.values() if c is not None})
        self.batch_stats = batch_stats

    def __call__(self, table: pa.Table) -> pa.Table:
        batch = {c: table.column(c).to_pylist() for c in self.needed}
        # committed before Ray sees the batch done: a retry after a crash finds them
        cols, errors = self.runtime.score(batch, self.plans, self.layout, self.token_columns)
        # score_dataset_on_ray's own stage keeps each reply whole: its errors split is the in-process run's
        cols[ERRORS_COLUMN] = errors_by_row(errors, table.num_rows, None if self.batch_stats else RAW_CHARS)
        for f in self.schema:
            table = table.append_column(f, pa.array(cols[f.name], type=f.type))
        # the run's counters: what this actor sent since its last batch, back to the driver with the rows
        return with_report(table, self.runtime.reporter.report()) if self.batch_stats else table

    def __del__(self) -> None:
        runtime = getattr(self, "runtime", None)  # None: __init__ failed
        if runtime is not None:
            runtime.close()


def score_dataset_on_ray(
    ds: Dataset | DatasetDict,
    metrics: Any,
    *,
    address: str | None = None,
    actors: int | tuple[int, int] | None = None,
    base_urls: list[str] | None = None,
    output_dir: str | None = None,
    output_overwrite: bool = False,
    if_exists: str = "keep",
    **values: Unpack[JobValues],
) -> ScoredDatasetDict:
    """:func:`hf_judge.score_dataset` run on Ray (``hf-judge score --ray``): the same result, splits and ``errors``.

    Connects to the cluster at ``address`` (default ``$RAY_ADDRESS``; ``"auto"``: the one a ``ray start`` on
    this machine left running), or with neither starts a Ray of the run's own on this machine (never joining
    one it finds running: it may be another user's); scores each split with :func:`score_ray_dataset`
    (``actors`` actors, default one per CPU of the cluster, each with the ``concurrency`` setting's requests
    in flight, as a worker of ``score_dataset``) and brings the rows back in input order. The summary holds the
    run's settings, rows and errors, and the request and token counters of the batches the actors finished.

    ``output_dir``: a URL on object storage (``s3://bucket/scored``, with the store's ``storage_options``)
    that Ray Data's Parquet writer fills as shards finish: ``<output_dir>/<split>/``, then ``errors/`` and
    ``summary.json`` (see :mod:`hf_judge.engine.ray_output`). A killed job keeps its finished shards, and a
    rerun writes each split anew. A URL holding files no hf-judge run wrote is refused unless
    ``output_overwrite``. ``if_exists``: what to do with a metric whose columns a split has already, as
    :func:`hf_judge.score_dataset`'s (the same rules: ``prepare.build_plans``). ``metrics`` may be a
    :class:`hf_judge.Job`: ``score_dataset_on_ray(ds, metrics, **values)`` is ``score_dataset_on_ray(ds,
    Job(metrics, **values))``.

    Example:
        >>> scored = score_dataset_on_ray(ds, ["QA_All"], model="judge", address="ray://head:10001")  # doctest: +SKIP
        >>> scored = score_dataset_on_ray(  # doctest: +SKIP
        ...     ds, ["QA_All"], model="judge", cache_dir="s3://bucket/cache", output_dir="s3://bucket/scored"
        ... )
    """
    try:
        import ray
    except ImportError as e:
        raise ConfigError(f'scoring on Ray needs Ray: pip install "hf-judge[ray]" ({e})') from None

    from datasets import IterableDataset, IterableDatasetDict

    given = Job.of(metrics, values, "score_dataset_on_ray")
    job, settings, storage_options = given.resolved, given.settings, given.values.get("storage_options")
    stream = isinstance(ds, (IterableDataset, IterableDatasetDict))
    # before a cluster is started or joined
    check("ray", settings, stream=stream, base_urls=base_urls, url_output=output_dir is not None, url=output_dir or "")
    output = RayOutput(output_dir, storage_options, output_overwrite) if output_dir is not None else None
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is not None:
        _check_address(address)
    if not ray.is_initialized():
        # no address: a Ray of this run's own ("local"). Ray's default joins the cluster that a `ray start` on this
        # machine recorded (another user's, maybe): the rows would go there. `auto` joins it when asked to.
        ray.init(address=address or "local", log_to_driver=False)
    ray.data.DataContext.get_current().execution_options.preserve_order = True  # rows come back in input order
    actors = actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    if settings.escalate_model is None:
        return _on_ray(ds, job, actors, base_urls, output, if_exists)

    tiers: list[JudgeJob] = []

    def tier(d: Any, j: JudgeJob, *, if_exists: str, **_: Any) -> ScoredDatasetDict:
        tiers.append(j)  # the first pass is the cheap tier's: the fleet (base_urls) is its judge's replicas
        return _on_ray(d, j, actors, base_urls if len(tiers) == 1 else None, if_exists=if_exists)

    return score_cascade(ds, job, tier, progress=False, if_exists=if_exists)


def _on_ray(
    ds: Any,
    job: JudgeJob,
    actors: int | tuple[int, int],
    base_urls: list[str] | None,
    output: RayOutput | None = None,
    if_exists: str = "keep",
) -> Any:
    """:func:`score_dataset_on_ray` of a job resolved, on a cluster joined: the distributed driver's run of
    :class:`RayEngine` (each split through :func:`ray_stage`, brought back to the driver or written to ``output``)."""
    shown = job.with_settings(base_url=base_urls[0]) if base_urls else job  # the summary names the fleet's first
    return DistributedRun(shown, RayEngine(actors, base_urls), sink=output).score_splits(ds, if_exists)


class RayEngine:
    """Ray as an engine of :class:`~.distributed.DistributedRun`: a split's rows handed to Ray Data as Arrow blocks,
    scored by :func:`ray_stage`'s actor pool (``actors``) over ``base_urls``, brought back in input order (each
    batch's counters merged as it arrives) or written by the sink (:class:`~.ray_output.RayOutput`)."""

    name = "ray"

    def __init__(self, actors: int | tuple[int, int], base_urls: list[str] | None) -> None:
        self.actors, self.base_urls = actors, base_urls

    def inputs(self, ds: Any) -> Any:
        return ds

    def data(self, ds: Any, run: DistributedRun) -> dict[str, Dataset]:  # noqa: ARG002 - the protocol's
        return run.splits  # after build_plans: the columns if_exists drops are gone

    def rows(self, data: Dataset) -> int:
        return len(data)

    def history(self, run: DistributedRun, split: str) -> Path | None:
        return run.works_by_split()[split].cache_file if run.use_cache else None

    def note(self) -> str:
        return f"scored on Ray by {self.actors} actors"

    def score_split(self, run: DistributedRun, split: str, data: Dataset) -> tuple[Dataset, list[dict[str, Any]]]:
        import ray

        size = self.actors if isinstance(self.actors, int) else self.actors[1]
        blocks = max(1, min(len(data), 4 * size))
        table = data.with_format("arrow")[:]
        if run.sink is not None:  # each row's position, for the errors of batches written where they finish
            table = table.append_column(ROW_COLUMN, pa.array(range(len(data)), type=pa.int64()))
        stage = ray_stage(
            # not from_huggingface: it reloads the split by its builder's name to look for Hub Parquet files
            # (a local JSON file's builder "json" reads every JSON file of the working directory), and hands
            # an in-memory split over as one block, which one actor scores alone
            ray.data.from_arrow(table, override_num_blocks=blocks),
            run.job,
            self.base_urls,
            concurrency=self.actors,
            # a batch a block, at most 1,024 rows: every actor has work, and its counters come back as it goes
            batch_size=min(1024, -(-len(data) // blocks)),
            batch_stats=True,
            plans=run.plans[split],
        )
        if run.sink is None:
            return _collected(stage, split, run.tally.merge)
        output = cast(RayOutput, run.sink)
        return output.write(split, stage, run.tally.merge)


def _collected(stage: ray.data.Dataset, split: str, merge: Merge) -> tuple[Dataset, list[dict[str, Any]]]:
    """A split's scored rows from the actors, block by block in input order: each batch's counters merged as it
    arrives, its error rows (numbered in the split) gathered, the split with its score columns returned."""
    tables, errors, offset = [], [], 0
    for batch in stage.iter_batches(batch_size=None, batch_format="pyarrow"):
        batch = merge_column(batch, merge)
        for row, found in enumerate(batch.column(ERRORS_COLUMN).to_pylist()):
            errors += [{"split": split, "row": offset + row, **item} for item in found]
        offset += batch.num_rows
        tables.append(batch.drop_columns([ERRORS_COLUMN]))
    return Dataset(pa.concat_tables(tables)), errors
