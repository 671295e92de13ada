"""CRI configs built from a pod spec, and the runtime view parsed back from CRI answers.

The builders write what upstream's ``generatePodSandboxConfig`` and
``generateContainerConfig`` write -- labels, annotations, log paths, resources,
security context -- so that the runtime state looks the same as under an upstream
kubelet and either kubelet can adopt the other's containers. Volumes, devices and
``valueFrom`` environment are the caller's (``mounts``, ``env``).

Two defaults differ from the CRI zero values and matter on containerd: the container
PID namespace is CONTAINER unless ``hostPID``/``shareProcessNamespace`` (zero would be
POD, and the container's process would not be PID 1), and the container seccomp
profile is Unconfined unless the pod asks or ``seccompDefault`` is on (zero would be
RuntimeDefault). The security context itself is ``security``'s decision.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any

from kubelet.api import (
    Container,
    ContainerPort,
    HTTPGetAction,
    LifecycleHandler,
    Pod,
    sysctl,
    to_bytes,
    to_millicores,
)
from kubelet.cgroups import milli_cpu_to_quota, milli_cpu_to_shares
from kubelet.cri import RuntimePodStatus, api, labels
from kubelet.env import ExpansionBudget, expand_all, expand_env, kernel_hostname
from kubelet.goformat import go_json

from .contribution import NO_CONTRIBUTION, ContainerContribution, apply_contribution
from .hash import hash_container
from .limits import ContainerLimits, configure_oom_group, configure_swap, hugepage_limits
from .qos import BEST_EFFORT, BURSTABLE, container_oom_score_adj, pod_qos
from .resize import encode_resources
from .security import (
    DEFAULT_MASKED_PATHS,
    DEFAULT_READONLY_PATHS,
    container_security_context,
    sandbox_security_context,
)
from .sysctls import pod_sysctls

__all__ = [
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_POD_LOGS_DIR",
    "DEFAULT_READONLY_PATHS",
    "container_annotations",
    "container_config",
    "container_labels",
    "container_log_path",
    "expand_env",
    "linux_container_resources",
    "namespace_options",
    "next_restart_count",
    "overhead_resources",
    "pod_cgroup_parent",
    "pod_log_directory",
    "port_mappings",
    "restart_count_from_logs",
    "sandbox_config",
    "sandbox_labels",
]

DEFAULT_POD_LOGS_DIR = "/var/log/pods"
DEFAULT_SECCOMP_ROOT = "/var/lib/kubelet/seccomp"

DEFAULT_LIMITS = ContainerLimits()

_PROTOCOLS = {"TCP": api.TCP, "UDP": api.UDP, "SCTP": api.SCTP}


# -- names and paths ------------------------------------------------------------------------


def pod_log_directory(pod: Pod, pod_logs_dir: str = DEFAULT_POD_LOGS_DIR) -> str:
    """``<podLogsDir>/<namespace>_<name>_<uid>``."""
    meta = pod.metadata
    return posixpath.join(pod_logs_dir, f"{meta.namespace}_{meta.name}_{meta.uid}")


def container_log_path(container_name: str, restart_count: int) -> str:
    """``<container>/<restartCount>.log``, relative to the pod log directory."""
    return posixpath.join(container_name, f"{restart_count}.log")


def pod_cgroup_parent(pod: Pod, cgroup_root: str = "/") -> str:
    """The pod's cgroup (cgroupfs driver): ``/kubepods[/burstable|/besteffort]/pod<uid>``."""
    qos = pod_qos(pod)
    parts = ["kubepods"]
    if qos == BURSTABLE:
        parts.append("burstable")
    elif qos == BEST_EFFORT:
        parts.append("besteffort")
    parts.append(f"pod{pod.metadata.uid}")
    return posixpath.join(cgroup_root, *parts)


def next_restart_count(status: RuntimePodStatus, name: str) -> int | None:
    """Restart count for a new instance of ``name``: newest instance's + 1.

    None when the runtime has no instance; upstream then reads the highest
    ``<n>.log`` in the container's log directory (the caller's I/O).
    """
    current = status.current(name)
    return None if current is None else current.restart_count + 1


_LOG_FILE = re.compile(r"^(\d+)\.log(\..*)?")
_MAX_RESTART_COUNT = 2**31 - 2
"""The highest count a log file may give: the API's restartCount is an int32."""


def restart_count_from_logs(names: Iterable[str]) -> int:
    """Restart count for a new instance of a container the runtime has none of, from the
    file names in its log directory (upstream's ``calcRestartCountByLogDir``): one more
    than the highest ``<n>.log`` (rotated ``<n>.log.<suffix>`` too); 0 without one. The
    count goes on where it was when the runtime lost or removed the instances (a
    replaced sandbox, a wiped runtime) while the logs stayed."""
    count = 0
    for name in names:
        found = _LOG_FILE.match(name)
        if found is not None and int(found.group(1)) <= _MAX_RESTART_COUNT:
            count = max(count, int(found.group(1)) + 1)
    return count


