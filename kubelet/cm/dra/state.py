"""What the DRA manager knows of the claims it prepared, and its checkpoint.

One ``ClaimInfo`` per ResourceClaim prepared (or being prepared) on this node: the pods
that use it, and per driver the devices it returned with their CDI IDs. The set is
checkpointed in ``<root-dir>/dra_manager_state`` in upstream's format, so a restarted
kubelet (ours or upstream's) knows which claims are prepared and for whom::

    {"Data": "<json>", "Checksum": <crc32 of Data>}

with Data ``{"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
"Entries": [{"ClaimUID", "ClaimName", "Namespace", "PodUIDs": {uid: {}},
"DriverState": {driver: {"Devices": [{"PoolName", "DeviceName", "RequestNames",
"CDIDeviceIDs"}]}}}]}``. Each entry also carries ``"Prepared"`` (a field upstream's
reader ignores): an entry written before the drivers answered is not prepared, so a
kubelet that died mid-prepare prepares it again rather than hand out no devices.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kubelet.atomicfile import replace_file
from kubelet.boundedio import InputRefused, loads_json, read_checkpoint_file

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "dra_manager_state"
CHECKPOINT_KIND = "DRACheckpoint"
CHECKPOINT_API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024


@attrs.frozen
class Device:
    """One device a driver prepared for a claim; no ``request_names``: every request."""

    pool_name: str
    device_name: str
    request_names: tuple[str, ...] = ()
    cdi_device_ids: tuple[str, ...] = ()

    def serves(self, request: str) -> bool:
        """Whether the device belongs to ``request`` ("" or a ``request/sub`` name)."""
        if not request or not self.request_names:
            return True
        return any(n == request or n.split("/", 1)[0] == request for n in self.request_names)


@attrs.define
class ClaimInfo:
    """A ResourceClaim on this node: who uses it and what its drivers returned."""

    claim_uid: str
    claim_name: str
    namespace: str
    drivers: dict[str, list[Device]]
    """driver → its devices (a driver with none still needs its unprepare)"""
    pod_uids: set[str] = attrs.field(factory=set)
    prepared: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.claim_name

    def cdi_devices(self, request: str) -> list[str]:
        """The CDI IDs of the devices serving ``request`` ("": all), in driver order."""
        return [
            cdi
            for devices in self.drivers.values()
            for device in devices
            if device.serves(request)
            for cdi in device.cdi_device_ids
        ]


def _entry(info: ClaimInfo) -> dict[str, Any]:
    return {
        "ClaimUID": info.claim_uid,
        "ClaimName": info.claim_name,
        "Namespace": info.namespace,
        "PodUIDs": {uid: {} for uid in sorted(info.pod_uids)},
        "DriverState": {
            driver: {
                "Devices": [
                    {
                        "PoolName": d.pool_name,
                        "DeviceName": d.device_name,
                        "RequestNames": list(d.request_names) or None,
                        "CDIDeviceIDs": list(d.cdi_device_ids) or None,
                    }
                    for d in devices
                ]
                or None
            }
            for driver, devices in info.drivers.items()
        },
        "Prepared": info.prepared,
    }


def encode(infos: Iterable[ClaimInfo]) -> bytes:
    """The checkpoint file's bytes."""
    data = json.dumps(
        {
            "kind": CHECKPOINT_KIND,
            "apiVersion": CHECKPOINT_API_VERSION,
            "Entries": [_entry(i) for i in infos],
        },
        separators=(",", ":"),
    )
    checksum = zlib.crc32(data.encode())
    return json.dumps({"Data": data, "Checksum": checksum}, separators=(",", ":")).encode()


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _device(raw: Any) -> Device:
    raw = raw if isinstance(raw, Mapping) else {}
    return Device(
        pool_name=str(raw.get("PoolName") or ""),
        device_name=str(raw.get("DeviceName") or ""),
        request_names=_strings(raw.get("RequestNames")),
        cdi_device_ids=_strings(raw.get("CDIDeviceIDs")),
    )


def _info(raw: Any) -> ClaimInfo:
    if not isinstance(raw, Mapping):
        raise InputRefused("a checkpoint entry is not an object")
    drivers_raw = raw.get("DriverState") or {}
    pods = raw.get("PodUIDs") or {}
    return ClaimInfo(
        claim_uid=str(raw.get("ClaimUID") or ""),
        claim_name=str(raw.get("ClaimName") or ""),
        namespace=str(raw.get("Namespace") or ""),
        drivers={
            str(driver): [_device(d) for d in ((state or {}).get("Devices") or [])]
            for driver, state in (drivers_raw.items() if isinstance(drivers_raw, Mapping) else ())
        },
        pod_uids={str(uid) for uid in pods} if isinstance(pods, Mapping | list) else set(),
        prepared=raw.get("Prepared") is True,
    )


def decode(blob: bytes) -> list[ClaimInfo]:
    """The claims of a checkpoint; ``InputRefused`` when it is corrupt."""
    outer = loads_json(blob, max_bytes=MAX_CHECKPOINT_BYTES)
    if not isinstance(outer, Mapping) or not isinstance(outer.get("Data"), str):
        raise InputRefused("not a DRA checkpoint")
    data: str = outer["Data"]
    if zlib.crc32(data.encode()) != outer.get("Checksum"):
        raise InputRefused("checkpoint is corrupted: checksum mismatch")
    inner = loads_json(data, max_bytes=MAX_CHECKPOINT_BYTES)
    if not isinstance(inner, Mapping) or inner.get("kind") != CHECKPOINT_KIND:
        raise InputRefused("not a DRA checkpoint")
    entries = inner.get("Entries") or []
    if not isinstance(entries, list):
        raise InputRefused("checkpoint entries are not a list")
    return [_info(e) for e in entries]


class Checkpoint:
    """The claim set on disk: read once at start, written after every change (small,
    local: written in place, atomically through a temporary file and a rename)."""

    def __init__(self, root_dir: str) -> None:
        self.path = os.path.join(root_dir, CHECKPOINT_FILE)

    def load(self) -> list[ClaimInfo]:
        """The checkpointed claims; none when missing or corrupt (logged). Blocking:
        the manager's ``restore`` calls it through a runner."""
        try:
            blob = read_checkpoint_file(self.path, MAX_CHECKPOINT_BYTES)
        except (OSError, InputRefused) as exc:
            log.error("DRA checkpoint %s not read: %s", self.path, exc)
            return []
        if blob is None:
            return []
        try:
            return decode(blob)
        except (InputRefused, ValueError) as exc:
            log.error("DRA checkpoint %s ignored: %s", self.path, exc)
            return []

    def save(self, infos: Iterable[ClaimInfo]) -> None:
        replace_file(self.path, encode(infos), mode=0o600)
