"""The ``kubelet`` process against real containerd: static pods from start to teardown.

Real clock, real pods. Each test runs its own kubelet with its own node name and
manifest directory, and leaves nothing behind (every kubelet pod is removed at the end).
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from kubelet.cri import ImageClient, RuntimeClient, api, labels
from kubelet.cri.__main__ import cleanup

from .cluster import own_pod_logs
from .conftest import CONTAINERD_ENDPOINT

pytestmark = pytest.mark.containerd

BUSYBOX = "docker.io/library/busybox:1.35"


def manifest(name: str, script: str, *, restart: str = "Always", extra: str = "") -> str:
    return (
        textwrap.dedent(
            f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
        spec:
          restartPolicy: {restart}
          terminationGracePeriodSeconds: 5
          containers:
          - name: main
            image: {BUSYBOX}
            command: ["sh", "-c", {script!r}]
        """
        )
        + extra
    )


LOOP = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


@attrs.define
class KubeletProcess:
    """One kubelet process with its own node name, manifest dir and log file."""

    runtime: RuntimeClient
    root: Path
    node: str
    proc: subprocess.Popen[bytes] | None = None
    log_file: Path | None = None
    starts: int = 0

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    def start(self, *extra: str) -> None:
        self.starts += 1
        self.log_file = self.root / f"kubelet-{self.starts}.log"
        self.proc = subprocess.Popen(
            own_pod_logs(
                [
                    sys.executable,
                    "-m",
                    "kubelet",
                    "--pod-manifest-path",
                    str(self.manifests),
                    "--hostname-override",
                    self.node,
                    "--enable-server=false",
                    "--healthz-port=0",
                    "--read-only-port=0",
                    "--root-dir",
                    str(self.root / "root"),
                    "--container-runtime-endpoint",
                    CONTAINERD_ENDPOINT,
                    "--file-check-frequency",
                    "2s",
                    "--fail-swap-on=false",  # as upstream's node e2e: a CI machine may swap
                    "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
                    *extra,
                ],
                self.root,
            ),
            stdout=subprocess.DEVNULL,
            stderr=self.log_file.open("wb"),
        )

    def stop(self, sig: int = signal.SIGTERM) -> float:
        """Signal the kubelet and wait for it; returns seconds until it exited."""
        assert self.proc is not None
        start = time.monotonic()
        self.proc.send_signal(sig)
        self.proc.wait(timeout=20)
        return time.monotonic() - start

    def log(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.root.glob("kubelet-*.log"))
        )

    def write(self, name: str, text: str) -> Path:
        path = self.manifests / name
        tmp = path.with_name("." + name + ".tmp")
        tmp.write_text(text)
        tmp.rename(path)  # atomic, as editors and config tools write
        return path

    def pod_name(self, name: str) -> str:
        return f"{name}-{self.node}"

    async def sandboxes(self, name: str) -> list[api.PodSandbox]:
        return await self.runtime.list_pod_sandbox(labels={labels.POD_NAME: self.pod_name(name)})

    async def containers(self, name: str) -> list[api.Container]:
        return await self.runtime.list_containers(labels={labels.POD_NAME: self.pod_name(name)})

    async def running(self, name: str) -> list[api.Container]:
        return [c for c in await self.containers(name) if c.state == api.CONTAINER_RUNNING]

    async def wait_for(
        self, check: Callable[[], object], timeout: float = 30.0, what: str = "condition"
    ) -> float:
        """Poll an async check every 50 ms; returns the seconds it took."""
        start = time.monotonic()
        with trio.move_on_after(timeout) as scope:
            while not await check():  # type: ignore[misc]
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            tail = self.log()[-4000:]
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n--- log ---\n{tail}")
        return time.monotonic() - start


@pytest.fixture
async def kubelet(
    cri: tuple[RuntimeClient, ImageClient], short_tmp: Path
) -> AsyncIterator[KubeletProcess]:
    runtime, _ = cri
    process = KubeletProcess(runtime, short_tmp, f"e2e-{uuid.uuid4().hex[:6]}")
    process.manifests.mkdir()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.stop(signal.SIGKILL)
        await cleanup(runtime, kubelet_only=True)


