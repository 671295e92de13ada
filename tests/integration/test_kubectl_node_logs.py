"""``kubectl get --raw /api/v1/nodes/<node>/proxy/logs/...``: the real kubectl, through
FakeApiServer's node proxy (to the Node's address and ``daemonEndpoints`` port, as
kube-apiserver), to the kubelet's node log query and ``/logs/`` file server."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.server import nodelogs
from kubelet.testing import FakeRuntime

from .kubelet_harness import NODE
from .streams_harness import kubectl_node


async def test_node_log_query_through_the_api_server(
    fake: FakeRuntime, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = short_tmp / "var-log"
    log_dir.mkdir()
    (log_dir / "kubelet.log").write_text("I0101 kubelet started\nI0101 node ready\n")
    monkeypatch.setattr(nodelogs, "NODE_LOG_DIR", str(log_dir))
    config = short_tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "enableSystemLogQuery: true\n"
    )
    async with kubectl_node(fake, short_tmp, extra=("--config", str(config))) as node:
        await node.cluster.wait_for(lambda: node.api.get("Node", "", NODE) is not None, 30)
        base = f"/api/v1/nodes/{NODE}/proxy/logs/"
        done = await node.kubectl("get", "--raw", base + "?query=kubelet")
        assert (done.returncode, done.stdout) == (
            0,
            b"I0101 kubelet started\nI0101 node ready\n",
        ), done.stderr
        done = await node.kubectl("get", "--raw", base + "?query=kubelet&tailLines=1")
        # upstream's answer for options on a file log, passed back as the kubelet gave it
        assert b"options present and query resolved to log files for [kubelet]" in done.stdout
        done = await node.kubectl("get", "--raw", base + "kubelet.log")
        assert done.stdout == b"I0101 kubelet started\nI0101 node ready\n", done.stderr
        done = await node.kubectl("get", "--raw", base + "?query=kubelet&sinceTime=x")
        assert done.returncode == 1
        assert b"Error from server (BadRequest)" in done.stderr  # the kubelet's 400
        proxied = node.api.requests_of(resource="nodes/proxy")
        assert [(r.verb, r.name, r.status) for r in proxied] == [
            *[("get", NODE, 200)] * 3,
            ("get", NODE, 400),
        ]
