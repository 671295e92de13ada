"""The kubelet under hostile input, and what is measured of it per input (scripts/bench_hostile.py).

``Target`` is one kubelet process joined to a FakeApiServer and a FakeRuntime that run in
this process (so that inputs can script them: hostile API bodies, a hostile streaming URL,
container logs), with the main server over TLS on files this script controls, a client CA,
a credential provider plugin, a read-only and a healthz port, an open-files and an
address-space limit. ``measured`` runs one input while /healthz is polled every 50 ms and
the kubelet's RSS sampled every 50 ms, and returns ``Figures``: the longest /healthz gap,
the longest event-loop stall (from the kubelet's ``kubelet_event_loop_lag_*`` metrics),
the peak RSS, whether the kubelet survived and whether other pods were disturbed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from kubelet.cri import api, connect
from kubelet.testing import BUSYBOX_IMAGE, CertPair, FakeApiServer, FakeRuntime, TestCA

MIB = 1024 * 1024
NODE = "hostile"
RSS_HEADROOM = 256.0
"""MiB a hostile input may add to the kubelet's normal peak RSS."""
PLUGIN_IMAGES = "registry.hostile"
"""Images the credential provider plugin is asked about."""


UNMET = "[UNMET]"
"""In an input's summary: what the kubelet should have done, it did not."""


def unmet(text: str) -> str:
    return f"{text} {UNMET}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manifest(name: str) -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n"
        f"  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n"
    )


def api_pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod bound to the node (what the scheduler would have written)."""
    body: dict[str, Any] = {
        "nodeName": NODE,
        "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never"}],
    }
    body.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024 / MIB
    return values["VmRSS"], values["VmHWM"]


def reset_peak(pid: int) -> None:
    """VmHWM back to the current RSS (Linux ≥ 4.0), so the next peak is this input's."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


# -- the kubelet --------------------------------------------------------------------------------


@attrs.define
class Tls:
    """The main port's files (the kubelet reloads them) and a client the CA trusts."""

    directory: Path
    ca: TestCA = attrs.field(init=False)
    serving: CertPair = attrs.field(init=False)
    client: CertPair = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.ca = TestCA(self.directory, name="hostile-ca")
        self.serving = self.ca.issue("serving", NODE, hosts=["127.0.0.1"], server=True)
        self.client = self.ca.issue("admin", "admin", ["system:masters"])
        self.client_ca.write_bytes(self.ca.cert_path.read_bytes())

    @property
    def client_ca(self) -> Path:
        return self.directory / "client-ca.crt"

    def context(self) -> ssl.SSLContext:
        """A client that shows its certificate and trusts any server (as the bench's)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(self.client.cert, self.client.key)
        context.set_alpn_protocols(["http/1.1"])
        return context


RESPONSE = {
    "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
    "kind": "CredentialProviderResponse",
    "cacheKeyType": "Image",
}
PLUGIN = """#!/bin/sh
request=$(cat)
dir=$(dirname "$0")/..
case "$request" in
  *registry.hostile/deep*) cat "$dir/deep.json" ;;
  *registry.hostile/big*) cat "$dir/big.json" ;;
  *registry.hostile/endless*) head -c "$ENDLESS_BYTES" /dev/zero ;;
  *) cat "$dir/empty.json" ;;
esac
"""


def write_provider(directory: Path, endless_bytes: int) -> tuple[Path, Path]:
    """A credential provider plugin for ``registry.hostile`` images: (config, bin dir). What
    it answers is chosen by the image (``deep``, ``big``, ``endless``), from files the inputs
    write beside ``bin``."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    plugin = bin_dir / "hostile-provider"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    (directory / "empty.json").write_text(json.dumps(RESPONSE | {"auth": {}}))
    config = directory / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        f"- name: hostile-provider\n  matchImages: ['{PLUGIN_IMAGES}']\n"
        "  defaultCacheDuration: 1s\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        f"  env: [{{name: ENDLESS_BYTES, value: '{endless_bytes}'}}]\n"
    )
    return config, bin_dir


