"""The ``kubelet`` command: flags and config file in, the agent run, an exit code out."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .config import ConfigError, build_options, parse_flags
from .version import version_output


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kubelet; 1 when the configuration is unusable, 0 after ``--help``/``--version``."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["pods"]:
        return _pods(args[1:])
    if args[:1] == ["debug"]:
        from kubelet.debug import main as debug

        return debug(args[1:])
    try:
        flags = parse_flags(args)
        if flags.version:
            print(version_output(flags.version))
            return 0
        options = build_options(flags)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"kubelet: {problem}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0

    _without_httpx_command_line()
    from kubelet import agent

    return int(agent.start(options))


def _without_httpx_command_line() -> None:
    """Keep httpx from importing its command-line client: with click, rich and pygments
    installed, ``import httpx`` loads them all (about 6 MiB of the kubelet's memory) for a
    ``main`` the kubelet never calls; httpx falls back to a stub when the import fails."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def _pods(args: list[str]) -> int:
    """``kubelet pods [flags]``: list the pods the runtime holds (flags as for the agent)."""
    try:
        options = build_options(parse_flags(args))
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"kubelet: {problem}", file=sys.stderr)
        return 1
    from kubelet import podlist

    return podlist.main(options.config.container_runtime_endpoint)


if __name__ == "__main__":
    sys.exit(main())
