"""A /proc tree in a temporary directory, for what the kubelet reads of processes and of
the machine: ``/proc/<pid>/{cgroup,exe,ns/pid,oom_score_adj}`` and ``/proc/swaps``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SWAPS_HEADER", "add_proc", "fake_proc"]

SWAPS_HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
"""What ``/proc/swaps`` holds with no swap on."""


def fake_proc(root: Path, *, swaps: str = SWAPS_HEADER) -> Path:
    """An empty /proc with PID 1 (in the host PID namespace) and ``swaps``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "swaps").write_text(swaps)
    add_proc(root, 1, "0::/\n")
    return root


def add_proc(
    root: Path, pid: int, cgroup: str, *, kernel: bool = False, namespace: str = "pid:[4026531836]"
) -> None:
    """Process ``pid``: its ``cgroup`` file, an ``exe`` link unless it is a kernel thread,
    its PID namespace link (``namespace``; PID 1's is the host's) and its
    ``oom_score_adj`` (0, as a new process inherits it from most shells)."""
    where = root / str(pid)
    (where / "ns").mkdir(parents=True, exist_ok=True)
    (where / "cgroup").write_text(cgroup)
    (where / "oom_score_adj").write_text("0\n")
    for link in (where / "exe", where / "ns" / "pid"):
        link.unlink(missing_ok=True)
    if not kernel:
        (where / "exe").symlink_to("/usr/bin/true")
    (where / "ns" / "pid").symlink_to(namespace)


def fake_proc_sys(root: Path, **values: int) -> Path:
    """A /proc/sys holding the kernel tunables the kubelet checks, at the kubelet's values
    but those given as ``values`` (``kernel_panic=0`` for ``kernel/panic``)."""
    from kubelet.cm import KERNEL_TUNABLES

    for name, value in KERNEL_TUNABLES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{values.get(name.replace('/', '_'), value)}\n")
    return root
