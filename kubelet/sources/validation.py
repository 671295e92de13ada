"""A pragmatic subset of upstream's ValidatePodCreate, plus the static-pod-only checks.

Messages follow upstream's field errors (``spec.restartPolicy: Unsupported value:
"Sometimes": supported values: "Always", "OnFailure", "Never"``) so that what users
search for matches what upstream would have said. Paths use wire names, so the manifest
decoder can point at the line that holds the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from kubelet.api import (
    QUALIFIED_NAME_RE,
    SUBDOMAIN_MAX_LENGTH,
    SUBDOMAIN_MSG,
    SUBDOMAIN_RE,
    Container,
    ContainerPort,
    ContainerRestartRule,
    LifecycleHandler,
    Pod,
    PodSpec,
    Probe,
    VolumeMount,
    is_restartable_init_container,
    label_errors,
    subdomain_errors,
)

_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_IANA_SVC_RE = re.compile(r"[-a-z0-9]+")

RESTART_POLICIES = ("Always", "OnFailure", "Never")
RULE_OPERATORS = ("In", "NotIn")
MAX_RESTART_RULES = 20
MAX_RULE_EXIT_CODES = 255
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
PROTOCOLS = ("SCTP", "TCP", "UDP")
MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
PROC_MOUNTS = ("Default", "Unmasked")
HOSTNAME_OVERRIDE_MAX_LENGTH = 64
"""what the kernel's hostname holds"""

_NO_VALUE = object()


@attrs.frozen
class PodValidationOptions:
    """The part of upstream's ``PodValidationOptions`` that the kubelet's gates set."""

    container_restart_rules: bool = True
    """``ContainerRestartRules``: a container's own restartPolicy and its rules."""
    restart_all_containers: bool = True
    """``RestartAllContainersOnContainerExits``: the ``RestartAllContainers`` action, and
    rules on sidecars."""


DEFAULT_VALIDATION = PodValidationOptions()
"""1.36's defaults: both gates on."""


@attrs.frozen
class FieldError:
    """One validation failure, printed the way upstream's field.Error prints."""

    path: str
    kind: str
    """"Required value", "Invalid value", "Unsupported value", "Duplicate value", ..."""
    value: object = _NO_VALUE
    detail: str = ""

    def __str__(self) -> str:
        body = self.kind
        if self.value is not _NO_VALUE:
            shown = json.dumps(self.value) if isinstance(self.value, str) else str(self.value)
            body += f": {shown}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.path}: {body}"


def _required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail=detail)


FS_GROUP_CHANGE_POLICIES = ("OnRootMismatch", "Always")


def _unsupported(path: str, value: str, allowed: Iterable[str]) -> FieldError:
    supported = ", ".join(json.dumps(v) for v in allowed)
    return FieldError(path, "Unsupported value", value, f"supported values: {supported}")


def _dns(path: str, value: str, *, subdomain: bool) -> Iterator[FieldError]:
    """Upstream's ValidateDNS1123Label/Subdomain: one Invalid value per failed rule."""
    for message in subdomain_errors(value) if subdomain else label_errors(value):
        yield FieldError(path, "Invalid value", value, message)


def _port(path: str, value: int) -> Iterator[FieldError]:
    if not 1 <= value <= 65535:
        yield FieldError(path, "Invalid value", value, "must be between 1 and 65535, inclusive")


def _port_name(path: str, name: str) -> Iterator[FieldError]:
    if len(name) > 15:
        yield FieldError(path, "Invalid value", name, "must be no more than 15 characters")
    if not _IANA_SVC_RE.fullmatch(name) or not re.search("[a-z]", name):
        yield FieldError(
            path,
            "Invalid value",
            name,
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-) "
            "and at least one letter (a-z)",
        )
    elif name.startswith("-") or name.endswith("-") or "--" in name:
        yield FieldError(
            path,
            "Invalid value",
            name,
            "must not begin or end with a hyphen, or contain adjacent hyphens",
        )


