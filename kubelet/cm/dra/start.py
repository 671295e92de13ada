"""The DRA manager started under the container manager: its registration handler, the
checkpoint read back, the start-up wipe of stale ResourceSlices, the reconcile pass."""

from __future__ import annotations

import trio

from kubelet.config import features

from ..capabilities import ResourceManager
from ..parts import CmParts
from .health import HealthCache
from .manager import DraManager, DraParts
from .registration import DraRegistration
from .state import Checkpoint


async def start_dra(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
    metrics, gates = parts.metrics, parts.options.features
    registration = DraRegistration(
        nursery,
        parts.node_name,
        parts.api,
        observe=metrics.observe_dra_grpc if metrics is not None else None,
        health=(
            HealthCache(messages=gates.enabled(features.RESOURCE_HEALTH_STATUS_MESSAGE))
            if gates.enabled(features.RESOURCE_HEALTH_STATUS)
            else None
        ),
    )
    manager = DraManager(
        DraParts(
            registration=registration,
            api=parts.api,
            node_name=parts.node_name,
            node_labels=parts.node_labels,
            checkpoint=Checkpoint(parts.options.root_dir),
            active=parts.active,
            observe=metrics.observe_dra_operation if metrics is not None else None,
            health_changed=parts.health_changed,
        )
    )
    await manager.restore(parts.file_io)
    if metrics is not None:
        metrics.dra_claims_in_use(manager.claims_in_use)
    registration.wipe_unregistered()
    nursery.start_soon(manager.run_reconcile)
    nursery.start_soon(_close_when_stopped, registration)
    return manager


async def _close_when_stopped(registration: DraRegistration) -> None:
    """The drivers' connections are dropped when the kubelet stops (a restarted kubelet
    in the same process connects anew)."""
    try:
        await trio.sleep_forever()
    finally:
        registration.close()
