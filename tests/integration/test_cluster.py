"""The kubelet as a cluster node: FakeApiServer + FakeRuntime, in-process, fake clock."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio

from kubelet.metrics import exposition
from kubelet.testing import ContainerBehaviour, FakeRuntime
from kubelet.volumes import VolumeManager

from .cluster_harness import running_cluster
from .kubelet_harness import KUBELET_IMAGES, NODE


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def ready(node: dict[str, object] | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)  # type: ignore[index]


async def test_node_registers_and_turns_ready_within_2s(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        at = await c.wait_for(lambda: ready(c.api.get("nodes", None, NODE)))
        assert at < 2.0
        node = c.api.get("nodes", None, NODE)
        assert node is not None
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == NODE
        assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"]) == ("linux", "amd64")
        status = node["status"]
        assert status["nodeInfo"]["containerRuntimeVersion"] == "fakeruntime://0.1.0"
        assert status["nodeInfo"]["kubeletVersion"] == "v1.36.0"
        assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
        assert status["capacity"]["pods"] == "110"
        assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
        assert [c["type"] for c in status["conditions"]] == [
            "MemoryPressure",
            "DiskPressure",
            "PIDPressure",
            "Ready",
        ]
        await trio.sleep(11)  # a status report after the registration
        assert c.components is not None
        startup = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in exposition(c.components.metrics.registry).decode().splitlines()
            if line.startswith("kubelet_node_startup_")
        }
    assert startup["kubelet_node_startup_registration_duration_seconds"] < 2
    # boot -> Ready: the machine's uptime and the kubelet's few seconds
    assert startup["kubelet_node_startup_duration_seconds"] > 10
    steps = ("pre_kubelet", "pre_registration", "registration", "post_registration")
    parts = [f"kubelet_node_startup_{step}_duration_seconds" for step in steps]
    assert sum(startup[p] for p in parts) == pytest.approx(
        startup["kubelet_node_startup_duration_seconds"]
    )


async def test_lease_renewed_every_10s_and_after_an_outage(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running")
        (container,) = c.running_containers()
        await trio.sleep(60)
        renewals = [r.time for r in c.api.requests_of("update", "leases")]
        gaps = [b - a for a, b in itertools.pairwise(renewals)]
        assert len(renewals) >= 5
        assert all(10.0 <= g <= 10.5 for g in gaps)
        lease = c.api.get("leases", "kube-node-lease", NODE)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == NODE
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"
        async with c.api.outage():
            await trio.sleep(180)
        back = trio.current_time()
        await trio.sleep(12)
        after = [
            r.time
            for r in c.api.requests_of("update", "leases")
            if r.time >= back and r.status == 200
        ]
        assert after and after[0] - back <= 10.5
        assert [x.id for x in c.running_containers()] == [container.id]


async def test_api_pod_runs_and_reports_running(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running")
        status = c.pod("web")["status"]  # type: ignore[index]
        assert status["podIP"].startswith("10.88.")
        assert status["hostIP"] == "10.0.0.5"
        assert status["qosClass"] == "BestEffort"
        (cs,) = status["containerStatuses"]
        assert cs["ready"] is True and "running" in cs["state"]
        assert cs["containerID"].startswith("fakeruntime://")
        conditions = {x["type"]: x["status"] for x in status["conditions"]}
        assert conditions["Ready"] == "True"
        await trio.sleep(5)
        patches = c.api.requests_of("patch", "pods/status")
        assert 1 <= len(patches) <= 2  # status PATCHes per pod start


async def test_pod_startup_sli_leaves_the_pull_out(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """An API pod whose image takes 20 s to pull: kubelet_pod_start_total_duration_seconds
    counts them, kubelet_pod_start_sli_duration_seconds does not; the Pulled event and
    kubelet_image_pull_duration_seconds say how long and how big, as upstream's."""
    fake.pullable.add("docker.io/library/nginx:1.27")
    fake.faults.delay("PullImage", 20)
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: c.api.get("nodes", None, NODE) is not None)
        c.create_pod("web", image="nginx:1.27")
        await c.wait_for(lambda: c.phase("web") == "Running", 60)
        await trio.sleep(2)  # the watch delivers the running status
        assert c.components is not None
        text = exposition(c.components.metrics.registry).decode()
        pulled = [e for e in c.api.list("events", "default") if e.get("reason") == "Pulled"]
        size = fake.images["docker.io/library/nginx:1.27"].size
    assert [e["message"] for e in pulled] == [
        f'Successfully pulled image "nginx:1.27" in 20s (20s including waiting). '
        f"Image size: {size} bytes."
    ]
    bucket = 'kubelet_image_pull_duration_seconds_bucket{image_size_in_bytes="0-10MB",le="30.0"}'
    assert f"{bucket} 1.0" in text.splitlines()
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith(("kubelet_pod_start_", "kubelet_first_network"))
    }
    assert values["kubelet_pod_start_total_duration_seconds_count"] == 1
    assert values["kubelet_pod_start_sli_duration_seconds_count"] == 1
    total = values["kubelet_pod_start_total_duration_seconds_sum"]
    sli = values["kubelet_pod_start_sli_duration_seconds_sum"]
    assert total >= 20 and sli < 2 and total - sli >= 20
    assert values["kubelet_first_network_pod_start_sli_duration_seconds"] == sli


