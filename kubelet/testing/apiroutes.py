"""Where a request goes: URL paths to resources, HTTP methods to Kubernetes verbs.

Paths are the real API's: ``/api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]]``,
``/api/v1/{resource}`` (cluster-scoped objects, or a list across namespaces),
``/apis/{group}/{version}/...`` likewise, plus discovery, ``/version`` and health paths.
The verb is upstream's: GET is get, list or watch (``watch=1|true``); POST create; PUT
update; PATCH patch; DELETE delete or deletecollection.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from . import apiresources
from .apiresources import ResourceType

__all__ = ["Route", "parse_route", "verb_of"]

_HEALTH = ("/healthz", "/livez", "/readyz")


@attrs.frozen
class Route:
    """Where a path points: a resource (collection or object) or a non-resource path."""

    rt: ResourceType | None = None
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    special: str = ""  # "discovery", "version", "health", "unknown"
    proxy_path: str = ""
    """``nodes/{name}/proxy/<path>``: the kubelet path (trailing slash kept)"""


def parse_route(path: str) -> Route:
    """Resolve a URL path; unknown paths give ``Route(special="unknown")``."""
    if path in ("/version", "/version/"):
        return Route(special="version")
    if path in _HEALTH or path.startswith(tuple(p + "/" for p in _HEALTH)):
        return Route(special="health")
    segs = [s for s in path.split("/") if s]
    if segs in (["api"], ["apis"], ["api", "v1"]):
        return Route(special="discovery")
    if segs and segs[0] == "api" and len(segs) >= 3 and segs[1] == "v1":
        group, version, rest = "", "v1", segs[2:]
    elif segs and segs[0] == "apis" and len(segs) in (2, 3):
        return Route(special="discovery")
    elif segs and segs[0] == "apis" and len(segs) >= 4:
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return Route(special="unknown")
    if rest[0] == "namespaces" and len(rest) >= 3:
        rt = apiresources.lookup(group, version, rest[2])
        if rt is not None and rt.namespaced and len(rest) <= 5:
            name = rest[3] if len(rest) >= 4 else ""
            sub = rest[4] if len(rest) == 5 else ""
            return _checked(Route(rt, rest[1], name, sub))
    rt = apiresources.lookup(group, version, rest[0])
    if rt is not None and rt.plural == "nodes" and len(rest) >= 3 and rest[2] == "proxy":
        prefix = f"/nodes/{rest[1]}/proxy"
        tail = path[path.index(prefix) + len(prefix) :]
        return Route(rt, "", rest[1], "proxy", proxy_path=tail or "/")
    if rt is None or len(rest) > 3:
        return Route(special="unknown")
    name = rest[1] if len(rest) >= 2 else ""
    sub = rest[2] if len(rest) == 3 else ""
    if rt.namespaced and name:
        return Route(special="unknown")
    return _checked(Route(rt, "", name, sub))


def _checked(route: Route) -> Route:
    if route.subresource and (route.rt is None or route.subresource not in route.rt.subresources):
        return Route(special="unknown")
    return route


def verb_of(method: str, route: Route, query: Mapping[str, str]) -> str:
    if route.rt is None:
        return method.lower()
    named = bool(route.name)
    if method == "GET":
        if named:
            return "get"
        return "watch" if query.get("watch") in ("1", "true") else "list"
    return {
        ("POST", False): "create",
        ("POST", True): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }.get((method, named), method.lower())
