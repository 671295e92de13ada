"""The shared test builders build what they say, with the defaults they document."""

from __future__ import annotations

from kubelet.api import Container, PodStatus
from kubelet.cri import ContainerRunState, SandboxState
from kubelet.testing.builders import (
    exited,
    make_container,
    make_pod,
    ready_sandbox,
    running,
    runtime_status,
)


def test_make_pod_and_container() -> None:
    pod = make_pod(
        make_container("app", liveness_probe=None),
        init=(Container(name="init"),),
        name="p",
        annotations={"kubernetes.io/config.source": "file"},
        restart_policy="Never",
        status=PodStatus(phase="Running"),
    )
    assert pod.key == "default/p" and pod.uid == "uid-1" and pod.is_static
    assert [c.name for c in pod.spec.containers] == ["app"]
    assert pod.spec.containers[0].image == "busybox"
    assert [c.name for c in pod.spec.init_containers] == ["init"]
    assert pod.spec.restart_policy == "Never" and pod.status.phase == "Running"
    assert make_pod().spec.containers == ()


def test_runtime_views() -> None:
    pod = make_pod(make_container())
    status = runtime_status(pod, running("app", cid="c2"), exited("app", code=1))
    assert status.uid == "uid-1" and status.ip == "10.88.0.5"
    assert status.sandboxes == (ready_sandbox(),)
    assert status.sandboxes[0].state is SandboxState.READY
    current = status.current("app")
    assert current is not None and current.id == "c2"
    assert current.state is ContainerRunState.RUNNING
    old = status.containers_named("app")[1]
    assert old.state is ContainerRunState.EXITED and old.exit_code == 1
    assert old.finished_at == 200 * 10**9
    assert runtime_status(pod, sandboxes=()).ip == ""
