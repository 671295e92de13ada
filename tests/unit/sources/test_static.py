"""Static manifests: decoding with line numbers, defaulting (SP-01…SP-11, upstream rules), UIDs."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
import yaml

from kubelet.api import Pod, from_wire, to_wire
from kubelet.api.converter import _make_converter
from kubelet.cri import labels
from kubelet.sources import ManifestError, load_manifest, load_pod
from kubelet.sources.limits import Budget
from kubelet.sources.static import (
    MAX_CONFIG_LENGTH,
    apply_static_defaults,
    decode_pod,
    default_pull_policy,
    fnv1a_128,
    static_pod_uid,
    warm_up,
)
from kubelet.sources.validation import static_pod_priority_warning, validate_pod
from kubelet.testing import many_maps_manifest
from kubelet.testing.hostile import many_maps_json

PATH = "/etc/kubernetes/manifests/web.yaml"
URL = "http://config.example/pods"


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec},
    }


def load(doc: dict[str, Any] | str | bytes, node: str = "node1", **kw: Any) -> Pod:
    data = doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(doc))
    raw = data.encode() if isinstance(data, str) else data
    return load_pod(raw, kw.pop("path", PATH), node_name=node, **kw)


def error_of(doc: dict[str, Any] | str | bytes, **kw: Any) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load(doc, **kw)
    return info.value


# -- SP vectors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "node",
    ["node1", "Node1", "NODE1"],
    ids=["SP-01", "SP-02", "SP-03"],
)
def test_sp01_03_static_pod_name_is_lowercased_node(node: str) -> None:
    pod = load(manifest() | {"metadata": {"name": "static-pod1"}}, node)
    assert pod.metadata.name == "static-pod1-node1"


def test_sp03_uppercase_name_fails_validation() -> None:
    pod = load(manifest())
    bad = from_wire(
        Pod, to_wire(pod) | {"metadata": {"name": "static-pod1-NODE1", "namespace": "d"}}
    )
    assert [e.path for e in validate_pod(bad)] == ["metadata.name"]


def test_sp04_read_pod_from_file_with_uid() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "test", "uid": "12345", "namespace": "mynamespace"},
        "spec": {"containers": [{"name": "image", "image": "test/image"}]},
    }
    pod = load(doc, "random-test-hostname")
    assert to_wire(pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "test-random-test-hostname",
            "namespace": "mynamespace",
            "uid": "12345",
            "annotations": {labels.CONFIG_HASH: "12345"},
        },
        "spec": {
            "containers": [
                {
                    "name": "image",
                    "image": "test/image",
                    "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30,
            "nodeName": "random-test-hostname",
            "schedulerName": "default-scheduler",
            "enableServiceLinks": True,
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
        },
        "status": {"phase": "Pending"},
    }


RICH_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "test", "uid": "12345", "namespace": "mynamespace"},
    "spec": {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "containers": [
            {
                "name": "image",
                "image": "test/image",
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "NO"}],
            }
        ],
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
    },
    "status": {"podIP": "1.2.3.4", "podIPs": [{"ip": "1.2.3.4"}]},
}


@pytest.mark.parametrize("fmt", ["json", "yaml"], ids=["SP-05-json", "SP-05-yaml"])
def test_sp05_decode_single_pod_round_trips(fmt: str) -> None:
    data = json.dumps(RICH_POD) if fmt == "json" else yaml.safe_dump(RICH_POD)
    pod = decode_pod(data.encode(), PATH)
    assert to_wire(pod) == RICH_POD


def test_sp06_decode_pod_list() -> None:
    items = [dict(RICH_POD, metadata={"name": n, "uid": n}) for n in ("a", "b")]
    body = yaml.safe_dump({"apiVersion": "v1", "kind": "PodList", "items": items}).encode()
    loaded = load_manifest(body, URL, node_name="n", is_file=False, allow_list=True)
    assert [p.metadata.name for p in loaded.pods] == ["a-n", "b-n"]
    assert [p.uid for p in loaded.pods] == ["a", "b"]
    assert all(
        to_wire(p)["spec"]["containers"] == RICH_POD["spec"]["containers"] for p in loaded.pods
    )
    # no file toleration for URL pods
    assert all(p.spec.tolerations == () for p in loaded.pods)


def test_sp06_pod_list_only_from_url() -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": []})
    assert "a PodList is read only from a manifest URL" in str(error_of(body))


def test_sp06_one_bad_item_fails_the_list() -> None:
    items = [RICH_POD, dict(RICH_POD, metadata={"name": ""})]
    body = yaml.safe_dump({"apiVersion": "v1", "kind": "PodList", "items": items}).encode()
    with pytest.raises(ManifestError, match="name is needed for the pod") as info:
        load_manifest(body, URL, node_name="n", is_file=False, allow_list=True)
    assert info.value.line is not None


def test_sp07_cluster_trust_bundle_rejected() -> None:
    doc = manifest(
        volumes=[
            {
                "name": "v",
                "projected": {"sources": [{"clusterTrustBundle": {"name": "x", "path": "p"}}]},
            }
        ]
    )
    assert "static pods may not reference clustertrustbundles" in str(error_of(doc))


def test_sp08_resource_claims_rejected() -> None:
    doc = manifest(resourceClaims=[{"name": "c", "resourceClaimName": "x"}])
    assert "static pods may not reference resourceclaims" in str(error_of(doc))


@pytest.mark.parametrize(
    ("priority", "class_name", "warning"),
    [
        (None, "invalid-priority-class-name", "non-nil PriorityClassName and nil Priority"),
        (2000001000, "", "Priority set without PriorityClassName"),
        (2000001000, "system-node-critical", None),
        (0, "", "Priority set without PriorityClassName"),
        (2000001000, "invalid-priority-class-name", "non-standard values for Priority"),
    ],
    ids=["SP-09", "SP-10", "SP-11", "SP-10-zero", "SP-11-mismatch"],
)
def test_sp09_11_priority_warnings(
    priority: int | None, class_name: str, warning: str | None
) -> None:
    spec: dict[str, Any] = {"priorityClassName": class_name}
    if priority is not None:
        spec["priority"] = priority
    doc = manifest(**spec)
    loaded = load_manifest(json.dumps(doc).encode(), PATH, node_name="n", is_file=True)
    got = static_pod_priority_warning(loaded.pods[0].spec)
    if warning is None:
        assert got is None and loaded.warnings == ()
    else:
        assert got is not None and warning in got
        assert loaded.warnings == (f"{PATH}: {got}",)


def test_sp09_full_warning_text() -> None:
    pod = load(manifest(priorityClassName="x"))
    assert static_pod_priority_warning(pod.spec) == (
        "Static Pod has non-nil PriorityClassName and nil Priority. Kubelet will not make use "
        "of the priority. Mirror pod creation may fail."
    )


# -- UIDs -----------------------------------------------------------------------------------


def test_fnv1a_128_known_vectors() -> None:
    assert f"{fnv1a_128(b''):032x}" == "6c62272e07bb014262b821756295c58d"
    assert f"{fnv1a_128(b'a'):032x}" == "d228cb696f1a8caf78912b704e4a8964"


def test_generated_uid_is_deterministic_and_sensitive() -> None:
    base = load(manifest())
    assert len(base.uid) == 32 and base.metadata.annotations[labels.CONFIG_HASH] == base.uid
    assert load(manifest()).uid == base.uid
    assert load(yaml.safe_dump(manifest())).uid == base.uid  # format does not matter
    assert load(manifest(), "node2").uid != base.uid
    assert load(manifest(), path="/other.yaml").uid != base.uid
    assert load(manifest(hostNetwork=True)).uid != base.uid
    url_pod = load_manifest(json.dumps(manifest()).encode(), URL, node_name="n", is_file=False)
    assert url_pod.pods[0].uid not in (base.uid, "")


def test_url_uid_does_not_depend_on_the_node() -> None:
    raw = decode_pod(json.dumps(manifest()).encode(), URL)
    assert static_pod_uid(raw, URL, "a", False) == static_pod_uid(raw, URL, "b", False)
    assert static_pod_uid(raw, PATH, "a", True) != static_pod_uid(raw, PATH, "b", True)


def test_static_defaults_keep_namespace_and_add_toleration_once() -> None:
    doc = manifest(
        tolerations=[{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]
    )
    doc["metadata"]["namespace"] = "kube-system"
    pod = load(doc)
    assert pod.metadata.namespace == "kube-system"
    assert [to_wire(t) for t in pod.spec.tolerations] == [
        {"operator": "Exists", "effect": "NoExecute"}
    ]
    raw = decode_pod(json.dumps(manifest()).encode(), URL)
    assert apply_static_defaults(raw, URL, "n", False).spec.tolerations == ()


# -- API defaults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry.k8s.io/pause:3.9", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
        ("localhost:5000/app", "Always"),
    ],
)
def test_default_pull_policy(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def test_api_defaults_for_containers_and_probes() -> None:
    doc = manifest(
        hostNetwork=True,
        initContainers=[{"name": "init", "image": "busybox"}],
        volumes=[{"name": "scratch"}],
    )
    doc["spec"]["containers"][0].update(
        ports=[{"containerPort": 8080}],
        resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
        livenessProbe={"httpGet": {"port": 8080}, "periodSeconds": 0},
        volumeMounts=[{"name": "scratch", "mountPath": "/s"}],
    )
    pod = load(doc)
    init, ctr = pod.spec.init_containers[0], pod.spec.containers[0]
    assert init.image_pull_policy == "Always" and init.termination_message_policy == "File"
    assert to_wire(ctr.ports[0]) == {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}
    assert ctr.resources is not None
    assert dict(ctr.resources.requests) == {"cpu": "500m", "memory": "1Gi"}
    probe = ctr.liveness_probe
    assert probe is not None and probe.http_get is not None
    assert (probe.http_get.path, probe.http_get.scheme, probe.period_seconds) == ("/", "HTTP", 10)
    assert pod.spec.volumes[0].empty_dir == {}


# -- errors point at lines ------------------------------------------------------------------

WEB = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: busybox:1.36
    ports:
    - containerPort: x
"""


