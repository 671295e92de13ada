"""Small builders for CRI configs used across integration tests."""

from __future__ import annotations

from kubelet.cri import api


def sandbox_config(
    name: str = "web",
    uid: str = "uid-1",
    namespace: str = "default",
    *,
    attempt: int = 0,
    log_directory: str = "",
    host_network: bool = False,
) -> api.PodSandboxConfig:
    config = api.PodSandboxConfig(
        metadata=api.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=attempt),
        log_directory=log_directory,
        labels={
            "io.kubernetes.pod.name": name,
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.uid": uid,
        },
    )
    if host_network:
        config.linux.security_context.namespace_options.network = api.NODE
    return config


def container_config(
    name: str = "app",
    image: str = "busybox",
    *,
    attempt: int = 0,
    pod: str = "web",
    uid: str = "uid-1",
    log_path: str = "",
) -> api.ContainerConfig:
    return api.ContainerConfig(
        metadata=api.ContainerMetadata(name=name, attempt=attempt),
        image=api.ImageSpec(image=image),
        log_path=log_path or f"{name}/{attempt}.log",
        labels={
            "io.kubernetes.pod.name": pod,
            "io.kubernetes.pod.uid": uid,
            "io.kubernetes.container.name": name,
        },
    )
