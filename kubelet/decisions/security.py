"""A container's security context for the CRI, and the checks made before it is created.

Pure decisions, restated from upstream's kuberuntime (``determineEffectiveSecurityContext``,
``verifyRunAsNonRoot``, ``getSeccompProfile``, ``getAppArmorProfile``) and
``pkg/security/apparmor``:

* the container's settings win over the pod's (user, group, non-root, SELinux, seccomp,
  AppArmor); the pod's ``fsGroup`` and ``supplementalGroups`` are every container's
  supplementary groups, with ``supplementalGroupsPolicy`` (Merge or Strict) passed on;
* ``runAsNonRoot``: a ``runAsUser`` of 0, an image that runs as uid 0, or an image user
  given by name (the kubelet cannot tell its uid) stops the container before it is
  created, with upstream's messages (CreateContainerConfigError);
* seccomp: the container's profile, else the pod's, else Unconfined, or RuntimeDefault
  when the kubelet runs with ``seccompDefault``; the sandbox always gets RuntimeDefault;
* AppArmor: the container's ``appArmorProfile``, else the deprecated
  ``container.apparmor.security.beta.kubernetes.io/<name>`` annotation, else the pod's;
  a pod asking for anything but Unconfined is refused at admission on a host without
  AppArmor ("Cannot enforce AppArmor: AppArmor is not enabled on the host").
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

import attrs

from kubelet.api import Capabilities, Container, Pod, format_pod
from kubelet.cri import api
from kubelet.goformat import go_quote

__all__ = [
    "APPARMOR_ANNOTATION_PREFIX",
    "APPARMOR_REASON",
    "DEFAULT_MASKED_PATHS",
    "DEFAULT_READONLY_PATHS",
    "SecurityContextError",
    "apparmor_admission_error",
    "apparmor_host_error",
    "apparmor_profile",
    "container_security_context",
    "effective_security",
    "image_user",
    "needs_image_user",
    "sandbox_seccomp",
    "sandbox_security_context",
    "seccomp_profile",
    "supplemental_groups",
    "supplemental_groups_policy",
    "verify_run_as_non_root",
]

APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_RUNTIME_DEFAULT = "runtime/default"
APPARMOR_UNCONFINED = "unconfined"
APPARMOR_LOCALHOST_PREFIX = "localhost/"
APPARMOR_REASON = "AppArmor"
APPARMOR_ENABLED_FILE = "/sys/module/apparmor/parameters/enabled"
APPARMOR_SECURITYFS = "/sys/kernel/security/apparmor"
MAX_USER_ID = 2**31 - 1

# Upstream securitycontext's defaults (the runtime clears them for privileged containers).
DEFAULT_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")

_POLICIES = {"Merge": api.Merge, "Strict": api.Strict}


class SecurityContextError(Exception):
    """The container cannot be created with this security context (CreateContainerConfigError)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _format_pod(pod: Pod) -> str:
    """Upstream's ``format.Pod``, quoted as Go's ``%q`` does."""
    return go_quote(format_pod(pod))


# -- the effective context --------------------------------------------------------------


@attrs.frozen
class EffectiveSecurity:
    """The container's security settings with the pod's user, group, non-root and SELinux
    filled in where the container leaves them unset."""

    privileged: bool
    read_only_root_filesystem: bool
    no_new_privs: bool
    run_as_user: int | None
    run_as_group: int | None
    run_as_non_root: bool
    capabilities: Capabilities | None
    se_linux_options: Mapping[str, Any] | None
    proc_mount: str | None


def effective_security(pod: Pod, container: Container) -> EffectiveSecurity:
    psc = pod.spec.security_context
    csc = container.security_context
    run_as_user = csc.run_as_user if csc else None
    run_as_group = csc.run_as_group if csc else None
    non_root = csc.run_as_non_root if csc else None
    selinux = csc.se_linux_options if csc else None
    if psc is not None:
        run_as_user = psc.run_as_user if run_as_user is None else run_as_user
        run_as_group = psc.run_as_group if run_as_group is None else run_as_group
        non_root = psc.run_as_non_root if non_root is None else non_root
        selinux = selinux or psc.se_linux_options
    return EffectiveSecurity(
        privileged=bool(csc and csc.privileged),
        read_only_root_filesystem=bool(csc and csc.read_only_root_filesystem),
        no_new_privs=csc is not None and csc.allow_privilege_escalation is False,
        run_as_user=run_as_user,
        run_as_group=run_as_group,
        run_as_non_root=bool(non_root),
        capabilities=csc.capabilities if csc else None,
        se_linux_options=selinux,
        proc_mount=csc.proc_mount if csc else None,
    )