def _nonnegative(path: str, value: int | None) -> Iterator[FieldError]:
    if value is not None and value < 0:
        yield FieldError(path, "Invalid value", value, "must be greater than or equal to 0")


def _qualified_name(path: str, key: str) -> Iterator[FieldError]:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not SUBDOMAIN_RE.fullmatch(prefix)):
        yield FieldError(path, "Invalid value", key, "prefix part " + SUBDOMAIN_MSG)
    if not name or len(name) > 63 or not QUALIFIED_NAME_RE.fullmatch(name):
        yield FieldError(
            path,
            "Invalid value",
            key,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character, and be no more than 63 characters",
        )


# -- the pod ---------------------------------------------------------------------------------


def validate_pod(pod: Pod, opts: PodValidationOptions = DEFAULT_VALIDATION) -> list[FieldError]:
    """What ValidatePodCreate would reject, as far as this kubelet models the pod."""
    return [*_metadata(pod), *_spec(pod.spec, opts)]


def _metadata(pod: Pod) -> Iterator[FieldError]:
    meta = pod.metadata
    if not meta.name:
        yield _required("metadata.name", "name or generateName is required")
    else:
        yield from _dns("metadata.name", meta.name, subdomain=True)
    if not meta.namespace:
        yield _required("metadata.namespace")
    else:
        yield from _dns("metadata.namespace", meta.namespace, subdomain=False)
    for key, value in meta.labels.items():
        yield from _qualified_name("metadata.labels", key)
        if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
            yield FieldError(
                "metadata.labels",
                "Invalid value",
                value,
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character, and "
                "be no more than 63 characters",
            )
    for key in meta.annotations:
        yield from _qualified_name("metadata.annotations", key.lower())


def _spec(spec: PodSpec, opts: PodValidationOptions) -> Iterator[FieldError]:
    volumes: set[str] = set()
    for i, volume in enumerate(spec.volumes):
        path = f"spec.volumes[{i}].name"
        if not volume.name:
            yield _required(path)
        else:
            yield from _dns(path, volume.name, subdomain=False)
            if volume.name in volumes:
                yield FieldError(path, "Duplicate value", volume.name)
            volumes.add(volume.name)
    if not spec.containers:
        yield _required("spec.containers")
    names: set[str] = set()
    for field, group in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, ctr in enumerate(group):
            path = f"spec.{field}[{i}]"
            init = field == "initContainers"
            yield from _container(path, ctr, names, volumes, spec, init=init)
            yield from _restart_fields(path, ctr, opts, init=init)
    if spec.ephemeral_containers:
        # only the ephemeralcontainers subresource adds them, never a created pod
        yield FieldError("spec.ephemeralContainers", "Forbidden", detail="cannot be set on create")
    if spec.restart_policy not in RESTART_POLICIES:
        yield _unsupported("spec.restartPolicy", spec.restart_policy, RESTART_POLICIES)
    if spec.dns_policy not in DNS_POLICIES:
        yield _unsupported("spec.dnsPolicy", spec.dns_policy, DNS_POLICIES)
    elif spec.dns_policy == "None" and spec.dns_config is None:
        yield _required("spec.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None")
    yield from _nonnegative(
        "spec.terminationGracePeriodSeconds", spec.termination_grace_period_seconds
    )
    deadline = spec.active_deadline_seconds
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        yield FieldError(
            "spec.activeDeadlineSeconds",
            "Invalid value",
            deadline,
            "must be between 1 and 2147483647, inclusive",
        )
    policy = spec.security_context.fs_group_change_policy if spec.security_context else None
    if policy is not None and policy not in FS_GROUP_CHANGE_POLICIES:
        yield _unsupported(
            "spec.securityContext.fsGroupChangePolicy", policy, FS_GROUP_CHANGE_POLICIES
        )
    yield from _hostname_fields(spec)


