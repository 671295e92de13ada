"""The device manager's checkpoint, ``<root-dir>/device-plugins/kubelet_internal_checkpoint``,
in upstream's JSON format so either kubelet can read the other's file.

``{"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}}, "Checksum": N}``:
each entry is ``PodUID``, ``ContainerName``, ``ResourceName``, ``DeviceIDs`` (NUMA node →
device IDs, ``-1`` for devices without topology) and ``AllocResp`` (the plugin's
``ContainerAllocateResponse``, base64 as Go encodes bytes). ``Checksum`` is upstream's:
FNV-32a over the go-spew ``%#v`` rendering of ``Data`` as the Go struct
(``checkpoint.checkpointData``), which ``spew_data`` reproduces. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.goformat import spew_checksum

from .allocation import NO_TOPOLOGY, Granted, PodDevices

FILE_NAME = "kubelet_internal_checkpoint"


class CheckpointError(Exception):
    """The file is not a checkpoint, or its checksum does not match."""


@attrs.frozen
class Checkpoint:
    devices: PodDevices
    registered: Mapping[str, tuple[str, ...]]
    """resource → the device IDs its plugin last listed"""
    numa: Mapping[str, Mapping[str, tuple[int, ...]]] = attrs.field(factory=dict)
    """resource → device → its NUMA nodes (how entries' ``DeviceIDs`` are keyed)"""


def _spew_strings(values: list[str] | None) -> str:
    return "<nil>" if values is None else "[" + " ".join(values) + "]"


def _spew_entry(entry: Mapping[str, Any]) -> str:
    ids = entry.get("DeviceIDs")
    if ids is None:
        numa = "<nil>"
    else:
        keys = sorted(ids, key=int)
        numa = "map[" + " ".join(f"{int(k)}:{_spew_strings(ids[k])}" for k in keys) + "]"
    resp = entry.get("AllocResp")
    raw = "<nil>" if resp is None else "[" + " ".join(str(b) for b in _b64(resp)) + "]"
    return (
        f"{{PodUID:(string){entry.get('PodUID', '')} "
        f"ContainerName:(string){entry.get('ContainerName', '')} "
        f"ResourceName:(string){entry.get('ResourceName', '')} "
        f"DeviceIDs:(checkpoint.DevicesPerNUMA){numa} "
        f"AllocResp:([]uint8){raw}}}"
    )


def spew_data(data: Mapping[str, Any]) -> str:
    """``Data`` as go-spew prints the Go value with ``%#v`` (types on struct fields and
    the top value, sorted map keys, ``<nil>`` for nil slices and maps)."""
    entries = data.get("PodDeviceEntries")
    listed = "<nil>" if entries is None else "[" + " ".join(map(_spew_entry, entries)) + "]"
    registered = data.get("RegisteredDevices")
    if registered is None:
        devices = "<nil>"
    else:
        devices = (
            "map["
            + " ".join(f"{k}:{_spew_strings(registered[k])}" for k in sorted(registered))
            + "]"
        )
    return (
        f"(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){listed} "
        f"RegisteredDevices:(map[string][]string){devices}}}"
    )


def checksum(data: Mapping[str, Any]) -> int:
    return spew_checksum(spew_data(data))


def _b64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise CheckpointError("AllocResp is not base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError(f"AllocResp: {exc}") from exc


def _entries(cp: Checkpoint) -> list[dict[str, Any]] | None:
    out: list[dict[str, Any]] = []
    for uid in sorted(cp.devices):
        for container in sorted(cp.devices[uid]):
            for resource, granted in sorted(cp.devices[uid][container].items()):
                by_node: dict[int, list[str]] = {}
                topo = cp.numa.get(resource, {})
                for dev in granted.device_ids:
                    for node in topo.get(dev) or (NO_TOPOLOGY,):
                        by_node.setdefault(node, []).append(dev)
                resp = granted.response
                out.append(
                    {
                        "PodUID": uid,
                        "ContainerName": container,
                        "ResourceName": resource,
                        "DeviceIDs": {str(k): v for k, v in sorted(by_node.items())},
                        "AllocResp": None if resp is None else base64.b64encode(resp).decode(),
                    }
                )
    return out or None


def encode(cp: Checkpoint) -> bytes:
    data = {
        "PodDeviceEntries": _entries(cp),
        "RegisteredDevices": {k: list(v) for k, v in sorted(cp.registered.items())} or None,
    }
    doc = {"Data": data, "Checksum": checksum(data)}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def decode(doc: Any) -> Checkpoint:
    """A checkpoint from its parsed JSON; ``CheckpointError`` when malformed or its
    checksum is not upstream's for its data."""
    if not isinstance(doc, dict) or not isinstance(doc.get("Data"), dict):
        raise CheckpointError("no Data")
    data = doc["Data"]
    try:
        if checksum(data) != doc.get("Checksum"):
            raise CheckpointError("checkpoint is corrupted: checksum mismatch")
        devices: PodDevices = {}
        for e in data.get("PodDeviceEntries") or ():
            ids = [d for node in (e.get("DeviceIDs") or {}).values() for d in node or ()]
            resp = e.get("AllocResp")
            granted = Granted(
                tuple(dict.fromkeys(str(d) for d in ids)), None if resp is None else _b64(resp)
            )
            pod = devices.setdefault(str(e["PodUID"]), {})
            pod.setdefault(str(e["ContainerName"]), {})[str(e["ResourceName"])] = granted
        registered = {
            str(k): tuple(str(d) for d in v or ())
            for k, v in (data.get("RegisteredDevices") or {}).items()
        }
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CheckpointError(f"malformed checkpoint: {exc}") from exc
    return Checkpoint(devices, registered)
