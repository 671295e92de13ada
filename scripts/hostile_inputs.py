"""Hostile inputs of the bench (scripts/bench_hostile.py) that reach past the servers: pod
specs, volumes, logs, API bodies, gRPC, TLS files, plugin output, config files, streams.

Each is ``async def name(target, scale) -> str`` (a one-line summary of what it saw);
``scale`` is 1 for a full run and small for ``--quick``. What the kubelet should do is
in each docstring; an input whose defence is missing shows it in its summary and figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trio
from hostile_target import (
    MIB,
    PLUGIN_IMAGES,
    RESPONSE,
    Target,
    api_pod,
    http_get,
    limits,
    unmet,
)

from kubelet.server import spdy
from kubelet.testing import ChannelClient, HandshakeRefused

# -- 1. env expansion ---------------------------------------------------------------------------


def env_bomb_pod(name: str, depth: int = 40) -> dict[str, Any]:
    """~2 KB: each variable references the one before twice, so the last one would expand
    to 2^depth times the first."""
    env = [{"name": "A0", "value": "x" * 16}]
    env += [{"name": f"A{i}", "value": f"$(A{i - 1})$(A{i - 1})"} for i in range(1, depth)]
    pod = api_pod(name)
    pod["spec"]["containers"][0]["env"] = env
    return pod


def waiting_reason(target: Target, name: str) -> str:
    statuses = target.pod_status(name).get("containerStatuses") or [{}]
    return str(statuses[0].get("state", {}).get("waiting", {}).get("reason", ""))


async def env_bomb(target: Target, scale: float) -> str:
    """40 variables each ``$(A<i-1>)$(A<i-1>)``: CreateContainerConfigError, nothing else."""
    name = f"env-bomb-{time.monotonic_ns() % 10**6}"
    size = len(json.dumps(env_bomb_pod(name)))
    target.api.create(env_bomb_pod(name))
    reason = ""
    with trio.move_on_after(30):
        while reason != "CreateContainerConfigError":
            await trio.sleep(0.1)
            reason = waiting_reason(target, name)
    target.api.delete("Pod", "default", name, grace=0)
    text = f"{size} B pod, 40 levels: container waiting {reason or 'never'}"
    return text if reason == "CreateContainerConfigError" else unmet(text)


# -- 2, 3. volumes ------------------------------------------------------------------------------


def empty_dir_pod(name: str, size_limit: str | None = None) -> dict[str, Any]:
    volume: dict[str, Any] = {"name": "scratch", "emptyDir": {}}
    if size_limit is not None:
        volume["emptyDir"]["sizeLimit"] = size_limit
    pod = api_pod(name, volumes=[volume])
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/s"}]
    return pod


def make_files(directory: Path, count: int, width: int = 1000) -> None:
    """``count`` empty files, ``width`` per subdirectory (in a thread: at ~500 files a second
    on a busy ext4, a million take half an hour)."""
    for start in range(0, count, width):
        trio.from_thread.check_cancelled()  # the bench interrupted: stop here
        sub = directory / f"d{start // width}"
        sub.mkdir(exist_ok=True)
        for i in range(min(width, count - start)):
            os.close(os.open(sub / str(i), os.O_CREAT | os.O_WRONLY, 0o644))


async def volume_dir(target: Target, pod: str) -> Path:
    """The emptyDir of a running ``pod`` (created by the kubelet)."""
    if await target.wait_running(pod, 30) is None:
        raise RuntimeError(f"{pod} never ran")
    pod_dir = target.pod_dir(pod)
    assert pod_dir is not None
    return pod_dir / "volumes" / "kubernetes.io~empty-dir" / "scratch"


async def volume_walk(target: Target, scale: float) -> str:
    """1.2 M files in one emptyDir, 40 clients polling /stats/summary meanwhile."""
    name = f"walk-{time.monotonic_ns() % 10**6}"
    target.api.create(empty_dir_pod(name))
    directory = await volume_dir(target, name)
    count = int(1_200_000 * scale)
    t0 = time.monotonic()
    await trio.to_thread.run_sync(make_files, directory, count)
    made = time.monotonic() - t0
    answers: list[float] = []
    failed = 0

    async def client() -> None:
        nonlocal failed
        deadline = time.monotonic() + max(10.0, 30 * scale)
        while time.monotonic() < deadline:
            t = time.monotonic()
            status, _ = await http_get(target.read_only, "/stats/summary", timeout=30)
            if status == 200:
                answers.append(time.monotonic() - t)
            else:
                failed += 1

    async with trio.open_nursery() as nursery:
        for _ in range(40):
            nursery.start_soon(client)
    target.api.delete("Pod", "default", name, grace=0)
    await trio.to_thread.run_sync(shutil.rmtree, directory, True)
    answers.sort()
    slowest = f"{answers[-1]:.2f}" if answers else "-"
    median = f"{answers[len(answers) // 2]:.2f}" if answers else "-"
    text = (
        f"{count} files (made in {made:.0f} s); /stats/summary answered {len(answers)} times "
        f"(median {median} s, slowest {slowest} s), {failed} failed"
    )
    return text if answers and not failed else unmet(text)


async def size_limit_evasion(target: Target, scale: float) -> str:
    """200 MB behind 1 M empty files in a ``sizeLimit: 40Mi`` emptyDir: evicted."""
    name = f"sizelimit-{time.monotonic_ns() % 10**6}"
    target.api.create(empty_dir_pod(name, "40Mi"))
    directory = await volume_dir(target, name)
    count = int(1_000_000 * scale)
    await trio.to_thread.run_sync(make_files, directory, count)
    big = directory / "zz-last" / "payload"
    big.parent.mkdir()
    with big.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, 200 * 1000 * 1000)
    t0 = time.monotonic()
    status: dict[str, Any] = {}
    with trio.move_on_after(60 + 60 * scale):
        while status.get("reason") != "Evicted":
            await trio.sleep(0.5)
            status = dict(target.pod_status(name))
    took = time.monotonic() - t0
    evicted = status.get("reason") == "Evicted"
    target.api.delete("Pod", "default", name, grace=0)
    with contextlib.suppress(OSError):
        await trio.to_thread.run_sync(shutil.rmtree, directory, True)
    outcome = f"evicted after {took:.1f} s" if evicted else unmet(f"not evicted in {took:.0f} s")
    return f"{count} empty files, then 200 MB: {outcome}"


# -- 4, 9. container logs -----------------------------------------------------------------------


async def log_pod(target: Target, prefix: str) -> tuple[str, Path]:
    """A running API pod whose container log the bench may write: (pod, log path)."""
    name = f"{prefix}-{time.monotonic_ns() % 10**6}"
    target.api.create(api_pod(name))
    if await target.wait_running(name, 30) is None:
        raise RuntimeError(f"{name} never ran")
    container = target.container_of(name)
    assert container is not None and container.log_path
    return name, Path(container.log_path)


def cri_line(text: str) -> bytes:
    return f"2026-01-01T00:00:00.000000000Z stdout F {text}\n".encode()


def unblock_fifo(path: Path) -> None:
    """Give a reader blocked in ``open`` (or ``read``) of the FIFO its end of file."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


