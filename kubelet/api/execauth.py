"""Kubeconfig ``exec`` credential plugins (client.authentication.k8s.io v1 and v1beta1).

As client-go's exec authenticator: the plugin runs as ``command args...`` with the
kubelet's environment plus ``env`` and ``KUBERNETES_EXEC_INFO`` (an ``ExecCredential``
whose spec says whether it may talk to a user, and with ``provideClusterInfo`` the
cluster it is for). It prints an ``ExecCredential`` of the same apiVersion whose status
holds a bearer token, a client certificate and key, or both, and optionally an
``expirationTimestamp``. The answer is kept until that time (for ever without one) and
the plugin run again after it, or as soon as the API server answers 401 to a request
that carried it.

A kubelet has no terminal: ``interactiveMode: Always`` fails with upstream's message,
``IfAvailable`` runs the plugin non-interactively, and stdin is never passed on. The
plugin runs in a session of its own, its stdout is bounded, its answer is decoded off the
event loop, and no credential is logged. Upstream waits for the plugin without limit;
here a run that takes longer than :data:`EXEC_TIMEOUT` is killed and counted as failed.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from kubelet.boundedio import (
    InputRefused,
    OutputTooLarge,
    RunSync,
    in_thread,
    loads_json,
    run_plugin,
)
from kubelet.goformat import parse_time

__all__ = [
    "EXEC_API_VERSIONS",
    "ExecAuthenticator",
    "ExecConfig",
    "ExecCredentials",
    "ExecPluginError",
]

log = logging.getLogger(__name__)

GROUP = "client.authentication.k8s.io"
EXEC_API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
CLUSTER_CONFIG_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension passed to the plugin as ``spec.cluster.config``."""
EXEC_TIMEOUT = 120.0
ANSWER_LIMIT = 1024 * 1024
"""Bytes of an ExecCredential at most (a token or a certificate pair is a few KiB)."""


class ExecPluginError(Exception):
    """The plugin gave no usable credentials; the message never holds what it printed."""


