"""The directories and files the kubelet creates, with upstream's modes.

Upstream's kubelet keeps its state under ``--root-dir`` in directories only root may
enter (0750): the secrets, tokens and configMaps of every pod live below them, in
files readable by any container user (0644 by default). So the directories are what
keeps a local user of the node out, and they are tightened here when they already
exist with more permissive modes (a kubelet upgraded in place, a directory made by
hand or by an older kubelet).

=========================================  ======  ================================
path                                       mode    upstream
=========================================  ======  ================================
<root-dir>                                 0750    setupDataDirs
<root-dir>/pods, plugins, plugins_registry 0750    setupDataDirs
<root-dir>/pod-resources                   0750    setupDataDirs
<root-dir>/checkpoints                     0700    setupDataDirs (ContainerCheckpoint)
--pod-logs-dir (/var/log/pods)             0750    setupDataDirs
pods/<uid>, pods/<uid>/volumes, plugins    0750    makePodDataDirs
pods/<uid>/containers/<name>               0750    GenerateRunContainerOptions
  termination-message file                 0666    kuberuntime (any container user)
pods/<uid>/etc-hosts                       0644    ensureHostsFile
pods/<uid>/volume-subpaths/...             0750    subpath bind targets (files 0640)
emptyDir, configMap, downwardAPI volume    0777    emptyDir setupDir (exact)
tmpfs volumes (secret, projected, Memory)  1777    tmpfs default: no mode option
<pod log dir>, <pod log dir>/<container>   0755    createPodSandbox, generateContainerConfig
<cert-dir> (pki)                           0755    certutil (key 0600, cert 0644)
=========================================  ======  ================================
"""

from __future__ import annotations

import os
import stat

from .paths import pod_dir, pods_dir

ROOT_DIR_MODE = 0o750
DATA_DIR_MODE = 0o750
CHECKPOINTS_DIR_MODE = 0o700
POD_LOGS_ROOT_MODE = 0o750
POD_DIR_MODE = 0o750
CONTAINER_DIR_MODE = 0o750
SUBPATH_DIR_MODE = 0o750
SUBPATH_FILE_MODE = 0o640
LOG_DIR_MODE = 0o755
VOLUME_DIR_MODE = 0o777
CERT_DIR_MODE = 0o755

PLUGINS_DIR = "plugins"
PLUGINS_REGISTRY_DIR = "plugins_registry"
POD_RESOURCES_DIR = "pod-resources"
CHECKPOINTS_DIR = "checkpoints"


class DataDirError(OSError):
    """A directory of the kubelet cannot be made; start-up stops with this message."""


def ensure_dir(path: str, mode: int) -> None:
    """Make ``path`` (and missing parents) a directory whose mode is at most ``mode``.

    A new directory gets exactly ``mode`` whatever the umask; an existing one loses the
    bits ``mode`` does not have and keeps being stricter where it already is.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        mkdir_all(path, mode)
        os.chmod(path, mode)
        return
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"{path} is not a directory")
    current = stat.S_IMODE(info.st_mode)
    if current & ~mode:
        os.chmod(path, current & mode)


def mkdir_all(path: str, mode: int) -> None:
    """Go's ``os.MkdirAll``: every missing component is made with ``mode`` (less the
    umask), not only the last one as ``os.makedirs`` does."""
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path and not os.path.isdir(parent):
        mkdir_all(parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} is not a directory") from None


def ensure_exact_dir(path: str, mode: int) -> None:
    """Make ``path`` a directory with exactly ``mode`` (a volume every container user
    must be able to write, as upstream's emptyDir)."""
    os.makedirs(path, mode=mode, exist_ok=True)
    if stat.S_IMODE(os.stat(path).st_mode) != mode:
        os.chmod(path, mode)


def data_dirs(root_dir: str, pod_logs_dir: str) -> list[tuple[str, int]]:
    """Upstream's setupDataDirs, in creation order."""
    return [
        (root_dir, ROOT_DIR_MODE),
        (pod_logs_dir, POD_LOGS_ROOT_MODE),
        (pods_dir(root_dir), DATA_DIR_MODE),
        (os.path.join(root_dir, PLUGINS_DIR), DATA_DIR_MODE),
        (os.path.join(root_dir, PLUGINS_REGISTRY_DIR), DATA_DIR_MODE),
        (os.path.join(root_dir, POD_RESOURCES_DIR), DATA_DIR_MODE),
        (os.path.join(root_dir, CHECKPOINTS_DIR), CHECKPOINTS_DIR_MODE),
    ]


def setup_data_dirs(root_dir: str, pod_logs_dir: str, containers_log_dir: str = "") -> None:
    """Create (or tighten) the kubelet's directories; raises DataDirError naming one.
    ``containers_log_dir`` (the legacy log symlinks') is only made when missing, 0755, as
    upstream makes it at start."""
    if os.path.normpath(root_dir) != root_dir:
        raise DataDirError(
            f"rootDirectory not in canonical form: expected {os.path.normpath(root_dir)}, "
            f"was {root_dir}"
        )
    for path, mode in data_dirs(root_dir, pod_logs_dir):
        try:
            ensure_dir(path, mode)
        except OSError as exc:
            raise DataDirError(f"error creating directory {path}: {exc}") from exc
    if containers_log_dir:
        try:
            os.makedirs(containers_log_dir, 0o755, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"Failed to create directory {containers_log_dir}: {exc}") from exc


def pod_data_dirs(root_dir: str, uid: str) -> list[str]:
    """Upstream's makePodDataDirs: the pod directory, its volumes and plugins."""
    base = pod_dir(root_dir, uid)
    return [base, os.path.join(base, "volumes"), os.path.join(base, PLUGINS_DIR)]


def make_pod_data_dirs(root_dir: str, uid: str, *, with_volumes: bool = True) -> None:
    """The pod's directories (0750; existing ones tightened). ``volumes`` and
    ``plugins`` only when the pod has volumes or they exist: a mkdir costs about 0.4 ms
    on an ext4 root, and most pods of a node need neither."""
    base, *rest = pod_data_dirs(root_dir, uid)
    ensure_dir(base, POD_DIR_MODE)
    for path in rest:
        if with_volumes or os.path.isdir(path):
            ensure_dir(path, POD_DIR_MODE)


def make_log_dir(path: str) -> None:
    """A pod's (or a container's) log directory, 0755 as upstream's kuberuntime."""
    mkdir_all(path, LOG_DIR_MODE)
