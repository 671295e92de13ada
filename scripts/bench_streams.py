#!/usr/bin/env python3
"""Exec latency and port-forward throughput through the kubelet, against direct paths.

    sudo .venv/bin/python scripts/bench_streams.py [--rounds 50] [--mib 64] [--idle 1000]

Needs containerd up and no other kubelet on it. Starts a ``kubelet`` process with a static
busybox pod (an httpd serving a ``--mib`` MiB file on 8080, and a ``cat``), its :10250
server on a free loopback port with anonymous access (flag defaults), then measures, each
way with the same WebSocket client (``kubelet.testing.wschannels``, channel protocol v4):

* exec ``true``, connect to exit status: through the kubelet (``/exec/...``, TLS) and
  straight to containerd's streaming server (the URL of a CRI Exec of our own);
* one line echoed by ``cat`` on an open exec stream, stdin to stdout and back;
* a port-forward download of the file (HTTP/1.0 over the forwarded stream): through the
  kubelet (``/portForward/...?port=8080``), straight to containerd's streaming server, and
  plain HTTP to the pod IP; with the kubelet's CPU time (``/proc/<pid>/stat``) per MiB;
* ``--idle`` idle exec streams held open through the kubelet while ``/healthz`` is timed
  (0 to skip).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import trio
import trio_asyncio

from kubelet.cri import RuntimeClient, api, connect, labels
from kubelet.testing import wschannels as ch

CONTAINERD = "unix:///run/containerd/containerd.sock"
NODE = "bench-streams"
POD = f"web-{NODE}"
MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: default}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: httpd
      image: docker.io/library/busybox:1.35
      command: ["sh", "-c"]
      args: ["mkdir -p /www && dd if=/dev/zero of=/www/big bs=1048576 count={mib} 2>/dev/null
              && touch /www/ready; trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait"]
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@functools.cache
def tls() -> ssl.SSLContext:
    """The client's TLS (made once: loading the system roots costs ~0.1 s)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


# -- a download client at C speed ---------------------------------------------------------
# The socket and TLS are the ssl module's (C), in a thread; Python touches each WebSocket
# frame header only. The clients of a real cluster (kube-apiserver, Go) are not the
# bottleneck of a port-forward; a Trio TLS client (4 ms of CPU per MiB here) would be.

READ = 1 << 20


class ChannelZeroCounter:
    """Counts the bytes of channel 0 in the server's WebSocket frames (unmasked), the
    channel byte of each message left out, until a close frame."""

    def __init__(self) -> None:
        self.got = 0
        self.closed = False
        self._header = bytearray()
        self._left = 0
        self._channel_next = False
        self._counting = False

    def feed(self, data: memoryview) -> None:
        i, n = 0, len(data)
        while i < n and not self.closed:
            if not self._left:
                self._header.append(data[i])
                i += 1
                self._parse_header()
            elif self._channel_next:
                self._counting, self._channel_next = data[i] == 0, False
                self._left -= 1
                i += 1
            else:
                take = min(self._left, n - i)
                self.got += take if self._counting else 0
                self._left -= take
                i += take

    def _parse_header(self) -> None:
        h = self._header
        if len(h) < 2:
            return
        short = h[1] & 0x7F
        size = 2 + {126: 2, 127: 8}.get(short, 0) + (4 if h[1] & 0x80 else 0)
        if len(h) < size:
            return
        length = int.from_bytes(h[2 : size - (4 if h[1] & 0x80 else 0)] or bytes([short]), "big")
        opcode = h[0] & 0x0F
        self._header = bytearray()
        self.closed = opcode == 8
        self._left = length
        if opcode in (1, 2):
            self._channel_next = length > 0
        elif opcode != 0:
            self._counting = False


def ws_handshake(sock: socket.socket, path: str, protocol: str) -> bytes:
    """The WebSocket opening handshake; the bytes that came after the 101."""
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
        f"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n".encode()
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed during the WebSocket handshake")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"WebSocket handshake refused: {head[:80]!r}")
    return rest


