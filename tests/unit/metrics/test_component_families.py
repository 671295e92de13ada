"""component-base's families: kubernetes_build_info, kubernetes_feature_enabled and
client-go's rest_client_* for the kubelet's API requests."""

from __future__ import annotations

import httpx
import pytest

from kubelet.api import ApiClient, ClusterConnection, NotFound
from kubelet.config.features import FeatureGates
from kubelet.metrics import KubeletMetrics, exposition
from kubelet.version import go_arch


def test_build_info_and_feature_gates() -> None:
    metrics = KubeletMetrics("node1", process=False)
    metrics.record_features(FeatureGates({"ComponentFlagz": False}).known())
    reg = metrics.registry
    text = exposition(reg).decode()
    assert "# HELP kubernetes_build_info [ALPHA] A metric with a constant '1' value" in text
    labels = {"build_date": "", "compiler": "", "git_commit": "", "git_tree_state": "",
              "git_version": "v1.36.0", "go_version": "", "major": "1", "minor": "36",
              "platform": f"linux/{go_arch()}"}  # fmt: skip
    assert reg.get_sample_value("kubernetes_build_info", labels) == 1
    assert (
        reg.get_sample_value(
            "kubernetes_feature_enabled", {"name": "ComponentFlagz", "stage": "BETA"}
        )
        == 0
    )
    assert (
        reg.get_sample_value("kubernetes_feature_enabled", {"name": "NodeLogQuery", "stage": ""})
        == 1
    )  # GA


async def test_rest_client_requests_by_code_method_and_host() -> None:
    metrics = KubeletMetrics("node1", process=False)
    answers = iter([httpx.Response(200, json={}), httpx.Response(404, json={"kind": "Status"})])

    def handler(request: httpx.Request) -> httpx.Response:
        return next(answers)

    connection = ClusterConnection(server="https://api.test:6443")
    async with ApiClient.open(connection, transport=httpx.MockTransport(handler)) as client:
        client.observer = metrics.observe_rest_request
        await client.get("/api/v1/nodes/a")
        sibling = client.with_limits(-1, 0)
        with pytest.raises(NotFound):
            await sibling.get("/api/v1/nodes/b")
    reg = metrics.registry
    for code in ("200", "404"):
        labels = {"code": code, "host": "api.test:6443", "method": "GET"}
        assert reg.get_sample_value("rest_client_requests_total", labels) == 1
    assert (
        reg.get_sample_value(
            "rest_client_request_duration_seconds_count", {"host": "api.test:6443", "verb": "GET"}
        )
        == 2
    )


def test_admission_rejections_by_upstream_reasons() -> None:
    metrics = KubeletMetrics("node1", process=False)
    for reason in ("OutOfcpu", "OutOfexample.com/gpu", "NodeAffinity", "SysctlForbidden"):
        metrics.observe_admission_rejection(reason)
    reg = metrics.registry
    for reason in ("OutOfcpu", "OutOfExtendedResources", "Other", "SysctlForbidden"):
        assert reg.get_sample_value("kubelet_admission_rejections_total", {"reason": reason}) == 1
    assert (
        "# HELP kubelet_admission_rejections_total [ALPHA] Cumulative number pod admission "
        "rejections by the Kubelet." in exposition(reg).decode()
    )
