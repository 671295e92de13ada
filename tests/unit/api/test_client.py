"""ApiClient and the reflector: paths, query strings, errors, retries, watches.

No network: httpx.MockTransport for the rules (autojump clock for waits), and small
trio servers on 127.0.0.1 for what only a real socket shows (chunked watch streams,
mTLS handshakes, tls-server-name).
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import random
import re
import ssl
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing
import yaml

from kubelet.agent import open_client
from kubelet.api import (
    LEASES,
    NODES,
    PODS,
    ApiClient,
    ClusterConnection,
    ListWatch,
    PatchType,
    Pod,
    TokenBucket,
    UidStore,
    WatchEvent,
    from_wire,
    reflect,
    to_wire,
)
from kubelet.api import errors as e
from kubelet.api.client import api_path, user_agent
from kubelet.api.kubeconfig import TokenSource, parse_kubeconfig
from kubelet.api.ratelimit import Unlimited
from kubelet.api.watch import Relisted, WatchBackoff
from kubelet.config import KubeletConfiguration, Options

from .test_kubeconfig import Issued, b64, issue, kubeconfig

SERVER = "https://api.test:6443"

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def conn(**kw: Any) -> ClusterConnection:
    return ClusterConnection(server=SERVER, token=TokenSource("tok"), **kw)


@attrs.define
class Recorder:
    """A MockTransport handler: records requests (with trio time) and answers from a
    queue of responses, then from ``default``."""

    answers: list[httpx.Response | Exception] = attrs.field(factory=list)
    default: httpx.Response | None = None
    requests: list[httpx.Request] = attrs.field(factory=list)
    times: list[float] = attrs.field(factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.times.append(trio.current_time())
        answer = self.answers.pop(0) if self.answers else self.default
        if isinstance(answer, Exception):
            raise answer
        assert answer is not None, f"unexpected request {request.method} {request.url}"
        return answer

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def ok(body: Any = None, **kw: Any) -> httpx.Response:
    return httpx.Response(200, json=body if body is not None else {}, **kw)


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def fail(code: int, reason: str = "", message: str = "boom", **kw: Any) -> httpx.Response:
    return httpx.Response(code, json=status_body(code, reason, message), **kw)


def client_for(handler: Handler, connection: ClusterConnection | None = None, **kw: Any) -> Any:
    return ApiClient.open(connection or conn(), transport=httpx.MockTransport(handler), **kw)


# -- paths -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("v1", "pods", "ns1", "web", "status"), "/api/v1/namespaces/ns1/pods/web/status"),
        (("v1", "pods", "ns1", "web"), "/api/v1/namespaces/ns1/pods/web"),
        (("v1", "pods", "ns1"), "/api/v1/namespaces/ns1/pods"),
        (("v1", "pods"), "/api/v1/pods"),
        (("v1", "nodes", "", "node1"), "/api/v1/nodes/node1"),
        (("v1", "nodes", "", "node1", "status"), "/api/v1/nodes/node1/status"),
        (("v1", "namespaces", "", "default"), "/api/v1/namespaces/default"),
        (
            ("coordination.k8s.io/v1", "leases", "kube-node-lease", "node1"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1",
        ),
        (("events.k8s.io/v1", "events", "ns1"), "/apis/events.k8s.io/v1/namespaces/ns1/events"),
    ],
)
def test_api_paths(args: tuple[str, ...], path: str) -> None:
    assert api_path(*args) == path


def test_resource_helpers() -> None:
    assert PODS.path("ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert NODES.path(name="n1") == "/api/v1/nodes/n1"
    assert LEASES.path("kube-node-lease", "n1") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    )
    with pytest.raises(ValueError, match="cluster-scoped"):
        NODES.path("ns", "n1")
    with pytest.raises(ValueError, match="needs an object name"):
        api_path("v1", "pods", "ns", "", "status")


def test_user_agent_like_upstream() -> None:
    assert re.fullmatch(
        r"kubelet/v\d+\.\d+\.\d+ \(linux/[a-z0-9]+\) kubernetes/unknown", user_agent()
    )
    assert user_agent("0123456789abcdef").endswith("kubernetes/0123456")


# -- requests -----------------------------------------------------------------------------


async def test_get_sends_upstream_headers_and_decodes() -> None:
    rec = Recorder(default=ok({"metadata": {"name": "n1"}}))
    async with client_for(rec) as client:
        assert await client.get(NODES.path(name="n1")) == {"metadata": {"name": "n1"}}
    req = rec.last
    assert req.method == "GET"
    assert str(req.url) == "https://api.test:6443/api/v1/nodes/n1"
    assert req.headers["accept"] == "application/json"
    assert req.headers["authorization"] == "Bearer tok"
    assert req.headers["user-agent"] == user_agent()
    assert "content-type" not in req.headers


async def test_get_into_an_attrs_class() -> None:
    pod = {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    rec = Recorder(default=ok(pod))
    async with client_for(rec) as client:
        got = await client.get(PODS.path("ns", "web"), into=Pod)
    assert isinstance(got, Pod)
    assert got.metadata.uid == "u1"


async def test_server_path_prefix_sni_and_compression_settings() -> None:
    rec = Recorder(default=ok())
    connection = ClusterConnection(
        server="https://rancher.example/k8s/clusters/c-1",
        tls_server_name="kubernetes.default.svc",
        disable_compression=True,
    )
    async with client_for(rec, connection) as client:
        await client.get(api_path("v1", "nodes", name="n1"))
    req = rec.last
    assert req.url.path == "/k8s/clusters/c-1/api/v1/nodes/n1"
    assert req.extensions["sni_hostname"] == "kubernetes.default.svc"
    assert req.headers["accept-encoding"] == "identity"
    assert "authorization" not in req.headers


async def test_create_update_patch_delete_bodies() -> None:
    rec = Recorder(default=ok({"kind": "X"}))
    lease = {"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}}
    async with client_for(rec) as client:
        await client.create(LEASES.path("kube-node-lease"), lease)
        post = rec.last
        await client.update(LEASES.path("kube-node-lease", "n1"), lease)
        put = rec.last
        for patch_type in PatchType:
            await client.patch(PODS.path("ns", "p", "status"), {"a": 1}, patch_type)
            assert rec.last.headers["content-type"] == patch_type.value
        await client.patch(NODES.path(name="n1"), [{"op": "remove", "path": "/x"}], PatchType.JSON)
        json_patch = rec.last
        await client.delete(PODS.path("ns", "p"), grace_period_seconds=0, uid="u1")
        delete = rec.last
        await client.delete(PODS.path("ns", "q"))
        bare_delete = rec.last
    assert (post.method, post.url.path) == (
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    )
    assert post.headers["content-type"] == "application/json"
    assert json.loads(post.content) == lease
    assert put.method == "PUT" and put.url.path.endswith("/leases/n1")
    assert json.loads(json_patch.content) == [{"op": "remove", "path": "/x"}]
    assert json_patch.headers["content-type"] == "application/json-patch+json"
    assert delete.method == "DELETE"
    assert json.loads(delete.content) == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}
    assert delete.headers["content-type"] == "application/json"
    assert bare_delete.content == b""


async def test_attrs_bodies_are_encoded_with_the_converter() -> None:
    pod = from_wire(Pod, {"metadata": {"name": "m"}, "spec": {"containers": [{"name": "c"}]}})
    rec = Recorder(default=ok(to_wire(pod)))
    async with client_for(rec) as client:
        back = await client.create(PODS.path("ns"), pod, into=Pod)
    assert json.loads(rec.last.content) == to_wire(pod)
    assert back == pod


async def test_list_query_string_exact() -> None:
    rec = Recorder(default=ok({"items": [], "metadata": {"resourceVersion": "7"}}))
    async with client_for(rec) as client:
        page = await client.list(
            PODS.path(),
            label_selector="app=web,tier!=db",
            field_selector="spec.nodeName=node1",
            limit=500,
            continue_="abc",
            resource_version="0",
        )
    assert page.resource_version == "7"
    assert rec.last.url.path == "/api/v1/pods"
    assert rec.last.url.query == (
        b"continue=abc&fieldSelector=spec.nodeName%3Dnode1"
        b"&labelSelector=app%3Dweb%2Ctier%21%3Ddb&limit=500&resourceVersion=0"
    )


def page(names: list[str], rv: str, cont: str = "") -> httpx.Response:
    meta = {"resourceVersion": rv, **({"continue": cont} if cont else {})}
    return ok({"items": [{"metadata": {"name": n}} for n in names], "metadata": meta})


async def test_list_all_follows_continue_tokens() -> None:
    rec = Recorder([page(["a", "b"], "10", "t1"), page(["c", "d"], "10", "t2"), page(["e"], "10")])
    async with client_for(rec) as client:
        result = await client.list_all(PODS.path(), page_size=2, resource_version="0")
    assert [i["metadata"]["name"] for i in result.items] == ["a", "b", "c", "d", "e"]
    assert result.resource_version == "10"
    assert [r.url.query for r in rec.requests] == [
        b"limit=2&resourceVersion=0",
        b"continue=t1&limit=2",  # the token carries the version
        b"continue=t2&limit=2",
    ]
    assert result.decode(dict) == result.items


async def test_list_all_expired_continue_falls_back_to_a_full_list() -> None:
    rec = Recorder(
        [
            page(["a"], "10", "t1"),
            fail(410, "Expired", "The provided continue parameter is too old"),
            page(["a", "b", "c"], "12"),
        ]
    )
    async with client_for(rec) as client:
        result = await client.list_all(PODS.path(), page_size=1, field_selector="spec.nodeName=n")
    assert len(result.items) == 3 and result.resource_version == "12"
    assert rec.requests[2].url.query == b"fieldSelector=spec.nodeName%3Dn"


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", e.NotFound),
        (409, "AlreadyExists", e.AlreadyExists),
        (409, "Conflict", e.Conflict),
        (409, "", e.Conflict),
        (410, "Gone", e.Gone),
        (410, "Expired", e.Expired),
        (403, "Forbidden", e.Forbidden),
        (401, "Unauthorized", e.Unauthorized),
        (422, "Invalid", e.Invalid),
        (400, "BadRequest", e.BadRequest),
        (405, "MethodNotAllowed", e.MethodNotAllowed),
        (429, "TooManyRequests", e.TooManyRequests),
        (500, "InternalError", e.ServerError),
        (503, "ServiceUnavailable", e.ServerError),
        (504, "Timeout", e.ServerError),
        (418, "", e.ApiError),
        (500, "NotFound", e.NotFound),  # the reason wins over the code, as in apimachinery
    ],
)
async def test_status_maps_to_exception(code: int, reason: str, cls: type[e.ApiError]) -> None:
    body = status_body(code, reason, "it failed", name="web", kind="pods")
    rec = Recorder(default=httpx.Response(code, json=body))
    async with client_for(rec, max_retries=0) as client:
        with pytest.raises(e.ApiError) as info:
            await client.get(PODS.path("ns", "web"))
    err = info.value
    assert type(err) is cls
    assert (err.code, err.reason, err.message, str(err)) == (code, reason, "it failed", "it failed")
    assert err.details == {"name": "web", "kind": "pods"}


def test_error_event_status_without_reason_uses_the_code() -> None:
    err = e.error_from_status(
        {"kind": "Status", "code": 410, "message": "too old resource version"}
    )
    assert type(err) is e.Gone and err.message == "too old resource version"
    err = e.error_from_status({"kind": "Status", "code": 404})
    assert err.message == "the server could not find the requested resource"


async def test_non_status_error_body_from_a_proxy() -> None:
    rec = Recorder(default=httpx.Response(502, text="<html>Bad Gateway</html>"))
    async with client_for(rec) as client:
        with pytest.raises(e.ServerError) as info:
            await client.get("/api/v1/nodes/n1")
    assert (info.value.code, info.value.message) == (502, "<html>Bad Gateway</html>")


async def test_success_that_is_not_json() -> None:
    rec = Recorder(default=httpx.Response(200, text="hello"))
    async with client_for(rec) as client:
        with pytest.raises(e.InvalidResponse, match="not JSON"):
            await client.get("/api/v1/nodes/n1")


async def test_429_retry_after_is_honoured(autojump_clock: trio.testing.MockClock) -> None:
    throttled = fail(429, "TooManyRequests", "slow down", headers={"Retry-After": "2"})
    rec = Recorder([throttled, throttled, ok({"done": True})])
    async with client_for(rec) as client:
        start = trio.current_time()
        assert await client.get("/api/v1/nodes/n1") == {"done": True}
    assert [t - start for t in rec.times] == [0, 2, 4]


async def test_429_gives_up_after_max_retries(autojump_clock: trio.testing.MockClock) -> None:
    rec = Recorder(default=fail(429, "TooManyRequests", "slow down", headers={"Retry-After": "1"}))
    async with client_for(rec, max_retries=2) as client:
        with pytest.raises(e.TooManyRequests) as info:
            await client.patch(PODS.path("ns", "p", "status"), {"status": {}})
    assert len(rec.requests) == 3
    assert info.value.retry_after == 1.0
    assert all(r.method == "PATCH" and r.content == rec.requests[0].content for r in rec.requests)


async def test_429_without_retry_after_is_not_retried() -> None:
    rec = Recorder(default=fail(429, "TooManyRequests"))
    async with client_for(rec) as client:
        with pytest.raises(e.TooManyRequests) as info:
            await client.get("/api/v1/nodes/n1")
    assert len(rec.requests) == 1 and info.value.retry_after is None


async def test_5xx_is_retried_only_with_retry_after(autojump_clock: trio.testing.MockClock) -> None:
    rec = Recorder([fail(503, "ServiceUnavailable", headers={"Retry-After": "3"}), ok()])
    async with client_for(rec) as client:
        await client.get("/api/v1/nodes/n1")
        assert rec.times[1] - rec.times[0] == 3
        rec.answers = [fail(500, "InternalError")]
        with pytest.raises(e.ServerError):
            await client.get("/api/v1/nodes/n1")
    assert len(rec.requests) == 3


async def test_reset_get_is_retried_after_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rec = Recorder([httpx.ReadError("connection reset by peer"), ok()])
    async with client_for(rec) as client:
        await client.get("/api/v1/nodes/n1")
        assert rec.times[1] - rec.times[0] == 1
        rec.answers = [httpx.ReadError("connection reset by peer")]
        with pytest.raises(e.ApiUnavailable, match=r"POST .*: connection reset by peer"):
            await client.create(PODS.path("ns"), {})  # not idempotent: not retried
        rec.answers = [httpx.ConnectError("[Errno 111] Connection refused")]
        with pytest.raises(e.ApiUnavailable, match="Connection refused") as info:
            await client.get("/api/v1/nodes/n1")
        assert info.value.code == 0
        rec.answers = [httpx.ReadTimeout("timed out")]
        with pytest.raises(e.ApiUnavailable, match="timed out \\(ReadTimeout\\)"):
            await client.create(PODS.path("ns"), {})
    assert len(rec.requests) == 5


async def test_401_makes_the_token_file_be_read_again(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    source = TokenSource(path=str(token))
    rec = Recorder([fail(401, "Unauthorized"), ok()])
    async with client_for(rec, ClusterConnection(server=SERVER, token=source)) as client:
        with pytest.raises(e.Unauthorized):
            await client.get("/api/v1/nodes/n1")
        assert source._seen is None  # forced to re-read
        token.write_text("new")
        await client.get("/api/v1/nodes/n1")
    assert [r.headers["authorization"] for r in rec.requests] == ["Bearer old", "Bearer new"]


async def test_requests_go_through_the_rate_limiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rec = Recorder(default=ok())
    async with client_for(rec, qps=1, burst=2) as client:
        start = trio.current_time()
        for _ in range(4):
            await client.get("/api/v1/nodes/n1")
        sibling = client.with_limits(-1, 0)
        for _ in range(3):
            await sibling.get("/api/v1/nodes/n1")
    assert [t - start for t in rec.times] == [0, 0, 1, 2, 2, 2, 2]
    assert sibling.http is client.http and isinstance(sibling.limiter, Unlimited)


async def test_open_client_from_options(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.conf"
    path.write_text(yaml.safe_dump(kubeconfig({"server": SERVER}, {"token": "t0k"})))
    options = Options(
        config=KubeletConfiguration(kube_api_qps=7, kube_api_burst=9),
        node_name="node1",
        kubeconfig=str(path),
    )
    rec = Recorder(default=ok())
    async with open_client(options, transport=httpx.MockTransport(rec)) as client:
        assert isinstance(client.limiter, TokenBucket)
        assert (client.limiter.qps, client.limiter.burst) == (7, 9)
        await client.get(NODES.path(name="node1"))
    assert rec.last.headers["authorization"] == "Bearer t0k"


# -- watch --------------------------------------------------------------------------------


def event(kind: str, name: str, rv: int, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return {"type": kind, "object": {"metadata": meta, **extra}}


def bookmark(rv: int) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": str(rv)}}}


def error_event(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"type": "ERROR", "object": status_body(code, reason, message)}


def chunked(events: list[dict[str, Any]], size: int = 7) -> AsyncIterator[bytes]:
    """The events as a stream cut every ``size`` bytes: lines split across chunks."""
    data = b"".join(json.dumps(ev).encode() + b"\n" for ev in events)

    async def gen() -> AsyncIterator[bytes]:
        for i in range(0, len(data), size):
            yield data[i : i + size]
            await trio.lowlevel.checkpoint()

    return gen()


class Collect:
    def __init__(self, stop_after: int | None = None) -> None:
        self.events: list[WatchEvent] = []
        self.stop_after = stop_after

    async def __call__(self, ev: WatchEvent) -> bool:
        self.events.append(ev)
        return self.stop_after is not None and len(self.events) >= self.stop_after


@pytest.fixture
def no_resource_warnings() -> Any:
    """Fail if httpx's nested async generators were left unfinalised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]


