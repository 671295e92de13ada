"""Security context, sysctls, user namespaces and RuntimeClass through the whole kubelet.

Static pods against FakeRuntime (standalone), API pods against FakeApiServer too; fake
clock. What is checked is what a user sees: the CRI calls made (or never made), the
pod status the kubelet reports, and the events.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.api import PodStatus
from kubelet.cri import api
from kubelet.events.recorder import LOG_LEVEL as EVENT_LOG_LEVEL
from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import EPOCH, NODE, Harness, running_kubelet

IMAGE = "busybox:1.35"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return ("registry.k8s.io/pause:3.9", IMAGE)


@pytest.fixture
def fake_setup() -> Callable[[FakeRuntime], None]:
    def images_with_users(fake: FakeRuntime) -> None:
        fake.add_image("app-uid:1", uid=1000)
        fake.add_image("app-name:1", username="app")

    return images_with_users


def manifest(name: str, spec: str = "", container: str = "", image: str = IMAGE) -> str:
    body = f"""\
    apiVersion: v1
    kind: Pod
    metadata:
      name: {name}
    spec:
      containers:
      - name: app
        image: {image}
    """
    text = textwrap.dedent(body)
    if container:
        text += textwrap.indent(textwrap.dedent(container), "    ")
    if spec:
        text += textwrap.indent(textwrap.dedent(spec), "  ")
    return text


def status_of(h: Harness, name: str) -> PodStatus | None:
    parts = h.components
    assert parts is not None
    for pod in parts.pods.pods():
        if pod.metadata.name == f"{name}-{NODE}":
            return parts.syncer.statuses.get(pod.uid)
    return None


def waiting(status: PodStatus | None) -> tuple[str, str] | None:
    if status is None or not status.container_statuses:
        return None
    state = status.container_statuses[0].state
    if state is None or state.waiting is None:
        return None
    return state.waiting.reason, state.waiting.message


def where(name: str, h: Harness) -> str:
    parts = h.components
    assert parts is not None
    (pod,) = [p for p in parts.pods.pods() if p.metadata.name == f"{name}-{NODE}"]
    return f'(pod: "{name}-{NODE}_default({pod.uid})", container: app)'


# -- runAsNonRoot ---------------------------------------------------------------------------


async def test_run_as_non_root_with_a_root_image_is_never_created(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(EVENT_LOG_LEVEL)
    async with running_kubelet(fake, short_tmp) as h:
        h.write(
            "root.yaml",
            manifest("root", container="securityContext:\n  runAsNonRoot: true\n"),
        )
        await h.wait_for(lambda: waiting(status_of(h, "root")) is not None)
        message = f"container has runAsNonRoot and image will run as root {where('root', h)}"
        assert waiting(status_of(h, "root")) == ("CreateContainerConfigError", message)
        await trio.sleep(30)  # retried with back-off, never created
        assert h.sandboxes("root") and not h.containers("root")
        assert fake.calls_of("CreateContainer") == []
        assert f"Failed: Error: {message}" in caplog.text


@pytest.mark.parametrize(
    ("image", "security", "runs", "message"),
    [
        ("app-uid:1", "runAsNonRoot: true", True, None),
        (
            "app-name:1",
            "runAsNonRoot: true",
            False,
            "container has runAsNonRoot and image has non-numeric user (app), cannot verify "
            "user is non-root {where}",
        ),
        (IMAGE, "runAsNonRoot: true\n  runAsUser: 1000", True, None),
        (
            "app-uid:1",
            "runAsNonRoot: true\n  runAsUser: 0",
            False,
            "container's runAsUser breaks non-root policy {where}",
        ),
    ],
)
async def test_run_as_non_root_decides_from_run_as_user_or_the_image_user(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    image: str,
    security: str,
    runs: bool,
    message: str | None,
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("p.yaml", manifest("p", container=f"securityContext:\n  {security}\n", image=image))
        if runs:
            await h.wait_for(lambda: h.running("p", "app"))
            return
        await h.wait_for(lambda: waiting(status_of(h, "p")) is not None)
        assert message is not None
        assert waiting(status_of(h, "p")) == (
            "CreateContainerConfigError",
            message.format(where=where("p", h)),
        )
        assert not h.containers("p")


# -- seccomp, AppArmor ---------------------------------------------------------------------


async def test_seccomp_default_flag(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp, "--seccomp-default") as h:
        h.write("p.yaml", manifest("p"))
        await h.wait_for(lambda: h.running("p", "app"))
        (c,) = h.containers("p")
        assert c.config.linux.security_context.seccomp.profile_type == (
            api.SecurityProfile.RuntimeDefault
        )
        (sandbox,) = h.sandboxes("p")
        assert sandbox.config.linux.security_context.seccomp.profile_type == (
            api.SecurityProfile.RuntimeDefault
        )


async def test_apparmor_refused_on_a_host_without_it(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "kubelet.pods.run.apparmor_host_error", lambda: "AppArmor is not enabled on the host"
    )
    async with running_kubelet(fake, short_tmp) as h:
        h.write(
            "aa.yaml",
            manifest(
                "aa", container="securityContext:\n  appArmorProfile:\n    type: RuntimeDefault\n"
            ),
        )
        h.write(
            "plain.yaml",
            manifest(
                "plain", container="securityContext:\n  appArmorProfile:\n    type: Unconfined\n"
            ),
        )
        await h.wait_for(lambda: h.running("plain", "app"))
        status = status_of(h, "aa")
        assert status is not None
        assert (status.phase, status.reason, status.message) == (
            "Failed",
            "AppArmor",
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host",
        )
        assert not h.sandboxes("aa")


async def test_apparmor_profile_reaches_the_runtime(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("kubelet.pods.run.apparmor_host_error", lambda: None)
    async with running_kubelet(fake, short_tmp) as h:
        h.write(
            "aa.yaml",
            textwrap.dedent(
                f"""\
                apiVersion: v1
                kind: Pod
                metadata:
                  name: aa
                  annotations:
                    container.apparmor.security.beta.kubernetes.io/app: localhost/k8s-deny
                spec:
                  containers:
                  - name: app
                    image: {IMAGE}
                """
            ),
        )
        await h.wait_for(lambda: h.running("aa", "app"))
        (c,) = h.containers("aa")
        sc = c.config.linux.security_context
        assert sc.apparmor == api.SecurityProfile(
            profile_type=api.SecurityProfile.Localhost, localhost_ref="k8s-deny"
        )
        assert sc.apparmor_profile == "localhost/k8s-deny"


# -- sysctls --------------------------------------------------------------------------------

SYSCTLS = """\
securityContext:
  sysctls:
  - name: {name}
    value: "1"
