"""The Pod and what it is made of, as far as the kubelet reads or reports it.

Field names follow the v1 API (snake_case here, camelCase on the wire). Parts the
kubelet does not interpret yet (affinity, volume sources, ...) are kept as raw JSON so
that nothing a manifest says is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NewType

import attrs

from kubelet.goformat import parse_time

from .meta import ObjectMeta

CONFIG_SOURCE = "kubernetes.io/config.source"
"""Which source a pod came from: ``file``, ``http`` or ``api`` (set by the pod config)."""
CONFIG_SEEN = "kubernetes.io/config.seen"
CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_MIRROR = "kubernetes.io/config.mirror"
"""On a mirror pod: the hash of the static pod it mirrors."""
API_SOURCE = "api"

Quantity = NewType("Quantity", str)
"""A resource quantity as written ("100m", "64Mi", "1"); see kubelet.api.quantity."""


# -- containers ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContainerPort:
    container_port: int
    name: str = ""
    host_port: int | None = None
    protocol: str = "TCP"
    host_ip: str = ""


@attrs.frozen(kw_only=True)
class ObjectFieldSelector:
    field_path: str
    api_version: str = ""


@attrs.frozen(kw_only=True)
class ResourceFieldSelector:
    resource: str
    container_name: str = ""
    divisor: Quantity | None = None


@attrs.frozen(kw_only=True)
class KeySelector:
    key: str
    name: str = ""
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class FileKeySelector:
    """A key of an env file in one of the pod's emptyDir volumes (gate EnvFiles)."""

    volume_name: str
    path: str
    key: str
    optional: bool | None = None


@attrs.frozen(kw_only=True)
class EnvVarSource:
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: KeySelector | None = None
    secret_key_ref: KeySelector | None = None
    file_key_ref: FileKeySelector | None = None


@attrs.frozen(kw_only=True)
class EnvVar:
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


@attrs.frozen(kw_only=True)
class EnvFromSource:
    prefix: str = ""
    config_map_ref: Mapping[str, Any] | None = None
    secret_ref: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ResourceRequirements:
    limits: Mapping[str, Quantity] = attrs.field(factory=dict)
    requests: Mapping[str, Quantity] = attrs.field(factory=dict)
    claims: tuple[Any, ...] = ()


