"""User namespaces for pods with ``hostUsers: false`` (upstream's pkg/kubelet/userns).

``decide`` is the pure part: whether a pod gets the host's user namespace (explicitly
NODE, as upstream sends it whenever the feature is on), its own one, or an error —
a runtime handler that does not report user-namespace support never gets such a pod,
since a runtime that ignored the option would run it in the host's namespace.

``UserNamespaces`` hands out the ID ranges: 65536 IDs per pod, from the kubelet's range
(upstream's default with no ``kubelet`` entry in /etc/subuid: 2^31 IDs from 2^31), the
pod's uid and gid 0 mapped to the first host ID. The range is kept in the pod's
directory (``<root-dir>/pods/<uid>/userns``, upstream's file and JSON), so a restarted
kubelet gives a running pod the same range and never hands it to another pod.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping

import attrs

from kubelet.api import Pod
from kubelet.config import USER_NAMESPACES_SUPPORT
from kubelet.cri import api

from .runtimeinfo import HandlerFeatures

__all__ = [
    "DEFAULT_FIRST_ID",
    "DEFAULT_LENGTH",
    "USERNS_LENGTH",
    "UserNamespaces",
    "UsernsError",
    "decide",
]

log = logging.getLogger(__name__)

USERNS_LENGTH = 1 << 16
DEFAULT_FIRST_ID = 1 << 31
DEFAULT_LENGTH = (1 << 32) - DEFAULT_FIRST_ID
MAPPINGS_FILE = "userns"


class UsernsError(Exception):
    """The pod's user namespace cannot be set up (its sandbox is not created)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@attrs.frozen
class Decision:
    """``own``: the pod needs its own user namespace; else ``mode`` (NODE) or nothing."""

    own: bool = False
    mode: api.NamespaceMode | None = None


def decide(
    pod: Pod,
    runtime_handler: str,
    handlers: Mapping[str, HandlerFeatures],
    *,
    feature_enabled: bool = True,
) -> Decision:
    """What user namespace ``pod`` runs in, or ``UsernsError`` (upstream's messages)."""
    spec = pod.spec
    if spec.host_users is None:
        return Decision(mode=api.NODE) if feature_enabled else Decision()
    if not feature_enabled:
        raise UsernsError(
            f'the feature gate "{USER_NAMESPACES_SUPPORT}" is disabled: can\'t set spec.HostUsers'
        )
    if spec.host_users:
        return Decision(mode=api.NODE)
    for field, shared in (
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ):
        if shared:  # the API server refuses these; a static pod is checked here
            raise UsernsError(f"spec.{field}: Forbidden: when `hostUsers` is false")
    features = handlers.get(runtime_handler)
    if features is None or not features.user_namespaces:
        # a handler the runtime does not report is treated as one without support: a
        # runtime that does not know the option would run the pod as root on the host
        raise UsernsError(
            f'RuntimeClass handler "{runtime_handler}" does not support user namespaces'
        )
    return Decision(own=True)


def _mappings_json(first_id: int, length: int) -> dict[str, list[dict[str, int]]]:
    one = [{"hostId": first_id, "containerId": 0, "length": length}]
    return {"uidMappings": one, "gidMappings": [dict(m) for m in one]}


def _parse(content: bytes) -> int:
    """The first host ID of a mappings file we wrote; ``ValueError`` for anything else."""
    data = json.loads(content)
    if not isinstance(data, dict):
        raise ValueError("invalid user namespace configuration: not an object")
    uids, gids = data.get("uidMappings") or [], data.get("gidMappings") or []
    if len(uids) != 1 or len(gids) != 1 or uids[0] != gids[0]:
        raise ValueError("invalid user namespace configuration: one identical uid/gid mapping")
    mapping = uids[0]
    if mapping.get("containerId") != 0:
        raise ValueError("invalid user namespace configuration: UID 0 must be mapped")
    if mapping.get("length") != USERNS_LENGTH:
        raise ValueError(f"wrong user namespace length {mapping.get('length')}")
    first = mapping.get("hostId")
    if not isinstance(first, int) or first % USERNS_LENGTH:
        raise ValueError(f"wrong user namespace offset specified {first}")
    return first


