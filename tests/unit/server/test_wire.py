"""The response headers every connection shares."""

from __future__ import annotations

import email.utils

import pytest

from kubelet.server.wire import http_date


@pytest.mark.parametrize(
    "seconds", [0, 951782400, 1709251199, 1735689599, 1764374400, 2147483647, 4102444800]
)
def test_the_date_header_is_imf_fixdate(seconds: int) -> None:
    assert http_date(seconds) == email.utils.formatdate(seconds, usegmt=True).encode()


def test_the_date_header_is_english_whatever_the_locale() -> None:
    assert http_date(1764374400) == b"Sat, 29 Nov 2025 00:00:00 GMT"
