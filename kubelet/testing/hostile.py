"""Hostile inputs for the static pod sources: for tests, and scripts/hostile_sources.py.

Each one stopped an earlier version of the kubelet: a FIFO in the manifest directory (directly
or through a symlink) blocked the event loop in ``open()``; a manifest near the 10 MiB
limit made of tiny maps took 7–36 s and 1–2 GB to decode; a manifest server that
trickles its body, or never ends it, froze or flooded the URL source.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from kubelet.sources.limits import MAX_CONFIG_LENGTH

from .httpserver import HttpServer, Request, Response, Send

NEAR_LIMIT = MAX_CONFIG_LENGTH - 4096
"""A size just under the limit, so the size check alone lets the manifest through."""

_POD_HEAD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n"
    "  containers:\n  - name: c\n    image: busybox:1.36\n  affinity:\n    many:\n"
)


def many_maps_manifest(size: int = NEAR_LIMIT, *, name: str = "many-maps") -> bytes:
    """A Pod manifest of about ``size`` bytes, nearly all of it one-key maps (``- {a: 1}``),
    under a free-form field so that only their number is wrong with it."""
    head = _POD_HEAD.format(name=name).encode()
    item = b"    - {a: 1}\n"
    return head + item * max(0, (size - len(head)) // len(item))


def many_maps_json(size: int = NEAR_LIMIT, *, yaml_readable: bool = True) -> bytes:
    """The same as JSON. With ``yaml_readable`` False its first key is longer than the 1024
    characters LibYAML allows a key, so only the ``json`` fallback can read it."""
    key = "k" * 1100 if not yaml_readable else "many"
    head = (
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "many-maps-json"},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
            }
        ).encode()[:-1]
        + f', "{key}": ['.encode()
    )
    item = b"{},"
    count = max(1, (size - len(head) - 3) // len(item))
    return head + item * (count - 1) + b"{}]}"


def make_fifo(path: str | os.PathLike[str]) -> Path:
    """A FIFO at ``path``: opening it for reading blocks until a writer comes."""
    os.mkfifo(path)
    return Path(path)


def hostile_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Put every hostile file into ``directory`` (a static pod path); return their paths.

    ``fifo.yaml`` (a FIFO), ``fifo-link.yaml`` (a symlink to a FIFO kept beside the
    directory, in ``<directory>.fifo``), ``many-maps.yaml`` (the near-10 MiB manifest).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = Path(f"{directory}.fifo")
    if not target.exists():
        make_fifo(target)
    made = [make_fifo(directory / "fifo.yaml"), directory / "fifo-link.yaml"]
    made[1].symlink_to(target)
    big = directory / "many-maps.yaml"
    big.write_bytes(many_maps_manifest())
    made.append(big)
    return made


@attrs.define
class ManifestServer:
    """A manifest URL that misbehaves on demand: ``mode`` is read at each request.

    ``ok``: ``body`` at once. ``trickle``: one byte every ``interval`` seconds, without
    end. ``endless``: 64 KiB chunks as fast as the client reads, without end.
    """

    mode: str = "ok"
    body: bytes = b""
    interval: float = 1.0
    requests: int = 0

    async def handle(self, request: Request) -> Response:
        self.requests += 1
        if self.mode == "trickle":
            return Response(200, content_type="application/yaml", stream=self._trickle)
        if self.mode == "endless":
            return Response(200, content_type="application/yaml", stream=_endless)
        return Response(200, self.body, content_type="application/yaml")

    async def _trickle(self, send: Send) -> None:
        while True:
            await send(b"#")
            await trio.sleep(self.interval)


async def _endless(send: Send) -> None:
    chunk = b"#" * 65536
    while True:
        await send(chunk)


async def serve_manifests(
    server: ManifestServer, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``server`` on an ephemeral loopback port until cancelled; started with its URL."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    handler: Callable[[Request], Awaitable[Response]] = server.handle
    async with trio.open_nursery() as nursery:
        nursery.start_soon(HttpServer(handler).serve, listeners)
        task_status.started(f"http://127.0.0.1:{port}/pods")
