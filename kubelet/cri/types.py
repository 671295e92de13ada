"""What the kubelet knows of a pod from the runtime: sandboxes and containers.

Built from CRI answers (PodSandboxStatus, ContainerStatus) by the PLEG and read by the
pure decision functions (``actions.compute_pod_actions``, status generation). Lists are
newest first, so ``containers_named(n)[0]`` is the current instance of container n.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs


class ContainerRunState(enum.Enum):
    """A container's state as the kubelet reasons about it (CRI state mapped)."""

    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


class SandboxState(enum.Enum):
    READY = "ready"
    NOTREADY = "notready"


@attrs.frozen(kw_only=True)
class ContainerUser:
    """The identity a container's process runs as, as the runtime reports it."""

    uid: int
    gid: int
    supplemental_groups: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class RunningResources:
    """The CPU and memory a container runs with, as the runtime reports them
    (``ContainerStatus.resources.linux``); 0: not set."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0


@attrs.frozen(kw_only=True)
class ContainerInfo:
    """One container instance as the runtime reports it; times are ns since the epoch."""

    id: str
    name: str
    state: ContainerRunState
    sandbox_id: str = ""
    attempt: int = 0
    hash: str = ""
    restart_count: int = 0
    image: str = ""
    image_ref: str = ""
    image_id: str = ""
    created_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    log_path: str = ""
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    user: ContainerUser | None = None
    """Only from ContainerStatus, when the runtime reports it (containerd 2 does)."""
    resources: RunningResources | None = None
    """Only from ContainerStatus, when the runtime reports them (containerd does)."""


@attrs.frozen(kw_only=True)
class SandboxInfo:
    """One pod sandbox instance."""

    id: str
    state: SandboxState
    attempt: int = 0
    created_at: int = 0
    ip: str = ""
    additional_ips: tuple[str, ...] = ()
    host_network: bool = False
    labels: Mapping[str, str] = attrs.field(factory=dict)
    annotations: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RuntimePodStatus:
    """Everything the runtime holds for one pod UID, newest instances first."""

    uid: str
    name: str = ""
    namespace: str = ""
    sandboxes: tuple[SandboxInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()
    timestamp: float = 0.0

    def containers_named(self, name: str) -> list[ContainerInfo]:
        """Instances of container ``name``, newest first."""
        return [c for c in self.containers if c.name == name]

    def current(self, name: str) -> ContainerInfo | None:
        """The newest instance of container ``name``, if any."""
        for c in self.containers:
            if c.name == name:
                return c
        return None

    @property
    def ip(self) -> str:
        """IP of the newest sandbox ("" if none or host network)."""
        return self.sandboxes[0].ip if self.sandboxes else ""
