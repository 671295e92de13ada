"""What ``kubeadm join`` leaves for the kubelet, accepted unchanged: the systemd drop-in's
flags (deploy/systemd/10-kubeadm.conf), ``/var/lib/kubelet/kubeadm-flags.env`` and
``/var/lib/kubelet/config.yaml``, put together as systemd does."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kubelet.config import resolve

from .test_support import KUBEADM

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "systemd"

# as kubeadm 1.36 writes it (its flags, then nodeRegistration.kubeletExtraArgs)
KUBEADM_FLAGS_ENV = (
    'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/'
    'containerd.sock --hostname-override=worker-1 --node-ip=10.0.0.5 --cloud-provider=external"\n'
)


def environment_file(text: str) -> dict[str, str]:
    """systemd's EnvironmentFile=: KEY=value lines, the value maybe quoted."""
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = " ".join(shlex.split(value))
    return out


def command_line(tmp: Path) -> list[str]:
    """The kubelet's argv as systemd builds it from the unit's drop-in."""
    dropin = (DEPLOY / "10-kubeadm.conf").read_text()
    env = {}
    for match in re.finditer(r'^Environment="([A-Z_]+)=(.*)"$', dropin, re.M):
        env[match.group(1)] = match.group(2)
    env |= environment_file(KUBEADM_FLAGS_ENV)
    env.setdefault("KUBELET_EXTRA_ARGS", "")  # /etc/default/kubelet is optional
    [exec_start] = [line for line in dropin.splitlines() if line.startswith("ExecStart=/")]
    words = exec_start.removeprefix("ExecStart=").split()
    assert words[0] == "/usr/bin/kubelet"
    argv: list[str] = []
    for word in words[1:]:  # $VAR: split on whitespace, as systemd does
        argv += env[word.removeprefix("$")].split()
    # the files kubeadm writes live under /etc/kubernetes and /var/lib/kubelet; here in tmp
    return [arg.replace("/var/lib/kubelet/config.yaml", str(tmp / "config.yaml")) for arg in argv]


def test_the_drop_in_flags_file_and_config_are_accepted_unchanged(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(KUBEADM)
    argv = command_line(tmp_path)
    assert "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf" in argv
    options = resolve(argv)
    assert options.bootstrap_kubeconfig == "/etc/kubernetes/bootstrap-kubelet.conf"
    assert options.kubeconfig == "/etc/kubernetes/kubelet.conf"
    assert options.node_name == "worker-1" and options.node_ip == "10.0.0.5"
    assert options.cloud_provider == "external"
    cfg = options.config
    assert cfg.container_runtime_endpoint == "unix:///var/run/containerd/containerd.sock"
    assert cfg.rotate_certificates and cfg.static_pod_path == "/etc/kubernetes/manifests"
    assert cfg.authentication.x509.client_ca_file == "/etc/kubernetes/pki/ca.crt"
    # what is listed as not acted on names none of the join's own settings
    warning = " ".join(options.warnings)
    for joined in ("bootstrap", "rotateCertificates", "cloud-provider", "shutdownGracePeriod"):
        assert joined not in warning


def test_the_unit_restarts_the_kubelet_and_starts_it_without_flags() -> None:
    unit = (DEPLOY / "kubelet.service").read_text()
    assert "ExecStart=/usr/bin/kubelet\n" in unit
    assert "Restart=always" in unit
