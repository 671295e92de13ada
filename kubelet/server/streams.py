"""``/exec``, ``/attach``, ``/portForward`` and ``/run``: which container, then the runtime.

As upstream's server.go and kubelet_pods.go: the options come from the query (``input``,
``output``, ``error``, ``tty`` equal to ``1``; ``command`` repeated; ``port`` for a
WebSocket port-forward; ``cmd`` split on spaces for ``/run``), the pod from the pods this
node should run, the container from what the runtime runs. Then the CRI call
(``Exec``/``Attach``/``PortForward``) gives a one-time streaming URL, and the client's
upgrade is proxied to it (``streaming.proxy_upgrade``); ``/run`` calls ``ExecSync`` and
answers the output, and cancels the call when its client goes away (as Go cancels the
request's context).

Answers, as upstream: 400 with the options' fault (``you must specify at least 1 of stdin,
stdout, stderr``, ``query parameter "port" is required``...), 404 ``pod does not exist``,
404 ``pod not found`` (port-forward with another UID), 500 ``container not found
("app")`` when the runtime runs no such container of that pod (or of that UID), the CRI
error as the runtime's streaming ``WriteError`` maps it (NotFound 404, ResourceExhausted
429, else 500), and ``Upgrade request required`` (500) for a request that is not an
upgrade.

With ``ExtendWebSocketsToKubelet`` on (the default), an exec or attach WebSocket that
offers ``v5.channel.k8s.io`` is answered here and translated to SPDY for the runtime
(``wstranslate``), and kubectl's WebSocket port-forward tunnel (``SPDY/3.1+portforward.k8s.io``)
is unwrapped to SPDY for the runtime (``pftunnel``; no ``port`` needed then, as upstream), as
upstream's kubelet does; with it off both go to the runtime as they came (containerd 1.6
refuses them with 403 and kubectl falls back to SPDY).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import attrs
import trio

from kubelet.api import Pod
from kubelet.cri import CriError, api
from kubelet.logs import get_logger

from .asgi import Receive, Request, Response, Scope, http_error
from .backend import KubeletBackend
from .containers import ContainerNotFound, grpc_error_text, ready_sandbox, running_container
from .pftunnel import is_tunnel_request, proxy_tunnel
from .streaming import TAKEOVER, UpgradeRequest, is_upgrade_request, proxy_upgrade
from .wstranslate import is_v5_request, translate_remote_command

log = get_logger(__name__)

_T = TypeVar("_T")

STREAM_ROOTS = ("exec", "attach", "portForward", "run")

_GRPC_HTTP = {"NOT_FOUND": 404, "RESOURCE_EXHAUSTED": 429}


class OptionsError(ValueError):
    """The query does not make a valid request (400 with this message)."""


@attrs.frozen
class Target:
    """What a stream path names: ``/{root}/{ns}/{pod}[/{uid}][/{container}]``."""

    root: str
    namespace: str
    pod: str
    uid: str = ""
    container: str = ""


def parse_path(path: str) -> Target | None:
    """The target of a stream path; None when the path matches no route (404)."""
    parts = path.split("/")[1:]
    if not parts or parts[0] not in STREAM_ROOTS or any(p == "" for p in parts):
        return None
    root, rest = parts[0], parts[1:]
    if root == "portForward":
        if len(rest) == 2:
            return Target(root, rest[0], rest[1])
        if len(rest) == 3:
            return Target(root, rest[0], rest[1], uid=rest[2])
        return None
    if len(rest) == 3:
        return Target(root, rest[0], rest[1], container=rest[2])
    if len(rest) == 4:
        return Target(root, rest[0], rest[1], uid=rest[2], container=rest[3])
    return None


@attrs.frozen
class StreamOptions:
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def stream_options(request: Request) -> StreamOptions:
    """remotecommand's ``NewOptions``: flags are ``1`` or not set; stderr is off with a tty."""

    def flag(name: str) -> bool:
        return request.param(name) == "1"

    tty = flag("tty")
    options = StreamOptions(flag("input"), flag("output"), flag("error") and not tty, tty)
    if not (options.stdin or options.stdout or options.stderr):
        raise OptionsError("you must specify at least 1 of stdin, stdout, stderr")
    return options


def _go_parse_uint16(text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise OptionsError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text)
    if value > 0xFFFF:
        raise OptionsError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def is_websocket(request: UpgradeRequest) -> bool:
    """wsstream's ``IsWebSocketRequest``: ``Upgrade: websocket`` on an upgrade request."""
    upgrade = request.values(b"upgrade")
    return (
        bool(upgrade)
        and upgrade[0].strip().lower() == b"websocket"
        and (is_upgrade_request(request.headers))
    )


def port_forward_ports(request: Request, upgrade: UpgradeRequest) -> list[int]:
    """portforward's ``NewV4Options``: ports from the query, for WebSocket requests only."""
    if not is_websocket(upgrade):
        return []
    values = request.query.get("port", [])
    if not values:
        raise OptionsError('query parameter "port" is required')
    ports: list[int] = []
    for value in values:
        if not value:
            raise OptionsError('query parameter "port" cannot be empty')
        for item in value.split(","):
            try:
                port = _go_parse_uint16(item)
            except OptionsError as exc:
                raise OptionsError(f'unable to parse "{value}" as a port: {exc}') from None
            if port < 1:
                raise OptionsError(f'port "{value}" must be > 0')
            ports.append(port)
    return ports


