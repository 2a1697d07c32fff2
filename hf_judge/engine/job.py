"""One scoring job, resolved once: :class:`Job`, the public description, and :class:`JudgeJob`, what the engines
read (the library's counterparts of the CLI's ``cli.job.Job``).

Every public entry point (:data:`ENTRY_POINTS`: :func:`hf_judge.score_dataset`, :func:`hf_judge.estimate_cost`,
:func:`hf_judge.export_batch`, :func:`hf_judge.import_batch`, ``hf_judge.ray.score_ray_dataset``,
``hf_judge.ray.score_dataset_on_ray``, :class:`hf_judge.Judge`, ``hf_judge.spark.score_spark_dataframe``,
``hf_judge.spark.spark_output_schema``, :func:`hf_judge.choose_judge`) takes a :class:`Job` where it takes the
metrics, or the metrics and the same keyword arguments, typed once by :class:`~hf_judge.settings.JobValues`
(:data:`COMMON_ARGUMENTS`: columns, api_key, prompts_dir, metric_params, the cache's ``cache_dir``,
``storage_options`` and ``local_cache_dir``, use_cache, token_columns, settings; and every setting). The keyword
form is the Job form: :meth:`Job.of` builds the Job they describe, with the same checks and the same messages,
and the entry point hands its :class:`JudgeJob` on: the engines read the job, never the bundle again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import constants
from ..errors import ConfigError
from ..judging.catalogue import resolve_metrics
from ..judging.ensemble import Layout
from ..judging.metrics import Metric
from ..redact import SECRET_NAME, masked, resolve_secret, scrub
from ..settings import JobValues, Settings, Unpack, resolved_provider
from ..store.segments import Remote, default_local_dir, is_url
from .prepare import resolve_api_key, run_settings

STORE_FILE = "replies.sqlite3"
# The public entry points, as "module:name" (their public paths): each takes a Job where it takes the metrics, or
# COMMON_ARGUMENTS and the settings as ``**values: Unpack[JobValues]`` (less what NOT_APPLICABLE says does not apply
# to it: settings.ExportValues, settings.RayJobValues). tests/test_job.py checks every one: a new one goes here.
ENTRY_POINTS = (
    "hf_judge:score_dataset",
    "hf_judge:estimate_cost",
    "hf_judge:export_batch",
    "hf_judge:import_batch",
    "hf_judge.ray:score_ray_dataset",
    "hf_judge.ray:score_dataset_on_ray",
    "hf_judge:Judge",
    "hf_judge.spark:score_spark_dataframe",
    "hf_judge.spark:spark_output_schema",
    "hf_judge:choose_judge",
)
COMMON_ARGUMENTS = (
    "columns", "api_key", "prompts_dir", "metric_params", "cache_dir", "storage_options", "local_cache_dir",
    "use_cache", "token_columns", "settings",
)  # fmt: skip
NOT_APPLICABLE = {
    "hf_judge:export_batch": {"api_key": "nothing is sent", "token_columns": "it writes requests, not columns"},
    # a setting left out of its **values (RayJobValues): the name is Ray's own argument there
    "hf_judge.ray:score_ray_dataset": {"concurrency": "Ray's actors (map_batches); in_flight= is the setting"},
}
# the settings of a cascade's strong judge (engine/cascade.py): none of them in either tier's own job
ESCALATE_FIELDS = (
    "escalate_model", "escalate_base_url", "escalate_api_key", "escalate_when", "escalate_models",
    "escalate_temperature",
)  # fmt: skip


@dataclass(frozen=True)
class JudgeJob:
    """What to judge, with what, and where its replies are kept: the metrics loaded, the settings merged.

    ``api_key`` is the key as given: None (``$OPENAI_API_KEY``) and ``env:NAME`` are read by :meth:`key`
    when the key is needed, in the process that needs it.

    Example:
        >>> job = JudgeJob.resolve(["QA_Clarity"], model="m", base_url="http://127.0.0.1:8000/v1")
        >>> [m.name for m in job.metrics], job.settings.model, job.store_path.name
        (['QA_Clarity'], 'm', 'replies.sqlite3')
    """

    metrics: list[Metric]
    settings: Settings
    layout: Layout
    columns: dict[str, str] = field(default_factory=dict)
    api_key: str | None = None
    cache_root: Path = field(default_factory=constants.default_cache_dir)
    use_cache: bool = True
    token_columns: bool = False
    # cache_dir on object storage: the shared home of the store (``cache_root`` is then this process's local copy)
    remote: Remote | None = None
    # the bias checks of the finished result (results/bias.py); off for a cascade's tiers, whose combined result
    # is checked once
    bias_checks: bool = True

    @classmethod
    def resolve(cls, metrics: Any, **values: Unpack[JobValues]) -> JudgeJob:
        """The job the public functions' keyword arguments describe; a bad setting or metric raises here.

        Example:
            >>> JudgeJob.resolve("QA_All", model="m", samples=3).layout.samples
            3
        """
        return _resolved(metrics, dict(values), "score_dataset")

    @classmethod
    def of(cls, merged: Settings, metrics: Any, **values: Unpack[JobValues]) -> JudgeJob:
        """The job of settings already merged (an entry point that checks them before the metrics load); the
        other keyword arguments are :class:`~hf_judge.settings.JobValues`' (``settings=`` aside).

        ``cache_dir`` may be an fsspec URL (``s3://bucket/prefix``): the store's shared home, configured by
        ``storage_options``; ``local_cache_dir`` (else ``$HF_JUDGE_LOCAL_CACHE``, else a folder of the user
        cache keyed by the URL) holds this process's local copy (:mod:`hf_judge.store.segments`)."""
        layout = Layout.from_settings(merged)
        loaded = resolve_metrics(metrics, values.get("prompts_dir"), values.get("metric_params"))
        root, remote = cache_location(values.get("cache_dir"), values.get("storage_options"),
                                      values.get("local_cache_dir"))  # fmt: skip
        return cls(
            loaded,
            merged,
            layout,
            dict(values.get("columns") or {}),
            values.get("api_key"),
            root,
            values.get("use_cache", True),
            values.get("token_columns", False),
            remote,
        )

    def __repr__(self) -> str:
        # the key and a URL's password masked, as a Job's repr masks them
        names = [m.name for m in self.metrics]
        return scrub(
            f"JudgeJob({names!r}, {_shown('settings', self.settings)}, columns={self.columns!r}, "
            f"api_key={_shown('api_key', self.api_key)}, cache_root={str(self.cache_root)!r}, "
            f"use_cache={self.use_cache}, remote={self.remote!r})"
        )

    @property
    def store_path(self) -> Path | None:
        """The reply store, or None when the job does not use the cache."""
        return self.cache_root / STORE_FILE if self.use_cache else None

    @property
    def store_file(self) -> Path:
        """Where the reply store is (or would be), used or not."""
        return self.cache_root / STORE_FILE

    def key(self, needed: bool, base_url: str | None = None) -> str | None:
        """The key to send (see :func:`~hf_judge.engine.prepare.resolve_api_key`); ``needed``: no key for
        OpenAI's API is a ConfigError; ``base_url``: the first replica of a fleet, when there is one."""
        # the provider as the settings say or imply it: a fleet's URL (a base URL) must not make it OpenAI's
        update = {"base_url": base_url, "provider": resolved_provider(self.settings)}
        s = self.settings if base_url is None else self.settings.model_copy(update=update)
        # ``env:NAME`` is read here, in the process that sends: a job, pickled, holds only the name
        return resolve_api_key(s, resolve_secret(self.api_key, "api_key"), needed=needed)

    def with_settings(self, **update: Any) -> JudgeJob:
        """The same job with some settings changed, as ``Settings.model_copy(update=...)`` changes them."""
        s = self.settings.model_copy(update=update)
        return replace(self, settings=s, layout=Layout.from_settings(s))

    def for_metrics(self, metrics: list[Metric]) -> JudgeJob:
        """The same job for some of its metrics, its column mapping cut to their variables (the rest would be
        reported as unused)."""
        used = {v for m in metrics for v in (*m.variables, *m.optional)}
        return replace(self, metrics=metrics, columns={v: c for v, c in self.columns.items() if v in used})

    def strong_tier(self) -> JudgeJob:
        """A cascade's strong tier (``escalate_model``, see :mod:`hf_judge.engine.cascade`): the stronger judge
        (or its panel, ``escalate_models``), ``escalate_samples`` replies per row from each, at
        ``escalate_temperature`` (default: the run's), on its server (default: the run's), with its key (default:
        the run's); a panel judge without its own server or key has the strong tier's. Its token columns are the
        run's (the cascade adds them to the cheap tier's).

        Example:
            >>> job = JudgeJob.resolve(["QA_Clarity"], model="m", logprobs=True, escalate_model="big",
            ...                        escalate_when="confidence<0.6")  # fmt: skip
            >>> job.strong_tier().settings.model
            'big'
        """
        settings = self.settings
        esc = settings.escalation
        if esc is None:
            raise ValueError("strong_tier() is a cascade's: the job has no escalate_model")
        temperature = settings.temperature if settings.escalate_temperature is None else settings.escalate_temperature
        update = {
            "model": esc.model,
            "base_url": esc.base_url or settings.base_url,
            # one judge of its own (escalate_models=[one]) keeps its own server and key: a panel of one
            "models": list(settings.escalate_models) if settings.escalate_models else None,
            "samples": settings.escalate_samples,
            "temperature": temperature,
        }
        s = settings.model_copy(update={**update, "min_samples": None, **dict.fromkeys(ESCALATE_FIELDS)})
        s = s.model_copy(update={"escalate_audit": 0.0, "escalate_samples": 1})
        key = esc.api_key or self.api_key  # as given: ``env:NAME`` is read where the key is needed
        return replace(self, settings=s, layout=Layout.from_settings(s), api_key=key)


class Job:
    """What to judge and how, described once and checked once: the metrics and every keyword argument the entry
    points share (:class:`~hf_judge.settings.JobValues`: the column mapping, the key, the prompts, the reply
    store, the settings). Every entry point takes a Job in place of its metrics, and its keyword form is the same
    call: ``score_dataset(ds, metrics, **values)`` is ``score_dataset(ds, Job(metrics, **values))``, and so for
    :func:`~hf_judge.estimate_cost`, :func:`~hf_judge.export_batch`, :func:`~hf_judge.import_batch`,
    :class:`~hf_judge.Judge`, ``hf_judge.ray.score_ray_dataset``, ``hf_judge.ray.score_dataset_on_ray``,
    ``hf_judge.spark.score_spark_dataframe`` and :func:`~hf_judge.choose_judge` (whose candidates replace the
    Job's judge). What is an entry point's own (the dataset, ``progress``, ``if_exists``, Ray's actors) stays
    its keyword argument.

    A bad field (an unknown metric or setting, a value out of range, a key named by a variable that is not
    set is refused where it is read) raises here, before any entry point sends a request. A Job is immutable
    and reusable: estimate, then score, then rank judges with the same one; :meth:`replace` makes another with
    some values changed. Its repr shows what it was given, secrets masked.

    Example:
        >>> from hf_judge import Job
        >>> job = Job(["QA_Clarity"], model="judge", columns={"instruction": "question"}, api_key="sk-do-not-show-me")
        >>> job
        Job(['QA_Clarity'], model='judge', columns={'instruction': 'question'}, api_key='***')
        >>> job.settings.model, [m.name for m in job.metrics]
        ('judge', ['QA_Clarity'])
        >>> job.replace(samples=3).settings.samples
        3
        >>> Job(["QA_Clarity"], model="judge", temperature=7)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: invalid settings: temperature (--temperature): Input should be ... (got 7)
        >>> # scored = score_dataset(ds, job); estimate = estimate_cost(ds, job); judge = Judge(job)
    """

    def __init__(self, metrics: Any, /, **values: Unpack[JobValues]) -> None:
        self._given = (metrics, dict(values))
        self.resolved = _resolved(metrics, dict(values), "Job")  # the engines' job: metrics loaded, settings merged

    @classmethod
    def of(cls, metrics: Any, values: Mapping[str, Any], entry: str) -> Job:
        """``metrics`` when it is a Job (then ``values``, an entry point's keyword arguments, must be empty),
        else the Job they describe; a TypeError names ``entry`` (the function called)."""
        if isinstance(metrics, Job):
            if values:
                given = ", ".join(f"{k}=" for k in values)
                raise TypeError(
                    f"{entry}() got a Job and keyword arguments of a job ({given}): the Job holds them all. Give "
                    f"them to it, job.replace({next(iter(values))}=...), or call {entry}() with the metrics instead"
                )
            return metrics
        job = cls.__new__(cls)
        job._given = (metrics, dict(values))
        job.resolved = _resolved(metrics, dict(values), entry)
        return job

    @property
    def settings(self) -> Settings:
        """The settings, merged: ``settings=`` overridden by the settings' keyword arguments."""
        return self.resolved.settings

    @property
    def metrics(self) -> list[Metric]:
        """The metrics, loaded (their prompts, outputs and columns)."""
        return self.resolved.metrics

    @property
    def given_metrics(self) -> Any:
        """The metrics as given (names, a mode's ``All``, a comma list, Metric objects)."""
        return self._given[0]

    @property
    def values(self) -> dict[str, Any]:
        """The keyword arguments the Job was given (:class:`~hf_judge.settings.JobValues`), a copy."""
        return dict(self._given[1])

    def replace(self, **changes: Unpack[JobValues]) -> Job:
        """Another Job: these values changed, the metrics and the rest as they are (checked again).

        Example:
            >>> Job("QA_All", model="m").replace(model="n").settings.model
            'n'
        """
        return Job(self._given[0], **{**self._given[1], **changes})  # type: ignore[arg-type]

    def __repr__(self) -> str:
        metrics, values = self._given
        shown = [repr(metrics), *(f"{k}={_shown(k, v)}" for k, v in values.items())]
        return scrub(f"Job({', '.join(shown)})")


def in_flight_values(metrics: Any, values: Mapping[str, Any], in_flight: int | None, entry: str) -> dict[str, Any]:
    """``values`` with ``in_flight=`` (Ray's and Spark's name for the ``concurrency`` setting, their
    ``concurrency`` being their own) as that setting; with a Job, ``in_flight=`` is a TypeError (the Job has it)."""
    if in_flight is None:
        return dict(values)
    if isinstance(metrics, Job):
        raise TypeError(
            f"{entry}() got a Job and in_flight={in_flight}: in_flight is the Job's concurrency setting; give it "
            f"there, job.replace(concurrency={in_flight})"
        )
    return {**values, "concurrency": in_flight}


def _resolved(metrics: Any, values: dict[str, Any], entry: str) -> JudgeJob:
    """The JudgeJob of an entry point's keyword arguments: the settings merged (an unknown one is a TypeError that
    names ``entry``), then the metrics and the store."""
    common = {k: values.pop(k) for k in COMMON_ARGUMENTS if k in values}
    try:
        settings = run_settings(common.pop("settings", None), values)
    except TypeError as e:
        raise TypeError(str(e).replace("score_dataset()", f"{entry}()", 1)) from None
    return JudgeJob.of(settings, metrics, **common)


def _shown(name: str, value: Any) -> str:
    """A value of a Job's repr: a credential (by its name, at any depth) masked, a URL's password too."""
    if isinstance(value, Settings):
        given = value.model_dump(exclude_defaults=True)
        return f"Settings({', '.join(f'{k}={_shown(k, v)}' for k, v in given.items())})"
    return repr(masked(value, named=bool(SECRET_NAME.search(name))))


def cache_location(
    cache_dir: str | os.PathLike | None,
    storage_options: dict[str, Any] | None = None,
    local_cache_dir: str | os.PathLike | None = None,
) -> tuple[Path, Remote | None]:
    """(the local cache folder, the shared store on object storage or None) of a ``cache_dir``.

    Example:
        >>> root, remote = cache_location("s3://bucket/cache", local_cache_dir="/tmp/judge")
        >>> str(root.parent), remote.url  # a folder of its own per URL, inside the one given
        ('/tmp/judge/remote', 's3://bucket/cache')
    """
    if storage_options is not None and not is_url(cache_dir):
        raise ConfigError(
            f"storage_options= configures a cache_dir on object storage (s3://..., gs://...), but cache_dir is "
            f"{cache_dir!r}; give cache_dir as a URL or leave storage_options out"
        )
    if is_url(cache_dir):
        remote = Remote.of(str(cache_dir), storage_options)
        local = local_cache_dir or os.environ.get("HF_JUDGE_LOCAL_CACHE")
        # absolute: a map transform's processes and Ray's workers may run from another directory
        # keyed by the URL inside the folder given too: one node's folder serves several stores, never mixing them
        root = default_local_dir(remote.url, Path(local).expanduser().absolute() if local else _default_root())
        return root, remote
    if local_cache_dir is not None:
        raise ConfigError(
            "local_cache_dir= is the local copy of a cache_dir on object storage (s3://...); with a local "
            f"cache_dir ({cache_dir!r}) leave it out"
        )
    root = Path(cache_dir).expanduser().absolute() if cache_dir is not None else constants.default_cache_dir()
    return root, None


def _default_root() -> Path:
    return constants.default_cache_dir()