async def test_watch_query_and_events_split_across_chunks(no_resource_warnings: None) -> None:
    events = [event("ADDED", "a", 11), bookmark(12), event("MODIFIED", "a", 13, spec={"x": 1})]
    rec = Recorder([httpx.Response(200, content=chunked(events, size=5))])
    got = Collect()
    async with client_for(rec) as client:
        await client.watch(
            PODS.path(),
            got,
            resource_version="10",
            timeout_seconds=300,
            field_selector="spec.nodeName=node1",
        )
    assert [(ev.type, ev.resource_version) for ev in got.events] == [
        ("ADDED", "11"),
        ("BOOKMARK", "12"),
        ("MODIFIED", "13"),
    ]
    assert got.events[2].object["spec"] == {"x": 1}
    req = rec.last
    assert req.url.query == (
        b"allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode1"
        b"&resourceVersion=10&timeoutSeconds=300&watch=true"
    )
    assert req.extensions["timeout"]["read"] == 330  # the server closes at 300 s
    assert req.extensions["timeout"]["connect"] == 30


async def test_watch_without_timeout_never_times_out_reading() -> None:
    rec = Recorder([httpx.Response(200, content=b"")])
    async with client_for(rec) as client:
        await client.watch(PODS.path(), Collect(), allow_bookmarks=False)
    assert rec.last.url.query == b"watch=true"
    assert rec.last.extensions["timeout"]["read"] is None


