"""Facts about this machine, read from /proc, /sys, /etc and statfs.

Everything here is I/O on small files, read once at start (identity) or on each status
computation (capacity can change with hot-plug, images and disks with use). Paths are
parameters so tests can point them at a fake tree.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import attrs

from kubelet.version import go_arch


@attrs.frozen(kw_only=True)
class MachineInfo:
    """Identity and capacity of the machine (not decisions: see status.py)."""

    num_cores: int
    memory_bytes: int
    hugepages: dict[str, int]
    """page size ("2Mi") → total bytes of that size configured"""
    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    operating_system: str
    architecture: str
    hostname: str


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _meminfo(root: Path) -> dict[str, int]:
    """/proc/meminfo as bytes (or counts for the HugePages_* lines)."""
    out: dict[str, int] = {}
    for line in _read(root / "proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        value = int(parts[0])
        out[key] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def _hugepages(root: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    base = root / "sys/kernel/mm/hugepages"
    try:
        entries = list(base.iterdir())
    except OSError:
        return sizes
    for entry in entries:
        name = entry.name  # hugepages-2048kB
        if not name.startswith("hugepages-") or not name.endswith("kB"):
            continue
        kib = int(name[len("hugepages-") : -2])
        pages = int(_read(entry / "nr_hugepages", "0") or 0)
        label = f"{kib // 1024}Mi" if kib % (1024 * 1024) else f"{kib // (1024 * 1024)}Gi"
        sizes[label] = pages * kib * 1024
    return sizes


def _os_image(root: Path) -> str:
    for line in _read(root / "etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return "Linux"


def read_machine_info(root: Path = Path("/")) -> MachineInfo:
    meminfo = _meminfo(root)
    machine_id = _read(root / "etc/machine-id") or _read(root / "var/lib/dbus/machine-id")
    return MachineInfo(
        num_cores=os.cpu_count() or 1,
        memory_bytes=meminfo.get("MemTotal", 0),
        hugepages=_hugepages(root),
        machine_id=machine_id,
        system_uuid=_read(root / "sys/class/dmi/id/product_uuid").lower(),
        boot_id=_read(root / "proc/sys/kernel/random/boot_id"),
        kernel_version=platform.release(),
        os_image=_os_image(root),
        operating_system="linux",
        architecture=go_arch(),
        hostname=socket.gethostname().lower(),
    )


@attrs.frozen(kw_only=True)
class FilesystemStats:
    capacity_bytes: int
    available_bytes: int
    inodes: int
    inodes_free: int


def filesystem_stats(path: str) -> FilesystemStats:
    """statfs of the filesystem holding ``path`` (the kubelet's root dir: nodefs)."""
    probe = path
    while not os.path.exists(probe) and probe not in ("", "/"):
        probe = os.path.dirname(probe)
    st = os.statvfs(probe or "/")
    return FilesystemStats(
        capacity_bytes=st.f_blocks * st.f_frsize,
        available_bytes=st.f_bavail * st.f_frsize,
        inodes=st.f_files,
        inodes_free=st.f_ffree,
    )
