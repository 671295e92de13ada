"""Go duration strings: what time.ParseDuration accepts and how Duration.String prints."""

from __future__ import annotations

import pytest

from kubelet.config import parse_duration, parse_duration_ns
from kubelet.goformat import format_duration, format_duration_ns


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("300ms", 0.3),
        ("1.5h", 5400.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("+0", 0.0),
        ("0s", 0.0),
        ("-1s", -1.0),
        ("+5m", 300.0),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("2h45m", 9900.0),
        ("1h2m3.004s", 3723.004),
        ("10us", 1e-5),
        ("10µs", 1e-5),  # micro sign
        ("10μs", 1e-5),  # Greek mu
        ("7ns", 7e-9),
        ("1m0.5s", 60.5),
        ("3s3s", 6.0),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", r'invalid duration ""$'),
        ("20x", r'invalid duration "20x": unknown unit "x"'),
        ("20", r'invalid duration "20": missing unit'),
        ("s", r'invalid duration "s"$'),
        (".s", r'invalid duration ".s"$'),
        ("-", r'invalid duration "-"$'),
        ("1.2.3s", "missing unit"),
        (" 1s", r'invalid duration " 1s"'),
        ("1s ", 'unknown unit "s "'),
        ("1S", 'unknown unit "S"'),
        ("2562047h47m16.854775808s", "out of range"),
        ("9999999999h", "out of range"),
    ],
)
def test_parse_errors(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_duration(text)


def test_integer_nanoseconds_like_go() -> None:
    # the fraction is truncated to whole nanoseconds, as Go computes it
    assert parse_duration_ns("1.0000000001s") == 1_000_000_000
    assert parse_duration_ns("1.5h") == 5_400_000_000_000
    assert parse_duration_ns("2562047h47m16.854775807s") == (1 << 63) - 1
    assert parse_duration_ns("-2562047h47m16.854775808s") == -(1 << 63)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (300_000_000, "300ms"),
        (1_000_000_000, "1s"),
        (1_500_000_000, "1.5s"),
        (20_000_000_000, "20s"),
        (60_000_000_000, "1m0s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (9_900_000_000_000, "2h45m0s"),
        (3_723_004_000_000, "1h2m3.004s"),
        (-1_000_000_000, "-1s"),
        ((1 << 63) - 1, "2562047h47m16.854775807s"),
    ],
)
def test_format(ns: int, text: str) -> None:
    assert format_duration_ns(ns) == text


@pytest.mark.parametrize("text", ["20s", "1m30s", "1h0m0s", "300ms", "1.5s", "0s", "-2m3s"])
def test_round_trip(text: str) -> None:
    assert format_duration(parse_duration(text)) == text