# -- labels and annotations -----------------------------------------------------------------


def sandbox_labels(pod: Pod) -> dict[str, str]:
    """The pod's labels plus its name, namespace and UID (those win on conflict)."""
    meta = pod.metadata
    return {
        **meta.labels,
        labels.POD_NAME: meta.name,
        labels.POD_NAMESPACE: meta.namespace,
        labels.POD_UID: meta.uid,
    }


def container_labels(pod: Pod, container: Container) -> dict[str, str]:
    """Only the identity labels; pod labels stay on the sandbox."""
    meta = pod.metadata
    return {
        labels.POD_NAME: meta.name,
        labels.POD_NAMESPACE: meta.namespace,
        labels.POD_UID: meta.uid,
        labels.CONTAINER_NAME: container.name,
    }


def _ports_json(ports: Sequence[ContainerPort]) -> str:
    out = []
    for p in ports:
        item: dict[str, Any] = {}
        if p.name:
            item["name"] = p.name
        if p.host_port:
            item["hostPort"] = p.host_port
        item["containerPort"] = p.container_port
        if p.protocol:
            item["protocol"] = p.protocol
        if p.host_ip:
            item["hostIP"] = p.host_ip
        out.append(item)
    return go_json(out)


def _http_get_json(action: HTTPGetAction) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if action.path:
        item["path"] = action.path
    item["port"] = action.port
    if action.host:
        item["host"] = action.host
    if action.scheme:
        item["scheme"] = action.scheme
    if action.http_headers:
        item["httpHeaders"] = [{"name": h.name, "value": h.value} for h in action.http_headers]
    return item


def _handler_json(handler: LifecycleHandler) -> str:
    """A LifecycleHandler in Go's field order (exec, httpGet, tcpSocket, sleep)."""
    item: dict[str, Any] = {}
    if handler.exec is not None:
        item["exec"] = {"command": list(handler.exec.command)} if handler.exec.command else {}
    if handler.http_get is not None:
        item["httpGet"] = _http_get_json(handler.http_get)
    if handler.tcp_socket is not None:
        tcp: dict[str, Any] = {"port": handler.tcp_socket.port}
        if handler.tcp_socket.host:
            tcp["host"] = handler.tcp_socket.host
        item["tcpSocket"] = tcp
    if handler.sleep is not None:
        item["sleep"] = {"seconds": handler.sleep.seconds}
    return go_json(item)


def container_annotations(pod: Pod, container: Container, restart_count: int) -> dict[str, str]:
    """What a kubelet needs to adopt or kill the container without the pod spec, and
    (ours) the resources it is created with: what is in force after a resize, for a
    restarted kubelet (``resize``)."""
    out = {
        labels.CONTAINER_HASH: hash_container(container),
        labels.CONTAINER_RESTART_COUNT: str(restart_count),
        labels.CONTAINER_TERMINATION_MESSAGE_PATH: container.termination_message_path,
        labels.CONTAINER_TERMINATION_MESSAGE_POLICY: container.termination_message_policy,
        labels.CONTAINER_RESOURCES: encode_resources(container.resources),
    }
    if pod.spec.resources is not None:
        out[labels.POD_RESOURCES] = encode_resources(pod.spec.resources)
    if pod.metadata.deletion_grace_period_seconds is not None:
        out[labels.POD_DELETION_GRACE_PERIOD] = str(pod.metadata.deletion_grace_period_seconds)
    if pod.spec.termination_grace_period_seconds is not None:
        out[labels.POD_TERMINATION_GRACE_PERIOD] = str(pod.spec.termination_grace_period_seconds)
    if container.lifecycle is not None and container.lifecycle.pre_stop is not None:
        out[labels.CONTAINER_PRESTOP_HANDLER] = _handler_json(container.lifecycle.pre_stop)
    if container.ports:
        out[labels.CONTAINER_PORTS] = _ports_json(container.ports)
    return out


# -- namespaces, security, resources -------------------------------------------------------


def namespace_options(pod: Pod, userns: api.UserNamespace | None = None) -> api.NamespaceOption:
    """Network/IPC: NODE with hostNetwork/hostIPC, else POD. PID: NODE with hostPID, POD
    with shareProcessNamespace, else CONTAINER (set explicitly: the zero value is POD).
    ``userns``: the user namespace as ``userns.decide`` resolved it (None: unset)."""
    spec = pod.spec
    if spec.host_pid:
        pid = api.NODE
    elif spec.share_process_namespace:
        pid = api.POD
    else:
        pid = api.CONTAINER
    out = api.NamespaceOption(
        network=api.NODE if spec.host_network else api.POD,
        pid=pid,
        ipc=api.NODE if spec.host_ipc else api.POD,
    )
    if userns is not None:
        out.userns_options.CopyFrom(userns)
    return out