def cri_error_response(exc: CriError) -> Response:
    """The runtime streaming library's ``WriteError``: the status from the gRPC code."""
    status = _GRPC_HTTP.get(exc.code.name, 500) if exc.code is not None else 500
    return Response(status, grpc_error_text(exc).encode())


@attrs.define
class StreamRoutes:
    """The four handlers; ``idle_timeout`` is ``streamingConnectionIdleTimeout``."""

    backend: KubeletBackend
    idle_timeout: float
    extend_websockets: bool = False
    """The ``ExtendWebSocketsToKubelet`` gate."""

    async def handle(self, request: Request, scope: Scope) -> Response | None:
        """The response, or None when the connection was taken over for a stream."""
        target = parse_path(request.path)
        if target is None:
            return http_error(404, "404 page not found")
        allowed = ("POST",) if target.root == "run" else ("GET", "POST")
        if request.method not in allowed:
            return Response(405, b"405: Method Not Allowed")
        upgrade = UpgradeRequest.from_scope(scope)
        tunnel = (
            self.extend_websockets and target.root == "portForward" and is_tunnel_request(upgrade)
        )
        try:
            if target.root == "run":
                return await self._run(request, target)
            url = await self._url(request, upgrade, target, tunnel)
        except OptionsError as exc:
            return Response(400, str(exc).encode())
        except _NoPod:
            return Response(404, b"pod does not exist")
        except _OtherUid:
            return Response(404, b"pod not found")
        except ContainerNotFound as exc:
            return Response(500, str(exc).encode())
        except CriError as exc:
            return cri_error_response(exc)
        takeover = (scope.get("extensions") or {}).get(TAKEOVER)
        if tunnel:
            return await proxy_tunnel(upgrade, takeover, url, idle_timeout=self.idle_timeout)
        if self.extend_websockets and target.root != "portForward" and is_v5_request(upgrade):
            options = stream_options(request)
            return await translate_remote_command(
                upgrade, takeover, url, options, idle_timeout=self.idle_timeout
            )
        return await proxy_upgrade(upgrade, takeover, url, idle_timeout=self.idle_timeout)

    def _pod(self, target: Target) -> Pod:
        pod = self.backend.pod_by_name(target.namespace, target.pod)
        if pod is None:
            raise _NoPod
        return pod

    async def _container(self, pod: Pod, target: Target) -> str:
        """The running container ``target`` names; a mirror pod's UID names its static
        pod (upstream's ``findContainer``). Port-forward does not translate: upstream
        compares the UID with the static pod's first (404 ``pod not found``)."""
        uid = self.backend.translate_pod_uid(target.uid) if target.uid else ""
        return await running_container(self.backend.runtime, pod, uid, target.container)

    async def _url(
        self, request: Request, upgrade: UpgradeRequest, target: Target, tunnel: bool = False
    ) -> str:
        runtime = self.backend.runtime
        if target.root == "portForward":
            ports = [] if tunnel else port_forward_ports(request, upgrade)
            pod = self._pod(target)
            if target.uid and target.uid != pod.uid:
                raise _OtherUid
            return await runtime.port_forward(await ready_sandbox(runtime, pod), ports)
        options = stream_options(request)
        pod = self._pod(target)
        cid = await self._container(pod, target)
        if target.root == "exec":
            return await runtime.exec(
                api.ExecRequest(
                    container_id=cid, cmd=request.query.get("command", []), tty=options.tty,
                    stdin=options.stdin, stdout=options.stdout, stderr=options.stderr,
                )
            )  # fmt: skip
        return await runtime.attach(
            api.AttachRequest(
                container_id=cid, tty=options.tty, stdin=options.stdin, stdout=options.stdout,
                stderr=options.stderr,
            )
        )  # fmt: skip

    async def _run(self, request: Request, target: Target) -> Response:
        """``/run``: ExecSync without a timeout; stdout then stderr, or the exit as a 500."""
        pod = self._pod(target)
        cmd = (request.param("cmd") or "").split(" ")
        cid = await self._container(pod, target)
        result = await while_connected(
            request.receive, partial(self.backend.runtime.exec_sync, cid, cmd, 0)
        )
        if result is None:
            log.v(3).info("client left; ExecSync cancelled", pod=target.pod, cmd=cmd)
            return Response(500, b"rpc error: code = Canceled desc = context canceled")
        if result.exit_code != 0:
            message = (
                f"command '{' '.join(cmd)}' exited with {result.exit_code}: "
                f"{result.stderr.decode(errors='replace')}"
            )
            return Response(500, message.encode())
        return Response(200, result.stdout + result.stderr, "application/json")


async def while_connected(receive: Receive | None, call: Callable[[], Awaitable[_T]]) -> _T | None:
    """``call()``'s result, or None when the client went away first and it was cancelled.

    Upstream's handler runs the call in the request's context, which Go cancels when the
    client disconnects (the runtime's ExecSync ends with it); the ASGI ``http.disconnect``
    is that signal here. Without ``receive`` the call simply runs to its end.
    """
    if receive is None:
        return await call()
    done: list[_T] = []

    async def work(scope: trio.CancelScope) -> None:
        done.append(await call())
        scope.cancel()

    async def watch(scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(work, nursery.cancel_scope)
        nursery.start_soon(watch, nursery.cancel_scope)
    return done[0] if done else None


class _NoPod(Exception):
    pass


class _OtherUid(Exception):
    pass
