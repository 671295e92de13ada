"""Container environment resolution, checked against upstream's behaviour and tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import pytest

from kubelet.api import (
    Container,
    EnvFromSource,
    FileKeySelector,
    KeySelector,
    ObjectFieldSelector,
    ObjectMeta,
    Pod,
    PodSpec,
    Quantity,
    ResourceFieldSelector,
    ResourceRequirements,
)
from kubelet.api.pod import EnvVar, EnvVarSource
from kubelet.env import (
    CREATE_CONTAINER_CONFIG_ERROR,
    EnvError,
    expand_env,
    needs_pod_ip,
    pod_field_value,
    resolve_env,
    resource_field_value,
)
from kubelet.env.variables import EnvResult, expand, expand_command
from kubelet.testing.builders import make_pod

T = TypeVar("T")

NS = "ns1"
ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi"}


class FakeLookup:
    """ConfigMaps and Secrets by (namespace, name); records every fetch."""

    def __init__(
        self,
        config_maps: Mapping[str, Mapping[str, str]] | None = None,
        secrets: Mapping[str, Mapping[str, bytes]] | None = None,
    ) -> None:
        self.config_maps = dict(config_maps or {})
        self.secrets = dict(secrets or {})
        self.fetches: list[tuple[str, str, str]] = []

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        self.fetches.append(("configmap", namespace, name))
        return self.config_maps.get(name) if namespace == NS else None

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        self.fetches.append(("secret", namespace, name))
        return self.secrets.get(name) if namespace == NS else None


class FakeEnvFiles:
    """Env files by (volume, path); a missing one fails as an unreadable file does."""

    def __init__(self, files: Mapping[tuple[str, str], bytes]) -> None:
        self.files = dict(files)
        self.reads: list[tuple[str, str]] = []

    def read(self, volume: str, path: str) -> tuple[str, bytes]:
        self.reads.append((volume, path))
        if (volume, path) not in self.files:
            raise EnvError(CREATE_CONTAINER_CONFIG_ERROR, "couldn't parse env file")
        return f"/v/{volume}/{path}", self.files[volume, path]


def dapi_pod(
    *containers: Container,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Pod:
    return make_pod(
        *containers,
        name="dapi",
        namespace=NS,
        labels=labels,
        annotations=annotations,
        node_name="node-a",
        service_account_name="sa",
    )


def field(path: str, version: str = "") -> EnvVarSource:
    return EnvVarSource(field_ref=ObjectFieldSelector(field_path=path, api_version=version))


def resource(res: str, divisor: str | None = None, container: str = "") -> EnvVarSource:
    return EnvVarSource(
        resource_field_ref=ResourceFieldSelector(
            resource=res,
            container_name=container,
            divisor=Quantity(divisor) if divisor is not None else None,
        )
    )


def requirements(
    requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


async def resolve(
    container: Container,
    pod: Pod | None = None,
    *,
    lookup: FakeLookup | None = None,
    service_env: Mapping[str, str] | None = None,
    host_ips: tuple[str, ...] = ("10.0.0.1", "fd00::1"),
    pod_ips: tuple[str, ...] = ("10.1.0.5", "fd01::5"),
    strict_names: bool = False,
    env_files: FakeEnvFiles | None = None,
) -> EnvResult:
    return await resolve_env(
        pod if pod is not None else dapi_pod(container),
        container,
        node_name="node-a",
        host_ips=host_ips,
        pod_ips=pod_ips,
        node_allocatable=ALLOCATABLE,
        lookup=lookup,
        service_env=service_env,
        strict_names=strict_names,
        env_files=env_files,
    )


# -- $(VAR) expansion: upstream's expand_test.go table ----------------------------------------

EXPANSION_CONTEXT = {
    "VAR_A": "A",
    "VAR_B": "B",
    "VAR_C": "C",
    "VAR_REF": "$(VAR_A)",
    "VAR_EMPTY": "",
}
EXPANSION_CASES = [
    ("$(VAR_A)", "A"),
    ("$(VAR_A)-$(VAR_A)", "A-A"),
    ("$(VAR_A)-1", "A-1"),
    ("___$(VAR_B)___", "___B___"),
    ("___$(VAR_C)", "___C"),
    ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
    ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
    ("f000-$$VAR_A", "f000-$VAR_A"),
    ("foo\\$(VAR_C)bar", "foo\\Cbar"),
    ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
    ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
    ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
    ("$(VAR_REF)", "$(VAR_A)"),
    ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
    ("foo$(VAR_EMPTY)bar", "foobar"),
    ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
    ("f00__(VAR_A)__", "f00__(VAR_A)__"),
    ("$?_boo_$!", "$?_boo_$!"),
    ("$VAR_A", "$VAR_A"),
    ("$(VAR_DNE)", "$(VAR_DNE)"),
    ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
    ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
    ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
    ("$$$$$$$(VAR_A)", "$$$A"),
    ("$VAR_A)", "$VAR_A)"),
    ("${VAR_A}", "${VAR_A}"),
    ("$(VAR_B)_______$(A", "B_______$(A"),
    ("$(VAR_C)_______$(", "C_______$("),
    ("$(VAR_A)foobarzab$", "Afoobarzab$"),
    ("foo-\\$(VAR_A", "foo-\\$(VAR_A"),
    ("--$($($($($--", "--$($($($($--"),
    ("$($($($($--foo$(", "$($($($($--foo$("),
    ("foo0--$($($($(", "foo0--$($($($("),
    ("$(foo$$var)", "$(foo$$var)"),
    ("\n", "\n"),
    ("$é$(VAR_A)", "$éA"),
    ("", ""),
    ("$", "$"),
]


@pytest.mark.parametrize(("text", "expected"), EXPANSION_CASES)
def test_expand_matches_upstream_table(text: str, expected: str) -> None:
    assert expand(text, EXPANSION_CONTEXT) == expected
    # configs.expand_env is the same function; keep it honest should they ever diverge.
    assert expand_env(text, EXPANSION_CONTEXT) == expected


# -- fieldRef ----------------------------------------------------------------------------------

FIELD_POD = dapi_pod(
    Container(name="c"),
    labels={"app": "web", "tier": "front"},
    annotations={"note": 'say "hi"\n', "example.com/owner": "me"},
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "dapi"),
        ("metadata.namespace", NS),
        ("metadata.uid", "uid-1"),
        ("metadata.labels['app']", "web"),
        ("metadata.labels['missing']", ""),
        ("metadata.annotations['example.com/owner']", "me"),
        ("metadata.labels", 'app="web"\ntier="front"'),
        ("metadata.annotations", 'example.com/owner="me"\nnote="say \\"hi\\"\\n"'),
        ("spec.nodeName", "node-a"),
        ("spec.host", "node-a"),
        ("spec.serviceAccountName", "sa"),
        ("status.hostIP", "10.0.0.1"),
        ("status.hostIPs", "10.0.0.1,fd00::1"),
        ("status.podIP", "10.1.0.5"),
        ("status.podIPs", "10.1.0.5,fd01::5"),
    ],
)
def test_field_ref_values(path: str, expected: str) -> None:
    selector = ObjectFieldSelector(field_path=path, api_version="v1")
    value = pod_field_value(
        selector, FIELD_POD, host_ips=("10.0.0.1", "fd00::1"), pod_ips=("10.1.0.5", "fd01::5")
    )
    assert value == expected


def test_pod_ips_follow_the_node_family() -> None:
    """An IPv6-first node puts the pod's IPv6 address first; one IP per family."""
    pod_ips = ("10.1.0.5", "10.1.0.6", "fd01::5")

    def value(path: str, host_ips: tuple[str, ...]) -> str:
        return pod_field_value(
            ObjectFieldSelector(field_path=path), FIELD_POD, host_ips=host_ips, pod_ips=pod_ips
        )

    assert value("status.podIP", ("fd00::1", "10.0.0.1")) == "fd01::5"
    assert value("status.podIPs", ("fd00::1", "10.0.0.1")) == "fd01::5,10.1.0.5"
    assert value("status.podIPs", ("10.0.0.1",)) == "10.1.0.5,fd01::5"
    assert value("status.podIP", ()) == "10.1.0.5"
    assert pod_field_value(ObjectFieldSelector(field_path="status.podIP"), FIELD_POD) == ""


