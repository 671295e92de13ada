"""Dynamic resource allocation: which of a pod's resource claims would need preparing.

Upstream's kubelet prepares a pod's claims (through the DRA drivers registered on the
node) before it creates the sandbox; until that succeeds the pod waits, with a
``FailedPrepareDynamicResources`` event, and the sync is retried. This kubelet has no DRA
drivers, so a pod with claims is never started without its devices: it waits the same
way, and the event says that DRA is not implemented here and which claims it needed.

The claims are the pod's ``spec.resourceClaims`` and the one the scheduler makes for
extended resources that DRA provides (``status.extendedResourceClaimStatus``,
DRAExtendedResource).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubelet.api import Pod

__all__ = ["FAILED_PREPARE_DYNAMIC_RESOURCES", "claims_to_prepare", "unprepared_message"]

FAILED_PREPARE_DYNAMIC_RESOURCES = "FailedPrepareDynamicResources"


def claims_to_prepare(pod: Pod) -> tuple[str, ...]:
    """The names of the claims ``pod`` needs prepared before its sandbox (empty: none)."""
    names = [
        str(claim.get("name", "")) if isinstance(claim, Mapping) else ""
        for claim in pod.spec.resource_claims
    ]
    extended = pod.status.extended_resource_claim_status
    if extended:
        names.append(str(extended.get("resourceClaimName", "")) or "extended resources")
    return tuple(name or "unnamed" for name in names)


def unprepared_message(claims: tuple[str, ...]) -> str:
    """The event message (after upstream's "Failed to prepare dynamic resources: ")."""
    return (
        "dynamic resource allocation is not implemented by this kubelet; the pod needs "
        f"resource claims: {', '.join(claims)}"
    )
