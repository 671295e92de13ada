"""``--lock-file`` / ``--exit-on-lock-contention``: two processes hand a lock over.

The first process takes the lock the kubelet's way (``kubelet.lockfile``) and waits for
contention as the kubelet does; the second, a plain process, opens the file to ask for the
lock and blocks in flock until the first has gone. Then the same with a real kubelet
process (``python -m kubelet``, standalone on FakeRuntime served in this test's process,
real clock): it exits 0 on contention, its pod left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from kubelet.config import ConfigError, resolve
from kubelet.cri import api
from kubelet.testing import BUSYBOX_IMAGE, FakeRuntime

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


MANIFEST = f"""\
apiVersion: v1
kind: Pod
metadata:
  name: held
spec:
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
"""


def kubelet_argv(fake: FakeRuntime, tmp: Path, lock: Path) -> list[str]:
    """A standalone kubelet on ``fake`` holding ``lock``; no pod cgroups (as root it would
    otherwise sweep the host's kubepods), no server, no ports."""
    config = tmp / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        f"podLogsDir: {tmp / 'pod-logs'}\n"
    )
    return [
        sys.executable, "-m", "kubelet",
        "--lock-file", str(lock), "--exit-on-lock-contention",
        "--pod-manifest-path", str(tmp / "manifests"), "--file-check-frequency", "1s",
        "--hostname-override", "locktest", "--root-dir", str(tmp / "root"),
        "--container-runtime-endpoint", fake.endpoint, "--config", str(config),
        "--enable-server=false", "--healthz-port=0", "--read-only-port=0",
        "--cgroups-per-qos=false", "--enforce-node-allocatable=none",
        "--fail-cgroupv1=false",  # this machine is cgroup v1 (hybrid)
    ]  # fmt: skip


def running(fake: FakeRuntime) -> list[str]:
    return [c.id for c in fake.containers.values() if c.state == api.CONTAINER_RUNNING]


async def test_the_kubelet_exits_on_lock_contention_leaving_its_pods(
    fake: FakeRuntime, short_tmp: Path
) -> None:
    """agent.main's watch: a successor opening the lock file makes the kubelet exit 0;
    no stop or remove reaches the runtime, and the successor then gets the lock."""
    lock = short_tmp / "kubelet.lock"
    (short_tmp / "manifests").mkdir()
    (short_tmp / "manifests" / "held.yaml").write_text(MANIFEST)
    log = short_tmp / "kubelet.log"
    with log.open("wb") as err:
        proc = await trio.lowlevel.open_process(
            kubelet_argv(fake, short_tmp, lock),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "KUBELET_CONTAINERS_LOG_DIR": str(short_tmp / "containers")},
        )
    successor: subprocess.Popen[str] | None = None
    try:
        with trio.fail_after(30):
            while not running(fake):
                assert proc.poll() is None, log.read_text(errors="replace")
                await trio.sleep(0.05)
        (container,) = running(fake)
        successor = spawn(SUCCESSOR, str(lock))  # blocks in flock until the kubelet goes
        with trio.fail_after(30):
            code = await proc.wait()
        text = log.read_text(errors="replace")
        assert code == 0, text[-3000:]
        assert "lock file contention" in text
        out, err_text = successor.communicate(timeout=30)
        assert (successor.returncode, out) == (0, "got the lock\n"), err_text
        assert running(fake) == [container]
        assert [s.state for s in fake.sandboxes.values()] == [api.SANDBOX_READY]
        stops = {"StopContainer", "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"}
        assert not [c.rpc for c in fake.calls if c.rpc in stops]
    finally:
        with trio.CancelScope(shield=True):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()
            if successor is not None and successor.poll() is None:
                successor.kill()
                successor.wait()