def test_node_name_falls_back_when_the_pod_has_none() -> None:
    pod = Pod(metadata=ObjectMeta(name="p", namespace=NS), spec=PodSpec())
    selector = ObjectFieldSelector(field_path="spec.nodeName")
    assert pod_field_value(selector, pod, node_name="node-b") == "node-b"


@pytest.mark.parametrize(
    ("path", "version", "message"),
    [
        ("metadata.name", "v2", "unsupported pod version: v2"),
        ("spec.containers", "v1", "field label not supported: spec.containers"),
        ("metadata.generateName", "", "field label not supported: metadata.generateName"),
        ("spec.nodeName['x']", "v1", "field label does not support subscript: spec.nodeName['x']"),
        ("status.phase", "v1", "unsupported fieldPath: status.phase"),
        ("spec.restartPolicy", "v1", "unsupported fieldPath: spec.restartPolicy"),
    ],
)
def test_field_ref_errors(path: str, version: str, message: str) -> None:
    with pytest.raises(EnvError) as info:
        pod_field_value(ObjectFieldSelector(field_path=path, api_version=version), FIELD_POD)
    assert info.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert info.value.message == message
    assert str(info.value) == message


def test_field_ref_rejects_invalid_subscripts() -> None:
    selector = ObjectFieldSelector(field_path="metadata.labels['-bad-']")
    with pytest.raises(EnvError, match=r"^invalid key subscript in metadata\.labels\['-bad-'\]: "):
        pod_field_value(selector, FIELD_POD)
    selector = ObjectFieldSelector(field_path="metadata.annotations['a/b/c']")
    with pytest.raises(EnvError, match="a qualified name must consist of"):
        pod_field_value(selector, FIELD_POD)
    # Annotation keys are checked lower-cased, so an upper-case prefix is fine there.
    selector = ObjectFieldSelector(field_path="metadata.annotations['Example.com/Owner']")
    assert pod_field_value(selector, FIELD_POD) == ""
    selector = ObjectFieldSelector(field_path="metadata.labels['Example.com/Owner']")
    with pytest.raises(EnvError, match="prefix part a lowercase RFC 1123 subdomain"):
        pod_field_value(selector, FIELD_POD)


