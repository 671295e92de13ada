"""FakeRuntime: a real grpclib CRI server that keeps pods and containers in memory.

It speaks CRI v1 (both ``runtime.v1.RuntimeService`` and ``runtime.v1.ImageService``)
over a unix socket, so the kubelet's real clients talk to it exactly as to containerd.
It exists for deterministic fault-injection tests; it never replaces the containerd
tests.

In-process (the usual way; ``autojump_clock`` stays exact because the server runs on
the same trio-asyncio loop)::

    async with trio_asyncio.open_loop():
        fake = FakeRuntime()
        async with fake.serve(tmp_path / "cri.sock"):
            async with kubelet.cri.connect(fake.endpoint) as (runtime, images):
                ...

As a process (for running the ``kubelet`` binary against it)::

    python -m kubelet.testing.fakeruntime --listen unix:///tmp/fake.sock

It then writes reports on stdout, one JSON line each (``event``, ``running``: the RUNNING
containers, ``calls``: calls by RPC): on SIGUSR1, at exit, and with ``--report-running
N`` when a start makes N containers RUNNING (so a benchmark needs no CRI polling). With
``--no-streaming`` it serves CRI alone on a plain asyncio loop, cheaper per call than
trio-asyncio; Exec, Attach and PortForward then answer URLs that nothing serves.

What it models
--------------
* Sandboxes: READY after RunPodSandbox, NOTREADY after StopPodSandbox (which also kills
  their containers). IPs come from ``ip_pool`` (10.88.0.0/16 by default); a sandbox
  with host networking (``namespace_options.network == NODE``) has no IP. The sandbox
  image must be present.
* Containers: CREATED → RUNNING → EXITED with exit code, reason (Completed, Error,
  OOMKilled, StartError), created/started/finished times in ns; ``metadata.attempt``
  kept; names are reserved per sandbox like containerd. What a container does once
  started is a ``ContainerBehaviour`` chosen by ``behave(...)``: run until stopped
  (default), exit after N seconds with a code, be OOM-killed, ignore SIGTERM (so
  StopContainer waits its full timeout), take N seconds to stop, fail to start, write
  log lines.
* Images: a present set (busybox and pause by default). PullImage succeeds only for
  references in ``pullable`` (the node has no registry), failing otherwise the way
  containerd does (gRPC UNKNOWN, "failed to pull and unpack image ..."). An image may
  have a user (``add_image(ref, uid=1000)`` or ``username="app"``), reported by
  ImageStatus as containerd does; none means root.
* Runtime handlers: ``handlers`` (name → features; the default handler "" without
  user-namespace support) and ``features`` are what Status reports; RunPodSandbox with
  a handler not listed fails as containerd does ("failed to get sandbox runtime: no
  runtime for "x" is configured").
* Registry authentication: ``require_auth(repository, username, password)`` makes the
  images of a repository private (and pullable): PullImage then needs an AuthConfig
  with one of the accepted username/password pairs (or their base64 ``auth`` form),
  else fails as a registry's 401 does. ``pull_auths`` records, in order, the image and
  AuthConfig (None for an anonymous pull) of every PullImage; ``leak_credentials``
  makes the errors quote the password sent, like a careless runtime, so redaction can
  be tested.
* ExecSync: scripted with ``script_exec`` (exit code, stdout, stderr, latency, hang);
  a script slower than the request's timeout answers DEADLINE_EXCEEDED like containerd.
* CheckpointContainer: a running container's archive is a tar at the request's
  location holding ``config.dump`` (the container's id, name and image, as JSON), as
  CRI-O writes one; a container that is not running fails as CRI-O does.
* Logs: on start, a CRI-format log file at ``log_directory/log_path`` with the
  behaviour's lines (see ``kubelet.cri.logformat``).
* Filters on ListContainers / ListPodSandbox / the stats lists: id (or unique id
  prefix), state, sandbox id, label selector.

Fault injection
---------------
``fake.faults`` is a ``FaultPlan``: per-RPC error (any gRPC status), added latency,
hang until cancelled, fail the next N calls, crash the server when an RPC arrives.
``await fake.crash()`` / ``await fake.restart()`` take the whole server down (in-flight
calls break, the socket disappears) and bring it back with its state, as a containerd
restart would. ``exit_container(id, code)`` and ``oom_kill(id)`` end a container now.

Call log
--------
``fake.call_counts`` counts calls by RPC. ``fake.calls`` records every call in arrival
order (unless ``record_calls=False``, as in the process mode): RPC name, key arguments (ids,
names, timeouts, images), the Trio clock time it arrived and finished, and its
outcome ("ok", a gRPC status name, or "cancelled"). ``fake.rpcs()`` lists the names.
Same test, same result, every run: there is no randomness, ids are counters, time is
the Trio clock (timestamps are ``epoch`` + clock).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import hashlib
import ipaddress
import json
import logging
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from signal import SIGINT, SIGTERM, SIGUSR1
from typing import Any

import attrs
import trio
import trio_asyncio
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.protocol import H2Protocol
from grpclib.server import Server

from kubelet.cri import STDOUT, LimitedProtoCodec, api, socket_path, split_reference
from kubelet.cri.imageref import normalize
from kubelet.cri.logformat import format_line

from .fakecheckpoint import write_checkpoint
from .fakestreaming import FakeStreamingServer
from .faults import FaultPlan

log = logging.getLogger(__name__)

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
BUSYBOX_IMAGE = "docker.io/library/busybox:latest"
DEFAULT_IMAGES = (PAUSE_IMAGE, BUSYBOX_IMAGE)

IMAGE_FS_MOUNT = "/var/lib/fakeruntime"
"""the mountpoint ImageFsInfo names (tests script its size through the stats host)"""

RUNTIME_NAME = "fakeruntime"
RUNTIME_VERSION = "0.1.0"

CREATED = api.CONTAINER_CREATED
RUNNING = api.CONTAINER_RUNNING
EXITED = api.CONTAINER_EXITED
SANDBOX_READY = api.SANDBOX_READY
SANDBOX_NOTREADY = api.SANDBOX_NOTREADY


@attrs.frozen
class ContainerBehaviour:
    """What a started container does.

    ``exit_after``: seconds after start at which it exits with ``exit_code`` (None:
    runs until stopped). ``oom``: that exit is an OOM kill (137, OOMKilled).
    ``stop_takes``: seconds it needs to exit after SIGTERM; ``math.inf`` ignores SIGTERM,
    so StopContainer kills it at its timeout (exit 137). ``stop_exit_code``: exit code
    of a graceful stop. ``start_error``: StartContainer fails with this message (the
    container ends EXITED, 128, StartError). ``log_lines``: written to stdout at start.
    """

    exit_after: float | None = None
    exit_code: int = 0
    oom: bool = False
    stop_takes: float = 0.0
    stop_exit_code: int = 0
    start_error: str | None = None
    log_lines: tuple[str, ...] = ()


@attrs.frozen
class ExecResult:
    """A scripted ExecSync answer. ``takes``: seconds it runs; ``math.inf`` hangs."""

    exit_code: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    takes: float = 0.0


@attrs.define
class CallRecord:
    """One RPC as the fake saw it."""

    rpc: str
    args: dict[str, Any]
    time: float
    finished: float | None = None
    outcome: str = "pending"
    metadata: dict[str, str] = attrs.field(factory=dict)
    """The call's gRPC metadata as sent (``traceparent`` when the kubelet traces)."""


