"""The keyring, docker config parsing and redaction, against upstream's own vectors.

Vectors restated from pkg/credentialprovider/keyring_test.go and config_test.go
(Kubernetes 1.36) as input → expected output.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from kubelet.cri import api
from kubelet.runtime.credentials import (
    DockerConfigEntry,
    DockerConfigError,
    Keyring,
    MalformedPullSecret,
    NodeCredentials,
    PullCredential,
    PullSecret,
    keyring_from_secrets,
    parse_dockercfg,
    parse_dockerconfigjson,
    pull_secret_names,
    redact,
    repository_of,
    urls_match,
)
from kubelet.runtime.credentials.keyring import index_key, is_default_registry_match
from kubelet.runtime.credentials.node import search_paths
from kubelet.runtime.credentials.secrets import credential_hash


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- URL matching (TestUrlsMatch) -----------------------------------------------------

URL_MATCHES = [
    # no path
    ("*.kubernetes.io", "prefix.kubernetes.io", True),
    ("prefix.*.io", "prefix.kubernetes.io", True),
    ("prefix.kubernetes.*", "prefix.kubernetes.io", True),
    ("*-good.kubernetes.io", "prefix-good.kubernetes.io", True),
    # paths: the key's path is a prefix of the image's
    ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", True),
    ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", True),
    # paths and ports
    ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", True),
    ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", True),
    # a glob matches one label, never several or none
    ("*.kubernetes.io", "kubernetes.io", False),
    ("*.*.kubernetes.io", "prefix.kubernetes.io", False),
    ("*.*.kubernetes.io", "kubernetes.io", False),
    # a label differs
    ("kubernetes.io", "kubernetes.com", False),
    ("k*.io", "quay.io", False),
    # ports must be equal, and "none" is not "any"
    ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", False),
    ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", False),
    ("prefix.kubernetes.io:1111", "prefix.kubernetes.io/foo", False),
    # Go filepath.Match classes work; a bad pattern matches nothing
    ("reg[a-c].example.com", "regb.example.com", True),
    ("reg[a-c].example.com", "regd.example.com", False),
    ("reg[c-a].example.com", "regb.example.com", False),
    ("reg[.example.com", "reg[.example.com", False),
    # but the key is a URL first, as upstream parses it: "?" starts a query, and "^"
    # or "\\" are not host characters, so such keys never match
    ("registry-?.example.com", "registry-1.example.com", False),
    ("reg[^a-c].example.com", "regd.example.com", False),
    ("reg\\-x.example.com", "reg-x.example.com", False),
    # the path prefix is a string prefix, as upstream (so /foo covers /foobar)
    ("quay.io/foo", "quay.io/foobar/baz", True),
    ("quay.io/foo/", "quay.io/foo", False),
]


@pytest.mark.parametrize(("glob", "target", "expected"), URL_MATCHES)
def test_urls_match(glob: str, target: str, expected: bool) -> None:
    assert urls_match(glob, target) is expected


# -- index keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "key"),
    [
        ("https://index.docker.io/v1/", "index.docker.io"),
        ("index.docker.io", "index.docker.io"),
        ("http://registry.example.com", "registry.example.com"),
        ("https://registry.example.com/", "registry.example.com"),
        ("https://registry.example.com/v2/team", "registry.example.com/team"),
        ("registry.example.com/v1/team/", "registry.example.com/team/"),
        ("registry.example.com:5000/team", "registry.example.com:5000/team"),
        ("https://user@registry.example.com/x", "registry.example.com/x"),
        ("registry.example.com:port", None),  # Go: invalid port after host
        ("registry example.com", None),  # Go: invalid character in host name
        ("registry.example.com/%zz", None),  # Go: invalid URL escape
    ],
)
def test_index_key(location: str, key: str | None) -> None:
    assert index_key(location) == key


def test_a_key_that_is_not_a_url_is_skipped_with_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keyring: Keyring[str] = Keyring()
    keyring.add([("https://user:pw@bad host", "x"), ("good.example.com", "y")])
    assert keyring.lookup("good.example.com/app") == ["y"]
    assert len(keyring) == 1
    (record,) = [r for r in caplog.records if "not a valid registry URL" in r.getMessage()]
    assert "pw" not in record.getMessage()


# -- keyring lookups ------------------------------------------------------------------

KEYRING_HITS = [
    # (TestDockerKeyringForGlob) the key as written → the host the lookup uses
    ("https://hello.kubernetes.io", "hello.kubernetes.io"),
    ("https://*.docker.io", "prefix.docker.io"),
    ("https://prefix.*.io", "prefix.docker.io"),
    ("https://prefix.docker.*", "prefix.docker.io"),
    ("https://*.docker.io/path", "prefix.docker.io/path"),
    ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
    ("https://prefix.docker.*/path", "prefix.docker.io/path"),
    ("https://*.docker.io:8888", "prefix.docker.io:8888"),
    ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
    ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
    ("https://*.docker.io/path:1111", "prefix.docker.io/path:1111"),
    ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
    ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
    ("https://prefix.docker.*/path:1111", "prefix.docker.io/path:1111"),
    ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
    ("*.docker.io:1111", "prefix.docker.io:1111/path"),
]

KEYRING_MISSES = [
    # (TestKeyringMiss)
    ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
    ("https://*.docker.com", "prefix.docker.io"),
    ("https://suffix.*.io", "prefix.docker.io"),
    ("https://prefix.docker.c*", "prefix.docker.io"),
    ("https://prefix.*.io/path:1111", "prefix.docker.io/path/subpath:1111"),
    ("suffix.*.io", "prefix.docker.io"),
]


def config_with(location: str, user: str = "foo", password: str = "bar") -> bytes:
    entry = {"email": "foo@bar.baz", "auth": b64(f"{user}:{password}")}
    return json.dumps({location: entry}).encode()


@pytest.mark.parametrize(("location", "target"), KEYRING_HITS)
def test_keyring_finds_the_credential(location: str, target: str) -> None:
    keyring: Keyring[DockerConfigEntry] = Keyring()
    keyring.add(parse_dockercfg(config_with(location)))
    (found,) = keyring.lookup(target + "/foo/bar")
    assert (found.username, found.password, found.email) == ("foo", "bar", "foo@bar.baz")


@pytest.mark.parametrize(("location", "target"), KEYRING_MISSES)
def test_keyring_misses(location: str, target: str) -> None:
    keyring: Keyring[DockerConfigEntry] = Keyring()
    keyring.add(parse_dockercfg(config_with(location)))
    assert keyring.lookup(target + "/foo/bar") == []


def test_most_specific_key_first_then_the_host() -> None:
    """(TestDockerKeyringLookup) every matching key contributes, longest path first."""
    keyring: Keyring[str] = Keyring()
    keyring.add([("bar.example.com/pong", "grace"), ("bar.example.com", "ada")])
    assert keyring.lookup("bar.example.com") == ["ada"]
    assert keyring.lookup("bar.example.com/pong") == ["grace", "ada"]
    assert keyring.lookup("bar.example.com/ping") == ["ada"]
    assert keyring.lookup("bar.example.com/pongz") == ["grace", "ada"]  # string prefix
    assert keyring.lookup("bar.example.com/pong/pang") == ["grace", "ada"]
    assert keyring.lookup("example.com") == []
    assert keyring.lookup("foo.example.com") == []


def test_scheme_and_v1_path_match_the_bare_host() -> None:
    """(TestIssue3797)"""
    keyring: Keyring[str] = Keyring()
    keyring.add([("https://quay.io/v1/", "rex")])
    for image in ("quay.io", "quay.io/foo", "quay.io/foo/bar"):
        assert keyring.lookup(image) == ["rex"]


def test_same_key_in_several_secrets_keeps_every_credential_in_order() -> None:
    keyring: Keyring[str] = Keyring()
    keyring.add([("registry.example.com", "first")])
    keyring.add([("https://registry.example.com/", "second"), ("*.example.com", "glob")])
    assert keyring.lookup("registry.example.com/app") == ["first", "second", "glob"]


# -- Docker Hub ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("foo/bar", True),
        ("docker.io/foo/bar", True),
        ("index.docker.io/foo/bar", True),
        ("foo", True),
        ("", False),
        ("registry.tld/foo/bar", False),
        ("registry:5000/foo/bar", False),
        ("myhostdocker.io/foo/bar", False),
    ],
)
def test_is_default_registry_match(image: str, expected: bool) -> None:
    assert is_default_registry_match(image) is expected


def test_docker_login_key_serves_docker_hub_images() -> None:
    """``docker login`` writes https://index.docker.io/v1/; upstream's fallback applies
    it to Docker Hub images when no key matches them directly."""
    keyring: Keyring[str] = Keyring()
    keyring.add([("https://index.docker.io/v1/", "hub")])
    assert keyring.lookup("world.mesos.org/foo/bar") == []
    assert keyring.lookup("google/docker-registry") == ["hub"]
    assert keyring.lookup("jenkins") == ["hub"]
    assert keyring.lookup("index.docker.io/v1//google/docker-registry") == ["hub"]
    assert keyring.lookup(repository_of("busybox:1.35")) == ["hub"]
    assert keyring.lookup(repository_of("index.docker.io/team/app")) == ["hub"]


def test_docker_io_key_matches_directly_and_registry_1_does_not() -> None:
    keyring: Keyring[str] = Keyring()
    keyring.add([("docker.io", "io"), ("registry-1.docker.io", "registry-1")])
    assert keyring.lookup(repository_of("busybox")) == ["io"]
    only_registry_1: Keyring[str] = Keyring()
    only_registry_1.add([("registry-1.docker.io", "registry-1")])
    # upstream has no alias for registry-1.docker.io: Docker Hub images do not match it
    assert only_registry_1.lookup(repository_of("busybox")) == []


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("busybox", "docker.io/library/busybox"),
        ("busybox:1.35", "docker.io/library/busybox"),
        ("team/app@sha256:" + "a" * 64, "docker.io/team/app"),
        ("index.docker.io/busybox", "docker.io/library/busybox"),
        ("registry.example.com:5000/team/app:1", "registry.example.com:5000/team/app"),
        ("localhost/app", "localhost/app"),
    ],
)
def test_repository_of(image: str, repository: str) -> None:
    assert repository_of(image) == repository


# -- docker config files (config_test.go) ---------------------------------------------


def test_dockerconfigjson_entries() -> None:
    doc = {
        "auths": {
            "http://foo.example.com": {"username": "foo", "password": "bar", "email": "f@e"},
            "http://bar.example.com": {"username": "bar", "password": "baz", "email": "b@e"},
        }
    }
    assert parse_dockerconfigjson(json.dumps(doc).encode()) == [
        ("http://foo.example.com", DockerConfigEntry("foo", "bar", "f@e")),
        ("http://bar.example.com", DockerConfigEntry("bar", "baz", "b@e")),
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"username": "foo", "password": "bar", "email": "f@e"}, ("foo", "bar", "f@e")),
        ({"auth": "Zm9vOmJhcg==", "email": "f@e"}, ("foo", "bar", "f@e")),
        # auth wins over username/password
        ({"username": "foo", "password": "bar", "auth": "cGluZzpwb25n"}, ("ping", "pong", "")),
        # unpadded base64 and a password holding colons
        ({"auth": "Zm9vOmJhcg"}, ("foo", "bar", "")),
        ({"auth": b64("user:pa:ss")}, ("user", "pa:ss", "")),
        # Go's decoder matches field names case-insensitively, the last one winning
        ({"Username": "a", "PASSWORD": "b", "username": "c"}, ("c", "b", "")),
        # null leaves a field empty; unknown fields (identitytoken...) are ignored
        ({"username": None, "password": "p", "identitytoken": "t"}, ("", "p", "")),
    ],
)
def test_dockercfg_entry(entry: dict[str, object], expected: tuple[str, str, str]) -> None:
    ((key, parsed),) = parse_dockercfg(json.dumps({"r.example": entry}).encode())
    assert key == "r.example"
    assert (parsed.username, parsed.password, parsed.email) == expected


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"r.example": {"auth": "pants"}}, "auth is not valid base64"),
        ({"r.example": {"auth": b64("pants")}}, "must be formatted as base64(username:password)"),
        ({"r.example": {"email": False}}, "email: expected a string, got a boolean"),
        ({"r.example": "robot:pw"}, "expected a JSON object, got a string"),
        (["r.example"], "expected a JSON object, got an array"),
    ],
)
def test_malformed_dockercfg(doc: object, problem: str) -> None:
    with pytest.raises(DockerConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_dockercfg(json.dumps(doc).encode())


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object, got an array"),
        (b'{"auths": []}', "auths: expected a JSON object"),
        (b'{"auths": {}, "HttpHeaders": []}', "HttpHeaders: expected an object of strings"),
    ],
)
def test_malformed_dockerconfigjson(data: bytes, problem: str) -> None:
    with pytest.raises(DockerConfigError, match=problem):
        parse_dockerconfigjson(data)


def test_dockerconfigjson_without_auths_has_no_entries() -> None:
    assert parse_dockerconfigjson(b"{}") == []
    assert parse_dockerconfigjson(b'{"auths": null}') == []
    assert parse_dockerconfigjson(b"null") == []


def test_parse_errors_never_quote_the_content() -> None:
    secret = "hunter2-very-secret"
    for doc in (
        {"auths": {"r.example": {"auth": secret}}},
        {"auths": {"r.example": {"auth": b64(secret)}}},
        {"auths": {"r.example": {"password": [secret]}}},
    ):
        with pytest.raises(DockerConfigError) as caught:
            parse_dockerconfigjson(json.dumps(doc).encode())
        assert secret not in str(caught.value)
        assert b64(secret) not in str(caught.value)
    with pytest.raises(DockerConfigError) as caught:
        parse_dockerconfigjson(b'{"auths": {"r": {"password": "' + secret.encode() + b'"')
    assert secret not in str(caught.value)


def test_entry_repr_hides_credentials() -> None:
    entry = DockerConfigEntry("robot", "hunter2", "r@e")
    credential = PullCredential("robot", "hunter2", ("ns", "s", "uid"), "hash")
    assert "hunter2" not in repr(entry)
    assert "hunter2" not in repr(credential)
    assert "hunter2" not in repr(PullSecret("ns", "s", "uid", "t", {".x": b"hunter2"}))


# -- from secrets ---------------------------------------------------------------------


def dockerconfigjson_secret(name: str, auths: dict[str, object], uid: str = "") -> PullSecret:
    data = json.dumps({"auths": auths}).encode()
    return PullSecret(
        "default", name, uid or f"uid-{name}", "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": data},
    )  # fmt: skip


def test_secret_types_and_keys_must_agree() -> None:
    good = {"r.example": {"username": "u", "password": "p"}}
    config = json.dumps(good).encode()
    secrets = [
        PullSecret("default", "opaque", "1", "Opaque", {".dockerconfigjson": config}),
        PullSecret(
            "default", "wrong-key", "2", "kubernetes.io/dockerconfigjson", {".dockercfg": config}
        ),
        PullSecret("default", "empty", "3", "kubernetes.io/dockercfg", {".dockercfg": b""}),
        PullSecret("default", "cfg", "4", "kubernetes.io/dockercfg", {".dockercfg": config}),
    ]
    (found,) = keyring_from_secrets(secrets).lookup("r.example/app")
    assert found.source == ("default", "cfg", "4")
    assert found.auth_config() == api.AuthConfig(username="u", password="p")


def test_a_malformed_secret_fails_the_lookup_without_its_content() -> None:
    """As upstream's MakeDockerKeyring: one unreadable secret is an error, not skipped."""
    bad = dockerconfigjson_secret("bad", {"r.example": {"auth": b64("no-colon-hunter2")}})
    good = dockerconfigjson_secret("good", {"r.example": {"auth": b64("u:hunter3")}})
    with pytest.raises(MalformedPullSecret) as caught:
        keyring_from_secrets([bad, good])
    message = str(caught.value)
    assert "pull secret default/bad (kubernetes.io/dockerconfigjson) cannot be read" in message
    for text in ("hunter2", b64("no-colon-hunter2"), "hunter3"):
        assert text not in message


