"""``tlsCipherSuites``, ``tlsCurvePreferences`` and ``tlsMinVersion`` as applied to a
serving ``SSLContext`` (as upstream 1.36's ``InitializeTLS`` and server TLS options).

The names were checked at start-up (``kubelet.config`` validation). Here each Go suite
becomes OpenSSL's name for the TLS 1.0-1.2 list; TLS 1.3 suites stay OpenSSL's fixed set,
as Go's do. A suite Go would offer but this OpenSSL build lacks (RC4, 3DES at the default
security level) is named in a warning rather than silently missing; when no listed TLS
1.0-1.2 suite remains, only TLS 1.3 is served. Curves become OpenSSL group names for both
TLS 1.2 and 1.3; one this OpenSSL lacks (the post-quantum hybrids before OpenSSL 3.5),
or a list this Python cannot set, stops start-up rather than narrowing the list.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence

import attrs

from kubelet.config import (
    INSECURE_CIPHER_SUITES,
    OPENSSL_CIPHERS,
    TLS_CURVES,
    KubeletConfiguration,
)

from .sslgroups import GroupsUnsupported, set_groups, supported

__all__ = ["TLS_VERSIONS", "TlsProfile", "tls_profile"]

log = logging.getLogger(__name__)

TLS_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}


@attrs.frozen
class TlsProfile:
    """What every serving context of the kubelet is given."""

    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    ciphers: str = ""
    """OpenSSL's TLS 1.0-1.2 cipher list ("": the library's defaults)"""
    groups: tuple[str, ...] = ()
    """OpenSSL's key-exchange group names, preferred first (empty: the defaults)"""

    def apply(self, context: ssl.SSLContext) -> None:
        """Narrow ``context`` to this profile (raises when OpenSSL refuses it)."""
        context.minimum_version = self.min_version
        if self.ciphers:
            context.set_ciphers(self.ciphers)
        set_groups(context, self.groups)


def tls_profile(config: KubeletConfiguration) -> TlsProfile:
    """The profile of ``config``, logging what upstream logs about it. Raises ValueError
    when a curve cannot be honoured."""
    min_version = TLS_VERSIONS.get(config.tls_min_version, ssl.TLSVersion.TLSv1_2)
    suites = config.tls_cipher_suites
    for name in suites:
        if name in INSECURE_CIPHER_SUITES:
            log.info('"Use of insecure cipher detected." cipher=%r', name)
    if suites and min_version == ssl.TLSVersion.TLSv1_3:
        log.info(
            '"Warning: TLS 1.3 cipher suites are not configurable, ignoring --tls-cipher-suites"'
        )
    ciphers = ""
    if suites and min_version < ssl.TLSVersion.TLSv1_3:
        ciphers, min_version = _tls12_ciphers(suites, min_version)
    groups = _groups(config.tls_curve_preferences)
    profile = TlsProfile(min_version=min_version, ciphers=ciphers, groups=groups)
    try:
        profile.apply(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    except (GroupsUnsupported, ssl.SSLError) as exc:
        raise ValueError(f"tlsCurvePreferences: {exc}") from exc
    return profile


def _tls12_ciphers(
    suites: Sequence[str], min_version: ssl.TLSVersion
) -> tuple[str, ssl.TLSVersion]:
    """OpenSSL's list for the suites this build provides; TLS 1.3 only when none."""
    offered: list[str] = []
    for name in suites:
        openssl = OPENSSL_CIPHERS.get(name)
        if openssl is None or openssl in offered:
            continue
        if not _available(openssl):
            log.warning(
                "tlsCipherSuites: %s is not offered: %s does not provide it",
                name,
                ssl.OPENSSL_VERSION,
            )
            continue
        offered.append(openssl)
    if not offered:
        log.warning(
            "tlsCipherSuites: no TLS 1.0-1.2 suite listed is available; serving TLS 1.3 only"
        )
        return "", ssl.TLSVersion.TLSv1_3
    return ":".join(offered), min_version


def _available(openssl_name: str) -> bool:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        probe.set_ciphers(openssl_name)
    except ssl.SSLError:
        return False
    return any(c["name"] == openssl_name for c in probe.get_ciphers())


def _groups(curves: Sequence[int]) -> tuple[str, ...]:
    groups: list[str] = []
    for curve in curves:
        go_name, openssl = TLS_CURVES[curve]
        if not supported(openssl):
            raise ValueError(
                f"tlsCurvePreferences: curve preference {curve} ({go_name}) is not "
                f"supported by this kubelet's TLS library ({ssl.OPENSSL_VERSION})"
            )
        groups.append(openssl)
    return tuple(groups)
