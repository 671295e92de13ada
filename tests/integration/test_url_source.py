"""URLSource: httpx MockTransport for the rules, one real socket for the wire."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import httpx
import pytest
import trio
import yaml

from kubelet.api import Pod
from kubelet.boundedio import inline
from kubelet.cri import labels
from kubelet.sources import HTTP_SOURCE, PodOperation, URLSource
from kubelet.sources.static import MAX_CONFIG_LENGTH

URL = "http://manifests.example/node1"
NODE = "node1"


def pod_doc(name: str, image: str = "busybox:1.36") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": image}]},
    }


POD = json.dumps(pod_doc("web")).encode()
POD_LIST = yaml.safe_dump(
    {"apiVersion": "v1", "kind": "PodList", "items": [pod_doc("a"), pod_doc("b")]}
).encode()


class Recorder:
    def __init__(self) -> None:
        self.sets: list[list[Pod]] = []
        self.origins: Mapping[str, str] = {}
        self.registered: set[str] = set()

    def register(self, source: str) -> None:
        self.registered.add(source)

    async def update(
        self,
        source: str,
        op: PodOperation,
        pods: Sequence[Pod],
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        assert (source, op) == (HTTP_SOURCE, PodOperation.SET)
        self.sets.append(list(pods))
        self.origins = origins or {}


class Server:
    """A scripted manifest server: each request gets the next response (the last repeats)."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(response, Exception):
            raise response
        return response

    def then(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)


def ok(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body)


async def poll_times(
    source: URLSource, rec: Recorder, times: int, transport: httpx.AsyncBaseTransport
) -> None:
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(times):
            await source.poll(client, rec)


def make(server: Server, **kw: object) -> tuple[URLSource, Recorder, Callable[[int], object]]:
    transport = httpx.MockTransport(server)
    source = URLSource(URL, NODE, transport=transport, **kw)  # type: ignore[arg-type]
    rec = Recorder()
    return source, rec, lambda n: poll_times(source, rec, n, transport)


async def test_pod_body_and_headers() -> None:
    server = Server(ok(POD))
    source, rec, poll = make(server, headers={"Authorization": ["Bearer t"], "X-Multi": ["a", "b"]})
    await poll(1)  # type: ignore[misc]
    request = server.requests[0]
    assert request.method == "GET" and str(request.url) == URL
    assert request.headers["authorization"] == "Bearer t"
    assert request.headers.get_list("x-multi") == ["a", "b"]
    [[pod]] = rec.sets
    assert pod.metadata.name == "web-node1" and len(pod.uid) == 32
    assert rec.origins == {pod.uid: URL}  # names the URL in what is logged about the pod
    assert pod.metadata.annotations[labels.CONFIG_HASH] == pod.uid
    assert pod.spec.tolerations == ()  # only file pods get the NoExecute toleration
    del source


async def test_pod_list_body() -> None:
    _, rec, poll = make(Server(ok(POD_LIST)))
    await poll(1)  # type: ignore[misc]
    assert [[p.metadata.name for p in pods] for pods in rec.sets] == [["a-node1", "b-node1"]]


async def test_unchanged_body_is_not_resent_and_a_changed_one_is() -> None:
    server = Server(ok(POD), ok(POD), ok(json.dumps(pod_doc("web", "busybox:1.37")).encode()))
    _, rec, poll = make(server)
    await poll(3)  # type: ignore[misc]
    assert len(rec.sets) == 2
    assert rec.sets[1][0].spec.containers[0].image == "busybox:1.37"


