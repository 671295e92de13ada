"""A CRI streaming server for FakeRuntime: exec, attach and port-forward over WebSocket.

A real runtime answers CRI ``Exec``/``Attach``/``PortForward`` with a one-time URL on its
own HTTP server (containerd: ``http://127.0.0.1:<random port>/exec/<8-character token>``,
tokens valid one minute and used once) and serves the stream there. This server does the
same, in-process on 127.0.0.1 (an ephemeral port), so that the kubelet's proxy and real
clients can be tested on a fake clock:

* ``register(kind, request)`` stores a CRI request and returns its URL (FakeRuntime's RPCs
  call it once wired).
* WebSocket with the channel protocols of ``wschannels`` (v5, v4, v1 and base64 variants)
  for exec and attach; ``v4.channel.k8s.io`` for port-forward, to a TCP address chosen by
  ``port_target`` (``127.0.0.1:<port>`` by default), and SPDY/3.1 ``portforward.k8s.io``
  for port-forward (``fakespdy``: what kubectl falls back to). A subprotocol it does not
  know is a ``403 Forbidden`` with no body, as containerd 1.6 answers; an unknown or used
  token a ``404 page not found``. Exec and attach over SPDY/3.1 too (``fakespdy``, the
  remotecommand protocols v4 and older, as containerd 1.6: what the kubelet's translator
  of WebSocket v5 and kubectl's SPDY fallback speak); the session's protocol is then
  ``"v4.channel.k8s.io (SPDY)"``.
* What a command does is ``exec_handler(io) -> exit code`` (``default_exec`` knows
  ``cat``, ``echo``, ``true``, ``false``, ``sh -c "exit N"``, ``sleep N``, ``stty size``,
  ``test -d|-e|-f``, and ``tar cf -`` / ``tar -xmf - -C DIR`` on ``files``, the container's
  in-memory files, as ``kubectl cp`` runs them);
  attach runs ``attach_handler`` (by default the container's process is ``cat``).
* ``sessions`` records every stream (kind, protocol, command, resizes, exit code, how it
  ended); ``active`` counts those running, so tests can see that nothing is left.

Run it inside a nursery: ``async with FakeStreamingServer().serve() as server: ...``.
"""

from __future__ import annotations

import contextlib
import functools
import io as io_module
import json
import secrets
import struct
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import attrs
import h11
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import RemoteProtocolError

from kubelet.cri import api

from . import fakespdy as spdy
from . import wschannels as ch

SPDY_REMOTECOMMAND = (ch.V4, "v3.channel.k8s.io", "v2.channel.k8s.io", ch.V1)
"""What containerd 1.6 negotiates for exec and attach over SPDY."""
TOKEN_TTL = 60.0
"""A URL is valid this long after the CRI call (containerd's request cache)."""
CLOSE_WAIT = 1.0
"""After our close frame, how long the client has to answer before the socket closes."""
BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@attrs.define
class Session:
    """One stream as the server saw it."""

    kind: str
    target: str
    """Container id (exec, attach) or sandbox id (port-forward)."""
    protocol: str
    cmd: tuple[str, ...] = ()
    tty: bool = False
    ports: tuple[int, ...] = ()
    resizes: list[tuple[int, int]] = attrs.field(factory=list)
    exit_code: int | None = None
    ended: str = ""
    """"exited", "client closed", "client gone", "port-forward done"."""


@attrs.define
class StreamIO:
    """What an exec or attach handler sees: its command, stdin, the terminal, outputs."""

    cmd: tuple[str, ...]
    tty: bool
    session: Session
    _stdin: trio.MemoryReceiveChannel[bytes]
    _write: Callable[[int, bytes], Awaitable[None]]
    size: tuple[int, int] | None = None
    resized: trio.Event = attrs.field(factory=trio.Event)
    files: dict[str, bytes] = attrs.field(factory=dict)
    """The container's files, absolute path → content (what ``tar`` and ``test`` see)."""

    async def read(self) -> bytes:
        """The next stdin chunk; b"" at end of input (v5 close signal or the client gone)."""
        try:
            return await self._stdin.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b""

    async def stdout(self, data: bytes) -> None:
        await self._write(ch.STDOUT, data)

    async def stderr(self, data: bytes) -> None:
        await self._write(ch.STDERR if not self.tty else ch.STDOUT, data)


