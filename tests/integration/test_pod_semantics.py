"""Pod semantics upstream's conformance tests rely on, on a whole kubelet
joined to FakeApiServer, on FakeRuntime, in fake time: activeDeadlineSeconds, readiness
gates and others' conditions, ephemeral containers, the sleep lifecycle hook, the pod
status field by field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cri import api
from kubelet.testing import ContainerBehaviour, FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

GATE = "example.com/lb"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


def status_of(c: Cluster, name: str) -> dict[str, Any]:
    return dict(((c.pod(name) or {}).get("status")) or {})


def condition(c: Cluster, name: str, ctype: str) -> dict[str, Any]:
    found = [x for x in status_of(c, name).get("conditions") or [] if x["type"] == ctype]
    return dict(found[0]) if found else {}


def restarts(c: Cluster, name: str) -> int:
    statuses = status_of(c, name).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount", 0))


def events(c: Cluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in c.api.list("events", "default") if e.get("reason") == reason]


# -- activeDeadlineSeconds ---------------------------------------------------------------


async def test_active_deadline_fails_and_kills_the_pod_on_time(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        created = trio.current_time()
        c.create_pod("limited", activeDeadlineSeconds=10, restartPolicy="Never")
        await c.wait_for(lambda: c.phase("limited") == "Running")
        failed = await c.wait_for(lambda: c.phase("limited") == "Failed", timeout=30)
        status = status_of(c, "limited")
        assert (status["reason"], status["message"]) == ("DeadlineExceeded", DEADLINE_MESSAGE)
        assert 9.0 <= failed - created <= 11.5  # counted from startTime (whole seconds)
        assert not fake.running()
        assert fake.calls_of("StopContainer")[0].args["timeout"] == 30  # the pod's grace
        (cs,) = status["containerStatuses"]
        assert "terminated" in cs["state"] and cs["ready"] is False
        assert condition(c, "limited", "Ready")["reason"] == "PodFailed"
        (event,) = events(c, "DeadlineExceeded")
        assert (event["type"], event["message"]) == ("Normal", DEADLINE_MESSAGE)
        await trio.sleep(30)
        assert c.phase("limited") == "Failed"
        assert len(fake.calls_of("CreateContainer")) == 1  # never started again


async def test_lowered_deadline_acts_at_once_not_at_the_next_resync(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("long", activeDeadlineSeconds=3600)
        await c.wait_for(lambda: c.phase("long") == "Running")
        await trio.sleep(20)
        assert c.phase("long") == "Running"
        lowered = trio.current_time()
        c.api.patch("pods", "default", "long", {"spec": {"activeDeadlineSeconds": 5}})
        failed = await c.wait_for(lambda: c.phase("long") == "Failed", timeout=30)
        assert failed - lowered < 1.5
        assert status_of(c, "long")["reason"] == "DeadlineExceeded"


async def test_raised_then_due_deadline_fires_by_its_timer(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A deadline lowered to a time still ahead fires when it is due (the pod's timer
    is re-armed by the update), well before the one-minute resync."""
    async with running_cluster(fake, short_tmp) as c:
        created = trio.current_time()
        c.create_pod("timer", activeDeadlineSeconds=3600)
        await c.wait_for(lambda: c.phase("timer") == "Running")
        await trio.sleep(5)
        c.api.patch("pods", "default", "timer", {"spec": {"activeDeadlineSeconds": 25}})
        await trio.sleep(15)
        assert c.phase("timer") == "Running"
        failed = await c.wait_for(lambda: c.phase("timer") == "Failed", timeout=30)
        assert 24.0 <= failed - created <= 26.5


# -- readiness gates and others' conditions -------------------------------------------------


def set_gate(c: Cluster, name: str, value: str, ctype: str = GATE) -> None:
    """What a controller does: PATCH pods/status with its own condition."""
    c.api.patch(
        "pods",
        "default",
        name,
        {"status": {"conditions": [{"type": ctype, "status": value}]}},
        subresource="status",
    )


