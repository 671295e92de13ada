"""An image credential provider plugin (a small shell script) in the whole kubelet's pull
path: ``--image-credential-provider-config`` and ``--image-credential-provider-bin-dir``.

The clock is fake but jumps only after 20 ms without anything to do, so that the plugin
(a real process) answers before time moves on.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from kubelet.testing import FakeApiServer, FakeRuntime

from .cluster_harness import Cluster, start_cluster_kubelet
from .kubelet_harness import EPOCH, KUBELET_IMAGES

PRIVATE = "registry.example/team/app:1"
PASSWORD = "plugin-Pa55word"
V1 = "credentialprovider.kubelet.k8s.io/v1"
PLUGIN = f"""#!/bin/sh
cat >> "$RUNS"
echo >> "$RUNS"
printf '%s\\n' '{{"kind": "CredentialProviderResponse", "apiVersion": "{V1}",
 "cacheKeyType": "Registry", "cacheDuration": "5m",
 "auth": {{"registry.example": {{"username": "robot", "password": "{PASSWORD}"}}}}}}'
"""


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
def fake_setup() -> Callable[[FakeRuntime], None]:
    def private_repository(fake: FakeRuntime) -> None:
        fake.require_auth("registry.example/team/app", "robot", PASSWORD)

    return private_repository


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.02)


def write_provider(tmp: Path) -> tuple[Path, Path, Path]:
    """(config, bin dir, the plugin's record of its requests)."""
    bin_dir = tmp / "credential-provider-bin"
    bin_dir.mkdir()
    plugin = bin_dir / "example-credential-provider"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    runs = tmp / "plugin-runs"
    config = tmp / "credential-provider.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": [
                    {
                        "name": "example-credential-provider",
                        "matchImages": ["registry.example"],
                        "defaultCacheDuration": "1m",
                        "apiVersion": V1,
                        "env": [{"name": "RUNS", "value": str(runs)}],
                    }
                ],
            }
        )
    )
    return config, bin_dir, runs


async def test_a_plugin_supplies_the_credentials_of_a_private_pull(
    fake: FakeRuntime, short_tmp: Path, patient_clock: trio.testing.MockClock
) -> None:
    config, bin_dir, runs = write_provider(short_tmp)
    api = FakeApiServer(epoch=EPOCH)
    async with api.serve(), trio.open_nursery() as nursery:
        c = Cluster(api, fake, short_tmp, nursery)
        await start_cluster_kubelet(
            c,
            extra=[
                f"--image-credential-provider-config={config}",
                f"--image-credential-provider-bin-dir={bin_dir}",
            ],
        )
        # a stale pull secret first (the pod's own credentials come first), then the plugin
        stale = json.dumps({"auths": {"registry.example": {"username": "robot", "password": "x"}}})
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "stale", "namespace": "default"},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(stale.encode()).decode()},
            }
        )
        c.create_pod("first", image=PRIVATE, imagePullSecrets=[{"name": "stale"}])
        await c.wait_for(lambda: c.phase("first") == "Running", timeout=120)
        auths = [
            (a.username, a.password) if a else None for r, a in fake.pull_auths if r == PRIVATE
        ]
        assert auths == [("robot", "x"), ("robot", PASSWORD)]
        requests = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
        # as upstream's keyring lookup: the repository, without the tag
        assert requests == [
            {
                "kind": "CredentialProviderRequest",
                "apiVersion": V1,
                "image": "registry.example/team/app",
            }
        ]
        # a second pod of that registry within cacheDuration: the cached answer, no new run
        c.create_pod("second", image=PRIVATE, imagePullPolicy="Always")
        await c.wait_for(lambda: c.phase("second") == "Running", timeout=120)
        assert len([line for line in runs.read_text().splitlines() if line.strip()]) == 1
        assert [a.password for r, a in fake.pull_auths if r == PRIVATE and a][-1] == PASSWORD
        metrics = c.components.metrics.registry if c.components else None
        assert metrics is not None
        assert (
            metrics.get_sample_value(
                "kubelet_credential_provider_plugin_duration_count",
                {"plugin_name": "example-credential-provider"},
            )
            == 1
        )
        nursery.cancel_scope.cancel()