Handler = Callable[[StreamIO], Awaitable[int]]


async def default_exec(io: StreamIO) -> int:
    """A few commands, enough for kubectl-shaped tests; anything else exits 127."""
    cmd = list(io.cmd)
    name = cmd[0] if cmd else ""
    if name == "cat":
        while data := await io.read():
            await io.stdout(data)
        return 0
    if name == "echo":
        await io.stdout((" ".join(cmd[1:]) + "\n").encode())
        return 0
    if name in ("true", "false"):
        return 0 if name == "true" else 1
    if name == "sleep" and len(cmd) == 2:
        await trio.sleep(float(cmd[1]))
        return 0
    if name == "tar":
        return await fake_tar(io, cmd[1:])
    if name == "test" and len(cmd) == 3 and cmd[1] in ("-d", "-e", "-f"):
        return 0 if _exists(io.files, cmd[2], cmd[1]) else 1
    if cmd[:2] == ["sh", "-c"] and len(cmd) == 3 and cmd[2].startswith("exit "):
        return int(cmd[2].split()[1])
    if cmd == ["stty", "size"]:
        if io.size is None:
            await io.stderr(b"stty: standard input: Not a tty\n")
            return 1
        width, height = io.size
        await io.stdout(f"{height} {width}\n".encode())
        return 0
    await io.stderr(f"sh: {name}: not found\n".encode())
    return 127


def _exists(files: dict[str, bytes], path: str, test: str) -> bool:
    path = "/" + path.strip("/")
    is_dir = path == "/" or any(f.startswith(path + "/") for f in files)
    return {"-d": is_dir, "-f": path in files, "-e": is_dir or path in files}[test]


async def fake_tar(io: StreamIO, args: list[str]) -> int:
    """``tar cf - PATH`` and ``tar -xmf - [-C DIR]``, as ``kubectl cp`` runs them."""
    flags = args[0].lstrip("-") if args else ""
    rest = args[1:]
    if "f" not in flags or not rest or rest[0] != "-":
        await io.stderr(b"tar: only archives on stdin/stdout are faked\n")
        return 2
    if "c" in flags:
        return await _tar_create(io, rest[1:])
    if "x" in flags:
        directory = rest[2] if len(rest) >= 3 and rest[1] == "-C" else "/"
        return await _tar_extract(io, directory)
    await io.stderr(b"tar: need c or x\n")
    return 2


async def _tar_create(io: StreamIO, paths: list[str]) -> int:
    buffer = io_module.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path in paths:
            root = "/" + path.strip("/")
            chosen = sorted(
                f for f in io.files if f == root or f.startswith(root.rstrip("/") + "/")
            )
            if not chosen:
                await io.stderr(f"tar: {path}: No such file or directory\n".encode())
                return 2
            for name in chosen:
                info = tarfile.TarInfo(name.lstrip("/"))
                info.size = len(io.files[name])
                info.mode = 0o644
                archive.addfile(info, io_module.BytesIO(io.files[name]))
    await io.stdout(buffer.getvalue())
    return 0


async def _tar_extract(io: StreamIO, directory: str) -> int:
    data = b""
    while chunk := await io.read():
        data += chunk
    try:
        with tarfile.open(fileobj=io_module.BytesIO(data), mode="r:") as archive:
            for member in archive.getmembers():
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    path = "/" + "/".join(p for p in (directory.strip("/"), member.name) if p)
                    io.files[path] = extracted.read()
    except tarfile.TarError as exc:
        await io.stderr(f"tar: {exc}\n".encode())
        return 2
    return 0