def test_pull_secret_names_skip_empty_ones() -> None:
    assert pull_secret_names([{"name": "a"}, {"name": ""}, {}, {"name": "b"}]) == ["a", "b"]


def test_credential_hash_is_upstreams() -> None:
    """sha256 of Go's json.Marshal of the AuthConfig: empty fields left out, HTML escaped."""
    entry = DockerConfigEntry("robot", "p<w>&", "r@e")
    expected = '{"username":"robot","password":"p\\u003cw\\u003e\\u0026","email":"r@e"}'
    assert credential_hash(entry) == hashlib.sha256(expected.encode()).hexdigest()
    assert (
        credential_hash(DockerConfigEntry("u", "p"))
        == hashlib.sha256(b'{"username":"u","password":"p"}').hexdigest()
    )


# -- redaction ------------------------------------------------------------------------


def test_redact_removes_passwords_and_their_basic_form() -> None:
    credential = PullCredential("robot", "hunter2", None)
    basic = b64("robot:hunter2")
    text = f"denied for robot: password hunter2, header Basic {basic} / {basic.rstrip('=')}"
    assert redact(text, [credential]) == (
        "denied for robot: password <redacted>, header Basic <redacted> / <redacted>"
    )
    assert redact("nothing here", []) == "nothing here"
    assert redact("anonymous", [PullCredential("robot", "", None)]) == "anonymous"