"""


async def test_forbidden_sysctl_rejects_the_pod(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("bad.yaml", manifest("bad", spec=SYSCTLS.format(name="net.core.somaxconn")))
        h.write("good.yaml", manifest("good", spec=SYSCTLS.format(name="net.ipv4.tcp_syncookies")))
        await h.wait_for(lambda: h.running("good", "app"))
        await trio.sleep(10)
        status = status_of(h, "bad")
        assert status is not None
        assert (status.phase, status.reason, status.message) == (
            "Failed",
            "SysctlForbidden",
            'Pod was rejected: forbidden sysctl: "net.core.somaxconn" not allowlisted',
        )
        assert not h.sandboxes("bad")
        (sandbox,) = h.sandboxes("good")
        assert dict(sandbox.config.linux.sysctls) == {"net.ipv4.tcp_syncookies": "1"}


async def test_unsafe_sysctl_allowed_by_the_flag(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp, "--allowed-unsafe-sysctls=net.core.*") as h:
        h.write("p.yaml", manifest("p", spec=SYSCTLS.format(name="net/core/somaxconn")))
        await h.wait_for(lambda: h.running("p", "app"))
        (sandbox,) = h.sandboxes("p")
        assert dict(sandbox.config.linux.sysctls) == {"net.core.somaxconn": "1"}


# -- user namespaces -------------------------------------------------------------------------

NO_HOST_USERS = "hostUsers: false\n"


async def test_host_users_false_refused_when_the_runtime_lacks_user_namespaces(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(EVENT_LOG_LEVEL)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("u.yaml", manifest("u", spec=NO_HOST_USERS))
        await trio.sleep(30)
        assert fake.calls_of("RunPodSandbox") == []
        assert (
            'FailedCreatePodSandBox: Failed to create pod sandbox: RuntimeClass handler "" '
            "does not support user namespaces" in caplog.text
        )


async def test_host_users_false_gets_its_own_user_namespace(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.handlers[""] = api.RuntimeHandlerFeatures(user_namespaces=True)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("u.yaml", manifest("u", spec=NO_HOST_USERS))
        h.write("plain.yaml", manifest("plain"))
        await h.wait_for(lambda: h.running("u", "app") and h.running("plain", "app"))
        (sandbox,) = h.sandboxes("u")
        userns = sandbox.config.linux.security_context.namespace_options.userns_options
        ids = api.IDMapping(host_id=1 << 31, container_id=0, length=65536)
        assert userns == api.UserNamespace(mode=api.POD, uids=[ids], gids=[ids])
        (c,) = h.containers("u")
        assert c.config.linux.security_context.namespace_options.userns_options == userns
        (plain,) = h.sandboxes("plain")
        assert plain.config.linux.security_context.namespace_options.userns_options == (
            api.UserNamespace(mode=api.NODE)
        )
        uid = sandbox.config.metadata.uid
        mappings = short_tmp / "root" / "pods" / uid / "userns"
        assert mappings.exists()
        (h.manifests / "u.yaml").unlink()
        await h.wait_for(lambda: not h.sandboxes("u"))
        await trio.sleep(5)
        assert not mappings.exists()


# -- supplementalGroupsPolicy ---------------------------------------------------------------

STRICT = """\
securityContext:
  supplementalGroups: [4000]
  fsGroup: 2000
  supplementalGroupsPolicy: Strict
