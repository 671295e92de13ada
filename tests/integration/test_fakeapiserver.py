"""FakeApiServer behaves like kube-apiserver where a kubelet can tell, through real httpx."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml

from kubelet.testing import FakeApiServer

EPOCH = 1_800_000_000.0
PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
SMP = {"content-type": "application/strategic-merge-patch+json"}
MERGE = {"content-type": "application/merge-patch+json"}
JSONPATCH = {"content-type": "application/json-patch+json"}


def pod_doc(
    name: str,
    *,
    ns: str = "default",
    node: str | None = "node1",
    labels: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}
    if node is not None:
        body["nodeName"] = node
    metadata: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def rv(obj: Mapping[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(epoch=EPOCH, bookmark_interval=5.0)
    async with server.serve():
        yield server


@pytest.fixture
async def client(api: FakeApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with api.client() as c:
        yield c


class Watch:
    """A watch stream read in the background: events with the trio time they arrived."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.status: int | None = None
        self.error: Exception | None = None
        self.ended_at: float | None = None
        self.ended = trio.Event()
        self._changed = trio.Event()

    async def run(self, client: httpx.AsyncClient, path: str, **params: str) -> None:
        timeout = httpx.Timeout(5.0, read=None)
        try:
            async with client.stream(
                "GET", path, params={"watch": "1", **params}, timeout=timeout
            ) as response:
                self.status = response.status_code
                async for line in response.aiter_lines():
                    if line:
                        self.events.append(json.loads(line))
                        self.times.append(trio.current_time())
                        self._changed.set()
                        self._changed = trio.Event()
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.ended_at = trio.current_time()
            self.ended.set()
            self._changed.set()

    async def wait_for(self, n: int, seconds: float = 30.0) -> list[dict[str, Any]]:
        with trio.fail_after(seconds):
            while len(self.events) < n and not self.ended.is_set():
                await self._changed.wait()
        assert len(self.events) >= n, self.events
        return self.events

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def names(self) -> list[tuple[str, str]]:
        return [(e["type"], e["object"]["metadata"].get("name", "")) for e in self.events]


async def start_watch(
    nursery: trio.Nursery, client: httpx.AsyncClient, path: str, **params: str
) -> Watch:
    watch = Watch()
    nursery.start_soon(functools.partial(watch.run, client, path, **params))
    return watch


# -- serving ------------------------------------------------------------------------------


async def test_ephemeral_port_discovery_version_health(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    assert api.port > 0 and api.url == f"http://127.0.0.1:{api.port}"
    assert (await client.get("/healthz")).text == "ok"
    assert (await client.get("/readyz")).status_code == 200
    version = (await client.get("/version")).json()
    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "36", "v1.36.0")
    assert (await client.get("/api")).json()["versions"] == ["v1"]
    core = (await client.get("/api/v1")).json()
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "nodes", "nodes/status", "serviceaccounts/token"} <= names
    groups = {g["name"] for g in (await client.get("/apis")).json()["groups"]}
    assert groups == {
        "coordination.k8s.io",
        "node.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "certificates.k8s.io",
        "storage.k8s.io",
        "resource.k8s.io",
    }
    leases = (await client.get("/apis/coordination.k8s.io/v1")).json()
    assert [r["name"] for r in leases["resources"]] == ["leases"]
    missing = await client.get("/api/v1/frobs")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"


async def test_two_servers_get_different_ports() -> None:
    a, b = FakeApiServer(), FakeApiServer()
    async with a.serve(), b.serve():
        assert a.port != b.port


