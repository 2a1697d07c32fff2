"""``hf_judge.ray``: scoring as a Ray Data stage, the public path of :mod:`hf_judge.engine.ray`.

Example:
    >>> from hf_judge.ray import score_ray_dataset  # doctest: +SKIP
"""

from .engine.ray import score_dataset_on_ray, score_ray_dataset

__all__ = ["score_dataset_on_ray", "score_ray_dataset"]