def target_namespaces(namespaces: api.NamespaceOption, target_id: str) -> api.NamespaceOption:
    """An ephemeral container's namespaces with ``targetContainerName``: it joins the
    target container's PID namespace (TARGET), unless the pod already shares one (POD
    with shareProcessNamespace, NODE with hostPID)."""
    out = api.NamespaceOption()
    out.CopyFrom(namespaces)
    if out.pid == api.CONTAINER:
        out.pid = api.TARGET
        out.target_id = target_id
    return out


def port_mappings(pod: Pod) -> list[api.PortMapping]:
    """Every declared container port (the runtime forwards those with a hostPort).

    A port repeated within one container (same name, or same family/protocol/IP/ports
    when unnamed) is listed once, as upstream ``MakePortMappings``.
    """
    out = []
    for container in pod.spec.containers:
        names: set[str] = set()
        for p in container.ports:
            family = "any" if not p.host_ip else ("v6" if ":" in p.host_ip else "v4")
            host_port = p.host_port or 0
            key = p.name or f"{family}-{p.protocol}-{p.host_ip}:{p.container_port}:{host_port}"
            if key in names:
                continue
            names.add(key)
            out.append(
                api.PortMapping(
                    protocol=_PROTOCOLS.get(p.protocol, api.TCP),
                    container_port=p.container_port,
                    host_port=host_port,
                    host_ip=p.host_ip,
                )
            )
    return out


def linux_container_resources(
    pod: Pod,
    container: Container,
    *,
    memory_capacity: int,
    limits: ContainerLimits = DEFAULT_LIMITS,
) -> api.LinuxContainerResources:
    """CPU shares from the request (the limit when no request), CFS quota from the limit
    over the node's period (neither with ``cpuCFSQuota: false``), the memory limit, and
    the OOM score adjustment, a hugepage limit per page size of the node, group OOM
    kill and swap (``decisions/limits.py``)."""
    requests = container.resources.requests if container.resources else {}
    declared = container.resources.limits if container.resources else {}
    cpu_limit = to_millicores(declared.get("cpu"))
    if "cpu" in requests:
        shares = milli_cpu_to_shares(to_millicores(requests["cpu"]))
    else:
        shares = milli_cpu_to_shares(cpu_limit)
    out = api.LinuxContainerResources(
        cpu_shares=shares,
        oom_score_adj=container_oom_score_adj(pod, container, memory_capacity),
    )
    memory_limit = to_bytes(declared.get("memory"))
    if memory_limit:
        out.memory_limit_in_bytes = memory_limit
    if limits.cpu_cfs_quota:
        out.cpu_period = limits.cpu_period
        out.cpu_quota = milli_cpu_to_quota(cpu_limit, limits.cpu_period)
    configure_oom_group(out, limits)
    configure_swap(out, pod, container, limits.swap)
    if limits.hugepage_sizes:
        out.hugepage_limits.extend(hugepage_limits(container, limits.hugepage_sizes))
    return out


def overhead_resources(
    pod: Pod, *, limits: ContainerLimits = DEFAULT_LIMITS
) -> api.LinuxContainerResources:
    """The pod's ``overhead`` (set from its RuntimeClass) as resources, requests equal to
    limits, for the sandbox config's ``overhead`` as upstream sends it."""
    cpu = to_millicores(pod.spec.overhead.get("cpu"))
    out = api.LinuxContainerResources(cpu_shares=milli_cpu_to_shares(cpu))
    memory = to_bytes(pod.spec.overhead.get("memory"))
    if memory:
        out.memory_limit_in_bytes = memory
    if limits.cpu_cfs_quota:
        out.cpu_period = limits.cpu_period
        out.cpu_quota = milli_cpu_to_quota(cpu, limits.cpu_period)
    configure_oom_group(out, limits)
    return out


# -- environment --------------------------------------------------------------------------


def _literal_env(container: Container) -> list[tuple[str, str]]:
    """The container's ``value`` env vars, each expanded against those before it.

    ``valueFrom`` entries are skipped here (they need API objects or the pod status).
    A name given twice keeps its first position and its last value.
    """
    values: dict[str, str] = {}
    budget = ExpansionBudget()
    for var in container.env:
        if var.value_from is not None:
            continue
        values[var.name] = expand_env(var.value or "", values, budget=budget)
    return list(values.items())


# -- builders -----------------------------------------------------------------------------


