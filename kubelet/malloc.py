"""glibc's allocator, as the kubelet tunes it: one arena for its threads (at start-up,
``process.prepare``) and the heap's free pages handed back after a burst of work (the
sync loop after pods came or went, the servers after a burst of connections). Elsewhere
than glibc, nothing happens.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["heap_trimmer", "limit_malloc_arenas"]

M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the number of malloc arenas."""


def limit_malloc_arenas(libc: Any = None, environ: Mapping[str, str] = os.environ) -> bool:
    """One malloc arena for all threads (glibc gives each thread that meets a busy arena
    one of its own, up to 8 per core): the worker threads' reads, cgroup writes and
    decodes each left a partly used arena behind, 0.5 MiB of a standalone kubelet's RSS.
    The interpreter lock serializes the threads anyway. An operator's
    ``MALLOC_ARENA_MAX`` is left as it is; not glibc: nothing happens. Must run before the
    first thread starts. True when set."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    try:
        mallopt = (libc if libc is not None else ctypes.CDLL(None)).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, 1))


def heap_trimmer(libc: Any = None) -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``: the free pages inside the heap go back to the system.
    What a burst of work freed stays in the heap otherwise (reusable, but counted in RSS):
    1 MiB of a standalone kubelet's 60 once 30 pods have started, for under 1 ms of CPU.
    It walks the whole heap, so it runs in a worker thread (ctypes lets go of the
    interpreter lock). None where there is no glibc."""
    try:
        trim = (libc if libc is not None else ctypes.CDLL(None)).malloc_trim
    except (OSError, AttributeError):
        return None
    return lambda: trim(0)
