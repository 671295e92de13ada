"""Lifecycle hooks: exec/HTTP/sleep handlers, upstream's messages, preStop bounded by grace."""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs
import trio
from grpclib.const import Status

from kubelet.api import (
    Container,
    ExecAction,
    HTTPGetAction,
    LifecycleHandler,
    ObjectMeta,
    Pod,
    PodSpec,
    TCPSocketAction,
)
from kubelet.api.pod import Lifecycle, SleepAction
from kubelet.cri import CriError
from kubelet.runtime.hooks import run_handler, run_post_start, run_pre_stop

POD = Pod(metadata=ObjectMeta(name="web", namespace="default", uid="u1"), spec=PodSpec())


@attrs.define
class Reply:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@attrs.define
class FakeExec:
    """ExecSync that answers ``reply`` after ``takes`` seconds (inf: never)."""

    reply: Reply | Exception = attrs.field(factory=Reply)
    takes: float = 0.0
    calls: list[tuple[float, str, list[str], int]] = attrs.field(factory=list)
    finished: int = 0

    async def exec_sync(self, container_id: str, cmd: Iterable[str], timeout: int = 0) -> Reply:
        self.calls.append((trio.current_time(), container_id, list(cmd), timeout))
        if math.isinf(self.takes):
            await trio.sleep_forever()
        await trio.sleep(self.takes)
        self.finished += 1
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def container(
    post_start: LifecycleHandler | None = None, pre_stop: LifecycleHandler | None = None
) -> Container:
    return Container(name="app", lifecycle=Lifecycle(post_start=post_start, pre_stop=pre_stop))


def exec_handler(*cmd: str) -> LifecycleHandler:
    return LifecycleHandler(exec=ExecAction(command=cmd))


async def test_post_start_exec_success_and_no_hook() -> None:
    runner = FakeExec()
    c = container(post_start=exec_handler("sh", "-c", "echo hi"))
    assert await run_post_start(runner, POD, c, "c1", pod_ip="10.0.0.1") is None
    assert [call[1:] for call in runner.calls] == [("c1", ["sh", "-c", "echo hi"], 0)]
    assert await run_post_start(runner, POD, Container(name="bare"), "c1", pod_ip="") is None
    assert await run_pre_stop(runner, POD, Container(name="bare"), "c1", 30, pod_ip="") is None


async def test_exec_failure_message_is_upstreams() -> None:
    runner = FakeExec(Reply(stdout=b"out\n", stderr=b"bad", exit_code=3))
    c = container(post_start=exec_handler("sh", "-c", "exit 3"))
    message = await run_post_start(runner, POD, c, "c1", pod_ip="10.0.0.1")
    assert message == (
        'Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "web_default(u1)" '
        "failed - error: command 'sh -c exit 3' exited with 3: bad, "
        'message: "out\\nbad"'
    )
    runner.reply = CriError("ExecSync", "container is not running", Status.UNKNOWN)
    message = await run_post_start(runner, POD, c, "c1", pod_ip="10.0.0.1")
    assert message is not None and message.endswith(
        'failed - error: rpc error: code = Unknown desc = container is not running, message: ""'
    )


async def test_pre_stop_is_bounded_by_the_grace_period(autojump_clock: trio.abc.Clock) -> None:
    runner = FakeExec(takes=math.inf)
    c = container(pre_stop=exec_handler("drain"))
    start = trio.current_time()
    assert await run_pre_stop(runner, POD, c, "c1", 12, pod_ip="") is None
    assert trio.current_time() - start == 12
    # a quick hook returns at once; no grace means no hook at all
    runner = FakeExec(takes=3)
    start = trio.current_time()
    assert await run_pre_stop(runner, POD, c, "c1", 30, pod_ip="") is None
    assert trio.current_time() - start == 3
    assert await run_pre_stop(runner, POD, c, "c1", 0, pod_ip="") is None
    assert len(runner.calls) == 1


async def test_pre_stop_failure_is_reported(autojump_clock: trio.abc.Clock) -> None:
    runner = FakeExec(Reply(exit_code=1), takes=2)
    c = container(pre_stop=exec_handler("drain"))
    message = await run_pre_stop(runner, POD, c, "c1", 30, pod_ip="")
    assert message is not None and "command 'drain' exited with 1" in message


async def test_sleep_hook_sleeps_and_honours_cancellation(autojump_clock: trio.abc.Clock) -> None:
    c = container(
        post_start=LifecycleHandler(sleep=SleepAction(seconds=5)),
        pre_stop=LifecycleHandler(sleep=SleepAction(seconds=29)),
    )
    runner = FakeExec()
    start = trio.current_time()
    assert await run_post_start(runner, POD, c, "c1", pod_ip="") is None
    assert trio.current_time() - start == 5
    # TERM-05: a 29 s preStop within 30 s of grace runs to its end
    start = trio.current_time()
    assert await run_pre_stop(runner, POD, c, "c1", 30, pod_ip="") is None
    assert trio.current_time() - start == 29
    # a shorter grace cuts it; an outer cancellation (a kubelet shutdown) ends it at once
    start = trio.current_time()
    await run_pre_stop(runner, POD, c, "c1", 10, pod_ip="")
    assert trio.current_time() - start == 10
    with trio.move_on_after(1):
        await run_pre_stop(runner, POD, c, "c1", 30, pod_ip="")
    assert trio.current_time() - start == 11
    assert runner.calls == []


async def test_http_hook_without_a_host_or_port() -> None:
    runner = FakeExec()
    handler = LifecycleHandler(http_get=HTTPGetAction(port=8080, path="/stop"))
    message = await run_handler(handler, runner, POD, Container(name="app"), "c1", pod_ip="")
    assert message == (
        'HTTP lifecycle hook (/stop) for Container "app" in Pod "web_default(u1)" failed - '
        "error: failed to find networking container: the pod has no IP"
    )
    named = LifecycleHandler(http_get=HTTPGetAction(port="admin", path="/stop"))
    message = await run_handler(named, runner, POD, Container(name="app"), "c1", pod_ip="10.0.0.1")
    assert message is not None and message.endswith(
        'error: strconv.Atoi: parsing "admin": invalid syntax'
    )


async def test_unsupported_handlers() -> None:
    runner = FakeExec()
    tcp = LifecycleHandler(tcp_socket=TCPSocketAction(port=80))
    message = await run_handler(tcp, runner, POD, Container(name="app"), "c1", pod_ip="")
    assert message == "Cannot run handler: invalid handler: tcpSocket is not supported"
    message = await run_handler(
        LifecycleHandler(), runner, POD, Container(name="a"), "c", pod_ip=""
    )
    assert message == "Cannot run handler: invalid handler: no action set"
