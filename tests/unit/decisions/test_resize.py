"""In-place resize refused: the allocation a pod keeps, the condition and event that say so."""

from __future__ import annotations

import json

import attrs
import pytest

from kubelet.api import Pod, PodCondition, Quantity, ResourceRequirements
from kubelet.decisions import (
    Allocation,
    ResizeState,
    allocated_pod,
    allocation_of,
    pending_condition,
    resize_conditions,
)
from kubelet.decisions.resize import (
    decode_resources,
    encode_resources,
    event_message,
    resize_requested,
    same_resources,
)
from kubelet.testing.builders import exited, make_container, make_pod, running, runtime_status

RESOURCES = "io.trio-kubelet.container.resources"
POD_RESOURCES = "io.trio-kubelet.pod.resources"
T0 = "2027-01-15T08:00:00Z"
T1 = "2027-01-15T08:05:00Z"


def res(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


def with_generation(pod: Pod, generation: int) -> Pod:
    return attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, generation=generation))


SMALL = res({"cpu": "100m", "memory": "64Mi"}, {"cpu": "200m", "memory": "64Mi"})
BIG = res({"cpu": "300m", "memory": "64Mi"}, {"cpu": "400m", "memory": "64Mi"})


def pod_with(container: ResourceRequirements | None, **spec: object) -> Pod:
    return make_pod(make_container("app", resources=container), **spec)


# -- the record on the runtime -------------------------------------------------------------


def test_resources_round_trip_through_the_annotation() -> None:
    text = encode_resources(SMALL)
    assert json.loads(text) == {
        "limits": {"cpu": "200m", "memory": "64Mi"},
        "requests": {"cpu": "100m", "memory": "64Mi"},
    }
    assert decode_resources(text) == SMALL
    assert encode_resources(None) == "{}"
    assert decode_resources("{}") == ResourceRequirements()


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", '{"limits": []}', '{"limits": {"cpu": 1}}', '{"claims": []}'],
)
def test_a_record_that_is_not_ours_is_ignored(text: str) -> None:
    assert decode_resources(text) is None


# -- the allocation ---------------------------------------------------------------------------


def test_a_pod_met_first_is_allocated_its_spec() -> None:
    pod = pod_with(SMALL, init=(make_container("init", resources=BIG),), resources=BIG)
    assert allocation_of(pod) == Allocation({"init": BIG, "app": SMALL}, BIG)
    assert allocation_of(pod, runtime_status(pod)) == Allocation({"init": BIG, "app": SMALL}, BIG)


def test_a_restarted_kubelet_takes_what_the_newest_instance_was_created_with() -> None:
    resized = pod_with(BIG, resources=BIG)
    runtime = runtime_status(
        resized,
        running("app", "new", annotations={RESOURCES: encode_resources(SMALL)}),
        exited("app", cid="old", annotations={RESOURCES: encode_resources(BIG)}),
    )
    # the newest recording container had no pod-level resources: none were set then
    assert allocation_of(resized, runtime) == Allocation({"app": SMALL}, None)


def test_containers_without_a_record_keep_their_spec() -> None:
    pod = pod_with(BIG, resources=BIG)
    runtime = runtime_status(pod, running("app"), running("gone", annotations={RESOURCES: "{}"}))
    assert allocation_of(pod, runtime) == Allocation({"app": BIG}, None)
    unreadable = runtime_status(pod, running("app", annotations={RESOURCES: "[]"}))
    assert allocation_of(pod, unreadable) == Allocation({"app": BIG}, BIG)


def test_pod_level_resources_are_read_from_the_newest_record() -> None:
    pod = pod_with(BIG, resources=BIG)
    ann = {RESOURCES: encode_resources(SMALL), POD_RESOURCES: encode_resources(SMALL)}
    runtime = runtime_status(pod, running("app", annotations=ann))
    assert allocation_of(pod, runtime) == Allocation({"app": SMALL}, SMALL)


