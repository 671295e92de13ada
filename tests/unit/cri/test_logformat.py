import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubelet.cri import parse_rfc3339nano
from kubelet.cri.logformat import format_line, parse_line, rfc3339nano


def test_trailing_zeros_trimmed_like_go() -> None:
    assert rfc3339nano(1_476_000_000_669_794_202) == "2016-10-09T08:00:00.669794202Z"
    assert rfc3339nano(1_476_000_000_500_000_000) == "2016-10-09T08:00:00.5Z"
    assert rfc3339nano(1_476_000_000_000_000_000) == "2016-10-09T08:00:00Z"


def test_parse_accepts_offsets() -> None:
    assert parse_rfc3339nano("2016-10-09T10:00:00.5+02:00") == 1_476_000_000_500_000_000
    assert parse_rfc3339nano("2016-10-09T08:00:00Z") == 1_476_000_000_000_000_000


def test_line_shape() -> None:
    line = format_line(1_476_000_000_000_000_001, "stderr", b"oops", partial=True)
    assert line == b"2016-10-09T08:00:00.000000001Z stderr P oops\n"
    parsed = parse_line(line)
    assert (parsed.stream, parsed.partial, parsed.message) == ("stderr", True, b"oops")


def test_empty_message_is_valid() -> None:
    assert parse_line(b"2016-10-09T08:00:00Z stdout F ").message == b""
    assert parse_line(b"2016-10-09T08:00:00Z stdout F").message == b""


@pytest.mark.parametrize("bad", [b"", b"hello world", b"2016-10-09T08:00:00Z stdin F x"])
def test_malformed_lines_rejected(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_line(bad)


@given(
    ns=st.integers(min_value=0, max_value=4_000_000_000 * 10**9),
    stream=st.sampled_from(["stdout", "stderr"]),
    message=st.binary().filter(lambda b: b"\n" not in b),
    partial=st.booleans(),
)
def test_round_trip(ns: int, stream: str, message: bytes, partial: bool) -> None:
    parsed = parse_line(format_line(ns, stream, message, partial=partial))
    assert (parsed.ns, parsed.stream, parsed.message, parsed.partial) == (
        ns,
        stream,
        message,
        partial,
    )
