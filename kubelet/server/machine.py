"""``/spec/``: the machine as cAdvisor's ``MachineInfo`` describes it (the fields we can read)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kubelet.goformat import rfc3339
from kubelet.stats import HostStats, filesystem


def _first_line(path: Path) -> str:
    try:
        return path.read_text().strip().splitlines()[0]
    except (OSError, IndexError):
        return ""


def _cpuinfo(host: HostStats) -> tuple[int, int, int]:
    """(physical cores, sockets, MHz of the first cpu) from /proc/cpuinfo."""
    try:
        text = (host.root / "proc/cpuinfo").read_text()
    except OSError:
        return 0, 0, 0
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    mhz = 0
    physical = core = ""
    for line in [*text.splitlines(), ""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "physical id":
            physical = value
            sockets.add(value)
        elif key == "core id":
            core = value
        elif key == "cpu MHz" and not mhz:
            mhz = int(float(value))
        elif not line.strip() and (physical or core):
            cores.add((physical, core))
            physical = core = ""
    return len(cores), len(sockets), mhz


def machine_info(host: HostStats, root_dir: str) -> dict[str, Any]:
    physical, sockets, mhz = _cpuinfo(host)
    num_cores = os.cpu_count() or 0
    fs = filesystem(root_dir)
    return {
        "timestamp": rfc3339(time.time()),
        "num_cores": num_cores,
        "num_physical_cores": physical or num_cores,
        "num_sockets": sockets or 1,
        "cpu_frequency_khz": mhz * 1000,
        "memory_capacity": host.memory_capacity() or 0,
        "machine_id": _first_line(host.root / "etc/machine-id"),
        "system_uuid": _first_line(host.root / "sys/class/dmi/id/product_uuid"),
        "boot_id": _first_line(host.root / "proc/sys/kernel/random/boot_id"),
        "filesystems": (
            [{"device": root_dir, "capacity": fs.capacity, "inodes": fs.inodes}] if fs else []
        ),
        "network_devices": [{"name": i.name} for i in host.interfaces()],
        "cloud_provider": "Unknown",
        "instance_type": "Unknown",
        "instance_id": "None",
    }
