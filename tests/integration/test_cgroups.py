"""Resource management end to end on fake time: the cgroup tree (a temporary directory laid
out as a cgroup v1 hybrid host), FakeRuntime and, for admission, FakeApiServer.

The kubepods and QoS cgroups exist once the kubelet has started; a pod's cgroup is made
before its sandbox (and the sandbox names it as its parent) and removed after its
teardown; pod cgroups nobody knows are swept once the sources are ready; a pod that does
not fit is Failed with upstream's reason, oldest pods admitted first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.metrics import exposition
from kubelet.testing import FakeApiServer, FakeRuntime, TreeCgroupFs, v1_tree
from kubelet.testing.cgroupfs import add_process
from kubelet.testing.fakeproc import add_proc, fake_proc, fake_proc_sys

from .cluster_harness import MACHINE, Cluster, running_cluster, start_cluster_kubelet
from .kubelet_harness import (
    EPOCH,
    KUBELET_IMAGES,
    NODE,
    Harness,
    running_kubelet,
    start_kubelet,
)


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def manifest(name: str, requests: str = "", limits: str = "") -> str:
    resources = ""
    if requests or limits:
        resources = "    resources:\n"
        if requests:
            resources += f"      requests: {requests}\n"
        if limits:
            resources += f"      limits: {limits}\n"
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n"
        f"spec:\n  containers:\n  - name: app\n    image: busybox:1.35\n{resources}"
    )


def cgroup(tree: Path, hierarchy: str, path: str) -> Path:
    return tree / hierarchy / path.strip("/")


def sandbox_of(h: Harness, pod: str) -> Any:
    (sandbox,) = h.sandboxes(pod)
    return sandbox


def everywhere(tree: Path, path: str) -> list[Path]:
    """The directories of cgroup ``path`` in every hierarchy of the tree."""
    return [
        cgroup(tree, hierarchy, path)
        for hierarchy in ("cpu,cpuacct", "memory", "pids", "cpuset", "systemd", "unified")
    ]


async def test_the_qos_tree_exists_once_the_kubelet_runs(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp, "--pod-max-pids=100"):
        tree = short_tmp / "cgroup"
        assert cgroup(tree, "cpu", "kubepods/besteffort").joinpath("cpu.shares").read_text() == "2"
        assert cgroup(tree, "memory", "kubepods/burstable").is_dir()
        assert cgroup(tree, "pids", "kubepods").joinpath("pids.max").read_text().isdigit()


async def test_pod_cgroup_before_the_sandbox_and_gone_after_teardown(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The first RunPodSandbox fails: the pod cgroup is there already (made first);
    the retried sandbox names it as parent; deleting the manifest removes it."""
    fake.faults.fail("RunPodSandbox", message="no sandbox today", times=1)
    async with running_kubelet(fake, short_tmp, "--pod-max-pids=100") as h:
        tree = short_tmp / "cgroup"
        h.write("web.yaml", manifest("web", "{cpu: 250m, memory: 64Mi}"))
        await h.wait_for(lambda: fake.calls_of("RunPodSandbox"))
        pods = h.components.pods.pods() if h.components else []
        (web,) = pods
        path = f"/kubepods/burstable/pod{web.uid}"
        assert not h.sandboxes("web")
        assert all(d.is_dir() for d in everywhere(tree, path))
        await h.wait_for(lambda: h.sandboxes("web"))
        assert sandbox_of(h, "web").config.linux.cgroup_parent == path
        assert cgroup(tree, "cpu", path).joinpath("cpu.shares").read_text() == "256"
        assert cgroup(tree, "pids", path).joinpath("pids.max").read_text() == "100"
        assert not cgroup(tree, "memory", path).joinpath("memory.limit_in_bytes").exists()
        # the QoS cgroup follows the Burstable pods' requests
        burstable = cgroup(tree, "cpu", "/kubepods/burstable").joinpath("cpu.shares")
        assert burstable.read_text() == "256"

        (h.manifests / "web.yaml").unlink()
        await h.wait_for(lambda: not h.sandboxes("web"))
        await h.wait_for(lambda: not any(d.exists() for d in everywhere(tree, path)))


