"""CRI config builders and the runtime view parsed back from CRI answers."""

from __future__ import annotations

import json

import attrs
import pytest

from kubelet.api import (
    Capabilities,
    Container,
    ContainerPort,
    ExecAction,
    HTTPGetAction,
    LifecycleHandler,
    ObjectFieldSelector,
    ObjectMeta,
    Pod,
    Quantity,
    ResourceRequirements,
)
from kubelet.api.pod import (
    EnvVar,
    EnvVarSource,
    HTTPHeader,
    Lifecycle,
    PodSecurityContext,
    SecurityContext,
)
from kubelet.cgroups import milli_cpu_to_quota, milli_cpu_to_shares
from kubelet.config import KubeletConfiguration
from kubelet.cri import (
    ContainerInfo,
    ContainerRunState,
    RuntimePodStatus,
    SandboxState,
    api,
    container_info_from_cri,
    sandbox_info_from_cri,
)
from kubelet.decisions import (
    ContainerLimits,
    container_config,
    container_limits,
    next_restart_count,
    pod_cgroup_parent,
    pod_log_directory,
    restart_count_from_logs,
    sandbox_config,
)
from kubelet.decisions.criconfig import (
    DEFAULT_MASKED_PATHS,
    container_annotations,
    container_labels,
    container_log_path,
    linux_container_resources,
    namespace_options,
    overhead_resources,
    sandbox_labels,
)
from kubelet.decisions.hash import hash_container
from kubelet.env import PodHostnameError, expand_env
from kubelet.env.hosts import pod_hostname
from kubelet.testing import builders

UID = "8f1c2d3e-aaaa-bbbb-cccc-000000000001"
GiB = 2**30


def res(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> ResourceRequirements:
    return ResourceRequirements(
        requests={k: Quantity(v) for k, v in (requests or {}).items()},
        limits={k: Quantity(v) for k, v in (limits or {}).items()},
    )


def make_pod(*containers: Container, **spec: object) -> Pod:
    return builders.make_pod(
        *(containers or (Container(name="c", image="busybox"),)),
        namespace="prod",
        uid=UID,
        labels={"app": "web"},
        annotations={"kubernetes.io/config.source": "api", "note": "x"},
        **spec,
    )


# -- names, paths, cgroups ----------------------------------------------------------------


def test_log_paths() -> None:
    pod = make_pod()
    assert pod_log_directory(pod) == f"/var/log/pods/prod_web_{UID}"
    assert pod_log_directory(pod, "/logs") == f"/logs/prod_web_{UID}"
    assert container_log_path("nginx", 3) == "nginx/3.log"


@pytest.mark.parametrize(
    ("resources", "parent"),
    [
        (None, f"/kubepods/besteffort/pod{UID}"),
        (res({"cpu": "100m"}), f"/kubepods/burstable/pod{UID}"),
        (res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}), f"/kubepods/pod{UID}"),
    ],
)
def test_cgroup_parent_by_qos(resources: ResourceRequirements | None, parent: str) -> None:
    pod = make_pod(Container(name="c", resources=resources))
    assert pod_cgroup_parent(pod) == parent
    assert pod_cgroup_parent(pod, "/custom").startswith("/custom/kubepods/")


def test_hostname() -> None:
    assert pod_hostname(make_pod()) == "web"
    assert pod_hostname(make_pod(hostname="box")) == "box"
    long = attrs.evolve(make_pod(), metadata=ObjectMeta(name="a" * 62 + "-b-c", uid=UID))
    assert pod_hostname(long) == "a" * 62  # cut to 63, trailing "-" trimmed
    with pytest.raises(ValueError, match="not a valid DNS label"):
        pod_hostname(make_pod(hostname="Not_Valid"))


def test_next_restart_count() -> None:
    status = RuntimePodStatus(
        uid=UID,
        containers=(
            ContainerInfo(id="x", name="c", state=ContainerRunState.EXITED, restart_count=4),
        ),
    )
    assert next_restart_count(status, "c") == 5
    assert next_restart_count(status, "other") is None


def test_restart_count_from_logs_goes_on_after_the_highest_log_file() -> None:
    names = ["0.log", "2.log.20260101-000000.gz", "1.log", "notes.txt", "x.log", "7log"]
    assert restart_count_from_logs(names) == 3
    assert restart_count_from_logs(["4.logged"]) == 5  # upstream's pattern has no end anchor
    assert restart_count_from_logs([]) == 0
    assert restart_count_from_logs(["99999999999.log", "1.log"]) == 2  # past an int32: skipped


