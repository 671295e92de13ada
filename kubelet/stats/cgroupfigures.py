"""Per-cgroup figures of ``/metrics/cadvisor`` that the CRI does not carry: CPU throttling
(CFS), user/system CPU time, block I/O, memory details (cache, swap, mapped files,
failcnt, peak), pressure (PSI, with KubeletPSI on cgroup v2), the limits the cgroup
was given (cAdvisor's ``container_spec_*``, ``cgroupspec``) and its processes, descriptors
and threads (``processes``), read from the node's,
each pod's and each running container's cgroup.

A container's cgroup is the one containerd makes under its pod's: ``<pod cgroup>/<id>``
(cgroupfs) or ``<pod slice>/cri-containerd-<id>.scope`` (systemd). A cgroup that is not
there (another runtime, a container that just exited) simply has no figures.
"""

from __future__ import annotations

import attrs

from kubelet.cgroups import NODE_ALLOCATABLE, CgroupName
from kubelet.cri import RuntimeClient, api, labels

from .cgroupfs import CfsStats, CgroupMemoryDetail, DeviceIo
from .cgroupspec import CgroupSpec, cgroup_spec
from .host import HostStats
from .processes import ProcessStats, process_stats
from .psi import Pressure

__all__ = ["CgroupFigures", "Figures", "cgroup_figures", "container_cgroup"]


@attrs.frozen
class CgroupFigures:
    cfs: CfsStats | None = None
    io: tuple[tuple[str, DeviceIo], ...] = ()
    """(device name, figures) per device; the name is "" when the device is unknown"""
    pressure: dict[str, Pressure] = attrs.field(factory=dict)
    """PSI by resource (``cpu``, ``memory``, ``io``)"""
    memory: CgroupMemoryDetail | None = None
    cpu_user_system_ns: tuple[int, int] | None = None
    spec: CgroupSpec | None = None
    processes: ProcessStats | None = None


Figures = dict[tuple[str, str], CgroupFigures]
"""(pod UID, container name) → figures; ("", "") the node, (uid, "") a pod"""


def _read(host: HostStats, cgroup: str, psi: bool) -> CgroupFigures:
    cgroups = host.cgroups
    devices = cgroups.block_io(cgroup) or ()
    named = tuple((cgroups.device_name(d.major, d.minor), d) for d in devices)
    pressure = cgroups.pressure(cgroup) if psi else {}
    return CgroupFigures(
        cfs=cgroups.cfs(cgroup), io=named, pressure=pressure,
        memory=cgroups.memory_detail(cgroup),
        cpu_user_system_ns=cgroups.cpu_user_system_ns(cgroup),
        spec=cgroup_spec(cgroups, cgroup),
        processes=process_stats(cgroups, cgroup),
    )  # fmt: skip


def container_cgroup(host: HostStats, pod_cgroup: str, container_id: str) -> str | None:
    """The cgroup containerd made for a container of the pod, if it exists."""
    for path in (
        f"{pod_cgroup}/{container_id}",
        f"{pod_cgroup}/cri-containerd-{container_id}.scope",
    ):
        if host.cgroup_exists(path):
            return path
    return None


async def cgroup_figures(
    runtime: RuntimeClient,
    host: HostStats,
    pods_root: CgroupName = (NODE_ALLOCATABLE,),
    psi: bool = True,
) -> Figures:
    """Figures of the node, of every pod with a cgroup and of its running containers (the
    newest instance per name, as the summary)."""
    out: Figures = {("", ""): _read(host, "/", psi)}
    newest: dict[tuple[str, str], api.Container] = {}
    for c in sorted(await runtime.list_containers(state=api.CONTAINER_RUNNING),
                    key=lambda c: c.created_at):  # fmt: skip
        uid = c.labels.get(labels.POD_UID)
        if uid:
            newest[(uid, c.metadata.name)] = c
    pods: dict[str, str | None] = {}
    finder = host.pod_cgroups(pods_root)
    for (uid, name), c in newest.items():
        if uid not in pods:
            pods[uid] = finder.find(uid)
            if pods[uid] is not None:
                out[(uid, "")] = _read(host, pods[uid] or "", psi)
        pod_cgroup = pods[uid]
        cgroup = container_cgroup(host, pod_cgroup, c.id) if pod_cgroup else None
        if cgroup is not None:
            out[(uid, name)] = _read(host, cgroup, psi)
    return out