def test_type_error_names_file_line_and_field() -> None:
    err = error_of(WEB)
    assert str(err) == (
        f"{PATH}:10: spec.containers[0].ports[0].containerPort: expected an integer, got str 'x'"
    )
    assert (err.path, err.line) == (PATH, 10)


def test_yaml_syntax_error_uses_the_problem_mark() -> None:
    err = error_of("apiVersion: v1\nkind: Pod\nmetadata;\n  name: x\n")
    assert err.line == 4 and "YAML syntax error" in err.reason


def test_validation_error_points_at_the_field() -> None:
    err = error_of(WEB.replace("containerPort: x", "containerPort: 0"))
    assert err.line == 10
    assert err.reason == (
        "invalid pod: spec.containers[0].ports[0].containerPort: Invalid value: 0: "
        "must be between 1 and 65535, inclusive"
    )


def test_missing_field_points_at_the_parent() -> None:
    err = error_of(WEB.replace("    image: busybox:1.36\n", "").replace(": x", ": 80"))
    assert err.line == 7 and "spec.containers[0].image: Required value" in err.reason


def test_name_is_needed() -> None:
    err = error_of(WEB.replace("  name: web\n", "  labels: {}\n").replace(": x", ": 80"))
    assert err.reason == "invalid pod: name is needed for the pod" and err.line == 3


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("", None, "empty manifest"),
        ("- a\n- b\n", 1, "expected an object (a Pod manifest), got list"),
        ("apiVersion: v1\nmetadata: {}\n", 1, "kind: Object 'Kind' is missing"),
        ("kind: Pod\n", 1, "apiVersion: Object 'apiVersion' is missing"),
        ("apiVersion: v2\nkind: Pod\n", 1, 'no kind "Pod" is registered for version "v2"'),
        ("apiVersion: v1\nkind: Service\n", 2, "kind: expected Pod, got 'Service'"),
    ],
)
def test_not_a_pod(text: str, line: int | None, reason: str) -> None:
    err = error_of(text)
    assert err.line == line and reason in err.reason


