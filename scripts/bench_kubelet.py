#!/usr/bin/env python3
"""Throughput, latency, CPU and memory of the ``kubelet`` process with static pods.

    .venv/bin/python scripts/bench_kubelet.py [--quick] [--sizes 110,1000] [--steady S]
                                              [--no-fake] [--no-containerd]
                                              [--node N [--node-steady S]]

A. FakeRuntime (a separate process on a temp unix socket, CRI alone on plain asyncio):
   for each N, a fresh kubelet and fake (config: podLogsDir in a temp dir, maxPods ≥ N);
   N busybox manifests are written at once (atomic renames) and the fake reports on its
   stdout when a start makes N containers RUNNING (``--report-running``: no polling, so
   the bench and the fake stay off the kubelet's core; checked by one CRI list after).
   Reports wall time, pods/s, the kubelet's, the fake's and this process's CPU seconds
   over that interval (the kubelet's system time and how often it was switched away from
   while runnable; the CPU all other processes took meanwhile: 2 shared cores, so what
   bounds a ramp shows), the CRI calls per pod by RPC (the fake's counts) and peak RSS; for
   the first size, steady-state CPU (% of one core) over ``--steady`` seconds and RSS;
   SIGTERM → exit.
B. containerd: one pod manifest → RUNNING (median of 3 trials, CRI polled every 10 ms),
   a batch written at once (p50/p90/p99, all running), steady-state CPU and RSS with the
   batch, manifests removed → every container stopped / every sandbox removed. Compared
   with upstream's figures (v1.36.2, containerd 1.6.20: ``UPSTREAM``). Then the kubelet's own
   share of each pod's start and teardown, from its timing trace (below).
C. ``--node N``: N busybox pods on containerd at once (maxPods N): all running (p50/p99),
   kubelet CPU over the ramp, steady CPU over ``--node-steady`` seconds, PLEG relist
   p50/p99 over that period (from the trace), RSS, teardown.

The kubelets on containerd run with ``KUBELET_TRACE_FILE`` (``kubelet/cri/trace.py``):
every CRI call with its start, end and the pod whose worker made it, every inotify event
and every PLEG relist, as JSON lines. From it, per pod: the manifest's inotify event →
the pod's first CRI call, the kubelet's time between the pod's calls (none in flight),
and the time inside the calls, up to the end of StartContainer (start) or StopContainer
(teardown). A tree without the trace prints "-" there.

Kubelet CPU comes from ``/proc/<pid>/stat`` (utime + stime), RSS from
``/proc/<pid>/status`` (VmRSS, and VmHWM for the peak).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_asyncio

if TYPE_CHECKING:
    from kubelet.cri import RuntimeClient

CONTAINERD_ENDPOINT = "unix:///run/containerd/containerd.sock"
BUSYBOX = "docker.io/library/busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"
SLEEP = "sleep 3600"
LOOP = "trap 'exit 0' TERM; while true; do sleep 1; done"
POD_NAME = "io.kubernetes.pod.name"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024

# upstream kubelet v1.36.2 on containerd 1.6.20, 30 pods, recorded by a harness on a machine
# of this kind (not re-measured here: a 1.36 kubelet cannot be built on it)
UPSTREAM = {
    "one": "0.213 s",
    "pcts": "2.2/6.6/6.7, 4.2/7.0/7.1 s",
    "all": "6.77 s",
    "cpu": "2.21 %",
    "rss": "77.9 MiB",
    "stopped": "2.56 s",
    "removed": "≈ 41 s",
}
UPSTREAM_RATIOS = {  # figure: (upstream's, the bound of ours/upstream)
    "one pod": (0.213, 0.9),
    "30 pods all running": (6.77, 0.4),
    "steady CPU": (2.21, 0.3),
    "RSS": (77.9, 0.75),
    "every container stopped": (2.56, 0.7),
}


# -- the kubelet process ---------------------------------------------------------------------


def manifest(name: str, script: str, grace: int | None = None) -> str:
    """A one-container busybox static pod."""
    grace_line = f"  terminationGracePeriodSeconds: {grace}\n" if grace is not None else ""
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {name}\n"
        "spec:\n"
        f"{grace_line}"
        "  containers:\n"
        "  - name: main\n"
        f"    image: {BUSYBOX}\n"
        f'    command: ["sh", "-c", "{script}"]\n'
    )


def write_atomic(directory: Path, name: str, text: str) -> None:
    """Write ``name`` via a dot-temp file and a rename, as config tools do."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(directory / name)


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of ``pid`` in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # fields 14 and 15 of stat(5)


