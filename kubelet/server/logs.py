"""``GET /containerLogs/{namespace}/{pod}/{container}``: which log file, then stream it.

Answers as upstream: 400 ``{"message": "Missing podID."}`` (or container name, or
namespace) for an empty path segment, 400 ``{"message": "Unable to decode query."}``, 422
``{"message": "Invalid request."}``, 404 ``pod "web" does not exist`` / ``container "x"
not found in pod "web"``, 400 with the reason when the container has no log to show yet
(``... is waiting to start: ContainerCreating``), else 200 and the log.

Which instance: the newest one, unless it has not started, then the one before it;
``previous`` asks for the last terminated instance — the newest one while it waits to be
restarted, else the one before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubelet.api import Pod
from kubelet.boundedio import InputRefused, in_thread
from kubelet.cri import ContainerInfo, ContainerRunState, CriError, RuntimeClient, api
from kubelet.decisions import exited_instance_restarts
from kubelet.pleg import RuntimeView

from .asgi import Request, Response, StreamResponse, Write, text
from .backend import KubeletBackend
from .logopts import DecodeError, InvalidOptions, LogOptions, parse_log_options
from .logread import IsRunning, open_log, read_logs


class NoLogs(Exception):
    """The container exists in the spec but there is no log to show (400)."""


def _spec_names(pod: Pod) -> set[str]:
    names = {c.name for c in pod.spec.containers} | {c.name for c in pod.spec.init_containers}
    return names | {c.name for c in pod.spec.ephemeral_containers}


def choose_instance(
    pod: Pod, name: str, instances: list[ContainerInfo], previous: bool
) -> ContainerInfo:
    """The instance whose log to show (newest first in ``instances``); ``NoLogs`` if none."""
    pod_name = pod.metadata.name
    current = instances[0] if instances else None
    started = current is not None and current.state in (
        ContainerRunState.RUNNING,
        ContainerRunState.EXITED,
    )
    if previous:
        if (
            current is not None
            and current.state is ContainerRunState.EXITED
            and exited_instance_restarts(pod, name, current.exit_code)
        ):
            return current  # waiting to be restarted: the API shows it as lastState
        if len(instances) > 1:
            return instances[1]
        raise NoLogs(f"previous terminated container {name!r} in pod {pod_name!r} not found")
    if current is not None and started:
        return current
    if len(instances) > 1:
        return instances[1]
    raise NoLogs(f'container "{name}" in pod "{pod_name}" is waiting to start: ContainerCreating')


def _running_check(runtime: RuntimeClient, container_id: str) -> IsRunning:
    async def is_running() -> bool:
        try:
            status = (await runtime.container_status(container_id)).status
        except CriError:
            return False
        return status.state == api.CONTAINER_RUNNING

    return is_running


def _json_message(status: int, message: str) -> Response:
    return text(status, f'{{"message": "{message}"}}')


async def container_logs(
    backend: KubeletBackend,
    request: Request,
    namespace: str,
    pod_name: str,
    container: str,
    *,
    wall_clock: Callable[[], float] = time.time,
) -> Response | StreamResponse:
    if not pod_name:
        return _json_message(400, "Missing podID.")
    if not container:
        return _json_message(400, "Missing container name.")
    if not namespace:
        return _json_message(400, "Missing podNamespace.")
    try:
        options = parse_log_options(request.query)
    except DecodeError:
        return _json_message(400, "Unable to decode query.")
    except InvalidOptions:
        return _json_message(422, "Invalid request.")
    pod = backend.pod_by_name(namespace, pod_name)
    if pod is None:
        return text(404, f'pod "{pod_name}" does not exist')
    if container not in _spec_names(pod):
        return text(404, f'container "{container}" not found in pod "{pod_name}"')
    try:
        status = await RuntimeView(backend.runtime).pod_status(pod.uid)
        instance = choose_instance(
            pod, container, status.containers_named(container), options.previous
        )
    except (NoLogs, CriError) as exc:
        return text(400, str(exc))
    refusal = await _log_refusal(instance.log_path)
    if refusal is not None:
        return text(400, f'failed to open log file "{instance.log_path}": {refusal}')
    return _stream(backend.runtime, instance, options, wall_clock())


async def _log_refusal(path: str) -> str | None:
    """Why the log at ``path`` cannot be read (missing, not a regular file, a link), or
    None. Checked in a worker thread without blocking: the path may hold anything."""

    def probe() -> None:
        open_log(path).close()

    try:
        await in_thread(probe)
    except FileNotFoundError:
        return "no such file"
    except InputRefused as exc:
        return str(exc).removeprefix(f"{path}: ")
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _stream(
    runtime: RuntimeClient, instance: ContainerInfo, options: LogOptions, now: float
) -> Response | StreamResponse:
    running = _running_check(runtime, instance.id)
    since_ns = options.since_ns(now)  # before the 200 goes out: nothing to fail after it

    async def produce(write: Write) -> None:
        await read_logs(instance.log_path, options, write, running, since_ns=since_ns)

    return StreamResponse(200, produce)
