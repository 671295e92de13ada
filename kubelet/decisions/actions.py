"""What one sync must do to a pod: compare the spec with what the runtime runs.

Pure: the pod spec, the runtime's view of the pod (``RuntimePodStatus``, newest
instances first) and the probe verdicts go in, a ``PodActions`` comes out. It follows
upstream ``computePodActions`` (kuberuntime_manager.go) and its init-container half
``computeInitContainerActions``, so that a pod behaves here as it would under an
upstream kubelet: same restarts, same sandbox recreations, same attempt numbers.

Ephemeral containers start once each, in an existing sandbox, even before the pod is
initialized, and are never restarted. In-place resize is applied apart
(``runtime.resize``): a resources change alone restarts nothing. A pod being
deleted (``deletionTimestamp`` set) is only ever killed: the pod workers terminate it
and never sync it, and should a sync come all the same, it starts nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

import attrs

from kubelet.api import Container, Pod, is_restartable_init_container
from kubelet.cri import ContainerInfo, ContainerRunState, RuntimePodStatus, SandboxState

from .grace import KillReason
from .hash import hash_container
from .restart import (
    container_should_restart,
    pod_restart_policy,
    restarts_after_kill,
    runs_once_if_succeeded,
)

__all__ = [
    "ContainerToKill",
    "PodActions",
    "compute_pod_actions",
    "container_changed",
    "restart_policy",
    "sandbox_changed",
    "should_container_be_restarted",
]


def restart_policy(pod: Pod) -> str:
    """The pod's restart policy; unset means the API default, "Always"."""
    return pod_restart_policy(pod.spec)


class ContainerToKill(NamedTuple):
    """Why a running container instance must be stopped."""

    name: str
    message: str
    reason: KillReason = KillReason.UNKNOWN


@attrs.frozen(kw_only=True)
class PodActions:
    """The changes one sync makes, in upstream's vocabulary.

    ``kill_pod``: stop every container and the sandbox first. ``create_sandbox``: then
    start a new sandbox with metadata attempt ``attempt`` (and purge init containers).
    ``sandbox_id``: the sandbox to start containers in when none is created.
    Indexes refer to ``pod.spec.init_containers`` / ``pod.spec.containers``;
    ``ephemeral_containers_to_start`` indexes ``pod.spec.ephemeral_containers``;
    ``containers_to_kill`` is keyed by runtime container ID.
    """

    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    init_containers_to_start: tuple[int, ...] = ()
    containers_to_start: tuple[int, ...] = ()
    containers_to_kill: Mapping[str, ContainerToKill] = attrs.field(factory=dict)
    ephemeral_containers_to_start: tuple[int, ...] = ()

    @property
    def next_init_container_to_start(self) -> int | None:
        """The first init container to start, if any (upstream's legacy field)."""
        return self.init_containers_to_start[0] if self.init_containers_to_start else None


def sandbox_changed(pod: Pod, status: RuntimePodStatus) -> tuple[bool, int, str]:
    """(must create a sandbox, attempt for it or the current one, current sandbox ID).

    A new sandbox is needed when there is none, more than one is ready, the newest is
    not ready, its network namespace mode no longer matches ``hostNetwork``, or a pod
    network sandbox has no IP. The attempt is one more than the highest seen.
    """
    if not status.sandboxes:
        return True, 0, ""
    ready = sum(1 for s in status.sandboxes if s.state is SandboxState.READY)
    max_attempt = max(s.attempt for s in status.sandboxes)
    newest = status.sandboxes[0]
    host_network = bool(pod.spec.host_network)
    if ready > 1:
        return True, max_attempt + 1, newest.id
    if newest.state is not SandboxState.READY:
        return True, max_attempt + 1, newest.id
    if newest.host_network != host_network:
        return True, max_attempt + 1, ""
    if not host_network and not newest.ip:
        return True, max_attempt + 1, newest.id
    return False, max_attempt, newest.id