async def test_fake_clock_sleeps_and_requests_are_exact(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    """Same-process loopback I/O never looks idle to autojump: an hour passes at once."""
    started, wall = trio.current_time(), time.monotonic()
    for _ in range(60):
        await trio.sleep(60)
        assert (await client.get("/api/v1/nodes")).status_code == 200
    assert trio.current_time() - started == pytest.approx(3600, abs=1e-6)
    assert time.monotonic() - wall < 10
    assert [r.time - started for r in api.requests][-1] == pytest.approx(3600, abs=1e-6)


async def test_unix_socket(short_tmp: Path, autojump_clock: trio.abc.Clock) -> None:
    api = FakeApiServer()
    async with api.serve(None, uds=short_tmp / "api.sock"), api.client() as client:
        assert api.url == "http://fakeapiserver"
        assert (await client.get("/api/v1/namespaces/default")).json()["status"][
            "phase"
        ] == "Active"
    assert not (short_tmp / "api.sock").exists()


async def test_tls_with_client_certificates(tmp_path: Path) -> None:
    api = FakeApiServer(require_auth=True)
    async with api.serve(tls_dir=tmp_path / "pki"):
        assert api.url.startswith("https://127.0.0.1:")
        async with api.client(user="system:node:n1", groups=["system:nodes"]) as client:
            assert (await client.get("/api/v1/nodes")).status_code == 200
        assert api.requests[-1].user == "system:node:n1"
        async with api.client(user="system:node:n1", http2=True) as h2:
            offered = await h2.get("/api/v1/nodes")  # ALPN settles on HTTP/1.1
            assert (offered.status_code, offered.http_version) == (200, "HTTP/1.1")
        async with api.client() as anonymous:
            assert (await anonymous.get("/api/v1/nodes")).status_code == 401
        config = yaml.safe_load(api.kubeconfig(tmp_path / "kubeconfig").read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        assert api.ca is not None
        assert cluster == {"server": api.url, "certificate-authority": str(api.ca.cert_path)}
        assert Path(user["client-certificate"]).exists() and Path(user["client-key"]).exists()


async def test_bearer_tokens_when_auth_is_required(autojump_clock: trio.abc.Clock) -> None:
    api = FakeApiServer(require_auth=True)
    async with api.serve():
        api.auth.add_token("s3cret", "alice", ["devs"])
        async with api.client(token="s3cret") as client:
            assert (await client.get("/api/v1/pods")).status_code == 200
        async with api.client(token="wrong") as client:
            denied = await client.get("/api/v1/pods")
            assert (denied.status_code, denied.json()["reason"]) == (401, "Unauthorized")
        assert [r.user for r in api.requests] == ["alice", ""]


# -- create, get, versions ----------------------------------------------------------------


async def test_create_sets_identity_and_defaults(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    await trio.sleep(10)
    r = await client.post(PODS, json=pod_doc("web"))
    assert r.status_code == 201
    created = r.json()
    m = created["metadata"]
    assert (created["kind"], created["apiVersion"]) == ("Pod", "v1")
    assert m["uid"] and m["generation"] == 1 and m["namespace"] == "default"
    assert m["creationTimestamp"] == "2027-01-15T08:00:10Z"  # epoch + 10 s on the trio clock
    assert rv(created) == api.resource_version
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    spec = created["spec"]
    assert (spec["restartPolicy"], spec["terminationGracePeriodSeconds"]) == ("Always", 30)
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    got = (await client.get(f"{PODS}/web")).json()
    assert got == created


async def test_service_account_pull_secrets_are_copied_into_new_pods(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "default"},
        "imagePullSecrets": [{"name": "regcred"}, {"name": "other"}],
    }
    r = await client.put("/api/v1/namespaces/default/serviceaccounts/default", json=account)
    assert r.status_code == 200, r.text
    plain = (await client.post(PODS, json=pod_doc("plain"))).json()
    assert plain["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    own = pod_doc("own", imagePullSecrets=[{"name": "mine"}])
    assert (await client.post(PODS, json=own)).json()["spec"]["imagePullSecrets"] == [
        {"name": "mine"}
    ]
    mirror = pod_doc("mirror")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    assert "imagePullSecrets" not in (await client.post(PODS, json=mirror)).json()["spec"]
    missing = pod_doc("nobody", serviceAccountName="nobody")
    assert "imagePullSecrets" not in (await client.post(PODS, json=missing)).json()["spec"]


async def test_create_keeps_node_status_and_resets_pod_status(client: httpx.AsyncClient) -> None:
    node = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": "n1"},
        "status": {"capacity": {"pods": "110"}},
    }
    assert (await client.post(NODES, json=node)).json()["status"] == {"capacity": {"pods": "110"}}
    guaranteed = pod_doc("g")
    guaranteed["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    guaranteed["status"] = {"phase": "Running"}
    created = (await client.post(PODS, json=guaranteed)).json()
    assert created["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    assert created["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "memory": "1Gi",
    }


async def test_create_errors(api: FakeApiServer, client: httpx.AsyncClient) -> None:
    await client.post(PODS, json=pod_doc("web"))
    exists = await client.post(PODS, json=pod_doc("web"))
    assert exists.status_code == 409
    assert exists.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "web" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "web", "kind": "pods"},
        "code": 409,
    }
    nameless = await client.post(PODS, json={"kind": "Pod", "apiVersion": "v1", "metadata": {}})
    assert (nameless.status_code, nameless.json()["reason"]) == (422, "Invalid")
    assert nameless.json()["details"]["causes"][0]["field"] == "metadata.name"
    bad_name = await client.post(PODS, json=pod_doc("Not_Valid"))
    assert bad_name.status_code == 422
    no_ns = await client.post("/api/v1/namespaces/nope/pods", json=pod_doc("x", ns="nope"))
    assert (no_ns.status_code, no_ns.json()["message"]) == (404, 'namespaces "nope" not found')
    with_rv = pod_doc("y")
    with_rv["metadata"]["resourceVersion"] = "3"
    assert (await client.post(PODS, json=with_rv)).status_code == 500
    wrong_kind = await client.post(PODS, json={"kind": "Node", "metadata": {"name": "z"}})
    assert wrong_kind.status_code == 400
    generated = pod_doc("")
    generated["metadata"] = {"generateName": "web-"}
    name = (await client.post(PODS, json=generated)).json()["metadata"]["name"]
    assert name.startswith("web-") and len(name) == 9


async def test_not_found_status_body(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{PODS}/x")
    assert r.status_code == 404
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "x" not found',
        "reason": "NotFound",
        "details": {"name": "x", "kind": "pods"},
        "code": 404,
    }
    lease = (await client.get(f"{LEASES}/n1")).json()
    assert lease["message"] == 'leases.coordination.k8s.io "n1" not found'
    assert lease["details"] == {"name": "n1", "group": "coordination.k8s.io", "kind": "leases"}


async def test_resource_version_is_one_global_counter(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    start = api.resource_version
    a = (await client.post(PODS, json=pod_doc("a"))).json()
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"k": "v"}}
    b = (await client.post("/api/v1/namespaces/default/configmaps", json=cm)).json()
    assert (rv(a), rv(b)) == (start + 1, start + 2)
    listed = (await client.get("/api/v1/pods")).json()
    assert listed["kind"] == "PodList" and listed["metadata"]["resourceVersion"] == str(start + 2)
    assert "kind" not in listed["items"][0]
    # a write that changes nothing is no write: same version, no event
    same = await client.put("/api/v1/namespaces/default/configmaps/c", json=b)
    assert rv(same.json()) == rv(b) and api.resource_version == start + 2