async def test_guaranteed_pod_values(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        tree = short_tmp / "cgroup"
        both = "{cpu: 500m, memory: 128Mi}"
        h.write("db.yaml", manifest("db", both, both))
        await h.wait_for(lambda: h.sandboxes("db"))
        uid = sandbox_of(h, "db").config.metadata.uid
        path = f"/kubepods/pod{uid}"
        assert sandbox_of(h, "db").config.linux.cgroup_parent == path
        cpu = cgroup(tree, "cpu", path)
        assert cpu.joinpath("cpu.shares").read_text() == "512"
        assert cpu.joinpath("cpu.cfs_quota_us").read_text() == "50000"
        assert cpu.joinpath("cpu.cfs_period_us").read_text() == "100000"
        memory = cgroup(tree, "memory", path).joinpath("memory.limit_in_bytes")
        assert memory.read_text() == str(128 * 1024 * 1024)


async def test_without_cgroups_per_qos_no_cgroup_is_made(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(
        fake, short_tmp, "--cgroups-per-qos=false", "--enforce-node-allocatable=none"
    ) as h:
        h.write("web.yaml", manifest("web", "{cpu: 250m}"))
        await h.wait_for(lambda: h.sandboxes("web"))
        assert sandbox_of(h, "web").config.linux.cgroup_parent == ""
        assert not any((short_tmp / "cgroup").glob("*/kubepods"))  # (the tree is the fake's)


async def test_orphaned_pod_cgroups_are_swept_once_sources_are_ready(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Left by an earlier kubelet: the pod cgroups of pods nobody knows go (in every
    hierarchy); the cgroup of a pod the manifests want stays. (An orphan whose volumes
    are still mounted is only brought down to 2 cpu shares: tests/unit/cgroups.)"""
    tree = short_tmp / "cgroup"
    fs = TreeCgroupFs(v1_tree(tree))
    fs.create("/kubepods/besteffort/podgone-1")
    fs.create("/kubepods/pod2e4c0a4e-0000-4000-8000-000000000001")
    async with running_kubelet(fake, short_tmp) as h:
        h.write("web.yaml", manifest("web", "{cpu: 250m}"))
        await h.wait_for(lambda: h.sandboxes("web"))
        uid = sandbox_of(h, "web").config.metadata.uid
        await h.wait_for(
            lambda: not cgroup(tree, "memory", "/kubepods/besteffort/podgone-1").exists()
        )
        assert not any(d.exists() for d in everywhere(tree, "/kubepods/besteffort/podgone-1"))
        guaranteed = "/kubepods/pod2e4c0a4e-0000-4000-8000-000000000001"
        await h.wait_for(lambda: not any(d.exists() for d in everywhere(tree, guaranteed)))
        await trio.sleep(10)  # several housekeeping passes
        assert all(d.is_dir() for d in everywhere(tree, f"/kubepods/burstable/pod{uid}"))


# -- admission -------------------------------------------------------------------------------


def events(c: Cluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in c.api.list("events", "default") if e.get("reason") == reason]


async def test_a_pod_that_does_not_fit_is_failed_with_out_of_cpu(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: c.api.get("nodes", None, NODE) is not None)
        big = {"containers": [{"name": "app", "image": "busybox:1.35", "resources": {
            "requests": {"cpu": "3"}}}]}  # fmt: skip
        c.create_pod("big", **big)
        await c.wait_for(lambda: c.phase("big") == "Failed")
        status = (c.pod("big") or {})["status"]
        capacity = MACHINE.num_cores * 1000
        message = (
            f"Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: {capacity}"
        )
        assert status["reason"] == "OutOfcpu"
        assert status["message"] == f"Pod was rejected: {message}"
        await c.wait_for(lambda: events(c, "OutOfcpu"))
        assert events(c, "OutOfcpu")[0]["message"] == message
        assert not fake.sandboxes


async def test_pods_are_admitted_oldest_first(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Two pods that cannot both fit, listed newest first: the older one runs."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, short_tmp, nursery)
        for name, created in (("a-new", "2027-01-15T08:00:05Z"), ("b-old", "2027-01-15T08:00:00Z")):
            api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": "default",
                        "uid": f"uid-{name}",
                        "creationTimestamp": created,
                    },
                    "spec": {
                        "nodeName": NODE,
                        "containers": [
                            {
                                "name": "app",
                                "image": "busybox:1.35",
                                "resources": {"requests": {"cpu": "1500m"}},
                            }
                        ],
                    },
                }
            )
        await start_cluster_kubelet(c)
        await c.wait_for(lambda: c.phase("a-new") == "Failed")
        assert (c.pod("a-new") or {})["status"]["reason"] == "OutOfcpu"
        await c.wait_for(lambda: c.phase("b-old") == "Running")
        nursery.cancel_scope.cancel()


# -- cpuCFSQuota, cpuCFSQuotaPeriod ------------------------------------------------------------


async def test_cpu_cfs_quota_false_sets_no_quota(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Neither the container (no quota, no period in the CRI) nor the pod cgroup (-1)."""
    async with running_kubelet(fake, short_tmp, "--cpu-cfs-quota=false") as h:
        both = "{cpu: 500m, memory: 128Mi}"
        h.write("db.yaml", manifest("db", both, both))
        await h.wait_for(lambda: h.containers("db"))
        resources = h.containers("db")[0].config.linux.resources
        assert (resources.cpu_shares, resources.cpu_quota, resources.cpu_period) == (512, 0, 0)
        uid = sandbox_of(h, "db").config.metadata.uid
        cpu = cgroup(short_tmp / "cgroup", "cpu", f"/kubepods/pod{uid}")
        assert cpu.joinpath("cpu.cfs_quota_us").read_text() == "-1"


async def test_a_custom_cfs_period_reaches_containers_and_pod_cgroups(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    gate = "--feature-gates=CustomCPUCFSQuotaPeriod=true"
    async with running_kubelet(fake, short_tmp, gate, "--cpu-cfs-quota-period=50ms") as h:
        both = "{cpu: 500m, memory: 128Mi}"
        h.write("db.yaml", manifest("db", both, both))
        await h.wait_for(lambda: h.containers("db"))
        resources = h.containers("db")[0].config.linux.resources
        assert (resources.cpu_quota, resources.cpu_period) == (25_000, 50_000)
        uid = sandbox_of(h, "db").config.metadata.uid
        cpu = cgroup(short_tmp / "cgroup", "cpu", f"/kubepods/pod{uid}")
        assert cpu.joinpath("cpu.cfs_period_us").read_text() == "50000"
        assert cpu.joinpath("cpu.cfs_quota_us").read_text() == "25000"


# -- qosReserved -------------------------------------------------------------------------------


async def test_qos_reserved_limits_the_lower_classes_as_pods_come_and_go(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """QOSReserved on, memory=50%: burstable = allocatable − 50% of the Guaranteed
    requests, besteffort = that − 50% of the Burstable requests; a pod leaving gives
    its share back."""
    gate = "--feature-gates=QOSReserved=true"
    async with running_kubelet(fake, short_tmp, gate, "--qos-reserved=memory=50%") as h:
        tree = short_tmp / "cgroup"

        def limit(path: str) -> int:
            return int(cgroup(tree, "memory", path).joinpath("memory.limit_in_bytes").read_text())

        allocatable = limit("/kubepods")  # no reservations: allocatable is capacity
        both = "{cpu: 100m, memory: 128Mi}"
        h.write("db.yaml", manifest("db", both, both))
        h.write("web.yaml", manifest("web", "{memory: 64Mi}"))
        await h.wait_for(lambda: len(h.sandboxes()) == 2)
        mi = 1024 * 1024
        await h.wait_for(lambda: limit("/kubepods/besteffort") == allocatable - 96 * mi)
        assert limit("/kubepods/burstable") == allocatable - 64 * mi
        (h.manifests / "db.yaml").unlink()
        await h.wait_for(lambda: limit("/kubepods/burstable") == allocatable)
        assert limit("/kubepods/besteffort") == allocatable - 32 * mi


# -- kubeletCgroups, systemCgroups -------------------------------------------------------------


async def test_kubelet_and_system_cgroups_take_their_processes(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The kubelet's own process into kubeletCgroups; the root cgroup's user processes
    (not PID 1, not kernel threads) into systemCgroups, again a minute later."""
    proc = fake_proc(short_tmp / "proc")
    add_proc(proc, os.getpid(), "4:cpu:/\n5:memory:/\n")
    tree = short_tmp / "cgroup"
    fs = TreeCgroupFs(v1_tree(tree))
    for pid, kernel in ((2, True), (700, False)):
        add_proc(proc, pid, "0::/\n", kernel=kernel)
        add_process(tree / "devices", pid)
    h_args = ("--kubelet-cgroups=/kubelet", "--system-cgroups=/system", "--cgroup-root=/")
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    async with trio.open_nursery() as nursery:
        h = Harness(fake, manifests, nursery, extra=h_args, proc=proc)
        await start_kubelet(h)

        def members(hierarchy: str, path: str) -> set[str]:
            return set(cgroup(tree, hierarchy, path).joinpath("cgroup.procs").read_text().split())

        await h.wait_for(lambda: members("devices", "/system") == {"700"})
        assert members("memory", "/kubelet") == {str(os.getpid())}
        oom_score = proc / str(os.getpid()) / "oom_score_adj"
        assert oom_score.read_text() == "-999"  # applied with the move
        oom_score.write_text("0\n")
        assert members("devices", "/") == {"1", "2"}
        add_proc(proc, 701, "0::/\n")
        fs.attach("/", 701)  # a process started in the root meanwhile
        await trio.sleep(61)
        assert members("devices", "/system") == {"700", "701"}
        assert oom_score.read_text() == "-999"  # and again a minute later
        nursery.cancel_scope.cancel()


async def test_the_kubelets_oom_score_is_kept_without_kubelet_cgroups(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """``--oom-score-adj`` applied by the container manager at start and every 5 minutes."""
    proc = fake_proc(short_tmp / "proc")
    add_proc(proc, os.getpid(), "4:cpu:/\n5:memory:/\n")
    oom_score = proc / str(os.getpid()) / "oom_score_adj"
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    async with trio.open_nursery() as nursery:
        h = Harness(fake, manifests, nursery, extra=("--oom-score-adj=-500",), proc=proc)
        await start_kubelet(h)
        await h.wait_for(lambda: oom_score.read_text() == "-500")
        oom_score.write_text("0\n")
        await trio.sleep(5 * 60 + 1)
        assert oom_score.read_text() == "-500"
        nursery.cancel_scope.cancel()


# -- failSwapOn, memorySwap --------------------------------------------------------------------

SWAP_ON = "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 4194304 0 -2\n"


async def test_swap_on_stops_start_up_unless_fail_swap_on_is_false(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    proc = fake_proc(short_tmp / "proc", swaps=SWAP_ON)
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    with pytest.raises(BaseException) as caught:
        async with trio.open_nursery() as nursery:
            await start_kubelet(Harness(fake, manifests, nursery, proc=proc))
    assert "running with swap on is not supported, please disable swap or set --fail-swap-on" in (
        repr(caught.value)
    )
    assert not fake.sandboxes


@pytest.mark.parametrize("per_qos", [True, False], ids=["cgroupsPerQOS", "no-cgroupsPerQOS"])
async def test_no_swap_caps_containers_at_their_memory_limit_on_v1(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock, per_qos: bool
) -> None:
    """failSwapOn: false with swap on; the memory hierarchy has memory.memsw.*: every
    container's memory+swap limit is its memory limit (NoSwap, upstream's v1 spelling),
    with or without the QoS hierarchy."""
    proc = fake_proc(short_tmp / "proc", swaps=SWAP_ON)
    tree = short_tmp / "cgroup"
    TreeCgroupFs(v1_tree(tree))
    (tree / "memory" / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    async with trio.open_nursery() as nursery:
        extra = ["--fail-swap-on=false"]
        if not per_qos:
            extra += ["--cgroups-per-qos=false", "--enforce-node-allocatable=none"]
        h = Harness(fake, manifests, nursery, extra=tuple(extra), proc=proc)
        await start_kubelet(h)
        h.write("web.yaml", manifest("web", "{memory: 64Mi}", "{memory: 128Mi}"))
        await h.wait_for(lambda: h.containers("web"))
        resources = h.containers("web")[0].config.linux.resources
        assert resources.memory_swap_limit_in_bytes == resources.memory_limit_in_bytes
        assert resources.memory_limit_in_bytes == 128 * 1024 * 1024
        nursery.cancel_scope.cancel()


# -- failCgroupV1, singleProcessOOMKill -------------------------------------------------------

V1_REFUSED = (
    "kubelet is configured to not run on a host using cgroup v1. "
    "cgroup v1 support is in maintenance mode"
)


async def test_a_cgroup_v1_host_stops_start_up_by_default(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """failCgroupV1 true (upstream's default; the flag overrides the harness's false):
    the kubelet refuses the v1 tree with upstream's message and starts no pod."""
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(manifest("web"))
    with pytest.raises(BaseException) as caught:
        async with trio.open_nursery() as nursery:
            extra = ("--fail-cgroupv1=true",)
            await start_kubelet(Harness(fake, manifests, nursery, extra=extra))
    assert V1_REFUSED in repr(caught.value)
    assert not fake.sandboxes


def oom_group(h: Harness, pod: str) -> str | None:
    (container,) = h.containers(pod)
    return container.config.linux.resources.unified.get("memory.oom.group")


@pytest.mark.parametrize(
    ("version", "setting", "expected"),
    [(2, None, "1"), (2, False, "1"), (2, True, None), (1, None, None), (1, True, None)],
    ids=["v2-unset", "v2-false", "v2-true", "v1-unset", "v1-true"],
)
async def test_containers_are_oom_killed_as_a_group_on_cgroup_v2(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    version: int,
    setting: bool | None,
    expected: str | None,
) -> None:
    """CreateContainer carries memory.oom.group=1 in the unified map on v2 unless
    singleProcessOOMKill is true; never on v1 (started with failCgroupV1: false)."""
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    extra: tuple[str, ...] = ()
    if setting is not None:
        config = short_tmp / "kubelet.yaml"
        config.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"singleProcessOOMKill: {str(setting).lower()}\n"
        )
        extra = (f"--config={config}",)
    async with trio.open_nursery() as nursery:
        h = Harness(fake, manifests, nursery, extra=extra, cgroup_version=version)
        await start_kubelet(h)
        h.write("web.yaml", manifest("web", "{memory: 64Mi}", "{memory: 128Mi}"))
        await h.wait_for(lambda: h.containers("web"))
        assert oom_group(h, "web") == expected
        nursery.cancel_scope.cancel()


# -- podsPerCore -------------------------------------------------------------------------------


async def test_pods_per_core_caps_capacity_and_admission(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """2 cores × podsPerCore 1: the Node's pods capacity is 2 and a third pod is
    rejected OutOfpods at once."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, short_tmp, nursery)
        await start_cluster_kubelet(c, extra=("--pods-per-core=1",))

        def pods_capacity() -> str:
            node = c.api.get("nodes", None, NODE) or {}
            return str(node.get("status", {}).get("capacity", {}).get("pods", ""))

        await c.wait_for(lambda: pods_capacity() == str(MACHINE.num_cores))
        node = c.api.get("nodes", None, NODE) or {}
        assert node["status"]["allocatable"]["pods"] == str(MACHINE.num_cores)
        for name in ("one", "two", "three"):
            c.create_pod(name)
            await c.wait_for(lambda n=name: c.phase(n) in ("Running", "Pending", "Failed"))
            await trio.sleep(1)
        await c.wait_for(lambda: c.phase("three") == "Failed")
        assert (c.pod("three") or {})["status"]["reason"] == "OutOfpods"
        assert c.phase("one") != "Failed" and c.phase("two") != "Failed"
        nursery.cancel_scope.cancel()


# -- critical pod preemption -------------------------------------------------------------------


def cpu_pod(cpu: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "busybox:1.35", "resources": {"requests": {"cpu": cpu}}}
    return {"containers": [container], **spec}


CRITICAL = {"priority": 2_000_000_000, "priorityClassName": "system-cluster-critical"}


async def test_a_critical_pod_preempts_a_pod_to_fit(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """2 cores, a 1500m pod running: a critical 1000m pod stops it (Failed, Preempting,
    with upstream's event and DisruptionTarget condition) and runs."""
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: c.api.get("nodes", None, NODE) is not None)
        c.create_pod("filler", **cpu_pod("1500m"))
        await c.wait_for(lambda: c.phase("filler") == "Running")
        c.create_pod("critical", **cpu_pod("1", **CRITICAL))
        await c.wait_for(lambda: c.phase("filler") == "Failed")
        status = (c.pod("filler") or {})["status"]
        assert status["reason"] == "Preempting"
        assert status["message"] == "Preempted in order to admit critical pod"
        (condition,) = [x for x in status["conditions"] if x["type"] == "DisruptionTarget"]
        assert condition["reason"] == "TerminationByKubelet"
        assert condition["message"] == "Pod was preempted by Kubelet to accommodate a critical pod."
        await c.wait_for(lambda: c.phase("critical") == "Running")
        await c.wait_for(lambda: events(c, "Preempting"))
        assert events(c, "Preempting")[0]["message"] == "Preempted in order to admit critical pod"
        assert events(c, "Preempting")[0]["involvedObject"]["name"] == "filler"
        assert c.components is not None
        text = exposition(c.components.metrics.registry).decode()
        assert 'kubelet_preemptions{preemption_signal="cpu"} 1.0' in text.splitlines()


async def test_critical_pods_are_never_preempted_and_other_reasons_stand(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: c.api.get("nodes", None, NODE) is not None)
        c.create_pod("dns", **cpu_pod("1500m", **CRITICAL))
        await c.wait_for(lambda: c.phase("dns") == "Running")
        c.create_pod("critical", **cpu_pod("1", **CRITICAL))
        await c.wait_for(lambda: c.phase("critical") == "Failed")
        status = (c.pod("critical") or {})["status"]
        assert status["reason"] == "UnexpectedAdmissionError"
        assert (
            "no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]"
            in (status["message"])
        )
        c.create_pod("elsewhere", **cpu_pod("1", nodeSelector={"disk": "ssd"}, **CRITICAL))
        await c.wait_for(lambda: c.phase("elsewhere") == "Failed")
        assert (c.pod("elsewhere") or {})["status"]["reason"] == "NodeAffinity"
        assert c.phase("dns") == "Running"


# -- the Node watch ----------------------------------------------------------------------------


async def test_a_taint_set_by_someone_else_rejects_the_next_pod_at_once(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Node status is read once a minute here: only the watch of the Node can tell
    admission about the taint within the second."""
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, short_tmp, nursery)
        await start_cluster_kubelet(c, extra=("--node-status-update-frequency=1m",))
        await c.wait_for(lambda: c.api.get("nodes", None, NODE) is not None)
        await trio.sleep(5)
        c.api.patch(
            "nodes", None, NODE, {"spec": {"taints": [{"key": "maint", "effect": "NoExecute"}]}}
        )
        tainted = trio.current_time()
        c.create_pod("late")
        failed = await c.wait_for(lambda: c.phase("late") == "Failed")
        assert failed - tainted < 1.0
        assert (c.pod("late") or {})["status"]["reason"] == "TaintToleration"
        c.api.patch("nodes", None, NODE, {"spec": {"taints": None}})
        await trio.sleep(0.5)
        c.create_pod("after")
        await c.wait_for(lambda: c.phase("after") == "Running")
        nursery.cancel_scope.cancel()


# -- protectKernelDefaults ----------------------------------------------------------------------


async def test_kernel_tunables_are_set_or_protected(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A differing tunable is set on a normal start; with --protect-kernel-defaults the
    kubelet stops before any pod starts, naming it in upstream's words."""
    proc_sys = fake_proc_sys(short_tmp / "sys", kernel_panic=0)
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(manifest("web"))
    with pytest.raises(BaseException) as caught, trio.fail_after(300):
        async with trio.open_nursery() as nursery:
            extra = ("--protect-kernel-defaults",)
            await start_kubelet(Harness(fake, manifests, nursery, extra=extra, proc_sys=proc_sys))
    assert "invalid kernel flag: kernel/panic, expected value: 10, actual value: 0" in repr(
        caught.value
    )
    assert not fake.sandboxes
    assert (proc_sys / "kernel/panic").read_text() == "0\n"
    async with trio.open_nursery() as nursery:
        h = Harness(fake, manifests, nursery, proc_sys=proc_sys)
        await start_kubelet(h)
        await h.wait_for(lambda: h.running("web", "app"))
        assert (proc_sys / "kernel/panic").read_text() == "10"
        nursery.cancel_scope.cancel()