def masked_frame(payload: bytes) -> bytes:
    """One binary frame from a client (masked; payloads under 64 KiB)."""
    mask = os.urandom(4)
    n = len(payload)
    length = bytes([0x80 | n]) if n < 126 else bytes([0xFE]) + n.to_bytes(2, "big")
    return b"\x82" + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def fast_ws_download(sock: socket.socket, path: str, protocol: str, first: bytes, size: int) -> int:
    """Port-forward over WebSocket: ``first`` on channel 0, then count channel 0's bytes
    until ``size`` or the end of the stream."""
    with sock:
        counter = ChannelZeroCounter()
        counter.feed(memoryview(ws_handshake(sock, path, protocol)))
        sock.sendall(masked_frame(b"\x00" + first))
        buf = bytearray(READ)
        view = memoryview(buf)
        while counter.got < size and not counter.closed:
            n = sock.recv_into(buf)
            if not n:
                break
            counter.feed(view[:n])
        return counter.got


def fast_http_download(address: tuple[str, int], path: str, size: int) -> int:
    """HTTP/1.0 GET: every byte of the answer, until ``size`` or the end."""
    with socket.create_connection(address) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        got = 0
        buf = bytearray(READ)
        while got < size:
            n = sock.recv_into(buf)
            if not n:
                break
            got += n
        return got


Dial = Callable[[str], Awaitable[tuple[trio.abc.Stream, str]]]
"""Opens a stream for ``kind`` (exec / portforward): the connection and the path to ask."""


class Bench:
    def __init__(self, runtime: RuntimeClient, port: int, container: str, sandbox: str) -> None:
        self.runtime = runtime
        self.port = port
        self.container = container
        self.sandbox = sandbox
        self.upgraded: list[float] = []

    async def via_kubelet(self, path: str) -> tuple[trio.abc.Stream, str]:
        stream = await trio.open_ssl_over_tcp_stream(
            "127.0.0.1", self.port, ssl_context=tls(), https_compatible=True
        )
        return stream, path

    async def via_runtime(self, url: str) -> tuple[trio.abc.Stream, str]:
        rest = url.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        return await trio.open_tcp_stream(host, int(port)), "/" + path

    async def exec_stream(self, direct: bool, cmd: list[str], stdin: bool) -> ch.ChannelClient:
        if direct:
            url = await self.runtime.exec(
                api.ExecRequest(container_id=self.container, cmd=cmd, stdin=stdin, stdout=True)
            )
            stream, path = await self.via_runtime(url)
        else:
            query = "&".join(f"command={c}" for c in cmd) + ("&input=1" if stdin else "")
            stream, path = await self.via_kubelet(f"/exec/default/{POD}/httpd?{query}&output=1")
        return await ch.ChannelClient.connect(stream, path, [ch.V4])

    async def exec_true(self, direct: bool) -> float:
        started = time.perf_counter()
        client = await self.exec_stream(direct, ["true"], stdin=False)
        self.upgraded.append(time.perf_counter() - started)
        await client.run()
        assert client.status() == ch.success_status(), client.received
        return time.perf_counter() - started

    async def echo_round_trips(self, direct: bool, n: int) -> list[float]:
        client = await self.exec_stream(direct, ["cat"], stdin=True)
        times = []
        for i in range(n):
            line = b"%d\n" % i
            started = time.perf_counter()
            await client.send(ch.STDIN, line)
            while not client.received.get(ch.STDOUT, b"").endswith(line):
                data = bytes(await client.stream.receive_some(1 << 16))
                client.ws.receive_data(data or None)
                for event in client.ws.events():
                    await client._handle(event)
            times.append(time.perf_counter() - started)
        await trio.aclose_forcefully(client.stream)
        return times

    async def forwarded_socket(self, direct: bool, port: int) -> tuple[socket.socket, str]:
        """A connection for a WebSocket port-forward to ``port`` of the pod, and its path:
        through the kubelet (TLS) or straight to containerd's streaming server."""
        if direct:
            url = await self.runtime.port_forward(self.sandbox, [port])
            hostport, _, path = url.split("://", 1)[1].partition("/")
            host, _, number = hostport.rpartition(":")
            return socket.create_connection((host, int(number))), "/" + path
        path = f"/portForward/default/{POD}?port={port}"
        sock = socket.create_connection(("127.0.0.1", self.port))
        return tls().wrap_socket(sock), path

    async def forward_download(self, direct: bool, size: int) -> int:
        """The file from the pod's httpd, read by ``fast_ws_download``."""
        sock, path = await self.forwarded_socket(direct, 8080)
        request = b"GET /big HTTP/1.0\r\n\r\n"
        return await trio.to_thread.run_sync(fast_ws_download, sock, path, ch.V4, request, size)


