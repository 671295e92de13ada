"""Resource quantities, against values upstream's resource.Quantity produces."""

from fractions import Fraction

import pytest

from kubelet.api import (
    Format,
    QuantityError,
    ResourceQuantity,
    format_quantity,
    parse_quantity,
    to_bytes,
    to_millicores,
)


@pytest.mark.parametrize(
    ("text", "amount", "fmt"),
    [
        ("0", Fraction(0), Format.DECIMAL_SI),
        ("1", Fraction(1), Format.DECIMAL_SI),
        ("100m", Fraction(1, 10), Format.DECIMAL_SI),
        ("1.5", Fraction(3, 2), Format.DECIMAL_SI),
        ("64Mi", Fraction(64 * 2**20), Format.BINARY_SI),
        ("1.5Gi", Fraction(3 * 2**29), Format.BINARY_SI),
        ("1e3", Fraction(1000), Format.DECIMAL_EXPONENT),
        ("1E3", Fraction(1000), Format.DECIMAL_EXPONENT),
        ("5e-3", Fraction(5, 1000), Format.DECIMAL_EXPONENT),
        ("1G", Fraction(10**9), Format.DECIMAL_SI),
        ("1E", Fraction(10**18), Format.DECIMAL_SI),
        ("2k", Fraction(2000), Format.DECIMAL_SI),
        ("3n", Fraction(3, 10**9), Format.DECIMAL_SI),
        ("7u", Fraction(7, 10**6), Format.DECIMAL_SI),
        ("+1", Fraction(1), Format.DECIMAL_SI),
        ("-1", Fraction(-1), Format.DECIMAL_SI),
        (".5", Fraction(1, 2), Format.DECIMAL_SI),
        ("5.", Fraction(5), Format.DECIMAL_SI),
        ("1.G", Fraction(10**9), Format.DECIMAL_SI),
        ("0.1n", Fraction(1, 10**9), Format.DECIMAL_SI),  # rounded up to nano
        ("1Ki", Fraction(1024), Format.BINARY_SI),
    ],
)
def test_parse(text: str, amount: Fraction, fmt: Format) -> None:
    q = parse_quantity(text)
    assert q.amount == amount
    assert q.format is fmt


@pytest.mark.parametrize(
    "bad",
    ["", "abc", "1K", "1ki", "1Mb", "1.5.5", "1e", "1e1.5", "1 ", " 1", "1Mi2", "--1", "0x10"],
)
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_numbers_from_yaml() -> None:
    assert parse_quantity(2).amount == 2
    assert parse_quantity(0.5).amount == Fraction(1, 2)
    with pytest.raises(QuantityError):
        parse_quantity(True)


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("100m", 100, 1),  # Value() rounds up
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.5m", 1, 1),  # MilliValue() rounds up
        ("250m", 250, 1),
        ("2", 2000, 2),
        ("0", 0, 0),
        ("-100m", -100, -1),  # away from zero
    ],
)
def test_milli_and_value(text: str, milli: int, value: int) -> None:
    q = parse_quantity(text)
    assert q.milli_value() == milli
    assert q.value() == value


def test_bytes_and_millicores() -> None:
    assert to_bytes("64Mi") == 67108864
    assert to_bytes("1G") == 1_000_000_000
    assert to_bytes("10G") == 10_000_000_000
    assert to_bytes("1.5Gi") == 1610612736
    assert to_bytes("1e3") == 1000
    assert to_bytes(None) == 0
    assert to_millicores("100m") == 100
    assert to_millicores("1") == 1000
    assert to_millicores(None) == 0


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0", "0"),
        ("1", "1"),
        ("1.5", "1500m"),
        ("100m", "100m"),
        ("1000m", "1"),
        ("1500", "1500"),
        ("12000", "12k"),
        ("1000000", "1M"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("1536Ki", "1536Ki"),
        ("0.5Ki", "512"),  # below 1024: decimal
        ("1.5Ki", "1536"),
        ("1e3", "1e3"),
        ("1e6", "1e6"),
        ("1.5e3", "1500"),  # exponent form keeps a multiple of 3
        ("100e-3", "100e-3"),
        ("0.1n", "1n"),
        ("-1.5", "-1500m"),
        ("1E", "1E"),
        ("1000E", "1000E"),  # no suffix above exa
    ],
)
def test_canonical_string(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


def test_format_quantity_direct() -> None:
    assert format_quantity(2048, Format.BINARY_SI) == "2Ki"
    assert format_quantity(Fraction(1, 2)) == "500m"
    assert format_quantity(10**21, Format.DECIMAL_EXPONENT) == "1e21"
    assert str(ResourceQuantity(Fraction(3, 2), Format.BINARY_SI)) == "1500m"
