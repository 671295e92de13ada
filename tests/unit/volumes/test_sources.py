"""The payloads of configMap, secret, downwardAPI and projected volumes."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kubelet.api import Container, Pod, ResourceRequirements, Volume
from kubelet.testing.builders import make_pod
from kubelet.volumes.hostpath import VolumeError
from kubelet.volumes.sources import build_payload, plugin_name


class FakeLookup:
    def __init__(self) -> None:
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {
            ("ns", "cm"): {"a": "A", "b": "B"},
        }
        self.binary: dict[tuple[str, str], dict[str, bytes]] = {("ns", "cm"): {"bin": b"\x00"}}
        self.secrets: dict[tuple[str, str], dict[str, bytes]] = {("ns", "s"): {"pw": b"\xff1"}}

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.config_maps.get((namespace, name))

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        data = self.config_maps.get((namespace, name))
        if data is None:
            return None
        return {k: v.encode() for k, v in data.items()} | self.binary.get((namespace, name), {})

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return self.secrets.get((namespace, name))


class FakeTokens:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, int, str, str]] = []

    async def token(
        self,
        namespace: str,
        service_account: str,
        audience: str,
        expiration_seconds: int,
        pod_name: str = "",
        pod_uid: str = "",
    ) -> tuple[str, float]:
        self.calls.append(
            (namespace, service_account, audience, expiration_seconds, pod_name, pod_uid)
        )
        return "tok", 1e9


def _pod(*volumes: Volume) -> Pod:
    return make_pod(
        Container(
            name="c",
            resources=ResourceRequirements(limits={"memory": "64Mi"}, requests={"cpu": "250m"}),
        ),
        name="p",
        namespace="ns",
        uid="u1",
        labels={"b": "2", "a": 'x"y'},
        annotations={"k": "v"},
        volumes=volumes,
        service_account_name="sa",
    )


async def _build(volume: Volume, tokens: FakeTokens | None = None) -> object:
    return await build_payload(
        _pod(volume), volume, FakeLookup(), node_allocatable={"cpu": "4"}, tokens=tokens
    )


async def test_config_map_all_keys() -> None:
    payload = await _build(Volume(name="v", config_map={"name": "cm"}))
    assert payload == {"a": (b"A", 0o644), "b": (b"B", 0o644), "bin": (b"\x00", 0o644)}


async def test_config_map_items_and_modes() -> None:
    source = {
        "name": "cm",
        "defaultMode": 0o600,
        "items": [{"key": "a", "path": "x/a.txt", "mode": 0o400}, {"key": "b", "path": "b"}],
    }
    payload = await _build(Volume(name="v", config_map=source))
    assert payload == {"x/a.txt": (b"A", 0o400), "b": (b"B", 0o600)}


async def test_config_map_missing() -> None:
    with pytest.raises(VolumeError, match=r'^configmap "nope" not found$'):
        await _build(Volume(name="v", config_map={"name": "nope"}))
    assert await _build(Volume(name="v", config_map={"name": "nope", "optional": True})) == {}


async def test_config_map_missing_key() -> None:
    source = {"name": "cm", "items": [{"key": "zz", "path": "z"}]}
    with pytest.raises(VolumeError, match=r"^configmap references non-existent config key: zz$"):
        await _build(Volume(name="v", config_map=source))
    payload = await _build(Volume(name="v", config_map={**source, "optional": True}))
    assert payload == {}


async def test_secret() -> None:
    payload = await _build(Volume(name="v", secret={"secretName": "s"}))
    assert payload == {"pw": (b"\xff1", 0o644)}
    with pytest.raises(VolumeError, match=r'^secret "x" not found$'):
        await _build(Volume(name="v", secret={"secretName": "x"}))
    assert await _build(Volume(name="v", secret={"secretName": "x", "optional": True})) == {}
    source = {"secretName": "s", "items": [{"key": "no", "path": "n"}]}
    with pytest.raises(VolumeError, match=r"^references non-existent secret key: no$"):
        await _build(Volume(name="v", secret=source))


async def test_downward_api() -> None:
    source = {
        "defaultMode": 0o640,
        "items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
            {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}, "mode": 0o400},
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "ann", "fieldRef": {"fieldPath": "metadata.annotations['k']"}},
            {
                "path": "mem",
                "resourceFieldRef": {
                    "containerName": "c",
                    "resource": "limits.memory",
                    "divisor": "1Mi",
                },
            },
            {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
        ],
    }
    payload = await _build(Volume(name="v", downward_api=source))
    assert payload == {
        "name": (b"p", 0o640),
        "ns": (b"ns", 0o640),
        "uid": (b"u1", 0o400),
        "labels": (b'a="x\\"y"\nb="2"', 0o640),
        "ann": (b"v", 0o640),
        "mem": (b"64", 0o640),
        "cpu": (b"4", 0o640),
    }


async def test_downward_api_errors_aggregate() -> None:
    source = {
        "items": [
            {"path": "a", "fieldRef": {"fieldPath": "spec.nodeName"}},
            {"path": "b", "resourceFieldRef": {"containerName": "zz", "resource": "limits.cpu"}},
        ]
    }
    with pytest.raises(VolumeError) as info:
        await _build(Volume(name="v", downward_api=source))
    assert str(info.value) == "[unsupported fieldPath: spec.nodeName, container zz not found]"


async def test_projected() -> None:
    tokens = FakeTokens()
    source = {
        "defaultMode": 0o600,
        "sources": [
            {"configMap": {"name": "cm", "items": [{"key": "a", "path": "a"}]}},
            {"secret": {"name": "s"}},
            {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {"serviceAccountToken": {"path": "token", "audience": "aud"}},
        ],
    }
    payload = await _build(Volume(name="v", projected=source), tokens)
    assert payload == {
        "a": (b"A", 0o600),
        "pw": (b"\xff1", 0o600),
        "n": (b"p", 0o600),
        "token": (b"tok", 0o600),
    }
    assert tokens.calls == [("ns", "sa", "aud", 3600, "p", "u1")]


async def test_projected_errors() -> None:
    source = {
        "sources": [
            {"configMap": {"name": "nope"}},
            {"configMap": {"name": "gone", "optional": True}},
            {"serviceAccountToken": {"path": "token"}},
        ]
    }
    with pytest.raises(VolumeError) as info:
        await _build(Volume(name="v", projected=source))
    assert str(info.value) == (
        '[configmap "nope" not found, service account token projection needs an API client]'
    )


async def test_not_api_backed() -> None:
    volume = Volume(name="v", empty_dir={})
    assert await _build(volume) is None
    assert plugin_name(volume) is None
    assert plugin_name(Volume(name="v", secret={})) == "kubernetes.io~secret"