def test_host_ip_unknown_is_an_error() -> None:
    with pytest.raises(EnvError, match="host IP unknown"):
        pod_field_value(ObjectFieldSelector(field_path="status.hostIP"), FIELD_POD)


# -- resourceFieldRef -------------------------------------------------------------------------

LIMITED = Container(
    name="limited",
    resources=requirements(
        requests={"cpu": "250m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
        limits={"cpu": "1500m", "memory": "128Mi", "ephemeral-storage": "2Gi"},
    ),
)
UNLIMITED = Container(name="unlimited", resources=requirements(requests={"cpu": "100m"}))
ZERO_LIMIT = Container(name="zero", resources=requirements(limits={"cpu": "0", "memory": "0"}))
INIT = Container(name="init", resources=requirements(requests={"memory": "1Mi"}))
RES_POD = Pod(
    metadata=ObjectMeta(name="p", namespace=NS),
    spec=PodSpec(containers=(LIMITED, UNLIMITED, ZERO_LIMIT), init_containers=(INIT,)),
)


@pytest.mark.parametrize(
    ("container", "res", "divisor", "expected"),
    [
        (LIMITED, "limits.cpu", None, "2"),  # 1.5 cores rounds up
        (LIMITED, "limits.cpu", "1m", "1500"),
        (LIMITED, "limits.cpu", "0", "2"),  # zero divisor means 1
        (LIMITED, "limits.cpu", "1", "2"),
        (LIMITED, "requests.cpu", None, "1"),
        (LIMITED, "requests.cpu", "1m", "250"),
        (LIMITED, "requests.cpu", "100m", "3"),
        (LIMITED, "limits.memory", None, str(128 * 2**20)),
        (LIMITED, "limits.memory", "1Mi", "128"),
        (LIMITED, "limits.memory", "1M", "135"),  # 134.2 MB rounds up
        (LIMITED, "requests.memory", "1Ki", "65536"),
        (LIMITED, "requests.memory", "1Gi", "1"),
        (LIMITED, "limits.ephemeral-storage", "1Gi", "2"),
        (LIMITED, "requests.ephemeral-storage", "1Mi", "1024"),
        # No limit: node allocatable stands in.
        (UNLIMITED, "limits.cpu", None, "4"),
        (UNLIMITED, "limits.cpu", "1m", "4000"),
        (UNLIMITED, "limits.memory", "1Gi", "8"),
        (UNLIMITED, "limits.ephemeral-storage", "1Gi", "100"),
        (ZERO_LIMIT, "limits.cpu", None, "4"),
        (ZERO_LIMIT, "limits.memory", "1Mi", "8192"),
        # No request: zero, never allocatable.
        (UNLIMITED, "requests.memory", None, "0"),
        (UNLIMITED, "requests.cpu", "1m", "100"),
        (UNLIMITED, "limits.hugepages-2Mi", None, "0"),
    ],
)
def test_resource_field_ref_values(
    container: Container, res: str, divisor: str | None, expected: str
) -> None:
    selector = ResourceFieldSelector(
        resource=res, divisor=Quantity(divisor) if divisor is not None else None
    )
    assert resource_field_value(selector, RES_POD, container, ALLOCATABLE) == expected


def test_resource_field_ref_by_container_name() -> None:
    selector = ResourceFieldSelector(resource="limits.memory", container_name="limited")
    assert resource_field_value(selector, RES_POD, UNLIMITED, ALLOCATABLE) == str(128 * 2**20)
    # Another app container gets the allocatable default too ...
    selector = ResourceFieldSelector(resource="limits.cpu", container_name="unlimited")
    assert resource_field_value(selector, RES_POD, LIMITED, ALLOCATABLE) == "4"
    # ... an init container named from elsewhere does not (as upstream).
    selector = ResourceFieldSelector(resource="limits.cpu", container_name="init")
    assert resource_field_value(selector, RES_POD, LIMITED, ALLOCATABLE) == "0"
    selector = ResourceFieldSelector(
        resource="requests.memory", container_name="init", divisor=Quantity("1Ki")
    )
    assert resource_field_value(selector, RES_POD, LIMITED, ALLOCATABLE) == "1024"
    # The init container itself, reading its own limits, is defaulted.
    selector = ResourceFieldSelector(resource="limits.cpu")
    assert resource_field_value(selector, RES_POD, INIT, ALLOCATABLE) == "4"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            ResourceFieldSelector(resource="limits.cpu", container_name="ghost"),
            "container ghost not found",
        ),
        (
            ResourceFieldSelector(resource="limits.nvidia.com/gpu"),
            "unsupported container resource : limits.nvidia.com/gpu",
        ),
        (ResourceFieldSelector(resource="cpu"), "unsupported container resource : cpu"),
    ],
)
def test_resource_field_ref_errors(selector: ResourceFieldSelector, message: str) -> None:
    with pytest.raises(EnvError) as info:
        resource_field_value(selector, RES_POD, LIMITED, ALLOCATABLE)
    assert info.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert info.value.message == message