async def test_static_pods_start_and_serve(kubelet: KubeletProcess) -> None:
    kubelet.start()
    root = Path(__file__).resolve().parents[2]
    for example in (root / "examples" / "manifests").glob("*.yaml"):
        kubelet.write(example.name, example.read_text())
    await kubelet.wait_for(lambda: kubelet.running("web"), what="web running")
    await kubelet.wait_for(lambda: kubelet.running("with-init"), what="with-init running")

    async def job_done() -> bool:
        return any(c.state == api.CONTAINER_EXITED for c in await kubelet.containers("once"))

    await kubelet.wait_for(job_done, what="job finished")
    (sandbox,) = await kubelet.sandboxes("web")
    ip = (await kubelet.runtime.pod_sandbox_status(sandbox.id)).status.network.ip
    async with httpx.AsyncClient() as client:
        for _ in range(50):
            try:
                answer = await client.get(f"http://{ip}:8080/", timeout=2)
                break
            except httpx.TransportError:
                await trio.sleep(0.1)
    assert answer.status_code == 200
    assert answer.text.startswith("hello from web-")
    # the init container ran to completion before the main one
    init = {c.metadata.name: c for c in await kubelet.containers("with-init")}
    assert init["prepare"].state == api.CONTAINER_EXITED
    assert init["prepare"].created_at < init["main"].created_at
    # the job ran once and is not restarted
    (job,) = await kubelet.containers("once")
    status = (await kubelet.runtime.container_status(job.id)).status
    assert (status.exit_code, status.reason) == (0, "Completed")
    # `kubelet pods` lists them
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubelet",
            "pods",
            "--container-runtime-endpoint",
            CONTAINERD_ENDPOINT,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"default/web-{kubelet.node}" in listing
    assert kubelet.stop() < 2.0
    assert await kubelet.running("web")  # the kubelet's shutdown leaves pods running


async def test_crashing_container_restarts_with_backoff(kubelet: KubeletProcess) -> None:
    kubelet.start()
    kubelet.write("crash.yaml", manifest("crash", "echo crashing; exit 1"))

    created: dict[int, float] = {}

    async def three_attempts() -> bool:
        for c in await kubelet.containers("crash"):
            created.setdefault(c.metadata.attempt, c.created_at / 1e9)
        return len(created) >= 3

    await kubelet.wait_for(three_attempts, timeout=40, what="three starts")
    starts = [created[a] for a in sorted(created)]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] < 3.0  # the first crash is restarted at once
    assert 10.0 <= gaps[1] < 12.5  # then the 10 s back-off, honoured within ~1 s
    status = (
        await kubelet.runtime.container_status(
            max(await kubelet.containers("crash"), key=lambda c: c.created_at).id
        )
    ).status
    assert status.annotations["io.kubernetes.container.restartCount"] in ("2", "3")
    assert "CrashLoopBackOff" in kubelet.log() or "back-off" in kubelet.log()


async def test_edited_manifest_replaces_the_pod(kubelet: KubeletProcess) -> None:
    kubelet.start()
    kubelet.write("app.yaml", manifest("app", LOOP))
    await kubelet.wait_for(lambda: kubelet.running("app"), what="first version")
    (first,) = await kubelet.sandboxes("app")
    kubelet.write("app.yaml", manifest("app", "echo v2; " + LOOP))

    async def replaced() -> bool:
        boxes = await kubelet.sandboxes("app")
        running = await kubelet.running("app")
        return (
            len(boxes) == 1
            and boxes[0].id != first.id
            and len(running) == 1
            and running[0].pod_sandbox_id == boxes[0].id
        )

    took = await kubelet.wait_for(replaced, timeout=30, what="the new version alone")
    (second,) = await kubelet.sandboxes("app")
    assert second.labels[labels.POD_UID] != first.labels[labels.POD_UID]
    assert took < 15


async def test_deleted_manifest_leaves_no_sandbox(kubelet: KubeletProcess) -> None:
    kubelet.start()
    path = kubelet.write("gone.yaml", manifest("gone", LOOP))
    await kubelet.wait_for(lambda: kubelet.running("gone"), what="pod running")
    path.unlink()

    async def nothing_left() -> bool:
        return not await kubelet.sandboxes("gone") and not await kubelet.containers("gone")

    took = await kubelet.wait_for(nothing_left, timeout=30, what="sandbox removed")
    assert took < 10.0


async def test_sigkill_and_restart_keeps_containers(kubelet: KubeletProcess) -> None:
    kubelet.start()
    kubelet.write("keep.yaml", manifest("keep", LOOP))
    await kubelet.wait_for(lambda: kubelet.running("keep"), what="pod running")
    before = {c.id for c in await kubelet.running("keep")}
    kubelet.stop(signal.SIGKILL)
    kubelet.start()
    await trio.sleep(6)  # several relists and a housekeeping pass
    after = {c.id for c in await kubelet.running("keep")}
    assert after == before, kubelet.log()[-8000:]  # what the restarted kubelet did, if not
    assert len(await kubelet.sandboxes("keep")) == 1


