"""``calibrate``: a judge's score -> what people said, fitted on a labelled sample.

A 1-10 judge score is no probability: "8" may mean right 95 % of the time for one judge and 60 % for another.
:func:`calibrate` fits an isotonic (monotone, step-wise linear) map from the judge's score, or its
``_expected`` where the run asked for log-probabilities, to P(label is positive) for true/false labels, or
to the expected human score for numeric ones, with the pool-adjacent-violators algorithm in numpy
(scikit-learn's ``IsotonicRegression(out_of_bounds="clip")`` gives the same map; a test checks). It reports:

* the expected calibration error (ECE): over ``bins`` equal-width bins of the prediction (0-1 for a
  probability; the predictions' range for a human score), the rows' share times |mean label - mean
  prediction|, summed; for the judge's score read as a probability (rescaled to 0-1 over its observed range)
  and for the calibrated map out of fold (k-fold, seeded), where it cannot have seen the row it predicts;
* a reliability table (mean prediction against mean label per bin; a PNG with the plots extra);
* for true/false labels, a threshold on the calibrated probability, maximising F1 or the lowest meeting a
  target precision, with its cross-validated precision and recall: each fold's threshold is chosen on the
  other folds and counted on its own.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict

from ..errors import ConfigError
from . import stats
from .calibration_text import describe
from .labels import Joined, join_labels, label_source_name, labels_for, read_labels

FORMAT = 1  # calibration.json's format version
FILE_NAME = "calibration.json"
logger = logging.getLogger("hf_judge")


def isotonic_fit(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The non-decreasing least-squares fit of ``y`` on ``x``: its knots (x sorted and distinct, the fitted
    value at each); between knots the map is linear, beyond them constant (:func:`isotonic_predict`).
    Ties in ``x`` are first replaced by their weighted mean, as scikit-learn does.

    Example:
        >>> isotonic_fit(np.array([1.0, 2, 3, 4]), np.array([0.0, 1, 0, 1]))
        (array([1., 2., 3., 4.]), array([0. , 0.5, 0.5, 1. ]))
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    if not len(x):
        raise ConfigError("nothing to calibrate: no row has both a score and a label")
    ux, inverse = np.unique(x, return_inverse=True)
    wsum = np.bincount(inverse, weights=w)
    ymean = np.bincount(inverse, weights=w * y) / wsum
    return ux, _pav(ymean, wsum)


def _pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pool adjacent violators: merge neighbouring blocks while one's mean exceeds the next's."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for yi, wi in zip(y.tolist(), w.tolist(), strict=True):
        means.append(yi)
        weights.append(wi)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w2 = weights[-2] + weights[-1]
            means[-2] = (means[-2] * weights[-2] + means[-1] * weights[-1]) / w2
            weights[-2] = w2
            sizes[-2] += sizes[-1]
            del means[-1], weights[-1], sizes[-1]
    return np.repeat(np.array(means), sizes)


def isotonic_predict(
    knots_x: Sequence[float] | np.ndarray, knots_y: Sequence[float] | np.ndarray, x: np.ndarray
) -> np.ndarray:
    """The fitted map at ``x``: linear between knots, the end values beyond them.

    Example:
        >>> isotonic_predict([1.0, 3.0], [0.2, 0.6], np.array([0.0, 2.0, 9.0])).tolist()
        [0.2, 0.4, 0.6]
    """
    return np.interp(np.asarray(x, dtype=np.float64), np.asarray(knots_x), np.asarray(knots_y))


def _compact(kx: np.ndarray, ky: np.ndarray) -> tuple[list[float], list[float]]:
    """The knots without those inside a flat step (the same map, a shorter file)."""
    keep = np.ones(len(kx), dtype=bool)
    if len(kx) > 2:
        keep[1:-1] = (ky[1:-1] != ky[:-2]) | (ky[1:-1] != ky[2:])
    return kx[keep].tolist(), ky[keep].tolist()


def _bin_index(pred: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    if hi <= lo:
        return np.zeros(len(pred), dtype=np.intp)
    return np.clip(((pred - lo) / (hi - lo) * bins).astype(np.intp), 0, bins - 1)


def reliability(pred: np.ndarray, truth: np.ndarray, bins: int, lo: float, hi: float) -> list[dict[str, Any]]:
    """Per equal-width bin of ``pred`` over [lo, hi] (the last bin closed) that holds rows: its bounds, rows,
    mean prediction and mean label.

    Example:
        >>> reliability(np.array([0.1, 0.2, 0.9]), np.array([0.0, 1.0, 1.0]), 2, 0.0, 1.0)[0]["label_mean"]
        0.5
    """
    idx = _bin_index(pred, bins, lo, hi)
    width = (hi - lo) / bins
    out = []
    for b in range(bins):
        m = idx == b
        if m.any():
            out.append(
                {
                    "low": lo + b * width,
                    "high": lo + (b + 1) * width,
                    "count": int(m.sum()),
                    "prediction_mean": float(pred[m].mean()),
                    "label_mean": float(truth[m].mean()),
                }
            )
    return out


def ece(pred: np.ndarray, truth: np.ndarray, bins: int = 10, lo: float = 0.0, hi: float = 1.0) -> float | None:
    """Expected calibration error: over ``bins`` equal-width bins of ``pred`` on [lo, hi], the share of rows
    in each times |mean label - mean prediction|, summed. None for no rows.

    Example:
        >>> round(ece(np.array([0.1, 0.2, 0.9]), np.array([0.0, 1.0, 1.0]), bins=2), 4)  # 2/3 * 0.35 + 1/3 * 0.1
        0.2667
    """
    if not len(pred):
        return None
    n = len(pred)
    total = sum(
        r["count"] / n * abs(r["label_mean"] - r["prediction_mean"]) for r in reliability(pred, truth, bins, lo, hi)
    )
    return float(total)


def choose_threshold(prob: np.ndarray, truth: np.ndarray, target_precision: float | None = None) -> float | None:
    """The cut on ``prob`` (positive when prob >= cut): the one maximising F1 (ties: the higher cut), or with
    ``target_precision`` the lowest (most recall) whose precision reaches it; None when none does.

    Example:
        >>> choose_threshold(np.array([0.2, 0.4, 0.7, 0.9]), np.array([False, True, True, True]))
        0.4
    """
    best: tuple[float, float] | None = None
    for cut in np.unique(prob):
        pred = prob >= cut
        fig = stats.binary_scores(truth, pred)
        if target_precision is not None:
            if fig["precision"] is not None and fig["precision"] >= target_precision:
                return float(cut)
            continue
        f1 = fig["f1"] or 0.0
        if best is None or f1 >= best[0]:
            best = (f1, float(cut))
    return None if target_precision is not None or best is None else best[1]


def _folds(n: int, folds: int, seed: int) -> list[np.ndarray]:
    return np.array_split(np.random.default_rng(seed).permutation(n), folds)


def cross_validate(
    x: np.ndarray, y: np.ndarray, *, folds: int, seed: int, binary: bool, target_precision: float | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Out-of-fold predictions of the map, and for true/false labels the pooled precision, recall and F1
    of a threshold chosen on the other folds (per fold too). The same seed gives the same folds."""
    oof = np.empty(len(x))
    tp = fp = fn = 0
    per_fold = []
    for test in _folds(len(x), folds, seed):
        train = np.setdiff1d(np.arange(len(x)), test)
        kx, ky = isotonic_fit(x[train], y[train])
        oof[test] = isotonic_predict(kx, ky, x[test])
        if not binary:
            continue
        truth = y[test].astype(bool)
        cut = choose_threshold(isotonic_predict(kx, ky, x[train]), y[train].astype(bool), target_precision)
        pred = oof[test] >= cut if cut is not None else np.zeros(len(test), dtype=bool)
        tp += int((pred & truth).sum())
        fp += int((pred & ~truth).sum())
        fn += int((~pred & truth).sum())
        fig = stats.binary_scores(truth, pred)
        per_fold.append(
            {
                "rows": len(test),
                "threshold": cut,
                "predicted": int(pred.sum()),
                "precision": fig["precision"],
                "recall": fig["recall"],
            }
        )
    if not binary:
        return oof, {"folds": folds, "seed": seed, "mae": stats.mae(oof, y)}
    return oof, {
        "folds": folds,
        "seed": seed,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None,
        "per_fold": per_fold,
    }


