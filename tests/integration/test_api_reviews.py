"""The API adapters (server reviews, volume tokens, env lookups) against FakeApiServer."""

from __future__ import annotations

import pytest
import trio

from kubelet.api import ApiClient, ClusterConnection
from kubelet.server import ApiReviews
from kubelet.testing import FakeApiServer


async def test_token_review_and_subject_access_review() -> None:
    api = FakeApiServer()
    api.auth.add_token("good-token", "alice", ["devs"])
    api.auth.allow(user="alice", verb="get", resource="nodes/*")
    api.auth.deny(user="bob")
    async with api.serve(), ApiClient.open(ClusterConnection(server=api.url)) as client:
        reviews = ApiReviews(client)
        good = await reviews.token_review("good-token")
        assert (good.authenticated, good.user) == (True, "alice")
        assert "devs" in good.groups
        bad = await reviews.token_review("nope")
        assert not bad.authenticated
        assert await reviews.subject_access_review("alice", ["devs"], "get", "nodes", "proxy", "n1")
        assert not await reviews.subject_access_review("bob", [], "get", "nodes", "stats", "n1")
    assert [r.resource for r in api.requests] == [
        "tokenreviews",
        "tokenreviews",
        "subjectaccessreviews",
        "subjectaccessreviews",
    ]
    await trio.lowlevel.checkpoint()


async def test_service_account_tokens_rotate_at_80_percent(
    autojump_clock: trio.abc.Clock,
) -> None:
    from kubelet.volumes import ApiTokenSource

    epoch = 1_800_000_000.0
    api = FakeApiServer(epoch=epoch)
    async with api.serve(), ApiClient.open(ClusterConnection(server=api.url)) as client:
        tokens = ApiTokenSource(client, lambda: epoch + trio.current_time())
        first, expiry = await tokens.token("default", "default", "", 3600)
        assert first and expiry > epoch
        await trio.sleep(2000)
        again, _ = await tokens.token("default", "default", "", 3600)
        assert again == first  # 2000 s < 80 % of 3600 s
        await trio.sleep(1000)
        rotated, later = await tokens.token("default", "default", "", 3600)
        assert rotated
        assert later > expiry
    assert len(api.requests_of("create", "serviceaccounts/token")) == 2


async def test_env_lookup_reads_each_object_once_and_maps_errors() -> None:
    from kubelet.env import CREATE_CONTAINER_CONFIG_ERROR, ApiEnvLookup, EnvError

    api = FakeApiServer()
    api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"},
            "data": {"color": "blue"},
            "binaryData": {"blob": "AP8="},
        }
    )
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"pw": "czNjcjN0"},
        }
    )
    api.faults.forbid("get", "secrets")
    async with api.serve(), ApiClient.open(ClusterConnection(server=api.url)) as client:
        lookup = ApiEnvLookup(client)
        assert await lookup.config_map("default", "cm") == {"color": "blue"}
        files = await lookup.config_map_files("default", "cm")
        assert files == {"color": b"blue", "blob": b"\x00\xff"}
        assert await lookup.config_map_files("default", "absent") is None
        with pytest.raises(EnvError, match="forbidden") as raised:
            await lookup.secret("default", "s")
        assert raised.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert [(r.resource, r.name) for r in api.requests] == [
        ("configmaps", "cm"),
        ("configmaps", "cm"),
        ("configmaps", "absent"),
        ("secrets", "s"),
    ]
