"""Answers no API server should give: the object is skipped or the request fails as an
ApiError, and the list and the watch go on; nothing ends the kubelet."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

from kubelet.api import PODS, ApiClient, ListWatch, Pod, UidStore, reflect
from kubelet.api import errors as e
from kubelet.api.watch import WatchBackoff
from kubelet.api.wellformed import object_problem
from kubelet.boundedio import inline
from kubelet.sources.apiserver import decode_pod

from .test_client import bookmark, conn, event, ok

DEEP = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
"""JSON nested 100,000 deep: more than any decoder's stack."""


def pod(name: str, rv: int, namespace: str = "ns") -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return {"metadata": meta}


@attrs.define
class Scripted:
    """A MockTransport handler: lists answer with the next of ``lists`` (bytes), watches
    stream the next of ``watches`` (lines as bytes), then stay open."""

    lists: list[bytes]
    watches: list[list[bytes]]
    requests: list[tuple[str, httpx.URL]] = attrs.field(factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        kind = "watch" if request.url.params.get("watch") == "true" else "list"
        self.requests.append((kind, request.url))
        if kind == "list":
            return httpx.Response(200, content=self.lists.pop(0))
        lines = self.watches.pop(0) if self.watches else []
        return httpx.Response(200, content=_stream(lines, forever=not self.watches))

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.requests if k == kind)


async def _stream(lines: list[bytes], *, forever: bool) -> AsyncIterator[bytes]:
    for line in lines:
        yield line + b"\n"
        await trio.lowlevel.checkpoint()
    if forever:
        await trio.sleep_forever()


def listing(*items: Any, rv: int = 100) -> bytes:
    return json.dumps({"items": list(items), "metadata": {"resourceVersion": str(rv)}}).encode()


def line(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev).encode()


async def reflect_into(api: Scripted, seen: list[list[str]], decode: Any = None) -> None:
    async def on_change(objects: list[Any]) -> None:
        seen.append(
            sorted(
                o.metadata.name if isinstance(o, Pod) else o["metadata"]["name"] for o in objects
            )
        )

    store: UidStore[Any] = UidStore(on_change, decode) if decode else UidStore(on_change)
    transport = httpx.MockTransport(api)
    async with ApiClient.open(conn(), transport=transport, run_sync=inline) as client:
        await reflect(client, ListWatch(PODS.path()), store, backoff=WatchBackoff(jitter=0))


async def run_for(api: Scripted, seconds: float, decode: Any = None) -> list[list[str]]:
    seen: list[list[str]] = []
    with trio.move_on_after(seconds):
        await reflect_into(api, seen, decode)
    return seen


async def test_objects_whose_metadata_is_no_map_are_skipped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = Scripted(
        lists=[listing(pod("a", 1), {"metadata": "oops"}, {"metadata": ["x"]}, "no object")],
        watches=[
            [
                line({"type": "ADDED", "object": {"metadata": "oops"}}),
                line({"type": "MODIFIED", "object": {"metadata": [1, 2]}}),
                line({"type": "ADDED", "object": {"metadata": {"name": 7}}}),
                line({"type": "ADDED", "object": {"metadata": {}, "spec": "x"}}),
                line(event("ADDED", "b", 101)),
            ]
        ],
    )
    seen = await run_for(api, 10)
    assert seen == [["a"], ["a", "b"]]
    assert api.count("watch") == 1


