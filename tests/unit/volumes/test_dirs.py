"""The kubelet's directories get upstream's modes, new or (upgraded in place) existing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubelet.cri import create_message_file
from kubelet.volumes import DataDirError, make_log_dir, setup_data_dirs
from kubelet.volumes.dirs import data_dirs, ensure_dir, make_pod_data_dirs, mkdir_all


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_mode_table_is_upstreams(tmp_path: Path) -> None:
    root, logs = str(tmp_path / "kubelet"), str(tmp_path / "log" / "pods")
    assert [(os.path.relpath(p, tmp_path), oct(m)) for p, m in data_dirs(root, logs)] == [
        ("kubelet", "0o750"),
        ("log/pods", "0o750"),
        ("kubelet/pods", "0o750"),
        ("kubelet/plugins", "0o750"),
        ("kubelet/plugins_registry", "0o750"),
        ("kubelet/pod-resources", "0o750"),
        ("kubelet/checkpoints", "0o700"),
    ]


def test_fresh_directories_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        setup_data_dirs(str(tmp_path / "kubelet"), str(tmp_path / "log" / "pods"))
        make_pod_data_dirs(str(tmp_path / "kubelet"), "uid-1")
    finally:
        os.umask(old)
    root = tmp_path / "kubelet"
    assert mode(root) == 0o750
    assert mode(root / "pods") == 0o750
    assert mode(root / "plugins") == 0o750
    assert mode(root / "checkpoints") == 0o700
    assert mode(tmp_path / "log" / "pods") == 0o750
    for path in (root / "pods" / "uid-1", root / "pods" / "uid-1" / "volumes"):
        assert mode(path) == 0o750
    assert mode(root / "pods" / "uid-1" / "plugins") == 0o750


def test_upgrade_in_place_tightens_existing_directories(tmp_path: Path) -> None:
    """What an older kubelet (or `mkdir -p`) left: 0755 and 0777 directories."""
    root = tmp_path / "kubelet"
    (root / "pods" / "uid-1" / "volumes").mkdir(parents=True)
    (root / "checkpoints").mkdir()
    logs = tmp_path / "pods-logs"
    logs.mkdir()
    for path in (root, root / "pods", root / "pods" / "uid-1", logs):
        os.chmod(path, 0o755)
    os.chmod(root / "pods" / "uid-1" / "volumes", 0o777)
    os.chmod(root / "checkpoints", 0o755)
    setup_data_dirs(str(root), str(logs))
    make_pod_data_dirs(str(root), "uid-1")
    assert mode(root) == 0o750
    assert mode(root / "pods") == 0o750
    assert mode(logs) == 0o750
    assert mode(root / "checkpoints") == 0o700
    assert mode(root / "pods" / "uid-1") == 0o750
    assert mode(root / "pods" / "uid-1" / "volumes") == 0o750


def test_stricter_existing_modes_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "kubelet"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o700)
    setup_data_dirs(str(root), str(tmp_path / "logs"))
    assert mode(root) == 0o700


def readable_by_nobody(path: Path) -> bool:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            path.read_text()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def test_a_local_user_cannot_reach_a_pod_file(short_tmp: Path) -> None:
    """The defect: a secret file 0644 under 0755 directories was readable by anyone."""
    os.chmod(short_tmp, 0o755)  # mkdtemp's 0700 would hide everything anyway

    def plant(root: Path) -> Path:
        secret = root / "pods" / "uid-1" / "volumes" / "kubernetes.io~secret" / "s" / "pw"
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text("s3cr3t")
        os.chmod(secret, 0o644)
        return secret

    old = short_tmp / "old"  # as the kubelet made it before: the umask's 0755
    assert readable_by_nobody(plant(old))
    root = short_tmp / "kubelet"
    setup_data_dirs(str(root), str(short_tmp / "logs"))
    make_pod_data_dirs(str(root), "uid-1")
    assert not readable_by_nobody(plant(root))
    setup_data_dirs(str(old), str(short_tmp / "logs"))  # the upgrade in place
    make_pod_data_dirs(str(old), "uid-1")
    assert not readable_by_nobody(
        old / "pods" / "uid-1" / "volumes" / "kubernetes.io~secret" / "s" / "pw"
    )


def test_non_canonical_root_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataDirError, match="rootDirectory not in canonical form"):
        setup_data_dirs(str(tmp_path) + "/kubelet/", str(tmp_path / "logs"))


def test_a_file_in_the_way_is_reported(tmp_path: Path) -> None:
    (tmp_path / "kubelet").write_text("")
    with pytest.raises(DataDirError, match=r"error creating directory .*kubelet"):
        setup_data_dirs(str(tmp_path / "kubelet"), str(tmp_path / "logs"))


def test_mkdir_all_gives_every_new_level_the_mode(tmp_path: Path) -> None:
    mkdir_all(str(tmp_path / "a" / "b" / "c"), 0o750)
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o750
    ensure_dir(str(tmp_path / "a"), 0o700)
    assert mode(tmp_path / "a") == 0o700


def test_log_and_container_directories(tmp_path: Path) -> None:
    make_log_dir(str(tmp_path / "logs" / "ns_pod_uid" / "app"))
    assert mode(tmp_path / "logs" / "ns_pod_uid") == 0o755
    assert mode(tmp_path / "logs" / "ns_pod_uid" / "app") == 0o755
    message = Path(create_message_file(str(tmp_path), "uid-1", "app"))
    assert mode(message) == 0o666  # any container user writes its termination message
    assert mode(message.parent) == 0o750
    assert mode(message.parent.parent) == 0o750  # containers/ as well


def test_the_containers_log_directory_is_made_when_asked(tmp_path: Path) -> None:
    links = tmp_path / "var" / "log" / "containers"
    setup_data_dirs(str(tmp_path / "kubelet"), str(tmp_path / "logs"), str(links))
    assert links.is_dir()
    setup_data_dirs(str(tmp_path / "kubelet"), str(tmp_path / "logs"), str(links))  # again: fine
