"""``reservedMemory`` checked against the node's reservation, as upstream does at start.

Per memory type, the NUMA nodes' reservations must add up to what node allocatable
takes away: ``systemReserved`` + ``kubeReserved`` (+ the hard ``memory.available``
eviction threshold for ``memory``). Pure; the messages are upstream's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Protocol

import attrs

from kubelet.api import Format, QuantityError, format_quantity, parse_quantity
from kubelet.eviction import parse_thresholds

from .policy import HUGEPAGES_PREFIX, MEMORY, is_memory_type


class ReservedMemoryError(Exception):
    pass


class MemoryReservation(Protocol):
    """One ``reservedMemory`` entry (``kubelet.config``'s)."""

    @property
    def numa_node(self) -> int: ...

    @property
    def limits(self) -> Mapping[str, str]: ...


@attrs.frozen
class Amount:
    """A sum of quantities and the format it prints in (that of its first non-zero
    part, as upstream's ``Quantity.Add`` keeps it)."""

    value: Fraction = Fraction(0)
    format: Format = Format.DECIMAL_SI

    def plus(self, value: Fraction, fmt: Format) -> Amount:
        return Amount(self.value + value, fmt if self.value == 0 else self.format)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def node_reservation(
    system: Mapping[str, str],
    kube: Mapping[str, str],
    eviction_hard: Mapping[str, str],
    memory_capacity: int,
) -> dict[str, Amount]:
    """What node allocatable takes away, per memory type (``GetNodeAllocatableReservation``)."""
    out: dict[str, Amount] = {}
    for reserved in (system, kube):
        for name, text in reserved.items():
            if is_memory_type(name):
                q = parse_quantity(text)
                out[name] = out.get(name, Amount()).plus(q.amount, q.format)
    for t in parse_thresholds(eviction_hard):
        if t.signal == "memory.available":
            if t.value.quantity is not None:
                fmt = parse_quantity(t.value.text).format if t.value.text else Format.BINARY_SI
                value = t.value.quantity
            else:
                fmt, value = Format.BINARY_SI, Fraction(t.value.amount(memory_capacity))
            out[MEMORY] = out.get(MEMORY, Amount()).plus(value, fmt)
    return {name: a for name, a in out.items() if a.value}


def check_reservations(reservations: Sequence[MemoryReservation]) -> None:
    """Upstream's configuration checks of ``reservedMemory``."""
    seen: set[tuple[int, str]] = set()
    for r in reservations:
        for name, text in r.limits.items():
            if not (name == MEMORY or name.startswith(HUGEPAGES_PREFIX)):
                raise ReservedMemoryError(
                    f'invalid configuration: the limit type "{name}" for NUMA node '
                    f"{r.numa_node} is not supported, only [memory hugepages-<HugePageSize>] "
                    "is accepted"
                )
            try:
                zero = parse_quantity(text).is_zero()
            except QuantityError as exc:
                raise ReservedMemoryError(f"invalid configuration: {exc}") from None
            if zero:
                raise ReservedMemoryError(
                    "invalid configuration: reserved memory may not be zero for NUMA node "
                    f'{r.numa_node} and resource "{name}"'
                )
            if (r.numa_node, name) in seen:
                raise ReservedMemoryError(
                    "invalid configuration: the reserved memory has a duplicate value for "
                    f'NUMA node {r.numa_node} and resource "{name}"'
                )
            seen.add((r.numa_node, name))


def system_reserved(
    reservations: Sequence[MemoryReservation],
    numa_nodes: Collection[int],
    reservation: Mapping[str, Amount],
) -> dict[int, dict[str, int]]:
    """NUMA node → memory type → bytes reserved, once the reservations are checked
    against the machine and the node's reservation (``getSystemReservedMemory``)."""
    totals: dict[str, Amount] = {}
    for r in reservations:
        if r.numa_node not in numa_nodes:
            raise ReservedMemoryError(
                f"the reserved memory configuration references a NUMA node {r.numa_node} "
                "that does not exist on this machine"
            )
        for name, text in r.limits.items():
            q = parse_quantity(text)
            previous = totals.get(name, Amount())
            totals[name] = Amount(previous.value + q.amount, q.format)
    for name in sorted({*totals, *(n for n in reservation if is_memory_type(n))}):
        want, have = reservation.get(name, Amount()), totals.get(name, Amount())
        if want.value != have.value:
            raise ReservedMemoryError(
                f'the total amount "{have}" of type "{name}" is not equal to the value '
                f'"{want}" determined by Node Allocatable feature'
            )
    out: dict[int, dict[str, int]] = {n: {} for n in numa_nodes}
    for r in reservations:
        for name, text in r.limits.items():
            out[r.numa_node][name] = int(parse_quantity(text).amount)
    return out


def reserved_memory_total(reserved: Iterable[Mapping[str, int]]) -> int:
    return sum(node.get(MEMORY, 0) for node in reserved)
