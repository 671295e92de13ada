"""Which cgroup hierarchies this host has, and where: v1 (one tree per controller, often
with a v2 tree at ``unified/`` beside them: "hybrid") or v2 (one tree for everything).

Read from ``/proc/self/mountinfo`` as upstream does (libcontainer's ``GetCgroupMounts``;
a controller mounted twice is taken at its shortest mount point), or, for a tree laid
out by a test, from the directories under a root. Pure parsing; the two readers at the
bottom are the only I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

__all__ = [
    "KNOWN_V1_CONTROLLERS",
    "CgroupLayout",
    "from_mountinfo",
    "from_tree",
    "read_layout",
]

KNOWN_V1_CONTROLLERS = frozenset(
    {
        "blkio",
        "cpu",
        "cpuacct",
        "cpuset",
        "devices",
        "freezer",
        "hugetlb",
        "memory",
        "misc",
        "net_cls",
        "net_prio",
        "perf_event",
        "pids",
        "rdma",
    }
)
_NAMED = "name="
DEFAULT_ROOT = "/sys/fs/cgroup"


@attrs.frozen
class CgroupLayout:
    """Where each controller's hierarchy is mounted.

    v1: ``mounts`` maps each controller (and named hierarchies such as ``systemd``) to
    its mount point; ``unified`` is the v2 mount of a hybrid host, or None. v2: ``mounts``
    is empty, ``unified`` is the one mount and ``controllers`` those it offers.
    """

    version: int
    mounts: Mapping[str, Path] = attrs.field(factory=dict)
    unified: Path | None = None
    controllers: frozenset[str] = frozenset()

    @property
    def hybrid(self) -> bool:
        return self.version == 1 and self.unified is not None

    def has(self, controller: str) -> bool:
        if self.version == 2:
            return controller in self.controllers
        return controller in self.mounts

    def hierarchies(self) -> dict[Path, tuple[str, ...]]:
        """Each distinct tree once (co-mounted controllers share one), v1 trees first,
        then the unified tree (key ``""`` among the controllers)."""
        out: dict[Path, list[str]] = {}
        for controller, mount in sorted(self.mounts.items()):
            out.setdefault(mount, []).append(controller)
        if self.unified is not None:
            out.setdefault(self.unified, []).append("")
        return {mount: tuple(names) for mount, names in out.items()}


def _superopt_controllers(superopts: str) -> list[str]:
    out = []
    for opt in superopts.split(","):
        if opt in KNOWN_V1_CONTROLLERS:
            out.append(opt)
        elif opt.startswith(_NAMED):
            out.append(opt[len(_NAMED) :])
    return out


def from_mountinfo(text: str, unified_controllers: Iterable[str] = ()) -> CgroupLayout:
    """The layout described by a ``/proc/self/mountinfo`` text.

    A ``cgroup2`` mount at ``/sys/fs/cgroup`` makes a v2 host (``unified_controllers``:
    the content of its ``cgroup.controllers``); otherwise every ``cgroup`` mount is a v1
    tree and a ``cgroup2`` mount elsewhere (``/sys/fs/cgroup/unified``) makes it hybrid.
    """
    v1: dict[str, Path] = {}
    v2_mounts: list[Path] = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 5 or len(fields) < sep + 4:
            continue
        mount_point = Path(fields[4].replace("\\040", " "))
        fstype, superopts = fields[sep + 1], fields[sep + 3]
        if fstype == "cgroup2":
            v2_mounts.append(mount_point)
        elif fstype == "cgroup":
            for controller in _superopt_controllers(superopts):
                previous = v1.get(controller)
                if previous is None or len(str(mount_point)) < len(str(previous)):
                    v1[controller] = mount_point
    root = Path(DEFAULT_ROOT)
    if root in v2_mounts:
        return CgroupLayout(version=2, unified=root, controllers=frozenset(unified_controllers))
    if not v1:
        if v2_mounts:
            return CgroupLayout(
                version=2, unified=v2_mounts[0], controllers=frozenset(unified_controllers)
            )
        raise ValueError("failed to find cgroup mounts")
    return CgroupLayout(version=1, mounts=v1, unified=v2_mounts[0] if v2_mounts else None)


def from_tree(root: Path) -> CgroupLayout:
    """The layout of a tree shaped like ``/sys/fs/cgroup`` (for tests and chroots): a
    ``cgroup.controllers`` file at the top means v2; else each directory is a v1 tree
    named after its controllers (``cpu,cpuacct``; ``systemd`` for ``name=systemd``;
    symlinks such as ``cpu`` → ``cpu,cpuacct`` are skipped), and ``unified``
    with a ``cgroup.controllers`` is the hybrid v2 tree."""
    top = root / "cgroup.controllers"
    if top.is_file():
        return CgroupLayout(version=2, unified=root, controllers=frozenset(top.read_text().split()))
    v1: dict[str, Path] = {}
    unified = None
    for entry in sorted(root.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name == "unified" and (entry / "cgroup.controllers").is_file():
            unified = entry
            continue
        for controller in entry.name.split(","):
            if controller in KNOWN_V1_CONTROLLERS or controller == "systemd":
                v1.setdefault(controller, entry)
    if not v1:
        raise ValueError(f"no cgroup hierarchy found under {root}")
    return CgroupLayout(version=1, mounts=v1, unified=unified)


def read_layout(mountinfo: Path = Path("/proc/self/mountinfo")) -> CgroupLayout:
    """This host's layout (I/O: mountinfo, and the v2 root's ``cgroup.controllers``)."""
    layout = from_mountinfo(mountinfo.read_text())
    if layout.version == 2 and layout.unified is not None:
        controllers = (layout.unified / "cgroup.controllers").read_text().split()
        layout = attrs.evolve(layout, controllers=frozenset(controllers))
    return layout
