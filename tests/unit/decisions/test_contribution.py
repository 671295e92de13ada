"""The resource managers' part of a container's CRI config: merged in registration order,
written into the ContainerConfig beside (never over) what the kubelet sets itself."""

from __future__ import annotations

from kubelet.api import Container
from kubelet.api.pod import EnvVar
from kubelet.cri import api
from kubelet.decisions import (
    NO_CONTRIBUTION,
    ContainerContribution,
    container_config,
    merge_contributions,
)
from kubelet.decisions.contribution import DeviceSpec, MountSpec
from kubelet.testing.builders import make_pod

GiB = 1024**3


def _config(contribution: ContainerContribution = NO_CONTRIBUTION) -> api.ContainerConfig:
    c = Container(name="app", image="busybox", env=(EnvVar(name="MODE", value="own"),))
    pod = make_pod(c)
    return container_config(
        pod, c, 0, image_ref="sha256:1", memory_capacity=GiB, contribution=contribution
    )


def test_no_contribution_leaves_the_config_as_the_kubelet_builds_it() -> None:
    assert _config() == _config(merge_contributions([]))


def test_a_contribution_is_written_beside_the_kubelets_own_settings() -> None:
    plain = _config()
    config = _config(
        ContainerContribution(
            devices=(DeviceSpec("/dev/gadget0", "/dev/gadget0", "rw"),),
            mounts=(MountSpec("/var/run/gadget", "/run/gadget", read_only=True),),
            env=(("MODE", "device"), ("GADGET", "0")),
            annotations=(("example.com/gadget", "0"), ("io.kubernetes.container.hash", "x")),
            cdi_devices=("example.com/gadget=0",),
            cpuset_cpus="2-3",
            cpuset_mems="0",
        )
    )
    # the managers' variables come first, so the container's own win a clash
    assert [(kv.key, kv.value) for kv in config.envs] == [
        ("MODE", b"device"),
        ("GADGET", b"0"),
        ("MODE", b"own"),
    ]
    assert [(m.container_path, m.host_path, m.readonly) for m in config.mounts] == [
        ("/var/run/gadget", "/run/gadget", True)
    ]
    assert list(config.devices) == [
        api.Device(container_path="/dev/gadget0", host_path="/dev/gadget0", permissions="rw")
    ]
    assert [d.name for d in config.CDI_devices] == ["example.com/gadget=0"]
    # the kubelet's own annotations win a clash
    assert config.annotations["example.com/gadget"] == "0"
    own_hash = plain.annotations["io.kubernetes.container.hash"]
    assert config.annotations["io.kubernetes.container.hash"] == own_hash
    assert (config.linux.resources.cpuset_cpus, config.linux.resources.cpuset_mems) == ("2-3", "0")
    assert (
        config.linux.resources.memory_limit_in_bytes == plain.linux.resources.memory_limit_in_bytes
    )


def test_contributions_merge_in_order_and_a_later_cpuset_wins() -> None:
    first = ContainerContribution(env=(("A", "1"),), cpuset_cpus="0-1", cpuset_mems="0")
    second = ContainerContribution(env=(("B", "2"),), cpuset_cpus="4")
    merged = merge_contributions([first, NO_CONTRIBUTION, second])
    assert merged.env == (("A", "1"), ("B", "2"))
    assert (merged.cpuset_cpus, merged.cpuset_mems) == ("4", "0")