@attrs.define
class Target:
    """The kubelet under test: its process, ports, files, and the fakes it talks to."""

    root: Path
    fake: FakeRuntime
    api: FakeApiServer
    nofile: int
    url: str
    address_space: int
    """MiB of virtual memory the kubelet may map (a runaway input fails there, not the host)."""
    endless_bytes: int = 1 << 30
    main: int = attrs.field(factory=free_port)
    read_only: int = attrs.field(factory=free_port)
    healthz: int = attrs.field(factory=free_port)
    proc: trio.Process | None = None
    command: list[str] = attrs.field(factory=list)
    tls: Tls = attrs.field(init=False)
    normal_peak: float = 0.0
    """VmHWM (MiB) after start-up and warm-up: what the RSS bound adds to."""

    def __attrs_post_init__(self) -> None:
        self.tls = Tls(self.root / "tls")

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def provider(self) -> Path:
        return self.root / "provider"

    @property
    def log_file(self) -> Path:
        return self.root / "kubelet.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss(self) -> float:
        return memory(self.pid)[0]

    def log_lines(self, text: str) -> int:
        return self.log_file.read_text(errors="replace").count(text)

    def config_text(self) -> str:
        # FakeRuntime's pods have no processes or logs of a real runtime: this kubelet keeps
        # off the host's kubepods tree and /var/log/pods (its orphan sweeps would take them)
        return (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"podLogsDir: {self.root / 'pod-logs'}\n"
            # the flags' defaults, which a config file's v1beta1 defaults would replace
            "authentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n"
            # volumes measured often enough for an emptyDir sizeLimit to be seen in seconds;
            # the host's own free space and memory are not what is under test
            "volumeStatsAggPeriod: 2s\nevictionHard: {memory.available: 1Mi}\n"
        )

    def argv(self) -> list[str]:
        config = self.root / "config.yaml"
        config.write_text(self.config_text())
        kubeconfig = self.api.kubeconfig(
            self.root / "kubelet.conf", user=f"system:node:{NODE}", groups=["system:nodes"]
        )
        provider_config, provider_bin = write_provider(self.provider, self.endless_bytes)
        return [
            sys.executable, "-m", "kubelet", "--config", str(config),
            "--kubeconfig", str(kubeconfig),
            "--pod-manifest-path", str(self.manifests),
            "--hostname-override", NODE,
            "--root-dir", str(self.root / "root"),
            "--cgroups-per-qos=false", "--enforce-node-allocatable=",
            "--fail-swap-on=false", "--fail-cgroupv1=false",
            "--container-runtime-endpoint", self.fake.endpoint,
            "--address", "127.0.0.1",
            "--port", str(self.main),
            "--anonymous-auth=false",
            "--tls-cert-file", str(self.tls.serving.cert),
            "--tls-private-key-file", str(self.tls.serving.key),
            "--client-ca-file", str(self.tls.client_ca),
            "--read-only-port", str(self.read_only),
            "--healthz-bind-address", "127.0.0.1",
            "--healthz-port", str(self.healthz),
            "--manifest-url", self.url,
            "--http-check-frequency", "2s",
            "--image-credential-provider-config", str(provider_config),
            "--image-credential-provider-bin-dir", str(provider_bin),
        ]  # fmt: skip

    async def start(self) -> None:
        self.manifests.mkdir(parents=True, exist_ok=True)
        for i in range(5):
            (self.manifests / f"steady-{i}.yaml").write_text(manifest(f"steady-{i}"))
        self.command = self.argv()
        await self.launch()

    async def launch(self) -> None:
        """Start the kubelet process (again, after it died: the log goes on) and wait for
        its ``started`` line."""
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.proc = await trio.lowlevel.open_process(
                self.command, stdout=subprocess.DEVNULL, stderr=log,
                preexec_fn=limits(self.nofile, self.address_space),
                env={**os.environ, "KUBELET_CONTAINERS_LOG_DIR": str(self.root / "containers")},
            )  # fmt: skip
        with trio.fail_after(60):
            while f" started: node {NODE}" not in self.log_since(offset):
                if not self.alive():
                    raise SystemExit(f"kubelet exited:\n{self.log_since(offset)[-3000:]}")
                await trio.sleep(0.05)

    def log_since(self, offset: int) -> str:
        with self.log_file.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")

    async def stop(self) -> None:
        if self.proc is None:
            return
        with trio.CancelScope(shield=True):
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGTERM)
                with trio.move_on_after(10):
                    await self.proc.wait()
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()

    # -- pods --------------------------------------------------------------------------

    def running(self) -> dict[str, str]:
        """Running container id → its pod name, as the runtime keeps them."""
        return {
            c.id: c.labels.get("io.kubernetes.pod.name", "")
            for c in self.fake.containers.values()
            if c.state == api.CONTAINER_RUNNING
        }

    def container_of(self, pod: str) -> Any | None:
        """The running container of ``pod`` (its FakeContainer), if any."""
        for c in self.fake.containers.values():
            if c.state == api.CONTAINER_RUNNING and c.labels.get("io.kubernetes.pod.name") == pod:
                return c
        return None

    async def wait_running(self, pod: str, timeout: float) -> float | None:
        t0 = time.monotonic()
        with trio.move_on_after(timeout):
            while pod not in self.running().values():
                await trio.sleep(0.05)
            return time.monotonic() - t0
        return None

    def pod_status(self, name: str) -> Mapping[str, Any]:
        pod = self.api.get("Pod", "default", name)
        return pod.get("status", {}) if pod is not None else {}

    def pod_dir(self, name: str) -> Path | None:
        pod = self.api.get("Pod", "default", name)
        if pod is None:
            return None
        return self.root / "root" / "pods" / str(pod["metadata"]["uid"])


