"""``kubelet`` command: exit codes, messages, and the hand-off to the agent."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

import kubelet
from kubelet.cli import main
from kubelet.config import Options
from kubelet.version import version_line


@pytest.fixture
def fake_agent(monkeypatch: pytest.MonkeyPatch) -> list[Options]:
    """Stand in for kubelet.agent, recording what it was asked to run."""
    calls: list[Options] = []

    def start(options: Options) -> int:
        calls.append(options)
        return 7

    module = types.ModuleType("kubelet.agent")
    module.start = start  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kubelet.agent", module)
    monkeypatch.setattr(kubelet, "agent", module, raising=False)
    return calls


def test_version(capsys: pytest.CaptureFixture[str], fake_agent: list[Options]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == "Kubernetes v1.36.0\n"
    # what kubeadm's preflight (KubeletVersionCheck) matches the output against
    assert re.fullmatch(r"\s*Kubernetes v((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                        r"([-0-9a-zA-Z_\.+]*)?)\s*", out)  # fmt: skip
    assert fake_agent == []


def test_version_raw_prints_the_version_struct(
    capsys: pytest.CaptureFixture[str], fake_agent: list[Options]
) -> None:
    assert main(["--version=raw"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('version.Info{Major:"1", Minor:"36", ')
    assert 'GitVersion:"v1.36.0"' in out and out.endswith('"}\n')
    assert fake_agent == []


def test_version_bad_value(capsys: pytest.CaptureFixture[str], fake_agent: list[Options]) -> None:
    assert main(["--version=maybe"]) == 1
    assert 'kubelet: --version: invalid value "maybe"' in capsys.readouterr().err
    assert main(["--version=false", "--version=raw"]) == 0
    assert capsys.readouterr().out.startswith("version.Info{")


def test_version_wins_over_a_bad_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version", "--config=/nonexistent/kubelet.yaml"]) == 0
    assert "Kubernetes v1.36.0" in capsys.readouterr().out
    assert version_line().startswith("Kubernetes v1.36.0")


def test_help_exits_zero(capsys: pytest.CaptureFixture[str], fake_agent: list[Options]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--pod-manifest-path" in out and "--manifest-url-header" in out
    assert fake_agent == []


def test_config_error_exits_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_agent: list[Options]
) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "fileCheckFrequency: 20x\nmaxPods: -1\n"
    )
    assert main([f"--config={path}"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f'kubelet: {path}: fileCheckFrequency: invalid duration "20x": unknown unit '
        '"x" (valid units: ns, us, µs, ms, s, m, h)'
    ]
    assert fake_agent == []


def test_bad_flag_exits_one(capsys: pytest.CaptureFixture[str], fake_agent: list[Options]) -> None:
    assert main(["--max-pods=x"]) == 1
    assert (
        capsys.readouterr().err == 'kubelet: --max-pods: invalid value "x": expected an integer\n'
    )
    assert main(["--no-such-flag"]) == 1
    assert "kubelet: unknown flag: --no-such-flag" in capsys.readouterr().err


def test_runs_the_agent_with_the_options(fake_agent: list[Options]) -> None:
    assert main(["--hostname-override=Box", "--pod-manifest-path=/etc/kubelet.d"]) == 7
    (options,) = fake_agent
    assert options.node_name == "box"
    assert options.config.static_pod_path == "/etc/kubelet.d"
