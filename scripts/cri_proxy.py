#!/usr/bin/env python3
"""A recording CRI proxy: a unix socket in front of a runtime that forwards every byte
unchanged and writes one JSON line per call.

    .venv/bin/python scripts/cri_proxy.py --listen /tmp/cri.sock \\
        --upstream /run/containerd/containerd.sock --out calls.jsonl
    .venv/bin/python scripts/cri_proxy.py --compare ours.jsonl theirs.jsonl \\
        [--pod NAME] [--pod-b NAME]

Point a kubelet's ``--container-runtime-endpoint`` (and image endpoint) at the listening
socket. The proxy reads a copy of each HTTP/2 frame as it passes (HPACK in both
directions, gRPC's length-prefixed messages): any method name, CRI v1 and v1alpha2 (the
two share their field numbers), unary and server-streaming calls. Each call's line has
``method``, ``rpc``, ``start`` and ``end`` (wall clock, seconds), ``status`` (grpc-status;
"" when the stream was reset or the connection closed), and where the request (or the
answer of RunPodSandbox / CreateContainer) names one: ``sandbox``, ``container`` and
``pod`` (namespace/name, also for calls naming only a container or sandbox id seen
before).

``--compare`` prints the calls of one pod in two traces side by side (each from the pod's
first call; ``--pod`` picks a pod by a part of its name, else the first pod with a
RunPodSandbox), with the image calls no pod is named in while the pod's calls run.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from collections.abc import Callable, Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any, TextIO

import attrs
import hpack
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubelet.cri import api as pb

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, CONTINUATION = 0x0, 0x1, 0x3, 0x9
END_STREAM, END_HEADERS, PADDED, PRIORITY = 0x1, 0x4, 0x8, 0x20
KEEP_BYTES = 4 << 20
"""The most of one call's request (or answer) kept to read its ids; the rest is forwarded
without a copy."""
ANSWERS_READ = {"RunPodSandbox", "CreateContainer"}
"""The answers that name something the later calls refer to."""
IMAGE_RPCS = {"ImageStatus", "PullImage"}


@attrs.define
class Call:
    """One call on one HTTP/2 stream."""

    method: str
    start: float
    request: bytearray = attrs.field(factory=bytearray)
    answer: bytearray = attrs.field(factory=bytearray)
    status: str = ""

    @property
    def rpc(self) -> str:
        return self.method.rsplit("/", 1)[-1]


@attrs.define
class Names:
    """Sandbox → pod and container → sandbox, as the calls reveal them (shared by all
    connections: the kubelet opens one per service)."""

    pods: dict[str, str] = attrs.field(factory=dict)
    sandboxes: dict[str, str] = attrs.field(factory=dict)

    def record(self, call: Call, end: float) -> dict[str, Any]:
        """The JSON line of a finished call."""
        sandbox, container, pod = self._ids(call)
        sandbox = sandbox or self.sandboxes.get(container, "")
        pod = pod or self.pods.get(sandbox, "")
        line: dict[str, Any] = {"method": call.method, "rpc": call.rpc, "pod": pod}
        line |= {"sandbox": sandbox, "container": container, "start": call.start, "end": end}
        line["status"] = call.status
        return line

    def _ids(self, call: Call) -> tuple[str, str, str]:
        request = _decode(call.rpc + "Request", call.request)
        answer = _decode(call.rpc + "Response", call.answer) if call.rpc in ANSWERS_READ else None
        sandbox = str(_field(request, "pod_sandbox_id") or _field(answer, "pod_sandbox_id"))
        container = str(_field(request, "container_id") or _field(answer, "container_id"))
        pod = _pod_name(_field(request, "config")) if call.rpc == "RunPodSandbox" else ""
        pod = pod or _pod_name(_field(request, "sandbox_config"))
        if sandbox and pod:
            self.pods[sandbox] = pod
        if container and sandbox:
            self.sandboxes[container] = sandbox
        return sandbox, container, pod


def _decode(message: str, data: bytearray) -> Any:
    """The first gRPC message of ``data`` as CRI ``message`` (None: unknown or partial)."""
    cls = getattr(pb, message, None)
    if cls is None or len(data) < 5 or data[0] != 0:  # 1: compressed, not read
        return None
    (length,) = struct.unpack(">I", data[1:5])
    if len(data) < 5 + length:
        return None
    try:
        return cls.FromString(bytes(data[5 : 5 + length]))
    except Exception:  # a message of another version or method: no ids
        return None


def _field(message: Any, name: str) -> Any:
    if message is None or name not in message.DESCRIPTOR.fields_by_name:
        return ""
    return getattr(message, name)


def _pod_name(config: Any) -> str:
    if not config or not config.HasField("metadata"):
        return ""
    return f"{config.metadata.namespace}/{config.metadata.name}"


@attrs.define
class Direction:
    """The frames of one direction of one connection, parsed from a copy of its bytes."""

    from_client: bool
    streams: dict[int, Call]
    on_end: Callable[[int], None]
    decoder: hpack.Decoder = attrs.field(factory=hpack.Decoder)
    buffer: bytearray = attrs.field(factory=bytearray)
    preface: bool = False
    block: bytearray = attrs.field(factory=bytearray)
    block_stream: int = 0
    block_end: bool = False

    def __attrs_post_init__(self) -> None:
        self.decoder.max_allowed_table_size = 1 << 20  # whatever the peer's SETTINGS allow
        self.decoder.max_header_list_size = 1 << 20

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if self.from_client and not self.preface:
            if len(self.buffer) < len(PREFACE):
                return
            del self.buffer[: len(PREFACE)]
            self.preface = True
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            kind, flags = self.buffer[3], self.buffer[4]
            stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            payload = bytes(self.buffer[9 : 9 + length])
            del self.buffer[: 9 + length]
            self._frame(kind, flags, stream, payload)

    def _frame(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if kind == HEADERS:
            payload = _unpad(payload, flags)
            if flags & PRIORITY:
                payload = payload[5:]
            self.block, self.block_stream = bytearray(payload), stream
            self.block_end = bool(flags & END_STREAM)
            if flags & END_HEADERS:
                self._headers()
        elif kind == CONTINUATION and stream == self.block_stream:
            self.block += payload
            if flags & END_HEADERS:
                self._headers()
        elif kind == DATA:
            call = self.streams.get(stream)
            if call is not None:
                kept = call.request if self.from_client else call.answer
                wanted = self.from_client or call.rpc in ANSWERS_READ
                if wanted and len(kept) < KEEP_BYTES:
                    kept += _unpad(payload, flags)
            if flags & END_STREAM and not self.from_client:
                self.on_end(stream)
        elif kind == RST_STREAM:
            self.on_end(stream)

    def _headers(self) -> None:
        headers = dict(self.decoder.decode(bytes(self.block), raw=False))
        stream = self.block_stream
        if self.from_client:
            if stream not in self.streams:
                self.streams[stream] = Call(str(headers.get(":path", "")), time.time())
            return
        call = self.streams.get(stream)
        if call is not None and "grpc-status" in headers:
            call.status = str(headers["grpc-status"])
        if self.block_end:
            self.on_end(stream)


def _unpad(payload: bytes, flags: int) -> bytes:
    if not flags & PADDED or not payload:
        return payload
    return payload[1 : len(payload) - payload[0]]


@attrs.define
class Recorder:
    """Where finished calls go: a JSON line each, flushed at once."""

    out: TextIO
    names: Names = attrs.field(factory=Names)

    def connection(self) -> tuple[Direction, Direction]:
        streams: dict[int, Call] = {}

        def end(stream: int) -> None:
            call = streams.pop(stream, None)
            if call is not None:
                self.write(call, time.time())

        return Direction(True, streams, end), Direction(False, streams, end)

    def write(self, call: Call, end: float) -> None:
        self.out.write(json.dumps(self.names.record(call, end)) + "\n")
        self.out.flush()


async def _pump(
    source: trio.SocketStream, sink: trio.SocketStream, parse: Direction, done: trio.CancelScope
) -> None:
    """Forward ``source`` to ``sink`` unchanged, parsing a copy; either side's end ends both."""
    try:
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)
            try:
                parse.feed(chunk)
            except Exception as exc:  # the record is lost, never the bytes
                print(f"cri_proxy: unreadable frames ({exc!r}); recording stops", file=sys.stderr)
                parse.feed = lambda data: None  # type: ignore[method-assign]
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        done.cancel()