class UserNamespaces:
    """ID ranges for pods with their own user namespace, remembered in their directories."""

    def __init__(
        self,
        pod_dir: Callable[[str], str],
        pod_uids_on_disk: Callable[[], Iterable[str]],
        *,
        first_id: int = DEFAULT_FIRST_ID,
        length: int = DEFAULT_LENGTH,
    ) -> None:
        if first_id % USERNS_LENGTH or first_id < USERNS_LENGTH or length % USERNS_LENGTH:
            raise ValueError(f"user namespace range {first_id}+{length} is not usable")
        self._pod_dir = pod_dir
        self._on_disk = pod_uids_on_disk
        self._first_block = first_id // USERNS_LENGTH
        self._blocks = length // USERNS_LENGTH
        self._by_pod: dict[str, int] = {}
        self._used: set[int] = set()
        self._loaded = False

    def _load(self) -> None:
        """Ranges of pods already on disk (a restarted kubelet), read once."""
        if self._loaded:
            return
        self._loaded = True
        for uid in self._on_disk():
            try:
                self._read(uid)
            except (OSError, ValueError) as exc:
                log.warning("pod %s: unusable user namespace file: %s", uid, exc)

    def _read(self, uid: str) -> int | None:
        path = os.path.join(self._pod_dir(uid), MAPPINGS_FILE)
        try:
            with open(path, "rb") as fh:
                content = fh.read()
        except FileNotFoundError:
            return None
        first = _parse(content)
        block = first // USERNS_LENGTH - self._first_block
        if not 0 <= block < self._blocks:
            raise ValueError(f"id {first} is out of range")
        owner = next((p for p, b in self._by_pod.items() if b == block and p != uid), None)
        if owner is not None:
            raise ValueError(f"range picked for pod {uid!r} already taken")
        self._by_pod[uid] = block
        self._used.add(block)
        return first

    def mappings(self, pod: Pod) -> api.UserNamespace:
        """The pod's own user namespace (mode POD), allocated on first use."""
        self._load()
        uid = pod.uid
        if uid not in self._by_pod:
            try:
                known = self._read(uid)
            except (OSError, ValueError) as exc:
                raise UsernsError(f"invalid user namespace mappings file: {exc}") from exc
            if known is None:
                block = self._allocate(uid)
                try:
                    self._write(uid, (self._first_block + block) * USERNS_LENGTH)
                except OSError as exc:
                    self.release(uid)
                    raise UsernsError(f"create user namespace store: {exc}") from exc
        first = (self._first_block + self._by_pod[uid]) * USERNS_LENGTH
        ids = api.IDMapping(host_id=first, container_id=0, length=USERNS_LENGTH)
        return api.UserNamespace(mode=api.POD, uids=[ids], gids=[ids])

    def _allocate(self, uid: str) -> int:
        for block in range(self._blocks):
            if block not in self._used:
                self._used.add(block)
                self._by_pod[uid] = block
                return block
        raise UsernsError("could not find an empty slot to allocate a user namespace")

    def _write(self, uid: str, first: int) -> None:
        """Atomically and durably: a crash never leaves a half-written range behind."""
        directory = self._pod_dir(uid)
        os.makedirs(directory, exist_ok=True)
        data = json.dumps(_mappings_json(first, USERNS_LENGTH)).encode()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".userns.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, os.path.join(directory, MAPPINGS_FILE))
        except BaseException:
            os.unlink(tmp)
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def release(self, uid: str) -> None:
        """The pod is gone: its range may be handed out again."""
        block = self._by_pod.pop(uid, None)
        if block is not None:
            self._used.discard(block)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self._pod_dir(uid), MAPPINGS_FILE))

    def allocated(self) -> dict[str, int]:
        """pod uid → first host ID (for the debug console and tests)."""
        return {
            uid: (self._first_block + block) * USERNS_LENGTH for uid, block in self._by_pod.items()
        }
