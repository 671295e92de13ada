"""Each pod's allocation on disk: ``<root-dir>/allocated_pods_state``, upstream's checkpoint.

Upstream (1.33+, ``allocation/state``) keeps what every pod was admitted (or resized)
with in a checkpoint file of the kubelet's root directory: ``{"data": <JSON text>,
"checksum": <uint>}``, the data ``{"entries": {<uid>: {"ContainerResources": {<name>:
<ResourceRequirements>}, "PodLevelResources": <ResourceRequirements> or null}}}`` (Go's
field names: upstream's struct has no JSON tags, and its reader matches keys in any
case). The checksum is upstream's (``goformat.spew_checksum``) of the data string,
``(string)`` and the text unquoted; it reproduces the checksums of upstream's own test
files, so either kubelet reads the other's file (a newer upstream kubelet migrates this
unversioned form). A file that does not
decode or whose checksum does not match is ignored (and said so): the allocations then
come from the runtime's record, as before the file existed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from kubelet.api import Quantity, ResourceRequirements
from kubelet.atomicfile import replace_file
from kubelet.boundedio import InputRefused, RunSync, loads_json, read_regular_file
from kubelet.decisions import Allocation
from kubelet.goformat import go_json, spew_checksum

__all__ = [
    "CHECKPOINT_FILE",
    "AllocationCheckpoint",
    "checksum",
    "decode_checkpoint",
    "encode_checkpoint",
]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "allocated_pods_state"
MAX_BYTES = 16 << 20
"""The most read back: some 20,000 pods' worth of entries."""


def checksum(data: str) -> int:
    """Upstream's ``checksum.New(data)`` for the data string: go-spew prints a string
    with its type and unquoted, ``(string){...}``."""
    return spew_checksum("(string)" + data)


def _requirements(resources: ResourceRequirements | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if resources is not None and resources.limits:
        body["limits"] = dict(resources.limits)
    if resources is not None and resources.requests:
        body["requests"] = dict(resources.requests)
    return body


def _entry(allocation: Allocation) -> dict[str, Any]:
    """Upstream's ``PodResourceInfo``: Go field names (no JSON tags), nil as null."""
    return {
        "ContainerResources": {name: _requirements(r) for name, r in allocation.containers.items()},
        "PodLevelResources": None if allocation.pod is None else _requirements(allocation.pod),
    }


def _field(entry: dict[str, Any], name: str) -> Any:
    """A field as Go's ``json.Unmarshal`` finds it: the exact key, else any case of it."""
    if name in entry:
        return entry[name]
    folded = name.casefold()
    return next((v for k, v in entry.items() if k.casefold() == folded), None)


def encode_checkpoint(entries: Mapping[str, Allocation]) -> bytes:
    """The file's bytes for ``entries`` (uid → allocation), as Go's ``json.Marshal``."""
    data: dict[str, Any] = {}
    if entries:
        data["entries"] = {uid: _entry(a) for uid, a in entries.items()}
    text = go_json(data, sort_keys=True)
    return go_json({"data": text, "checksum": checksum(text)}).encode()


def _decode_requirements(body: Any) -> ResourceRequirements:
    if not isinstance(body, dict):
        raise ValueError("resources: not an object")
    parts: dict[str, dict[str, Quantity]] = {}
    for key in ("limits", "requests"):
        values = body.get(key) or {}
        if not isinstance(values, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in values.items()
        ):
            raise ValueError(f"resources: {key} is not a map of quantities")
        parts[key] = {k: Quantity(v) for k, v in values.items()}
    return ResourceRequirements(limits=parts["limits"], requests=parts["requests"])


def decode_checkpoint(blob: bytes) -> dict[str, Allocation]:
    """The entries of a checkpoint file; ``ValueError`` when it is not one or its
    checksum does not match."""
    outer = loads_json(blob, max_bytes=MAX_BYTES)
    if not isinstance(outer, dict) or not isinstance(outer.get("data"), str):
        raise ValueError("not an allocation checkpoint")
    text = outer["data"]
    if outer.get("checksum") != checksum(text):
        raise ValueError("checksum mismatch")
    data = loads_json(text, max_bytes=MAX_BYTES)
    entries = data.get("entries") or {} if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ValueError("entries: not an object")
    out: dict[str, Allocation] = {}
    for uid, entry in entries.items():
        if not isinstance(entry, dict):
            raise ValueError(f"entry {uid}: not an object")
        containers = _field(entry, "ContainerResources") or {}
        if not isinstance(containers, dict):
            raise ValueError(f"entry {uid}: ContainerResources is not an object")
        pod_level = _field(entry, "PodLevelResources")
        out[str(uid)] = Allocation(
            {str(name): _decode_requirements(r) for name, r in containers.items()},
            None if pod_level is None else _decode_requirements(pod_level),
        )
    return out


class AllocationCheckpoint:
    """The file under the kubelet's root directory ("" root: none, nothing is kept)."""

    def __init__(self, root_dir: str) -> None:
        self.path = os.path.join(root_dir, CHECKPOINT_FILE) if root_dir else ""
        self._one_at_a_time = threading.Lock()
        """One write at a time: a thread its cancelled task left behind may still be
        writing when the next write begins."""
        self._landed = 0
        """The newest ``version`` written: an older one arriving later is dropped."""

    async def load(self, run: RunSync) -> dict[str, Allocation]:
        """What the file holds (read off the loop); empty when there is none or it is
        damaged."""
        if not self.path:
            return {}

        def read() -> dict[str, Allocation]:
            try:
                return decode_checkpoint(read_regular_file(self.path, MAX_BYTES))
            except FileNotFoundError:
                return {}
            except (OSError, InputRefused, ValueError) as exc:
                log.warning("allocation checkpoint %s ignored: %s", self.path, exc)
                return {}

        return await run(read)

    def store(self, entries: Mapping[str, Allocation], version: int | None = None) -> None:
        """Write ``entries`` in place of the file (a whole new file, renamed over it).
        A few hundred bytes per pod: written where the allocation changes, as upstream.
        ``version`` orders the writes: one not newer than the last written is dropped (an
        abandoned thread's older state never lands over a newer one)."""
        if not self.path:
            return
        data = encode_checkpoint(entries)
        with self._one_at_a_time:
            if version is not None:
                if version <= self._landed:
                    return
                self._landed = version
            try:
                replace_file(self.path, data, mode=0o600)
            except OSError as exc:
                log.error("allocation checkpoint %s not written: %s", self.path, exc)