@attrs.frozen
class ExecConfig:
    """One ``users[].user.exec`` entry, validated."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""
    cluster: Mapping[str, Any] = attrs.field(factory=dict)
    """``spec.cluster`` of the ExecCredential (sent only with provideClusterInfo)."""


@attrs.frozen
class ExecCredentials:
    """One answer of the plugin."""

    token: str = attrs.field(default="", repr=False)
    cert_pem: bytes = attrs.field(default=b"", repr=False)
    key_pem: bytes = attrs.field(default=b"", repr=False)
    expires: float | None = None
    """Seconds since the epoch; None: never."""


def exec_info(config: ExecConfig) -> str:
    """``KUBERNETES_EXEC_INFO``: the request, as client-go encodes it."""
    spec: dict[str, Any] = {"interactive": False}
    if config.provide_cluster_info:
        spec["cluster"] = dict(config.cluster)
    return json.dumps(
        {"kind": "ExecCredential", "apiVersion": config.api_version, "spec": spec},
        separators=(",", ":"),
    )


def decode_answer(doc: Any, api_version: str) -> ExecCredentials:
    """The credentials of a decoded ExecCredential; ExecPluginError with upstream's
    wording when it is not a usable one."""
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
        raise ExecPluginError("decoding stdout: not an ExecCredential object")
    version = doc.get("apiVersion")
    if version != api_version:
        raise ExecPluginError(
            f"exec plugin is configured to use API version {api_version}, "
            f"plugin returned version {version}"
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ExecPluginError("exec plugin didn't return a status field")
    token, cert, key = (
        status.get(k) or "" for k in ("token", "clientCertificateData", "clientKeyData")
    )
    if not all(isinstance(v, str) for v in (token, cert, key)):
        raise ExecPluginError("decoding stdout: status fields must be strings")
    if not token and not cert and not key:
        raise ExecPluginError("exec plugin didn't return a token or cert/key pair")
    if bool(cert) != bool(key):
        raise ExecPluginError("exec plugin returned only certificate or key, not both")
    expires: float | None = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        expires = parse_time(stamp) if isinstance(stamp, str) else None
        if expires is None:
            raise ExecPluginError("decoding stdout: expirationTimestamp is not an RFC 3339 time")
    if cert:
        _check_pair(cert.encode(), key.encode())
    return ExecCredentials(token, cert.encode(), key.encode(), expires)


def _check_pair(cert: bytes, key: bytes) -> None:
    try:
        leaf = x509.load_pem_x509_certificates(cert)[0]
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ExecPluginError("failed parsing client key/certificate") from None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        raise ExecPluginError(
            "failed parsing client key/certificate: private key does not match public key"
        )


class ExecAuthenticator:
    """The credentials of one exec plugin, run again when they expire or are refused.

    ``credentials()`` is awaited before each request; concurrent callers share one run.
    Each of ``certificate_listeners`` is called with a new (certificate, key) PEM pair
    whenever the plugin's certificate changes, so new connections present it.
    """

    def __init__(
        self,
        config: ExecConfig,
        *,
        clock: Callable[[], float] = time.time,
        environ: Callable[[], Mapping[str, str]] = lambda: os.environ,
        timeout: float = EXEC_TIMEOUT,
        run_sync: RunSync = in_thread,
    ) -> None:
        self.config = config
        self.clock = clock
        self.environ = environ
        self.timeout = timeout
        self.run_sync = run_sync
        self.certificate_listeners: list[Callable[[bytes, bytes], None]] = []
        self.current: ExecCredentials | None = None
        self.runs = 0
        self._lock = trio.Lock()

    def _expired(self, creds: ExecCredentials) -> bool:
        return creds.expires is not None and self.clock() > creds.expires

    async def credentials(self) -> ExecCredentials:
        """The cached credentials, or the plugin's new ones (ExecPluginError if it fails)."""
        async with self._lock:
            creds = self.current
            if creds is not None and not self._expired(creds):
                return creds
            return await self._refresh()

    def unauthorized(self, sent_token: str | None) -> None:
        """A request got 401: forget the answer it carried (not a newer one), so the
        next request runs the plugin again."""
        creds = self.current
        if creds is None:
            return
        if creds.token and sent_token is not None and sent_token != creds.token:
            return  # refreshed already
        log.info("exec plugin credentials were rejected (401); running the plugin again")
        self.current = None

    async def _refresh(self) -> ExecCredentials:
        config = self.config
        if config.interactive_mode == "Always":
            raise ExecPluginError(
                "exec plugin cannot support interactive mode: standard input is not a terminal"
            )
        env = {**self.environ(), **dict(config.env), EXEC_INFO_ENV: exec_info(config)}
        self.runs += 1
        try:
            code, stdout, stderr = await run_plugin(
                [config.command, *config.args],
                stdin=b"",
                env=env,
                timeout=self.timeout,
                stdout_limit=ANSWER_LIMIT,
            )
        except FileNotFoundError:
            hint = f"\n\n{config.install_hint}" if config.install_hint else ""
            raise ExecPluginError(f"exec: executable {config.command} not found{hint}") from None
        except trio.TooSlowError:
            raise ExecPluginError(
                f"exec: executable {config.command} did not answer within {self.timeout:g}s"
            ) from None
        except OutputTooLarge as exc:
            raise ExecPluginError(f"exec: executable {config.command}: {exc}") from None
        except OSError as exc:
            raise ExecPluginError(f"exec: {exc.strerror or exc}") from None
        if code != 0:
            detail = stderr.decode("utf-8", "replace").strip()
            raise ExecPluginError(
                f"exec: executable {config.command} failed with exit code {code}"
                + (f": {detail}" if detail else "")
            )
        try:
            doc = await self.run_sync(lambda: loads_json(stdout, max_bytes=ANSWER_LIMIT))
        except InputRefused as exc:
            raise ExecPluginError(f"decoding stdout: {exc}") from None
        creds = decode_answer(doc, config.api_version)
        old, self.current = self.current, creds
        if creds.cert_pem and (
            old is None or (old.cert_pem, old.key_pem) != (creds.cert_pem, creds.key_pem)
        ):
            for listener in self.certificate_listeners:
                listener(creds.cert_pem, creds.key_pem)
        return creds


def cluster_info(
    server: str,
    *,
    tls_server_name: str,
    insecure: bool,
    ca_data: bytes | None,
    proxy_url: str,
    disable_compression: bool,
    config: Any,
) -> dict[str, Any]:
    """``spec.cluster`` as client-go fills it from the kubeconfig's cluster."""
    out: dict[str, Any] = {"server": server}
    if tls_server_name:
        out["tls-server-name"] = tls_server_name
    if insecure:
        out["insecure-skip-tls-verify"] = True
    if ca_data:
        out["certificate-authority-data"] = base64.b64encode(ca_data).decode("ascii")
    if proxy_url:
        out["proxy-url"] = proxy_url
    if disable_compression:
        out["disable-compression"] = True
    if config is not None:
        out["config"] = config
    return out
