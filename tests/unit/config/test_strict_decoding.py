"""A config file is decoded as strictly as upstream's: a boolean or number where a string
belongs is refused (YAML's ``off`` is a boolean), and so is a key written twice (upstream
fails strict decoding on it, as on an unknown key, which this kubelet refuses too)."""

from __future__ import annotations

import json

import pytest

from kubelet.api import Container, from_wire
from kubelet.config import ConfigError, parse_config

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_config(text, "/etc/kubelet.yaml")
    return [f"{p.field}: {p.message}" for p in exc.value.problems]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "staticPodPath: false\n",
            "staticPodPath: expected a string, got bool False (quote it to make it a string)",
        ),
        ("clusterDomain: off\n", "clusterDomain: expected a string, got bool False"),
        ("containerLogMaxSize: 10\n", "containerLogMaxSize: expected a string, got int 10"),
        ("kubeReserved: {cpu: 1}\n", "kubeReserved[cpu]: expected a string, got int 1"),
        ("clusterDNS: [10]\n", "clusterDNS[0]: expected a string, got int 10"),
        ("authorization: {mode: 1.5}\n", "authorization.mode: expected a string, got float 1.5"),
    ],
)
def test_a_scalar_in_a_string_field_is_refused(body: str, expected: str) -> None:
    (message,) = problems(HEADER + body)
    assert message.startswith(expected)


def test_quoted_values_and_map_keys_stay_text() -> None:
    """A map's keys become text, as YAML-to-JSON makes them (``1:`` is the gate "1")."""
    text = HEADER + 'clusterDomain: "off"\nkubeReserved: {cpu: "1"}\nfeatureGates: {1: true}\n'
    config = parse_config(text, "k.yaml").config
    assert (config.cluster_domain, config.kube_reserved) == ("off", {"cpu": "1"})
    assert config.feature_gates == {"1": True}


def test_api_objects_keep_the_lenient_reading() -> None:
    """Only the config file is strict: pod specs are read as before."""
    assert from_wire(Container, {"name": "a", "image": 5}).image == "5"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("maxPods: 10\nmaxPods: 20\n", ["maxPods: duplicate field (written again on line 4)"]),
        (
            "authentication:\n  webhook:\n    enabled: true\n    enabled: false\n",
            ["authentication.webhook.enabled: duplicate field (written again on line 6)"],
        ),
        (
            "featureGates:\n  MemoryQoS: true\n  MemoryQoS: false\n",
            ["featureGates[MemoryQoS]: duplicate field (written again on line 5)"],
        ),
        (
            "registerWithTaints:\n- {key: a, effect: NoSchedule, key: b}\n",
            ["registerWithTaints[0].key: duplicate field (written again on line 4)"],
        ),
        (
            "staticPodURLHeader: {A: [x], A: [y]}\n",
            ["staticPodURLHeader[A]: duplicate field (written again on line 3)"],
        ),
        (  # an upstream field this kubelet does not model is checked too
            "cpuManagerPolicyOptions: {full-pcpus-only: 'true', full-pcpus-only: 'false'}\n",
            ["cpuManagerPolicyOptions[full-pcpus-only]: duplicate field (written again on line 3)"],
        ),
    ],
)
def test_a_key_written_twice_is_refused(body: str, expected: list[str]) -> None:
    assert problems(HEADER + body) == expected


def test_a_key_written_twice_in_json_is_refused() -> None:
    text = (
        '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",'
        ' "logging": {"verbosity": 2, "verbosity": 4}}'
    )
    assert problems(text) == ["logging.verbosity: duplicate field"]


def test_merge_keys_are_not_repeats() -> None:
    """A YAML merge (``<<``) may be overridden by the mapping's own key, as YAML means."""
    text = HEADER + "authorization:\n  <<: {mode: AlwaysAllow}\n  mode: Webhook\n"
    assert parse_config(text, "k.yaml").config.authorization.mode == "Webhook"
    once = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    assert parse_config(json.dumps({**once, "maxPods": 7}), "k.json").config.max_pods == 7