async def default_attach(io: StreamIO) -> int:
    """A container whose process echoes its input (``cat``)."""
    while data := await io.read():
        await io.stdout(data)
    return 0


@attrs.define
class _Pending:
    kind: str
    request: Any
    expires: float


class FakeStreamingServer:
    """See the module docstring."""

    def __init__(
        self,
        *,
        exec_handler: Handler = default_exec,
        attach_handler: Handler = default_attach,
        port_target: Callable[[str, int], tuple[str, int]] | None = None,
    ) -> None:
        self.exec_handler = exec_handler
        self.attach_handler = attach_handler
        self.port_target = port_target or (lambda sandbox, port: ("127.0.0.1", port))
        self.sessions: list[Session] = []
        self.active = 0
        self.requests: list[tuple[str, str, list[tuple[bytes, bytes]]]] = []
        """(method, target, headers) of every request received, for assertions."""
        self.address: tuple[str, int] | None = None
        self.files: dict[str, dict[str, bytes]] = {}
        """Per container id, the files its fake commands see (``StreamIO.files``)."""
        self._pending: dict[str, _Pending] = {}

    # -- the CRI side --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.address is None:
            raise RuntimeError("FakeStreamingServer is not serving")
        return f"http://{self.address[0]}:{self.address[1]}"

    def register(self, kind: str, request: Any) -> str:
        """Keep a CRI request (``exec``, ``attach`` or ``portforward``); its one-time URL."""
        if kind not in ("exec", "attach", "portforward"):
            raise ValueError(f"unknown streaming kind {kind!r}")
        token = secrets.token_urlsafe(6)[:8]
        self._pending[token] = _Pending(kind, request, trio.current_time() + TOKEN_TTL)
        return f"{self.base_url}/{kind}/{token}"

    def _consume(self, kind: str, token: str) -> Any | None:
        pending = self._pending.pop(token, None)
        if pending is None or pending.kind != kind or trio.current_time() > pending.expires:
            return None
        return pending.request

    # -- serving ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serve(self, host: str = "127.0.0.1") -> AsyncIterator[FakeStreamingServer]:
        listeners = await trio.open_tcp_listeners(0, host=host)
        sockname = listeners[0].socket.getsockname()
        self.address = (str(sockname[0]), int(sockname[1]))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._connection, listeners)
                yield self
                nursery.cancel_scope.cancel()
        finally:
            self.address = None

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            await self._serve(stream)
        except* BROKEN:
            pass  # the client (the kubelet's proxy) went away
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        raw = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                raw += data
                conn.receive_data(data)
                continue
            break
        if not isinstance(event, h11.Request):
            return
        headers = [(bytes(k), bytes(v)) for k, v in event.headers]
        target = event.target.decode("latin-1")
        self.requests.append((event.method.decode(), target, headers))
        parts = target.split("?", 1)[0].strip("/").split("/")
        request = self._consume(parts[0], parts[1]) if len(parts) == 2 else None
        if request is None:
            await _plain(stream, 404, b"404 page not found\n")
            return
        upgrade = dict(headers).get(b"upgrade", b"").lower()
        if upgrade == b"spdy/3.1" and parts[0] == "portforward":
            await self._spdy_port_forward(stream, conn, headers, request)
            return
        if upgrade == b"spdy/3.1":
            await self._spdy_remote_command(stream, conn, headers, parts[0], request)
            return
        if upgrade != b"websocket":
            shown = upgrade.decode("latin-1") or "none"
            message = f"fake streaming server speaks WebSocket and SPDY (Upgrade: {shown})\n"
            await _plain(stream, 400, message.encode())
            return
        ws = WSConnection(ConnectionType.SERVER)
        try:
            ws.receive_data(raw)
            hello = next((e for e in ws.events() if isinstance(e, Request)), None)
        except RemoteProtocolError as exc:  # x/net/websocket: 400 and the reason
            await _plain(stream, 400, f"{exc}\n".encode())
            return
        if hello is None:
            await _plain(stream, 400, b"bad WebSocket handshake\n")
            return
        allowed = (
            ch.PORTFORWARD_PROTOCOLS if parts[0] == "portforward" else (ch.REMOTECOMMAND_PROTOCOLS)
        )
        protocol = _negotiate(hello.subprotocols, allowed)
        if protocol is None:
            # containerd 1.6 (x/net/websocket): 403, no body
            await stream.send_all(ws.send(RejectConnection(status_code=403)))
            return
        await stream.send_all(ws.send(AcceptConnection(subprotocol=protocol or None)))
        link = _Link(stream, ws, protocol)
        if parts[0] == "portforward":
            await self._port_forward(link, request)
        else:
            await self._remote_command(link, parts[0], request)

    # -- exec and attach ------------------------------------------------------------------------

    async def _remote_command(self, link: _Link, kind: str, request: Any) -> None:
        if kind == "exec":
            assert isinstance(request, api.ExecRequest)
            cmd, handler = tuple(request.cmd), self.exec_handler
        else:
            assert isinstance(request, api.AttachRequest)
            cmd, handler = (), self.attach_handler
        session = Session(kind, request.container_id, link.protocol, cmd=cmd, tty=request.tty)
        self.sessions.append(session)
        self.active += 1
        stdin_send, stdin_receive = trio.open_memory_channel[bytes](0)
        files = self.files.setdefault(request.container_id, {})
        io = StreamIO(cmd, request.tty, session, stdin_receive, link.write, files=files)
        try:
            first = ch.STDOUT if request.stdout else ch.STDERR if request.stderr else ch.ERROR
            await link.write(first, b"")
            code: int | None = None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_client, link, io, stdin_send, nursery.cancel_scope)
                code = await handler(io)
                nursery.cancel_scope.cancel()
            if code is not None:  # else the client went away and the command was stopped
                session.exit_code = code
                session.ended = "exited"
                await self._finish(link, code, cmd)
        finally:
            self.active -= 1

    async def _finish(self, link: _Link, code: int, cmd: Sequence[str]) -> None:
        if link.protocol in (ch.V5, ch.V4, ch.V4_BASE64):
            await link.write(ch.ERROR, json.dumps(ch.exit_status(code, cmd)).encode())
        elif code != 0:
            await link.write(ch.ERROR, ch.exit_status(code, cmd)["message"].encode())
        await link.close()

    async def _read_client(
        self,
        link: _Link,
        io: StreamIO,
        stdin: trio.MemorySendChannel[bytes],
        scope: trio.CancelScope,
    ) -> None:
        try:
            async for channel, payload in link.messages():
                if channel == ch.STDIN:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await stdin.send(payload)
                elif channel == ch.RESIZE:
                    size = json.loads(payload)
                    io.size = (int(size["Width"]), int(size["Height"]))
                    io.session.resizes.append(io.size)
                    io.resized.set()
                    io.resized = trio.Event()
                elif channel == ch.CLOSE and link.protocol == ch.V5 and payload[:1] == b"\0":
                    await stdin.aclose()
            io.session.ended = "client closed" if link.peer_closed else "client gone"
            scope.cancel()  # the command is stopped before it could see its stdin end
        finally:
            await stdin.aclose()

    # -- port-forward ------------------------------------------------------------------------------

    async def _port_forward(self, link: _Link, request: Any) -> None:
        assert isinstance(request, api.PortForwardRequest)
        ports = tuple(int(p) for p in request.port)
        session = Session("portforward", request.pod_sandbox_id, link.protocol, ports=ports)
        self.sessions.append(session)
        self.active += 1
        try:
            conns: dict[int, trio.SocketStream] = {}
            async with trio.open_nursery() as nursery:
                for i, port in enumerate(ports):
                    prefix = struct.pack("<H", port)
                    await link.write(2 * i, prefix)
                    await link.write(2 * i + 1, prefix)
                    host, target = self.port_target(request.pod_sandbox_id, port)
                    try:
                        conns[i] = await trio.open_tcp_stream(host, target)
                    except OSError as exc:
                        message = (
                            f"error forwarding port {port} to pod {request.pod_sandbox_id}, "
                            f"uid : {exc}"
                        )
                        await link.write(2 * i + 1, message.encode())
                        continue
                    nursery.start_soon(self._port_to_client, link, 2 * i, conns[i])
                async for channel, payload in link.messages():
                    conn = conns.get(channel // 2) if channel % 2 == 0 else None
                    if conn is not None:
                        with contextlib.suppress(*BROKEN):
                            await conn.send_all(payload)
                session.ended = "client closed" if link.peer_closed else "client gone"
                nursery.cancel_scope.cancel()
        finally:
            for conn in conns.values():
                await trio.aclose_forcefully(conn)
            self.active -= 1

    async def _spdy_port_forward(
        self,
        stream: trio.abc.Stream,
        conn: h11.Connection,
        headers: list[tuple[bytes, bytes]],
        request: Any,
    ) -> None:
        """kubectl's SPDY port-forward (``fakespdy``), with the handshake's protocol check."""
        assert isinstance(request, api.PortForwardRequest)
        offered = _offered(headers)
        if offered and spdy.PROTOCOL not in offered:
            message = (
                f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
                f"server accepts [{spdy.PROTOCOL}]"
            )
            await _plain(stream, 403, message.encode())
            return
        leftover = _request_end(conn)
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n"
        )
        session = Session("portforward", request.pod_sandbox_id, "portforward.k8s.io (SPDY)")
        self.sessions.append(session)
        self.active += 1
        ports: list[int] = []
        try:
            target = functools.partial(self.port_target, request.pod_sandbox_id)
            await spdy.serve_port_forward(stream, leftover, target, ports)
            session.ended = "client closed"
        finally:
            session.ports = tuple(ports)
            self.active -= 1

    async def _spdy_remote_command(
        self,
        stream: trio.abc.Stream,
        conn: h11.Connection,
        headers: list[tuple[bytes, bytes]],
        kind: str,
        request: Any,
    ) -> None:
        """Exec or attach over SPDY (``fakespdy.serve_remote_command``), protocols as
        containerd 1.6 negotiates them (v4 and older; the client's first it knows)."""
        offered = _offered(headers)
        protocol = next((p for p in offered if p in SPDY_REMOTECOMMAND), None)
        if offered and protocol is None:
            message = (
                f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
                f"server accepts {list(SPDY_REMOTECOMMAND)}"
            )
            await _plain(stream, 403, message.encode())
            return
        protocol = protocol or ch.V1
        leftover = _request_end(conn)
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\n\r\n" % protocol.encode()
        )
        cmd = tuple(request.cmd) if kind == "exec" else ()
        handler = self.exec_handler if kind == "exec" else self.attach_handler
        session = Session(kind, request.container_id, f"{protocol} (SPDY)", cmd, request.tty)
        self.sessions.append(session)
        kinds = ["error"] + [
            name
            for name, wanted in (
                ("stdin", request.stdin),
                ("stdout", request.stdout),
                ("stderr", request.stderr and not request.tty),
                ("resize", request.tty and protocol in (ch.V4, "v3.channel.k8s.io")),
            )
            if wanted
        ]
        files = self.files.setdefault(request.container_id, {})
        holder: list[StreamIO] = []

        async def command(write: spdy.Write, stdin: trio.MemoryReceiveChannel[bytes]) -> bytes:
            names = {ch.STDOUT: "stdout", ch.STDERR: "stderr"}

            async def out(channel: int, data: bytes) -> None:
                await write(names.get(channel, ""), data)

            io = StreamIO(cmd, request.tty, session, stdin, out, files=files)
            holder.append(io)
            code = await handler(io)
            session.exit_code = code
            if protocol == ch.V4:
                return json.dumps(ch.exit_status(code, cmd)).encode()
            return ch.exit_status(code, cmd)["message"].encode() if code else b""

        def resize(width: int, height: int) -> None:
            for io in holder:
                io.size = (width, height)
                session.resizes.append(io.size)
                io.resized.set()
                io.resized = trio.Event()

        self.active += 1
        try:
            session.ended = await spdy.serve_remote_command(
                stream, leftover, kinds, command, resize
            )
        finally:
            self.active -= 1

    async def _port_to_client(self, link: _Link, channel: int, conn: trio.SocketStream) -> None:
        with contextlib.suppress(*BROKEN):
            while data := await conn.receive_some(65536):
                await link.write(channel, data)


