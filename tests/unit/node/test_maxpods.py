"""podsPerCore: the node's pod capacity is min(podsPerCore × cores, maxPods)."""

from __future__ import annotations

import pytest

from kubelet.config import KubeletConfiguration, validate
from kubelet.node import max_pods


@pytest.mark.parametrize(
    ("max_pods_", "per_core", "cores", "expected"),
    [(110, 0, 4, 110), (110, 10, 4, 40), (110, 100, 4, 110), (20, 3, 8, 20), (110, 1, 2, 2)],
)
def test_max_pods(max_pods_: int, per_core: int, cores: int, expected: int) -> None:
    config = KubeletConfiguration(max_pods=max_pods_, pods_per_core=per_core)
    assert max_pods(config, cores) == expected


def test_pods_per_core_must_not_be_negative() -> None:
    assert validate(KubeletConfiguration(pods_per_core=-1)) == [
        ("podsPerCore", "must not be negative, got -1")
    ]
