"""Upstream's names for ``tlsCipherSuites`` and IDs for ``tlsCurvePreferences``, checked as
upstream 1.36 checks them (k8s.io/component-base/cli/flag), with what OpenSSL calls each.

Cipher suites are Go's IANA names: those Go's ``crypto/tls`` implements (``CipherSuites``,
plus the two pre-Go 1.14 ChaCha20 names kept for compatibility) and those it implements
but deems insecure (``InsecureCipherSuites``: RC4, 3DES, CBC-SHA256 and every RSA key
exchange), which start-up accepts with a notice. The TLS 1.3 suites are accepted but, as
in Go, not configurable: they map to no OpenSSL TLS 1.2 name.

Curve preferences are TLS "supported group" IDs, each one Go's ``tls.CurveID`` knows;
out of range, repeated or unknown IDs stop start-up with upstream's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

_TLS12 = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
_TLS13 = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")

INSECURE_CIPHER_SUITES = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}
"""Go's insecure suites; upstream accepts them and logs "Use of insecure cipher detected."."""

OPENSSL_CIPHERS: dict[str, str | None] = {
    **_TLS12,
    **INSECURE_CIPHER_SUITES,
    **dict.fromkeys(_TLS13),
}
"""Every name ``tlsCipherSuites`` accepts, with OpenSSL's name for it (None: a TLS 1.3
suite, which neither Go nor OpenSSL lets a server narrow)."""

CURVES: dict[int, tuple[str, str]] = {
    23: ("CurveP256", "P-256"),
    24: ("CurveP384", "P-384"),
    25: ("CurveP521", "P-521"),
    29: ("X25519", "X25519"),
    4587: ("SecP256r1MLKEM768", "SecP256r1MLKEM768"),
    4588: ("X25519MLKEM768", "X25519MLKEM768"),
    4589: ("SecP384r1MLKEM1024", "SecP384r1MLKEM1024"),
}
"""The ``tls.CurveID`` values Go knows, with Go's name and OpenSSL's group name."""

TLS13_ONLY_CURVES = frozenset([4587, 4588, 4589])
"""The post-quantum hybrids: key exchanges TLS 1.2 does not have."""


def cipher_suite_problems(names: Iterable[str]) -> Iterator[str]:
    """Upstream's message for the first name Go does not know (start-up stops on it)."""
    for name in names:
        if name not in OPENSSL_CIPHERS:
            yield f"Cipher suite {name} not supported or doesn't exist"
            return


def curve_problems(ids: Sequence[int]) -> Iterator[str]:
    """Upstream's message for the first curve ID out of range, repeated or unknown."""
    seen: set[int] = set()
    for curve in ids:
        if curve <= 0 or curve > 65535:
            yield f"curve preference {curve} is out of range (must be 1-65535)"
            return
        if curve in seen:
            yield f"duplicate curve preference {curve}"
            return
        seen.add(curve)
        if curve not in CURVES:
            yield f"curve preference {curve} is not supported by the current Go version"
            return
