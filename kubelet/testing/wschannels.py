"""Kubernetes' WebSocket channel protocols, both ends: framing, exit status, a client.

Facts (apimachinery ``httpstream/wsstream``, the kubelet's and containerd's
``streaming/remotecommand`` and ``streaming/portforward``):

* Subprotocols for exec/attach: ``v5.channel.k8s.io`` (adds the close signal),
  ``v4.channel.k8s.io`` (the exit status as a ``metav1.Status`` JSON on the error
  channel), ``channel.k8s.io`` (and no subprotocol at all: v1, plain-text errors), and the
  ``base64.`` variants of v4 and v1 (text messages). containerd 1.6 knows v4 and older;
  kubectl 1.37 offers ``v5.channel.k8s.io`` only, then falls back to SPDY.
* Every binary message is one channel byte and the payload: stdin 0, stdout 1, stderr 2,
  error 3, resize 4 (``{"Width":80,"Height":24}``); base64 protocols send text: the
  channel as an ASCII digit and the payload in base64. v5 adds channel 255: a message
  ``[255, n]`` closes channel n (the client's end of stdin).
* Once upgraded, the server sends an empty message on the lowest channel it writes
  (stdout, else stderr, else error).
* Port-forward over WebSocket (``v4.channel.k8s.io``): two channels per requested port,
  data ``2i`` and error ``2i+1``; the server's first message on each is the port as two
  bytes, little-endian.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import attrs
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
"""v5's close signal: ``[255, channel]``."""

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
REMOTECOMMAND_PROTOCOLS = (V5, V4, V4_BASE64, V1, V1_BASE64)
"""What the fake streaming server accepts for exec and attach, most preferred first."""
PORTFORWARD_PROTOCOLS = (V4, V4_BASE64)
"""Port-forward over WebSocket (the runtime's side; kubectl tunnels SPDY instead)."""
SPDY_TUNNEL_PORTFORWARD = "SPDY/3.1+portforward.k8s.io"
"""kubectl's WebSocket port-forward: SPDY frames inside WebSocket messages (not served)."""


def is_base64(protocol: str) -> bool:
    return "base64." in protocol


def encode(channel: int, data: bytes, protocol: str) -> bytes | str:
    """One channel message for ``protocol``."""
    if is_base64(protocol):
        return chr(ord("0") + channel) + base64.b64encode(data).decode()
    return bytes([channel]) + data


def decode(message: bytes | str) -> tuple[int, bytes] | None:
    """A message's channel and payload (None: empty message, which carries nothing)."""
    if isinstance(message, str):
        if not message:
            return None
        return ord(message[0]) - ord("0"), base64.b64decode(message[1:])
    if not message:
        return None
    return message[0], bytes(message[1:])


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def exit_status(code: int, cmd: Sequence[str]) -> dict[str, Any]:
    """The error channel's status for a command that exited ``code`` (as containerd words it)."""
    if code == 0:
        return success_status()
    shown = "[" + " ".join(cmd) + "]"
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            "command terminated with non-zero exit code: "
            f"error executing command {shown}, exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def status_exit_code(status: dict[str, Any]) -> int | None:
    """The exit code a status says (0 for Success; None when it is not an exit)."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in status.get("details", {}).get("causes", []):
            if cause.get("reason") == "ExitCode":
                return int(cause["message"])
    return None


class Reassembler:
    """Whole messages out of wsproto's message fragments."""

    def __init__(self) -> None:
        self._bytes = b""
        self._text = ""

    def feed(self, event: BytesMessage | TextMessage) -> bytes | str | None:
        if isinstance(event, TextMessage):
            self._text += event.data
            if not event.message_finished:
                return None
            text, self._text = self._text, ""
            return text
        self._bytes += bytes(event.data)
        if not event.message_finished:
            return None
        data, self._bytes = self._bytes, b""
        return data


# -- a client ---------------------------------------------------------------------------------


