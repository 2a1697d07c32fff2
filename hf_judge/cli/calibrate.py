"""``hf-judge calibrate``: fit a judge's score to human labels (isotonic), with its calibration error, a
reliability picture and a cross-validated threshold; saved as ``calibration.json``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .options import REVISION_HELP, SUBSET_HELP, TOKEN_HELP, score_from_labels

CALIBRATE_EXAMPLE = """examples:
  hf-judge calibrate out/ --score QA_Correctness --labels labels.jsonl            # writes out/calibration.json
  hf-judge calibrate out/ --score QA_Correctness --label human_ok --target-precision 0.9
  hf-judge calibrate out/ --score QA_Correctness --labels ratings.jsonl --label-threshold 4   # 1-5 ratings: 4+ pass
  hf-judge calibrate me/gsm8k-judged --score QA_Correctness --labels labels.csv --push-to-hub me/gsm8k-judged
  hf-judge filter out/ --min-prob QA_Correctness=0.8 --calibration out/calibration.json

True/false labels: P(label is positive) per judge score, the expected calibration error, a threshold (max F1,
or the lowest reaching --target-precision) with its cross-validated precision and recall. Numeric labels: the
expected human score per judge score. The judge's _expected column is read where the run had --logprobs.
"""


def add_source_options(p: argparse.ArgumentParser) -> None:
    """The scored result's options that ``calibrate`` and ``sample-for-review`` share."""
    p.add_argument("dataset", help="the scored result: the folder hf-judge score saved, a Hub repo id or a data file")
    p.add_argument("--split", help="the split (needed when the result has several)")
    p.add_argument("--subset", help=SUBSET_HELP)
    p.add_argument("--revision", help=REVISION_HELP)
    p.add_argument("--token", help=TOKEN_HELP)


