"""Image credential provider plugins: the config file, and real plugin processes (a small
Python script the test writes) speaking CredentialProviderRequest/Response."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry

from kubelet.errors import ConfigError
from kubelet.runtime.credentials import PluginKeyring, PluginMetrics, load_provider_config, plugins
from kubelet.runtime.credentials.plugins import CredentialProvider, parse_provider_config

V1 = "credentialprovider.kubelet.k8s.io/v1"

PLUGIN = """#!{python}
import json, os, sys
request = json.load(sys.stdin)
with open(os.environ["PLUGIN_LOG"], "a") as log:
    log.write(json.dumps({{"request": request, "args": sys.argv[1:],
                          "env": os.environ.get("REGION", ""),
                          "home": "HOME" in os.environ}}) + "\\n")
mode = os.environ.get("MODE", "ok")
if mode == "fail":
    print("no credentials for you", file=sys.stderr)
    sys.exit(3)
if mode == "nested":
    print("[" * 100000 + "]" * 100000)
    sys.exit(0)
if mode == "endless":
    import time
    while True:
        sys.stdout.buffer.write(b" " * 65536)
        sys.stdout.buffer.flush()
        time.sleep(0.01)
if mode == "garbage":
    print('{{"kind": "CredentialProviderResponse", "apiVersion": "{v1}", "auth": "s3cr3t-leak"}}')
    sys.exit(0)
response = {{
    "kind": "CredentialProviderResponse",
    "apiVersion": os.environ.get("ANSWER_VERSION", "{v1}"),
    "cacheKeyType": os.environ.get("KEY_TYPE", "Registry"),
    "auth": {{os.environ.get("AUTH_KEY", "*.registry.io"):
             {{"username": "robot", "password": "s3cr3t"}}}},
}}
if "DURATION" in os.environ:
    response["cacheDuration"] = os.environ["DURATION"]
