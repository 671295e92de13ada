"""The one converter: wire names, strict scalars with field paths, omitempty rules."""

import attrs
import pytest

from kubelet.api import (
    ContainerStatus,
    Pod,
    PodSpec,
    PodStatus,
    WireError,
    from_wire,
    to_wire,
    wire_name,
)

MANIFEST = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "hostPID": True,
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "ports": [{"containerPort": 80, "hostIP": "127.0.0.1"}],
                "readinessProbe": {"httpGet": {"port": "http"}},
            }
        ],
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "d", "downwardAPI": {}}],
    },
}


@pytest.mark.parametrize(
    ("cls", "field", "wire"),
    [
        (PodSpec, "host_pid", "hostPID"),
        (PodStatus, "pod_ips", "podIPs"),
        (PodStatus, "host_ip", "hostIP"),
        (ContainerStatus, "container_id", "containerID"),
        (ContainerStatus, "image_id", "imageID"),
        (PodSpec, "termination_grace_period_seconds", "terminationGracePeriodSeconds"),
        (PodSpec, "set_hostname_as_fqdn", "setHostnameAsFQDN"),
        (PodSpec, "hostname_override", "hostnameOverride"),
    ],
)
def test_wire_names(cls: type, field: str, wire: str) -> None:
    assert wire_name(attrs.fields_dict(cls)[field]) == wire


def test_round_trip_keeps_what_was_said() -> None:
    pod = from_wire(Pod, MANIFEST)
    assert pod.spec.host_pid is True
    assert pod.spec.containers[0].readiness_probe is not None
    assert pod.spec.containers[0].readiness_probe.http_get.port == "http"  # type: ignore[union-attr]
    wire = to_wire(pod)
    assert wire["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "d", "downwardAPI": {}},
    ]
    assert wire["spec"]["hostPID"] is True
    assert "status" not in wire
    assert from_wire(Pod, wire) == pod


def test_hostname_fields_are_read_and_written() -> None:
    """setHostnameAsFQDN and hostnameOverride reach the pod (and its mirror pod); an
    empty override is kept, as upstream's pointer keeps it."""
    spec = {"setHostnameAsFQDN": True, "hostnameOverride": "", "containers": []}
    pod = from_wire(Pod, {"spec": spec})
    assert (pod.spec.set_hostname_as_fqdn, pod.spec.hostname_override) == (True, "")
    assert to_wire(pod)["spec"] == {"setHostnameAsFQDN": True, "hostnameOverride": ""}


def test_zero_and_false_are_kept_but_empty_strings_dropped() -> None:
    status = ContainerStatus(name="c", ready=False, restart_count=0)
    assert to_wire(status) == {"name": "c", "ready": False, "restartCount": 0}


def test_unknown_fields_are_ignored() -> None:
    assert (
        from_wire(Pod, {"metadata": {"name": "x", "futureField": 1}, "zzz": []}).metadata.name
        == "x"
    )


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (
            {
                "spec": {
                    "containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": "x"}]}]
                }
            },
            "spec.containers[1].ports[0].containerPort",
            "expected an integer",
        ),
        ({"spec": {"containers": [{"image": "a"}]}}, "spec.containers[0].name", "required value"),
        ({"spec": {"hostNetwork": "yes"}}, "spec.hostNetwork", "expected a boolean"),
        ({"metadata": {"labels": {"a": ["b"]}}}, "metadata.labels[a]", "expected a string"),
        ({"spec": {"containers": {"name": "a"}}}, "spec.containers", "expected a list"),
    ],
)
def test_errors_name_the_field(data: object, path: str, message: str) -> None:
    with pytest.raises(WireError) as info:
        from_wire(Pod, data)
    assert info.value.path == path
    assert message in str(info.value)


def test_numbers_become_strings_where_a_string_is_expected() -> None:
    pod = from_wire(
        Pod, {"spec": {"containers": [{"name": "a", "env": [{"name": "P", "value": 8080}]}]}}
    )
    assert pod.spec.containers[0].env[0].value == "8080"