def limits(nofile: int, address_space: int) -> Callable[[], None]:
    """Set in the child before it executes: open files, and virtual memory in MiB."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        cap = address_space * MIB
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return apply


async def runtime_containers(endpoint: str) -> dict[str, str]:
    """Running container id → its pod name, asked over CRI (as a client would)."""
    async with connect(endpoint) as (runtime, _):
        containers = await runtime.list_containers(state=api.CONTAINER_RUNNING)
    return {c.id: c.labels.get("io.kubernetes.pod.name", "") for c in containers}


# -- plain HTTP to the kubelet's loopback ports --------------------------------------------------


async def http_get(
    port: int, path: str, *, tls: ssl.SSLContext | None = None, timeout: float = 10.0
) -> tuple[int, bytes]:
    """One GET on a new connection (``Connection: close``): (status, body); (0, b"") when
    nothing complete came within ``timeout``."""
    data = b""
    with trio.move_on_after(timeout):
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
            if tls is not None:
                stream = trio.SSLStream(stream, tls, server_hostname="127.0.0.1")
            async with stream:
                request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                await stream.send_all(request.encode())
                while chunk := await stream.receive_some(1 << 16):
                    data += chunk
        except (OSError, trio.BrokenResourceError):
            pass
        head, _, body = data.partition(b"\r\n\r\n")
        match = re.match(rb"HTTP/1\.1 (\d{3}) ", head)
        if match is None:
            return 0, b""
        if b"transfer-encoding: chunked" in head.lower():
            body = dechunk(body)
        return int(match.group(1)), body
    return 0, b""


def dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


async def healthz_ok(port: int) -> bool:
    status, body = await http_get(port, "/healthz", timeout=1)
    return status == 200 and body == b"ok"


# -- per-input figures --------------------------------------------------------------------------


@attrs.define
class Availability:
    polls: int = 0
    failures: int = 0
    down: float = 0.0
    longest: float = 0.0
    down_since: float | None = None

    def sample(self, at: float, ok: bool) -> None:
        self.polls += 1
        if not ok:
            self.failures += 1
            if self.down_since is None:
                self.down_since = at
        elif self.down_since is not None:
            gap = at - self.down_since
            self.down += gap
            self.longest = max(self.longest, gap)
            self.down_since = None

    def close(self) -> None:
        if self.down_since is not None:
            self.sample(time.monotonic(), True)


async def watch_healthz(port: int, availability: Availability) -> None:
    while True:
        t0 = time.monotonic()
        availability.sample(t0, await healthz_ok(port))
        await trio.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))


@attrs.frozen
class LoopLag:
    """The kubelet's ``kubelet_event_loop_lag_*`` metrics at one scrape."""

    buckets: tuple[tuple[float, float], ...]
    """(upper bound, cumulative count), +Inf last."""
    longest: float

    @classmethod
    def parse(cls, text: str) -> LoopLag:
        buckets = [
            (float(m.group(1)), float(m.group(2)))
            for m in re.finditer(
                r'^kubelet_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M
            )
        ]
        longest = re.search(r"^kubelet_event_loop_lag_max_seconds (\S+)$", text, re.M)
        return cls(tuple(buckets), float(longest.group(1)) if longest else 0.0)

    def stall_since(self, before: LoopLag) -> tuple[float, bool]:
        """The longest stall after ``before``: (seconds, exact). Exact when it set a new
        maximum; otherwise the upper bound of the bucket it fell in (0 when none)."""
        if self.longest > before.longest:
            return self.longest, True
        counts = dict(before.buckets)
        total = self.buckets[-1][1] - counts.get(self.buckets[-1][0], 0.0) if self.buckets else 0
        if not total:
            return 0.0, False
        for bound, count in self.buckets:
            if count - counts.get(bound, 0.0) >= total:
                return bound, False
        return float("inf"), False