# -- labels and annotations ---------------------------------------------------------------


def test_labels() -> None:
    pod = make_pod()
    assert sandbox_labels(pod) == {
        "app": "web",
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "prod",
        "io.kubernetes.pod.uid": UID,
    }
    assert container_labels(pod, pod.spec.containers[0]) == {
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "prod",
        "io.kubernetes.pod.uid": UID,
        "io.kubernetes.container.name": "c",
    }


def test_annotations() -> None:
    container = Container(
        name="c",
        image="busybox",
        ports=(
            ContainerPort(container_port=80),
            ContainerPort(container_port=53, name="dns", protocol="UDP", host_port=5353),
        ),
        termination_message_path="/dev/termination-log",
        termination_message_policy="File",
        lifecycle=Lifecycle(
            pre_stop=LifecycleHandler(
                http_get=HTTPGetAction(
                    port=8080,
                    path="/stop",
                    scheme="HTTP",
                    http_headers=(HTTPHeader(name="X", value="<1>"),),
                )
            )
        ),
    )
    pod = make_pod(container, termination_grace_period_seconds=30)
    pod = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, deletion_grace_period_seconds=10))
    ann = container_annotations(pod, container, 2)
    assert ann == {
        "io.kubernetes.container.hash": hash_container(container),
        "io.kubernetes.container.restartCount": "2",
        "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
        "io.kubernetes.container.terminationMessagePolicy": "File",
        "io.kubernetes.pod.deletionGracePeriod": "10",
        "io.kubernetes.pod.terminationGracePeriod": "30",
        "io.kubernetes.container.ports": '[{"containerPort":80,"protocol":"TCP"},'
        '{"name":"dns","hostPort":5353,"containerPort":53,"protocol":"UDP"}]',
        "io.kubernetes.container.preStopHandler": (
            '{"httpGet":{"path":"/stop","port":8080,"scheme":"HTTP",'
            '"httpHeaders":[{"name":"X","value":"\\u003c1\\u003e"}]}}'
        ),
        "io.trio-kubelet.container.resources": "{}",
    }


def test_annotations_record_the_resources_the_container_is_created_with() -> None:
    container = Container(
        name="c", image="busybox", resources=res({"cpu": "250m"}, {"memory": "64Mi"})
    )
    pod = make_pod(container, resources=res({"cpu": "1"}))
    ann = container_annotations(pod, container, 0)
    assert ann["io.trio-kubelet.container.resources"] == (
        '{"limits":{"memory":"64Mi"},"requests":{"cpu":"250m"}}'
    )
    assert ann["io.trio-kubelet.pod.resources"] == '{"requests":{"cpu":"1"}}'
    assert "io.trio-kubelet.pod.resources" not in container_annotations(
        make_pod(container), container, 0
    )


def test_prestop_exec_json() -> None:
    container = Container(
        name="c",
        lifecycle=Lifecycle(
            pre_stop=LifecycleHandler(exec=ExecAction(command=("sh", "-c", "sleep 5")))
        ),
    )
    ann = container_annotations(make_pod(container), container, 0)
    assert json.loads(ann["io.kubernetes.container.preStopHandler"]) == {
        "exec": {"command": ["sh", "-c", "sleep 5"]}
    }
    assert "io.kubernetes.pod.terminationGracePeriod" not in ann


# -- resources ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "shares"),
    [
        (0, 2),
        (1, 2),
        (2, 2),
        (10, 10),
        (100, 102),
        (250, 256),
        (1000, 1024),
        (2000, 2048),
        (10**6, 262144),
    ],
)
def test_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"),
    [(0, 0), (1, 1000), (5, 1000), (10, 1000), (100, 10000), (500, 50000), (1500, 150000)],
)
def test_quota(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


def test_resources_burstable() -> None:
    c = Container(
        name="c", resources=res({"cpu": "250m", "memory": "1Gi"}, {"cpu": "500m", "memory": "2Gi"})
    )
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB)
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit_in_bytes) == (
        256,
        50000,
        100000,
        2 * GiB,
    )
    assert r.oom_score_adj == 1000 - 1000 * GiB // (8 * GiB)


