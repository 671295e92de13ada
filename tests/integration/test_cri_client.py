"""The real grpclib clients against an in-process FakeRuntime, on a fake clock.

Every timing here is exact: the server runs on the same trio-asyncio loop, so
``autojump_clock`` only jumps when both sides are idle.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio
import trio_asyncio
from grpclib.const import Cardinality, Handler, Status
from grpclib.server import Server

from kubelet.cri import (
    CriChannel,
    CriError,
    DeadlineExceeded,
    ImageClient,
    ImagePullFailed,
    InvalidArgument,
    MessageTooLarge,
    NotFound,
    RuntimeClient,
    RuntimeUnavailable,
    Unimplemented,
    api,
    connect,
)
from kubelet.testing import FakeRuntime

from .helpers import container_config, sandbox_config

Clients = tuple[RuntimeClient, ImageClient]


async def test_pod_lifecycle_through_the_clients(fake: FakeRuntime, clients: Clients) -> None:
    runtime, images = clients
    version = await runtime.version()
    assert (version.runtime_name, version.runtime_api_version) == ("fakeruntime", "v1")
    ready = {c.type: c.status for c in (await runtime.status()).status.conditions}
    assert ready == {"RuntimeReady": True, "NetworkReady": True}

    assert (await images.image_status("busybox")) is not None
    sb_config = sandbox_config()
    sandbox = await runtime.run_pod_sandbox(sb_config)
    status = (await runtime.pod_sandbox_status(sandbox)).status
    assert status.state == api.SANDBOX_READY and status.network.ip.startswith("10.88.")

    cid = await runtime.create_container(sandbox, container_config(), sb_config)
    assert (await runtime.container_status(cid)).status.state == api.CONTAINER_CREATED
    await runtime.start_container(cid)
    assert (await runtime.container_status(cid)).status.state == api.CONTAINER_RUNNING
    result = await runtime.exec_sync(cid, ["echo", "hi"], timeout=1)
    assert result.exit_code == 0

    await runtime.stop_container(cid, 30)
    status_c = (await runtime.container_status(cid)).status
    assert (status_c.state, status_c.exit_code, status_c.reason) == (
        api.CONTAINER_EXITED,
        0,
        "Completed",
    )
    await runtime.remove_container(cid)
    await runtime.stop_pod_sandbox(sandbox)
    await runtime.remove_pod_sandbox(sandbox)
    assert await runtime.list_pod_sandbox() == []
    assert await runtime.list_containers() == []
    teardown = [r for r in fake.rpcs() if r.startswith(("Stop", "Remove"))]
    assert teardown == ["StopContainer", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"]


async def test_filters(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    a_cfg, b_cfg = sandbox_config("a", "uid-a"), sandbox_config("b", "uid-b")
    a = await runtime.run_pod_sandbox(a_cfg)
    b = await runtime.run_pod_sandbox(b_cfg)
    ca = await runtime.create_container(a, container_config(pod="a", uid="uid-a"), a_cfg)
    cb = await runtime.create_container(b, container_config(pod="b", uid="uid-b"), b_cfg)
    await runtime.start_container(cb)
    await runtime.stop_pod_sandbox(a)

    assert [
        s.id for s in await runtime.list_pod_sandbox(labels={"io.kubernetes.pod.uid": "uid-b"})
    ] == [b]
    assert [s.id for s in await runtime.list_pod_sandbox(state=api.SANDBOX_NOTREADY)] == [a]
    assert [s.id for s in await runtime.list_pod_sandbox(id=a[:12])] == [a]
    assert [c.id for c in await runtime.list_containers(pod_sandbox_id=a)] == [ca]
    assert [c.id for c in await runtime.list_containers(state=api.CONTAINER_RUNNING)] == [cb]
    assert [
        c.id for c in await runtime.list_containers(labels={"io.kubernetes.pod.name": "a"})
    ] == [ca]
    assert [s.attributes.id for s in await runtime.list_container_stats(pod_sandbox_id=b)] == [cb]
    assert len(await runtime.list_pod_sandbox_stats()) == 2


async def test_not_found_and_invalid_argument(clients: Clients) -> None:
    runtime, _ = clients
    with pytest.raises(NotFound) as info:
        await runtime.container_status("nope")
    assert info.value.code is Status.NOT_FOUND
    with pytest.raises(NotFound):
        await runtime.stop_pod_sandbox("nope")
    # removal of what is already gone succeeds, as containerd does
    await runtime.remove_container("nope")
    await runtime.remove_pod_sandbox("nope")
    with pytest.raises(InvalidArgument):
        await runtime.run_pod_sandbox(api.PodSandboxConfig())


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (Status.UNAVAILABLE, RuntimeUnavailable),
        (Status.DEADLINE_EXCEEDED, DeadlineExceeded),
        (Status.UNIMPLEMENTED, Unimplemented),
        (Status.NOT_FOUND, NotFound),
        (Status.INTERNAL, CriError),
    ],
)
async def test_injected_status_reaches_the_caller_typed(
    fake: FakeRuntime, clients: Clients, status: Status, cls: type[CriError]
) -> None:
    runtime, _ = clients
    fake.faults.fail("Version", status, "injected")
    with pytest.raises(cls) as info:
        await runtime.version()
    assert info.value.code is status
    assert "injected" in str(info.value)


async def test_fail_next_n(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    fake.faults.fail_next("ListPodSandbox", 3, Status.UNKNOWN, "flaky")
    outcomes = []
    for _ in range(5):
        try:
            await runtime.list_pod_sandbox()
            outcomes.append("ok")
        except CriError as exc:
            outcomes.append(exc.message)
    assert outcomes == ["flaky", "flaky", "flaky", "ok", "ok"]


async def test_default_deadline_is_two_minutes(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.faults.hang("ListContainers")
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded):
        await runtime.list_containers()
    assert trio.current_time() - start == pytest.approx(120.0, abs=0.01)


async def test_deadline_under_ten_seconds_is_exact(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    runtime.request_timeout = 2.5
    fake.faults.delay("Version", 3)
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded, match="deadline exceeded"):
        await runtime.version()
    assert trio.current_time() - start == pytest.approx(2.5, abs=0.01)


async def test_long_deadlines_are_exact_despite_grpc_timeout_rounding(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    """grpclib sends 15.9 s as ``15S``; our deadline must still be 15.9 s, not 15."""
    runtime, _ = clients
    runtime.request_timeout = 15.9
    fake.faults.hang("Status")
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded) as info:
        await runtime.status()
    assert trio.current_time() - start == pytest.approx(15.9, abs=0.01)
    assert info.value.code is Status.DEADLINE_EXCEEDED


async def test_runtime_side_deadline_exceeded_is_ours_too(
    fake: FakeRuntime, clients: Clients
) -> None:
    fake.faults.fail("Status", Status.DEADLINE_EXCEEDED, "context deadline exceeded")
    with pytest.raises(DeadlineExceeded, match="context deadline exceeded"):
        await runtime_status(clients)


async def runtime_status(clients: Clients) -> object:
    return await clients[0].status()


async def test_stop_container_deadline_adds_grace(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    runtime.request_timeout = 5
    fake.faults.hang("StopContainer")
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded):
        await runtime.stop_container("c", 30)
    assert trio.current_time() - start == pytest.approx(35.0, abs=0.01)
    assert fake.calls_of("StopContainer")[0].args["timeout"] == 30


async def test_exec_sync_deadline(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    runtime.request_timeout = 5
    fake.faults.hang("ExecSync")
    start = trio.current_time()
    with pytest.raises(DeadlineExceeded):
        await runtime.exec_sync("c", ["true"], timeout=3)
    assert trio.current_time() - start == pytest.approx(8.0, abs=0.01)
    # timeout 0: no deadline at all, only cancellation ends it
    with trio.move_on_after(10_000) as scope:
        await runtime.exec_sync("c", ["true"], timeout=0)
    assert scope.cancelled_caught


async def test_pull_image_has_no_deadline(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    _, images = clients
    images.request_timeout = 5
    fake.pullable.add("docker.io/library/big:1")
    fake.faults.delay("PullImage", 3600)
    start = trio.current_time()
    ref = await images.pull_image("big:1")
    assert trio.current_time() - start == pytest.approx(3600, abs=0.01)
    assert (await images.image_status("docker.io/library/big:1")).id == ref  # type: ignore[union-attr]


async def test_absent_image_pull_fails_with_our_type(clients: Clients) -> None:
    _, images = clients
    with pytest.raises(ImagePullFailed, match="failed to pull and unpack image") as info:
        await images.pull_image("does-not-exist:v0")
    assert info.value.code is Status.UNKNOWN
    assert await images.image_status("does-not-exist:v0") is None


async def test_cancel_scope_cancels_the_rpc_on_the_wire(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.faults.hang("StopPodSandbox", times=1)
    with trio.move_on_after(0.2) as scope:
        await runtime.stop_pod_sandbox("x")
    assert scope.cancelled_caught
    await trio.sleep(0.05)
    record = fake.calls_of("StopPodSandbox")[0]
    assert record.outcome == "cancelled"
    assert record.finished == pytest.approx(0.2 + record.time, abs=0.05)
    # the channel is still usable afterwards
    assert (await runtime.version()).runtime_name == "fakeruntime"


async def test_runtime_killed_mid_call_then_restarted(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    await runtime.version()  # connected
    fake.faults.crash("ListContainers")
    with pytest.raises(RuntimeUnavailable, match="connection to runtime lost"):
        await runtime.list_containers()
    with pytest.raises(RuntimeUnavailable, match="not listening"):
        await runtime.version()
    await trio.sleep(60)
    await fake.restart()
    assert (await runtime.version()).runtime_name == "fakeruntime"


async def test_state_survives_a_runtime_restart(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    cfg = sandbox_config()
    sandbox = await runtime.run_pod_sandbox(cfg)
    cid = await runtime.create_container(sandbox, container_config(), cfg)
    await runtime.start_container(cid)
    await fake.crash()
    await fake.restart()
    assert [c.id for c in await runtime.list_containers(state=api.CONTAINER_RUNNING)] == [cid]


async def test_no_socket_is_runtime_unavailable(aio_loop: None, short_tmp: Path) -> None:
    async with connect(f"unix://{short_tmp}/missing.sock") as (runtime, _):
        with pytest.raises(RuntimeUnavailable, match="not listening"):
            await runtime.version()


async def test_stale_socket_is_runtime_unavailable(aio_loop: None, short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the file stays, nobody listens: ECONNREFUSED
    async with connect(f"unix://{path}") as (runtime, _):
        with pytest.raises(RuntimeUnavailable):
            await runtime.version()


async def test_messages_over_16_mib_are_refused(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    huge = sandbox_config()
    huge.annotations["blob"] = "x" * (16 * 1024 * 1024 + 1)
    with pytest.raises(MessageTooLarge):
        await runtime.run_pod_sandbox(huge)
    assert fake.calls_of("RunPodSandbox") == []
    # just under the limit still goes through
    fine = sandbox_config()
    fine.annotations["blob"] = "x" * (15 * 1024 * 1024)
    assert await runtime.run_pod_sandbox(fine)


async def test_oversized_response_is_refused(fake: FakeRuntime, clients: Clients) -> None:
    runtime, _ = clients
    cfg = sandbox_config()
    cfg.annotations["blob"] = "x" * (9 * 1024 * 1024)
    await runtime.run_pod_sandbox(cfg)
    cfg2 = sandbox_config("two", "uid-2")
    cfg2.annotations["blob"] = "y" * (9 * 1024 * 1024)
    await runtime.run_pod_sandbox(cfg2)
    with pytest.raises(MessageTooLarge):
        await runtime.list_pod_sandbox()  # 18 MiB answer


async def test_calls_without_a_loop_explain_themselves() -> None:
    channel = CriChannel("unix:///nonexistent.sock")
    with pytest.raises(RuntimeError, match="trio-asyncio loop"):
        channel.channel()


async def test_closed_clients_refuse_calls(fake: FakeRuntime) -> None:
    async with connect(fake.endpoint) as (runtime, _):
        await runtime.version()
    with pytest.raises(RuntimeError, match="closed"):
        await runtime.version()


async def test_concurrent_calls_share_one_connection(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.faults.delay("Version", 1)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(runtime.version)
    assert trio.current_time() - start == pytest.approx(1, abs=0.01)
    assert len(fake.calls_of("Version")) == 50


async def test_at_most_100_calls_in_flight(
    fake: FakeRuntime, clients: Clients, autojump_clock: trio.abc.Clock
) -> None:
    runtime, _ = clients
    fake.faults.delay("Version", 1)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(150):
            nursery.start_soon(runtime.version)
    assert trio.current_time() - start == pytest.approx(2, abs=0.05)
    arrivals = sorted(round(c.time - start) for c in fake.calls_of("Version"))
    assert arrivals.count(0) == 100
    assert arrivals.count(1) == 50


async def test_priority_calls_do_not_queue_behind_the_shared_limit(
    fake: FakeRuntime, autojump_clock: trio.abc.Clock
) -> None:
    """The PLEG's relist (``PRIORITY``) passes calls waiting for the shared slots."""
    from kubelet.cri.channel import PRIORITY

    fake.faults.hang("ContainerStatus")
    async with CriChannel(fake.endpoint, max_concurrent_calls=2) as channel:
        runtime = RuntimeClient(channel)
        answered: list[str] = []

        async def plain(rpc: str) -> None:
            if rpc == "ContainerStatus":
                await runtime.container_status("c1")
            else:
                await runtime.version()
            answered.append(rpc)

        async def relist() -> None:
            PRIORITY.set(True)
            await runtime.list_pod_sandbox()
            answered.append("relist")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(plain, "ContainerStatus")  # both shared slots hang
            nursery.start_soon(plain, "ContainerStatus")
            await trio.sleep(1)
            nursery.start_soon(plain, "Version")  # waits for a shared slot
            await trio.sleep(1)
            nursery.start_soon(relist)
            await trio.sleep(1)
            assert answered == ["relist"]
            nursery.cancel_scope.cancel()