def test_json_manifest_errors_have_lines_too() -> None:
    text = json.dumps(manifest(restartPolicy="Sometimes"), indent=2)
    err = error_of(text)
    expected_line = text.splitlines().index('    "restartPolicy": "Sometimes"') + 1
    assert err.line == expected_line
    assert 'spec.restartPolicy: Unsupported value: "Sometimes"' in err.reason


def test_json_that_yaml_refuses_falls_back_to_json() -> None:
    long_key = "k" * 1100  # LibYAML's simple keys stop at 1024 characters; JSON has no limit
    pod = load(json.dumps(manifest(affinity={long_key: 1})))
    assert pod.spec.affinity == {long_key: 1}
    err = error_of('{\n "apiVersion": "v1",\n "kind": [1, 2}\n}')
    assert err.line == 3 and "JSON syntax error" in err.reason


def test_too_large_is_refused() -> None:
    err = error_of(b"#" * (MAX_CONFIG_LENGTH + 1))
    assert "more than the 10485760 byte (10 MiB) limit" in err.reason


# -- YAML 1.1 traps -------------------------------------------------------------------------


def test_yaml_11_traps_stay_strings() -> None:
    pod = load(
        WEB.replace("containerPort: x", "containerPort: 80")
        + "    env:\n"
        + "".join(
            f"    - name: V{i}\n      value: {v}\n"
            for i, v in enumerate(["NO", "on", "1.10", "2001-01-01", "y", "="])
        )
    )
    assert [e.value for e in pod.spec.containers[0].env] == [
        "NO",
        "on",
        "1.10",
        "2001-01-01",
        "y",
        "=",
    ]


