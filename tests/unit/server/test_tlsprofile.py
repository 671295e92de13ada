"""``tlsCipherSuites``, ``tlsCurvePreferences`` on the main port's TLS: real OpenSSL
handshakes between a client context and the server's front context (memory BIOs)."""

from __future__ import annotations

import logging
import ssl

import attrs
import pytest

from kubelet.boundedio import inline
from kubelet.config import KubeletConfiguration, validate
from kubelet.server.certs import self_signed_pair
from kubelet.server.sslgroups import set_groups
from kubelet.server.tlsprofile import tls_profile
from kubelet.server.tlsreload import ServingTLS


async def _server(**settings: object) -> ServingTLS:
    config = attrs.evolve(KubeletConfiguration(), **settings)
    tls = ServingTLS(config.tls_min_version, "", run=inline, profile=tls_profile(config))
    await tls.use_pair(*self_signed_pair("node"))
    return tls


def _client(ciphers: str = "", groups: tuple[str, ...] = (), tls12: bool = True) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if ciphers:
        context.set_ciphers(ciphers)
    set_groups(context, groups)
    return context


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """Run a handshake to its end; raises ssl.SSLError when either side refuses."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_side=False)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, side in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return c
    raise AssertionError("handshake did not finish")


async def test_only_the_listed_tls12_suites_are_served() -> None:
    tls = await _server(
        tls_cipher_suites=("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256")
    )
    with pytest.raises(ssl.SSLError):
        _handshake(tls.front, _client("ECDHE-RSA-AES128-GCM-SHA256"))
    allowed = _handshake(tls.front, _client("ECDHE-RSA-AES256-GCM-SHA384"))
    assert allowed.cipher()[0] == "ECDHE-RSA-AES256-GCM-SHA384"
    # TLS 1.3's suites are not configurable, as in Go: all three stay on offer.
    tls13 = _handshake(tls.front, _client(tls12=False))
    assert tls13.version() == "TLSv1.3"


async def test_the_default_still_serves_other_suites() -> None:
    tls = await _server()
    assert _handshake(tls.front, _client("ECDHE-RSA-AES128-GCM-SHA256")).cipher()


async def test_only_tls13_suites_listed_means_tls13_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    tls = await _server(tls_cipher_suites=("TLS_AES_128_GCM_SHA256", "TLS_RSA_WITH_RC4_128_SHA"))
    with pytest.raises(ssl.SSLError):
        _handshake(tls.front, _client())
    assert _handshake(tls.front, _client(tls12=False)).version() == "TLSv1.3"
    assert "Use of insecure cipher detected." in caplog.text
    assert "TLS_RSA_WITH_RC4_128_SHA is not offered" in caplog.text


async def test_a_curve_left_out_is_refused_in_tls12_and_tls13() -> None:
    tls = await _server(tls_curve_preferences=(24, 29))  # P-384, X25519
    for tls12 in (True, False):
        with pytest.raises(ssl.SSLError):
            _handshake(tls.front, _client(groups=("P-256",), tls12=tls12))
        assert _handshake(tls.front, _client(groups=("P-384",), tls12=tls12))
        assert _handshake(tls.front, _client(groups=("X25519",), tls12=tls12))


async def test_the_profile_survives_a_reloaded_pair() -> None:
    tls = await _server(tls_curve_preferences=(29,))
    await tls.use_pair(*self_signed_pair("other"))
    with pytest.raises(ssl.SSLError):
        _handshake(tls.front, _client(groups=("P-256",)))
    assert _handshake(tls.front, _client(groups=("X25519",)))


def test_a_curve_this_openssl_lacks_stops_start_up() -> None:
    if "OpenSSL 3.0" not in ssl.OPENSSL_VERSION:
        return  # a newer OpenSSL has the hybrids; the refusal below is about 3.0's lack
    config = attrs.evolve(KubeletConfiguration(), tls_curve_preferences=(29, 4588))
    with pytest.raises(ValueError, match=r"4588 \(X25519MLKEM768\) is not supported"):
        tls_profile(config)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tls_cipher_suites": ("TLS_NOPE",)}, "Cipher suite TLS_NOPE not supported or doesn't"),
        ({"tls_curve_preferences": (0,)}, "curve preference 0 is out of range (must be 1-65535)"),
        ({"tls_curve_preferences": (70000,)}, "curve preference 70000 is out of range"),
        ({"tls_curve_preferences": (23, 29, 23)}, "duplicate curve preference 23"),
        ({"tls_curve_preferences": (9999,)}, "9999 is not supported by the current Go version"),
    ],
)  # fmt: skip
def test_names_upstream_does_not_know_stop_start_up(
    settings: dict[str, object], message: str
) -> None:
    issues = validate(attrs.evolve(KubeletConfiguration(), **settings))
    assert any(message in text for _, text in issues), issues


def test_known_names_pass_validation() -> None:
    config = attrs.evolve(
        KubeletConfiguration(),
        tls_cipher_suites=("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_RSA_WITH_AES_128_CBC_SHA"),
        tls_curve_preferences=(23, 24, 25, 29, 4588),
    )
    assert not [i for i in validate(config) if i[0].startswith("tls")]
