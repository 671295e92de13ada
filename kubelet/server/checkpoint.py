"""``POST /checkpoint/{namespace}/{pod}/{container}``: CRI CheckpointContainer.

As upstream 1.36 (``ContainerCheckpoint``, beta, on by default): the pod must be one
this kubelet runs and the container one of its spec (regular, init or ephemeral), else
``404 pod does not exist`` / ``404 container <name> does not exist``. The last
``timeout`` query value is the seconds the runtime may take (not an integer: ``404
cannot parse value of timeout parameter``). The archive goes to ``<root-dir>/checkpoints/
checkpoint-<pod>_<namespace>-<container>-<RFC 3339 time>.tar`` and the answer is
``{"items":["<that path>"]}``. What goes wrong after that -- no running container, the
runtime's refusal (containerd before 2.0 lacks the call: ``Unimplemented``) -- is ``500
checkpointing of <namespace>/<pod>/<container> failed (<why>)``. Authorization is
``create`` on ``nodes/checkpoint`` (``auth.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re

from kubelet.api import Pod
from kubelet.cri import CriError, RuntimeClient
from kubelet.logs import get_logger
from kubelet.volumes import CHECKPOINTS_DIR

from .asgi import JSON, Request, Response, text
from .backend import KubeletBackend
from .containers import ContainerNotFound, grpc_error_text, running_container

log = get_logger(__name__)

PREFIX = "/checkpoint/"
_INT64 = re.compile(r"[+-]?[0-9]+")


def archive_path(root_dir: str, pod: Pod, container: str, now: dt.datetime | None = None) -> str:
    """Where the runtime writes the archive (Go's RFC 3339 local time, ``Z`` for UTC)."""
    stamp = (now or dt.datetime.now().astimezone()).isoformat(timespec="seconds")
    stamp = stamp.removesuffix("+00:00") + ("Z" if stamp.endswith("+00:00") else "")
    name = f"checkpoint-{pod.full_name}-{container}-{stamp}.tar"
    return os.path.join(root_dir, CHECKPOINTS_DIR, name)


def parse_timeout(values: list[str]) -> int | None:
    """The last value as Go's ``strconv.ParseInt(v, 10, 64)``; None when it is not one."""
    value = values[-1]
    if not _INT64.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def _has_container(pod: Pod, name: str) -> bool:
    spec = pod.spec
    every = (*spec.containers, *spec.init_containers, *spec.ephemeral_containers)
    return any(c.name == name for c in every)


async def checkpoint(backend: KubeletBackend, request: Request, root_dir: str) -> Response:
    """Answer one checkpoint request."""
    parts = request.path.removeprefix(PREFIX).split("/")
    if len(parts) != 3 or not all(parts):
        return text(404, "404 page not found")
    if request.method != "POST":
        return text(405, "405: Method Not Allowed")
    namespace, name, container = parts
    pod = backend.pod_by_name(namespace, name)
    if pod is None:
        return Response(404, b"pod does not exist")
    if not _has_container(pod, container):
        return Response(404, f"container {container} does not exist".encode())
    timeout = 0
    if request.query.get("timeout"):
        parsed = parse_timeout(request.query["timeout"])
        if parsed is None:
            return Response(404, b"cannot parse value of timeout parameter")
        timeout = parsed
    location = archive_path(root_dir, pod, container)
    try:
        await _checkpoint(backend.runtime, pod, container, location, timeout)
    except (CriError, ContainerNotFound, ValueError) as exc:
        why = grpc_error_text(exc) if isinstance(exc, CriError) else str(exc)
        message = f"checkpointing of {namespace}/{name}/{container} failed ({why})"
        log.info("checkpoint failed", pod=f"{namespace}/{name}", container=container, err=why)
        return Response(500, message.encode())
    log.info(
        "checkpointed container", pod=f"{namespace}/{name}", container=container, path=location
    )
    return Response(200, json.dumps({"items": [location]}, separators=(",", ":")).encode(), JSON)


async def _checkpoint(
    runtime: RuntimeClient, pod: Pod, container: str, location: str, timeout: int
) -> None:
    try:
        container_id = await running_container(runtime, pod, pod.uid, container)
    except ContainerNotFound:
        raise ContainerNotFound(f"container {container} not found") from None
    await runtime.checkpoint_container(container_id, location, timeout)
