"""Image credential provider plugins (``--image-credential-provider-config``/``-bin-dir``).

Restated from upstream's pkg/credentialprovider/plugin (Kubernetes 1.36):

* the config file is a ``CredentialProviderConfig`` (``kubelet.config.k8s.io/v1``,
  ``v1beta1`` or ``v1alpha1``; YAML or JSON, unknown fields refused); each provider has a
  ``name`` (the executable in the bin dir: no ``/``, no spaces, not ``.``/``..``, unique),
  ``matchImages`` (at least one), ``defaultCacheDuration`` (required, >= 0),
  ``apiVersion`` of the exec protocol (``credentialprovider.kubelet.k8s.io/v1``,
  ``v1beta1`` or ``v1alpha1``), optional ``args`` and ``env``. Problems are reported with
  upstream's field paths and wording; the bin dir and every executable must exist;
* a provider is asked only for images one of its ``matchImages`` matches (the keyring's
  glob rules: per-label globs on the host, same port, path prefix);
* the plugin runs as ``<bin-dir>/<name> <args...>`` with the kubelet's environment plus
  ``env`` (config wins), gets a ``CredentialProviderRequest`` (``{"image": ...}``) on
  stdin and must print a ``CredentialProviderResponse`` of the same apiVersion; one
  minute at most. Concurrent requests for one image share one run;
* the answer's ``auth`` map (match key → username/password) is cached under the image,
  its registry or one global key (``cacheKeyType`` Image / Registry / Global) for its
  ``cacheDuration``, the provider's ``defaultCacheDuration`` when absent, not at all when
  zero; lookups try image, then registry, then global;
* a failing plugin (exit status, timeout, bad answer) gives no credentials and a log line
  that names the plugin and the image, never the answer's content; it counts in
  ``kubelet_credential_provider_plugin_errors{plugin_name}``, every run in
  ``kubelet_credential_provider_plugin_duration{plugin_name}``;
* all providers' credentials form one keyring, in config order; a pull tries the pod's
  pull secrets, then the node's docker config files, then the plugins' credentials
  (upstream's keyring union). Plugin credentials belong to no Secret, like the node's.

The service-account-token mode (``tokenAttributes``, gate
KubeletServiceAccountTokenForCredentialProviders) is refused with a message saying it
is not implemented.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import yaml
from prometheus_client.core import Metric
from prometheus_client.metrics import Histogram
from prometheus_client.registry import Collector, CollectorRegistry

from kubelet.boundedio import (
    InputRefused,
    OutputTooLarge,
    RunSync,
    in_thread,
    loads_json,
    run_plugin,
)
from kubelet.config import parse_duration
from kubelet.errors import ConfigError, Problem

from .dockercfg import DockerConfigEntry
from .keyring import Keyring, urls_match
from .secrets import PullCredential, credential_hash

__all__ = [
    "CONFIG_API_VERSIONS",
    "PROTOCOL_API_VERSIONS",
    "CredentialProvider",
    "PluginError",
    "PluginKeyring",
    "PluginMetrics",
    "load_provider_config",
    "parse_provider_config",
]

log = logging.getLogger(__name__)

CONFIG_GROUP = "kubelet.config.k8s.io"
CONFIG_API_VERSIONS = tuple(f"{CONFIG_GROUP}/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
PROTOCOL_GROUP = "credentialprovider.kubelet.k8s.io"
PROTOCOL_API_VERSIONS = tuple(f"{PROTOCOL_GROUP}/{v}" for v in ("v1", "v1alpha1", "v1beta1"))
EXEC_TIMEOUT = 60.0
RESPONSE_LIMIT = 1024 * 1024
"""Bytes of a plugin's answer (stdout) at most: a CredentialProviderResponse is a few
hundred bytes per registry. A plugin that writes more is killed and its answer refused."""
STDERR_KEPT = 64 * 1024
"""Bytes of a plugin's stderr kept for the error message; the rest is read and dropped."""
"""upstream's catch-all timeout for one plugin run."""
GLOBAL_CACHE_KEY = "global"
CACHE_KEY_TYPES = ("Image", "Registry", "Global")
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_PROVIDER_FIELDS = {
    "name", "matchImages", "defaultCacheDuration", "apiVersion", "args", "env", "tokenAttributes",
}  # fmt: skip


class PluginError(Exception):
    """One plugin run gave no usable answer; the message never holds the answer's content."""


@attrs.frozen
class CredentialProvider:
    """One ``providers[]`` entry."""

    name: str
    match_images: tuple[str, ...]
    default_cache_duration: float
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


# -- the config file ----------------------------------------------------------------------