async def test_json_nested_too_deep_fails_the_request_not_the_kubelet(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    api = Scripted(
        lists=[DEEP, listing(pod("a", 1))],
        watches=[[DEEP], [line(event("ADDED", "b", 101))]],
    )
    seen = await run_for(api, 30)
    assert seen == [["a"], ["a", "b"]]
    assert (api.count("list"), api.count("watch")) == (2, 2)  # each retried once
    assert "nested too deeply" in caplog.text


async def test_a_name_or_version_too_long_for_a_url_is_skipped(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    huge = "a" * 10_000_000
    api = Scripted(
        lists=[listing(pod("a", 1), pod(huge, 2))],
        watches=[
            [
                line(event("ADDED", huge, 101)),
                line(bookmark(10**2000)),
                line(event("ADDED", "b", 102)),
            ],
            [line(event("ADDED", "c", 103))],
        ],
    )
    with caplog.at_level(logging.ERROR):
        seen = await run_for(api, 30)
    assert seen == [["a"], ["a", "b"], ["a", "b", "c"]]
    second = [url for kind, url in api.requests if kind == "watch"][1]
    assert second.params["resourceVersion"] == "102"
    assert "metadata.name is 10000000 characters, more than 253" in caplog.text
    assert "metadata.resourceVersion is more than 1024 characters" in caplog.text
    assert max(len(r.getMessage()) for r in caplog.records) < 2000


async def test_a_pod_whose_name_or_namespace_is_no_dns_name_is_skipped(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    api = Scripted(
        lists=[listing(pod("a", 1), pod("Not_A_Name", 2), pod("b", 3, namespace="Up.Per"))],
        watches=[],
    )
    seen = await run_for(api, 10, decode=decode_pod)
    assert seen == [["a"]]
    assert "ignoring an undecodable object ns/Not_A_Name: metadata.name:" in caplog.text
    with pytest.raises(ValueError, match=r"metadata\.namespace"):
        decode_pod(pod("b", 3, namespace="Up.Per"))


async def test_a_url_too_long_is_an_api_error(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return ok({})

    async with ApiClient.open(conn(), transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(e.ApiError, match="URL too long"):
            await client.patch(PODS.path("ns", "a" * 10_000_000, "status"), {})


async def test_an_answer_that_does_not_fit_its_type_is_an_invalid_response(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return ok({"metadata": "oops"})

    async with ApiClient.open(conn(), transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(e.InvalidResponse, match="metadata: expected an object"):
            await client.get(PODS.path("ns", "a"), into=Pod)


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        ({"metadata": {"name": "a", "namespace": "ns"}}, None),
        ({}, None),
        ({"metadata": None, "spec": None}, None),
        ([], "a list, not an object"),
        ({"status": "x"}, "status is a str, not an object"),
        ({"metadata": {"uid": 1}}, "metadata.uid is a int, not a string"),
        ({"metadata": {"name": "a/b"}}, "metadata.name 'a/b' cannot be a path segment"),
        ({"metadata": {"name": ".."}}, "metadata.name '..' cannot be a path segment"),
        ({"metadata": {"namespace": "a" * 64}}, "is not a DNS-1123 label"),
    ],
)
def test_object_problems(obj: Any, problem: str | None) -> None:
    found = object_problem(obj)
    assert found == problem or (problem is not None and found is not None and problem in found)


async def test_an_answer_larger_than_the_bound_is_refused_before_it_is_read(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubelet.api import client as client_module

    monkeypatch.setattr(client_module, "MAX_BODY_BYTES", 1000)
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:  # a body without end: only what the bound needs may be taken
            sent.append(1)
            yield b" " * 100
            await trio.lowlevel.checkpoint()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/declared"):
            return httpx.Response(200, headers={"content-length": "5000"}, content=b"{}")
        return httpx.Response(200, content=endless())

    async with ApiClient.open(conn(), transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(e.InvalidResponse, match="more than 1000 bytes is too large"):
            await client.get(PODS.path("ns", "a"))
        assert len(sent) <= 12
        with pytest.raises(e.InvalidResponse, match="5000 bytes is too large"):
            await client.get(PODS.path("ns", "declared"))


async def test_a_watch_line_without_end_fails_the_watch_which_is_retried(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kubelet.api import client as client_module

    monkeypatch.setattr(client_module, "MAX_BODY_BYTES", 4096)
    sent: list[int] = []
    watches: list[int] = []

    async def endless_line() -> AsyncIterator[bytes]:
        yield line(event("ADDED", "b", 101)) + b"\n"
        while True:  # then one event that never ends: held up to the bound, no further
            sent.append(1)
            yield b"x" * 100
            await trio.lowlevel.checkpoint()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch") != "true":
            return httpx.Response(200, content=listing(pod("a", 1)))
        watches.append(1)
        if len(watches) == 1:
            return httpx.Response(200, content=endless_line())
        return httpx.Response(200, content=_stream([line(event("ADDED", "c", 102))], forever=True))

    seen: list[list[str]] = []

    async def on_change(objects: list[Any]) -> None:
        seen.append(sorted(o["metadata"]["name"] for o in objects))

    store: UidStore[Any] = UidStore(on_change)
    with trio.move_on_after(30):
        transport = httpx.MockTransport(handler)
        async with ApiClient.open(conn(), transport=transport, run_sync=inline) as client:
            await reflect(client, ListWatch(PODS.path()), store, backoff=WatchBackoff(jitter=0))
    assert seen[:2] == [["a"], ["a", "b"]] and seen[-1] == ["a", "b", "c"]
    assert len(watches) == 2 and len(sent) <= 42
    assert "watch: an event of more than 4096 bytes" in caplog.text