@dataclass
class Calibration:
    """A fitted calibration (``calibration.json``): ``predict`` maps judge values to calibrated ones.

    ``score``: the score column; ``column``: the column the map reads (``score`` or ``<score>_expected``);
    ``kind``: "binary" (the map gives P(label is positive)) or "numeric" (the expected human score);
    ``knots_x``/``knots_y``: the isotonic map; ``ece``: expected calibration errors (``judge``: the score
    read as a probability or as the human score, ``calibrated``: out of fold, ``bins``); ``reliability``:
    the tables behind them; ``by_score``: per judge value, rows, mean label and the map's value;
    ``threshold``: the chosen cut (``probability``, ``min_score``, ``criterion``); ``cv``: its k-fold figures;
    ``warning``: why the figures cannot be trusted (every label of one class), None when they can;
    ``judge``: the judge it was fitted on (:func:`judge_of`: models, provider, prompt sha256, metric parameters),
    which applying it to another judge's scores checks.

    The map is checked when the calibration is made or loaded: finite knots, ``knots_x`` increasing,
    ``knots_y`` non-decreasing and, for a probability, in [0, 1]; anything else is a ConfigError.
    """

    score: str
    column: str
    label: str
    kind: str
    pairs: int
    knots_x: list[float]
    knots_y: list[float]
    ece: dict[str, Any] = field(default_factory=dict)
    reliability: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    by_score: list[dict[str, Any]] = field(default_factory=list)
    threshold: dict[str, Any] | None = None
    cv: dict[str, Any] = field(default_factory=dict)
    dropped: int = 0
    format: int = FORMAT
    # numeric labels read as verdicts (label >= it is positive): the map gives P(human label >= label_threshold)
    label_threshold: float | None = None
    # e.g. every label positive: the map is constant, and F1 1.000 / ECE 0.000 say nothing about the judge
    warning: str | None = None
    # the judge it was fitted on (judge_of): models, provider, the prompt file's sha256, the metric's params;
    # None in a calibration saved before it was recorded (applied with a warning: it cannot be checked)
    judge: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self._check_map()

    def _check_map(self) -> None:
        """A ConfigError for a map :meth:`predict` would apply wrongly: ``np.interp`` takes unsorted or NaN
        knots without a word, and a probability of 7.0 would pass every ``min_prob``."""
        if self.kind not in ("binary", "numeric"):
            raise ConfigError(f"kind must be binary or numeric, got {self.kind!r}")
        kx, ky = self.knots_x, self.knots_y
        if not isinstance(kx, list) or not isinstance(ky, list) or not kx or len(kx) != len(ky):
            raise ConfigError("knots_x and knots_y must be two lists of numbers of the same length, not empty")
        for name, knots in (("knots_x", kx), ("knots_y", ky)):
            bad = [v for v in knots if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)]
            if bad:
                raise ConfigError(f"{name} holds {bad[0]!r}: every knot must be a finite number")
        if any(b <= a for a, b in zip(kx, kx[1:], strict=False)):
            raise ConfigError("knots_x must be increasing (the judge values the map is fitted at, sorted)")
        if any(b < a for a, b in zip(ky, ky[1:], strict=False)):
            raise ConfigError("knots_y must be non-decreasing (an isotonic map: a higher score never maps lower)")
        if self.kind == "binary" and not 0 <= ky[0] <= ky[-1] <= 1:
            raise ConfigError(
                f"knots_y of a binary calibration are probabilities between 0 and 1; got {ky[0]!r} .. {ky[-1]!r}"
            )

    @property
    def output(self) -> str:
        """The column :func:`hf_judge.apply_calibration` writes: ``<score>_calibrated``."""
        return f"{self.score}_calibrated"

    def predict(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """The calibrated values of judge values (of ``column``).

        Example:
            >>> Calibration("S", "S", "h", "binary", 2, [1.0, 9.0], [0.1, 0.9]).predict([5]).tolist()
            [0.5]
        """
        return isotonic_predict(self.knots_x, self.knots_y, np.asarray(values, dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> Path:
        """Write ``calibration.json`` (``path`` a file, or a folder to write it in)."""
        p = Path(path)
        if p.is_dir():
            p = p / FILE_NAME
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=1))
        return p

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """A saved calibration (a ``calibration.json`` file, or the folder holding one).

        Example:
            >>> Calibration.load("out/calibration.json")  # doctest: +SKIP
        """
        p = Path(path)
        if p.is_dir():
            p = p / FILE_NAME
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            return cls(**data)
        except OSError as e:
            raise ConfigError(
                f"cannot read calibration {p} ({e.strerror or e}): save one with hf-judge calibrate"
            ) from None
        except ConfigError as e:  # the map's own check
            raise ConfigError(f"{p} is no usable calibration: {e}; fit it again with hf-judge calibrate") from None
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{p} is not a calibration ({e}): save one with hf-judge calibrate ... -o FILE") from None

    def __str__(self) -> str:
        return describe(self)


def judge_of(summary: Any, score: str) -> dict[str, Any] | None:
    """The judge behind ``score`` in a result's summary (a ``RunSummary``, or ``summary.json`` read as a dict):
    ``models`` (the judge's model, or a panel's), ``provider``, and the ``prompt_sha256`` and ``params`` of the
    metric whose column ``score`` is; None without a summary or a model. What a calibration records, and what
    applying it checks.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> prompts = {"QA_Correctness": {"sha256": "ab12", "params": {}}}
        >>> j = judge_of(NS(model="gpt-4.1-mini", provider="", sampling={}, prompts=prompts), "QA_Correctness_expected")
        >>> j["models"], j["metric"], j["prompt_sha256"]
        (['gpt-4.1-mini'], 'QA_Correctness', 'ab12')
    """
    if summary is None:
        return None
    get = summary.get if isinstance(summary, dict) else lambda k, d=None: getattr(summary, k, d)
    panel = (get("sampling") or {}).get("judges") or []
    models = [str(j.get("model") or j.get("name")) for j in panel] or ([str(get("model"))] if get("model") else [])
    if not models:
        return None
    base = score.split("__")[0]
    prompts = get("prompts") or {}
    metric = max((m for m in prompts if base == m or base.startswith(f"{m}_")), key=len, default=None)
    p = prompts.get(metric) or {}
    return {
        "models": models,
        "provider": get("provider") or "",
        "metric": metric,
        "prompt_sha256": p.get("sha256"),
        "params": p.get("params") or {},
    }


def calibrate(
    scored_or_labels: Dataset | DatasetDict | Sequence[dict[str, Any]] | str | Path,
    score: str,
    label: str | None = None,
    *,
    labels: Sequence[dict[str, Any]] | str | Path | None = None,
    split: str | None = None,
    positive: Any = None,
    kind: str | None = None,
    use_expected: bool | None = None,
    folds: int = 5,
    seed: int = 0,
    bins: int = 10,
    target_precision: float | None = None,
    token: str | None = None,
    label_threshold: float | None = None,
) -> Calibration:
    """Fit a calibration of the judge's ``score`` against human labels.

    The labels: a ``label`` column of the scored dataset, or ``labels`` (a labels file or the list
    :func:`hf_judge.analysis.labels.read_labels` gives) joined by (split, row); or ``scored_or_labels`` is
    itself a labels file / list whose records hold the judge's value under the score's name (what
    ``hf-judge sample-for-review`` writes). ``kind``: "binary" (true/false labels, or ``positive``: the label
    value that counts as positive) or "numeric" (human scores); default from the labels. ``use_expected``:
    read ``<score>_expected`` (default: when every labelled row has one). ``folds``/``seed``: the k-fold
    cross-validation; ``bins``: of the ECE; ``target_precision``: choose the lowest threshold reaching it
    (default: the threshold maximising F1). ``token``: the Hub token that reads labels kept on the Hub
    (``labels="me/to-label"``, see :func:`hf_judge.analysis.labels.read_labels`). ``label_threshold``: numeric
    labels (1-5 ratings) read as verdicts, positive where label >= it: the map gives P(human label >= it) and a
    threshold on the judge's score comes with its precision and recall, as for true/false labels.

    Example:
        >>> ds = Dataset.from_dict({"S": [2, 4, 6, 8] * 10, "ok": [False, False, True, True] * 10})
        >>> cal = calibrate(ds, "S", "ok", folds=2)
        >>> cal.predict([3, 7]).tolist(), cal.threshold["min_score"]
        ([0.0, 1.0], 6.0)
    """
    if folds < 2:
        raise ConfigError(f"folds must be 2 or more, got {folds}")
    if bins < 1:
        raise ConfigError(f"bins must be 1 or more, got {bins}")
    if target_precision is not None and not 0 < target_precision <= 1:
        raise ConfigError(f"target_precision must be in (0, 1], e.g. 0.9; got {target_precision}")
    joined, label_name = _pairs(scored_or_labels, score, label, labels, split, use_expected, token)
    x, y, kind, dropped = _arrays(joined, kind, positive, label_threshold)
    if len(x) < folds:
        raise ConfigError(f"{len(x)} labelled rows with a score: too few for {folds}-fold cross-validation; label more")
    kx, ky = isotonic_fit(x, y)
    binary = kind == "binary"
    oof, cv = cross_validate(x, y, folds=folds, seed=seed, binary=binary, target_precision=target_precision)
    cal = Calibration(score, joined.column, label_name, kind, len(x), *_compact(kx, ky), cv=cv, dropped=dropped)
    cal.label_threshold = label_threshold
    cal.warning = _one_class(y, binary)
    if cal.warning:
        logger.warning("calibration of %s: %s", score, cal.warning)
    if binary:
        lo, hi = 0.0, 1.0
        span = float(x.max() - x.min()) or 1.0
        raw = (x - x.min()) / span  # the judge's score read as a probability over its range
    else:
        lo, hi = float(min(y.min(), x.min())), float(max(y.max(), x.max()))
        raw = x
    cal.ece = {
        "bins": bins,
        "low": lo,
        "high": hi,
        "judge": ece(raw, y, bins, lo, hi),
        "calibrated": ece(oof, y, bins, lo, hi),
    }
    cal.reliability = {"judge": reliability(raw, y, bins, lo, hi), "calibrated": reliability(oof, y, bins, lo, hi)}
    fitted = cal.predict(kx)
    cal.by_score = [
        {"score": float(v), "count": int((x == v).sum()), "label_mean": float(y[x == v].mean()), "calibrated": float(f)}
        for v, f in zip(kx, fitted, strict=True)
    ]
    if binary:
        cut = choose_threshold(cal.predict(x), y.astype(bool), target_precision)
        criterion = f"precision >= {target_precision}" if target_precision is not None else "max F1"
        cal.threshold = {"criterion": criterion, "probability": cut, "min_score": None}
        if cut is not None:
            cal.threshold["min_score"] = float(x[cal.predict(x) >= cut].min())
            cal.threshold.update(stats.binary_scores(y.astype(bool), cal.predict(x) >= cut))
    # a scored result (ScoredDatasetDict) knows its judge: the calibration is bound to it
    cal.judge = judge_of(getattr(scored_or_labels, "summary", None), score)
    return cal


def _one_class(y: np.ndarray, binary: bool) -> str | None:
    """Why labels of one class make a calibration meaningless, or None: the map is a constant, and its
    figures (F1 1.000, ECE 0.000) are perfect whatever the judge said."""
    values = np.unique(y)
    if len(values) > 1:
        return None
    if binary:
        what = f"every label is {'positive' if values[0] else 'negative'}"
    else:
        what = f"every label is {values[0]:g}"
    return (
        f"{what}: the map is a constant and its F1 and ECE say nothing about the judge; label rows of both "
        "outcomes (hf-judge sample-for-review picks them) and calibrate again"
    )


def _pairs(
    source: Any,
    score: str,
    label: str | None,
    labels: Any,
    split: str | None,
    use_expected: bool | None,
    token: str | None = None,
) -> tuple[Joined, str]:
    """The (judge value, label) pairs, from a dataset's label column, a labels file joined with it, or
    labels records that carry the judge's value."""
    if isinstance(source, (str, Path)) or (isinstance(source, Sequence) and not isinstance(source, Dataset)):
        if isinstance(source, (str, Path)):
            records, name = read_labels(source, context=True, token=token), label_source_name(source)
        else:
            records, name = list(source), "labels"
        return _from_records(records, score, use_expected), name
    if (label is None) == (labels is None):
        raise ConfigError("give the labels one way: label= (a column of the dataset) or labels= (a labels file)")
    dd = source if isinstance(source, DatasetDict) else DatasetDict({split or "train": source})
    if labels is not None:
        records = read_labels(labels, token=token) if isinstance(labels, (str, Path)) else list(labels)
        if split is not None:
            records = [r for r in records if r["split"] == split]
        column = _column(dd, score, use_expected, {r["split"] for r in records})
        joined = join_labels(dd, records, score, column)
        return joined, label_source_name(labels) if isinstance(labels, (str, Path)) else "labels"
    names = [k for k in dd if k != "errors"]
    if split is None and len(names) != 1:
        raise ConfigError(f"the dataset has splits {', '.join(names)}: name one (split=..., --split)")
    split = split or names[0]
    if split not in dd:
        raise ConfigError(f"no split {split!r}; the dataset has: {', '.join(names)}")
    d = dd[split]
    assert label is not None
    if label not in d.column_names:
        raise ConfigError(f"no column {label!r} (label) in split {split!r}; it has: {', '.join(d.column_names)}")
    column = _column(dd, score, use_expected, {split})
    out = Joined(score=score, column=column)
    out.keys = [(split, i) for i in range(len(d))]
    out.scores, out.labels = list(d[column]), list(d[label])
    return out, label


def _column(dd: DatasetDict, score: str, use_expected: bool | None, splits: set[str]) -> str:
    # a score that is no column is named as such first, also where no label names a split (an empty file)
    for s in splits or {k for k in dd if k != "errors"}:
        if s in dd and score not in dd[s].column_names:
            close = difflib.get_close_matches(score, dd[s].column_names, n=1)
            hint = f": did you mean {close[0]!r}?" if close else f"; it has: {', '.join(dd[s].column_names)}"
            raise ConfigError(f"no score column {score!r} in the result{hint}")
    expected = f"{score}_expected"
    has = all(s in dd and expected in dd[s].column_names for s in splits) and bool(splits)
    if use_expected and not has:
        raise ConfigError(f"no column {expected!r}: run the metric with logprobs=True (--logprobs), or leave it out")
    if use_expected is False or not has:
        if not all(s not in dd or score in dd[s].column_names for s in splits):
            raise ConfigError(f"no score column {score!r} in the result")
        return score
    if use_expected is None and any(None in dd[s][expected] and score in dd[s].column_names for s in splits):
        return score  # some replies came without log-probabilities: one scale for every row
    return expected


def _from_records(records: list[dict[str, Any]], score: str, use_expected: bool | None) -> Joined:
    records = labels_for([r for r in records if r.get("label") is not None], score)
    expected = f"{score}_expected"
    has = bool(records) and all(r.get(expected) is not None for r in records)
    column = expected if (use_expected or (use_expected is None and has)) else score
    if not records or any(column not in r for r in records):
        raise ConfigError(
            f"the labels hold no {column!r} value: give the scored result too (calibrate(scored, labels=...), "
            "hf-judge calibrate RESULT --labels FILE)"
        )
    out = Joined(score=score, column=column)
    out.keys = [(r["split"], r["row"]) for r in records]
    out.scores, out.labels = [r[column] for r in records], [r["label"] for r in records]
    return out


def _arrays(
    joined: Joined, kind: str | None, positive: Any, label_threshold: float | None = None
) -> tuple[np.ndarray, np.ndarray, str, int]:
    keep = [
        i
        for i, (s, lab) in enumerate(zip(joined.scores, joined.labels, strict=True))
        if s is not None and lab is not None and not (isinstance(s, float) and np.isnan(s))
    ]
    scores = [joined.scores[i] for i in keep]
    labels = [joined.labels[i] for i in keep]
    if any(isinstance(s, (str, bool)) for s in scores):
        raise ConfigError(f"column {joined.column!r} is not a numeric score: calibrate a 1-N score or an _expected")
    x = np.asarray(scores, dtype=np.float64)
    if label_threshold is not None:
        return x, _passed(labels, label_threshold, positive, kind), "binary", len(joined.scores) - len(keep)
    if kind is None:
        kind = "binary" if positive is not None or all(isinstance(v, bool) for v in labels) else "numeric"
    if kind == "binary":
        y = np.array([_positive(v, positive) for v in labels], dtype=np.float64)
    elif kind == "numeric":
        try:
            y = np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError(
                f"labels {sorted({str(v) for v in labels})[:5]} are not numbers: for verdicts give true/false "
                "labels, or name the positive value (positive=..., --positive)"
            ) from None
    else:
        raise ConfigError(f"kind must be binary or numeric, got {kind!r}")
    return x, y, kind, len(joined.scores) - len(keep)


def _passed(labels: list[Any], threshold: float, positive: Any, kind: str | None) -> np.ndarray:
    """Numeric labels as 0/1: 1 where the label is >= ``threshold``."""
    if positive is not None or kind == "numeric":
        raise ConfigError(
            "label_threshold makes the labels true/false: leave out positive= (--positive) and kind='numeric'"
        )
    if any(isinstance(v, (bool, str)) for v in labels):
        raise ConfigError(
            f"label_threshold needs numeric labels (e.g. 1-5 ratings); these are {sorted({str(v) for v in labels})[:5]}"
        )
    y = np.asarray(labels, dtype=np.float64) >= threshold
    if y.all() or not y.any():
        raise ConfigError(
            f"every label is {'at or above' if y.all() else 'below'} {threshold:g}: no pass/fail to calibrate on; "
            "choose a threshold inside the labels' range"
        )
    return y.astype(np.float64)


def _positive(v: Any, positive: Any) -> bool:
    if positive is not None:
        return str(v).lower() == str(positive).lower()
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    word = str(v).strip().lower()
    if word in ("true", "yes", "1"):
        return True
    if word in ("false", "no", "0"):
        return False
    raise ConfigError(f"label {v!r} is not true/false: name the positive value (positive=..., --positive)")
