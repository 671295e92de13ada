"""A kubeconfig ``exec`` credential plugin (a small shell script) joins the kubelet to a
FakeApiServer that accepts bearer tokens only, and is run again when its token expires
and when the server refuses it (401).

The clock is fake but jumps only after 20 ms without anything to do, so that the plugin
(a real process) answers before time moves on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing
import yaml

from kubelet.goformat import rfc3339
from kubelet.testing import FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, start_cluster_kubelet
from .kubelet_harness import EPOCH, NODE

V1 = "client.authentication.k8s.io/v1"
PLUGIN = """#!/bin/sh
n=$(( $(cat "$COUNTER" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNTER"
printf '%s\\n' "$KUBERNETES_EXEC_INFO" >> "$INFO_LOG"
echo "args: $*" >> "$INFO_LOG"
printf '{"kind":"ExecCredential","apiVersion":"%s","status":{"token":"exec-token-%s",\
"expirationTimestamp":"%s"}}\\n' "$ANSWER_VERSION" "$n" "$(cat "$EXPIRY")"
"""
LIFETIME = 60.0


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.02)


def write_kubeconfig(tmp: Path, server: str) -> tuple[Path, Path, Path, Path]:
    """(kubeconfig, run counter, expiry file, the plugin's record of its exec info)."""
    plugin = tmp / "token-plugin"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    counter, expiry, info = tmp / "runs", tmp / "expiry", tmp / "exec-info"
    kubeconfig = tmp / "exec.conf"
    cluster = {
        "server": server,
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"a": 1}}],
    }
    exec_config = {
        "apiVersion": V1,
        "command": "./token-plugin",  # relative to the kubeconfig's directory
        "args": ["--node", NODE],
        "interactiveMode": "IfAvailable",
        "provideClusterInfo": True,
        "env": [
            {"name": "COUNTER", "value": str(counter)},
            {"name": "EXPIRY", "value": str(expiry)},
            {"name": "INFO_LOG", "value": str(info)},
            {"name": "ANSWER_VERSION", "value": V1},
        ],
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "node", "user": {"exec": exec_config}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "node"}}],
        "current-context": "ctx",
    }
    kubeconfig.write_text(yaml.safe_dump(doc))
    return kubeconfig, counter, expiry, info


def runs(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


async def test_an_exec_plugin_token_joins_the_node_and_is_renewed_on_expiry_and_401(
    fake: FakeRuntime, short_tmp: Path, patient_clock: trio.testing.MockClock
) -> None:
    api = FakeApiServer(epoch=EPOCH)
    api.settings.require_auth = True
    user = f"system:node:{NODE}"
    for n in (1, 2, 3):  # each token lives LIFETIME seconds from its issue
        api.auth.add_token(f"exec-token-{n}", user, ["system:nodes"])
    async with api.serve(), trio.open_nursery() as nursery:
        kubeconfig, counter, expiry, info = write_kubeconfig(short_tmp, api.url)
        expiry.write_text(rfc3339(EPOCH + LIFETIME))
        c = Cluster(api, fake, short_tmp, nursery)
        await start_cluster_kubelet(c, kubeconfig=kubeconfig)
        await c.wait_for(lambda: api.get("nodes", None, NODE) is not None)
        assert runs(counter) == 1  # every request of the start shared one run
        assert api.count("create", "nodes") == 1
        assert {r.user for r in api.requests if r.status and r.status < 400} == {user}
        first = info.read_text().splitlines()
        spec = json.loads(first[0])
        assert spec == {
            "kind": "ExecCredential",
            "apiVersion": V1,
            "spec": {
                "interactive": False,
                "cluster": {"server": api.url, "config": {"a": 1}},
            },
        }
        assert first[1] == f"args: --node {NODE}"

        # past the expiry: the next request runs the plugin again
        expiry.write_text(rfc3339(EPOCH + 100 * LIFETIME))
        await trio.sleep(LIFETIME + 15)
        assert runs(counter) == 2

        # the server no longer takes token 2: one 401, a new run, token 3 from then on
        del api.auth.tokens["exec-token-2"]
        api.clear_requests()
        await trio.sleep(25)
        assert runs(counter) == 3
        statuses = [r.status for r in api.requests if r.status is not None]
        assert 401 in statuses
        assert statuses[-1] < 400
        leases = [r for r in api.requests if r.resource == "leases" and r.status == 200]
        assert leases and leases[-1].user == user
        assert c.components is not None  # the 401 is in client-go's request metrics too
        host = api.url.removeprefix("http://")
        refused = {"code": "401", "host": host, "method": "PUT"}
        assert c.components.metrics.registry.get_sample_value("rest_client_requests_total", refused)
        nursery.cancel_scope.cancel()
