"""The ``/var/log/containers`` symlinks log shippers tail.

fluentd, fluent-bit, promtail and vector read
``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``: upstream's kubelet links
each started container's log file there and unlinks it when it removes the container.
Failures are logged, never fatal: a missing link costs a log shipper its input, not the
container its start. Container GC sweeps links whose target is gone (``gc.logs``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from kubelet.cri import labels
from kubelet.gc import legacy_log_symlink

__all__ = ["link_container_log", "unlink_container_log"]

log = logging.getLogger(__name__)


def link_container_log(
    directory: str,
    container_id: str,
    container_name: str,
    pod_name: str,
    namespace: str,
    log_path: str,
) -> None:
    """Link ``log_path`` into ``directory`` (no-op without a directory). A log file that
    does not exist gets no link: it would only dangle until container GC removed it."""
    if not directory:
        return
    path = legacy_log_symlink(directory, container_id, container_name, pod_name, namespace)
    try:
        os.stat(log_path)
    except FileNotFoundError:
        return
    except OSError:
        pass  # as upstream: only a missing file skips the link
    try:
        os.symlink(log_path, path)
    except OSError as exc:
        log.error(
            "Failed to create legacy symbolic link %s to container %s log %s: %s",
            path,
            container_id,
            log_path,
            exc,
        )


def unlink_container_log(
    directory: str,
    container_id: str,
    container_labels: Mapping[str, str],
    *,
    container_name: str = "",
    pod_name: str = "",
    namespace: str = "",
) -> None:
    """Remove a removed container's link. Names come from the container's labels (what
    the runtime recorded at creation), else the given ones; already gone is fine."""
    if not directory:
        return
    path = legacy_log_symlink(
        directory,
        container_id,
        container_labels.get(labels.CONTAINER_NAME, container_name),
        container_labels.get(labels.POD_NAME, pod_name),
        container_labels.get(labels.POD_NAMESPACE, namespace),
    )
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.error(
            "failed to remove container %s log legacy symbolic link %s: %s",
            container_id,
            path,
            exc,
        )