def test_resources_limit_without_request() -> None:
    c = Container(name="c", resources=res(limits={"cpu": "2"}))
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB)
    assert r.cpu_shares == 2048  # request defaults to the limit
    assert r.cpu_quota == 200000
    assert r.memory_limit_in_bytes == 0


def test_resources_besteffort() -> None:
    c = Container(name="c")
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB)
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.oom_score_adj) == (2, 0, 100000, 1000)
    off = ContainerLimits(cpu_cfs_quota=False)
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB, limits=off)
    assert (r.cpu_quota, r.cpu_period) == (0, 0)


def test_cpu_cfs_quota_false_sends_no_quota_even_with_a_limit() -> None:
    """Upstream leaves CpuQuota and CpuPeriod at 0: the runtime sets no CFS limit."""
    c = Container(name="c", resources=res({"cpu": "1"}, {"cpu": "1"}))
    off = ContainerLimits(cpu_cfs_quota=False)
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB, limits=off)
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period) == (1024, 0, 0)


def test_the_cfs_period_scales_the_quota() -> None:
    c = Container(name="c", resources=res(limits={"cpu": "500m"}))
    limits = ContainerLimits(cpu_period=50_000)
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB, limits=limits)
    assert (r.cpu_quota, r.cpu_period) == (25_000, 50_000)
    tiny = Container(name="t", resources=res(limits={"cpu": "1m"}))
    r = linux_container_resources(make_pod(tiny), tiny, memory_capacity=8 * GiB, limits=limits)
    assert r.cpu_quota == 1000  # never below 1 ms


def test_container_limits_from_the_configuration() -> None:
    config = KubeletConfiguration(cpu_cfs_quota=False, cpu_cfs_quota_period=0.05)
    assert container_limits(config) == ContainerLimits(cpu_cfs_quota=False, cpu_period=50_000)
    assert container_limits(KubeletConfiguration()) == ContainerLimits()


def test_overhead_follows_the_node_limits() -> None:
    pod = make_pod(Container(name="c"), overhead={"cpu": Quantity("250m")})
    assert overhead_resources(pod).cpu_quota == 25_000
    off = overhead_resources(pod, limits=ContainerLimits(cpu_cfs_quota=False))
    assert (off.cpu_quota, off.cpu_period) == (0, 0)


def test_overhead_is_oom_killed_as_a_group_when_containers_are() -> None:
    """Upstream sends the sandbox's overhead with the same ``unified`` map."""
    pod = make_pod(Container(name="c"), overhead={"memory": Quantity("64Mi")})
    group = overhead_resources(pod, limits=ContainerLimits(group_oom_kill=True))
    assert dict(group.unified) == {"memory.oom.group": "1"}
    assert dict(overhead_resources(pod).unified) == {}


def test_resources_guaranteed() -> None:
    spec = {"cpu": "1", "memory": "1Gi"}
    c = Container(name="c", resources=res(spec, spec))
    r = linux_container_resources(make_pod(c), c, memory_capacity=8 * GiB)
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes, r.oom_score_adj) == (
        1024,
        100000,
        GiB,
        -997,
    )


# -- namespaces and security ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, (api.POD, api.CONTAINER, api.POD)),
        ({"host_network": True}, (api.NODE, api.CONTAINER, api.POD)),
        ({"host_pid": True}, (api.POD, api.NODE, api.POD)),
        ({"share_process_namespace": True}, (api.POD, api.POD, api.POD)),
        ({"host_pid": True, "share_process_namespace": True}, (api.POD, api.NODE, api.POD)),
        ({"host_ipc": True}, (api.POD, api.CONTAINER, api.NODE)),
    ],
)
def test_namespace_options(spec: dict[str, bool], expected: tuple[int, int, int]) -> None:
    ns = namespace_options(make_pod(**spec))
    assert (ns.network, ns.pid, ns.ipc) == expected


def test_pid_container_is_on_the_wire() -> None:
    """containerd needs pid=CONTAINER explicitly; the zero value POD breaks PID 1."""
    config = container_config(
        make_pod(), make_pod().spec.containers[0], 0, image_ref="sha256:1", memory_capacity=GiB
    )
    assert config.linux.security_context.namespace_options.pid == api.CONTAINER
    wire = config.SerializeToString()
    assert (
        api.ContainerConfig.FromString(wire).linux.security_context.namespace_options.pid
        == api.CONTAINER
    )


