"""Pod validation (upstream's messages) and the static-pod API-reference rule (SP-07/08)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubelet.sources import ManifestError, load_manifest, load_pod
from kubelet.sources.validation import (
    FieldError,
    PodValidationOptions,
    UnknownVolumeError,
    api_object_reference,
)

BASE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "kube-system"},
    "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
}


def with_(changes: dict[str, Any], container: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"].update(changes)
    if container:
        doc["spec"]["containers"][0].update(container)
    return doc


def reason(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        load_pod(json.dumps(doc).encode(), "/m/web.json", node_name="n")
    return info.value.reason


def test_valid_pod_passes() -> None:
    pod = load_pod(json.dumps(BASE).encode(), "/m/web.json", node_name="n")
    assert pod.metadata.name == "web-n"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (with_({"containers": []}), "spec.containers: Required value"),
        (
            with_({"restartPolicy": "Sometimes"}),
            'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"',
        ),
        (with_({"dnsPolicy": "Google"}), 'spec.dnsPolicy: Unsupported value: "Google"'),
        (with_({"dnsPolicy": "None"}), "spec.dnsConfig: Required value"),
        (
            with_({"terminationGracePeriodSeconds": -1}),
            "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or "
            "equal to 0",
        ),
        (with_({"activeDeadlineSeconds": 0}), "spec.activeDeadlineSeconds: Invalid value: 0"),
        (
            with_({"securityContext": {"fsGroupChangePolicy": "Sometimes"}}),
            'spec.securityContext.fsGroupChangePolicy: Unsupported value: "Sometimes": '
            'supported values: "OnRootMismatch", "Always"',
        ),
        (with_({}, {"image": ""}), "spec.containers[0].image: Required value"),
        (with_({}, {"image": " busybox"}), "must not have leading or trailing whitespace"),
        (
            with_({}, {"name": "Web_1"}),
            'spec.containers[0].name: Invalid value: "Web_1": a lowercase RFC 1123 label',
        ),
        (
            with_({"initContainers": [{"name": "c", "image": "i"}]}),
            'spec.containers[0].name: Duplicate value: "c"',
        ),
        (with_({}, {"imagePullPolicy": "Sometimes"}), "spec.containers[0].imagePullPolicy"),
        (with_({}, {"terminationMessagePolicy": "X"}), "terminationMessagePolicy: Unsupported"),
        (
            with_({}, {"ports": [{"containerPort": 70000}]}),
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 "
            "and 65535, inclusive",
        ),
        (
            with_({}, {"ports": [{"containerPort": 80, "protocol": "ICMP"}]}),
            'protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"',
        ),
        (
            with_({"hostNetwork": True}, {"ports": [{"containerPort": 80, "hostPort": 81}]}),
            "must match `containerPort` when `hostNetwork` is true",
        ),
        (
            with_({}, {"ports": [{"containerPort": 80, "name": "HTTP"}]}),
            "spec.containers[0].ports[0].name: Invalid value",
        ),
        (
            with_({}, {"livenessProbe": {"periodSeconds": 3}}),
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
        ),
        (
            with_(
                {}, {"readinessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 1}}}
            ),
            "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 "
            "handler type",
        ),
        (
            with_({}, {"livenessProbe": {"exec": {"command": ["x"]}, "successThreshold": 2}}),
            "livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ),
        (
            with_({}, {"livenessProbe": {"httpGet": {"port": 0}}}),
            "livenessProbe.httpGet.port: Invalid value: 0",
        ),
        (
            with_({}, {"lifecycle": {"preStop": {}}}),
            "lifecycle.preStop: Required value: must specify a handler type",
        ),
        (
            with_({}, {"volumeMounts": [{"name": "data", "mountPath": "/d"}]}),
            'spec.containers[0].volumeMounts[0].name: Not found: "data"',
        ),
        (
            with_({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]}),
            'spec.volumes[1].name: Duplicate value: "a"',
        ),
        (
            with_(
                {
                    "initContainers": [
                        {"name": "i", "image": "i", "readinessProbe": {"exec": {"command": ["x"]}}}
                    ]
                }
            ),
            "may not be set for init containers without restartPolicy=Always",
        ),
        (
            with_({}, {"restartPolicy": "Sometimes"}),
            'spec.containers[0].restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"',
        ),
        (
            with_({"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}),
            "spec.ephemeralContainers: Forbidden: cannot be set on create",
        ),
        (
            {**BASE, "metadata": {"name": "web", "namespace": "Kube_System"}},
            'metadata.namespace: Invalid value: "Kube_System"',
        ),
        (
            {**BASE, "metadata": {"name": "web", "labels": {"app": "no spaces"}}},
            'metadata.labels: Invalid value: "no spaces"',
        ),
    ],
)
def test_invalid_pods(doc: dict[str, Any], message: str) -> None:
    got = reason(doc)
    assert got.startswith("invalid pod: ")
    assert message in got


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hostname": "Web_1"}, 'spec.hostname: Invalid value: "Web_1": a lowercase RFC 1123'),
        ({"subdomain": "a.b"}, 'spec.subdomain: Invalid value: "a.b": a lowercase RFC 1123'),
        (
            {"hostnameOverride": "box", "setHostnameAsFQDN": True, "subdomain": "s"},
            "spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true",
        ),
        (
            {"hostnameOverride": "box", "hostNetwork": True},
            "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true",
        ),
        (
            {"hostnameOverride": "Not-RFC1123"},
            'spec.hostnameOverride: Invalid value: "Not-RFC1123": a lowercase RFC 1123 subdomain',
        ),
        ({"hostnameOverride": ""}, 'spec.hostnameOverride: Invalid value: "": a lowercase'),
        (
            {"hostnameOverride": "a" * 60 + ".bcde"},
            "spec.hostnameOverride: Invalid value: "
            + json.dumps("a" * 60 + ".bcde")
            + ": must be no more than 64 characters",
        ),
    ],
)
def test_invalid_hostname_fields(changes: dict[str, Any], message: str) -> None:
    """As upstream's ValidatePodSpec: labels for hostname and subdomain; the override a
    DNS subdomain of at most 64 characters, without setHostnameAsFQDN or hostNetwork."""
    got = reason(with_(changes))
    assert message in got


def test_valid_hostname_fields_pass() -> None:
    doc = with_({"hostname": "h", "subdomain": "s", "hostnameOverride": "a" * 59 + ".bcde"})
    pod = load_pod(json.dumps(doc).encode(), "/m/web.json", node_name="n")
    assert pod.spec.hostname_override == "a" * 59 + ".bcde"
    doc = with_({"subdomain": "s", "setHostnameAsFQDN": True})
    pod = load_pod(json.dumps(doc).encode(), "/m/web.json", node_name="n")
    assert pod.spec.set_hostname_as_fqdn is True


def test_sidecar_init_container_may_have_probes() -> None:
    sidecar = {
        "name": "s",
        "image": "i",
        "restartPolicy": "Always",
        "readinessProbe": {"exec": {"command": ["x"]}},
    }
    load_pod(json.dumps(with_({"initContainers": [sidecar]})).encode(), "/m", node_name="n")


# -- a container's restartPolicy and restartPolicyRules (ContainerRestartRules) ---------------


def rules(*items: dict[str, Any]) -> dict[str, Any]:
    return {"restartPolicy": "Never", "restartPolicyRules": list(items)}


ON_42: dict[str, Any] = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
GATE_OFF = PodValidationOptions(container_restart_rules=False, restart_all_containers=False)


def load(doc: dict[str, Any], opts: PodValidationOptions | None = None) -> None:
    data = json.dumps(doc).encode()
    if opts is None:
        load_pod(data, "/m/web.json", node_name="n")
    else:
        load_manifest(data, "/m/web.json", node_name="n", is_file=True, validation=opts)


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
def test_any_container_may_set_its_own_restart_policy(policy: str) -> None:
    load(with_({}, {"restartPolicy": policy}))
    init = {"name": "i", "image": "i", "restartPolicy": policy}
    load(with_({"initContainers": [init]}))
    load(with_({}, rules(ON_42, {**ON_42, "exitCodes": {"operator": "NotIn"}})))


@pytest.mark.parametrize(
    ("container", "message"),
    [
        (
            {"restartPolicyRules": [ON_42]},
            "spec.containers[0].restartPolicy: Required value: must specify restartPolicy "
            "when restart rules are used",
        ),
        (
            rules({**ON_42, "action": "Ignore"}),
            'spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Ignore": '
            'supported values: "Restart", "RestartAllContainers"',
        ),
        (
            rules({"action": "Restart"}),
            "spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified",
        ),
        (
            rules({**ON_42, "exitCodes": {"operator": "Between", "values": [1]}}),
            "spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "
            '"Between": supported values: "In", "NotIn"',
        ),
        (
            rules(*[ON_42] * 21),
            "spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items",
        ),
        (
            rules({**ON_42, "exitCodes": {"operator": "In", "values": list(range(256))}}),
            "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many: 256: must "
            "have at most 255 items",
        ),
    ],
)
def test_invalid_restart_rules(container: dict[str, Any], message: str) -> None:
    assert message in reason(with_({}, container))


@pytest.mark.parametrize(
    ("changes", "container", "message"),
    [
        (
            {},
            {"restartPolicy": "Never"},
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
        ),
        (
            {"initContainers": [{"name": "i", "image": "i", "restartPolicy": "Never"}]},
            None,
            'spec.initContainers[0].restartPolicy: Unsupported value: "Never": supported '
            'values: "Always"',
        ),
        (
            {"initContainers": [{"name": "i", "image": "i", **rules(ON_42)}]},
            None,
            "spec.initContainers[0].restartPolicyRules: Forbidden: may not be set when the "
            "ContainerRestartRules feature gate is disabled",
        ),
    ],
)
def test_gate_off_refuses_the_container_restart_fields(
    changes: dict[str, Any], container: dict[str, Any] | None, message: str
) -> None:
    doc = with_(changes, container)
    load(doc)  # the gate on (1.36's default): accepted
    with pytest.raises(ManifestError) as info:
        load(doc, GATE_OFF)
    assert message in info.value.reason


def test_sidecar_rules_need_restart_all_containers() -> None:
    sidecar = {"name": "s", "image": "i", "restartPolicy": "Always", "restartPolicyRules": [ON_42]}
    doc = with_({"initContainers": [sidecar]})
    load(doc)
    only_rules = PodValidationOptions(restart_all_containers=False)
    with pytest.raises(ManifestError) as info:
        load(doc, only_rules)
    assert "spec.initContainers[0].restartPolicyRules: Forbidden" in info.value.reason
    all_action = rules({**ON_42, "action": "RestartAllContainers"})
    load(with_({}, all_action))
    with pytest.raises(ManifestError, match='Unsupported value: "RestartAllContainers"'):
        load(with_({}, all_action), only_rules)


def test_field_error_format() -> None:
    assert str(FieldError("a.b", "Required value")) == "a.b: Required value"
    assert str(FieldError("a", "Invalid value", 3, "bad")) == "a: Invalid value: 3: bad"
    assert str(FieldError("a", "Duplicate value", "x")) == 'a: Duplicate value: "x"'


# -- static pods may not reference API objects ------------------------------------------------


def spec_with(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def ctr_with(**ctr: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i", **ctr}]}}


def vol(**source: Any) -> dict[str, Any]:
    return spec_with(volumes=[{"name": "v", **source}])


def projected(*sources: dict[str, Any]) -> dict[str, Any]:
    return vol(projected={"sources": list(sources)})


@pytest.mark.parametrize(
    ("raw", "resource"),
    [
        (spec_with(serviceAccountName="default"), "serviceaccounts"),
        (spec_with(serviceAccount="default"), "serviceaccounts"),
        (spec_with(imagePullSecrets=[{"name": "pull"}]), "secrets"),
        (ctr_with(envFrom=[{"secretRef": {"name": "s"}}]), "secrets"),
        (ctr_with(env=[{"name": "A", "valueFrom": {"secretKeyRef": {"key": "k"}}}]), "secrets"),
        (vol(secret={"secretName": "s"}), "secrets"),
        (projected({"secret": {"name": "s"}}), "secrets"),
        (vol(cephfs={"monitors": ["m"], "secretRef": {"name": "s"}}), "secrets"),
        (vol(azureFile={"shareName": "x"}), "secrets"),
        (ctr_with(envFrom=[{"configMapRef": {"name": "c"}}]), "configmaps"),
        (
            ctr_with(env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"key": "k"}}}]),
            "configmaps",
        ),
        (vol(configMap={"name": "c"}), "configmaps"),
        (projected({"configMap": {"name": "c"}}), "configmaps"),
        (spec_with(resourceClaims=[{"name": "c"}]), "resourceclaims"),
        (vol(persistentVolumeClaim={"claimName": "c"}), "persistentvolumeclaims"),
        (
            vol(ephemeral={"volumeClaimTemplate": {}}),
            "persistentvolumeclaims (via ephemeral volumes)",
        ),
        (vol(csi={"driver": "d"}), "csidrivers (via CSI volumes)"),
        (vol(glusterfs={"path": "p"}), "endpoints (via glusterFS volumes)"),
        (
            projected({"serviceAccountToken": {"path": "t"}}),
            "serviceaccounts (via projected volumes)",
        ),
        (projected({"clusterTrustBundle": {"path": "t"}}), "clustertrustbundles"),
        (projected({"podCertificate": {}}), "podcertificates"),
        (projected({"downwardAPI": {"items": []}}), None),
        (vol(hostPath={"path": "/x"}), None),
        (vol(emptyDir={}), None),
        (vol(), None),
        (
            ctr_with(
                env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
            ),
            None,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) or v is None else "",
)
def test_sp07_sp08_api_object_reference(raw: dict[str, Any], resource: str | None) -> None:
    assert api_object_reference(raw) == resource


def test_unknown_projection_and_volume_types() -> None:
    with pytest.raises(UnknownVolumeError, match="unknown source for projected volume 'v'"):
        api_object_reference(projected({"somethingNew": {}}))
    with pytest.raises(UnknownVolumeError, match="unknown volume type for volume 'v'"):
        api_object_reference(vol(somethingNew={}))


def test_reference_is_reported_for_the_manifest() -> None:
    doc = with_({"volumes": [{"name": "s", "secret": {"secretName": "tls"}}]})
    assert reason(doc) == "static pods may not reference secrets"


HOST_VOLUME = {"volumes": [{"name": "h", "hostPath": {"path": "/mnt"}}]}


def mounting(propagation: str, **security: Any) -> dict[str, Any]:
    mount = {"name": "h", "mountPath": "/h", "mountPropagation": propagation}
    container: dict[str, Any] = {"volumeMounts": [mount]}
    if security:
        container["securityContext"] = security
    return with_(HOST_VOLUME, container)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            mounting("Bidirectional"),
            "spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional "
            "mount propagation is available only to privileged containers",
        ),
        (
            mounting("Bidirectional", privileged=False),
            "Bidirectional mount propagation is available only to privileged containers",
        ),
        (
            mounting("Shared"),
            'spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value: "Shared": '
            'supported values: "Bidirectional", "HostToContainer", "None"',
        ),
        (
            with_({}, {"securityContext": {"procMount": "Unmasked"}}),
            'spec.containers[0].securityContext.procMount: Invalid value: "Unmasked": '
            "`hostUsers` must be false to use `Unmasked`",
        ),
        (
            with_({"hostUsers": True}, {"securityContext": {"procMount": "Unmasked"}}),
            "`hostUsers` must be false to use `Unmasked`",
        ),
        (
            with_({}, {"securityContext": {"procMount": "Masked"}}),
            'procMount: Unsupported value: "Masked": supported values: "Default", "Unmasked"',
        ),
    ],
)
def test_host_reaching_mounts_are_refused_as_upstream(doc: dict[str, Any], message: str) -> None:
    # upstream validates static pods as the API server validates a created pod
    assert message in reason(doc)


@pytest.mark.parametrize(
    "doc",
    [
        mounting("Bidirectional", privileged=True),
        mounting("HostToContainer"),
        mounting("None"),
        with_({"hostUsers": False}, {"securityContext": {"procMount": "Unmasked"}}),
        with_({}, {"securityContext": {"procMount": "Default"}}),
    ],
)
def test_what_upstream_allows_still_loads(doc: dict[str, Any]) -> None:
    assert load_pod(json.dumps(doc).encode(), "/m/web.json", node_name="n").spec.containers


def test_static_pods_are_validated_under_the_kubelet_s_gates() -> None:
    from kubelet.config import FeatureGates
    from kubelet.sources.run import validation_options

    assert validation_options(FeatureGates()) == PodValidationOptions()
    off = {"ContainerRestartRules": False, "RestartAllContainersOnContainerExits": False}
    assert validation_options(FeatureGates(off)) == GATE_OFF
