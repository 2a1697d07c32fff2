"""``hf-judge view``: the report page of a result; ``hf-judge show-prompt``: the prompt one row was sent."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .options import REVISION_HELP, SUBSET_HELP, TOKEN_HELP

VIEW_EXAMPLE = """examples:
  hf-judge view example-judged/                 # writes example-judged/report.html
  hf-judge view me/gsm8k-judged -o gsm8k.html --open
  hf-judge view out/ --cache-dir ~/.cache/hf_judge      # a logprobs run: each score's distribution in the rows
  hf-judge view out/ --by subject               # each score per subject, the lowest mean first
  hf-judge view choice/                         # a choose-judge -o folder: its table, the recommended judge's rows

The page is one HTML file: no server, no network. It shows the run, the distributions, the rows (sort, search,
thresholds and the `hf-judge filter` command that keeps them; each row's reasons and the prompt it was sent), the
errors, and lets a reviewer label rows and download the labels (labels.jsonl, for `hf-judge agreement --labels`).
A split of more than 5,000 rows (or 25 million characters of text) embeds the rows a reviewer needs (extremes,
threshold neighbourhoods, disagreements, errors, a uniform sample); texts are cut at 20,000 characters. A
summary.json over 16 MB is not read; of a smaller one the page keeps 100 notes and 2 million characters in all.
"""

SHOW_PROMPT_EXAMPLE = """examples:
  hf-judge show-prompt example-judged/ --row 3 --metric QA_All
  hf-judge show-prompt me/gsm8k-judged --row 17 --metric QA_Clarity --split test --json
"""


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="the folder hf-judge saved, or a scored Hub repo id")
    p.add_argument("--subset", help=SUBSET_HELP)
    p.add_argument("--revision", help=REVISION_HELP)
    p.add_argument("--token", help=TOKEN_HELP)


def add_view(sub: Any, settings: bool) -> None:  # noqa: ARG001 - view sends no request
    """The ``view`` command's parser."""
    p = sub.add_parser(
        "view",
        help="write the report page of a result (one HTML file) to read, sort, filter and label the judgments",
        description="Write a self-contained HTML report of RESULT: overview, rows, errors, labelling.",
        epilog=VIEW_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_source(p)
    p.add_argument("--split", action="append", dest="splits", help="split to show (repeatable; default: all)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the page (default: beside the result; never over a file of it)",
    )
    p.add_argument("--open", action="store_true", help="open the page in the web browser")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="the run's cache folder (its --cache-dir; default location: HF_JUDGE_CACHE): a logprobs run's "
        "probability distribution over each score's values is read back from its reply store into the rows, and a "
        "pairwise judge's winner in each of its two orders into the overview (which way its position bias goes)",
    )
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="with --cache-dir: the judge's base URL, where it is not http(s)://HOST/v1 (HOST: summary.json's)",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="show each score by group of this column in the overview (rows, nulls, mean, median and histogram per "
        "value, the lowest mean first; default: the column summary.json records, from score --by; e.g. --by subject)",
    )
    p.set_defaults(func=cmd_view)


