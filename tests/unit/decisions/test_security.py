"""Security-context decisions: runAsNonRoot, seccomp, AppArmor, groups, the CRI messages."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from kubelet.api import Container, ObjectMeta, Pod, PodSpec, PodStatus, Quantity
from kubelet.api.pod import PodSecurityContext, SecurityContext
from kubelet.cri import api
from kubelet.decisions import (
    SecurityContextError,
    apparmor_admission_error,
    apparmor_host_error,
    container_config,
    image_user,
    needs_image_user,
    sandbox_config,
    verify_run_as_non_root,
)
from kubelet.decisions.criconfig import namespace_options
from kubelet.decisions.security import apparmor_profile, seccomp_profile

UID = "0f0e0d0c-1111-2222-3333-444444444444"
GiB = 2**30
WHERE = f'(pod: "web_prod({UID})", container: app)'
ROOT = "/var/lib/kubelet/seccomp"


def pod_with(
    container: SecurityContext | None = None,
    pod: PodSecurityContext | None = None,
    *,
    annotations: dict[str, str] | None = None,
    phase: str = "",
    **spec: object,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="prod", uid=UID, annotations=annotations or {}),
        spec=attrs.evolve(
            PodSpec(containers=(Container(name="app", image="img", security_context=container),)),
            security_context=pod,
            **spec,
        ),
        status=PodStatus(phase=phase),
    )


def app(pod: Pod) -> Container:
    return pod.spec.containers[0]


# -- runAsNonRoot (upstream TestVerifyRunAsNonRoot) ------------------------------------------


@pytest.mark.parametrize(
    ("csc", "psc", "uid", "username", "expected"),
    [
        # no runAsNonRoot (or false): anything goes
        (None, None, 0, "", None),
        (SecurityContext(run_as_non_root=False), None, 0, "", None),
        # runAsUser given: only 0 breaks the policy; the image does not matter
        (
            SecurityContext(run_as_non_root=True, run_as_user=0),
            None,
            1000,
            "",
            f"container's runAsUser breaks non-root policy {WHERE}",
        ),
        (SecurityContext(run_as_non_root=True, run_as_user=1000), None, 0, "", None),
        # pod-level settings count, the container's win
        (
            None,
            PodSecurityContext(run_as_non_root=True, run_as_user=0),
            None,
            "",
            f"container's runAsUser breaks non-root policy {WHERE}",
        ),
        (
            SecurityContext(run_as_user=5),
            PodSecurityContext(run_as_non_root=True, run_as_user=0),
            None,
            "",
            None,
        ),
        (
            SecurityContext(run_as_non_root=False),
            PodSecurityContext(run_as_non_root=True),
            0,
            "",
            None,
        ),
        # the image's user
        (
            SecurityContext(run_as_non_root=True),
            None,
            0,
            "",
            f"container has runAsNonRoot and image will run as root {WHERE}",
        ),
        (
            None,
            PodSecurityContext(run_as_non_root=True),
            None,
            "nobody",
            "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify "
            f"user is non-root {WHERE}",
        ),
        (SecurityContext(run_as_non_root=True), None, 1000, "", None),
        (
            SecurityContext(run_as_non_root=True),
            None,
            2**31,
            "",
            "container has runAsNonRoot and image has an invalid user id (2147483648). "
            "(Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive " + WHERE,
        ),
        # neither uid nor name: nothing to verify (image_user never answers that)
        (SecurityContext(run_as_non_root=True), None, None, "", None),
    ],
)
def test_verify_run_as_non_root(
    csc: SecurityContext | None,
    psc: PodSecurityContext | None,
    uid: int | None,
    username: str,
    expected: str | None,
) -> None:
    pod = pod_with(csc, psc)
    assert verify_run_as_non_root(pod, app(pod), uid, username) == expected


def test_image_user_from_image_status() -> None:
    """containerd reports a numeric USER as uid, a name as username, none at all for an
    image without USER: that one runs as root (upstream's getImageUser)."""
    numeric = api.Image(id="a")
    numeric.uid.value = 1000
    assert image_user(numeric) == (1000, "")
    root = api.Image(id="b")
    root.uid.value = 0
    assert image_user(root) == (0, "")
    assert image_user(api.Image(id="c", username="app")) == (None, "app")
    assert image_user(api.Image(id="d")) == (0, "")
    assert image_user(None) == (0, "")


def test_image_user_needed_only_without_run_as_user() -> None:
    assert needs_image_user(*_pc(pod_with(SecurityContext(run_as_non_root=True))))
    assert not needs_image_user(
        *_pc(pod_with(SecurityContext(run_as_non_root=True), PodSecurityContext(run_as_user=7)))
    )
    assert not needs_image_user(*_pc(pod_with()))


def _pc(pod: Pod) -> tuple[Pod, Container]:
    return pod, app(pod)


# -- seccomp --------------------------------------------------------------------------------

RD = api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault)
UNCONFINED = api.SecurityProfile(profile_type=api.SecurityProfile.Unconfined)