def test_the_same_resources_give_the_pod_itself() -> None:
    pod = pod_with(res({"cpu": "1"}, {"memory": "1Gi"}))
    same = Allocation({"app": res({"cpu": "1000m"}, {"memory": "1024Mi"})})
    assert allocated_pod(pod, same) is pod
    assert allocated_pod(pod, Allocation({})) is pod
    assert same_resources(None, ResourceRequirements())
    assert not same_resources(res({"cpu": "1"}), res({"cpu": "1"}, {"cpu": "1"}))


def test_the_allocated_pod_carries_the_allocation_and_keeps_the_claims() -> None:
    claims = ({"name": "gpu"},)
    spec = attrs.evolve(BIG, claims=claims)
    pod = make_pod(
        make_container("app", resources=spec),
        make_container("other", resources=BIG),
        init=(make_container("init", resources=BIG),),
        resources=BIG,
    )
    allocation = Allocation({"app": SMALL, "other": BIG, "init": SMALL}, SMALL)
    running_pod = allocated_pod(pod, allocation)
    app, other = running_pod.spec.containers
    assert app.resources == attrs.evolve(SMALL, claims=claims)
    assert other is pod.spec.containers[1]
    assert running_pod.spec.init_containers[0].resources == SMALL
    assert running_pod.spec.resources == SMALL
    assert running_pod.metadata is pod.metadata
    assert resize_requested(pod, running_pod)
    assert not resize_requested(running_pod, running_pod)


def test_a_container_allocated_nothing_runs_with_nothing() -> None:
    pod = pod_with(BIG)
    running_pod = allocated_pod(pod, Allocation({"app": None}))
    assert running_pod.spec.containers[0].resources == ResourceRequirements()
    assert resize_requested(pod, running_pod)


def test_only_pod_level_resources_resized() -> None:
    pod = pod_with(SMALL, resources=BIG)
    running_pod = allocated_pod(pod, Allocation({"app": SMALL}, SMALL))
    assert running_pod.spec.containers[0] is pod.spec.containers[0]
    assert resize_requested(pod, running_pod)


# -- the condition and the event ---------------------------------------------------------------


def test_no_condition_while_nothing_waits_or_runs_late() -> None:
    stale = PodCondition(type="PodResizePending", status="True", reason="Infeasible")
    assert resize_conditions(ResizeState(), (stale,), T0) == ()


def test_a_resize_that_waits_is_pending() -> None:
    condition = pending_condition("Deferred", "no room", 2, None, T0)
    assert condition == PodCondition(
        type="PodResizePending",
        status="True",
        observed_generation=2,
        last_probe_time=T0,
        last_transition_time=T0,
        reason="Deferred",
        message="no room",
    )
    assert pending_condition("Deferred", "no room", 2, condition, T1) is condition
    again = pending_condition("Deferred", "no room", 3, condition, T1)
    assert (again.observed_generation, again.last_probe_time) == (3, T1)
    assert again.last_transition_time == T0  # still Deferred
    infeasible = pending_condition("Infeasible", "never", 3, again, T1)
    assert infeasible.last_transition_time == T1


def test_an_admitted_resize_is_in_progress_with_the_runtime_s_error() -> None:
    state = ResizeState(pending=None, in_progress=("", 2))
    (condition,) = resize_conditions(state, (), T0)
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "PodResizeInProgress",
        "True",
        "",
        "",
    )
    assert condition.observed_generation == 2
    (failed,) = resize_conditions(ResizeState(None, ("refused", 2)), (condition,), T1)
    assert (failed.reason, failed.message) == ("Error", "refused")
    assert failed.last_transition_time == T0


def test_event_message_is_upstreams() -> None:
    pod = with_generation(
        make_pod(
            make_container("app", resources=BIG),
            make_container("bare"),
            init=(make_container("side", resources=res({"cpu": "1"})),),
        ),
        2,
    )
    assert event_message(pod, "Infeasible", "no <way>") == (
        'Pod resize Infeasible: {"initContainers":[{"name":"side","resources":'
        '{"requests":{"cpu":"1"}}}],"containers":[{"name":"app","resources":'
        '{"limits":{"cpu":"400m","memory":"64Mi"},"requests":{"cpu":"300m","memory":"64Mi"}}},'
        '{"name":"bare","resources":{}}],"generation":2,"error":"no \\u003cway\\u003e"}'
    )
