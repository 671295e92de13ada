"""The kubelet process joins a cluster the way ``kubeadm join`` starts it: only a bootstrap
kubeconfig (a token), FakeApiServer as a process serving HTTPS with its CSR signer, real
containerd. The node registers with the certificate it obtained and runs a pod.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
import trio
import yaml

from kubelet.api import NODES, PODS, ApiClient, ApiError, load_kubeconfig
from kubelet.cri import ImageClient, RuntimeClient
from kubelet.cri.__main__ import cleanup

from .cluster import CONTAINERD_ENDPOINT, Processes

pytestmark = pytest.mark.containerd

TOKEN = "abcdef.0123456789abcdef"


async def start_api(procs: Processes, tmp: Path) -> tuple[str, Path]:
    """(URL, CA file) of a FakeApiServer process over HTTPS with a CSR signer; an admin
    kubeconfig for the test in ``tmp/admin.conf``."""
    port_file = tmp / "port"
    procs.start(
        [
            sys.executable, "-m", "kubelet.testing.fakeapiserver", "--listen", "127.0.0.1:0",
            "--port-file", str(port_file), "--tls-dir", str(tmp / "apiserver-pki"),
            "--require-auth", "--bootstrap-token", TOKEN, "--csr-signer",
            "--kubeconfig", str(tmp / "admin.conf"), "--user", "admin",
            "--group", "system:masters",
        ],
        tmp / "apiserver.log",
    )  # fmt: skip
    with trio.fail_after(20):
        while not port_file.exists() or not port_file.read_text().strip():
            await trio.sleep(0.05)
    return f"https://127.0.0.1:{port_file.read_text().strip()}", tmp / "apiserver-pki" / "ca.crt"


def bootstrap_kubeconfig(url: str, ca: Path, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "kubernetes",
                        "cluster": {"server": url, "certificate-authority": str(ca)},
                    }
                ],
                "users": [{"name": "tls-bootstrap-token-user", "user": {"token": TOKEN}}],
                "contexts": [
                    {
                        "name": "tls-bootstrap-token-user@kubernetes",
                        "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"},
                    }
                ],
                "current-context": "tls-bootstrap-token-user@kubernetes",
            }
        )
    )
    return path


async def test_join_with_only_a_bootstrap_kubeconfig(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> None:
    runtime, _ = cri
    procs = Processes()
    node = f"e2e-{uuid.uuid4().hex[:6]}"
    try:
        url, ca = await start_api(procs, short_tmp)
        boot = bootstrap_kubeconfig(url, ca, short_tmp / "bootstrap-kubelet.conf")
        kubeconfig, pki = short_tmp / "kubelet.conf", short_tmp / "pki"
        kubelet = procs.start(
            [
                sys.executable, "-m", "kubelet", f"--bootstrap-kubeconfig={boot}",
                f"--kubeconfig={kubeconfig}", f"--cert-dir={pki}", "--rotate-certificates",
                f"--hostname-override={node}", "--enable-server=false", "--healthz-port=0",
                "--read-only-port=0", f"--root-dir={short_tmp / 'root'}",
                f"--container-runtime-endpoint={CONTAINERD_ENDPOINT}",
                "--fail-swap-on=false",  # as upstream's node e2e: a CI machine may swap
                "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
            ],
            short_tmp / "kubelet.log",
        )  # fmt: skip
        async with ApiClient.open(load_kubeconfig(short_tmp / "admin.conf")) as api:
            with trio.fail_after(60):
                while not _ready(await _node(api, node)):
                    assert kubelet.poll() is None, (short_tmp / "kubelet.log").read_text()
                    await trio.sleep(0.2)
            csrs = (await api.list("/apis/certificates.k8s.io/v1/certificatesigningrequests")).items
            [csr] = [c for c in csrs if c["spec"]["username"] == "system:bootstrap:abcdef"]
            assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
            assert (pki / "kubelet-client-current.pem").is_symlink()
            assert (
                os.stat(os.path.realpath(pki / "kubelet-client-current.pem")).st_mode & 0o777
                == 0o600
            )
            written = yaml.safe_load(kubeconfig.read_text())
            assert written["users"][0]["user"]["client-certificate"] == str(
                pki / "kubelet-client-current.pem"
            )
            await api.create(
                PODS.path("default"),
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"joined-{node}", "namespace": "default"},
                    "spec": {
                        "nodeName": node,
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            {
                                "name": "main",
                                "image": "docker.io/library/busybox:1.35",
                                "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                            }
                        ],
                    },
                },
            )
            with trio.fail_after(60):
                while True:
                    pod = await api.get(PODS.path("default", name=f"joined-{node}"))
                    if (pod.get("status") or {}).get("phase") == "Running":
                        break
                    await trio.sleep(0.2)
    finally:
        procs.stop_all()
        await cleanup(runtime, kubelet_only=True)


async def _node(api: ApiClient, name: str) -> dict[str, object] | None:
    try:
        return await api.get(NODES.path(name=name))
    except ApiError:
        return None


def _ready(node: dict[str, object] | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)  # type: ignore[index]