async def test_watch_stops_when_the_callback_says_so(no_resource_warnings: None) -> None:
    events = [event("ADDED", n, 10 + i) for i, n in enumerate("abcdef")]
    rec = Recorder([httpx.Response(200, content=chunked(events))])
    got = Collect(stop_after=2)
    async with client_for(rec) as client:
        await client.watch(PODS.path(), got)
    assert [ev.object["metadata"]["name"] for ev in got.events] == ["a", "b"]


async def test_watch_error_event_is_raised(no_resource_warnings: None) -> None:
    events = [
        event("ADDED", "a", 11),
        error_event(410, "Expired", "too old resource version: 5 (11)"),
        event("ADDED", "b", 12),
    ]
    rec = Recorder([httpx.Response(200, content=chunked(events))])
    got = Collect()
    async with client_for(rec) as client:
        with pytest.raises(e.Gone, match="too old resource version") as info:
            await client.watch(PODS.path(), got, resource_version="5")
    assert info.value.code == 410
    assert [ev.type for ev in got.events] == ["ADDED"]


async def test_watch_bad_line_and_callback_failure(no_resource_warnings: None) -> None:
    rec = Recorder([httpx.Response(200, content=b'{"type":"ADDED","object":{}}\nnot json\n')])
    async with client_for(rec) as client:
        with pytest.raises(e.InvalidResponse, match="not a JSON event"):
            await client.watch(PODS.path(), Collect())

        async def explode(ev: WatchEvent) -> None:
            raise RuntimeError("handler bug")

        rec.answers = [httpx.Response(200, content=chunked([event("ADDED", "a", 1)] * 3))]
        with pytest.raises(RuntimeError, match="handler bug"):
            await client.watch(PODS.path(), explode)


