import time

import pytest

from kubelet.cri import split_reference
from kubelet.cri.imageref import normalize

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.35", "docker.io/library/busybox:1.35"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("docker.io/library/busybox:latest", "docker.io/library/busybox:latest"),
        ("someone/app:v1", "docker.io/someone/app:v1"),
        ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost/app:1", "localhost/app:1"),
        (f"busybox@{DIGEST}", f"docker.io/library/busybox@{DIGEST}"),
        (f"quay.io/x/y:2@{DIGEST}", f"quay.io/x/y:2@{DIGEST}"),
    ],
)
def test_normalize(ref: str, expected: str) -> None:
    assert normalize(ref) == expected


@pytest.mark.parametrize(
    "bad", ["", "Busybox", "busy box", "busybox:", "busybox@sha256:xyz", " busybox", "a//b"]
)
def test_invalid_references(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid reference format"):
        split_reference(bad)


def test_absurdly_long_reference_is_refused_before_parsing() -> None:
    """8 MiB of ``a/`` kept the regexes busy 4 s, holding the event loop; now it is refused
    at once, and the error does not quote it back."""
    started = time.process_time()
    with pytest.raises(ValueError, match=r"^invalid reference format: 8388608 characters"):
        split_reference("a/" * (4 * 1024 * 1024))
    assert time.process_time() - started < 0.1
    assert split_reference("a/" * 100 + "b")[1] == "a/" * 100 + "b"  # long, valid: parsed
