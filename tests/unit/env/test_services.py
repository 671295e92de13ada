"""Service environment variables (enableServiceLinks)."""

import attrs

from kubelet.api import ObjectMeta, Pod, PodSpec
from kubelet.env.services import service_env

POD = Pod(metadata=ObjectMeta(name="p", namespace="shop"), spec=PodSpec())


def service(name: str, namespace: str, ip: str, *ports: dict[str, object]) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": list(ports)},
    }


SERVICES = [
    service(
        "kubernetes", "default", "10.96.0.1", {"name": "https", "port": 443, "protocol": "TCP"}
    ),
    service(
        "my-db",
        "shop",
        "10.96.0.20",
        {"port": 5432},
        {"name": "metrics", "port": 9187, "protocol": "TCP"},
    ),
    service("headless", "shop", "None", {"port": 80}),
    service("elsewhere", "other", "10.96.0.30", {"port": 80}),
]


def test_namespace_services_and_the_master_service() -> None:
    env = service_env(POD, SERVICES)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["KUBERNETES_PORT"] == "tcp://10.96.0.1:443"
    assert env["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
    assert env["KUBERNETES_PORT_443_TCP_PROTO"] == "tcp"
    assert env["KUBERNETES_PORT_443_TCP_PORT"] == "443"
    assert env["KUBERNETES_PORT_443_TCP_ADDR"] == "10.96.0.1"
    assert env["MY_DB_SERVICE_HOST"] == "10.96.0.20"
    assert env["MY_DB_SERVICE_PORT"] == "5432"
    assert env["MY_DB_SERVICE_PORT_METRICS"] == "9187"
    assert env["MY_DB_PORT_9187_TCP_ADDR"] == "10.96.0.20"
    assert not any(k.startswith(("HEADLESS_", "ELSEWHERE_")) for k in env)


def test_service_links_off_keeps_only_the_master_service() -> None:
    pod = attrs.evolve(POD, spec=attrs.evolve(POD.spec, enable_service_links=False))
    env = service_env(pod, SERVICES)
    assert "KUBERNETES_SERVICE_HOST" in env
    assert not any(k.startswith("MY_DB_") for k in env)


def test_no_services_no_variables() -> None:
    assert service_env(POD, []) == {}


def test_ports_that_are_no_list_give_no_port_variables() -> None:
    web = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"clusterIP": "10.0.0.9", "ports": 80},
    }
    assert service_env(POD, [web]) == {"WEB_SERVICE_HOST": "10.0.0.9"}
