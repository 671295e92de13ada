"""What the kubelet notes of each claim volume it set up, in the pod's directory.

``<root>/pods/<uid>/plugins/kubelet~claims/<volume>.json``: the pod volume's name, its
claim (name, namespace), the PersistentVolume, the plugin and the host path the
containers got. The volume manager writes it when the volume is set up and reads it
back after a restart (the volume is reused as it is, without the API); the volume
figures read it to measure the volume and name its claim (``pvcRef``). It goes with the
pod directory.
"""

from __future__ import annotations

import json
import os

import attrs

from kubelet.boundedio import InputRefused, loads_json, read_regular_file

__all__ = ["CLAIMS_DIR", "ClaimRecord", "claim_record_path", "read_claim_records"]

CLAIMS_DIR = "kubelet~claims"
_MAX_RECORD = 64 * 1024


@attrs.frozen
class ClaimRecord:
    volume: str
    claim: str
    namespace: str
    pv: str
    plugin: str
    path: str
    read_only: bool = False

    def to_json(self) -> bytes:
        return json.dumps(attrs.asdict(self), sort_keys=True).encode()


def claim_record_path(pod_root: str, volume: str) -> str:
    return os.path.join(pod_root, "plugins", CLAIMS_DIR, f"{volume}.json")


def _record(path: str) -> ClaimRecord | None:
    try:
        raw = loads_json(read_regular_file(path, _MAX_RECORD), max_bytes=_MAX_RECORD)
        return ClaimRecord(
            **{f.name: raw[f.name] for f in attrs.fields(ClaimRecord) if f.name in raw}
        )
    except (OSError, InputRefused, TypeError, KeyError):
        return None


def read_claim_records(pod_root: str) -> dict[str, ClaimRecord]:
    """The records of one pod's directory, by volume name (unreadable ones left out)."""
    directory = os.path.join(pod_root, "plugins", CLAIMS_DIR)
    try:
        names = sorted(e.name for e in os.scandir(directory) if e.name.endswith(".json"))
    except OSError:
        return {}
    found = {}
    for name in names:
        record = _record(os.path.join(directory, name))
        if record is not None and isinstance(record.path, str):
            found[record.volume] = record
    return found
