"""Where a command's result goes: a folder (``--output-dir``, by default named after the input) and/or a Hub repo
(``--push-to-hub``), checked before any work and written once the work is done."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..constants import default_cache_dir
from ..errors import PushInterrupted


def default_output_dir(dataset: str, suffix: str = "judged") -> str:
    """``data.jsonl`` (or ``data.jsonl.gz``) -> ``data-judged``; ``data-judged`` -> ``data-filtered`` (not
    ``data-judged-filtered``).

    Example:
        >>> default_output_dir("me/gsm8k-judged", "filtered")
        'me__gsm8k-filtered'
    """
    from .inputs import file_stem

    stem = file_stem(Path(dataset.rstrip("/"))) if Path(dataset).exists() else dataset.replace("/", "__")
    if suffix != "judged" and stem.endswith("-judged"):
        stem = stem[: -len("-judged")]
    return f"{stem}-{suffix}"


def filtered_name(target: str) -> str:
    """Where a recipe's filters save (or push) beside the scored result: ``out`` -> ``out-filtered``."""
    return target.rstrip("/") + "-filtered"


def check_repo(repo: str, filtered: bool = False) -> None:
    """--push-to-hub REPO (and REPO-filtered, where a recipe's filters push there too), checked before any work."""
    from ..results.hub import check_repo_id

    check_repo_id(repo, "--push-to-hub")
    if filtered:
        check_repo_id(filtered_name(repo), "--push-to-hub (its filtered copy)")


def _rows(dd) -> str:
    from ..engine.stream import ScoredIterableDatasetDict

    if isinstance(dd, ScoredIterableDatasetDict):  # rows known once read
        return ", ".join(f"{k}: {n:,} rows" for k, (n, _) in dd.rows_and_columns().items() if k != "errors")
    return ", ".join(f"{k}: {len(v):,} rows" for k, v in dd.items() if k != "errors")


def write_result(
    result,
    args: argparse.Namespace,
    out: str | None,
    repo: str | None,
    *,
    source: str,
    kind: str,
    summary=None,
    filters: dict | None = None,
) -> list[str]:
    """Push to ``repo`` and/or save to ``out`` (never over a different result, see output.py).

    Returns the lines to print once every progress bar is done.
    """
    from ..engine.stream import ScoredIterableDatasetDict
    from ..results.hub import push_scored
    from ..results.output import save_result
    from ..results.scored import ScoredDatasetDict

    summary = summary if summary is not None else getattr(result, "summary", None)
    if isinstance(result, ScoredIterableDatasetDict):
        return _write_stream(result, args, out, repo, source=source, kind=kind, filters=filters)
    done = []
    if out:
        # ScoredDatasetDict's save: summary.json beside the data (what a later filter or push puts in the card),
        # and no `0 examples` bar for an empty errors split
        saved = ScoredDatasetDict(result)
        saved.summary = summary
        save_result(saved, out, source=source, kind=kind, overwrite=args.overwrite, filters=filters)
        pictures = _save_pictures(result, out, summary)
        done += [f"saved to {out} ({_rows(result)})", _pictures_line(pictures, Path(out, "plots"))]
        done += _save_report(saved, out, summary, _store_dir(args, summary))
    if repo:
        with _kept_when_interrupted(args, out):
            url = push_scored(
                result, repo, private=args.private, token=args.token, summary=summary, agreement=args.agreement
            )
        done.append(f"pushed to {url} ({_rows(result)})")
    return done


def _write_stream(result, args: argparse.Namespace, out, repo, *, source: str, kind: str, filters) -> list[str]:
    """--streaming: each split is read (scored) once, by the save."""
    from ..results.card import PLOTS_DIR
    from ..results.hub_folder import push_folder
    from ..results.output import save_result

    done = []
    result.agreement = list(getattr(args, "agreement", None) or [])
    page = None
    if out:
        save_result(result, out, source=source, kind=kind, overwrite=args.overwrite, filters=filters)
        plots = Path(out, PLOTS_DIR)
        pictures = sorted(plots.rglob("*.png")) if plots.is_dir() else None
        done += [f"saved to {out} ({_rows(result)})", _pictures_line(pictures, plots)]
        # the page from the saved folder, as `hf-judge view` makes it; the push uploads the same page
        lines, page = _stream_report(args, out, repo)
        done += lines
    if repo and out and result.stopped is not None:  # read to its end by the save: a budget stopped it
        done.append(f"{'not pushed':<15}{repo}: an incomplete result is not published")
        repo = None
    if repo:
        with _kept_when_interrupted(args, out):
            if out:  # the folder just written, not a second reading of the input
                url = push_folder(
                    out, repo, private=args.private, token=args.token, page=page, agreement=result.agreement
                )
            else:  # the page is kept as the rows pass into the push
                url = result.push_to_hub(repo, private=args.private, token=args.token)
        done.append(f"pushed to {url} ({_rows(result)})")
    return done


@contextlib.contextmanager
def _kept_when_interrupted(args: argparse.Namespace, out: str | None) -> Iterator[None]:
    """A push stopped by Ctrl-C: its message says what reached the repo, and this adds where the result is kept."""
    try:
        yield
    except PushInterrupted as e:
        if out:
            kept = f"The scored result is saved in {out}"
            kept += "" if getattr(args, "no_cache", False) else " and every reply in the reply cache"
        elif not getattr(args, "no_cache", False):
            kept = "Every reply is saved in the reply cache"
        else:
            raise PushInterrupted(f"{e}. The cache is off (--no-cache): the scores were not kept.") from None
        raise PushInterrupted(
            f"{e}. {kept}: nothing paid for is lost; the same command again (with the right --push-to-hub) "
            "sends no request for a stored reply."
        ) from None