def summary(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"| {name} | {statistics.median(ms):.2f} | {p90:.2f} | {len(ms)} |"


async def wait_for_pod(runtime: RuntimeClient) -> tuple[str, str, str]:
    """The httpd container, its sandbox and the pod IP, once the file is written."""
    with trio.fail_after(120):
        while True:
            found = await runtime.list_containers(
                state=api.CONTAINER_RUNNING,
                labels={labels.POD_NAME: POD, labels.CONTAINER_NAME: "httpd"},
            )
            if found:
                cid, sandbox = found[0].id, found[0].pod_sandbox_id
                done = await runtime.exec_sync(cid, ["test", "-f", "/www/ready"], 5)
                if done.exit_code == 0:
                    status = await runtime.pod_sandbox_status(sandbox)
                    return cid, sandbox, status.status.network.ip
            await trio.sleep(0.2)


async def wait_for_kubelet(port: int) -> None:
    async with httpx.AsyncClient(verify=tls()) as client:
        with trio.fail_after(60):
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"https://127.0.0.1:{port}/healthz")).text == "ok":
                        return
                await trio.sleep(0.2)


async def measure(args: argparse.Namespace, runtime: RuntimeClient, pid: int, port: int) -> None:
    await wait_for_kubelet(port)
    cid, sandbox, ip = await wait_for_pod(runtime)
    bench = Bench(runtime, port, cid, sandbox)
    print(f"pod {POD} ip {ip}; kubelet pid {pid} on 127.0.0.1:{port}\n")
    print("| exec, channel v4 | median ms | p90 ms | n |\n|---|---|---|---|")
    for direct, name in ((False, "exec `true` via the kubelet"), (True, "exec `true` direct")):
        await bench.exec_true(direct)  # warm-up
        bench.upgraded.clear()
        print(summary(name, [await bench.exec_true(direct) for _ in range(args.rounds)]))
        print(summary("… of which until the 101", bench.upgraded))
    for direct, name in ((False, "stdin→stdout line, via kubelet"), (True, "same, direct")):
        print(summary(name, await bench.echo_round_trips(direct, args.rounds * 4)))
    await forward_figures(bench, pid, ip, args.mib << 20, args.forward_rounds)
    if args.idle:
        await idle_streams(bench, args.idle, port, args.manifests)


PATHS = ("via the kubelet", "direct to containerd's server", "plain TCP to the pod IP")


async def forward_once(bench: Bench, ip: str, path: str, size: int) -> int:
    if path == PATHS[2]:
        return await trio.to_thread.run_sync(fast_http_download, (ip, 8080), "/big", size + 4096)
    return await bench.forward_download(path == PATHS[1], size)


async def idle_cpu_rate(pid: int, seconds: float = 2.0) -> float:
    """The kubelet's own CPU seconds per second while nothing is forwarded."""
    before = cpu_seconds(pid)
    await trio.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


async def forward_figures(bench: Bench, pid: int, ip: str, size: int, rounds: int) -> None:
    """The download each way, the three paths taking turns (the machine's load
    changes from second to second), with the kubelet's CPU time per MiB it forwarded:
    as measured, and net of its CPU rate while idle (its other work)."""
    idle = await idle_cpu_rate(pid)
    print(f"\nkubelet CPU while idle: {idle * 1000:.1f} ms/s")
    for kind in ("download",):
        rates: dict[str, list[float]] = {name: [] for name in PATHS}
        cpu: list[float] = []
        net: list[float] = []
        for _ in range(rounds):
            for name in PATHS:
                before, started = cpu_seconds(pid), time.perf_counter()
                got = await forward_once(bench, ip, name, size)
                took = time.perf_counter() - started
                rates[name].append(got / took / 2**20)
                if name == PATHS[0]:
                    used = cpu_seconds(pid) - before
                    cpu.append(used * 1000 / (got / 2**20))
                    net.append((used - idle * took) * 1000 / (got / 2**20))
        print_forward_table(kind, size, rounds, rates, cpu, net)


def print_forward_table(
    kind: str,
    size: int,
    rounds: int,
    rates: dict[str, list[float]],
    cpu: list[float],
    net: list[float],
) -> None:
    print(f"\n| port-forward {kind} ({size >> 20} MiB, {rounds} rounds) | MiB/s best | median "
          "| kubelet CPU ms/MiB (median; net of idle) |\n|---|---|---|---|")  # fmt: skip
    for name in PATHS:
        shown = "-"
        if name == PATHS[0]:
            shown = f"{statistics.median(cpu):.2f}; {statistics.median(net):.2f}"
        print(f"| {name} | {max(rates[name]):.0f} | {statistics.median(rates[name]):.0f} "
              f"| {shown} |")  # fmt: skip
    ours = statistics.median(rates[PATHS[0]])
    print(
        f"\nvia the kubelet, as a share of (medians): direct to containerd "
        f"{ours / statistics.median(rates[PATHS[1]]):.2f}, "
        f"the pod IP {ours / statistics.median(rates[PATHS[2]]):.2f}"
    )


