"""The pod's hostname through the whole kubelet: setHostnameAsFQDN and hostnameOverride.

Static pods against FakeRuntime, fake clock. What is checked is what a container would
see: the sandbox's kernel hostname (the runtime also sets HOSTNAME from it), the managed
/etc/hosts, and the FailedCreatePodSandBox event when the FQDN does not fit the kernel.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from kubelet.events.recorder import LOG_LEVEL as EVENT_LOG_LEVEL
from kubelet.testing import FakeRuntime

from .kubelet_harness import KUBELET_IMAGES, NODE, Harness, running_kubelet

DOMAIN = ("--cluster-domain", "cluster.local")


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def manifest(name: str, spec: str) -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n"
        f"spec:\n{spec}  containers:\n  - name: app\n    image: busybox:1.35\n"
    )


def own_hosts_line(h: Harness, pod: str) -> str:
    """The line of the pod's managed /etc/hosts that names its own IP."""
    (sandbox,) = h.sandboxes(pod)
    (container,) = h.running(pod, "app")
    hosts = next(m for m in container.config.mounts if m.container_path == "/etc/hosts")
    (line,) = [x for x in Path(hosts.host_path).read_text().splitlines() if sandbox.ip in x]
    return line.removeprefix(f"{sandbox.ip}\t")


async def test_set_hostname_as_fqdn(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    spec = "  hostname: db\n  subdomain: svc\n  setHostnameAsFQDN: true\n"
    async with running_kubelet(fake, short_tmp, *DOMAIN) as h:
        h.write("db.yaml", manifest("db", spec))
        await h.wait_for(lambda: h.running("db", "app"))
        (sandbox,) = h.sandboxes("db")
        assert sandbox.config.hostname == "db.svc.default.svc.cluster.local"
        assert own_hosts_line(h, "db") == "db.svc.default.svc.cluster.local\tdb"


async def test_fqdn_longer_than_the_kernel_takes_fails_the_sandbox(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(EVENT_LOG_LEVEL)
    subdomain = "s" * 40
    spec = f"  subdomain: {subdomain}\n  setHostnameAsFQDN: true\n"
    async with running_kubelet(fake, short_tmp, *DOMAIN) as h:
        h.write("long.yaml", manifest("long", spec))
        await trio.sleep(30)
        assert fake.calls_of("RunPodSandbox") == []
        fqdn = f"long-{NODE}.{subdomain}.default.svc.cluster.local"
        assert (
            "FailedCreatePodSandBox: Failed to create pod sandbox: failed to construct FQDN "
            f"from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is "
            f"the max, {len(fqdn)} characters requested)"
        ) in caplog.text


async def test_hostname_override_is_the_hostname_and_the_only_name(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    spec = "  hostname: web\n  subdomain: svc\n  hostnameOverride: web.example.com\n"
    async with running_kubelet(fake, short_tmp, *DOMAIN) as h:
        h.write("web.yaml", manifest("web", spec))
        await h.wait_for(lambda: h.running("web", "app"))
        (sandbox,) = h.sandboxes("web")
        assert sandbox.config.hostname == "web.example.com"
        assert own_hosts_line(h, "web") == "web.example.com"


async def test_hostname_override_is_ignored_with_its_gate_off(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    spec = "  hostname: web\n  subdomain: svc\n  hostnameOverride: web.example.com\n"
    gate = "--feature-gates=HostnameOverride=false"
    async with running_kubelet(fake, short_tmp, *DOMAIN, gate) as h:
        h.write("web.yaml", manifest("web", spec))
        await h.wait_for(lambda: h.running("web", "app"))
        (sandbox,) = h.sandboxes("web")
        assert sandbox.config.hostname == "web"
        assert own_hosts_line(h, "web") == "web.svc.default.svc.cluster.local\tweb"
        assert "spec.hostnameOverride is ignored: the HostnameOverride feature gate" in (
            caplog.text
        )
