"""Reading the runtime: what pods it holds, and everything about one pod.

All reads the PLEG, the pod cache and housekeeping make go through ``RuntimeView``.
Only sandboxes and containers that carry the kubelet's ``io.kubernetes.pod.uid`` label
are considered pods; anything else on the runtime is not ours and is left alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import outcome
import trio

from kubelet.api import ObjectMeta, Pod, PodSpec
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    NotFound,
    RuntimeClient,
    RuntimePodStatus,
    SandboxInfo,
    api,
    container_info_from_cri,
    host_path_of,
    labels,
    sandbox_info_from_cri,
    termination_message,
)

from .generator import PlegState, PodStates

log = logging.getLogger(__name__)

STATUS_CONCURRENCY = 8

T = TypeVar("T")

_PLEG_STATES = {
    api.CONTAINER_RUNNING: PlegState.RUNNING,
    api.CONTAINER_EXITED: PlegState.EXITED,
}


class RuntimeView:
    """CRI reads shaped for the kubelet. Cheap to construct; keeps only its last listing."""

    def __init__(self, runtime: RuntimeClient) -> None:
        self.runtime = runtime
        self._listed_at = -math.inf
        """When the last relist that finished began (trio clock)."""
        self._listed: frozenset[str] | None = None
        """The pod uids the last relist listed (None: no relist finished yet)."""

    async def relist(self) -> PodStates:
        """uid → container/sandbox id → state, from two list calls."""
        began = trio.current_time()
        sandboxes, containers = await self._list_both()
        # 1000 items a second at 500 pods: names looked up once, not per item (-20 %)
        key, ready, running, exited = (
            labels.POD_UID,
            api.SANDBOX_READY,
            PlegState.RUNNING,
            PlegState.EXITED,
        )
        state_of, unknown = _PLEG_STATES.get, PlegState.UNKNOWN
        out: dict[str, dict[str, PlegState]] = {}
        for s in sandboxes:
            if uid := s.labels.get(key):
                if (states := out.get(uid)) is None:
                    states = out[uid] = {}
                states[s.id] = running if s.state == ready else exited
        for c in containers:
            if uid := c.labels.get(key):
                if (states := out.get(uid)) is None:
                    states = out[uid] = {}
                states[c.id] = state_of(c.state, unknown)
        self._listed, self._listed_at = frozenset(out), began
        return out

    async def _list_both(self) -> tuple[list[api.PodSandbox], list[api.Container]]:
        """Both lists at once: the relist takes the slower of the two answers, not their
        sum (on a loaded node each waits for the runtime and then for a core). Either
        call's error is raised as itself (the sandboxes' first), not as a group."""
        listed: list[outcome.Outcome[list[api.Container]]] = []

        async def list_containers() -> None:
            listed.append(await _capture(self.runtime.list_containers))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(list_containers)  # sent right after the sandboxes' request
            sandboxes = await _capture(self.runtime.list_pod_sandbox)
        return sandboxes.unwrap(), listed[0].unwrap()

    def listed_uids(self, max_age: float) -> frozenset[str] | None:
        """The pod uids of the last relist, when it began at most ``max_age`` seconds ago
        (else None): housekeeping's steady-state look at the runtime, with no CRI call
        and nothing built."""
        if trio.current_time() - self._listed_at > max_age:
            return None
        return self._listed

    def unlisted(self, uid: str) -> bool:
        """The last relist listed no sandbox and no container of ``uid`` (False before the
        first relist)."""
        return self._listed is not None and uid not in self._listed

    async def pod_status(self, uid: str) -> RuntimePodStatus:
        """Sandboxes and containers of one pod, with full statuses, newest first.

        The two lists run at once, and each item's status as soon as its list is in: a
        pod worker reads this before its pod's first CRI action and before its kill."""
        selector = {labels.POD_UID: uid}
        sandboxes: list[api.PodSandbox] = []
        containers: list[api.Container] = []
        sandbox_infos: list[SandboxInfo] = []
        container_infos: list[ContainerInfo] = []
        limiter = trio.CapacityLimiter(STATUS_CONCURRENCY)

        async def sandbox_status(s: api.PodSandbox) -> None:
            async with limiter:
                try:
                    resp = await self.runtime.pod_sandbox_status(s.id)
                except NotFound:
                    return  # removed meanwhile
            sandbox_infos.append(sandbox_info_from_cri(resp.status))

        async def container_status(c: api.Container) -> None:
            async with limiter:
                try:
                    resp = await self.runtime.container_status(c.id)
                except NotFound:
                    return
            info = container_info_from_cri(resp.status, sandbox_id=c.pod_sandbox_id)
            if info.state is ContainerRunState.EXITED:
                info = with_termination_message(info, resp.status)
            container_infos.append(info)

        async def list_sandboxes(nursery: trio.Nursery) -> None:
            sandboxes.extend(await self.runtime.list_pod_sandbox(labels=selector))
            for s in sandboxes:
                nursery.start_soon(sandbox_status, s)

        async def list_containers(nursery: trio.Nursery) -> None:
            containers.extend(await self.runtime.list_containers(labels=selector))
            for c in containers:
                nursery.start_soon(container_status, c)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(list_sandboxes, nursery)
            nursery.start_soon(list_containers, nursery)
        sandbox_infos.sort(key=lambda s: (s.created_at, s.attempt), reverse=True)
        container_infos.sort(key=lambda c: (c.created_at, c.attempt), reverse=True)
        name = namespace = ""
        for item_labels in [s.labels for s in sandboxes] + [c.labels for c in containers]:
            name = name or item_labels.get(labels.POD_NAME, "")
            namespace = namespace or item_labels.get(labels.POD_NAMESPACE, "")
        return RuntimePodStatus(
            uid=uid,
            name=name,
            namespace=namespace,
            sandboxes=tuple(sandbox_infos),
            containers=tuple(container_infos),
            timestamp=trio.current_time(),
        )

    async def pod_identities(self) -> dict[str, tuple[str, str]]:
        """uid → (namespace, name) of every pod the runtime holds, listed now."""
        sandboxes = await self.runtime.list_pod_sandbox()
        containers = await self.runtime.list_containers()
        out: dict[str, tuple[str, str]] = {}
        for s in sandboxes:
            uid = s.labels.get(labels.POD_UID)
            if uid:
                out[uid] = (
                    s.labels.get(labels.POD_NAMESPACE, s.metadata.namespace),
                    s.labels.get(labels.POD_NAME, s.metadata.name),
                )
        for c in containers:
            uid = c.labels.get(labels.POD_UID)
            if uid and uid not in out:
                out[uid] = (
                    c.labels.get(labels.POD_NAMESPACE, ""),
                    c.labels.get(labels.POD_NAME, ""),
                )
        return out


async def _capture(call: Callable[[], Awaitable[T]]) -> outcome.Outcome[T]:
    """``call``'s result or error (not Trio's cancellation, which passes through)."""
    try:
        return outcome.Value(await call())
    except Exception as exc:
        return outcome.Error(exc)


def with_termination_message(info: ContainerInfo, status: api.ContainerStatus) -> ContainerInfo:
    """An exited container's message as the API shows it: its termination-message file
    (or its log tail with FallbackToLogsOnError), read once it has exited."""
    path = info.annotations.get(labels.CONTAINER_TERMINATION_MESSAGE_PATH, "")
    host_path = host_path_of(status.mounts, path) if path else None
    message = termination_message(info, host_path)
    return attrs.evolve(info, message=message) if message != info.message else info


def pod_from_runtime(uid: str, namespace: str, name: str) -> Pod:
    """A stand-in Pod for runtime leftovers no source knows (enough to tear them down)."""
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, uid=uid),
        spec=PodSpec(),
    )
