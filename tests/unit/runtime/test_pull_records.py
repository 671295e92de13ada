"""Pull records and credential verification (KubeletEnsureSecretPulledImages).

Decisions restated from pkg/kubelet/images/pullmanager (image_pull_manager_test.go,
image_pull_policies_test.go, Kubernetes 1.36) as input → expected output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kubelet.config import KubeletConfiguration, validate
from kubelet.config.features import resolve_gates
from kubelet.cri import api
from kubelet.runtime.credentials import PullCredential, PullRecords, pull_records
from kubelet.runtime.credentials.pullrecords import (
    CredentialRecord,
    PulledRecord,
    SecretRecord,
    allowlist_pattern,
    credentials_for,
    match_secrets,
    merge_credentials,
    verification_policy,
)

NOW = "2026-01-01T00:00:00Z"
IMAGE = "registry.example/team/app:1"
KEY = "registry.example/team/app"
REF = "sha256:" + "ab" * 32


def cred(name: str, hash_: str, uid: str = "") -> PullCredential:
    return PullCredential("u", "p", ("default", name, uid or f"uid-{name}"), hash_)


# -- policies -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "pulled_by_kubelet", "verify"),
    [
        ("NeverVerify", True, False),
        ("NeverVerify", False, False),
        ("NeverVerifyPreloadedImages", True, True),
        ("NeverVerifyPreloadedImages", False, False),
        ("AlwaysVerify", True, True),
        ("AlwaysVerify", False, True),
    ],
)
def test_policies(policy: str, pulled_by_kubelet: bool, verify: bool) -> None:
    assert verification_policy(policy)(IMAGE, pulled_by_kubelet) is verify


def test_allowlisted_images_need_no_verification_whoever_pulled_them() -> None:
    allowed = verification_policy(
        "NeverVerifyAllowlistedImages",
        ["registry.example/team/app", "docker.io/library/busybox", "mirror.example/*"],
    )
    assert allowed(IMAGE, True) is False
    assert allowed("busybox:1.35", True) is False  # familiar names match (1.36's fix)
    assert allowed("mirror.example/any/thing@sha256:" + "a" * 64, True) is False
    assert allowed("registry.example/team/other:1", False) is True
    assert allowed("mirror.example2/x:1", False) is True


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown image pull credential verification policy: X"):
        verification_policy("X")


@pytest.mark.parametrize(
    ("pattern", "result"),
    [
        ("registry.example/team/app", ("registry.example/team/app", False)),
        ("registry.example/*", ("registry.example/", True)),
        (" registry.example/a", "leading/trailing spaces are not allowed"),
        ("", "the supplied pattern is too short"),
        ("*", "only patterns ending with ./*. are allowed"),
        ("/*", "at least registry hostname is required"),
        ("registry.*/app", "only patterns ending with '/*' are allowed"),
        ("registry.example/app:1", "neither tag nor digest is accepted"),
        ("busybox", "neither tag nor digest is accepted"),  # not the normalised name
        ("Bad Name", "failed to parse as an image name"),
    ],
)
def test_allowlist_patterns(pattern: str, result: object) -> None:
    if isinstance(result, tuple):
        assert allowlist_pattern(pattern) == result
    else:
        with pytest.raises(ValueError, match=str(result).replace("*", r"\*")):
            allowlist_pattern(pattern)


@pytest.mark.parametrize(
    ("fields", "issues"),
    [
        ({}, []),
        ({"image_pull_credentials_verification_policy": "Sometimes"}, ["Sometimes"]),
        (
            {
                "image_pull_credentials_verification_policy": "NeverVerifyAllowlistedImages",
                "preloaded_images_verification_allowlist": ("ok.example/a", "busybox", "x/*"),
            },
            ["neither tag nor digest is accepted in an image reference: busybox"],
        ),
        (  # an allowlist means nothing under another policy: refused, as upstream
            {"preloaded_images_verification_allowlist": ("ok.example/a",)},
            ["can't set `preloadedImagesVerificationAllowlist` if"],
        ),
    ],
)
def test_config_validation(fields: dict[str, object], issues: list[str]) -> None:
    found = [
        message
        for field, message in validate(KubeletConfiguration(**fields))  # type: ignore[arg-type]
        if "Verification" in field
    ]
    assert len(found) == len(issues)
    for message, expected in zip(found, issues, strict=True):
        assert expected in message


def test_with_the_gate_off_the_fields_must_not_be_set() -> None:
    """Upstream refuses them rather than ignore them (the gate read as resolved, so
    ``AllBeta=false`` counts too)."""
    off = resolve_gates({"AllBeta": False}).gates
    config = KubeletConfiguration(
        image_pull_credentials_verification_policy="AlwaysVerify",
        preloaded_images_verification_allowlist=("ok.example/a",),
    )
    assert [i for i in validate(config, off) if "Verification" in i[0]] == [
        (
            "imagePullCredentialsVerificationPolicy",
            "`imagePullCredentialsVerificationPolicy` must not be set if "
            "KubeletEnsureSecretPulledImages feature gate is not enabled",
        ),
        (
            "preloadedImagesVerificationAllowlist",
            "`preloadedImagesVerificationAllowlist` must not be set if "
            "KubeletEnsureSecretPulledImages feature gate is not enabled",
        ),
    ]
    assert [i for i in validate(KubeletConfiguration(), off) if "Verification" in i[0]] == []


def test_pull_records_follow_the_feature_gate(tmp_path: Path) -> None:
    config = KubeletConfiguration()
    assert isinstance(pull_records(config, str(tmp_path), lambda: 0.0), PullRecords)
    assert pull_records(config, str(tmp_path), lambda: 0.0, enabled=False) is None


# -- merging and matching -------------------------------------------------------------

A = SecretRecord("default", "a", "uid-a", "hash-1")
B = SecretRecord("default", "b", "uid-b", "hash-2")


def test_credentials_for_a_pull() -> None:
    assert credentials_for(None) == CredentialRecord(node_pods_accessible=True)
    assert credentials_for(PullCredential("u", "p", None)) == CredentialRecord(
        node_pods_accessible=True
    )
    assert credentials_for(cred("a", "hash-1")) == CredentialRecord(secrets=(A,))


def test_merge_credentials() -> None:
    empty = PulledRecord(REF, "old")
    with_a, changed = merge_credentials(empty, KEY, CredentialRecord(secrets=(A,)), NOW)
    assert changed and with_a.mapping[KEY].secrets == (A,) and with_a.last_updated == NOW
    # the same again: no write
    assert merge_credentials(with_a, KEY, CredentialRecord(secrets=(A,)), NOW)[1] is False
    # a second secret joins, sorted by namespace, name, uid
    both, changed = merge_credentials(with_a, KEY, CredentialRecord(secrets=(B,)), NOW)
    assert changed and both.mapping[KEY].secrets == (A, B)
    # a known secret's new hash replaces the old one
    rotated = SecretRecord("default", "a", "uid-a", "hash-3")
    updated, changed = merge_credentials(both, KEY, CredentialRecord(secrets=(rotated,)), NOW)
    assert changed and updated.mapping[KEY].secrets == (rotated, B)
    # anonymous wins for good
    public = CredentialRecord(node_pods_accessible=True)
    opened, changed = merge_credentials(updated, KEY, public, NOW)
    assert changed and opened.mapping[KEY] == public
    assert merge_credentials(opened, KEY, CredentialRecord(secrets=(A,)), NOW)[1] is False
    # nothing to record
    assert merge_credentials(empty, KEY, CredentialRecord(), NOW)[1] is False


@pytest.mark.parametrize(
    ("provided", "cached", "result"),
    [
        ([], [A], (False, None)),
        ([A], [], (False, None)),
        ([A], [A], (True, None)),
        # same credentials in another Secret: matches, and that Secret is recorded
        (
            [SecretRecord("default", "c", "uid-c", "hash-1")],
            [A],
            (True, SecretRecord("default", "c", "uid-c", "hash-1")),
        ),
        # the same Secret with rotated credentials: matches, the new hash is recorded
        (
            [SecretRecord("default", "a", "uid-a", "hash-9")],
            [A],
            (True, SecretRecord("default", "a", "uid-a", "hash-9")),
        ),
        # a Secret recreated under the same name (new uid) with other credentials: no
        ([SecretRecord("default", "a", "uid-new", "hash-9")], [A], (False, None)),
        # an empty recorded hash never matches on hash
        ([SecretRecord("x", "y", "z", "")], [SecretRecord("p", "q", "r", "")], (False, None)),
    ],
)
def test_match_secrets(
    provided: list[SecretRecord],
    cached: list[SecretRecord],
    result: tuple[bool, SecretRecord | None],
) -> None:
    assert match_secrets(provided, cached) == result


# -- the records on disk --------------------------------------------------------------


def creds_of(*found: PullCredential) -> object:
    calls: list[int] = []

    async def get() -> Sequence[PullCredential]:
        calls.append(1)
        return list(found)

    get.calls = calls  # type: ignore[attr-defined]
    return get


async def test_an_image_the_kubelet_never_pulled_is_used_freely(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    get = creds_of()
    assert await records.must_pull(IMAGE, REF, get) is False  # type: ignore[arg-type]
    assert get.calls == []  # type: ignore[attr-defined]
    always = PullRecords(tmp_path, verification_policy("AlwaysVerify"), lambda: 0)
    assert await always.must_pull(IMAGE, REF, creds_of()) is True  # type: ignore[arg-type]


async def test_pulled_with_a_secret_then_checked_against_each_pod(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    records.record_intent(IMAGE)
    intent_files = list((tmp_path / "image_manager" / "pulling").iterdir())
    assert len(intent_files) == 1
    assert json.loads(intent_files[0].read_text()) == {
        "kind": "ImagePullIntent",
        "apiVersion": "kubelet.config.k8s.io/v1alpha1",
        "image": IMAGE,
    }
    records.record_pulled(IMAGE, REF, cred("a", "hash-1"))
    assert list((tmp_path / "image_manager" / "pulling").iterdir()) == []
    (pulled,) = (tmp_path / "image_manager" / "pulled").iterdir()
    assert json.loads(pulled.read_text()) == {
        "kind": "ImagePulledRecord",
        "apiVersion": "kubelet.config.k8s.io/v1alpha1",
        "lastUpdatedTime": "1970-01-01T00:00:00Z",
        "imageRef": REF,
        "credentialMapping": {
            KEY: {
                "kubernetesSecrets": [
                    {
                        "uid": "uid-a",
                        "namespace": "default",
                        "name": "a",
                        "credentialHash": "hash-1",
                    }
                ]
            }
        },
    }
    no_creds = creds_of()
    assert await records.must_pull(IMAGE, REF, no_creds) is True  # type: ignore[arg-type]
    assert no_creds.calls == [1]  # type: ignore[attr-defined]
    assert await records.must_pull(IMAGE, REF, creds_of(cred("a", "hash-1"))) is False  # type: ignore[arg-type]
    # another image name (another repository) for the same content is verified on its own
    other = "registry.example/team/copy:1"
    assert await records.must_pull(other, REF, creds_of(cred("a", "hash-1"))) is True  # type: ignore[arg-type]
    # same credentials in another Secret: allowed, and now on record
    friend = cred("friend", "hash-1")
    assert await records.must_pull(IMAGE, REF, creds_of(friend)) is False  # type: ignore[arg-type]
    names = {
        s["name"]
        for s in json.loads(pulled.read_text())["credentialMapping"][KEY]["kubernetesSecrets"]
    }
    assert names == {"a", "friend"}


async def test_an_anonymous_pull_opens_the_image_to_every_pod(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("AlwaysVerify"), lambda: 0)
    records.record_intent(IMAGE)
    records.record_pulled(IMAGE, REF, None)
    assert await records.must_pull(IMAGE, REF, creds_of()) is False  # type: ignore[arg-type]


async def test_a_pull_in_flight_counts_as_pulled_by_the_kubelet(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    records.record_intent(IMAGE)
    assert await records.must_pull(IMAGE, REF, creds_of()) is True  # type: ignore[arg-type]
    records.record_failed(IMAGE)
    assert await records.must_pull(IMAGE, REF, creds_of()) is False  # type: ignore[arg-type]


async def test_intents_left_by_a_crash_become_records_to_verify(tmp_path: Path) -> None:
    crashed = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    tagged = "docker.io/library/app:1"
    crashed.record_intent(tagged)
    crashed.record_intent("docker.io/library/gone:1")
    restarted = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    present = api.Image(id=REF, repo_tags=[tagged])
    restarted.initialize([present])
    assert restarted.files.intents() == ["docker.io/library/gone:1"]
    record = restarted.files.pulled_record(REF)
    assert record is not None and dict(record.mapping) == {}
    assert await restarted.must_pull(tagged, REF, creds_of(cred("a", "h"))) is True  # type: ignore[arg-type]


async def test_an_unreadable_record_means_verify(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("NeverVerify"), lambda: 0)
    records.record_intent(IMAGE)
    records.record_pulled(IMAGE, REF, cred("a", "hash-1"))
    (pulled,) = (tmp_path / "image_manager" / "pulled").iterdir()
    pulled.write_text("{not json")
    strict = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    assert await strict.must_pull(IMAGE, REF, creds_of()) is True  # type: ignore[arg-type]


async def test_upstreams_older_field_name_is_read(tmp_path: Path) -> None:
    records = PullRecords(tmp_path, verification_policy("NeverVerifyPreloadedImages"), lambda: 0)
    records.record_intent(IMAGE)
    records.record_pulled(IMAGE, REF, None)
    (pulled,) = (tmp_path / "image_manager" / "pulled").iterdir()
    doc = {
        "kind": "ImagePulledRecord",
        "apiVersion": "kubelet.config.k8s.io/v1alpha1",
        "lastUpdatedTime": "2024-10-21T12:26:40Z",
        "imageRef": REF,
        "credentialMapping": {
            KEY: {"kubernetesSecretCoordinates": [{"uid": "u1", "namespace": "default",
                                                  "name": "pull-secret", "credentialHash": "h1"}]}
        },
    }  # fmt: skip
    pulled.write_text(json.dumps(doc))
    ok = cred("pull-secret", "other", "u1")
    assert await records.must_pull(IMAGE, REF, creds_of(ok)) is False  # type: ignore[arg-type]