def add_show_prompt(sub: Any, settings: bool) -> None:  # noqa: ARG001
    """The ``show-prompt`` command's parser."""
    p = sub.add_parser(
        "show-prompt",
        help="print the prompt a row was sent for a metric, exactly as sent",
        description="Rebuild the messages RESULT's row ROW was sent for METRIC, from the recorded prompt file and "
        "column mapping (summary.json), and print them.",
        epilog=SHOW_PROMPT_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_source(p)
    p.add_argument("--row", required=True, type=int, help="the row's index in its split")
    p.add_argument("--metric", required=True, help="the metric's name (QA_All, QA_Clarity, ...)")
    p.add_argument("--split", help="the split (needed when the result has several)")
    p.add_argument("--json", action="store_true", help="print the messages as JSON (one list per request)")
    p.set_defaults(func=cmd_show_prompt)


def _load(args: argparse.Namespace, splits: list[str] | None):
    """The result's splits (with its errors) and its summary."""
    return load_result(args.result, subset=args.subset, splits=splits, revision=args.revision, token=args.token)


def load_result(
    result: str,
    *,
    subset: str | None = None,
    splits: list[str] | None = None,
    revision: str | None = None,
    token: str | None = None,
):
    """A scored result (a folder, a file, a Hub repo) as the page reads it: its splits with its ``errors`` split,
    and its summary (None where it has no summary.json).

    Example:
        >>> ds, summary = load_result("example-judged")  # doctest: +SKIP
    """
    from .inputs import load_input

    ds = load_input(result, subset=subset, splits=splits, revision=revision, token=token)
    if "errors" not in ds and not Path(result).is_file():
        try:  # a Hub result (and a streamed one's folder) keeps its errors in a config of their own
            ds["errors"] = load_input(result, subset="errors", revision=revision, token=token)["errors"]
        except Exception:  # noqa: BLE001 - a repo without an errors config is fine
            pass
    return ds, _summary(result, revision, token)


def _summary(result: str, revision: str | None, token: str | None):
    """The result's summary as the page may use it (:mod:`hf_judge.results.report_summary`), read within bounds, a
    warning printed for what was dropped; None, with a warning, for one that cannot be read at all."""
    from ..results.report_summary import read_summary
    from .inputs import summary_file

    summary, problems = read_summary(summary_file(result, revision=revision, token=token))
    for problem in problems:
        print(f"warning: {problem}", flush=True)
    return summary


def default_report_path(result: str) -> Path:
    """Where ``view`` writes by default: inside a result folder, else ``<owner>__<name>-report.html`` here.

    Example:
        >>> default_report_path("me/gsm8k-judged")
        PosixPath('me__gsm8k-judged-report.html')
    """
    from ..results.report import REPORT_FILE

    path = Path(result).expanduser()
    if path.is_dir():
        return path / REPORT_FILE
    return Path(result.replace("/", "__") + "-report.html")


def refuse_result_file(result: str, out: Path) -> None:
    """A ConfigError where writing the page to ``out`` would overwrite a file of the result itself (its data, its
    ``summary.json``, its card); its own page (``report.html`` in its folder) may be written again.

    Example:
        >>> refuse_result_file("out", Path("out/summary.json"))  # doctest: +SKIP
        Traceback (most recent call last):
        hf_judge.errors.ConfigError: -o out/summary.json is a file of the result out: ...
    """
    from ..results.report import REPORT_FILE

    source = Path(result).expanduser().resolve()
    target = out.expanduser().resolve()
    own_page = source.is_dir() and target == source / REPORT_FILE
    inside = target == source or (source.is_dir() and source in target.parents)
    if inside and not own_page and (target.exists() or target.is_symlink()):
        raise ConfigError(
            f"-o {out} is a file of the result {result}: the page would overwrite it. Write the page elsewhere "
            f"(-o report.html), or leave -o out: it goes to {default_report_path(result)}"
        )


def cmd_view(args: argparse.Namespace) -> int:
    """hf-judge view RESULT [-o report.html] [--open]."""
    from ..results.report import write_report

    splits = args.splits
    out = Path(args.output) if args.output else default_report_path(args.result)
    refuse_result_file(args.result, out)
    folder = None
    candidate = choice_candidate(args.result)
    if candidate is not None:  # a choose-judge output: the page of the recommended judge's rows, with the table
        folder, args.result = args.result, candidate
    with warnings.catch_warnings(record=True) as said:  # what the page left out: one line each, not Python's form
        warnings.simplefilter("always", UserWarning)
        streamed, summary = stream_folder_page(args, out)
        if streamed:
            path = out
        else:
            ds, summary = _load(args, splits)
            if splits and "errors" in ds:
                ds["errors"] = ds["errors"].filter(lambda e: e["split"] in splits)
            path = write_report(
                ds,
                out,
                summary=summary,
                source=args.result,
                splits=splits,
                cache_dir=args.cache_dir,
                base_url=args.base_url,
                by=args.by,
                folder=folder,
            )
    for w in said:
        if str(w.message).startswith("summary.json"):
            print(f"warning: {w.message}", flush=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    size = path.stat().st_size
    url = path.resolve().as_uri()
    print(f"report written to {path} ({size / 1e6:.1f} MB); open it in a browser: {url}", flush=True)
    if summary is None:
        print("(no summary.json with this result: the page shows no run details and no prompts)")
    if args.open:
        import webbrowser

        if not webbrowser.open(url):
            print("could not start a web browser here; open the file yourself")
    return 0


def choice_candidate(result: str) -> str | None:
    """Where ``result`` is a ``choose-judge -o`` folder (``choose_judge.json`` and a folder per candidate), the
    folder of the recommended judge (else the first candidate's there); None for any other result.

    Example:
        >>> choice_candidate("me/gsm8k-judged") is None
        True
    """
    root = Path(result).expanduser()
    path = root / "choose_judge.json"
    if not path.is_file() or (root / "dataset_dict.json").is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} cannot be read ({err}): run choose-judge -o {result} again") from None
    entries = [e for e in data.get("entries") or [] if isinstance(e, dict)]
    pick = (data.get("recommendation") or {}).get("name")
    ordered = [e for e in entries if e.get("name") == pick] + entries
    for e in ordered:
        if e.get("judge") and (root / str(e["judge"])).is_dir():
            return str(root / str(e["judge"]))
    raise ConfigError(f"{result} holds {path.name} but no candidate's folder: run choose-judge -o {result} again")


def stream_folder_page(args: argparse.Namespace, out: Path) -> tuple[bool, Any]:
    """Write the page of a streamed result's folder (``score --streaming -o DIR``) to ``out``, read from its Parquet
    shards batch by batch (no Arrow cache of the folder, memory bounded by the page, not the rows): (True, its
    summary); (False, None) where ``args.result`` is no such folder."""
    from ..results.report import render_page
    from ..results.report_stream import folder_page, stream_folder

    if stream_folder(Path(args.result).expanduser()) is None:
        return False, None
    folder = str(Path(args.result).expanduser())
    cache = (args.cache_dir, args.base_url) if args.cache_dir is not None else None
    summary = _summary(folder, None, None)  # checked as a Dataset's is
    data = folder_page(folder, summary=summary, source=args.result, splits=args.splits, cache=cache, by=args.by)
    page = render_page(data).encode("utf-8")  # before the file is opened: a page that fails leaves no empty file
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(page)
    return True, summary


def cmd_show_prompt(args: argparse.Namespace) -> int:
    """hf-judge show-prompt RESULT --row N --metric NAME [--split S]."""
    from ..results.prompts import Prompter, format_messages

    ds, summary = _load(args, [args.split] if args.split else None)
    names = [s for s in ds if s != "errors"]
    if summary is None:
        raise ConfigError(f"{args.result} has no summary.json: it records the prompts and columns; score it again")
    if len(names) > 1 and not args.split:
        raise ConfigError(f"{args.result} has several splits ({', '.join(names)}): choose one with --split")
    d = ds[args.split or names[0]]
    if not 0 <= args.row < len(d):
        raise ConfigError(f"--row {args.row}: split {args.split or names[0]!r} has rows 0 to {len(d) - 1}")
    requests = Prompter(summary, d.column_names, d.features).messages(args.metric, d[args.row])
    print(json.dumps(requests, ensure_ascii=False, indent=1) if args.json else format_messages(requests))
    return 0
