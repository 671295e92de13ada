"""The API pod source: pods bound to this node, listed and watched, sent as SET(api).

A reflector keeps the set (list, then watch from its resourceVersion; 410 or an ERROR
event ⇒ relist; other failures ⇒ back off and resume), and every change sends the full
current list, so PodConfig's SET semantics turn it into ADD / UPDATE / DELETE / REMOVE
without a pod ever being lost or duplicated across relists and API outages. Mirror pods
(the API's copies of our static pods) come through too; the syncLoop keeps them apart.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from kubelet.api import (
    PODS,
    ListWatch,
    Pod,
    UidStore,
    from_wire,
    label_errors,
    reflect,
    subdomain_errors,
)

from .podconfig import API_SOURCE, PodOperation, UpdateSink

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)


def decode_pod(raw: dict[str, Any]) -> Pod:
    """A pod from the API; ``ValueError`` (the store logs and skips it) for one whose name
    is no DNS-1123 subdomain or whose namespace no DNS-1123 label, as the API server
    requires: such a name cannot be trusted in the URLs of its status and mirror pod."""
    pod = from_wire(Pod, raw)
    for field, errors in (
        ("metadata.name", subdomain_errors(pod.metadata.name)),
        ("metadata.namespace", label_errors(pod.metadata.namespace)),
    ):
        if errors:
            raise ValueError(f"{field}: {'; '.join(errors)}")
    return pod


class ApiSource:
    """The pods bound to this node, as the API server holds them (a reflector)."""

    def __init__(self, client: ApiClient, node_name: str) -> None:
        self.client = client
        self.node_name = node_name
        self.store: UidStore[Pod] | None = None

    async def run(
        self, config: UpdateSink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Feed ``config`` until cancelled; started at once (an API outage at start-up
        must not hold the kubelet up: static pods run meanwhile)."""
        config.register(API_SOURCE)

        async def on_change(pods: list[Pod]) -> None:
            await config.update(API_SOURCE, PodOperation.SET, pods)

        self.store = UidStore(on_change, decode=decode_pod)
        target = ListWatch(PODS.path(), field_selector=f"spec.nodeName={self.node_name}")
        task_status.started()
        await reflect(self.client, target, self.store)
