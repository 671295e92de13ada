"""A container's environment, resolved as upstream's ``makeEnvironmentVariables`` does.

Sources are applied in upstream's order: ``envFrom`` (ConfigMaps and Secrets, in list
order), then ``env`` (later entries replace earlier ones of the same name), then the
service link variables that nothing above defined. ``env`` values may refer to what is
defined so far with ``$(NAME)``; so may ``command`` and ``args`` (``expand_command``).

Upstream builds the result from a Go map, so its order is unspecified; we keep the first
position a name was defined at, which is deterministic and agrees with upstream on
every value. Anything that keeps the container from starting is an ``EnvError`` whose
``reason`` is the container waiting reason upstream reports (CreateContainerConfigError).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from kubelet.api import (
    Container,
    EnvFromSource,
    FileKeySelector,
    KeySelector,
    ObjectFieldSelector,
    Pod,
    QuantityError,
    ResourceFieldSelector,
    ResourceQuantity,
    parse_quantity,
    qualified_name_errors,
)
from kubelet.boundedio import RunSync, in_thread
from kubelet.goformat import go_quote

from .envfile import UNPARSABLE_ENV_FILE, EnvFileFormatError, env_file_value, file_key_path_error
from .expand import (
    OFFLOAD_REFERENCES,
    ExpansionBudget,
    ExpansionTooLarge,
    expand_all,
    expand_env,
)

log = logging.getLogger(__name__)

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "INVALID_ENV_NAMES_REASON",
    "EnvError",
    "EnvFiles",
    "EnvLookup",
    "EnvResult",
    "expand",
    "expand_command",
    "pod_field_value",
    "resolve_command",
    "resolve_env",
    "resource_field_value",
]

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
"""The waiting reason upstream gives a container whose config could not be built."""

INVALID_ENV_NAMES_REASON = "InvalidEnvironmentVariableNames"
"""The reason of upstream's Warning event for ``envFrom`` keys that were skipped."""

expand = expand_env
"""``$(NAME)`` expansion as upstream's forked ``expansion.Expand``, bounded (see
:mod:`.expand`: a value that would grow past its bound fails the container)."""