def add_calibrate(sub: Any, settings: bool) -> None:  # noqa: ARG001 - calibrate sends no request
    """The ``calibrate`` command's parser."""
    p = sub.add_parser(
        "calibrate",
        help="fit a judge's scores to human labels (calibration.json)",
        description="Fit an isotonic map from a judge's score to human labels; report its calibration error, a "
        "reliability table (PNG with the plots extra) and a cross-validated threshold.",
        epilog=CALIBRATE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(p)
    p.add_argument(
        "--score",
        help="the judge's score column (its _expected is read when present; default with --labels: the score the "
        "file's rows name)",
    )
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--label", help="a column of the result holding the labels")
    given.add_argument(
        "--labels",
        metavar="FILE",
        help="a labels file (JSONL or CSV: split, row, label; the docs' tutorials/trusting-a-judge, the labels "
        "layout), or labels on the Hub: a dataset id (what sample-for-review --push-to-hub wrote, labels filled in) "
        "or hf://datasets/OWNER/NAME/FILE",
    )
    p.add_argument("--kind", choices=["binary", "numeric"], help="default: binary for true/false labels")
    p.add_argument("--positive", help="the label value counted as positive (makes the labels binary)")
    p.add_argument(
        "--label-threshold",
        type=float,
        metavar="T",
        help="numeric labels (e.g. 1-5 ratings) as pass/fail: label >= T is positive; the map gives P(label >= T)",
    )
    p.add_argument("--no-expected", action="store_true", help="read the score itself, not its _expected column")
    p.add_argument("--target-precision", type=float, help="choose the lowest threshold with this precision (0-1)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("--seed", type=int, default=0, help="the folds' seed: same seed, same figures (default 0)")
    p.add_argument("--bins", type=int, default=10, help="equal-width bins of the calibration error (default 10)")
    p.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="where to save calibration.json (default: in the result folder, one file per score: "
        "calibration.json, then calibration_<score>.json; else here)",
    )
    p.add_argument("--plots", metavar="DIR", help='save the reliability PNG here (needs pip install "hf-judge[plots]")')
    p.add_argument("--push-to-hub", metavar="REPO", help="upload calibration.json to REPO's hf_judge/ folder")
    p.set_defaults(func=cmd_calibrate)


def load_result(args: argparse.Namespace):
    """The scored result named by DATASET (one split when --split)."""
    from .inputs import load_input

    return load_input(
        args.dataset,
        subset=args.subset,
        splits=[args.split] if args.split else None,
        revision=args.revision,
        token=args.token,
    )


def cmd_calibrate(args: argparse.Namespace) -> int:
    """hf-judge calibrate RESULT --score COL (--label COL | --labels FILE) [-o calibration.json]."""
    from ..analysis.calibration import FILE_NAME, calibrate
    from ..results import plots
    from ..results.hub import check_repo_id

    if args.plots:
        plots.require()
    if args.push_to_hub:
        check_repo_id(args.push_to_hub, "--push-to-hub")
    score_from_labels(args)
    cal = calibrate(
        load_result(args),
        args.score,
        args.label,
        labels=args.labels,
        split=args.split,
        positive=args.positive,
        kind=args.kind,
        use_expected=False if args.no_expected else None,
        folds=args.folds,
        seed=args.seed,
        bins=args.bins,
        target_precision=args.target_precision,
        token=args.token,
        label_threshold=args.label_threshold,
    )
    if cal.judge is None:  # bound to the judge that scored the result (its summary.json), as applying it checks
        from ..analysis.calibration import judge_of
        from .inputs import input_summary

        cal.judge = judge_of(input_summary(args.dataset, revision=args.revision, token=args.token), cal.score)
    print(cal)
    local = Path(args.dataset)
    done = []
    if args.out:
        out = Path(args.out)
    elif local.is_dir():
        out, note = folder_file(local, cal.score)
        done += note
    else:
        out = Path(FILE_NAME)
    path = cal.save(out)
    done.insert(0, f"saved to {path}" + (" (WARNING: labels of one class, see above)" if cal.warning else ""))
    if local.is_dir() and path.parent.resolve() == local.resolve():
        done += _record(local, cal, path.name)
    png = None
    folder = Path(args.plots) if args.plots else path.parent if plots.available() else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        png = plots.reliability_png(cal)
        picture = folder / f"{plots.file_name(cal.score)}_reliability.png"
        picture.write_bytes(png)
        done.append(f"reliability picture in {picture}")
    if args.push_to_hub:
        from ..results.hub import push_calibration

        done.append(f"uploaded to {push_calibration(cal, args.push_to_hub, token=args.token, png=png)}")
    print("", *done, sep="\n")
    return 0


def folder_file(folder: Path, score: str) -> tuple[Path, list[str]]:
    """Where a calibration of ``score`` goes in a result folder: ``calibration.json``, unless that holds another
    score's, which stays (a folder keeps one calibration per score): then ``calibration_<score>.json``.

    Example:
        >>> folder_file(Path("out"), "QA_Clarity")  # doctest: +SKIP
        (PosixPath('out/calibration_QA_Clarity.json'), ['calibration.json holds another score...'])
    """
    from ..analysis.calibration import FILE_NAME
    from ..results.calibrated import folder_calibrations
    from ..results.plots import file_name

    first = folder / FILE_NAME
    held = {cal.score: path for path, cal in folder_calibrations(folder)}
    if score in held:
        return held[score], []
    if not first.exists():
        return first, []
    other = folder / f"calibration_{file_name(score)}.json"
    return other, [f"{FILE_NAME} holds another score's calibration, kept: this one is {other.name}"]


def _record(folder: Path, cal, file: str) -> list[str]:
    """Record the calibration in the result folder's ``summary.json`` (what its card shows once pushed)."""
    from ..results.calibrated import with_calibrations
    from ..results.calibration_card import calibration_card, merge_calibration_card
    from ..results.card import END
    from ..results.summary import RunSummary

    summary = with_calibrations(RunSummary.load(folder), [cal], file)
    if summary is None:  # not a folder hf-judge saved: no summary to record it in
        return []
    done = [f"recorded in {summary.save(folder)} (the card shows it once the result is pushed)"]
    card = folder / "README.md"
    if card.is_file() and END in (text := card.read_text(encoding="utf-8")):  # a streamed folder's own card
        card.write_text(merge_calibration_card(text, calibration_card(summary.calibration), END), encoding="utf-8")
        done.append(f"and in its card {card}")
    return done
