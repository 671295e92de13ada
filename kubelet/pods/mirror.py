"""Mirror pods: the API's read-only copies of this node's static pods.

A mirror pod has the static pod's name, namespace and spec, the annotation
``kubernetes.io/config.mirror=<config.hash>`` and an owner reference to the Node. It is
created when missing, deleted and recreated when the static pod's hash changed or it is
being deleted, and deleted when its static pod goes. Edits to the mirror are never
applied: the manifest on the node is the truth. The status of a static pod is reported
through its mirror.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from kubelet.api import (
    CONFIG_HASH,
    CONFIG_MIRROR,
    CONFIG_SEEN,
    CONFIG_SOURCE,
    PODS,
    AlreadyExists,
    ApiError,
    NotFound,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodStatus,
    to_wire,
)

if TYPE_CHECKING:
    from kubelet.api import ApiClient

log = logging.getLogger(__name__)


def mirrors_static(mirror: Pod, static: Pod) -> bool:
    """The mirror is current: same hash, not being deleted."""
    return mirror.metadata.deletion_timestamp is None and mirror.metadata.annotations.get(
        CONFIG_MIRROR
    ) == static.metadata.annotations.get(CONFIG_HASH)


def mirror_of(static: Pod, node_name: str, node_uid: str | None) -> dict[str, Any]:
    """The mirror pod object to create for ``static``."""
    annotations = {
        k: v
        for k, v in static.metadata.annotations.items()
        if k not in (CONFIG_SOURCE, CONFIG_SEEN)
    }
    annotations[CONFIG_MIRROR] = static.metadata.annotations.get(CONFIG_HASH, static.uid)
    owners: tuple[OwnerReference, ...] = ()
    if node_uid:
        owners = (
            OwnerReference(
                api_version="v1", kind="Node", name=node_name, uid=node_uid, controller=True
            ),
        )
    meta = ObjectMeta(
        name=static.metadata.name,
        namespace=static.metadata.namespace,
        labels=static.metadata.labels,
        annotations=annotations,
        owner_references=owners,
    )
    body: dict[str, Any] = to_wire(attrs.evolve(static, metadata=meta, status=PodStatus()))
    return body


class MirrorClient:
    """Creates and deletes mirror pods; every call is safe to repeat."""

    def __init__(
        self, client: ApiClient, node_name: str, node_uid: Callable[[], str | None]
    ) -> None:
        self._client = client
        self.node_name = node_name
        self._node_uid = node_uid
        self.created = 0

    async def ensure(self, static: Pod, mirror: Pod | None) -> None:
        """Make the API hold a current mirror of ``static``."""
        if mirror is not None and mirrors_static(mirror, static):
            return
        if mirror is not None and mirror.metadata.deletion_timestamp is None:
            log.info("mirror pod of %s is outdated, recreating it", static.key)
            await self.delete(mirror)
        elif mirror is not None:
            return  # being deleted: the REMOVE that follows brings us back here
        try:
            await self._client.create(
                PODS.path(static.metadata.namespace),
                mirror_of(static, self.node_name, self._node_uid()),
            )
            self.created += 1
            log.info("created mirror pod for static pod %s", static.key)
        except AlreadyExists:
            pass

    async def delete(self, mirror: Pod) -> None:
        try:
            await self._client.delete(
                PODS.path(mirror.metadata.namespace, mirror.metadata.name),
                grace_period_seconds=0,
                uid=mirror.uid,
            )
        except NotFound:
            pass
        except ApiError as exc:
            log.warning("could not delete mirror pod %s: %s", mirror.key, exc)