async def test_failure_keeps_the_last_set_and_does_not_flood(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(ok(POD))
    source, rec, _ = make(server)
    transport = httpx.MockTransport(server)
    caplog.set_level(logging.INFO, logger="kubelet.sources.url")
    async with httpx.AsyncClient(transport=transport) as client:
        await source.poll(client, rec)
        server.then(httpx.Response(500))
        for _ in range(100):
            await source.poll(client, rec)
        assert len(rec.sets) == 1  # nothing sent: the pods keep running
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        # one line when failing starts; failing again says nothing new
        assert len(warnings) == 1
        assert "500 Internal Server Error" in warnings[0].getMessage()
        server.then(httpx.ConnectError("refused"))
        await source.poll(client, rec)  # a different error is logged at once
        assert "refused" in caplog.records[-1].getMessage()
        server.then(ok(POD))
        await source.poll(client, rec)
        assert "succeeded again after 101 failures" in caplog.records[-1].getMessage()
        assert len(rec.sets) == 1  # same body as before the outage: nothing to resend


async def test_invalid_body_is_reported_and_sends_nothing(caplog: pytest.LogCaptureFixture) -> None:
    bad = json.dumps(pod_doc("Web_Bad")).encode()
    server = Server(ok(POD), ok(bad))
    _, rec, poll = make(server)
    caplog.set_level(logging.WARNING, logger="kubelet.sources.url")
    await poll(6)  # type: ignore[misc]
    assert len(rec.sets) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1  # same bad body: logged once
    assert f"{URL} (line 1): invalid pod: metadata.name: Invalid value" in messages[0]


async def test_empty_body_is_an_empty_set(caplog: pytest.LogCaptureFixture) -> None:
    _, rec, poll = make(Server(ok(POD), ok(b"")))
    caplog.set_level(logging.WARNING, logger="kubelet.sources.url")
    await poll(2)  # type: ignore[misc]
    assert [len(s) for s in rec.sets] == [1, 0]
    assert "zero-length data" in caplog.records[-1].getMessage()


async def test_too_large_bodies_are_refused(caplog: pytest.LogCaptureFixture) -> None:
    async def stream() -> AsyncIterator[bytes]:
        for _ in range(11):
            yield b"#" * (1024 * 1024)

    big = httpx.Response(200, headers={"content-length": str(MAX_CONFIG_LENGTH + 1)}, content=b"")
    chunked = httpx.Response(200, content=stream())
    _, rec, poll = make(Server(big, chunked))
    caplog.set_level(logging.WARNING, logger="kubelet.sources.url")
    await poll(2)  # type: ignore[misc]
    assert rec.sets == []
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all("10 MiB) limit" in m for m in messages)
    assert "manifest is 10485761 bytes" in messages[0]
    assert "manifest is more than the 10485760 byte" in messages[1]  # read no further


async def test_run_polls_every_check_frequency(autojump_clock: trio.abc.Clock) -> None:
    server = Server(ok(POD))
    source = URLSource(
        URL, NODE, transport=httpx.MockTransport(server), check_frequency=20.0, run_sync=inline
    )
    rec = Recorder()
    async with trio.open_nursery() as nursery:
        await nursery.start(source.run, rec)
        assert rec.registered == {HTTP_SOURCE}
        await trio.sleep(45)
        assert len(server.requests) == 3  # t = 0, 20, 40
        assert len(rec.sets) == 1
        nursery.cancel_scope.cancel()


async def test_real_socket_server() -> None:
    seen_requests: list[bytes] = []

    async def handle(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            request += chunk
        seen_requests.append(request)
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(POD_LIST)}\r\nConnection: close\r\n\r\n"
        await stream.send_all(head.encode() + POD_LIST)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        url = f"http://127.0.0.1:{port}/pods"
        source = URLSource(url, NODE, headers={"X-Node": [NODE]}, check_frequency=3600.0)
        rec = Recorder()
        await nursery.start(source.run, rec)
        with trio.fail_after(5):
            while not rec.sets:
                await trio.sleep(0.01)
        assert [p.metadata.name for p in rec.sets[0]] == ["a-node1", "b-node1"]
        assert b"x-node: node1\r\n" in seen_requests[0].lower()
        nursery.cancel_scope.cancel()


def test_malformed_url_fails_at_construction() -> None:
    with pytest.raises(httpx.InvalidURL):
        URLSource("http://[::1", NODE)
