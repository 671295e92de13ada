from grpclib.const import Status

from kubelet.testing import FaultPlan
from kubelet.testing.faults import ANY_RPC


def test_fail_next_n_then_clean() -> None:
    plan = FaultPlan().fail_next("StartContainer", 2, Status.UNAVAILABLE)
    assert plan.take("StartContainer").error is Status.UNAVAILABLE
    assert plan.take("Version").error is None
    assert plan.take("StartContainer").error is Status.UNAVAILABLE
    assert plan.take("StartContainer").error is None
    assert plan.rules == []


def test_effects_merge_and_first_error_wins() -> None:
    plan = FaultPlan().delay(ANY_RPC, 1.5).fail("Version", Status.INTERNAL, "a").fail("Version")
    effect = plan.take("Version")
    assert effect.delay == 1.5
    assert (effect.error, effect.message) == (Status.INTERNAL, "a")
    assert plan.take("Status").error is None


def test_unlimited_rules_persist_until_cleared() -> None:
    plan = FaultPlan().hang("StopContainer")
    for _ in range(5):
        assert plan.take("StopContainer").hang
    plan.clear("StopContainer")
    assert not plan.take("StopContainer").hang


def test_clear_one_rpc_keeps_others() -> None:
    plan = FaultPlan().crash("RunPodSandbox").unavailable("Version", times=1)
    plan.clear("RunPodSandbox")
    assert not plan.take("RunPodSandbox").crash
    assert plan.take("Version").error is Status.UNAVAILABLE
    plan.clear()
    assert plan.rules == []
