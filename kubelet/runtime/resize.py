"""Applying an admitted in-place resize to what runs (upstream's ``doPodResizeAction``).

Each sync compares every running container's CPU and memory -- as the runtime reports
them (``ContainerStatus.resources``), else as this kubelet last set them, else as the
container was created (its resources annotation) -- with the CRI resources its
allocation gives (``criconfig.linux_container_resources``: shares from the request,
CFS quota over the period from the limit, the memory limit). When they differ the pod
is resized, per resource as upstream orders it: a growing pod's cgroup first, then the
containers (``UpdateContainerResources``), a shrinking one's containers first, then
its cgroup, so a container's limit never exceeds its pod's. A memory shrink that would
put the pod cgroup's limit at or below what it uses now is not made: the resize stays in
progress with upstream's error, tried again at each sync.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs

from kubelet.api import Container, Pod, ResourceRequirements, is_restartable_init_container
from kubelet.cgroups import CgroupError, is_pod_level_resources_set
from kubelet.cm import ContainerManager
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    CriError,
    RunningResources,
    RuntimeClient,
    RuntimePodStatus,
    api,
    labels,
)
from kubelet.decisions import decode_resources, linux_container_resources

__all__ = ["RESTART_CONTAINER", "ResizeResult", "Resizer"]

RESTART_CONTAINER = "RestartContainer"
BELOW_USAGE = (
    "Aborting attempt to set pod memory limit less than current memory usage for pod {pod}"
)
"""upstream's error while a shrink would put the pod's memory limit below its usage"""

log = logging.getLogger(__name__)


@attrs.frozen
class ResizeResult:
    """``pending``: some running container is not yet at its allocation; ``error``:
    why the last attempt failed ("" none)."""

    pending: bool = False
    error: str = ""
    acted: bool = False


@attrs.frozen
class _Change:
    container: Container
    info: ContainerInfo
    target: api.LinuxContainerResources
    current: RunningResources


def _resized_containers(pod: Pod) -> Iterator[Container]:
    yield from (c for c in pod.spec.init_containers if is_restartable_init_container(c))
    yield from pod.spec.containers


def _as_running(linux: api.LinuxContainerResources) -> RunningResources:
    return RunningResources(
        cpu_shares=linux.cpu_shares,
        cpu_quota=linux.cpu_quota,
        cpu_period=linux.cpu_period,
        memory_limit=linux.memory_limit_in_bytes,
    )


def _growing(changes: list[_Change]) -> dict[str, bool]:
    """Per resource, whether the containers' changes grow the pod (none: no change)."""
    if not changes:
        return {}
    return {
        "cpu": sum(c.target.cpu_shares for c in changes)
        >= sum(c.current.cpu_shares for c in changes),
        "memory": _total([c.target.memory_limit_in_bytes for c in changes])
        >= _total([c.current.memory_limit for c in changes]),
    }


def _total(values: list[int]) -> float:
    """A sum of limits where 0 (none) is unlimited."""
    return float("inf") if any(v <= 0 for v in values) else float(sum(values))