async def test_watch_start_is_rate_limited_and_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rec = Recorder(
        [
            fail(429, "TooManyRequests", headers={"Retry-After": "1"}),
            httpx.Response(200, content=chunked([event("ADDED", "a", 1)])),
        ]
    )
    got = Collect()
    async with client_for(rec) as client:
        await client.watch(PODS.path(), got)
    assert len(got.events) == 1 and rec.times[1] - rec.times[0] == 1


async def test_watch_start_refused_with_410() -> None:
    rec = Recorder([fail(410, "Expired", "too old resource version")])
    async with client_for(rec) as client:
        with pytest.raises(e.Expired):
            await client.watch(PODS.path(), Collect(), resource_version="1")


async def test_watch_connection_lost_mid_stream() -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield json.dumps(event("ADDED", "a", 1)).encode() + b"\n"
        raise httpx.ReadError("connection reset by peer")

    rec = Recorder([httpx.Response(200, content=broken())])
    got = Collect()
    async with client_for(rec) as client:
        with pytest.raises(e.ApiUnavailable, match="connection reset"):
            await client.watch(PODS.path(), got)
    assert len(got.events) == 1


async def test_cancelling_a_watch_leaves_nothing_behind(no_resource_warnings: None) -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield json.dumps(event("ADDED", "a", 1)).encode() + b"\n"
        await trio.sleep_forever()
        yield b""  # pragma: no cover

    rec = Recorder([httpx.Response(200, content=endless())])
    got = Collect()
    async with client_for(rec) as client:
        with trio.move_on_after(0.05):
            await client.watch(PODS.path(), got)
    assert len(got.events) == 1


