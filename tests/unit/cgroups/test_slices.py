"""Slice units and their properties (libcontainer's systemd manager's values)."""

from __future__ import annotations

import pytest

from kubelet.cgroups import names
from kubelet.cgroups.slices import (
    INFINITY,
    quota_per_sec,
    resource_properties,
    slice_of,
    start_properties,
)
from kubelet.cgroups.values import ResourceConfig

UID = "1234-abcd-5678-efgh"


@pytest.mark.parametrize(
    ("name", "unit", "parent"),
    [
        (("kubepods",), "kubepods.slice", "-.slice"),
        (("kubepods", "burstable"), "kubepods-burstable.slice", "kubepods.slice"),
        (
            ("kubepods", "burstable", f"pod{UID}"),
            "kubepods-burstable-pod1234_abcd_5678_efgh.slice",
            "kubepods-burstable.slice",
        ),
        (("kubepods", f"pod{UID}"), "kubepods-pod1234_abcd_5678_efgh.slice", "kubepods.slice"),
        (("system",), "system.slice", "-.slice"),
    ],
)
def test_slice_of(name: names.CgroupName, unit: str, parent: str) -> None:
    assert slice_of(name) == (unit, parent)


def test_the_root_is_no_unit() -> None:
    with pytest.raises(ValueError):
        slice_of(())


def test_upstream_example_expands() -> None:
    """Upstream's ToSystemd example: the pod cgroup's literal name is the expanded path."""
    name = ("kubepods", "burstable", "pod1234-abcd-5678-efgh")
    assert names.to_systemd(name) == (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"
    )
    assert names.parse_systemd(names.to_systemd(name)) == name


@pytest.mark.parametrize(
    ("quota", "period", "per_sec"),
    [
        (50_000, 100_000, 500_000),
        (100_000, 100_000, 1_000_000),
        (1_000, 100_000, 10_000),  # 1 ms per 100 ms: 10 ms per second
        (1_234, 100_000, 20_000),  # 12.34 ms per second rounded up to whole 10 ms
        (25_000, 50_000, 500_000),
        (-1, 100_000, INFINITY),
        (0, 100_000, INFINITY),
    ],
)
def test_quota_per_sec(quota: int, period: int, per_sec: int) -> None:
    assert quota_per_sec(quota, period) == per_sec


def test_v1_properties_of_a_guaranteed_pod() -> None:
    config = ResourceConfig(
        cpu_shares=512, cpu_quota=50_000, cpu_period=100_000, memory=128 << 20, pids_limit=100
    )
    assert resource_properties(config, 1) == [
        ("MemoryLimit", ("t", 128 << 20)),
        ("CPUShares", ("t", 512)),
        ("CPUQuotaPeriodUSec", ("t", 100_000)),
        ("CPUQuotaPerSecUSec", ("t", 500_000)),
        ("TasksMax", ("t", 100)),
    ]


def test_v2_properties_use_weight_and_memory_max() -> None:
    config = ResourceConfig(cpu_shares=256, memory=-1, pids_limit=-1)
    assert resource_properties(config, 2) == [
        ("MemoryMax", ("t", INFINITY)),
        ("CPUWeight", ("t", 10)),
        ("TasksMax", ("t", INFINITY)),
    ]


def test_unset_values_are_left_out() -> None:
    assert resource_properties(ResourceConfig(), 1) == []
    assert resource_properties(ResourceConfig(hugepage_limits={2 << 20: 0}), 2) == []
    # cpuCFSQuota off: unlimited quota, with the period
    config = ResourceConfig(cpu_shares=2, cpu_quota=-1, cpu_period=100_000)
    assert ("CPUQuotaPerSecUSec", ("t", INFINITY)) in resource_properties(config, 1)


def test_start_properties() -> None:
    props = dict(start_properties("kubepods-burstable.slice", "kubepods.slice", 1))
    assert props == {
        "Description": ("s", "libcontainer container kubepods-burstable.slice"),
        "Wants": ("as", ["kubepods.slice"]),
        "MemoryAccounting": ("b", True),
        "CPUAccounting": ("b", True),
        "BlockIOAccounting": ("b", True),
        "TasksAccounting": ("b", True),
        "DefaultDependencies": ("b", False),
    }
    assert "IOAccounting" in dict(start_properties("a.slice", "-.slice", 2))