async def test_node_status_runtime_calls_pass_the_shared_limit(
    fake: FakeRuntime, autojump_clock: trio.abc.Clock, tmp_path: Path
) -> None:
    """The node's status reads the runtime's Version, Status and images in the priority
    lane: with every shared slot held by hung pod-worker calls it is still gathered."""
    from kubelet.config import resolve
    from kubelet.cri import ImageClient
    from kubelet.node import MachineInfo, NodeIdentity
    from kubelet.node.facts import FactGatherer

    machine = MachineInfo(
        num_cores=2, memory_bytes=1 << 33, hugepages={}, machine_id="m", system_uuid="u",
        boot_id="b", kernel_version="6.1.0", os_image="Debian", operating_system="linux",
        architecture="amd64", hostname="node-1",
    )  # fmt: skip
    options = resolve(["--root-dir", str(tmp_path), "--container-runtime-endpoint", fake.endpoint])
    fake.faults.hang("ContainerStatus")
    async with CriChannel(fake.endpoint, max_concurrent_calls=2) as channel:
        runtime = RuntimeClient(channel)
        gatherer = FactGatherer(
            options,
            runtime,
            ImageClient(channel),
            lambda: (True, ""),
            machine=machine,
            node=NodeIdentity("node-1", "node-1", ("10.0.0.5",)),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.container_status, "c1")  # both shared slots hang
            nursery.start_soon(runtime.container_status, "c1")
            await trio.sleep(1)
            with trio.fail_after(5):
                facts = await gatherer.gather()
            nursery.cancel_scope.cancel()
    assert facts.runtime_errors == ()
    assert facts.runtime_name