# -- runAsNonRoot ---------------------------------------------------------------------------


def needs_image_user(pod: Pod, container: Container) -> bool:
    """Whether checking ``runAsNonRoot`` needs the image's user (no ``runAsUser`` given)."""
    sc = effective_security(pod, container)
    return sc.run_as_non_root and sc.run_as_user is None


def image_user(image: api.Image | None) -> tuple[int | None, str]:
    """(uid, username) of an image as ImageStatus reports it; an image that names no user
    (or is not found) runs as root, uid 0, as upstream's ``getImageUser`` decides."""
    if image is not None:
        if image.HasField("uid"):
            return image.uid.value, ""
        if image.username:
            return None, image.username
    return 0, ""


def verify_run_as_non_root(
    pod: Pod, container: Container, image_uid: int | None, image_username: str
) -> str | None:
    """Why the container breaks its ``runAsNonRoot`` (upstream's message), None if it
    does not. ``image_uid``/``image_username``: the image's user as ImageStatus gives it
    (a uid when numeric, else a name; neither when the image sets no user: root)."""
    sc = effective_security(pod, container)
    if not sc.run_as_non_root:
        return None
    where = f"(pod: {_format_pod(pod)}, container: {container.name})"
    if sc.run_as_user is not None:
        if sc.run_as_user == 0:
            return f"container's runAsUser breaks non-root policy {where}"
        return None
    if image_uid is None and image_username:
        return (
            f"container has runAsNonRoot and image has non-numeric user ({image_username}), "
            f"cannot verify user is non-root {where}"
        )
    if image_uid is not None:
        if image_uid == 0:
            return f"container has runAsNonRoot and image will run as root {where}"
        if not 0 <= image_uid <= MAX_USER_ID:
            return (
                f"container has runAsNonRoot and image has an invalid user id ({image_uid}). "
                f"(Must be 1-({MAX_USER_ID})): must be between 0 and {MAX_USER_ID}, "
                f"inclusive {where}"
            )
    return None


# -- seccomp ---------------------------------------------------------------------------------


def _field_seccomp(
    profile: Mapping[str, Any], root: str, fallback_runtime_default: bool
) -> api.SecurityProfile:
    kind = profile.get("type")
    if kind == "RuntimeDefault":
        return api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault)
    if kind == "Localhost":
        name = str(profile.get("localhostProfile") or "")
        if not name:
            raise SecurityContextError(
                "localhostProfile must be set if seccompProfile type is Localhost."
            )
        if posixpath.isabs(name) or ".." in name.split("/"):
            # the API server refuses these; a static pod must not read files outside the root
            raise SecurityContextError(
                f"seccompProfile.localhostProfile {name!r} must be a relative path "
                "without '..' (under the kubelet's seccomp directory)"
            )
        return api.SecurityProfile(
            profile_type=api.SecurityProfile.Localhost, localhost_ref=posixpath.join(root, name)
        )
    if kind == "Unconfined":
        return api.SecurityProfile(profile_type=api.SecurityProfile.Unconfined)
    raise SecurityContextError(f"unsupported seccomp profile type {kind!r}")


def seccomp_profile(
    pod: Pod, container: Container, *, root: str, seccomp_default: bool = False
) -> api.SecurityProfile:
    """The container's seccomp profile: its own, else the pod's, else the default
    (RuntimeDefault with ``seccompDefault``, Unconfined without)."""
    csc = container.security_context
    if csc is not None and csc.seccomp_profile:
        return _field_seccomp(csc.seccomp_profile, root, seccomp_default)
    psc = pod.spec.security_context
    if psc is not None and psc.seccomp_profile:
        return _field_seccomp(psc.seccomp_profile, root, seccomp_default)
    if seccomp_default:
        return api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault)
    return api.SecurityProfile(profile_type=api.SecurityProfile.Unconfined)


def sandbox_seccomp() -> api.SecurityProfile:
    """The sandbox (pause) always runs with the runtime's default profile, as upstream."""
    return api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault)


