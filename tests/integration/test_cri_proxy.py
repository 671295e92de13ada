"""scripts/cri_proxy.py: a real CRI client through the recording proxy to FakeRuntime."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import h2.config
import h2.connection
import pytest
import trio
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.exceptions import GRPCError

from kubelet.cri import api, connect
from kubelet.cri.codec import LimitedProtoCodec
from kubelet.testing import FakeRuntime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def proxy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cri_proxy", ROOT / "scripts" / "cri_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cri_proxy"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", "docker.io/library/busybox:1.35")


def sandbox_config(name: str) -> api.PodSandboxConfig:
    meta = api.PodSandboxMetadata(name=name, namespace="default", uid=f"uid-{name}")
    return api.PodSandboxConfig(metadata=meta, log_directory="/tmp/logs")


async def test_calls_pass_unchanged_and_are_recorded_with_their_pod(
    fake: FakeRuntime, short_tmp: Path, proxy: ModuleType
) -> None:
    out = io.StringIO()
    listen = str(short_tmp / "proxy.sock")
    assert fake.path is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve, listen, str(fake.path), proxy.Recorder(out))
        async with connect(f"unix://{listen}") as (runtime, images):
            version = await runtime.version()
            config = sandbox_config("web")
            sandbox = await runtime.run_pod_sandbox(config)
            await images.image_status(api.ImageSpec(image="docker.io/library/busybox:1.35"))
            container = await runtime.create_container(
                sandbox,
                api.ContainerConfig(
                    metadata=api.ContainerMetadata(name="app"),
                    image=api.ImageSpec(image="docker.io/library/busybox:1.35"),
                    log_path="app.log",
                ),
                config,
            )
            await runtime.start_container(container)
            await runtime.stop_container(container, 0)
            await runtime.stop_pod_sandbox(sandbox)
            await runtime.remove_pod_sandbox(sandbox)
        nursery.cancel_scope.cancel()
    assert version.runtime_name == "fakeruntime"  # the answers came through unchanged
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    rpcs = [(x["rpc"], x["pod"]) for x in lines]
    assert rpcs == [
        ("Version", ""),
        ("RunPodSandbox", "default/web"),
        ("ImageStatus", ""),
        ("CreateContainer", "default/web"),
        ("StartContainer", "default/web"),  # named by its container id alone
        ("StopContainer", "default/web"),
        ("StopPodSandbox", "default/web"),
        ("RemovePodSandbox", "default/web"),
    ]
    assert lines[1]["method"] == "/runtime.v1.RuntimeService/RunPodSandbox"
    assert lines[1]["sandbox"] == sandbox and lines[3]["container"] == container
    assert lines[4]["sandbox"] == sandbox
    assert all(x["status"] == "0" and x["start"] <= x["end"] for x in lines)


async def test_an_unknown_method_and_v1alpha2_are_forwarded_and_recorded(
    fake: FakeRuntime, short_tmp: Path, proxy: ModuleType
) -> None:
    out = io.StringIO()
    listen = str(short_tmp / "proxy.sock")
    assert fake.path is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve, listen, str(fake.path), proxy.Recorder(out))
        through = await trio.to_thread.run_sync(_raw_calls, listen)
        nursery.cancel_scope.cancel()
    direct = await trio.to_thread.run_sync(_raw_calls, str(fake.path))
    assert through == direct  # the runtime's answers, as they were
    assert len(through) == 2
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["method"], x["status"]) for x in lines] == [
        ("/runtime.v1alpha2.RuntimeService/PodSandboxStatus", str(Status.UNIMPLEMENTED.value)),
        ("/runtime.v1.RuntimeService/NoSuchCall", str(Status.UNIMPLEMENTED.value)),
    ]
    assert lines[0]["sandbox"] == "abc"  # v1alpha2's fields read as v1's


def _raw_calls(listen: str) -> list[tuple[Status, str | None]]:
    """Calls no CRI client makes, from a plain asyncio grpclib channel."""
    import asyncio

    async def run() -> list[tuple[Status, str | None]]:
        channel = Channel(path=listen, codec=LimitedProtoCodec())
        codes = []
        calls = [
            ("/runtime.v1alpha2.RuntimeService/PodSandboxStatus", "PodSandboxStatus"),
            ("/runtime.v1.RuntimeService/NoSuchCall", "Version"),
        ]
        try:
            for path, message in calls:
                request_type = getattr(api, message + "Request")
                request = (
                    request_type(pod_sandbox_id="abc") if "Sandbox" in message else request_type()
                )
                try:
                    async with channel.request(
                        path, Cardinality.UNARY_UNARY, request_type, request_type
                    ) as stream:
                        await stream.send_message(request, end=True)
                        await stream.recv_message()
                except GRPCError as exc:
                    codes.append((exc.status, exc.message))
        finally:
            channel.close()
        return codes

    return asyncio.run(run())


def test_a_server_stream_ends_with_its_trailers(proxy: ModuleType) -> None:
    """Frames of a server-streaming call (three messages, then trailers), as h2 writes
    them, fed through the two directions' parsers."""
    out = io.StringIO()
    to_server, to_client = proxy.Recorder(out).connection()
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    client.initiate_connection()
    server.initiate_connection()
    path = "/runtime.v1.RuntimeService/GetContainerEvents"
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x")]
    client.send_headers(1, headers)
    client.send_data(1, b"\x00\x00\x00\x00\x00", end_stream=True)
    wire = client.data_to_send()
    to_server.feed(wire[:7])  # the preface split across reads
    to_server.feed(wire[7:])
    server.receive_data(wire)
    server.send_headers(1, [(":status", "200"), ("content-type", "application/grpc")])
    for _ in range(3):
        server.send_data(1, b"\x00\x00\x00\x00\x00")
    to_client.feed(server.data_to_send())
    assert out.getvalue() == ""  # still streaming
    server.send_headers(1, [("grpc-status", "0")], end_stream=True)
    to_client.feed(server.data_to_send())
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert (line["rpc"], line["status"]) == ("GetContainerEvents", "0")


def test_compare_prints_one_pods_calls_side_by_side(tmp_path: Path, proxy: ModuleType) -> None:
    def trace(name: str, pod: str, rpcs: list[str]) -> str:
        path = tmp_path / name
        calls = [
            {"rpc": r, "pod": pod if r != "ImageStatus" else "", "start": 10 + i, "end": 10.5 + i}
            for i, r in enumerate(rpcs)
        ]
        calls.append({"rpc": "ListContainers", "pod": "", "start": 11.2, "end": 11.3})
        path.write_text("".join(json.dumps(c) + "\n" for c in calls))
        return str(path)

    ours = trace("ours.jsonl", "default/a-n1", ["RunPodSandbox", "ImageStatus", "StartContainer"])
    theirs = trace("theirs.jsonl", "default/a-n2", ["RunPodSandbox", "StartContainer"])
    text = proxy.compare(ours, theirs, "a-", None)
    lines = text.splitlines()
    assert "default/a-n1" in lines[0] and "default/a-n2" in lines[0]
    assert "RunPodSandbox" in lines[2].split("|")[0] and "RunPodSandbox" in lines[2].split("|")[1]
    assert "ImageStatus" in lines[3].split("|")[0] and "StartContainer" in lines[3].split("|")[1]
    assert "ListContainers" not in text
    assert len(lines) == 5
