"""Discovery and version documents: what clients read before they call anything.

Minimal but real: ``/api`` (APIVersions), ``/api/v1`` and ``/apis/{group}/{version}``
(APIResourceList, subresources included), ``/apis`` (APIGroupList), ``/apis/{group}``
(APIGroup), ``/version``. All built from the ``apiresources`` table.
"""

from __future__ import annotations

from typing import Any

from . import apiresources
from .apiresources import RESOURCES, ResourceType

__all__ = ["discovery", "version_info"]


def version_info(version: str) -> dict[str, str]:
    """What /version answers."""
    major, minor = version.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def discovery(path: str, address: str) -> dict[str, Any] | None:
    """The discovery document at ``path`` (/api, /api/v1, /apis, /apis/{g}[/{v}]), if any."""
    segs = [s for s in path.split("/") if s]
    if segs == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if segs == ["api", "v1"]:
        return _resource_list("v1", [r for r in RESOURCES if not r.group])
    groups = list(apiresources.groups())
    if segs == ["apis"]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(g, v) for g, v in groups],
        }
    if len(segs) == 2:
        for g, v in groups:
            if g == segs[1]:
                return {"kind": "APIGroup", "apiVersion": "v1", **_group(g, v)}
    if len(segs) == 3:
        served = [r for r in RESOURCES if r.group == segs[1] and r.version == segs[2]]
        if served:
            return _resource_list(f"{segs[1]}/{segs[2]}", served)
    return None


def _group(group: str, version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def _resource_list(group_version: str, served: list[ResourceType]) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for r in served:
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.kind.lower(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": sorted(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        resources.append(entry)
        for sub in sorted(r.subresources):
            verbs = ["create"] if sub == "token" else ["get", "patch", "update"]
            kind = "TokenRequest" if sub == "token" else r.kind
            resources.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
