"""The host's cgroup version against the settings that depend on it, as upstream 1.36.

- ``failCgroupV1`` (true by default) refuses to start on a cgroup v1 host, with
  upstream's message; false lets the kubelet run there, with upstream's Warning event on
  the Node (``CgroupV1``) saying v1 is in maintenance mode.
- ``singleProcessOOMKill`` set explicitly false is refused on v1 (the kernel kills one
  process there, whatever is asked). Its effective value: true on v1; on v2 the setting,
  false when unset, so every container's cgroup is OOM-killed as a whole
  (``memory.oom.group=1`` in the CRI ``unified`` map, ``decisions/limits.py``).
- A host whose hierarchies could not be read counts as v1, as upstream's check (a
  statfs of /sys/fs/cgroup that assumes v1 when it fails) does.
"""

from __future__ import annotations

import attrs

from kubelet.errors import ConfigError, Problem

__all__ = [
    "CGROUP_V1",
    "CGROUP_V1_MAINTENANCE",
    "CGROUP_V1_REFUSED",
    "SINGLE_PROCESS_OOM_KILL_ON_V1",
    "CgroupVersionFacts",
    "check_cgroup_version",
]

CGROUP_V1_REFUSED = (
    "kubelet is configured to not run on a host using cgroup v1. "
    "cgroup v1 support is in maintenance mode"
)
SINGLE_PROCESS_OOM_KILL_ON_V1 = (
    "invalid configuration: singleProcessOOMKill must not be explicitly set to false "
    "when using cgroup v1"
)
CGROUP_V1 = "CgroupV1"
"""The reason of the Node's Warning event on a v1 host."""
CGROUP_V1_MAINTENANCE = "cgroup v1 support is in maintenance mode, please migrate to cgroup v2"


@attrs.frozen
class CgroupVersionFacts:
    """What the containers' settings need from the version check."""

    version: int = 2
    group_oom_kill: bool = False
    """containers get ``memory.oom.group=1`` (v2, ``singleProcessOOMKill`` not true)"""


def check_cgroup_version(
    version: int | None, *, fail_cgroup_v1: bool, single_process_oom_kill: bool | None
) -> CgroupVersionFacts:
    """The facts for ``version`` (None: unknown, taken as v1); ``ConfigError`` naming the
    field when the kubelet must not start on this host."""
    effective = version if version == 2 else 1
    if effective == 1:
        if fail_cgroup_v1:
            raise ConfigError(Problem("", "failCgroupV1", CGROUP_V1_REFUSED))
        if single_process_oom_kill is False:
            raise ConfigError(Problem("", "singleProcessOOMKill", SINGLE_PROCESS_OOM_KILL_ON_V1))
        return CgroupVersionFacts(version=1, group_oom_kill=False)
    return CgroupVersionFacts(version=2, group_oom_kill=not single_process_oom_kill)