def container_changed(container: Container, info: ContainerInfo) -> bool:
    """The running instance was made from a different spec (name or image)."""
    return info.hash != hash_container(container)


def should_container_be_restarted(container: Container, pod: Pod, status: RuntimePodStatus) -> bool:
    """Whether a container that is not running should be (re)started now (upstream's
    ``ShouldContainerBeRestarted``): an exited one by its rules and policies
    (``decisions/restart.py``)."""
    if pod.metadata.deletion_timestamp is not None:
        return False
    current = status.current(container.name)
    if current is None:
        return True
    if current.state is ContainerRunState.RUNNING:
        return False
    if current.state in (ContainerRunState.UNKNOWN, ContainerRunState.CREATED):
        return True
    return container_should_restart(container, pod.spec, current.exit_code)


def _succeeded(container: Container, status: RuntimePodStatus) -> bool:
    current = status.current(container.name)
    return (
        current is not None and current.state is ContainerRunState.EXITED and current.exit_code == 0
    )


def _any_regular_created(pod: Pod, status: RuntimePodStatus) -> bool:
    active = (ContainerRunState.CREATED, ContainerRunState.RUNNING, ContainerRunState.EXITED)
    for container in pod.spec.containers:
        current = status.current(container.name)
        if current is not None and current.state in active:
            return True
    return False


def _unknown_message(prefix: str, info: ContainerInfo) -> str:
    # Upstream prints kubecontainer.State values: "created", "running", "exited", "unknown".
    return f'{prefix} is in "{info.state.value}" state, try killing it before restart'


def _init_failed(info: ContainerInfo) -> bool:
    """An init container instance that did not complete successfully."""
    if info.reason == "OOMKilled":
        return True
    if info.state is ContainerRunState.EXITED:
        return info.exit_code != 0
    return info.state is ContainerRunState.UNKNOWN


class _Changes:
    """Mutable scratch state while computing; frozen into ``PodActions`` at the end."""

    def __init__(self, create: bool, attempt: int, sandbox_id: str) -> None:
        self.kill_pod = create
        self.create_sandbox = create
        self.sandbox_id = sandbox_id
        self.attempt = attempt
        self.init_to_start: list[int] = []
        self.to_start: list[int] = []
        self.to_kill: dict[str, ContainerToKill] = {}
        self.ephemeral_to_start: list[int] = []

    def freeze(self) -> PodActions:
        return PodActions(
            kill_pod=self.kill_pod,
            create_sandbox=self.create_sandbox,
            sandbox_id=self.sandbox_id,
            attempt=self.attempt,
            init_containers_to_start=tuple(self.init_to_start),
            containers_to_start=tuple(self.to_start),
            containers_to_kill=self.to_kill,
            ephemeral_containers_to_start=tuple(self.ephemeral_to_start),
        )


def _any_regular_created_or_running(pod: Pod, status: RuntimePodStatus) -> bool:
    """Evidence that the pod was initialized: a regular container exists or runs."""
    for container in pod.spec.containers:
        current = status.current(container.name)
        if current is not None and current.state in (
            ContainerRunState.CREATED,
            ContainerRunState.RUNNING,
        ):
            return True
    return False


def _kill_pod(changes: _Changes) -> bool:
    """An init container failed for good (its rules and policies do not restart it):
    the pod is killed."""
    changes.kill_pod = True
    changes.init_to_start = []
    return False