# -- sandbox config -------------------------------------------------------------------------


def test_sandbox_config() -> None:
    c = Container(
        name="c",
        ports=(
            ContainerPort(container_port=80, host_port=8080),
            ContainerPort(container_port=80, host_port=8080),  # duplicate: listed once
            ContainerPort(container_port=53, protocol="UDP"),
        ),
    )
    priv = Container(name="p", security_context=SecurityContext(privileged=True))
    pod = make_pod(
        c,
        init_containers=(priv,),
        security_context=PodSecurityContext(
            run_as_user=1000,
            run_as_group=3000,
            fs_group=2000,
            supplemental_groups=(4000,),
            sysctls=({"name": "net.core.somaxconn", "value": "1024"},),
        ),
    )
    dns = api.DNSConfig(
        servers=["10.96.0.10"], searches=["prod.svc.cluster.local"], options=["ndots:5"]
    )
    config = sandbox_config(pod, 2, dns=dns)
    assert config.metadata == api.PodSandboxMetadata(
        name="web", uid=UID, namespace="prod", attempt=2
    )
    assert config.hostname == "web"
    assert config.log_directory == f"/var/log/pods/prod_web_{UID}"
    assert dict(config.labels) == sandbox_labels(pod)
    assert dict(config.annotations) == {"kubernetes.io/config.source": "api", "note": "x"}
    assert config.dns_config == dns
    assert list(config.port_mappings) == [
        api.PortMapping(protocol=api.TCP, container_port=80, host_port=8080),
        api.PortMapping(protocol=api.UDP, container_port=53),
    ]
    linux = config.linux
    assert linux.cgroup_parent == f"/kubepods/besteffort/pod{UID}"
    assert dict(linux.sysctls) == {"net.core.somaxconn": "1024"}
    sc = linux.security_context
    assert sc.privileged is True
    assert sc.seccomp.profile_type == api.SecurityProfile.RuntimeDefault and sc.HasField("seccomp")
    assert (sc.run_as_user.value, sc.run_as_group.value) == (1000, 3000)
    assert list(sc.supplemental_groups) == [2000, 4000]
    assert (sc.namespace_options.network, sc.namespace_options.pid) == (api.POD, api.CONTAINER)


@pytest.mark.parametrize(
    ("spec", "enabled", "hostname"),
    [
        ({"subdomain": "s"}, True, "web"),
        ({"subdomain": "s", "set_hostname_as_fqdn": True}, True, "web.s.prod.svc.cluster.local"),
        ({"hostname": "h", "hostname_override": "box.example.com"}, True, "box.example.com"),
        ({"hostname": "h", "hostname_override": "box.example.com"}, False, "h"),
    ],
)
def test_sandbox_hostname(spec: dict[str, object], enabled: bool, hostname: str) -> None:
    """The kernel hostname (and so the runtime's HOSTNAME): the FQDN with
    setHostnameAsFQDN, the override with the HostnameOverride gate."""
    config = sandbox_config(
        make_pod(**spec),
        0,
        cluster_domain="cluster.local",
        hostname_override_enabled=enabled,
    )
    assert config.hostname == hostname


def test_sandbox_fqdn_too_long_fails() -> None:
    pod = make_pod(subdomain="s" * 40, set_hostname_as_fqdn=True)
    with pytest.raises(PodHostnameError, match="is too long"):
        sandbox_config(pod, 0, cluster_domain="cluster.local")
    host = attrs.evolve(pod, spec=attrs.evolve(pod.spec, host_network=True))
    assert sandbox_config(host, 0, cluster_domain="cluster.local").hostname == ""


def test_sandbox_host_network_has_no_hostname() -> None:
    config = sandbox_config(make_pod(host_network=True), 0, cgroup_parent="/given")
    assert config.hostname == ""
    assert config.linux.cgroup_parent == "/given"
    assert config.linux.security_context.namespace_options.network == api.NODE
    assert not config.linux.security_context.HasField("run_as_user")


# -- container config -----------------------------------------------------------------------


