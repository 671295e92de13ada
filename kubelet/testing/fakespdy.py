"""SPDY/3.1 for the fake streaming server: port-forward, exec and attach (the server side).

kubectl 1.37 offers a WebSocket tunnel first and, refused, upgrades with SPDY
(``Upgrade: SPDY/3.1``, ``X-Stream-Protocol-Version: portforward.k8s.io``), as it does
against containerd 1.6. Facts (the SPDY/3 draft; moby/spdystream; cri-streaming's
``portforward/httpstream.go``):

* the framing is ``kubelet.server.spdy``'s (the kubelet's own SPDY client uses it too);
* per forwarded connection kubectl opens two streams with headers ``streamtype`` (``error``
  or ``data``), ``port`` and ``requestid``; each is answered with a SYN_REPLY; what comes on
  the data stream goes to the pod's port and back; a failure is text on the error stream;
* PINGs are echoed; no flow control (spdystream has none); RST_STREAM ends a stream.

Exec and attach (``serve_remote_command``, cri-streaming's ``remotecommand/httpstream.go``):
the client opens one stream per ``streamtype`` (``error``, ``stdin``, ``stdout``, ``stderr``,
``resize``), each answered with a SYN_REPLY; once all it asked for are there the command
runs: stdin's data is its input and stdin's FIN its end, each resize line (JSON
``{"Width":…,"Height":…}``) a terminal size; its output goes out on stdout and stderr; at
the end the error stream gets the status (v4: a ``metav1.Status``; older: the message), every
stream a FIN, and the connection a GOAWAY before it closes.

This is a test double: it trusts its peer (kubectl or the kubelet's translator) and handles
only what port-forward, exec and attach use.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

import attrs
import trio

from kubelet.server.spdy import (
    FLAG_FIN,
    GOAWAY,
    PING,
    RST_STREAM,
    SYN_STREAM,
    Frame,
    SpdyConnection,
)

BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
PROTOCOL = "portforward.k8s.io"
CHUNK = 32 << 10


@attrs.define
class _Forward:
    port: int
    data: int = 0
    error: int = 0
    conn: trio.SocketStream | None = None
    pending: list[bytes] = attrs.field(factory=list)
    client_done: bool = False
    connected: trio.Event = attrs.field(factory=trio.Event)


async def serve_port_forward(
    stream: trio.abc.Stream,
    leftover: bytes,
    target: Callable[[int], tuple[str, int]],
    ports: list[int],
) -> None:
    """Serve SPDY port-forward streams on an upgraded connection until the client goes.

    ``target(port)`` says where the pod's port is; every port asked for is appended to
    ``ports``.
    """
    spdy = SpdyConnection(stream, leftover)
    forwards: dict[str, _Forward] = {}
    by_stream: dict[int, _Forward] = {}
    async with trio.open_nursery() as nursery:
        async for frame in spdy.frames():
            if frame.control and frame.kind == SYN_STREAM:
                (stream_id,) = struct.unpack_from(">I", frame.payload)
                stream_id &= 0x7FFFFFFF
                headers = spdy.headers(frame.payload[10:])
                await spdy.reply(stream_id)
                key = headers.get("requestid", "")
                port = int(headers.get("port", "0") or 0)
                forward = forwards.setdefault(key, _Forward(port))
                by_stream[stream_id] = forward
                if headers.get("streamtype") == "data":
                    forward.data = stream_id
                else:
                    forward.error = stream_id
                if forward.data and forward.error:
                    ports.append(port)
                    nursery.start_soon(_forward, spdy, forward, target)
            elif frame.control and frame.kind == PING:
                await spdy.control(PING, frame.payload)
            elif frame.control and frame.kind == RST_STREAM:
                (stream_id,) = struct.unpack_from(">I", frame.payload)
                gone = by_stream.get(stream_id & 0x7FFFFFFF)
                if gone is not None and gone.conn is not None:
                    await trio.aclose_forcefully(gone.conn)
            elif frame.control and frame.kind == GOAWAY:
                break
            elif not frame.control:
                await _to_pod(by_stream.get(frame.kind), frame)
        nursery.cancel_scope.cancel()


async def _to_pod(forward: _Forward | None, frame: Frame) -> None:
    if forward is None or frame.kind != forward.data:
        return  # the error stream's end (kubectl writes nothing there)
    if forward.conn is None:
        forward.pending.append(frame.payload)
    else:
        with contextlib.suppress(*BROKEN):
            await forward.conn.send_all(frame.payload)
    if frame.flags & FLAG_FIN:
        forward.client_done = True
        if forward.conn is not None:
            with contextlib.suppress(*BROKEN):
                await forward.conn.send_eof()


async def _forward(
    spdy: SpdyConnection, forward: _Forward, target: Callable[[int], tuple[str, int]]
) -> None:
    host, port = target(forward.port)
    try:
        conn = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        message = f"error forwarding port {forward.port} to pod: {exc}"
        with contextlib.suppress(*BROKEN):
            await spdy.data(forward.error, message.encode(), fin=True)
            await spdy.data(forward.data, b"", fin=True)
        return
    with contextlib.suppress(*BROKEN):
        while forward.pending:  # drained before the frame loop may send on ``conn`` itself
            await conn.send_all(forward.pending.pop(0))
    forward.conn = conn
    with contextlib.suppress(*BROKEN):
        if forward.client_done:
            await conn.send_eof()
    try:
        with contextlib.suppress(*BROKEN):
            while data := await conn.receive_some(CHUNK):
                await spdy.data(forward.data, data)
        with contextlib.suppress(*BROKEN):
            await spdy.data(forward.data, b"", fin=True)
            await spdy.data(forward.error, b"", fin=True)
    finally:
        await trio.aclose_forcefully(conn)


Write = Callable[[str, bytes], Awaitable[None]]
"""Output of a command: (stream type, data)."""
Command = Callable[[Write, trio.MemoryReceiveChannel[bytes]], Awaitable[bytes]]
"""Runs a command with its output and stdin; returns what goes on the error stream."""


async def serve_remote_command(
    stream: trio.abc.Stream,
    leftover: bytes,
    kinds: Sequence[str],
    command: Command,
    on_resize: Callable[[int, int], None],
) -> str:
    """Serve one exec or attach on an upgraded connection; how it ended (``exited``,
    ``client gone``)."""
    spdy = SpdyConnection(stream, leftover)
    ids: dict[str, int] = {}
    result: list[bytes] = []
    async with contextlib.aclosing(spdy.frames()) as frames:
        if not await _accept_streams(spdy, frames, ids, kinds):
            return "client gone"
        stdin_send, stdin_receive = trio.open_memory_channel[bytes](0)

        async def write(kind: str, data: bytes) -> None:
            if kind in ids and data:
                await spdy.data(ids[kind], data)

        async def run(scope: trio.CancelScope) -> None:
            result.append(await command(write, stdin_receive))
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, nursery.cancel_scope)
            await _client_frames(spdy, frames, ids, stdin_send, on_resize)
            nursery.cancel_scope.cancel()  # the client went: the command is stopped
        stdin_send.close()
    if not result:
        return "client gone"
    with contextlib.suppress(*BROKEN):
        if result[0]:
            await spdy.data(ids["error"], result[0])
        for kind in ("error", "stdout", "stderr"):
            if kind in ids:
                await spdy.data(ids[kind], b"", fin=True)
        await spdy.goaway()
    return "exited"


async def _accept_streams(
    spdy: SpdyConnection,
    frames: AsyncGenerator[Frame],
    ids: dict[str, int],
    kinds: Sequence[str],
) -> bool:
    """Reply to the client's SYN_STREAMs until every stream type in ``kinds`` is open."""
    if not kinds:
        return True
    async for frame in frames:
        if frame.control and frame.kind == SYN_STREAM:
            stream_id = frame.stream_id()
            headers = spdy.syn_headers(frame)
            await spdy.reply(stream_id)
            ids[headers.get("streamtype", "")] = stream_id
            if set(kinds) <= ids.keys():
                return True
        elif frame.control and frame.kind == PING:
            await spdy.control(PING, frame.payload)
    return False


async def _client_frames(
    spdy: SpdyConnection,
    frames: AsyncGenerator[Frame],
    ids: dict[str, int],
    stdin: trio.MemorySendChannel[bytes],
    on_resize: Callable[[int, int], None],
) -> None:
    """stdin and resizes to the command until the client goes away."""
    resizes = b""
    async for frame in frames:
        if frame.control and frame.kind == PING:
            await spdy.control(PING, frame.payload)
        elif frame.control and frame.kind == GOAWAY:
            return
        elif not frame.control and frame.kind == ids.get("stdin"):
            if frame.payload:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stdin.send(frame.payload)
            if frame.fin:
                await stdin.aclose()
        elif not frame.control and frame.kind == ids.get("resize"):
            resizes += frame.payload
            while b"\n" in resizes:
                line, _, resizes = resizes.partition(b"\n")
                size = json.loads(line)
                on_resize(int(size["Width"]), int(size["Height"]))