OTHER = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - {{name: c, image: docker.io/library/busybox:1.35, command: ["sleep", "3600"]}}
"""


async def pod_start(runtime: RuntimeClient, manifests: Path, name: str) -> float:
    """Seconds from writing a static pod's manifest to its container running."""
    started = time.perf_counter()
    (manifests / f"{name}.yaml").write_text(OTHER.format(name=name))
    with trio.fail_after(60):
        while not await runtime.list_containers(
            state=api.CONTAINER_RUNNING, labels={labels.POD_NAME: f"{name}-{NODE}"}
        ):
            await trio.sleep(0.01)
    return time.perf_counter() - started


async def idle_streams(bench: Bench, n: int, port: int, manifests: Path) -> None:
    async def healthz_ms() -> list[float]:
        times = []
        async with httpx.AsyncClient(verify=tls()) as client:
            for _ in range(50):
                started = time.perf_counter()
                response = await client.get(f"https://127.0.0.1:{port}/healthz")
                assert response.text == "ok"
                times.append(time.perf_counter() - started)
        return times

    quiet = await healthz_ms()
    alone = await pod_start(bench.runtime, manifests, "other-a")
    streams = []
    started = time.perf_counter()
    for _ in range(n):
        streams.append(await bench.exec_stream(False, ["cat"], stdin=True))
    opened = time.perf_counter() - started
    loaded = await healthz_ms()
    crowded = await pod_start(bench.runtime, manifests, "other-b")
    print(f"\n{n} idle exec streams through the kubelet opened in {opened:.1f} s")
    print("| /healthz (new TLS connection each) | median ms | p90 ms | n |\n|---|---|---|---|")
    print(summary("no streams", quiet))
    print(summary(f"{n} idle streams", loaded))
    print(f"\na new static pod, manifest written → running: {alone:.2f} s alone, "
          f"{crowded:.2f} s beside {n} idle streams")  # fmt: skip
    for client in streams:
        await trio.aclose_forcefully(client.stream)


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    manifests = work / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(MANIFEST.format(mib=args.mib))
    port = free_port()
    kubelet = subprocess.Popen(
        [
            sys.executable, "-m", "kubelet", "--pod-manifest-path", str(manifests),
            "--hostname-override", NODE, "--root-dir", str(work / "root"),
            "--address", "127.0.0.1", "--port", str(port), "--healthz-port=0",
            "--read-only-port=0", "--fail-swap-on=false", "--fail-cgroupv1=false",
            "--container-runtime-endpoint", CONTAINERD,
            "--file-check-frequency", "1s", "--max-open-files", "65536",
            "--cgroups-per-qos=false", "--enforce-node-allocatable=",
        ],
        stdout=subprocess.DEVNULL, stderr=(work / "kubelet.log").open("wb"),
    )  # fmt: skip
    try:
        async with trio_asyncio.open_loop(), connect(CONTAINERD) as (runtime, _):
            args.manifests = manifests
            try:
                await measure(args, runtime, kubelet.pid, port)
            finally:
                with trio.CancelScope(shield=True):
                    await remove_pods(runtime, manifests)
    finally:
        kubelet.terminate()
        kubelet.wait(10)
        print(f"\nkubelet log: {work / 'kubelet.log'}")


async def remove_pods(runtime: RuntimeClient, manifests: Path) -> None:
    """The manifests go, the kubelet tears the pods down; what is left is removed here."""
    for manifest in manifests.iterdir():
        manifest.unlink()

    async def ours() -> list[api.PodSandbox]:
        found = await runtime.list_pod_sandbox()
        return [s for s in found if s.labels.get(labels.POD_NAME, "").endswith(f"-{NODE}")]

    with trio.move_on_after(60):
        while await ours():
            await trio.sleep(0.5)
    for sandbox in await ours():
        await runtime.stop_pod_sandbox(sandbox.id)
        await runtime.remove_pod_sandbox(sandbox.id)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--forward-rounds", type=int, default=5)
    trio.run(main, parser.parse_args())