"""


async def test_strict_groups_need_the_runtime_feature(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("s.yaml", manifest("s", spec=STRICT))
        await h.wait_for(lambda: status_of(h, "s") is not None)
        status = status_of(h, "s")
        assert status is not None
        assert (status.phase, status.reason, status.message) == (
            "Failed",
            "SupplementalGroupsPolicyNotSupported",
            "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node",
        )
        assert not h.sandboxes("s")


async def test_strict_groups_reach_the_runtime(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.features = api.RuntimeFeatures(supplemental_groups_policy=True)
    async with running_kubelet(fake, short_tmp) as h:
        h.write("s.yaml", manifest("s", spec=STRICT))
        await h.wait_for(lambda: h.running("s", "app"))
        (c,) = h.containers("s")
        sc = c.config.linux.security_context
        assert (list(sc.supplemental_groups), sc.supplemental_groups_policy) == (
            [2000, 4000],
            api.Strict,
        )
        (sandbox,) = h.sandboxes("s")
        assert sandbox.config.linux.security_context.supplemental_groups_policy == api.Strict


# -- RuntimeClass ---------------------------------------------------------------------------


async def test_standalone_pod_naming_a_runtime_class_is_rejected(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_kubelet(fake, short_tmp) as h:
        h.write("rc.yaml", manifest("rc", spec="runtimeClassName: gvisor\n"))
        await h.wait_for(lambda: status_of(h, "rc") is not None)
        status = status_of(h, "rc")
        assert status is not None
        assert (status.phase, status.reason) == ("Failed", "RuntimeClassUnavailable")
        assert 'runtimeClassName "gvisor" cannot be resolved' in status.message
        assert fake.calls_of("RunPodSandbox") == []


def runtime_class(
    name: str, handler: str, overhead: dict[str, str] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": handler,
    }
    if overhead:
        body["overhead"] = {"podFixed": overhead}
    return body


def events(c: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in c.api.list("events", "default") if e.get("reason") == reason]


async def test_runtime_class_handler_and_overhead(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.handlers["kata"] = api.RuntimeHandlerFeatures()
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(runtime_class("kata-rc", "kata", {"cpu": "250m", "memory": "120Mi"}))
        # the RuntimeClass admission plugin of the API server copies overhead into the pod
        c.create_pod(
            "vm",
            runtimeClassName="kata-rc",
            overhead={"cpu": "250m", "memory": "120Mi"},
        )
        c.create_pod("plain")
        await c.wait_for(lambda: c.phase("vm") == "Running" and c.phase("plain") == "Running")
        handlers = {s.config.metadata.name: s.runtime_handler for s in fake.sandboxes.values()}
        assert handlers == {"vm": "kata", "plain": ""}
        (vm,) = [s for s in fake.sandboxes.values() if s.config.metadata.name == "vm"]
        overhead = vm.config.linux.overhead
        assert (overhead.cpu_shares, overhead.memory_limit_in_bytes) == (256, 120 * 2**20)


async def test_missing_runtime_class_fails_the_sandbox_until_it_exists(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.handlers["kata"] = api.RuntimeHandlerFeatures()
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("vm", runtimeClassName="kata-rc")
        await c.wait_for(lambda: events(c, "FailedCreatePodSandBox"))
        assert events(c, "FailedCreatePodSandBox")[0] == (
            'Failed to create pod sandbox: runtimeclass.node.k8s.io "kata-rc" not found'
        )
        await trio.sleep(30)
        assert fake.calls_of("RunPodSandbox") == []  # never with the default handler
        assert c.phase("vm") == "Pending"
        c.api.create(runtime_class("kata-rc", "kata"))
        await c.wait_for(lambda: c.phase("vm") == "Running", timeout=30)
        (sandbox,) = fake.sandboxes.values()
        assert sandbox.runtime_handler == "kata"


async def test_handler_the_runtime_does_not_have_fails_the_sandbox(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(runtime_class("gvisor", "runsc"))
        c.create_pod("g", runtimeClassName="gvisor")
        await c.wait_for(lambda: events(c, "FailedCreatePodSandBox"))
        assert events(c, "FailedCreatePodSandBox")[0] == (
            'Failed to create pod sandbox: failed to get sandbox runtime: no runtime for "runsc" '
            "is configured"
        )
        await trio.sleep(30)
        assert fake.sandboxes == {} and fake.containers == {}
        assert [r.outcome for r in fake.calls_of("RunPodSandbox")][:2] == ["UNKNOWN", "UNKNOWN"]


# -- API pods: the status the API sees -------------------------------------------------------


async def test_rejected_api_pod_is_reported_failed(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "bad",
            securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
        )
        await c.wait_for(lambda: c.phase("bad") == "Failed")
        status = (c.pod("bad") or {})["status"]
        assert status["reason"] == "SysctlForbidden"
        assert status["message"] == (
            'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted'
        )
        assert status["qosClass"] == "BestEffort"
        assert events(c, "SysctlForbidden") == ['forbidden sysctl: "kernel.msgmax" not allowlisted']
        assert fake.calls_of("RunPodSandbox") == []
        # deleting the pod removes it as for any other pod
        c.api.delete("pods", "default", "bad")
        await c.wait_for(lambda: c.pod("bad") is None)


async def test_run_as_non_root_api_pod_status_and_event(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        created = c.create_pod("nr", securityContext={"runAsNonRoot": True})
        uid = created["metadata"]["uid"]
        message = (
            f'container has runAsNonRoot and image will run as root (pod: "nr_default({uid})", '
            "container: app)"
        )

        def reason() -> tuple[str, str] | None:
            statuses = ((c.pod("nr") or {}).get("status") or {}).get("containerStatuses") or []
            w = (statuses[0].get("state") or {}).get("waiting") if statuses else None
            return (w.get("reason"), w.get("message")) if w else None

        await c.wait_for(lambda: reason() == ("CreateContainerConfigError", message))
        assert f"Error: {message}" in events(c, "Failed")
        assert fake.calls_of("CreateContainer") == []


async def test_runtime_class_lookup_before_and_after_the_first_list(
    aio_loop: None, autojump_clock: trio.abc.Clock
) -> None:
    """Before the watch has listed, a lookup GETs the class; after, the cache answers,
    and follows creations; an API outage is an error, never the default handler."""
    from kubelet.api import ApiClient, ClusterConnection
    from kubelet.runtime.runtimeclass import RuntimeClassError, RuntimeClasses
    from kubelet.testing import FakeApiServer

    api_server = FakeApiServer(epoch=EPOCH)
    async with (
        api_server.serve(),
        ApiClient.open(ClusterConnection(server=api_server.url)) as client,
    ):
        api_server.create(runtime_class("kata-rc", "kata"))
        classes = RuntimeClasses(client)
        assert await classes.handler("kata-rc") == "kata"
        assert await classes.handler(None) == ""
        missing = r'runtimeclass\.node\.k8s\.io "nope" not found'
        with pytest.raises(RuntimeClassError, match=missing):
            await classes.handler("nope")
        async with api_server.outage():
            with pytest.raises(RuntimeClassError, match="failed to lookup RuntimeClass kata-rc"):
                await classes.handler("kata-rc")
        gets = api_server.count("get", "runtimeclasses")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(classes.run)
            await trio.sleep(1)
            assert classes.synced
            assert await classes.handler("kata-rc") == "kata"
            api_server.create(runtime_class("late", "runsc"))
            await trio.sleep(1)
            assert await classes.handler("late") == "runsc"
            assert api_server.count("get", "runtimeclasses") == gets  # the cache answered
            nursery.cancel_scope.cancel()


async def test_pod_rejected_after_a_restart_is_stopped(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Admitted under --allowed-unsafe-sysctls, the pod runs; a kubelet restarted without
    the flag rejects it and stops it, as upstream does for pods it no longer admits."""
    async with running_kubelet(fake, short_tmp, "--allowed-unsafe-sysctls=net.core.*") as h:
        h.write("p.yaml", manifest("p", spec=SYSCTLS.format(name="net.core.somaxconn")))
        await h.wait_for(lambda: h.running("p", "app"))
        h.extra = ()
        await h.restart_kubelet()
        await h.wait_for(lambda: not h.sandboxes("p"), timeout=30)
        status = status_of(h, "p")
        assert status is not None and status.reason == "SysctlForbidden"
