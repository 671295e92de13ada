"""Feature gates: upstream v1.36's names, defaults, locks, warnings and dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubelet.config import GATES, ConfigError, FeatureGates, resolve
from kubelet.config.features import DEFAULT_GATES, GateError, resolve_gates
from kubelet.config.gatedata import ALPHA, BETA, DEPENDENCIES, GA

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def messages(exc: pytest.ExceptionInfo[GateError]) -> list[str]:
    return [p.message for p in exc.value.problems]


def test_defaults_are_upstreams() -> None:
    assert DEFAULT_GATES.enabled("SidecarContainers")  # GA, locked on
    assert DEFAULT_GATES.enabled("KubeletCrashLoopBackOffMax")  # beta, on
    assert not DEFAULT_GATES.enabled("ReduceDefaultCrashLoopBackOffDecay")  # alpha
    assert not DEFAULT_GATES.enabled("MemoryQoS")
    assert not DEFAULT_GATES.enabled("AllAlpha")
    with pytest.raises(KeyError, match="not registered"):
        DEFAULT_GATES.enabled("NoSuchGate")


def test_gate_table_spot_checks() -> None:
    # facts from upstream's v1.36 gate list
    assert GATES["CustomCPUCFSQuotaPeriod"].stage == ALPHA  # Go name differs from the string
    assert GATES["RuntimeClassInImageCriApi"].stage == ALPHA
    assert GATES["UserNamespacesSupport"].stage == GA
    assert GATES["NodeDeclaredFeatures"].stage == BETA and GATES["NodeDeclaredFeatures"].default
    assert GATES["SELinuxMountReadWriteOncePod"].locked
    assert "InTreePluginPortworxUnregister" not in GATES  # removed in 1.36
    assert "ContextualLogging" in GATES and "WatchListClient" in GATES  # logs, client-go


def test_dependencies_are_consistent_with_the_defaults() -> None:
    for feature, needs in DEPENDENCIES.items():
        for dep in needs:
            assert dep in GATES, (feature, dep)
            assert not (GATES[feature].default and not GATES[dep].default), (feature, dep)
    assert resolve_gates({}).warnings == ()


def test_unknown_gate_stops_with_upstreams_message() -> None:
    with pytest.raises(GateError) as exc:
        resolve_gates({"MemoryQoS": True, "Foo": True, "Bar": False})
    # upstream returns at the first unknown name: one message, not one per name
    assert len(exc.value.problems) == 1
    assert messages(exc)[0] in ("unrecognized feature gate: Foo", "unrecognized feature gate: Bar")


def test_locked_gate_cannot_change() -> None:
    assert resolve_gates({"SidecarContainers": True}).gates.enabled("SidecarContainers")
    with pytest.raises(GateError) as exc:
        resolve_gates({"SidecarContainers": False, "SELinuxChangePolicy": False})
    assert messages(exc) == [
        "cannot set feature gate SidecarContainers to false, feature is locked to true",
        "cannot set feature gate SELinuxChangePolicy to false, feature is locked to true",
    ]


def test_ga_and_deprecated_gates_warn_as_upstream() -> None:
    resolved = resolve_gates({"KubeletFineGrainedAuthz": False, "KMSv1": True, "MemoryQoS": True})
    assert resolved.warnings == (
        "Setting GA feature gate KubeletFineGrainedAuthz=false. "
        "It will be removed in a future release.",
        "Setting deprecated feature gate KMSv1=true. It will be removed in a future release.",
    )
    assert not resolved.gates.enabled("KubeletFineGrainedAuthz")
    assert resolved.gates.enabled("MemoryQoS")
    assert resolved.gates.non_default() == {
        "KMSv1": True,
        "KubeletFineGrainedAuthz": False,
        "MemoryQoS": True,
    }


def test_all_alpha_and_all_beta() -> None:
    gates = resolve_gates({"AllAlpha": True, "MemoryQoS": False}).gates
    assert gates.enabled("EventedPLEG") and gates.enabled("QOSReserved")
    assert not gates.enabled("MemoryQoS")  # an explicit setting wins
    assert gates.enabled("KubeletCrashLoopBackOffMax")  # beta: untouched
    gates = resolve_gates({"AllBeta": False}).gates
    assert not gates.enabled("KubeletCrashLoopBackOffMax")
    assert gates.enabled("SidecarContainers")  # GA: untouched


def test_a_gate_needing_a_disabled_one_is_refused() -> None:
    with pytest.raises(GateError) as exc:
        resolve_gates({"UserNamespacesSupport": False})
    assert messages(exc) == [
        "ProcMountType is enabled, but depends on features that are disabled: "
        "[UserNamespacesSupport]"
    ]
    assert resolve_gates({"UserNamespacesSupport": False, "ProcMountType": False}).gates


def test_errors_name_the_flag_or_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve(["--feature-gates=MemoryQoS=true,Foo=true"], hostname=lambda: "n")
    assert [str(p) for p in exc.value.problems] == [
        "--feature-gates: unrecognized feature gate: Foo"
    ]
    path = tmp_path / "kubelet.yaml"
    path.write_text(HEADER + "featureGates: {SidecarContainers: false}\n")
    with pytest.raises(ConfigError) as exc:
        resolve([f"--config={path}", "--feature-gates=MemoryQoS=true"], hostname=lambda: "n")
    assert [str(p) for p in exc.value.problems] == [
        f"{path}: featureGates: cannot set feature gate SidecarContainers to false, "
        "feature is locked to true"
    ]
    with pytest.raises(ConfigError, match=r"--feature-gates: invalid value \"MemoryQoS=maybe\""):
        resolve(["--feature-gates=MemoryQoS=maybe"], hostname=lambda: "n")


def test_options_carry_the_gates_and_their_warnings() -> None:
    options = resolve(["--feature-gates=ExecProbeTimeout=true"], hostname=lambda: "n")
    assert isinstance(options.features, FeatureGates)
    assert options.features.enabled("ExecProbeTimeout")
    assert options.warnings[0].startswith("Flag --feature-gates has been deprecated, ")
    assert options.warnings[1] == (
        "Setting GA feature gate ExecProbeTimeout=true. It will be removed in a future release."
    )


def test_process_exits_non_zero_on_an_unknown_gate() -> None:
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "kubelet", "--feature-gates", "Foo=true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == "kubelet: --feature-gates: unrecognized feature gate: Foo\n"


def test_every_gate_constant_names_a_gate_of_this_version() -> None:
    import ast
    import inspect

    from kubelet.config import GATES, features

    tree = ast.parse(inspect.getsource(features))
    names = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    assert len(names) > 20 and [n for n in names if n not in GATES] == []


def test_code_outside_config_names_gates_only_through_the_constants() -> None:
    # one constant per gate: a literal gate name elsewhere is a second spelling to drift
    import re
    import subprocess
    from pathlib import Path

    from kubelet.config import GATES

    root = Path(__file__).resolve().parents[3]
    listed = subprocess.run(
        ["git", "ls-files", "kubelet"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for path in listed:
        if not path.endswith(".py") or path.startswith(("kubelet/config/", "kubelet/testing/")):
            continue
        for number, line in enumerate((root / path).read_text().splitlines(), 1):
            if "enabled(" in line or "GATE" in line:
                for name in re.findall(r'"([A-Z][A-Za-z0-9]+)"', line):
                    if name in GATES:
                        found.append(f"{path}:{number}: {name}")
    assert found == []
