"""Container logs on real containerd: the ``/var/log/containers`` link log shippers tail.

The kubelet has no setting for that directory (upstream's is fixed), so this test reads
the host's; its pod's name is unique, and the e2e lock keeps other kubelets away.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kubelet.gc import LEGACY_CONTAINER_LOGS_DIR

from .test_kubelet_containerd import LOOP, KubeletProcess, kubelet, manifest  # noqa: F401 - the fixture

pytestmark = pytest.mark.containerd


async def test_legacy_log_link_points_at_the_container_log(kubelet: KubeletProcess) -> None:  # noqa: F811
    kubelet.start()
    word = f"hello-{uuid.uuid4().hex}"
    path = kubelet.write("talk.yaml", manifest("talk", f"echo {word}; {LOOP}"))
    await kubelet.wait_for(lambda: kubelet.running("talk"), what="pod running")
    (container,) = await kubelet.running("talk")
    status = (await kubelet.runtime.container_status(container.id)).status
    link = Path(LEGACY_CONTAINER_LOGS_DIR) / (
        f"{kubelet.pod_name('talk')}_default_main-{container.id}.log"
    )

    async def has_output() -> bool:
        return link.is_symlink() and word in link.read_text(errors="replace")

    await kubelet.wait_for(has_output, what="the link and the container's output")
    assert os.readlink(link) == status.log_path
    path.unlink()

    async def link_gone() -> bool:
        return not await kubelet.containers("talk") and not link.is_symlink()

    await kubelet.wait_for(link_gone, timeout=30, what="container and link removed")
