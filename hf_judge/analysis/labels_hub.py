"""Labels kept on the Hub: a dataset id (``me/to-label``) or a file in one (``hf://datasets/me/to-label/x.jsonl``).

``hf-judge sample-for-review --push-to-hub`` writes the rows to label as a Hub dataset (Parquet); a team fills
the labels in there (or uploads a JSONL/CSV), and ``calibrate`` / ``agreement --labels`` read them back with
the user's token, with no download by hand. This module only fetches: it gives each file's text (JSONL, CSV)
or rows (Parquet), and :func:`hf_judge.analysis.labels.read_labels` checks them as it checks a local file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..progress import LIBRARY_CHATTER, quiet
from ..redact import register, scrub

HF_PREFIX = "hf://datasets/"
# the files a labels dataset may hold its rows in; anything else (README.md, .gitattributes) is not labels
LABEL_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
# owner/name, as huggingface_hub's validate_repo_id allows them (a data-file suffix makes it a local name)
_REPO_ID = re.compile(r"^[\w.\-]{1,96}/[\w.\-]{1,96}$")


@dataclass(frozen=True)
class HubLabels:
    """Where labels lie on the Hub: ``repo`` (owner/name), ``revision`` (None: main) and ``path`` (one file of
    the repo; None: every labels file of it, ``hf_judge/`` left out)."""

    repo: str
    revision: str | None = None
    path: str | None = None

    @property
    def name(self) -> str:
        """How the labels are named in a report or a card: ``me/to-label`` or ``hf://datasets/me/x@v1/l.jsonl``."""
        if self.path is None and self.revision is None:
            return self.repo
        at = f"@{self.revision}" if self.revision else ""
        return f"{HF_PREFIX}{self.repo}{at}" + (f"/{self.path}" if self.path else "")


def hub_labels(source: str) -> HubLabels | None:
    """Where ``source`` names labels on the Hub, or None where it can only be a local path.

    ``hf://datasets/OWNER/NAME[@REVISION][/PATH]``, or ``OWNER/NAME`` (one slash, no data-file suffix: a
    mistyped ``labels.jsonl`` stays a local name).

    Example:
        >>> hub_labels("me/to-label"), hub_labels("labels.jsonl"), hub_labels("out/labels.jsonl")
        (HubLabels(repo='me/to-label', revision=None, path=None), None, None)
        >>> hub_labels("hf://datasets/me/to-label@v2/labels.csv")
        HubLabels(repo='me/to-label', revision='v2', path='labels.csv')
    """
    if source.startswith(HF_PREFIX):
        rest = source.removeprefix(HF_PREFIX).strip("/")
        parts = rest.split("/", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ConfigError(f"{source!r}: name a dataset, e.g. hf://datasets/me/to-label or .../labels.jsonl")
        name, _, revision = parts[1].partition("@")
        return HubLabels(f"{parts[0]}/{name}", revision or None, parts[2] if len(parts) > 2 else None)
    if _REPO_ID.match(source) and not source.lower().endswith(LABEL_SUFFIXES):
        return HubLabels(source)
    return None


def fetch_hub_labels(where: HubLabels, token: str | None = None) -> list[tuple[str, str | list[dict[str, Any]]]]:
    """The labels files of ``where``, each as (its name, its text) for JSONL and CSV, or (its name, its rows) for
    Parquet, in path order. ``token``: the user's Hub token (None: huggingface_hub's own, ``HF_TOKEN`` or the
    login); it goes in the requests only, never in a name or a message. A repo, revision or file the Hub does
    not give is a ConfigError naming it.

    Example:
        >>> fetch_hub_labels(HubLabels("me/to-label"))  # doctest: +SKIP
        [('hf://datasets/me/to-label/data/train-00000-of-00001.parquet', [{'split': 'train', 'row': 3, ...}])]
    """
    from huggingface_hub import HfApi, hf_hub_download

    register(token)  # an error quoting the request must not show it
    down = _unreachable()
    if down:
        raise ConfigError(
            f"the Hub dataset {where.name} cannot be read: the Hub cannot be reached ({scrub(down)}); download the "
            "labels and give the file"
        )
    try:
        with quiet(*LIBRARY_CHATTER):
            if where.path is not None:
                paths = [where.path]
            else:
                files = HfApi(token=token).list_repo_files(where.repo, repo_type="dataset", revision=where.revision)
                paths = sorted(f for f in files if f.lower().endswith(LABEL_SUFFIXES) and not f.startswith("hf_judge/"))
            if not paths:
                raise ConfigError(
                    f"the Hub dataset {where.name} holds no labels file ({', '.join(LABEL_SUFFIXES)}): push the rows "
                    "with hf-judge sample-for-review --push-to-hub, or upload a labels JSONL/CSV there"
                )
            local = [
                hf_hub_download(where.repo, p, repo_type="dataset", revision=where.revision, token=token) for p in paths
            ]
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - not found, gated, unauthorised, offline, unreachable: one clear line
        raise ConfigError(
            f"the Hub dataset {where.name} cannot be read ({scrub(_why(e))}); check the name, the revision "
            "and your token (--token, HF_TOKEN or hf auth login)"
        ) from None
    out: list[tuple[str, str | list[dict[str, Any]]]] = []
    for p, file in zip(paths, local, strict=True):
        name = HubLabels(where.repo, where.revision, p).name
        if p.lower().endswith(".parquet"):
            import pyarrow.parquet as pq

            out.append((name, pq.read_table(file).to_pylist()))
        else:
            out.append((name, Path(file).read_text(encoding="utf-8")))
    return out


def _unreachable() -> str | None:
    """Why the Hub cannot be reached, from one request without retries (huggingface_hub retries a refused
    connection for ~23 s); None when it answers anything, or under HF_HUB_OFFLINE (its cache answers then)."""
    from huggingface_hub import constants, get_session

    if constants.HF_HUB_OFFLINE:
        return None
    try:
        get_session().head(f"{constants.ENDPOINT}/", timeout=10)
    except Exception as e:  # noqa: BLE001 - refused, DNS, timeout, proxy, TLS: each means "cannot reach it"
        return _why(e)
    return None


def _why(e: BaseException) -> str:
    """An error's kind and its first line (huggingface_hub's messages go on with the request's details)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__