class Resizer:
    """The pod driver's resize step; remembers what it set on runtimes that do not say."""

    def __init__(self, runtime: RuntimeClient, cm: ContainerManager) -> None:
        self.runtime = runtime
        self.cm = cm
        self._set: dict[str, RunningResources] = {}
        """container ID → what this kubelet last set on it"""

    def _target(self, pod: Pod, container: Container) -> api.LinuxContainerResources:
        return linux_container_resources(
            pod, container, memory_capacity=self.cm.memory_capacity, limits=self.cm.limits
        )

    def _current(
        self, pod: Pod, container: Container, info: ContainerInfo
    ) -> RunningResources | None:
        if info.resources is not None:
            return info.resources
        if info.id in self._set:
            return self._set[info.id]
        recorded = decode_resources(info.annotations.get(labels.CONTAINER_RESOURCES, ""))
        if recorded is None:
            return None  # nothing says: taken as running with its allocation
        made = attrs.evolve(container, resources=recorded or ResourceRequirements())
        return _as_running(self._target(pod, made))

    def changes(self, pod: Pod, status: RuntimePodStatus) -> list[_Change]:
        """The running containers whose CPU or memory is not their allocation's."""
        out = []
        quota = self.cm.limits.cpu_cfs_quota
        for container in _resized_containers(pod):
            info = status.current(container.name)
            if info is None or info.state is not ContainerRunState.RUNNING:
                continue
            current = self._current(pod, container, info)
            if current is None:
                continue
            target = self._target(pod, container)
            differs = (
                current.cpu_shares != target.cpu_shares
                or current.memory_limit != target.memory_limit_in_bytes
                or (quota and current.cpu_quota != target.cpu_quota)
            )
            if differs:
                out.append(_Change(container, info, target, current))
        return out

    def to_restart(self, pod: Pod, status: RuntimePodStatus) -> frozenset[str]:
        """IDs of the running containers and sidecars a resize restarts: a resource that
        changes has the ``RestartContainer`` resize policy."""
        out = set()
        for change in self.changes(pod, status):
            cpu = (change.current.cpu_shares, change.current.cpu_quota) != (
                change.target.cpu_shares,
                change.target.cpu_quota,
            )
            memory = change.current.memory_limit != change.target.memory_limit_in_bytes
            policies = {p.resource_name: p.restart_policy for p in change.container.resize_policy}
            wanted = [r for r, moved in (("cpu", cpu), ("memory", memory)) if moved]
            if any(policies.get(r) == RESTART_CONTAINER for r in wanted):
                out.add(change.info.id)
        return frozenset(out)

    async def resize(
        self, pod: Pod, status: RuntimePodStatus, restarted: frozenset[str] = frozenset()
    ) -> ResizeResult:
        """Bring every running container of ``pod`` (its allocation) to its resources
        (but those ``restarted`` with them)."""
        changes = [c for c in self.changes(pod, status) if c.info.id not in restarted]
        drift = await self.cm.pod_cgroup_drift(pod) if is_pod_level_resources_set(pod) else {}
        if not changes and not drift:
            return ResizeResult()
        growing = _growing(changes)
        growing.update(drift)  # a pod-level resize: its own cgroup says which way
        touched = (
            ("memory", "cpu") if changes else tuple(r for r in ("memory", "cpu") if r in drift)
        )
        if not growing.get("memory", True):
            headroom = await self.cm.pod_memory_headroom(pod)
            if headroom is not None and headroom[1] >= headroom[0]:
                message = BELOW_USAGE.format(pod=pod.metadata.name)
                log.info("pod %s: %s (usage %d, limit %d)", pod.key, message, *headroom[::-1])
                return ResizeResult(pending=True, error=message)
        try:
            for resource in touched:
                if growing.get(resource, True):
                    await self.cm.resize_pod(pod, resource)
            for change in changes:
                await self._update(change)
            for resource in touched:
                if not growing.get(resource, True):
                    await self.cm.resize_pod(pod, resource)
        except CgroupError as exc:
            log.warning("pod %s: resize of the pod cgroup failed: %s", pod.key, exc)
            return ResizeResult(pending=True, error=str(exc), acted=True)
        except CriError as exc:
            log.warning("pod %s: resize refused by the runtime: %s", pod.key, exc)
            return ResizeResult(pending=True, error=str(exc), acted=True)
        if not changes:
            log.info("pod %s: resized the pod cgroup (%s)", pod.key, ", ".join(touched))
            return ResizeResult(acted=True)
        log.info("pod %s: resized %s", pod.key, ", ".join(c.container.name for c in changes))
        return ResizeResult(acted=True)

    async def _update(self, change: _Change) -> None:
        await self.runtime.update_container_resources(change.info.id, linux=change.target)
        self._set[change.info.id] = _as_running(change.target)
