"""ReloadKubeletServerCertificateFile and ReloadKubeletClientCAFile against the real server.

Real TLS clients on 127.0.0.1, real clock: the files are replaced on disk while the
server runs, and new connections see the new serving certificate or CA bundle.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubelet.config import FeatureGates, KubeletAuthorization, Options
from kubelet.server import Addresses, ServerParts, serve
from kubelet.server.certs import self_signed_pair

from . import test_server
from .test_server import NODE, Env, _ca, _client, authn, config

env = test_server.env
pki = test_server.pki

pytestmark = pytest.mark.trio


def _write_pair(directory: Path, host: str) -> tuple[Path, Path, x509.Certificate]:
    chain, key = self_signed_pair(host)
    crt, key_file = directory / "tls.crt", directory / "tls.key"
    crt.write_bytes(chain)
    key_file.write_bytes(key)
    return crt, key_file, x509.load_pem_x509_certificate(chain)


async def _server_cert(address: str, cert: tuple[Path, Path] | None = None) -> x509.Certificate:
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    stream = await trio.open_ssl_over_tcp_stream(host, int(port), ssl_context=context)
    try:
        await stream.do_handshake()
        der = stream.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)
    finally:
        await stream.aclose()


async def _start(env: Env, gates: dict[str, bool] | None = None, **changes: object) -> Addresses:
    options = Options(
        config=config(**changes),
        node_name=NODE,
        root_dir=str(env.tmp),
        cert_dir=str(env.tmp / "pki"),
        features=FeatureGates(gates or {}),
    )
    addresses: Addresses = await env.nursery.start(
        serve,
        ServerParts(
            backend=env.backend, options=options, reviews=env.reviews, ephemeral_ports=True
        ),
    )
    return addresses


async def _eventually(check: Callable[[], trio.lowlevel.Any], seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not await check():
            await trio.sleep(0.05)


async def test_changed_serving_pair_is_used_for_new_connections(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet.server.tlsreload")
    crt, key, first = _write_pair(env.tmp, "first")
    addr = await _start(env, tls_cert_file=str(crt), tls_private_key_file=str(key))
    assert (await _server_cert(addr.main)).serial_number == first.serial_number

    _, _, second = _write_pair(env.tmp, "second")

    async def serves_second() -> bool:
        return (await _server_cert(addr.main)).serial_number == second.serial_number

    await _eventually(serves_second)
    assert f"kubelet-server-cert-files::{crt}::{key}" in caplog.text

    # A certificate whose key does not match: refused, the second pair stays.
    third_chain, _ = self_signed_pair("third")
    crt.write_bytes(third_chain)
    await _eventually(lambda: _logged(caplog, "failed with"))
    assert "still serving what was loaded before" in caplog.text
    assert (await _server_cert(addr.main)).serial_number == second.serial_number


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return text in caplog.text


async def test_serving_pair_not_reloaded_with_the_gate_off(env: Env) -> None:
    crt, key, first = _write_pair(env.tmp, "first")
    addr = await _start(
        env,
        {"ReloadKubeletServerCertificateFile": False},
        tls_cert_file=str(crt),
        tls_private_key_file=str(key),
    )
    _write_pair(env.tmp, "second")
    await trio.sleep(1.0)
    assert (await _server_cert(addr.main)).serial_number == first.serial_number


async def test_changed_client_ca_is_used_for_new_handshakes(env: Env) -> None:
    other = _ca("rotated-ca")
    bob = _client(other, "bob", "ops", env.tmp)
    ca_file = env.tmp / "client-ca.crt"
    ca_file.write_bytes(env.pki.ca_file.read_bytes())
    addr = await _start(
        env,
        authentication=authn(client_ca=ca_file, webhook=False),
        authorization=KubeletAuthorization(mode="AlwaysAllow"),
    )

    async def status(cert: tuple[Path, Path]) -> int | str:
        try:
            async with env.client(cert) as client:
                return (await client.get(f"https://{addr.main}/pods")).status_code
        except Exception as exc:  # the handshake refuses a certificate of an unknown CA
            return type(exc).__name__

    assert await status(env.pki.good) == 200
    assert await status(bob) != 200

    ca_file.write_bytes(other[0].public_bytes(serialization.Encoding.PEM))

    async def bob_accepted() -> bool:
        return await status(bob) == 200

    await _eventually(bob_accepted)
    assert await status(env.pki.good) != 200  # the old CA is no longer trusted

    ca_file.write_bytes(b"not a certificate\n")  # refused: the rotated CA stays
    await trio.sleep(0.5)
    assert await status(bob) == 200
