"""The committed stubs must be exactly what scripts/gen-proto.sh makes of proto/."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ("cri_api_pb2.py", "cri_api_pb2.pyi", "cri_api_grpc.py")


def test_committed_stubs_are_fresh(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen-proto.sh"), str(tmp_path)], check=True, env=env
    )
    stale = [
        name
        for name in GENERATED
        if (tmp_path / name).read_bytes() != (ROOT / "kubelet" / "cri" / name).read_bytes()
    ]
    assert not stale, f"stale CRI stubs {stale}: run scripts/gen-proto.sh and commit the result"
    fresh = tmp_path / "podresources"
    here = ROOT / "kubelet" / "server" / "podresources"
    names = ("podresources_api_pb2.py", "podresources_api_pb2.pyi", "podresources_api_grpc.py")
    stale = [n for n in names if (fresh / n).read_bytes() != (here / n).read_bytes()]
    assert not stale, f"stale pod-resources stubs {stale}: run scripts/gen-proto.sh"
    fresh, here = tmp_path / "dra", ROOT / "kubelet" / "cm" / "dra"
    names = tuple(
        f"dra_{v}_api_{kind}"
        for v in ("v1", "v1beta1", "health_v1alpha1")
        for kind in ("pb2.py", "pb2.pyi", "grpc.py")
    )
    stale = [n for n in names if (fresh / n).read_bytes() != (here / n).read_bytes()]
    assert not stale, f"stale DRA plugin stubs {stale}: run scripts/gen-proto.sh"
    fresh = tmp_path / "devices"
    here = ROOT / "kubelet" / "cm" / "devices"
    names = ("deviceplugin_api_pb2.py", "deviceplugin_api_pb2.pyi", "deviceplugin_api_grpc.py")
    stale = [n for n in names if (fresh / n).read_bytes() != (here / n).read_bytes()]
    assert not stale, f"stale device plugin stubs {stale}: run scripts/gen-proto.sh"


def test_committed_plugin_and_csi_stubs_are_fresh(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen-proto.sh"), str(tmp_path)], check=True, env=env
    )
    for sub, stem in (("pluginmanager", "pluginregistration_api"), ("csi", "csi")):
        names = (f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_grpc.py")
        here = ROOT / "kubelet" / sub
        stale = [n for n in names if (tmp_path / sub / n).read_bytes() != (here / n).read_bytes()]
        assert not stale, f"stale {sub} stubs {stale}: run scripts/gen-proto.sh"