@attrs.define
class FakeSandbox:
    id: str
    config: api.PodSandboxConfig
    runtime_handler: str
    created_at: int
    ip: str
    state: api.PodSandboxState = SANDBOX_READY
    labels: dict[str, str] = attrs.field(init=False)
    """``config.labels`` as a dict: list filters read it for every sandbox (a protobuf map
    is slow to read, and the kubelet lists by pod UID at every sync)."""

    def __attrs_post_init__(self) -> None:
        self.labels = dict(self.config.labels)


@attrs.define
class FakeContainer:
    id: str
    sandbox_id: str
    config: api.ContainerConfig
    image_ref: str
    created_at: int
    behaviour: ContainerBehaviour
    log_path: str
    state: api.ContainerState = CREATED
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    resources: api.LinuxContainerResources | None = None
    exit_timer: asyncio.TimerHandle | None = None
    working_set: int | None = None
    """memory working set its stats report while running (None: none reported)"""
    rootfs_used: int | None = None
    """bytes of its writable layer its stats report (None: none reported)"""
    labels: dict[str, str] = attrs.field(init=False)
    """``config.labels`` as a dict, for the list filters (see ``FakeSandbox.labels``)."""

    def __attrs_post_init__(self) -> None:
        self.labels = dict(self.config.labels)


