"""Container lifecycle hooks: postStart right after a start, preStop before a stop.

A handler is an exec (CRI ExecSync, no timeout of its own), an HTTP GET (the probes'
request builder and client, User-Agent ``kube-lifecycle/<major>.<minor>``; only a
transport failure fails it, any status code is fine, as upstream), or a sleep. Each
runner returns upstream's failure message, or None when the hook succeeded.

The caller decides what a failure means: a failed postStart kills the container
(``PostStartHookError``, event ``FailedPostStartHook`` "PostStartHook failed" — the
message stays out of events so secrets do not leak); a failed preStop is only an
event (``FailedPreStopHook`` "PreStopHook failed"). ``run_pre_stop`` is bounded by the
grace period it is given; the caller measures the time it took and passes what is
left to StopContainer (``grace.stop_container_timeout``). Cancellation from outside
(a shorter grace, a kubelet shutdown) ends a hook at once, sleep included.
"""

from __future__ import annotations

import logging

import trio

from kubelet.api import Container, LifecycleHandler, Pod, format_pod
from kubelet.cri import CriError
from kubelet.goformat import go_quote
from kubelet.handlers import (
    HTTP_RESPONSE_TO_HTTPS_CLIENT,
    CommandExited,
    CommandTimedOut,
    ExecRunner,
    HttpGetError,
    HttpGetter,
    ProbeError,
    build_request,
    cri_error_text,
    run_in_container,
)

__all__ = [
    "EVENT_FAILED_POST_START_HOOK",
    "EVENT_FAILED_PRE_STOP_HOOK",
    "POST_START_HOOK_ERROR",
    "run_handler",
    "run_post_start",
    "run_pre_stop",
]

log = logging.getLogger(__name__)

POST_START_HOOK_ERROR = "PostStartHookError"
"""The waiting reason of a container whose postStart hook failed."""
EVENT_FAILED_POST_START_HOOK = "FailedPostStartHook"
EVENT_FAILED_PRE_STOP_HOOK = "FailedPreStopHook"


async def run_post_start(
    runtime: ExecRunner,
    pod: Pod,
    container: Container,
    container_id: str,
    *,
    pod_ip: str,
    http: HttpGetter | None = None,
) -> str | None:
    """Run the container's postStart hook, if any; its failure message or None."""
    handler = container.lifecycle.post_start if container.lifecycle else None
    if handler is None:
        return None
    return await run_handler(
        handler, runtime, pod, container, container_id, pod_ip=pod_ip, http=http
    )


async def run_pre_stop(
    runtime: ExecRunner,
    pod: Pod,
    container: Container,
    container_id: str,
    grace: float,
    *,
    pod_ip: str,
    http: HttpGetter | None = None,
) -> str | None:
    """Run the container's preStop hook for at most ``grace`` seconds.

    Nothing runs without a hook or without time (``grace <= 0``). A hook still running
    when the grace period ends is abandoned (upstream leaves it running in the
    background; here it is cancelled) and, as upstream, that is not a failure.
    """
    handler = container.lifecycle.pre_stop if container.lifecycle else None
    if handler is None or grace <= 0:
        return None
    with trio.move_on_after(grace):
        return await run_handler(
            handler, runtime, pod, container, container_id, pod_ip=pod_ip, http=http
        )
    log.info(
        "PreStop hook of container %s in pod %s not completed in grace period (%gs)",
        container.name,
        pod.key,
        grace,
    )
    return None


async def run_handler(
    handler: LifecycleHandler,
    runtime: ExecRunner,
    pod: Pod,
    container: Container,
    container_id: str,
    *,
    pod_ip: str,
    http: HttpGetter | None = None,
) -> str | None:
    """One lifecycle handler (``handlerRunner.Run``); its failure message or None."""
    where = f"for Container {go_quote(container.name)} in Pod {go_quote(format_pod(pod))}"
    if handler.exec is not None:
        cmd = list(handler.exec.command)
        error, output = await _run_exec(runtime, container_id, cmd)
        if error is None:
            return None
        return (
            f"Exec lifecycle hook ([{' '.join(cmd)}]) {where} failed - error: {error}, "
            f"message: {go_quote(output)}"
        )
    if handler.http_get is not None:
        error = await _run_http(handler, container, pod_ip, http)
        if error is None:
            return None
        return f"HTTP lifecycle hook ({handler.http_get.path}) {where} failed - error: {error}"
    if handler.sleep is not None:
        await trio.sleep(max(handler.sleep.seconds, 0))
        return None
    what = "tcpSocket is not supported" if handler.tcp_socket is not None else "no action set"
    return f"Cannot run handler: invalid handler: {what}"


async def _run_exec(
    runtime: ExecRunner, container_id: str, cmd: list[str]
) -> tuple[str | None, str]:
    try:
        await run_in_container(runtime, container_id, cmd, 0)
    except CommandExited as exc:
        return str(exc), exc.output.decode("utf-8", "replace")
    except CommandTimedOut as exc:
        return str(exc), ""
    except CriError as exc:
        return cri_error_text(exc), ""
    return None, ""


async def _run_http(
    handler: LifecycleHandler, container: Container, pod_ip: str, http: HttpGetter | None
) -> str | None:
    """The GET; None when any response came back. An HTTPS hook answered in plain HTTP
    is retried over HTTP without the Authorization header (upstream's fallback)."""
    assert handler.http_get is not None
    if not handler.http_get.host and not pod_ip:
        return "failed to find networking container: the pod has no IP"
    try:
        request = build_request(handler.http_get, container, pod_ip, "lifecycle")
    except ProbeError as exc:
        return str(exc)
    getter = http if http is not None else HttpGetter()
    try:
        await getter.get(request, None)
    except HttpGetError as exc:
        if HTTP_RESPONSE_TO_HTTPS_CLIENT not in str(exc):
            return str(exc)
        plain = request.with_scheme("http").without_header("Authorization")
        try:
            await getter.get(plain, None)
        except HttpGetError:
            return str(exc)
        log.warning(
            "request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded",
            request.url,
        )
    return None
