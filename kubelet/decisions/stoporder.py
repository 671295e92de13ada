"""In which order a pod's containers stop: regular containers first, sidecars last.

Pure. Upstream (kuberuntime_termination_order.go) kills every container of a pod at
once, but a sidecar (an init container with ``restartPolicy: Always``) waits before its
StopContainer until every regular container has stopped and then until the sidecar
declared after it has stopped: sidecars go in the reverse order of their declaration,
so a proxy or a log shipper outlives the containers that use it. Each wait is bounded
by what is left of that container's grace period after its preStop hook, so the whole
pod still stops within its grace period. Plain init containers and containers the
spec does not name (a changed spec, an orphan) wait for nothing, and nothing waits
for them.

One deliberate difference: upstream's sidecar waits only for the next sidecar in
declaration order, so a sidecar that is not running breaks the chain (the ones on
either side of it then stop together). Here a sidecar waits for the nearest later
sidecar that still runs, which keeps the reverse order whole.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kubelet.api import Pod, is_restartable_init_container

__all__ = ["stop_prerequisites"]


def stop_prerequisites(pod: Pod, live: Collection[str]) -> Mapping[str, frozenset[str]]:
    """For each container name in ``live`` (the containers about to be stopped): the
    names of the other live containers that must have stopped before it is stopped.

    Names with no prerequisite map to an empty set.
    """
    alive = set(live)
    regular = frozenset(c.name for c in pod.spec.containers if c.name in alive)
    plan: dict[str, frozenset[str]] = {name: frozenset() for name in alive}
    later_sidecar: str | None = None
    for container in reversed(pod.spec.init_containers):
        if container.name not in alive or not is_restartable_init_container(container):
            continue
        waits = set(regular)
        if later_sidecar is not None:
            waits.add(later_sidecar)
        plan[container.name] = frozenset(waits)
        later_sidecar = container.name
    return plan
