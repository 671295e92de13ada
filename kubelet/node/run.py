"""The node nursery: shutdown watch, lease, certificates, registration, status reports.

``run_node`` is the node component's one entry. The shutdown manager (when a grace
period is configured) watches logind, standalone too. With an API server the lease is
renewed from the start, so the node is seen alive while registration retries; the
client certificate manager (``rotateCertificates``) and the serving one
(``serverTLSBootstrap``) run beside it; once the Node object exists (we created or
adopted it, or with ``--register-node=false`` someone else did) its UID is recorded on
the ``NodeIdentity`` and the status loop starts from it. The serving certificate's SANs
are the addresses the status loop last reported.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio
from prometheus_client.registry import CollectorRegistry

from kubelet.api import NODES, ApiError, NodeAddress, Taint
from kubelet.cm import ContainerManager
from kubelet.config import (
    KUBELET_REGISTRATION_GET_ON_EXISTS_ONLY,
    SHUTDOWN_BY_POD_PRIORITY,
    Options,
)
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.events import NORMAL, EventRecorder, node_ref
from kubelet.eviction import NodePressure
from kubelet.goformat import rfc3339

from .facts import FactGatherer
from .identity import NodeIdentity
from .lease import ApiLeases, LeaseController
from .machine import MachineInfo
from .registration import default_labels, initial_node, register
from .shutdown import (
    PodTerminator,
    PriorityPeriod,
    ShutdownManager,
    ShutdownPod,
    ShutdownRecord,
    periods,
)
from .startup import NodeStartup
from .status import node_status
from .statusloop import NodeStatusReporter
from .watch import NodeWatch, newest

if TYPE_CHECKING:
    from kubelet.api import ApiClient

if TYPE_CHECKING:  # cluster mode's certificates and HTTP client load when it starts
    from .certificates import CertificateManager, RotatingTransport

log = logging.getLogger("kubelet.agent")

WAIT_FIRST = 0.1
WAIT_MAX = 7.0


@attrs.frozen
class NodeHandle:
    """What the node component hands the others: the serving certificate manager (the
    :10250 listener follows it) and the shutdown manager (admission reads it)."""

    serving: CertificateManager | None = None
    shutdown: ShutdownManager | None = None
    reporter: NodeStatusReporter | None = None
    """the status reporter, whose ``node`` is the Node as the kubelet last wrote it"""
    watch: NodeWatch | None = None
    """the Node as the API server last sent it (its watch)"""

    def api_node(self) -> dict[str, Any] | None:
        """The Node as admission reads it (labels, taints, allocatable): the newer of
        the watch's and the status reporter's copies; None standalone or unregistered."""
        return newest(
            self.watch.node if self.watch is not None else None,
            self.reporter.node if self.reporter is not None else None,
        )


@attrs.frozen(kw_only=True)
class NodeParts:
    """What ``run_node`` is made from: the clients, the machine, the PLEG's health,
    where events and metrics go, the API client's rotating transport (client certificate
    rotation), the pod side of a shutdown, and the node's pressure conditions."""

    options: Options
    node: NodeIdentity
    api: ApiClient | None
    runtime: RuntimeClient
    images: ImageClient
    machine: MachineInfo
    pleg_health: Callable[[], tuple[bool, str]]
    recorder: EventRecorder
    wall_clock: Callable[[], float]
    registry: CollectorRegistry
    transport: RotatingTransport | None = None
    active_pods: Callable[[], Sequence[ShutdownPod]] = list
    terminator: PodTerminator | None = None
    pressure: NodePressure | None = None
    """the eviction manager's pressure conditions, reported in node status"""
    started: float = 0.0
    """when the kubelet started (wall clock; the node startup figures)"""
    boot: float | None = None
    """when the machine booted, on the same clock (None: unknown)"""
    cm: ContainerManager | None = None
    """the container manager: its extended resources are reported, and a change of
    them (a device plugin came or went) reports status at once"""
    volumes_in_use: Callable[[], Sequence[str]] = tuple
    """attachable volumes in use (``status.volumesInUse``): the CSI volume plugin's"""