def _hostname_fields(spec: PodSpec) -> Iterator[FieldError]:
    """hostname and subdomain are DNS labels; hostnameOverride is a DNS subdomain of at
    most 64 characters that excludes setHostnameAsFQDN and hostNetwork."""
    if spec.hostname:
        yield from _dns("spec.hostname", spec.hostname, subdomain=False)
    if spec.subdomain:
        yield from _dns("spec.subdomain", spec.subdomain, subdomain=False)
    override = spec.hostname_override
    if override is None:
        return
    path = "spec.hostnameOverride"
    if spec.set_hostname_as_fqdn:
        yield FieldError(
            path, "Forbidden", detail="may not be specified when setHostnameAsFQDN is true"
        )
    if spec.host_network:
        yield FieldError(path, "Forbidden", detail="may not be specified when hostNetwork is true")
    yield from _dns(path, override, subdomain=True)  # says so when over 253 characters
    if HOSTNAME_OVERRIDE_MAX_LENGTH < len(override) <= SUBDOMAIN_MAX_LENGTH:
        yield FieldError(
            path,
            "Invalid value",
            override,
            f"must be no more than {HOSTNAME_OVERRIDE_MAX_LENGTH} characters",
        )


def _container(
    path: str, ctr: Container, names: set[str], volumes: set[str], spec: PodSpec, *, init: bool
) -> Iterator[FieldError]:
    if not ctr.name:
        yield _required(f"{path}.name")
    else:
        yield from _dns(f"{path}.name", ctr.name, subdomain=False)
        if ctr.name in names:
            yield FieldError(f"{path}.name", "Duplicate value", ctr.name)
        names.add(ctr.name)
    if not ctr.image:
        yield _required(f"{path}.image")
    elif ctr.image != ctr.image.strip():
        yield FieldError(
            f"{path}.image",
            "Invalid value",
            ctr.image,
            "must not have leading or trailing whitespace",
        )
    if ctr.image_pull_policy not in PULL_POLICIES:
        yield _unsupported(f"{path}.imagePullPolicy", ctr.image_pull_policy, PULL_POLICIES)
    if ctr.termination_message_policy not in TERMINATION_MESSAGE_POLICIES:
        yield _unsupported(
            f"{path}.terminationMessagePolicy",
            ctr.termination_message_policy,
            TERMINATION_MESSAGE_POLICIES,
        )
    yield from _container_parts(path, ctr, volumes, spec, init=init)


def _restart_fields(
    path: str, ctr: Container, opts: PodValidationOptions, *, init: bool
) -> Iterator[FieldError]:
    """``restartPolicy`` and ``restartPolicyRules`` as upstream checks them under the
    gates: with ``ContainerRestartRules`` any container may set Always, OnFailure or
    Never (Always on an init container makes it a sidecar), and rules need a policy."""
    if not opts.container_restart_rules:
        yield from _restart_fields_without_rules(path, ctr, init=init)
        return
    policy = ctr.restart_policy
    if init and policy == "Always":
        if ctr.restart_policy_rules and not opts.restart_all_containers:
            yield FieldError(
                f"{path}.restartPolicyRules",
                "Forbidden",
                detail="may not be set for init containers with restartPolicy=Always",
            )
            return
    elif policy is None:
        if ctr.restart_policy_rules:
            yield _required(
                f"{path}.restartPolicy", "must specify restartPolicy when restart rules are used"
            )
    elif policy not in RESTART_POLICIES:
        yield _unsupported(f"{path}.restartPolicy", policy, RESTART_POLICIES)
    yield from _restart_rules(path, ctr.restart_policy_rules, opts)


def _restart_fields_without_rules(path: str, ctr: Container, *, init: bool) -> Iterator[FieldError]:
    """The gate off: only a sidecar's ``Always``. Rules are refused rather than dropped,
    so that a manifest never says more than the kubelet does."""
    if ctr.restart_policy is not None:
        if not init:
            yield FieldError(
                f"{path}.restartPolicy",
                "Forbidden",
                detail="may not be set for non-init containers",
            )
        elif ctr.restart_policy != "Always":
            yield _unsupported(f"{path}.restartPolicy", ctr.restart_policy, ("Always",))
    if ctr.restart_policy_rules:
        yield FieldError(
            f"{path}.restartPolicyRules",
            "Forbidden",
            detail="may not be set when the ContainerRestartRules feature gate is disabled",
        )


