"""Cgroup names per driver, restated from upstream's cgroup_manager_linux_test.go and
libcontainer's slice expansion."""

from __future__ import annotations

import posixpath

import pytest

from kubelet.cgroups import QosCgroups, names, new_name

ROOT = names.ROOT


@pytest.mark.parametrize(
    ("name", "base"),
    [
        (new_name(ROOT, "system"), "system.slice"),
        (new_name(ROOT, "system", "Burstable"), "system-Burstable.slice"),
        (new_name(ROOT, "Burstable", "pod-123"), "Burstable-pod_123.slice"),
        (new_name(ROOT, "test", "a", "b"), "test-a-b.slice"),
        (new_name(ROOT, "test", "a", "b", "Burstable"), "test-a-b-Burstable.slice"),
        (new_name(ROOT, "Burstable"), "Burstable.slice"),
        (
            new_name(ROOT, "BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"),
            "BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
        ),
    ],
)
def test_systemd_basename(name: names.CgroupName, base: str) -> None:
    assert posixpath.basename(names.to_systemd(name)) == base


@pytest.mark.parametrize(
    ("name", "expanded"),
    [
        (ROOT, "/"),
        (new_name(ROOT, "Burstable"), "/Burstable.slice"),
        (new_name(ROOT, "Burstable", "pod-123"), "/Burstable.slice/Burstable-pod_123.slice"),
        (
            new_name(ROOT, "BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"),
            "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
        ),
        (new_name(ROOT, "kubepods"), "/kubepods.slice"),
        (
            ("kubepods", "burstable", "pod1234-abcd-5678-efgh"),
            "/kubepods.slice/kubepods-burstable.slice/"
            "kubepods-burstable-pod1234_abcd_5678_efgh.slice",
        ),
    ],
)
def test_systemd_expanded(name: names.CgroupName, expanded: str) -> None:
    assert names.to_systemd(name) == expanded


@pytest.mark.parametrize(
    ("name", "path"),
    [
        (ROOT, "/"),
        (new_name(ROOT, "Burstable"), "/Burstable"),
        (new_name(ROOT, "Burstable", "pod-123"), "/Burstable/pod-123"),
        (new_name(ROOT, "kubepods", "besteffort", "podabc"), "/kubepods/besteffort/podabc"),
    ],
)
def test_cgroupfs(name: names.CgroupName, path: str) -> None:
    assert names.to_cgroupfs(name) == path
    assert names.parse_cgroupfs(path) == name


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/test", ("test",)),
        ("/test.slice", ("test",)),
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice",
            ("kubepods", "burstable", "pod1-2"),
        ),
    ],
)
def test_parse_systemd(path: str, name: names.CgroupName) -> None:
    assert names.parse_systemd(path) == name


@pytest.mark.parametrize(
    ("slice_name", "expanded"),
    [
        ("-.slice", "/"),
        ("a.slice", "/a.slice"),
        ("a-b.slice", "/a.slice/a-b.slice"),
        ("a-b-c.slice", "/a.slice/a-b.slice/a-b-c.slice"),
    ],
)
def test_expand_slice(slice_name: str, expanded: str) -> None:
    assert names.expand_slice(slice_name) == expanded


@pytest.mark.parametrize("bad", ["a", ".slice", "a--b.slice", "-a.slice", "a-.slice", "a/b.slice"])
def test_expand_slice_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid slice name"):
        names.expand_slice(bad)


@pytest.mark.parametrize("component", ["a/b", "a_b"])
def test_components_refuse_separators(component: str) -> None:
    with pytest.raises(ValueError, match="invalid character"):
        new_name(ROOT, component)


def test_layout_and_pod_cgroups() -> None:
    root = names.node_allocatable_root("/", cgroups_per_qos=True)
    assert root == ("kubepods",)
    assert names.node_allocatable_root("/custom", cgroups_per_qos=True) == ("custom", "kubepods")
    assert names.node_allocatable_root("/custom", cgroups_per_qos=False) == ("custom",)
    qos = QosCgroups.under(root)
    assert names.pod_cgroup(qos, "Guaranteed", "u1") == ("kubepods", "podu1")
    assert names.pod_cgroup(qos, "Burstable", "u1") == ("kubepods", "burstable", "podu1")
    assert names.pod_cgroup(qos, "BestEffort", "u1") == ("kubepods", "besteffort", "podu1")
    assert names.to_systemd(names.pod_cgroup(qos, "Burstable", "1-2")) == (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"
    )
    assert names.to_systemd(names.pod_cgroup(qos, "Guaranteed", "1-2")) == (
        "/kubepods.slice/kubepods-pod1_2.slice"
    )


def test_pod_uid_of() -> None:
    qos = QosCgroups.under(("kubepods",))
    assert names.pod_uid_of(("kubepods", "burstable", "podabc"), qos) == "abc"
    assert names.pod_uid_of(("kubepods", "podabc"), qos) == "abc"
    assert names.pod_uid_of(("kubepods", "burstable"), qos) is None
    assert names.pod_uid_of(("kubepods", "burstable", "podabc", "ctr"), qos) is None
    assert names.pod_uid_of(("other", "podabc"), qos) is None