def _selected(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Every pair of ``selector`` is in ``labels`` (a set comparison done in C)."""
    return selector.items() <= labels.items()


POD_UID_LABEL = "io.kubernetes.pod.uid"


class _Index:
    """The ids of a table's items by one key, in the table's order: the kubelet lists one
    pod's sandboxes and containers by its UID label at every sync, and a scan of every
    item made each call O(pods) (a thousand in the ramp benchmark)."""

    def __init__(self) -> None:
        self.ids: dict[str | None, dict[str, None]] = {}
        self.size = 0

    def add(self, key: str | None, ident: str) -> None:
        self.ids.setdefault(key, {})[ident] = None
        self.size += 1

    def discard(self, key: str | None, ident: str) -> None:
        bucket = self.ids.get(key)
        if bucket is not None and ident in bucket:
            del bucket[ident]
            self.size -= 1
            if not bucket:
                del self.ids[key]

    def clear(self) -> None:
        self.ids.clear()
        self.size = 0

    def select(
        self, table: Mapping[str, Any], key: str | None, keyof: Callable[[Any], Any]
    ) -> list[Any]:
        """The items of ``table`` whose key is ``key``, in its order. Rebuilt first if the
        table was changed behind the index's back (its size differs)."""
        if self.size != len(table):
            self.clear()
            for ident, item in table.items():
                self.add(keyof(item), ident)
        return [table[i] for i in self.ids.get(key, ())]


@attrs.define
class _Matcher:
    container: str | None
    pod: str | None
    image: str | None
    value: Any

    def matches(self, c: FakeContainer | None, cmd: Iterable[str] = ()) -> bool:
        if c is None:
            return self.container is None and self.pod is None and self.image is None
        pod = c.config.labels.get("io.kubernetes.pod.name")
        return (
            (self.container is None or self.container == c.config.metadata.name)
            and (self.pod is None or self.pod == pod)
            and (self.image is None or normalize(self.image) == normalize(c.config.image.image))
        )


def _image_id(ref: str) -> str:
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


class _TrackedProtocol(H2Protocol):
    """H2Protocol that lets the fake abort its connections to simulate a crash."""

    registry: set[asyncio.BaseTransport]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.registry.add(transport)
        self._transport = transport
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.registry.discard(self._transport)
        super().connection_lost(exc)


class _FakeServer(Server):
    def __init__(self, handlers: list[Any], transports: set[asyncio.BaseTransport]) -> None:
        super().__init__(handlers, codec=LimitedProtoCodec())
        self._transports = transports

    def _protocol_factory(self) -> H2Protocol:
        proto = super()._protocol_factory()
        proto.__class__ = _TrackedProtocol
        proto.registry = self._transports  # type: ignore[attr-defined]
        return proto


class _Service:
    """A grpclib servable built from the proto's service descriptor."""

    def __init__(self, fake: FakeRuntime, service: str) -> None:
        self._fake = fake
        self._service = service

    def __mapping__(self) -> dict[str, Handler]:
        desc = api.DESCRIPTOR.services_by_name[self._service]
        mapping = {}
        for method in desc.methods:
            req_type = getattr(api, method.input_type.name)
            resp_type = getattr(api, method.output_type.name)
            mapping[f"/runtime.v1.{self._service}/{method.name}"] = Handler(
                self._handler(method.name), Cardinality.UNARY_UNARY, req_type, resp_type
            )
        return mapping

    def _handler(self, rpc: str) -> Callable[[Any], Any]:
        async def handle(stream: Any) -> None:
            request = await stream.recv_message()
            metadata = {k: v for k, v in stream.metadata.items() if isinstance(v, str)}
            response = await self._fake._dispatch(rpc, request, metadata)
            await stream.send_message(response)

        return handle


def _not_found(kind: str, ident: str) -> GRPCError:
    return GRPCError(
        Status.NOT_FOUND, f'an error occurred when try to find {kind} "{ident}": not found'
    )


def _repository(ref: str) -> str:
    """``registry.example/app:1`` → ``registry.example/app`` (fully qualified)."""
    registry, repo, _, _ = split_reference(ref)
    return f"{registry}/{repo}"


def _credentials_sent(auth: api.AuthConfig | None) -> tuple[str, str] | None:
    """The username and password of an AuthConfig, read as containerd does: the fields
    themselves, else the base64 ``auth`` field."""
    if auth is None:
        return None
    if auth.username:
        return auth.username, auth.password
    if auth.auth:
        try:
            user, _, password = base64.b64decode(auth.auth).decode().partition(":")
        except ValueError:
            return None
        return user, password
    return None


def _key_args(request: Any) -> dict[str, Any]:
    """The arguments worth asserting on: ids, names, timeouts, images, commands."""
    out: dict[str, Any] = {}
    for field in ("pod_sandbox_id", "container_id", "timeout"):
        if field in request.DESCRIPTOR.fields_by_name:
            out[field] = getattr(request, field)
    if "cmd" in request.DESCRIPTOR.fields_by_name:
        out["cmd"] = list(request.cmd)
    if "image" in request.DESCRIPTOR.fields_by_name and request.HasField("image"):
        out["image"] = request.image.image
    if "config" in request.DESCRIPTOR.fields_by_name and request.HasField("config"):
        meta = request.config.metadata
        out["name"] = meta.name
        out["attempt"] = meta.attempt
        labels = request.config.labels
        if "io.kubernetes.pod.name" in labels:
            out["pod"] = labels["io.kubernetes.pod.name"]
    return out


class FakeRuntime:
    """An in-memory CRI runtime served over grpclib. See the module docstring."""

    def __init__(
        self,
        *,
        images: Iterable[str] = DEFAULT_IMAGES,
        pullable: Iterable[str] = (),
        sandbox_image: str = PAUSE_IMAGE,
        ip_pool: str = "10.88.0.0/16",
        epoch: float | None = None,
        clock: Callable[[], float] = trio.current_time,
        record_calls: bool = True,
    ) -> None:
        self.faults = FaultPlan()
        self.calls: list[CallRecord] = []
        self.record_calls = record_calls
        """Append each call to ``calls`` (process mode turns it off: nobody can read it
        there, and recording costs every call its arguments' extraction)."""
        self.call_counts: collections.Counter[str] = collections.Counter()
        """Calls by RPC name, always counted (process mode reports them)."""
        self.on_running: Callable[[int], None] | None = None
        """Called with the number of RUNNING containers each time a start raises it."""
        self._running_count = 0
        self._clock = clock
        """Seconds, for timestamps and the call log: the Trio clock in-process (so
        ``autojump_clock`` stays exact); the process mode on plain asyncio passes
        ``time.monotonic``."""
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.containers: dict[str, FakeContainer] = {}
        self.images: dict[str, api.Image] = {}
        self.pullable = {normalize(i) for i in pullable}
        self.private: dict[str, set[tuple[str, str]]] = {}
        self.pull_auths: list[tuple[str, api.AuthConfig | None]] = []
        self.leak_credentials = False
        self.sandbox_image = normalize(sandbox_image)
        self.conditions: dict[str, tuple[bool, str, str]] = {
            "RuntimeReady": (True, "", ""),
            "NetworkReady": (True, "", ""),
        }
        self.pod_cidr = ""
        self.cgroup_driver: int | None = api.CGROUPFS
        """What RuntimeConfig reports (``api.SYSTEMD``/``api.CGROUPFS``); None: the RPC is
        Unimplemented, as on containerd before 2.0."""
        self.handlers: dict[str, api.RuntimeHandlerFeatures] = {"": api.RuntimeHandlerFeatures()}
        self.features = api.RuntimeFeatures()
        self.path: Path | None = None
        self._epoch = epoch
        self._ids = 0
        self._pool = ipaddress.ip_network(ip_pool)
        self._ips_in_use: set[str] = set()
        self._ip_floor = 0
        """Every pool address below this one is in use (or skipped): where a search for
        the lowest free one starts."""
        self._names: dict[str, str] = {}
        self._name_of: dict[str, str] = {}
        """``_names`` reversed: the name each sandbox or container id reserves."""
        self._sandboxes_by_uid = _Index()
        self._containers_by_uid = _Index()
        self._containers_by_sandbox = _Index()
        self._behaviours: list[_Matcher] = []
        self._execs: list[_Matcher] = []
        self._server: _FakeServer | None = None
        self._transports: set[asyncio.BaseTransport] = set()
        self.streaming = FakeStreamingServer()
        """Serves the URLs of Exec, Attach and PortForward while ``serve`` runs."""
        for ref in images:
            self.add_image(ref)

    # -- serving -----------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The ``unix://`` endpoint to hand to the kubelet's clients."""
        if self.path is None:
            raise RuntimeError("FakeRuntime is not serving")
        return f"unix://{self.path}"

    @property
    def serving(self) -> bool:
        return self._server is not None

    @contextlib.asynccontextmanager
    async def serve(self, where: str | os.PathLike[str]) -> AsyncIterator[FakeRuntime]:
        """Serve on a socket path (or ``unix://`` endpoint) for the duration of the block."""
        async with self.streaming.serve():
            await self.start(where)
            try:
                yield self
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await self.stop()

    async def start(self, where: str | os.PathLike[str] | None = None) -> None:
        """Start listening (again). Needs a running trio-asyncio loop."""
        if where is not None:
            text = os.fspath(where)
            self.path = Path(socket_path(text) if "://" in text else text)
        if self.path is None:
            raise ValueError("FakeRuntime.start needs a socket path the first time")
        if self._server is not None:
            return
        server = self._new_server()
        await trio_asyncio.aio_as_trio(server.start)(path=str(self.path))
        self._server = server

    def _new_server(self) -> _FakeServer:
        if self._epoch is None:
            self._epoch = time.time() - self._clock()
        assert self.path is not None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return _FakeServer(
            [_Service(self, "RuntimeService"), _Service(self, "ImageService")], self._transports
        )

    async def stop(self) -> None:
        """Stop gracefully: refuse new connections, cancel calls in flight."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        await trio_asyncio.aio_as_trio(server.wait_closed)()
        self._abort_connections()
        self._remove_socket()

    async def crash(self) -> None:
        """Die like a killed runtime: connections cut, calls in flight broken, socket gone.

        State (sandboxes, containers, images) survives, as containerd's does.
        """
        self._crash_now()
        await trio.lowlevel.checkpoint()

    async def restart(self) -> None:
        """Come back on the same socket with the same state."""
        await self.start()

    def wipe(self) -> None:
        """Forget every sandbox and container at once, as a node reboot or a containerd
        reset would (behind the kubelet's back; images stay)."""
        for c in self.containers.values():
            if c.exit_timer is not None:
                c.exit_timer.cancel()
        self.containers.clear()
        self.sandboxes.clear()
        self._running_count = 0
        self._names.clear()
        self._name_of.clear()
        self._sandboxes_by_uid.clear()
        self._containers_by_uid.clear()
        self._containers_by_sandbox.clear()
        self._ips_in_use.clear()
        self._ip_floor = 0

    def _crash_now(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self._abort_connections()
        self._remove_socket()

    def _abort_connections(self) -> None:
        for transport in list(self._transports):
            abort = getattr(transport, "abort", None)
            if abort is not None:
                abort()
        self._transports.clear()

    def _remove_socket(self) -> None:
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    # -- scripting ---------------------------------------------------------------------

    def behave(
        self,
        behaviour: ContainerBehaviour,
        *,
        container: str | None = None,
        pod: str | None = None,
        image: str | None = None,
    ) -> None:
        """Containers created from now on matching every given name/image get ``behaviour``.

        The newest matching rule wins.
        """
        self._behaviours.insert(0, _Matcher(container, pod, image, behaviour))

    def script_exec(
        self,
        result: ExecResult,
        *,
        cmd: Iterable[str] | None = None,
        container: str | None = None,
        pod: str | None = None,
    ) -> None:
        """ExecSync calls whose command starts with ``cmd`` (and match names) get ``result``.

        The newest matching script wins; without one, ExecSync exits 0 with no output.
        """
        prefix = list(cmd) if cmd is not None else None
        self._execs.insert(0, _Matcher(container, pod, None, (prefix, result)))

    def add_image(
        self, ref: str, size: int = 1_000_000, *, uid: int | None = None, username: str = ""
    ) -> api.Image:
        """Make ``ref`` present on the node; ``uid``/``username``: the image's user."""
        name = normalize(ref)
        image = api.Image(id=_image_id(name), repo_tags=[name], size=size, username=username)
        if uid is not None:
            image.uid.value = uid
        self.images[name] = image
        return image

    def require_auth(self, repository: str, username: str, password: str) -> None:
        """Images of ``repository`` (``registry.example/team/app``, any tag) can be pulled
        only with these credentials (call again to accept several pairs)."""
        self.private.setdefault(_repository(repository), set()).add((username, password))

    def set_condition(self, kind: str, status: bool, reason: str = "", message: str = "") -> None:
        """Set RuntimeReady / NetworkReady as reported by the Status RPC."""
        self.conditions[kind] = (status, reason, message)

    def exit_container(
        self, container_id: str, exit_code: int = 0, *, oom: bool = False, reason: str = ""
    ) -> None:
        """End a running container now (exit code, or an OOM kill)."""
        c = self._container(container_id)
        if c.state == RUNNING:
            self._finish(c, 137 if oom else exit_code, "OOMKilled" if oom else reason)

    def oom_kill(self, container_id: str) -> None:
        """End a running container as the kernel's OOM killer would."""
        self.exit_container(container_id, oom=True)

    def rpcs(self) -> list[str]:
        """RPC names in arrival order (handy for asserting teardown order)."""
        return [c.rpc for c in self.calls]

    def calls_of(self, rpc: str) -> list[CallRecord]:
        return [c for c in self.calls if c.rpc == rpc]

    def running(self) -> list[FakeContainer]:
        return [c for c in self.containers.values() if c.state == RUNNING]

    # -- dispatch ----------------------------------------------------------------------

    def now_ns(self) -> int:
        epoch = self._epoch if self._epoch is not None else 0.0
        return int((epoch + self._clock()) * 1e9)

    def _next_id(self) -> str:
        """64 hex digits like containerd's ids; distinct prefixes, same every run."""
        self._ids += 1
        return hashlib.sha256(f"fakeruntime-{self._ids}".encode()).hexdigest()

    async def _dispatch(
        self, rpc: str, request: Any, metadata: dict[str, str] | None = None
    ) -> Any:
        self.call_counts[rpc] += 1
        if not self.record_calls:
            return await self._call(rpc, request)
        record = CallRecord(rpc, _key_args(request), self._clock(), metadata=metadata or {})
        self.calls.append(record)
        try:
            result = await self._call(rpc, request)
        except asyncio.CancelledError:
            record.outcome = "cancelled"
            raise
        except GRPCError as exc:
            record.outcome = exc.status.name
            raise
        finally:
            record.finished = self._clock()
        record.outcome = "ok"
        return result

    async def _call(self, rpc: str, request: Any) -> Any:
        """The call's injected faults, then its handler."""
        if self.faults.rules:
            effect = self.faults.take(rpc)
            if effect.delay:
                await asyncio.sleep(effect.delay)
            if effect.hang:
                await asyncio.Event().wait()
            if effect.crash:
                self._crash_now()
                await asyncio.Event().wait()
            if effect.error is not None:
                raise GRPCError(effect.error, effect.message)
        result = getattr(self, f"_rpc_{rpc}")(request)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    # -- helpers -----------------------------------------------------------------------

    def _sandbox(self, ident: str) -> FakeSandbox:
        found: FakeSandbox = self._lookup(self.sandboxes, ident, "sandbox")
        return found

    def _container(self, ident: str) -> FakeContainer:
        found: FakeContainer = self._lookup(self.containers, ident, "container")
        return found

    @staticmethod
    def _lookup(table: Mapping[str, Any], ident: str, kind: str) -> Any:
        if ident in table:
            return table[ident]
        hits = [v for k, v in table.items() if ident and k.startswith(ident)]
        if len(hits) == 1:
            return hits[0]
        raise _not_found(kind, ident)

    def _resolve_image(self, spec: api.ImageSpec) -> api.Image | None:
        ref = spec.image
        for image in self.images.values():
            if image.id == ref or ref in image.repo_tags:
                return image
        try:
            return self.images.get(normalize(ref))
        except ValueError:
            return None

    def _first_tag(self, image_id: str) -> str:
        for image in self.images.values():
            if image.id == image_id and image.repo_tags:
                return image.repo_tags[0]
        return ""

    def _allocate_ip(self) -> str:
        """The lowest free address of the pool (``hosts()``; none ending in ".1")."""
        pool, make = self._pool, type(self._pool.network_address)
        if pool.num_addresses > 2:  # hosts(): all but the network (and v4 broadcast) address
            first = int(pool.network_address) + 1
            end = int(pool.broadcast_address) + (1 if pool.version == 6 else 0)
            hosts: Iterable[Any] = (make(n) for n in range(max(first, self._ip_floor), end))
        else:
            hosts = pool.hosts()
        for host in hosts:
            ip = str(host)
            if ip not in self._ips_in_use and not ip.endswith(".1"):
                self._ips_in_use.add(ip)
                self._ip_floor = int(host) + 1
                return ip
        raise GRPCError(
            Status.UNKNOWN, "failed to setup network for sandbox: no IP addresses available"
        )

    def _reserve(self, name: str, ident: str) -> None:
        self._names[name] = ident
        self._name_of[ident] = name

    def _release_name(self, ident: str) -> None:
        name = self._name_of.pop(ident, None)
        if name is not None and self._names.get(name) == ident:
            del self._names[name]

    def _sandbox_containers(self, sandbox_id: str) -> list[FakeContainer]:
        """The sandbox's containers, in creation order."""
        found: list[FakeContainer] = self._containers_by_sandbox.select(
            self.containers, sandbox_id, lambda x: x.sandbox_id
        )
        return found

    def _release_ip(self, ip: str) -> None:
        if ip in self._ips_in_use:
            self._ips_in_use.discard(ip)
            self._ip_floor = min(self._ip_floor, int(ipaddress.ip_address(ip)))

    def _finish(
        self, c: FakeContainer, exit_code: int, reason: str = "", message: str = ""
    ) -> None:
        if c.exit_timer is not None:
            c.exit_timer.cancel()
            c.exit_timer = None
        if c.state == RUNNING:
            self._running_count -= 1
        c.state = EXITED
        c.exit_code = exit_code
        c.finished_at = self.now_ns()
        c.reason = reason or ("Completed" if exit_code == 0 else "Error")
        c.message = message

    def _write_log(self, c: FakeContainer, lines: Iterable[str]) -> None:
        if not c.log_path:
            return
        if parent := os.path.dirname(c.log_path):  # os.path: pathlib's objects cost more
            os.makedirs(parent, exist_ok=True)
        with open(c.log_path, "ab") as fh:
            for line in lines:
                fh.write(format_line(self.now_ns(), STDOUT, line.encode()))

    # -- RuntimeService ----------------------------------------------------------------

    def _rpc_Version(self, req: api.VersionRequest) -> api.VersionResponse:
        return api.VersionResponse(
            version="0.1.0",
            runtime_name=RUNTIME_NAME,
            runtime_version=RUNTIME_VERSION,
            runtime_api_version="v1",
        )

    def _rpc_Status(self, req: api.StatusRequest) -> api.StatusResponse:
        conditions = [
            api.RuntimeCondition(type=kind, status=ok, reason=reason, message=message)
            for kind, (ok, reason, message) in self.conditions.items()
        ]
        return api.StatusResponse(
            status=api.RuntimeStatus(conditions=conditions),
            runtime_handlers=[
                api.RuntimeHandler(name=name, features=features)
                for name, features in self.handlers.items()
            ],
            features=self.features,
        )

    def _rpc_UpdateRuntimeConfig(
        self, req: api.UpdateRuntimeConfigRequest
    ) -> api.UpdateRuntimeConfigResponse:
        self.pod_cidr = req.runtime_config.network_config.pod_cidr
        return api.UpdateRuntimeConfigResponse()

    def _rpc_RuntimeConfig(self, req: api.RuntimeConfigRequest) -> api.RuntimeConfigResponse:
        if self.cgroup_driver is None:
            raise GRPCError(Status.UNIMPLEMENTED, "unknown method RuntimeConfig")
        linux = api.LinuxRuntimeConfiguration(cgroup_driver=self.cgroup_driver)  # type: ignore[arg-type]
        return api.RuntimeConfigResponse(linux=linux)

    def _rpc_RunPodSandbox(self, req: api.RunPodSandboxRequest) -> api.RunPodSandboxResponse:
        meta = req.config.metadata
        if not meta.name or not meta.uid or not meta.namespace:
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                "sandbox config must include metadata name, uid and namespace",
            )
        if req.runtime_handler and req.runtime_handler not in self.handlers:
            raise GRPCError(
                Status.UNKNOWN,
                f'failed to get sandbox runtime: no runtime for "{req.runtime_handler}" '
                "is configured",
            )
        if self.sandbox_image not in self.images:
            raise GRPCError(
                Status.UNKNOWN,
                f'failed to get sandbox image "{self.sandbox_image}": not found',
            )
        name = f"{meta.name}_{meta.namespace}_{meta.uid}_{meta.attempt}"
        sid = self._next_id()
        if name in self._names:
            raise GRPCError(
                Status.UNKNOWN,
                f'failed to reserve sandbox name "{name}": name "{name}" is reserved for '
                f'"{self._names[name]}"',
            )
        host_network = req.config.linux.security_context.namespace_options.network == api.NODE
        ip = "" if host_network else self._allocate_ip()
        self._reserve(name, sid)
        sb = FakeSandbox(sid, req.config, req.runtime_handler, self.now_ns(), ip)
        self.sandboxes[sid] = sb
        self._sandboxes_by_uid.add(sb.labels.get(POD_UID_LABEL), sid)
        return api.RunPodSandboxResponse(pod_sandbox_id=sid)

    def _rpc_StopPodSandbox(self, req: api.StopPodSandboxRequest) -> api.StopPodSandboxResponse:
        sb = self._sandbox(req.pod_sandbox_id)
        for c in self._sandbox_containers(sb.id):
            if c.state == RUNNING:
                self._finish(c, 137)
        sb.state = SANDBOX_NOTREADY
        self._release_ip(sb.ip)
        return api.StopPodSandboxResponse()

    def _rpc_RemovePodSandbox(
        self, req: api.RemovePodSandboxRequest
    ) -> api.RemovePodSandboxResponse:
        try:
            sb = self._sandbox(req.pod_sandbox_id)
        except GRPCError:
            return api.RemovePodSandboxResponse()  # already gone: success, like containerd
        for c in self._sandbox_containers(sb.id):
            self._remove_container(c)
        self._release_ip(sb.ip)
        self._release_name(sb.id)
        del self.sandboxes[sb.id]
        self._sandboxes_by_uid.discard(sb.labels.get(POD_UID_LABEL), sb.id)
        return api.RemovePodSandboxResponse()

    def _sandbox_status(self, sb: FakeSandbox) -> api.PodSandboxStatus:
        ns = sb.config.linux.security_context.namespace_options
        return api.PodSandboxStatus(
            id=sb.id,
            metadata=sb.config.metadata,
            state=sb.state,
            created_at=sb.created_at,
            network=api.PodSandboxNetworkStatus(ip=sb.ip if sb.state == SANDBOX_READY else ""),
            linux=api.LinuxPodSandboxStatus(
                namespaces=api.Namespace(
                    options=api.NamespaceOption(network=ns.network, pid=ns.pid, ipc=ns.ipc)
                )
            ),
            labels=sb.config.labels,
            annotations=sb.config.annotations,
            runtime_handler=sb.runtime_handler,
        )

    def _rpc_PodSandboxStatus(
        self, req: api.PodSandboxStatusRequest
    ) -> api.PodSandboxStatusResponse:
        sb = self._sandbox(req.pod_sandbox_id)
        return api.PodSandboxStatusResponse(
            status=self._sandbox_status(sb), timestamp=self.now_ns()
        )

    def _rpc_ListPodSandbox(self, req: api.ListPodSandboxRequest) -> api.ListPodSandboxResponse:
        f = req.filter
        items = []
        selector = dict(f.label_selector)
        want_id, state = f.id, f.state.state if f.HasField("state") else None
        if POD_UID_LABEL in selector:
            candidates: Iterable[FakeSandbox] = self._sandboxes_by_uid.select(
                self.sandboxes, selector[POD_UID_LABEL], lambda x: x.labels.get(POD_UID_LABEL)
            )
        else:
            candidates = self.sandboxes.values()
        for sb in candidates:
            if want_id and not sb.id.startswith(want_id):
                continue
            if state is not None and sb.state != state:
                continue
            if not _selected(sb.labels, selector):
                continue
            items.append(
                api.PodSandbox(
                    id=sb.id,
                    metadata=sb.config.metadata,
                    state=sb.state,
                    created_at=sb.created_at,
                    labels=sb.config.labels,
                    annotations=sb.config.annotations,
                    runtime_handler=sb.runtime_handler,
                )
            )
        return api.ListPodSandboxResponse(items=items)

    def _rpc_CreateContainer(self, req: api.CreateContainerRequest) -> api.CreateContainerResponse:
        sb = self._sandbox(req.pod_sandbox_id)
        meta = req.config.metadata
        if not meta.name:
            raise GRPCError(Status.INVALID_ARGUMENT, "container config must include metadata name")
        image = self._resolve_image(req.config.image)
        if image is None:
            raise GRPCError(
                Status.NOT_FOUND, f'failed to resolve image "{req.config.image.image}": not found'
            )
        smeta = sb.config.metadata
        name = f"{meta.name}_{smeta.name}_{smeta.namespace}_{smeta.uid}_{meta.attempt}"
        if name in self._names:
            raise GRPCError(
                Status.UNKNOWN,
                f'failed to reserve container name "{name}": name "{name}" is reserved for '
                f'"{self._names[name]}"',
            )
        cid = self._next_id()
        self._reserve(name, cid)
        log_path = ""
        if sb.config.log_directory and req.config.log_path:
            log_path = str(Path(sb.config.log_directory) / req.config.log_path)
        probe = FakeContainer(
            cid, sb.id, req.config, image.id, self.now_ns(), ContainerBehaviour(), log_path
        )
        for rule in self._behaviours:
            if rule.matches(probe):
                probe.behaviour = rule.value
                break
        if req.config.linux.HasField("resources"):
            probe.resources = req.config.linux.resources
        self.containers[cid] = probe
        self._containers_by_uid.add(probe.labels.get(POD_UID_LABEL), cid)
        self._containers_by_sandbox.add(sb.id, cid)
        return api.CreateContainerResponse(container_id=cid)

    def _rpc_StartContainer(self, req: api.StartContainerRequest) -> api.StartContainerResponse:
        c = self._container(req.container_id)
        if c.state != CREATED:
            raise GRPCError(
                Status.UNKNOWN,
                f"container {c.id} is in {api.ContainerState.Name(c.state)} state",
            )
        sb = self.sandboxes.get(c.sandbox_id)
        if sb is None or sb.state != SANDBOX_READY:
            raise GRPCError(Status.UNKNOWN, f"sandbox container {c.sandbox_id!r} is not running")
        b = c.behaviour
        if b.start_error is not None:
            c.started_at = 0
            self._finish(c, 128, "StartError", b.start_error)
            raise GRPCError(
                Status.UNKNOWN, f"failed to start containerd task {c.id!r}: {b.start_error}"
            )
        c.state = RUNNING
        self._running_count += 1
        c.started_at = self.now_ns()
        self._write_log(c, b.log_lines)
        if b.exit_after is not None:
            loop = asyncio.get_running_loop()
            code = 137 if b.oom else b.exit_code
            reason = "OOMKilled" if b.oom else ""
            c.exit_timer = loop.call_later(b.exit_after, self._finish, c, code, reason)
        if self.on_running is not None:
            self.on_running(self._running_count)
        return api.StartContainerResponse()

    async def _rpc_StopContainer(self, req: api.StopContainerRequest) -> api.StopContainerResponse:
        c = self._container(req.container_id)
        if c.state != RUNNING:
            return api.StopContainerResponse()
        b = c.behaviour
        if b.stop_takes < req.timeout:
            if b.stop_takes > 0:
                await asyncio.sleep(b.stop_takes)
            if c.state == RUNNING:
                self._finish(c, b.stop_exit_code)
        else:
            if req.timeout > 0:
                await asyncio.sleep(req.timeout)
            if c.state == RUNNING:
                self._finish(c, 137)
        return api.StopContainerResponse()

    def _remove_container(self, c: FakeContainer) -> None:
        if c.state == RUNNING:
            self._finish(c, 137)
        self._release_name(c.id)
        del self.containers[c.id]
        self._containers_by_uid.discard(c.labels.get(POD_UID_LABEL), c.id)
        self._containers_by_sandbox.discard(c.sandbox_id, c.id)

    def _rpc_RemoveContainer(self, req: api.RemoveContainerRequest) -> api.RemoveContainerResponse:
        try:
            c = self._container(req.container_id)
        except GRPCError:
            return api.RemoveContainerResponse()  # already gone: success, like containerd
        self._remove_container(c)
        return api.RemoveContainerResponse()

    def _rpc_ListContainers(self, req: api.ListContainersRequest) -> api.ListContainersResponse:
        f = req.filter
        out = []
        selector = dict(f.label_selector)
        want_id, want_sandbox = f.id, f.pod_sandbox_id
        state = f.state.state if f.HasField("state") else None
        if POD_UID_LABEL in selector:
            candidates: Iterable[FakeContainer] = self._containers_by_uid.select(
                self.containers, selector[POD_UID_LABEL], lambda x: x.labels.get(POD_UID_LABEL)
            )
        else:
            candidates = self.containers.values()
        for c in candidates:
            if want_id and not c.id.startswith(want_id):
                continue
            if state is not None and c.state != state:
                continue
            if want_sandbox and not c.sandbox_id.startswith(want_sandbox):
                continue
            if not _selected(c.labels, selector):
                continue
            out.append(
                api.Container(
                    id=c.id,
                    pod_sandbox_id=c.sandbox_id,
                    metadata=c.config.metadata,
                    image=c.config.image,
                    image_ref=c.image_ref,
                    state=c.state,
                    created_at=c.created_at,
                    labels=c.config.labels,
                    annotations=c.config.annotations,
                )
            )
        return api.ListContainersResponse(containers=out)

    def _rpc_ContainerStatus(self, req: api.ContainerStatusRequest) -> api.ContainerStatusResponse:
        c = self._container(req.container_id)
        status = api.ContainerStatus(
            id=c.id,
            metadata=c.config.metadata,
            state=c.state,
            created_at=c.created_at,
            started_at=c.started_at,
            finished_at=c.finished_at,
            exit_code=c.exit_code,
            # like containerd: the stored image's first tag, not the reference asked for
            image=api.ImageSpec(image=self._first_tag(c.image_ref) or c.config.image.image),
            image_ref=c.image_ref,
            reason=c.reason,
            message=c.message,
            labels=c.config.labels,
            annotations=c.config.annotations,
            mounts=c.config.mounts,
            log_path=c.log_path,
        )
        if c.resources is not None:
            status.resources.linux.CopyFrom(c.resources)
        status.user.linux.CopyFrom(self._process_user(c))
        return api.ContainerStatusResponse(status=status)

    def _process_user(self, c: FakeContainer) -> api.LinuxContainerUser:
        """Who the process runs as, as containerd reports it: runAsUser or the image's
        user (root by default), runAsGroup or 0, and its groups, the gid first."""
        sc = c.config.linux.security_context
        uid = sc.run_as_user.value if sc.HasField("run_as_user") else 0
        if not sc.HasField("run_as_user"):
            image = next((i for i in self.images.values() if i.id == c.image_ref), None)
            uid = image.uid.value if image is not None and image.HasField("uid") else 0
        gid = sc.run_as_group.value if sc.HasField("run_as_group") else 0
        groups = list(dict.fromkeys([gid, *sc.supplemental_groups]))
        return api.LinuxContainerUser(uid=uid, gid=gid, supplemental_groups=groups)

    def _rpc_UpdateContainerResources(
        self, req: api.UpdateContainerResourcesRequest
    ) -> api.UpdateContainerResourcesResponse:
        c = self._container(req.container_id)
        if c.state not in (CREATED, RUNNING):
            raise GRPCError(Status.UNKNOWN, f"container {c.id} is not running or created")
        c.resources = req.linux
        return api.UpdateContainerResourcesResponse()

    def _rpc_ReopenContainerLog(
        self, req: api.ReopenContainerLogRequest
    ) -> api.ReopenContainerLogResponse:
        c = self._container(req.container_id)
        if c.state != RUNNING:
            raise GRPCError(Status.UNKNOWN, "container is not running")
        if c.log_path:
            Path(c.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(c.log_path).touch()
        return api.ReopenContainerLogResponse()

    def _rpc_CheckpointContainer(
        self, req: api.CheckpointContainerRequest
    ) -> api.CheckpointContainerResponse:
        c = self._container(req.container_id)
        if c.state != RUNNING:
            raise GRPCError(Status.UNKNOWN, f"container {c.id} is not running")
        write_checkpoint(
            req.location, {"id": c.id, "name": c.config.metadata.name, "image": c.image_ref}
        )
        return api.CheckpointContainerResponse()

    async def _rpc_ExecSync(self, req: api.ExecSyncRequest) -> api.ExecSyncResponse:
        c = self._container(req.container_id)
        if c.state != RUNNING:
            raise GRPCError(
                Status.UNKNOWN,
                f"failed to exec in container: container is in "
                f"{api.ContainerState.Name(c.state)} state",
            )
        result = ExecResult()
        for rule in self._execs:
            prefix, scripted = rule.value
            if rule.matches(c) and (prefix is None or list(req.cmd[: len(prefix)]) == prefix):
                result = scripted
                break
        if req.timeout > 0 and result.takes >= req.timeout:
            await asyncio.sleep(req.timeout)
            raise GRPCError(
                Status.DEADLINE_EXCEEDED,
                f"failed to exec in container: timeout {req.timeout}s exceeded: "
                "context deadline exceeded",
            )
        if math.isinf(result.takes):
            await asyncio.Event().wait()
        if result.takes > 0:
            await asyncio.sleep(result.takes)
        return api.ExecSyncResponse(
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code
        )

    def _streaming_url(self, kind: str, request: Any) -> str:
        """A one-time URL of the streaming server (a dead one when it is not serving)."""
        if self.streaming.address is None:
            return f"http://127.0.0.1:0/{kind}/unserved"
        return self.streaming.register(kind, request)

    def _rpc_Exec(self, req: api.ExecRequest) -> api.ExecResponse:
        c = self._container(req.container_id)
        if not (req.stdin or req.stdout or req.stderr):
            raise GRPCError(Status.INVALID_ARGUMENT, "one of stdin, stdout, or stderr must be set")
        self._check_running(c)
        fixed = api.ExecRequest()
        fixed.CopyFrom(req)
        fixed.container_id = c.id
        return api.ExecResponse(url=self._streaming_url("exec", fixed))

    def _rpc_Attach(self, req: api.AttachRequest) -> api.AttachResponse:
        c = self._container(req.container_id)
        self._check_running(c)
        fixed = api.AttachRequest()
        fixed.CopyFrom(req)
        fixed.container_id = c.id
        return api.AttachResponse(url=self._streaming_url("attach", fixed))

    def _rpc_PortForward(self, req: api.PortForwardRequest) -> api.PortForwardResponse:
        sb = self._sandbox(req.pod_sandbox_id)
        fixed = api.PortForwardRequest(pod_sandbox_id=sb.id, port=list(req.port))
        return api.PortForwardResponse(url=self._streaming_url("portforward", fixed))

    @staticmethod
    def _check_running(c: FakeContainer) -> None:
        """containerd: exec and attach need a running container."""
        if c.state != RUNNING:
            raise GRPCError(
                Status.UNKNOWN,
                f"container {c.id} is not running: {api.ContainerState.Name(c.state)} state",
            )

    def _container_stats(self, c: FakeContainer) -> api.ContainerStats:
        now = self.now_ns()
        stats = api.ContainerStats(
            attributes=api.ContainerAttributes(
                id=c.id,
                metadata=c.config.metadata,
                labels=c.config.labels,
                annotations=c.config.annotations,
            ),
            cpu=api.CpuUsage(timestamp=now),
            memory=api.MemoryUsage(timestamp=now),
        )
        if c.working_set is not None and c.state == RUNNING:
            stats.memory.working_set_bytes.value = c.working_set
            stats.memory.usage_bytes.value = c.working_set
        if c.rootfs_used is not None:
            stats.writable_layer.CopyFrom(
                api.FilesystemUsage(
                    timestamp=now,
                    fs_id=api.FilesystemIdentifier(mountpoint=IMAGE_FS_MOUNT),
                    used_bytes=api.UInt64Value(value=c.rootfs_used),
                    inodes_used=api.UInt64Value(value=1),
                )
            )
        return stats

    def _rpc_ContainerStats(self, req: api.ContainerStatsRequest) -> api.ContainerStatsResponse:
        return api.ContainerStatsResponse(
            stats=self._container_stats(self._container(req.container_id))
        )

    def _rpc_ListContainerStats(
        self, req: api.ListContainerStatsRequest
    ) -> api.ListContainerStatsResponse:
        f = req.filter
        stats = [
            self._container_stats(c)
            for c in self.containers.values()
            if (not f.id or c.id.startswith(f.id))
            and (not f.pod_sandbox_id or c.sandbox_id.startswith(f.pod_sandbox_id))
            and all(c.config.labels.get(k) == v for k, v in f.label_selector.items())
        ]
        return api.ListContainerStatsResponse(stats=stats)

    def _sandbox_stats(self, sb: FakeSandbox) -> api.PodSandboxStats:
        now = self.now_ns()
        return api.PodSandboxStats(
            attributes=api.PodSandboxAttributes(
                id=sb.id,
                metadata=sb.config.metadata,
                labels=sb.config.labels,
                annotations=sb.config.annotations,
            ),
            linux=api.LinuxPodSandboxStats(
                cpu=api.CpuUsage(timestamp=now),
                memory=api.MemoryUsage(timestamp=now),
                containers=[self._container_stats(c) for c in self._sandbox_containers(sb.id)],
            ),
        )

    def _rpc_PodSandboxStats(self, req: api.PodSandboxStatsRequest) -> api.PodSandboxStatsResponse:
        return api.PodSandboxStatsResponse(
            stats=self._sandbox_stats(self._sandbox(req.pod_sandbox_id))
        )

    def _rpc_ListPodSandboxStats(
        self, req: api.ListPodSandboxStatsRequest
    ) -> api.ListPodSandboxStatsResponse:
        f = req.filter
        stats = [
            self._sandbox_stats(sb)
            for sb in self.sandboxes.values()
            if (not f.id or sb.id.startswith(f.id))
            and all(sb.config.labels.get(k) == v for k, v in f.label_selector.items())
        ]
        return api.ListPodSandboxStatsResponse(stats=stats)

    # -- ImageService ------------------------------------------------------------------

    def _rpc_ListImages(self, req: api.ListImagesRequest) -> api.ListImagesResponse:
        if req.filter.image.image:
            found = self._resolve_image(req.filter.image)
            return api.ListImagesResponse(images=[found] if found else [])
        return api.ListImagesResponse(images=list(self.images.values()))

    def _rpc_ImageStatus(self, req: api.ImageStatusRequest) -> api.ImageStatusResponse:
        found = self._resolve_image(req.image)
        return api.ImageStatusResponse(image=found) if found else api.ImageStatusResponse()

    def _rpc_PullImage(self, req: api.PullImageRequest) -> api.PullImageResponse:
        ref = req.image.image
        try:
            name = normalize(ref)
        except ValueError as exc:
            raise GRPCError(
                Status.UNKNOWN, f'failed to pull and unpack image "{ref}": {exc}'
            ) from exc
        auth = req.auth if req.HasField("auth") else None
        self.pull_auths.append((ref, auth))
        accepted = self.private.get(_repository(name))
        if accepted is not None:
            sent = _credentials_sent(auth)
            if sent not in accepted:
                leak = f" (sent password {sent[1]!r})" if self.leak_credentials and sent else ""
                raise GRPCError(
                    Status.UNKNOWN,
                    f'failed to pull and unpack image "{name}": failed to resolve reference '
                    f'"{name}": pull access denied, repository does not exist or may require '
                    f"authorization: server message: 401 Unauthorized{leak}",
                )
        elif name not in self.pullable:
            host = name.split("/", 1)[0]
            host = "registry-1.docker.io" if host == "docker.io" else host
            raise GRPCError(
                Status.UNKNOWN,
                f'failed to pull and unpack image "{name}": failed to resolve reference '
                f'"{name}": failed to do request: Head "https://{host}/v2/": dial tcp: '
                f"lookup {host}: no such host",
            )
        image = self.images.get(name) or self.add_image(name)
        return api.PullImageResponse(image_ref=image.id)

    def _rpc_RemoveImage(self, req: api.RemoveImageRequest) -> api.RemoveImageResponse:
        found = self._resolve_image(req.image)
        if found is not None:
            self.images = {k: v for k, v in self.images.items() if v.id != found.id}
        return api.RemoveImageResponse()

    def _rpc_ImageFsInfo(self, req: api.ImageFsInfoRequest) -> api.ImageFsInfoResponse:
        used = sum(i.size for i in self.images.values())
        usage = api.FilesystemUsage(
            timestamp=self.now_ns(),
            fs_id=api.FilesystemIdentifier(mountpoint=IMAGE_FS_MOUNT),
            used_bytes=api.UInt64Value(value=used),
            inodes_used=api.UInt64Value(value=len(self.images)),
        )
        return api.ImageFsInfoResponse(image_filesystems=[usage], container_filesystems=[usage])


# -- process mode ------------------------------------------------------------------------


def _report(fake: FakeRuntime, event: str) -> None:
    """One JSON line on stdout: the event, the RUNNING containers and the calls by RPC so
    far. A benchmark reads these instead of asking over CRI (its own calls would count,
    and cost both processes CPU)."""
    line = {"event": event, "running": fake._running_count, "calls": dict(fake.call_counts)}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _process_fake(args: argparse.Namespace, clock: Callable[[], float]) -> FakeRuntime:
    fake = FakeRuntime(
        images=args.image or DEFAULT_IMAGES, pullable=args.pullable, clock=clock, record_calls=False
    )
    target = args.report_running
    if target is not None:

        def on_running(count: int) -> None:
            if count == target:
                _report(fake, "running")

        fake.on_running = on_running
    return fake


async def _serve_forever(args: argparse.Namespace) -> None:
    async with trio_asyncio.open_loop():
        fake = _process_fake(args, trio.current_time)
        with trio.open_signal_receiver(SIGINT, SIGTERM, SIGUSR1) as signals:
            async with fake.serve(args.listen):
                log.info("fakeruntime serving on %s", fake.endpoint)
                async for signum in signals:
                    if signum != SIGUSR1:
                        break
                    _report(fake, "usr1")
        _report(fake, "exit")


async def _serve_plain(args: argparse.Namespace) -> None:
    """CRI alone on a plain asyncio loop: no trio scheduler under every asyncio callback."""
    fake = _process_fake(args, time.monotonic)
    fake.path = Path(socket_path(args.listen) if "://" in args.listen else args.listen)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(SIGINT, done.set)
    loop.add_signal_handler(SIGTERM, done.set)
    loop.add_signal_handler(SIGUSR1, _report, fake, "usr1")
    server = fake._new_server()
    await server.start(path=str(fake.path))
    fake._server = server
    log.info("fakeruntime serving on %s (no streaming server)", fake.endpoint)
    await done.wait()
    fake._server = None
    server.close()
    await server.wait_closed()
    fake._abort_connections()
    fake._remove_socket()
    _report(fake, "exit")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m kubelet.testing.fakeruntime",
        description="Serve an in-memory CRI runtime on a unix socket until SIGTERM/SIGINT. "
        "Reports on stdout as JSON lines (the RUNNING containers and the calls by RPC): "
        "on SIGUSR1, at exit, and with --report-running.",
    )
    parser.add_argument("--listen", required=True, help="endpoint, e.g. unix:///tmp/fake.sock")
    parser.add_argument(
        "--image", action="append", default=[], help="an image present at start (repeatable)"
    )
    parser.add_argument(
        "--pullable", action="append", default=[], help="an image PullImage may fetch (repeatable)"
    )
    parser.add_argument(
        "--report-running",
        type=int,
        metavar="N",
        help="report when a start makes N containers RUNNING",
    )
    parser.add_argument(
        "--no-streaming",
        action="store_true",
        help="serve CRI alone on a plain asyncio loop, cheaper per call (Exec, Attach and "
        "PortForward answer URLs that nothing serves)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.no_streaming:
        # trio_asyncio's policy (imported with kubelet.cri) would hand asyncio.run its loop
        with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
            runner.run(_serve_plain(args))
    else:
        trio.run(_serve_forever, args)


if __name__ == "__main__":
    main()
