"""The topology manager's policies: merge the hint providers' hints into one hint and
say whether the pod may be admitted with it (upstream's ``topologymanager`` policies).

Every combination of one hint per resource is ANDed into a candidate; the best
candidate wins: a preferred one over a non-preferred one, then the narrowest (or, with
``prefer-closest-numa-nodes``, the one whose nodes are closest together). Among
non-preferred candidates the one whose width is nearest to (not above) the widest
narrowest hint of any resource wins. ``best-effort`` admits whatever wins,
``restricted`` only a preferred hint, ``single-numa-node`` only a preferred hint on one
node (hints on several nodes are dropped first). Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import attrs

from ..hints import TopologyHint, TopologyHints, is_narrower, mask_bits, mask_count, mask_of

NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = (
    "none",
    "best-effort",
    "restricted",
    "single-numa-node",
)
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)
CONTAINER_SCOPE, POD_SCOPE = "container", "pod"
PREFER_CLOSEST = "prefer-closest-numa-nodes"
MAX_ALLOWABLE = "max-allowable-numa-nodes"
DEFAULT_MAX_NUMA_NODES = 8


class OptionError(ValueError):
    pass


@attrs.frozen
class PolicyOptions:
    prefer_closest: bool = False
    max_numa_nodes: int = DEFAULT_MAX_NUMA_NODES

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> PolicyOptions:
        """``topologyManagerPolicyOptions``; ``OptionError`` with upstream's message."""
        out = cls()
        for name, value in options.items():
            if name == PREFER_CLOSEST:
                flag = _bool(value, name)
                out = attrs.evolve(out, prefer_closest=flag)
            elif name == MAX_ALLOWABLE:
                try:
                    count = int(value)
                except ValueError:
                    raise OptionError(f"bad value for option {name!r}: {value!r}") from None
                if count < DEFAULT_MAX_NUMA_NODES:
                    raise OptionError(
                        f"the minimum value of {MAX_ALLOWABLE!r} should not be less than "
                        f"{DEFAULT_MAX_NUMA_NODES}"
                    )
                out = attrs.evolve(out, max_numa_nodes=count)
            else:
                raise OptionError(f"unknown Topology Manager Policy option: {name!r}")
        return out


def _bool(value: str, name: str) -> bool:
    low = value.lower()
    if low in ("1", "t", "true"):
        return True
    if low in ("0", "f", "false"):
        return False
    raise OptionError(f"bad value for option {name!r}: {value!r}")


@attrs.frozen
class NumaInfo:
    """The machine's NUMA nodes and, for ``prefer-closest-numa-nodes``, their
    distances (node → node → distance, as /sys's ``nodeN/distance``)."""

    nodes: tuple[int, ...]
    distances: Mapping[int, Mapping[int, int]] = attrs.field(factory=dict)

    @property
    def default_mask(self) -> int:
        return mask_of(self.nodes)

    def average_distance(self, mask: int) -> float:
        bits = mask_bits(mask)
        if not bits:
            return 0.0
        total = sum(self.distances.get(a, {}).get(b, 0) for a in bits for b in bits)
        return total / (len(bits) * len(bits))

    def closest(self, a: int, b: int) -> int:
        if mask_count(a) != mask_count(b):
            return a if is_narrower(a, b) else b
        da, db = self.average_distance(a), self.average_distance(b)
        if da == db:
            return a if a < b else b
        return a if da < db else b


def provider_hints(all_hints: Sequence[TopologyHints]) -> list[list[TopologyHint]]:
    """One list of hints per resource (upstream's ``filterProvidersHints``): a provider
    without any is a preferred "anywhere", a resource without a preference too, a
    resource with no possible placement a non-preferred "anywhere"."""
    out: list[list[TopologyHint]] = []
    for hints in all_hints:
        if not hints:
            out.append([TopologyHint(None, True)])
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                out.append([TopologyHint(None, True)])
            elif not resource_hints:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(resource_hints))
    return out


def _single_numa(hints: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    return [
        [
            h
            for h in resource
            if h.preferred and (h.numa_affinity is None or mask_count(h.numa_affinity) == 1)
        ]
        for resource in hints
    ]


def _narrowest_count(hints: Sequence[TopologyHint]) -> int | None:
    masks = [h.numa_affinity for h in hints if h.numa_affinity is not None]
    if not masks:
        return None
    best = masks[0]
    for m in masks[1:]:
        if is_narrower(m, best):
            best = m
    return mask_count(best)


@attrs.frozen
class _Merger:
    numa: NumaInfo
    closest: bool
    best_non_preferred: int

    def fitter(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        a, b = current.numa_affinity or 0, candidate.numa_affinity or 0
        if a == b:
            return current
        best = self.numa.closest(a, b) if self.closest else (a if is_narrower(a, b) else b)
        return current if best == a else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        count = mask_count(candidate.numa_affinity or 0)
        if count == 0:
            return current
        if current is None:
            return candidate
        if current.preferred != candidate.preferred:
            return current if current.preferred else candidate
        if current.preferred:
            return self.fitter(current, candidate)
        have, best = mask_count(current.numa_affinity or 0), self.best_non_preferred
        if have > best:
            return self.fitter(current, candidate)
        if have == best:
            return self.fitter(current, candidate) if count == best else current
        if count > best:
            return current
        if count == best or count > have:
            return candidate
        if count < have:
            return current
        return self.fitter(current, candidate)


def _permutation(default: int, permutation: Sequence[TopologyHint]) -> TopologyHint:
    """The AND of one hint per resource; preferred when all are and agree."""
    preferred, merged, first = True, default, None
    for hint in permutation:
        if hint.numa_affinity is not None:
            first = hint.numa_affinity if first is None else first
            merged &= hint.numa_affinity
            if hint.numa_affinity != first:
                preferred = False
        if not hint.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


def merge(
    policy: str, numa: NumaInfo, options: PolicyOptions, all_hints: Sequence[TopologyHints]
) -> tuple[TopologyHint, bool]:
    """The best hint for the providers' hints under ``policy``, and whether to admit."""
    if policy == NONE:
        return TopologyHint(None, True), True
    hints = provider_hints(all_hints)
    if policy == SINGLE_NUMA_NODE:
        hints = _single_numa(hints)
    counts = [c for c in (_narrowest_count(r) for r in hints) if c is not None]
    merger = _Merger(
        numa, options.prefer_closest and policy != SINGLE_NUMA_NODE, max(counts, default=0)
    )
    best: TopologyHint | None = None
    for permutation in itertools.product(*hints):
        best = merger.compare(best, _permutation(numa.default_mask, permutation))
    hint = best or TopologyHint(numa.default_mask, False)
    if policy == SINGLE_NUMA_NODE and hint.numa_affinity == numa.default_mask:
        hint = TopologyHint(None, hint.preferred)
    if policy == BEST_EFFORT:
        return hint, True
    return hint, hint.preferred
