"""qosReserved with the QOSReserved gate: the burstable and besteffort cgroups get memory
limits of allocatable minus the reserved share of the higher classes' requests, following
the pods as they come and go (upstream's qos_container_manager setMemoryReserve)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from kubelet.cgroups import CgroupSettings
from kubelet.config import KubeletConfiguration, validate

from .test_manager import BURSTABLE, CAPACITY, GUARANTEED, MI, Tree, version

__all__ = ["version"]


def memory(tree: Tree, literal: str) -> int:
    return int(tree.value(literal, "memory", "memory.limit_in_bytes", "memory.max"))


async def test_qos_memory_limits_follow_the_pods(tmp_path: Path, version: int) -> None:
    settings = CgroupSettings(
        qos_reserved_memory=50, system_reserved={"memory": Fraction(1024 * MI)}
    )
    tree = Tree(tmp_path, version, settings)
    await tree.manager.start(CAPACITY)
    allocatable = 3072 * MI  # capacity 4Gi minus systemReserved 1Gi
    guaranteed = [(GUARANTEED, "Guaranteed")]
    await tree.manager.ensure_pod(GUARANTEED, "Guaranteed", guaranteed)
    assert memory(tree, "/kubepods/burstable") == allocatable - 64 * MI  # 50% of 128Mi
    both = [*guaranteed, (BURSTABLE, "Burstable")]
    await tree.manager.ensure_pod(BURSTABLE, "Burstable", both)
    assert memory(tree, "/kubepods/burstable") == allocatable - 64 * MI
    assert memory(tree, "/kubepods/besteffort") == allocatable - 64 * MI - 32 * MI
    await tree.manager.update_qos([(BURSTABLE, "Burstable")])  # the Guaranteed pod left
    assert memory(tree, "/kubepods/burstable") == allocatable
    assert memory(tree, "/kubepods/besteffort") == allocatable - 32 * MI


async def test_without_the_gate_the_qos_cgroups_have_no_memory_limit(tmp_path: Path) -> None:
    config = KubeletConfiguration(qos_reserved={"memory": "50%"})
    settings = CgroupSettings.from_config(config)  # QOSReserved off (upstream's default)
    assert settings.qos_reserved_memory is None
    assert CgroupSettings.from_config(config, qos_reserved=True).qos_reserved_memory == 50
    tree = Tree(tmp_path, 1, settings)
    await tree.manager.start(CAPACITY)
    await tree.manager.ensure_pod(GUARANTEED, "Guaranteed", [(GUARANTEED, "Guaranteed")])
    assert not tree.dir("/kubepods/burstable", "memory").joinpath("memory.limit_in_bytes").exists()


def test_qos_reserved_is_parsed_as_upstream() -> None:
    def problems(value: dict[str, str]) -> list[tuple[str, str]]:
        return validate(KubeletConfiguration(qos_reserved=value))

    assert problems({"memory": "100%"}) == []
    assert problems({"cpu": "10%"}) == [("qosReserved[cpu]", 'cannot reserve "cpu" resource')]
    assert problems({"memory": "50"}) == [("qosReserved[memory]", "percentage expected, got '50'")]
    assert problems({"memory": "half%"}) == [
        ("qosReserved[memory]", "invalid number in percentage 'half%'")
    ]
    assert problems({"memory": "101%"}) == [
        ("qosReserved[memory]", "percentage must be between 0 and 100")
    ]
