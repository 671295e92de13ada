"""The cgroup settings (driver, reserved, swap), as the command line and file resolve them."""

from __future__ import annotations

import pytest

from kubelet.config import ConfigError, resolve

BASE = ["--container-runtime-endpoint", "unix:///nowhere.sock"]


def test_system_cgroups_needs_cgroup_root_as_written() -> None:
    """Upstream checks before cgroupRoot defaults to "/"."""
    with pytest.raises(ConfigError) as caught:
        resolve([*BASE, "--system-cgroups=/system"])
    assert "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was" in (
        str(caught.value)
    )
    options = resolve([*BASE, "--system-cgroups=/system", "--cgroup-root=/"])
    assert options.config.system_cgroups == "/system"


def test_system_cgroups_cannot_be_the_root() -> None:
    with pytest.raises(ConfigError, match=r'system container cannot be root \("/"\)'):
        resolve([*BASE, "--system-cgroups=/", "--cgroup-root=/"])


def test_kubelet_cgroups_from_the_command_line() -> None:
    options = resolve([*BASE, "--kubelet-cgroups=/kubelet.slice"])
    assert options.config.kubelet_cgroups == "/kubelet.slice"
    assert not any("kubeletCgroups" in warning for warning in options.warnings)


def test_runtime_cgroups_is_accepted_and_honoured() -> None:
    """Upstream's flag-only ``--runtime-cgroups`` (no config field): the summary's
    ``runtime`` system container."""
    options = resolve([*BASE, "--runtime-cgroups=/system.slice/containerd.service"])
    assert options.runtime_cgroups == "/system.slice/containerd.service"
    assert not any("runtime-cgroups" in warning for warning in options.warnings)
