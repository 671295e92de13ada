"""The machine's NUMA nodes and their distances, read from /sys (bounded, blocking:
callers run it through their file runner)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from kubelet.boundedio import InputRefused, read_regular_file
from kubelet.errors import ConfigError

from .merge import NumaInfo, PolicyOptions

_LIMIT = 4096
_MAX_NODES = 1024


def read_numa_info(sys_root: str | os.PathLike[str], options: PolicyOptions) -> NumaInfo:
    """The NUMA nodes under ``sys_root`` (node 0 alone on a machine without NUMA
    directories); distances when ``prefer-closest-numa-nodes`` needs them."""
    node_dir = Path(sys_root) / "devices/system/node"
    try:
        names = os.listdir(node_dir)
    except FileNotFoundError:
        names = []
    if len(names) > _MAX_NODES:
        raise ConfigError.single("", "", f"cannot discover NUMA topology: {node_dir}: too many")
    pattern = re.compile(r"node(\d+)")
    nodes = tuple(sorted(int(m.group(1)) for n in names if (m := pattern.fullmatch(n))))
    if not nodes:
        return NumaInfo(nodes=(0,), distances={0: {0: 10}})
    distances: dict[int, dict[int, int]] = {}
    if options.prefer_closest:
        for n in nodes:
            try:
                text = read_regular_file(node_dir / f"node{n}/distance", _LIMIT).decode()
                row = [int(v) for v in text.split()]
            except (OSError, InputRefused, ValueError) as exc:
                raise ConfigError.single(
                    "",
                    "",
                    f"cannot discover NUMA topology: error getting NUMA distances: {exc}",
                ) from None
            distances[n] = {nodes[i]: d for i, d in enumerate(row) if i < len(nodes)}
    return NumaInfo(nodes=nodes, distances=distances)
