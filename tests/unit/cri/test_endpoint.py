import pytest

from kubelet.cri import DEFAULT_RUNTIME_ENDPOINT, socket_path


def test_default_endpoint_is_containerd() -> None:
    assert socket_path(DEFAULT_RUNTIME_ENDPOINT) == "/run/containerd/containerd.sock"


@pytest.mark.parametrize(
    ("endpoint", "path"),
    [
        ("unix:///var/run/crio/crio.sock", "/var/run/crio/crio.sock"),
        ("/run/containerd/containerd.sock", "/run/containerd/containerd.sock"),
    ],
)
def test_unix_forms(endpoint: str, path: str) -> None:
    assert socket_path(endpoint) == path


@pytest.mark.parametrize(
    ("endpoint", "words"),
    [
        ("tcp://127.0.0.1:1234", "protocol 'tcp' not supported"),
        ("npipe:////./pipe/x", "not supported"),
        ("", "empty"),
        ("unix://relative.sock", "absolute"),
    ],
)
def test_rejected_endpoints_name_the_problem(endpoint: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        socket_path(endpoint)