def test_resource_field_ref_bad_divisor() -> None:
    selector = ResourceFieldSelector(resource="limits.cpu", divisor=Quantity("lots"))
    with pytest.raises(EnvError):
        resource_field_value(selector, RES_POD, LIMITED, ALLOCATABLE)


# -- the whole environment ----------------------------------------------------------------------


async def test_values_expand_against_earlier_definitions_only() -> None:
    container = Container(
        name="c",
        env=(
            EnvVar(name="FOO", value="bar"),
            EnvVar(name="ZOO", value="$(FOO)-1"),
            EnvVar(name="BLU", value="$(ZOO)-2"),
            EnvVar(name="EARLY", value="$(LATE)"),
            EnvVar(name="LATE", value="x"),
            EnvVar(name="ESC", value="$$(FOO) $(NOPE) $$$(FOO)"),
            EnvVar(name="EMPTY"),
        ),
    )
    result = await resolve(container)
    assert result.env == [
        ("FOO", "bar"),
        ("ZOO", "bar-1"),
        ("BLU", "bar-1-2"),
        ("EARLY", "$(LATE)"),
        ("LATE", "x"),
        ("ESC", "$(FOO) $(NOPE) $bar"),
        ("EMPTY", ""),
    ]
    assert result.warnings == []


async def test_expanded_values_are_not_expanded_again() -> None:
    container = Container(
        name="c",
        env=(
            EnvVar(name="A", value="$$(B)"),  # becomes the literal "$(B)"
            EnvVar(name="B", value="b"),
            EnvVar(name="C", value="$(A)"),
        ),
    )
    assert dict((await resolve(container)).env)["C"] == "$(B)"