def distribution(before: LoopLag, after: LoopLag) -> str:
    """Stalls between two scrapes, per bucket (``≤ 10 ms: 3`` ...; empty buckets left out)."""
    counts = dict(before.buckets)
    parts, below = [], 0.0
    for bound, cumulative in after.buckets:
        n = cumulative - counts.get(bound, 0.0) - below
        below += n
        if n:
            label = "more" if bound == float("inf") else f"≤ {bound * 1000:g} ms"
            parts.append(f"{label}: {n:.0f}")
    return ", ".join(parts) or "none"


async def scrape_lag(target: Target) -> LoopLag | None:
    status, body = await http_get(target.read_only, "/metrics", timeout=30)
    return LoopLag.parse(body.decode(errors="replace")) if status == 200 else None


@attrs.define
class Figures:
    """What one input did to the kubelet."""

    healthz_gap: float
    stall: float
    stall_exact: bool
    peak_rss: float
    normal_peak: float
    survived: bool
    disturbed: int
    seconds: float
    held_by: tuple[str, ...] = ()
    """The kubelet's ``Event loop held`` lines during the input (the task, how long)."""

    @property
    def rss_ok(self) -> bool:
        return self.peak_rss <= self.normal_peak + RSS_HEADROOM

    def line(self) -> str:
        if not self.stall:
            stall = "< 5 ms"
        elif self.stall_exact:
            stall = f"{self.stall * 1000:.0f} ms"
        else:
            stall = f"≤ {self.stall * 1000:.0f} ms"
        return (
            f"healthz gap {self.healthz_gap:.2f} s, longest stall {stall}, peak RSS "
            f"{self.peak_rss:.0f} MiB ({self.peak_rss - self.normal_peak:+.0f} over the normal "
            f"peak{'' if self.rss_ok else ', OVER THE BOUND'}), "
            f"{'survived' if self.survived else 'KUBELET GONE'}, {self.disturbed} pods disturbed, "
            f"{self.seconds:.1f} s"
            + (f"; held by {', '.join(self.held_by)}" if self.held_by else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "rss_ok": self.rss_ok}


async def sample_rss(pid: int, peak: list[float]) -> None:
    """The highest VmRSS seen, every 50 ms, into ``peak[0]``."""
    with contextlib.suppress(OSError, KeyError):
        while True:
            peak[0] = max(peak[0], memory(pid)[0])
            await trio.sleep(0.05)


async def measured(
    target: Target, drive: Callable[[], Awaitable[str]], limit: float = 600.0
) -> tuple[str, Figures]:
    """Run one input against ``target`` for at most ``limit`` seconds and measure it (see
    the module's docstring)."""
    steady = {cid: pod for cid, pod in target.running().items() if pod.startswith("steady-")}
    lag0 = await scrape_lag(target)
    log_at = target.log_file.stat().st_size
    reset_peak(target.pid)
    availability = Availability()
    peak = [target.rss()]
    t0 = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_healthz, target.healthz, availability)
        nursery.start_soon(sample_rss, target.pid, peak)
        summary = unmet(f"input timed out after {limit:.0f} s (the kubelet did not answer?)")
        with trio.move_on_after(limit):
            try:
                summary = await drive()
            except Exception as exc:  # an input's own failure is a result too
                summary = f"input failed: {exc!r}"
        seconds = time.monotonic() - t0
        survived = target.alive()
        if survived:
            with contextlib.suppress(OSError, KeyError):
                peak[0] = max(peak[0], memory(target.pid)[1])
            await trio.sleep(0.1)  # the last /healthz poll
        nursery.cancel_scope.cancel()
    availability.close()
    stall, exact = float("inf"), False
    lag1 = await scrape_lag(target) if survived else None
    if lag0 is not None and lag1 is not None:
        stall, exact = lag1.stall_since(lag0)
    running = target.running()
    figures = Figures(
        healthz_gap=availability.longest,
        stall=stall,
        stall_exact=exact,
        peak_rss=peak[0],
        normal_peak=target.normal_peak,
        survived=survived,
        disturbed=sum(1 for cid in steady if cid not in running),
        seconds=seconds,
        held_by=held_lines(target.log_file, log_at),
    )
    return summary, figures


