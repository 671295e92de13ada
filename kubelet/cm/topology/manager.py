"""The topology manager: a resource manager that aligns the others on NUMA nodes.

At admission it asks every other resource manager (the hint providers) where it could
place each container's resources (``capabilities.HintProvider.topology_hints``, or
``pod_topology_hints`` with the ``pod`` scope), merges the hints under its policy
(``merge``) and either refuses the pod (``TopologyAffinityError``) or keeps the merged
hint as the container's affinity. The managers after it in the registry read that
affinity (``affinity``) when they allocate: the CPU manager takes its CPUs from the
affinity's NUMA nodes first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import trio

from kubelet.api import Pod
from kubelet.errors import ConfigError

from ..capabilities import Admits, Binds, HintProvider, ReleasesPod, ResourceManager
from ..hints import TopologyHint, TopologyHints
from ..parts import CmParts
from ..resources import Refusal
from .merge import NONE, POD_SCOPE, SINGLE_NUMA_NODE, NumaInfo, OptionError, PolicyOptions, merge
from .numa import read_numa_info

log = logging.getLogger(__name__)

TOPOLOGY_AFFINITY_ERROR = (
    "TopologyAffinityError",
    "Resources cannot be allocated with Topology locality",
)

Observe = Callable[[str, float], None]
"""a metric: ("requests" | "errors", 0), ("duration", milliseconds), or a container
aligned on one NUMA node ("aligned-<scope>", 1) or not ("unaligned-<scope>", 1)"""


class TopologyManager(ResourceManager, Admits, ReleasesPod, Binds):
    name = "topology"

    def __init__(
        self,
        policy: str,
        scope: str,
        numa: NumaInfo,
        options: PolicyOptions,
        observe: Observe | None = None,
    ) -> None:
        self.policy = policy
        self.scope = scope
        self.numa = numa
        self.options = options
        self.observe = observe or (lambda _kind, _value: None)
        self.providers: tuple[HintProvider, ...] = ()
        self.affinities: dict[str, dict[str, TopologyHint]] = {}
        """pod UID → container name → the merged hint"""

    def bind(self, peers: Sequence[ResourceManager]) -> None:
        self.providers = tuple(p for p in peers if p is not self and isinstance(p, HintProvider))

    def affinity(self, pod_uid: str, container: str) -> TopologyHint | None:
        """The container's merged hint (None: no alignment asked or none found)."""
        return self.affinities.get(pod_uid, {}).get(container)

    def admit(self, pod: Pod, others: Sequence[Pod]) -> Refusal | None:
        self.observe("requests", 0)
        start = time.monotonic()
        try:
            return self._admit(pod)
        finally:
            self.observe("duration", float(int((time.monotonic() - start) * 1000)))

    def _admit(self, pod: Pod) -> Refusal | None:
        uid = pod.metadata.uid
        if self.policy == NONE:
            return None
        containers = (*pod.spec.init_containers, *pod.spec.containers)
        if self.scope == POD_SCOPE:
            hint, admit = self._merge([p.pod_topology_hints(pod) for p in self.providers])
            found = {c.name: hint for c in containers}
        else:
            found = {}
            for c in containers:
                hint, admit = self._merge([p.topology_hints(pod, c) for p in self.providers])
                if not admit:
                    break
                found[c.name] = hint
        guaranteed = self.policy == SINGLE_NUMA_NODE  # upstream's IsAlignmentGuaranteed
        if not admit:
            if guaranteed:
                self.observe(f"unaligned-{self.scope}", 1)
            self.observe("errors", 0)
            log.info("Topology manager refused pod %s: no placement with NUMA locality", uid)
            return TOPOLOGY_AFFINITY_ERROR
        self.affinities[uid] = found
        if guaranteed:
            # one count per container with the container scope, one per pod with the pod's
            for _ in range(len(found) if self.scope != POD_SCOPE else 1):
                self.observe(f"aligned-{self.scope}", 1)
        return None

    def _merge(self, hints: list[TopologyHints]) -> tuple[TopologyHint, bool]:
        hint, admit = merge(self.policy, self.numa, self.options, hints)
        log.debug("Topology manager best hint %s (admit: %s)", hint, admit)
        return hint, admit

    async def release_pod(self, pod: Pod) -> None:
        self.affinities.pop(pod.metadata.uid, None)


async def start_topology_manager(parts: CmParts, nursery: trio.Nursery) -> ResourceManager:
    """The topology manager of ``topologyManagerPolicy`` and ``topologyManagerScope``."""
    cfg = parts.options.config
    policy, scope = cfg.topology_manager_policy, cfg.topology_manager_scope
    try:
        options = PolicyOptions.parse(cfg.topology_manager_policy_options)
    except OptionError as exc:
        raise ConfigError.single("", "topologyManagerPolicyOptions", str(exc)) from None
    numa = NumaInfo(nodes=(0,))
    if policy != NONE:
        numa = await parts.host.io(lambda: read_numa_info(parts.sys_root, options))
        if len(numa.nodes) > options.max_numa_nodes:
            raise ConfigError.single(
                "",
                "",
                f"unsupported on machines with more than {options.max_numa_nodes} NUMA Nodes",
            )
        log.info("Topology manager: policy %s, scope %s, NUMA nodes %s", policy, scope, numa.nodes)
    metrics = parts.metrics
    return TopologyManager(
        policy,
        scope,
        numa,
        options,
        observe=metrics.topology_admission if metrics is not None else None,
    )