async def test_readiness_gate_decides_ready_and_is_never_overwritten(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("gated", readinessGates=[{"conditionType": GATE}])
        await c.wait_for(lambda: c.phase("gated") == "Running")
        await trio.sleep(2)
        ready = condition(c, "gated", "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "False",
            "ReadinessGatesNotReady",
            'corresponding condition of pod readiness gate "example.com/lb" does not exist.',
        )
        assert condition(c, "gated", "ContainersReady")["status"] == "True"
        opened = trio.current_time()
        set_gate(c, "gated", "True")
        at = await c.wait_for(lambda: condition(c, "gated", "Ready").get("status") == "True")
        assert at - opened < 1.5  # the API's change is acted on, not the next resync
        set_gate(c, "gated", "False")
        await c.wait_for(lambda: condition(c, "gated", "Ready").get("status") == "False")
        assert condition(c, "gated", "Ready")["message"] == (
            'the status of pod readiness gate "example.com/lb" is not "True", but False'
        )
        # the kubelet reports again (a container restarts): the gate stays as set
        set_gate(c, "gated", "True", ctype="example.com/other")
        (container,) = fake.running()
        fake.exit_container(container.id, 1)
        await c.wait_for(lambda: restarts(c, "gated") == 1)
        await trio.sleep(3)
        assert condition(c, "gated", GATE)["status"] == "False"
        assert condition(c, "gated", "example.com/other")["status"] == "True"
        assert condition(c, "gated", "Ready")["status"] == "False"


async def test_status_patches_never_name_others_conditions(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A condition another controller changes after the kubelet's last PATCH is not put
    back by the kubelet's next one (it used to send its stale copy)."""
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("shared")
        await c.wait_for(lambda: c.phase("shared") == "Running")
        set_gate(c, "shared", "True", ctype="example.com/mine")
        await trio.sleep(2)
        set_gate(c, "shared", "False", ctype="example.com/mine")
        (container,) = fake.running()
        fake.exit_container(container.id, 1)  # the kubelet has something new to report
        await c.wait_for(lambda: restarts(c, "shared") == 1)
        await trio.sleep(15)
        assert condition(c, "shared", "example.com/mine")["status"] == "False"
        for request in c.api.requests_of("patch", "pods/status"):
            body = json.loads(request.body or b"{}")
            conditions = (body.get("status") or {}).get("conditions") or []
            assert all(x.get("type") != "example.com/mine" for x in conditions)


# -- ephemeral containers ------------------------------------------------------------------


def add_ephemeral(c: Cluster, name: str, container: dict[str, Any]) -> None:
    """What ``kubectl debug`` does: PATCH pods/<name>/ephemeralcontainers."""
    current = c.pod(name) or {}
    existing = list((current.get("spec") or {}).get("ephemeralContainers") or [])
    c.api.patch(
        "pods",
        "default",
        name,
        {"spec": {"ephemeralContainers": [*existing, container]}},
        subresource="ephemeralcontainers",
    )


def ephemeral_statuses(c: Cluster, name: str) -> list[dict[str, Any]]:
    return list(status_of(c, name).get("ephemeralContainerStatuses") or [])


def ephemeral_state(c: Cluster, name: str) -> dict[str, Any]:
    statuses = ephemeral_statuses(c, name)
    return dict(statuses[0].get("state") or {}) if statuses else {}


async def test_ephemeral_container_joins_its_target_and_is_never_restarted(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("debugged")
        await c.wait_for(lambda: c.phase("debugged") == "Running")
        (app,) = fake.running()
        fake.behave(ContainerBehaviour(exit_after=5, exit_code=0), container="debugger")
        added = trio.current_time()
        add_ephemeral(
            c,
            "debugged",
            {
                "name": "debugger",
                "image": "busybox:1.35",
                "command": ["sh"],
                "targetContainerName": "app",
                "terminationMessagePolicy": "File",
            },
        )
        running_at = await c.wait_for(lambda: "running" in ephemeral_state(c, "debugged"))
        assert running_at - added < 1.5
        debugger = next(x for x in fake.running() if x.config.metadata.name == "debugger")
        options = debugger.config.linux.security_context.namespace_options
        assert (options.pid, options.target_id) == (api.TARGET, app.id)
        (status,) = ephemeral_statuses(c, "debugged")
        assert status["ready"] is False and "started" not in status
        assert status["containerID"] == f"fakeruntime://{debugger.id}"
        assert [x["name"] for x in status_of(c, "debugged")["containerStatuses"]] == ["app"]
        await c.wait_for(lambda: "terminated" in ephemeral_state(c, "debugged"))
        await trio.sleep(30)
        assert "terminated" in ephemeral_state(c, "debugged")  # never restarted
        created = [x.args["name"] for x in fake.calls_of("CreateContainer")]
        assert created.count("debugger") == 1
        assert c.phase("debugged") == "Running"
        c.api.delete("pods", "default", "debugged", grace=30)
        await c.wait_for(lambda: c.pod("debugged") is None, timeout=60)
        assert not fake.containers and not fake.sandboxes


async def test_ephemeral_container_without_a_running_target_waits(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("lost")
        await c.wait_for(lambda: c.phase("lost") == "Running")
        add_ephemeral(
            c, "lost", {"name": "dbg", "image": "busybox:1.35", "targetContainerName": "nope"}
        )
        await c.wait_for(lambda: ephemeral_state(c, "lost").get("waiting", {}).get("reason"))
        waiting = ephemeral_state(c, "lost")["waiting"]
        assert (waiting["reason"], waiting["message"]) == (
            "CreateContainerConfigError",
            "unable to find target container nope",
        )
        assert c.phase("lost") == "Running"


async def test_ephemeral_containers_subresource_refuses_changes_to_existing_ones(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    from kubelet.testing.apierrors import StatusError

    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("strict")
        add_ephemeral(c, "strict", {"name": "dbg", "image": "busybox:1.35"})
        with pytest.raises(StatusError) as caught:
            c.api.patch(
                "pods",
                "default",
                "strict",
                {"spec": {"ephemeralContainers": []}},
                content_type="application/merge-patch+json",
                subresource="ephemeralcontainers",
            )
        assert caught.value.code == 422
        with pytest.raises(StatusError):
            add_ephemeral(c, "strict", {"name": "app", "image": "busybox:1.35"})


# -- the sleep lifecycle hook --------------------------------------------------------------


def sleep_hook(seconds: int) -> dict[str, Any]:
    return {"sleep": {"seconds": seconds}}


def make_with_hooks(c: Cluster, name: str, grace: int, **lifecycle: Any) -> None:
    c.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": "node1",
                "terminationGracePeriodSeconds": grace,
                "containers": [{"name": "app", "image": "busybox:1.35", "lifecycle": lifecycle}],
            },
        }
    )


async def test_sleep_pre_stop_delays_the_stop_and_its_time_comes_off_the_grace(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        make_with_hooks(c, "sleepy", 30, preStop=sleep_hook(5))
        await c.wait_for(lambda: c.phase("sleepy") == "Running")
        deleted = trio.current_time()
        c.api.delete("pods", "default", "sleepy", grace=30)
        await c.wait_for(lambda: bool(fake.calls_of("StopContainer")))
        (stop,) = fake.calls_of("StopContainer")
        assert 5.0 <= stop.time - deleted <= 5.5
        assert stop.args["timeout"] == 25
        gone = await c.wait_for(lambda: c.pod("sleepy") is None)
        assert gone - deleted < 7


async def test_sleep_pre_stop_is_cut_by_the_grace_period(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        make_with_hooks(c, "cut", 10, preStop=sleep_hook(100))
        await c.wait_for(lambda: c.phase("cut") == "Running")
        deleted = trio.current_time()
        c.api.delete("pods", "default", "cut", grace=10)
        await c.wait_for(lambda: bool(fake.calls_of("StopContainer")))
        (stop,) = fake.calls_of("StopContainer")
        assert 10.0 <= stop.time - deleted <= 10.5
        assert stop.args["timeout"] == 2  # upstream's minimum
        await c.wait_for(lambda: c.pod("cut") is None)


async def test_sleep_post_start_holds_the_container_until_it_ends(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        created = trio.current_time()
        make_with_hooks(c, "slowstart", 30, postStart=sleep_hook(4))
        running = await c.wait_for(lambda: c.phase("slowstart") == "Running")
        assert 4.0 <= running - created <= 5.5
        (cs,) = status_of(c, "slowstart")["containerStatuses"]
        assert cs["ready"] is True and "running" in cs["state"]


# -- the pod status, field by field ----------------------------------------------------------


async def test_running_pod_status_field_by_field(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "full", "namespace": "default"},
                "spec": {
                    "nodeName": "node1",
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox:1.35",
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "64Mi"},
                                "limits": {"cpu": "100m", "memory": "64Mi"},
                            },
                            "volumeMounts": [
                                {"name": "scratch", "mountPath": "/scratch"},
                                {"name": "scratch", "mountPath": "/ro", "readOnly": True},
                            ],
                        }
                    ],
                },
            }
        )
        await c.wait_for(lambda: c.phase("full") == "Running")
        await trio.sleep(2)
        status = status_of(c, "full")
        pod = c.pod("full") or {}
        generation = pod["metadata"]["generation"]
        assert status["observedGeneration"] == generation
        assert [x["type"] for x in status["conditions"]] == [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ]
        assert all(x["observedGeneration"] == generation for x in status["conditions"])
        assert all(x["status"] == "True" for x in status["conditions"])
        assert status["hostIP"] == "10.0.0.5" and status["hostIPs"] == [{"ip": "10.0.0.5"}]
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        assert status["qosClass"] == "Guaranteed"
        assert status["startTime"].endswith("Z")
        (cs,) = status["containerStatuses"]
        assert (cs["started"], cs["ready"], cs["restartCount"]) == (True, True, 0)
        assert cs["imageID"] and cs["image"] == "docker.io/library/busybox:1.35"
        assert cs["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
        assert cs["resources"] == {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"},
        }
        assert cs["volumeMounts"] == [
            {"name": "scratch", "mountPath": "/scratch"},
            {
                "name": "scratch",
                "mountPath": "/ro",
                "readOnly": True,
                "recursiveReadOnly": "Disabled",
            },
        ]
        assert cs["user"] == {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}}