# -- update, status subresource, conflicts --------------------------------------------------


async def test_update_with_stale_resource_version_conflicts(client: httpx.AsyncClient) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "node1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40},
    }
    created = (await client.post(LEASES, json=lease)).json()
    created["spec"]["renewTime"] = "2027-01-15T08:00:10.000000Z"
    updated = await client.put(f"{LEASES}/node1", json=created)
    assert updated.status_code == 200 and rv(updated.json()) > rv(created)
    stale = await client.put(f"{LEASES}/node1", json=created)
    assert stale.status_code == 409
    assert stale.json()["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "node1": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    assert stale.json()["reason"] == "Conflict"
    unconditional = dict(created)
    unconditional["metadata"] = {
        k: v for k, v in created["metadata"].items() if k != "resourceVersion"
    }
    assert (await client.put(f"{LEASES}/node1", json=unconditional)).status_code == 200
    renamed = await client.put(f"{LEASES}/other", json=created)
    assert renamed.status_code == 400
    missing = dict(unconditional, metadata={"name": "ghost", "namespace": "kube-node-lease"})
    assert (await client.put(f"{LEASES}/ghost", json=missing)).status_code == 404


async def test_status_subresource_changes_only_status(client: httpx.AsyncClient) -> None:
    created = (await client.post(PODS, json=pod_doc("web"))).json()
    changed = json.loads(json.dumps(created))
    changed["status"] = {"phase": "Running"}
    changed["metadata"]["labels"] = {"new": "label"}
    changed["spec"]["activeDeadlineSeconds"] = 5
    after_status = (await client.put(f"{PODS}/web/status", json=changed)).json()
    assert after_status["status"] == {"phase": "Running"}
    assert "labels" not in after_status["metadata"]
    assert "activeDeadlineSeconds" not in after_status["spec"]
    assert after_status["metadata"]["generation"] == 1
    # ...and the main resource ignores status, but takes spec and metadata
    changed["metadata"]["resourceVersion"] = after_status["metadata"]["resourceVersion"]
    changed["status"] = {"phase": "Failed"}
    after_main = (await client.put(f"{PODS}/web", json=changed)).json()
    assert after_main["status"] == {"phase": "Running"}
    assert after_main["metadata"]["labels"] == {"new": "label"}
    assert after_main["metadata"]["generation"] == 2
    status = await client.get(f"{PODS}/web/status")
    assert status.json()["status"] == {"phase": "Running"}
    # subresources take only their own verbs
    assert (await client.delete(f"{PODS}/web/status")).status_code == 405
    assert (await client.get(f"{PODS}/web/nosuch")).status_code == 404
    assert (await client.get(f"{PODS}/web/exec")).status_code == 400  # no upgrade
    token = "/api/v1/namespaces/default/serviceaccounts/default/token"
    assert (await client.get(token)).status_code == 405


async def test_resize_subresource_changes_only_resources(client: httpx.AsyncClient) -> None:
    await client.post(PODS, json=pod_doc("web"))
    resources = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}
    patch = {"spec": {"containers": [{"name": "c", "resources": resources}]}}
    resized = (await client.patch(f"{PODS}/web/resize", json=patch, headers=SMP)).json()
    assert resized["spec"]["containers"][0]["resources"] == resources
    assert resized["metadata"]["generation"] == 2
    again = await client.patch(f"{PODS}/web/resize", json=patch, headers=SMP)
    assert again.json()["metadata"]["generation"] == 2  # nothing changed
    other = {"spec": {"activeDeadlineSeconds": 5}}
    refused = await client.patch(f"{PODS}/web/resize", json=other, headers=SMP)
    assert refused.status_code == 422
    assert "only cpu and memory resources are mutable" in refused.json()["message"]


