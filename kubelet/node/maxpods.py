"""How many pods the node takes: ``maxPods``, or fewer with ``podsPerCore`` (upstream's
MachineInfo setter: min(podsPerCore × cores, maxPods) when podsPerCore is positive). The
figure is the Node's ``pods`` capacity and allocatable, which admission counts against
(``OutOfpods``)."""

from __future__ import annotations

from kubelet.config import KubeletConfiguration

__all__ = ["max_pods"]


def max_pods(config: KubeletConfiguration, num_cores: int) -> int:
    if config.pods_per_core > 0:
        return min(config.pods_per_core * num_cores, config.max_pods)
    return config.max_pods