async def test_rejected_pod_status_carries_the_observed_generation(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        sysctls = [{"name": "net.core.somaxconn", "value": "1"}]
        c.create_pod("refused", securityContext={"sysctls": sysctls})
        await c.wait_for(lambda: c.phase("refused") == "Failed")
        status = status_of(c, "refused")
        assert (status["reason"], status["observedGeneration"]) == ("SysctlForbidden", 1)
        assert status["qosClass"] == "BestEffort"


async def test_completed_pod_status_field_by_field(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=2, exit_code=0), pod="once")
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("once", restartPolicy="Never")
        await c.wait_for(lambda: c.phase("once") == "Succeeded")
        await trio.sleep(3)
        status = status_of(c, "once")
        conditions = {x["type"]: (x["status"], x.get("reason", "")) for x in status["conditions"]}
        assert conditions == {
            "PodReadyToStartContainers": ("False", ""),
            "Initialized": ("True", "PodCompleted"),
            "Ready": ("False", "PodCompleted"),
            "ContainersReady": ("False", "PodCompleted"),
            "PodScheduled": ("True", ""),
        }
        (cs,) = status["containerStatuses"]
        terminated = cs["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert (cs["ready"], cs["started"], cs["restartCount"]) == (False, False, 0)
        assert cs["resources"] == {} and "allocatedResources" not in cs
        assert status["podIP"] and status["startTime"]


async def test_restarted_container_reports_its_last_state(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.behave(ContainerBehaviour(exit_after=2, exit_code=3), pod="flaky")
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("flaky", restartPolicy="OnFailure")
        await c.wait_for(lambda: restarts(c, "flaky") >= 1, timeout=60)
        (cs,) = status_of(c, "flaky")["containerStatuses"]
        last = cs["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (3, "Error")
        assert last["containerID"].startswith("fakeruntime://")
        assert c.phase("flaky") == "Running"


async def test_a_kubelet_condition_changed_in_the_api_is_restored(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's status reconcile: what the kubelet owns and someone else changed in
    the API (the conformance test flips Ready to False) is sent again within a resync;
    a pod nobody touches gets no PATCH at all."""
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod("steady")
        await c.wait_for(lambda: condition(c, "steady", "Ready").get("status") == "True")
        await trio.sleep(5)
        before = len(c.api.requests_of("patch", "pods/status"))
        await trio.sleep(60)
        assert len(c.api.requests_of("patch", "pods/status")) == before
        set_gate(c, "steady", "False", ctype="Ready")
        assert condition(c, "steady", "Ready")["status"] == "False"
        changed = trio.current_time()
        restored = await c.wait_for(
            lambda: condition(c, "steady", "Ready").get("status") == "True", timeout=30
        )
        assert restored - changed <= 10.5
        set_gate(c, "steady", "True", ctype="example.com/other")
        await trio.sleep(25)
        assert len(c.api.requests_of("patch", "pods/status")) == before + 1
