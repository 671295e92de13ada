"""Container garbage collection as a plan: which dead containers, sandboxes, log dirs go.

Upstream (kuberuntime_gc.go) runs every minute:

1. Dead containers (not running, created at least ``min_age`` ago) are grouped by
   (pod UID, container name). With all pod sources ready, every group of a pod whose
   content may be removed (deleted, or evicted and terminated) goes entirely, and with
   ``evict_non_deleted`` (the eviction manager's "delete all unused containers") so does
   every group of a terminated pod. Then each group keeps its newest
   ``max_per_pod_container`` (default 1: the last dead instance stays, for
   ``kubectl logs --previous`` and the restart count), and if more than
   ``max_containers`` remain on the node each group is cut to an equal share (at least
   one) and then the oldest go. A container in an unknown state is stopped first.
2. Sandboxes that are not ready and hold no container (after step 1) go, except the
   newest of a pod that still exists; a removed pod loses them all.
3. Pod log directories (``<pod logs dir>/<namespace>_<name>_<uid>``) of pods whose
   content may be removed go, once all sources are ready: every such directory, also
   of a pod the kubelet never ran (a pod it does not know may go). The collector then
   removes the dead symlinks of ``/var/log/containers`` (``logs.py``).

Running containers and ready sandboxes are never touched. ``plan`` is pure; the
collector applies it through the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

__all__ = [
    "GCPlan",
    "GCPolicy",
    "GcContainer",
    "SandboxInfo",
    "plan",
    "pod_uid_of_logs_dir",
]

RUNNING = "running"
UNKNOWN = "unknown"
READY = "ready"


@attrs.frozen
class GCPolicy:
    """Upstream's defaults: ``--minimum-container-ttl-duration=0``,
    ``--maximum-dead-containers-per-container=1``, ``--maximum-dead-containers=-1``."""

    min_age: float = 0.0
    max_per_pod_container: int = 1
    max_containers: int = -1


@attrs.frozen
class GcContainer:
    id: str
    name: str
    pod_uid: str
    sandbox_id: str
    state: str
    """running, exited, created or unknown (CRI states, lower case)"""
    created_at: float
    """seconds since the epoch"""


@attrs.frozen
class SandboxInfo:
    id: str
    pod_uid: str
    state: str
    """ready or notready"""
    created_at: float


@attrs.frozen
class GCPlan:
    stop_then_remove: tuple[str, ...] = ()
    """containers in an unknown state: stopped before removal"""
    remove_containers: tuple[str, ...] = ()
    remove_sandboxes: tuple[str, ...] = ()
    """stopped (in case) then removed"""
    remove_log_dirs: tuple[str, ...] = ()
    """directory names under the pod logs directory"""

    @property
    def containers(self) -> tuple[str, ...]:
        return (*self.stop_then_remove, *self.remove_containers)


Predicate = Callable[[str], bool]


def _newest_first(items: Iterable[GcContainer]) -> list[GcContainer]:
    return sorted(items, key=lambda c: c.created_at, reverse=True)


def pod_uid_of_logs_dir(name: str) -> str:
    """The UID in a ``<namespace>_<name>_<uid>`` directory name (the last part)."""
    return name.rsplit("_", 1)[-1]


def _sandboxes(sandboxes: Sequence[SandboxInfo], busy: set[str], whole: Predicate) -> list[str]:
    """Sandboxes not ready and empty, but the newest of each pod that is not ``whole``-gone."""
    by_pod: dict[str, list[SandboxInfo]] = {}
    for s in sandboxes:
        by_pod.setdefault(s.pod_uid, []).append(s)
    out: list[str] = []
    for uid, group in by_pod.items():
        ordered = sorted(group, key=lambda s: s.created_at, reverse=True)
        candidates = ordered if whole(uid) else ordered[1:]
        for s in reversed(candidates):
            if s.state != READY and s.id not in busy:
                out.append(s.id)
    return out


def plan(
    containers: Sequence[GcContainer],
    sandboxes: Sequence[SandboxInfo],
    log_dirs: Sequence[str],
    *,
    policy: GCPolicy,
    now: float,
    all_sources_ready: bool,
    content_removable: Predicate,
    runtime_removable: Predicate,
    evict_non_deleted: bool = False,
) -> GCPlan:
    """What one collection removes.

    ``content_removable(uid)``: the pod is gone (or evicted) and terminated, its logs and
    dead containers may go (upstream ``ShouldPodContentBeRemoved``);
    ``runtime_removable(uid)``: the pod is terminated (``ShouldPodRuntimeBeRemoved``).
    """

    def whole(uid: str) -> bool:
        return content_removable(uid) or (evict_non_deleted and runtime_removable(uid))

    units: dict[tuple[str, str], list[GcContainer]] = {}
    for c in containers:
        if c.state == RUNNING or now - c.created_at < policy.min_age:
            continue
        units.setdefault((c.pod_uid, c.name), []).append(c)
    removed: list[GcContainer] = []

    def remove_oldest(group: list[GcContainer], count: int) -> list[GcContainer]:
        ordered = _newest_first(group)
        keep = len(ordered) - count
        removed.extend(reversed(ordered[keep:]))  # oldest first
        return ordered[:keep]

    if all_sources_ready:
        for key in list(units):
            if whole(key[0]):
                group = units.pop(key)
                remove_oldest(group, len(group))
    if policy.max_per_pod_container >= 0:
        for key, group in units.items():
            if len(group) > policy.max_per_pod_container:
                units[key] = remove_oldest(group, len(group) - policy.max_per_pod_container)
    total = sum(len(g) for g in units.values())
    if policy.max_containers >= 0 and total > policy.max_containers:
        share = max(policy.max_containers // len(units), 1)
        for key, group in units.items():
            if len(group) > share:
                units[key] = remove_oldest(group, len(group) - share)
        rest = [c for g in units.values() for c in g]
        if len(rest) > policy.max_containers:
            remove_oldest(rest, len(rest) - policy.max_containers)

    gone = {c.id for c in removed}
    remaining_sandbox_ids = {c.sandbox_id for c in containers if c.id not in gone}
    sandboxes_out = _sandboxes(sandboxes, remaining_sandbox_ids, whole)

    dirs = (
        tuple(d for d in log_dirs if content_removable(pod_uid_of_logs_dir(d)))
        if all_sources_ready
        else ()
    )
    return GCPlan(
        stop_then_remove=tuple(c.id for c in removed if c.state == UNKNOWN),
        remove_containers=tuple(c.id for c in removed if c.state != UNKNOWN),
        remove_sandboxes=tuple(sandboxes_out),
        remove_log_dirs=dirs,
    )
