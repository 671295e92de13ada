"""``--lock-file`` / ``--exit-on-lock-contention``: two processes hand a lock over.

The first process takes the lock the kubelet's way (``kubelet.lockfile``) and waits for
contention as the kubelet does; the second, a plain process, opens the file to ask for the
lock and blocks in flock until the first has gone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubelet.config import ConfigError, resolve

HOLDER = """
import sys, trio
from kubelet import lockfile
lockfile.acquire(sys.argv[1])
fd = lockfile.watch(sys.argv[1])
print("locked", flush=True)
mask = trio.run(lockfile.wait_for_contention, fd)
print(f"contention {mask:#x}", flush=True)
"""

SUCCESSOR = """
import fcntl, sys
with open(sys.argv[1]) as f:
    fcntl.flock(f, fcntl.LOCK_EX | (fcntl.LOCK_NB if len(sys.argv) > 2 else 0))
    print("got the lock", flush=True)
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )


def test_a_successor_opening_the_lock_file_makes_the_holder_exit(tmp_path: Path) -> None:
    lock = tmp_path / "kubelet.lock"
    holder = spawn(HOLDER, str(lock))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        assert (lock.stat().st_mode & 0o777) == 0o600
        busy = spawn(SUCCESSOR, str(lock), "nonblocking")  # opening counts as asking
        assert busy.wait(timeout=30) != 0  # the lock was held
        assert holder.wait(timeout=30) == 0
        assert holder.stdout.read().startswith("contention 0x20")  # IN_OPEN
        successor = spawn(SUCCESSOR, str(lock))
        out, err = successor.communicate(timeout=30)
        assert (successor.returncode, out) == (0, "got the lock\n"), err
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_waits_for_its_holder(tmp_path: Path) -> None:
    lock = tmp_path / "kubelet.lock"
    lock.touch()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys\nf = open(sys.argv[1])\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n",
         str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        waiter = spawn(
            "import sys\nfrom kubelet import lockfile\nlockfile.acquire(sys.argv[1])\n"
            "print('acquired', flush=True)\n",
            str(lock),
        )
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(timeout=1)  # still waiting for the holder
        assert holder.stdin is not None
        holder.stdin.close()  # the holder exits, and its lock goes with it
        out, err = waiter.communicate(timeout=30)
        assert out == "acquired\n", err
    finally:
        holder.kill()
        holder.wait()


def test_exit_on_contention_needs_a_lock_file() -> None:
    with pytest.raises(ConfigError) as exc:
        resolve(["--exit-on-lock-contention"], hostname=lambda: "n")
    assert str(exc.value) == (
        "--exit-on-lock-contention: cannot exit on lock file contention: no lock file specified"
    )
    options = resolve(
        ["--lock-file=/run/k.lock", "--exit-on-lock-contention"], hostname=lambda: "n"
    )
    assert (options.lock_file, options.exit_on_lock_contention) == ("/run/k.lock", True)
