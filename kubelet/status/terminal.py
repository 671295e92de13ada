"""The last status of a finished pod: nothing in it still runs or waits to start.

Pure, after upstream's status manager ``TerminatePod``: once a pod is finished (its
phase Succeeded or Failed, or it is being deleted), a container status that is not
terminated can never become true again, so it is reported as terminated with reason
ContainerStatusUnknown and exit code 137 -- for regular containers only once the pod
had initialized (a regular container never left Waiting before), for init containers
all but the trailing ones that never started. A phase that is not terminal becomes
Failed (not for static pods, as upstream).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kubelet.api import ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus
from kubelet.status.phase import CONTAINER_STATUS_UNKNOWN, FAILED, is_terminal_phase

__all__ = ["MSG_NOT_LOCATED", "terminated_status"]

MSG_NOT_LOCATED = "The container could not be located when the pod was terminated"
_UNKNOWN_EXIT_CODE = 137


def _state(status: ContainerStatus) -> ContainerState:
    return status.state or ContainerState()


def _unknown(status: ContainerStatus) -> ContainerStatus:
    return attrs.evolve(
        status,
        state=ContainerState(
            terminated=ContainerStateTerminated(
                exit_code=_UNKNOWN_EXIT_CODE,
                reason=CONTAINER_STATUS_UNKNOWN,
                message=MSG_NOT_LOCATED,
            )
        ),
    )


def _has_initialized(pod: Pod) -> bool:
    """The API's status shows the pod got past its init containers (``hasPodInitialized``)."""
    if not pod.spec.init_containers:
        return True
    for status in pod.status.container_statuses:
        last = status.last_state.terminated if status.last_state else None
        if last is not None or _state(status).waiting is None:
            return True
    inits = pod.status.init_container_statuses
    if inits:
        final = inits[-1]
        for state in (final.last_state, final.state):
            if (
                state is not None
                and state.terminated is not None
                and not state.terminated.exit_code
            ):
                return True
    return False


def _attempted(statuses: Sequence[ContainerStatus]) -> int:
    """How many leading init container statuses ever tried to start (at least one)."""
    for i in range(len(statuses) - 1, -1, -1):
        status = statuses[i]
        last = status.last_state.terminated if status.last_state else None
        if _state(status).waiting is None or last is not None:
            return i + 1
    return min(1, len(statuses))


def terminated_status(pod: Pod, status: PodStatus) -> PodStatus:
    """``status`` with every container terminated and a terminal phase, as upstream
    reports a pod whose termination is complete."""
    regular = status.container_statuses
    if _has_initialized(pod):
        regular = tuple(s if _state(s).terminated is not None else _unknown(s) for s in regular)
    inits = status.init_container_statuses
    attempted = _attempted(inits)
    inits = tuple(
        _unknown(s) if i < attempted and _state(s).terminated is None else s
        for i, s in enumerate(inits)
    )
    phase = status.phase
    if not pod.is_static and not is_terminal_phase(phase):
        phase = FAILED
    return attrs.evolve(
        status, phase=phase, container_statuses=regular, init_container_statuses=inits
    )