def _restart_rules(
    path: str, rules: tuple[ContainerRestartRule, ...], opts: PodValidationOptions
) -> Iterator[FieldError]:
    if len(rules) > MAX_RESTART_RULES:
        yield _too_many(f"{path}.restartPolicyRules", len(rules), MAX_RESTART_RULES)
    actions = ("Restart", "RestartAllContainers") if opts.restart_all_containers else ("Restart",)
    for i, rule in enumerate(rules):
        at = f"{path}.restartPolicyRules[{i}]"
        if rule.action not in actions:
            yield _unsupported(f"{at}.action", rule.action, actions)
        codes = rule.exit_codes
        if codes is None:
            yield _required(f"{at}.exitCodes", "must be specified")
            continue
        if codes.operator not in RULE_OPERATORS:
            yield _unsupported(f"{at}.exitCodes.operator", codes.operator, RULE_OPERATORS)
        if len(codes.values) > MAX_RULE_EXIT_CODES:
            yield _too_many(f"{at}.exitCodes.values", len(codes.values), MAX_RULE_EXIT_CODES)


def _too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError(path, "Too many", count, f"must have at most {limit} items")


def _container_parts(
    path: str, ctr: Container, volumes: set[str], spec: PodSpec, *, init: bool
) -> Iterator[FieldError]:
    """Ports, probes, lifecycle handlers, volume mounts and env of one container."""
    sidecar = init and is_restartable_init_container(ctr)
    for j, port in enumerate(ctr.ports):
        yield from _container_port(f"{path}.ports[{j}]", port, spec)
    for field, probe in (
        ("livenessProbe", ctr.liveness_probe),
        ("readinessProbe", ctr.readiness_probe),
        ("startupProbe", ctr.startup_probe),
    ):
        if probe is None:
            continue
        if init and not sidecar:
            yield FieldError(
                f"{path}.{field}",
                "Forbidden",
                detail="may not be set for init containers without restartPolicy=Always",
            )
            continue
        yield from _probe(f"{path}.{field}", probe, single_success=field != "readinessProbe")
    if ctr.lifecycle is not None:
        for field, handler in (
            ("postStart", ctr.lifecycle.post_start),
            ("preStop", ctr.lifecycle.pre_stop),
        ):
            if handler is not None:
                yield from _handler(f"{path}.lifecycle.{field}", handler)
    for j, mount in enumerate(ctr.volume_mounts):
        yield from _volume_mount(f"{path}.volumeMounts[{j}]", mount, ctr, volumes)
    yield from _proc_mount(f"{path}.securityContext.procMount", ctr, spec)
    for j, env in enumerate(ctr.env):
        if not env.name:
            yield _required(f"{path}.env[{j}].name")


def _volume_mount(
    path: str, mount: VolumeMount, ctr: Container, volumes: set[str]
) -> Iterator[FieldError]:
    """Name, path and propagation: ``Bidirectional`` shares mounts back to the host, so
    only a privileged container may ask for it."""
    if not mount.name:
        yield _required(f"{path}.name")
    elif mount.name not in volumes:
        yield FieldError(f"{path}.name", "Not found", mount.name)
    if not mount.mount_path:
        yield _required(f"{path}.mountPath")
    propagation = mount.mount_propagation
    if propagation is None:
        return
    if propagation not in MOUNT_PROPAGATIONS:
        yield _unsupported(f"{path}.mountPropagation", propagation, MOUNT_PROPAGATIONS)
    privileged = ctr.security_context is not None and bool(ctr.security_context.privileged)
    if propagation == "Bidirectional" and not privileged:
        yield FieldError(
            f"{path}.mountPropagation",
            "Forbidden",
            detail="Bidirectional mount propagation is available only to privileged containers",
        )


