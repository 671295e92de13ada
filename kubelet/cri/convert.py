"""CRI answers read back into the kubelet's runtime view (``kubelet.cri.types``).

ContainerStatus and PodSandboxStatus become ``ContainerInfo`` and ``SandboxInfo``, with
the labels and annotations the kubelet wrote (``kubelet.cri.labels``) parsed: restart
count, container hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubelet.cri import cri_api_pb2 as api

from . import labels
from .types import (
    ContainerInfo,
    ContainerRunState,
    ContainerUser,
    RunningResources,
    SandboxInfo,
    SandboxState,
)

_CRI_STATES = {
    api.CONTAINER_CREATED: ContainerRunState.CREATED,
    api.CONTAINER_RUNNING: ContainerRunState.RUNNING,
    api.CONTAINER_EXITED: ContainerRunState.EXITED,
    api.CONTAINER_UNKNOWN: ContainerRunState.UNKNOWN,
}


def _restart_count(annotations: Mapping[str, str]) -> int:
    try:
        return int(annotations.get(labels.CONTAINER_RESTART_COUNT, "0"))
    except ValueError:
        return 0


def container_info_from_cri(
    c: api.Container | api.ContainerStatus, *, sandbox_id: str = ""
) -> ContainerInfo:
    """The runtime view of one container from ListContainers or ContainerStatus.

    Name, hash and restart count come from our labels and annotations (the metadata
    name only when the label is missing). A ListContainers entry has no times beyond
    creation and no exit code; ``sandbox_id`` fills in what ContainerStatus lacks.
    """
    lab = dict(c.labels)
    ann = dict(c.annotations)
    state = _CRI_STATES.get(c.state, ContainerRunState.UNKNOWN)
    common: dict[str, Any] = {
        "id": c.id,
        "name": lab.get(labels.CONTAINER_NAME) or c.metadata.name,
        "state": state,
        "attempt": c.metadata.attempt,
        "hash": parse_hash(ann.get(labels.CONTAINER_HASH, "")),
        "restart_count": _restart_count(ann),
        "image": c.image.image,
        "image_ref": c.image_ref,
        "image_id": c.image_id or c.image_ref,
        "created_at": c.created_at,
        "labels": lab,
        "annotations": ann,
    }
    if isinstance(c, api.Container):
        return ContainerInfo(sandbox_id=c.pod_sandbox_id or sandbox_id, **common)
    exited = state is ContainerRunState.EXITED
    return ContainerInfo(
        sandbox_id=sandbox_id,
        started_at=c.started_at if state is not ContainerRunState.CREATED else 0,
        finished_at=c.finished_at if exited else 0,
        exit_code=c.exit_code if exited else 0,
        reason=c.reason if exited else "",
        message=c.message if exited else "",
        log_path=c.log_path,
        user=_user(c),
        resources=_resources(c),
        **common,
    )


def _resources(c: api.ContainerStatus) -> RunningResources | None:
    """What the container runs with, when the runtime says (``status.resources``)."""
    if not (c.HasField("resources") and c.resources.HasField("linux")):
        return None
    linux = c.resources.linux
    return RunningResources(
        cpu_shares=linux.cpu_shares,
        cpu_quota=linux.cpu_quota,
        cpu_period=linux.cpu_period,
        memory_limit=linux.memory_limit_in_bytes,
    )


def _user(c: api.ContainerStatus) -> ContainerUser | None:
    """The process's uid, gid and groups, when the runtime says (``status.user``)."""
    if not (c.HasField("user") and c.user.HasField("linux")):
        return None
    linux = c.user.linux
    return ContainerUser(
        uid=linux.uid, gid=linux.gid, supplemental_groups=tuple(linux.supplemental_groups)
    )


def sandbox_info_from_cri(s: api.PodSandbox | api.PodSandboxStatus) -> SandboxInfo:
    """The runtime view of one sandbox from ListPodSandbox or PodSandboxStatus.

    Only a status carries the network: its IP and whether it uses the host network.
    """
    common: dict[str, Any] = {
        "id": s.id,
        "state": SandboxState.READY if s.state == api.SANDBOX_READY else SandboxState.NOTREADY,
        "attempt": s.metadata.attempt,
        "created_at": s.created_at,
        "labels": dict(s.labels),
        "annotations": dict(s.annotations),
    }
    if isinstance(s, api.PodSandbox):
        return SandboxInfo(**common)
    return SandboxInfo(
        ip=s.network.ip,
        additional_ips=tuple(ip.ip for ip in s.network.additional_ips),
        host_network=s.linux.namespaces.options.network == api.NODE,
        **common,
    )


_HEX = re.compile(r"[0-9a-fA-F]+")


def parse_hash(text: str) -> str:
    """Normalise an annotation value read back from the runtime ("" if unparseable).

    Upstream parses the annotation as a hex number, so "0a" and "a" are the same hash.
    """
    if not _HEX.fullmatch(text):
        return ""
    value = int(text, 16)
    return format(value, "x") if value < 1 << 64 else ""