def sandbox_config(
    pod: Pod,
    attempt: int,
    *,
    pod_logs_dir: str = DEFAULT_POD_LOGS_DIR,
    cgroup_parent: str | None = None,
    dns: api.DNSConfig | None = None,
    userns: api.UserNamespace | None = None,
    limits: ContainerLimits | None = None,
    cluster_domain: str = "",
    hostname_override_enabled: bool = True,
) -> api.PodSandboxConfig:
    """``RunPodSandbox`` config. ``cgroup_parent`` defaults to ``pod_cgroup_parent(pod)``;
    ``userns`` is the pod's user namespace as resolved for its runtime handler;
    ``hostname_override_enabled`` is the HostnameOverride gate. ``SecurityContextError``
    when the pod's security context cannot be expressed, ``PodHostnameError`` when its
    hostname cannot be made (both fail the sandbox)."""
    meta = pod.metadata
    spec = pod.spec
    config = api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(
            name=meta.name, uid=meta.uid, namespace=meta.namespace, attempt=attempt
        ),
        log_directory=pod_log_directory(pod, pod_logs_dir),
        port_mappings=port_mappings(pod),
        labels=sandbox_labels(pod),
        annotations=dict(meta.annotations),
    )
    if not spec.host_network:
        config.hostname = kernel_hostname(
            pod, cluster_domain, override_enabled=hostname_override_enabled
        )
    if dns is not None:
        config.dns_config.CopyFrom(dns)
    linux = config.linux
    linux.cgroup_parent = pod_cgroup_parent(pod) if cgroup_parent is None else cgroup_parent
    sc = linux.security_context
    sandbox_security_context(pod, sc)
    sc.namespace_options.CopyFrom(namespace_options(pod, userns))
    for name, value in pod_sysctls(pod):
        linux.sysctls[sysctl.normalize(name)] = value
    if spec.overhead:
        linux.overhead.CopyFrom(overhead_resources(pod, limits=limits or DEFAULT_LIMITS))
    return config


def container_config(
    pod: Pod,
    container: Container,
    restart_count: int,
    *,
    image_ref: str,
    memory_capacity: int,
    env: Sequence[tuple[str, str]] | None = None,
    mounts: Sequence[api.Mount] = (),
    limits: ContainerLimits = DEFAULT_LIMITS,
    seccomp_profile_root: str = DEFAULT_SECCOMP_ROOT,
    seccomp_default: bool = False,
    namespaces: api.NamespaceOption | None = None,
    command_args: tuple[Sequence[str], Sequence[str]] | None = None,
    contribution: ContainerContribution = NO_CONTRIBUTION,
) -> api.ContainerConfig:
    """``CreateContainer`` config for a new instance of ``container``.

    ``image_ref``: the image as resolved by the pull (image ID or digest reference).
    ``memory_capacity``: node memory in bytes, for the OOM score. ``env``: the full
    resolved environment; by default the spec's literal values. Command and args are
    ``$(VAR)``-expanded against it; empty ones leave the image defaults in place.
    ``namespaces``: the sandbox's (with its user namespace); by default the pod's.
    ``command_args``: command and args already expanded (``env.resolve_command``).
    ``contribution``: what the node's resource managers add (devices, mounts, variables,
    annotations, CDI devices, cpuset), merged by the container manager.
    ``SecurityContextError`` when the security context cannot be expressed;
    ``ExpansionTooLarge`` when command and args pass the expansion bounds.
    """
    variables = list(env) if env is not None else _literal_env(container)
    if command_args is None:
        mapping = dict(variables)
        command_args = expand_all(container.command, mapping), expand_all(container.args, mapping)
    config = api.ContainerConfig(
        metadata=api.ContainerMetadata(name=container.name, attempt=restart_count),
        image=api.ImageSpec(image=image_ref, user_specified_image=container.image),
        command=list(command_args[0]),
        args=list(command_args[1]),
        working_dir=container.working_dir,
        envs=[api.KeyValue(key=k, value=v.encode()) for k, v in variables],
        mounts=list(mounts),
        labels=container_labels(pod, container),
        annotations=container_annotations(pod, container, restart_count),
        log_path=container_log_path(container.name, restart_count),
        stdin=bool(container.stdin),
        stdin_once=bool(container.stdin_once),
        tty=bool(container.tty),
    )
    config.linux.resources.CopyFrom(
        linux_container_resources(pod, container, memory_capacity=memory_capacity, limits=limits)
    )
    config.linux.security_context.CopyFrom(
        container_security_context(
            pod,
            container,
            namespaces=namespaces if namespaces is not None else namespace_options(pod),
            seccomp_root=seccomp_profile_root,
            seccomp_default=seccomp_default,
        )
    )
    return apply_contribution(config, contribution)


# -- reading CRI answers back --------------------------------------------------------------