def test_octal_modes_and_quantities() -> None:
    text = WEB.replace("containerPort: x", "containerPort: 80") + (
        "    resources:\n      limits: {cpu: 0.5}\n"
        "  volumes:\n  - name: d\n    downwardAPI: {defaultMode: 0644, items: []}\n"
    )
    pod = load(text)
    assert pod.spec.volumes[0].downward_api == {"defaultMode": 0o644, "items": []}
    assert pod.spec.containers[0].resources is not None
    assert pod.spec.containers[0].resources.limits == {"cpu": "0.5"}


def test_float_in_an_integer_field_is_an_error() -> None:
    err = error_of(manifest(terminationGracePeriodSeconds="1.5") | {})
    assert "terminationGracePeriodSeconds: expected an integer" in err.reason
    err = error_of(WEB.replace("containerPort: x", "containerPort: 80.5"))
    assert err.line == 10


def test_duplicate_keys_and_extra_documents_warn(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        WEB.replace("containerPort: x", "containerPort: 80").replace(
            "kind: Pod\n", "kind: Pod\nkind: Pod\n"
        )
        + "---\nanother: doc\n"
    )
    loaded = load_manifest(text.encode(), PATH, node_name="n", is_file=True)
    assert loaded.warnings == (
        f"{PATH}:13: only the first YAML document is used (one pod per manifest)",
        f"{PATH}:3: duplicate key 'kind'; the last one is used",
    )
    del caplog


