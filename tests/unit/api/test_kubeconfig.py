"""Kubeconfig → ClusterConnection: the variants a kubelet meets, and every error message."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import ssl
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubelet.api import KubeconfigError, load_kubeconfig
from kubelet.api.kubeconfig import TokenSource, parse_kubeconfig

# -- certificates (also used by test_api_client for real TLS handshakes) -------------


@attrs.frozen
class Issued:
    cert: bytes
    key: bytes
    obj: x509.Certificate
    private: ec.EllipticCurvePrivateKey


def issue(
    cn: str,
    *,
    ca: Issued | None = None,
    is_ca: bool = False,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    client: bool = False,
) -> Issued:
    """A P-256 certificate for ``cn`` signed by ``ca`` (self-signed without one)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.obj.subject if ca else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(ca.private if ca else key, hashes.SHA256())
    return Issued(
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        obj=cert,
        private=key,
    )


@pytest.fixture(scope="module")
def pki() -> dict[str, Issued]:
    ca = issue("kubernetes", is_ca=True)
    return {
        "ca": ca,
        "server": issue("kube-apiserver", ca=ca, dns=("localhost",), ips=("127.0.0.1",)),
        "client": issue("system:node:node1", ca=ca, client=True),
        "other": issue("someone-else", ca=ca, client=True),
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """A one-cluster, one-user, one-context kubeconfig like kubeadm writes."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "default-cluster", "cluster": cluster or {"server": "https://10.0.0.1:6443"}}
        ],
        "users": [{"name": "default-auth", "user": user or {}}],
        "contexts": [
            {
                "name": "default-context",
                "context": {
                    "cluster": "default-cluster",
                    "user": "default-auth",
                    "namespace": "default",
                },
            }
        ],
        "current-context": "default-context",
        "preferences": {},
    }
    doc.update(top)
    return doc


SOURCE = "/etc/kubernetes/kubelet.conf"


def parse(doc: dict[str, Any], base_dir: str = "/nonexistent") -> Any:
    return parse_kubeconfig(yaml.safe_dump(doc), SOURCE, base_dir=base_dir)


def problems(doc: dict[str, Any] | str, base_dir: str = "/nonexistent") -> list[str]:
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
    with pytest.raises(KubeconfigError) as info:
        parse_kubeconfig(text, SOURCE, base_dir=base_dir)
    return str(info.value).splitlines()


# -- good configurations -----------------------------------------------------------------


def test_kubeadm_style_with_embedded_certificates(pki: dict[str, Issued]) -> None:
    conn = parse(
        kubeconfig(
            {
                "server": "https://10.0.0.1:6443/",
                "certificate-authority-data": b64(pki["ca"].cert),
            },
            {
                "client-certificate-data": b64(pki["client"].cert),
                "client-key-data": b64(pki["client"].key),
            },
        )
    )
    assert conn.server == "https://10.0.0.1:6443"
    assert conn.source == SOURCE
    assert conn.namespace == "default"
    assert conn.authorization() is None
    ctx = conn.ssl_context
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode is ssl.CERT_REQUIRED and ctx.check_hostname
    subjects = [dict(x[0] for x in c["subject"]) for c in ctx.get_ca_certs()]
    assert subjects == [{"commonName": "kubernetes"}]
    assert conn.client_cert_files is None  # loaded from data via a temporary directory
    # the client certificate manager's first pair; never in a repr (logs)
    assert conn.client_cert_data == (pki["client"].cert, pki["client"].key)
    assert "PRIVATE" not in repr(conn)


def test_relative_paths_resolve_against_the_kubeconfig_directory(
    tmp_path: Path, pki: dict[str, Issued]
) -> None:
    pki_dir = tmp_path / "pki"
    pki_dir.mkdir()
    (pki_dir / "ca.crt").write_bytes(pki["ca"].cert)
    # kubelet-client-current.pem holds both the certificate and the key.
    (pki_dir / "client.pem").write_bytes(pki["client"].cert + pki["client"].key)
    (tmp_path / "token").write_text("file-token\n")
    path = tmp_path / "kubelet.conf"
    path.write_text(
        yaml.safe_dump(
            kubeconfig(
                {"server": "https://10.0.0.1:6443", "certificate-authority": "pki/ca.crt"},
                {
                    "client-certificate": "pki/client.pem",
                    "client-key": "pki/client.pem",
                    "tokenFile": "token",
                },
            )
        )
    )
    conn = load_kubeconfig(path)
    client = str(pki_dir / "client.pem")
    assert conn.client_cert_files == (client, client)
    assert conn.client_cert_data is None  # files: the store finds them itself
    assert conn.authorization() == "Bearer file-token"
    assert conn.token is not None and conn.token.path == str(tmp_path / "token")
    conn.reload_client_certificate()  # a rotated certificate loads again


def test_token_and_cluster_options() -> None:
    conn = parse(
        kubeconfig(
            {
                "server": "https://api.example:443/k8s/clusters/c-1",
                "tls-server-name": "kubernetes.default.svc",
                "proxy-url": "http://proxy.example:3128",
                "disable-compression": True,
            },
            {"token": "abc.def"},
        )
    )
    assert conn.server == "https://api.example:443/k8s/clusters/c-1"
    assert conn.tls_server_name == "kubernetes.default.svc"
    assert conn.proxy_url == "http://proxy.example:3128"
    assert conn.disable_compression
    assert conn.authorization() == "Bearer abc.def"
    ctx = conn.ssl_context
    assert ctx is not None and ctx.verify_mode is ssl.CERT_REQUIRED  # system trust store


def test_basic_auth() -> None:
    conn = parse(kubeconfig(user={"username": "admin", "password": "s3cret"}))
    assert conn.authorization() == "Basic " + b64(b"admin:s3cret")


def test_insecure_skip_tls_verify_turns_verification_off() -> None:
    conn = parse(kubeconfig({"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}))
    ctx = conn.ssl_context
    assert ctx is not None
    assert ctx.verify_mode is ssl.CERT_NONE and not ctx.check_hostname


def test_plain_http_has_no_tls_context() -> None:
    conn = parse(kubeconfig({"server": "http://127.0.0.1:8080"}))
    assert conn.server == "http://127.0.0.1:8080"
    assert conn.ssl_context is None


def test_server_without_scheme_is_https_only_with_tls_settings(pki: dict[str, Issued]) -> None:
    assert parse(kubeconfig({"server": "10.0.0.1:8080"})).server == "http://10.0.0.1:8080"
    conn = parse(
        kubeconfig({"server": "10.0.0.1:6443", "certificate-authority-data": b64(pki["ca"].cert)})
    )
    assert conn.server == "https://10.0.0.1:6443"


def test_context_without_user_is_anonymous() -> None:
    doc = kubeconfig()
    del doc["contexts"][0]["context"]["user"]
    assert parse(doc).authorization() is None


def test_picks_the_current_context_among_several(pki: dict[str, Issued]) -> None:
    doc = kubeconfig()
    doc["clusters"].append({"name": "other", "cluster": {"server": "https://other:6443"}})
    doc["users"].append({"name": "u2", "user": {"token": "t2"}})
    doc["contexts"].append({"name": "ctx2", "context": {"cluster": "other", "user": "u2"}})
    doc["current-context"] = "ctx2"
    conn = parse(doc)
    assert conn.server == "https://other:6443"
    assert conn.authorization() == "Bearer t2"


def test_unused_entries_are_not_checked() -> None:
    doc = kubeconfig(user={"token": "t"})
    doc["users"].append({"name": "admin", "user": {"exec": {"command": "aws"}}})
    assert parse(doc).authorization() == "Bearer t"


# -- token files -------------------------------------------------------------------------


def test_token_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    source = TokenSource(path=str(path))
    assert source.token() == "one"
    path.write_text("two-longer\n")
    assert source.token() == "two-longer"
    # Replaced atomically (rename, as the kubelet's projected volumes do).
    new = tmp_path / "token.new"
    new.write_text("three")
    os.replace(new, path)
    assert source.token() == "three"


def test_token_file_failures_keep_the_last_good_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    path.write_text("good")
    source = TokenSource("static", str(path))
    assert source.token() == "good"  # the file wins over the static token
    path.write_text("   \n")
    assert source.token() == "good"
    path.unlink()
    assert source.token() == "good"
    assert "read empty token" in caplog.text and "No such file" in caplog.text
    path.write_text("fresh")
    assert source.token() == "fresh"


def test_reset_forces_a_reread(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("aaaa")
    source = TokenSource(path=str(path))
    assert source.token() == "aaaa"
    st = path.stat()
    path.write_text("bbbb")  # same size; restore the mtime so the stat looks unchanged
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source.token() == "aaaa"
    source.reset()
    assert source.token() == "bbbb"


# -- errors: each names the file and the field ------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError) as info:
        load_kubeconfig(tmp_path / "nope.conf")
    assert str(info.value) == (
        f"{tmp_path / 'nope.conf'}: cannot read the kubeconfig: No such file or directory"
    )


def test_invalid_base64_message_names_file_and_field(pki: dict[str, Issued]) -> None:
    doc = kubeconfig(
        user={"client-certificate-data": b64(pki["client"].cert), "client-key-data": "%%%"}
    )
    assert problems(doc) == [
        "/etc/kubernetes/kubelet.conf: users[0].user.client-key-data: invalid base64"
    ]


def _without(doc: dict[str, Any], *path: str | int) -> dict[str, Any]:
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("", ": the kubeconfig is empty"),
        ("- a\n- b\n", ": expected a kubeconfig (kind: Config) object"),
        ("clusters: [\n", ": not valid YAML"),
        (_without(kubeconfig(), "current-context"), ": current-context: not set"),
        (
            kubeconfig(**{"current-context": "nope"}),
            ": current-context: no context named 'nope' in contexts",
        ),
        (
            _without(kubeconfig(), "contexts", 0, "context", "cluster"),
            ": contexts[0].context.cluster: required",
        ),
        (
            kubeconfig(contexts=[{"name": "default-context", "context": {"cluster": "x"}}]),
            ": contexts[0].context.cluster: no cluster named 'x' in clusters",
        ),
        (
            kubeconfig(
                contexts=[
                    {
                        "name": "default-context",
                        "context": {"cluster": "default-cluster", "user": "ghost"},
                    }
                ]
            ),
            ": contexts[0].context.user: no user named 'ghost' in users",
        ),
        (kubeconfig(clusters={"a": 1}), ": clusters: expected a list"),
        (
            kubeconfig(users=[{"user": {}}]),
            ": users[0].name: required",
        ),
        (
            kubeconfig(
                clusters=[
                    {"name": "default-cluster", "cluster": {"server": "https://a"}},
                    {"name": "default-cluster", "cluster": {"server": "https://b"}},
                ]
            ),
            ": clusters[1].name: duplicate name 'default-cluster'",
        ),
        (
            kubeconfig({"insecure-skip-tls-verify": True}),
            ": clusters[0].cluster.server: required (no server found for the cluster)",
        ),
        (
            kubeconfig({"server": "ftp://10.0.0.1"}),
            ": clusters[0].cluster.server: invalid URL 'ftp://10.0.0.1': expected http or "
            "https://host",
        ),
        (
            kubeconfig({"server": "https://10.0.0.1:99999"}),
            ": clusters[0].cluster.server: invalid URL 'https://10.0.0.1:99999': Port out of "
            "range 0-65535",
        ),
        (
            kubeconfig({"server": "https://a", "insecure-skip-tls-verify": "maybe"}),
            ": clusters[0].cluster.insecure-skip-tls-verify: expected true or false, got 'maybe'",
        ),
        (
            kubeconfig(
                {
                    "server": "https://a",
                    "insecure-skip-tls-verify": True,
                    "certificate-authority-data": b64(b"x"),
                }
            ),
            ": clusters[0].cluster.insecure-skip-tls-verify: specifying a root certificates "
            "file with the insecure flag is not allowed",
        ),
        (
            kubeconfig({"server": "https://a", "certificate-authority-data": b64(b"not pem")}),
            ": clusters[0].cluster.certificate-authority-data: no PEM certificate found",
        ),
        (
            kubeconfig({"server": "https://a", "certificate-authority": "ca.crt"}),
            ": clusters[0].cluster.certificate-authority: cannot read /nonexistent/ca.crt: "
            "No such file or directory",
        ),
        (
            kubeconfig(user={"exec": {"command": "aws", "apiVersion": "x"}}),
            ": users[0].user.exec.apiVersion: exec plugin: invalid apiVersion 'x'",
        ),
        (
            kubeconfig(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}),
            ": users[0].user.exec.command: command must be specified for default-auth to use "
            "exec authentication plugin",
        ),
        (
            kubeconfig(user={"exec": {"command": "aws", "interactiveMode": "Never"}}),
            ": users[0].user.exec.apiVersion: apiVersion must be specified for default-auth to "
            "use exec authentication plugin",
        ),
        (
            kubeconfig(
                user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}
            ),
            ": users[0].user.exec.interactiveMode: interactiveMode must be specified for "
            "default-auth to use exec authentication plugin",
        ),
        (
            kubeconfig(
                user={
                    "exec": {
                        "command": "aws",
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "interactiveMode": "Sometimes",
                    }
                }
            ),
            ": users[0].user.exec.interactiveMode: invalid interactiveMode for default-auth: "
            "'Sometimes'",
        ),
        (
            kubeconfig(
                user={
                    "exec": {
                        "command": "aws",
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "env": [{"value": "x"}],
                    }
                }
            ),
            ": users[0].user.exec.env[0].name: env variable name must be specified for "
            "default-auth to use exec authentication plugin",
        ),
        (
            kubeconfig(user={"auth-provider": {"name": "gcp"}}),
            ': users[0].user.auth-provider: no Auth Provider found for name "gcp"',
        ),
        (
            kubeconfig(user={"as-groups": ["admins"]}),
            ": users[0].user: requesting uid, groups or user-extra for default-auth without "
            "impersonating a user",
        ),
        (
            kubeconfig(user={"token": "t", "username": "u", "password": "p"}),
            ": users[0].user: more than one authentication method found: token and basic auth",
        ),
        (
            kubeconfig(user={"tokenFile": "missing-token"}),
            ": users[0].user.tokenFile: cannot read /nonexistent/missing-token: No such file "
            "or directory",
        ),
        (
            kubeconfig(user={"client-certificate": "a.crt", "client-certificate-data": "eA=="}),
            ": users[0].user.client-certificate-data: client-certificate-data and "
            "client-certificate are both specified",
        ),
        (
            kubeconfig(user={"token": ["a"]}),
            ": users[0].user.token: expected a string, got list",
        ),
    ],
)
def test_problem_messages(doc: dict[str, Any] | str, expected: str) -> None:
    found = problems(doc)
    assert any(line.startswith(SOURCE + expected) for line in found), found


def test_certificate_problems(pki: dict[str, Issued]) -> None:
    cert, key = b64(pki["client"].cert), b64(pki["client"].key)
    server = {"server": "https://a"}
    cases = {
        "users[0].user.client-key: required with client-certificate": {
            "client-certificate-data": cert
        },
        "users[0].user.client-certificate: required with client-key": {"client-key-data": key},
        "users[0].user.client-certificate-data: no PEM certificate found": {
            "client-certificate-data": key,
            "client-key-data": key,
        },
        "users[0].user.client-key-data: no valid PEM private key found": {
            "client-certificate-data": cert,
            "client-key-data": cert,
        },
        "users[0].user.client-key-data: the private key does not match the client certificate": {
            "client-certificate-data": cert,
            "client-key-data": b64(pki["other"].key),
        },
    }
    for expected, user in cases.items():
        assert problems(kubeconfig(server, user)) == [f"{SOURCE}: {expected}"]


def test_encrypted_private_key_is_refused(pki: dict[str, Issued]) -> None:
    encrypted = pki["client"].private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    user = {"client-certificate-data": b64(pki["client"].cert), "client-key-data": b64(encrypted)}
    assert problems(kubeconfig({"server": "https://a"}, user)) == [
        f"{SOURCE}: users[0].user.client-key-data: the private key is encrypted"
    ]


def test_all_problems_are_reported_at_once() -> None:
    doc = kubeconfig(
        {"insecure-skip-tls-verify": "maybe"},
        {"exec": {"command": "x"}, "client-key-data": "%%%"},
    )
    found = problems(doc)
    assert [line.split(": ")[1] for line in found] == [
        "clusters[0].cluster.insecure-skip-tls-verify",
        "users[0].user.exec.apiVersion",
        "users[0].user.client-key-data",
        "clusters[0].cluster.server",
    ]


def test_error_is_a_config_error_for_start_up() -> None:
    from kubelet.config import ConfigError

    with pytest.raises(ConfigError):
        parse_kubeconfig("", SOURCE)


# -- outside data with a bound ----------------------------------------------------------------

KUBECONFIG_ALIAS_BOMB = "preferences:\n" + "".join(
    f"  p{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else 'v'}]\n" for i in range(12)
)
"""Twelve entries of nine aliases each: 9^11 values from a kilobyte."""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (KUBECONFIG_ALIAS_BOMB, "YAML aliases expand this to more than 100000 nodes (line "),
        ("a: &a [*a]\n", "a YAML alias refers to itself"),
        ("a: " + "[" * 150 + "]" * 150, "the document is nested too deeply (more than 100"),
        ("[" * 100_000 + "]" * 100_000, "not valid YAML"),
    ],
)
def test_a_kubeconfig_past_the_bounds_is_refused(text: str, expected: str) -> None:
    problem = "\n".join(problems(text))
    assert problem.startswith(f"{SOURCE}: ") and expected in problem, problem


def test_files_that_are_no_regular_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(KubeconfigError) as info:
        load_kubeconfig(fifo)
    assert str(info.value) == f"{fifo}: cannot read the kubeconfig: {fifo}: not a regular file"
    with pytest.raises(ValueError, match="not a regular file"):
        TokenSource(path=str(fifo))
    doc = kubeconfig(user={"client-certificate": str(fifo), "client-key": str(fifo)})
    assert any(f"cannot read {fifo}: {fifo}: not a regular file" in p for p in problems(doc))
