"""What the container runtime says it can do: its handlers and their features (CRI Status).

Upstream's kubelet keeps the last ``Status`` answer (``runtimeState``) and decides from
it whether a pod asking for a user namespace or for ``supplementalGroupsPolicy: Strict``
can run here. ``RuntimeInfo`` is that memory: read at start, refreshed periodically by
its own task, read synchronously by admission and pod sync.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs
import trio

from kubelet.cri import CriError, RuntimeClient, api

__all__ = ["HandlerFeatures", "RuntimeFeatures", "RuntimeInfo", "features_from_status"]

log = logging.getLogger(__name__)

REFRESH_PERIOD = 30.0


@attrs.frozen
class HandlerFeatures:
    """What one runtime handler (a RuntimeClass ``handler``) supports."""

    user_namespaces: bool = False
    recursive_read_only_mounts: bool = False


@attrs.frozen
class RuntimeFeatures:
    """The runtime's handlers by name and its runtime-wide features."""

    handlers: Mapping[str, HandlerFeatures] = attrs.field(factory=dict)
    supplemental_groups_policy: bool = False
    user_namespaces_host_network: bool = False


def features_from_status(status: api.StatusResponse) -> RuntimeFeatures:
    """The features a CRI ``Status`` answer reports (an older runtime reports none)."""
    handlers = {
        h.name: HandlerFeatures(
            user_namespaces=h.features.user_namespaces,
            recursive_read_only_mounts=h.features.recursive_read_only_mounts,
        )
        for h in status.runtime_handlers
    }
    return RuntimeFeatures(
        handlers=handlers,
        supplemental_groups_policy=status.features.supplemental_groups_policy,
        user_namespaces_host_network=status.features.user_namespaces_host_network,
    )


class RuntimeInfo:
    """The latest ``RuntimeFeatures``; ``run`` keeps it fresh (a runtime may be upgraded
    or reconfigured under a running kubelet)."""

    def __init__(self, features: RuntimeFeatures | None = None) -> None:
        self.features = features or RuntimeFeatures()

    async def refresh(self, runtime: RuntimeClient) -> None:
        """Ask the runtime once; on failure the previous answer stays."""
        try:
            status = await runtime.status()
        except CriError as exc:
            log.info("runtime features not refreshed: %s", exc)
            return
        features = features_from_status(status)
        if features != self.features:
            log.info(
                "runtime handlers %s (user namespaces: %s), supplementalGroupsPolicy %s",
                sorted(features.handlers) or "not reported",
                sorted(n for n, h in features.handlers.items() if h.user_namespaces) or "none",
                "supported" if features.supplemental_groups_policy else "not supported",
            )
        self.features = features

    async def run(
        self,
        runtime: RuntimeClient,
        period: float = REFRESH_PERIOD,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Refresh now, then every ``period`` seconds, until cancelled."""
        await self.refresh(runtime)
        task_status.started()
        while True:
            await trio.sleep(period)
            await self.refresh(runtime)
