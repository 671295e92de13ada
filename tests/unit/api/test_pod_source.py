"""Where a pod came from: one definition on the data model, upstream's ``IsStaticPod``."""

from __future__ import annotations

import pytest

from kubelet.api import ObjectMeta, Pod


def pod_with(annotations: dict[str, str]) -> Pod:
    return Pod(metadata=ObjectMeta(name="p", namespace="ns", uid="u", annotations=annotations))


@pytest.mark.parametrize(
    ("annotations", "source", "static"),
    [
        ({}, None, False),
        ({"kubernetes.io/config.source": "api"}, "api", False),
        ({"kubernetes.io/config.source": "file"}, "file", True),
        ({"kubernetes.io/config.source": "http"}, "http", True),
        # upstream: any source but the API is static, an empty one too
        ({"kubernetes.io/config.source": ""}, "", True),
    ],
)
def test_config_source_and_static(
    annotations: dict[str, str], source: str | None, static: bool
) -> None:
    pod = pod_with(annotations)
    assert pod.config_source == source
    assert pod.is_static is static
    assert not pod.is_mirror


def test_mirror_pod() -> None:
    mirror = pod_with({"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "api"})
    assert mirror.is_mirror and not mirror.is_static


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        ("2026-11-27T13:40:01.5Z", 1795786801.5),  # config.seen as the sources stamp it
        ("2026-11-27T13:40:01Z", 1795786801.0),
        ("yesterday", None),
        ("", None),
    ],
)
def test_first_seen_reads_config_seen(seen: str, expected: float | None) -> None:
    assert pod_with({"kubernetes.io/config.seen": seen}).first_seen == expected


def test_first_seen_unset() -> None:
    assert pod_with({}).first_seen is None