async def test_field_and_resource_refs_in_env() -> None:
    container = Container(
        name="c",
        resources=requirements(limits={"memory": "64Mi"}),
        env=(
            EnvVar(name="POD_NAME", value_from=field("metadata.name")),
            EnvVar(name="POD_IP", value_from=field("status.podIP", "v1")),
            EnvVar(name="MEM", value_from=resource("limits.memory", "1Mi")),
            EnvVar(name="CPU", value_from=resource("limits.cpu", "1m")),
            EnvVar(name="WHO", value="$(POD_NAME)@$(POD_IP)"),
        ),
    )
    result = await resolve(container)
    assert result.env == [
        ("POD_NAME", "dapi"),
        ("POD_IP", "10.1.0.5"),
        ("MEM", "64"),
        ("CPU", "4000"),
        ("WHO", "dapi@10.1.0.5"),
    ]


async def test_field_ref_error_propagates() -> None:
    container = Container(name="c", env=(EnvVar(name="X", value_from=field("status.phase")),))
    with pytest.raises(EnvError, match=r"^unsupported fieldPath: status\.phase$"):
        await resolve(container)


async def test_key_refs() -> None:
    lookup = FakeLookup(
        config_maps={"cfg": {"level": "debug"}},
        secrets={"creds": {"password": b"s3cr\xc3\xa9t"}},
    )
    container = Container(
        name="c",
        env=(
            EnvVar(
                name="LEVEL",
                value_from=EnvVarSource(config_map_key_ref=KeySelector(name="cfg", key="level")),
            ),
            EnvVar(
                name="PASS",
                value_from=EnvVarSource(secret_key_ref=KeySelector(name="creds", key="password")),
            ),
            EnvVar(
                name="LEVEL2",
                value_from=EnvVarSource(config_map_key_ref=KeySelector(name="cfg", key="level")),
            ),
        ),
    )
    result = await resolve(container, lookup=lookup)
    assert result.env == [("LEVEL", "debug"), ("PASS", "s3crét"), ("LEVEL2", "debug")]
    # Each object is fetched once per resolution.
    assert lookup.fetches == [("configmap", NS, "cfg"), ("secret", NS, "creds")]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            EnvVarSource(config_map_key_ref=KeySelector(name="nope", key="k")),
            'configmap "nope" not found',
        ),
        (
            EnvVarSource(config_map_key_ref=KeySelector(name="cfg", key="absent")),
            f"couldn't find key absent in ConfigMap {NS}/cfg",
        ),
        (
            EnvVarSource(secret_key_ref=KeySelector(name="nope", key="k")),
            'secret "nope" not found',
        ),
        (
            EnvVarSource(secret_key_ref=KeySelector(name="creds", key="absent")),
            f"couldn't find key absent in Secret {NS}/creds",
        ),
    ],
)
async def test_missing_key_refs_fail(source: EnvVarSource, message: str) -> None:
    lookup = FakeLookup(config_maps={"cfg": {"k": "v"}}, secrets={"creds": {"k": b"v"}})
    container = Container(name="c", env=(EnvVar(name="X", value_from=source),))
    with pytest.raises(EnvError) as info:
        await resolve(container, lookup=lookup)
    assert info.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert info.value.message == message


async def test_optional_missing_key_refs_are_skipped() -> None:
    lookup = FakeLookup(config_maps={"cfg": {"k": "v", "X": "from-envfrom"}})
    optional = True
    container = Container(
        name="c",
        env_from=(EnvFromSource(config_map_ref={"name": "cfg"}),),
        env=(
            EnvVar(
                name="X",  # defined by envFrom; an optional miss leaves that value alone
                value_from=EnvVarSource(
                    config_map_key_ref=KeySelector(name="cfg", key="absent", optional=optional)
                ),
            ),
            EnvVar(
                name="Y",
                value_from=EnvVarSource(
                    config_map_key_ref=KeySelector(name="nope", key="k", optional=optional)
                ),
            ),
            EnvVar(
                name="Z",
                value_from=EnvVarSource(
                    secret_key_ref=KeySelector(name="nope", key="k", optional=optional)
                ),
            ),
        ),
    )
    result = await resolve(container, lookup=lookup)
    assert result.env == [("k", "v"), ("X", "from-envfrom")]


async def test_refs_without_api_access_fail() -> None:
    container = Container(
        name="c",
        env=(
            EnvVar(
                name="X",
                value_from=EnvVarSource(
                    config_map_key_ref=KeySelector(name="cfg", key="k", optional=True)
                ),
            ),
        ),
    )
    with pytest.raises(EnvError, match=f"^couldn't get configMap {NS}/cfg, no kubeClient defined$"):
        await resolve(container)
    container = Container(name="c", env_from=(EnvFromSource(secret_ref={"name": "s"}),))
    with pytest.raises(EnvError, match=f"^couldn't get secret {NS}/s, no kubeClient defined$"):
        await resolve(container)