class EnvError(Exception):
    """The environment cannot be built; the container must not be created."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _fail(message: str) -> EnvError:
    return EnvError(CREATE_CONTAINER_CONFIG_ERROR, message)


class EnvLookup(Protocol):
    """Where ConfigMaps and Secrets come from (the kubelet's object managers).

    ``None`` means the object does not exist. Any other failure should be raised as
    ``EnvError`` with the message to show; it is passed on unchanged.
    """

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None: ...


class EnvFiles(Protocol):
    """Where ``fileKeyRef`` env files come from: the pod's emptyDir volumes."""

    def read(self, volume: str, path: str) -> tuple[str, bytes]:
        """The file's path on the node (for messages) and its bytes. Raises ``EnvError``
        with the message to show when the volume or the file cannot be used."""
        ...


@attrs.frozen
class EnvResult:
    """The resolved environment, and warnings upstream would record as pod events."""

    env: list[tuple[str, str]]
    warnings: list[str] = attrs.field(factory=list)


# -- names ---------------------------------------------------------------------------------

_STRICT_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def _valid_env_name(name: str, strict: bool) -> bool:
    """Whether ``name`` may be an environment variable.

    Relaxed (current upstream): printable ASCII without ``=``. Strict (the rule before
    RelaxedEnvironmentVariableValidation): ``IsEnvVarName``, which also rejects ``.``,
    ``..`` and a ``..`` prefix.
    """
    if strict:
        return (
            _STRICT_ENV_NAME.fullmatch(name) is not None
            and not name.startswith("..")
            and name != "."
        )
    return bool(name) and all(" " <= c <= "~" and c != "=" for c in name)


# -- fieldRef --------------------------------------------------------------------------------

_SUPPORTED_FIELDS = frozenset(
    {
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
        "spec.terminationGracePeriodSeconds",
    }
)


def _split_subscript(path: str) -> tuple[str, str] | None:
    """``metadata.labels['k']`` as (path, key); None when the path has no subscript."""
    if not path.endswith("']"):
        return None
    head, sep, key = path[: -len("']")].partition("['")
    if not sep or not head:
        return None
    return head, key


def _format_map(values: Mapping[str, str]) -> str:
    """A whole label or annotation map: sorted ``key="value"`` lines, as upstream."""
    return "\n".join(f"{key}={go_quote(values[key])}" for key in sorted(values))


def _is_ipv6(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).version == 6
    except ValueError:
        return False


def _is_ipv4(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).version == 4
    except ValueError:
        return False


def _sort_pod_ips(pod_ips: Sequence[str], host_ips: Sequence[str]) -> list[str]:
    """At most one IP per family, the node's family first (upstream ``sortPodIPs``).

    The pod's primary IP must be of the node's family so that ``status.podIP`` agrees
    with what the node advertises on a dual-stack cluster.
    """
    v6_first = bool(host_ips) and _is_ipv6(host_ips[0])
    order = (_is_ipv6, _is_ipv4) if v6_first else (_is_ipv4, _is_ipv6)
    sorted_ips: list[str] = []
    for matches in order:
        first = next((ip for ip in pod_ips if matches(ip)), None)
        if first is not None:
            sorted_ips.append(first)
    return sorted_ips


def pod_field_value(
    selector: ObjectFieldSelector,
    pod: Pod,
    *,
    node_name: str = "",
    host_ips: Sequence[str] = (),
    pod_ips: Sequence[str] = (),
) -> str:
    """The value of a ``fieldRef`` (upstream ``podFieldSelectorRuntimeValue``).

    ``spec.nodeName`` falls back to ``node_name`` when the pod has none (a static pod
    before its source filled it in). Paths the API accepts but the kubelet cannot
    read (``status.phase``, ...) fail with upstream's "unsupported fieldPath".
    """
    version = selector.api_version or "v1"  # the API server defaults it
    path = selector.field_path
    if version != "v1":
        raise _fail(f"unsupported pod version: {version}")
    subscripted = _split_subscript(path)
    if subscripted is not None:
        head, key = subscripted
        if head not in ("metadata.annotations", "metadata.labels"):
            raise _fail(f"field label does not support subscript: {path}")
        # Annotation keys are checked case-insensitively, label keys as written.
        errs = qualified_name_errors(key.lower() if head == "metadata.annotations" else key)
        if errs:
            raise _fail(f"invalid key subscript in {path}: {';'.join(errs)}")
        meta = pod.metadata
        source = meta.annotations if head == "metadata.annotations" else meta.labels
        return source.get(key, "")
    if path == "spec.host":  # old v1 clients' name for spec.nodeName
        path = "spec.nodeName"
    elif path not in _SUPPORTED_FIELDS:
        raise _fail(f"field label not supported: {path}")

    ips = _sort_pod_ips(pod_ips, host_ips)
    match path:
        case "spec.nodeName":
            return pod.spec.node_name or node_name
        case "spec.serviceAccountName":
            return pod.spec.service_account_name
        case "status.hostIP" | "status.hostIPs":
            if not host_ips:
                raise _fail("host IP unknown; known addresses: []")
            return host_ips[0] if path == "status.hostIP" else ",".join(host_ips)
        case "status.podIP":
            return ips[0] if ips else ""
        case "status.podIPs":
            return ",".join(ips)
        case "metadata.name":
            return pod.metadata.name
        case "metadata.namespace":
            return pod.metadata.namespace
        case "metadata.uid":
            return pod.metadata.uid
        case "metadata.labels":
            return _format_map(pod.metadata.labels)
        case "metadata.annotations":
            return _format_map(pod.metadata.annotations)
    raise _fail(f"unsupported fieldPath: {path}")


# -- resourceFieldRef ------------------------------------------------------------------------

_DEFAULTED_LIMITS = ("cpu", "memory", "ephemeral-storage")


def _parse(text: str) -> ResourceQuantity:
    try:
        return parse_quantity(text)
    except QuantityError as err:
        raise _fail(str(err)) from err


def _limits_with_allocatable(
    container: Container, node_allocatable: Mapping[str, str]
) -> dict[str, str]:
    """The container's limits, unset or zero ones replaced by node allocatable.

    Upstream does this so that a container without a limit reads what it could use.
    """
    limits: dict[str, str] = dict(container.resources.limits) if container.resources else {}
    for name in _DEFAULTED_LIMITS:
        current = limits.get(name)
        if (current is None or _parse(current).is_zero()) and name in node_allocatable:
            limits[name] = node_allocatable[name]
    return limits


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def resource_field_value(
    selector: ResourceFieldSelector,
    pod: Pod,
    container: Container,
    node_allocatable: Mapping[str, str],
) -> str:
    """The value of a ``resourceFieldRef``, as a whole number of ``divisor`` units.

    Rounded up (upstream ``ExtractContainerResourceValue``): CPU in millicores over the
    divisor's millicores, everything else in units over the divisor's units. A missing
    or zero divisor means 1. ``containerName`` names a container of the pod; only app
    containers get the allocatable default for a missing limit (as upstream).
    """
    target = container
    defaulted = True
    if selector.container_name:
        found = next((c for c in pod.spec.containers if c.name == selector.container_name), None)
        if found is None:
            defaulted = False
            found = next(
                (c for c in pod.spec.init_containers if c.name == selector.container_name), None
            )
        if found is None:
            raise _fail(f"container {selector.container_name} not found")
        target = found

    kind, _, name = selector.resource.partition(".")
    supported = name in ("cpu", "memory", "ephemeral-storage") or name.startswith("hugepages-")
    if kind not in ("limits", "requests") or not supported:
        raise _fail(f"unsupported container resource : {selector.resource}")
    resources = target.resources
    if kind == "limits":
        if defaulted:
            values: Mapping[str, str] = _limits_with_allocatable(target, node_allocatable)
        else:
            values = resources.limits if resources else {}
    else:
        values = resources.requests if resources else {}
    amount = _parse(values[name]) if name in values else parse_quantity(0)

    divisor = _parse(selector.divisor) if selector.divisor is not None else parse_quantity(0)
    if divisor.is_zero():
        divisor = parse_quantity(1)
    if name == "cpu":
        return str(_ceil_div(amount.milli_value(), divisor.milli_value()))
    return str(_ceil_div(amount.value(), divisor.value()))


# -- the whole environment -------------------------------------------------------------------


def _ref(ref: Mapping[str, Any]) -> tuple[str, bool]:
    """(name, optional) of an ``envFrom`` reference, kept as raw JSON in the model."""
    return str(ref.get("name") or ""), bool(ref.get("optional"))


class _Objects:
    """Fetches each ConfigMap/Secret once per call, as upstream's per-call caches do."""

    def __init__(self, lookup: EnvLookup | None, namespace: str) -> None:
        self._lookup = lookup
        self._namespace = namespace
        self._config_maps: dict[str, Mapping[str, str]] = {}
        self._secrets: dict[str, Mapping[str, str]] = {}

    async def config_map(self, name: str) -> Mapping[str, str] | None:
        if name in self._config_maps:
            return self._config_maps[name]
        if self._lookup is None:
            raise _fail(f"couldn't get configMap {self._namespace}/{name}, no kubeClient defined")
        data = await self._lookup.config_map(self._namespace, name)
        if data is not None:
            self._config_maps[name] = data
        return data

    async def secret(self, name: str) -> Mapping[str, str] | None:
        if name in self._secrets:
            return self._secrets[name]
        if self._lookup is None:
            raise _fail(f"couldn't get secret {self._namespace}/{name}, no kubeClient defined")
        raw = await self._lookup.secret(self._namespace, name)
        if raw is None:
            return None
        # Invalid UTF-8 cannot travel in a CRI string; replace rather than fail later.
        data = {k: v.decode("utf-8", errors="replace") for k, v in raw.items()}
        self._secrets[name] = data
        return data


async def _env_from(
    source: EnvFromSource,
    objects: _Objects,
    namespace: str,
    into: dict[str, str],
    warnings: list[str],
    strict_names: bool,
) -> None:
    if source.config_map_ref is not None:
        kind, (name, optional) = "configMap", _ref(source.config_map_ref)
        data = await objects.config_map(name)
        missing = f'configmap "{name}" not found'
    elif source.secret_ref is not None:
        kind, (name, optional) = "secret", _ref(source.secret_ref)
        data = await objects.secret(name)
        missing = f'secret "{name}" not found'
    else:
        return
    if data is None:
        if optional:
            return
        raise _fail(missing)
    invalid: list[str] = []
    for key, value in data.items():
        full = source.prefix + key
        if not _valid_env_name(full, strict_names):
            invalid.append(full)
            continue
        into[full] = value
    if invalid:
        warnings.append(
            f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {kind} {namespace}/{name} "
            "were skipped since they are considered invalid environment variable names."
        )


async def _key_ref(
    ref: KeySelector, objects: _Objects, namespace: str, *, secret: bool
) -> str | None:
    """The referenced key's value; None when it is optional and missing."""
    optional = bool(ref.optional)
    data = await (objects.secret(ref.name) if secret else objects.config_map(ref.name))
    if data is None:
        if optional:
            return None
        raise _fail(f'{"secret" if secret else "configmap"} "{ref.name}" not found')
    if ref.key not in data:
        if optional:
            return None
        kind = "Secret" if secret else "ConfigMap"
        raise _fail(f"couldn't find key {ref.key} in {kind} {namespace}/{ref.name}")
    return data[ref.key]


def _file_key_ref(ref: FileKeySelector, files: EnvFiles, pod: Pod) -> str | None:
    """The key's value in the env file; None when it is optional and not there.

    As upstream, ``optional`` only covers the key: a file that cannot be read or parsed
    fails the container either way, and a key assigned "" counts as missing.
    """
    bad_path = file_key_path_error(ref.path)
    if bad_path is not None:
        raise _fail(bad_path)
    where, data = files.read(ref.volume_name, ref.path)
    try:
        value = env_file_value(data, ref.key)
    except EnvFileFormatError as exc:
        log.error("Failed to parse env file %s of pod %s: %s", where, pod.key, exc)
        raise _fail(UNPARSABLE_ENV_FILE) from exc
    if value:
        return value
    if ref.optional:
        return None
    raise _fail(f"environment variable key {go_quote(ref.key)} not found in file {go_quote(where)}")


async def resolve_env(
    pod: Pod,
    container: Container,
    *,
    node_name: str,
    host_ips: Sequence[str],
    pod_ips: Sequence[str],
    node_allocatable: Mapping[str, str],
    lookup: EnvLookup | None = None,
    service_env: Mapping[str, str] | None = None,
    strict_names: bool = False,
    env_files: EnvFiles | None = None,
    run_sync: RunSync = in_thread,
) -> EnvResult:
    """The container's full environment, or ``EnvError`` if it cannot be built.

    ``service_env``: the service link variables as upstream's ``getServiceEnvVarMap``
    gives them (the caller applies ``enableServiceLinks``; the master services are
    there regardless). They can be referenced with ``$(NAME)`` and come last, unless
    the container defines the same name. ``lookup`` None is a pod without API access
    (a static pod on a standalone kubelet): any ConfigMap or Secret reference fails.
    ``strict_names``: skip ``envFrom`` keys by the pre-1.30 name rule instead of the
    relaxed one. ``env_files`` None is the EnvFiles gate off: a ``fileKeyRef`` variable
    is then set to "", as upstream's kubelet does without the gate. ``run_sync``: where
    a value with many references is expanded (a worker thread).
    """
    namespace = pod.metadata.namespace
    services = service_env or {}
    objects = _Objects(lookup, namespace)
    expander = _Expander(run_sync)
    values: dict[str, str] = {}
    warnings: list[str] = []

    for source in container.env_from:
        await _env_from(source, objects, namespace, values, warnings, strict_names)

    defined = ChainMap(values, dict(services))
    for var in container.env:
        frm = var.value_from
        value: str | None
        if var.value:
            value = await expander.expand(var.value, defined, f"environment variable {var.name}")
        elif frm is None:
            value = ""
        elif frm.field_ref is not None:
            value = pod_field_value(
                frm.field_ref, pod, node_name=node_name, host_ips=host_ips, pod_ips=pod_ips
            )
        elif frm.resource_field_ref is not None:
            value = resource_field_value(frm.resource_field_ref, pod, container, node_allocatable)
        elif frm.config_map_key_ref is not None:
            value = await _key_ref(frm.config_map_key_ref, objects, namespace, secret=False)
        elif frm.secret_key_ref is not None:
            value = await _key_ref(frm.secret_key_ref, objects, namespace, secret=True)
        elif frm.file_key_ref is not None and env_files is not None:
            value = _file_key_ref(frm.file_key_ref, env_files, pod)
        else:
            value = ""
        if value is None:  # optional and missing: whatever was there stays
            continue
        values[var.name] = value

    env = list(values.items())
    env.extend((k, v) for k, v in services.items() if k not in values)
    return EnvResult(env=env, warnings=warnings)


POD_IP_FIELDS = frozenset({"status.podIP", "status.podIPs"})


def needs_pod_ip(container: Container) -> bool:
    """Whether the container's environment reads the pod's IP (``status.podIP`` or
    ``status.podIPs``): only then must it wait for the sandbox to be resolved."""
    return any(
        var.value_from is not None
        and var.value_from.field_ref is not None
        and var.value_from.field_ref.field_path in POD_IP_FIELDS
        for var in container.env
    )


def expand_command(
    container: Container, env: Sequence[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """``command`` and ``args`` with ``$(NAME)`` expanded against the resolved env.

    Upstream's ``ExpandContainerCommandAndArgs``; a name given twice uses its last value.
    Both share one expansion budget; ``EnvError`` when they would pass it.
    """
    mapping = dict(env)
    budget = ExpansionBudget()
    try:
        return expand_all(container.command, mapping, budget), expand_all(
            container.args, mapping, budget
        )
    except ExpansionTooLarge as exc:
        raise _fail(
            f"cannot expand the command and args of container {container.name}: {exc}"
        ) from None


async def resolve_command(
    container: Container, env: Sequence[tuple[str, str]], run_sync: RunSync = in_thread
) -> tuple[list[str], list[str]]:
    """``expand_command``, in a worker thread (``run_sync``) when it has many references."""
    refs = sum(text.count("$") for text in (*container.command, *container.args))
    if refs > OFFLOAD_REFERENCES:
        return await run_sync(lambda: expand_command(container, env))
    return expand_command(container, env)


class _Expander:
    """One container's env values expanded against one budget; a value with many
    references in a worker thread, and the event loop given a turn between values
    whose references add up (their text between references is copied at C speed)."""

    def __init__(self, run_sync: RunSync) -> None:
        self.budget = ExpansionBudget()
        self.run_sync = run_sync
        self.references = 0

    async def expand(self, text: str, env: Mapping[str, str], what: str) -> str:
        refs = text.count("$")
        try:
            if refs > OFFLOAD_REFERENCES:
                return await self.run_sync(lambda: expand(text, env, budget=self.budget))
            self.references += refs
            if self.references > OFFLOAD_REFERENCES:
                self.references = 0
                await trio.lowlevel.checkpoint()
            return expand(text, env, budget=self.budget)
        except ExpansionTooLarge as exc:
            raise _fail(f"cannot expand {what}: {exc}") from None