async def log_fifo_swap(target: Target, scale: float) -> str:
    """A FIFO renamed over a container's log while a follower reads it: the follower and
    every other request go on (the follower may end), nothing blocks on the FIFO."""
    pod, log = await log_pod(target, "fifo-log")
    log.write_bytes(cri_line("before"))
    tls = target.tls.context()
    follower: dict[str, Any] = {}

    async def follow() -> None:
        follower["status"], follower["body"] = await http_get(
            target.main, f"/containerLogs/default/{pod}/main?follow=true", tls=tls, timeout=15
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        await trio.sleep(1)
        fifo = log.with_name("swap.fifo")
        os.mkfifo(fifo)
        os.rename(fifo, log)
        await trio.sleep(3)
        t0 = time.monotonic()
        other, _ = await http_get(
            target.main, "/containerLogs/default/steady-0-hostile/main", tls=tls, timeout=10
        )
        other_took = time.monotonic() - t0
        await trio.sleep(2)
        unblock_fifo(log)
    log.unlink()
    log.write_bytes(b"")
    target.api.delete("Pod", "default", pod, grace=0)
    body = follower.get("body", b"")
    text = (
        f"follower {follower.get('status')} with {len(body)} B; another pod's log "
        f"{other} after {other_took:.2f} s"
    )
    return text if other == 200 and other_took < 2 else unmet(text)


def write_long_line(path: Path, size: int) -> None:
    with path.open("wb") as fh:
        fh.write(b"2026-01-01T00:00:00.000000000Z stdout F ")
        chunk = b"x" * MIB
        for _ in range(size // MIB):
            fh.write(chunk)
        fh.write(b"\n")


async def log_limit_bytes(target: Target, scale: float) -> str:
    """A 100 MB single line, asked with ``limitBytes=10``: 10 bytes, fast."""
    pod, log = await log_pod(target, "long-line")
    await trio.to_thread.run_sync(write_long_line, log, 100 * MIB)
    tls = target.tls.context()
    t0 = time.monotonic()
    status, body = await http_get(
        target.main, f"/containerLogs/default/{pod}/main?limitBytes=10", tls=tls, timeout=30
    )
    took = time.monotonic() - t0
    log.write_bytes(b"")
    target.api.delete("Pod", "default", pod, grace=0)
    text = f"limitBytes=10 on a 100 MiB line: {status}, {len(body)} B in {took:.2f} s"
    return text if (status, len(body)) == (200, 10) and took < 1 else unmet(text)


# -- 5. API bodies ------------------------------------------------------------------------------


def hostile_events(big_name: int) -> dict[str, bytes]:
    """Watch events the kubelet's pod watch is answered with."""
    pod = json.loads(json.dumps(api_pod("hostile-api")))
    pod["metadata"]["uid"] = "hostile-uid"

    def event(obj: Any) -> bytes:
        return json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"

    events = {
        "metadata a string": event({**pod, "metadata": "x"}),
        "metadata a list": event({**pod, "metadata": ["x"]}),
        "100,000-deep JSON": b'{"type":"ADDED","object":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}\n",
    }
    named = json.loads(json.dumps(pod))
    named["metadata"]["name"] = "a" * big_name
    events[f"{big_name // MIB} MiB pod name"] = event(named)
    return events


async def api_malformed(target: Target, scale: float) -> str:
    """The pod watch answers malformed objects, a 100,000-deep body and a 10 MiB name; then
    a relist is answered the same; after all that a new pod must run."""
    api = target.api
    seen = []
    for what, body in hostile_events(10 * MIB).items():
        before = api.count("watch", "pods")
        api.faults.answer("watch", "pods", body, times=1)
        await api.drop_watches("Pod")
        with trio.move_on_after(10):
            while api.count("watch", "pods") <= before:
                await trio.sleep(0.05)
        asked = api.count("watch", "pods") > before
        seen.append(f"{what}: {'taken' if asked else unmet('the kubelet did not watch again')}")
    listed = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                         "items": [{"metadata": "x"}]}).encode()  # fmt: skip
    lists = api.count("list", "pods")
    api.faults.answer("list", "pods", listed, times=1)
    api.faults.expire_next_watch("pods")
    await api.drop_watches("Pod")
    await trio.sleep(3)
    api.faults.clear()
    name = f"after-api-{time.monotonic_ns() % 10**6}"
    api.create(api_pod(name))
    took = await target.wait_running(name, 30)
    api.delete("Pod", "default", name, grace=0)
    ran = f"a new pod ran after {took:.2f} s" if took is not None else unmet("no new pod ran")
    return f"{'; '.join(seen)}; a bad list ({api.count('list', 'pods') - lists} lists); {ran}"


