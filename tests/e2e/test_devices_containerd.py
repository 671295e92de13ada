"""Device plugins against real containerd: a kubelet process, a v1beta1 plugin on its
registration socket, and a static pod that gets the plugin's device node and variables."""

from __future__ import annotations

import pytest

from kubelet.cri import api
from kubelet.testing.fakedeviceplugin import FakeDevicePlugin

from .test_kubelet_containerd import BUSYBOX, KubeletProcess, kubelet  # noqa: F401

pytestmark = pytest.mark.containerd

CHECK = (
    'test -c /dev/example0 && echo hello > /dev/example0 && [ "$EXAMPLE_DEVICES" = dev0 ] '
    "&& exit 0; exit 3"
)

MANIFEST = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: gadget
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: {BUSYBOX}
    command: ["sh", "-c", {CHECK!r}]
    resources:
      limits:
        example.com/resource: "1"
"""


async def test_a_pod_gets_the_plugins_device_node_and_variables(
    kubelet: KubeletProcess,  # noqa: F811
) -> None:
    kubelet.start()
    plugins = kubelet.root / "root" / "device-plugins"

    async def registration_socket() -> bool:
        return (plugins / "kubelet.sock").exists()

    await kubelet.wait_for(registration_socket, what="the registration socket")
    plugin = FakeDevicePlugin(str(plugins), devices={"dev0": "Healthy"}, cdi=False)
    async with plugin.running():
        checkpoint = plugins / "kubelet_internal_checkpoint"

        async def registered() -> bool:
            return checkpoint.exists() and "dev0" in checkpoint.read_text()

        await kubelet.wait_for(registered, what="the plugin's devices checkpointed")
        kubelet.write("gadget.yaml", MANIFEST)

        async def exited() -> list[api.Container]:
            return [
                c for c in await kubelet.containers("gadget") if c.state == api.CONTAINER_EXITED
            ]

        await kubelet.wait_for(exited, timeout=60, what="the pod's container exited")
        (done,) = await exited()
        status = (await kubelet.runtime.container_status(done.id)).status
        assert status.exit_code == 0, kubelet.log()[-3000:]
        assert plugin.allocations == [[["dev0"]]]
        assert '"PodUID"' in checkpoint.read_text()
    kubelet.stop()
