"""FakeApiServer's RBAC for bootstrap tokens: kubeadm's bindings, upstream's 403 text."""

from __future__ import annotations

import pytest

from kubelet.testing.apiroutes import parse_route
from kubelet.testing.bootstraprbac import bootstrap_refusal

BOOT = ("system:bootstrappers", "system:authenticated")
USER = "system:bootstrap:abcdef"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


@pytest.mark.parametrize(
    ("verb", "path"),
    [
        ("create", CSRS),
        ("get", f"{CSRS}/node-csr-x"),
        ("list", CSRS),
        ("watch", CSRS),
        ("get", "/api/v1/nodes/node-1"),
        ("get", "/healthz"),
        ("get", "/version"),
        ("get", "/apis/certificates.k8s.io/v1"),
    ],
)
def test_what_system_node_bootstrapper_and_kubeadm_allow(verb: str, path: str) -> None:
    assert bootstrap_refusal(USER, BOOT, verb, parse_route(path), path) is None


@pytest.mark.parametrize(
    ("verb", "path", "message"),
    [
        (
            "list",
            "/api/v1/nodes",
            f'nodes is forbidden: User "{USER}" cannot list resource "nodes" in API group "" '
            "at the cluster scope",
        ),
        (
            "patch",
            "/api/v1/nodes/node-1/status",
            f'nodes "node-1" is forbidden: User "{USER}" cannot patch resource "nodes/status" '
            'in API group "" at the cluster scope',
        ),
        (
            "get",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1",
            f'leases.coordination.k8s.io "node-1" is forbidden: User "{USER}" cannot get '
            'resource "leases" in API group "coordination.k8s.io" in the namespace '
            '"kube-node-lease"',
        ),
        (
            "delete",
            f"{CSRS}/node-csr-x",
            f'certificatesigningrequests.certificates.k8s.io "node-csr-x" is forbidden: User '
            f'"{USER}" cannot delete resource "certificatesigningrequests" in API group '
            '"certificates.k8s.io" at the cluster scope',
        ),
        ("get", "/metrics", f'forbidden: User "{USER}" cannot get path "/metrics"'),
    ],
)
def test_everything_else_is_forbidden(verb: str, path: str, message: str) -> None:
    refusal = bootstrap_refusal(USER, BOOT, verb, parse_route(path), path)
    assert refusal is not None and refusal.code == 403 and refusal.message == message


def test_other_identities_are_not_checked() -> None:
    groups = ("system:nodes", "system:authenticated")
    path = "/api/v1/nodes"
    assert bootstrap_refusal("system:node:node-1", groups, "list", parse_route(path), path) is None