async def test_env_from_order_prefix_and_override() -> None:
    lookup = FakeLookup(
        config_maps={"one": {"A": "1", "B": "1"}, "two": {"B": "2", "C": "2"}},
        secrets={"sec": {"TOKEN": b"t", "B": b"s"}},
    )
    container = Container(
        name="c",
        env_from=(
            EnvFromSource(config_map_ref={"name": "one"}),
            EnvFromSource(config_map_ref={"name": "two"}),
            EnvFromSource(prefix="S_", secret_ref={"name": "sec"}),
        ),
        env=(
            EnvVar(name="C", value="env-$(A)"),  # env beats envFrom, keeps the first slot
            EnvVar(name="D", value="$(S_TOKEN)"),
            EnvVar(name="A", value="again"),
        ),
    )
    result = await resolve(container, lookup=lookup)
    assert result.env == [
        ("A", "again"),
        ("B", "2"),
        ("C", "env-1"),
        ("S_TOKEN", "t"),
        ("S_B", "s"),
        ("D", "t"),
    ]
    assert result.warnings == []


async def test_env_from_missing_objects() -> None:
    lookup = FakeLookup()
    container = Container(name="c", env_from=(EnvFromSource(config_map_ref={"name": "gone"}),))
    with pytest.raises(EnvError, match=r'^configmap "gone" not found$'):
        await resolve(container, lookup=lookup)
    container = Container(name="c", env_from=(EnvFromSource(secret_ref={"name": "gone"}),))
    with pytest.raises(EnvError, match=r'^secret "gone" not found$'):
        await resolve(container, lookup=lookup)
    container = Container(
        name="c",
        env_from=(
            EnvFromSource(config_map_ref={"name": "gone", "optional": True}),
            EnvFromSource(secret_ref={"name": "gone", "optional": True}),
        ),
        env=(EnvVar(name="X", value="x"),),
    )
    assert (await resolve(container, lookup=lookup)).env == [("X", "x")]


async def test_env_from_invalid_keys_are_skipped_with_a_warning() -> None:
    lookup = FakeLookup(
        config_maps={"cfg": {"1234": "abc", "1z": "abc", "key": "value", "a=b": "x"}},
        secrets={"sec": {"ok": b"1", "bad=key": b"2"}},
    )
    container = Container(
        name="c",
        env_from=(
            EnvFromSource(config_map_ref={"name": "cfg"}),
            EnvFromSource(secret_ref={"name": "sec"}),
        ),
    )
    relaxed = await resolve(container, lookup=lookup)
    assert relaxed.env == [("1234", "abc"), ("1z", "abc"), ("key", "value"), ("ok", "1")]
    assert relaxed.warnings == [
        f"Keys [a=b] from the EnvFrom configMap {NS}/cfg were skipped since they are "
        "considered invalid environment variable names.",
        f"Keys [bad=key] from the EnvFrom secret {NS}/sec were skipped since they are "
        "considered invalid environment variable names.",
    ]
    strict = await resolve(container, lookup=lookup, strict_names=True)
    assert strict.env == [("key", "value"), ("ok", "1")]
    assert strict.warnings[0] == (
        f"Keys [1234, 1z, a=b] from the EnvFrom configMap {NS}/cfg were skipped since they "
        "are considered invalid environment variable names."
    )


async def test_prefix_can_make_keys_valid() -> None:
    lookup = FakeLookup(config_maps={"cfg": {"1234": "abc", "..x": "y"}})
    container = Container(
        name="c", env_from=(EnvFromSource(prefix="p_", config_map_ref={"name": "cfg"}),)
    )
    result = await resolve(container, lookup=lookup, strict_names=True)
    assert result.env == [("p_1234", "abc"), ("p_..x", "y")]
    assert result.warnings == []
    container = Container(name="c", env_from=(EnvFromSource(config_map_ref={"name": "cfg"}),))
    result = await resolve(container, lookup=lookup, strict_names=True)
    assert result.env == []
    assert result.warnings[0].startswith("Keys [..x, 1234] from")