# -- AppArmor --------------------------------------------------------------------------------


def _annotation_profile(pod: Pod, container: str) -> Mapping[str, Any] | None:
    value = pod.metadata.annotations.get(APPARMOR_ANNOTATION_PREFIX + container)
    if value is None:
        return None
    if value == APPARMOR_RUNTIME_DEFAULT:
        return {"type": "RuntimeDefault"}
    if value == APPARMOR_UNCONFINED:
        return {"type": "Unconfined"}
    if value.startswith(APPARMOR_LOCALHOST_PREFIX):
        return {"type": "Localhost", "localhostProfile": value[len(APPARMOR_LOCALHOST_PREFIX) :]}
    return None  # not a value upstream understands: ignored, as upstream does


def _apparmor_field(pod: Pod, container: Container) -> Mapping[str, Any] | None:
    csc = container.security_context
    if csc is not None and csc.app_armor_profile:
        return csc.app_armor_profile
    from_annotation = _annotation_profile(pod, container.name)
    if from_annotation is not None:
        return from_annotation
    psc = pod.spec.security_context
    if psc is not None and psc.app_armor_profile:
        return psc.app_armor_profile
    return None


def apparmor_profile(pod: Pod, container: Container) -> tuple[api.SecurityProfile | None, str]:
    """The CRI AppArmor profile and its deprecated string form (still sent to the
    runtime, as upstream does for older runtimes); (None, "") when none is asked."""
    profile = _apparmor_field(pod, container)
    if profile is None:
        return None, ""
    kind = profile.get("type")
    if kind == "RuntimeDefault":
        return (
            api.SecurityProfile(profile_type=api.SecurityProfile.RuntimeDefault),
            APPARMOR_RUNTIME_DEFAULT,
        )
    if kind == "Unconfined":
        return api.SecurityProfile(profile_type=api.SecurityProfile.Unconfined), APPARMOR_UNCONFINED
    if kind == "Localhost":
        name = profile.get("localhostProfile")
        if name is None:
            raise SecurityContextError("missing localhost apparmor profile name")
        return (
            api.SecurityProfile(profile_type=api.SecurityProfile.Localhost, localhost_ref=name),
            APPARMOR_LOCALHOST_PREFIX + str(name),
        )
    raise SecurityContextError(f'unknown apparmor profile type: "{kind}"')


def _all_containers(pod: Pod) -> tuple[Container, ...]:
    return (*pod.spec.init_containers, *pod.spec.containers)


def _apparmor_required(pod: Pod) -> bool:
    """Whether any profile other than Unconfined is asked for, by field or annotation."""
    psc = pod.spec.security_context
    fields = [psc.app_armor_profile if psc is not None else None]
    fields += [
        c.security_context.app_armor_profile for c in _all_containers(pod) if c.security_context
    ]
    if any(f and f.get("type") != "Unconfined" for f in fields):
        return True
    return any(
        key.startswith(APPARMOR_ANNOTATION_PREFIX) and value != APPARMOR_UNCONFINED
        for key, value in pod.metadata.annotations.items()
    )


def apparmor_host_error(
    enabled_file: str = APPARMOR_ENABLED_FILE, securityfs: str = APPARMOR_SECURITYFS
) -> str | None:
    """Why this host cannot enforce AppArmor profiles, or None. Read once, at start (as
    upstream: enabling AppArmor needs a reboot, and then the kubelet restarts)."""
    try:
        with open(enabled_file) as fh:
            enabled = fh.read().startswith("Y")
    except OSError:
        enabled = False
    if not enabled or not os.path.isdir(securityfs):
        return "AppArmor is not enabled on the host"
    return None


def apparmor_admission_error(pod: Pod, host_error: str | None) -> str | None:
    """The admission message for a pod the node cannot confine as asked, else None.

    Only pods not yet running are checked (upstream: phase Pending), so a kubelet restart
    never rejects a running pod."""
    if pod.status.phase not in ("", "Pending") or not _apparmor_required(pod):
        return None
    if host_error is not None:
        return f"Cannot enforce AppArmor: {host_error}"
    for c in _all_containers(pod):
        profile = _apparmor_field(pod, c)
        if profile is not None and profile.get("type") == "Localhost":
            name = profile.get("localhostProfile")
            if name is None or not str(name).strip():
                return f"Cannot enforce AppArmor: invalid empty AppArmor profile name: {profile!r}"
    return None