class HandshakeRefused(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"upgrade refused: {status} {body[:200]!r}")
        self.status = status
        self.body = body


@attrs.define
class ChannelClient:
    """A WebSocket channel client over any trio stream (what kubectl does, minus SPDY).

    ``received[channel]`` accumulates what each channel brought; ``closed`` is set when the
    server's close frame (or the end of the connection) arrived.
    """

    stream: trio.abc.Stream
    ws: WSConnection
    protocol: str
    received: dict[int, bytes] = attrs.field(factory=dict)
    closed: trio.Event = attrs.field(factory=trio.Event)
    close_code: int | None = None
    _messages: Reassembler = attrs.field(factory=Reassembler)
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)

    @classmethod
    async def connect(
        cls,
        stream: trio.abc.Stream,
        path: str,
        protocols: Sequence[str],
        *,
        host: str = "localhost",
        extra_headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> ChannelClient:
        """Open the WebSocket on ``stream`` (``HandshakeRefused`` when not 101)."""
        ws = WSConnection(ConnectionType.CLIENT)
        await stream.send_all(
            ws.send(
                Request(
                    host=host,
                    target=path,
                    subprotocols=list(protocols),
                    extra_headers=list(extra_headers),
                )
            )
        )
        status = 0
        body = b""
        while True:
            data = bytes(await stream.receive_some(65536))
            ws.receive_data(data or None)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    return cls(stream, ws, event.subprotocol or "")
                if isinstance(event, RejectConnection):
                    status = event.status_code
                    if not event.has_body:
                        raise HandshakeRefused(status, b"")
                elif isinstance(event, RejectData):
                    body += bytes(event.data)
                    if event.body_finished:
                        raise HandshakeRefused(status, body)
            if not data:
                raise HandshakeRefused(status, body)

    async def send(self, channel: int, data: bytes) -> None:
        message = encode(channel, data, self.protocol)
        event = (
            TextMessage(data=message) if isinstance(message, str) else BytesMessage(data=message)
        )
        async with self._send_lock:
            await self.stream.send_all(self.ws.send(event))

    async def close_channel(self, channel: int) -> None:
        """v5's close signal (half-closes stdin)."""
        async with self._send_lock:
            await self.stream.send_all(self.ws.send(BytesMessage(data=bytes([CLOSE, channel]))))

    async def resize(self, width: int, height: int) -> None:
        await self.send(RESIZE, json.dumps({"Width": width, "Height": height}).encode())

    async def close(self, code: int = 1000) -> None:
        async with self._send_lock:
            await self.stream.send_all(self.ws.send(CloseConnection(code=code)))

    async def run(self) -> None:
        """Read messages until the server closes (answering its pings and close)."""
        try:
            while not self.closed.is_set():
                data = bytes(await self.stream.receive_some(65536))
                self.ws.receive_data(data or None)
                for event in self.ws.events():
                    await self._handle(event)
                if not data:
                    break
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.closed.set()

    async def _handle(self, event: object) -> None:
        if isinstance(event, BytesMessage | TextMessage):
            message = self._messages.feed(event)
            decoded = decode(message) if message is not None else None
            if decoded is not None:
                channel, payload = decoded
                self.received[channel] = self.received.get(channel, b"") + payload
        elif isinstance(event, Ping):
            async with self._send_lock:
                await self.stream.send_all(self.ws.send(event.response()))
        elif isinstance(event, CloseConnection):
            self.close_code = event.code
            try:
                async with self._send_lock:
                    await self.stream.send_all(self.ws.send(event.response()))
            except Exception:  # the server may be gone already
                pass
            self.closed.set()

    def status(self) -> dict[str, Any] | None:
        """The error channel as a status (v4/v5), None when nothing came on it."""
        raw = self.received.get(ERROR, b"")
        return json.loads(raw) if raw else None

    def text(self, channel: int) -> str:
        return self.received.get(channel, b"").decode(errors="replace")
