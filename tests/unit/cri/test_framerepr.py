"""The cheaper DATA frame description is the same text as hyperframe's."""

from __future__ import annotations

import binascii

import pytest
from hyperframe.frame import DataFrame

from kubelet.cri import channel, framerepr  # noqa: F401 (channel installs it)


def original(data: bytes | None) -> str:
    """hyperframe 6's ``_raw_data_repr``, as written there."""
    if not data:
        return "None"
    r = binascii.hexlify(data).decode("ascii")
    if len(r) > 20:
        r = r[:20] + "..."
    return "<hex:" + r + ">"


@pytest.mark.parametrize("size", [0, 1, 9, 10, 11, 12, 100, 16384])
def test_same_text_as_hyperframe(size: int) -> None:
    data = bytes(range(256)) * (size // 256 + 1)
    assert framerepr.raw_data_repr(data[:size]) == original(data[:size])
    assert framerepr.raw_data_repr(None) == original(None)


def test_installed_for_data_frames() -> None:
    payload = b"\x01\x02" * 8000
    assert repr(DataFrame(1, data=payload)).endswith(original(payload))
    assert repr(DataFrame(1, data=payload)) == (
        f"DataFrame(stream_id=1, flags=[]): {original(payload)}"
    )