async def run_node(
    parts: NodeParts,
    *,
    task_status: trio.TaskStatus[NodeHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Watch for the machine's shutdown; with an API server, also heartbeat, register (or
    wait for) the Node, report its status and keep its certificates fresh; forever."""
    shutdown = _shutdown_manager(parts)
    async with trio.open_nursery() as nursery:
        if shutdown is not None:
            await nursery.start(shutdown.run)
        if parts.api is None:
            task_status.started(NodeHandle(shutdown=shutdown))
            return
        await _run_cluster_node(parts, parts.api, shutdown, nursery, task_status)


async def _run_cluster_node(
    parts: NodeParts,
    api: ApiClient,
    shutdown: ShutdownManager | None,
    nursery: trio.Nursery,
    task_status: trio.TaskStatus[NodeHandle],
) -> None:
    options, node, recorder, wall_clock = (
        parts.options,
        parts.node,
        parts.recorder,
        parts.wall_clock,
    )
    import httpx

    from .certificates import serving_manager

    cfg = options.config
    # the heartbeat's own client: no rate limit, a deadline of one update period
    heartbeat = api.with_limits(-1, 0, timeout=httpx.Timeout(cfg.node_status_update_frequency))
    gatherer = FactGatherer(
        options,
        parts.runtime,
        parts.images,
        parts.pleg_health,
        machine=parts.machine,
        node=node,
        shutdown_status=shutdown.shutdown_status if shutdown is not None else lambda: None,
        pressure=parts.pressure,
        extended=parts.cm.extended if parts.cm is not None else None,
        volumes_in_use=parts.volumes_in_use,
    )
    addresses = _ReportedAddresses()
    startup = NodeStartup(parts.registry, wall_clock, parts.started, parts.boot)
    serving = serving_manager(options, api, addresses.get, parts.registry, wall_clock)
    if serving is not None:
        addresses.changed = serving.template_changed
    lease = LeaseController(
        ApiLeases(heartbeat),
        node.name,
        duration=cfg.node_lease_duration_seconds,
        node_uid=node.owner_uid,
        wall_clock=wall_clock,
    )
    reporter = NodeStatusReporter(
        heartbeat,
        node.name,
        gatherer.gather,
        update_frequency=cfg.node_status_update_frequency,
        report_frequency=cfg.node_status_report_frequency,
        recorder=recorder,
        wall_clock=wall_clock,
        on_reported=functools.partial(_reported, addresses, startup),
    )
    if shutdown is not None:
        shutdown.node_status_changed = reporter.poke
    if parts.cm is not None:
        parts.cm.changed.subscribe(reporter.poke)
    await nursery.start(lease.run)
    watch = NodeWatch(api, node.name)
    await nursery.start(watch.run)
    await _start_client_rotation(options, api, parts, wall_clock, nursery)
    if serving is not None:
        await nursery.start(serving.run)
    handle = NodeHandle(serving=serving, shutdown=shutdown, reporter=reporter, watch=watch)
    task_status.started(handle)
    if cfg.register_node:
        found = await _register(options, api, gatherer, wall_clock, startup)
    else:
        found = await _wait_for_node(api, node.name)
    node.uid = str((found.get("metadata") or {}).get("uid") or "") or None
    reporter.seed(found)
    addresses.update(found)
    await nursery.start(reporter.run)


async def _start_client_rotation(
    options: Options,
    api: ApiClient,
    parts: NodeParts,
    wall_clock: Callable[[], float],
    nursery: trio.Nursery,
) -> None:
    """``rotateCertificates``: the client certificate manager, the API client's new
    connections following it, and the exit when no valid certificate is left."""
    from kubelet.api import ApiClient

    from .certificates import ClientCertificateWatch, ClientRotation, client_manager

    if parts.transport is not None:  # retired pools closed (also after an exec plugin's
        await nursery.start(parts.transport.run)  # new certificate)
    manager = client_manager(options, api.connection, parts.registry, wall_clock, ApiClient.open)
    if manager is None:
        return
    if parts.transport is not None:
        rotation = ClientRotation(api.connection, parts.transport)
        nursery.start_soon(rotation.follow, manager.subscribe())
    await nursery.start(manager.run)
    await nursery.start(ClientCertificateWatch(manager, wall_clock).run)


def _shutdown_manager(parts: NodeParts) -> ShutdownManager | None:
    """Graceful node shutdown, when a grace period is configured."""
    options, recorder, wall_clock = parts.options, parts.recorder, parts.wall_clock
    node_name = parts.node.name
    cfg = options.config
    groups = periods(
        [
            PriorityPeriod(p.priority, p.shutdown_grace_period_seconds)
            for p in cfg.shutdown_grace_period_by_pod_priority
        ],
        cfg.shutdown_grace_period,
        cfg.shutdown_grace_period_critical_pods,
        by_priority_gate=options.features.enabled(SHUTDOWN_BY_POD_PRIORITY),
    )
    if not groups or parts.terminator is None:
        return None
    record = None
    if options.features.enabled(SHUTDOWN_BY_POD_PRIORITY):  # upstream's enableMetrics
        record = ShutdownRecord(options.root_dir, parts.registry, wall_clock)
        record.load()
    from .shutdown import LogindBus  # the D-Bus client: only with a grace period

    return ShutdownManager(
        groups,
        active_pods=parts.active_pods,
        terminator=parts.terminator,
        connect=LogindBus.open,
        record_event=lambda reason, message: recorder.record(
            node_ref(node_name), NORMAL, reason, message
        ),
        now_rfc3339=lambda: rfc3339(wall_clock()),
        record=record,
    )


@attrs.define
class _ReportedAddresses:
    """The node's addresses as last reported (the serving certificate's SANs); tells
    ``changed`` when they change."""

    addresses: tuple[NodeAddress, ...] = ()
    changed: Callable[[], None] = lambda: None

    def get(self) -> tuple[NodeAddress, ...]:
        return self.addresses

    def update(self, node: dict[str, Any]) -> None:
        raw = ((node.get("status") or {}).get("addresses")) or []
        found = tuple(
            NodeAddress(type=str(a.get("type", "")), address=str(a.get("address", "")))
            for a in raw
            if isinstance(a, dict)
        )
        if found != self.addresses:
            self.addresses = found
            self.changed()


def _reported(addresses: _ReportedAddresses, startup: NodeStartup, found: dict[str, Any]) -> None:
    """A node status was written: its addresses (serving certificate) and Ready (startup)."""
    addresses.update(found)
    startup.reported(found)


async def _register(
    options: Options,
    api: ApiClient,
    gatherer: FactGatherer,
    wall_clock: Callable[[], float],
    startup: NodeStartup,
) -> dict[str, Any]:
    """Create the Node (or adopt the one that exists) with its first status."""
    cfg = options.config
    first = node_status(None, await gatherer.gather(), rfc3339(wall_clock()))
    labels = default_labels(
        gatherer.hostname, gatherer.machine.operating_system, gatherer.machine.architecture
    )
    taints = tuple(
        Taint(key=t.key, value=t.value, effect=t.effect) for t in cfg.register_with_taints
    )
    return await register(
        api,
        lambda: initial_node(
            options.node_name,
            labels={**labels, **options.node_labels},
            taints=taints,
            provider_id=cfg.provider_id,
            status=first,
            external_cloud_provider=options.cloud_provider == "external",
            node_ip=options.node_ip,
        ),
        labels,
        startup=startup,
        get_on_exists_only=options.features.enabled(KUBELET_REGISTRATION_GET_ON_EXISTS_ONLY),
    )


async def _wait_for_node(api: ApiClient, name: str) -> dict[str, Any]:
    """--register-node=false: someone else registers the node; wait until it exists."""
    delay = WAIT_FIRST
    while True:
        try:
            return await api.get(NODES.path(name=name))
        except ApiError as exc:
            log.info("waiting for node %s to be registered: %s", name, exc)
        await trio.sleep(delay)
        delay = min(delay * 2, WAIT_MAX)
