"""``hf-judge cache compact URL``: merge the segments of a reply store on object storage into one."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError

CACHE_EXAMPLE = """example:
  hf-judge cache compact s3://my-bucket/hf_judge
  hf-judge cache compact s3://my-bucket/hf_judge --storage-option client_kwargs.endpoint_url=http://minio:9000
"""


def add_cache(sub: Any, settings: bool) -> None:  # noqa: ARG001 - no request is sent
    """The ``cache`` command's parser."""
    p = sub.add_parser(
        "cache",
        help="maintain a reply cache on object storage (compact its segments)",
        description="Maintain a reply cache whose --cache-dir is on object storage (s3://, gs://, az://, file://).",
        epilog=CACHE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True, help="what to do")
    c = actions.add_parser(
        "compact",
        help="merge the published segments into one (safe while runs go on)",
        description="Merge the segments that runs published under URL/segments into one: the merged segment is "
        "written first, then its inputs deleted, so runs going on lose nothing.",
        epilog=CACHE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("url", help="the --cache-dir URL, e.g. s3://my-bucket/hf_judge")
    c.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="an fsspec storage option (a credential as env:NAME: secret=env:AWS_SECRET_ACCESS_KEY)",
    )
    c.set_defaults(func=cmd_compact)


def cmd_compact(args: argparse.Namespace) -> int:
    """hf-judge cache compact URL."""
    from ..store.segments import Remote, compact, is_url, parse_storage_options

    if not is_url(args.url):
        raise ConfigError(
            f"{args.url!r} is not a URL: compaction is for a --cache-dir on object storage (s3://bucket/prefix); "
            "a local cache has no segments"
        )
    merged, replies = compact(Remote.of(args.url, parse_storage_options(args.storage_option)))
    if merged:
        print(f"merged {merged:,} segments into one of {replies:,} replies")
    else:
        print("nothing to compact: fewer than two segments")
    return 0