async def test_crash_is_reported_with_restart_count_and_last_state(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=1, exit_code=3), pod="crash")
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("crash")

        def restarted() -> bool:
            statuses = ((c.pod("crash") or {}).get("status") or {}).get("containerStatuses") or []
            return (
                bool(statuses)
                and statuses[0].get("restartCount", 0) >= 1
                and "lastState" in statuses[0]
            )

        await c.wait_for(restarted, timeout=30)
        (cs,) = c.pod("crash")["status"]["containerStatuses"]  # type: ignore[index]
        last = cs["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (3, "Error")
        await trio.sleep(5)
        (cs,) = c.pod("crash")["status"]["containerStatuses"]  # type: ignore[index]
        assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"


async def test_deleted_pod_is_torn_down_and_disappears(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running")
        deleted_at = trio.current_time()
        c.api.delete("pods", "default", "web", grace=30)
        gone = await c.wait_for(lambda: c.pod("web") is None, timeout=60)
        assert gone - deleted_at < 5
        rpcs = [x.rpc for x in fake.calls if x.rpc in ("StopContainer", "StopPodSandbox")]
        assert rpcs == ["StopContainer", "StopPodSandbox"]
        assert fake.calls_of("StopContainer")[0].args["timeout"] == 30
        assert not fake.sandboxes
        deletes = c.api.requests_of("delete", "pods")
        assert deletes and deletes[-1].status == 200


async def test_dropped_watch_and_410_relist_without_loss_or_duplicates(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("a")
        await c.wait_for(lambda: c.phase("a") == "Running")
        await c.api.drop_watches()
        c.create_pod("b")
        await c.wait_for(lambda: c.phase("b") == "Running", timeout=60)
        c.api.faults.expire_next_watch()
        await c.api.drop_watches()
        c.api.compact()
        c.create_pod("c")
        await c.wait_for(lambda: c.phase("c") == "Running", timeout=60)
        await trio.sleep(5)
        assert len(fake.sandboxes) == 3
        assert len(fake.calls_of("RunPodSandbox")) == 3


async def test_conflicts_on_lease_and_status_are_retried(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        await c.wait_for(lambda: ready(c.api.get("nodes", None, NODE)))
        c.api.faults.fail("update", "leases", 409, times=1)
        c.api.faults.fail("patch", "pods/status", 409, times=1)
        c.create_pod("web")
        await c.wait_for(lambda: c.phase("web") == "Running", timeout=60)
        before = len([r for r in c.api.requests_of("update", "leases") if r.status == 200])
        await trio.sleep(25)
        after = len([r for r in c.api.requests_of("update", "leases") if r.status == 200])
        assert after - before >= 2


async def test_static_pod_gets_a_mirror_pod_recreated_after_deletion(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    manifests = short_tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n"
        "  - name: app\n    image: busybox:1.35\n"
    )
    async with running_cluster(fake, short_tmp, manifests=manifests) as c:
        name = f"web-{NODE}"
        await c.wait_for(lambda: c.pod(name) is not None, timeout=30)
        mirror = c.pod(name)
        assert mirror is not None
        assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"]
        assert mirror["metadata"]["ownerReferences"][0]["kind"] == "Node"
        await c.wait_for(lambda: c.phase(name) == "Running", timeout=30)
        c.api.delete("pods", "default", name, grace=0)
        await c.wait_for(
            lambda: (
                c.pod(name) is not None
                and c.pod(name)["metadata"]["uid"] != mirror["metadata"]["uid"]
            ),
            timeout=30,
        )  # type: ignore[index]
        assert len(fake.calls_of("RunPodSandbox")) == 1  # the static pod itself kept running


async def test_env_from_fields_and_config_maps(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
        {"name": "GREETING", "value": "hello $(COLOR) world"},
    ]
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("envy", containers=[{"name": "app", "image": "busybox:1.35", "env": env}])

        def waiting_reason() -> str:
            statuses = ((c.pod("envy") or {}).get("status") or {}).get("containerStatuses") or []
            return (
                str(((statuses[0].get("state") or {}).get("waiting") or {}).get("reason", ""))
                if statuses
                else ""
            )

        await c.wait_for(lambda: waiting_reason() == "CreateContainerConfigError", timeout=30)
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            }
        )
        await c.wait_for(lambda: c.phase("envy") == "Running", timeout=60)
        (container,) = fake.running()
        envs = {kv.key: kv.value.decode() for kv in container.config.envs}
        assert envs["POD_NAME"] == "envy"
        assert envs["NODE"] == NODE
        assert envs["COLOR"] == "blue"
        assert envs["GREETING"] == "hello blue world"


async def test_config_map_secret_and_token_volumes(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    volumes = [
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {
            "name": "kube-api-access",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ]
            },
        },
    ]
    mounts = [
        {"name": "settings", "mountPath": "/etc/settings"},
        {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
        {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ]
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"password": "czNjcjN0"},
            }
        )
        c.create_pod(
            "vols",
            volumes=volumes,
            containers=[{"name": "app", "image": "busybox:1.35", "volumeMounts": mounts}],
        )
        await trio.sleep(15)
        assert not fake.running()  # waits for the missing configMap (FailedMount)
        failed = [e for e in c.api.list("events", "default") if e.get("reason") == "FailedMount"]
        assert failed and 'configmap "settings" not found' in failed[0]["message"]
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "blue"},
            }
        )
        await c.wait_for(lambda: c.phase("vols") == "Running", timeout=60)
        (container,) = fake.running()
        host = {m.container_path: m.host_path for m in container.config.mounts}
        settings = Path(host["/etc/settings"])
        assert (settings / "color").read_text() == "blue"
        creds = Path(host["/etc/creds"])
        assert (creds / "password").read_bytes() == b"s3cr3t"
        assert (creds / "..data" / "password").stat().st_mode & 0o777 == 0o400
        token_dir = Path(host["/var/run/secrets/kubernetes.io/serviceaccount"])
        assert (token_dir / "token").read_text()
        assert (token_dir / "namespace").read_text() == "default"
        c.api.update(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"color": "green"},
            }
        )
        await c.wait_for(lambda: (settings / "color").read_text() == "green", timeout=95)
        c.api.update(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"password": "bjN3"},
            }
        )
        await c.wait_for(lambda: (creds / "password").read_bytes() == b"n3w", timeout=95)
        first_token = (token_dir / "token").read_text()
        await trio.sleep(0.8 * 3607 + 90)  # past 80 % of the token's life, plus a sync
        assert (token_dir / "token").read_text() != first_token