@pytest.mark.parametrize(
    ("csc", "psc", "default", "expected"),
    [
        (None, None, False, UNCONFINED),
        (None, None, True, RD),  # seccompDefault
        (None, PodSecurityContext(seccomp_profile={"type": "RuntimeDefault"}), False, RD),
        (
            SecurityContext(seccomp_profile={"type": "Unconfined"}),
            PodSecurityContext(seccomp_profile={"type": "RuntimeDefault"}),
            True,
            UNCONFINED,
        ),
        (
            SecurityContext(seccomp_profile={"type": "Localhost", "localhostProfile": "a/b.json"}),
            None,
            False,
            api.SecurityProfile(
                profile_type=api.SecurityProfile.Localhost, localhost_ref=f"{ROOT}/a/b.json"
            ),
        ),
    ],
)
def test_seccomp(
    csc: SecurityContext | None,
    psc: PodSecurityContext | None,
    default: bool,
    expected: api.SecurityProfile,
) -> None:
    pod = pod_with(csc, psc)
    assert seccomp_profile(pod, app(pod), root=ROOT, seccomp_default=default) == expected


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            {"type": "Localhost"},
            "localhostProfile must be set if seccompProfile type is Localhost.",
        ),
        ({"type": "Localhost", "localhostProfile": "../../etc/x"}, "must be a relative path"),
        ({"type": "Localhost", "localhostProfile": "/etc/x"}, "must be a relative path"),
        ({"type": "Bogus"}, "unsupported seccomp profile type 'Bogus'"),
    ],
)
def test_seccomp_refused(profile: dict[str, str], message: str) -> None:
    pod = pod_with(SecurityContext(seccomp_profile=profile))
    with pytest.raises(SecurityContextError, match=message.replace(".", r"\.")):
        seccomp_profile(pod, app(pod), root=ROOT)


def test_sandbox_seccomp_is_runtime_default_whatever_the_pod_says() -> None:
    pod = pod_with(None, PodSecurityContext(seccomp_profile={"type": "Unconfined"}))
    sc = sandbox_config(pod, 0).linux.security_context
    assert sc.HasField("seccomp") and sc.seccomp == RD


def test_seccomp_default_reaches_the_container_config() -> None:
    pod = pod_with()
    on = container_config(
        pod, app(pod), 0, image_ref="x", memory_capacity=GiB, seccomp_default=True
    )
    off = container_config(pod, app(pod), 0, image_ref="x", memory_capacity=GiB)
    assert on.linux.security_context.seccomp == RD
    assert off.linux.security_context.seccomp == UNCONFINED


# -- AppArmor -------------------------------------------------------------------------------

AA_KEY = "container.apparmor.security.beta.kubernetes.io/app"