def _stream_report(args: argparse.Namespace, out: str, repo: str | None) -> tuple[list[str], bytes | None]:
    """A streamed run's page, from the folder it saved (as `hf-judge view` makes it), and the same page naming the
    Hub repo ``repo`` for the push. A folder that cannot be read back is a warning: the result is saved, and
    ``hf-judge view`` says what is wrong."""
    import logging

    from ..results.report import REPORT_FILE, for_source, render_page
    from ..results.report_stream import folder_page
    from ..results.summary import RunSummary

    path = Path(out, REPORT_FILE)
    try:
        summary = RunSummary.load(out)
        store = _store_dir(args, summary)
        # read from the Parquet shards, batch by batch: no Arrow cache of the folder is written
        data = folder_page(out, summary=summary, source=out, cache=(store, None) if store is not None else None)
        path.write_text(render_page(data), encoding="utf-8")
    except Exception as e:  # noqa: BLE001 - the result is saved already; the page is not worth failing the run for
        logging.getLogger("hf_judge").warning("the report page could not be written (%s: %s)", type(e).__name__, e)
        return [], None
    page = render_page(for_source(data, repo)).encode() if repo else None
    return [f"{'report':<15}{path}: open it in a browser (one file, no server)"], page


def _save_pictures(result, out: str, summary) -> list[Path] | None:
    """Each score column's distribution as a PNG in ``out/plots/<split>/``, when the plots extra is installed;
    returns the files written (None: no plots extra)."""
    from ..results import plots
    from ..results.card import PLOTS_DIR, picture_files

    if not plots.available():
        return None
    written = []
    for path, png in picture_files(result, summary).items():
        target = Path(out, "plots", path.removeprefix(f"{PLOTS_DIR}/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(png)
        written.append(target)
    return written


def _pictures_line(pictures: list[Path] | None, folder: Path) -> str:
    """Where the run's pictures went, and how many: a run never writes files it does not mention."""
    from ..results.plots import INSTALL_HINT

    if pictures is None:
        return f"{'plots':<15}none drawn: {INSTALL_HINT} draws each score's distribution as a PNG"
    if not pictures:
        return f"{'plots':<15}none (no score column with values)"
    kinds = ["score distributions"]
    if any(p.parent.name == "all_judgments" for p in pictures):
        kinds.append("every judgment")
    if any(p.parent.name == "agreement" for p in pictures):
        kinds.append("judges' agreement")
    return f"{'plots':<15}{len(pictures)} PNG{'s' if len(pictures) != 1 else ''} in {folder}/ ({', '.join(kinds)})"


def show_overview(
    result, summary, out: str | None, repo: str | None, *, terminal: bool, parquet: bool = False
) -> list[str]:
    """The end-of-run overview's lines (hf_judge.results.overview): read from the saved folder for a streamed
    result (its rows were read once, by the save), from the result itself otherwise. ``parquet``: ``out`` holds
    Parquet by split (Spark's writer), which ``load_from_disk`` cannot read: the errors command uses
    ``hf_judge.load_result``."""
    from ..engine.stream import ScoredIterableDatasetDict
    from ..results.overview import errors_command, folder_overview, overview

    if isinstance(result, ScoredIterableDatasetDict):
        if not out:  # pushed only: the rows are gone; the card on the Hub shows the scores
            return []
        ov = folder_overview(out, summary)
    else:
        ov = overview(result, summary, saved_to=out, repo=repo)
        if parquet and out:
            ov.errors_command = errors_command(out, streamed=True)
    return ov.lines(terminal=terminal)


def _store_dir(args: argparse.Namespace, summary) -> Path | None:
    """The local cache folder whose reply store holds a logprobs run's distributions and a pairwise judge's two
    orders, for its page; None for a run without the cache, or whose cache is on object storage (``hf-judge view
    --cache-dir`` reads a local copy)."""
    from ..results.report_logprobs import STORE_FILE

    if summary is None or getattr(args, "no_cache", False):
        return None
    given = getattr(args, "cache_dir", None)
    if given and "://" in str(given):
        return None
    root = Path(given) if given else default_cache_dir()
    return root if (root / STORE_FILE).is_file() else None


def _save_report(result, out: str, summary=None, cache_dir: Path | None = None) -> list[str]:
    """The report page beside the saved result (``out/report.html``), and the line that says how to open it. A page
    that cannot be made is a warning: the result is saved, and ``hf-judge view`` says what is wrong."""
    import logging

    from ..results.report import REPORT_FILE, write_report

    path = Path(out, REPORT_FILE)
    try:
        write_report(result, path, source=out, summary=summary, cache_dir=cache_dir)
    except Exception as e:  # noqa: BLE001 - the result is saved already; the page is not worth failing the run for
        logging.getLogger("hf_judge").warning("the report page could not be written (%s: %s)", type(e).__name__, e)
        return []
    return [f"{'report':<15}{path}: open it in a browser (one file, no server)"]
