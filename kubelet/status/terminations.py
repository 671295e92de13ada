"""Which container terminations a new pod status reports for the first time.

``kubelet_terminated_containers_total`` counts each container that ended, once: upstream
counts where its status manager sees a container's state become terminated. Here the
comparison is between the status the kubelet reported before and the new one; a
termination is known by its container ID, whether the status shows it as the current
state or, after a restart, as the last state (a container that crashed and was restarted
between two reports still counts).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from kubelet.api import ContainerStateTerminated, ContainerStatus, PodStatus

CONTAINER_TYPES = (
    ("init_container_statuses", "init_container"),
    ("container_statuses", "container"),
    ("ephemeral_container_statuses", "ephemeral_container"),
)
"""Each list of container statuses, with upstream's ``container_type`` label."""


@attrs.frozen
class Termination:
    container_type: str
    exit_code: int
    reason: str


def new_terminations(before: PodStatus | None, after: PodStatus) -> list[Termination]:
    """The terminations ``after`` shows that ``before`` did not (None: nothing known)."""
    out = []
    for field, container_type in CONTAINER_TYPES:
        known = {key for s in _statuses(before, field) for key, _ in _ended(s)}
        for status in getattr(after, field):
            for key, ended in _ended(status):
                if key not in known:
                    known.add(key)
                    out.append(Termination(container_type, ended.exit_code, ended.reason))
    return out


def _statuses(status: PodStatus | None, field: str) -> tuple[ContainerStatus, ...]:
    return () if status is None else tuple(getattr(status, field))


_Key = tuple[str, str, str | None, str | None]


def _ended(status: ContainerStatus) -> Iterator[tuple[_Key, ContainerStateTerminated]]:
    """Each termination of the current and the last state, with what identifies it: the
    container's name, ID and times (a message added later is the same termination)."""
    for state in (status.state, status.last_state):
        if state is not None and (ended := state.terminated) is not None:
            key = (status.name, ended.container_id, ended.started_at, ended.finished_at)
            yield key, ended
