"""Kubernetes resource quantities ("100m", "1.5Gi", "1e3"), parsed and printed as upstream.

Upstream (apimachinery ``resource.Quantity``) is exact decimal arithmetic; ``Fraction``
gives the same answers. The rules that matter to a kubelet:

- a value is rounded *away from zero* to nano precision when parsed, so asking for a
  tiny amount of a resource still asks for some;
- ``value()`` and ``milli_value()`` round *up* (away from zero), so "0.5m" of CPU is
  1 millicore and "100m" of memory is 1 byte;
- the printed (canonical) form keeps the suffix family it was written in: "1.5Gi" prints
  as "1536Mi", "1.5" as "1500m", "1e3" as "1e3".
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from fractions import Fraction

import attrs

__all__ = [
    "Format",
    "QuantityError",
    "ResourceQuantity",
    "format_quantity",
    "parse_quantity",
    "to_bytes",
    "to_millicores",
]


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


class Format(enum.Enum):
    """Which suffix family a quantity prints in (upstream ``resource.Format``)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: Mapping[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: Mapping[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_EXPONENT = {exp: suffix for suffix, exp in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_NANO = Fraction(1, 10**9)


def _round_away(value: Fraction, unit: Fraction) -> Fraction:
    """``value`` rounded away from zero to a multiple of ``unit`` (inf.RoundUp)."""
    steps = value / unit
    whole = math.ceil(steps) if steps >= 0 else math.floor(steps)
    return whole * unit


def _split(text: str) -> tuple[bool, str, str, str]:
    """(positive, whole digits, fraction digits, suffix), scanning like upstream does.

    Upstream is lenient in a few places and so are we: "1." and ".5" are numbers, and
    a lone sign or "." reads as zero.
    """
    pos, end = 0, len(text)
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isdigit() and text[pos].isascii():
            pos += 1
        frac = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos != end:
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    return positive, whole, frac, text[suffix_start:]


def _interpret_suffix(suffix: str, text: str) -> tuple[int, int, Format]:
    """(base, exponent, format) for a suffix; QuantityError if it is not one."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and body.isdigit() and body.isascii():
            return 10, int(digits), Format.DECIMAL_EXPONENT
    raise QuantityError(f"unable to parse quantity's suffix: {text!r}")


@attrs.frozen
class ResourceQuantity:
    """An exact quantity and the suffix family it was written in."""

    amount: Fraction
    format: Format = Format.DECIMAL_SI

    @classmethod
    def parse(cls, text: str | int | float) -> ResourceQuantity:
        """Parse a quantity; numbers (as YAML gives them) are read as their decimal text."""
        if isinstance(text, bool):
            raise QuantityError(f"not a quantity: {text!r}")
        if isinstance(text, int | float):
            text = repr(text) if isinstance(text, float) else str(text)
        if not text:
            raise QuantityError("quantities must match the regular expression: ''")
        positive, whole, frac, suffix = _split(text)
        base, exponent, fmt = _interpret_suffix(suffix, text)
        mantissa = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
        amount = mantissa * Fraction(base) ** exponent
        if not positive:
            amount = -amount
        if amount:
            amount = _round_away(amount, _NANO)
        return cls(amount, fmt)

    def scaled_value(self, scale: int) -> int:
        """The amount in units of 10**scale, rounded away from zero (``ScaledValue``)."""
        return int(_round_away(self.amount, Fraction(10) ** scale) / Fraction(10) ** scale)

    def value(self) -> int:
        """Whole units, rounded up: bytes for memory, cores for CPU."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """Thousandths, rounded up: millicores for CPU."""
        return self.scaled_value(-3)

    def is_zero(self) -> bool:
        return self.amount == 0

    def __str__(self) -> str:
        return format_quantity(self.amount, self.format)


def parse_quantity(text: str | int | float) -> ResourceQuantity:
    """Parse ``text`` as upstream ``resource.ParseQuantity`` does."""
    return ResourceQuantity.parse(text)


def _decimal_canonical(amount: Fraction, max_exponent: int | None) -> tuple[int, int]:
    """(integer mantissa, exponent multiple of 3) with the largest exponent possible."""
    exponent = -9
    m = int(_round_away(amount / Fraction(10) ** exponent, Fraction(1)))
    while m % 1000 == 0 and (max_exponent is None or exponent < max_exponent):
        m //= 1000
        exponent += 3
    return m, exponent


def format_quantity(amount: Fraction | int, fmt: Format = Format.DECIMAL_SI) -> str:
    """Canonical text for ``amount`` (upstream ``Quantity.String``).

    BinarySI falls back to DecimalSI below 1024 or when the value is not whole, as
    upstream does so that nothing is rounded away when printing.
    """
    amount = Fraction(amount)
    if amount == 0:
        return "0"
    if fmt is Format.BINARY_SI and (abs(amount) < 1024 or amount.denominator != 1):
        fmt = Format.DECIMAL_SI
    if fmt is Format.BINARY_SI:
        m, exponent = int(amount), 0
        while m % 1024 == 0 and exponent < 60:
            m //= 1024
            exponent += 10
        return f"{m}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    if fmt is Format.DECIMAL_EXPONENT:
        m, exponent = _decimal_canonical(amount, None)
        return f"{m}e{exponent}" if exponent else str(m)
    m, exponent = _decimal_canonical(amount, 18)
    return f"{m}{_DECIMAL_BY_EXPONENT[exponent]}"


def to_millicores(quantity: str | int | float | None) -> int:
    """CPU in millicores (0 when unset), rounded up like ``MilliValue``."""
    if quantity is None:
        return 0
    return parse_quantity(quantity).milli_value()


def to_bytes(quantity: str | int | float | None) -> int:
    """A byte count (0 when unset), rounded up like ``Value``."""
    if quantity is None:
        return 0
    return parse_quantity(quantity).value()
