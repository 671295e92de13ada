"""What the kubelet does to its own process at start-up, before any component runs.

Logging (format, verbosity), the warnings about settings accepted but not acted on, the
open-files limit (Go's runtime raises it, then ``maxOpenFiles``), the kubelet's own
OOM score (``oomScoreAdj``) and the allocator's arenas (``malloc``). Each is process-wide
and happens once, in ``prepare``.
"""

from __future__ import annotations

import gc
import linecache
import logging
import os
import resource
from collections.abc import Callable

from kubelet.config import Options
from kubelet.cri import trace
from kubelet.logs import get_logger, setup_logging, verbosity_level
from kubelet.malloc import limit_malloc_arenas

log = logging.getLogger("kubelet")
structured = get_logger(__name__)

NOISY_LIBRARIES = ("httpx", "httpcore", "hpack", "h2")


def prepare(options: Options) -> None:
    """Everything start-up does to the process, in upstream's order."""
    limit_malloc_arenas()
    setup_logging(options.config.logging)
    apply_open_files_limit(options.config.max_open_files)
    for noisy in NOISY_LIBRARIES:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    log_settings_warnings(options)
    apply_oom_score_adj(options.config.oom_score_adj)
    trace.enable_from_environment()  # the benchmark's timing trace; off unless asked for
    tune_garbage_collector()


GC_THRESHOLDS = (10_000, 20, 20)
"""The cyclic collector's thresholds (CPython's defaults: 700, 10, 10). A pod start
allocates thousands of short-lived objects (protobuf messages, HTTP/2 frames, Trio and
asyncio bookkeeping) of which almost none are cycles; with the defaults the collector ran
about once per pod in a 1000-pod ramp and a full collection every 125 pods, 14 % of the
kubelet's CPU. Garbage that is not a cycle is freed at once whatever these say."""


def tune_garbage_collector() -> None:
    """Move everything alive after the imports and the configuration out of the collector's
    sight (``gc.freeze``: modules, classes and settings live as long as the process) and
    raise its thresholds. ``KUBELET_GC_THRESHOLDS=a,b,c`` overrides them (benchmarks)."""
    thresholds = GC_THRESHOLDS
    if override := os.environ.get("KUBELET_GC_THRESHOLDS"):
        a, b, c = (int(x) for x in override.split(","))
        thresholds = (a, b, c)
    freeze_long_lived()
    gc.set_threshold(*thresholds)


def freeze_long_lived() -> None:
    """Free the cyclic garbage, then take every object still alive out of the collector's
    sight for good. Called before the agent starts and again once it has: the servers,
    the API client and the runtime client import their modules lazily, and a full
    collection walking them held the event loop for 25-50 ms.

    The source lines attrs and cattrs keep for the methods they generate (``linecache``,
    for tracebacks: about 20,000 lines, 1.5 MiB of a standalone kubelet) go first; a
    traceback through a generated ``__init__`` then names it without its source line."""
    linecache.clearcache()
    gc.collect()
    gc.freeze()


def log_settings_warnings(options: Options) -> None:
    """Upstream's gate warnings and the one line naming what is accepted but not acted on;
    at -v=1 one line more per setting named, saying what is missing."""
    for warning in options.warnings:
        log.warning("%s", warning)
    for line in options.details:
        log.log(verbosity_level(1), "%s", line)


OOM_SCORE_ADJ = "/proc/self/oom_score_adj"


def apply_oom_score_adj(value: int, path: str = OOM_SCORE_ADJ) -> bool:
    """``oomScoreAdj``: the kubelet's own OOM score, as upstream sets it at start-up.

    A failure (not root, no /proc) is logged and start-up goes on, as upstream does.
    """
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(f"{value}\n")
        with open(path, encoding="ascii") as f:
            now = f.read().strip()
    except OSError as exc:
        log.info("failed to set the kubelet's oom_score_adj to %d: %s", value, exc)
        return False
    if now != str(value):  # some sandboxes take the write and keep their own floor
        log.info("failed to set the kubelet's oom_score_adj to %d: it stays %s", value, now)
        return False
    return True


GetLimit = Callable[[int], tuple[int, int]]
SetLimit = Callable[[int, tuple[int, int]], None]


def raise_open_files_limit(
    getrlimit: GetLimit = resource.getrlimit, setrlimit: SetLimit = resource.setrlimit
) -> int:
    """Raise the soft open-files limit to the hard one (Go's runtime does this at start).

    Returns the soft limit in force afterwards. A refusal (an infinite hard limit above
    ``fs.nr_open``, a sandbox) leaves the limit as it was, with a log line, as Go ignores it.
    """
    soft, hard = getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    try:
        setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as exc:
        structured.v(1).info("open files limit left as it was", soft=soft, hard=hard, err=str(exc))
        return soft
    structured.v(2).info("open files limit raised to the hard limit", previous=soft, limit=hard)
    return hard


def apply_open_files_limit(
    max_open_files: int,
    getrlimit: GetLimit = resource.getrlimit,
    setrlimit: SetLimit = resource.setrlimit,
) -> int:
    """What upstream's kubelet does at start: Go's runtime raises the soft limit to the
    hard one, then ``maxOpenFiles`` (default 1000000) becomes both limits. Raising the
    hard limit needs CAP_SYS_RESOURCE; a refusal is logged as an error and start-up goes
    on with the raised soft limit, as upstream. Returns the soft limit in force."""
    soft = raise_open_files_limit(getrlimit, setrlimit)
    if max_open_files <= 0:
        return soft
    try:
        setrlimit(resource.RLIMIT_NOFILE, (max_open_files, max_open_files))
    except (OSError, ValueError) as exc:
        structured.error(
            "Failed to set rlimit on max file handles", err=str(exc), limit=max_open_files
        )
        return soft
    return max_open_files