@pytest.mark.parametrize(
    ("csc", "psc", "annotations", "expected", "deprecated"),
    [
        (None, None, {}, None, ""),
        (
            SecurityContext(app_armor_profile={"type": "RuntimeDefault"}),
            None,
            {},
            api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault),
            "runtime/default",
        ),
        (
            None,
            PodSecurityContext(app_armor_profile={"type": "Localhost", "localhostProfile": "p"}),
            {},
            api.SecurityProfile(profile_type=api.SecurityProfile.Localhost, localhost_ref="p"),
            "localhost/p",
        ),
        # the container's field wins over the annotation, the annotation over the pod's
        (
            SecurityContext(app_armor_profile={"type": "Unconfined"}),
            None,
            {AA_KEY: "runtime/default"},
            api.SecurityProfile(profile_type=api.SecurityProfile.Unconfined),
            "unconfined",
        ),
        (
            None,
            PodSecurityContext(app_armor_profile={"type": "RuntimeDefault"}),
            {AA_KEY: "localhost/k8s-deny-write"},
            api.SecurityProfile(
                profile_type=api.SecurityProfile.Localhost, localhost_ref="k8s-deny-write"
            ),
            "localhost/k8s-deny-write",
        ),
        (None, None, {AA_KEY: "unconfined"}, UNCONFINED, "unconfined"),
        # an annotation value upstream does not understand is ignored
        (None, None, {AA_KEY: "bogus"}, None, ""),
        # another container's annotation is not this one's
        (
            None,
            None,
            {"container.apparmor.security.beta.kubernetes.io/x": "runtime/default"},
            None,
            "",
        ),
    ],
)
def test_apparmor_profile(
    csc: SecurityContext | None,
    psc: PodSecurityContext | None,
    annotations: dict[str, str],
    expected: api.SecurityProfile | None,
    deprecated: str,
) -> None:
    pod = pod_with(csc, psc, annotations=annotations)
    assert apparmor_profile(pod, app(pod)) == (expected, deprecated)


def test_apparmor_reaches_the_container_config() -> None:
    pod = pod_with(SecurityContext(app_armor_profile={"type": "RuntimeDefault"}))
    sc = container_config(pod, app(pod), 0, image_ref="x", memory_capacity=GiB)
    assert sc.linux.security_context.apparmor == RD
    assert sc.linux.security_context.HasField("apparmor")
    assert sc.linux.security_context.apparmor_profile == "runtime/default"
    plain = pod_with()
    sc = container_config(plain, app(plain), 0, image_ref="x", memory_capacity=GiB)
    assert not sc.linux.security_context.HasField("apparmor")
    assert sc.linux.security_context.apparmor_profile == ""


NO_APPARMOR = "AppArmor is not enabled on the host"


@pytest.mark.parametrize(
    ("pod", "host_error", "expected"),
    [
        (pod_with(), NO_APPARMOR, None),
        # Unconfined needs nothing from the host
        (pod_with(SecurityContext(app_armor_profile={"type": "Unconfined"})), NO_APPARMOR, None),
        (pod_with(annotations={AA_KEY: "unconfined"}), NO_APPARMOR, None),
        (
            pod_with(SecurityContext(app_armor_profile={"type": "RuntimeDefault"})),
            NO_APPARMOR,
            f"Cannot enforce AppArmor: {NO_APPARMOR}",
        ),
        (
            pod_with(None, PodSecurityContext(app_armor_profile={"type": "RuntimeDefault"})),
            NO_APPARMOR,
            f"Cannot enforce AppArmor: {NO_APPARMOR}",
        ),
        (
            pod_with(annotations={AA_KEY: "localhost/x"}),
            NO_APPARMOR,
            f"Cannot enforce AppArmor: {NO_APPARMOR}",
        ),
        # a pod already running is not checked again (a kubelet restart keeps it)
        (
            pod_with(
                SecurityContext(app_armor_profile={"type": "RuntimeDefault"}), phase="Running"
            ),
            NO_APPARMOR,
            None,
        ),
        (pod_with(SecurityContext(app_armor_profile={"type": "RuntimeDefault"})), None, None),
        (
            pod_with(
                SecurityContext(app_armor_profile={"type": "Localhost", "localhostProfile": " "})
            ),
            None,
            "Cannot enforce AppArmor: invalid empty AppArmor profile name",
        ),
    ],
)
def test_apparmor_admission(pod: Pod, host_error: str | None, expected: str | None) -> None:
    got = apparmor_admission_error(pod, host_error)
    if expected is None:
        assert got is None
    else:
        assert got is not None and got.startswith(expected)


