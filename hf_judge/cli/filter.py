"""``hf-judge filter``: keep the rows whose scores pass thresholds; the card keeps how the scores were made."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .options import add_input_options, add_output_options, group_values, kv, threshold
from .save import check_repo, default_output_dir, write_result

FILTER_EXAMPLE = """examples:
  hf-judge filter me/gsm8k-judged --min QA_Correctness=8 --push-to-hub me/gsm8k-best
  hf-judge filter out/ --min Q_Clarity=6 --max Q_Complexity=9 --output-dir best/
  hf-judge filter out/ --min Binary=true          # a true/false score: true keeps the true rows (--max X=false: false)
  hf-judge filter out/ --min-prob QA_Correctness=0.8 --calibration out/calibration.json   # see hf-judge calibrate
  hf-judge filter out/ --calibration out/calibration.json -o out-calibrated/   # every row, + QA_Correctness_calibrated
  hf-judge filter out/ --drop-group source=forum,scraped -o out-curated/   # the worst sources out (see --by)
"""


_VERDICTS = {"true": True, "false": False}


def score_threshold(text: str) -> tuple[str, float | bool]:
    """``COLUMN=V``: a finite number, or true/false for a true/false score (``--min Binary=true``)."""
    key, value = kv(text)
    verdict = _VERDICTS.get(value.strip().lower())
    if verdict is not None:
        return key, verdict
    try:
        return threshold(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (nor true/false, for a true/false score)") from None


def add_filter(sub: Any, settings: bool) -> None:  # noqa: ARG001 - filter sends no request
    """The ``filter`` command's parser."""
    p = sub.add_parser(
        "filter",
        help="keep rows whose scores pass thresholds",
        description="Filter DATASET by score thresholds (inclusive); the card keeps how the scores were made.",
        epilog=FILTER_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", help="a scored Hub repo id or the folder hf-judge score saved")
    add_input_options(p)
    p.add_argument(
        "--min",
        action="append",
        type=score_threshold,
        default=[],
        metavar="COLUMN=V",
        help="keep COLUMN >= V (repeatable); for a true/false score, --min COLUMN=true keeps the true rows",
    )
    p.add_argument(
        "--max",
        action="append",
        type=score_threshold,
        default=[],
        metavar="COLUMN=V",
        help="keep COLUMN <= V (repeatable); for a true/false score, --max COLUMN=false keeps the false rows",
    )
    p.add_argument(
        "--min-prob",
        action="append",
        type=threshold,
        default=[],
        metavar="COLUMN=P",
        help="keep rows whose calibrated probability is >= P (needs --calibration; repeatable)",
    )
    p.add_argument(
        "--calibration",
        action="append",
        metavar="FILE",
        help="calibration.json of hf-judge calibrate: adds <score>_calibrated (repeatable; with --min-prob, "
        "default: the result folder's, one per score: calibration.json, calibration_<score>.json)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="apply a calibration fitted on another judge, prompt or metric parameters than the result's (refused "
        "without it); the summary and card record it",
    )
    p.add_argument("--keep-missing", action="store_true", help="keep rows whose score is null")
    p.add_argument(
        "--keep-group",
        action="append",
        type=group_values,
        default=[],
        metavar="COLUMN=V[,V...]",
        help="keep only the rows whose COLUMN is one of these values, as the scores by group name them "
        "(score/view --by); repeatable",
    )
    p.add_argument(
        "--drop-group",
        action="append",
        type=group_values,
        default=[],
        metavar="COLUMN=V[,V...]",
        help="drop the rows whose COLUMN is one of these values (repeatable)",
    )
    add_output_options(p, "<name>-filtered")
    p.set_defaults(func=cmd_filter)


def _check_judges(args: argparse.Namespace, stored: Any) -> dict[str, str | None]:
    """Each calibration checked against the result's judge (summary.json): another judge's is refused unless
    --force; score -> the mismatch a forced one records."""
    if not args.calibration:
        return {}
    from ..results.calibrated import as_calibrations, check_judge

    return {c.score: check_judge(c, stored, args.force) for c in as_calibrations(args.calibration).values()}


def cmd_filter(args: argparse.Namespace) -> int:
    """hf-judge filter DATASET --min COLUMN=V ..."""
    from ..results.filter import filter_by_scores
    from ..results.group_filter import group_rule
    from ..results.output import check_output, source_of, thresholds
    from .inputs import input_summary, load_input

    if args.push_to_hub:
        check_repo(args.push_to_hub)
    if args.min_prob and not args.calibration and Path(args.dataset).is_dir():
        # hf-judge calibrate saved them in the result folder, one per score: the ones a reader means
        from ..results.calibrated import folder_calibrations

        wanted = {k.removesuffix("_calibrated") for k, _ in args.min_prob}
        args.calibration = [str(p) for p, cal in folder_calibrations(args.dataset) if cal.score in wanted] or None
        for path in args.calibration or []:
            print(f"calibration    {path} (the result's own, saved by hf-judge calibrate)", file=sys.stderr)
    source = source_of(args.dataset, args.subset, args.revision)
    # a calibrated probability is a threshold on the <score>_calibrated column the filter adds: recorded so
    mins = {**dict(args.min), **{f"{k.removesuffix('_calibrated')}_calibrated": v for k, v in args.min_prob}}
    keep_groups, drop_groups = _groups(args.keep_group), _groups(args.drop_group)
    groups = group_rule(keep_groups, drop_groups)
    rule = thresholds(mins, dict(args.max), args.keep_missing, groups)
    out = args.output_dir or (None if args.push_to_hub else default_output_dir(args.dataset, "filtered"))
    if out:
        check_output(out, source, "filtered", None, args.overwrite, rule)
    ds = load_input(
        args.dataset, subset=args.subset, splits=args.splits, revision=args.revision, token=args.token, limit=args.limit
    )
    if "errors" not in ds and not args.splits and not Path(args.dataset).exists():
        try:
            errors = load_input(args.dataset, subset="errors", revision=args.revision, token=args.token)
            ds["errors"] = errors["errors"]
        except Exception:  # noqa: BLE001 - a repo without an errors config is fine
            pass
    before = {k: len(v) for k, v in ds.items() if k != "errors"}
    stored = input_summary(args.dataset, revision=args.revision, token=args.token)
    forced = _check_judges(args, stored)  # before any work: a calibration of another judge is refused
    out_ds = filter_by_scores(
        ds,
        min=dict(args.min),
        max=dict(args.max),
        keep_missing=args.keep_missing,
        min_prob=dict(args.min_prob),
        calibration=args.calibration,
        allow_other_judge=args.force,
        keep_groups=keep_groups,
        drop_groups=drop_groups,
    )
    kept = {k: len(out_ds[k]) for k in before}
    summary = stored.with_filter(mins, dict(args.max), args.keep_missing, before, kept, groups) if stored else None
    errors = None
    if "errors" in ds and "errors" in out_ds:  # those of the rows kept (filter_by_scores)
        errors = {"before": len(ds["errors"]), "kept": len(out_ds["errors"])}
        if summary is not None:
            summary.filters["error_rows"] = errors
    if args.calibration:  # the card and summary say what the <score>_calibrated column is, and on which labels
        from ..results.calibrated import as_calibrations, with_calibrations

        one = args.calibration[0] if len(args.calibration) == 1 else None
        summary = with_calibrations(summary, as_calibrations(args.calibration).values(), one, forced)
    done = write_result(
        out_ds, args, out, args.push_to_hub, source=source, kind="filtered", summary=summary, filters=rule
    )
    sys.stderr.flush()
    for k, n in before.items():
        print(f"{k}: kept {kept[k]:,} of {n:,} rows")
    if errors:
        print(f"errors: kept {errors['kept']:,} of {errors['before']:,} error rows (those of the rows kept)")
    print(*done, sep="\n", flush=True)
    return 0


def _groups(given: list[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """``--keep-group`` / ``--drop-group`` flags as ``keep_groups``: a column given twice gets both lists."""
    out: dict[str, list[str]] = {}
    for column, values in given:
        out.setdefault(column, []).extend(v for v in values if v not in out.get(column, []))
    return out