async def _relay(client: trio.SocketStream, upstream: str, recorder: Recorder) -> None:
    to_server, to_client = recorder.connection()
    try:
        server = await trio.open_unix_socket(upstream)
    except OSError as exc:
        print(f"cri_proxy: cannot reach {upstream}: {exc}", file=sys.stderr)
        await client.aclose()
        return
    async with client, server, trio.open_nursery() as nursery:
        nursery.start_soon(_pump, client, server, to_server, nursery.cancel_scope)
        nursery.start_soon(_pump, server, client, to_client, nursery.cancel_scope)
    now = time.time()
    for call in list(to_server.streams.values()):  # cut off with the connection
        recorder.write(call, now)
    to_server.streams.clear()


async def serve(
    listen: str,
    upstream: str,
    recorder: Recorder,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept on the unix socket ``listen`` until cancelled; each connection is relayed to
    ``upstream`` on a connection of its own."""
    path = listen.removeprefix("unix://")
    if os.path.exists(path):
        os.unlink(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(path)
    sock.listen(128)
    listener = trio.SocketListener(sock)
    target = upstream.removeprefix("unix://")
    task_status.started()
    async with listener, trio.open_nursery() as nursery:
        while True:
            client = await listener.accept()
            nursery.start_soon(_relay, client, target, recorder)


# -- comparing two traces ----------------------------------------------------------------


def load(path: str) -> list[dict[str, Any]]:
    lines = Path(path).read_text().splitlines()
    return sorted((json.loads(x) for x in lines if x.strip()), key=lambda c: c["start"])


def pick_pod(calls: list[dict[str, Any]], part: str | None) -> str:
    """The pod named by ``part``, else the first pod whose sandbox was created."""
    for c in calls:
        if c["pod"] and (part in c["pod"] if part else c["rpc"] == "RunPodSandbox"):
            return str(c["pod"])
    raise SystemExit(f"no pod {'matching ' + part if part else 'with a RunPodSandbox'}")


def pod_calls(calls: list[dict[str, Any]], pod: str) -> list[dict[str, Any]]:
    """The pod's calls, and the image calls naming no pod while they run."""
    own = [c for c in calls if c["pod"] == pod]
    if not own:
        return []
    first, last = own[0]["start"], max(c["end"] for c in own)
    return [
        c
        for c in calls
        if c["pod"] == pod
        or (not c["pod"] and c["rpc"] in IMAGE_RPCS and first <= c["start"] <= last)
    ]


def rows(calls: list[dict[str, Any]]) -> Iterator[str]:
    t0 = calls[0]["start"] if calls else 0.0
    for c in calls:
        took = (c["end"] - c["start"]) * 1000
        yield f"{(c['start'] - t0) * 1000:8.1f} {c['rpc']:<20} {took:7.1f}"


def compare(a: str, b: str, pod_a: str | None, pod_b: str | None) -> str:
    """Two traces' calls for one pod, side by side: ms from the pod's first call, the
    RPC, ms it took."""
    calls_a, calls_b = load(a), load(b)
    name_a, name_b = pick_pod(calls_a, pod_a), pick_pod(calls_b, pod_b or pod_a)
    left, right = pod_calls(calls_a, name_a), pod_calls(calls_b, name_b)
    width = 38
    out = [f"{Path(a).name + ': ' + name_a:<{width}}  |  {Path(b).name}: {name_b}"]
    head = "   at ms rpc                  took ms"
    out.append(f"{head:<{width}}  |  {head}")
    for x, y in zip_longest(rows(left), rows(right), fillvalue=""):
        out.append(f"{x:<{width}}  |  {y}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", help="the proxy's unix socket (path or unix:// endpoint)")
    parser.add_argument("--upstream", default="/run/containerd/containerd.sock")
    parser.add_argument("--out", help="the JSON lines (default: stdout)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two recorded traces")
    parser.add_argument("--pod", help="compare: the pod whose name contains this (in A)")
    parser.add_argument("--pod-b", help="compare: the pod in B, when named otherwise")
    args = parser.parse_args()
    if args.compare:
        print(compare(*args.compare, args.pod, args.pod_b))
        return
    if not args.listen:
        parser.error("--listen or --compare is needed")
    out = open(args.out, "a") if args.out else sys.stdout  # noqa: SIM115  (open for the run)
    with out:
        trio.run(serve, args.listen, args.upstream, Recorder(out))


if __name__ == "__main__":
    main()
