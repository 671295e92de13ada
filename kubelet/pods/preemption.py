"""Critical pod admission preemption, as upstream's ``pkg/kubelet/preemption``.

A critical pod (static, mirror, or of priority system-cluster-critical and above) that
the predicates refuse *only* for resources (``OutOfcpu``, ``OutOfmemory``, ``OutOfpods``,
...) is not rejected: the kubelet stops the fewest, lowest pods that free enough, then
admits it. Pure here: what is missing (``requirements``), which pods may go
(``preemptable``: never another critical pod; else only a lower priority), and which do
go (``choose_victims``: BestEffort before Burstable before Guaranteed, each class only as
far as the classes below it do not cover the need, within a class the pod nearest to the
remaining need, the smaller request on a tie). ``Preemptor`` (run by the syncLoop) stops
them through their pod workers with upstream's status and event.

A refusal that also has another reason (node affinity, taints, ports) keeps that reason;
a need no set of pods covers is ``UnexpectedAdmissionError``: "Unexpected error while
attempting to recover from admission failure: preemption: error finding a set of pods to
preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from fractions import Fraction

import attrs
import trio

from kubelet.api import Pod, PodCondition
from kubelet.cgroups import milli, pod_requests, whole
from kubelet.decisions import BEST_EFFORT, BURSTABLE, GUARANTEED, is_critical_pod, pod_qos
from kubelet.events import WARNING, EventRecorder, pod_ref
from kubelet.goformat import rfc3339
from kubelet.status import Kill

from . import fit
from .killer import kill_pod
from .rejection import Rejection
from .syncer import KubeletPodSyncer
from .workers import PodWorkers

__all__ = [
    "PREEMPTING",
    "PREEMPTION_MESSAGE",
    "Preemptor",
    "Requirement",
    "choose_victims",
    "preemptable",
    "requirements",
]

log = logging.getLogger(__name__)

PREEMPTING = "Preempting"
PREEMPTION_MESSAGE = "Preempted in order to admit critical pod"
CONDITION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."
UNEXPECTED = "UnexpectedAdmissionError"
KILL_MARGIN = 10.0


class NoVictims(Exception):
    """No set of pods covers the need (the message is upstream's)."""


@attrs.frozen
class Requirement:
    resource: str
    quantity: int
    """millicores for cpu, a count for pods, units (bytes) for the rest"""


def requirements(failures: Sequence[fit.Failure]) -> list[Requirement] | None:
    """What must be freed (requested − (capacity − used) per short resource); None when a
    failure is not about resources (then preemption does not apply)."""
    out = []
    for failure in failures:
        if not isinstance(failure, fit.InsufficientResource):
            return None
        short = failure.requested - (failure.capacity - failure.used)
        out.append(Requirement(failure.resource, short))
    return out


def request_of(pod: Pod, resource: str) -> int:
    """The pod's request of ``resource`` in the requirements' unit (pods: 1)."""
    if resource == "pods":
        return 1
    amount = pod_requests(pod).get(resource, Fraction(0))
    return milli(amount) if resource == "cpu" else whole(amount)


def _subtract(needs: Sequence[Requirement], pods: Sequence[Pod]) -> list[Requirement]:
    out = []
    for need in needs:
        left = need.quantity
        for pod in pods:
            left -= request_of(pod, need.resource)
            if left <= 0:
                break
        if left > 0:
            out.append(Requirement(need.resource, left))
    return out


def _distance(needs: Sequence[Requirement], pod: Pod) -> float:
    """How far ``pod`` leaves each need unmet, each as a fraction, squared and summed."""
    total = 0.0
    for need in needs:
        left = need.quantity - request_of(pod, need.resource)
        if left > 0:
            total += (left / need.quantity) ** 2
    return total


def _smaller(a: Pod, b: Pod) -> bool:
    """``a`` asks for less than ``b``: memory first, then cpu (equal counts as smaller)."""
    for resource in ("memory", "cpu"):
        left, right = request_of(a, resource), request_of(b, resource)
        if left != right:
            return left < right
    return True


def _spelled(needs: Sequence[Requirement]) -> str:
    return "[" + "".join(f"(res: {n.resource}, q: {n.quantity}), " for n in needs) + "]"


def _nearest(pods: Sequence[Pod], needs: Sequence[Requirement]) -> list[Pod]:
    """Pods of one class, nearest to the remaining need first, until it is met."""
    left, chosen, needs = list(pods), [], list(needs)
    while needs:
        if not left:
            raise NoVictims(f"no set of running pods found to reclaim resources: {_spelled(needs)}")
        best, best_distance = 0, float(len(needs) + 1)
        for i, pod in enumerate(left):
            distance = _distance(needs, pod)
            if distance < best_distance or (
                distance == best_distance and _smaller(pod, left[best])
            ):
                best, best_distance = i, distance
        victim = left[best]
        needs = _subtract(needs, [victim])
        chosen.append(victim)
        left[best] = left[-1]
        left.pop()
    return chosen


def preemptable(preemptor: Pod, preemptee: Pod) -> bool:
    """Upstream's ``Preemptable``: a critical pod takes a non-critical one's place; else
    only a strictly higher priority does."""
    if is_critical_pod(preemptor) and not is_critical_pod(preemptee):
        return True
    mine, theirs = preemptor.spec.priority, preemptee.spec.priority
    return mine is not None and theirs is not None and mine > theirs


def choose_victims(pod: Pod, others: Sequence[Pod], needs: Sequence[Requirement]) -> list[Pod]:
    """The pods to stop so that ``needs`` are met (upstream's ``getPodsToPreempt``);
    ``NoVictims`` when even all preemptable pods would not do."""
    classes: dict[str, list[Pod]] = {BEST_EFFORT: [], BURSTABLE: [], GUARANTEED: []}
    for other in others:
        if preemptable(pod, other):
            classes[pod_qos(other)].append(other)
    best_effort, burstable, guaranteed = (
        classes[BEST_EFFORT],
        classes[BURSTABLE],
        classes[GUARANTEED],
    )
    unmet = _subtract(needs, [*best_effort, *burstable, *guaranteed])
    if unmet:
        raise NoVictims(f"no set of running pods found to reclaim resources: {_spelled(unmet)}")
    g = _nearest(guaranteed, _subtract(needs, [*best_effort, *burstable]))
    b = _nearest(burstable, _subtract(needs, [*best_effort, *g]))
    e = _nearest(best_effort, _subtract(needs, [*b, *g]))
    return [*e, *b, *g]


@attrs.frozen
class Preemptor:
    """The syncLoop's recovery from a refused critical pod: stop the victims, then admit."""

    recorder: EventRecorder
    workers: PodWorkers
    syncer: KubeletPodSyncer
    wall_clock: Callable[[], float]
    on_preempted: Callable[[str], None] | None = None
    """called per victim stopped, with the first resource short (``kubelet_preemptions``)"""

    def plan(
        self, pod: Pod, others: Sequence[Pod], failures: Sequence[fit.Failure]
    ) -> list[Pod] | Rejection | None:
        """The victims, or the rejection that stands (None: preemption does not apply)."""
        if not is_critical_pod(pod) or not failures:
            return None
        non_resource = [f for f in failures if not isinstance(f, fit.InsufficientResource)]
        if non_resource:
            return Rejection(non_resource[0].reason, non_resource[0].message)
        needs = requirements(failures) or []
        try:
            return choose_victims(pod, others, needs)
        except NoVictims as err:
            return Rejection(
                UNEXPECTED,
                "Unexpected error while attempting to recover from admission failure: "
                f"preemption: error finding a set of pods to preempt: {err}",
            )

    async def preempt(self, pod: Pod, victims: Sequence[Pod], resource: str = "") -> None:
        """Each victim stopped in turn (upstream blocks on each kill): Failed, reason
        Preempting, a DisruptionTarget condition, a Warning event. ``resource``: the first
        one the pod was short of (the preemptions counter's label)."""
        for victim in victims:
            self.recorder.record(pod_ref(victim), WARNING, PREEMPTING, PREEMPTION_MESSAGE)
            log.info("Preempting pod %s to free up resources for %s", victim.key, pod.key)
            condition = PodCondition(
                type="DisruptionTarget",
                status="True",
                reason="TerminationByKubelet",
                message=CONDITION_MESSAGE,
                last_transition_time=rfc3339(self.wall_clock()),
            )
            kill = Kill(PREEMPTING, PREEMPTION_MESSAGE, conditions=(condition,))
            own = victim.spec.termination_grace_period_seconds
            grace = 30 if own is None else own
            with trio.move_on_after(grace * 1.5 + KILL_MARGIN) as scope:
                await kill_pod(self.workers, self.syncer, victim, kill)
            if scope.cancelled_caught:
                log.warning("Failed to evict pod %s: it did not stop in time", victim.key)
            elif self.on_preempted is not None:
                self.on_preempted(resource)
