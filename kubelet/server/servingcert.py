"""The files the TLS port serves with: the configured pair, or a self-signed one.

As upstream: with neither ``tlsCertFile`` nor ``tlsPrivateKeyFile`` set, the kubelet uses
``<cert-dir>/kubelet.crt`` and ``kubelet.key``, creating them on first start (see
``certs``). Existing files are reused, so clients that pinned the certificate keep
working. The pair is made by a child process: what makes it (cryptography) is needed
once, and would otherwise stay in the kubelet's memory for good.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

import attrs

from kubelet.boundedio import InputRefused, run_plugin

log = logging.getLogger(__name__)

MAKE_TIMEOUT = math.inf
"""No deadline of the kubelet's clock: the child makes two RSA keys (half a second) and
ends; stopping the kubelet kills it."""


@attrs.frozen
class ServingCert:
    cert_file: str
    key_file: str


def _child_env() -> dict[str, str]:
    """This process's environment, with this kubelet's own tree first on the path."""
    tree = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([tree, rest] if rest else [tree])}


async def serving_cert(cert_file: str, key_file: str, cert_dir: str, host: str) -> ServingCert:
    """The files to serve with: the configured ones, else ``cert_dir``'s, created if absent.

    ``OSError`` when the pair cannot be made, with what the child said."""
    if cert_file or key_file:
        return ServingCert(cert_file, key_file)
    directory = Path(cert_dir)
    crt, key = directory / "kubelet.crt", directory / "kubelet.key"
    if crt.is_file() and key.is_file():
        return ServingCert(str(crt), str(key))
    argv = [sys.executable, "-m", "kubelet.server.certs", host, str(crt), str(key)]
    try:
        status, _, err = await run_plugin(
            argv, stdin=b"", env=_child_env(), timeout=MAKE_TIMEOUT, stdout_limit=4096
        )
    except InputRefused as exc:
        raise OSError(f"unable to create a self-signed serving certificate: {exc!r}") from exc
    if status != 0:
        said = err.decode(errors="replace").strip().splitlines()
        raise OSError(
            f"unable to create a self-signed serving certificate in {directory}: "
            f"{said[-1] if said else f'exit status {status}'}"
        )
    log.info("Generated self-signed serving certificate %s for %s", crt, host)
    return ServingCert(str(crt), str(key))