# -- 6. pod-resources gRPC ----------------------------------------------------------------------


STREAM_OVER = h2.events.StreamEnded | h2.events.StreamReset


def grpc_status(event: h2.events.Event) -> str:
    """The ``grpc-status`` a response's headers or trailers carry ("" if none)."""
    if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
        for name, value in event.headers or ():
            if bytes(name) == b"grpc-status":
                return bytes(value).decode()
    return ""


async def h2_events(
    stream: trio.SocketStream, conn: h2.connection.H2Connection, status: str
) -> tuple[str, bool]:
    """Read once and handle what came: (the gRPC status so far, whether the stream ended;
    end of the connection ends it)."""
    received = await stream.receive_some(65536)
    if not received:
        return status, True
    ended = False
    for event in conn.receive_data(received):
        status = grpc_status(event) or status
        ended = ended or isinstance(event, STREAM_OVER)
    with contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(conn.data_to_send())
    return status, ended


async def pod_resources_huge(target: Target, scale: float) -> str:
    """One gRPC message declared as 1 GiB to the pod-resources socket, streamed as long as
    the server reads: RESOURCE_EXHAUSTED, without the server taking it all."""
    path = target.root / "root" / "pod-resources" / "kubelet.sock"
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.connect(str(path))
    stream = trio.SocketStream(sock)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [
        (":method", "POST"), (":scheme", "http"), (":path", "/v1.PodResourcesLister/List"),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
    ])  # fmt: skip
    declared = 1 << 30
    pending = struct.pack(">BI", 0, declared)
    sent, status, ended = 0, "", False
    chunk = bytes(16 * 1024)
    t0 = time.monotonic()
    async with stream:
        with trio.move_on_after(20):
            try:
                while not ended:
                    window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                    if sent < declared + 5 and window > 0:
                        data = (pending or chunk[: min(window, declared + 5 - sent)])[:window]
                        pending = b""
                        try:
                            conn.send_data(sid, data)
                        except h2.exceptions.StreamClosedError:
                            break
                        sent += len(data)
                    await stream.send_all(conn.data_to_send())
                    with trio.move_on_after(0 if window > 0 else 5):
                        status, ended = await h2_events(stream, conn, status)
            except trio.BrokenResourceError:  # the server closed: read what it said first
                with trio.move_on_after(5), contextlib.suppress(trio.BrokenResourceError):
                    while not ended:
                        status, ended = await h2_events(stream, conn, status)
    answer = "RESOURCE_EXHAUSTED" if status == "8" else unmet(f"grpc-status {status or 'none'}")
    return f"declared 1 GiB, sent {sent / MIB:.1f} MiB in {time.monotonic() - t0:.1f} s: {answer}"