async def test_service_env_is_referencable_and_comes_last() -> None:
    services = {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "DB_SERVICE_HOST": "10.96.0.9",
    }
    container = Container(
        name="c",
        env=(
            EnvVar(
                name="URL", value="https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"
            ),
            EnvVar(name="DB_SERVICE_HOST", value="override"),
        ),
    )
    result = await resolve(container, service_env=services)
    assert result.env == [
        ("URL", "https://10.96.0.1:443"),
        ("DB_SERVICE_HOST", "override"),
        ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
    ]


async def test_own_definitions_shadow_service_env_in_expansion() -> None:
    container = Container(
        name="c",
        env=(
            EnvVar(name="HOST", value="mine"),
            EnvVar(name="SEE", value="$(HOST)"),
        ),
    )
    result = await resolve(container, service_env={"HOST": "svc"})
    assert dict(result.env) == {"HOST": "mine", "SEE": "mine"}


async def test_duplicate_names_keep_first_position_and_last_value() -> None:
    container = Container(
        name="c",
        env=(
            EnvVar(name="A", value="1"),
            EnvVar(name="B", value="$(A)"),
            EnvVar(name="A", value="$(A)2"),
        ),
    )
    assert (await resolve(container)).env == [("A", "12"), ("B", "1")]


# -- fileKeyRef ------------------------------------------------------------------------------


def file_key(key: str, path: str = "config.env", optional: bool | None = None) -> EnvVarSource:
    return EnvVarSource(
        file_key_ref=FileKeySelector(volume_name="cfg", path=path, key=key, optional=optional)
    )


ENV_FILE = b"# written by the init container\nCOLOR='blue'\nEMPTY=''\nMULTI='a\nb'\n"


async def test_file_key_refs() -> None:
    files = FakeEnvFiles({("cfg", "config.env"): ENV_FILE})
    container = Container(
        name="c",
        env=(
            EnvVar(name="COLOR", value_from=file_key("COLOR")),
            EnvVar(name="MULTI", value_from=file_key("MULTI")),
            EnvVar(name="SHADE", value="light $(COLOR)"),
        ),
    )
    result = await resolve(container, env_files=files)
    assert result.env == [("COLOR", "blue"), ("MULTI", "a\nb"), ("SHADE", "light blue")]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (file_key("NOPE"), 'environment variable key "NOPE" not found in file "/v/cfg/config.env"'),
        # upstream cannot tell an empty value from a missing key
        (
            file_key("EMPTY"),
            'environment variable key "EMPTY" not found in file "/v/cfg/config.env"',
        ),
        # optional covers the key only: an unreadable file fails the container anyway
        (file_key("COLOR", path="missing.env", optional=True), "couldn't parse env file"),
        (file_key("COLOR", path="broken.env", optional=True), "couldn't parse env file"),
        (
            file_key("COLOR", path="/etc/shadow"),
            'invalid path "/etc/shadow" in FileKeyRef: must be a relative path',
        ),
        (
            file_key("COLOR", path="../../x"),
            "invalid path \"../../x\" in FileKeyRef: must not contain '..'",
        ),
    ],
)
async def test_file_key_ref_failures(source: EnvVarSource, message: str) -> None:
    files = FakeEnvFiles({("cfg", "config.env"): ENV_FILE, ("cfg", "broken.env"): b"COLOR=blue\n"})
    container = Container(name="c", env=(EnvVar(name="X", value_from=source),))
    with pytest.raises(EnvError) as info:
        await resolve(container, env_files=files)
    assert (info.value.reason, info.value.message) == (CREATE_CONTAINER_CONFIG_ERROR, message)
    assert all(not path.startswith(("/", "..")) for _, path in files.reads)


async def test_optional_missing_file_keys_are_skipped() -> None:
    files = FakeEnvFiles({("cfg", "config.env"): ENV_FILE})
    container = Container(
        name="c",
        env=(
            EnvVar(name="X", value="before"),
            EnvVar(name="X", value_from=file_key("NOPE", optional=True)),  # X stays
            EnvVar(name="Y", value_from=file_key("EMPTY", optional=True)),  # never set
        ),
    )
    assert (await resolve(container, env_files=files)).env == [("X", "before")]


async def test_file_key_refs_without_the_gate_are_empty() -> None:
    """EnvFiles off: upstream's kubelet skips the source and sets the variable to ""."""
    container = Container(name="c", env=(EnvVar(name="COLOR", value_from=file_key("COLOR")),))
    assert (await resolve(container)).env == [("COLOR", "")]


# -- command and args -------------------------------------------------------------------------