def test_container_config() -> None:
    c = Container(
        name="app",
        image="nginx:1.25",
        command=("/bin/sh", "-c"),
        args=("echo $(GREETING) $(MISSING) $$(ESCAPED)",),
        working_dir="/srv",
        env=(
            EnvVar(name="NAME", value="world"),
            EnvVar(name="GREETING", value="hello $(NAME)"),
            EnvVar(
                name="POD_IP",
                value_from=EnvVarSource(field_ref=ObjectFieldSelector(field_path="status.podIP")),
            ),
        ),
        stdin=True,
        tty=True,
        resources=res({"cpu": "100m", "memory": "64Mi"}, {"cpu": "200m", "memory": "128Mi"}),
        security_context=SecurityContext(
            read_only_root_filesystem=True,
            allow_privilege_escalation=False,
            capabilities=Capabilities(add=("NET_ADMIN",), drop=("ALL",)),
            run_as_user=1001,
        ),
    )
    pod = make_pod(c, security_context=PodSecurityContext(run_as_user=1000, run_as_group=3000))
    config = container_config(pod, c, 3, image_ref="sha256:abcd", memory_capacity=8 * GiB)
    assert config.metadata == api.ContainerMetadata(name="app", attempt=3)
    assert config.image == api.ImageSpec(image="sha256:abcd", user_specified_image="nginx:1.25")
    assert list(config.command) == ["/bin/sh", "-c"]
    assert list(config.args) == ["echo hello world $(MISSING) $(ESCAPED)"]
    assert config.working_dir == "/srv"
    assert [(kv.key, kv.value) for kv in config.envs] == [
        ("NAME", b"world"),
        ("GREETING", b"hello world"),
    ]
    assert config.log_path == "app/3.log"
    assert (config.stdin, config.stdin_once, config.tty) == (True, False, True)
    assert dict(config.labels) == container_labels(pod, c)
    assert config.annotations["io.kubernetes.container.restartCount"] == "3"
    r = config.linux.resources
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes) == (102, 20000, 128 * 2**20)
    sc = config.linux.security_context
    assert sc.readonly_rootfs and sc.no_new_privs and not sc.privileged
    assert list(sc.capabilities.add_capabilities) == ["NET_ADMIN"]
    assert list(sc.capabilities.drop_capabilities) == ["ALL"]
    assert (sc.run_as_user.value, sc.run_as_group.value) == (
        1001,
        3000,
    )  # container wins, pod fills in
    assert sc.seccomp.profile_type == api.SecurityProfile.Unconfined and sc.HasField("seccomp")
    assert tuple(sc.masked_paths) == DEFAULT_MASKED_PATHS
    assert "/proc/sys" in sc.readonly_paths


def test_container_config_defaults_leave_image_defaults() -> None:
    c = Container(name="c", image="busybox")
    config = container_config(make_pod(c), c, 0, image_ref="sha256:1", memory_capacity=GiB)
    assert list(config.command) == [] and list(config.args) == [] and config.working_dir == ""
    sc = config.linux.security_context
    assert (
        not sc.no_new_privs and not sc.HasField("run_as_user") and not sc.HasField("capabilities")
    )


def test_container_config_given_env_and_seccomp() -> None:
    c = Container(
        name="c",
        args=("$(A)",),
        security_context=SecurityContext(
            seccomp_profile={"type": "Localhost", "localhostProfile": "p.json"},
            proc_mount="Unmasked",
        ),
    )
    pod = make_pod(
        c, security_context=PodSecurityContext(seccomp_profile={"type": "RuntimeDefault"})
    )
    config = container_config(pod, c, 0, image_ref="x", memory_capacity=GiB, env=[("A", "1")])
    assert list(config.args) == ["1"]
    sc = config.linux.security_context
    assert sc.seccomp == api.SecurityProfile(
        profile_type=api.SecurityProfile.Localhost, localhost_ref="/var/lib/kubelet/seccomp/p.json"
    )
    assert list(sc.masked_paths) == []
    plain = Container(name="c")
    pod_level = container_config(
        make_pod(
            plain, security_context=PodSecurityContext(seccomp_profile={"type": "RuntimeDefault"})
        ),
        plain,
        0,
        image_ref="x",
        memory_capacity=GiB,
    )
    assert (
        pod_level.linux.security_context.seccomp.profile_type == api.SecurityProfile.RuntimeDefault
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "1"),
        ("$(A)$(B)", "12"),
        ("$$(A)", "$(A)"),
        ("$(C)", "$(C)"),
        ("$A", "$A"),
        ("a$", "a$"),
        ("$(A", "$(A"),
        ("$$$", "$$"),
        ("$(A $$", "$(A $"),
    ],
)
def test_expand_env(text: str, expected: str) -> None:
    assert expand_env(text, {"A": "1", "B": "2"}) == expected


