"""PersistentVolumeClaim and generic ephemeral volumes: the claim, its volume, the checks.

A pod's ``persistentVolumeClaim`` volume names a claim in the pod's namespace; an
``ephemeral`` volume's claim is ``<pod>-<volume>`` and must be controlled by the pod.
The claim must be bound (``status.phase`` Bound, ``spec.volumeName`` set), not being
deleted, and its PersistentVolume's ``claimRef`` must point back at it (uid). Each
failure is upstream's desired-state populator message, wrapped as
``error processing PVC <ns>/<claim>: ...``; the pod waits and the volume is retried at
every sync (an ephemeral claim not created yet is waited for the same way).

The checks are pure functions over the API objects as JSON; ``resolve_claim`` reads the
two objects through a ``ClaimLookup`` and applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kubelet.api import NotFound, Pod, Volume
from kubelet.decisions import node_selector_terms_match

from .hostpath import VolumeError

if TYPE_CHECKING:
    from kubelet.api import ApiClient

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
READ_ONLY_MANY = "ReadOnlyMany"
RWOP_IN_USE = "volume uses the ReadWriteOncePod access mode and is already in use by another pod"

PV_SOURCES = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
)
"""the PersistentVolumeSource fields of v1"""

Json = Mapping[str, Any]


class ClaimError(VolumeError):
    """The claim or its volume cannot be used (yet): a volume that failed to process."""


class ClaimLookup(Protocol):
    """PersistentVolumeClaims and PersistentVolumes as the API has them (None: missing)."""

    async def claim(self, namespace: str, name: str) -> Json | None: ...

    async def volume(self, name: str) -> Json | None: ...


class ApiClaimLookup:
    """``ClaimLookup`` over the API server: one GET per object, at every use (as the
    ConfigMaps and Secrets of volumes are read)."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def claim(self, namespace: str, name: str) -> Json | None:
        return await self._get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")

    async def volume(self, name: str) -> Json | None:
        return await self._get(f"/api/v1/persistentvolumes/{name}")

    async def _get(self, path: str) -> Json | None:
        try:
            return await self._client.get(path)
        except NotFound:
            return None


@attrs.frozen
class ClaimUse:
    """What a pod volume asks of a claim."""

    name: str
    """the claim's name (in the pod's namespace)"""
    read_only: bool
    """the pod's ``persistentVolumeClaim.readOnly``"""
    ephemeral: bool


@attrs.frozen
class BoundClaim:
    """A claim that passed the checks, and its PersistentVolume."""

    namespace: str
    claim: str
    pv_name: str
    pv: Json
    read_only: bool
    """mounted read-only: the pod's readOnly, or a volume only ReadOnlyMany"""

    @property
    def source_kind(self) -> str | None:
        return pv_source_kind(self.pv)

    @property
    def source(self) -> Json:
        kind = self.source_kind
        spec = _map(self.pv.get("spec"))
        return _map(spec.get(kind)) if kind else {}


def _map(value: Any) -> Json:
    return value if isinstance(value, Mapping) else {}


def claim_use(pod: Pod, volume: Volume) -> ClaimUse | None:
    """The claim a ``persistentVolumeClaim`` or ``ephemeral`` volume uses; None for others."""
    if volume.persistent_volume_claim is not None:
        source = volume.persistent_volume_claim
        return ClaimUse(str(source.get("claimName") or ""), bool(source.get("readOnly")), False)
    if volume.ephemeral is not None:
        return ClaimUse(ephemeral_claim_name(pod, volume), False, True)
    return None


def ephemeral_claim_name(pod: Pod, volume: Volume) -> str:
    """Upstream ``ephemeral.VolumeClaimName``: ``<pod name>-<volume name>``."""
    return f"{pod.metadata.name}-{volume.name}"


def claim_problem(pvc: Json) -> str | None:
    """Why a claim cannot be used by a starting pod (upstream ``getPVCExtractPV``)."""
    metadata, spec, status = (_map(pvc.get(k)) for k in ("metadata", "spec", "status"))
    if metadata.get("deletionTimestamp"):
        return "PVC is being deleted"
    if status.get("phase") != "Bound":
        return "PVC is not bound"
    if not spec.get("volumeName"):
        return "PVC has empty pvc.Spec.VolumeName"
    return None


