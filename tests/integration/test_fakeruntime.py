"""FakeRuntime behaves like containerd where the kubelet can tell the difference."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from grpclib.const import Status

from kubelet.cri import (
    CriError,
    DeadlineExceeded,
    ImageClient,
    NotFound,
    RuntimeClient,
    api,
    connect,
)
from kubelet.cri.logformat import parse_line
from kubelet.testing import ContainerBehaviour, ExecResult, FakeRuntime

from .helpers import container_config, sandbox_config

Clients = tuple[RuntimeClient, ImageClient]
SECOND = 1_000_000_000


async def start_pod(
    runtime: RuntimeClient, *, name: str = "web", container: str = "app", log_dir: str = ""
) -> tuple[str, str]:
    cfg = sandbox_config(name, f"uid-{name}", log_directory=log_dir)
    sandbox = await runtime.run_pod_sandbox(cfg)
    cid = await runtime.create_container(
        sandbox, container_config(container, pod=name, uid=f"uid-{name}"), cfg
    )
    await runtime.start_container(cid)
    return sandbox, cid


async def test_container_exits_on_schedule_with_times(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.behave(ContainerBehaviour(exit_after=7, exit_code=3), container="app")
    _, cid = await start_pod(runtime)
    await trio.sleep(6.9)
    assert (await runtime.container_status(cid)).status.state == api.CONTAINER_RUNNING
    await trio.sleep(0.2)
    status = (await runtime.container_status(cid)).status
    assert (status.state, status.exit_code, status.reason) == (api.CONTAINER_EXITED, 3, "Error")
    assert status.finished_at - status.started_at == 7 * SECOND
    assert status.started_at >= status.created_at >= 1_800_000_000 * SECOND


async def test_oom_kill(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    _, cid = await start_pod(runtime)
    fake.oom_kill(cid)
    status = (await runtime.container_status(cid)).status
    assert (status.exit_code, status.reason) == (137, "OOMKilled")


async def test_container_ignoring_sigterm_is_killed_at_the_timeout(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.behave(ContainerBehaviour(stop_takes=math.inf), container="app")
    _, cid = await start_pod(runtime)
    start = trio.current_time()
    await runtime.stop_container(cid, 5)
    assert trio.current_time() - start == pytest.approx(5, abs=0.01)
    status = (await runtime.container_status(cid)).status
    assert (status.exit_code, status.reason) == (137, "Error")


async def test_slow_graceful_stop(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.behave(ContainerBehaviour(stop_takes=2, stop_exit_code=0), container="app")
    _, cid = await start_pod(runtime)
    start = trio.current_time()
    await runtime.stop_container(cid, 30)
    assert trio.current_time() - start == pytest.approx(2, abs=0.01)
    assert (await runtime.container_status(cid)).status.reason == "Completed"


async def test_start_error(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    fake.behave(ContainerBehaviour(start_error='exec: "nope": executable file not found'))
    with pytest.raises(CriError, match="executable file not found") as info:
        await start_pod(runtime)
    assert info.value.code is Status.UNKNOWN
    (container,) = await runtime.list_containers()
    status = (await runtime.container_status(container.id)).status
    assert (status.state, status.exit_code, status.reason) == (
        api.CONTAINER_EXITED,
        128,
        "StartError",
    )


async def test_stop_sandbox_kills_containers_and_frees_ip(
    fake: FakeRuntime, clients: Clients
) -> None:
    runtime, _ = clients
    sandbox, cid = await start_pod(runtime)
    ip = (await runtime.pod_sandbox_status(sandbox)).status.network.ip
    await runtime.stop_pod_sandbox(sandbox)
    await runtime.stop_pod_sandbox(sandbox)  # idempotent
    assert (await runtime.container_status(cid)).status.exit_code == 137
    status = (await runtime.pod_sandbox_status(sandbox)).status
    assert (status.state, status.network.ip) == (api.SANDBOX_NOTREADY, "")
    other, _ = await start_pod(runtime, name="other")
    assert (await runtime.pod_sandbox_status(other)).status.network.ip == ip
    with pytest.raises(CriError, match="not running"):
        await runtime.start_container(
            await runtime.create_container(sandbox, container_config("late"), sandbox_config())
        )


async def test_host_network_sandbox_has_no_ip(clients: Clients) -> None:
    runtime, _ = clients
    sandbox = await runtime.run_pod_sandbox(sandbox_config(host_network=True))
    status = (await runtime.pod_sandbox_status(sandbox)).status
    assert status.network.ip == ""
    assert status.linux.namespaces.options.network == api.NODE


async def test_names_are_reserved_per_attempt(clients: Clients) -> None:
    runtime, _ = clients
    await runtime.run_pod_sandbox(sandbox_config())
    with pytest.raises(CriError, match="is reserved for"):
        await runtime.run_pod_sandbox(sandbox_config())
    again = await runtime.run_pod_sandbox(sandbox_config(attempt=1))
    cfg = sandbox_config(attempt=1)
    await runtime.create_container(again, container_config(), cfg)
    with pytest.raises(CriError, match="is reserved for"):
        await runtime.create_container(again, container_config(), cfg)
    await runtime.create_container(again, container_config(attempt=1), cfg)


async def test_missing_images(fake: FakeRuntime, clients: Clients) -> None:
    runtime, images = clients
    cfg = sandbox_config()
    sandbox = await runtime.run_pod_sandbox(cfg)
    with pytest.raises(NotFound, match="failed to resolve image"):
        await runtime.create_container(sandbox, container_config(image="nginx:1.25"), cfg)
    await images.remove_image(fake.sandbox_image)
    with pytest.raises(CriError, match="sandbox image"):
        await runtime.run_pod_sandbox(sandbox_config("b", "uid-b"))
    fake.pullable.add(fake.sandbox_image)
    await images.pull_image(fake.sandbox_image)
    await runtime.run_pod_sandbox(sandbox_config("b", "uid-b"))
    assert [i.repo_tags[0] for i in await images.list_images()] == [
        "docker.io/library/busybox:latest",
        "registry.k8s.io/pause:3.9",
    ]
    fs = await images.image_fs_info()
    assert fs.image_filesystems[0].used_bytes.value == 2_000_000


async def test_private_repository_needs_credentials(fake: FakeRuntime, clients: Clients) -> None:
    _, images = clients
    fake.require_auth("registry.example/team/app", "robot", "pw")
    fake.require_auth("registry.example/team/app", "other", "pw2")
    with pytest.raises(CriError, match="401 Unauthorized") as anonymous:
        await images.pull_image("registry.example/team/app:1")
    assert anonymous.value.code == Status.UNKNOWN
    wrong = api.AuthConfig(username="robot", password="nope")
    with pytest.raises(CriError, match="401 Unauthorized"):
        await images.pull_image("registry.example/team/app:1", wrong)
    assert await images.pull_image(
        "registry.example/team/app:1", api.AuthConfig(username="robot", password="pw")
    )
    # containerd also reads the base64 ``auth`` field; any tag of the repository
    basic = api.AuthConfig(auth="b3RoZXI6cHcy")  # other:pw2
    assert await images.pull_image("registry.example/team/app@sha256:" + "a" * 64, basic)
    assert [(ref, a.username if a else None) for ref, a in fake.pull_auths] == [
        ("registry.example/team/app:1", None),
        ("registry.example/team/app:1", "robot"),
        ("registry.example/team/app:1", "robot"),
        ("registry.example/team/app@sha256:" + "a" * 64, ""),
    ]
    fake.leak_credentials = True
    with pytest.raises(CriError, match="sent password 'nope'"):
        await images.pull_image("registry.example/team/app:2", wrong)


async def test_log_file_in_cri_format(fake: FakeRuntime, clients: Clients, short_tmp: Path) -> None:
    runtime, _ = clients
    fake.behave(ContainerBehaviour(log_lines=("hello", "world")), container="app")
    _, cid = await start_pod(runtime, log_dir=str(short_tmp / "pods"))
    path = Path((await runtime.container_status(cid)).status.log_path)
    assert path == short_tmp / "pods" / "app" / "0.log"
    lines = [parse_line(raw) for raw in path.read_bytes().splitlines()]
    assert [(x.stream, x.partial, x.message) for x in lines] == [
        ("stdout", False, b"hello"),
        ("stdout", False, b"world"),
    ]
    await runtime.reopen_container_log(cid)


async def test_exec_scripts_and_exec_timeout(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    _, cid = await start_pod(runtime)
    fake.script_exec(ExecResult(exit_code=1, stderr=b"unhealthy"), cmd=["cat", "/tmp/healthy"])
    fake.script_exec(ExecResult(takes=5), cmd=["slow"])
    bad = await runtime.exec_sync(cid, ["cat", "/tmp/healthy"], timeout=1)
    assert (bad.exit_code, bad.stderr) == (1, b"unhealthy")
    assert (await runtime.exec_sync(cid, ["true"], timeout=1)).exit_code == 0
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded, match="timeout 2s exceeded"):
        await runtime.exec_sync(cid, ["slow"], timeout=2)
    assert trio.current_time() - start == pytest.approx(2, abs=0.01)
    fake.exit_container(cid, 0)
    with pytest.raises(CriError, match="CONTAINER_EXITED"):
        await runtime.exec_sync(cid, ["true"], timeout=1)


async def test_streaming_urls_and_runtime_config(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    sandbox, cid = await start_pod(runtime)
    assert (
        await runtime.exec(api.ExecRequest(container_id=cid, cmd=["sh"], stdout=True))
    ).startswith("http://")
    assert "attach" in await runtime.attach(api.AttachRequest(container_id=cid, stdout=True))
    assert "portforward" in await runtime.port_forward(sandbox, [80])
    await runtime.update_runtime_config("10.244.1.0/24")
    assert fake.pod_cidr == "10.244.1.0/24"
    await runtime.update_container_resources(cid, api.LinuxContainerResources(cpu_shares=512))
    status = (await runtime.container_status(cid)).status
    assert status.resources.linux.cpu_shares == 512
    assert (await runtime.container_stats(cid)).attributes.id == cid
    assert (await runtime.pod_sandbox_stats(sandbox)).linux.containers[0].attributes.id == cid


async def test_network_condition(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    fake.set_condition("NetworkReady", False, "NetworkPluginNotReady", "cni config uninitialized")
    conditions = {c.type: c for c in (await runtime.status()).status.conditions}
    assert not conditions["NetworkReady"].status
    assert conditions["NetworkReady"].reason == "NetworkPluginNotReady"


async def scenario(short_tmp: Path, tag: str) -> list[tuple[str, dict[str, object], float, str]]:
    fake = FakeRuntime(epoch=1_800_000_000.0)
    fake.behave(ContainerBehaviour(exit_after=3, exit_code=1))
    fake.faults.fail_next("StartContainer", 1, Status.UNAVAILABLE)
    async with fake.serve(short_tmp / f"{tag}.sock"), connect(fake.endpoint) as (runtime, _):
        cfg = sandbox_config()
        sandbox = await runtime.run_pod_sandbox(cfg)
        cid = await runtime.create_container(sandbox, container_config(), cfg)
        with pytest.raises(CriError):
            await runtime.start_container(cid)
        await runtime.start_container(cid)
        await trio.sleep(5)
        await runtime.container_status(cid)
        await runtime.stop_pod_sandbox(sandbox)
    start = fake.calls[0].time
    return [(c.rpc, c.args, round(c.time - start, 6), c.outcome) for c in fake.calls]


async def test_same_test_same_result(
    aio_loop: None, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    first = await scenario(short_tmp, "a")
    second = await scenario(short_tmp, "b")
    assert first == second
    assert [c[3] for c in first] == ["ok", "ok", "UNAVAILABLE", "ok", "ok", "ok"]


async def test_process_mode(aio_loop: None, short_tmp: Path) -> None:
    """`python -m kubelet.testing.fakeruntime` serves until SIGTERM (real clock)."""
    sock = short_tmp / "proc.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet.testing.fakeruntime", "--listen", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(20):
            while not sock.exists():
                await trio.sleep(0.05)
        async with connect(f"unix://{sock}") as (runtime, images):
            assert (await runtime.version()).runtime_name == "fakeruntime"
            assert await images.image_status("busybox") is not None
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert not sock.exists()


async def test_sandbox_ips_are_the_lowest_free_and_lists_filter_by_label(
    clients: Clients,
) -> None:
    """The pool hands out its lowest free address (".1" skipped), a released one first;
    a label selector keeps the items that carry every pair of it."""
    runtime, _ = clients

    async def ip_of(sandbox: str) -> str:
        return (await runtime.pod_sandbox_status(sandbox)).status.network.ip

    a = await runtime.run_pod_sandbox(sandbox_config("a", "uid-a"))
    b = await runtime.run_pod_sandbox(sandbox_config("b", "uid-b"))
    assert [await ip_of(a), await ip_of(b)] == ["10.88.0.2", "10.88.0.3"]
    await runtime.stop_pod_sandbox(a)
    c = await runtime.run_pod_sandbox(sandbox_config("c", "uid-c"))
    d = await runtime.run_pod_sandbox(sandbox_config("d", "uid-d"))
    assert [await ip_of(c), await ip_of(d)] == ["10.88.0.2", "10.88.0.4"]
    by_uid = await runtime.list_pod_sandbox(labels={"io.kubernetes.pod.uid": "uid-b"})
    assert [s.id for s in by_uid] == [b]
    both = {"io.kubernetes.pod.uid": "uid-b", "io.kubernetes.pod.name": "c"}
    assert await runtime.list_pod_sandbox(labels=both) == []


async def test_lists_by_pod_uid_follow_creation_and_removal(
    fake: FakeRuntime, clients: Clients
) -> None:
    """Lists by the pod-UID label (an index, not a scan) see exactly that pod's items in
    creation order, through removals, re-creations, a wipe, and a table changed
    directly; the teardown RPCs free the names for reuse; calls are counted by RPC."""
    runtime, _ = clients
    uid = {"io.kubernetes.pod.uid": "uid-web"}
    web, app = await start_pod(runtime)
    other, _ = await start_pod(runtime, name="db")
    cfg = sandbox_config("web", "uid-web")
    side = await runtime.create_container(
        web, container_config("side", pod="web", uid="uid-web"), cfg
    )
    assert [c.id for c in await runtime.list_containers(labels=uid)] == [app, side]
    assert [s.id for s in await runtime.list_pod_sandbox(labels=uid)] == [web]
    await runtime.remove_container(app)
    assert [c.id for c in await runtime.list_containers(labels=uid)] == [side]
    again = await runtime.create_container(
        web, container_config("app", pod="web", uid="uid-web"), cfg
    )  # its name was released
    assert [c.id for c in await runtime.list_containers(labels=uid)] == [side, again]
    await runtime.stop_pod_sandbox(web)
    assert [c.state for c in await runtime.list_containers(labels=uid)] == [
        api.CONTAINER_CREATED,
        api.CONTAINER_CREATED,
    ]
    await runtime.remove_pod_sandbox(web)
    assert await runtime.list_containers(labels=uid) == []
    assert await runtime.list_pod_sandbox(labels=uid) == []
    assert [s.id for s in await runtime.list_pod_sandbox()] == [other]
    web2, app2 = await start_pod(runtime)  # same names: released with the sandbox
    assert [c.id for c in await runtime.list_containers(labels=uid)] == [app2]
    del fake.containers[app2]  # behind the index's back
    assert await runtime.list_containers(labels=uid) == []
    fake.wipe()
    assert await runtime.list_pod_sandbox(labels=uid) == []
    assert fake.call_counts["CreateContainer"] == 5
    assert fake.call_counts["ListContainers"] == 7
    assert web2 not in fake.sandboxes


async def test_process_mode_reports_on_plain_asyncio(aio_loop: None, short_tmp: Path) -> None:
    """`--no-streaming` serves CRI on a plain asyncio loop; the process reports its
    RUNNING count and calls by RPC on stdout: on SIGUSR1, when `--report-running N`
    containers run, and at exit."""
    sock = short_tmp / "plain.sock"
    argv = [sys.executable, "-m", "kubelet.testing.fakeruntime", "--listen", f"unix://{sock}"]
    proc = subprocess.Popen(
        [*argv, "--no-streaming", "--report-running", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        with trio.fail_after(20):
            while not sock.exists():
                await trio.sleep(0.05)
        async with connect(f"unix://{sock}") as (runtime, _):
            assert (await runtime.version()).runtime_name == "fakeruntime"
            os.kill(proc.pid, signal.SIGUSR1)
            first = json.loads(await trio.to_thread.run_sync(proc.stdout.readline))
            assert first == {"event": "usr1", "running": 0, "calls": {"Version": 1}}
            await start_pod(runtime, name="a")
            await start_pod(runtime, name="b")
            second = json.loads(await trio.to_thread.run_sync(proc.stdout.readline))
            assert (second["event"], second["running"]) == ("running", 2)
            assert second["calls"]["StartContainer"] == 2
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    last = json.loads(proc.stdout.readline())
    assert (last["event"], last["running"]) == ("exit", 2)
    assert not sock.exists()
