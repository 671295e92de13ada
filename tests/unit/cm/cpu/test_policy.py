import json

import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, ResourceRequirements
from kubelet.boundedio import inline
from kubelet.cm.cpu import CpuManager
from kubelet.cm.cpu.checkpoint import CorruptCheckpoint, CpuState, checksum, decode, encode
from kubelet.cm.cpu.policy import (
    AllocationError,
    PolicyOptions,
    StateMismatch,
    StaticPolicy,
    guaranteed_cpus,
)
from kubelet.cm.cpu.topology import uniform


def _c(name: str, cpu: str | None, memory: str = "64Mi", restart: str | None = None) -> Container:
    res = None
    if cpu is not None:
        amounts = {"cpu": cpu, "memory": memory}
        res = ResourceRequirements(requests=amounts, limits=amounts)
    return Container(name=name, image="i", resources=res, restart_policy=restart)


def _pod(uid: str, *cpus: str | None, init: tuple[Container, ...] = ()) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=uid, namespace="default", uid=uid),
        spec=PodSpec(
            containers=tuple(_c(f"c{i}", cpu) for i, cpu in enumerate(cpus)),
            init_containers=init,
        ),
    )


def test_only_whole_cpus_of_guaranteed_pods_are_exclusive() -> None:
    assert guaranteed_cpus(_pod("a", "2"), _pod("a", "2").spec.containers[0]) == 2
    assert guaranteed_cpus(_pod("a", "1500m"), _pod("a", "1500m").spec.containers[0]) == 0
    burstable = _pod("b", "1", None)
    assert guaranteed_cpus(burstable, burstable.spec.containers[0]) == 0


def test_static_policy_pins_guaranteed_containers_and_shrinks_the_shared_pool() -> None:
    policy = StaticPolicy(uniform(1, 4, 1), frozenset({0}), PolicyOptions())
    assert policy.default == {0, 1, 2, 3}
    assert policy.allocate(_pod("g", "2")) is True
    assert policy.exclusive("g", "c0") == {1, 2}
    assert policy.default == {0, 3}
    assert policy.cpus_for("be", "c0") == {0, 3}  # everyone else: the shared pool
    with pytest.raises(AllocationError) as refused:
        policy.allocate(_pod("h", "2"))
    assert refused.value.reason == "UnexpectedAdmissionError"
    assert refused.value.message == (
        "Allocate failed due to not enough cpus available to satisfy request: "
        "requested=2, available=1, which is unexpected"
    )
    assert policy.release(["g"]) is True
    assert policy.default == {0, 1, 2, 3}


def test_a_second_admission_of_the_same_pod_keeps_its_cpus() -> None:
    policy = StaticPolicy(uniform(1, 4, 1), frozenset({0}), PolicyOptions())
    policy.allocate(_pod("g", "1"))
    assert policy.allocate(_pod("g", "1")) is False
    assert policy.exclusive("g", "c0") == {1}


def test_init_container_cpus_are_reused_by_app_containers() -> None:
    policy = StaticPolicy(uniform(1, 4, 1), frozenset({0}), PolicyOptions())
    pod = _pod("g", "2", init=(_c("init", "2"),))
    policy.allocate(pod)
    assert policy.exclusive("g", "init") == {1, 2}
    assert policy.exclusive("g", "c0") == {1, 2}
    assert policy.default == {0, 3}
    policy.release(["g"])
    sidecar = _pod("s", "1", init=(_c("side", "1", restart="Always"),))
    policy.allocate(sidecar)  # a sidecar runs beside the app: no reuse
    assert policy.exclusive("s", "side") != policy.exclusive("s", "c0")


def test_full_pcpus_only_refuses_requests_that_split_a_core() -> None:
    topo = uniform(1, 4, 2)
    policy = StaticPolicy(topo, frozenset({0, 4}), PolicyOptions(full_pcpus_only=True))
    with pytest.raises(AllocationError) as refused:
        policy.allocate(_pod("g", "1"))
    assert refused.value.reason == "SMTAlignmentError"
    assert refused.value.message == (
        "SMT Alignment Error: requested 1 cpus not multiple of cpus per core = 2"
    )
    policy.allocate(_pod("g", "2"))
    assert policy.exclusive("g", "c0") == {1, 5}
    policy.default = policy.default - {2}  # one thread of a core taken elsewhere
    with pytest.raises(AllocationError, match="available physical CPUs = 2, requested CPUs = 4"):
        policy.allocate(_pod("h", "4"))
    plain = StaticPolicy(topo, frozenset({0, 4}), PolicyOptions())
    plain.allocate(_pod("g", "1"))
    assert plain.exclusive("g", "c0") == {1}


