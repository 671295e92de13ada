"""Signals from usage: how much of each resource is left, and out of how much.

As upstream's ``makeSignalObservations``: memory.available is the node's available
bytes (capacity − working set) out of available + working set; allocatableMemory is
the same on the "pods" cgroup; nodefs from the kubelet's root filesystem; imagefs and
containerfs from the runtime's filesystems; pid.available is max PID − processes. A
figure the summary lacks gives no observation, and a threshold without an observation
is never met.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from kubelet.stats import FsUsage, MemoryUsage, NodeUsage

from .thresholds import Signal

__all__ = ["Observation", "Observations", "observe_signals"]


@attrs.frozen
class Observation:
    available: int
    capacity: int
    time: float | None = None
    """when the figure was measured (None: unknown, always taken as fresh)"""


Observations = Mapping[Signal, Observation]


def _memory(m: MemoryUsage | None) -> Observation | None:
    if m is None or m.available is None or m.working_set is None:
        return None
    return Observation(m.available, m.available + m.working_set, m.time)


def _fs(fs: FsUsage | None, out: dict[Signal, Observation], bytes_: Signal, inodes: Signal) -> None:
    if fs is None:
        return
    if fs.available is not None and fs.capacity is not None:
        out[bytes_] = Observation(fs.available, fs.capacity, fs.time)
    if fs.inodes_free is not None and fs.inodes is not None:
        out[inodes] = Observation(fs.inodes_free, fs.inodes, fs.time)


def observe_signals(node: NodeUsage) -> dict[Signal, Observation]:
    """Every signal the node's figures can tell (no pod's figures make one)."""
    out: dict[Signal, Observation] = {}
    memory = _memory(node.memory)
    if memory is not None:
        out[Signal.MEMORY_AVAILABLE] = memory
    allocatable = _memory(node.pods_memory)
    if allocatable is not None:
        out[Signal.ALLOCATABLE_MEMORY_AVAILABLE] = allocatable
    _fs(node.fs, out, Signal.NODEFS_AVAILABLE, Signal.NODEFS_INODES_FREE)
    _fs(node.image_fs, out, Signal.IMAGEFS_AVAILABLE, Signal.IMAGEFS_INODES_FREE)
    _fs(node.container_fs, out, Signal.CONTAINERFS_AVAILABLE, Signal.CONTAINERFS_INODES_FREE)
    if node.max_pid is not None and node.num_processes is not None:
        out[Signal.PID_AVAILABLE] = Observation(
            node.max_pid - node.num_processes, node.max_pid, node.rlimit_time
        )
    return out
