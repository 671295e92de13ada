"""The container hash: how a kubelet tells whether a running container still matches its spec.

It is written into the CRI annotation ``io.kubernetes.container.hash`` and compared on
every sync; a mismatch restarts the container. It must equal upstream's value bit for
bit, or every container adopted from (or handed to) an upstream kubelet restarts.

Upstream (1.31+, ``HashContainer``) hashes only the name and image: FNV-32a over the
spew ``%#v`` rendering of the bytes ``json.Marshal`` gives for the map
``{"image": ..., "name": ...}``. Spew renders a byte slice as ``([]uint8)[`` + the
bytes in decimal separated by spaces + ``]``; for name "foo" and image "busybox" the
hashed text is ``([]uint8)[123 34 105 109 ...]`` where the JSON bytes are
``{"image":"busybox","name":"foo"}``. The annotation holds the hash in lowercase hex
without padding (``strconv.FormatUint(h, 16)``).
"""

from __future__ import annotations

import functools

from kubelet.api import Container
from kubelet.goformat import go_json, spew_checksum

__all__ = ["go_json_string_map", "hash_container", "hash_container_int"]


def go_json_string_map(values: dict[str, str]) -> bytes:
    """The bytes Go's ``json.Marshal`` writes for a ``map[string]string`` (sorted keys)."""
    return go_json(values, sort_keys=True).encode("utf-8", errors="replace")


def hash_container_int(container: Container) -> int:
    """Upstream's ``HashContainer`` value as an integer."""
    return _hash_name_image(container.name, container.image)


@functools.lru_cache(maxsize=4096)
def _hash_name_image(name: str, image: str) -> int:
    """Remembered: about 20 µs of pure-Python hashing, asked for at every sync of every
    container, and a node's containers share few (name, image) pairs."""
    data = go_json_string_map({"name": name, "image": image})
    rendered = "([]uint8)[" + " ".join(str(b) for b in data) + "]"
    return spew_checksum(rendered)


def hash_container(container: Container) -> str:
    """The hash as the CRI annotation carries it: lowercase hex, no padding."""
    return format(hash_container_int(container), "x")
