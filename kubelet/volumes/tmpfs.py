"""The tmpfs behind memory-backed volumes: emptyDir with medium Memory, secret and
projected volumes (upstream wraps the latter two in a Memory emptyDir).

Mount options are upstream's: ``size`` (node allocatable memory, lowered to the pod's
memory limit and to the volume's ``sizeLimit``) and ``noswap`` where the kernel has it.
No ``mode``: the root of the tmpfs keeps tmpfs's default 1777, as upstream's volumes
do; what keeps local users out is the 0750 pod directory above it.
"""

from __future__ import annotations

import logging
import os
import tempfile

from kubelet.api import Pod, QuantityError, to_bytes
from kubelet.cgroups import pod_memory_limit

from .mounts import MountError, mount, unmount

log = logging.getLogger(__name__)

NOSWAP_KERNEL = (6, 4)
"""The first kernel whose tmpfs takes ``noswap`` (upstream's TmpfsNoswapSupportKernelVersion)."""

_noswap: bool | None = None


def memory_volume_size(pod: Pod, size_limit: object, node_allocatable_memory: int) -> int:
    """Upstream calculateEmptyDirMemorySize: node allocatable, or the pod's limit, or the
    volume's sizeLimit, whichever is smallest (zero and unset values do not count). The
    pod's limit is the one its cgroup gets (``cgroups.values.pod_memory_limit``)."""
    size = node_allocatable_memory
    pod_limit = pod_memory_limit(pod)
    if pod_limit and (size <= 0 or pod_limit <= size):
        size = pod_limit
    try:
        volume_limit = to_bytes(str(size_limit)) if size_limit not in (None, "") else 0
    except (QuantityError, ValueError):
        volume_limit = 0
    if volume_limit > 0 and (size <= 0 or volume_limit <= size):
        size = volume_limit
    return size


def tmpfs_options(size: int, noswap: bool) -> str:
    options = []
    if size > 0:
        options.append(f"size={size}")
    if noswap:
        options.append("noswap")
    return ",".join(options)


def _kernel_at_least(release: str, wanted: tuple[int, int]) -> bool:
    """``6.18.44-fc-v669`` ≥ (6, 4)?"""
    parts = []
    for piece in release.split(".")[:2]:
        digits = piece[: len(piece) - len(piece.lstrip("0123456789"))]
        parts.append(int(digits or 0))
    return tuple(parts) >= wanted


def noswap_supported(probe_dir: str) -> bool:
    """Whether tmpfs takes ``noswap`` here (kernel 6.4+, else one test mount), once."""
    global _noswap
    if _noswap is None:
        _noswap = _kernel_at_least(os.uname().release, NOSWAP_KERNEL) or _probe_noswap(probe_dir)
    return _noswap


def _probe_noswap(probe_dir: str) -> bool:
    try:
        os.makedirs(probe_dir, exist_ok=True)
        test = tempfile.mkdtemp(prefix="tmpfs-noswap-test-", dir=probe_dir)
    except OSError:
        return False
    try:
        mount("tmpfs", test, "tmpfs", 0, "noswap")
    except MountError:
        return False
    else:
        unmount(test)
        return True
    finally:
        os.rmdir(test)


def mount_tmpfs(path: str, options: str) -> None:
    log.debug("mounting tmpfs on %s (%s)", path, options or "defaults")
    mount("tmpfs", path, "tmpfs", 0, options)