async def test_cancelled_inside_the_callback(no_resource_warnings: None) -> None:
    events = [event("ADDED", n, 10 + i) for i, n in enumerate("abc")]
    rec = Recorder([httpx.Response(200, content=chunked(events, size=1000))])
    seen: list[str] = []

    async def slow(ev: WatchEvent) -> None:
        seen.append(ev.object["metadata"]["name"])
        await trio.sleep_forever()

    async with client_for(rec) as client:
        with trio.move_on_after(0.05) as scope:
            await client.watch(PODS.path(), slow)
    assert scope.cancelled_caught
    assert seen == ["a"]  # the buffered events after it were not delivered


# -- real sockets -------------------------------------------------------------------------


async def _read_head(stream: trio.abc.Stream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
    return data


async def serve(
    nursery: trio.Nursery,
    respond: Callable[[trio.abc.Stream, bytes], Awaitable[None]],
    tls: ssl.SSLContext | None = None,
) -> int:
    async def handle(stream: trio.SocketStream) -> None:
        conn_stream: trio.abc.Stream = stream
        try:
            if tls is not None:
                conn_stream = trio.SSLStream(stream, tls, server_side=True)
                await conn_stream.do_handshake()
            head = await _read_head(conn_stream)
            await respond(conn_stream, head)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError):
            pass
        finally:
            await conn_stream.aclose()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, host="127.0.0.1"), handle, 0)
    return int(listeners[0].socket.getsockname()[1])


async def test_watch_over_a_real_chunked_stream(no_resource_warnings: None) -> None:
    lines = [json.dumps(ev).encode() + b"\n" for ev in (event("ADDED", "a", 1), bookmark(2))]
    data = b"".join(lines)
    seen: list[bytes] = []

    async def respond(stream: trio.abc.Stream, head: bytes) -> None:
        seen.append(head)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for i in range(0, len(data), 9):  # chunks cut mid-line
            piece = data[i : i + 9]
            await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
            await trio.sleep(0.001)
        await stream.send_all(b"0\r\n\r\n")

    got = Collect()
    async with trio.open_nursery() as nursery:
        port = await serve(nursery, respond)
        connection = ClusterConnection(server=f"http://127.0.0.1:{port}")
        async with ApiClient.open(connection) as client:
            await client.watch(PODS.path(), got, resource_version="0")
        nursery.cancel_scope.cancel()
    assert [ev.type for ev in got.events] == ["ADDED", "BOOKMARK"]
    assert seen[0].startswith(b"GET /api/v1/pods?allowWatchBookmarks=true&resourceVersion=0")


async def test_watch_dropped_by_a_real_server() -> None:
    async def respond(stream: trio.abc.Stream, head: bytes) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        line = json.dumps(event("ADDED", "a", 1)).encode() + b"\n"
        await stream.send_all(b"%x\r\n%s\r\n" % (len(line), line))
        # then the API server dies: the connection closes mid-stream

    got = Collect()
    async with trio.open_nursery() as nursery:
        port = await serve(nursery, respond)
        async with ApiClient.open(ClusterConnection(server=f"http://127.0.0.1:{port}")) as client:
            with pytest.raises(e.ApiUnavailable):
                await client.watch(PODS.path(), got)
        nursery.cancel_scope.cancel()
    assert len(got.events) == 1


