"""Gathering NodeFacts: the machine, the runtime's health and images, the PLEG, disks.

The I/O half of node status (status.py is the pure half). Runtime problems are turned
into upstream's Ready messages here: "container runtime is down", "container runtime not
ready: RuntimeReady=false reason:… message:…", "container runtime network not ready:
NetworkReady=false reason:… message:…", "PLEG is not healthy: …".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from kubelet.api import format_quantity, parse_quantity
from kubelet.cm import NodeResources
from kubelet.config import Options
from kubelet.cri import CriError, ImageClient, RuntimeClient, priority_lane
from kubelet.eviction import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE, NodePressure
from kubelet.version import KUBERNETES_VERSION

from .declared import declared_features
from .identity import NodeIdentity
from .machine import MachineInfo, filesystem_stats
from .maxpods import max_pods
from .status import Image, NodeFacts


def eviction_bytes(threshold: str | None, capacity: int) -> int:
    """A hard eviction threshold ("100Mi" or "10%") in bytes of ``capacity``."""
    if not threshold:
        return 0
    if threshold.endswith("%"):
        return int(capacity * float(threshold[:-1]) / 100)
    return int(parse_quantity(threshold).value())


def summed_reservations(*reservations: Mapping[str, str]) -> dict[str, str]:
    """``systemReserved`` + ``kubeReserved``, resource by resource (upstream adds them)."""
    total: dict[str, Fraction] = {}
    for reserved in reservations:
        for name, value in reserved.items():
            total[name] = total.get(name, Fraction(0)) + parse_quantity(value).amount
    return {name: format_quantity(amount) for name, amount in total.items()}


def runtime_problems(conditions: dict[str, tuple[bool, str, str]]) -> tuple[list[str], list[str]]:
    """(runtime errors, network errors) from the CRI Status conditions."""
    runtime: list[str] = []
    network: list[str] = []
    ok, reason, message = conditions.get("RuntimeReady", (False, "", "missing condition"))
    if not ok:
        runtime.append(
            f"container runtime not ready: RuntimeReady=false reason:{reason} message:{message}"
        )
    ok, reason, message = conditions.get("NetworkReady", (False, "", "missing condition"))
    if not ok:
        network.append(
            f"container runtime network not ready: NetworkReady=false reason:{reason} "
            f"message:{message}"
        )
    return runtime, network


class FactGatherer:
    """Collects NodeFacts for one status computation."""

    def __init__(
        self,
        options: Options,
        runtime: RuntimeClient,
        images: ImageClient,
        pleg_health: Callable[[], tuple[bool, str]],
        *,
        machine: MachineInfo,
        node: NodeIdentity,
        shutdown_status: Callable[[], str | None] = lambda: None,
        pressure: NodePressure | None = None,
        extended: Callable[[], NodeResources] | None = None,
        volumes_in_use: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.options = options
        self.runtime = runtime
        self.images = images
        self.pleg_health = pleg_health
        self.machine = machine
        self.hostname = node.hostname
        self.node_ips = node.ips
        self.shutdown_status = shutdown_status
        self.pressure = pressure or NodePressure()
        self.extended = extended
        """the container manager's extended resources (device plugins')"""
        self.volumes_in_use = volumes_in_use

    async def gather(self) -> NodeFacts:
        cfg = self.options.config
        runtime_errors: list[str] = []
        network_errors: list[str] = []
        runtime_name = runtime_version = ""
        try:
            with priority_lane():  # the Ready condition must not queue behind pod workers
                version = await self.runtime.version()
                status = await self.runtime.status()
            runtime_name, runtime_version = version.runtime_name, version.runtime_version
            conditions = {c.type: (c.status, c.reason, c.message) for c in status.status.conditions}
            runtime_errors, network_errors = runtime_problems(conditions)
        except CriError:
            runtime_errors = ["container runtime is down"]
        healthy, why = self.pleg_health()
        if not healthy:
            runtime_errors.append(f"PLEG is not healthy: {why}")
        shutting_down = self.shutdown_status()
        if shutting_down:  # after the runtime's and network's, as upstream's Ready condition
            network_errors.append(shutting_down)
        images: list[Image] = []
        try:
            with priority_lane():
                listed = await self.images.list_images()
            for image in listed:
                names = (*image.repo_digests, *image.repo_tags)
                images.append(Image(names=tuple(names), size_bytes=image.size))
        except CriError:
            pass
        fs = filesystem_stats(self.options.root_dir)  # one statfs of a local disk: fast
        reserved = summed_reservations(cfg.system_reserved, cfg.kube_reserved)
        extended = self.extended() if self.extended is not None else NodeResources()
        return NodeFacts(
            extended_capacity=extended.capacity,
            extended_allocatable=extended.allocatable,
            machine=self.machine,
            node_ips=self.node_ips,
            hostname=self.hostname,
            max_pods=max_pods(cfg, self.machine.num_cores),
            ephemeral_storage_bytes=fs.capacity_bytes,
            reserved=reserved,
            eviction_memory_bytes=eviction_bytes(
                cfg.eviction_hard.get("memory.available"), self.machine.memory_bytes
            ),
            eviction_nodefs_bytes=eviction_bytes(
                cfg.eviction_hard.get("nodefs.available"), fs.capacity_bytes
            ),
            runtime_name=runtime_name,
            runtime_version=runtime_version,
            kubelet_version=KUBERNETES_VERSION,
            kubelet_port=cfg.port,
            declared_features=declared_features(
                self.options.features, cpu_manager_policy=self.options.config.cpu_manager_policy
            ),
            images=tuple(images),
            max_images=cfg.node_status_max_images,
            runtime_errors=tuple(runtime_errors),
            network_errors=tuple(network_errors),
            external_cloud_provider=self.options.cloud_provider == "external",
            node_ip_given=bool(self.options.node_ip),
            memory_pressure=self.pressure.has(MEMORY_PRESSURE),
            disk_pressure=self.pressure.has(DISK_PRESSURE),
            pid_pressure=self.pressure.has(PID_PRESSURE),
            volumes_in_use=tuple(self.volumes_in_use()),
        )
