"""The container hash equals upstream's bit for bit (annotation io.kubernetes.container.hash)."""

import pytest

from kubelet.api import Container
from kubelet.cri.convert import parse_hash
from kubelet.decisions.hash import go_json_string_map, hash_container, hash_container_int


def test_upstream_sample_container() -> None:
    """pkg/kubelet/container/container_hash_test.go: sampleV131HashValue = 0x8e45cbd0.

    Only name and image count, so the sample's command, args, ports, env and resources
    do not change the value.
    """
    container = Container(
        name="test_container",
        image="foo/image:v1",
        command=("/bin/testcmd",),
        args=("/bin/sh", "-c", "echo abc"),
    )
    assert hash_container_int(container) == 0x8E45CBD0
    assert hash_container(container) == "8e45cbd0"


def test_hashed_bytes_are_spew_of_go_json() -> None:
    """For {Name: foo, Image: busybox} json.Marshal writes {"image":"busybox","name":"foo"};
    the hash input is spew's ``([]uint8)[123 34 105 ...]`` rendering of those bytes."""
    data = go_json_string_map({"name": "foo", "image": "busybox"})
    assert data == b'{"image":"busybox","name":"foo"}'
    assert hash_container(Container(name="foo", image="busybox")) == "fbac95ff"


def test_go_html_escaping() -> None:
    assert go_json_string_map({"name": "a<b>&c"}) == b'{"name":"a\\u003cb\\u003e\\u0026c"}'


def test_only_name_and_image_matter() -> None:
    base = Container(name="c", image="busybox")
    assert hash_container(base) == hash_container(Container(name="c", image="busybox", tty=True))
    assert hash_container(base) != hash_container(Container(name="c", image="busybox:1"))
    assert hash_container(base) != hash_container(Container(name="d", image="busybox"))


def test_no_padding() -> None:
    # Lowercase hex without leading zeros, as strconv.FormatUint(h, 16).
    for i in range(200):
        h = hash_container(Container(name=f"c{i}", image="x"))
        assert h == format(int(h, 16), "x")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8e45cbd0", "8e45cbd0"),
        ("8E45CBD0", "8e45cbd0"),
        ("0a", "a"),
        ("", ""),
        ("xyz", ""),
        ("0x10", ""),
        ("-1", ""),
        ("1_0", ""),
    ],
)
def test_parse_hash(text: str, expected: str) -> None:
    assert parse_hash(text) == expected
