#!/usr/bin/env python3
"""Write a one-layer OCI image (OCI image layout packed in a tar) from local files.

No registry and no third-party packages are needed. Output is byte-for-byte reproducible:
every tar entry has mtime 0 and root ownership, entries are sorted, gzip carries no
timestamp and JSON is written with sorted keys. Importing the same image twice is
therefore a no-op for containerd (`ctr -n k8s.io images import FILE`).

Layer contents (DEST is a path inside the image, e.g. "/bin/sh"):
  --file SRC:DEST[:MODE]     host file SRC copied to DEST (mode defaults to SRC's)
  --symlink DEST:TARGET      symbolic link
  --dir DEST[:MODE]          directory (default mode 0755)
  --text DEST:MODE:CONTENT   small file; backslash escapes such as \\n are expanded
Parent directories are created implicitly with mode 0755.

Each --name becomes an index entry annotated with io.containerd.image.name, so one archive
can carry several tags of the same manifest.

Example:
  oci_build.py --out pause.tar --name registry.k8s.io/pause:3.9 \\
      --file ./pause:/pause:0755 --entrypoint '["/pause"]' --user 65535:65535
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import tarfile
from collections.abc import Sequence
from typing import Any, Literal

EPOCH = "1970-01-01T00:00:00Z"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"

_GOARCH = {
    "x86_64": "amd64",
    "aarch64": "arm64",
    "armv7l": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}

Kind = Literal["dir", "file", "symlink"]


def oci_arch() -> str:
    """Host architecture in OCI (GOARCH) spelling."""
    machine = platform.machine()
    return _GOARCH.get(machine, machine)


def digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _tarinfo(name: str, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = mode
    return info


class Layer:
    """Filesystem entries of one layer, keyed by relative path (no leading slash)."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[Kind, bytes | str | None, int]] = {}

    def _put(self, dest: str, kind: Kind, payload: bytes | str | None, mode: int) -> None:
        path = dest.strip("/")
        if not path:
            raise ValueError(f"invalid image path {dest!r}")
        parts = path.split("/")
        for i in range(1, len(parts)):
            self.entries.setdefault("/".join(parts[:i]), ("dir", None, 0o755))
        self.entries[path] = (kind, payload, mode)

    def add_dir(self, dest: str, mode: int = 0o755) -> None:
        self._put(dest, "dir", None, mode)

    def add_file(self, dest: str, data: bytes, mode: int = 0o644) -> None:
        self._put(dest, "file", data, mode)

    def add_symlink(self, dest: str, target: str) -> None:
        self._put(dest, "symlink", target, 0o777)

    def tar(self) -> bytes:
        """Uncompressed layer tar (its digest is the image's diff_id)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for path in sorted(self.entries):
                kind, payload, mode = self.entries[path]
                info = _tarinfo(path, mode)
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tf.addfile(info)
                elif kind == "symlink":
                    assert isinstance(payload, str)
                    info.type = tarfile.SYMTYPE
                    info.linkname = payload
                    tf.addfile(info)
                else:
                    assert isinstance(payload, bytes)
                    info.size = len(payload)
                    tf.addfile(info, io.BytesIO(payload))
        return buf.getvalue()


def build_layer(args: argparse.Namespace) -> Layer:
    layer = Layer()
    for spec in args.dir:
        dest, _, mode = spec.partition(":")
        layer.add_dir(dest, int(mode, 8) if mode else 0o755)
    for spec in args.file:
        src, dest, *rest = spec.split(":")
        mode = int(rest[0], 8) if rest else os.stat(src).st_mode & 0o7777
        with open(src, "rb") as fh:
            layer.add_file(dest, fh.read(), mode)
    for spec in args.text:
        dest, mode, content = spec.split(":", 2)
        data = content.encode().decode("unicode_escape").encode()
        layer.add_file(dest, data, int(mode, 8))
    for spec in args.symlink:
        dest, target = spec.split(":", 1)
        layer.add_symlink(dest, target)
    return layer


def ref_tag(name: str) -> str:
    """Tag part of an image reference ("latest" when absent)."""
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"


def build_archive(args: argparse.Namespace) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Return the manifest blob and the (path, data) members of the OCI layout tar."""
    raw = build_layer(args).tar()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=6) as g:
        g.write(raw)
    layer_blob = gz.getvalue()

    run_config: dict[str, Any] = {
        "User": args.user,
        "Env": args.env or [DEFAULT_PATH],
        "WorkingDir": args.workdir,
    }
    if args.entrypoint:
        run_config["Entrypoint"] = json.loads(args.entrypoint)
    if args.cmd:
        run_config["Cmd"] = json.loads(args.cmd)
    config_blob = canonical_json(
        {
            "created": EPOCH,
            "architecture": oci_arch(),
            "os": "linux",
            "config": run_config,
            "rootfs": {"type": "layers", "diff_ids": [digest(raw)]},
            "history": [{"created": EPOCH, "created_by": "scripts/oci_build.py"}],
        }
    )
    manifest_blob = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": CONFIG_TYPE,
                "digest": digest(config_blob),
                "size": len(config_blob),
            },
            "layers": [
                {"mediaType": LAYER_TYPE, "digest": digest(layer_blob), "size": len(layer_blob)}
            ],
        }
    )
    index_blob = canonical_json(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": MANIFEST_TYPE,
                    "digest": digest(manifest_blob),
                    "size": len(manifest_blob),
                    "platform": {"architecture": oci_arch(), "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": ref_tag(name),
                    },
                }
                for name in args.name
            ],
        }
    )
    members = [
        ("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"})),
        ("index.json", index_blob),
    ]
    members += [
        ("blobs/sha256/" + digest(blob).removeprefix("sha256:"), blob)
        for blob in (layer_blob, config_blob, manifest_blob)
    ]
    return manifest_blob, members


def write_archive(out: str, members: list[tuple[str, bytes]]) -> None:
    """Write the layout tar atomically (temp file + rename)."""
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
        for d in ("blobs", "blobs/sha256"):
            info = _tarinfo(d, 0o755)
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
        for path, data in members:
            info = _tarinfo(path, 0o644)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    os.replace(tmp, out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="archive to write")
    ap.add_argument("--name", action="append", required=True, help="image reference (repeat)")
    ap.add_argument("--file", action="append", default=[], metavar="SRC:DEST[:MODE]")
    ap.add_argument("--symlink", action="append", default=[], metavar="DEST:TARGET")
    ap.add_argument("--dir", action="append", default=[], metavar="DEST[:MODE]")
    ap.add_argument("--text", action="append", default=[], metavar="DEST:MODE:CONTENT")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--entrypoint", help="JSON list")
    ap.add_argument("--cmd", help="JSON list")
    ap.add_argument("--user", default="")
    ap.add_argument("--workdir", default="/")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    manifest_blob, members = build_archive(args)
    write_archive(args.out, members)
    print(f"{args.out}: manifest {digest(manifest_blob)}, names {','.join(args.name)}")


if __name__ == "__main__":
    main()