# -- node-wide docker config ----------------------------------------------------------


def test_node_credentials_come_from_the_root_dirs_config_json(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    now = [0.0]
    node = NodeCredentials(str(root), lambda: now[0])
    assert node.keyring().lookup("registry.example/app") == []
    (root / "config.json").write_text(
        json.dumps({"auths": {"registry.example": {"auth": b64("node:pw")}}})
    )
    assert node.keyring().lookup("registry.example/app") == []  # read every 5 minutes
    now[0] = 300.0
    (found,) = node.keyring().lookup("registry.example/app")
    assert (found.username, found.password, found.source) == ("node", "pw", None)


def test_node_credentials_search_order(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert search_paths(str(root))[0] == (root / "config.json", True)
    assert search_paths(str(root))[4] == (root / ".dockercfg", False)
    assert [p.name for p, _ in search_paths(str(root))] == ["config.json"] * 4 + [".dockercfg"] * 4
    root.mkdir()
    # a config.json that does not parse is passed over for the next file
    (root / "config.json").write_text("{broken")
    (root / ".dockercfg").write_text(json.dumps({"r.example": {"auth": b64("cfg:pw")}}))
    (found,) = NodeCredentials(str(root), lambda: 0.0).keyring().lookup("r.example/x")
    assert found.username == "cfg"