async def test_node_status_patch_with_strategic_merge(client: httpx.AsyncClient) -> None:
    node = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": "node1"},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }
    await client.post(NODES, json=node)
    patch = {
        "status": {
            "$setElementOrder/conditions": [
                {"type": "MemoryPressure"},
                {"type": "DiskPressure"},
                {"type": "Ready"},
            ],
            "conditions": [
                {"type": "DiskPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "addresses": [{"type": "Hostname", "address": "node1"}],
        }
    }
    r = await client.patch(f"{NODES}/node1/status", content=json.dumps(patch), headers=SMP)
    status = r.json()["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("Ready", "True"),
    ]
    assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
    # the main resource ignores status in a patch, as in a PUT
    labels = {"metadata": {"labels": {"zone": "a"}}, "status": {"conditions": None}}
    r = await client.patch(f"{NODES}/node1", content=json.dumps(labels), headers=SMP)
    assert r.json()["metadata"]["labels"] == {"zone": "a"}
    assert len(r.json()["status"]["conditions"]) == 3


async def test_pod_status_patch_types_and_preconditions(client: httpx.AsyncClient) -> None:
    created = (await client.post(PODS, json=pod_doc("web"))).json()
    uid = created["metadata"]["uid"]
    smp = {
        "metadata": {"uid": uid},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"},
    }
    r = await client.patch(f"{PODS}/web/status", content=json.dumps(smp), headers=SMP)
    assert r.status_code == 200 and r.json()["status"]["phase"] == "Running"
    merge = {"status": {"conditions": [{"type": "Initialized", "status": "True"}]}}
    r = await client.patch(f"{PODS}/web/status", content=json.dumps(merge), headers=MERGE)
    assert [c["type"] for c in r.json()["status"]["conditions"]] == ["Initialized"]
    ops = [{"op": "replace", "path": "/status/phase", "value": "Succeeded"}]
    r = await client.patch(f"{PODS}/web/status", content=json.dumps(ops), headers=JSONPATCH)
    assert r.json()["status"]["phase"] == "Succeeded"
    wrong_uid = {"metadata": {"uid": "someone-else"}, "status": {"phase": "Failed"}}
    r = await client.patch(f"{PODS}/web/status", content=json.dumps(wrong_uid), headers=SMP)
    assert r.status_code == 409
    assert r.json()["message"].startswith("Precondition failed: UID in precondition: someone-else")
    stale = {"metadata": {"resourceVersion": "1"}, "status": {"phase": "Failed"}}
    r = await client.patch(f"{PODS}/web/status", content=json.dumps(stale), headers=SMP)
    assert r.status_code == 409 and "has been modified" in r.json()["message"]
    failing = [{"op": "test", "path": "/status/phase", "value": "Running"}]
    r = await client.patch(f"{PODS}/web", content=json.dumps(failing), headers=JSONPATCH)
    assert r.status_code == 422
    r = await client.patch(f"{PODS}/web", content=b"{oops", headers=SMP)
    assert r.status_code == 400
    r = await client.patch(
        f"{PODS}/web", content=b"{}", headers={"content-type": "application/yaml"}
    )
    assert r.status_code == 415
    r = await client.patch(f"{PODS}/ghost", content=b"{}", headers=SMP)
    assert r.status_code == 404


# -- delete ---------------------------------------------------------------------------------


async def test_graceful_pod_deletion(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    await client.post(PODS, json=pod_doc("web"))
    pending = (await client.delete(f"{PODS}/web")).json()
    m = pending["metadata"]
    assert m["deletionGracePeriodSeconds"] == 30
    assert m["deletionTimestamp"] == "2027-01-15T08:00:30Z"
    assert (await client.get(f"{PODS}/web")).status_code == 200
    shorter = await client.request("DELETE", f"{PODS}/web", json={"gracePeriodSeconds": 10})
    assert shorter.json()["metadata"]["deletionGracePeriodSeconds"] == 10
    longer = await client.request("DELETE", f"{PODS}/web", json={"gracePeriodSeconds": 60})
    assert longer.json()["metadata"]["deletionGracePeriodSeconds"] == 10
    # an update cannot clear the deletion
    obj = longer.json()
    obj["metadata"].pop("deletionTimestamp")
    kept = (await client.put(f"{PODS}/web", json=obj)).json()
    assert kept["metadata"]["deletionTimestamp"]
    gone = await client.delete(f"{PODS}/web", params={"gracePeriodSeconds": "0"})
    assert gone.status_code == 200 and gone.json()["kind"] == "Pod"
    assert (await client.get(f"{PODS}/web")).status_code == 404
    # unscheduled and finished pods go at once
    await client.post(PODS, json=pod_doc("unbound", node=None))
    assert (await client.delete(f"{PODS}/unbound")).status_code == 200
    assert api.get("Pod", "default", "unbound") is None


async def test_delete_preconditions_and_status_body(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    created = (await client.post(PODS, json=pod_doc("web"))).json()
    options = {"gracePeriodSeconds": 0, "preconditions": {"uid": "not-it"}}
    r = await client.request("DELETE", f"{PODS}/web", json=options)
    assert r.status_code == 409
    assert r.json()["message"] == (
        f"Precondition failed: UID in precondition: not-it, UID in object meta: "
        f"{created['metadata']['uid']}"
    )
    options["preconditions"] = {"uid": created["metadata"]["uid"]}
    assert (await client.request("DELETE", f"{PODS}/web", json=options)).status_code == 200
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}}
    made = (await client.post("/api/v1/namespaces/default/configmaps", json=cm)).json()
    r = await client.delete("/api/v1/namespaces/default/configmaps/c")
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "c", "kind": "configmaps", "uid": made["metadata"]["uid"]},
    }
    assert (await client.delete("/api/v1/namespaces/default/configmaps/c")).status_code == 404


