"""Cgroup names: the driver-neutral name, its cgroupfs and systemd spellings, the pod layout.

A cgroup is named by its components (``("kubepods", "burstable", "pod<uid>")``) and
spelled per driver, as upstream's ``CgroupName`` is:

- cgroupfs: ``/kubepods/burstable/pod<uid>``;
- systemd: each component's "-" becomes "_", the components are joined with "-" into one
  slice name, and the slice is expanded into its parents:
  ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice``.

Components may contain neither "/" nor "_" (upstream panics; here ``ValueError``), so
the systemd spelling can always be read back.

The layout under ``cgroupRoot`` (``/`` by default): ``kubepods`` (node allocatable),
``kubepods/burstable`` and ``kubepods/besteffort``; a pod's cgroup is ``pod<uid>`` under
its QoS class's cgroup, Guaranteed pods directly under ``kubepods``. With
``cgroupsPerQOS: false`` there is no layout: pods get no cgroup parent.
"""

from __future__ import annotations

import posixpath

import attrs

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "CGROUPFS",
    "GUARANTEED",
    "NODE_ALLOCATABLE",
    "POD_PREFIX",
    "ROOT",
    "SYSTEMD",
    "CgroupName",
    "QosCgroups",
    "expand_slice",
    "literal",
    "new_name",
    "node_allocatable_root",
    "parse",
    "parse_cgroupfs",
    "parse_systemd",
    "pod_cgroup",
    "pod_uid_of",
    "to_cgroupfs",
    "to_systemd",
]

CgroupName = tuple[str, ...]
ROOT: CgroupName = ()

CGROUPFS = "cgroupfs"
SYSTEMD = "systemd"

NODE_ALLOCATABLE = "kubepods"
POD_PREFIX = "pod"
SLICE = ".slice"

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


def new_name(base: CgroupName, *components: str) -> CgroupName:
    """``base`` + ``components``; "/" and "_" are refused in a component (upstream's rule,
    which keeps the systemd spelling reversible)."""
    for component in components:
        if "/" in component or "_" in component:
            raise ValueError(f"invalid character in component [{component!r}] of CgroupName")
    return (*base, *components)


def to_cgroupfs(name: CgroupName) -> str:
    return "/" + "/".join(name)


def parse_cgroupfs(path: str) -> CgroupName:
    stripped = path[1:] if path.startswith("/") else path
    return () if stripped == "" else tuple(stripped.split("/"))


def expand_slice(slice_name: str) -> str:
    """``a-b-c.slice`` → ``/a.slice/a-b.slice/a-b-c.slice`` (systemd's slice nesting);
    ``-.slice`` is the root. ``ValueError`` "invalid slice name: …" as libcontainer's."""
    if len(slice_name) < len(SLICE) or not slice_name.endswith(SLICE) or "/" in slice_name:
        raise ValueError(f"invalid slice name: {slice_name}")
    stem = slice_name[: -len(SLICE)]
    if stem == "-":
        return "/"
    path, prefix = "", ""
    for component in stem.split("-"):
        if component == "":
            raise ValueError(f"invalid slice name: {slice_name}")
        path += "/" + prefix + component + SLICE
        prefix += component + "-"
    return path


def to_systemd(name: CgroupName) -> str:
    """The expanded systemd spelling (a cgroupfs path); the root is ``/``."""
    if not name or name == ("",):
        return "/"
    return expand_slice("-".join(part.replace("-", "_") for part in name) + SLICE)


def parse_systemd(path: str) -> CgroupName:
    """Only the last slice is read: it carries every component."""
    base = posixpath.basename(path)
    if base.endswith(SLICE):
        base = base[: -len(SLICE)]
    return tuple(part.replace("_", "-") for part in base.split("-"))


def literal(name: CgroupName, driver: str) -> str:
    """The name as a path relative to each hierarchy's mount point, for ``driver``."""
    return to_systemd(name) if driver == SYSTEMD else to_cgroupfs(name)


def parse(path: str, driver: str) -> CgroupName:
    return parse_systemd(path) if driver == SYSTEMD else parse_cgroupfs(path)


def node_allocatable_root(cgroup_root: str, cgroups_per_qos: bool) -> CgroupName:
    """``cgroupRoot`` (always written cgroupfs-style) plus ``kubepods`` when
    ``cgroupsPerQOS``: the parent of every pod cgroup."""
    root = parse_cgroupfs(cgroup_root)
    return new_name(root, NODE_ALLOCATABLE) if cgroups_per_qos else root


@attrs.frozen
class QosCgroups:
    """The three QoS parents: Guaranteed pods live directly in the node-allocatable cgroup."""

    guaranteed: CgroupName
    burstable: CgroupName
    besteffort: CgroupName

    @classmethod
    def under(cls, root: CgroupName) -> QosCgroups:
        return cls(
            guaranteed=root,
            burstable=new_name(root, "burstable"),
            besteffort=new_name(root, "besteffort"),
        )

    def parent(self, qos_class: str) -> CgroupName:
        if qos_class == GUARANTEED:
            return self.guaranteed
        if qos_class == BURSTABLE:
            return self.burstable
        if qos_class == BEST_EFFORT:
            return self.besteffort
        raise ValueError(f"unknown QoS class {qos_class!r}")

    def roots(self) -> tuple[CgroupName, ...]:
        """Where pod cgroups can be found (upstream's scan order)."""
        return (self.besteffort, self.burstable, self.guaranteed)


def pod_cgroup(qos: QosCgroups, qos_class: str, uid: str) -> CgroupName:
    """``<qos parent>/pod<uid>``. The UID is used as it is: a UID with "_" or "/" (never
    one the API server makes) is refused rather than mangled."""
    return new_name(qos.parent(qos_class), POD_PREFIX + uid)


def pod_uid_of(name: CgroupName, qos: QosCgroups) -> str | None:
    """The pod UID when ``name`` is a pod cgroup directly under a QoS parent, else None
    (upstream's ``IsPodCgroup``)."""
    for parent in qos.roots():
        if len(name) == len(parent) + 1 and name[: len(parent)] == parent:
            base = name[-1]
            if base.startswith(POD_PREFIX) and base.count(POD_PREFIX) == 1:
                return base[len(POD_PREFIX) :]
    return None
