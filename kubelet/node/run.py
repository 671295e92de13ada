"""The node nursery: the lease heartbeat first, then registration and status reports.

``run_node`` is the node component's one entry. The lease is renewed from the start,
so the node is seen alive while registration retries; once the Node object exists (we
created or adopted it, or with ``--register-node=false`` someone else did) its UID is
recorded on the ``NodeIdentity`` and the status loop starts from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import trio

from kubelet.api.client import NODES, ApiClient
from kubelet.api.errors import ApiError
from kubelet.api.node import Taint
from kubelet.config import Options
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.events.recorder import EventRecorder
from kubelet.eviction.run import NodePressure
from kubelet.goformat import rfc3339

from .facts import FactGatherer
from .identity import NodeIdentity
from .lease import ApiLeases, LeaseController
from .machine import MachineInfo
from .registration import default_labels, initial_node, register
from .status import node_status
from .statusloop import NodeStatusReporter

log = logging.getLogger("kubelet.agent")

WAIT_FIRST = 0.1
WAIT_MAX = 7.0


async def run_node(
    options: Options,
    node: NodeIdentity,
    api: ApiClient,
    runtime: RuntimeClient,
    images: ImageClient,
    machine: MachineInfo,
    pleg_health: Callable[[], tuple[bool, str]],
    recorder: EventRecorder,
    wall_clock: Callable[[], float],
    pressure: NodePressure | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Heartbeat, register (or wait for) the Node, then report its status; forever."""
    cfg = options.config
    # the heartbeat's own client: no rate limit, a deadline of one update period
    heartbeat = api.with_limits(-1, 0, timeout=httpx.Timeout(cfg.node_status_update_frequency))
    gatherer = FactGatherer(
        options, runtime, images, pleg_health, machine=machine, node=node, pressure=pressure
    )
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
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(lease.run)
        task_status.started()
        if cfg.register_node:
            found = await _register(options, api, gatherer, wall_clock)
        else:
            found = await _wait_for_node(api, node.name)
        node.uid = str((found.get("metadata") or {}).get("uid") or "") or None
        reporter.seed(found)
        await nursery.start(reporter.run)


async def _register(
    options: Options, api: ApiClient, gatherer: FactGatherer, wall_clock: Callable[[], float]
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
        ),
        labels,
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