def held_lines(log: Path, offset: int, most: int = 3) -> tuple[str, ...]:
    """``task (seconds)`` of the longest ``Event loop held`` lines logged after ``offset``."""
    with log.open("rb") as fh:
        fh.seek(offset)
        text = fh.read().decode(errors="replace")
    held: list[tuple[float, str]] = []
    for line in text.splitlines():
        seconds = re.search(r"Event loop held.* seconds=([\d.]+)", line)
        if seconds is not None:
            task = re.search(r'task="?([^"\s]+)', line)
            held.append((float(seconds.group(1)), task.group(1) if task else "?"))
    held.sort(reverse=True)
    return tuple(f"{task} ({seconds:.2f} s)" for seconds, task in held[:most])


# -- orchestration ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def cluster(root: Path) -> AsyncIterator[tuple[FakeRuntime, FakeApiServer]]:
    """FakeRuntime (with its streaming server) and FakeApiServer, in this process."""
    fake = FakeRuntime(pullable=[f"{PLUGIN_IMAGES}/deep", f"{PLUGIN_IMAGES}/big",
                                 f"{PLUGIN_IMAGES}/endless"])  # fmt: skip
    api_server = FakeApiServer()
    async with fake.serve(root / "cri.sock"), api_server.serve():
        yield fake, api_server


async def warm_up(target: Target) -> None:
    """One ordinary request of each kind, so that the normal peak is a kubelet that has
    served TLS, HTTP/1.1 and its metrics once."""
    await http_get(target.main, "/healthz", tls=target.tls.context())
    await http_get(target.read_only, "/pods")
    await scrape_lag(target)
    await http_get(target.read_only, "/stats/summary")