async def test_malformed_manifest_is_reported_and_others_run(kubelet: KubeletProcess) -> None:
    kubelet.start()
    kubelet.write("good.yaml", manifest("good", LOOP))
    kubelet.write(
        "bad.yaml",
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: Pod
            metadata:
              name: bad
            spec:
              containers:
              - name: main
                image: busybox
                ports:
                - containerPort: eighty
            """
        ),
    )
    await kubelet.wait_for(lambda: kubelet.running("good"), what="good pod running")

    async def reported() -> bool:
        return "bad.yaml:10" in kubelet.log()

    await kubelet.wait_for(reported, timeout=10, what="the error report")
    line = next(x for x in kubelet.log().splitlines() if "bad.yaml:10" in x)
    assert "containerPort" in line
    assert not await kubelet.sandboxes("bad")


async def test_pod_sees_its_env_dns_hosts_and_shared_empty_dir(kubelet: KubeletProcess) -> None:
    resolv = kubelet.root / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.53\nsearch corp.example\n")
    kubelet.start(
        "--cluster-dns",
        "10.96.0.10",
        "--cluster-domain",
        "cluster.local",
        "--resolv-conf",
        str(resolv),
    )
    kubelet.write(
        "files.yaml",
        textwrap.dedent(
            f"""\
            apiVersion: v1
            kind: Pod
            metadata:
              name: files
            spec:
              terminationGracePeriodSeconds: 2
              hostname: files
              volumes:
              - name: scratch
                emptyDir: {{}}
              containers:
              - name: writer
                image: {BUSYBOX}
                command: ["sh", "-c", "echo shared > /out/note; {LOOP}"]
                env:
                - name: ME
                  valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
                volumeMounts:
                - {{name: scratch, mountPath: /out}}
              - name: reader
                image: {BUSYBOX}
                command: ["sh", "-c", {LOOP!r}]
                volumeMounts:
                - {{name: scratch, mountPath: /in, readOnly: true}}
            """
        ),
    )

    async def both() -> bool:
        return len(await kubelet.running("files")) == 2

    await kubelet.wait_for(both, what="both containers running")
    by_name = {c.metadata.name: c.id for c in await kubelet.running("files")}

    async def run(name: str, *cmd: str) -> str:
        result = await kubelet.runtime.exec_sync(by_name[name], list(cmd), timeout=5)
        return result.stdout.decode()

    with trio.fail_after(10):
        while "shared" not in await run("reader", "cat", "/in/note"):
            await trio.sleep(0.1)
    assert (await run("writer", "sh", "-c", "echo $ME")).strip() == f"files-{kubelet.node}"
    resolv_conf = await run("writer", "cat", "/etc/resolv.conf")
    assert "nameserver 10.96.0.10" in resolv_conf
    assert (
        "search default.svc.cluster.local svc.cluster.local cluster.local corp.example"
        in resolv_conf
    )
    assert "options ndots:5" in resolv_conf
    hosts = await run("reader", "cat", "/etc/hosts")
    assert hosts.startswith("# Kubernetes-managed hosts file.")
    assert "\tfiles" in hosts
    assert (
        "Read-only file system"
        in (
            await kubelet.runtime.exec_sync(
                by_name["reader"], ["sh", "-c", "touch /in/x 2>&1"], timeout=5
            )
        ).stdout.decode()
    )


async def test_pod_resources_api_lists_the_static_pod(kubelet: KubeletProcess) -> None:
    """A real grpclib client on the kubelet process's pod-resources socket."""
    import trio_asyncio
    from grpclib.client import Channel

    from kubelet.server.podresources import podresources_api_pb2 as pb
    from kubelet.server.podresources.podresources_api_grpc import PodResourcesListerStub

    kubelet.start()
    kubelet.write("pr.yaml", manifest("pr", LOOP))
    await kubelet.wait_for(lambda: kubelet.running("pr"), what="pr running")
    path = kubelet.root / "root" / "pod-resources" / "kubelet.sock"

    async def listed() -> pb.ListPodResourcesResponse:
        channel = Channel(path=str(path))
        try:
            stub = PodResourcesListerStub(channel)
            response: pb.ListPodResourcesResponse = await stub.List(
                pb.ListPodResourcesRequest(), timeout=10
            )
            return response
        finally:
            channel.close()

    response = await trio_asyncio.aio_as_trio(listed)()
    names = {(p.namespace, p.name): [c.name for c in p.containers] for p in response.pod_resources}
    assert names == {("default", f"pr-{kubelet.node}"): ["main"]}
