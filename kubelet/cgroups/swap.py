"""Swap on the node: upstream's start-up check (``failSwapOn``) and the facts the
containers' swap settings depend on.

- ``swap_on``: /proc/swaps lists a device beyond its header line (pure; upstream's
  ``isSwapOnAccordingToProcSwaps``). ``check_swap`` refuses a start with swap on unless
  ``failSwapOn`` is false; a missing /proc/swaps counts as no swap, as upstream.
- ``NodeSwap``: what the container side needs (``kubelet/decisions/limits.py``): the
  hierarchy version, whether the swap controller is there (v1: ``memory.memsw.*`` at the
  memory root; v2: ``memory.swap.max`` in the kubelet's own cgroup; upstream's
  ``swapControllerAvailable``), the node's memory and swap capacity, and the behaviour.
- ``LimitedSwap`` on cgroup v1 stops start-up, as upstream.
"""

from __future__ import annotations

import logging
from pathlib import Path

import attrs

from kubelet.errors import ConfigError

from .fs import UNIFIED, CgroupFs
from .system import parse_proc_cgroup

__all__ = [
    "LIMITED_SWAP",
    "LIMITED_SWAP_ON_V1",
    "NO_SWAP",
    "POSSIBLE_MEMORY_BACKED_VOLUMES_ON_DISK",
    "SWAP_ON_REFUSED",
    "NodeSwap",
    "check_swap",
    "node_swap",
    "read_swaps",
    "startup_swap",
    "swap_capacity",
    "swap_on",
    "volumes_may_swap",
]

log = logging.getLogger(__name__)

NO_SWAP = "NoSwap"
LIMITED_SWAP = "LimitedSwap"
SWAP_ON_REFUSED = (
    "running with swap on is not supported, please disable swap or set --fail-swap-on flag "
    "to false"
)
LIMITED_SWAP_ON_V1 = (
    "swap feature is enabled and LimitedSwap but it is only supported with cgroupv2"
)


POSSIBLE_MEMORY_BACKED_VOLUMES_ON_DISK = "PossibleMemoryBackedVolumesOnDisk"
TMPFS_SWAPS = (
    "The tmpfs noswap option is not supported. Memory-backed volumes (e.g. secrets, "
    "emptyDirs, etc.) might be swapped to disk and should no longer be considered secure."
)


def swap_on(proc_swaps: str) -> bool:
    """More than the header line in /proc/swaps: some swap device is on."""
    return len(proc_swaps.strip().split("\n")) > 1


def swap_capacity(proc_swaps: str) -> int:
    """Bytes of swap: the ``Size`` column (KiB) summed over the devices."""
    total = 0
    for line in proc_swaps.strip().split("\n")[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2].isdigit():
            total += int(fields[2]) * 1024
    return total


def check_swap(proc_swaps: str | None, fail_swap_on: bool) -> str | None:
    """Why the kubelet must not start (None: it may). ``proc_swaps`` None: no such file."""
    if proc_swaps is None:
        log.info('"File does not exist, assuming that swap is disabled" path="/proc/swaps"')
        return None
    if swap_on(proc_swaps) and fail_swap_on:
        return SWAP_ON_REFUSED
    return None


def read_swaps(proc: Path) -> str | None:
    """/proc/swaps' text, or None when there is no such file; other errors raise."""
    try:
        return (proc / "swaps").read_text()
    except FileNotFoundError:
        return None


@attrs.frozen
class NodeSwap:
    """The node's side of the containers' swap settings."""

    behavior: str = ""
    """``memorySwap.swapBehavior``: "" (NoSwap), NoSwap or LimitedSwap"""
    on: bool = False
    """/proc/swaps lists a device"""
    controller: bool = False
    """the swap controller is there (else no swap setting is sent at all)"""
    cgroup_v2: bool = False
    memory_capacity: int = 0
    swap_capacity: int = 0


def _controller(fs: CgroupFs, proc: Path) -> bool:
    if fs.layout.version == 1:
        memory = fs.paths("/").get("memory")
        return memory is not None and fs.has_file(memory, "memory.memsw.limit_in_bytes")
    try:
        own = parse_proc_cgroup((proc / "self" / "cgroup").read_text()).get(UNIFIED, "/")
    except OSError:
        return False
    return fs.has_file(fs.paths(own)[UNIFIED], "memory.swap.max")


def node_swap(
    fs: CgroupFs, proc: Path, behavior: str, memory_capacity: int, proc_swaps: str | None
) -> NodeSwap:
    """The facts, read once at start-up (upstream caches them for the process's life)."""
    return NodeSwap(
        behavior=behavior,
        on=swap_on(proc_swaps or ""),
        controller=_controller(fs, proc),
        cgroup_v2=fs.layout.version == 2,
        memory_capacity=memory_capacity,
        swap_capacity=swap_capacity(proc_swaps or ""),
    )


def startup_swap(
    fs: CgroupFs | None,
    proc: Path,
    *,
    fail_swap_on: bool,
    behavior: str,
    memory_capacity: int,
) -> NodeSwap:
    """The start-up check and the facts (``fs`` None: no hierarchy was read, so no swap
    setting is sent). ``ConfigError`` naming the field when the kubelet must not start."""
    try:
        text = read_swaps(proc)
    except OSError as err:
        message = f"failed to determine if swap is on: {err}"
        raise ConfigError.single("", "failSwapOn", message) from err
    refused = check_swap(text, fail_swap_on)
    if refused is not None:
        raise ConfigError.single("", "failSwapOn", refused)
    if not fail_swap_on and not behavior:
        log.info('"NoSwap is set due to memorySwapBehavior not specified"')
    if fs is None:
        return NodeSwap(behavior=behavior, on=swap_on(text or ""))
    if behavior == LIMITED_SWAP and fs.layout.version == 1:
        raise ConfigError.single("", "memorySwap.swapBehavior", LIMITED_SWAP_ON_V1)
    return node_swap(fs, proc, behavior, memory_capacity, text)


def volumes_may_swap(swap: NodeSwap, noswap_supported: bool) -> tuple[str, str, str] | None:
    """Upstream's Node event when swap is on (and allowed) but tmpfs cannot refuse it:
    memory-backed volumes (Secrets, emptyDir medium Memory) may end up on disk."""
    if swap.on and not noswap_supported:
        return ("Warning", POSSIBLE_MEMORY_BACKED_VOLUMES_ON_DISK, TMPFS_SWAPS)
    return None