def _proc_mount(path: str, ctr: Container, spec: PodSpec) -> Iterator[FieldError]:
    """An unmasked ``/proc`` only inside the pod's own user namespace."""
    proc_mount = ctr.security_context.proc_mount if ctr.security_context else None
    if proc_mount is None:
        return
    if proc_mount not in PROC_MOUNTS:
        yield _unsupported(path, proc_mount, PROC_MOUNTS)
    elif proc_mount == "Unmasked" and spec.host_users is not False:
        yield FieldError(
            path, "Invalid value", proc_mount, "`hostUsers` must be false to use `Unmasked`"
        )


def _container_port(path: str, port: ContainerPort, spec: PodSpec) -> Iterator[FieldError]:
    yield from _port(f"{path}.containerPort", port.container_port)
    if port.host_port:
        yield from _port(f"{path}.hostPort", port.host_port)
        if spec.host_network and port.host_port != port.container_port:
            yield FieldError(
                f"{path}.hostPort",
                "Invalid value",
                port.host_port,
                "must match `containerPort` when `hostNetwork` is true",
            )
    if port.protocol not in PROTOCOLS:
        yield _unsupported(f"{path}.protocol", port.protocol, PROTOCOLS)
    if port.name:
        yield from _port_name(f"{path}.name", port.name)


def _probe(path: str, probe: Probe, *, single_success: bool) -> Iterator[FieldError]:
    handlers = [
        (name, value)
        for name, value in (
            ("exec", probe.exec),
            ("httpGet", probe.http_get),
            ("tcpSocket", probe.tcp_socket),
            ("grpc", probe.grpc),
        )
        if value is not None
    ]
    yield from _one_handler(path, handlers)
    for field, value in (
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ):
        yield from _nonnegative(f"{path}.{field}", value)
    if single_success and probe.success_threshold != 1:
        yield FieldError(
            f"{path}.successThreshold", "Invalid value", probe.success_threshold, "must be 1"
        )
    if (
        probe.termination_grace_period_seconds is not None
        and probe.termination_grace_period_seconds <= 0
    ):
        yield FieldError(
            f"{path}.terminationGracePeriodSeconds",
            "Invalid value",
            probe.termination_grace_period_seconds,
            "must be greater than 0",
        )
    if probe.grpc is not None:
        yield from _port(f"{path}.grpc.port", probe.grpc.port)


def _handler(path: str, handler: LifecycleHandler) -> Iterator[FieldError]:
    handlers = [
        (name, value)
        for name, value in (
            ("exec", handler.exec),
            ("httpGet", handler.http_get),
            ("tcpSocket", handler.tcp_socket),
            ("sleep", handler.sleep),
        )
        if value is not None
    ]
    yield from _one_handler(path, handlers)
    if handler.sleep is not None:
        yield from _nonnegative(f"{path}.sleep.seconds", handler.sleep.seconds)


def _one_handler(path: str, handlers: list[tuple[str, Any]]) -> Iterator[FieldError]:
    if not handlers:
        yield _required(path, "must specify a handler type")
        return
    if len(handlers) > 1:
        yield FieldError(
            f"{path}.{handlers[1][0]}",
            "Forbidden",
            detail="may not specify more than 1 handler type",
        )
    name, action = handlers[0]
    if name == "exec" and not action.command:
        yield _required(f"{path}.exec.command")
    if name in ("httpGet", "tcpSocket"):
        port = action.port
        if isinstance(port, int):
            yield from _port(f"{path}.{name}.port", port)
        else:
            yield from _port_name(f"{path}.{name}.port", port)


# -- static pods only -------------------------------------------------------------------------

API_FREE_VOLUME_TYPES = frozenset(
    {
        "awsElasticBlockStore",
        "azureDisk",
        "cephfs",
        "cinder",
        "downwardAPI",
        "emptyDir",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "gitRepo",
        "hostPath",
        "image",
        "iscsi",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    }
)
_API_VOLUMES = {
    "configMap": "configmaps (via configmap volumes)",
    "secret": "secrets (via secret volumes)",
    "csi": "csidrivers (via CSI volumes)",
    "glusterfs": "endpoints (via glusterFS volumes)",
    "persistentVolumeClaim": "persistentvolumeclaims",
    "ephemeral": "persistentvolumeclaims (via ephemeral volumes)",
    "azureFile": "secrets (via azureFile volumes)",
}
_API_PROJECTIONS = {
    "configMap": "configmaps (via projected volumes)",
    "secret": "secrets (via projected volumes)",
    "serviceAccountToken": "serviceaccounts (via projected volumes)",
    "clusterTrustBundle": "clustertrustbundles",
    "podCertificate": "podcertificates",
}
_SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos")