def test_apparmor_host_detection(tmp_path: Path) -> None:
    enabled = tmp_path / "enabled"
    fs = tmp_path / "securityfs"
    assert apparmor_host_error(str(enabled), str(fs)) == NO_APPARMOR  # no module at all
    enabled.write_text("Y\n")
    assert apparmor_host_error(str(enabled), str(fs)) == NO_APPARMOR  # no securityfs
    fs.mkdir()
    assert apparmor_host_error(str(enabled), str(fs)) is None
    enabled.write_text("N\n")
    assert apparmor_host_error(str(enabled), str(fs)) == NO_APPARMOR


# -- groups, sysctls, namespaces, overhead in the CRI configs -------------------------------


def test_supplemental_groups_and_policy_reach_sandbox_and_containers() -> None:
    pod = pod_with(
        None,
        PodSecurityContext(
            fs_group=2000, supplemental_groups=(4000, 5000), supplemental_groups_policy="Strict"
        ),
    )
    sandbox = sandbox_config(pod, 0).linux.security_context
    assert list(sandbox.supplemental_groups) == [2000, 4000, 5000]
    assert sandbox.supplemental_groups_policy == api.Strict
    container = container_config(pod, app(pod), 0, image_ref="x", memory_capacity=GiB)
    sc = container.linux.security_context
    assert list(sc.supplemental_groups) == [2000, 4000, 5000]
    assert sc.supplemental_groups_policy == api.Strict
    merge = pod_with(None, PodSecurityContext(supplemental_groups_policy="Merge"))
    assert sandbox_config(merge, 0).linux.security_context.supplemental_groups_policy == api.Merge


def test_unknown_supplemental_groups_policy_is_refused() -> None:
    pod = pod_with(None, PodSecurityContext(supplemental_groups_policy="Loose"))
    with pytest.raises(SecurityContextError, match="unsupported supplementalGroupsPolicy: Loose"):
        sandbox_config(pod, 0)


def test_sysctl_names_reach_the_sandbox_with_dots() -> None:
    pod = pod_with(
        None,
        PodSecurityContext(
            sysctls=(
                {"name": "net/ipv4/conf/eth0.100/rp_filter", "value": "1"},
                {"name": "kernel.shm_rmid_forced", "value": "1"},
            )
        ),
    )
    assert dict(sandbox_config(pod, 0).linux.sysctls) == {
        "net.ipv4.conf.eth0/100.rp_filter": "1",
        "kernel.shm_rmid_forced": "1",
    }


def test_user_namespace_in_sandbox_and_containers() -> None:
    ids = api.IDMapping(host_id=1 << 31, container_id=0, length=65536)
    userns = api.UserNamespace(mode=api.POD, uids=[ids], gids=[ids])
    pod = pod_with(host_users=False)
    config = sandbox_config(pod, 0, userns=userns)
    options = config.linux.security_context.namespace_options
    assert options.userns_options == userns
    container = container_config(
        pod, app(pod), 0, image_ref="x", memory_capacity=GiB, namespaces=options
    )
    assert container.linux.security_context.namespace_options.userns_options == userns
    assert not namespace_options(pod).HasField("userns_options")


def test_overhead_reaches_the_sandbox_config() -> None:
    pod = pod_with(overhead={"cpu": Quantity("250m"), "memory": Quantity("120Mi")})
    overhead = sandbox_config(pod, 0).linux.overhead
    assert (overhead.cpu_shares, overhead.cpu_quota, overhead.cpu_period) == (256, 25000, 100000)
    assert overhead.memory_limit_in_bytes == 120 * 2**20
    assert not sandbox_config(pod_with(), 0).linux.HasField("overhead")