def ephemeral_owner_problem(pod: Pod, pvc: Json) -> str | None:
    """Upstream ``ephemeral.VolumeIsForPod``: the claim's controller is the pod."""
    metadata = _map(pvc.get("metadata"))
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    owners = metadata.get("ownerReferences")
    controlled = isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("controller") is True and o.get("uid") == pod.uid
        for o in owners
    )
    if namespace != pod.metadata.namespace or not controlled:
        return (
            f"PVC {namespace}/{name} was not created for pod "
            f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
        )
    return None


def volume_problem(pv: Json, name: str, claim_uid: str) -> str | None:
    """Upstream ``getPVSpec``: the volume must be bound back to the claim."""
    ref = _map(pv.get("spec")).get("claimRef")
    if not isinstance(ref, Mapping):
        return (
            f"found PV object {name} but it has a nil pv.Spec.ClaimRef indicating it is not "
            "yet bound to the claim"
        )
    if ref.get("uid", "") != claim_uid:
        return (
            f"found PV object {name} but its pv.Spec.ClaimRef.UID {ref.get('uid', '')} does "
            f"not point to claim.UID {claim_uid}"
        )
    return None


def pv_source_kind(pv: Json) -> str | None:
    """The PersistentVolumeSource field the volume sets (``hostPath``, ``csi``, ...)."""
    spec = _map(pv.get("spec"))
    return next((k for k in PV_SOURCES if spec.get(k) is not None), None)


def access_modes(pv: Json) -> list[str]:
    modes = _map(pv.get("spec")).get("accessModes")
    return [str(m) for m in modes] if isinstance(modes, list) else []


def only_read_write_once_pod(pv: Json) -> bool:
    """Upstream enforces ReadWriteOncePod on the node when it is the volume's only mode
    (with several, which one the pod means is not known)."""
    return access_modes(pv) == [READ_WRITE_ONCE_POD]


def node_affinity_problem(pv: Json, labels: Mapping[str, str]) -> str | None:
    """Upstream ``CheckNodeAffinity``: the volume's required node affinity against this
    node's labels (upstream judges a Node made of its labels alone: no name)."""
    affinity = _map(_map(pv.get("spec")).get("nodeAffinity"))
    required = affinity.get("required")
    if required is None:
        return None
    if not node_selector_terms_match(_map(required).get("nodeSelectorTerms"), labels, None):
        return "no matching NodeSelectorTerms"
    return None


def volume_mode_problem(pv: Json, volume: str, mounted: bool, as_device: bool) -> str | None:
    """A Block volume cannot be mounted, a Filesystem one cannot be a device."""
    mode = str(_map(pv.get("spec")).get("volumeMode") or "Filesystem")
    if mounted and mode == "Block":
        return f"volume {volume} has volumeMode {mode}, but is specified in volumeMounts"
    if as_device and mode != "Block":
        return f"volume {volume} has volumeMode {mode}, but is specified in volumeDevices"
    return None


async def resolve_claim(pod: Pod, volume: Volume, lookup: ClaimLookup) -> BoundClaim:
    """The claim of ``volume`` and its PersistentVolume, checked as upstream's populator
    does; raises ClaimError (``error processing PVC <ns>/<claim>: ...``)."""
    use = claim_use(pod, volume)
    assert use is not None
    namespace = pod.metadata.namespace

    def fail(why: str) -> ClaimError:
        return ClaimError(f"error processing PVC {namespace}/{use.name}: {why}")

    try:
        pvc = await lookup.claim(namespace, use.name)
    except Exception as exc:  # the API client's errors: retried at the next sync
        raise fail(f"failed to fetch PVC from API server: {exc}") from exc
    if pvc is None:
        raise fail(
            f'failed to fetch PVC from API server: persistentvolumeclaims "{use.name}" not found'
        )
    problem = claim_problem(pvc)
    if problem is not None:
        raise fail(problem)
    problem = ephemeral_owner_problem(pod, pvc) if use.ephemeral else None
    if problem is not None:
        raise ClaimError(problem)  # upstream reports this one as it is
    pv_name = str(_map(pvc.get("spec")).get("volumeName"))
    try:
        pv = await lookup.volume(pv_name)
    except Exception as exc:
        raise fail(f"failed to fetch PV {pv_name} from API server: {exc}") from exc
    if pv is None:
        raise fail(
            f'failed to fetch PV {pv_name} from API server: persistentvolumes "{pv_name}" not found'
        )
    problem = volume_problem(pv, pv_name, str(_map(pvc.get("metadata")).get("uid") or ""))
    if problem is not None:
        raise fail(problem)
    read_only = use.read_only or access_modes(pv) == [READ_ONLY_MANY]
    return BoundClaim(namespace, use.name, pv_name, pv, read_only)
