"""The API resources FakeApiServer serves: names, scope, verbs, patch schemas.

One table, read by the router, the store and discovery, so that a path, a kind and a
plural always agree. The strategic-merge schemas list the merge lists upstream declares
on these types (``patchStrategy``/``patchMergeKey`` tags in k8s.io/api and
apimachinery's ObjectMeta); everything else merges as a map or is replaced.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .patching import MergeList, Schema

__all__ = ["RESOURCES", "ResourceType", "by_kind", "groups", "lookup"]

CRUD = frozenset(
    {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)
CREATE_ONLY = frozenset({"create"})

OBJECT_META = Schema(
    {
        "ownerReferences": MergeList("uid"),
        "finalizers": MergeList(None),
    }
)

CONTAINER = Schema(
    {
        "ports": MergeList("containerPort"),
        "env": MergeList("name"),
        "volumeMounts": MergeList("mountPath"),
        "volumeDevices": MergeList("devicePath"),
    }
)

POD = Schema(
    {
        "metadata": OBJECT_META,
        "spec": Schema(
            {
                "volumes": MergeList("name"),
                "initContainers": MergeList("name", CONTAINER),
                "containers": MergeList("name", CONTAINER),
                "ephemeralContainers": MergeList("name", CONTAINER),
                "imagePullSecrets": MergeList("name"),
                "hostAliases": MergeList("ip"),
                "topologySpreadConstraints": MergeList("topologyKey"),
                "schedulingGates": MergeList("name"),
                "resourceClaims": MergeList("name"),
            }
        ),
        # containerStatuses / initContainerStatuses / ephemeralContainerStatuses are
        # listType=atomic upstream: no merge strategy, replaced whole.
        "status": Schema(
            {
                "conditions": MergeList("type"),
                "podIPs": MergeList("ip"),
                "hostIPs": MergeList("ip"),
                "resourceClaimStatuses": MergeList("name"),
            }
        ),
    }
)

NODE = Schema(
    {
        "metadata": OBJECT_META,
        "spec": Schema({"podCIDRs": MergeList(None)}),
        # images, volumesInUse, volumesAttached are listType=atomic upstream.
        "status": Schema({"conditions": MergeList("type"), "addresses": MergeList("type")}),
    }
)

SERVICE = Schema({"metadata": OBJECT_META, "spec": Schema({"ports": MergeList("port")})})
SERVICE_ACCOUNT = Schema(
    {"metadata": OBJECT_META, "secrets": MergeList("name"), "imagePullSecrets": MergeList("name")}
)
NAMESPACE = Schema({"metadata": OBJECT_META, "spec": Schema({"finalizers": MergeList(None)})})
PLAIN = Schema({"metadata": OBJECT_META})

META_FIELDS = ("metadata.name", "metadata.namespace")


@attrs.frozen
class ResourceType:
    """One REST resource: where it lives, what it is called, what may be done to it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str] = CRUD
    subresources: frozenset[str] = frozenset()
    field_labels: tuple[str, ...] = META_FIELDS
    schema: Schema = PLAIN
    short_names: tuple[str, ...] = ()
    # The main resource ignores status and the status subresource ignores the rest.
    has_status: bool = False
    # A graceful DELETE leaves the object with a deletionTimestamp (pods only).
    graceful: bool = False
    # PUT to a missing name creates it (events).
    create_on_update: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def name(self) -> str:
        """The key used in the store, fault plans and the request log (``leases``)."""
        return self.plural

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _pod_fields() -> tuple[str, ...]:
    return (
        *META_FIELDS,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    )


def _event_fields() -> tuple[str, ...]:
    return (
        *META_FIELDS,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    )


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        subresources=frozenset(
            {"status", "ephemeralcontainers", "resize", "exec", "attach", "portforward", "log"}
        ),
        field_labels=_pod_fields(),
        schema=POD,
        short_names=("po",),
        has_status=True,
        graceful=True,
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        subresources=frozenset({"status"}),
        field_labels=(*META_FIELDS, "spec.unschedulable"),
        schema=NODE,
        short_names=("no",),
        has_status=True,
    ),
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        subresources=frozenset({"status"}),
        field_labels=(*META_FIELDS, "status.phase"),
        schema=NAMESPACE,
        short_names=("ns",),
        has_status=True,
    ),
    ResourceType(
        "", "v1", "events", "Event", True, field_labels=_event_fields(), create_on_update=True
    ),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret", True, field_labels=(*META_FIELDS, "type")),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        True,
        subresources=frozenset({"status"}),
        schema=SERVICE,
        short_names=("svc",),
        has_status=True,
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        subresources=frozenset({"token"}),
        schema=SERVICE_ACCOUNT,
        short_names=("sa",),
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        subresources=frozenset({"status"}),
        short_names=("pvc",),
        has_status=True,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        False,
        subresources=frozenset({"status"}),
        short_names=("pv",),
        has_status=True,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        True,
        subresources=frozenset({"status"}),
        has_status=True,
    ),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        False,
        field_labels=(*META_FIELDS, "spec.nodeName", "spec.driver"),
    ),
    ResourceType("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    ResourceType(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        False,
        subresources=frozenset({"status"}),
        has_status=True,
    ),
    ResourceType(
        "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=CREATE_ONLY
    ),
    ResourceType(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        False,
        subresources=frozenset({"approval", "status"}),
        field_labels=(*META_FIELDS, "spec.signerName"),
        short_names=("csr",),
        has_status=True,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        False,
        verbs=CREATE_ONLY,
    ),
)

_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND = {r.kind: r for r in RESOURCES}
_BY_NAME = {r.plural: r for r in RESOURCES} | {r.kind.lower(): r for r in RESOURCES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource served at ``/api[s]/{group}/{version}/.../{plural}``, if any."""
    return _BY_PATH.get((group, version, plural))


def by_kind(kind: str) -> ResourceType:
    """A resource by kind (``Pod``), plural (``pods``) or lower-case kind (``pod``)."""
    found = _BY_KIND.get(kind) or _BY_NAME.get(kind) or _BY_NAME.get(kind.lower())
    if found is None:
        raise KeyError(f"FakeApiServer serves no resource {kind!r}")
    return found


def groups() -> Iterable[tuple[str, str]]:
    """The (group, version) pairs served under /apis, in a stable order."""
    seen: dict[tuple[str, str], None] = {}
    for r in RESOURCES:
        if r.group:
            seen[(r.group, r.version)] = None
    return list(seen)
