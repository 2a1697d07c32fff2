"""``hf_judge.spark``: scoring a Spark DataFrame, the public path of :mod:`hf_judge.engine.spark`.

Example:
    >>> from hf_judge.spark import score_spark_dataframe, spark_output_schema  # doctest: +SKIP
"""

from .engine.spark import ERRORS_COLUMN, score_spark_dataframe, spark_output_schema

__all__ = ["ERRORS_COLUMN", "score_spark_dataframe", "spark_output_schema"]