# -- 7. TLS files -------------------------------------------------------------------------------


def big_ca_bundle(path: Path, ca_pem: bytes, size: int) -> None:
    with path.open("wb") as fh:
        for _ in range(size // len(ca_pem)):
            fh.write(ca_pem)


async def tls_handshake_ok(target: Target) -> bool:
    status, _ = await http_get(target.main, "/healthz", tls=target.tls.context(), timeout=5)
    return status == 200


async def tls_reload(target: Target, scale: float) -> str:
    """A FIFO at the certificate path, a symlink to /dev/zero, an 89 MB client-CA bundle:
    each refused (the old ones keep serving), the kubelet's reload goes on."""
    tls = target.tls
    cert, ca = tls.serving.cert, tls.client_ca
    cert_pem, ca_pem = cert.read_bytes(), ca.read_bytes()
    results = []
    for what, install in (
        ("FIFO as the certificate", lambda p: os.mkfifo(p)),
        ("symlink to /dev/zero as the certificate", lambda p: p.symlink_to("/dev/zero")),
    ):
        staged = cert.with_name("staged")
        install(staged)
        os.replace(staged, cert)
        await trio.sleep(3)
        handshakes = "ok" if await tls_handshake_ok(target) else unmet("failing")
        results.append(f"{what}: handshakes {handshakes}")
        if cert.is_fifo():
            unblock_fifo(cert)
        staged.write_bytes(cert_pem)
        os.replace(staged, cert)
    staged = ca.with_name("staged-ca")
    await trio.to_thread.run_sync(big_ca_bundle, staged, ca_pem, 89 * 1000 * 1000)
    os.replace(staged, ca)
    await trio.sleep(5)
    handshakes = "ok" if await tls_handshake_ok(target) else unmet("failing")
    results.append(f"89 MB CA bundle: handshakes {handshakes}")
    ca.write_bytes(ca_pem)
    return "; ".join(results)


# -- 8. credential provider plugin output ---------------------------------------------------------


def provider_answers(directory: Path) -> None:
    head = json.dumps(RESPONSE)[:-1] + ', "auth": '
    (directory / "deep.json").write_text(head + "[" * 100_000 + "]" * 100_000 + "}")
    with (directory / "big.json").open("w") as fh:
        fh.write(head + '{"registry.hostile":{"username":"u","password":"')
        for _ in range(90):
            fh.write("p" * 1000 * 1000)
        fh.write('"}}}')


async def credential_plugin(target: Target, scale: float) -> str:
    """The plugin answers deeply nested JSON, 90 MB, then 1 GiB of stdout: each refused, the
    pull goes on without its credentials (the image is public here)."""
    await trio.to_thread.run_sync(provider_answers, target.provider)
    results = []
    for kind in ("deep", "big", "endless"):
        name = f"plugin-{kind}-{time.monotonic_ns() % 10**6}"
        pod = api_pod(name)
        image = f"{PLUGIN_IMAGES}/{kind}"
        pod["spec"]["containers"][0].update(image=image, imagePullPolicy="Always")
        target.api.create(pod)
        took = await target.wait_running(name, 20 + 40 * scale)
        target.api.delete("Pod", "default", name, grace=0)
        ran = f"ran after {took:.1f} s" if took is not None else unmet("never ran")
        results.append(f"{kind}: pod {ran}")
    return "; ".join(results)


# -- 10. config files ---------------------------------------------------------------------------


def config_bombs(directory: Path) -> dict[str, Path]:
    head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    levels = ["&a [" + ", ".join(["x"] * 10) + "]"]
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        levels.append(f"&{chr(ord('a') + i)} [" + ", ".join([f"*{prev}"] * 10) + "]")
    files = {
        "alias bomb in clusterDNS": head + "clusterDNS: [" + ", ".join(levels) + "]\n",
        "100,000-deep YAML": head + "clusterDNS: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "100,000-deep JSON": '{"apiVersion":"kubelet.config.k8s.io/v1beta1",'
        '"kind":"KubeletConfiguration","clusterDNS":' + "[" * 100_000 + "]" * 100_000 + "}",
    }
    out = {}
    for i, (what, text) in enumerate(files.items()):
        path = directory / f"bomb-{i}.yaml"
        path.write_text(text)
        out[what] = path
    return out


def run_config(
    target: Target, config: Path, timeout: float
) -> tuple[int | None, float, float, str]:
    """The kubelet binary with ``config`` (in a thread): (exit code, None when it had to be
    killed; seconds; peak RSS in MiB; the last line it wrote)."""
    argv = [sys.executable, "-m", "kubelet", "--config", str(config),
            "--root-dir", str(config.parent / "root"),
            "--container-runtime-endpoint", target.fake.endpoint]  # fmt: skip
    t0 = time.monotonic()
    code: int | None = None
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=err,
            preexec_fn=limits(1024, target.address_space),
        )  # fmt: skip
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > timeout:
                proc.kill()
                _, _, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)  # a worker thread of the bench, not its event loop
        proc.returncode = -1  # reaped here
        took = time.monotonic() - t0
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    return code, took, usage.ru_maxrss / 1024, (lines[-1] if lines else "")[:160]


