"""The API's resource types, paths and answers as values: what code that never talks to
the API server names (a Resource, a patch type, a watch event) without loading the HTTP
client (``client``), which standalone kubelets do not need."""

from __future__ import annotations

import enum
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

import attrs

from .converter import from_wire

T = TypeVar("T")

MIN_WATCH_TIMEOUT = 300
"""client-go's reflector minWatchTimeout: watches last 5-10 minutes (randomised)."""


# -- paths ----------------------------------------------------------------------------


def api_path(
    api_version: str, resource: str, namespace: str = "", name: str = "", subresource: str = ""
) -> str:
    """The API path of a collection or object.

    ``api_path("v1", "pods", "ns", "p", "status")`` → ``/api/v1/namespaces/ns/pods/p/status``;
    ``api_path("coordination.k8s.io/v1", "leases", "kube-node-lease", "n1")`` →
    ``/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1``;
    no namespace means a cluster-scoped resource (``/api/v1/nodes/n1``) or, for a
    namespaced one, the list across all namespaces (``/api/v1/pods``).
    """
    if not api_version or not resource:
        raise ValueError("api_path needs an api version and a resource")
    if subresource and not name:
        raise ValueError(f"subresource {subresource!r} needs an object name")
    parts = ["/api/v1" if api_version == "v1" else f"/apis/{api_version}"]
    if namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(resource)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


@attrs.frozen
class Resource:
    """A resource type: ``Resource("coordination.k8s.io/v1", "leases")``."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """``api_path`` for this resource; a cluster-scoped one refuses a namespace."""
        if namespace and not self.namespaced:
            raise ValueError(f"{self.plural} are cluster-scoped: no namespace")
        return api_path(self.api_version, self.plural, namespace, name, subresource)


PODS = Resource("v1", "pods")
NODES = Resource("v1", "nodes", namespaced=False)
LEASES = Resource("coordination.k8s.io/v1", "leases")
EVENTS = Resource("v1", "events")
EVENTS_V1 = Resource("events.k8s.io/v1", "events")


class PatchType(enum.StrEnum):
    """Patch content types the API server accepts."""

    STRATEGIC = "application/strategic-merge-patch+json"
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"


# -- results --------------------------------------------------------------------------


@attrs.frozen
class ListPage:
    """A list answer: the items (raw dicts) and the list's metadata."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_: str = ""
    remaining_item_count: int | None = None

    def decode(self, cls: type[T]) -> list[T]:
        """The items as ``cls`` objects (WireError names the bad item and field)."""
        return [from_wire(cls, item) for item in self.items]


@attrs.frozen
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object as sent."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        return rv if isinstance(rv, str) else ""


OnEvent = Callable[[WatchEvent], Awaitable[bool | None]]
"""A watch callback; returning True ends the watch."""


def random_watch_timeout(rng: random.Random | None = None) -> int:
    """client-go's reflector: 5 to 10 minutes, so watches of many clients do not expire
    together."""
    return int(MIN_WATCH_TIMEOUT * ((rng.random() if rng else random.random()) + 1.0))