print(json.dumps(response))
"""


def write_plugin(bin_dir: Path, name: str = "acme-credential-provider") -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(PLUGIN.format(python=sys.executable, v1=V1))
    path.chmod(0o755)
    return path


def config_text(**provider: Any) -> str:
    entry: dict[str, Any] = {
        "name": "acme-credential-provider",
        "matchImages": ["*.registry.io", "registry.io:5000"],
        "defaultCacheDuration": "10m",
        "apiVersion": V1,
    }
    entry.update(provider)
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1",
            "kind": "CredentialProviderConfig",
            "providers": [entry],
        }
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keyring(
    tmp_path: Path,
    clock: Clock,
    env: Mapping[str, str] = (),
    *,
    registry: CollectorRegistry | None = None,
    timeout: float = plugins.EXEC_TIMEOUT,
    **provider: Any,
) -> tuple[PluginKeyring, Path]:
    bin_dir = tmp_path / "bin"
    write_plugin(bin_dir)
    cfg = tmp_path / "credential-provider.yaml"
    cfg.write_text(
        config_text(env=[{"name": k, "value": v} for k, v in dict(env).items()], **provider)
    )
    log = tmp_path / "plugin.log"
    providers = load_provider_config(str(cfg), str(bin_dir))
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
        "PLUGIN_LOG": str(log),
        "REGION": "from-kubelet",
    }
    return PluginKeyring(
        providers,
        str(bin_dir),
        clock=clock,
        metrics=PluginMetrics(registry),
        environ=lambda: environ,
        timeout=timeout,
    ), log


def runs(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# -- the config file ----------------------------------------------------------------------


def test_a_valid_config(tmp_path: Path) -> None:
    [provider] = parse_provider_config(
        config_text(args=["get-credentials"], env=[{"name": "REGION", "value": "eu"}]), "cfg.yaml"
    )
    assert provider == CredentialProvider(
        "acme-credential-provider", ("*.registry.io", "registry.io:5000"), 600.0, V1,
        ("get-credentials",), (("REGION", "eu"),),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (
            {"matchImages": []},
            "providers[0].matchImages: Required value: at least 1 item in matchImages is required",
        ),
        ({"defaultCacheDuration": None}, "providers[0].defaultCacheDuration: Required value"),
        (
            {"defaultCacheDuration": "-1m"},
            'defaultCacheDuration: Invalid value: "-1m": must be greater than or equal to 0',
        ),
        (
            {"name": "a/b"},
            "providers[0].name: Invalid value: \"a/b\": provider name cannot contain '/'",
        ),
        (
            {"name": "a b"},
            'providers[0].name: Invalid value: "a b": provider name cannot contain spaces',
        ),
        ({"name": ".."}, "provider name cannot be '..'"),
        ({"apiVersion": ""}, "providers[0].apiVersion: Required value"),
        (
            {"apiVersion": "credentialprovider.kubelet.k8s.io/v2"},
            'Unsupported value: "credentialprovider.kubelet.k8s.io/v2"',
        ),
        ({"cacheKey": "x"}, "providers[0].cacheKey: unknown field"),
        (
            {"tokenAttributes": {"serviceAccountTokenAudience": "x"}},
            "tokenAttributes: service account token mode",
        ),
    ],
)
def test_config_problems_name_the_field(provider: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_provider_config(config_text(**provider), "/etc/kubernetes/credential-provider.yaml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("/etc/kubernetes/credential-provider.yaml: providers[0]")


def test_config_document_problems() -> None:
    with pytest.raises(ConfigError, match="at least 1 item in plugins is required"):
        parse_provider_config(
            '{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", '
            '"providers": []}',
            "c",
        )
    with pytest.raises(ConfigError, match="wrong Kind"):
        parse_provider_config(
            '{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "KubeletConfiguration"}', "c"
        )
    duplicate = json.loads(config_text())
    duplicate["providers"].append(dict(duplicate["providers"][0]))
    with pytest.raises(
        ConfigError, match=r'providers\[1\]\.name: Duplicate value: "acme-credential-provider"'
    ):
        parse_provider_config(json.dumps(duplicate), "c")


def test_bin_dir_and_executables_must_exist(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(config_text())
    with pytest.raises(ConfigError, match=f"plugin binary directory {tmp_path}/nope did not exist"):
        load_provider_config(str(cfg), str(tmp_path / "nope"))
    (tmp_path / "bin").mkdir()
    with pytest.raises(
        ConfigError, match=r"plugin binary executable .*/bin/acme-credential-provider did not exist"
    ):
        load_provider_config(str(cfg), str(tmp_path / "bin"))


# -- running plugins ----------------------------------------------------------------------


async def test_the_exec_protocol_args_and_env(tmp_path: Path) -> None:
    ring, log = keyring(tmp_path, Clock(), {"REGION": "eu-west"}, args=["get-credentials", "--v=2"])
    found = await ring.lookup("eu.registry.io/team/app")
    assert [(c.username, c.password, c.source) for c in found] == [("robot", "s3cr3t", None)]
    assert found[0].hash  # pull records can compare it
    [run] = runs(log)
    assert run["request"] == {
        "kind": "CredentialProviderRequest",
        "apiVersion": V1,
        "image": "eu.registry.io/team/app",
    }
    assert run["args"] == ["get-credentials", "--v=2"]
    assert run["env"] == "eu-west" and run["home"]  # config env wins; the kubelet's is kept


async def test_images_the_plugin_does_not_match_never_run_it(tmp_path: Path) -> None:
    ring, log = keyring(tmp_path, Clock())
    assert await ring.lookup("docker.io/library/busybox") == []
    assert await ring.lookup("registry.io/app") == []  # *.registry.io needs a label more
    assert await ring.lookup("registry.io:5001/app") == []  # ports must be equal
    assert runs(log) == []
    assert await ring.lookup("registry.io:5000/app") == []  # runs; its answer keys *.registry.io
    assert len(runs(log)) == 1


@pytest.mark.parametrize(
    ("key_type", "second", "cached"),
    [
        ("Registry", "eu.registry.io/other", True),
        ("Registry", "us.registry.io/app", False),
        ("Image", "eu.registry.io/other", False),
        ("Image", "eu.registry.io/app", True),
        ("Global", "us.registry.io/anything", True),
    ],
)
async def test_cache_key_types(tmp_path: Path, key_type: str, second: str, cached: bool) -> None:
    ring, log = keyring(tmp_path, Clock(), {"KEY_TYPE": key_type})
    assert await ring.lookup("eu.registry.io/app")
    assert await ring.lookup(second)
    assert len(runs(log)) == (1 if cached else 2)


async def test_cache_duration_from_the_answer_or_the_default(tmp_path: Path) -> None:
    clock = Clock()
    ring, log = keyring(tmp_path / "a", clock, {"DURATION": "1m"})
    await ring.lookup("eu.registry.io/app")
    clock.now += 59
    await ring.lookup("eu.registry.io/app")
    assert len(runs(log)) == 1
    clock.now += 2
    await ring.lookup("eu.registry.io/app")
    assert len(runs(log)) == 2
    # no cacheDuration in the answer: defaultCacheDuration (10m)
    ring, log = keyring(tmp_path / "b", clock)
    await ring.lookup("eu.registry.io/app")
    clock.now += 599
    await ring.lookup("eu.registry.io/app")
    assert len(runs(log)) == 1
    clock.now += 2
    await ring.lookup("eu.registry.io/app")
    assert len(runs(log)) == 2
    # an explicit zero: never cached
    ring, log = keyring(tmp_path / "c", clock, {"DURATION": "0s"})
    for _ in range(3):
        await ring.lookup("eu.registry.io/app")
    assert len(runs(log)) == 3


@pytest.mark.parametrize(
    ("env", "logged"),
    [
        (
            {"MODE": "fail"},
            "error execing credential provider plugin acme-credential-provider for image "
            "eu.registry.io/app: exit status 3: no credentials for you",
        ),
        (
            {"ANSWER_VERSION": "credentialprovider.kubelet.k8s.io/v1beta1"},
            "apiVersion from credential plugin response did not match expected apiVersion:"
            "credentialprovider.kubelet.k8s.io/v1, actual apiVersion:"
            "credentialprovider.kubelet.k8s.io/v1beta1",
        ),
        (
            {"KEY_TYPE": "Pod"},
            'credential provider plugin did not return a valid cacheKeyType: "Pod"',
        ),
        ({"MODE": "garbage"}, "error decoding credential provider plugin response from stdout"),
        ({"MODE": "nested"}, "error reading GVK from response: not a JSON object"),
        (
            {"MODE": "endless"},
            "for image eu.registry.io/app: response larger than 1048576 bytes",
        ),
    ],
)
async def test_a_failing_plugin_gives_nothing_and_says_why(
    tmp_path: Path, env: dict[str, str], logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    registry = CollectorRegistry()
    ring, _ = keyring(tmp_path, Clock(), env, registry=registry, timeout=5)
    with caplog.at_level(logging.ERROR):
        assert await ring.lookup("eu.registry.io/app") == []
    assert logged in caplog.text
    assert "s3cr3t" not in caplog.text  # never the answer's content
    labels = {"plugin_name": "acme-credential-provider"}
    assert registry.get_sample_value("kubelet_credential_provider_plugin_errors", labels) == 1
    assert (
        registry.get_sample_value("kubelet_credential_provider_plugin_duration_count", labels) == 1
    )


async def test_a_plugin_that_hangs_is_stopped_after_a_minute(
    tmp_path: Path, autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hang = bin_dir / "acme-credential-provider"
    hang.write_text("#!/bin/sh\nexec sleep 3600\n")
    hang.chmod(0o755)
    [provider] = parse_provider_config(config_text(), "c")
    ring = PluginKeyring([provider], str(bin_dir), clock=Clock())
    start = trio.current_time()
    with caplog.at_level(logging.ERROR):
        assert await ring.lookup("eu.registry.io/app") == []
    assert trio.current_time() - start == 60
    assert "for image eu.registry.io/app: context deadline exceeded" in caplog.text


async def test_concurrent_requests_for_one_image_share_one_run(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    calls: list[bytes] = []

    async def fake_run(argv: Sequence[str], *, stdin: bytes, **kw: Any) -> tuple[int, bytes, bytes]:
        calls.append(stdin)
        await trio.sleep(1)
        answer = {"kind": "CredentialProviderResponse", "apiVersion": V1,
                  "cacheKeyType": "Image", "cacheDuration": "0s",
                  "auth": {"*.registry.io": {"username": "u", "password": "p"}}}  # fmt: skip
        return 0, json.dumps(answer).encode(), b""

    monkeypatch.setattr(plugins, "run_plugin", fake_run)
    [provider] = parse_provider_config(config_text(), "c")
    ring = PluginKeyring([provider], "/nonexistent", clock=Clock())
    results: list[int] = []

    async def one() -> None:
        results.append(len(await ring.lookup("eu.registry.io/app")))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
    assert results == [1] * 5 and len(calls) == 1


async def test_providers_form_one_keyring_in_order(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_plugin(bin_dir, "first")
    write_plugin(bin_dir, "second")
    doc = json.loads(config_text())
    base = doc["providers"][0]
    doc["providers"] = [
        {**base, "name": "first", "env": [{"name": "AUTH_KEY", "value": "eu.registry.io"}]},
        {**base, "name": "second", "env": [{"name": "AUTH_KEY", "value": "eu.registry.io/team"}]},
    ]
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(doc))
    environ = {"PATH": "/usr/bin:/bin", "PLUGIN_LOG": str(tmp_path / "log")}
    ring = PluginKeyring(
        load_provider_config(str(cfg), str(bin_dir)),
        str(bin_dir),
        clock=Clock(),
        environ=lambda: environ,
    )
    found = await ring.lookup("eu.registry.io/team/app")
    # both match; the longer path sorts first, as in any keyring
    assert len(found) == 2
    assert len(await ring.lookup("eu.registry.io/other")) == 1


async def test_a_plugin_whose_child_writes_without_end_is_refused_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin is a shell whose child writes the answer: killing the shell alone would
    leave the child holding the pipes open, and the run waiting for its timeout."""
    ring, _ = keyring(tmp_path, Clock(), timeout=20)
    plugin = tmp_path / "bin" / "acme-credential-provider"
    plugin.write_text("#!/bin/sh\ncat /dev/zero\ntrue\n")
    plugin.chmod(0o755)
    with caplog.at_level(logging.ERROR), trio.fail_after(10):
        assert await ring.lookup("eu.registry.io/app") == []
    assert "response larger than 1048576 bytes" in caplog.text