@attrs.frozen(kw_only=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool | None = None
    sub_path: str = ""
    sub_path_expr: str = ""
    mount_propagation: str | None = None
    recursive_read_only: str | None = None


@attrs.frozen(kw_only=True)
class ExecAction:
    command: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class HTTPHeader:
    name: str
    value: str


@attrs.frozen(kw_only=True)
class HTTPGetAction:
    port: int | str
    path: str = ""
    host: str = ""
    scheme: str = "HTTP"
    http_headers: tuple[HTTPHeader, ...] = ()


@attrs.frozen(kw_only=True)
class TCPSocketAction:
    port: int | str
    host: str = ""


@attrs.frozen(kw_only=True)
class GRPCAction:
    port: int
    service: str | None = None


@attrs.frozen(kw_only=True)
class SleepAction:
    seconds: int


@attrs.frozen(kw_only=True)
class Probe:
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: int = 0
    timeout_seconds: int = 1
    period_seconds: int = 10
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace_period_seconds: int | None = None


@attrs.frozen(kw_only=True)
class LifecycleHandler:
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    sleep: SleepAction | None = None


@attrs.frozen(kw_only=True)
class Lifecycle:
    post_start: LifecycleHandler | None = None
    pre_stop: LifecycleHandler | None = None
    stop_signal: str | None = None


@attrs.frozen(kw_only=True)
class Capabilities:
    add: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SecurityContext:
    privileged: bool | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    capabilities: Capabilities | None = None
    proc_mount: str | None = None
    se_linux_options: Mapping[str, Any] | None = None
    seccomp_profile: Mapping[str, Any] | None = None
    app_armor_profile: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ContainerRestartRuleOnExitCodes:
    """A rule's condition: the exit code is ``In`` (or ``NotIn``) ``values``."""

    operator: str = ""
    values: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class ContainerRestartRule:
    """One of a container's ``restartPolicyRules`` (``ContainerRestartRules``): when its
    condition matches the exit code, ``action`` (``Restart``) is what happens."""

    action: str = ""
    exit_codes: ContainerRestartRuleOnExitCodes | None = None


@attrs.frozen(kw_only=True)
class ContainerResizePolicy:
    """How a resource of the container is resized in place: ``NotRequired`` (the
    default: applied while it runs) or ``RestartContainer`` (it is restarted)."""

    resource_name: str = ""
    restart_policy: str = ""


@attrs.frozen(kw_only=True)
class Container:
    name: str
    image: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    ports: tuple[ContainerPort, ...] = ()
    env_from: tuple[EnvFromSource, ...] = ()
    env: tuple[EnvVar, ...] = ()
    resources: ResourceRequirements | None = None
    resize_policy: tuple[ContainerResizePolicy, ...] = ()
    restart_policy: str | None = None
    restart_policy_rules: tuple[ContainerRestartRule, ...] = ()
    """Checked in order on each exit, before ``restart_policy`` (decisions/restart.py); a
    ``RestartAllContainers`` rule makes the pod need a node feature this kubelet does not
    declare (node/declared.py)."""
    volume_mounts: tuple[VolumeMount, ...] = ()
    volume_devices: tuple[Any, ...] = ()
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    lifecycle: Lifecycle | None = None
    termination_message_path: str = ""
    termination_message_policy: str = ""
    image_pull_policy: str = ""
    security_context: SecurityContext | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


def is_restartable_init_container(container: Container) -> bool:
    """A sidecar: an init container with ``restartPolicy: Always`` (asked of init
    containers only: a regular container may carry a restart policy of its own)."""
    return container.restart_policy == "Always"


@attrs.frozen(kw_only=True)
class EphemeralContainer(Container):
    """A debugging container added to a running pod through the ``ephemeralcontainers``
    subresource; ``target_container_name`` names the container whose process namespace
    it joins."""

    target_container_name: str = ""


# -- pod spec -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Toleration:
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


@attrs.frozen(kw_only=True)
class PodDNSConfigOption:
    name: str = ""
    value: str | None = None


@attrs.frozen(kw_only=True)
class PodDNSConfig:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[PodDNSConfigOption, ...] = ()


@attrs.frozen(kw_only=True)
class HostAlias:
    ip: str = ""
    hostnames: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class PodSecurityContext:
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    supplemental_groups: tuple[int, ...] = ()
    fs_group: int | None = None
    fs_group_change_policy: str | None = None
    sysctls: tuple[Mapping[str, str], ...] = ()
    se_linux_options: Mapping[str, Any] | None = None
    seccomp_profile: Mapping[str, Any] | None = None
    app_armor_profile: Mapping[str, Any] | None = None
    supplemental_groups_policy: str | None = None


@attrs.frozen(kw_only=True)
class Volume:
    """A volume: its name, and its source kept as raw JSON until volume plugins land."""

    name: str
    host_path: Mapping[str, Any] | None = None
    empty_dir: Mapping[str, Any] | None = None
    config_map: Mapping[str, Any] | None = None
    secret: Mapping[str, Any] | None = None
    projected: Mapping[str, Any] | None = None
    downward_api: Mapping[str, Any] | None = attrs.field(
        default=None, metadata={"wire": "downwardAPI"}
    )
    persistent_volume_claim: Mapping[str, Any] | None = None
    csi: Mapping[str, Any] | None = None
    ephemeral: Mapping[str, Any] | None = None
    nfs: Mapping[str, Any] | None = None
    image: Mapping[str, Any] | None = None
    # the other v1 VolumeSource types: kept so that a volume of a type the kubelet does
    # not provide is refused by name, never taken for a volume without a source
    aws_elastic_block_store: Mapping[str, Any] | None = None
    azure_disk: Mapping[str, Any] | None = None
    azure_file: Mapping[str, Any] | None = None
    cephfs: Mapping[str, Any] | None = None
    cinder: Mapping[str, Any] | None = None
    fc: Mapping[str, Any] | None = None
    flex_volume: Mapping[str, Any] | None = None
    flocker: Mapping[str, Any] | None = None
    gce_persistent_disk: Mapping[str, Any] | None = None
    git_repo: Mapping[str, Any] | None = None
    glusterfs: Mapping[str, Any] | None = None
    iscsi: Mapping[str, Any] | None = None
    photon_persistent_disk: Mapping[str, Any] | None = None
    portworx_volume: Mapping[str, Any] | None = None
    quobyte: Mapping[str, Any] | None = None
    rbd: Mapping[str, Any] | None = None
    scale_io: Mapping[str, Any] | None = attrs.field(default=None, metadata={"wire": "scaleIO"})
    storageos: Mapping[str, Any] | None = None
    vsphere_volume: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class PodReadinessGate:
    condition_type: str


@attrs.frozen(kw_only=True)
class PodSpec:
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    ephemeral_containers: tuple[EphemeralContainer, ...] = ()
    volumes: tuple[Volume, ...] = ()
    restart_policy: str = ""
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str = ""
    dns_config: PodDNSConfig | None = None
    node_selector: Mapping[str, str] = attrs.field(factory=dict)
    service_account_name: str = ""
    service_account: str = ""
    automount_service_account_token: bool | None = None
    node_name: str = ""
    host_network: bool | None = None
    host_pid: bool | None = None
    host_ipc: bool | None = None
    share_process_namespace: bool | None = None
    security_context: PodSecurityContext | None = None
    image_pull_secrets: tuple[Mapping[str, str], ...] = ()
    hostname: str = ""
    subdomain: str = ""
    set_hostname_as_fqdn: bool | None = attrs.field(
        default=None, metadata={"wire": "setHostnameAsFQDN"}
    )
    hostname_override: str | None = None
    """None: not set; "" is set (and invalid), as upstream's pointer"""
    affinity: Mapping[str, Any] | None = None
    scheduler_name: str = ""
    tolerations: tuple[Toleration, ...] = ()
    host_aliases: tuple[HostAlias, ...] = ()
    priority_class_name: str = ""
    priority: int | None = None
    readiness_gates: tuple[PodReadinessGate, ...] = ()
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None
    overhead: Mapping[str, Quantity] = attrs.field(factory=dict)
    topology_spread_constraints: tuple[Any, ...] = ()
    os: Mapping[str, str] | None = None
    host_users: bool | None = None
    resource_claims: tuple[Any, ...] = ()
    resources: ResourceRequirements | None = None
    scheduling_gates: tuple[Any, ...] = ()


# -- status -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PodCondition:
    type: str
    status: str
    observed_generation: int | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


@attrs.frozen(kw_only=True)
class ContainerStateWaiting:
    reason: str = ""
    message: str = ""


@attrs.frozen(kw_only=True)
class ContainerStateRunning:
    started_at: str | None = None


@attrs.frozen(kw_only=True)
class ContainerStateTerminated:
    exit_code: int = 0
    signal: int | None = None
    reason: str = ""
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    container_id: str = ""


@attrs.frozen(kw_only=True)
class ContainerState:
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


@attrs.frozen(kw_only=True)
class VolumeMountStatus:
    name: str
    mount_path: str
    read_only: bool | None = None
    recursive_read_only: str | None = None


@attrs.frozen(kw_only=True)
class LinuxContainerUser:
    uid: int = 0
    gid: int = 0
    supplemental_groups: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class ContainerUser:
    linux: LinuxContainerUser | None = None


@attrs.frozen(kw_only=True)
class ResourceHealth:
    """One allocated device's health: ``Healthy``, ``Unhealthy`` or ``Unknown``, and what
    its DRA driver says of it (gate ResourceHealthStatusMessage)."""

    resource_id: str
    health: str = ""
    message: str = ""


@attrs.frozen(kw_only=True)
class ResourceStatus:
    """The health of the devices behind one of a container's resources (a device plugin
    resource name, or ``claim:<claim>[/<request>]``)."""

    name: str
    resources: tuple[ResourceHealth, ...] = ()


@attrs.frozen(kw_only=True)
class ContainerStatus:
    name: str
    state: ContainerState | None = None
    last_state: ContainerState | None = None
    ready: bool = False
    restart_count: int = 0
    image: str = ""
    image_id: str = ""
    container_id: str = ""
    started: bool | None = None
    allocated_resources: Mapping[str, Quantity] = attrs.field(factory=dict)
    resources: ResourceRequirements | None = None
    volume_mounts: tuple[VolumeMountStatus, ...] = ()
    user: ContainerUser | None = None
    allocated_resources_status: tuple[ResourceStatus, ...] = ()


@attrs.frozen(kw_only=True)
class PodIP:
    ip: str = ""


@attrs.frozen(kw_only=True)
class PodStatus:
    phase: str = ""
    conditions: tuple[PodCondition, ...] = ()
    message: str = ""
    reason: str = ""
    host_ip: str = ""
    host_ips: tuple[PodIP, ...] = ()
    pod_ip: str = ""
    pod_ips: tuple[PodIP, ...] = ()
    start_time: str | None = None
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    container_statuses: tuple[ContainerStatus, ...] = ()
    ephemeral_container_statuses: tuple[ContainerStatus, ...] = ()
    qos_class: str = ""
    observed_generation: int | None = None
    extended_resource_claim_status: Mapping[str, Any] | None = None
    """the scheduler's claim for extended resources DRA provides (DRAExtendedResource);
    carried as it is, the kubelet never writes it"""
    resource_claim_statuses: tuple[Any, ...] = ()
    """the names of the claims generated from the pod's templates (the ResourceClaim
    controller's); carried as it is, the kubelet never writes it"""
    resources: ResourceRequirements | None = None
    """the pod-level resources it runs with (InPlacePodLevelResourcesVerticalScaling)"""
    allocated_resources: Mapping[str, Quantity] | None = None
    """the pod's requests as allocated (InPlacePodLevelResourcesVerticalScaling)"""


@attrs.frozen(kw_only=True)
class Pod:
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: PodSpec = attrs.field(factory=PodSpec)
    status: PodStatus = attrs.field(factory=PodStatus)

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def full_name(self) -> str:
        """``<name>_<namespace>``: how the kubelet names a pod in logs and keys."""
        return f"{self.metadata.name}_{self.metadata.namespace}"

    @property
    def key(self) -> str:
        """``<namespace>/<name>`` as users write it."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def config_source(self) -> str | None:
        """The source the pod came from (``kubernetes.io/config.source``), None if unset."""
        return self.metadata.annotations.get(CONFIG_SOURCE)

    @property
    def first_seen(self) -> float | None:
        """When the kubelet first saw the pod (``kubernetes.io/config.seen``), in seconds
        since the epoch; None if unset or unreadable (upstream's ``firstSeenTime``)."""
        return parse_time(self.metadata.annotations.get(CONFIG_SEEN))

    @property
    def is_static(self) -> bool:
        """From a manifest file or URL: any source but the API, an empty one included
        (upstream's ``IsStaticPod``); a pod without the annotation is not static."""
        source = self.config_source
        return source is not None and source != API_SOURCE

    @property
    def is_mirror(self) -> bool:
        """The API's read-only copy of a static pod (``kubernetes.io/config.mirror``)."""
        return CONFIG_MIRROR in self.metadata.annotations


@attrs.frozen(kw_only=True)
class PodList:
    api_version: str = "v1"
    kind: str = "PodList"
    items: tuple[Pod, ...] = ()


def format_pod(pod: Pod) -> str:
    """``name_namespace(uid)``: how upstream names a pod in messages."""
    return f"{pod.metadata.name}_{pod.metadata.namespace}({pod.uid})"
