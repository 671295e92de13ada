"""``POST /checkpoint/{ns}/{pod}/{container}`` against the real server and FakeRuntime.

Real TLS and httpx on 127.0.0.1; FakeRuntime answers CRI CheckpointContainer with a tar
archive, or with an injected ``Unimplemented`` as containerd 1.6 does.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from grpclib.const import Status

from kubelet.config import FeatureGates, KubeletAuthorization, Options
from kubelet.server import Addresses, ServerParts, serve

from . import test_server
from .test_server import NODE, UID, Env, authn, config, url

env = test_server.env
pki = test_server.pki

pytestmark = pytest.mark.trio

OPEN = {
    "authentication": authn(webhook=False, anonymous=True),
    "authorization": KubeletAuthorization(mode="AlwaysAllow"),
}


async def _start(env: Env, gates: dict[str, bool] | None = None, **changes: object) -> Addresses:
    (env.tmp / "checkpoints").mkdir(mode=0o700, exist_ok=True)  # the kubelet's data dirs
    options = Options(
        config=config(**(OPEN | changes)),
        node_name=NODE,
        root_dir=str(env.tmp),
        cert_dir=str(env.tmp / "pki"),
        features=FeatureGates(gates or {}),
    )
    addresses: Addresses = await env.nursery.start(
        serve,
        ServerParts(
            backend=env.backend, options=options, reviews=env.reviews, ephemeral_ports=True
        ),
    )
    return addresses


async def _post(env: Env, address: str, path: str) -> tuple[int, str]:
    async with env.client() as client:
        r = await client.post(url(address, path))
    return r.status_code, r.text


async def test_checkpoint_writes_the_archive_under_the_root_dir(env: Env) -> None:
    cid = await env.run_web_pod()
    addr = await _start(env)
    async with env.client() as client:
        r = await client.post(url(addr.main, "/checkpoint/default/web/app?timeout=20"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    (location,) = r.json()["items"]
    pattern = re.escape(str(env.tmp / "checkpoints")) + (
        r"/checkpoint-web_default-app-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)\.tar"
    )
    assert re.fullmatch(pattern, location)
    with tarfile.open(fileobj=io.BytesIO(Path(location).read_bytes())) as tar:
        member = tar.extractfile("config.dump")
        assert member is not None
        assert json.loads(member.read())["id"] == cid
    (call,) = [c for c in env.fake.calls if c.rpc == "CheckpointContainer"]
    assert (call.args["container_id"], call.args["timeout"]) == (cid, 20)


async def test_checkpoint_answers_as_upstream(env: Env) -> None:
    await env.run_web_pod()
    addr = await _start(env)
    assert await _post(env, addr.main, "/checkpoint/default/nope/app") == (
        404,
        "pod does not exist",
    )
    assert await _post(env, addr.main, "/checkpoint/default/web/db") == (
        404,
        "container db does not exist",
    )
    assert await _post(env, addr.main, "/checkpoint/default/web/app?timeout=x") == (
        404,
        "cannot parse value of timeout parameter",
    )
    async with env.client() as client:
        r = await client.get(url(addr.main, "/checkpoint/default/web/app"))
    assert r.status_code == 405
    # the read-only port does not serve it
    async with env.client() as client:
        r = await client.post(f"http://{addr.read_only}/checkpoint/default/web/app")
    assert r.status_code == 404


async def test_runtime_without_the_call_is_a_500(env: Env) -> None:
    await env.run_web_pod()
    env.fake.faults.fail(
        "CheckpointContainer",
        Status.UNIMPLEMENTED,
        "unknown method CheckpointContainer for service runtime.v1.RuntimeService",
    )
    addr = await _start(env)
    assert await _post(env, addr.main, "/checkpoint/default/web/app") == (
        500,
        "checkpointing of default/web/app failed (rpc error: code = Unimplemented desc = "
        "unknown method CheckpointContainer for service runtime.v1.RuntimeService)",
    )


async def test_no_running_container_is_a_500(env: Env) -> None:
    env.backend.pods.append(test_server.web_pod())
    addr = await _start(env)
    assert await _post(env, addr.main, "/checkpoint/default/web/app") == (
        500,
        "checkpointing of default/web/app failed (container app not found)",
    )


async def test_checkpoint_is_authorized_as_nodes_checkpoint(env: Env) -> None:
    await env.run_web_pod()
    addr = await _start(
        env,
        authentication=authn(webhook=False, anonymous=True),
        authorization=KubeletAuthorization(mode="Webhook"),
    )
    status, body = await _post(env, addr.main, "/checkpoint/default/web/app")
    assert status == 403
    assert "verb=create, resource=nodes, subresource(s)=[checkpoint]" in body
    assert env.reviews.sar_calls == [("system:anonymous", "create", "checkpoint")]


async def test_gate_off_is_not_found(env: Env) -> None:
    await env.run_web_pod()
    addr = await _start(env, {"ContainerCheckpoint": False})
    status, body = await _post(env, addr.main, "/checkpoint/default/web/app")
    assert (status, body.strip()) == (404, "404 page not found")
    assert UID not in body
