"""``hf-judge score --spark``: a scoring job on Spark (:func:`spark_job`), from any input ``hf-judge`` reads.

A Hub dataset is read by Hugging Face's Spark data source on the executors; a file, a folder or a scored result
is read here as ``hf-judge`` reads it (``inputs.load_input``) and handed to Spark as Arrow. The result is written
by Spark's Parquet writer to ``--output-dir`` (local, or a URL on object storage), with ``errors/`` and
``summary.json`` beside it (``engine.spark_run``); ``hf-judge score`` then adds the report page, the overview
and the push, as for every engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..engine.capabilities import check
from .job import Job
from .options import key_variable
from .save import default_output_dir


def on_spark(args: argparse.Namespace) -> bool:
    """Whether the command scores on Spark (``--spark``, or ``--spark-master`` alone)."""
    return bool(getattr(args, "spark", False) or getattr(args, "spark_master", None))


def spark_key(args: argparse.Namespace, job: Job) -> str | None:
    """The key as Spark's executors read it: never its value (it would travel in Spark's plan), the name of the
    variable that holds it (``env:NAME``): ``--api-key-env NAME``, else the recipe's ``env:VAR``, else None
    (each executor reads ``$OPENAI_API_KEY``, or ``$ANTHROPIC_API_KEY`` for an Anthropic judge)."""
    if args.api_key_env:
        return f"env:{key_variable(args.api_key_env)}"
    return job.recipe_api_key


def spark_job(args: argparse.Namespace, job: Job, client: dict[str, Any]) -> tuple[Any, str]:
    """Score ``job`` on Spark (``client``: its settings, with a local judge's URL where one runs); returns the
    result read back from where it was written, and that place (``--output-dir``, else a folder named after
    the input).

    Example:
        >>> scored, out = spark_job(args, job, job.client)  # doctest: +SKIP
    """
    from ..engine.spark_run import arrow_frames, hub_frames, score_frames_on_spark, spark_interrupts, spark_session
    from .inputs import load_input

    assert job.dataset is not None  # cmd_score and cmd_run refuse a job without one
    # what the table says --spark refuses of a command line (Spark's reader and writer do those)
    check(
        "spark",
        None,
        only=("stream", "filters"),
        stream=getattr(args, "streaming", False),
        filters=job.filters is not None,
    )
    out = job.output_dir or default_output_dir(job.dataset)
    api_key = spark_key(args, job)
    spark = spark_session(getattr(args, "spark_master", None))
    # from the session on, a Ctrl-C cancels Spark's jobs and ends the run with its one line
    with spark_interrupts(spark, not getattr(args, "no_cache", False)):
        if _on_hub(job.dataset):
            frames = hub_frames(
                spark,
                job.dataset,
                subset=job.subset,
                splits=job.splits,
                revision=job.revision,
                token=args.token,
                limit=job.limit,
            )
        else:
            ds = load_input(job.dataset, subset=job.subset, splits=job.splits, revision=job.revision, limit=job.limit)
            frames = arrow_frames(spark, ds)
        scored = score_frames_on_spark(
            frames,
            job.metrics,
            output_dir=out,
            output_overwrite=bool(args.overwrite),
            token_columns=job.token_columns,
            **{**job.library_args(args, api_key), **client},
        )
    return scored, out


def _on_hub(dataset: str) -> bool:
    """A Hub repo id (read by Spark's Hugging Face data source), not a local file or folder."""
    from .inputs import looks_like_path

    return not Path(dataset).expanduser().exists() and not looks_like_path(dataset)
