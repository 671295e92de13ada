"""FakeRegistry: an OCI distribution registry (pull side only) with basic authentication.

For end-to-end tests of image pull credentials against real containerd, which speaks
plain HTTP to a registry on 127.0.0.1. It serves what a pull reads: ``/v2/``,
manifests by tag or digest, blobs by digest. Every request needs ``Authorization:
Basic`` with one of the accepted username/password pairs; without it the answer is 401
with a ``WWW-Authenticate: Basic`` challenge, which makes containerd send the
credentials the kubelet gave it. ``requests`` records (method, path, user or None,
status) in arrival order.

``single_layer_image`` builds a small image (one gzipped layer, config, OCI manifest)
from files in memory, so a test needs no image archive::

    registry = FakeRegistry({"robot": "s3cret"})
    registry.add_image("e2e/app", "1", *single_layer_image({"/bin/busybox": (data, 0o755)}))
    async with registry.serve() as host:          # "127.0.0.1:<port>"
        ...pull f"{host}/e2e/app:1"...
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import platform
import tarfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import PurePosixPath

import attrs
import trio

from .httpserver import HttpServer, Request, Response

__all__ = ["FakeRegistry", "RegistryRequest", "single_layer_image"]

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def single_layer_image(
    files: Mapping[str, tuple[bytes, int]],
    symlinks: Mapping[str, str] | None = None,
    *,
    cmd: Sequence[str] = ("sh",),
) -> tuple[bytes, dict[str, bytes]]:
    """(manifest bytes, blobs by digest) of a one-layer linux image of this machine's
    architecture; ``files`` maps an absolute path to (content, mode)."""
    links = dict(symlinks or {})
    paths = sorted({*files, *links})
    dirs = sorted({str(parent) for p in paths for parent in PurePosixPath(p).parents} - {"/"})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            info = tarfile.TarInfo(d.strip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path in paths:
            info = tarfile.TarInfo(path.strip("/"))
            if path in links:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, links[path], 0o777
                tar.addfile(info)
            else:
                data, mode = files[path]
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
    layer_tar = raw.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": list(cmd)},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer_tar)]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": _digest(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    return manifest, {_digest(config): config, _digest(layer): layer}


@attrs.frozen
class RegistryRequest:
    method: str
    path: str
    user: str | None
    status: int


class FakeRegistry:
    """Serves images to clients that authenticate with one of ``users``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = dict(users)
        self.requests: list[RegistryRequest] = []
        self._manifests: dict[tuple[str, str], bytes] = {}
        self._blobs: dict[str, bytes] = {}

    def add_image(
        self, repository: str, tag: str, manifest: bytes, blobs: Mapping[str, bytes]
    ) -> str:
        """Publish ``repository:tag``; returns the manifest digest."""
        digest = _digest(manifest)
        self._manifests[(repository, tag)] = manifest
        self._manifests[(repository, digest)] = manifest
        self._blobs.update(blobs)
        return digest

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Listen on 127.0.0.1 (an ephemeral port) for the block; yields ``host:port``."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(HttpServer(self._handle).serve, listeners)
            try:
                yield f"127.0.0.1:{port}"
            finally:
                nursery.cancel_scope.cancel()

    async def _handle(self, request: Request) -> Response:
        user = self._user(request.headers.get("authorization", ""))
        response = self._answer(request, user)
        self.requests.append(RegistryRequest(request.method, request.path, user, response.status))
        return response

    def _user(self, header: str) -> str | None:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        return name if self.users.get(name) == password else None

    def _answer(self, request: Request, user: str | None) -> Response:
        if user is None:
            return Response(
                401,
                b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                headers=(("www-authenticate", 'Basic realm="fakeregistry"'),),
            )
        path = request.path
        if path in ("/v2", "/v2/"):
            return Response(200, b"{}")
        name, sep, ref = path.removeprefix("/v2/").rpartition("/manifests/")
        if sep:
            manifest = self._manifests.get((name, ref))
            if manifest is None:
                return Response(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            # no digest header on HEAD (its body is dropped): the client then GETs
            header: tuple[tuple[str, str], ...] = ()
            if request.method != "HEAD":
                header = (("docker-content-digest", _digest(manifest)),)
            return Response(200, manifest, content_type=MANIFEST_TYPE, headers=header)
        _, sep, blob = path.rpartition("/blobs/")
        if sep and blob in self._blobs:
            return Response(200, self._blobs[blob], content_type="application/octet-stream")
        return Response(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