# -- groups ---------------------------------------------------------------------------------


def supplemental_groups(pod: Pod) -> list[int]:
    """``fsGroup`` first, then ``supplementalGroups``, as upstream lists them."""
    sc = pod.spec.security_context
    if sc is None:
        return []
    groups = [sc.fs_group] if sc.fs_group is not None else []
    return groups + list(sc.supplemental_groups)


def supplemental_groups_policy(pod: Pod) -> api.SupplementalGroupsPolicy | None:
    """The CRI value of ``supplementalGroupsPolicy``, None when the pod leaves it unset."""
    sc = pod.spec.security_context
    if sc is None or sc.supplemental_groups_policy is None:
        return None
    value = _POLICIES.get(sc.supplemental_groups_policy)
    if value is None:
        raise SecurityContextError(
            f"unsupported supplementalGroupsPolicy: {sc.supplemental_groups_policy}"
        )
    return value


# -- the CRI message ------------------------------------------------------------------------


def _selinux(options: Mapping[str, Any] | None) -> api.SELinuxOption | None:
    if not options:
        return None
    return api.SELinuxOption(
        user=str(options.get("user", "")),
        role=str(options.get("role", "")),
        type=str(options.get("type", "")),
        level=str(options.get("level", "")),
    )


def container_security_context(
    pod: Pod,
    container: Container,
    *,
    namespaces: api.NamespaceOption,
    seccomp_root: str,
    seccomp_default: bool = False,
) -> api.LinuxContainerSecurityContext:
    """The CRI ``LinuxContainerSecurityContext``; ``SecurityContextError`` when a field
    asks for something the kubelet cannot express."""
    sc = effective_security(pod, container)
    out = api.LinuxContainerSecurityContext(
        privileged=sc.privileged,
        readonly_rootfs=sc.read_only_root_filesystem,
        supplemental_groups=supplemental_groups(pod),
        no_new_privs=sc.no_new_privs,
    )
    out.namespace_options.CopyFrom(namespaces)
    policy = supplemental_groups_policy(pod)
    if policy is not None:
        out.supplemental_groups_policy = policy
    if sc.capabilities is not None:
        out.capabilities.CopyFrom(
            api.Capability(
                add_capabilities=list(sc.capabilities.add),
                drop_capabilities=list(sc.capabilities.drop),
            )
        )
    if sc.run_as_user is not None:
        out.run_as_user.value = sc.run_as_user
    if sc.run_as_group is not None:
        out.run_as_group.value = sc.run_as_group
    selinux = _selinux(sc.se_linux_options)
    if selinux is not None:
        out.selinux_options.CopyFrom(selinux)
    if sc.proc_mount != "Unmasked":
        out.masked_paths.extend(DEFAULT_MASKED_PATHS)
        out.readonly_paths.extend(DEFAULT_READONLY_PATHS)
    out.seccomp.CopyFrom(
        seccomp_profile(pod, container, root=seccomp_root, seccomp_default=seccomp_default)
    )
    apparmor, deprecated = apparmor_profile(pod, container)
    if apparmor is not None:
        out.apparmor.CopyFrom(apparmor)
        out.apparmor_profile = deprecated
    return out


def sandbox_security_context(pod: Pod, sc: api.LinuxSandboxSecurityContext) -> None:
    """Fill the sandbox's security context from the pod's (user, group, groups, SELinux)."""
    sc.privileged = any(
        c.security_context is not None and bool(c.security_context.privileged)
        for c in _all_containers(pod)
    )
    sc.seccomp.CopyFrom(sandbox_seccomp())
    psc = pod.spec.security_context
    if psc is None:
        return
    if psc.run_as_user is not None:
        sc.run_as_user.value = psc.run_as_user
    if psc.run_as_group is not None:
        sc.run_as_group.value = psc.run_as_group
    sc.supplemental_groups.extend(supplemental_groups(pod))
    policy = supplemental_groups_policy(pod)
    if policy is not None:
        sc.supplemental_groups_policy = policy
    selinux = _selinux(psc.se_linux_options)
    if selinux is not None:
        sc.selinux_options.CopyFrom(selinux)