def test_strict_cpu_reservation_keeps_reserved_cpus_out_of_the_shared_pool() -> None:
    topo = uniform(1, 4, 1)
    assert StaticPolicy(topo, frozenset({0}), PolicyOptions()).default == {0, 1, 2, 3}
    strict = StaticPolicy(topo, frozenset({0}), PolicyOptions(strict_cpu_reservation=True))
    assert strict.default == {1, 2, 3}
    strict.allocate(_pod("g", "3"))
    assert strict.default == frozenset()


def test_restore_checks_the_state_against_the_machine() -> None:
    policy = StaticPolicy(uniform(1, 4, 1), frozenset({0}), PolicyOptions())
    state = CpuState("static", frozenset({0, 3}), {"g": {"c0": frozenset({1, 2})}})
    policy.restore(state)
    assert policy.exclusive("g", "c0") == {1, 2}
    with pytest.raises(StateMismatch, match="doesn't match with CPUs in state"):
        policy.restore(CpuState("static", frozenset({0, 3}), {}))
    with pytest.raises(StateMismatch, match="not all reserved cpus"):
        policy.restore(CpuState("static", frozenset({1, 2, 3}), {"g": {"c0": frozenset({0})}}))


def test_checkpoint_checksum_is_upstreams() -> None:
    # upstream's own test vectors (state_checkpoint_test.go)
    assert checksum("none", "4-6", {}) == 354655845
    data = b'{"policyName":"none","defaultCPUSet":"4-6","entries":{},"checksum":354655845}'
    assert decode(data) == CpuState("none", frozenset({4, 5, 6}))
    with pytest.raises(CorruptCheckpoint):
        decode(data.replace(b"4-6", b"4-7"))
    state = CpuState("static", frozenset({0, 3}), {"pod": {"c": frozenset({1, 2})}})
    written = json.loads(encode(state))
    assert list(written) == ["policyName", "defaultCpuSet", "entries", "checksum"]
    assert written["entries"] == {"pod": {"c": "1-2"}}
    assert decode(encode(state)) == state
    assert "entries" not in json.loads(encode(CpuState("none")))


def test_admission_counts_pinning_requests_and_errors() -> None:
    counted: list[str] = []
    policy = StaticPolicy(uniform(1, 2, 1), frozenset({0}), PolicyOptions())
    manager = CpuManager(
        policy,
        path="unused",
        runtime=None,  # type: ignore[arg-type]
        active=list,
        io=inline,
        period=10.0,
        count=counted.append,
    )
    assert manager.admit(_pod("g", "1"), []) is None
    assert manager.admit(_pod("be", None), []) is None
    refusal = manager.admit(_pod("h", "1"), [])
    assert refusal is not None and refusal[0] == "UnexpectedAdmissionError"
    assert counted == ["requests", "requests", "errors"]
    counted.clear()
    full = StaticPolicy(uniform(1, 2, 2), frozenset({0}), PolicyOptions(full_pcpus_only=True))
    manager.policy = full
    assert manager.admit(_pod("g2", "2"), []) is None
    refusal = manager.admit(_pod("h2", "1"), [])
    assert refusal is not None and refusal[0] == "SMTAlignmentError"
    assert counted == ["requests", "aligned", "requests", "errors", "unaligned"]


def _manager(policy: StaticPolicy | None) -> CpuManager:
    return CpuManager(
        policy,
        path="unused",
        runtime=None,  # type: ignore[arg-type]
        active=list,
        io=inline,
        period=10.0,
    )


def test_the_static_policy_refuses_a_guaranteed_pods_cpu_resize() -> None:
    static = _manager(StaticPolicy(uniform(1, 4, 1), frozenset({0}), PolicyOptions()))
    refusal = static.admit_resize(_pod("g", "2"), _pod("g", "1"))
    assert refusal == (
        "guaranteed_pod_cpu_manager_static_policy",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"',
    )
    # a sidecar's CPU counts as well; the memory alone, or a Burstable pod, does not
    sidecar = _pod("s", "1", init=(_c("side", "2", restart="Always"),))
    before = _pod("s", "1", init=(_c("side", "1", restart="Always"),))
    assert static.admit_resize(sidecar, before) is not None
    assert static.admit_resize(_pod("g", "1"), _pod("g", "1")) is None
    burstable = _pod("b", "2", None)
    assert static.admit_resize(burstable, _pod("b", "1", None)) is None
    assert _manager(None).admit_resize(_pod("g", "2"), _pod("g", "1")) is None