def _init_container_actions(
    pod: Pod,
    status: RuntimePodStatus,
    changes: _Changes,
    liveness_failed: Collection[str],
    startup_failed: Collection[str],
    startup_succeeded: Collection[str] | None,
    resize_restart: Collection[str] = (),
) -> bool:
    """Fill in init container actions; True once the pod is initialized.

    Walks the init containers from the last one back, because completed init containers
    may have been garbage-collected: the newest evidence decides. A regular container
    that was created or is running proves initialization already happened.
    """
    inits = pod.spec.init_containers
    if not inits:
        return True
    initialized = _any_regular_created_or_running(pod, status)
    previously_initialized = initialized
    to_start: list[int] = []  # collected last-to-first, reversed at the end

    for i in range(len(inits) - 1, -1, -1):
        container = inits[i]
        sidecar = is_restartable_init_container(container)
        current = status.current(container.name)
        if current is None:
            if previously_initialized and sidecar:
                to_start.append(i)
            continue
        if previously_initialized and not sidecar:
            continue

        if current.state is ContainerRunState.CREATED:
            # Created but never started: the runtime likely failed to start it.
            to_start.append(i)
        elif current.state is ContainerRunState.RUNNING:
            if sidecar:
                initialized = (
                    _sidecar_running(
                        pod,
                        i,
                        current,
                        changes,
                        to_start,
                        previously_initialized=previously_initialized,
                        liveness_failed=liveness_failed,
                        startup_failed=startup_failed,
                        startup_succeeded=startup_succeeded,
                        resize_restart=resize_restart,
                    )
                    or initialized
                )
            # A regular init container that runs: wait for it to finish.
        elif current.state is ContainerRunState.EXITED:
            if sidecar:
                to_start.append(i)
            elif _init_failed(current):
                if not should_container_be_restarted(container, pod, status):
                    return _kill_pod(changes)
                to_start.append(i)
            elif i == len(inits) - 1:
                initialized = True
            else:
                to_start.append(i + 1)
        else:  # UNKNOWN: no exit code to match rules against, only the policies count
            if not sidecar and not restarts_after_kill(container, pod.spec):
                return _kill_pod(changes)
            changes.to_kill[current.id] = ContainerToKill(
                container.name, _unknown_message("Init container", current), KillReason.UNKNOWN
            )
            to_start.append(i)
        previously_initialized = True

    if not previously_initialized:
        to_start.append(0)
    changes.init_to_start = list(reversed(to_start))
    return initialized


def _sidecar_running(
    pod: Pod,
    index: int,
    current: ContainerInfo,
    changes: _Changes,
    to_start: list[int],
    *,
    previously_initialized: bool,
    liveness_failed: Collection[str],
    startup_failed: Collection[str],
    startup_succeeded: Collection[str] | None,
    resize_restart: Collection[str],
) -> bool:
    """Actions for a running sidecar; True if it completes initialization (it is last)."""
    container = pod.spec.init_containers[index]
    if container.startup_probe is not None:
        if current.id in startup_failed:
            changes.to_kill[current.id] = ContainerToKill(
                container.name,
                f"Init container {container.name} failed startup probe",
                KillReason.STARTUP_PROBE,
            )
            to_start.append(index)
            return False
        if startup_succeeded is not None and current.id not in startup_succeeded:
            return False  # not started yet: wait for the startup probe
    initialized = False
    if index == len(pod.spec.init_containers) - 1:
        initialized = True
    elif not previously_initialized:
        to_start.append(index + 1)
    if container_changed(container, current):
        changes.to_kill[current.id] = ContainerToKill(
            container.name, f"Init container {container.name} definition changed"
        )
        to_start.append(index)
    elif container.liveness_probe is not None and current.id in liveness_failed:
        changes.to_kill[current.id] = ContainerToKill(
            container.name,
            f"Init container {container.name} failed liveness probe",
            KillReason.LIVENESS_PROBE,
        )
        to_start.append(index)
    elif current.id in resize_restart:
        changes.to_kill[current.id] = ContainerToKill(
            container.name, f"Container {container.name} resize requires restart"
        )
        to_start.append(index)
    return initialized


def _ephemeral_to_start(pod: Pod, status: RuntimePodStatus) -> list[int]:
    """Ephemeral containers never started: they run once, whatever the pod's
    initialization, and are never restarted."""
    ephemeral = pod.spec.ephemeral_containers
    return [i for i, c in enumerate(ephemeral) if status.current(c.name) is None]