def preempted(pid: int) -> int:
    """How often ``pid``'s threads were switched away from while runnable (summed over
    its threads: ``nonvoluntary_ctxt_switches``): the kubelet waiting for a core."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def machine_busy() -> float:
    """CPU seconds all cores spent busy since boot (``/proc/stat``: all but idle and
    iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024 / MIB
    return values["VmRSS"], values["VmHWM"]


@attrs.frozen
class Upstream:
    """An upstream kubelet binary, run in part B side by side with ours (``--upstream``)."""

    binary: Path
    flags: tuple[str, ...] = ()
    """Extra flags its version needs (``--container-runtime=remote`` before 1.24)."""

    def config(self, manifests: Path, ports: tuple[int, int] | None = None) -> str:
        """Its KubeletConfiguration: what our kubelet's flags in the bench say, in fields
        every version since 1.20 reads (static pods, cgroupfs, no server, no read-only or
        healthz port, swap allowed), and a cgroup v1 host allowed (1.31 on; earlier
        versions decode the unknown field leniently). With ``ports`` (main, healthz), the
        TLS port and healthz serve on loopback."""
        served = (
            "enableServer: false\nhealthzPort: 0\n"
            if ports is None
            else f"enableServer: true\naddress: 127.0.0.1\nport: {ports[0]}\n"
            f"healthzBindAddress: 127.0.0.1\nhealthzPort: {ports[1]}\n"
        )
        return served + (
            "apiVersion: kubelet.config.k8s.io/v1beta1\n"
            "kind: KubeletConfiguration\n"
            f"staticPodPath: {manifests}\n"
            "fileCheckFrequency: 20s\n"
            "failSwapOn: false\n"
            "failCgroupV1: false\n"
            "cgroupDriver: cgroupfs\n"
            "readOnlyPort: 0\n"
            "authentication: {anonymous: {enabled: false}, webhook: {enabled: false}}\n"
            "authorization: {mode: AlwaysAllow}\n"
        )


@attrs.define
class KubeletProcess:
    """One kubelet process (``python -m kubelet``, or an upstream binary) with its own
    manifest dir, root dir and log file."""

    root: Path
    endpoint: str
    node: str = attrs.field(factory=lambda: f"bench-{uuid.uuid4().hex[:6]}")
    config: str | None = None
    traced: bool = True
    """Ask the kubelet for its timing trace (``KUBELET_TRACE_FILE``; a tree without it
    ignores the variable and the trace figures print as "-")."""
    host_cgroups: bool = True
    """False for FakeRuntime, whose pods have no processes: the host's kubepods tree is
    left to the kubelet of the real runtime (this one's orphan sweep would stop its pods)."""
    upstream: Upstream | None = None
    """Run this upstream kubelet binary instead of ours (no trace, its own config file)."""
    ports: tuple[int, int] | None = None
    """Serve the TLS port and healthz on these loopback ports (``--server``; None: off)."""
    proc: trio.Process | None = None
    startup: float = 0.0

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def log_file(self) -> Path:
        return self.root / "kubelet.log"

    @property
    def trace_file(self) -> Path:
        return self.root / "trace.jsonl"

    def trace(self) -> list[dict[str, Any]]:
        """The trace so far (only what the kubelet has flushed: read it after it exits)."""
        if not self.trace_file.exists():
            return []
        lines = self.trace_file.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def pod_name(self, name: str) -> str:
        return f"{name}-{self.node}"

    def _argv(self) -> tuple[list[str], str]:
        """The command line, and the log text that says the kubelet has started."""
        if self.upstream is None:
            return self._our_argv(), " started"
        config = self.root / "upstream-config.yaml"
        config.write_text(self.upstream.config(self.manifests, self.ports))
        argv = [str(self.upstream.binary), "--config", str(config), "--root-dir"]
        argv += [str(self.root / "root"), "--cert-dir", str(self.root / "pki")]
        argv += ["--hostname-override", self.node]
        argv += ["--container-runtime-endpoint", self.endpoint]
        return argv + list(self.upstream.flags), "Started kubelet"

    def _our_argv(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "kubelet",
            "--pod-manifest-path",
            str(self.manifests),
            "--hostname-override",
            self.node,
            "--read-only-port=0",
            "--root-dir",
            str(self.root / "root"),
            "--fail-swap-on=false",
            "--fail-cgroupv1=false",
            "--container-runtime-endpoint",
            self.endpoint,
            "--file-check-frequency",
            "20s",
        ]
        if self.ports is None:
            argv += ["--enable-server=false", "--healthz-port=0"]
        else:
            argv += ["--address=127.0.0.1", f"--port={self.ports[0]}"]
            argv += ["--healthz-bind-address=127.0.0.1", f"--healthz-port={self.ports[1]}"]
            argv += ["--cert-dir", str(self.root / "pki")]
        if not self.host_cgroups:
            argv += ["--cgroups-per-qos=false", "--enforce-node-allocatable="]
        if self.config is not None:
            path = self.root / "config.yaml"
            path.write_text(self.config)
            argv += ["--config", str(path)]
        return argv

    async def start(self) -> None:
        """Spawn the kubelet and wait for its "started" log line."""
        self.manifests.mkdir(parents=True, exist_ok=True)
        argv, marker = self._argv()
        t0 = time.monotonic()
        env = dict(os.environ)
        if self.traced:
            env["KUBELET_TRACE_FILE"] = str(self.trace_file)
        if not self.host_cgroups:  # FakeRuntime: its log links stay out of /var/log/containers
            env["KUBELET_CONTAINERS_LOG_DIR"] = str(self.root / "containers")
        with self.log_file.open("wb") as log:
            self.proc = await trio.lowlevel.open_process(
                argv, stdout=subprocess.DEVNULL, stderr=log, env=env
            )
        with trio.move_on_after(30):
            while True:
                if marker in self.log_file.read_text(errors="replace"):
                    self.startup = time.monotonic() - t0
                    return
                if self.proc.poll() is not None:
                    raise SystemExit(f"kubelet exited with {self.proc.returncode}:\n{self.tail()}")
                await trio.sleep(0.02)
        await self.kill()
        raise SystemExit(f"kubelet did not start within 30 s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log_file.read_text(errors="replace")[-chars:]

    async def stop(self) -> float:
        """SIGTERM our kubelet by PID; seconds until it exited (SIGKILL after 20 s)."""
        assert self.proc is not None
        t0 = time.monotonic()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        with trio.move_on_after(20):
            await self.proc.wait()
            return time.monotonic() - t0
        await self.kill()
        return float("inf")

    async def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def memory(self) -> tuple[float, float]:
        return memory(self.pid)


async def steady_cpu(kubelet: KubeletProcess, seconds: float) -> float:
    """Kubelet CPU over ``seconds`` of wall time, as % of one core."""
    c0, t0 = kubelet.cpu(), time.monotonic()
    await trio.sleep(seconds)
    return 100 * (kubelet.cpu() - c0) / (time.monotonic() - t0)


def pct(samples: list[float], q: int) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, -(-len(ordered) * q // 100) - 1)]


# -- the kubelet's own share, from its timing trace ------------------------------------------

IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_DELETE = 0x8, 0x40, 0x80, 0x200
ADDED = IN_CLOSE_WRITE | IN_MOVED_TO
REMOVED = IN_DELETE | IN_MOVED_FROM


@attrs.frozen
class Share:
    """Where one pod's start (or teardown) went, from the manifest's inotify event to the
    end of its StartContainer (or StopContainer)."""

    to_first: float
    """The inotify event → the pod's first CRI call: the kubelet alone."""
    between: float
    """The kubelet's time between the pod's CRI calls (none of them in flight)."""
    cri: float
    """Time with at least one of the pod's CRI calls in flight: the runtime's share."""
    calls: int

    @property
    def kubelet(self) -> float:
        return self.to_first + self.between


class Trace:
    """A kubelet's timing trace (``kubelet/cri/trace.py``), indexed for the questions below."""

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.events: dict[str, list[tuple[float, int]]] = {}
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.relists: list[tuple[float, float]] = []
        self.relist_lines: list[dict[str, Any]] = []
        self.all_calls: list[dict[str, Any]] = []
        self.gcs: list[tuple[float, float, int]] = []
        self.lags: list[tuple[float, float]] = []
        for x in lines:
            if x["k"] == "inotify":
                self.events.setdefault(x["name"], []).append((x["t"], x["mask"]))
            elif x["k"] == "call":
                self.calls.setdefault(x["pod"], []).append(x)
                self.all_calls.append(x)
            elif x["k"] == "relist":
                self.relists.append((x["t"], x["d"]))
                self.relist_lines.append(x)
            elif x["k"] == "gc":
                self.gcs.append((x["t"], x["d"], x["gen"]))
            elif x["k"] == "lag":
                self.lags.append((x["t"] - x["d"], x["d"]))
        for calls in self.calls.values():
            calls.sort(key=lambda c: c["t0"])

    def __bool__(self) -> bool:
        return bool(self.calls)

    def share(self, file: str, pod: str, after: float, mask: int, until: str) -> Share | None:
        """``pod`` (its full name, ``name_namespace``) from the first event of ``file``
        matching ``mask`` after ``after`` to the end of its first ``until`` call."""
        event = next((t for t, m in self.events.get(file, ()) if m & mask and t >= after), None)
        if event is None:
            return None
        calls = []
        for call in self.calls.get(pod, ()):
            if call["t0"] >= event:
                calls.append(call)
                if call["rpc"] == until:
                    break
        else:
            return None
        busy, end = 0.0, calls[0]["t0"]
        for call in calls:  # the union of the call intervals
            if call["t1"] > end:
                busy += call["t1"] - max(call["t0"], end)
                end = call["t1"]
        span = end - calls[0]["t0"]
        return Share(calls[0]["t0"] - event, span - busy, busy, len(calls))

    def relist_durations(self, start: float, end: float) -> list[float]:
        return [d for t, d in self.relists if start <= t <= end]

    def relist_split(self, start: float, end: float) -> list[RelistSplit]:
        """Each relist that ended in [start, end]: where its time went."""
        out = []
        for x in self.relist_lines:
            if not start <= x["t"] <= end:
                continue
            r0, r1 = x["t"] - x["d"], x["t"]

            def overlap(a: float, b: float, r0: float = r0, r1: float = r1) -> float:
                return max(0.0, min(b, r1) - max(a, r0))

            own = [
                c
                for c in self.all_calls
                if c["rpc"] in ("ListPodSandbox", "ListContainers")
                and c["prio"]
                and r0 - 0.001 <= c["t0"]
                and c["t1"] <= r1 + 0.001
            ]
            others = sorted(
                {c["rpc"] for c in self.all_calls if c not in own and overlap(c["t0"], c["t1"]) > 0}
            )
            out.append(
                RelistSplit(
                    d=x["d"],
                    lists=x.get("lists", x["d"]),
                    calls=_union(own),
                    gc=sum(overlap(t, t + d) for t, d, _ in self.gcs),
                    lag=sum(overlap(t, t + d) for t, d in self.lags),
                    others=others,
                )
            )
        return out


def _union(calls: list[dict[str, Any]]) -> float:
    """Seconds with at least one of ``calls`` in flight (a relist's two may overlap)."""
    busy, end = 0.0, -math.inf
    for c in sorted(calls, key=lambda c: c["t0"]):
        if c["t1"] > end:
            busy += c["t1"] - max(c["t0"], end)
            end = c["t1"]
    return busy


@attrs.frozen
class RelistSplit:
    """One PLEG relist's duration, split: its two list calls as the channel saw them
    (request to the Trio task resumed, the runtime's answer and our loop's lateness
    both inside; the time with either in flight), the rest of ``lists`` (building the
    states), the diff after; and
    how much of it the loop ran late (``KUBELET_TRACE_LAG``) and collected garbage."""

    d: float
    lists: float
    calls: float
    gc: float
    lag: float
    others: list[str]


def ms(x: float) -> str:
    return f"{1000 * x:.1f}"


def share_summary(shares: list[Share | None]) -> str:
    """p50 / max of the kubelet's share, its parts and the CRI calls', in ms."""
    got = [x for x in shares if x is not None]
    if not got:
        return "-"

    def pm(values: list[float]) -> str:
        return f"{ms(statistics.median(values))}/{ms(max(values))}"

    return (
        f"kubelet {pm([x.kubelet for x in got])} (event → first call "
        f"{pm([x.to_first for x in got])}, between calls {pm([x.between for x in got])}); "
        f"CRI calls {pm([x.cri for x in got])} ms (p50/max of {len(got)})"
    )


# -- A: FakeRuntime --------------------------------------------------------------------------


@attrs.define
class FakeResult:
    n: int
    startup: float
    wall: float
    cpu: float
    peak_rss: float
    fake_cpu: float = 0.0
    """FakeRuntime's CPU seconds over the ramp: it is one Python process too."""
    bench_cpu: float = 0.0
    """This process's CPU seconds over the ramp (writing the manifests, waiting)."""
    sys_cpu: float = 0.0
    """The kubelet's system time over the ramp (part of ``cpu``): its file and socket work."""
    preempted: int = 0
    """The kubelet's involuntary context switches over the ramp: it waited for a core."""
    others_cpu: float = 0.0
    """CPU seconds the rest of the machine (all but the kubelet, the fake and this
    process) took over the ramp: other programs competing for the 2 cores."""
    calls: dict[str, int] = attrs.Factory(dict)
    """CRI calls the fake served over the ramp, by RPC (its own count)."""
    steady_cpu: float | None = None
    steady_secs: float = 0.0
    steady_rss: float | None = None
    steady_calls: dict[str, int] = attrs.Factory(dict)
    """CRI calls the fake served over the steady period, by RPC: what the CPU at rest is."""
    exit_secs: float = 0.0

    @property
    def rate(self) -> float:
        return self.n / self.wall


def own_cpu() -> float:
    """This process's CPU seconds (user + system)."""
    t = os.times()
    return t.user + t.system


@attrs.define
class FakeReports:
    """The fake's JSON report lines on its stdout (``kubelet.testing.fakeruntime``: on
    SIGUSR1, and when ``--report-running N`` containers run): the RUNNING count and the
    calls by RPC, read without a CRI call."""

    stream: trio.abc.ReceiveStream
    buffer: bytes = b""

    async def next(self, event: str) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some()
            if not chunk:
                raise SystemExit("fakeruntime closed its stdout")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        report: dict[str, Any] = json.loads(line)
        if report["event"] != event:
            raise SystemExit(f"fakeruntime reported {report}, not {event!r}")
        return report


@contextlib.asynccontextmanager
async def fake_process(endpoint: str, n: int) -> AsyncIterator[tuple[trio.Process, FakeReports]]:
    """``python -m kubelet.testing.fakeruntime`` with pause and busybox, reporting when N
    containers run; stopped by PID. CRI alone on plain asyncio: the pods never exec."""
    path = Path(endpoint.removeprefix("unix://"))
    argv = [sys.executable, "-m", "kubelet.testing.fakeruntime", "--listen", endpoint]
    argv += ["--image", PAUSE, "--image", BUSYBOX, "--no-streaming", "--report-running", str(n)]
    proc = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        with trio.fail_after(15):
            while not await trio.Path(path).is_socket():
                if proc.poll() is not None:
                    raise SystemExit(f"fakeruntime exited with {proc.returncode} before listening")
                await trio.sleep(0.02)
        yield proc, FakeReports(proc.stdout)
    finally:
        with trio.CancelScope(shield=True):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                with trio.move_on_after(5):
                    await proc.wait()
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()


async def fake_calls(fake: trio.Process, reports: FakeReports) -> dict[str, int]:
    """The fake's count of the CRI calls it has served so far, by RPC."""
    os.kill(fake.pid, signal.SIGUSR1)
    with trio.fail_after(5):
        calls: dict[str, int] = (await reports.next("usr1"))["calls"]
    return calls


def calls_since(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The calls by RPC between two of the fake's counts."""
    return {rpc: k - before.get(rpc, 0) for rpc, k in after.items() if k > before.get(rpc, 0)}


async def count_running(runtime: RuntimeClient) -> int:
    from kubelet.cri import api

    return len(await runtime.list_containers(state=api.CONTAINER_RUNNING))


async def bench_fake_once(n: int, steady: float, tmp: Path) -> FakeResult:
    """One kubelet + fake: N pods to RUNNING, then (``steady`` > 0) steady state."""
    from kubelet.cri import connect

    endpoint = f"unix://{tmp}/fake.sock"
    logs = tmp / "podlogs"
    logs.mkdir()
    config = (
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        f"podLogsDir: {logs}\n"
        f"maxPods: {max(110, n)}\n"  # upstream's default of 110 would reject the rest
    )
    kubelet = KubeletProcess(tmp, endpoint, config=config, traced=False, host_cgroups=False)
    async with (
        fake_process(endpoint, n) as (fake, reports),
        trio_asyncio.open_loop(),
        connect(endpoint) as (runtime, _),
    ):
        await kubelet.start()
        try:
            texts = [(f"p{i:04d}.yaml", manifest(f"p{i:04d}", SLEEP)) for i in range(n)]
            before = await fake_calls(fake, reports)
            cpu0, t0, fake0 = kubelet.cpu(), time.monotonic(), cpu_seconds(fake.pid)
            bench0, sys0, pre0 = own_cpu(), cpu_split(kubelet.pid)[1], preempted(kubelet.pid)
            busy0 = machine_busy()
            for name, text in texts:
                write_atomic(kubelet.manifests, name, text)
            timeout, after = 60 + n * 0.5, None
            with trio.move_on_after(timeout):  # the fake tells when its Nth container starts
                after = await reports.next("running")
            wall, cpu = time.monotonic() - t0, kubelet.cpu() - cpu0
            fake_cpu, bench_cpu = cpu_seconds(fake.pid) - fake0, own_cpu() - bench0
            sys_cpu, pre = cpu_split(kubelet.pid)[1] - sys0, preempted(kubelet.pid) - pre0
            others = machine_busy() - busy0 - cpu - fake_cpu - bench_cpu
            got = await count_running(runtime)  # a CRI cross-check of the report, untimed
            if after is None or got < n:
                raise SystemExit(
                    f"N={n}: only {got} running after {timeout:.0f} s\n{kubelet.tail()}"
                )
            result = FakeResult(n, kubelet.startup, wall, cpu, kubelet.memory()[1], fake_cpu)
            result.bench_cpu = bench_cpu
            result.sys_cpu, result.preempted, result.others_cpu = sys_cpu, pre, max(others, 0.0)
            result.calls = calls_since(before, after["calls"])
            if steady > 0:
                await trio.sleep(max(3, n / 25))  # the last syncs and PLEG relists settle
                quiet = await fake_calls(fake, reports)
                result.steady_cpu = await steady_cpu(kubelet, steady)
                result.steady_secs = steady
                result.steady_calls = calls_since(quiet, await fake_calls(fake, reports))
                result.steady_rss = kubelet.memory()[0]
                result.peak_rss = kubelet.memory()[1]
                if (left := await count_running(runtime)) != n:
                    print(f"  warning: {left} of {n} running after the steady period")
        finally:
            exit_secs = await kubelet.stop()
    result.exit_secs = exit_secs
    return result


async def bench_fake(sizes: list[int], steady: float, tmp_dir: str = "/tmp") -> list[FakeResult]:
    results = []
    for i, n in enumerate(sizes):
        tmp = Path(tempfile.mkdtemp(prefix="kbk-", dir=tmp_dir))  # short: unix socket paths
        try:
            print(f"fake: N={n} ...", flush=True)
            r = await bench_fake_once(n, steady if i == 0 else 0, tmp)
            print(
                f"  all running in {r.wall:.2f} s ({r.rate:.0f} pods/s), kubelet CPU "
                f"{r.cpu:.2f} s, FakeRuntime CPU {r.fake_cpu:.2f} s, bench CPU "
                f"{r.bench_cpu:.2f} s, peak RSS {r.peak_rss:.0f} MiB",
                flush=True,
            )
            cores = (os.cpu_count() or 1) * r.wall
            print(
                f"  kubelet: {r.sys_cpu:.2f} s of it system time, preempted {r.preempted} "
                f"times; other processes {r.others_cpu:.2f} s of the {cores:.2f} core-seconds",
                flush=True,
            )
            calls = ", ".join(f"{rpc} {k / n:.2f}" for rpc, k in sorted_calls(r.calls))
            print(f"  CRI calls per pod {sum(r.calls.values()) / n:.2f}: {calls}", flush=True)
            results.append(r)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def print_fake(results: list[FakeResult]) -> None:
    header = ["FakeRuntime, kubelet process", *(f"N={r.n}" for r in results)]

    def row(label: str, fmt: str, attr: str) -> list[str]:
        cells = []
        for r in results:
            value = getattr(r, attr)
            cells.append("-" if value is None else format(value, fmt))
        return [label, *cells]

    steady = next((r.steady_secs for r in results if r.steady_cpu is not None), 0.0)
    over = f" over {steady:.0f} s" if steady else ""
    rows = [
        row("kubelet start → 'started' (s)", ".2f", "startup"),
        row("manifests written → all RUNNING (s)", ".2f", "wall"),
        row("pods/s", ".0f", "rate"),
        row("kubelet CPU during that (s)", ".2f", "cpu"),
        row("FakeRuntime CPU during that (s)", ".2f", "fake_cpu"),
        ["  per pod (ms)", *(f"{1000 * r.fake_cpu / r.n:.2f}" for r in results)],
        row("bench CPU during that (s)", ".2f", "bench_cpu"),
        row("kubelet system time (s, in its CPU)", ".2f", "sys_cpu"),
        row("kubelet preempted (involuntary switches)", "d", "preempted"),
        row("other processes' CPU during that (s)", ".2f", "others_cpu"),
        ["CRI calls per pod (the fake's count)", *(per_pod(r, None) for r in results)],
        *(
            [f"  {rpc}", *(per_pod(r, rpc) for r in results)]
            for rpc, _ in sorted_calls(sum((Counter(r.calls) for r in results), Counter()))
        ),
        row("kubelet peak RSS, VmHWM (MiB)", ".0f", "peak_rss"),
        row(f"steady CPU{over} (% of a core)", ".2f", "steady_cpu"),
        ["  CRI calls per second", *(per_second(r, None) for r in results)],
        *(
            [f"    {rpc}", *(per_second(r, rpc) for r in results)]
            for rpc, _ in sorted_calls(sum((Counter(r.steady_calls) for r in results), Counter()))
        ),
        row("steady RSS, VmRSS (MiB)", ".0f", "steady_rss"),
        row("SIGTERM → exit (s)", ".2f", "exit_secs"),
    ]
    print_table(header, rows)


def sorted_calls(calls: Mapping[str, int]) -> list[tuple[str, int]]:
    """Most called first, then by name."""
    return sorted(calls.items(), key=lambda x: (-x[1], x[0]))


def per_pod(r: FakeResult, rpc: str | None) -> str:
    """CRI calls per pod over the ramp: one RPC's, or (None) all."""
    k = sum(r.calls.values()) if rpc is None else r.calls.get(rpc, 0)
    return f"{k / r.n:.2f}"


def per_second(r: FakeResult, rpc: str | None) -> str:
    """CRI calls per second over the steady period: one RPC's, or (None) all."""
    if not r.steady_secs:
        return "-"
    k = sum(r.steady_calls.values()) if rpc is None else r.steady_calls.get(rpc, 0)
    return f"{k / r.steady_secs:.2f}"


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    for i, line in enumerate([header, *rows]):
        print(
            "  ".join(
                cell.ljust(w) if j == 0 else cell.rjust(w)
                for j, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


# -- B: containerd ---------------------------------------------------------------------------


@attrs.define
class ContainerdResult:
    runtime: str
    batch: int
    startup: float = 0.0
    single: list[float] = attrs.Factory(list)
    latencies: list[float] = attrs.Factory(list)
    steady_cpu: float = 0.0
    steady_secs: float = 0.0
    rss: float = 0.0
    peak_rss: float = 0.0
    stopped: float = 0.0
    removed: float = 0.0
    exit_secs: float = 0.0
    single_start: list[Share | None] = attrs.Factory(list)
    single_stop: list[Share | None] = attrs.Factory(list)
    batch_start: list[Share | None] = attrs.Factory(list)
    batch_stop: list[Share | None] = attrs.Factory(list)


async def running_times(
    runtime: RuntimeClient, names: set[str], t0: float, timeout: float, every: float = 0.01
) -> dict[str, float]:
    """Seconds from ``t0`` at which each pod name's container was first seen RUNNING."""
    from kubelet.cri import api

    seen: dict[str, float] = {}
    with trio.move_on_after(timeout):
        while len(seen) < len(names):
            containers = await runtime.list_containers(state=api.CONTAINER_RUNNING)
            now = time.monotonic() - t0
            for c in containers:
                name = c.labels.get(POD_NAME, "")
                if name in names and name not in seen:
                    seen[name] = now
            if len(seen) < len(names):
                await trio.sleep(every)
    return seen


async def wait_gone(
    runtime: RuntimeClient, names: set[str], t0: float, timeout: float, every: float = 0.05
) -> tuple[float, float]:
    """Seconds from ``t0`` until no RUNNING container, then no sandbox, has these names."""
    from kubelet.cri import api

    stopped = removed = float("inf")
    with trio.move_on_after(timeout):
        while True:
            now = time.monotonic() - t0
            if stopped == float("inf"):
                running = await runtime.list_containers(state=api.CONTAINER_RUNNING)
                if not any(c.labels.get(POD_NAME) in names for c in running):
                    stopped = time.monotonic() - t0
            boxes = await runtime.list_pod_sandbox()
            if not any(s.labels.get(POD_NAME) in names for s in boxes):
                return min(stopped, now), time.monotonic() - t0
            await trio.sleep(every)
    return stopped, removed


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def containerd_kubelet(
    runtime: RuntimeClient,
    endpoint: str,
    config: str | None = None,
    upstream: Upstream | None = None,
    serve: bool = False,
) -> AsyncIterator[KubeletProcess]:
    """A kubelet on containerd (ours, or ``upstream``); on exit its pods are deleted, it is
    stopped, leftovers go."""
    from kubelet.cri import CriError
    from kubelet.cri.__main__ import cleanup

    tmp = Path(tempfile.mkdtemp(prefix="kbk-", dir="/tmp"))
    ports = (free_port(), free_port()) if serve else None
    kubelet = KubeletProcess(tmp, endpoint, config=config, upstream=upstream, ports=ports)
    try:
        await kubelet.start()
        yield kubelet
    finally:
        with trio.CancelScope(shield=True):
            # the kubelet is stopped whatever happens: one left running on a restarted
            # containerd sweeps the next run's pods as orphans
            try:
                ours = {
                    s.labels[POD_NAME]
                    for s in await runtime.list_pod_sandbox()
                    if s.labels.get(POD_NAME, "").endswith(f"-{kubelet.node}")
                }
                if ours and kubelet.proc is not None and kubelet.proc.poll() is None:
                    for path in kubelet.manifests.glob("*.yaml"):
                        path.unlink()
                    await wait_gone(runtime, ours, time.monotonic(), 600, every=0.25)
            except CriError as exc:
                print(f"  runtime unreachable, its pods not removed: {exc}")
            finally:
                if kubelet.proc is not None:
                    await kubelet.stop()
            # safety net, limited to this kubelet's pods (other kubelets may share containerd)
            with contextlib.suppress(CriError):
                for s in await runtime.list_pod_sandbox():
                    name = s.labels.get(POD_NAME, "")
                    if name.endswith(f"-{kubelet.node}"):
                        report = await cleanup(runtime, kubelet_only=True, labels={POD_NAME: name})
                        print(f"  cleanup left-over {name}: {report}")
            if keep := os.environ.get("BENCH_KEEP"):  # the trace and log, to read afterwards
                for f in (kubelet.trace_file, kubelet.log_file):
                    with contextlib.suppress(OSError):
                        shutil.copy(f, Path(keep) / f"{kubelet.node}-{f.name}")
            unmount_under(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def unmount_under(directory: Path) -> None:
    """Unmount what a kubelet left mounted below ``directory``: upstream's makes its root
    dir a shared bind mount of itself, which outlives it."""
    prefix = f"{directory}/"
    with open("/proc/self/mountinfo") as mounts:
        points = [p for p in (line.split()[4] for line in mounts) if p.startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False)


async def single_pods(
    runtime: RuntimeClient, kubelet: KubeletProcess, result: ContainerdResult
) -> list[tuple[str, str, float, float]]:
    """Three pods one after the other, each running then removed; (file, pod, written,
    removed) of each, for the trace."""
    marks: list[tuple[str, str, float, float]] = []
    for i in range(3):
        name = f"one{i}"
        pod = kubelet.pod_name(name)
        t0 = time.monotonic()
        write_atomic(kubelet.manifests, f"{name}.yaml", manifest(name, LOOP, grace=5))
        seen = await running_times(runtime, {pod}, t0, 60)
        if pod not in seen:
            raise SystemExit(f"single pod not running after 60 s\n{kubelet.tail()}")
        result.single.append(seen[pod])
        marks.append((f"{name}.yaml", pod, t0, time.monotonic()))
        (kubelet.manifests / f"{name}.yaml").unlink()
        _, removed = await wait_gone(runtime, {pod}, time.monotonic(), 120)
        print(
            f"  single pod {i + 1}: running in {seen[pod]:.3f} s, sandbox removed "
            f"{removed:.1f} s after the manifest",
            flush=True,
        )
    return marks


async def bench_containerd(
    endpoint: str,
    batch: int,
    steady: float,
    upstream: Upstream | None = None,
    serve: bool = False,
) -> ContainerdResult | None:
    """Single-pod and batch latency, steady state and removal against containerd, of our
    kubelet or of ``upstream``."""
    from kubelet.cri import CriError, connect

    async with trio_asyncio.open_loop(), connect(endpoint, request_timeout=30) as (runtime, _):
        try:
            with trio.fail_after(3):
                info = await runtime.version()
        except (CriError, trio.TooSlowError) as exc:
            print(f"containerd not reachable at {endpoint} ({exc}): skipped")
            return None
        result = ContainerdResult(f"{info.runtime_name} {info.runtime_version}", batch)
        who = "ours" if upstream is None else str(upstream.binary)
        print(f"containerd: {result.runtime}, kubelet: {who}", flush=True)
        async with containerd_kubelet(runtime, endpoint, upstream=upstream, serve=serve) as kubelet:
            result.startup = kubelet.startup
            marks = await single_pods(runtime, kubelet, result)

            names = [f"b{i:02d}" for i in range(batch)]
            pods = {kubelet.pod_name(n) for n in names}
            texts = [(f"{n}.yaml", manifest(n, LOOP, grace=5)) for n in names]
            t0 = time.monotonic()
            for file, text in texts:
                write_atomic(kubelet.manifests, file, text)
            seen = await running_times(runtime, pods, t0, 300)
            if len(seen) < batch:
                raise SystemExit(f"batch: {len(seen)}/{batch} running\n{kubelet.tail()}")
            result.latencies = sorted(seen.values())
            print(f"  batch of {batch}: all running in {result.latencies[-1]:.2f} s", flush=True)
            await trio.sleep(3)
            result.steady_cpu = await steady_cpu(kubelet, steady)
            result.steady_secs = steady
            result.rss, result.peak_rss = kubelet.memory()
            t_batch, t1 = t0, time.monotonic()
            for file, _ in texts:
                (kubelet.manifests / file).unlink()
            result.stopped, result.removed = await wait_gone(runtime, pods, t1, 180)
            print(
                f"  removed: every container stopped {result.stopped:.1f} s, "
                f"every sandbox removed {result.removed:.1f} s",
                flush=True,
            )
            result.exit_secs = await kubelet.stop()
            trace = Trace(kubelet.trace())
            for file, pod, written, removed in marks:
                result.single_start.append(share_of(trace, file, pod, written, ADDED))
                result.single_stop.append(share_of(trace, file, pod, removed, REMOVED))
            for n in names:
                pod = kubelet.pod_name(n)
                result.batch_start.append(share_of(trace, f"{n}.yaml", pod, t_batch, ADDED))
                result.batch_stop.append(share_of(trace, f"{n}.yaml", pod, t1, REMOVED))
    return result


def share_of(trace: Trace, file: str, pod: str, after: float, mask: int) -> Share | None:
    """A static pod's start (manifest added) or teardown (removed) from the trace."""
    until = "StartContainer" if mask == ADDED else "StopContainer"
    return trace.share(file, f"{pod}_default", after, mask, until)


def containerd_rows(r: ContainerdResult) -> list[tuple[str, str, float, str]]:
    """(figure, text, value for a ratio, upstream's anchor) for each row of part B; the
    percentiles row is compared by its p99."""
    lat, one = r.latencies, statistics.median(r.single)
    b = r.batch
    return [
        ("kubelet start → 'started' (s)", f"{r.startup:.2f}", r.startup, "-"),
        ("one pod, manifest → RUNNING, median of 3 (s)", f"{one:.3f}", one, UPSTREAM["one"]),
        (
            f"batch of {b}: p50 / p90 / p99 (s)",
            f"{pct(lat, 50):.2f} / {pct(lat, 90):.2f} / {pct(lat, 99):.2f}",
            pct(lat, 99),
            UPSTREAM["pcts"],
        ),
        (
            f"batch of {b}: all RUNNING (s)",
            f"{lat[-1]:.2f} ({b / lat[-1]:.1f} pods/s)",
            lat[-1],
            UPSTREAM["all"],
        ),
        (
            f"steady CPU over {r.steady_secs:.0f} s (% of a core)",
            f"{r.steady_cpu:.2f} %",
            r.steady_cpu,
            UPSTREAM["cpu"],
        ),
        ("kubelet RSS / peak (MiB)", f"{r.rss:.1f} / {r.peak_rss:.1f}", r.rss, UPSTREAM["rss"]),
        (
            "manifests removed → every container stopped (s)",
            f"{r.stopped:.2f}",
            r.stopped,
            UPSTREAM["stopped"],
        ),
        (
            "manifests removed → every sandbox removed (s)",
            f"{r.removed:.2f}",
            r.removed,
            UPSTREAM["removed"],
        ),
        ("SIGTERM → exit (s)", f"{r.exit_secs:.2f}", r.exit_secs, "-"),
    ]


def print_containerd(r: ContainerdResult, theirs: ContainerdResult | None = None) -> None:
    """Our figures beside upstream's: measured in the same run (``theirs``, with the ratio
    ours / upstream's), else upstream's figures measured on this kind of machine."""
    lat = r.latencies
    ours = containerd_rows(r)
    if theirs is None:
        header = [f"containerd ({r.runtime}), kubelet process", "ours", "upstream (30 pods)"]
        print_table(header, [[label, text, anchor] for label, text, _, anchor in ours])
    else:
        header = [f"containerd ({r.runtime}), side by side", "ours", "upstream", "ours/upstream"]
        rows = []
        for (label, text, value, _), (_, their_text, their_value, _) in zip(
            ours, containerd_rows(theirs), strict=True
        ):
            ratio = f"{value / their_value:.2f}×" if their_value > 0 else "-"
            rows.append([label, text, their_text, ratio])
        print_table(header, rows)
    print("\nthe kubelet's own share (its timing trace; '-': a tree without one)")
    for i, (start, stop) in enumerate(zip(r.single_start, r.single_stop, strict=True)):
        print(f"  one pod {i + 1}, start:    {share_summary([start])}")
        print(f"  one pod {i + 1}, teardown: {share_summary([stop])}")
    print(f"  batch of {r.batch}, start:    {share_summary(r.batch_start)}")
    print(f"  batch of {r.batch}, teardown: {share_summary(r.batch_stop)}")
    if theirs is not None:
        return
    figures = {
        "one pod": statistics.median(r.single),
        "30 pods all running": lat[-1],
        "steady CPU": r.steady_cpu,
        "RSS": r.rss,
        "every container stopped": r.stopped,
    }
    batch = "" if r.batch == 30 else f" (our batch: {r.batch} pods)"
    print(f"\nours / upstream 1.36.2's recorded figures (the bound){batch}:")
    for what, (theirs_figure, bound) in UPSTREAM_RATIOS.items():
        ratio = figures[what] / theirs_figure
        print(f"  {what}: {ratio:.2f} (≤ {bound}){'' if ratio <= bound else '  over'}")


# -- C: many pods on one node (containerd) ---------------------------------------------------


@attrs.define
class NodeResult:
    n: int
    latencies: list[float] = attrs.Factory(list)
    ramp_cpu: float = 0.0
    steady_cpu: float = 0.0
    steady_secs: float = 0.0
    rss: float = 0.0
    peak_rss: float = 0.0
    relists: list[float] = attrs.Factory(list)
    splits: list[RelistSplit] = attrs.Factory(list)
    stopped: float = 0.0
    removed: float = 0.0
    starts: list[Share | None] = attrs.Factory(list)
    stops: list[Share | None] = attrs.Factory(list)


async def bench_node(endpoint: str, n: int, steady: float, settle: float = 30) -> NodeResult | None:
    """N busybox pods on containerd: all running, steady CPU, PLEG relists, RSS, teardown."""
    from kubelet.cri import CriError, connect

    config = (
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        f"maxPods: {max(110, n)}\n"
    )
    result = NodeResult(n)
    async with trio_asyncio.open_loop(), connect(endpoint, request_timeout=60) as (runtime, _):
        try:
            with trio.fail_after(3):
                await runtime.version()
        except (CriError, trio.TooSlowError) as exc:
            print(f"containerd not reachable at {endpoint} ({exc}): skipped")
            return None
        print(f"node: {n} pods on containerd ...", flush=True)
        async with containerd_kubelet(runtime, endpoint, config) as kubelet:
            names = [f"n{i:04d}" for i in range(n)]
            pods = {kubelet.pod_name(x) for x in names}
            cpu0, t0 = kubelet.cpu(), time.monotonic()
            for x in names:
                write_atomic(kubelet.manifests, f"{x}.yaml", manifest(x, LOOP, grace=5))
            seen = await running_times(runtime, pods, t0, 60 + 2 * n, every=0.25)
            result.ramp_cpu = kubelet.cpu() - cpu0
            result.latencies = sorted(seen.values())
            if len(seen) < n:
                print(f"  only {len(seen)}/{n} running\n{kubelet.tail()}")
                return result
            print(f"  all running in {result.latencies[-1]:.1f} s", flush=True)
            await trio.sleep(settle)  # the runtime finishes its own work first
            s0 = time.monotonic()
            result.steady_cpu = await steady_cpu(kubelet, steady)
            s1 = time.monotonic()
            result.steady_secs = steady
            result.rss, result.peak_rss = kubelet.memory()
            print(f"  steady CPU {result.steady_cpu:.2f} %, RSS {result.rss:.0f} MiB", flush=True)
            t1 = time.monotonic()
            for x in names:
                (kubelet.manifests / f"{x}.yaml").unlink()
            result.stopped, result.removed = await wait_gone(
                runtime, pods, t1, 60 + 2 * n, every=0.25
            )
            print(
                f"  removed: every container stopped {result.stopped:.1f} s, "
                f"every sandbox removed {result.removed:.1f} s",
                flush=True,
            )
            await kubelet.stop()
            trace = Trace(kubelet.trace())
            result.relists = trace.relist_durations(s0, s1)
            result.splits = trace.relist_split(s0, s1)
            for x in names:
                pod = kubelet.pod_name(x)
                result.starts.append(share_of(trace, f"{x}.yaml", pod, t0, ADDED))
                result.stops.append(share_of(trace, f"{x}.yaml", pod, t1, REMOVED))
    return result


def print_node(r: NodeResult) -> None:
    lat = r.latencies
    if len(lat) < r.n:
        print(f"node: only {len(lat)} of {r.n} pods ran")
        return
    relists = (
        f"{ms(pct(r.relists, 50))} / {ms(pct(r.relists, 99))} ms ({len(r.relists)} relists)"
        if r.relists
        else "- (no trace)"
    )
    header = [f"{r.n} pods on one node (containerd), kubelet process", "measured", "goal"]
    rows = [
        ["manifests written → all RUNNING (s)", f"{lat[-1]:.1f} ({r.n / lat[-1]:.1f} pods/s)", ""],
        ["  p50 / p99 per pod (s)", f"{pct(lat, 50):.1f} / {pct(lat, 99):.1f}", ""],
        ["kubelet CPU during the ramp (s)", f"{r.ramp_cpu:.1f}", ""],
        [f"steady CPU over {r.steady_secs:.0f} s (% of a core)", f"{r.steady_cpu:.2f} %", "≤ 3 %"],
        ["PLEG relist p50 / p99 (steady)", relists, "p99 ≤ 100 ms"],
        ["kubelet RSS / peak (MiB)", f"{r.rss:.0f} / {r.peak_rss:.0f}", "≤ 150 MiB"],
        ["manifests removed → every container stopped (s)", f"{r.stopped:.1f}", ""],
        ["manifests removed → every sandbox removed (s)", f"{r.removed:.1f}", ""],
    ]
    print_table(header, rows)
    print(f"  start:    {share_summary(r.starts)}")
    print(f"  teardown: {share_summary(r.stops)}")
    print_relist_splits(r.splits)


def print_relist_splits(splits: list[RelistSplit], slowest: int = 5) -> None:
    """The slowest steady relists, split (a tree without the split trace prints nothing)."""
    if not splits:
        return
    calls = [x.calls for x in splits]
    print(
        f"  relists: the two list calls p50 {ms(pct(calls, 50))}, p99 {ms(pct(calls, 99))} ms;"
        f" the slowest {slowest} (ms: total = lists (calls) + diff; loop lag, gc inside;"
        " other calls in flight):"
    )
    for x in sorted(splits, key=lambda x: x.d, reverse=True)[:slowest]:
        print(
            f"    {ms(x.d)} = {ms(x.lists)} ({ms(x.calls)}) + {ms(x.d - x.lists)};"
            f" lag {ms(x.lag)}, gc {ms(x.gc)}; {', '.join(x.others) or '-'}"
        )


# -- orchestration ---------------------------------------------------------------------------


def print_machine() -> None:
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {model}")
    print(f"load average: {load}; python {platform.python_version()}")


async def side_by_side(
    args: argparse.Namespace,
) -> list[tuple[ContainerdResult, ContainerdResult | None]]:
    """Part B for our kubelet, and with ``--upstream`` for that binary right after it,
    ``--pairs`` times (the two alternate, so both see the machine's drift alike)."""
    out: list[tuple[ContainerdResult, ContainerdResult | None]] = []
    upstream = Upstream(Path(args.upstream), tuple(args.upstream_flag)) if args.upstream else None
    for _ in range(args.pairs if upstream is not None else 1):
        ours = await bench_containerd(
            args.containerd_endpoint, args.batch, args.containerd_steady, serve=args.server
        )
        if ours is None:
            break
        theirs = None
        if upstream is not None:
            theirs = await bench_containerd(
                args.containerd_endpoint, args.batch, args.containerd_steady, upstream, args.server
            )
        out.append((ours, theirs))
    return out


async def trio_main(args: argparse.Namespace) -> None:
    fake = [] if args.no_fake else await bench_fake(args.sizes, args.steady, args.fake_tmp)
    cd: list[tuple[ContainerdResult, ContainerdResult | None]] = []
    if not args.no_containerd:
        cd = await side_by_side(args)
    node = (
        None
        if not args.node
        else await bench_node(
            args.containerd_endpoint, args.node, args.node_steady, args.node_settle
        )
    )
    print()
    if fake:
        print_fake(fake)
        print()
    for ours, theirs in cd:
        print_containerd(ours, theirs)
        print()
    if node is not None:
        print_node(node)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="N=110, steady 10 s; containerd batch 10, steady 5 s"
    )
    parser.add_argument("--sizes", help="FakeRuntime pod counts (default 110,1000)")
    parser.add_argument("--steady", type=float, help="FakeRuntime steady seconds (default 60)")
    parser.add_argument("--batch", type=int, help="containerd batch size (default 30)")
    parser.add_argument(
        "--containerd-steady", type=float, help="containerd steady seconds (default 20)"
    )
    parser.add_argument(
        "--node", type=int, default=0, help="N pods on one node on containerd (e.g. 500; off: 0)"
    )
    parser.add_argument(
        "--node-steady", type=float, default=60, help="steady seconds with N pods (default 60)"
    )
    parser.add_argument(
        "--node-settle",
        type=float,
        default=30,
        help="seconds between all running and the steady period (default 30)",
    )
    parser.add_argument("--no-fake", action="store_true", help="skip the FakeRuntime part")
    parser.add_argument(
        "--fake-tmp",
        default="/tmp",
        help="where the FakeRuntime runs keep their manifests, root dir and pod logs (default "
        "/tmp; /dev/shm keeps the figure apart from the disk's state, see docs/benchmarks.md)",
    )
    parser.add_argument("--no-containerd", action="store_true", help="skip the containerd part")
    parser.add_argument(
        "--server",
        action="store_true",
        help="containerd part: the kubelets serve their TLS port and healthz (free loopback "
        "ports; a self-signed pair in a temporary cert dir), as a default configuration does",
    )
    parser.add_argument(
        "--upstream",
        metavar="BINARY",
        help="an upstream kubelet binary: the containerd part runs it too, right after ours, "
        "and prints the two side by side",
    )
    parser.add_argument(
        "--upstream-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="one more flag for the upstream kubelet (repeatable), e.g. "
        "--upstream-flag=--container-runtime=remote for versions before 1.24",
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="with --upstream: ours then upstream, N times"
    )
    parser.add_argument(
        "--containerd-endpoint",
        default=CONTAINERD_ENDPOINT,
        help=f"containerd's CRI endpoint (default {CONTAINERD_ENDPOINT})",
    )
    args = parser.parse_args()
    sizes = args.sizes or ("110" if args.quick else "110,1000")
    args.sizes = [int(x) for x in sizes.split(",") if x]
    args.steady = args.steady if args.steady is not None else (10 if args.quick else 60)
    args.batch = args.batch or (10 if args.quick else 30)
    if args.containerd_steady is None:
        args.containerd_steady = 5 if args.quick else 20
    print_machine()
    trio.run(trio_main, args)


if __name__ == "__main__":
    main()