@pytest.fixture(scope="module")
def tls_pki() -> dict[str, Issued]:
    ca = issue("kubernetes", is_ca=True)
    return {
        "ca": ca,
        "server": issue("kube-apiserver", ca=ca, dns=("localhost",), ips=("127.0.0.1",)),
        "svc": issue("kube-apiserver", ca=ca, dns=("kubernetes.default.svc",)),
        "client": issue("system:node:node1", ca=ca, client=True),
        "stranger_ca": issue("someone", is_ca=True),
    }


def server_tls(tmp_path: Path, pki: dict[str, Issued], cert: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    (tmp_path / "s.crt").write_bytes(pki[cert].cert)
    (tmp_path / "s.key").write_bytes(pki[cert].key)
    ctx.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
    ctx.load_verify_locations(cadata=pki["ca"].cert.decode())
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


async def answer_with_peer(stream: trio.abc.Stream, head: bytes) -> None:
    assert isinstance(stream, trio.SSLStream)
    peer = stream.getpeercert()
    subject = dict(x[0] for x in peer["subject"]) if peer else {}
    body = json.dumps({"user": subject.get("commonName", "")}).encode()
    await stream.send_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )


def tls_connection(port: int, pki: dict[str, Issued], ca: str = "ca", **cluster: Any) -> Any:
    doc = kubeconfig(
        {
            "server": f"https://127.0.0.1:{port}",
            "certificate-authority-data": b64(pki[ca].cert),
            **cluster,
        },
        {
            "client-certificate-data": b64(pki["client"].cert),
            "client-key-data": b64(pki["client"].key),
        },
    )
    return parse_kubeconfig(yaml.safe_dump(doc), "kubelet.conf")


