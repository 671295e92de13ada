"""hostUsers: the user-namespace decision and the ID ranges handed to pods."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kubelet.api import Container, Pod
from kubelet.cri import api
from kubelet.runtime.runtimeinfo import HandlerFeatures, features_from_status
from kubelet.runtime.userns import (
    DEFAULT_FIRST_ID,
    USERNS_LENGTH,
    Decision,
    UserNamespaces,
    UsernsError,
    decide,
)
from kubelet.testing.builders import make_pod

USERNS = {"": HandlerFeatures(user_namespaces=True), "kata": HandlerFeatures()}


def pod(uid: str = "u1", **spec: object) -> Pod:
    return make_pod(Container(name="c"), name="p", uid=uid, **spec)


@pytest.mark.parametrize(
    ("spec", "handler", "handlers", "enabled", "expected"),
    [
        # the feature on: every pod says where it runs, the host's namespace by default
        ({}, "", {}, True, Decision(mode=api.NODE)),
        ({"host_users": True}, "", {}, True, Decision(mode=api.NODE)),
        ({"host_users": False}, "", USERNS, True, Decision(own=True)),
        # the feature off: nothing is sent
        ({}, "", {}, False, Decision()),
    ],
)
def test_decide(
    spec: dict[str, object],
    handler: str,
    handlers: dict[str, HandlerFeatures],
    enabled: bool,
    expected: Decision,
) -> None:
    assert decide(pod(**spec), handler, handlers, feature_enabled=enabled) == expected


@pytest.mark.parametrize(
    ("spec", "handler", "handlers", "enabled", "message"),
    [
        (
            {"host_users": False},
            "",
            {},  # containerd 1.6 reports no handlers at all
            True,
            'RuntimeClass handler "" does not support user namespaces',
        ),
        (
            {"host_users": False},
            "kata",
            USERNS,
            True,
            'RuntimeClass handler "kata" does not support user namespaces',
        ),
        (
            {"host_users": False},
            "gvisor",
            USERNS,
            True,
            'RuntimeClass handler "gvisor" does not support user namespaces',
        ),
        (
            {"host_users": True},
            "",
            USERNS,
            False,
            'the feature gate "UserNamespacesSupport" is disabled: can\'t set spec.HostUsers',
        ),
        (
            {"host_users": False, "host_network": True},
            "",
            USERNS,
            True,
            "spec.hostNetwork: Forbidden: when `hostUsers` is false",
        ),
        (
            {"host_users": False, "host_pid": True},
            "",
            USERNS,
            True,
            "spec.hostPID: Forbidden: when `hostUsers` is false",
        ),
    ],
)
def test_decide_refuses(
    spec: dict[str, object],
    handler: str,
    handlers: dict[str, HandlerFeatures],
    enabled: bool,
    message: str,
) -> None:
    with pytest.raises(UsernsError) as info:
        decide(pod(**spec), handler, handlers, feature_enabled=enabled)
    assert info.value.message == message


def test_handler_features_from_status() -> None:
    status = api.StatusResponse(
        runtime_handlers=[
            api.RuntimeHandler(name="", features=api.RuntimeHandlerFeatures(user_namespaces=True)),
            api.RuntimeHandler(name="kata"),
        ],
        features=api.RuntimeFeatures(supplemental_groups_policy=True),
    )
    features = features_from_status(status)
    assert features.handlers == USERNS
    assert features.supplemental_groups_policy
    assert features_from_status(api.StatusResponse()).handlers == {}


def make(root: Path, **kw: int) -> UserNamespaces:
    def pod_dir(uid: str) -> str:
        return str(root / "pods" / uid)

    def on_disk() -> list[str]:
        base = root / "pods"
        return sorted(os.listdir(base)) if base.exists() else []

    return UserNamespaces(pod_dir, on_disk, **kw)


def first_id(ns: api.UserNamespace) -> int:
    assert ns.mode == api.POD and len(ns.uids) == 1 and ns.uids == ns.gids
    assert (ns.uids[0].container_id, ns.uids[0].length) == (0, USERNS_LENGTH)
    return ns.uids[0].host_id


def test_ranges_are_distinct_stable_and_persisted(tmp_path: Path) -> None:
    userns = make(tmp_path)
    a = first_id(userns.mappings(pod("a")))
    b = first_id(userns.mappings(pod("b")))
    assert a == DEFAULT_FIRST_ID and b == DEFAULT_FIRST_ID + USERNS_LENGTH
    assert first_id(userns.mappings(pod("a"))) == a  # the same pod keeps its range
    on_disk = json.loads((tmp_path / "pods" / "a" / "userns").read_text())
    assert on_disk == {
        "uidMappings": [{"hostId": a, "containerId": 0, "length": USERNS_LENGTH}],
        "gidMappings": [{"hostId": a, "containerId": 0, "length": USERNS_LENGTH}],
    }
    # a restarted kubelet: pod b keeps its range, and a new pod never gets a or b's
    again = make(tmp_path)
    c = first_id(again.mappings(pod("c")))
    assert c not in (a, b)
    assert first_id(again.mappings(pod("b"))) == b
    # a pod gone frees its range
    again.release("a")
    assert not (tmp_path / "pods" / "a" / "userns").exists()
    assert first_id(again.mappings(pod("d"))) == a


def test_range_exhausted_and_bad_file(tmp_path: Path) -> None:
    small = make(tmp_path, length=2 * USERNS_LENGTH)
    small.mappings(pod("a"))
    small.mappings(pod("b"))
    with pytest.raises(UsernsError, match="could not find an empty slot"):
        small.mappings(pod("c"))
    bad = tmp_path / "pods" / "x"
    bad.mkdir(parents=True)
    (bad / "userns").write_text('{"uidMappings": [], "gidMappings": []}')
    with pytest.raises(UsernsError, match="invalid user namespace mappings file"):
        make(tmp_path).mappings(pod("x"))
    with pytest.raises(ValueError, match="not usable"):
        make(tmp_path, first_id=0)
