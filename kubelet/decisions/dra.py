"""Dynamic resource allocation: which ResourceClaims a pod uses, whether a claim may be
prepared for it, and which of a claim's devices each container gets.

A pod names its claims in ``spec.resourceClaims`` (an existing claim by
``resourceClaimName``, or a template whose generated claim's name the ResourceClaim
controller writes into ``status.resourceClaimStatuses``); the scheduler adds one for
extended resources that DRA provides (``status.extendedResourceClaimStatus``,
DRAExtendedResource). A container uses the claims its ``resources.claims`` lists (one
request of a claim, or all of them); for the extended-resource claim, the requests its
``requestMappings`` give the container. The kubelet (``cm/dra``) reads each claim,
checks it here, has the drivers prepare it and hands the containers the CDI devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from kubelet.api import Container, Pod

from .nodeselector import node_selector_terms_match

__all__ = [
    "FAILED_PREPARE_DYNAMIC_RESOURCES",
    "ClaimError",
    "ClaimRef",
    "cdi_annotation",
    "claim_drivers",
    "claim_refusal",
    "container_claim_requests",
    "pod_claims",
]

FAILED_PREPARE_DYNAMIC_RESOURCES = "FailedPrepareDynamicResources"
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"


class ClaimError(Exception):
    """The pod's claims cannot be resolved yet (the sync fails and is retried)."""


@attrs.frozen
class ClaimRef:
    """One claim a pod uses: the pod's name for it and the ResourceClaim's name."""

    pod_claim: str
    name: str
    must_check_owner: bool
    """generated from a template: the claim must be owned by the pod"""


def _status_claim_name(pod: Pod, pod_claim: str) -> tuple[bool, str]:
    """(found, name) of the generated claim in ``status.resourceClaimStatuses``."""
    for entry in pod.status.resource_claim_statuses:
        if isinstance(entry, Mapping) and entry.get("name") == pod_claim:
            return True, str(entry.get("resourceClaimName") or "")
    return False, ""


def pod_claims(pod: Pod, *, extended: bool = True) -> tuple[ClaimRef, ...]:
    """The claims ``pod`` uses, in spec order, then the extended-resource one.

    A template whose status entry has no name made no claim (nothing to prepare);
    a template with no status entry yet is a ``ClaimError``, as upstream's
    "ResourceClaim not created yet".
    """
    refs: list[ClaimRef] = []
    for claim in pod.spec.resource_claims:
        if not isinstance(claim, Mapping):
            continue
        pod_claim = str(claim.get("name") or "")
        if claim.get("resourceClaimName"):
            refs.append(ClaimRef(pod_claim, str(claim["resourceClaimName"]), False))
            continue
        if not claim.get("resourceClaimTemplateName"):
            raise ClaimError(f'pod "{pod.key}": claim {pod_claim!r} names no claim or template')
        found, name = _status_claim_name(pod, pod_claim)
        if not found:
            raise ClaimError(f'pod "{pod.key}": ResourceClaim not created yet')
        if name:
            refs.append(ClaimRef(pod_claim, name, True))
    status = pod.status.extended_resource_claim_status
    if extended and status and status.get("resourceClaimName"):
        refs.append(ClaimRef("", str(status["resourceClaimName"]), False))
    return tuple(refs)


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def claim_drivers(claim: Mapping[str, Any]) -> tuple[str, ...]:
    """The drivers named in the claim's allocation results, each once, in order."""
    results = _dig(claim, "status", "allocation", "devices", "results") or []
    drivers: dict[str, None] = {}
    for result in results if isinstance(results, list) else []:
        if isinstance(result, Mapping) and result.get("driver"):
            drivers[str(result["driver"])] = None
    return tuple(drivers)


def _allocated_elsewhere(claim: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    """The allocation's node selector (its terms ORed, label and field expressions)
    does not select this node; no selector: the devices are reachable from any node."""
    selector = _dig(claim, "status", "allocation", "nodeSelector")
    if selector is None:
        return False
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    return not node_selector_terms_match(terms, labels, node)


def claim_refusal(
    pod: Pod,
    ref: ClaimRef,
    claim: Mapping[str, Any],
    node: str,
    labels: Mapping[str, str] | None = None,
) -> str | None:
    """Why ``claim`` may not be prepared for ``pod`` on ``node`` with ``labels`` (None:
    it may), with upstream's messages: owned by the pod (generated claims), reserved for
    it, allocated, and to a node selector this node matches."""
    meta = claim.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if ref.must_check_owner:
        owners = meta.get("ownerReferences") or []
        if not any(
            isinstance(o, Mapping) and o.get("uid") == pod.uid and o.get("controller")
            for o in owners
        ):
            return f"ResourceClaim {ref.name} was not created for pod {pod.key} (pod is not owner)"
    reserved = _dig(claim, "status", "reservedFor") or []
    if not any(
        isinstance(r, Mapping) and r.get("resource") == "pods" and r.get("uid") == pod.uid
        for r in reserved
    ):
        return (
            f"pod {pod.metadata.name} ({pod.uid}) is not allowed to use ResourceClaim "
            f"{ref.name} ({uid})"
        )
    if not isinstance(_dig(claim, "status", "allocation"), Mapping):
        return f"ResourceClaim {ref.name}: not allocated"
    if _allocated_elsewhere(claim, node, labels or {}):
        return f"ResourceClaim {ref.name}: allocated to another node than {node}"
    return None


def _requests_extended(container: Container) -> set[str]:
    """The extended resources the container requests (a non-zero quantity)."""
    requests = container.resources.requests if container.resources else {}
    return {
        name
        for name, value in (requests or {}).items()
        if "/" in name
        and not name.startswith(("kubernetes.io/", "requests."))
        and str(value) not in ("0", "")
    }


def container_claim_requests(pod: Pod, container: Container) -> dict[str, list[str]]:
    """ResourceClaim name → the requests of it ``container`` uses ("" for all of them)."""
    wanted: dict[str, list[str]] = {}
    for claim in container.resources.claims if container.resources else ():
        if isinstance(claim, Mapping):
            wanted.setdefault(str(claim.get("name") or ""), []).append(
                str(claim.get("request") or "")
            )
    out: dict[str, list[str]] = {}
    try:
        refs = pod_claims(pod, extended=False)
    except ClaimError:
        refs = ()
    for ref in refs:
        if ref.pod_claim in wanted:
            out.setdefault(ref.name, []).extend(wanted[ref.pod_claim])
    status = pod.status.extended_resource_claim_status
    if status and status.get("resourceClaimName"):
        name = str(status["resourceClaimName"])
        mine = _requests_extended(container)
        for mapping in status.get("requestMappings") or ():
            if (
                isinstance(mapping, Mapping)
                and mapping.get("containerName") == container.name
                and mapping.get("resourceName") in mine
            ):
                out.setdefault(name, []).append(str(mapping.get("requestName") or ""))
    return out


def cdi_annotation(driver: str, claim_uid: str, devices: Sequence[str]) -> tuple[str, str] | None:
    """The ``cdi.k8s.io/<driver>_<claim uid>`` annotation runtimes without the CRI's
    CDI field read (CDI's own convention); None when the key would be invalid (over 63
    characters)."""
    name = f"{driver}_{claim_uid.replace('/', '_')}"
    if not devices or not driver or not claim_uid or len(name) > 63 or not name[0].isalnum():
        return None
    return CDI_ANNOTATION_PREFIX + name, ",".join(devices)


def unique(items: Iterable[str]) -> tuple[str, ...]:
    """``items`` without repeats, in order."""
    return tuple(dict.fromkeys(items))