async def test_grpc_timeout_tells_the_runtime_our_deadline(
    aio_loop: None, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The runtime learns the deadline from ``grpc-timeout``: ``ceil(ours) + 1`` s as
    grpclib encodes it (milliseconds rounded down; whole seconds rounded down above
    10 s), never shorter than ours; none for calls without one."""
    import trio_asyncio
    from grpclib.const import Cardinality, Handler
    from grpclib.server import Server, Stream

    seen: list[float | None] = []

    async def version(stream: Stream[api.VersionRequest, api.VersionResponse]) -> None:
        await stream.recv_message()
        seen.append(None if stream.deadline is None else stream.deadline.time_remaining())
        await stream.send_message(api.VersionResponse(runtime_name="recorder"))

    class Recorder:
        def __mapping__(self) -> dict[str, Handler]:
            return {
                "/runtime.v1.RuntimeService/Version": Handler(
                    version, Cardinality.UNARY_UNARY, api.VersionRequest, api.VersionResponse
                )
            }

    server = Server([Recorder()])
    await trio_asyncio.aio_as_trio(server.start)(path=str(short_tmp / "rec.sock"))
    try:
        async with connect(f"unix://{short_tmp}/rec.sock") as (runtime, _):
            for timeout in (2.5, 15.9, 120.0, None):
                runtime.request_timeout = timeout  # type: ignore[assignment]
                assert (await runtime.version()).runtime_name == "recorder"
    finally:
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()
    assert seen[:3] == pytest.approx([3.999, 16.0, 120.0], abs=0.01)
    assert seen[3] is None


async def test_calls_arm_no_grpclib_timer(
    fake: FakeRuntime, clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Trio deadline is the only timer of a call: grpclib's own (an asyncio timer
    per call that trio-asyncio keeps until it would have fired, 2 min later) is not
    armed. (The in-process FakeRuntime's server side still arms one.)"""
    import grpclib.client
    from grpclib.utils import DeadlineWrapper

    armed = 0

    class Counting(DeadlineWrapper):
        def start(self, deadline: Any) -> Any:
            nonlocal armed
            armed += 1
            return super().start(deadline)

    monkeypatch.setattr(grpclib.client, "DeadlineWrapper", Counting)
    runtime, _ = clients
    for _ in range(5):
        await runtime.version()
    assert armed == 0


async def test_a_call_cancelled_before_it_starts(
    fake: FakeRuntime, autojump_clock: trio.abc.Clock
) -> None:
    """Cancelled before its asyncio task ever ran: the call raises Cancelled at once,
    never reaches the runtime, and gives its slot back."""
    async with CriChannel(fake.endpoint, max_concurrent_calls=1) as channel:
        runtime = RuntimeClient(channel)
        await runtime.version()
        with trio.CancelScope() as scope:
            scope.cancel()
            await runtime.list_containers()
        assert scope.cancelled_caught
        with trio.fail_after(1):
            await runtime.version()
    assert fake.rpcs().count("ListContainers") == 0


class _Announcer:
    """A runtime whose Version answer announces 1 GiB, sends 64 bytes of it and stalls."""

    def __mapping__(self) -> dict[str, Handler]:
        return {
            "/runtime.v1.RuntimeService/Version": Handler(
                self.version, Cardinality.UNARY_UNARY, api.VersionRequest, api.VersionResponse
            )
        }

    async def version(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_initial_metadata()
        await stream._stream.send_data(struct.pack(">?I", False, 1 << 30) + b"\0" * 64)
        await asyncio.Event().wait()


async def test_an_announced_gibibyte_answer_is_refused_before_it_is_read(
    aio_loop: None, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    server = Server([_Announcer()])
    path = str(short_tmp / "announcer.sock")
    await trio_asyncio.aio_as_trio(server.start)(path=path)
    try:
        async with connect(f"unix://{path}") as (runtime, _):
            start = trio.current_time()
            with pytest.raises(MessageTooLarge, match=f"larger than max \\({1 << 30} vs"):
                await runtime.version()
            assert trio.current_time() == start  # the prefix decided, not a deadline
    finally:
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()
