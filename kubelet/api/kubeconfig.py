"""``--kubeconfig``: upstream's kubeconfig file (clientcmd v1 Config) → a ``ClusterConnection``.

Only what a node agent needs is read: the current context's cluster (server, CA,
insecure-skip-tls-verify, tls-server-name, proxy-url, disable-compression) and user
(client certificate and key, token / tokenFile, username / password, an ``exec``
credential plugin, impersonation with ``as`` / ``as-uid`` / ``as-groups`` /
``as-user-extra``). ``auth-provider`` plugins are refused with upstream's message (the
kubelet links none), since a kubelet silently connecting as nobody is worse than one
that stops.

Everything is checked at start-up, as clientcmd's ConfirmUsable does, and every problem
names the file and the field (``/etc/kubernetes/kubelet.conf: users[0].user.client-key-data:
invalid base64``). Relative paths are resolved against the kubeconfig's directory.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import attrs
import yaml

from kubelet.boundedio import DocumentRefused, InputRefused, measure_yaml, read_regular_file
from kubelet.errors import ConfigError, Problem

from .execauth import (
    CLUSTER_CONFIG_EXTENSION,
    EXEC_API_VERSIONS,
    INTERACTIVE_MODES,
    ExecAuthenticator,
    ExecConfig,
    cluster_info,
)

__all__ = [
    "ClusterConnection",
    "KubeconfigError",
    "TokenSource",
    "load_kubeconfig",
    "parse_kubeconfig",
]

log = logging.getLogger(__name__)


class KubeconfigError(ConfigError):
    """The kubeconfig cannot be used; start-up stops with every problem listed."""


class TokenSource:
    """A bearer token: a fixed string, or a file re-read whenever it changes.

    Like client-go's cached file token source (projected service account tokens are
    rotated in place): a read that fails or finds the file empty keeps the last good
    token; a 401 (``reset``) forces a re-read on the next request. The file's identity
    (inode, size, mtime) is checked on every request: one stat, no timer.
    """

    def __init__(self, token: str = "", path: str = "") -> None:
        self.path = path
        self._token = token
        self._seen: tuple[int, int, int] | None = None
        self._last_error = ""
        if path:
            self._reload(required=True)

    def _reload(self, *, required: bool = False) -> None:
        try:
            st = os.stat(self.path)
            signature = (st.st_ino, st.st_size, st.st_mtime_ns)
            if signature == self._seen:
                return
            token = read_regular_file(self.path, MAX_TOKEN_BYTES).decode("utf-8").strip()
            if not token:
                raise ValueError(f"read empty token from file {self.path!r}")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if required:
                raise ValueError(message) from exc
            if message != self._last_error:
                log.error("cannot rotate the API token from %s: %s", self.path, message)
                self._last_error = message
            return
        self._token, self._seen, self._last_error = token, signature, ""

    def token(self) -> str:
        """The token to send now."""
        if self.path:
            self._reload()
        return self._token

    def reset(self) -> None:
        """The server rejected the token (401): read the file again next time."""
        self._seen = None


@attrs.frozen
class ClusterConnection:
    """How to reach and authenticate to the API server (the kubeconfig's current context)."""

    server: str
    """Base URL with scheme, host, port and any path prefix (``https://10.0.0.1:6443``)."""
    ssl_context: ssl.SSLContext | None = None
    """For ``https``: CA trust (or none with insecure-skip-tls-verify) and the client
    certificate. Pass it to httpx as ``verify=`` (``cert=`` is silently ignored)."""
    tls_server_name: str = ""
    """Name to send (SNI) and verify instead of the server URL's host."""
    token: TokenSource | None = None
    basic_auth: tuple[str, str] | None = None
    proxy_url: str = ""
    disable_compression: bool = False
    namespace: str = ""
    """The context's namespace (the kubelet does not use it; kept for completeness)."""
    source: str = ""
    """The kubeconfig file this came from, for messages."""
    client_cert_files: tuple[str, str] | None = None
    """(certificate, key) files when the certificate came from files, so a rotated
    certificate (kubelet-client-current.pem) can be loaded again."""
    client_cert_data: tuple[bytes, bytes] | None = attrs.field(default=None, repr=False)
    """(certificate, key) PEM when both are embedded (``client-certificate-data``,
    ``client-key-data``): the client certificate manager's first pair, as upstream's
    CertData/KeyData."""
    exec_auth: ExecAuthenticator | None = None
    """The ``exec`` credential plugin, when the user has no token, password or
    certificate of its own (as client-go, those win)."""
    impersonate: tuple[tuple[str, str], ...] = ()
    """``Impersonate-*`` headers sent with every request (``as``, ``as-groups``, ...)."""

    async def prepare(self) -> None:
        """Before a request: the exec plugin's credentials, fresh (ExecPluginError)."""
        if self.exec_auth is not None:
            await self.exec_auth.credentials()

    def authorization(self) -> str | None:
        """The Authorization header value for the next request, if any."""
        if self.exec_auth is not None:
            creds = self.exec_auth.current
            return f"Bearer {creds.token}" if creds is not None and creds.token else None
        if self.token is not None:
            token = self.token.token()
            if token:
                return f"Bearer {token}"
        if self.basic_auth is not None:
            raw = f"{self.basic_auth[0]}:{self.basic_auth[1]}".encode()
            return "Basic " + base64.b64encode(raw).decode("ascii")
        return None

    def unauthorized(self, sent: str | None = None) -> None:
        """A request got 401 (having sent the Authorization header ``sent``): let a
        rotating token be re-read, an exec plugin be run again."""
        if self.exec_auth is not None:
            token = sent.removeprefix("Bearer ") if sent else None
            self.exec_auth.unauthorized(token)
        if self.token is not None:
            self.token.reset()

    def reload_client_certificate(self) -> None:
        """Load the client certificate files again; new connections present the new one."""
        if self.ssl_context is not None and self.client_cert_files is not None:
            self.ssl_context.load_cert_chain(*self.client_cert_files)


MAX_KUBECONFIG_BYTES = 10 * 1024 * 1024
"""The largest kubeconfig (or certificate or key file it names) read; a few
kilobytes is usual, a FIFO or a device is refused before a byte is read."""

MAX_TOKEN_BYTES = 1024 * 1024
"""The largest token file read (a service account token is a kilobyte or two)."""

MAX_NODES = 100_000
"""Values, lists and maps a kubeconfig may have, YAML aliases counted as what they
expand to: an alias bomb is refused after a few events."""

MAX_DEPTH = 100
"""Levels of nesting a kubeconfig may have (one needs about 6)."""


def _load_yaml(text: str) -> Any:
    """The document, measured before it is built (``DocumentRefused`` past the bounds)."""
    counter = yaml.CSafeLoader(text)
    try:
        measure_yaml(counter, max_nodes=MAX_NODES, max_depth=MAX_DEPTH, what="kubeconfig")
    finally:
        counter.dispose()
    return yaml.load(text, Loader=yaml.CSafeLoader)


def load_kubeconfig(path: str | os.PathLike[str]) -> ClusterConnection:
    """Read ``path``; ``KubeconfigError`` names the file and field of every problem."""
    name = os.fspath(path)
    try:
        text = read_regular_file(name, MAX_KUBECONFIG_BYTES).decode("utf-8")
    except InputRefused as exc:
        raise KubeconfigError(Problem(name, "", f"cannot read the kubeconfig: {exc}")) from exc
    except OSError as exc:
        raise KubeconfigError(
            Problem(name, "", f"cannot read the kubeconfig: {exc.strerror or exc}")
        ) from exc
    except UnicodeDecodeError as exc:
        raise KubeconfigError(Problem(name, "", "the kubeconfig is not UTF-8 text")) from exc
    return parse_kubeconfig(text, name)


def parse_kubeconfig(text: str, source: str, *, base_dir: str | None = None) -> ClusterConnection:
    """Parse kubeconfig text. ``source`` names it in errors; relative paths are resolved
    against ``base_dir`` (default: the directory of ``source``)."""
    if base_dir is None:
        base_dir = os.path.dirname(os.path.abspath(source))
    try:
        doc = _load_yaml(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise KubeconfigError(Problem(source, "", f"not valid YAML: {exc}")) from exc
    except DocumentRefused as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise KubeconfigError(Problem(source, "", f"{exc.reason}{where}")) from exc
    if doc is None:
        raise KubeconfigError(Problem(source, "", "the kubeconfig is empty"))
    if not isinstance(doc, Mapping):
        raise KubeconfigError(Problem(source, "", "expected a kubeconfig (kind: Config) object"))
    return _Builder(doc, source, base_dir).build()


# -- building -------------------------------------------------------------------------


@attrs.frozen
class _Entry:
    index: int
    body: Mapping[str, Any]


@attrs.frozen
class _Pem:
    """PEM bytes and where they came from (a file to load directly, or inline data)."""

    data: bytes
    path: str = ""


class _Builder:
    """Reads one kubeconfig document, collecting problems so all are reported at once."""

    def __init__(self, doc: Mapping[str, Any], source: str, base_dir: str) -> None:
        self.doc = doc
        self.source = source
        self.base_dir = base_dir
        self.problems: list[Problem] = []

    def problem(self, field: str, message: str) -> None:
        self.problems.append(Problem(self.source, field, message))

    def check(self) -> None:
        if self.problems:
            raise KubeconfigError(*self.problems)

    # -- generic readers --

    def named(self, key: str, inner: str) -> dict[str, _Entry]:
        raw = self.doc.get(key)
        out: dict[str, _Entry] = {}
        if raw is None:
            return out
        if not isinstance(raw, list):
            self.problem(key, "expected a list")
            return out
        for i, entry in enumerate(raw):
            where = f"{key}[{i}]"
            if not isinstance(entry, Mapping):
                self.problem(where, "expected an object")
                continue
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                self.problem(f"{where}.name", "required")
                continue
            if name in out:
                self.problem(f"{where}.name", f"duplicate name {name!r}")
                continue
            body = entry.get(inner)
            if body is None:
                body = {}
            if not isinstance(body, Mapping):
                self.problem(f"{where}.{inner}", "expected an object")
                continue
            out[name] = _Entry(i, body)
        return out

    def string(self, body: Mapping[str, Any], key: str, where: str) -> str:
        value = body.get(key)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        if not isinstance(value, str):
            self.problem(f"{where}.{key}", f"expected a string, got {type(value).__name__}")
            return ""
        return value

    def boolean(self, body: Mapping[str, Any], key: str, where: str) -> bool:
        value = body.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.problem(f"{where}.{key}", f"expected true or false, got {value!r}")
            return False
        return value

    def path(self, body: Mapping[str, Any], key: str, where: str) -> str:
        value = self.string(body, key, where)
        if value and not os.path.isabs(value):
            value = os.path.join(self.base_dir, value)
        return value

    def pem(self, body: Mapping[str, Any], file_key: str, where: str) -> _Pem | None:
        """``<file_key>`` (a path) or ``<file_key>-data`` (base64), not both."""
        data_key = f"{file_key}-data"
        path = self.path(body, file_key, where)
        encoded = self.string(body, data_key, where)
        if path and encoded:
            self.problem(f"{where}.{data_key}", f"{data_key} and {file_key} are both specified")
            return None
        if encoded:
            try:
                raw = base64.b64decode("".join(encoded.split()), validate=True)
            except (binascii.Error, ValueError):
                self.problem(f"{where}.{data_key}", "invalid base64")
                return None
            return _Pem(raw)
        if path:
            try:
                return _Pem(read_regular_file(path, MAX_KUBECONFIG_BYTES), path)
            except InputRefused as exc:
                self.problem(f"{where}.{file_key}", f"cannot read {path}: {exc}")
            except OSError as exc:
                self.problem(f"{where}.{file_key}", f"cannot read {path}: {exc.strerror or exc}")
        return None

    @staticmethod
    def pem_field(pem: _Pem, file_key: str, where: str) -> str:
        return f"{where}.{file_key}" if pem.path else f"{where}.{file_key}-data"

    # -- the document --

    def build(self) -> ClusterConnection:
        clusters = self.named("clusters", "cluster")
        users = self.named("users", "user")
        contexts = self.named("contexts", "context")
        current = self.string(self.doc, "current-context", "")
        self.check()
        if not current:
            self.problem("current-context", "not set")
            self.check()
        context = contexts.get(current)
        if context is None:
            self.problem("current-context", f"no context named {current!r} in contexts")
            self.check()
        assert context is not None
        where = f"contexts[{context.index}].context"
        cluster_name = self.string(context.body, "cluster", where)
        user_name = self.string(context.body, "user", where)
        namespace = self.string(context.body, "namespace", where)
        cluster = clusters.get(cluster_name) if cluster_name else None
        if not cluster_name:
            self.problem(f"{where}.cluster", "required")
        elif cluster is None:
            self.problem(f"{where}.cluster", f"no cluster named {cluster_name!r} in clusters")
        user: _Entry | None = None
        if user_name:
            user = users.get(user_name)
            if user is None:
                self.problem(f"{where}.user", f"no user named {user_name!r} in users")
        self.check()
        assert cluster is not None
        return self.connection(cluster, user, namespace)

    def connection(self, cluster: _Entry, user: _Entry | None, namespace: str) -> ClusterConnection:
        cw = f"clusters[{cluster.index}].cluster"
        body = cluster.body
        server = self.string(body, "server", cw)
        insecure = self.boolean(body, "insecure-skip-tls-verify", cw)
        tls_server_name = self.string(body, "tls-server-name", cw)
        proxy_url = self.string(body, "proxy-url", cw)
        disable_compression = self.boolean(body, "disable-compression", cw)
        ca = self.pem(body, "certificate-authority", cw)
        if insecure and ca is not None:
            self.problem(
                f"{cw}.insecure-skip-tls-verify",
                "specifying a root certificates file with the insecure flag is not allowed",
            )
        uw = f"users[{user.index}].user" if user else ""
        ubody: Mapping[str, Any] = user.body if user else {}
        impersonate, exec_config = self.user_extras(ubody, uw)
        cert = self.pem(ubody, "client-certificate", uw)
        key = self.pem(ubody, "client-key", uw)
        token = self.string(ubody, "token", uw)
        token_file = self.path(ubody, "tokenFile", uw)
        username = self.string(ubody, "username", uw)
        password = self.string(ubody, "password", uw)
        if (token or token_file) and (username or password):
            self.problem(uw, "more than one authentication method found: token and basic auth")
        if cert is not None and key is None and not self._has(ubody, "client-key"):
            self.problem(f"{uw}.client-key", "required with client-certificate")
        if key is not None and cert is None and not self._has(ubody, "client-certificate"):
            self.problem(f"{uw}.client-certificate", "required with client-key")
        has_tls_config = ca is not None or cert is not None or insecure
        url = self.server_url(server, has_tls_config, f"{cw}.server")
        if proxy_url:
            self.check_url(proxy_url, f"{cw}.proxy-url", ("http", "https", "socks5"))
        token_source: TokenSource | None = None
        if token_file:
            try:
                token_source = TokenSource(token, token_file)
            except ValueError as exc:
                self.problem(f"{uw}.tokenFile", f"cannot read {token_file}: {exc}")
        elif token:
            token_source = TokenSource(token)
        self.check()
        context: ssl.SSLContext | None = None
        cert_files: tuple[str, str] | None = None
        if urlsplit(url).scheme == "https":
            context = self.ssl_context(ca, insecure, cw)
            if cert is not None and key is not None:
                cert_files = self.client_certificate(context, cert, key, uw)
        elif cert is not None or ca is not None:
            log.warning("%s: %s is plain http; the TLS settings are unused", self.source, url)
        self.check()
        exec_auth = None
        if exec_config is not None and not (token_source or username or password or cert):
            exec_auth = self.exec_authenticator(exec_config, body, url, ca, insecure, context)
        return ClusterConnection(
            server=url,
            ssl_context=context,
            tls_server_name=tls_server_name,
            token=token_source,
            basic_auth=(username, password) if username or password else None,
            proxy_url=proxy_url,
            disable_compression=disable_compression,
            namespace=namespace,
            source=self.source,
            client_cert_files=cert_files,
            client_cert_data=_inline_pair(cert, key) if context is not None else None,
            exec_auth=exec_auth,
            impersonate=impersonate,
        )

    def user_extras(
        self, body: Mapping[str, Any], where: str
    ) -> tuple[tuple[tuple[str, str], ...], ExecConfig | None]:
        """Impersonation headers and the exec plugin; an auth-provider is refused as the
        kubelet (which links no auth provider) refuses it."""
        provider = body.get("auth-provider")
        if provider:
            name = provider.get("name", "") if isinstance(provider, Mapping) else ""
            self.problem(f"{where}.auth-provider", f'no Auth Provider found for name "{name}"')
        return self.impersonation(body, where), self.exec_config(body, where)

    def exec_authenticator(
        self,
        config: ExecConfig,
        cluster: Mapping[str, Any],
        url: str,
        ca: _Pem | None,
        insecure: bool,
        context: ssl.SSLContext | None,
    ) -> ExecAuthenticator:
        """The plugin's runner; a certificate it gives is loaded into ``context``."""
        info = self.exec_cluster(cluster, url, ca, insecure, "")
        auth = ExecAuthenticator(attrs.evolve(config, cluster=info))
        if context is not None:
            auth.certificate_listeners.append(
                lambda cert, key: _load_cert_chain_from_data(context, cert, key)
            )
        return auth

    def user_name(self, where: str) -> str:
        """The name of the user at ``users[i].user`` (upstream's messages use it)."""
        try:
            index = int(where.split("[", 1)[1].split("]", 1)[0])
            return str(self.doc["users"][index]["name"])
        except (IndexError, KeyError, ValueError, TypeError):
            return where

    def exec_config(self, body: Mapping[str, Any], where: str) -> ExecConfig | None:
        """``user.exec`` checked as clientcmd's validation does, messages and all."""
        raw = body.get("exec")
        if raw is None:
            return None
        ew = f"{where}.exec"
        if not isinstance(raw, Mapping):
            self.problem(ew, "expected an object")
            return None
        user = self.user_name(where)
        command = self.string(raw, "command", ew)
        api_version = self.string(raw, "apiVersion", ew)
        if not command:
            self.problem(
                f"{ew}.command",
                f"command must be specified for {user} to use exec authentication plugin",
            )
        if not api_version:
            self.problem(
                f"{ew}.apiVersion",
                f"apiVersion must be specified for {user} to use exec authentication plugin",
            )
        elif api_version not in EXEC_API_VERSIONS:
            self.problem(f"{ew}.apiVersion", f"exec plugin: invalid apiVersion {api_version!r}")
        mode = self.string(raw, "interactiveMode", ew)
        if not mode and api_version != EXEC_API_VERSIONS[0]:
            mode = "IfAvailable"  # v1beta1's default
        if not mode:
            self.problem(
                f"{ew}.interactiveMode",
                f"interactiveMode must be specified for {user} to use exec authentication plugin",
            )
        elif mode not in INTERACTIVE_MODES:
            self.problem(f"{ew}.interactiveMode", f"invalid interactiveMode for {user}: {mode!r}")
        args = raw.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            self.problem(f"{ew}.args", "expected a list of strings")
            args = []
        env: list[tuple[str, str]] = []
        for i, entry in enumerate(raw.get("env") or []):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if not name or not isinstance(name, str):
                self.problem(
                    f"{ew}.env[{i}].name",
                    f"env variable name must be specified for {user} "
                    "to use exec authentication plugin",
                )
                continue
            env.append((name, self.string(entry, "value", f"{ew}.env[{i}]")))
        if os.sep in command and not os.path.isabs(command):
            command = os.path.join(self.base_dir, command)  # bare names are looked up on PATH
        return ExecConfig(
            command=command,
            api_version=api_version,
            args=tuple(args),
            env=tuple(env),
            interactive_mode=mode,
            provide_cluster_info=self.boolean(raw, "provideClusterInfo", ew),
            install_hint=self.string(raw, "installHint", ew),
        )

    def exec_cluster(
        self, body: Mapping[str, Any], url: str, ca: _Pem | None, insecure: bool, where: str
    ) -> dict[str, Any]:
        config = None
        extensions = body.get("extensions")
        if isinstance(extensions, list):
            for entry in extensions:
                if isinstance(entry, Mapping) and entry.get("name") == CLUSTER_CONFIG_EXTENSION:
                    config = entry.get("extension")
        return cluster_info(
            url,
            tls_server_name=self.string(body, "tls-server-name", where),
            insecure=insecure,
            ca_data=ca.data if ca is not None else None,
            proxy_url=self.string(body, "proxy-url", where),
            disable_compression=self.boolean(body, "disable-compression", where),
            config=config,
        )

    def impersonation(self, body: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        """The ``Impersonate-*`` headers of ``as``, ``as-uid``, ``as-groups``,
        ``as-user-extra`` (client-go's impersonating round tripper)."""
        user = self.string(body, "as", where)
        uid = self.string(body, "as-uid", where)
        groups = body.get("as-groups") or []
        extra = body.get("as-user-extra") or {}
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            self.problem(f"{where}.as-groups", "expected a list of strings")
            groups = []
        if not isinstance(extra, Mapping) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()
        ):
            self.problem(f"{where}.as-user-extra", "expected a map of string lists")
            extra = {}
        if (uid or groups or extra) and not user:
            self.problem(
                where,
                f"requesting uid, groups or user-extra for {self.user_name(where)} "
                "without impersonating a user",
            )
        if not user:
            return ()
        headers = [("Impersonate-User", user)]
        if uid:
            headers.append(("Impersonate-Uid", uid))
        headers += [("Impersonate-Group", g) for g in groups]
        for key in sorted(extra):
            headers += [(f"Impersonate-Extra-{quote(str(key), safe='')}", v) for v in extra[key]]
        return tuple(headers)

    @staticmethod
    def _has(body: Mapping[str, Any], key: str) -> bool:
        return bool(body.get(key) or body.get(f"{key}-data"))

    def check_url(self, url: str, field: str, schemes: tuple[str, ...]) -> bool:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError as exc:
            self.problem(field, f"invalid URL {url!r}: {exc}")
            return False
        if parts.scheme not in schemes or not parts.hostname:
            self.problem(field, f"invalid URL {url!r}: expected {' or '.join(schemes)}://host")
            return False
        return True

    def server_url(self, server: str, has_tls_config: bool, field: str) -> str:
        """clientcmd's DefaultServerURL: a bare ``host:port`` gets https when any TLS
        setting is present, else http."""
        if not server:
            self.problem(field, "required (no server found for the cluster)")
            return ""
        url = server
        if "://" not in server:
            url = ("https://" if has_tls_config else "http://") + server
        if not self.check_url(url, field, ("http", "https")):
            return ""
        return url.rstrip("/")

    def ssl_context(self, ca: _Pem | None, insecure: bool, where: str) -> ssl.SSLContext:
        if insecure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        if ca is None:
            return ssl.create_default_context()
        from cryptography import x509  # a kubeconfig with TLS: cluster mode only

        field = self.pem_field(ca, "certificate-authority", where)
        try:
            x509.load_pem_x509_certificates(ca.data)
        except ValueError:
            self.problem(field, "no PEM certificate found")
            return ssl.create_default_context()
        try:
            if ca.path:
                return ssl.create_default_context(cafile=ca.path)
            return ssl.create_default_context(cadata=ca.data.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            self.problem(field, f"cannot use the CA certificates: {exc.reason or exc}")
            return ssl.create_default_context()

    def client_certificate(
        self, context: ssl.SSLContext, cert: _Pem, key: _Pem, where: str
    ) -> tuple[str, str] | None:
        from cryptography import x509
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization

        cert_field = self.pem_field(cert, "client-certificate", where)
        key_field = self.pem_field(key, "client-key", where)
        try:
            leaf = x509.load_pem_x509_certificates(cert.data)[0]
        except ValueError:
            self.problem(cert_field, "no PEM certificate found")
            return None
        try:
            private = serialization.load_pem_private_key(key.data, password=None)
        except TypeError:
            self.problem(key_field, "the private key is encrypted")
            return None
        except (ValueError, UnsupportedAlgorithm):
            self.problem(key_field, "no valid PEM private key found")
            return None
        spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if private.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
            self.problem(key_field, "the private key does not match the client certificate")
            return None
        try:
            if cert.path and key.path:
                context.load_cert_chain(cert.path, key.path)
                return cert.path, key.path
            _load_cert_chain_from_data(context, cert.data, key.data)
        except ssl.SSLError as exc:
            self.problem(key_field, f"cannot use the client certificate: {exc.reason or exc}")
        return None


def _inline_pair(cert: _Pem | None, key: _Pem | None) -> tuple[bytes, bytes] | None:
    """Certificate and key when both are embedded in the kubeconfig (not files)."""
    if cert is None or key is None or cert.path or key.path:
        return None
    return cert.data, key.data


def _load_cert_chain_from_data(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads certificates only from files: write them to a private directory (0700,
    files 0600) just long enough to load them."""
    with tempfile.TemporaryDirectory(prefix="kubelet-tls-") as tmp:
        paths = []
        for name, data in (("client.crt", cert), ("client.key", key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])
