"""Our proto/cri_api.proto against an independently published CRI v1 descriptor.

The reference is the serialized FileDescriptorProto inside PyPI's
``container-runtime-interface-api`` wheel (a compiled copy of upstream's api.proto). It
is read as bytes from the wheel, never imported: that package pins an older protobuf.
For every message and enum we define, every field must agree in name, number, type,
label and referenced type. The published descriptor is a little older than the
v0.36 schema we follow, so the only tolerated differences are listed below, each a
fact of the newer upstream schema.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from kubelet.cri import api

ROOT = Path(__file__).resolve().parents[3]
WHEEL_PROJECT = "container-runtime-interface-api==2.0.1"
WHEEL_MEMBER = "cri_api/v1/api_pb2.py"
CACHE = ROOT / ".cache" / "cri-api-wheel"

# (message, field number) present in cri-api v0.36 but newer than the published wheel.
NEWER_THAN_REFERENCE = {
    ("ImageSpec", 20),  # image_ref
    ("RuntimeFeatures", 2),  # user_namespaces_host_network
}
# KeyValue.value became bytes upstream (wire-identical to string).
WIRE_EQUIVALENT = {("KeyValue", 2): {descriptor_pb2.FieldDescriptorProto.TYPE_STRING}}

Field = descriptor_pb2.FieldDescriptorProto


def _reference_descriptor() -> descriptor_pb2.FileDescriptorProto:
    wheels = sorted(CACHE.glob("container_runtime_interface_api-*.whl"))
    if not wheels:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                str(CACHE),
                WHEEL_PROJECT,
            ],
            check=True,
        )
        wheels = sorted(CACHE.glob("container_runtime_interface_api-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as wheel:
        source = wheel.read(WHEEL_MEMBER).decode()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(node.args[0]))
    raise AssertionError("no serialized descriptor in the reference wheel")


@pytest.fixture(scope="module")
def reference() -> descriptor_pb2.FileDescriptorProto:
    return _reference_descriptor()


def _ours() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    api.DESCRIPTOR.CopyToProto(proto)
    return proto


def _short(type_name: str) -> str:
    """'.runtime.v1.PodSandboxConfig.LabelsEntry' → 'PodSandboxConfig.LabelsEntry'."""
    return type_name.removeprefix(".runtime.v1.")


def _compare_message(
    ours: descriptor_pb2.DescriptorProto,
    theirs: descriptor_pb2.DescriptorProto,
    path: str,
) -> list[str]:
    problems: list[str] = []
    their_fields = {f.number: f for f in theirs.field}
    our_fields = {f.number: f for f in ours.field}
    for number, mine in our_fields.items():
        key = (path, number)
        other = their_fields.get(number)
        if other is None:
            if key not in NEWER_THAN_REFERENCE:
                problems.append(f"{path}.{mine.name} = {number}: not in the reference")
            continue
        if mine.name != other.name:
            problems.append(f"{path} field {number}: name {mine.name!r} vs {other.name!r}")
        if mine.type != other.type and other.type not in WIRE_EQUIVALENT.get(key, set()):
            problems.append(f"{path}.{mine.name}: type {mine.type} vs {other.type}")
        if mine.label != other.label:
            problems.append(f"{path}.{mine.name}: label {mine.label} vs {other.label}")
        if _short(mine.type_name) != _short(other.type_name):
            problems.append(f"{path}.{mine.name}: refers to {mine.type_name} vs {other.type_name}")
    for number, other in their_fields.items():
        if number not in our_fields:
            problems.append(f"{path}.{other.name} = {number}: missing from ours")
    their_nested = {n.name: n for n in theirs.nested_type}
    for nested in ours.nested_type:
        if nested.name not in their_nested:
            problems.append(f"{path}.{nested.name}: nested type not in the reference")
        else:
            problems += _compare_message(nested, their_nested[nested.name], f"{path}.{nested.name}")
    problems += _compare_enums(ours.enum_type, theirs.enum_type, path + ".")
    return problems


def _compare_enums(ours: object, theirs: object, prefix: str = "") -> list[str]:
    problems = []
    their_enums = {e.name: e for e in theirs}  # type: ignore[attr-defined]
    for enum in ours:  # type: ignore[attr-defined]
        other = their_enums.get(enum.name)
        if other is None:
            problems.append(f"enum {prefix}{enum.name}: not in the reference")
            continue
        mine = {v.number: v.name for v in enum.value}
        their = {v.number: v.name for v in other.value}
        if mine != their:
            problems.append(f"enum {prefix}{enum.name}: {mine} vs {their}")
    return problems


def test_package_and_services(reference: descriptor_pb2.FileDescriptorProto) -> None:
    ours = _ours()
    assert ours.package == reference.package == "runtime.v1"
    assert ours.syntax == reference.syntax == "proto3"
    their_services = {s.name: s for s in reference.service}
    assert {s.name for s in ours.service} == {"RuntimeService", "ImageService"}
    for service in ours.service:
        theirs = {m.name: m for m in their_services[service.name].method}
        for method in service.method:
            other = theirs[method.name]
            assert (method.input_type, method.output_type) == (other.input_type, other.output_type)
            assert not method.client_streaming and not method.server_streaming


def test_every_message_matches_the_reference(
    reference: descriptor_pb2.FileDescriptorProto,
) -> None:
    their_messages = {m.name: m for m in reference.message_type}
    problems: list[str] = []
    for message in _ours().message_type:
        if message.name not in their_messages:
            problems.append(f"message {message.name}: not in the reference")
            continue
        problems += _compare_message(message, their_messages[message.name], message.name)
    problems += _compare_enums(_ours().enum_type, reference.enum_type)
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_wrong_field_number(
    reference: descriptor_pb2.FileDescriptorProto,
) -> None:
    """Renumbering one field must be reported (the test above can fail)."""
    ours = _ours()
    broken = next(m for m in ours.message_type if m.name == "ContainerConfig")
    next(f for f in broken.field if f.name == "log_path").number = 19
    their = next(m for m in reference.message_type if m.name == "ContainerConfig")
    problems = _compare_message(broken, their, "ContainerConfig")
    assert any("log_path = 19" in p for p in problems)
    assert any("log_path = 11: missing" in p for p in problems)


def test_rpc_set_is_what_the_kubelet_needs() -> None:
    names = {m.name for s in _ours().service for m in s.method}
    assert names == {
        "Version",
        "Status",
        "UpdateRuntimeConfig",
        "RuntimeConfig",
        "CheckpointContainer",
        "RunPodSandbox",
        "StopPodSandbox",
        "RemovePodSandbox",
        "PodSandboxStatus",
        "ListPodSandbox",
        "CreateContainer",
        "StartContainer",
        "StopContainer",
        "RemoveContainer",
        "ListContainers",
        "ContainerStatus",
        "UpdateContainerResources",
        "ReopenContainerLog",
        "ExecSync",
        "Exec",
        "Attach",
        "PortForward",
        "ContainerStats",
        "ListContainerStats",
        "PodSandboxStats",
        "ListPodSandboxStats",
        "ListImages",
        "ImageStatus",
        "PullImage",
        "RemoveImage",
        "ImageFsInfo",
    }
