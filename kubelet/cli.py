"""The ``kubelet`` command line."""

from __future__ import annotations

import argparse
import sys

from .version import version_line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet",
        description="A Kubernetes node agent written as one Trio structured-concurrency program.",
    )
    parser.add_argument(
        "--version", action="store_true", help="print version information and quit"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        print(version_line())
        return 0
    print(
        "kubelet: the pod lifecycle is not built yet; use --version, or "
        "`python -m kubelet.cri version|status|pods|ps` to talk to the runtime",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
