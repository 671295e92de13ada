"""Pressure Stall Information (PSI) of cgroup v2's ``*.pressure`` files and /proc/pressure.

Each file holds up to two lines, ``some`` (at least one task stalled) and ``full`` (all
non-idle tasks stalled), each ``avg10=.. avg60=.. avg300=.. total=..``: the averages are
percentages of wall time over 10 s, 60 s and 5 min, ``total`` the cumulative stall time in
microseconds. Kernels before 5.13 write no ``full`` line for CPU; as cAdvisor, a missing line
reads as zeros. The summary (``psi``) and ``container_pressure_*_seconds_total`` report these.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["RESOURCES", "Pressure", "PsiData", "add_psi", "parse_pressure", "psi_json"]

RESOURCES = ("cpu", "memory", "io")
"""the resources the kernel reports pressure for, as the files are named"""


@attrs.frozen
class PsiData:
    total: int = 0
    """microseconds"""
    avg10: float = 0.0
    avg60: float = 0.0
    avg300: float = 0.0


@attrs.frozen
class Pressure:
    some: PsiData = PsiData()
    full: PsiData = PsiData()


def _line(fields: list[str]) -> PsiData | None:
    values: dict[str, str] = dict(f.partition("=")[::2] for f in fields)
    try:
        return PsiData(
            total=int(values["total"]),
            avg10=float(values["avg10"]),
            avg60=float(values["avg60"]),
            avg300=float(values["avg300"]),
        )
    except (KeyError, ValueError):
        return None


def parse_pressure(text: str | None) -> Pressure | None:
    """The ``some``/``full`` figures of one pressure file; None when it has no valid
    ``some`` line (no file, PSI disabled in the kernel, garbage)."""
    lines: dict[str, PsiData] = {}
    for line in (text or "").splitlines():
        kind, *fields = line.split() or [""]
        if kind in ("some", "full"):
            data = _line(fields)
            if data is not None:
                lines[kind] = data
    if "some" not in lines:
        return None
    return Pressure(some=lines["some"], full=lines.get("full", PsiData()))


def _data_json(data: PsiData) -> dict[str, Any]:
    return {"total": data.total, "avg10": data.avg10, "avg60": data.avg60, "avg300": data.avg300}


def psi_json(pressure: Pressure) -> dict[str, Any]:
    """The summary's ``psi`` object (stats/v1alpha1 PSIStats)."""
    return {"full": _data_json(pressure.full), "some": _data_json(pressure.some)}


def add_psi(row: dict[str, Any], pressure: dict[str, Pressure], when: str, io: bool) -> None:
    """Put a cgroup's PSI into a summary row: ``cpu.psi`` and ``memory.psi`` where the row
    has those figures, and (``io``) an ``io`` object carrying only ``psi``, as upstream."""
    for resource in ("cpu", "memory"):
        if resource in pressure and row.get(resource):
            row[resource]["psi"] = psi_json(pressure[resource])
    if io and "io" in pressure:
        row["io"] = {"time": when, "psi": psi_json(pressure["io"])}