def test_unsupported_and_unknown_volume_types() -> None:
    # a type the kubelet cannot set up loads (the pod then waits with FailedMount, as
    # upstream); a key that is no volume type at all is refused
    pod = load(manifest(volumes=[{"name": "v", "gcePersistentDisk": {"pdName": "x"}}]))
    (volume,) = pod.spec.volumes
    assert volume.gce_persistent_disk == {"pdName": "x"}
    err = error_of(manifest(volumes=[{"name": "v", "hostpath": {"path": "/x"}}]))
    assert "unknown volume type for volume 'v'" in err.reason


def test_warnings_are_not_logged_by_the_decoder(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        load(manifest(priorityClassName="x"))
    assert caplog.records == []


def test_alias_bombs_cycles_and_deep_nesting_are_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, cur in zip("abcdefghi", "bcdefghij", strict=True):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    err = error_of("\n".join(lines) + "\n")
    assert "YAML aliases expand this to more than 100000 nodes" in err.reason
    assert "a YAML alias refers to itself" in error_of("a: &a [*a]\n").reason
    deep = "[" * 5000 + "]" * 5000
    assert error_of(deep).reason == "the document is nested too deeply (more than 100 levels)"
    affinity = "[" * 900 + "]" * 900
    assert (
        "nested too deeply"
        in error_of(WEB.replace(": x", ": 80") + f"  affinity: {affinity}\n").reason
    )


# -- cost bounds ---------------------------------------------------------------------------


def cpu_seconds_of(doc: bytes, **kw: Any) -> tuple[float, ManifestError]:
    started = time.process_time()
    with pytest.raises(ManifestError) as info:
        load_manifest(doc, kw.pop("path", PATH), node_name="n", is_file=True, **kw)
    return time.process_time() - started, info.value


@pytest.mark.parametrize("fmt", ["yaml", "json", "json-only"])
def test_many_small_maps_are_refused_early_naming_the_real_cause(fmt: str) -> None:
    """Near 10 MiB of tiny maps: refused at the node bound, in well under a second of CPU
    (before: 7–36 s and 1–2 GB), and the reason is their number, not aliases."""
    data = {
        "yaml": many_maps_manifest(),
        "json": many_maps_json(),
        "json-only": many_maps_json(yaml_readable=False),
    }[fmt]
    assert MAX_CONFIG_LENGTH - 8192 < len(data) <= MAX_CONFIG_LENGTH
    took, err = cpu_seconds_of(data)
    assert took < 2.0, took
    assert "alias" not in err.reason
    if fmt == "json-only":  # LibYAML cannot read it: ``json`` would, and is not asked to
        assert err.line is None
        count = int(err.reason.removeprefix("the JSON has ").split()[0])
        assert count > 200_000
        assert err.reason.endswith(
            "separators and brackets (',', ':' counted twice, '[', '{'), more than a manifest "
            "of 100000 nodes (values, lists and maps) can have"
        )
    else:
        assert err.reason == "the manifest has more than 100000 nodes (values, lists and maps)"
        # 22 nodes in 10 lines, then 3 a line: the 100,001st node is on line 33,337
        assert err.line == (1 if fmt == "json" else 33_337)


def test_node_bound_is_exact_and_counts_aliases_as_their_expansion() -> None:
    env = "".join(f"    - {{name: V{i}, value: v}}\n" for i in range(19_996))
    head = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
    ok = head + "  - name: c\n    image: busybox:1.36\n    env:\n" + env
    assert len(load(ok).spec.containers[0].env) == 19_996  # 100,000 nodes: accepted
    err = error_of(ok + "    - {name: LAST, value: v}\n")
    assert err.reason == "the manifest has more than 100000 nodes (values, lists and maps)"
    # aliases: a few distinct nodes, expanded past the bound: they are what is named
    bomb = "a: &a [" + ", ".join(["x"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    assert error_of(bomb).reason == "YAML aliases expand this to more than 100000 nodes"


def test_json_fallback_is_bounded_exactly_too() -> None:
    """JSON that only ``json`` reads (a key over 1024 characters) is counted after decoding
    when its separators allow at most twice the bound; deep nesting is refused as in YAML."""
    key = "k" * 1100
    wide = json.dumps({key: [0] * 150_000}).encode()
    assert error_of(wide).reason == (
        "the manifest has more than 100000 nodes (values, lists and maps)"
    )
    deep = json.dumps({key: 1, "x": json.loads("[" * 150 + "]" * 150)}).encode()
    assert error_of(deep).reason == "the document is nested too deeply (more than 100 levels)"
    assert "nested too deeply" in error_of("[" * 150 + "]" * 150).reason


def test_what_follows_the_first_document_is_never_built() -> None:
    first = WEB.replace("containerPort: x", "containerPort: 80").encode()
    data = first + b"---\n" + many_maps_manifest(MAX_CONFIG_LENGTH - len(first) - 8)
    started = time.process_time()
    loaded = load_manifest(data, PATH, node_name="n", is_file=True)
    assert time.process_time() - started < 1.0
    assert loaded.warnings == (
        f"{PATH}:12: only the first YAML document is used (one pod per manifest)",
    )


def test_cpu_time_bound() -> None:
    ticks = iter(range(0, 100, 3))
    budget = Budget(PATH, seconds=5.0, clock=lambda: float(next(ticks)))
    with pytest.raises(ManifestError) as info:
        load_manifest(
            json.dumps(manifest()).encode(), PATH, node_name="n", is_file=True, budget=budget
        )
    err = info.value
    assert err.reason.startswith("decoding took more than 5 s of CPU time (")
    assert err.reason.endswith("); refused")


def test_long_values_are_shortened_in_errors() -> None:
    doc = manifest()
    doc["metadata"]["name"] = "a" * (9 * 1024 * 1024)
    err = error_of(doc)
    assert len(str(err)) < 2200
    assert err.reason.startswith('invalid pod: metadata.name: Invalid value: "aaaa')
    assert err.reason.endswith("must be no more than 253 characters")
    assert "characters omitted)…" in err.reason


def test_the_thread_clock_is_read_only_when_the_limit_could_have_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubelet.sources import limits

    with pytest.raises(ManifestError):  # a budget already spent refuses, by the thread clock
        Budget(PATH, seconds=-1.0).check("step")
    monkeypatch.setattr(limits.time, "monotonic", lambda: 100.0)  # no wall time passes
    budget = Budget(PATH, seconds=0.0)
    deadline = time.thread_time() + 0.02
    while time.thread_time() < deadline:  # CPU spent, but the wall clock says none was
        pass
    budget.check("step")  # ... and one whose wall time has not run out does not ask


def test_warm_up_builds_every_hook_a_pod_needs() -> None:
    """After ``warm_up`` decoding a rich pod (and hashing its wire form) generates no
    converter code: the first pod a user starts does not pay for it."""
    conv = _make_converter()
    warm_up(conv)
    structure, unstructure = conv._structure_func.dispatch, conv._unstructure_func.dispatch
    before = structure.cache_info().misses, unstructure.cache_info().misses
    probe = {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5}
    raw = manifest(
        volumes=[{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/x"}}],
        securityContext={"runAsUser": 1000, "sysctls": [{"name": "a", "value": "1"}]},
        initContainers=[{"name": "i", "image": "busybox:1.36", "command": ["true"]}],
        tolerations=[{"key": "k", "operator": "Exists"}],
    )
    raw["spec"]["containers"][0] |= {
        "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}},
        "livenessProbe": probe,
        "readinessProbe": probe,
        "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
        "ports": [{"containerPort": 80}],
        "volumeMounts": [{"name": "v", "mountPath": "/v"}],
    }
    pod = conv.structure(raw, Pod)
    conv.unstructure(pod)
    assert (structure.cache_info().misses, unstructure.cache_info().misses) == before