def load_provider_config(path: str, bin_dir: str) -> tuple[CredentialProvider, ...]:
    """Read, validate and check the executables; ConfigError lists every problem."""
    if not os.path.exists(bin_dir):
        raise ConfigError.single(
            "--image-credential-provider-bin-dir",
            "",
            f"plugin binary directory {bin_dir} did not exist",
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError.single(
            path, "", f"unable to read credential provider config: {exc}"
        ) from None
    providers = parse_provider_config(text, path)
    problems = []
    for provider in providers:
        binary = os.path.join(bin_dir, provider.name)
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            problems.append(Problem(path, "", f"plugin binary executable {binary} did not exist"))
    if problems:
        raise ConfigError(*problems)
    return providers


def parse_provider_config(text: str, source: str) -> tuple[CredentialProvider, ...]:
    """The providers of a CredentialProviderConfig document; ConfigError names the field."""
    try:
        doc = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError.single(source, "", f"not valid YAML or JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ConfigError.single(source, "", "expected a CredentialProviderConfig object")
    kind, version = doc.get("kind"), doc.get("apiVersion")
    if kind != "CredentialProviderConfig":
        raise ConfigError.single(source, "kind", f'failed to decode "{kind}" (wrong Kind)')
    if version not in CONFIG_API_VERSIONS:
        raise ConfigError.single(
            source,
            "apiVersion",
            f"unsupported apiVersion {version!r}: expected one of "
            + ", ".join(CONFIG_API_VERSIONS),
        )
    problems: list[Problem] = []
    for key in sorted(set(doc) - {"kind", "apiVersion", "providers"}):
        problems.append(Problem(source, key, "unknown field"))
    raw = doc.get("providers") or []
    if not isinstance(raw, list):
        raise ConfigError.single(source, "providers", "expected a list")
    if not raw:
        problems.append(
            Problem(source, "providers", "Required value: at least 1 item in plugins is required")
        )
    providers: list[CredentialProvider] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        found = _provider(entry, i, source, seen, problems)
        if found is not None:
            providers.append(found)
    if problems:
        raise ConfigError(*problems)
    return tuple(providers)


Complain = Callable[[str, str], None]
"""Records one problem of the provider entry at hand: (field, message)."""


def _provider(
    entry: Any, i: int, source: str, seen: set[str], problems: list[Problem]
) -> CredentialProvider | None:
    before = len(problems)

    def bad(field: str, message: str) -> None:
        problems.append(
            Problem(source, f"providers[{i}].{field}" if field else f"providers[{i}]", message)
        )

    if not isinstance(entry, Mapping):
        bad("", "expected an object")
        return None
    for key in sorted(set(entry) - _PROVIDER_FIELDS):
        bad(key, "unknown field")
    name = _provider_name(entry.get("name"), seen, bad)
    api_version = entry.get("apiVersion")
    if not api_version:
        bad("apiVersion", "Required value")
    elif api_version not in PROTOCOL_API_VERSIONS:
        supported = ", ".join(f'"{v}"' for v in sorted(PROTOCOL_API_VERSIONS))
        bad("apiVersion", f'Unsupported value: "{api_version}": supported values: {supported}')
    match = _match_images(entry.get("matchImages") or [], bad)
    seconds = _cache_duration(entry.get("defaultCacheDuration"), bad)
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        bad("args", "expected a list of strings")
        args = []
    env = _provider_env(entry.get("env") or [], bad)
    if entry.get("tokenAttributes") is not None:
        bad(
            "tokenAttributes",
            "service account token mode (KubeletServiceAccountTokenForCredentialProviders) is "
            "not implemented by this kubelet",
        )
    if len(problems) > before:
        return None
    return CredentialProvider(
        name, tuple(match), seconds, str(api_version), tuple(args), tuple(env)
    )


def _provider_name(name: Any, seen: set[str], bad: Complain) -> str:
    if not isinstance(name, str) or not name:
        bad("name", "Required value: provider name is required")
        name = ""
    if "/" in name:
        bad("name", f"Invalid value: \"{name}\": provider name cannot contain '/'")
    if " " in name:
        bad("name", f'Invalid value: "{name}": provider name cannot contain spaces')
    if name in (".", ".."):
        bad("name", f"Invalid value: \"{name}\": provider name cannot be '{name}'")
    if name and name in seen:
        bad("name", f'Duplicate value: "{name}"')
    seen.add(name)
    return str(name)


def _match_images(match: Any, bad: Complain) -> list[str]:
    if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
        bad("matchImages", "expected a list of strings")
        match = []
    if not match:
        bad("matchImages", "Required value: at least 1 item in matchImages is required")
    for image in match:
        why = _match_image_problem(image)
        if why:
            bad("matchImages", f'Invalid value: "{image}": match image is invalid: {why}')
    return list(match)


def _cache_duration(duration: Any, bad: Complain) -> float:
    seconds = 0.0
    if duration is None:
        bad("defaultCacheDuration", "Required value")
        return seconds
    try:
        seconds = parse_duration(str(duration))
    except ValueError as exc:
        bad("defaultCacheDuration", str(exc))
    if seconds < 0:
        bad(
            "defaultCacheDuration",
            f'Invalid value: "{duration}": must be greater than or equal to 0',
        )
    return seconds


def _provider_env(raw: Any, bad: Complain) -> list[tuple[str, str]]:
    env: list[tuple[str, str]] = []
    for j, var in enumerate(raw):
        if not isinstance(var, Mapping) or not isinstance(var.get("name"), str) or not var["name"]:
            bad(f"env[{j}].name", "Required value")
            continue
        env.append((str(var["name"]), str(var.get("value") or "")))
    return env


def _match_image_problem(image: str) -> str:
    """Why ``image`` is not a scheme-less URL as upstream parses match images ("" if fine)."""
    if "://" in image:
        return "scheme is not allowed"  # ParseSchemelessURL would read it as a host
    host = image.split("/", 1)[0]
    if not host:
        return "empty host"
    if any(c in host for c in " \t\n"):
        return f'invalid host "{host}"'
    return ""


# -- metrics ------------------------------------------------------------------------------


class PluginMetrics(Collector):
    """``kubelet_credential_provider_plugin_errors`` (no ``_total`` upstream: an untyped
    sample under that exact name) and ``kubelet_credential_provider_plugin_duration``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.errors: dict[str, int] = {}
        self.duration = Histogram(
            "kubelet_credential_provider_plugin_duration",
            "[ALPHA] Duration of execution in seconds for credential provider plugin",
            ["plugin_name"],
            buckets=DEF_BUCKETS,
            registry=registry,
        )
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        name = "kubelet_credential_provider_plugin_errors"
        metric = Metric(name, "[ALPHA] Number of errors from credential provider plugin", "unknown")
        for plugin, count in sorted(self.errors.items()):
            metric.add_sample(name, {"plugin_name": plugin}, float(count))
        yield metric

    def error(self, plugin: str) -> None:
        self.errors[plugin] = self.errors.get(plugin, 0) + 1


# -- running plugins ----------------------------------------------------------------------


@attrs.frozen
class _Answer:
    cache_key_type: str
    cache_duration: float | None
    auth: tuple[tuple[str, str, str], ...] = attrs.field(repr=False)


@attrs.define
class _Entry:
    expires: float
    auth: tuple[tuple[str, str, str], ...] = attrs.field(repr=False)


class _Plugin:
    """One provider: its matching, its cache, its runs."""

    def __init__(
        self,
        provider: CredentialProvider,
        bin_dir: str,
        clock: Callable[[], float],
        metrics: PluginMetrics,
        environ: Callable[[], Mapping[str, str]],
        timeout: float,
        run: RunSync,
    ) -> None:
        self.provider = provider
        self.run = run
        self.binary = os.path.join(bin_dir, provider.name)
        self.clock = clock
        self.metrics = metrics
        self.environ = environ
        self.timeout = timeout
        self.cache: dict[str, _Entry] = {}
        self.runs = 0
        self._inflight: dict[str, tuple[trio.Event, list[_Answer | None]]] = {}

    def matches(self, image: str) -> bool:
        return any(urls_match(m, image) for m in self.provider.match_images)

    def _cached(self, image: str) -> tuple[tuple[str, str, str], ...] | None:
        now = self.clock()
        for key in (image, image.split("/", 1)[0], GLOBAL_CACHE_KEY):
            entry = self.cache.get(key)
            if entry is None:
                continue
            if now > entry.expires:
                del self.cache[key]
                continue
            return entry.auth
        return None

    async def provide(self, image: str) -> tuple[tuple[str, str, str], ...]:
        """(match key, username, password) for ``image``; empty when none or on failure."""
        if not self.matches(image):
            return ()
        cached = self._cached(image)
        if cached is not None:
            return cached
        answer = await self._single_flight(image)
        if answer is None:
            return ()
        if answer.cache_key_type == "Image":
            key = image
        elif answer.cache_key_type == "Registry":
            key = image.split("/", 1)[0]
        else:
            key = GLOBAL_CACHE_KEY
        duration = answer.cache_duration
        if duration is None:
            duration = self.provider.default_cache_duration
        if duration > 0:
            self.cache[key] = _Entry(self.clock() + duration, answer.auth)
        return answer.auth

    async def _single_flight(self, image: str) -> _Answer | None:
        running = self._inflight.get(image)
        if running is not None:
            await running[0].wait()
            return running[1][0] if running[1] else None
        event, result = trio.Event(), list[_Answer | None]()
        self._inflight[image] = (event, result)
        try:
            answer = await self._exec(image)
            result.append(answer)
            return answer
        finally:
            del self._inflight[image]
            event.set()

    async def _exec(self, image: str) -> _Answer | None:
        name = self.provider.name
        request = json.dumps(
            {
                "kind": "CredentialProviderRequest",
                "apiVersion": self.provider.api_version,
                "image": image,
            }
        ).encode()
        env = {**self.environ(), **dict(self.provider.env)}
        start = trio.current_time()
        self.runs += 1
        try:
            try:
                code, stdout, stderr = await run_plugin(
                    [self.binary, *self.provider.args],
                    stdin=request,
                    env=env,
                    timeout=self.timeout,
                    stdout_limit=RESPONSE_LIMIT,
                    stderr_kept=STDERR_KEPT,
                )
            except trio.TooSlowError:
                raise PluginError(
                    f"error execing credential provider plugin {name} for image {image}: "
                    "context deadline exceeded"
                ) from None
            except OutputTooLarge:
                raise PluginError(
                    f"error execing credential provider plugin {name} for image {image}: "
                    f"response larger than {RESPONSE_LIMIT} bytes"
                ) from None
            except OSError as exc:
                raise PluginError(
                    f"error execing credential provider plugin {name} for image {image}: {exc}"
                ) from None
            finally:
                self.metrics.duration.labels(name).observe(trio.current_time() - start)
            if code != 0:
                raise PluginError(
                    f"error execing credential provider plugin {name} for image {image}: exit "
                    f"status {code}: {stderr.decode('utf-8', 'replace').strip()}"
                )
            return self._decode(await self._parse(stdout))
        except PluginError as exc:
            self.metrics.error(name)
            log.error(
                "Failed getting credential from external registry credential provider: %s", exc
            )
            return None

    async def _parse(self, stdout: bytes) -> Any:
        """The answer's JSON, decoded off the event loop (``self.run``) with a bound."""
        try:
            return await self.run(lambda: loads_json(stdout, max_bytes=RESPONSE_LIMIT))
        except InputRefused:
            raise PluginError("error reading GVK from response: not a JSON object") from None

    def _decode(self, doc: Any) -> _Answer:
        if not isinstance(doc, dict):
            raise PluginError("error reading GVK from response: not a JSON object")
        version = doc.get("apiVersion")
        if version != self.provider.api_version:
            raise PluginError(
                "apiVersion from credential plugin response did not match expected apiVersion:"
                f"{self.provider.api_version}, actual apiVersion:{version}"
            )
        if doc.get("kind") != "CredentialProviderResponse":
            raise PluginError(
                "failed to decode CredentialProviderResponse, unexpected Kind: "
                f"{json.dumps(doc.get('kind'))}"
            )
        try:
            key_type = doc.get("cacheKeyType")
            raw_duration = doc.get("cacheDuration")
            duration = None if raw_duration is None else parse_duration(str(raw_duration))
            auth = []
            for key, entry in (doc.get("auth") or {}).items():
                if not isinstance(entry, dict):
                    raise TypeError
                auth.append(
                    (str(key), str(entry.get("username") or ""), str(entry.get("password") or ""))
                )
        except (ValueError, TypeError, AttributeError, RecursionError):
            # explicitly not the content: it may hold credentials
            raise PluginError(
                "error decoding credential provider plugin response from stdout"
            ) from None
        if key_type not in CACHE_KEY_TYPES:
            raise PluginError(
                "credential provider plugin did not return a valid cacheKeyType: "
                + json.dumps(key_type)
            )
        return _Answer(str(key_type), duration, tuple(auth))


class PluginKeyring:
    """Every configured provider; ``lookup`` is the plugins' share of a pull's keyring."""

    def __init__(
        self,
        providers: Sequence[CredentialProvider],
        bin_dir: str,
        *,
        clock: Callable[[], float],
        metrics: PluginMetrics | None = None,
        environ: Callable[[], Mapping[str, str]] = lambda: dict(os.environ),
        timeout: float = EXEC_TIMEOUT,
        run: RunSync = in_thread,
    ) -> None:
        self.metrics = metrics or PluginMetrics()
        self.plugins = [
            _Plugin(p, bin_dir, clock, self.metrics, environ, timeout, run) for p in providers
        ]

    async def lookup(self, repository: str) -> list[PullCredential]:
        """Credentials for ``repository`` (as ``keyring.repository_of`` gives it), best
        match first: one keyring over every provider's answer, in config order."""
        keyring: Keyring[PullCredential] = Keyring()
        for plugin in self.plugins:
            auth = await plugin.provide(repository)
            keyring.add(
                ((key, _credential(user, password)) for key, user, password in auth),
                origin=f"credential provider {plugin.provider.name}",
            )
        return keyring.lookup(repository)


def _credential(username: str, password: str) -> PullCredential:
    entry = DockerConfigEntry(username=username, password=password)
    return PullCredential(username, password, None, credential_hash(entry))
