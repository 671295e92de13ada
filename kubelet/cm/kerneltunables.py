"""The kernel tunables the kubelet relies on (upstream 1.36 ``setupKernelTunables``).

Pods are sized on the assumption that memory overcommit is on, that an OOM kills a
process rather than panicking the node, that a panicked node reboots after 10 s, and
that the key quota is large enough for one session keyring per container. At start-up
(the container manager's, before the QoS cgroups, as upstream's ``setupNode``) each
value is read under /proc/sys; with ``protectKernelDefaults: true`` any that differs
stops start-up, each named in upstream's words; with false (the default) the kubelet
writes its value and logs the change. A tunable that cannot be read, or written, stops
start-up too, as upstream; the one exception is upstream's: inside a user namespace
with the ``KubeletInUserNamespace`` gate on, a refused write is logged and skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from kubelet.boundedio import read_regular_file

log = logging.getLogger(__name__)

PROC_SYS = "/proc/sys"

TUNABLES: Sequence[tuple[str, int]] = (
    ("vm/overcommit_memory", 1),
    ("vm/panic_on_oom", 0),
    ("kernel/panic", 10),
    ("kernel/panic_on_oops", 1),
    ("kernel/keys/root_maxkeys", 1000000),
    ("kernel/keys/root_maxbytes", 25000000),
)
"""Each tunable (its path under /proc/sys, as upstream names it) and the kubelet's value."""

_LIMIT = 64
"""Bytes a tunable's file may hold (one integer and a newline)."""


class KernelTunablesError(Exception):
    """Start-up cannot go on: the tunables differ (protected) or could not be set."""


def _read(proc_sys: str, name: str) -> int:
    text = read_regular_file(os.path.join(proc_sys, name), _LIMIT)
    return int(text.decode("ascii", "replace").strip())


def _write(proc_sys: str, name: str, value: int) -> None:
    with open(os.path.join(proc_sys, name), "w") as f:
        f.write(str(value))


def setup_kernel_tunables(
    proc_sys: str = PROC_SYS, *, protect: bool, ignore_write_errors: bool = False
) -> None:
    """Check (``protect``) or set the tunables; raises :class:`KernelTunablesError`
    listing every problem. Blocking: run it in a worker thread."""
    errors: list[str] = []
    for name, expected in TUNABLES:
        try:
            actual = _read(proc_sys, name)
        except (OSError, ValueError) as exc:
            errors.append(f"open {os.path.join(proc_sys, name)}: {exc}")
            continue
        if actual == expected:
            continue
        if protect:
            errors.append(
                f"invalid kernel flag: {name}, expected value: {expected}, actual value: {actual}"
            )
            continue
        log.info(
            '"Updating kernel flag" flag=%r expectedValue=%d actualValue=%d', name, expected, actual
        )
        try:
            _write(proc_sys, name, expected)
        except OSError as exc:
            if ignore_write_errors:
                log.info(
                    '"Updating kernel flag failed (running in UserNS, ignoring)" flag=%r err=%r',
                    name,
                    str(exc),
                )
                continue
            errors.append(f"write {os.path.join(proc_sys, name)}: {exc}")
    if errors:
        raise KernelTunablesError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")


def in_user_namespace(uid_map: str = "/proc/self/uid_map") -> bool:
    """Whether this process runs in a user namespace (its uid map is not the whole range)."""
    try:
        text = read_regular_file(uid_map, 4096).decode("ascii", "replace")
    except (OSError, ValueError):
        return False
    return text.split() != ["0", "0", "4294967295"]