async def test_service_environment_variables(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "my-db", "namespace": "default"},
                "spec": {"clusterIP": "10.96.0.20", "ports": [{"port": 5432, "protocol": "TCP"}]},
            }
        )
        await trio.sleep(2)  # the service watch sees it
        c.create_pod("app")
        await c.wait_for(lambda: c.phase("app") == "Running", timeout=30)
        (container,) = fake.running()
        envs = {kv.key: kv.value.decode() for kv in container.config.envs}
        assert envs["MY_DB_SERVICE_HOST"] == "10.96.0.20"
        assert envs["MY_DB_PORT_5432_TCP"] == "tcp://10.96.0.20:5432"


async def test_a_deleted_pods_volumes_are_gone_before_its_api_object(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As upstream, which deletes the pod only once its volumes are unmounted: the final
    status that lets the API object go follows the pod's files, however slow their
    removal (here a CSI driver taking 5 s to unpublish)."""
    original = VolumeManager.teardown_csi
    seen: list[bool] = []

    async def slow_teardown(self: VolumeManager, uid: str) -> bool:
        await trio.sleep(5)
        seen.append(c.pod("web") is not None)  # still in the API while its volumes go
        return await original(self, uid)

    monkeypatch.setattr(VolumeManager, "teardown_csi", slow_teardown)
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "web",
            volumes=[{"name": "scratch", "emptyDir": {}}],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.35",
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
        )
        await c.wait_for(lambda: c.phase("web") == "Running")
        uid = c.pod("web")["metadata"]["uid"]  # type: ignore[index]
        pod_dir = short_tmp / "root" / "pods" / uid
        assert pod_dir.is_dir()
        c.api.delete("pods", "default", "web", grace=30)
        await c.wait_for(lambda: c.pod("web") is None, timeout=60)
        assert seen == [True]
        assert not pod_dir.exists()