class UnknownVolumeError(ValueError):
    """A volume (or projection) of a type nobody knows: upstream refuses to guess."""


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from _dicts(spec.get(field))


def _refers_to(spec: Mapping[str, Any], kind: str) -> bool:
    """Upstream's VisitPodSecretNames / VisitPodConfigmapNames, answering yes or no."""
    ref, key_ref, volume, projection = (
        ("secretRef", "secretKeyRef", "secret", "secret")
        if kind == "secret"
        else ("configMapRef", "configMapKeyRef", "configMap", "configMap")
    )
    if kind == "secret" and spec.get("imagePullSecrets"):
        return True
    for ctr in _containers(spec):
        if any(ref in src for src in _dicts(ctr.get("envFrom"))):
            return True
        if any(_get(env, "valueFrom", key_ref) is not None for env in _dicts(ctr.get("env"))):
            return True
    for vol in _dicts(spec.get("volumes")):
        if vol.get(volume) is not None:
            return True
        if any(
            src.get(projection) is not None for src in _dicts(_get(vol, "projected", "sources"))
        ):
            return True
        if kind == "secret":
            if vol.get("azureFile") is not None or _get(vol, "csi", "nodePublishSecretRef"):
                return True
            if any(_get(vol, name, "secretRef") for name in _SECRET_REF_VOLUMES):
                return True
    return False


def api_object_reference(raw: Mapping[str, Any]) -> str | None:
    """The API resource a static pod (as decoded, before our model drops keys) refers to.

    Static pods run before (and without) the API server, so upstream refuses them
    (``static pods may not reference <resource>``). Raises UnknownVolumeError for a volume
    or projection type it cannot classify.
    """
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        return "serviceaccounts"
    if _refers_to(spec, "secret"):
        return "secrets"
    if _refers_to(spec, "configMap"):
        return "configmaps"
    if spec.get("resourceClaims"):
        return "resourceclaims"
    for vol in _dicts(spec.get("volumes")):
        kinds = [k for k, v in vol.items() if k != "name" and v is not None]
        for kind in kinds:
            if kind in _API_VOLUMES:
                return _API_VOLUMES[kind]
        if "projected" in kinds:
            for src in _dicts(_get(vol, "projected", "sources")):
                present = [k for k, v in src.items() if v is not None]
                for kind in present:
                    if kind in _API_PROJECTIONS:
                        return _API_PROJECTIONS[kind]
                if "downwardAPI" not in present:
                    raise UnknownVolumeError(
                        f"unknown source for projected volume {vol.get('name')!r}"
                    )
        elif not any(k in API_FREE_VOLUME_TYPES for k in kinds) and kinds:
            raise UnknownVolumeError(f"unknown volume type for volume {vol.get('name')!r}")
    return None


SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}


def static_pod_priority_warning(spec: PodSpec) -> str | None:
    """Why a static pod's priority settings may break its mirror pod, or None."""
    if spec.priority is None and spec.priority_class_name:
        return (
            "Static Pod has non-nil PriorityClassName and nil Priority. Kubelet will not make "
            "use of the priority. Mirror pod creation may fail."
        )
    if spec.priority is not None and not spec.priority_class_name:
        return (
            "Static Pod has Priority set without PriorityClassName. Mirror Pod creation may fail "
            "if the default priority class doesn't match the given priority"
        )
    if (
        spec.priority is not None
        and SYSTEM_PRIORITY_CLASSES.get(spec.priority_class_name) != spec.priority
    ):
        return (
            "Static Pod has non-standard values for Priority and PriorityClassName. Mirror Pod "
            "may be attempted to be evicted from the node ineffectively"
        )
    return None