# -- CRI answers back -----------------------------------------------------------------------


def test_container_round_trip() -> None:
    c = Container(name="app", image="busybox")
    pod = make_pod(c)
    config = container_config(pod, c, 4, image_ref="sha256:img", memory_capacity=GiB)
    status = api.ContainerStatus(
        id="cid",
        metadata=config.metadata,
        state=api.CONTAINER_EXITED,
        created_at=1,
        started_at=2,
        finished_at=3,
        exit_code=137,
        reason="OOMKilled",
        message="killed",
        image=api.ImageSpec(image="docker.io/library/busybox:latest"),
        image_ref="docker.io/library/busybox@sha256:d",
        labels=config.labels,
        annotations=config.annotations,
        log_path="/var/log/pods/x/app/4.log",
    )
    info = container_info_from_cri(status, sandbox_id="sb")
    assert info == ContainerInfo(
        id="cid",
        name="app",
        state=ContainerRunState.EXITED,
        sandbox_id="sb",
        attempt=4,
        hash=hash_container(c),
        restart_count=4,
        image="docker.io/library/busybox:latest",
        image_ref="docker.io/library/busybox@sha256:d",
        image_id="docker.io/library/busybox@sha256:d",
        created_at=1,
        started_at=2,
        finished_at=3,
        exit_code=137,
        reason="OOMKilled",
        message="killed",
        log_path="/var/log/pods/x/app/4.log",
        labels=dict(config.labels),
        annotations=dict(config.annotations),
    )
    listed = api.Container(
        id="cid",
        pod_sandbox_id="sb2",
        metadata=config.metadata,
        state=api.CONTAINER_RUNNING,
        labels=config.labels,
        annotations={
            "io.kubernetes.container.hash": "0" + hash_container(c),
            "io.kubernetes.container.restartCount": "bad",
        },
    )
    info = container_info_from_cri(listed)
    assert (info.state, info.sandbox_id, info.hash, info.restart_count) == (
        ContainerRunState.RUNNING,
        "sb2",
        hash_container(c),
        0,
    )


def test_container_states_and_missing_label() -> None:
    for cri, ours in [
        (api.CONTAINER_CREATED, ContainerRunState.CREATED),
        (api.CONTAINER_RUNNING, ContainerRunState.RUNNING),
        (api.CONTAINER_UNKNOWN, ContainerRunState.UNKNOWN),
    ]:
        status = api.ContainerStatus(
            id="x",
            metadata=api.ContainerMetadata(name="meta"),
            state=cri,
            started_at=5,
            exit_code=9,
        )
        info = container_info_from_cri(status)
        assert info.state is ours and info.name == "meta" and info.exit_code == 0
        assert info.started_at == (0 if ours is ContainerRunState.CREATED else 5)


def test_sandbox_round_trip() -> None:
    pod = make_pod()
    config = sandbox_config(pod, 1)
    status = api.PodSandboxStatus(
        id="sb",
        metadata=config.metadata,
        state=api.SANDBOX_READY,
        created_at=7,
        network=api.PodSandboxNetworkStatus(
            ip="10.0.0.5", additional_ips=[api.PodIP(ip="fd00::5")]
        ),
        linux=api.LinuxPodSandboxStatus(
            namespaces=api.Namespace(options=api.NamespaceOption(network=api.NODE))
        ),
        labels=config.labels,
        annotations=config.annotations,
    )
    info = sandbox_info_from_cri(status)
    assert (info.id, info.state, info.attempt, info.created_at) == ("sb", SandboxState.READY, 1, 7)
    assert (info.ip, info.additional_ips, info.host_network) == ("10.0.0.5", ("fd00::5",), True)
    assert info.labels == sandbox_labels(pod)
    listed = api.PodSandbox(
        id="sb", metadata=config.metadata, state=api.SANDBOX_NOTREADY, created_at=7
    )
    info = sandbox_info_from_cri(listed)
    assert (info.state, info.ip, info.host_network) == (SandboxState.NOTREADY, "", False)