FAST_EXIT = 10.0
"""Seconds a kubelet with a hostile ``--config`` may take to refuse it (an ordinary start-up
of the interpreter and the kubelet's modules takes 1-2 s here)."""


async def config_bomb(target: Target, scale: float) -> str:
    """YAML alias bomb, 100,000-deep YAML and JSON as ``--config``: start-up fails fast
    with a config error (a separate kubelet process each; the running one is untouched)."""
    directory = target.root / "config-bombs"
    directory.mkdir(exist_ok=True)
    results = []
    for what, path in config_bombs(directory).items():
        code, took, peak, last = await trio.to_thread.run_sync(run_config, target, path, 60)
        text = f"{what}: exit {code} after {took:.1f} s, peak {peak:.0f} MiB ({last!r})"
        results.append(text if code == 1 and took < FAST_EXIT else unmet(text))
    return "; ".join(results)


# -- 11. exec streams ---------------------------------------------------------------------------


async def open_exec(target: Target, pod: str, command: str) -> ChannelClient:
    stream = await trio.open_tcp_stream("127.0.0.1", target.main)
    tls_stream = trio.SSLStream(stream, target.tls.context(), server_hostname="127.0.0.1")
    path = f"/exec/default/{pod}/main?command={command}&input=1&output=1&tty=1"
    return await ChannelClient.connect(tls_stream, path, ["v5.channel.k8s.io"])


