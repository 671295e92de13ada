"""Pod requests/limits and cgroup values, restated from upstream's helpers_linux_test.go,
the resource helpers' tests, qos_container_manager and node_container_manager tests."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubelet.api import (
    Container,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceRequirements,
    parse_quantity,
)
from kubelet.cgroups import (
    hugepage_limits,
    hugepage_unit,
    is_extended_resource,
    is_scalar_resource,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    pod_requests,
)
from kubelet.cgroups.requests import pod_limits
from kubelet.cgroups.values import (
    ResourceConfig,
    node_allocatable,
    node_allocatable_config,
    qos_configs,
    reserved_config,
    resource_config_for_pod,
    shares_to_weight,
    v1_files,
    v2_files,
)

MI = 1024 * 1024


def res(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


def ctr(
    name: str = "c",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    *,
    sidecar: bool = False,
) -> Container:
    return Container(
        name=name, resources=res(requests, limits), restart_policy="Always" if sidecar else None
    )


def pod(
    *containers: Container,
    init: tuple[Container, ...] = (),
    overhead: dict[str, str] | None = None,
    pod_level: ResourceRequirements | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", uid="u"),
        spec=PodSpec(
            containers=containers,
            init_containers=init,
            overhead={k: Quantity(v) for k, v in (overhead or {}).items()},
            resources=pod_level,
        ),
    )


def amounts(values: dict[str, str]) -> dict[str, Fraction]:
    return {k: parse_quantity(v).amount for k, v in values.items()}


# -- conversions (MilliCPUToShares/Quota, the KEP 2254 weight mapping) ------------------------


@pytest.mark.parametrize(
    ("milli", "shares"),
    [
        (0, 2),
        (1, 2),
        (2, 2),
        (100, 102),
        (1000, 1024),
        (1500, 1536),
        (300000, 262144),
        (256000, 262144),
    ],
)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "period", "quota"),
    [
        (0, 100000, 0),
        (5, 100000, 1000),  # at least 1 ms
        (9, 100000, 1000),
        (10, 100000, 1000),
        (200, 100000, 20000),
        (500, 100000, 50000),
        (1000, 100000, 100000),
        (1500, 100000, 150000),
        (1500, 5000, 7500),
        (100, 5000, 1000),
    ],
)
def test_milli_cpu_to_quota(milli: int, period: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli, period) == quota


@pytest.mark.parametrize(
    ("shares", "weight"),
    [(2, 1), (1024, 39), (2048, 79), (102, 4), (262144, 10000), (300000, 10000), (256, 10)],
)
def test_shares_to_weight(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight


@pytest.mark.parametrize(
    ("size", "unit"), [(2 * MI, "2MB"), (1024 * MI, "1GB"), (64 * 1024, "64KB"), (512, "512B")]
)
def test_hugepage_unit(size: int, unit: str) -> None:
    assert hugepage_unit(size) == unit


def test_hugepage_limits() -> None:
    # HugePageLimits: sizes summed per page size, other resources ignored.
    assert hugepage_limits(
        amounts({"hugepages-2Mi": "4Mi", "cpu": "1", "hugepages-1Gi": "2Gi"})
    ) == {
        2 * MI: 4 * MI,
        1024 * MI: 2048 * MI,
    }
    assert hugepage_limits(amounts({"memory": "1Gi"})) == {}


# -- PodRequests / PodLimits ---------------------------------------------------------------


def test_requests_sum_containers_and_take_the_init_maximum() -> None:
    p = pod(
        ctr("a", {"cpu": "1", "memory": "1G"}),
        ctr("b", {"cpu": "2", "memory": "1G"}),
        init=(ctr("i1", {"cpu": "2", "memory": "1G"}), ctr("i2", {"cpu": "2", "memory": "3G"})),
    )
    # The comment example of computePodResourceRequest: CPU 3, memory 3G.
    assert pod_requests(p) == amounts({"cpu": "3", "memory": "3G"})


def test_requests_count_sidecars_beside_everything_after_them() -> None:
    # KEP 753: init i uses its own request + every sidecar declared before it; sidecars
    # run with the regular containers.
    p = pod(
        ctr("main", {"cpu": "1"}),
        init=(
            ctr("init1", {"cpu": "5"}),
            ctr("side1", {"cpu": "1"}, sidecar=True),
            ctr("init2", {"cpu": "3"}),
            ctr("side2", {"cpu": "2"}, sidecar=True),
        ),
    )
    # max(main + side1 + side2 = 4, init1 = 5, init2 + side1 = 4) = 5
    assert pod_requests(p)["cpu"] == 5
    p2 = pod(
        ctr("main", {"cpu": "1"}),
        init=(ctr("side", {"cpu": "3"}, sidecar=True), ctr("i", {"cpu": "3"})),
    )
    # init i with the sidecar running: 6; regular + sidecar: 4.
    assert pod_requests(p2)["cpu"] == 6


def test_overhead_added_to_requests_and_to_set_limits_only() -> None:
    p = pod(
        ctr("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"}),
        overhead={"cpu": "250m", "memory": "100Mi"},
    )
    assert pod_requests(p) == amounts({"cpu": "1250m", "memory": "1124Mi"})
    assert pod_requests(p, exclude_overhead=True) == amounts({"cpu": "1", "memory": "1Gi"})
    assert pod_limits(p) == amounts({"cpu": "2250m"})  # no memory limit, no overhead on it


def test_pod_level_resources_replace_container_sums() -> None:
    p = pod(
        ctr("a", {"cpu": "10m", "memory": "50Mi"}),
        pod_level=res({"cpu": "100m", "memory": "100Mi"}),
    )
    assert pod_requests(p) == amounts({"cpu": "100m", "memory": "100Mi"})
    assert pod_requests(p, pod_level_resources=False) == amounts({"cpu": "10m", "memory": "50Mi"})


def test_non_missing_defaults_only_for_unnamed_resources() -> None:
    p = pod(ctr("a", {"cpu": "0"}), ctr("b"))
    got = pod_requests(p, non_missing={"cpu": Fraction(1, 10), "memory": Fraction(200 * MI)})
    assert got == {"cpu": Fraction(1, 10), "memory": Fraction(400 * MI)}


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [
        ("example.com/aaa", True, True),
        ("kubernetes.io/something", False, True),
        ("subdomain.kubernetes.io/something", False, True),
        ("hugepages-2Mi", False, True),
        ("attachable-volumes-aws-ebs", False, True),
        ("cpu", False, False),
        ("requests.example.com/x", False, False),
        ("example.com/-bad", False, False),
    ],
)
def test_resource_kinds(name: str, extended: bool, scalar: bool) -> None:
    assert is_extended_resource(name) is extended
    assert is_scalar_resource(name) is scalar


# -- ResourceConfigForPod --------------------------------------------------------------------

BURSTABLE_SHARES = milli_cpu_to_shares(100)
PARTIAL_SHARES = milli_cpu_to_shares(200)
BURSTABLE_QUOTA = milli_cpu_to_quota(200, 100000)
GUARANTEED_QUOTA = milli_cpu_to_quota(100, 100000)


@pytest.mark.parametrize(
    ("label", "p", "qos", "enforce", "period", "expected"),
    [
        ("besteffort", pod(ctr()), "BestEffort", True, 100000, ResourceConfig(cpu_shares=2)),
        (
            "burstable-no-limits",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"})),
            "Burstable",
            True,
            100000,
            ResourceConfig(cpu_shares=BURSTABLE_SHARES),
        ),
        (
            "burstable-with-limits",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"})),
            "Burstable",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=BURSTABLE_QUOTA,
                cpu_period=100000,
                memory=200 * MI,
            ),
        ),
        (
            "burstable-with-limits-no-cpu-enforcement",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"})),
            "Burstable",
            False,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES, cpu_quota=-1, cpu_period=100000, memory=200 * MI
            ),
        ),
        (
            "burstable-partial-limits",
            pod(
                ctr("a", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"}),
                ctr("b", {"cpu": "100m", "memory": "100Mi"}),
            ),
            "Burstable",
            True,
            100000,
            ResourceConfig(cpu_shares=PARTIAL_SHARES),
        ),
        (
            "burstable-with-limits-with-tuned-quota",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"})),
            "Burstable",
            True,
            5000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=milli_cpu_to_quota(200, 5000),
                cpu_period=5000,
                memory=200 * MI,
            ),
        ),
        (
            "guaranteed",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"})),
            "Guaranteed",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=GUARANTEED_QUOTA,
                cpu_period=100000,
                memory=100 * MI,
            ),
        ),
        (
            "guaranteed-no-cpu-enforcement",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"})),
            "Guaranteed",
            False,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES, cpu_quota=-1, cpu_period=100000, memory=100 * MI
            ),
        ),
        (
            "guaranteed-with-tuned-quota",
            pod(ctr("c", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"})),
            "Guaranteed",
            True,
            5000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=milli_cpu_to_quota(100, 5000),
                cpu_period=5000,
                memory=100 * MI,
            ),
        ),
        (
            "burstable-partial-limits-with-init-containers",
            pod(
                ctr("a", {"cpu": "100m", "memory": "100m"}, {"cpu": "100m", "memory": "100Mi"}),
                ctr("b", {"cpu": "100m", "memory": "100m"}),
                init=(
                    ctr(
                        "i1", {"cpu": "100m", "memory": "100m"}, {"cpu": "100m", "memory": "100Mi"}
                    ),
                    ctr("i2", {"cpu": "100m", "memory": "100m"}),
                ),
            ),
            "Burstable",
            True,
            5000,
            ResourceConfig(cpu_shares=PARTIAL_SHARES),
        ),
        (
            "burstable-with-pod-level-requests",
            pod(ctr("c"), pod_level=res({"cpu": "100m", "memory": "100Mi"})),
            "Burstable",
            True,
            100000,
            ResourceConfig(cpu_shares=BURSTABLE_SHARES),
        ),
        (
            "burstable-with-pod-level-resources",
            pod(
                ctr("c"),
                pod_level=res(
                    {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"}
                ),
            ),
            "Burstable",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=BURSTABLE_QUOTA,
                cpu_period=100000,
                memory=200 * MI,
            ),
        ),
        (
            "burstable-with-pod-and-container-level-resources",
            pod(
                ctr("c", {"cpu": "10m", "memory": "50Mi"}, {"cpu": "50m", "memory": "100Mi"}),
                pod_level=res(
                    {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"}
                ),
            ),
            "Burstable",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=BURSTABLE_QUOTA,
                cpu_period=100000,
                memory=200 * MI,
            ),
        ),
        (
            "burstable-with-partial-pod-level-resources-limits",
            pod(
                ctr("c", {"cpu": "200m", "memory": "200Mi"}, {"cpu": "200m", "memory": "200Mi"}),
                pod_level=res({"cpu": "200m", "memory": "300Mi"}),
            ),
            "Burstable",
            True,
            100000,
            ResourceConfig(
                cpu_shares=PARTIAL_SHARES,
                cpu_quota=BURSTABLE_QUOTA,
                cpu_period=100000,
                memory=200 * MI,
            ),
        ),
        (
            "guaranteed-with-pod-level-resources",
            pod(
                ctr("c"),
                pod_level=res(
                    {"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"}
                ),
            ),
            "Guaranteed",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=GUARANTEED_QUOTA,
                cpu_period=100000,
                memory=100 * MI,
            ),
        ),
        (
            "guaranteed-pod-level-resources-with-init-containers",
            pod(
                ctr("c", {"cpu": "10m", "memory": "50Mi"}, {"cpu": "50m", "memory": "50Mi"}),
                init=(
                    ctr("i", {"cpu": "10m", "memory": "50Mi"}, {"cpu": "50m", "memory": "50Mi"}),
                ),
                pod_level=res(
                    {"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"}
                ),
            ),
            "Guaranteed",
            True,
            100000,
            ResourceConfig(
                cpu_shares=BURSTABLE_SHARES,
                cpu_quota=GUARANTEED_QUOTA,
                cpu_period=100000,
                memory=100 * MI,
            ),
        ),
    ],
)
def test_resource_config_for_pod(
    label: str, p: Pod, qos: str, enforce: bool, period: int, expected: ResourceConfig
) -> None:
    got = resource_config_for_pod(p, qos, enforce_cpu_limits=enforce, cpu_period=period)
    assert got == expected, label


def test_resource_config_counts_an_init_container_without_cpu_limit() -> None:
    # The limits are declared only if every container, init containers included, has one.
    p = pod(
        ctr("a", {"cpu": "1"}, {"cpu": "1", "memory": "1Gi"}),
        init=(ctr("i", {"cpu": "1"}, {"memory": "1Gi"}),),
    )
    got = resource_config_for_pod(p, "Burstable")
    assert got.cpu_quota is None and got.memory == 1024 * MI


def test_resource_config_pids_hugepages_and_overhead() -> None:
    p = pod(
        ctr(
            "c",
            {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"},
            {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"},
        ),
        overhead={"cpu": "100m", "memory": "64Mi"},
    )
    got = resource_config_for_pod(p, "Guaranteed", pids_limit=512)
    assert got == ResourceConfig(
        cpu_shares=milli_cpu_to_shares(1100),
        cpu_quota=110000,
        cpu_period=100000,
        memory=1088 * MI,
        pids_limit=512,
        hugepage_limits={2 * MI: 4 * MI},
    )
    assert resource_config_for_pod(pod(ctr()), "BestEffort", pids_limit=-1).pids_limit is None
    assert resource_config_for_pod(pod(ctr()), "BestEffort", pids_limit=0).pids_limit is None


# -- QoS cgroups (UpdateCgroups, setMemoryReserve) -----------------------------------------


def test_qos_shares_follow_burstable_requests() -> None:
    active = [
        (pod(ctr("a", {"cpu": "1"}, {"cpu": "1"})), "Guaranteed"),
        (pod(ctr("b", {"cpu": "300m"})), "Burstable"),
        (pod(ctr("c", {"cpu": "200m", "memory": "1Gi"})), "Burstable"),
        (pod(ctr("d")), "BestEffort"),
    ]
    configs = qos_configs(active, hugepage_sizes=(2 * MI,))
    assert configs["Burstable"] == ResourceConfig(cpu_shares=512, hugepage_limits={2 * MI: 1 << 62})
    assert configs["BestEffort"] == ResourceConfig(cpu_shares=2, hugepage_limits={2 * MI: 1 << 62})
    assert configs["Guaranteed"] == ResourceConfig(hugepage_limits={2 * MI: 1 << 62})
    assert qos_configs([])["Burstable"].cpu_shares == 2


def test_qos_memory_reserve() -> None:
    # setMemoryReserve: Burstable may use allocatable minus 50% of the Guaranteed requests,
    # BestEffort that minus 50% of the Burstable requests.
    g = pod(ctr("g", {"cpu": "1", "memory": "128Mi"}, {"cpu": "1", "memory": "128Mi"}))
    b = pod(ctr("b", {"memory": "128Mi"}))
    active = [(g, "Guaranteed"), (g, "Guaranteed"), (b, "Burstable")]
    configs = qos_configs(active, qos_reserved_memory=50, allocatable_memory=4096 * MI)
    assert configs["Burstable"].memory == 4096 * MI - 128 * MI
    assert configs["BestEffort"].memory == 4096 * MI - 128 * MI - 64 * MI
    assert (
        qos_configs(active, qos_reserved_memory=None, allocatable_memory=4096 * MI)[
            "Burstable"
        ].memory
        is None
    )
    assert (
        qos_configs(active, qos_reserved_memory=50, allocatable_memory=0)["Burstable"].memory
        is None
    )


# -- node allocatable (node_container_manager_linux_test) ----------------------------------


@pytest.mark.parametrize(
    ("capacity", "system", "kube", "expected"),
    [
        (
            {"cpu": "10", "memory": "10Gi"},
            {"cpu": "100m", "memory": "100Mi"},
            {"cpu": "50m", "memory": "50Mi"},
            {"cpu": "9850m", "memory": "10090Mi"},
        ),
        ({"cpu": "10", "memory": "10Gi"}, {}, {}, {"cpu": "10", "memory": "10Gi"}),
        (
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "2"},
            {"memory": "2Gi"},
            {"cpu": "0", "memory": "0"},
        ),
        (
            {"cpu": "10", "memory": "10Gi", "pid": "1000"},
            {"pid": "100"},
            {},
            {"cpu": "10", "memory": "10Gi", "pid": "900"},
        ),
    ],
)
def test_node_allocatable(
    capacity: dict[str, str], system: dict[str, str], kube: dict[str, str], expected: dict[str, str]
) -> None:
    assert node_allocatable(amounts(capacity), amounts(system), amounts(kube)) == amounts(expected)


def test_kubepods_config_enforced_or_capacity() -> None:
    capacity = amounts({"cpu": "2", "memory": "4Gi", "pid": "4194304", "hugepages-2Mi": "0"})
    reserved = amounts({"cpu": "500m", "memory": "1Gi", "pid": "1000"})
    assert node_allocatable_config(capacity, reserved, {}, enforce_pods=True) == ResourceConfig(
        cpu_shares=1536, memory=3072 * MI, pids_limit=4193304, hugepage_limits={2 * MI: 0}
    )
    assert node_allocatable_config(capacity, reserved, {}, enforce_pods=False) == ResourceConfig(
        cpu_shares=2048, memory=4096 * MI, pids_limit=4194304, hugepage_limits={2 * MI: 0}
    )


def test_reserved_config() -> None:
    # getCgroupConfigInternal: all resources, or cpu shares only when compressible.
    reserved = amounts({"cpu": "100m", "memory": "256Mi", "pid": "1000"})
    assert reserved_config(reserved) == ResourceConfig(
        cpu_shares=102, memory=256 * MI, pids_limit=1000
    )
    assert reserved_config(reserved, compressible_only=True) == ResourceConfig(cpu_shares=102)
    assert reserved_config({}) == ResourceConfig()


# -- file spellings ------------------------------------------------------------------------


def test_v1_and_v2_files() -> None:
    config = ResourceConfig(
        cpu_shares=1024,
        cpu_quota=50000,
        cpu_period=100000,
        memory=128 * MI,
        pids_limit=100,
        hugepage_limits={2 * MI: 4 * MI},
    )
    assert v1_files(config, (2 * MI, 1024 * MI)) == {
        "cpu": [
            ("cpu.shares", "1024"),
            ("cpu.cfs_period_us", "100000"),
            ("cpu.cfs_quota_us", "50000"),
        ],
        "memory": [("memory.limit_in_bytes", str(128 * MI))],
        "pids": [("pids.max", "100")],
        "hugetlb": [
            ("hugetlb.2MB.limit_in_bytes", str(4 * MI)),
            ("hugetlb.1GB.limit_in_bytes", "0"),
        ],
    }
    assert v2_files(config, (2 * MI,)) == [
        ("cpu.weight", "39"),
        ("cpu.max", "50000 100000"),
        ("memory.max", str(128 * MI)),
        ("pids.max", "100"),
        ("hugetlb.2MB.max", str(4 * MI)),
    ]


def test_unlimited_values() -> None:
    config = ResourceConfig(cpu_quota=-1, cpu_period=100000, memory=-1, pids_limit=-1)
    assert v1_files(config) == {
        "cpu": [("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", "-1")],
        "memory": [("memory.limit_in_bytes", "-1")],
        "pids": [("pids.max", "max")],
    }
    assert v2_files(config) == [
        ("cpu.max", "max 100000"),
        ("memory.max", "max"),
        ("pids.max", "max"),
    ]
    assert v1_files(ResourceConfig()) == {} and v2_files(ResourceConfig()) == []