async def test_mtls_with_a_kubeconfig_connection(
    tmp_path: Path, tls_pki: dict[str, Issued]
) -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(nursery, answer_with_peer, server_tls(tmp_path, tls_pki, "server"))
        async with ApiClient.open(tls_connection(port, tls_pki)) as client:
            assert await client.get("/api/v1/nodes/node1") == {"user": "system:node:node1"}
        # A CA we do not trust: the handshake fails and says so.
        async with ApiClient.open(tls_connection(port, tls_pki, "stranger_ca")) as client:
            with pytest.raises(e.ApiUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get("/api/v1/nodes/node1")
        nursery.cancel_scope.cancel()


async def test_tls_server_name_verifies_another_name(
    tmp_path: Path, tls_pki: dict[str, Issued]
) -> None:
    async with trio.open_nursery() as nursery:
        port = await serve(nursery, answer_with_peer, server_tls(tmp_path, tls_pki, "svc"))
        async with ApiClient.open(tls_connection(port, tls_pki)) as client:
            with pytest.raises(e.ApiUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get("/api/v1/nodes/node1")  # 127.0.0.1 is not in the cert
        named = tls_connection(port, tls_pki, **{"tls-server-name": "kubernetes.default.svc"})
        async with ApiClient.open(named) as client:
            assert await client.get("/api/v1/nodes/node1") == {"user": "system:node:node1"}
        nursery.cancel_scope.cancel()


# -- the reflector ------------------------------------------------------------------------


class FakeApi:
    """Just enough of an API server for one collection: objects with resourceVersions,
    an event history, paged lists, watches that stream history and wait for more, end
    at timeoutSeconds, and answer an old resourceVersion with an ERROR 410 event.
    ``faults`` are (kind, answer) pairs used, in order, by the next request of that kind
    ("list" or "watch"); ``down`` refuses every connection."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, dict[str, Any]]] = []  # (rv, event)
        self.compacted = 0
        self.faults: list[tuple[str, httpx.Response | Exception]] = []
        self.down = False
        self.requests: list[tuple[float, str, httpx.Request]] = []
        self._changed = trio.Event()
        self._generation = 0

    # -- driving it --

    def _emit(self, ev: dict[str, Any], rv: int) -> None:
        self.history.append((rv, ev))
        self._changed.set()
        self._changed = trio.Event()

    def put(self, name: str, **fields: Any) -> None:
        self.rv += 1
        kind = "MODIFIED" if name in self.objects else "ADDED"
        obj = event(kind, name, self.rv, **fields)["object"]
        self.objects[name] = obj
        self._emit({"type": kind, "object": obj}, self.rv)

    def delete(self, name: str) -> None:
        self.rv += 1
        obj = self.objects.pop(name)
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self._emit({"type": "DELETED", "object": obj}, self.rv)

    def bookmark(self) -> None:
        self._emit(bookmark(self.rv), self.rv)

    def compact(self) -> None:
        """Forget history up to now: watches from older versions get 410."""
        self.compacted = self.rv
        self.close_watches()

    def close_watches(self) -> None:
        self._generation += 1
        self._changed.set()
        self._changed = trio.Event()

    def kinds(self) -> list[str]:
        return [kind for _, kind, _ in self.requests]

    def of(self, kind: str) -> list[httpx.Request]:
        return [r for _, k, r in self.requests if k == kind]

    # -- serving --

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        kind = "watch" if params.get("watch") == "true" else "list"
        self.requests.append((trio.current_time(), kind, request))
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        for i, (fault_kind, answer) in enumerate(self.faults):
            if fault_kind == kind:
                del self.faults[i]
                if isinstance(answer, Exception):
                    raise answer
                return answer
        if kind == "list":
            return self._list(params)
        return httpx.Response(200, content=self._watch(params))

    def _list(self, params: httpx.QueryParams) -> httpx.Response:
        items = [self.objects[name] for name in sorted(self.objects)]
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(items) or 1
        chunk = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return ok({"kind": "PodList", "items": chunk, "metadata": meta})

    async def _watch(self, params: httpx.QueryParams) -> AsyncIterator[bytes]:
        since = int(params.get("resourceVersion") or self.rv)
        timeout = int(params.get("timeoutSeconds") or 3600)
        generation = self._generation
        if since < self.compacted:
            message = f"too old resource version: {since} ({self.compacted})"
            yield json.dumps(error_event(410, "Expired", message)).encode() + b"\n"
            return
        sent = 0
        with trio.move_on_after(timeout):
            while generation == self._generation:
                for n, (rv, ev) in enumerate(self.history):
                    if n >= sent and (rv > since or (ev["type"] == "BOOKMARK" and n >= sent > 0)):
                        yield json.dumps(ev).encode() + b"\n"
                sent = len(self.history)
                changed = self._changed
                await changed.wait()


class Snapshots:
    """on_change for a UidStore: every full list it was given, as sorted names."""

    def __init__(self) -> None:
        self.lists: list[list[str]] = []

    async def __call__(self, objects: list[dict[str, Any]]) -> None:
        names = [o["metadata"]["name"] for o in objects]
        assert len(names) == len(set(names)), f"duplicates in {names}"
        self.lists.append(sorted(names))

    @property
    def last(self) -> list[str]:
        return self.lists[-1]


def no_jitter() -> WatchBackoff:
    return WatchBackoff(jitter=0)


async def start_reflector(
    nursery: trio.Nursery,
    api: FakeApi,
    on_change: Callable[[list[Any]], Awaitable[None]],
    *,
    page_size: int = 500,
    decode: Callable[[dict[str, Any]], Any] | None = None,
) -> ApiClient:
    client: ApiClient = await nursery.start(_client_task, api)
    store: UidStore[Any] = UidStore(on_change, decode) if decode else UidStore(on_change)
    target = ListWatch(PODS.path(), field_selector="spec.nodeName=node1", page_size=page_size)
    run = functools.partial(reflect, backoff=no_jitter(), rng=random.Random(1))
    await nursery.start(run, client, target, store)
    await trio.testing.wait_all_tasks_blocked()
    return client


async def _client_task(api: FakeApi, task_status: trio.TaskStatus[ApiClient]) -> None:
    async with ApiClient.open(conn(), transport=httpx.MockTransport(api)) as client:
        task_status.started(client)
        await trio.sleep_forever()


async def test_reflector_lists_then_watches(autojump_clock: trio.testing.MockClock) -> None:
    api = FakeApi()
    api.put("a")
    api.put("b")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        assert snaps.lists == [["a", "b"]]
        api.put("c")
        await trio.testing.wait_all_tasks_blocked()
        api.put("a", spec={"changed": True})
        await trio.testing.wait_all_tasks_blocked()
        api.delete("b")
        await trio.testing.wait_all_tasks_blocked()
        assert snaps.lists == [["a", "b"], ["a", "b", "c"], ["a", "b", "c"], ["a", "c"]]
        nursery.cancel_scope.cancel()
    list_req, watch_req = api.of("list")[0], api.of("watch")[0]
    assert list_req.url.query == b"fieldSelector=spec.nodeName%3Dnode1&limit=500&resourceVersion=0"
    params = watch_req.url.params
    assert params["resourceVersion"] == "102" and params["allowWatchBookmarks"] == "true"
    assert params["fieldSelector"] == "spec.nodeName=node1"
    assert 300 <= int(params["timeoutSeconds"]) < 600


async def test_reflector_pages_into_one_snapshot(autojump_clock: trio.testing.MockClock) -> None:
    api = FakeApi()
    for name in "abcde":
        api.put(name)
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps, page_size=2)
        nursery.cancel_scope.cancel()
    assert snaps.lists == [["a", "b", "c", "d", "e"]]
    assert len(api.of("list")) == 3


async def test_reflector_rewatches_at_timeout_from_the_last_version(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    api.put("a")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        api.put("b")
        await trio.sleep(700)  # past any watch timeout: the server ends the watch
        assert len(api.of("watch")) >= 2
        nursery.cancel_scope.cancel()
    assert api.of("watch")[1].url.params["resourceVersion"] == "102"
    assert len(api.of("list")) == 1  # resumed, not relisted
    assert snaps.lists == [["a"], ["a", "b"]]


async def test_reflector_resumes_from_a_bookmark(autojump_clock: trio.testing.MockClock) -> None:
    api = FakeApi()
    api.put("a")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        api.rv += 50  # other pods changed: our selector's watch sees only a bookmark
        api.bookmark()
        await trio.testing.wait_all_tasks_blocked()
        api.close_watches()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert [r.url.params["resourceVersion"] for r in api.of("watch")] == ["101", "151"]
    assert len(api.of("list")) == 1
    assert snaps.lists == [["a"]]  # bookmarks change nothing


@pytest.mark.parametrize("how", ["error event", "http 410"])
async def test_reflector_relists_on_410_without_losing_or_duplicating(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    api = FakeApi()
    api.put("a")
    api.put("b")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        api.down = True  # an outage; meanwhile b is deleted, c added, a changed
        api.close_watches()
        await trio.sleep(5)
        api.delete("b")
        api.put("c")
        api.put("a", spec={"v": 2})
        api.compact()
        if how == "http 410":
            api.faults.append(("watch", fail(410, "Gone", "too old resource version")))
        api.down = False
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert snaps.last == ["a", "c"]
    lists = api.of("list")
    assert len(lists) == 2
    assert lists[1].url.params["resourceVersion"] == "102"  # "not older than" the last seen
    assert api.of("watch")[-1].url.params["resourceVersion"] == "105"


async def test_relist_at_an_expired_version_falls_back_to_a_consistent_list(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    api.put("a")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        api.put("b")
        api.compact()
        api.faults.append(("list", fail(410, "Expired", "too old resource version")))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    lists = api.of("list")
    assert [r.url.params.get("resourceVersion") for r in lists] == ["0", "101", None]
    assert snaps.last == ["a", "b"]


async def test_reflector_backs_off_on_errors_then_resumes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    api.put("a")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        await trio.sleep(2)  # a watch that ends sooner with no event is itself a failure
        api.faults += [("watch", fail(500, "InternalError"))] * 3
        api.close_watches()
        await trio.sleep(10)
        api.put("b")
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    times = [t for t, kind, _ in api.requests if kind == "watch"]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(times[1:])]
    assert gaps == [0.8, 1.6, 3.2]  # jitter off; then the watch held
    assert len(api.of("list")) == 1
    assert snaps.lists == [["a"], ["a", "b"]]


async def test_reflector_survives_an_api_outage(autojump_clock: trio.testing.MockClock) -> None:
    api = FakeApi()
    api.put("a")
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, snaps)
        await trio.sleep(2)
        api.down = True
        api.close_watches()
        await trio.sleep(300)
        assert snaps.lists == [["a"]]  # nothing dropped while the API is away
        attempts = [t for t, _, _ in api.requests][2:]
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(attempts)]
        assert gaps[:6] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6]
        assert set(gaps[6:]) == {30.0}
        api.down = False
        api.put("b")
        await trio.sleep(31)
        nursery.cancel_scope.cancel()
    assert snaps.last == ["a", "b"]
    assert len(api.of("list")) == 1


async def test_a_watch_closing_at_once_counts_as_a_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        api.faults += [("watch", httpx.Response(200, content=b""))] * 2
        await start_reflector(nursery, api, snaps)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    times = [t for t, kind, _ in api.requests if kind == "watch"]
    assert [round(b - a, 3) for a, b in itertools.pairwise(times)][:2] == [0.8, 1.6]
    assert snaps.lists == [[]]  # an empty first list is still delivered (sources ready)


async def test_started_only_after_the_first_list(autojump_clock: trio.testing.MockClock) -> None:
    api = FakeApi()
    api.put("a")
    api.faults.append(("list", httpx.ConnectError("refused")))
    snaps = Snapshots()
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await start_reflector(nursery, api, snaps)
        assert trio.current_time() - start == pytest.approx(0.8)
        assert snaps.lists == [["a"]]
        nursery.cancel_scope.cancel()


async def test_store_keeps_the_last_good_version_of_an_undecodable_pod(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    api.put("a", spec={"containers": [{"name": "c", "image": "v1"}]})
    seen: list[list[Pod]] = []

    async def on_change(pods: list[Pod]) -> None:
        seen.append(pods)

    async with trio.open_nursery() as nursery:
        await start_reflector(nursery, api, on_change, decode=lambda d: from_wire(Pod, d))
        api.put("a", spec={"containers": "not a list"})
        await trio.testing.wait_all_tasks_blocked()
        api.put("b", spec={"containers": 5})
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert [[p.spec.containers[0].image for p in pods] for pods in seen] == [["v1"]] * 3


def test_backoff_sequence_jitter_and_reset() -> None:
    async def main() -> None:
        b = WatchBackoff(jitter=0)
        assert [b.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30]
        await trio.sleep(121)  # a healthy stretch
        assert b.next_delay() == 0.8
        j = WatchBackoff(rng=random.Random(3))
        delays = [j.next_delay() for _ in range(4)]
        assert all(
            base <= d <= 2 * base for d, base in zip(delays, [0.8, 1.6, 3.2, 6.4], strict=True)
        )

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_relisted_and_events_reach_a_plain_handler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    api = FakeApi()
    api.put("a")
    got: list[Relisted | WatchEvent] = []

    async def handler(update: Relisted | WatchEvent) -> None:
        got.append(update)

    async with trio.open_nursery() as nursery:
        client: ApiClient = await nursery.start(_client_task, api)
        await nursery.start(reflect, client, ListWatch(PODS.path()), handler)
        api.put("b")
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert isinstance(got[0], Relisted) and got[0].resource_version == "101"
    assert isinstance(got[1], WatchEvent) and got[1].type == "ADDED"
