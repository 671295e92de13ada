"""Builders for the objects tests make over and over: pods, containers, runtime views.

Each takes only what a test cares about and fills the rest with plain defaults, so a
test reads as the case it checks::

    pod = make_pod(make_container("app", liveness_probe=probe), restart_policy="Never")
    status = runtime_status(pod, running("app", cid="c1"), exited("init", code=1))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, PodStatus
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxInfo,
    SandboxState,
)

__all__ = [
    "exited",
    "make_container",
    "make_pod",
    "ready_sandbox",
    "running",
    "runtime_status",
]

NS = 1_000_000_000
"""Nanoseconds per second: runtime times are nanoseconds since the epoch."""


def make_container(name: str = "app", image: str = "busybox", **fields: Any) -> Container:
    """A container; ``fields`` are ``Container``'s own (``liveness_probe=``, ``env=``...)."""
    return Container(name=name, image=image, **fields)


def make_pod(
    *containers: Container,
    name: str = "web",
    namespace: str = "default",
    uid: str = "uid-1",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    init: tuple[Container, ...] = (),
    status: PodStatus | None = None,
    **spec: Any,
) -> Pod:
    """A pod of ``containers`` (``make_container()`` for the usual one); ``spec`` are
    ``PodSpec``'s own fields (``restart_policy=``, ``host_network=``...)."""
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=uid,
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
        ),
        spec=attrs.evolve(
            PodSpec(containers=containers, init_containers=init),
            **spec,
        ),
        status=status or PodStatus(),
    )


def running(name: str, cid: str = "", *, started_at: float = 100.0, **fields: Any) -> ContainerInfo:
    """A running instance of container ``name`` (id ``cid``, default ``<name>-id``),
    started ``started_at`` seconds after the epoch."""
    return ContainerInfo(
        id=cid or f"{name}-id",
        name=name,
        state=ContainerRunState.RUNNING,
        started_at=int(started_at * NS),
        **fields,
    )


def exited(
    name: str,
    code: int = 0,
    cid: str = "",
    *,
    started_at: float = 100.0,
    finished_at: float = 200.0,
    **fields: Any,
) -> ContainerInfo:
    """An instance of container ``name`` that exited with ``code``."""
    return ContainerInfo(
        id=cid or f"{name}-id",
        name=name,
        state=ContainerRunState.EXITED,
        exit_code=code,
        started_at=int(started_at * NS),
        finished_at=int(finished_at * NS),
        **fields,
    )


def ready_sandbox(sid: str = "sandbox-1", ip: str = "10.88.0.5", **fields: Any) -> SandboxInfo:
    """A ready sandbox with a pod IP."""
    return SandboxInfo(id=sid, state=SandboxState.READY, ip=ip, **fields)


def runtime_status(
    pod: Pod,
    *containers: ContainerInfo,
    sandboxes: tuple[SandboxInfo, ...] | None = None,
) -> RuntimePodStatus:
    """What the runtime holds for ``pod``: ``containers`` (newest first) in one ready
    sandbox, unless ``sandboxes`` says otherwise."""
    return RuntimePodStatus(
        uid=pod.uid,
        name=pod.metadata.name,
        namespace=pod.metadata.namespace,
        sandboxes=(ready_sandbox(),) if sandboxes is None else sandboxes,
        containers=containers,
    )
