"""``v1.PodResourcesLister`` on ``<root-dir>/pod-resources/kubelet.sock``, as upstream 1.36.

List (GA), GetAllocatableResources (GA) and Get (``KubeletPodResourcesGet``, GA) answer
what this kubelet knows: the active pods (not Succeeded or Failed), each with its regular
containers and, first, its sidecars (restartable init containers), as upstream, with
the device plugins' devices each container holds (one entry per device and NUMA node, as
upstream), the CPUs the CPU manager gave it alone (``cpu_ids``), the memory the
memory manager bound to NUMA nodes (``memory``) and (``KubeletPodResourcesDynamicResources``,
GA) the ResourceClaims it names with their drivers' devices and CDI IDs
(``dynamic_resources``); GetAllocatableResources lists the healthy devices, the CPUs the
CPU manager may give (all but the reserved ones with the static policy) and each NUMA
node's allocatable memory per type (the Static memory policy). Upstream's rate limit
applies to the whole server: 100 calls a second, bursts of 10; beyond it a call fails
``ResourceExhausted`` / ``rejected by rate limit``. ``Get`` for a pod the kubelet does not
run fails ``Unknown`` / ``pod <name> in namespace <ns> not found``; with the gate off,
``PodResources API Get method disabled``. A request over gRPC's default 4 MiB fails
``ResourceExhausted`` without being read, as upstream's server (which keeps that default).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from kubelet.api import Container, Pod, is_restartable_init_container
from kubelet.cm import AssignedClaim, AssignedDevice, AssignedMemory
from kubelet.cri import start_unix_server, stop_unix_server
from kubelet.volumes import POD_RESOURCES_DIR

from . import podresources_api_pb2 as pb
from .podresources_api_grpc import PodResourcesListerBase

log = logging.getLogger(__name__)

SOCKET_NAME = "kubelet.sock"
QPS = 100.0
BURST = 10
RATE_LIMITED = "rejected by rate limit"
MAX_REQUEST_BYTES = 4 * 1024 * 1024


class TokenBucket:
    """``golang.org/x/time/rate``'s limiter as upstream uses it: ``qps`` tokens a second,
    at most ``burst`` saved up; each call takes one or is refused."""

    def __init__(
        self, qps: float = QPS, burst: int = BURST, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.qps, self.burst, self._clock = qps, burst, clock
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class Assigned(Protocol):
    """What the resource managers gave and may give (the container manager answers)."""

    def container_devices(self, pod_uid: str, container: str) -> Sequence[AssignedDevice]: ...

    def allocatable_devices(self) -> Sequence[AssignedDevice]: ...

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]: ...

    def allocatable_cpus(self) -> frozenset[int]: ...

    def container_memory(self, pod_uid: str, container: str) -> Sequence[AssignedMemory]: ...

    def allocatable_memory(self) -> Sequence[AssignedMemory]: ...

    def dynamic_resources(self, pod: Pod, container: Container) -> Sequence[AssignedClaim]: ...


class _Nothing:
    def container_devices(self, pod_uid: str, container: str) -> Sequence[AssignedDevice]:
        return ()

    def allocatable_devices(self) -> Sequence[AssignedDevice]:
        return ()

    def exclusive_cpus(self, pod_uid: str, container: str) -> frozenset[int]:
        return frozenset()

    def allocatable_cpus(self) -> frozenset[int]:
        return frozenset()

    def container_memory(self, pod_uid: str, container: str) -> Sequence[AssignedMemory]:
        return ()

    def allocatable_memory(self) -> Sequence[AssignedMemory]:
        return ()

    def dynamic_resources(self, pod: Pod, container: Container) -> Sequence[AssignedClaim]:
        return ()


def _active(pods: Sequence[Pod]) -> list[Pod]:
    return [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]


def container_devices(devices: Sequence[AssignedDevice]) -> list[pb.ContainerDevices]:
    return [
        pb.ContainerDevices(
            resource_name=d.resource_name,
            device_ids=[d.device_id],
            topology=None
            if d.numa_node is None
            else pb.TopologyInfo(nodes=[pb.NUMANode(ID=d.numa_node)]),
        )
        for d in devices
    ]


def container_memory(blocks: Sequence[AssignedMemory]) -> list[pb.ContainerMemory]:
    return [
        pb.ContainerMemory(
            memory_type=b.memory_type,
            size=b.size,
            topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in b.numa_nodes]),
        )
        for b in blocks
    ]


def dynamic_resources(claims: Sequence[AssignedClaim]) -> list[pb.DynamicResource]:
    return [
        pb.DynamicResource(
            claim_name=c.name,
            claim_namespace=c.namespace,
            claim_resources=[
                pb.ClaimResource(
                    cdi_devices=[pb.CDIDevice(name=i) for i in d.cdi_ids],
                    driver_name=d.driver,
                    pool_name=d.pool,
                    device_name=d.device,
                )
                for d in c.devices
            ],
        )
        for c in claims
    ]


def pod_resources(
    pod: Pod, assigned: Assigned | None = None, *, claims: bool = True
) -> pb.PodResources:
    """A pod as the API reports it: sidecars, then regular containers, each with its
    devices, exclusive CPUs and (``claims``: KubeletPodResourcesDynamicResources) the
    ResourceClaims it uses."""
    given = assigned or _Nothing()
    sidecars = [c for c in pod.spec.init_containers if is_restartable_init_container(c)]
    containers = [*sidecars, *pod.spec.containers]
    uid = pod.metadata.uid
    return pb.PodResources(
        name=pod.metadata.name,
        namespace=pod.metadata.namespace,
        containers=[
            pb.ContainerResources(
                name=c.name,
                devices=container_devices(given.container_devices(uid, c.name)),
                cpu_ids=sorted(given.exclusive_cpus(uid, c.name)),
                memory=container_memory(given.container_memory(uid, c.name)),
                dynamic_resources=dynamic_resources(given.dynamic_resources(pod, c))
                if claims
                else [],
            )
            for c in containers
        ],
    )


class Lister(PodResourcesListerBase):
    """The service; ``pods`` and ``pod_by_name`` are the kubelet's pod manager."""

    def __init__(
        self,
        pods: Callable[[], Sequence[Pod]],
        pod_by_name: Callable[[str, str], Pod | None],
        *,
        get_enabled: bool = True,
        dynamic_enabled: bool = True,
        limiter: TokenBucket | None = None,
        assigned: Assigned | None = None,
        observer: Callable[[str, bool], None] | None = None,
    ) -> None:
        self._pods, self._pod_by_name = pods, pod_by_name
        self._assigned = assigned or _Nothing()
        self._observer = observer
        """Told of each call past the rate limit: (list | get | get_allocatable, failed)."""
        self._get_enabled = get_enabled
        self._dynamic_enabled = dynamic_enabled
        self._limiter = limiter or TokenBucket()

    def _admit(self) -> None:
        if not self._limiter.allow():
            raise GRPCError(Status.RESOURCE_EXHAUSTED, RATE_LIMITED)

    def _observe(self, method: str, failed: bool) -> None:
        if self._observer is not None:
            self._observer(method, failed)

    async def List(self, stream: Any) -> None:
        await stream.recv_message()
        self._admit()
        self._observe("list", False)
        items = [
            pod_resources(p, self._assigned, claims=self._dynamic_enabled)
            for p in _active(self._pods())
        ]
        await stream.send_message(pb.ListPodResourcesResponse(pod_resources=items))

    async def GetAllocatableResources(self, stream: Any) -> None:
        await stream.recv_message()
        self._admit()
        self._observe("get_allocatable", False)
        response = pb.AllocatableResourcesResponse(
            devices=container_devices(self._assigned.allocatable_devices()),
            cpu_ids=sorted(self._assigned.allocatable_cpus()),
            memory=container_memory(self._assigned.allocatable_memory()),
        )
        await stream.send_message(response)

    async def Get(self, stream: Any) -> None:
        request = await stream.recv_message()
        self._admit()
        pod = self._pod_by_name(request.pod_namespace, request.pod_name)
        self._observe("get", not self._get_enabled or pod is None)
        if not self._get_enabled:
            raise GRPCError(Status.UNKNOWN, "PodResources API Get method disabled")
        if pod is None:
            message = f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            raise GRPCError(Status.UNKNOWN, message)
        await stream.send_message(
            pb.GetPodResourcesResponse(
                pod_resources=pod_resources(pod, self._assigned, claims=self._dynamic_enabled)
            )
        )


def socket_path(root_dir: str) -> str:
    return os.path.join(root_dir, POD_RESOURCES_DIR, SOCKET_NAME)


async def serve_pod_resources(
    root_dir: str,
    lister: Lister,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the socket path ("" when it cannot listen).

    A stale socket is replaced, as upstream's listener does. Upstream exits when it
    cannot listen; here the error is logged and the rest of the kubelet runs on.
    """
    path = socket_path(root_dir)
    try:
        server = await start_unix_server([lister], path, MAX_REQUEST_BYTES)
    except (OSError, RuntimeError) as exc:
        log.error("Failed to create listener for podResources endpoint %s: %s", path, exc)
        task_status.started("")
        return
    log.info("Starting to serve the podresources API endpoint=unix://%s", path)
    task_status.started(path)
    try:
        await trio.sleep_forever()
    finally:
        await stop_unix_server(server, path)