def _in_a_new_sandbox(pod: Pod, status: RuntimePodStatus, changes: _Changes) -> PodActions:
    """The sandbox must be (re)created: what starts in it, from the first init container
    on, or nothing (only the kill) when nothing may run again."""
    if restart_policy(pod) == "Never" and changes.attempt != 0 and status.containers:
        # Everything ran once already and nothing may run again: just kill.
        changes.create_sandbox = False
        return changes.freeze()
    to_start = [
        idx
        for idx, c in enumerate(pod.spec.containers)
        if not (runs_once_if_succeeded(c, pod.spec) and _succeeded(c, status))
    ]
    if not to_start and _any_regular_created(pod, status):
        changes.create_sandbox = False
        return changes.freeze()
    if pod.spec.init_containers:
        changes.init_to_start = [0]
        return changes.freeze()
    changes.to_start = to_start
    return changes.freeze()


def compute_pod_actions(
    pod: Pod,
    status: RuntimePodStatus,
    *,
    liveness_failed: Collection[str] = (),
    startup_failed: Collection[str] = (),
    startup_succeeded: Collection[str] | None = None,
    resize_restart: Collection[str] = (),
) -> PodActions:
    """Upstream ``computePodActions``.

    ``liveness_failed`` / ``startup_failed``: IDs of container instances whose liveness
    or startup probe reported Failure. ``startup_succeeded`` (IDs whose startup probe
    succeeded) only matters for sidecars with a startup probe; None means "do not wait".
    ``resize_restart``: IDs of running containers (and sidecars) an in-place resize
    restarts (their ``resizePolicy`` says ``RestartContainer`` for a resource that
    changed).
    """
    create, attempt, sandbox_id = sandbox_changed(pod, status)
    if pod.metadata.deletion_timestamp is not None:
        # a pod being deleted is only ever stopped: no new sandbox (its own may have been
        # stopped by a teardown cut short), no container started
        return PodActions(kill_pod=True, sandbox_id=sandbox_id, attempt=attempt)
    changes = _Changes(create, attempt, sandbox_id)
    if create:
        return _in_a_new_sandbox(pod, status, changes)

    changes.ephemeral_to_start = _ephemeral_to_start(pod, status)
    initialized = _init_container_actions(
        pod, status, changes, liveness_failed, startup_failed, startup_succeeded, resize_restart
    )
    if changes.kill_pod or not initialized:
        return changes.freeze()

    keep = 0
    for idx, container in enumerate(pod.spec.containers):
        current = status.current(container.name)
        if current is None or current.state is not ContainerRunState.RUNNING:
            if should_container_be_restarted(container, pod, status):
                changes.to_start.append(idx)
                if current is not None and current.state is ContainerRunState.UNKNOWN:
                    # It may still run: kill it first so two never run at once.
                    changes.to_kill[current.id] = ContainerToKill(
                        container.name, _unknown_message("Container", current)
                    )
            continue
        restart = restarts_after_kill(container, pod.spec)
        reason = KillReason.UNKNOWN
        if container_changed(container, current):
            message = f"Container {container.name} definition changed"
            restart = True  # a new spec is always applied, whatever the policy
        elif current.id in liveness_failed:
            message = f"Container {container.name} failed liveness probe"
            reason = KillReason.LIVENESS_PROBE
        elif current.id in startup_failed:
            message = f"Container {container.name} failed startup probe"
            reason = KillReason.STARTUP_PROBE
        elif current.id in resize_restart:
            message = f"Container {container.name} resize requires restart"
            restart = True  # started again at once with its new resources
        else:
            keep += 1
            continue
        if restart:
            message = f"{message}, will be restarted"
            changes.to_start.append(idx)
        changes.to_kill[current.id] = ContainerToKill(container.name, message, reason)

    if keep == 0 and not changes.to_start:
        changes.kill_pod = True
        # Sidecars must not keep a finished pod alive.
        changes.init_to_start = []
    return changes.freeze()
