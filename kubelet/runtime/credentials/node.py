"""Node-wide registry credentials: the docker config files upstream's kubelet reads.

Upstream (pkg/credentialprovider/default_provider.go and config.go) keeps a keyring
from the first readable file of: ``config.json`` in the kubelet's root directory, the
working directory, ``$HOME/.docker`` and ``/.docker``; failing those, ``.dockercfg`` in
the root directory, the working directory, ``$HOME`` and ``/``. The file is read again
at most every 5 minutes. Its credentials come after the pod's own, belong to no Secret,
and an image pulled with them counts as open to every pod on the node.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from .dockercfg import DockerConfigEntry, DockerConfigError, parse_dockercfg, parse_dockerconfigjson
from .keyring import Keyring
from .secrets import PullCredential, credential_hash

__all__ = ["CACHE_LIFETIME", "NodeCredentials", "search_paths"]

log = logging.getLogger(__name__)

CACHE_LIFETIME = 300.0


def search_paths(root_dir: str) -> list[tuple[Path, bool]]:
    """(file, is config.json) in upstream's order."""
    home = Path(os.path.expanduser("~"))
    cwd = Path(os.getcwd())
    json_dirs = [Path(root_dir), cwd, home / ".docker", Path("/.docker")]
    cfg_dirs = [Path(root_dir), cwd, home, Path("/")]
    return [(d / "config.json", True) for d in json_dirs] + [
        (d / ".dockercfg", False) for d in cfg_dirs
    ]


class NodeCredentials:
    """The node's keyring, read from disk at most every ``lifetime`` seconds."""

    def __init__(
        self, root_dir: str, clock: Callable[[], float], lifetime: float = CACHE_LIFETIME
    ) -> None:
        self._root_dir = root_dir
        self._clock = clock
        self._lifetime = lifetime
        self._keyring: Keyring[PullCredential] = Keyring()
        self._read_at: float | None = None

    def keyring(self) -> Keyring[PullCredential]:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self._lifetime:
            self._keyring = self._read()
            self._read_at = now
        return self._keyring

    def _read(self) -> Keyring[PullCredential]:
        keyring: Keyring[PullCredential] = Keyring()
        for path, is_json in search_paths(self._root_dir):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            try:
                entries = parse_dockerconfigjson(data) if is_json else parse_dockercfg(data)
            except DockerConfigError as exc:
                log.debug("docker config %s cannot be read: %s", path, exc)
                continue
            keyring.add(((key, _node_credential(e)) for key, e in entries), origin=str(path))
            return keyring
        return keyring


def _node_credential(entry: DockerConfigEntry) -> PullCredential:
    return PullCredential(entry.username, entry.password, None, credential_hash(entry))