async def exec_resize(target: Target, scale: float) -> str:
    """A resize message of 60,000 ``[`` on a tty exec: resizing may end, the stream goes on."""
    client = await open_exec(target, "steady-1-hostile", "cat")
    echoed = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        await client.send(4, b"[" * 60_000)
        await client.send(0, b"still-here\n")
        with trio.move_on_after(10):
            while b"still-here" not in client.received.get(1, b"") and not client.closed.is_set():
                await trio.sleep(0.05)
        echoed = b"still-here" in client.received.get(1, b"")
        with contextlib.suppress(Exception):
            await client.close_channel(0)
            await client.close()
        with trio.move_on_after(5):
            await client.closed.wait()
        nursery.cancel_scope.cancel()
    went = "went on" if echoed else unmet("did not go on")
    return f"60,000 '[' as a resize: the stream {went}"


def inflating_reply(stream_id: int, size: int) -> bytes:
    """A SYN_REPLY whose header block inflates to ``size`` bytes (one huge value)."""
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    block = deflate.compress(struct.pack(">II", 1, 1) + b"x" + struct.pack(">I", size))
    chunk = b"a" * MIB
    for _ in range(size // MIB):
        block += deflate.compress(chunk)
    block += deflate.flush(zlib.Z_SYNC_FLUSH)
    return spdy.control_frame(spdy.SYN_REPLY, struct.pack(">I", stream_id) + block)


async def serve_inflating(
    size: int, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    """A runtime streaming server that upgrades to SPDY and answers the first stream with a
    header block inflating to ``size`` bytes, until cancelled."""
    reply = await trio.to_thread.run_sync(inflating_reply, 1, size)  # seconds of zlib

    async def one(stream: trio.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, OSError):
                data = b""
                while b"\r\n\r\n" not in data:
                    data += await stream.receive_some(65536)
                await stream.send_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                    b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
                )
                await stream.receive_some(65536)  # its first SYN_STREAM
                await stream.send_all(reply)
                while await stream.receive_some(65536):
                    pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        task_status.started(f"http://127.0.0.1:{port}/exec/hostile")
        await trio.serve_listeners(one, listeners, handler_nursery=nursery)


async def spdy_inflation(target: Target, scale: float) -> str:
    """The runtime's SYN_REPLY inflates to 1 GiB while the kubelet translates a WebSocket v5
    exec to SPDY: the stream fails with an error, the kubelet does not take it all."""
    fake = target.fake
    async with trio.open_nursery() as nursery:
        url = await nursery.start(serve_inflating, 1 << 30)
        original = fake._streaming_url
        fake._streaming_url = lambda kind, request: url  # type: ignore[method-assign]
        try:
            client = await open_exec(target, "steady-2-hostile", "cat")
        except HandshakeRefused as refused:
            outcome = f"refused {refused.status}"
        else:
            nursery.start_soon(client.run)
            with trio.move_on_after(30):
                await client.closed.wait()
            status = client.status() or {}
            outcome = f"closed {client.close_code}, status {status.get('message', '')[:100]!r}"
            if not client.closed.is_set() or not status:
                outcome = unmet(outcome)
        finally:
            fake._streaming_url = original  # type: ignore[method-assign]
        nursery.cancel_scope.cancel()
    return f"SYN_REPLY inflating to 1 GiB: {outcome}"


INPUTS = {
    "env_bomb": env_bomb,
    "volume_walk": volume_walk,
    "size_limit_evasion": size_limit_evasion,
    "log_fifo_swap": log_fifo_swap,
    "api_malformed": api_malformed,
    "pod_resources_huge": pod_resources_huge,
    "tls_reload": tls_reload,
    "credential_plugin": credential_plugin,
    "log_limit_bytes": log_limit_bytes,
    "config_bomb": config_bomb,
    "exec_resize": exec_resize,
    "spdy_inflation": spdy_inflation,
}
"""The inputs in their order (the eleventh defect is two inputs: resize and SPDY)."""