async def test_finalizers_hold_deletion_until_removed(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c", "finalizers": ["x/y"]}}
    await client.post("/api/v1/namespaces/default/configmaps", json=cm)
    held = (await client.delete("/api/v1/namespaces/default/configmaps/c")).json()
    assert held["metadata"]["deletionTimestamp"]
    patch = {"metadata": {"finalizers": None}}
    await client.patch(
        "/api/v1/namespaces/default/configmaps/c", content=json.dumps(patch), headers=MERGE
    )
    assert api.get("ConfigMap", "default", "c") is None


async def test_namespace_deletion_and_delete_collection(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    await client.post(
        "/api/v1/namespaces",
        json={"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team"}},
    )
    for name in ("a", "b"):
        await client.post("/api/v1/namespaces/team/pods", json=pod_doc(name, ns="team", node=None))
    await client.post(PODS, json=pod_doc("keep", node=None, labels={"app": "x"}))
    await client.post(PODS, json=pod_doc("drop", node=None, labels={"app": "y"}))
    r = await client.delete(PODS, params={"labelSelector": "app=y"})
    assert [i["metadata"]["name"] for i in r.json()["items"]] == ["drop"]
    await client.delete("/api/v1/namespaces/team")
    assert sorted(api.objects("Pod")) == ["default/keep"]
    assert "team" not in api.objects("Namespace")


# -- lists --------------------------------------------------------------------------------


async def test_list_paging_is_consistent_and_expires(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    for i in range(5):
        api.create(pod_doc(f"p{i}"))
    first = (await client.get(PODS, params={"limit": "2"})).json()
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    # changes after the first page do not show up in the later pages
    api.delete("Pod", "default", "p3", grace=0)
    api.create(pod_doc("p5"))
    second = (await client.get(PODS, params={"limit": "2", "continue": token})).json()
    assert [p["metadata"]["name"] for p in second["items"]] == ["p2", "p3"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    third = (
        await client.get(PODS, params={"limit": "2", "continue": second["metadata"]["continue"]})
    ).json()
    assert [p["metadata"]["name"] for p in third["items"]] == ["p4"]
    assert "continue" not in third["metadata"]
    api.compact()
    expired = await client.get(PODS, params={"limit": "2", "continue": token})
    assert (expired.status_code, expired.json()["reason"]) == (410, "Expired")
    assert (await client.get(PODS, params={"continue": "garbage!"})).status_code == 400


async def test_list_exact_resource_version(api: FakeApiServer, client: httpx.AsyncClient) -> None:
    api.create(pod_doc("a"))
    version = api.resource_version
    api.create(pod_doc("b"))
    params = {"resourceVersion": str(version), "resourceVersionMatch": "Exact"}
    old = (await client.get(PODS, params=params)).json()
    assert [p["metadata"]["name"] for p in old["items"]] == ["a"]
    assert old["metadata"]["resourceVersion"] == str(version)


async def test_label_selectors(api: FakeApiServer, client: httpx.AsyncClient) -> None:
    api.create(pod_doc("a", labels={"app": "web", "tier": "front"}))
    api.create(pod_doc("b", labels={"app": "db"}))
    api.create(pod_doc("c"))

    async def names(selector: str) -> list[str]:
        r = await client.get(PODS, params={"labelSelector": selector})
        assert r.status_code == 200, r.text
        return [p["metadata"]["name"] for p in r.json()["items"]]

    assert await names("app=web") == ["a"]
    assert await names("app==db") == ["b"]
    assert await names("app!=web") == ["b", "c"]
    assert await names("app in (web, db)") == ["a", "b"]
    assert await names("app notin (web)") == ["b", "c"]
    assert await names("tier") == ["a"]
    assert await names("!tier") == ["b", "c"]
    assert await names("app=web,tier=front") == ["a"]
    assert await names("app in (web,db),!tier") == ["b"]
    bad = await client.get(PODS, params={"labelSelector": "app=(("})
    assert (bad.status_code, bad.json()["reason"]) == (400, "BadRequest")


async def test_field_selectors_and_all_namespaces(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    api.create({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "other"}})
    api.create(pod_doc("a", node="node1"))
    api.create(pod_doc("b", node="node2"))
    api.create(pod_doc("c", node=None, ns="other"))
    api.update_status("Pod", "default", "b", {"phase": "Running"})

    async def names(selector: str, path: str = "/api/v1/pods") -> list[str]:
        r = await client.get(path, params={"fieldSelector": selector})
        assert r.status_code == 200, r.text
        return [p["metadata"]["name"] for p in r.json()["items"]]

    assert await names("spec.nodeName=node1") == ["a"]
    assert await names("spec.nodeName!=node1") == ["b", "c"]
    assert await names("spec.nodeName=") == ["c"]
    assert await names("status.phase=Running") == ["b"]
    assert await names("metadata.namespace=other") == ["c"]
    assert await names("metadata.name=a,spec.nodeName=node1") == ["a"]
    assert await names("status.phase==Pending", PODS) == ["a"]
    bad = await client.get(PODS, params={"fieldSelector": "spec.hostname=x"})
    assert bad.status_code == 400
    assert bad.json()["message"] == "field label not supported: spec.hostname"


# -- watches ------------------------------------------------------------------------------


async def test_watch_from_zero_sends_state_then_changes(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.create(pod_doc("a"))
    async with trio.open_nursery() as nursery:
        watch = await start_watch(nursery, client, "/api/v1/pods", resourceVersion="0")
        await watch.wait_for(1)
        api.update_status("Pod", "default", "a", {"phase": "Running"})
        api.create(pod_doc("b"))
        api.delete("Pod", "default", "b", grace=0)
        events = await watch.wait_for(4)
        nursery.cancel_scope.cancel()
    assert watch.status == 200
    assert watch.names() == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")]
    assert events[0]["object"]["kind"] == "Pod"
    versions = [rv(e["object"]) for e in events]
    assert versions == sorted(versions) and versions[-1] == api.resource_version


async def test_watch_from_a_version_replays_what_came_after(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.create(pod_doc("a"))
    since = api.resource_version
    api.create(pod_doc("b"))
    api.update_status("Pod", "default", "a", {"phase": "Running"})
    async with trio.open_nursery() as nursery:
        watch = await start_watch(nursery, client, PODS, resourceVersion=str(since))
        await watch.wait_for(2)
        nursery.cancel_scope.cancel()
    assert watch.names() == [("ADDED", "b"), ("MODIFIED", "a")]


async def test_watch_too_old_gets_a_410_error_event(autojump_clock: trio.abc.Clock) -> None:
    api = FakeApiServer(history=3)
    async with api.serve(), api.client() as client:
        for i in range(6):
            api.create(pod_doc(f"p{i}"))
        watch = Watch()
        await watch.run(client, PODS, resourceVersion="2")
    assert watch.status == 200 and watch.types() == ["ERROR"]
    status = watch.events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"] == f"too old resource version: 2 ({api.store.compacted})"


async def test_watch_selectors_turn_changes_into_added_and_deleted(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.create(pod_doc("web", node=None))
    async with trio.open_nursery() as nursery:
        watch = await start_watch(
            nursery, client, "/api/v1/pods", fieldSelector="spec.nodeName=node1"
        )
        await trio.sleep(1)
        api.patch("Pod", "default", "web", {"spec": {"nodeName": "node1"}})  # bound: ADDED
        api.update_status("Pod", "default", "web", {"phase": "Running"})  # MODIFIED
        api.patch("Pod", "default", "web", {"spec": {"nodeName": "node2"}})  # gone: DELETED
        events = await watch.wait_for(3)
        nursery.cancel_scope.cancel()
    assert watch.types() == ["ADDED", "MODIFIED", "DELETED"]
    # the DELETED carries the last matching state at the new version
    assert events[2]["object"]["spec"]["nodeName"] == "node1"
    assert rv(events[2]["object"]) == api.resource_version


async def test_watch_bookmarks_on_the_fake_clock(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    async with trio.open_nursery() as nursery:
        t0 = trio.current_time()
        watch = await start_watch(
            nursery,
            client,
            NODES,
            allowWatchBookmarks="true",
            resourceVersion=str(api.resource_version),
        )
        await trio.sleep(7)
        api.create({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}})
        events = await watch.wait_for(3)
        nursery.cancel_scope.cancel()
    assert watch.types()[:3] == ["BOOKMARK", "ADDED", "BOOKMARK"]
    assert [round(t - t0, 3) for t in watch.times[:3]] == [5.0, 7.0, 10.0]
    bookmark = events[2]["object"]
    assert bookmark == {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(api.resource_version)},
    }


async def test_watch_timeout_seconds_ends_the_stream(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    t0 = trio.current_time()
    watch = Watch()
    await watch.run(client, PODS, timeoutSeconds="30")
    assert watch.error is None and watch.ended_at == pytest.approx(t0 + 30, abs=1e-6)
    assert api.requests[-1].outcome == "ended"
    assert api.requests[-1].finished == pytest.approx(t0 + 30, abs=1e-6)


async def test_send_initial_events_ends_with_an_annotated_bookmark(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.create(pod_doc("a"))
    watch = Watch()
    await watch.run(
        client,
        PODS,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
        timeoutSeconds="1",
    )
    assert watch.types() == ["ADDED", "BOOKMARK"]
    annotations = watch.events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


# -- faults -----------------------------------------------------------------------------------


async def test_error_faults_match_verb_and_resource(
    api: FakeApiServer, client: httpx.AsyncClient
) -> None:
    api.create(pod_doc("web"))
    api.faults.fail_next("patch", "pods/status", 2, 500)
    patch = json.dumps({"status": {"phase": "Running"}})
    first = await client.patch(f"{PODS}/web/status", content=patch, headers=SMP)
    assert (first.status_code, first.json()["reason"]) == (500, "InternalError")
    assert (await client.get(f"{PODS}/web")).status_code == 200  # other verbs unaffected
    assert (await client.patch(f"{PODS}/web/status", content=patch, headers=SMP)).status_code == 500
    assert (await client.patch(f"{PODS}/web/status", content=patch, headers=SMP)).status_code == 200
    api.faults.throttle("list", "pods", retry_after=3, times=1)
    throttled = await client.get(PODS)
    assert throttled.status_code == 429 and throttled.headers["retry-after"] == "3"
    assert throttled.json()["details"]["retryAfterSeconds"] == 3
    api.faults.forbid("get", "nodes", times=1)
    forbidden = await client.get(f"{NODES}/n1")
    assert (forbidden.status_code, forbidden.json()["reason"]) == (403, "Forbidden")
    api.faults.conflict("update", "leases")
    lease = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "metadata": {"name": "n1"}}
    await client.post(LEASES, json=lease)
    conflict = await client.put(f"{LEASES}/n1", json=lease)
    assert conflict.status_code == 409 and "has been modified" in conflict.json()["message"]
    assert (await client.put(f"{LEASES}/n1", json=lease)).status_code == 200
    api.faults.fail(code=503, path="/healthz", times=1)
    assert (await client.get("/healthz")).status_code == 503
    assert api.faults.rules == []


async def test_latency_fault_on_the_fake_clock(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.faults.delay("get", "nodes", 3.0)
    t0 = trio.current_time()
    assert (await client.get(f"{NODES}/n1")).status_code == 404
    assert trio.current_time() - t0 == pytest.approx(3.0, abs=1e-6)
    api.faults.clear()
    api.faults.delay("list", "*", 7.0)
    t0 = trio.current_time()
    with pytest.raises(httpx.ReadTimeout):
        await client.get(NODES, timeout=5.0)
    assert trio.current_time() - t0 == pytest.approx(5.0, abs=1e-6)


async def test_stall_waits_until_the_client_gives_up(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.faults.stall("create", "events", times=1)
    event = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e1"}}
    with trio.move_on_after(600) as scope:
        await client.post("/api/v1/namespaces/default/events", json=event, timeout=None)
    assert scope.cancelled_caught
    await trio.sleep(1)
    stalled = api.requests_of("create", "events")[0]
    assert (stalled.status, stalled.outcome) == (None, "cancelled")
    assert (await client.post("/api/v1/namespaces/default/events", json=event)).status_code == 201


async def test_reset_cuts_the_connection(api: FakeApiServer, client: httpx.AsyncClient) -> None:
    api.faults.reset("get", "pods")
    with pytest.raises(httpx.RemoteProtocolError):
        await client.get(f"{PODS}/x")
    assert api.requests[-1].outcome == "reset"
    assert (await client.get(f"{PODS}/x")).status_code == 404


async def test_expire_next_watch(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.faults.expire_next_watch("pods")
    watch = Watch()
    await watch.run(client, PODS, resourceVersion=str(api.resource_version))
    assert watch.types() == ["ERROR"] and watch.events[0]["object"]["code"] == 410
    async with trio.open_nursery() as nursery:
        again = await start_watch(nursery, client, PODS, resourceVersion="0")
        api.create(pod_doc("a"))
        await again.wait_for(1)
        nursery.cancel_scope.cancel()
    assert again.types() == ["ADDED"]


async def test_answer_with_raw_bytes(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    """Malformed API data for the client under test: the body as given, once, then normal."""
    hostile = b'{"type":"ADDED","object":{"kind":"Pod","metadata":"x"}}\n'
    api.faults.answer("watch", "pods", hostile, times=1)
    answered = await client.get(PODS, params={"watch": "true"})
    assert (answered.status_code, answered.content) == (200, hostile)
    assert (await client.get(PODS)).json()["kind"] == "PodList"
    assert api.faults.rules == []


async def test_drop_watches_cleanly_or_by_cutting(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    async with trio.open_nursery() as nursery:
        clean = await start_watch(nursery, client, PODS)
        cut = await start_watch(nursery, client, NODES)
        await trio.sleep(1)
        assert api.open_watches() == 2
        assert await api.drop_watches("pods") == 1
        await clean.ended.wait()
        assert await api.drop_watches(abort=True) == 1
        await cut.ended.wait()
    assert clean.error is None
    assert isinstance(cut.error, httpx.RemoteProtocolError)
    assert api.open_watches() == 0
    assert {r.resource: r.outcome for r in api.requests_of("watch")} == {
        "pods": "dropped",
        "nodes": "aborted",
    }


async def test_outage_refuses_connections_and_cuts_watches(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    api.create(pod_doc("a"))
    port = api.port
    async with trio.open_nursery() as nursery:
        watch = await start_watch(nursery, client, PODS)
        await watch.wait_for(1)
        async with api.outage():
            await watch.ended.wait()
            assert isinstance(watch.error, httpx.RemoteProtocolError)
            assert not api.serving
            with pytest.raises(httpx.ConnectError):
                await client.get(PODS)
            await trio.sleep(30)
        assert api.serving and api.port == port
        assert len((await client.get(PODS)).json()["items"]) == 1
    await api.go_down()
    await api.go_down()  # idempotent
    await api.come_up()
    assert (await client.get("/healthz")).status_code == 200


async def test_request_log_and_idle_request_counts(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    t0 = trio.current_time()
    await client.post(PODS, json=pod_doc("web"))
    await trio.sleep(60)
    await client.patch(f"{PODS}/web/status", content=b'{"status":{}}', headers=SMP)
    await client.get(PODS, params={"labelSelector": "a=b", "limit": "10"})
    log = api.requests
    assert [(r.method, r.verb, r.resource, r.status) for r in log] == [
        ("POST", "create", "pods", 201),
        ("PATCH", "patch", "pods/status", 200),
        ("GET", "list", "pods", 200),
    ]
    assert log[1].content_type == SMP["content-type"] and log[1].json() == {"status": {}}
    assert log[2].query == {"labelSelector": "a=b", "limit": "10"}
    assert [round(r.time - t0) for r in log] == [0, 60, 60]
    assert api.count("patch", "pods/status") == 1
    assert api.count(path=PODS) == 2
    # "API requests per idle minute": nothing happens while nobody asks
    api.clear_requests()
    await trio.sleep(60)
    assert api.requests == []


# -- auth, tokens, leases, events -------------------------------------------------------------


async def test_token_and_access_reviews(api: FakeApiServer, client: httpx.AsyncClient) -> None:
    api.auth.add_token("tok", "alice", ["devs"], uid="u-1")
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "tok"},
    }
    r = await client.post("/apis/authentication.k8s.io/v1/tokenreviews", json=review)
    assert r.status_code == 201
    assert r.json()["status"] == {
        "authenticated": True,
        "user": {"username": "alice", "uid": "u-1", "groups": ["devs"]},
    }
    review["spec"] = {"token": "nope"}
    r = await client.post("/apis/authentication.k8s.io/v1/tokenreviews", json=review)
    assert r.json()["status"]["authenticated"] is False
    api.auth.allow("alice", "get", "nodes/proxy")
    api.auth.deny("bob", path="/metrics")
    sar_path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

    async def allowed(spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        result: dict[str, Any] = (await client.post(sar_path, json=body)).json()["status"]
        return result

    res = {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1"}
    assert (await allowed({"user": "alice", "resourceAttributes": res}))["allowed"] is True
    assert (await allowed({"user": "carol", "resourceAttributes": res}))["allowed"] is False
    denied = await allowed(
        {"user": "bob", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    )
    assert (denied["allowed"], denied["denied"]) == (False, True)
    assert len(api.auth.reviews) == 3
    assert (await client.get(sar_path)).status_code == 405


async def test_token_request_for_a_service_account(
    api: FakeApiServer, client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    pod = (await client.post(PODS, json=pod_doc("web"))).json()
    path = "/api/v1/namespaces/default/serviceaccounts/default/token"
    bound = {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": pod["metadata"]["uid"]}
    body = {"spec": {"audiences": ["api"], "expirationSeconds": 3600, "boundObjectRef": bound}}
    r = await client.post(path, json=body)
    assert r.status_code == 201
    answer = r.json()
    assert answer["kind"] == "TokenRequest"
    assert answer["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"
    token = answer["status"]["token"]
    info = api.auth.authenticate(token, api.now())
    assert info is not None and info.user == "system:serviceaccount:default:default"
    await trio.sleep(3601)
    assert api.auth.authenticate(token, api.now()) is None
    body["spec"]["expirationSeconds"] = 60
    assert (await client.post(path, json=body)).status_code == 422
    missing = "/api/v1/namespaces/default/serviceaccounts/ghost/token"
    assert (await client.post(missing, json={"spec": {}})).status_code == 404
    bound["uid"] = "stale"
    body["spec"]["expirationSeconds"] = 3600
    assert (await client.post(path, json=body)).status_code == 409


async def test_events_create_and_create_on_update(client: httpx.AsyncClient) -> None:
    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Started",
        "count": 1,
    }
    path = "/api/v1/namespaces/default/events"
    assert (await client.post(path, json=event)).status_code == 201
    patch = json.dumps({"count": 2})
    assert (await client.patch(f"{path}/web.1", content=patch, headers=SMP)).json()["count"] == 2
    event["metadata"] = {"name": "web.2"}
    assert (await client.put(f"{path}/web.2", json=event)).status_code == 201
    found = await client.get(
        path, params={"fieldSelector": "involvedObject.name=web,reason=Started"}
    )
    assert [e["metadata"]["name"] for e in found.json()["items"]] == ["web.1", "web.2"]


# -- helpers ----------------------------------------------------------------------------------


async def test_store_helpers_act_without_http(
    api: FakeApiServer, autojump_clock: trio.abc.Clock
) -> None:
    created = api.create(pod_doc("web", labels={"app": "web"}))
    assert created["status"]["phase"] == "Pending"
    assert api.get("Pod", "default", "web") == created
    assert api.get("pods", "default", "missing") is None
    node = api.create({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}})
    assert api.get("Node", "n1") == node
    assert [p["metadata"]["name"] for p in api.list("Pod", label_selector="app=web")] == ["web"]
    assert api.list("Pod", "kube-system") == []
    assert list(api.objects("Pod")) == ["default/web"]
    assert sorted(api.objects("Namespace")) == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
    running = api.update_status("Pod", "default", "web", {"phase": "Running"})
    assert running["status"] == {"phase": "Running"} and rv(running) > rv(created)
    edited = api.update_status("Pod", "default", "web", lambda s: s.update(podIP="10.0.0.5"))
    assert edited["status"] == {"phase": "Running", "podIP": "10.0.0.5"}
    patched = api.patch("Pod", "default", "web", {"metadata": {"labels": {"v": "2"}}})
    assert patched["metadata"]["labels"] == {"app": "web", "v": "2"}
    pending = api.delete("Pod", "default", "web")
    assert pending is not None and pending["metadata"]["deletionGracePeriodSeconds"] == 30
    api.delete("Pod", "default", "web", grace=0)
    assert api.get("Pod", "default", "web") is None
    assert api.delete("Pod", "default", "web") is None
    assert api.requests == []
    loaded = api.load([{"kind": "List", "items": [pod_doc("x"), pod_doc("y")]}])
    assert [o["metadata"]["name"] for o in loaded] == ["x", "y"]
    known = pod_doc("known")
    known["metadata"].update(uid="uid-1", resourceVersion="999")
    again = api.create(known)
    assert again["metadata"]["uid"] == "uid-1" and rv(again) == api.resource_version


# -- process mode -------------------------------------------------------------------------------


async def test_process_mode(tmp_path: Path) -> None:
    """`python -m kubelet.testing.fakeapiserver` serves until SIGTERM (real clock)."""
    port_file = tmp_path / "port"
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(yaml.safe_dump_all([pod_doc("preloaded")]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelet.testing.fakeapiserver",
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(port_file),
            "--load",
            str(manifest),
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(20):
            while not port_file.exists():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                await trio.sleep(0.05)
        port = int(port_file.read_text())
        assert port > 0
        config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        token = config["users"][0]["user"]["token"]
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as c:
            pods = (await c.get(PODS)).json()["items"]
            assert [p["metadata"]["name"] for p in pods] == ["preloaded"]
            assert (await c.post(PODS, json=pod_doc("more"))).status_code == 201
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        if proc.stderr is not None:
            proc.stderr.close()
