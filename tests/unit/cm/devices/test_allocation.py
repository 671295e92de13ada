"""Which devices a pod gets: upstream's checks, messages and init-container reuse."""

from __future__ import annotations

import pytest

from kubelet.api import Container, ResourceRequirements
from kubelet.cm.devices.allocation import AllocationError, Granted, plan_pod
from kubelet.cm.devices.names import (
    invalid_resource_name,
    is_extended_resource_name,
    unsupported_version,
)
from kubelet.testing.builders import make_pod

R = "example.com/resource"


def _asking(name: str, count: int, **fields: object) -> Container:
    return Container(
        name=name,
        image="busybox",
        resources=ResourceRequirements(limits={R: str(count)}),
        **fields,  # type: ignore[arg-type]
    )


def test_free_healthy_devices_are_picked_and_held_ones_skipped() -> None:
    held = {"other": {"app": {R: Granted(("d0",))}}}
    plan = plan_pod(make_pod(_asking("app", 2)), held, {R: {"d0", "d1", "d2"}}, [R])
    assert plan == {"app": {R: Granted(("d1", "d2"))}}


def test_too_many_devices_is_upstreams_message() -> None:
    held = {"other": {"app": {R: Granted(("d0",))}}}
    with pytest.raises(AllocationError) as err:
        plan_pod(make_pod(_asking("app", 2)), held, {R: {"d0", "d1"}}, [R])
    assert str(err.value) == (
        "requested number of devices unavailable for example.com/resource. "
        "Requested: 2, Available: 1"
    )


def test_unregistered_and_unhealthy_resources_are_refused() -> None:
    pod = make_pod(_asking("app", 1))
    with pytest.raises(AllocationError, match="cannot allocate unregistered device"):
        plan_pod(pod, {"other": {"app": {R: Granted(("d0",))}}}, {}, [])
    with pytest.raises(AllocationError, match="no healthy devices present"):
        plan_pod(pod, {}, {R: set()}, [R])


def test_resources_without_a_plugin_are_not_the_device_managers() -> None:
    assert plan_pod(make_pod(_asking("app", 1)), {}, {}, []) == {}


def test_init_containers_devices_are_reused_by_app_containers() -> None:
    pod = make_pod(_asking("app", 2), init=(_asking("init", 1),))
    plan = plan_pod(pod, {}, {R: {"d0", "d1"}}, [R])
    assert plan["init"][R].device_ids == ("d0",)
    assert set(plan["app"][R].device_ids) == {"d0", "d1"}


def test_a_sidecars_devices_are_not_reused() -> None:
    pod = make_pod(_asking("app", 1), init=(_asking("proxy", 1, restart_policy="Always"),))
    plan = plan_pod(pod, {}, {R: {"d0", "d1"}}, [R])
    assert {plan["proxy"][R].device_ids, plan["app"][R].device_ids} == {("d0",), ("d1",)}
    with pytest.raises(AllocationError):
        plan_pod(pod, {}, {R: {"d0"}}, [R])


def test_a_pods_checkpointed_devices_are_kept() -> None:
    held = {"uid-1": {"app": {R: Granted(("d1",), b"answer")}}}
    plan = plan_pod(make_pod(_asking("app", 1)), held, {R: {"d0", "d1"}}, [R])
    assert plan == {"app": {R: Granted(("d1",), b"answer")}}


def test_registration_checks_are_upstreams() -> None:
    assert is_extended_resource_name("example.com/resource")
    assert is_extended_resource_name("nvidia.com/gpu")
    for bad in ("resource", "kubernetes.io/gpu", "requests.example.com/x", "a/-b", "/x"):
        assert not is_extended_resource_name(bad), bad
    assert invalid_resource_name("x") == 'the ResourceName "x" is invalid'
    assert unsupported_version("v1") == (
        'requested API version "v1" is not supported by kubelet. Supported versions are ["v1beta1"]'
    )