def test_expand_command() -> None:
    container = Container(
        name="c",
        command=("/bin/sh", "-c", "echo $(MSG) $$(MSG) $(UNSET)"),
        args=("$(MSG)", "$$HOME", "--flag=$(N)"),
    )
    env = [("MSG", "hello"), ("N", "1"), ("N", "2")]
    command, args = expand_command(container, env)
    assert command == ["/bin/sh", "-c", "echo hello $(MSG) $(UNSET)"]
    assert args == ["hello", "$HOME", "--flag=2"]
    assert expand_command(Container(name="c"), env) == ([], [])


# -- bounds on expansion ------------------------------------------------------------------------


def _doubling(depth: int, base: str) -> tuple[EnvVar, ...]:
    """``A0=base``, then each ``Ai=$(Ai-1)$(Ai-1)``: the value doubles at every step."""
    env = [EnvVar(name="A0", value=base)]
    env += [EnvVar(name=f"A{i}", value=f"$(A{i - 1})$(A{i - 1})") for i in range(1, depth)]
    return tuple(env)


async def test_a_value_that_doubles_past_the_bound_fails_the_container() -> None:
    # A10 is 1 Mi characters (the bound itself), A11 would be 2 Mi.
    container = Container(name="c", env=_doubling(12, "x" * 1024))
    with pytest.raises(EnvError) as caught:
        await resolve(container)
    assert caught.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert caught.value.message == (
        "cannot expand environment variable A11: the expanded value would be longer than "
        "1048576 characters"
    )


async def test_an_expansion_bomb_fails_at_once_without_growing() -> None:
    # 2 KB of pod: 40 doublings would be 2^39 characters; refused at the bound.
    container = Container(name="c", env=_doubling(40, "x"))
    with pytest.raises(EnvError, match="environment variable A21: the expanded value"):
        await resolve(container)


async def test_values_together_are_bounded_per_container() -> None:
    big = "y" * 1000_000
    env = (EnvVar(name="BIG", value=big), *(EnvVar(name=f"V{i}", value="$(BIG)") for i in range(5)))
    with pytest.raises(EnvError) as caught:
        await resolve(Container(name="c", env=env))
    assert caught.value.message == (
        "cannot expand environment variable V3: the expanded values together would be "
        "longer than 4194304 characters"
    )


async def test_a_value_with_many_references_is_expanded_off_the_event_loop() -> None:
    ran: list[str] = []

    async def record(fn: Callable[[], T]) -> T:
        ran.append("thread")
        return fn()

    many = "$(A)" * 5000
    container = Container(name="c", env=(EnvVar(name="A", value="a"), EnvVar(name="B", value=many)))
    result = await resolve_env(
        dapi_pod(container),
        container,
        node_name="node-a",
        host_ips=(),
        pod_ips=(),
        node_allocatable=ALLOCATABLE,
        run_sync=record,
    )
    assert dict(result.env)["B"] == "a" * 5000
    assert ran == ["thread"]


def test_command_and_args_share_one_bound() -> None:
    env = [("BIG", "z" * 1000_000)]
    container = Container(name="c", command=("$(BIG)",) * 3, args=("$(BIG)",) * 2)
    with pytest.raises(EnvError) as caught:
        expand_command(container, env)
    assert caught.value.reason == CREATE_CONTAINER_CONFIG_ERROR
    assert caught.value.message == (
        "cannot expand the command and args of container c: the expanded values together "
        "would be longer than 4194304 characters"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("$", "$"),
        ("a$", "a$"),
        ("$$", "$"),
        ("$(A", "$(A"),
        ("x$(A)y$zz", "x1y$zz"),
        ("$$$", "$$"),
        ("a$$b$", "a$b$"),
        ("$$(A)", "$(A)"),
    ],
)
def test_expansion_edges(text: str, expected: str) -> None:
    assert expand_env(text, {"A": "1"}) == expected


@pytest.mark.parametrize(
    ("path", "needed"),
    [
        ("status.podIP", True),
        ("status.podIPs", True),
        ("status.hostIP", False),
        ("spec.nodeName", False),
    ],
)
def test_only_the_pods_ip_fields_wait_for_the_sandbox(path: str, needed: bool) -> None:
    container = Container(
        name="c", env=[EnvVar(name="A", value="x"), EnvVar(name="B", value_from=field(path))]
    )
    assert needs_pod_ip(container) is needed
    assert not needs_pod_ip(Container(name="c", env=[EnvVar(name="A", value="$(B)")]))