def _offered(headers: list[tuple[bytes, bytes]]) -> list[str]:
    """The SPDY client's ``X-Stream-Protocol-Version`` values, in order."""
    return [
        p.strip().decode("latin-1")
        for k, v in headers
        if k.lower() == b"x-stream-protocol-version"
        for p in v.split(b",")
    ]


def _request_end(conn: h11.Connection) -> bytes:
    """What followed the upgrade request (the first SPDY bytes)."""
    while conn.next_event() not in (h11.PAUSED, h11.NEED_DATA):
        pass
    return bytes(conn.trailing_data[0])


def _negotiate(offered: Sequence[str], allowed: Sequence[str]) -> str | None:
    """The client's first protocol we know ("" when it offered none; None: no match)."""
    if not offered:
        return ""
    for protocol in offered:
        if protocol in allowed:
            return protocol
    return None


async def _plain(stream: trio.abc.Stream, status: int, body: bytes) -> None:
    reason = {400: b"Bad Request", 404: b"Not Found"}.get(status, b"Error")
    await stream.send_all(
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"X-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, reason, len(body))
        + body
    )


class _Link:
    """One accepted WebSocket: framed writes (one at a time) and decoded channel messages."""

    def __init__(self, stream: trio.abc.Stream, ws: WSConnection, protocol: str) -> None:
        self.stream = stream
        self.ws = ws
        self.protocol = protocol
        self.peer_closed = False
        self._lock = trio.Lock()

    async def write(self, channel: int, data: bytes) -> None:
        message = ch.encode(channel, data, self.protocol)
        event = (
            TextMessage(data=message) if isinstance(message, str) else BytesMessage(data=message)
        )
        async with self._lock:
            await self.stream.send_all(self.ws.send(event))

    async def close(self) -> None:
        """Our close frame, then a short wait for the client's."""
        with contextlib.suppress(*BROKEN):
            async with self._lock:
                await self.stream.send_all(self.ws.send(CloseConnection(code=1000)))
            with trio.move_on_after(CLOSE_WAIT):
                while not self.peer_closed:
                    data = bytes(await self.stream.receive_some(65536))
                    if not data:
                        break
                    self.ws.receive_data(data)
                    for event in self.ws.events():
                        if isinstance(event, CloseConnection):
                            self.peer_closed = True

    async def messages(self) -> AsyncIterator[tuple[int, bytes]]:
        """Channel messages until the client closes or goes away."""
        messages = ch.Reassembler()
        while True:
            try:
                data = bytes(await self.stream.receive_some(65536))
            except BROKEN:
                return
            if not data:
                return
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, BytesMessage | TextMessage):
                    message = messages.feed(event)
                    decoded = ch.decode(message) if message is not None else None
                    if decoded is not None:
                        yield decoded
                elif isinstance(event, Ping):
                    async with self._lock:
                        await self.stream.send_all(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.peer_closed = True
                    with contextlib.suppress(*BROKEN):
                        async with self._lock:
                            await self.stream.send_all(self.ws.send(event.response()))
                    return
