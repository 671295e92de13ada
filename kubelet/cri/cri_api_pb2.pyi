from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Protocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TCP: _ClassVar[Protocol]
    UDP: _ClassVar[Protocol]
    SCTP: _ClassVar[Protocol]

class MountPropagation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROPAGATION_PRIVATE: _ClassVar[MountPropagation]
    PROPAGATION_HOST_TO_CONTAINER: _ClassVar[MountPropagation]
    PROPAGATION_BIDIRECTIONAL: _ClassVar[MountPropagation]

class NamespaceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POD: _ClassVar[NamespaceMode]
    CONTAINER: _ClassVar[NamespaceMode]
    NODE: _ClassVar[NamespaceMode]
    TARGET: _ClassVar[NamespaceMode]

class SupplementalGroupsPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Merge: _ClassVar[SupplementalGroupsPolicy]
    Strict: _ClassVar[SupplementalGroupsPolicy]

class PodSandboxState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SANDBOX_READY: _ClassVar[PodSandboxState]
    SANDBOX_NOTREADY: _ClassVar[PodSandboxState]

class Signal(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUNTIME_DEFAULT: _ClassVar[Signal]
    SIGABRT: _ClassVar[Signal]
    SIGALRM: _ClassVar[Signal]
    SIGBUS: _ClassVar[Signal]
    SIGCHLD: _ClassVar[Signal]
    SIGCLD: _ClassVar[Signal]
    SIGCONT: _ClassVar[Signal]
    SIGFPE: _ClassVar[Signal]
    SIGHUP: _ClassVar[Signal]
    SIGILL: _ClassVar[Signal]
    SIGINT: _ClassVar[Signal]
    SIGIO: _ClassVar[Signal]
    SIGIOT: _ClassVar[Signal]
    SIGKILL: _ClassVar[Signal]
    SIGPIPE: _ClassVar[Signal]
    SIGPOLL: _ClassVar[Signal]
    SIGPROF: _ClassVar[Signal]
    SIGPWR: _ClassVar[Signal]
    SIGQUIT: _ClassVar[Signal]
    SIGSEGV: _ClassVar[Signal]
    SIGSTKFLT: _ClassVar[Signal]
    SIGSTOP: _ClassVar[Signal]
    SIGSYS: _ClassVar[Signal]
    SIGTERM: _ClassVar[Signal]
    SIGTRAP: _ClassVar[Signal]
    SIGTSTP: _ClassVar[Signal]
    SIGTTIN: _ClassVar[Signal]
    SIGTTOU: _ClassVar[Signal]
    SIGURG: _ClassVar[Signal]
    SIGUSR1: _ClassVar[Signal]
    SIGUSR2: _ClassVar[Signal]
    SIGVTALRM: _ClassVar[Signal]
    SIGWINCH: _ClassVar[Signal]
    SIGXCPU: _ClassVar[Signal]
    SIGXFSZ: _ClassVar[Signal]
    SIGRTMIN: _ClassVar[Signal]
    SIGRTMINPLUS1: _ClassVar[Signal]
    SIGRTMINPLUS2: _ClassVar[Signal]
    SIGRTMINPLUS3: _ClassVar[Signal]
    SIGRTMINPLUS4: _ClassVar[Signal]
    SIGRTMINPLUS5: _ClassVar[Signal]
    SIGRTMINPLUS6: _ClassVar[Signal]
    SIGRTMINPLUS7: _ClassVar[Signal]
    SIGRTMINPLUS8: _ClassVar[Signal]
    SIGRTMINPLUS9: _ClassVar[Signal]
    SIGRTMINPLUS10: _ClassVar[Signal]
    SIGRTMINPLUS11: _ClassVar[Signal]
    SIGRTMINPLUS12: _ClassVar[Signal]
    SIGRTMINPLUS13: _ClassVar[Signal]
    SIGRTMINPLUS14: _ClassVar[Signal]
    SIGRTMINPLUS15: _ClassVar[Signal]
    SIGRTMAXMINUS14: _ClassVar[Signal]
    SIGRTMAXMINUS13: _ClassVar[Signal]
    SIGRTMAXMINUS12: _ClassVar[Signal]
    SIGRTMAXMINUS11: _ClassVar[Signal]
    SIGRTMAXMINUS10: _ClassVar[Signal]
    SIGRTMAXMINUS9: _ClassVar[Signal]
    SIGRTMAXMINUS8: _ClassVar[Signal]
    SIGRTMAXMINUS7: _ClassVar[Signal]
    SIGRTMAXMINUS6: _ClassVar[Signal]
    SIGRTMAXMINUS5: _ClassVar[Signal]
    SIGRTMAXMINUS4: _ClassVar[Signal]
    SIGRTMAXMINUS3: _ClassVar[Signal]
    SIGRTMAXMINUS2: _ClassVar[Signal]
    SIGRTMAXMINUS1: _ClassVar[Signal]
    SIGRTMAX: _ClassVar[Signal]

class ContainerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTAINER_CREATED: _ClassVar[ContainerState]
    CONTAINER_RUNNING: _ClassVar[ContainerState]
    CONTAINER_EXITED: _ClassVar[ContainerState]
    CONTAINER_UNKNOWN: _ClassVar[ContainerState]

class CgroupDriver(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYSTEMD: _ClassVar[CgroupDriver]
    CGROUPFS: _ClassVar[CgroupDriver]
TCP: Protocol
UDP: Protocol
SCTP: Protocol
PROPAGATION_PRIVATE: MountPropagation
PROPAGATION_HOST_TO_CONTAINER: MountPropagation
PROPAGATION_BIDIRECTIONAL: MountPropagation
POD: NamespaceMode
CONTAINER: NamespaceMode
NODE: NamespaceMode
TARGET: NamespaceMode
Merge: SupplementalGroupsPolicy
Strict: SupplementalGroupsPolicy
SANDBOX_READY: PodSandboxState
SANDBOX_NOTREADY: PodSandboxState
RUNTIME_DEFAULT: Signal
SIGABRT: Signal
SIGALRM: Signal
SIGBUS: Signal
SIGCHLD: Signal
SIGCLD: Signal
SIGCONT: Signal
SIGFPE: Signal
SIGHUP: Signal
SIGILL: Signal
SIGINT: Signal
SIGIO: Signal
SIGIOT: Signal
SIGKILL: Signal
SIGPIPE: Signal
SIGPOLL: Signal
SIGPROF: Signal
SIGPWR: Signal
SIGQUIT: Signal
SIGSEGV: Signal
SIGSTKFLT: Signal
SIGSTOP: Signal
SIGSYS: Signal
SIGTERM: Signal
SIGTRAP: Signal
SIGTSTP: Signal
SIGTTIN: Signal
SIGTTOU: Signal
SIGURG: Signal
SIGUSR1: Signal
SIGUSR2: Signal
SIGVTALRM: Signal
SIGWINCH: Signal
SIGXCPU: Signal
SIGXFSZ: Signal
SIGRTMIN: Signal
SIGRTMINPLUS1: Signal
SIGRTMINPLUS2: Signal
SIGRTMINPLUS3: Signal
SIGRTMINPLUS4: Signal
SIGRTMINPLUS5: Signal
SIGRTMINPLUS6: Signal
SIGRTMINPLUS7: Signal
SIGRTMINPLUS8: Signal
SIGRTMINPLUS9: Signal
SIGRTMINPLUS10: Signal
SIGRTMINPLUS11: Signal
SIGRTMINPLUS12: Signal
SIGRTMINPLUS13: Signal
SIGRTMINPLUS14: Signal
SIGRTMINPLUS15: Signal
SIGRTMAXMINUS14: Signal
SIGRTMAXMINUS13: Signal
SIGRTMAXMINUS12: Signal
SIGRTMAXMINUS11: Signal
SIGRTMAXMINUS10: Signal
SIGRTMAXMINUS9: Signal
SIGRTMAXMINUS8: Signal
SIGRTMAXMINUS7: Signal
SIGRTMAXMINUS6: Signal
SIGRTMAXMINUS5: Signal
SIGRTMAXMINUS4: Signal
SIGRTMAXMINUS3: Signal
SIGRTMAXMINUS2: Signal
SIGRTMAXMINUS1: Signal
SIGRTMAX: Signal
CONTAINER_CREATED: ContainerState
CONTAINER_RUNNING: ContainerState
CONTAINER_EXITED: ContainerState
CONTAINER_UNKNOWN: ContainerState
SYSTEMD: CgroupDriver
CGROUPFS: CgroupDriver

class VersionRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class VersionResponse(_message.Message):
    __slots__ = ("version", "runtime_name", "runtime_version", "runtime_api_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_NAME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_API_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    runtime_name: str
    runtime_version: str
    runtime_api_version: str
    def __init__(self, version: _Optional[str] = ..., runtime_name: _Optional[str] = ..., runtime_version: _Optional[str] = ..., runtime_api_version: _Optional[str] = ...) -> None: ...

class DNSConfig(_message.Message):
    __slots__ = ("servers", "searches", "options")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    SEARCHES_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedScalarFieldContainer[str]
    searches: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[str]] = ..., searches: _Optional[_Iterable[str]] = ..., options: _Optional[_Iterable[str]] = ...) -> None: ...

class PortMapping(_message.Message):
    __slots__ = ("protocol", "container_port", "host_port", "host_ip")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    protocol: Protocol
    container_port: int
    host_port: int
    host_ip: str
    def __init__(self, protocol: _Optional[_Union[Protocol, str]] = ..., container_port: _Optional[int] = ..., host_port: _Optional[int] = ..., host_ip: _Optional[str] = ...) -> None: ...

class Mount(_message.Message):
    __slots__ = ("container_path", "host_path", "readonly", "selinux_relabel", "propagation", "uidMappings", "gidMappings", "recursive_read_only", "image", "image_sub_path")
    CONTAINER_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    READONLY_FIELD_NUMBER: _ClassVar[int]
    SELINUX_RELABEL_FIELD_NUMBER: _ClassVar[int]
    PROPAGATION_FIELD_NUMBER: _ClassVar[int]
    UIDMAPPINGS_FIELD_NUMBER: _ClassVar[int]
    GIDMAPPINGS_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_SUB_PATH_FIELD_NUMBER: _ClassVar[int]
    container_path: str
    host_path: str
    readonly: bool
    selinux_relabel: bool
    propagation: MountPropagation
    uidMappings: _containers.RepeatedCompositeFieldContainer[IDMapping]
    gidMappings: _containers.RepeatedCompositeFieldContainer[IDMapping]
    recursive_read_only: bool
    image: ImageSpec
    image_sub_path: str
    def __init__(self, container_path: _Optional[str] = ..., host_path: _Optional[str] = ..., readonly: _Optional[bool] = ..., selinux_relabel: _Optional[bool] = ..., propagation: _Optional[_Union[MountPropagation, str]] = ..., uidMappings: _Optional[_Iterable[_Union[IDMapping, _Mapping]]] = ..., gidMappings: _Optional[_Iterable[_Union[IDMapping, _Mapping]]] = ..., recursive_read_only: _Optional[bool] = ..., image: _Optional[_Union[ImageSpec, _Mapping]] = ..., image_sub_path: _Optional[str] = ...) -> None: ...

class IDMapping(_message.Message):
    __slots__ = ("host_id", "container_id", "length")
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    host_id: int
    container_id: int
    length: int
    def __init__(self, host_id: _Optional[int] = ..., container_id: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class UserNamespace(_message.Message):
    __slots__ = ("mode", "uids", "gids")
    MODE_FIELD_NUMBER: _ClassVar[int]
    UIDS_FIELD_NUMBER: _ClassVar[int]
    GIDS_FIELD_NUMBER: _ClassVar[int]
    mode: NamespaceMode
    uids: _containers.RepeatedCompositeFieldContainer[IDMapping]
    gids: _containers.RepeatedCompositeFieldContainer[IDMapping]
    def __init__(self, mode: _Optional[_Union[NamespaceMode, str]] = ..., uids: _Optional[_Iterable[_Union[IDMapping, _Mapping]]] = ..., gids: _Optional[_Iterable[_Union[IDMapping, _Mapping]]] = ...) -> None: ...

class NamespaceOption(_message.Message):
    __slots__ = ("network", "pid", "ipc", "target_id", "userns_options")
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    IPC_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    USERNS_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    network: NamespaceMode
    pid: NamespaceMode
    ipc: NamespaceMode
    target_id: str
    userns_options: UserNamespace
    def __init__(self, network: _Optional[_Union[NamespaceMode, str]] = ..., pid: _Optional[_Union[NamespaceMode, str]] = ..., ipc: _Optional[_Union[NamespaceMode, str]] = ..., target_id: _Optional[str] = ..., userns_options: _Optional[_Union[UserNamespace, _Mapping]] = ...) -> None: ...

class Int64Value(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: int
    def __init__(self, value: _Optional[int] = ...) -> None: ...

class LinuxSandboxSecurityContext(_message.Message):
    __slots__ = ("namespace_options", "selinux_options", "run_as_user", "run_as_group", "readonly_rootfs", "supplemental_groups", "supplemental_groups_policy", "privileged", "seccomp", "apparmor", "seccomp_profile_path")
    NAMESPACE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SELINUX_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_USER_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_GROUP_FIELD_NUMBER: _ClassVar[int]
    READONLY_ROOTFS_FIELD_NUMBER: _ClassVar[int]
    SUPPLEMENTAL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SUPPLEMENTAL_GROUPS_POLICY_FIELD_NUMBER: _ClassVar[int]
    PRIVILEGED_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_FIELD_NUMBER: _ClassVar[int]
    APPARMOR_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_PROFILE_PATH_FIELD_NUMBER: _ClassVar[int]
    namespace_options: NamespaceOption
    selinux_options: SELinuxOption
    run_as_user: Int64Value
    run_as_group: Int64Value
    readonly_rootfs: bool
    supplemental_groups: _containers.RepeatedScalarFieldContainer[int]
    supplemental_groups_policy: SupplementalGroupsPolicy
    privileged: bool
    seccomp: SecurityProfile
    apparmor: SecurityProfile
    seccomp_profile_path: str
    def __init__(self, namespace_options: _Optional[_Union[NamespaceOption, _Mapping]] = ..., selinux_options: _Optional[_Union[SELinuxOption, _Mapping]] = ..., run_as_user: _Optional[_Union[Int64Value, _Mapping]] = ..., run_as_group: _Optional[_Union[Int64Value, _Mapping]] = ..., readonly_rootfs: _Optional[bool] = ..., supplemental_groups: _Optional[_Iterable[int]] = ..., supplemental_groups_policy: _Optional[_Union[SupplementalGroupsPolicy, str]] = ..., privileged: _Optional[bool] = ..., seccomp: _Optional[_Union[SecurityProfile, _Mapping]] = ..., apparmor: _Optional[_Union[SecurityProfile, _Mapping]] = ..., seccomp_profile_path: _Optional[str] = ...) -> None: ...

class SecurityProfile(_message.Message):
    __slots__ = ("profile_type", "localhost_ref")
    class ProfileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RuntimeDefault: _ClassVar[SecurityProfile.ProfileType]
        Unconfined: _ClassVar[SecurityProfile.ProfileType]
        Localhost: _ClassVar[SecurityProfile.ProfileType]
    RuntimeDefault: SecurityProfile.ProfileType
    Unconfined: SecurityProfile.ProfileType
    Localhost: SecurityProfile.ProfileType
    PROFILE_TYPE_FIELD_NUMBER: _ClassVar[int]
    LOCALHOST_REF_FIELD_NUMBER: _ClassVar[int]
    profile_type: SecurityProfile.ProfileType
    localhost_ref: str
    def __init__(self, profile_type: _Optional[_Union[SecurityProfile.ProfileType, str]] = ..., localhost_ref: _Optional[str] = ...) -> None: ...

class LinuxPodSandboxConfig(_message.Message):
    __slots__ = ("cgroup_parent", "security_context", "sysctls", "overhead", "resources")
    class SysctlsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CGROUP_PARENT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SYSCTLS_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    cgroup_parent: str
    security_context: LinuxSandboxSecurityContext
    sysctls: _containers.ScalarMap[str, str]
    overhead: LinuxContainerResources
    resources: LinuxContainerResources
    def __init__(self, cgroup_parent: _Optional[str] = ..., security_context: _Optional[_Union[LinuxSandboxSecurityContext, _Mapping]] = ..., sysctls: _Optional[_Mapping[str, str]] = ..., overhead: _Optional[_Union[LinuxContainerResources, _Mapping]] = ..., resources: _Optional[_Union[LinuxContainerResources, _Mapping]] = ...) -> None: ...

class PodSandboxMetadata(_message.Message):
    __slots__ = ("name", "uid", "namespace", "attempt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    uid: str
    namespace: str
    attempt: int
    def __init__(self, name: _Optional[str] = ..., uid: _Optional[str] = ..., namespace: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class PodSandboxConfig(_message.Message):
    __slots__ = ("metadata", "hostname", "log_directory", "dns_config", "port_mappings", "labels", "annotations", "linux", "windows")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    DNS_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PORT_MAPPINGS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    LINUX_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    metadata: PodSandboxMetadata
    hostname: str
    log_directory: str
    dns_config: DNSConfig
    port_mappings: _containers.RepeatedCompositeFieldContainer[PortMapping]
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    linux: LinuxPodSandboxConfig
    windows: WindowsPodSandboxConfig
    def __init__(self, metadata: _Optional[_Union[PodSandboxMetadata, _Mapping]] = ..., hostname: _Optional[str] = ..., log_directory: _Optional[str] = ..., dns_config: _Optional[_Union[DNSConfig, _Mapping]] = ..., port_mappings: _Optional[_Iterable[_Union[PortMapping, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., linux: _Optional[_Union[LinuxPodSandboxConfig, _Mapping]] = ..., windows: _Optional[_Union[WindowsPodSandboxConfig, _Mapping]] = ...) -> None: ...

class RunPodSandboxRequest(_message.Message):
    __slots__ = ("config", "runtime_handler")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLER_FIELD_NUMBER: _ClassVar[int]
    config: PodSandboxConfig
    runtime_handler: str
    def __init__(self, config: _Optional[_Union[PodSandboxConfig, _Mapping]] = ..., runtime_handler: _Optional[str] = ...) -> None: ...

class RunPodSandboxResponse(_message.Message):
    __slots__ = ("pod_sandbox_id",)
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    def __init__(self, pod_sandbox_id: _Optional[str] = ...) -> None: ...

class StopPodSandboxRequest(_message.Message):
    __slots__ = ("pod_sandbox_id",)
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    def __init__(self, pod_sandbox_id: _Optional[str] = ...) -> None: ...

class StopPodSandboxResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemovePodSandboxRequest(_message.Message):
    __slots__ = ("pod_sandbox_id",)
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    def __init__(self, pod_sandbox_id: _Optional[str] = ...) -> None: ...

class RemovePodSandboxResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PodSandboxStatusRequest(_message.Message):
    __slots__ = ("pod_sandbox_id", "verbose")
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    VERBOSE_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    verbose: bool
    def __init__(self, pod_sandbox_id: _Optional[str] = ..., verbose: _Optional[bool] = ...) -> None: ...

class PodIP(_message.Message):
    __slots__ = ("ip",)
    IP_FIELD_NUMBER: _ClassVar[int]
    ip: str
    def __init__(self, ip: _Optional[str] = ...) -> None: ...

class PodSandboxNetworkStatus(_message.Message):
    __slots__ = ("ip", "additional_ips")
    IP_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_IPS_FIELD_NUMBER: _ClassVar[int]
    ip: str
    additional_ips: _containers.RepeatedCompositeFieldContainer[PodIP]
    def __init__(self, ip: _Optional[str] = ..., additional_ips: _Optional[_Iterable[_Union[PodIP, _Mapping]]] = ...) -> None: ...

class Namespace(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: NamespaceOption
    def __init__(self, options: _Optional[_Union[NamespaceOption, _Mapping]] = ...) -> None: ...

class LinuxPodSandboxStatus(_message.Message):
    __slots__ = ("namespaces",)
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    namespaces: Namespace
    def __init__(self, namespaces: _Optional[_Union[Namespace, _Mapping]] = ...) -> None: ...

class PodSandboxStatus(_message.Message):
    __slots__ = ("id", "metadata", "state", "created_at", "network", "linux", "labels", "annotations", "runtime_handler")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    LINUX_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLER_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: PodSandboxMetadata
    state: PodSandboxState
    created_at: int
    network: PodSandboxNetworkStatus
    linux: LinuxPodSandboxStatus
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    runtime_handler: str
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Union[PodSandboxMetadata, _Mapping]] = ..., state: _Optional[_Union[PodSandboxState, str]] = ..., created_at: _Optional[int] = ..., network: _Optional[_Union[PodSandboxNetworkStatus, _Mapping]] = ..., linux: _Optional[_Union[LinuxPodSandboxStatus, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., runtime_handler: _Optional[str] = ...) -> None: ...

class PodSandboxStatusResponse(_message.Message):
    __slots__ = ("status", "info", "containers_statuses", "timestamp")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_STATUSES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    status: PodSandboxStatus
    info: _containers.ScalarMap[str, str]
    containers_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    timestamp: int
    def __init__(self, status: _Optional[_Union[PodSandboxStatus, _Mapping]] = ..., info: _Optional[_Mapping[str, str]] = ..., containers_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., timestamp: _Optional[int] = ...) -> None: ...

class PodSandboxStateValue(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: PodSandboxState
    def __init__(self, state: _Optional[_Union[PodSandboxState, str]] = ...) -> None: ...

class PodSandboxFilter(_message.Message):
    __slots__ = ("id", "state", "label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: PodSandboxStateValue
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., state: _Optional[_Union[PodSandboxStateValue, _Mapping]] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListPodSandboxRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: PodSandboxFilter
    def __init__(self, filter: _Optional[_Union[PodSandboxFilter, _Mapping]] = ...) -> None: ...

class PodSandbox(_message.Message):
    __slots__ = ("id", "metadata", "state", "created_at", "labels", "annotations", "runtime_handler")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLER_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: PodSandboxMetadata
    state: PodSandboxState
    created_at: int
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    runtime_handler: str
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Union[PodSandboxMetadata, _Mapping]] = ..., state: _Optional[_Union[PodSandboxState, str]] = ..., created_at: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., runtime_handler: _Optional[str] = ...) -> None: ...

class ListPodSandboxResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PodSandbox]
    def __init__(self, items: _Optional[_Iterable[_Union[PodSandbox, _Mapping]]] = ...) -> None: ...

class PodSandboxStatsRequest(_message.Message):
    __slots__ = ("pod_sandbox_id",)
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    def __init__(self, pod_sandbox_id: _Optional[str] = ...) -> None: ...

class PodSandboxStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: PodSandboxStats
    def __init__(self, stats: _Optional[_Union[PodSandboxStats, _Mapping]] = ...) -> None: ...

class PodSandboxStatsFilter(_message.Message):
    __slots__ = ("id", "label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListPodSandboxStatsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: PodSandboxStatsFilter
    def __init__(self, filter: _Optional[_Union[PodSandboxStatsFilter, _Mapping]] = ...) -> None: ...

class ListPodSandboxStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[PodSandboxStats]
    def __init__(self, stats: _Optional[_Iterable[_Union[PodSandboxStats, _Mapping]]] = ...) -> None: ...

class PodSandboxAttributes(_message.Message):
    __slots__ = ("id", "metadata", "labels", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: PodSandboxMetadata
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Union[PodSandboxMetadata, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PodSandboxStats(_message.Message):
    __slots__ = ("attributes", "linux", "windows")
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    LINUX_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    attributes: PodSandboxAttributes
    linux: LinuxPodSandboxStats
    windows: WindowsPodSandboxStats
    def __init__(self, attributes: _Optional[_Union[PodSandboxAttributes, _Mapping]] = ..., linux: _Optional[_Union[LinuxPodSandboxStats, _Mapping]] = ..., windows: _Optional[_Union[WindowsPodSandboxStats, _Mapping]] = ...) -> None: ...

class LinuxPodSandboxStats(_message.Message):
    __slots__ = ("cpu", "memory", "network", "process", "containers", "io")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    IO_FIELD_NUMBER: _ClassVar[int]
    cpu: CpuUsage
    memory: MemoryUsage
    network: NetworkUsage
    process: ProcessUsage
    containers: _containers.RepeatedCompositeFieldContainer[ContainerStats]
    io: IoUsage
    def __init__(self, cpu: _Optional[_Union[CpuUsage, _Mapping]] = ..., memory: _Optional[_Union[MemoryUsage, _Mapping]] = ..., network: _Optional[_Union[NetworkUsage, _Mapping]] = ..., process: _Optional[_Union[ProcessUsage, _Mapping]] = ..., containers: _Optional[_Iterable[_Union[ContainerStats, _Mapping]]] = ..., io: _Optional[_Union[IoUsage, _Mapping]] = ...) -> None: ...

class WindowsPodSandboxStats(_message.Message):
    __slots__ = ("cpu", "memory", "network", "process", "containers")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    cpu: WindowsCpuUsage
    memory: WindowsMemoryUsage
    network: WindowsNetworkUsage
    process: WindowsProcessUsage
    containers: _containers.RepeatedCompositeFieldContainer[WindowsContainerStats]
    def __init__(self, cpu: _Optional[_Union[WindowsCpuUsage, _Mapping]] = ..., memory: _Optional[_Union[WindowsMemoryUsage, _Mapping]] = ..., network: _Optional[_Union[WindowsNetworkUsage, _Mapping]] = ..., process: _Optional[_Union[WindowsProcessUsage, _Mapping]] = ..., containers: _Optional[_Iterable[_Union[WindowsContainerStats, _Mapping]]] = ...) -> None: ...

class NetworkUsage(_message.Message):
    __slots__ = ("timestamp", "default_interface", "interfaces")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_INTERFACE_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    default_interface: NetworkInterfaceUsage
    interfaces: _containers.RepeatedCompositeFieldContainer[NetworkInterfaceUsage]
    def __init__(self, timestamp: _Optional[int] = ..., default_interface: _Optional[_Union[NetworkInterfaceUsage, _Mapping]] = ..., interfaces: _Optional[_Iterable[_Union[NetworkInterfaceUsage, _Mapping]]] = ...) -> None: ...

class WindowsNetworkUsage(_message.Message):
    __slots__ = ("timestamp", "default_interface", "interfaces")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_INTERFACE_FIELD_NUMBER: _ClassVar[int]
    INTERFACES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    default_interface: WindowsNetworkInterfaceUsage
    interfaces: _containers.RepeatedCompositeFieldContainer[WindowsNetworkInterfaceUsage]
    def __init__(self, timestamp: _Optional[int] = ..., default_interface: _Optional[_Union[WindowsNetworkInterfaceUsage, _Mapping]] = ..., interfaces: _Optional[_Iterable[_Union[WindowsNetworkInterfaceUsage, _Mapping]]] = ...) -> None: ...

class NetworkInterfaceUsage(_message.Message):
    __slots__ = ("name", "rx_bytes", "rx_errors", "tx_bytes", "tx_errors")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    rx_bytes: UInt64Value
    rx_errors: UInt64Value
    tx_bytes: UInt64Value
    tx_errors: UInt64Value
    def __init__(self, name: _Optional[str] = ..., rx_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., rx_errors: _Optional[_Union[UInt64Value, _Mapping]] = ..., tx_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., tx_errors: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class WindowsNetworkInterfaceUsage(_message.Message):
    __slots__ = ("name", "rx_bytes", "rx_packets_dropped", "tx_bytes", "tx_packets_dropped")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    RX_PACKETS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_PACKETS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    name: str
    rx_bytes: UInt64Value
    rx_packets_dropped: UInt64Value
    tx_bytes: UInt64Value
    tx_packets_dropped: UInt64Value
    def __init__(self, name: _Optional[str] = ..., rx_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., rx_packets_dropped: _Optional[_Union[UInt64Value, _Mapping]] = ..., tx_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., tx_packets_dropped: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class ProcessUsage(_message.Message):
    __slots__ = ("timestamp", "process_count")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PROCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    process_count: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., process_count: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class WindowsProcessUsage(_message.Message):
    __slots__ = ("timestamp", "process_count")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PROCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    process_count: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., process_count: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class ImageSpec(_message.Message):
    __slots__ = ("image", "annotations", "user_specified_image", "runtime_handler", "image_ref")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    USER_SPECIFIED_IMAGE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLER_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    image: str
    annotations: _containers.ScalarMap[str, str]
    user_specified_image: str
    runtime_handler: str
    image_ref: str
    def __init__(self, image: _Optional[str] = ..., annotations: _Optional[_Mapping[str, str]] = ..., user_specified_image: _Optional[str] = ..., runtime_handler: _Optional[str] = ..., image_ref: _Optional[str] = ...) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class LinuxContainerResources(_message.Message):
    __slots__ = ("cpu_period", "cpu_quota", "cpu_shares", "memory_limit_in_bytes", "oom_score_adj", "cpuset_cpus", "cpuset_mems", "hugepage_limits", "unified", "memory_swap_limit_in_bytes")
    class UnifiedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CPU_PERIOD_FIELD_NUMBER: _ClassVar[int]
    CPU_QUOTA_FIELD_NUMBER: _ClassVar[int]
    CPU_SHARES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    OOM_SCORE_ADJ_FIELD_NUMBER: _ClassVar[int]
    CPUSET_CPUS_FIELD_NUMBER: _ClassVar[int]
    CPUSET_MEMS_FIELD_NUMBER: _ClassVar[int]
    HUGEPAGE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    UNIFIED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SWAP_LIMIT_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    cpu_period: int
    cpu_quota: int
    cpu_shares: int
    memory_limit_in_bytes: int
    oom_score_adj: int
    cpuset_cpus: str
    cpuset_mems: str
    hugepage_limits: _containers.RepeatedCompositeFieldContainer[HugepageLimit]
    unified: _containers.ScalarMap[str, str]
    memory_swap_limit_in_bytes: int
    def __init__(self, cpu_period: _Optional[int] = ..., cpu_quota: _Optional[int] = ..., cpu_shares: _Optional[int] = ..., memory_limit_in_bytes: _Optional[int] = ..., oom_score_adj: _Optional[int] = ..., cpuset_cpus: _Optional[str] = ..., cpuset_mems: _Optional[str] = ..., hugepage_limits: _Optional[_Iterable[_Union[HugepageLimit, _Mapping]]] = ..., unified: _Optional[_Mapping[str, str]] = ..., memory_swap_limit_in_bytes: _Optional[int] = ...) -> None: ...

class HugepageLimit(_message.Message):
    __slots__ = ("page_size", "limit")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    page_size: str
    limit: int
    def __init__(self, page_size: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class SELinuxOption(_message.Message):
    __slots__ = ("user", "role", "type", "level")
    USER_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    user: str
    role: str
    type: str
    level: str
    def __init__(self, user: _Optional[str] = ..., role: _Optional[str] = ..., type: _Optional[str] = ..., level: _Optional[str] = ...) -> None: ...

class Capability(_message.Message):
    __slots__ = ("add_capabilities", "drop_capabilities", "add_ambient_capabilities")
    ADD_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DROP_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ADD_AMBIENT_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    add_capabilities: _containers.RepeatedScalarFieldContainer[str]
    drop_capabilities: _containers.RepeatedScalarFieldContainer[str]
    add_ambient_capabilities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, add_capabilities: _Optional[_Iterable[str]] = ..., drop_capabilities: _Optional[_Iterable[str]] = ..., add_ambient_capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class LinuxContainerSecurityContext(_message.Message):
    __slots__ = ("capabilities", "privileged", "namespace_options", "selinux_options", "run_as_user", "run_as_group", "run_as_username", "readonly_rootfs", "supplemental_groups", "supplemental_groups_policy", "no_new_privs", "masked_paths", "readonly_paths", "seccomp", "apparmor", "apparmor_profile", "seccomp_profile_path")
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    PRIVILEGED_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SELINUX_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_USER_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_GROUP_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_USERNAME_FIELD_NUMBER: _ClassVar[int]
    READONLY_ROOTFS_FIELD_NUMBER: _ClassVar[int]
    SUPPLEMENTAL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SUPPLEMENTAL_GROUPS_POLICY_FIELD_NUMBER: _ClassVar[int]
    NO_NEW_PRIVS_FIELD_NUMBER: _ClassVar[int]
    MASKED_PATHS_FIELD_NUMBER: _ClassVar[int]
    READONLY_PATHS_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_FIELD_NUMBER: _ClassVar[int]
    APPARMOR_FIELD_NUMBER: _ClassVar[int]
    APPARMOR_PROFILE_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_PROFILE_PATH_FIELD_NUMBER: _ClassVar[int]
    capabilities: Capability
    privileged: bool
    namespace_options: NamespaceOption
    selinux_options: SELinuxOption
    run_as_user: Int64Value
    run_as_group: Int64Value
    run_as_username: str
    readonly_rootfs: bool
    supplemental_groups: _containers.RepeatedScalarFieldContainer[int]
    supplemental_groups_policy: SupplementalGroupsPolicy
    no_new_privs: bool
    masked_paths: _containers.RepeatedScalarFieldContainer[str]
    readonly_paths: _containers.RepeatedScalarFieldContainer[str]
    seccomp: SecurityProfile
    apparmor: SecurityProfile
    apparmor_profile: str
    seccomp_profile_path: str
    def __init__(self, capabilities: _Optional[_Union[Capability, _Mapping]] = ..., privileged: _Optional[bool] = ..., namespace_options: _Optional[_Union[NamespaceOption, _Mapping]] = ..., selinux_options: _Optional[_Union[SELinuxOption, _Mapping]] = ..., run_as_user: _Optional[_Union[Int64Value, _Mapping]] = ..., run_as_group: _Optional[_Union[Int64Value, _Mapping]] = ..., run_as_username: _Optional[str] = ..., readonly_rootfs: _Optional[bool] = ..., supplemental_groups: _Optional[_Iterable[int]] = ..., supplemental_groups_policy: _Optional[_Union[SupplementalGroupsPolicy, str]] = ..., no_new_privs: _Optional[bool] = ..., masked_paths: _Optional[_Iterable[str]] = ..., readonly_paths: _Optional[_Iterable[str]] = ..., seccomp: _Optional[_Union[SecurityProfile, _Mapping]] = ..., apparmor: _Optional[_Union[SecurityProfile, _Mapping]] = ..., apparmor_profile: _Optional[str] = ..., seccomp_profile_path: _Optional[str] = ...) -> None: ...

class LinuxContainerConfig(_message.Message):
    __slots__ = ("resources", "security_context")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    resources: LinuxContainerResources
    security_context: LinuxContainerSecurityContext
    def __init__(self, resources: _Optional[_Union[LinuxContainerResources, _Mapping]] = ..., security_context: _Optional[_Union[LinuxContainerSecurityContext, _Mapping]] = ...) -> None: ...

class LinuxContainerUser(_message.Message):
    __slots__ = ("uid", "gid", "supplemental_groups")
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    SUPPLEMENTAL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    uid: int
    gid: int
    supplemental_groups: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, uid: _Optional[int] = ..., gid: _Optional[int] = ..., supplemental_groups: _Optional[_Iterable[int]] = ...) -> None: ...

class WindowsNamespaceOption(_message.Message):
    __slots__ = ("network",)
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    network: NamespaceMode
    def __init__(self, network: _Optional[_Union[NamespaceMode, str]] = ...) -> None: ...

class WindowsSandboxSecurityContext(_message.Message):
    __slots__ = ("run_as_username", "credential_spec", "host_process", "namespace_options")
    RUN_AS_USERNAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_SPEC_FIELD_NUMBER: _ClassVar[int]
    HOST_PROCESS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    run_as_username: str
    credential_spec: str
    host_process: bool
    namespace_options: WindowsNamespaceOption
    def __init__(self, run_as_username: _Optional[str] = ..., credential_spec: _Optional[str] = ..., host_process: _Optional[bool] = ..., namespace_options: _Optional[_Union[WindowsNamespaceOption, _Mapping]] = ...) -> None: ...

class WindowsPodSandboxConfig(_message.Message):
    __slots__ = ("security_context",)
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    security_context: WindowsSandboxSecurityContext
    def __init__(self, security_context: _Optional[_Union[WindowsSandboxSecurityContext, _Mapping]] = ...) -> None: ...

class WindowsContainerSecurityContext(_message.Message):
    __slots__ = ("run_as_username", "credential_spec", "host_process")
    RUN_AS_USERNAME_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_SPEC_FIELD_NUMBER: _ClassVar[int]
    HOST_PROCESS_FIELD_NUMBER: _ClassVar[int]
    run_as_username: str
    credential_spec: str
    host_process: bool
    def __init__(self, run_as_username: _Optional[str] = ..., credential_spec: _Optional[str] = ..., host_process: _Optional[bool] = ...) -> None: ...

class WindowsContainerConfig(_message.Message):
    __slots__ = ("resources", "security_context")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    resources: WindowsContainerResources
    security_context: WindowsContainerSecurityContext
    def __init__(self, resources: _Optional[_Union[WindowsContainerResources, _Mapping]] = ..., security_context: _Optional[_Union[WindowsContainerSecurityContext, _Mapping]] = ...) -> None: ...

class WindowsContainerResources(_message.Message):
    __slots__ = ("cpu_shares", "cpu_count", "cpu_maximum", "memory_limit_in_bytes", "rootfs_size_in_bytes", "affinity_cpus")
    CPU_SHARES_FIELD_NUMBER: _ClassVar[int]
    CPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    CPU_MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    ROOTFS_SIZE_IN_BYTES_FIELD_NUMBER: _ClassVar[int]
    AFFINITY_CPUS_FIELD_NUMBER: _ClassVar[int]
    cpu_shares: int
    cpu_count: int
    cpu_maximum: int
    memory_limit_in_bytes: int
    rootfs_size_in_bytes: int
    affinity_cpus: _containers.RepeatedCompositeFieldContainer[WindowsCpuGroupAffinity]
    def __init__(self, cpu_shares: _Optional[int] = ..., cpu_count: _Optional[int] = ..., cpu_maximum: _Optional[int] = ..., memory_limit_in_bytes: _Optional[int] = ..., rootfs_size_in_bytes: _Optional[int] = ..., affinity_cpus: _Optional[_Iterable[_Union[WindowsCpuGroupAffinity, _Mapping]]] = ...) -> None: ...

class WindowsCpuGroupAffinity(_message.Message):
    __slots__ = ("cpu_mask", "cpu_group")
    CPU_MASK_FIELD_NUMBER: _ClassVar[int]
    CPU_GROUP_FIELD_NUMBER: _ClassVar[int]
    cpu_mask: int
    cpu_group: int
    def __init__(self, cpu_mask: _Optional[int] = ..., cpu_group: _Optional[int] = ...) -> None: ...

class ContainerMetadata(_message.Message):
    __slots__ = ("name", "attempt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    attempt: int
    def __init__(self, name: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("container_path", "host_path", "permissions")
    CONTAINER_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    container_path: str
    host_path: str
    permissions: str
    def __init__(self, container_path: _Optional[str] = ..., host_path: _Optional[str] = ..., permissions: _Optional[str] = ...) -> None: ...

class CDIDevice(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ContainerConfig(_message.Message):
    __slots__ = ("metadata", "image", "command", "args", "working_dir", "envs", "mounts", "devices", "labels", "annotations", "log_path", "stdin", "stdin_once", "tty", "linux", "windows", "CDI_devices", "stop_signal")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    ENVS_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDIN_ONCE_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    LINUX_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    CDI_DEVICES_FIELD_NUMBER: _ClassVar[int]
    STOP_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    metadata: ContainerMetadata
    image: ImageSpec
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    working_dir: str
    envs: _containers.RepeatedCompositeFieldContainer[KeyValue]
    mounts: _containers.RepeatedCompositeFieldContainer[Mount]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    log_path: str
    stdin: bool
    stdin_once: bool
    tty: bool
    linux: LinuxContainerConfig
    windows: WindowsContainerConfig
    CDI_devices: _containers.RepeatedCompositeFieldContainer[CDIDevice]
    stop_signal: Signal
    def __init__(self, metadata: _Optional[_Union[ContainerMetadata, _Mapping]] = ..., image: _Optional[_Union[ImageSpec, _Mapping]] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., working_dir: _Optional[str] = ..., envs: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., mounts: _Optional[_Iterable[_Union[Mount, _Mapping]]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., log_path: _Optional[str] = ..., stdin: _Optional[bool] = ..., stdin_once: _Optional[bool] = ..., tty: _Optional[bool] = ..., linux: _Optional[_Union[LinuxContainerConfig, _Mapping]] = ..., windows: _Optional[_Union[WindowsContainerConfig, _Mapping]] = ..., CDI_devices: _Optional[_Iterable[_Union[CDIDevice, _Mapping]]] = ..., stop_signal: _Optional[_Union[Signal, str]] = ...) -> None: ...

class CreateContainerRequest(_message.Message):
    __slots__ = ("pod_sandbox_id", "config", "sandbox_config")
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_CONFIG_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    config: ContainerConfig
    sandbox_config: PodSandboxConfig
    def __init__(self, pod_sandbox_id: _Optional[str] = ..., config: _Optional[_Union[ContainerConfig, _Mapping]] = ..., sandbox_config: _Optional[_Union[PodSandboxConfig, _Mapping]] = ...) -> None: ...

class CreateContainerResponse(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class StartContainerRequest(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class StartContainerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StopContainerRequest(_message.Message):
    __slots__ = ("container_id", "timeout")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    timeout: int
    def __init__(self, container_id: _Optional[str] = ..., timeout: _Optional[int] = ...) -> None: ...

class StopContainerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemoveContainerRequest(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class RemoveContainerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ContainerStateValue(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: ContainerState
    def __init__(self, state: _Optional[_Union[ContainerState, str]] = ...) -> None: ...

class ContainerFilter(_message.Message):
    __slots__ = ("id", "state", "pod_sandbox_id", "label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: ContainerStateValue
    pod_sandbox_id: str
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., state: _Optional[_Union[ContainerStateValue, _Mapping]] = ..., pod_sandbox_id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListContainersRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: ContainerFilter
    def __init__(self, filter: _Optional[_Union[ContainerFilter, _Mapping]] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("id", "pod_sandbox_id", "metadata", "image", "image_ref", "state", "created_at", "labels", "annotations", "image_id")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    pod_sandbox_id: str
    metadata: ContainerMetadata
    image: ImageSpec
    image_ref: str
    state: ContainerState
    created_at: int
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    image_id: str
    def __init__(self, id: _Optional[str] = ..., pod_sandbox_id: _Optional[str] = ..., metadata: _Optional[_Union[ContainerMetadata, _Mapping]] = ..., image: _Optional[_Union[ImageSpec, _Mapping]] = ..., image_ref: _Optional[str] = ..., state: _Optional[_Union[ContainerState, str]] = ..., created_at: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., image_id: _Optional[str] = ...) -> None: ...

class ListContainersResponse(_message.Message):
    __slots__ = ("containers",)
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    def __init__(self, containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ...) -> None: ...

class ContainerStatusRequest(_message.Message):
    __slots__ = ("container_id", "verbose")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    VERBOSE_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    verbose: bool
    def __init__(self, container_id: _Optional[str] = ..., verbose: _Optional[bool] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("id", "metadata", "state", "created_at", "started_at", "finished_at", "exit_code", "image", "image_ref", "reason", "message", "labels", "annotations", "mounts", "log_path", "resources", "image_id", "user", "stop_signal")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    STOP_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: ContainerMetadata
    state: ContainerState
    created_at: int
    started_at: int
    finished_at: int
    exit_code: int
    image: ImageSpec
    image_ref: str
    reason: str
    message: str
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    mounts: _containers.RepeatedCompositeFieldContainer[Mount]
    log_path: str
    resources: ContainerResources
    image_id: str
    user: ContainerUser
    stop_signal: Signal
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Union[ContainerMetadata, _Mapping]] = ..., state: _Optional[_Union[ContainerState, str]] = ..., created_at: _Optional[int] = ..., started_at: _Optional[int] = ..., finished_at: _Optional[int] = ..., exit_code: _Optional[int] = ..., image: _Optional[_Union[ImageSpec, _Mapping]] = ..., image_ref: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., mounts: _Optional[_Iterable[_Union[Mount, _Mapping]]] = ..., log_path: _Optional[str] = ..., resources: _Optional[_Union[ContainerResources, _Mapping]] = ..., image_id: _Optional[str] = ..., user: _Optional[_Union[ContainerUser, _Mapping]] = ..., stop_signal: _Optional[_Union[Signal, str]] = ...) -> None: ...

class ContainerStatusResponse(_message.Message):
    __slots__ = ("status", "info")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    status: ContainerStatus
    info: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[ContainerStatus, _Mapping]] = ..., info: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerResources(_message.Message):
    __slots__ = ("linux", "windows")
    LINUX_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    linux: LinuxContainerResources
    windows: WindowsContainerResources
    def __init__(self, linux: _Optional[_Union[LinuxContainerResources, _Mapping]] = ..., windows: _Optional[_Union[WindowsContainerResources, _Mapping]] = ...) -> None: ...

class ContainerUser(_message.Message):
    __slots__ = ("linux",)
    LINUX_FIELD_NUMBER: _ClassVar[int]
    linux: LinuxContainerUser
    def __init__(self, linux: _Optional[_Union[LinuxContainerUser, _Mapping]] = ...) -> None: ...

class UpdateContainerResourcesRequest(_message.Message):
    __slots__ = ("container_id", "linux", "windows", "annotations")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    LINUX_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    linux: LinuxContainerResources
    windows: WindowsContainerResources
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, container_id: _Optional[str] = ..., linux: _Optional[_Union[LinuxContainerResources, _Mapping]] = ..., windows: _Optional[_Union[WindowsContainerResources, _Mapping]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateContainerResourcesResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecSyncRequest(_message.Message):
    __slots__ = ("container_id", "cmd", "timeout")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    cmd: _containers.RepeatedScalarFieldContainer[str]
    timeout: int
    def __init__(self, container_id: _Optional[str] = ..., cmd: _Optional[_Iterable[str]] = ..., timeout: _Optional[int] = ...) -> None: ...

class ExecSyncResponse(_message.Message):
    __slots__ = ("stdout", "stderr", "exit_code")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exit_code: int
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit_code: _Optional[int] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("container_id", "cmd", "tty", "stdin", "stdout", "stderr")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    CMD_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    cmd: _containers.RepeatedScalarFieldContainer[str]
    tty: bool
    stdin: bool
    stdout: bool
    stderr: bool
    def __init__(self, container_id: _Optional[str] = ..., cmd: _Optional[_Iterable[str]] = ..., tty: _Optional[bool] = ..., stdin: _Optional[bool] = ..., stdout: _Optional[bool] = ..., stderr: _Optional[bool] = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("container_id", "stdin", "tty", "stdout", "stderr")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    stdin: bool
    tty: bool
    stdout: bool
    stderr: bool
    def __init__(self, container_id: _Optional[str] = ..., stdin: _Optional[bool] = ..., tty: _Optional[bool] = ..., stdout: _Optional[bool] = ..., stderr: _Optional[bool] = ...) -> None: ...

class AttachResponse(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class PortForwardRequest(_message.Message):
    __slots__ = ("pod_sandbox_id", "port")
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    pod_sandbox_id: str
    port: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, pod_sandbox_id: _Optional[str] = ..., port: _Optional[_Iterable[int]] = ...) -> None: ...

class PortForwardResponse(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class ImageFilter(_message.Message):
    __slots__ = ("image",)
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: ImageSpec
    def __init__(self, image: _Optional[_Union[ImageSpec, _Mapping]] = ...) -> None: ...

class ListImagesRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: ImageFilter
    def __init__(self, filter: _Optional[_Union[ImageFilter, _Mapping]] = ...) -> None: ...

class Image(_message.Message):
    __slots__ = ("id", "repo_tags", "repo_digests", "size", "uid", "username", "spec", "pinned")
    ID_FIELD_NUMBER: _ClassVar[int]
    REPO_TAGS_FIELD_NUMBER: _ClassVar[int]
    REPO_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    id: str
    repo_tags: _containers.RepeatedScalarFieldContainer[str]
    repo_digests: _containers.RepeatedScalarFieldContainer[str]
    size: int
    uid: Int64Value
    username: str
    spec: ImageSpec
    pinned: bool
    def __init__(self, id: _Optional[str] = ..., repo_tags: _Optional[_Iterable[str]] = ..., repo_digests: _Optional[_Iterable[str]] = ..., size: _Optional[int] = ..., uid: _Optional[_Union[Int64Value, _Mapping]] = ..., username: _Optional[str] = ..., spec: _Optional[_Union[ImageSpec, _Mapping]] = ..., pinned: _Optional[bool] = ...) -> None: ...

class ListImagesResponse(_message.Message):
    __slots__ = ("images",)
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ...) -> None: ...

class ImageStatusRequest(_message.Message):
    __slots__ = ("image", "verbose")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    VERBOSE_FIELD_NUMBER: _ClassVar[int]
    image: ImageSpec
    verbose: bool
    def __init__(self, image: _Optional[_Union[ImageSpec, _Mapping]] = ..., verbose: _Optional[bool] = ...) -> None: ...

class ImageStatusResponse(_message.Message):
    __slots__ = ("image", "info")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    image: Image
    info: _containers.ScalarMap[str, str]
    def __init__(self, image: _Optional[_Union[Image, _Mapping]] = ..., info: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AuthConfig(_message.Message):
    __slots__ = ("username", "password", "auth", "server_address", "identity_token", "registry_token")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    SERVER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    username: str
    password: str
    auth: str
    server_address: str
    identity_token: str
    registry_token: str
    def __init__(self, username: _Optional[str] = ..., password: _Optional[str] = ..., auth: _Optional[str] = ..., server_address: _Optional[str] = ..., identity_token: _Optional[str] = ..., registry_token: _Optional[str] = ...) -> None: ...

class PullImageRequest(_message.Message):
    __slots__ = ("image", "auth", "sandbox_config")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_CONFIG_FIELD_NUMBER: _ClassVar[int]
    image: ImageSpec
    auth: AuthConfig
    sandbox_config: PodSandboxConfig
    def __init__(self, image: _Optional[_Union[ImageSpec, _Mapping]] = ..., auth: _Optional[_Union[AuthConfig, _Mapping]] = ..., sandbox_config: _Optional[_Union[PodSandboxConfig, _Mapping]] = ...) -> None: ...

class PullImageResponse(_message.Message):
    __slots__ = ("image_ref",)
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    image_ref: str
    def __init__(self, image_ref: _Optional[str] = ...) -> None: ...

class RemoveImageRequest(_message.Message):
    __slots__ = ("image",)
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: ImageSpec
    def __init__(self, image: _Optional[_Union[ImageSpec, _Mapping]] = ...) -> None: ...

class RemoveImageResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NetworkConfig(_message.Message):
    __slots__ = ("pod_cidr",)
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    pod_cidr: str
    def __init__(self, pod_cidr: _Optional[str] = ...) -> None: ...

class RuntimeConfig(_message.Message):
    __slots__ = ("network_config",)
    NETWORK_CONFIG_FIELD_NUMBER: _ClassVar[int]
    network_config: NetworkConfig
    def __init__(self, network_config: _Optional[_Union[NetworkConfig, _Mapping]] = ...) -> None: ...

class UpdateRuntimeConfigRequest(_message.Message):
    __slots__ = ("runtime_config",)
    RUNTIME_CONFIG_FIELD_NUMBER: _ClassVar[int]
    runtime_config: RuntimeConfig
    def __init__(self, runtime_config: _Optional[_Union[RuntimeConfig, _Mapping]] = ...) -> None: ...

class UpdateRuntimeConfigResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LinuxRuntimeConfiguration(_message.Message):
    __slots__ = ("cgroup_driver",)
    CGROUP_DRIVER_FIELD_NUMBER: _ClassVar[int]
    cgroup_driver: CgroupDriver
    def __init__(self, cgroup_driver: _Optional[_Union[CgroupDriver, str]] = ...) -> None: ...

class RuntimeConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RuntimeConfigResponse(_message.Message):
    __slots__ = ("linux",)
    LINUX_FIELD_NUMBER: _ClassVar[int]
    linux: LinuxRuntimeConfiguration
    def __init__(self, linux: _Optional[_Union[LinuxRuntimeConfiguration, _Mapping]] = ...) -> None: ...

class RuntimeCondition(_message.Message):
    __slots__ = ("type", "status", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: bool
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[bool] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RuntimeStatus(_message.Message):
    __slots__ = ("conditions",)
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    conditions: _containers.RepeatedCompositeFieldContainer[RuntimeCondition]
    def __init__(self, conditions: _Optional[_Iterable[_Union[RuntimeCondition, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("verbose",)
    VERBOSE_FIELD_NUMBER: _ClassVar[int]
    verbose: bool
    def __init__(self, verbose: _Optional[bool] = ...) -> None: ...

class RuntimeHandlerFeatures(_message.Message):
    __slots__ = ("recursive_read_only_mounts", "user_namespaces")
    RECURSIVE_READ_ONLY_MOUNTS_FIELD_NUMBER: _ClassVar[int]
    USER_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    recursive_read_only_mounts: bool
    user_namespaces: bool
    def __init__(self, recursive_read_only_mounts: _Optional[bool] = ..., user_namespaces: _Optional[bool] = ...) -> None: ...

class RuntimeHandler(_message.Message):
    __slots__ = ("name", "features")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    name: str
    features: RuntimeHandlerFeatures
    def __init__(self, name: _Optional[str] = ..., features: _Optional[_Union[RuntimeHandlerFeatures, _Mapping]] = ...) -> None: ...

class RuntimeFeatures(_message.Message):
    __slots__ = ("supplemental_groups_policy", "user_namespaces_host_network")
    SUPPLEMENTAL_GROUPS_POLICY_FIELD_NUMBER: _ClassVar[int]
    USER_NAMESPACES_HOST_NETWORK_FIELD_NUMBER: _ClassVar[int]
    supplemental_groups_policy: bool
    user_namespaces_host_network: bool
    def __init__(self, supplemental_groups_policy: _Optional[bool] = ..., user_namespaces_host_network: _Optional[bool] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("status", "info", "runtime_handlers", "features")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLERS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    status: RuntimeStatus
    info: _containers.ScalarMap[str, str]
    runtime_handlers: _containers.RepeatedCompositeFieldContainer[RuntimeHandler]
    features: RuntimeFeatures
    def __init__(self, status: _Optional[_Union[RuntimeStatus, _Mapping]] = ..., info: _Optional[_Mapping[str, str]] = ..., runtime_handlers: _Optional[_Iterable[_Union[RuntimeHandler, _Mapping]]] = ..., features: _Optional[_Union[RuntimeFeatures, _Mapping]] = ...) -> None: ...

class ImageFsInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UInt64Value(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: int
    def __init__(self, value: _Optional[int] = ...) -> None: ...

class FilesystemIdentifier(_message.Message):
    __slots__ = ("mountpoint",)
    MOUNTPOINT_FIELD_NUMBER: _ClassVar[int]
    mountpoint: str
    def __init__(self, mountpoint: _Optional[str] = ...) -> None: ...

class FilesystemUsage(_message.Message):
    __slots__ = ("timestamp", "fs_id", "used_bytes", "inodes_used")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FS_ID_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    INODES_USED_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    fs_id: FilesystemIdentifier
    used_bytes: UInt64Value
    inodes_used: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., fs_id: _Optional[_Union[FilesystemIdentifier, _Mapping]] = ..., used_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., inodes_used: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class WindowsFilesystemUsage(_message.Message):
    __slots__ = ("timestamp", "fs_id", "used_bytes")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FS_ID_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    fs_id: FilesystemIdentifier
    used_bytes: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., fs_id: _Optional[_Union[FilesystemIdentifier, _Mapping]] = ..., used_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class ImageFsInfoResponse(_message.Message):
    __slots__ = ("image_filesystems", "container_filesystems")
    IMAGE_FILESYSTEMS_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FILESYSTEMS_FIELD_NUMBER: _ClassVar[int]
    image_filesystems: _containers.RepeatedCompositeFieldContainer[FilesystemUsage]
    container_filesystems: _containers.RepeatedCompositeFieldContainer[FilesystemUsage]
    def __init__(self, image_filesystems: _Optional[_Iterable[_Union[FilesystemUsage, _Mapping]]] = ..., container_filesystems: _Optional[_Iterable[_Union[FilesystemUsage, _Mapping]]] = ...) -> None: ...

class ContainerStatsRequest(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class ContainerStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: ContainerStats
    def __init__(self, stats: _Optional[_Union[ContainerStats, _Mapping]] = ...) -> None: ...

class ListContainerStatsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: ContainerStatsFilter
    def __init__(self, filter: _Optional[_Union[ContainerStatsFilter, _Mapping]] = ...) -> None: ...

class ContainerStatsFilter(_message.Message):
    __slots__ = ("id", "pod_sandbox_id", "label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    POD_SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    pod_sandbox_id: str
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., pod_sandbox_id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListContainerStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[ContainerStats]
    def __init__(self, stats: _Optional[_Iterable[_Union[ContainerStats, _Mapping]]] = ...) -> None: ...

class ContainerAttributes(_message.Message):
    __slots__ = ("id", "metadata", "labels", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    metadata: ContainerMetadata
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., metadata: _Optional[_Union[ContainerMetadata, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerStats(_message.Message):
    __slots__ = ("attributes", "cpu", "memory", "writable_layer", "swap", "io")
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_LAYER_FIELD_NUMBER: _ClassVar[int]
    SWAP_FIELD_NUMBER: _ClassVar[int]
    IO_FIELD_NUMBER: _ClassVar[int]
    attributes: ContainerAttributes
    cpu: CpuUsage
    memory: MemoryUsage
    writable_layer: FilesystemUsage
    swap: SwapUsage
    io: IoUsage
    def __init__(self, attributes: _Optional[_Union[ContainerAttributes, _Mapping]] = ..., cpu: _Optional[_Union[CpuUsage, _Mapping]] = ..., memory: _Optional[_Union[MemoryUsage, _Mapping]] = ..., writable_layer: _Optional[_Union[FilesystemUsage, _Mapping]] = ..., swap: _Optional[_Union[SwapUsage, _Mapping]] = ..., io: _Optional[_Union[IoUsage, _Mapping]] = ...) -> None: ...

class WindowsContainerStats(_message.Message):
    __slots__ = ("attributes", "cpu", "memory", "writable_layer")
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_LAYER_FIELD_NUMBER: _ClassVar[int]
    attributes: ContainerAttributes
    cpu: WindowsCpuUsage
    memory: WindowsMemoryUsage
    writable_layer: WindowsFilesystemUsage
    def __init__(self, attributes: _Optional[_Union[ContainerAttributes, _Mapping]] = ..., cpu: _Optional[_Union[WindowsCpuUsage, _Mapping]] = ..., memory: _Optional[_Union[WindowsMemoryUsage, _Mapping]] = ..., writable_layer: _Optional[_Union[WindowsFilesystemUsage, _Mapping]] = ...) -> None: ...

class PsiStats(_message.Message):
    __slots__ = ("Full", "Some")
    FULL_FIELD_NUMBER: _ClassVar[int]
    SOME_FIELD_NUMBER: _ClassVar[int]
    Full: PsiData
    Some: PsiData
    def __init__(self, Full: _Optional[_Union[PsiData, _Mapping]] = ..., Some: _Optional[_Union[PsiData, _Mapping]] = ...) -> None: ...

class PsiData(_message.Message):
    __slots__ = ("Total", "Avg10", "Avg60", "Avg300")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    AVG10_FIELD_NUMBER: _ClassVar[int]
    AVG60_FIELD_NUMBER: _ClassVar[int]
    AVG300_FIELD_NUMBER: _ClassVar[int]
    Total: int
    Avg10: float
    Avg60: float
    Avg300: float
    def __init__(self, Total: _Optional[int] = ..., Avg10: _Optional[float] = ..., Avg60: _Optional[float] = ..., Avg300: _Optional[float] = ...) -> None: ...

class CpuUsage(_message.Message):
    __slots__ = ("timestamp", "usage_core_nano_seconds", "usage_nano_cores", "psi")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    USAGE_CORE_NANO_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_NANO_CORES_FIELD_NUMBER: _ClassVar[int]
    PSI_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    usage_core_nano_seconds: UInt64Value
    usage_nano_cores: UInt64Value
    psi: PsiStats
    def __init__(self, timestamp: _Optional[int] = ..., usage_core_nano_seconds: _Optional[_Union[UInt64Value, _Mapping]] = ..., usage_nano_cores: _Optional[_Union[UInt64Value, _Mapping]] = ..., psi: _Optional[_Union[PsiStats, _Mapping]] = ...) -> None: ...

class WindowsCpuUsage(_message.Message):
    __slots__ = ("timestamp", "usage_core_nano_seconds", "usage_nano_cores")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    USAGE_CORE_NANO_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_NANO_CORES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    usage_core_nano_seconds: UInt64Value
    usage_nano_cores: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., usage_core_nano_seconds: _Optional[_Union[UInt64Value, _Mapping]] = ..., usage_nano_cores: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class MemoryUsage(_message.Message):
    __slots__ = ("timestamp", "working_set_bytes", "available_bytes", "usage_bytes", "rss_bytes", "page_faults", "major_page_faults", "psi")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    WORKING_SET_BYTES_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    USAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FAULTS_FIELD_NUMBER: _ClassVar[int]
    MAJOR_PAGE_FAULTS_FIELD_NUMBER: _ClassVar[int]
    PSI_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    working_set_bytes: UInt64Value
    available_bytes: UInt64Value
    usage_bytes: UInt64Value
    rss_bytes: UInt64Value
    page_faults: UInt64Value
    major_page_faults: UInt64Value
    psi: PsiStats
    def __init__(self, timestamp: _Optional[int] = ..., working_set_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., available_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., usage_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., rss_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., page_faults: _Optional[_Union[UInt64Value, _Mapping]] = ..., major_page_faults: _Optional[_Union[UInt64Value, _Mapping]] = ..., psi: _Optional[_Union[PsiStats, _Mapping]] = ...) -> None: ...

class IoUsage(_message.Message):
    __slots__ = ("timestamp", "psi")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PSI_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    psi: PsiStats
    def __init__(self, timestamp: _Optional[int] = ..., psi: _Optional[_Union[PsiStats, _Mapping]] = ...) -> None: ...

class SwapUsage(_message.Message):
    __slots__ = ("timestamp", "swap_available_bytes", "swap_usage_bytes")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SWAP_AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SWAP_USAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    swap_available_bytes: UInt64Value
    swap_usage_bytes: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., swap_available_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., swap_usage_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class WindowsMemoryUsage(_message.Message):
    __slots__ = ("timestamp", "working_set_bytes", "available_bytes", "page_faults", "commit_memory_bytes")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    WORKING_SET_BYTES_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FAULTS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    working_set_bytes: UInt64Value
    available_bytes: UInt64Value
    page_faults: UInt64Value
    commit_memory_bytes: UInt64Value
    def __init__(self, timestamp: _Optional[int] = ..., working_set_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., available_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ..., page_faults: _Optional[_Union[UInt64Value, _Mapping]] = ..., commit_memory_bytes: _Optional[_Union[UInt64Value, _Mapping]] = ...) -> None: ...

class ReopenContainerLogRequest(_message.Message):
    __slots__ = ("container_id",)
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    def __init__(self, container_id: _Optional[str] = ...) -> None: ...

class ReopenContainerLogResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckpointContainerRequest(_message.Message):
    __slots__ = ("container_id", "location", "timeout")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    location: str
    timeout: int
    def __init__(self, container_id: _Optional[str] = ..., location: _Optional[str] = ..., timeout: _Optional[int] = ...) -> None: ...

class CheckpointContainerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
