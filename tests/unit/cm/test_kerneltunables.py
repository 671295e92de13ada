"""``protectKernelDefaults``: the kernel tunables checked (true) or set (false), on a
temporary /proc/sys."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kubelet.cm import kerneltunables
from kubelet.cm.kerneltunables import (
    KernelTunablesError,
    in_user_namespace,
    setup_kernel_tunables,
)
from kubelet.testing.fakeproc import fake_proc_sys


def _values(root: Path) -> dict[str, str]:
    return {name: (root / name).read_text().strip() for name, _ in kerneltunables.TUNABLES}


def test_protected_start_up_stops_naming_each_tunable_that_differs(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path, vm_overcommit_memory=0, kernel_panic=0)
    before = _values(root)
    with pytest.raises(KernelTunablesError) as stopped:
        setup_kernel_tunables(str(root), protect=True)
    assert str(stopped.value) == (
        "[invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, "
        "invalid kernel flag: kernel/panic, expected value: 10, actual value: 0]"
    )
    assert _values(root) == before  # nothing changed on the host


def test_one_difference_is_the_message_alone(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path, kernel_keys_root_maxkeys=200)
    with pytest.raises(KernelTunablesError, match=r"^invalid kernel flag: kernel/keys/root_m"):
        setup_kernel_tunables(str(root), protect=True)


def test_unprotected_start_up_sets_them_and_logs_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    root = fake_proc_sys(tmp_path, vm_panic_on_oom=1, kernel_panic_on_oops=0)
    setup_kernel_tunables(str(root), protect=False)
    assert _values(root) == {name: str(value) for name, value in kerneltunables.TUNABLES}
    changes = [r.getMessage() for r in caplog.records if "Updating kernel flag" in r.getMessage()]
    assert changes == [
        "\"Updating kernel flag\" flag='vm/panic_on_oom' expectedValue=0 actualValue=1",
        "\"Updating kernel flag\" flag='kernel/panic_on_oops' expectedValue=1 actualValue=0",
    ]


def test_values_already_right_pass_either_way(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path)
    setup_kernel_tunables(str(root), protect=True)
    setup_kernel_tunables(str(root), protect=False)


def test_a_tunable_that_cannot_be_read_stops_start_up(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path)
    (root / "kernel/panic").unlink()
    with pytest.raises(KernelTunablesError, match="kernel/panic"):
        setup_kernel_tunables(str(root), protect=False)


def test_a_refused_write_stops_start_up_unless_in_a_user_namespace_with_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(proc_sys: str, name: str, value: int) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(kerneltunables, "_write", refuse)
    root = fake_proc_sys(tmp_path, kernel_panic=0)
    with pytest.raises(KernelTunablesError, match="Read-only file system"):
        setup_kernel_tunables(str(root), protect=False)
    setup_kernel_tunables(str(root), protect=False, ignore_write_errors=True)


def test_user_namespace_is_told_by_the_uid_map(tmp_path: Path) -> None:
    host, inner = tmp_path / "host", tmp_path / "inner"
    host.write_text("         0          0 4294967295\n")
    inner.write_text("         0     100000      65536\n")
    assert not in_user_namespace(str(host))
    assert in_user_namespace(str(inner))
