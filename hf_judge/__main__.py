"""``python -m hf_judge --config-path config.yaml``: the seed tool's entry point, unchanged.

Example:
    python -m hf_judge --config-path config.yaml
"""

from __future__ import annotations

import argparse
import sys

from .cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hf_judge",
        description="Run a seed-004 config.yaml (see `hf-judge run --help`).",
        epilog="example:\n  python -m hf_judge --config-path config.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--config-path", default="config.yaml", help="the seed's config.yaml (default: ./config.yaml)")
    ap.add_argument("--cache-dir", help="cache folder (default: $HF_DATASETS_CACHE/hf_judge)")
    args = ap.parse_args(argv)

    extra = ["--cache-dir", args.cache_dir] if args.cache_dir else []
    return cli_main(["run", args.config_path, *extra])


if __name__ == "__main__":
    sys.exit(main())
